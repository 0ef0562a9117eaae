"""The test command (./bulk test; .ci/run calls it).

Steps, each reported as PASS/FAIL/SKIP with the log to read:
  setup      apt packages present
  unit       the harness's own unit tests (tests/)
  base       the installed linux-source-6.1 is the recorded one (drift: say so)
  apply      build/linux = base + git am patches/
  checkpatch scripts/checkpatch.pl --strict on every patch: 0/0/0
  bisect     every patch builds on SLUB; patches touching code shared with
             SLAB/SLOB build there too; the full series builds on all three
  debug      the full series builds with the debug configs
  kunit      KUnit suites (kunit.py parse) on SLUB, SLAB, SLOB and variants
  boot       smoke boot in exact and smp mode
  bench      the benchmark module runs in quick mode and its output parses
Ends with one line 'N passed, N failed, N skipped'.
"""
import contextlib
import os
import subprocess
import time
import unittest

from common import REPO, StageError, TREE, info, log_path

GROUPS = ["setup", "unit", "base", "apply", "checkpatch", "bisect", "debug",
          "kunit", "boot", "bench"]
# Files private to one allocator: a patch touching only these (and docs)
# need not be built on the other allocators' configs.
PRIVATE = {
    "slub": ("mm/slub.c", "include/linux/slub_def.h", "lib/slub_kunit.c"),
    "slab": ("mm/slab.c", "include/linux/slab_def.h"),
    "slob": ("mm/slob.c",),
}
DOC_PREFIXES = ("Documentation/", "MAINTAINERS")
# KUnit runs: (config, mode, extra kernel command line).  init_on_free
# gets runs of its own: init_on_alloc would zero what it failed to wipe,
# and slab poisoning (slub_debug=P) opts caches out of it.  KASAN prints
# only its first report unless kasan_multi_shot is given, and the contract
# suite provokes one (an expected double free): without it, a real report
# after that one would go unseen.
KUNIT_RUNS = [
    ("slub", "exact", ""),
    ("slub", "exact", "slub_debug=FZPU"),
    ("slub", "exact", "init_on_alloc=1"),
    ("slub", "exact", "init_on_free=1"),
    ("slub", "smp", ""),
    ("slub-debug", "exact", "harness.cgroup=kunit kasan_multi_shot"),
    ("slab", "exact", ""),
    ("slab", "exact", "init_on_alloc=1"),
    ("slab", "exact", "init_on_free=1"),
    ("slab", "smp", ""),
    ("slab-debug", "exact", "harness.cgroup=kunit"),
    ("slob", "exact", ""),
    ("slob", "smp", ""),
]
BENCH_MODULE = "slab_bulk_bench"


class Report:
    def __init__(self):
        self.rows = []

    def add(self, group, name, status, detail=""):
        self.rows.append((group, name, status, detail))
        line = "%-4s %s: %s" % (status, group, name)
        if detail:
            line += "\n     " + detail.replace("\n", "\n     ")
        info(line)

    def counts(self):
        c = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        for r in self.rows:
            c[r[2]] += 1
        return c


def step(report, group, name, fn, *args, **kw):
    """Run fn; PASS unless it raises.  Returns fn's value or None."""
    try:
        value = fn(*args, **kw)
    except StageError as e:
        report.add(group, name, "FAIL", str(e))
        return None
    except Exception as e:  # a harness bug must still name the step
        report.add(group, name, "FAIL", "%s: %s" % (type(e).__name__, e))
        return None
    report.add(group, name, "PASS")
    return value if value is not None else True


def files_of(commit):
    out = subprocess.run(["git", "show", "--format=", "--name-only", commit],
                         cwd=TREE, capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if l]


def needs_build(config, files):
    """Does a patch touching files need building on this allocator?"""
    if config == "slub":
        return True
    others = [p for a, ps in PRIVATE.items() if a != config for p in ps]
    return any(not f.startswith(DOC_PREFIXES) and f not in others for f in files)


