"""./bulk bench-prev: the series against an earlier posting of it.

The earlier posting is the patches/ directory of a commit of this
repository (--rev REV).  Its patches are applied with git am to the base
in build/prev/linux, a worktree of build/linux whose O= dirs sit in
build/prev/o (laid out as the bisect worktree, so that ccache shares
objects with the other trees); then, as in build/linux-base, one commit
brings the benchmark module to its source in the series (build/linux
HEAD).  Base, the earlier posting and the series are thus measured with
one module, each kernel booted in exact mode.

Writes bench-prev-<rev>-<allocs>.md and .json under build/results/per-patch/
(results/per-patch/ with --record): per benchmark table
and variant (bulk call and loop) the three kernels side by side, and the
rows where the series costs more than the earlier posting by more than
WORSE_THRESHOLD.  A posting made for another base is refused: the
comparison needs one base.
"""
import argparse
import os
import re
import tempfile
import time
from typing import Any

import base
import basetree
import bench_each
import gitrepo
import kbuild
import measure
import record as records
import registry
import tables
from benchparse import Run
from common import (BASE_TAG, BASE_FILE, PREV_TREE, REPO, TREE,
                    StageError, capture, log_path, parse_kv, read_kv, rel,
                    run, say, write_kv)

STEP = "bench-prev"
ALLOCS = registry.ALLOCATORS
TREE_NAME = "prev"
# A row is worse when the series costs more than the earlier posting by
# more than this fraction (the review's "no row worse by more than 2%").
WORSE_THRESHOLD = 0.02
# What build/prev/linux was made from, so that a second run reuses it.
STATE = os.path.join(os.path.dirname(PREV_TREE), "posting.stamp")
BASE_KEYS = ("VERSION", "TARBALL_SHA256", "BASE_COMMIT")
# The patch files of a posting, as gitrepo.patch_files() takes them.
PATCH_NAME = re.compile(r"^(?!0000-)[0-9]{4}-.*\.patch$")


def resolve(rev: str) -> str:
    """The full commit id of @rev in this repository."""
    try:
        return capture(["git", "rev-parse", "--verify", "--quiet",
                        rev + "^{commit}"], STEP, cwd=REPO).strip()
    except StageError:
        raise StageError(STEP, "--rev %s: no such commit in this repository "
                         "(git log -- patches/ lists the postings)" % rev) \
            from None


def show(commit: str, path: str) -> str:
    return capture(["git", "show", "%s:%s" % (commit, path)], STEP, cwd=REPO)


def posting(commit: str) -> list[tuple[str, str]]:
    """(file name, text) of the commit's patches/, cover letter excluded,
    in order."""
    names = capture(["git", "ls-tree", "--name-only", commit, "patches/"],
                    STEP, cwd=REPO).split()
    files = sorted(os.path.basename(n) for n in names
                   if PATCH_NAME.match(os.path.basename(n)))
    if not files:
        raise StageError(STEP, "commit %s has no patches/NNNN-*.patch"
                         % commit[:12])
    return [(f, show(commit, "patches/" + f)) for f in files]


def check_base(commit: str) -> None:
    """The posting must have been made for the base the series has."""
    try:
        theirs = parse_kv(show(commit, "patches/BASE"))
    except StageError:
        raise StageError(STEP, "commit %s has no patches/BASE: its base is "
                         "not known" % commit[:12]) from None
    ours = read_kv(BASE_FILE)
    diff = ["%s %s there, %s here" % (k, theirs.get(k, "(none)"),
                                      ours.get(k, "(none)"))
            for k in BASE_KEYS if theirs.get(k) != ours.get(k)]
    if diff:
        raise StageError(STEP, "the posting at %s was made for another base "
                         "than patches/BASE; a comparison needs one base"
                         % commit[:12], detail="\n".join(diff))


def is_current(commit: str, module: str) -> bool:
    """build/prev/linux is the posting at @commit with @module, clean."""
    if not os.path.exists(STATE) or \
            not os.path.isfile(os.path.join(PREV_TREE, ".git")):
        return False
    kv = read_kv(STATE)
    head = gitrepo.git(PREV_TREE, STEP, "rev-parse", "HEAD").strip()
    return (kv.get("POSTING") == commit and kv.get("HEAD") == head
            and basetree.show(PREV_TREE, "HEAD") == module
            and not gitrepo.git(PREV_TREE, STEP, "status", "--porcelain",
                                "--ignored").strip())


