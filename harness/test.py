"""The test command (./bulk test; .ci/run calls it): plans its steps from
patches/ and configs/, runs them, and ends with one line
'N passed, N failed, N skipped'.  The summary also goes to
build/logs/test.json.

A step that cannot run because something is missing (a tree, a kernel)
FAILS and says what to run; SKIP means the step's subject is not in the
series yet.
"""
import dataclasses
import os
import subprocess
import time
from functools import partial

import base
import build_each
import boot
import checkpatch
import gitrepo
import kbuild
import kconfig
import kunit
import measure
import packages
import steps
import stress
import tree
import unitrun
from common import (BASE_TAG, BISECT_TREE, PATCHES, REPO, TREE, StageError,
                    log_path, need_tools, rel)
from steps import Skip, Step

GROUPS = {
    "setup": "the apt packages are installed",
    "unit": "the harness's unit tests, its import graph, mypy over harness/",
    "base": "build/linux holds linux-source-6.1 tagged base; the recorded "
            "version's tarball unchanged (another version: a note)",
    "apply": "the series applies with git am",
    "checkpatch": "checkpatch.pl --strict: 0/0/0 on every patch",
    "build-each": "results/per-patch/build-each.json: ./bulk build-each --record built "
              "every patch of this series, all passed",
    "build": "the tip builds on slub-faults and slab-faults, and on any "
             "config that only a KUnit run boots",
    "debug": "the tip builds with the debug configs",
    "kunit": "the KUnit suites on every config and variant",
    "boot": "smoke boots in exact and smp mode",
    "stress": "the stress suite on 2 and 4 CPUs, with fault injection",
    "bench": "the benchmark module's quick run parses",
}
SUMMARY = "test.json"
# Seconds per step over the runs so far (the estimate of the time left).
TIMES = "test-times.json"
# The tree whose tip kernels the build and debug steps build, the others boot.
TESTED = build_each.TREE_NAME
# The kernels the KUnit, boot and bench steps boot for each allocator: the
# stress runs', so that one build per allocator serves them all (a kernel
# of its own per allocator for these steps would add builds of 5 to 9
# minutes each on a cold ccache).  For SLUB and SLAB the benchmark's
# config with fault injection built in; for SLOB its debug kernel (lockdep
# and atomic-sleep checks: SLOB has no debug options of its own), which
# the debug step builds anyway.  What differs from the benchmark's kernels:
# should_failslab() and should_fail_alloc_page() are real calls that
# inject nothing unless asked (debugfs, as the stress runs do, or a task's
# fail_nth, as the contract suite's slab_bulk_fail_nth case does: it runs
# on these kernels and is skipped without CONFIG_FAULT_INJECTION); the
# checkers of configs/checkers.config (DEBUG_VM, DEBUG_LIST, KFENCE,
# DEBUG_PREEMPT), which see the grouped bulk free that the debug kernels'
# KASAN turns off: their checks cost every boot some time; on slub-faults
# SLUB's event counters (configs/events.config), which the stress runs'
# floors read; and SLOB's lockdep.  No test step boots the benchmark's own
# slub, slab and slob configs; ./bulk build-each builds them at every
# patch, ./bulk kunit-each boots slub.
TEST_KERNEL = {"slub": "slub-faults", "slab": "slab-faults", "slob": "slob-debug"}
DEBUG_CONFIGS = ("slub-debug", "slab-debug", "slob-debug")