def checkpatch(patch):
    patch = os.path.abspath(patch)
    # Debian's python3 first: scripts/spdxcheck.py needs its python3-ply
    # and python3-git, which another python3 on PATH may lack.
    env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""))
    p = subprocess.run(["perl", "scripts/checkpatch.pl", "--strict",
                        "--color=never", patch], cwd=TREE, env=env,
                       capture_output=True, text=True)
    if "Traceback" in p.stderr:
        raise StageError("checkpatch", "checkpatch.pl's helper failed (run "
                         "./bulk setup):\n" + p.stderr.strip().splitlines()[-1])
    verdict = [l for l in p.stdout.splitlines() if l.startswith("total:")]
    log = log_path("checkpatch-%s.log" % os.path.basename(patch))
    with open(log, "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode != 0 or not verdict or \
            "0 errors, 0 warnings, 0 checks" not in verdict[0]:
        issues = [l for l in p.stdout.splitlines()
                  if l.startswith(("ERROR:", "WARNING:", "CHECK:"))]
        raise StageError("checkpatch", "%s: %s\n%s" % (
            os.path.basename(patch), verdict[0] if verdict else "no verdict",
            "\n".join(issues[:10])), log)


def checkpatch_selftest():
    """checkpatch must flag a patch with a known style warning; otherwise a
    clean verdict on the series would mean nothing."""
    bad = log_path("checkpatch-selftest.patch")
    with open(bad, "w") as f:
        f.write("From: Harness <harness@example.org>\n"
                "Subject: [PATCH] mm/slub: selftest\n\n"
                "Deliberately bad patch.\n\n"
                "Signed-off-by: Harness <harness@example.org>\n---\n"
                "diff --git a/mm/slub.c b/mm/slub.c\n"
                "--- a/mm/slub.c\n+++ b/mm/slub.c\n"
                "@@ -1,3 +1,4 @@\n"
                " // SPDX-License-Identifier: GPL-2.0\n"
                "+static int harness_selftest_value_with_a_long_name = 1; /* this comment pushes the added line well past the 100 column limit */\n"
                " /*\n"
                "  * SLUB: A slab allocator that limits cache line use instead of queuing\n")
    try:
        checkpatch(bad)
    except StageError as e:
        if "WARNING: line length" in str(e):
            return
        raise
    raise StageError("checkpatch", "checkpatch.pl did not flag a patch with "
                     "a line over 100 columns", bad)


def unit_tests(report):
    tests_dir = os.path.join(REPO, "tests")
    suite = unittest.defaultTestLoader.discover(tests_dir,
                                                top_level_dir=tests_dir)
    tests = list(iter_tests(suite))  # running a suite empties it
    log = log_path("unit.log")
    with open(log, "w") as f, contextlib.redirect_stdout(f), \
            contextlib.redirect_stderr(f):
        res = unittest.TextTestRunner(stream=f, verbosity=2).run(suite)
    bad = {str(t): tb for t, tb in res.failures + res.errors}
    for t in tests:
        name = t.id().split(".", 1)[-1]
        if str(t) in bad:
            report.add("unit", name, "FAIL", bad[str(t)].strip().splitlines()[-1]
                       + "\n(log: %s)" % os.path.relpath(log, os.getcwd()))
        elif any(s[0] is t for s in res.skipped):
            report.add("unit", name, "SKIP")
        else:
            report.add("unit", name, "PASS")


def iter_tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


def checkout(rev):
    subprocess.run(["git", "checkout", "-q", "--detach", rev], cwd=TREE,
                   check=True)


def bisect_builds(report, kbuild, commits, patches):
    """Build each commit where needed, leaving build/linux at the tip."""
    tip = commits[-1] if commits else "base"
    try:
        for config in ("slub", "slab", "slob"):
            todo = [(c, p) for c, p in zip(commits, patches)
                    if needs_build(config, files_of(c))]
            if not todo or todo[-1][0] != tip:
                todo.append((tip, "full series" if commits else "base"))
            for c, p in todo:
                checkout(c)
                name = "%s @ %s" % (config, os.path.basename(p))
                if step(report, "bisect", name, kbuild.build, config,
                        label="%s@%s" % (config, c[:12])) is None:
                    break
    finally:
        subprocess.run(["git", "checkout", "-q", "series"], cwd=TREE)


def main(args):
    import boot
    import cli
    start = time.time()
    only = [g for g in args.only.split(",") if g] or GROUPS
    unknown = [g for g in only if g not in GROUPS]
    if unknown:
        raise StageError("test", "unknown step group(s) %s; known: %s" % (
            ", ".join(unknown), ", ".join(GROUPS)))
    r = Report()
    want = only.__contains__

    if want("setup"):
        step(r, "setup", "apt packages", cli.setup, None)
    if want("unit"):
        unit_tests(r)
    if want("base"):
        import base
        st = step(r, "base", "linux-source-6.1 unpacked, tagged base", base.create)
        if st and st is not True and st.get("drift"):
            r.add("base", "recorded base matches installed package", "FAIL",
                  st["drift"])
    import tree
    patches = tree.patch_files()
    applied = True
    if want("apply"):
        applied = step(r, "apply", "%d patch(es) apply with git am" % len(patches),
                       tree.create) is not None
    if want("checkpatch"):
        step(r, "checkpatch", "flags a known-bad patch (self-test)",
             checkpatch_selftest)
        for p in patches:
            step(r, "checkpatch", os.path.basename(p), checkpatch, p)
    import kbuild
    commits = tree.tree_commits() if applied else []
    if applied and len(commits) != len(patches):
        r.add("apply", "tree matches patches/", "FAIL",
              "build/linux has %d commits, patches/ %d" % (len(commits), len(patches)))
        applied = False
    if want("bisect"):
        if applied:
            bisect_builds(r, kbuild, commits, patches)
        else:
            r.add("bisect", "builds", "SKIP", "series did not apply")
    if want("debug"):
        for config in ("slub-debug", "slab-debug"):
            step(r, "debug", "%s @ full series" % config, kbuild.build, config)
    if want("kunit"):
        import kconfig
        import kunit
        for config, mode, append in KUNIT_RUNS:
            name = "%s %s%s" % (config, mode, " " + append if append else "")
            built = boot.built_modules(kconfig.out_dir(config))
            if not any(m in built for m in kunit.KUNIT_MODULES):
                r.add("kunit", name, "SKIP", "no KUnit suite for %s is built yet "
                      "(%s)" % (config, ", ".join(kunit.KUNIT_MODULES)))
                continue
            try:
                s = kunit.run(config, "linux", mode, append)
            except StageError as e:
                r.add("kunit", name, "FAIL", str(e))
                continue
            detail = "; ".join("%s %d passed %d skipped" % (
                m, c.get("PASS", 0), c.get("SKIP", 0)) for m, c in s["suites"].items())
            if s["ok"]:
                r.add("kunit", name, "PASS", detail)
            else:
                r.add("kunit", name, "FAIL", "\n".join(s["problems"]) +
                      "\nlog: %s" % os.path.relpath(s["log"], os.getcwd()))
    if want("boot"):
        for mode in ("exact", "smp"):
            step(r, "boot", "slub smoke, %s mode" % mode, boot.boot, "slub",
                 "linux", mode, [], "", 300)
    if want("bench"):
        import bench
        import kconfig
        for config in ("slub", "slab", "slob"):
            if BENCH_MODULE not in boot.built_modules(kconfig.out_dir(config)):
                r.add("bench", "%s quick run" % config, "SKIP",
                      "%s is not in the series yet" % BENCH_MODULE)
                continue
            step(r, "bench", "%s quick run parses" % config, bench.smoke,
                 config, quick_tests="a" if config != "slub" else "abcde")

    c = r.counts()
    info("\ntest command finished in %dm%02ds" % divmod(int(time.time() - start), 60))
    fails = [x for x in r.rows if x[2] == "FAIL"]
    if fails:
        info("failed steps:")
        for g, n, _, _ in fails:
            info("  %s: %s" % (g, n))
    info("%d passed, %d failed, %d skipped" % (c["PASS"], c["FAIL"], c["SKIP"]))
    return 1 if c["FAIL"] else 0