def make_tree(commit: str) -> str:
    """build/prev/linux = base + the posting at @commit + the series'
    benchmark module; reused when it already is that."""
    module = basetree.show(TREE, "HEAD")
    if not module:
        raise StageError(STEP, "%s is not in build/linux HEAD: the series "
                         "has no benchmark module to measure with"
                         % measure.BENCH_FILE)
    gitrepo.worktree(TREE, PREV_TREE, STEP)
    if is_current(commit, module):
        say("bench-prev: %s already is the posting at %s" % (
            rel(PREV_TREE), commit[:12]))
        return PREV_TREE
    if os.path.exists(STATE):
        os.remove(STATE)
    log = log_path("tree-prev.log")
    open(log, "w").close()
    patches = posting(commit)
    if gitrepo.am_in_progress(PREV_TREE, STEP):
        gitrepo.git(PREV_TREE, STEP, "am", "--abort")
    gitrepo.checkout(PREV_TREE, BASE_TAG, STEP)
    gitrepo.git(PREV_TREE, STEP, "clean", "-q", "-fdx")
    # An interrupt or a failed patch leaves no git am half done.
    with tempfile.TemporaryDirectory() as tmp, \
            gitrepo.kept_as_is(PREV_TREE, STEP):
        for name, text in patches:
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            try:
                gitrepo.git(PREV_TREE, STEP, "am", "-q", path)
            except StageError as e:
                with open(log, "a") as out:
                    out.write("git am %s: %s\n" % (name, e))
                raise StageError(STEP, "the posting at %s: %s does not apply "
                                 "to base" % (commit[:12], name), log) from None
    if not basetree.show(PREV_TREE, "HEAD"):
        raise StageError(STEP, "the posting at %s has no %s: its kernel "
                         "cannot load the benchmark module (Kconfig and "
                         "Makefile come with that file's patch)" % (
                             commit[:12], measure.BENCH_FILE))
    if basetree.show(PREV_TREE, "HEAD") != module:
        with open(os.path.join(PREV_TREE, measure.BENCH_FILE), "w") as f:
            f.write(module)
        # Fixed identity and date, as build/linux-base's: the same
        # posting and module give the same commit id.
        run(["git", "commit", "-q", "-a", "-m",
             "%s as in the series (build/linux HEAD)" % measure.BENCH_FILE],
            STEP, log, cwd=PREV_TREE, env=base.BASE_ENV)
    write_kv(STATE, {"POSTING": commit, "HEAD": gitrepo.git(
        PREV_TREE, STEP, "rev-parse", "HEAD").strip()},
        "written by ./bulk bench-prev: the posting build/prev/linux holds")
    say("bench-prev: %s = base + the %d patches of %s + the series' module"
        % (rel(PREV_TREE), len(patches), commit[:12]))
    return PREV_TREE


KERNELS = (("base", measure.BASE_TREE), ("prev", TREE_NAME),
           ("series", "linux"))


def rows(spec: tables.Spec, variant: str,
         runs: dict[str, Run]) -> list[tuple[int, dict[str, float]]]:
    """(key, {kernel: instructions per object}) of one table variant."""
    per = {k: bench_each.values(runs[k], spec, variant) for k, _ in KERNELS}
    keys = sorted(set().union(*per.values()))
    return [(key, {k: per[k][key] for k, _ in KERNELS if key in per[k]})
            for key in keys]


def ratio(a: float | None, b: float | None) -> str:
    return "%.3f" % (a / b) if a is not None and b else "-"


def fmt(v: float | None) -> str:
    return "-" if v is None else "%.1f" % v


def worse(runs: dict[str, Run], tests: str,
          threshold: float = WORSE_THRESHOLD) -> list[tuple[str, str, int,
                                                             float, float]]:
    """(test, variant, key, prev, series) where series > prev * (1 +
    @threshold)."""
    out = []
    for spec, variant in variants(tests):
        for key, v in rows(spec, variant, runs):
            p, s = v.get("prev"), v.get("series")
            if p and s is not None and s > p * (1 + threshold):
                out.append((spec.test, variant, key, p, s))
    return out


def variants(tests: str) -> list[tuple[tables.Spec, str]]:
    out, seen = [], set()
    for spec in bench_each.specs(tests):
        for variant in (spec.bulk, spec.loop):
            if variant is not None and (spec.test, variant) not in seen:
                seen.add((spec.test, variant))
                out.append((spec, variant))
    return out


