"""./bulk move-base: move the recorded base (patches/BASE) to another
Debian linux-source-6.1, by default the newest the archive serves.

In order, each step stopping the command when it fails:
 1. the old base's mm/, net/ and include/linux/slab.h are kept aside from
    build/linux's 'base' tag;
 2. the new package is installed and unpacked as the new base;
 3. what changed between the two bases under those paths is written to
    build/move-base/OLD..NEW.diff, and counted;
 4. the series is applied with git am (the first patch that does not
    apply is named);
 5. with --check, the command ends here and patches/BASE is untouched;
 6. patches/ is re-exported on the new base, patches/BASE records it,
    ./bulk build-each builds every patch (results/per-patch/build-each.*, the
    record the test command checks) and the test command runs.
A failure after step 6 began leaves patches/BASE and patches/ moved (the
end line says so, and how to go back: git checkout patches/ results/).
"""
import argparse
import os
import re
import shutil
import subprocess

import base
import build_each
import export
import gitrepo
import packages
import test
import tree
from common import BASE_TAG, BUILD, TREE, StageError, rel, say

WORK = os.path.join(BUILD, "move-base")
# The paths whose changes between two bases can touch the series.
WATCHED = ("mm", "net", "include/linux/slab.h")


def keep_base_files(dest: str) -> None:
    """The WATCHED paths of build/linux's base commit, under dest."""
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    have = gitrepo.git(TREE, "move-base", "ls-tree", "--name-only", BASE_TAG,
                       "--", *WATCHED).split()
    if not have:
        return
    archive = subprocess.run(["git", "archive", BASE_TAG, "--"] + have,
                             cwd=TREE, capture_output=True)
    if archive.returncode != 0:
        raise StageError("move-base", "git archive of build/linux's base failed",
                         detail=archive.stderr.decode(errors="replace"))
    subprocess.run(["tar", "-x", "-C", dest], input=archive.stdout, check=True)


def diff_bases(old_dir: str, new_dir: str, out: str) -> tuple[int, list[str]]:
    """diff -ruN of the two kept trees into out: (changed lines, files)."""
    p = subprocess.run(["diff", "-ruN", "old", "new"], cwd=os.path.dirname(old_dir),
                       capture_output=True, text=True)
    if p.returncode > 1:
        raise StageError("move-base", "diff failed: %s" % p.stderr.strip())
    with open(out, "w") as f:
        f.write(p.stdout)
    # '+++ new/PATH<TAB>date'
    files = [l[4:].split("\t")[0].split("/", 1)[1]
             for l in p.stdout.splitlines() if l.startswith("+++ ")]
    changed = sum(1 for l in p.stdout.splitlines()
                  if l[:1] in "+-" and not l.startswith(("+++ ", "--- ")))
    return changed, files


# A Debian version: [epoch:]upstream[-revision], the upstream a digit first.
DEBIAN_VERSION = re.compile(r"(\d+:)?\d[A-Za-z0-9.+~-]*")


def check_args(args: argparse.Namespace) -> None:
    """--to, before anything runs: a Debian version, not the recorded one."""
    if args.to is None:
        return
    if not DEBIAN_VERSION.fullmatch(args.to):
        raise StageError("move-base", "--to %s: not a Debian version (such "
                         "as 6.1.192-3)" % args.to)
    if args.to == packages.recorded_version():
        raise StageError("move-base", "--to %s: patches/BASE already records "
                         "it; nothing to move" % args.to)


def target_version(wanted: str | None, served: list[str]) -> str:
    if not served:
        raise StageError("move-base", "apt-cache madison %s lists no version"
                         % packages.SOURCE_PACKAGE)
    if wanted and wanted not in served:
        raise StageError("move-base", "Debian does not serve %s %s; it serves %s"
                         % (packages.SOURCE_PACKAGE, wanted, ", ".join(served)))
    return wanted or served[0]


def main(args: argparse.Namespace) -> int:
    recorded = packages.recorded_version()
    new = target_version(args.to, packages.served_sources("move-base"))
    if new == recorded:
        say("move-base: patches/BASE already records %s %s; nothing to do"
            % (packages.SOURCE_PACKAGE, new))
        return 0
    # 1. The old base as patches/BASE records it.
    packages.setup()
    old_served = not base.create().drift
    old_dir, new_dir = os.path.join(WORK, "old"), os.path.join(WORK, "new")
    if old_served:
        keep_base_files(old_dir)
    # 2. The new base.
    packages.apt_install(["%s=%s" % (packages.SOURCE_PACKAGE, new)], "move-base")
    base.create()
    keep_base_files(new_dir)
    # 3. What changed where the series can see it.
    if old_served:
        out = os.path.join(WORK, "%s..%s.diff" % (recorded, new))
        changed, files = diff_bases(old_dir, new_dir, out)
        say("move-base: %s -> %s: %d changed line(s) under %s%s; %s" % (
            recorded, new, changed, ", ".join(WATCHED),
            (" in " + ", ".join(files)) if files else "", rel(out)))
    else:
        say("move-base: Debian no longer serves %s: no diff of the two bases"
            % recorded)
    # 4. Does the series apply?
    tree.create()
    if args.check:
        say("move-base: the series applies to %s; patches/BASE still records "
            "%s (--check); ./bulk setup puts %s back" % (new, recorded, recorded))
        return 0
    # 6. Move the record, then prove it.
    export.export()
    base.record()
    say("move-base: patches/ and patches/BASE now on %s; building every "
        "patch (./bulk build-each --record), then ./bulk test" % new)
    failed = build_each.main(record=True) or test.main("")
    if failed:
        say("move-base: FAILED on %s: patches/ and patches/BASE are moved, "
            "the record is not proven; fix the series, or go back with "
            "'git checkout patches/ results/ && ./bulk setup'" % new)
        return 1
    say("move-base: %s -> %s done: commit patches/ and results/" % (recorded, new))
    return 0