def mypy() -> str:
    """The type check of harness/."""
    need_tools("unit", ["mypy"])
    log = log_path("mypy.log")
    files = sorted(os.path.join("harness", f) for f in os.listdir(
        os.path.join(REPO, "harness")) if f.endswith(".py"))
    p = subprocess.run(["mypy", "--python-version", "3.11",
                        "--check-untyped-defs", "--cache-dir",
                        os.path.join(os.path.dirname(log), "mypy-cache")] + files,
                       cwd=REPO, capture_output=True, text=True)
    with open(log, "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode != 0:
        errors = [l for l in p.stdout.splitlines() if ": error:" in l]
        if not errors:  # mypy itself failed (exit 2): say what it said
            raise StageError("unit", "mypy failed (%d)" % p.returncode, log,
                             "\n".join((p.stdout + p.stderr).strip()
                                       .splitlines()[-5:]))
        raise StageError("unit", "mypy: %d error(s)" % len(errors), log,
                         "\n".join(errors[:10]))
    return p.stdout.strip().splitlines()[-1]


class Series:
    """The commits of build/linux, once the series is known to be there
    (base alone when patches/ is empty)."""

    def __init__(self) -> None:
        self.commits: list[str] | None = None
        # The kernels built at the tip in this run: a stress step boots
        # them without running make again (about 5 s of make per step).
        self.built: set[str] = set()

    def apply(self) -> None:
        tree.create()
        self.get_commits()

    def get_commits(self) -> list[str]:
        if self.commits is None:
            if not tree.is_exported_series():
                raise StageError("apply", "build/linux is not base + patches/: "
                                 "run ./bulk tree")
            self.commits = [gitrepo.git(TREE, "apply", "rev-parse", BASE_TAG).strip()]
            self.commits += gitrepo.commits(TREE, "apply")
        return self.commits

    def at_tip(self) -> None:
        """The bisect worktree at the tip, whose kernels the build and
        debug steps build and the KUnit, boot, stress and bench steps boot."""
        build_each.at(self.get_commits()[-1])


def base_tree() -> None:
    base.create()


def base_drift() -> str | None:
    """The installed package is the recorded one, or a version Debian
    moved to (setup installs the recorded one while the archive serves
    it): a drifted version passes here with its note, and the steps after
    judge the series on it.  The recorded version with another tarball
    fails."""
    st = base.check(quiet=True)
    if st.drift and st.version == st.recorded.get("VERSION"):
        raise StageError("base", st.drift)
    return st.drift


def tip_step(config: str, series: Series) -> None:
    series.at_tip()
    kbuild.build(config, TESTED, label="%s@tip" % config)
    series.built.add(config)


def kunit_step(r: kunit.KunitRun, cases: kunit.SuiteCounts, series: Series) -> str:
    series.at_tip()
    if not kunit.expected_modules(r.config, TESTED):
        raise Skip("no KUnit suite for %s in the series yet" % r.config)
    res = kunit.run(r, TESTED)
    for c in res.suites.values():
        cases.passed += c.passed
        cases.skipped += c.skipped
        cases.failed += c.failed
    if not res.ok:
        raise StageError("kunit", r.name(), res.log, "\n".join(res.problems))
    return res.summary()


def boot_step(mode: str, series: Series) -> None:
    series.at_tip()
    boot.boot(TEST_KERNEL["slub"], TESTED, mode, [], "", 300)


def stress_step(r: stress.StressRun, series: Series) -> str:
    series.at_tip()
    if not os.path.exists(os.path.join(BISECT_TREE, "lib", "%s.c"
                                       % stress.STRESS_MODULE)):
        raise Skip("%s is not in the series yet" % stress.STRESS_MODULE)
    if r.config not in series.built:
        tip_step(r.config, series)
    res = stress.run(r, TESTED, stress.TEST_SECONDS, full_floors=False)
    if not res.ok:
        raise StageError("stress", "%s (seed %d)" % (r.name(), res.seeds[0]),
                         res.logs[0], "\n".join(res.problems + [
                             "replay: " + res.replay()]))
    return stress.summary(res)


def bench_step(alloc: str, series: Series) -> None:
    series.at_tip()
    if measure.BENCH_SYMBOL not in kconfig.declared_symbols(BISECT_TREE):
        raise Skip("%s is not in the series yet" % measure.BENCH_MODULE)
    measure.smoke(TEST_KERNEL[alloc], TESTED,
                  quick_tests="a" if alloc != "slub" else "abcdeg")


def test_run(r: kunit.KunitRun) -> kunit.KunitRun:
    """A KUnit run of the allocator's test kernel, see TEST_KERNEL."""
    return dataclasses.replace(r, config=TEST_KERNEL.get(r.config, r.config))


def tip_configs() -> list[str]:
    """The kernels the build step builds at the tip: the test kernels, then
    those that only KUnit runs boot, leaving out the debug configs (the
    debug step builds them)."""
    out: list[str] = []
    for c in list(TEST_KERNEL.values()) + [test_run(r).config
                                           for r in kunit.KUNIT_RUNS]:
        if c not in out and c not in DEBUG_CONFIGS:
            out.append(c)
    return out


def plan(groups: list[str], cases: kunit.SuiteCounts) -> list[Step]:
    patches = gitrepo.patch_files(PATCHES)
    series = Series()
    out = []
    want = groups.__contains__
    if want("setup"):
        out.append(Step("setup", "apt packages", packages.setup))
    if want("unit"):
        units = unitrun.UnitTests()
        out += [Step("unit", i.split(".", 1)[-1], partial(units.outcome, i))
                for i in units.ids()]
        out.append(Step("unit", steps.MYPY_STEP, mypy))
    if want("base"):
        out.append(Step("base", "linux-source-6.1 unpacked, tagged base",
                        base_tree))
        out.append(Step("base", "installed base is the recorded one, or drift noted",
                        base_drift))
    if want("apply"):
        out.append(Step("apply", "%d patch(es) apply with git am" % len(patches),
                        series.apply))
    if want("checkpatch"):
        out.append(Step("checkpatch", "flags a known-bad patch (self-test)",
                        checkpatch.selftest))
        out += [Step("checkpatch", os.path.basename(p),
                     partial(checkpatch.checkpatch, p)) for p in patches]
    if want("build-each"):
        out.append(Step("build-each", "every patch builds: the record of ./bulk build-each",
                        partial(build_each.check_record, patches)))
    if want("build"):
        out += [Step("build", "%s @ full series" % c, partial(tip_step, c, series))
                for c in tip_configs()]
    if want("debug"):
        out += [Step("debug", "%s @ full series" % c, partial(tip_step, c, series))
                for c in DEBUG_CONFIGS]
    if want("kunit"):
        out += [Step("kunit", test_run(r).name(),
                     partial(kunit_step, test_run(r), cases, series))
                for r in kunit.KUNIT_RUNS]
    if want("boot"):
        out += [Step("boot", "%s smoke, %s mode" % (TEST_KERNEL["slub"], mode),
                     partial(boot_step, mode, series))
                for mode in ("exact", "smp")]
    if want("stress"):
        out += [Step("stress", r.name(), partial(stress_step, r, series))
                for r in stress.TEST_RUNS]
    if want("bench"):
        out += [Step("bench", "%s quick run parses" % TEST_KERNEL[c],
                     partial(bench_step, c, series)) for c in build_each.ALLOCATORS]
    return out


def main(only: str, summary: dict[str, object] | None = None) -> int:
    """The test command; @summary, when given, gets what it writes to
    build/logs/test.json (./bulk test --json prints it)."""
    start = time.time()
    groups = [g for g in only.split(",") if g] or list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise StageError("test", "unknown step group(s) %s; known: %s" % (
            ", ".join(unknown), ", ".join(GROUPS)))
    cases = kunit.SuiteCounts()
    todo = plan(groups, cases)
    summary_path = log_path(SUMMARY)
    times_path = log_path(TIMES)
    history = steps.load_history(times_path)
    results = steps.run_all(todo, history)
    steps.save_history(times_path, history, results)
    data = steps.summary(results, time.time() - start, {
        "groups": groups, "kunit_cases": {"passed": cases.passed,
                                          "skipped": cases.skipped,
                                          "failed": len(cases.failed)}})
    steps.write_summary(summary_path, data)
    if summary is not None:
        summary.update(data)
    c = steps.counts(results)
    kinds = steps.counts_by_kind(results)
    print("\ntest command finished in %dm%02ds; summary: %s" % (
        *divmod(int(time.time() - start), 60), rel(summary_path)))
    print("passes: %d of the harness's unit tests, %d of its checks (mypy), "
          "%d of kernel steps (KUnit: %d cases passed, %d skipped, %d failed)" % (
              kinds["harness_unit_tests"]["passed"],
              kinds["harness_checks"]["passed"], kinds["kernel_steps"]["passed"],
              cases.passed, cases.skipped, len(cases.failed)))
    fails = [r for r in results if r.status == "FAIL"]
    if fails:
        print("failed steps:")
        for r in fails:
            print("  %s: %s" % (r.group, r.name))
    print("%d passed, %d failed, %d skipped" % (c["passed"], c["failed"],
                                                c["skipped"]), flush=True)
    return 1 if c["failed"] else 0