def markdown(command: str, commit: str, subject: str, tests: str,
             data: dict[str, dict[str, Run]]) -> str:
    rev = commit[:7]
    out = ["# Benchmark: the series against an earlier posting (%s)" % rev, "",
           "Command: `%s`" % command, "",
           "Kernels: *base* = 6.1 plus the benchmark patch (build/linux-base); "
           "*%s* = 6.1 plus the patches/ of this repository's commit %s "
           "(\"%s\"), built in build/prev/linux; *series* = all of patches/. "
           "All three run the series' benchmark module. Exact mode: raw "
           "**instructions per object**, one boot per kernel." % (
               rev, commit[:12], subject), ""]
    for alloc, runs in data.items():
        bad = worse(runs, tests)
        out += ["## %s" % alloc.upper(), "",
                "Rows where the series costs more than %s by more than "
                "%.0f%%: %d." % (rev, 100 * WORSE_THRESHOLD, len(bad)), ""]
        if bad:
            out += ["| test | variant | N | %s | series | series/%s |" % (
                rev, rev), "|---|---|---:|---:|---:|---:|"]
            out += ["| %s | %s | %d | %.1f | %.1f | %.3f |" % (
                t, v, k, p, s, s / p) for t, v, k, p, s in bad]
            out.append("")
        for spec, variant in variants(tests):
            rs = rows(spec, variant, runs)
            if not rs:
                continue
            what = "bulk call" if variant == spec.bulk else "one-at-a-time loop"
            out += ["### %s test %s: %s: %s (%s)" % (
                alloc.upper(), spec.test, spec.title, what, variant), "",
                "| %s | base | %s | series | %s/base | series/base | "
                "series/%s |" % (spec.key, rev, rev, rev),
                "|---:|---:|---:|---:|---:|---:|---:|"]
            for key, v in rs:
                b, p, s = v.get("base"), v.get("prev"), v.get("series")
                out.append("| %d | %s | %s | %s | %s | %s | %s |" % (
                    key, fmt(b), fmt(p), fmt(s), ratio(p, b), ratio(s, b),
                    ratio(s, p)))
            out.append("")
    return "\n".join(out)


def out_name(commit: str, allocs: list[str], record: bool = False) -> str:
    return os.path.join(records.folder("per-patch", record), "bench-prev-%s-%s"
                        % (commit[:7], "-".join(allocs)))


def write(command: str, commit: str, subject: str, tests: str,
          data: dict[str, dict[str, Run]], allocs: list[str],
          record: bool = False) -> str:
    name = out_name(commit, allocs, record)
    st = records.stamp()
    obj: dict[str, Any] = {
        "command": command, "posting": commit, "subject": subject,
        "tests": tests, "threshold": WORSE_THRESHOLD,
        "worse": {a: [{"test": t, "variant": v, "key": k, "prev": p,
                       "series": s} for t, v, k, p, s in worse(runs, tests)]
                  for a, runs in data.items()},
        "runs": {a: {k: r.to_json() for k, r in runs.items()}
                 for a, runs in data.items()}}
    records.write_json(name + ".json", obj, st)
    return records.write_markdown(name + ".md", markdown(
        command, commit, subject, tests, data), st)


def check_args(args: argparse.Namespace) -> tuple[list[str], str]:
    allocs = [a for a in args.alloc.split(",") if a]
    if not allocs or any(a not in ALLOCS for a in allocs) \
            or len(set(allocs)) != len(allocs):
        raise StageError(STEP, "--alloc takes a comma list of %s; got '%s'"
                         % (",".join(ALLOCS), args.alloc))
    tests = args.tests.replace(",", "")
    if not tests or any(t not in bench_each.TESTS for t in tests) \
            or len(set(tests)) != len(tests):
        raise StageError(STEP, "--tests takes letters among %s (exact mode "
                         "only); got '%s'" % (bench_each.TESTS, args.tests))
    if not args.rev:
        raise StageError(STEP, "--rev REV: name the commit of this "
                         "repository whose patches/ is the earlier posting")
    return allocs, "".join(sorted(tests))


def main(args: argparse.Namespace) -> int:
    allocs, tests = check_args(args)
    commit = resolve(args.rev)
    check_base(commit)
    subject = capture(["git", "log", "-1", "--format=%s", commit], STEP,
                      cwd=REPO).strip()
    start = time.time()
    basetree.prepare(STEP)
    make_tree(commit)
    # The commit id, not --rev as typed: HEAD~3 names another commit later.
    command = "./bulk bench-prev --rev %s --alloc %s --tests %s" % (
        commit[:12], ",".join(allocs), tests)
    data: dict[str, dict[str, Run]] = {}
    for alloc in allocs:
        data[alloc] = {}
        for label, tr in KERNELS:
            kbuild.build(alloc, tr)
            # The posting's boot logs name it: another --rev keeps its own.
            data[alloc][label] = measure.run_bench(
                alloc, tr, tests, False,
                suffix="-" + commit[:7] if tr == TREE_NAME else "")
    md = write(command, commit, subject, tests, data, allocs, args.record)
    for alloc in allocs:
        say("bench-prev: %s: %d row(s) worse than %s by more than %.0f%%"
            % (alloc, len(worse(data[alloc], tests)), commit[:7],
               100 * WORSE_THRESHOLD))
    say("bench-prev: %s written, in %s; done in %dm%02ds" % (
        rel(md), records.where(args.record),
        *divmod(int(time.time() - start), 60)))
    return 0
