"""Benchmark measurement: boot a kernel with the benchmark module and
parse its console (benchparse).  Each boot's log is the boot stage's own
(boot.log_file); the report reads it back."""
import os

import benchparse
from benchparse import Run
import boot
import kbuild
from common import REPO, StageError

BENCH_MODULE = "slab_bulk_bench"
BENCH_SYMBOL = "SLAB_BULK_BENCH"
BENCH_FILE = "lib/slab_bulk_bench.c"
BASE_TREE = "linux-base"
# Test f runs in smp mode, where timings are noise: it is booted this many
# times per kernel and reported as the spread of the runs.
SMP_RUNS = 3


def bench_append(tests: str, quick: bool, mode: str = "exact") -> str:
    """The module's parameters; in exact mode the guest TSC counts
    retired instructions, and the module's lines say so."""
    s = "%s.tests=%s" % (BENCH_MODULE, tests)
    if quick:
        s += " %s.quick=1" % BENCH_MODULE
    if mode == "exact":
        s += " %s.unit=instructions" % BENCH_MODULE
    return s


def bench_tag(tests: str, quick: bool, mode: str, run: int | None = None,
              suffix: str = "") -> str:
    """@suffix keeps apart boots of one tree at different commits
    (./bulk bench-each)."""
    return "bench-%s-%s%s%s%s" % (mode, tests, "-quick" if quick else "",
                                  "-run%d" % run if run else "", suffix)


def mode_runs(mode: str) -> list[int | None]:
    """The run numbers of a mode's boots: None (one boot) in exact mode."""
    return list(range(1, SMP_RUNS + 1)) if mode == "smp" else [None]


def runs(tests: str) -> list[tuple[str, str]]:
    """(mode, test letters) boots: exact for a-e, smp for f."""
    out = []
    exact = "".join(t for t in tests if t != "f")
    if exact:
        out.append(("exact", exact))
    if "f" in tests:
        out.append(("smp", "f"))
    return out


def load_run(alloc: str, tree: str, letters: str, quick: bool, mode: str,
             run: int | None = None, suffix: str = "") -> Run:
    log = boot.log_file(tree, alloc, bench_tag(letters, quick, mode, run,
                                               suffix))
    if not os.path.exists(log):
        raise StageError("report", "no benchmark log %s: run ./bulk bench with "
                         "the same options first" % log)
    with open(log, errors="replace") as f:
        try:
            parsed = benchparse.parse(f.read())
        except ValueError as e:
            raise StageError("report", "output does not parse: %s" % e, log)
    parsed.log = os.path.relpath(log, REPO)
    return parsed


def run_bench(config: str, tree: str, tests: str, quick: bool,
              mode: str = "exact", timeout: int = 1200,
              run: int | None = None, suffix: str = "") -> Run:
    """Boot with the module; returns the parsed result.  @run numbers the
    repeated boots of smp mode (their logs are kept apart), as @suffix
    does a tree's boots at different commits."""
    tag = bench_tag(tests, quick, mode, run, suffix)
    boot.boot(config, tree, mode, [BENCH_MODULE], bench_append(tests, quick, mode),
              timeout=timeout, tag=tag)
    parsed = load_run(config, tree, tests, quick, mode, run, suffix)
    if not parsed.done:
        raise StageError("bench", "benchmark did not print its end marker",
                         boot.log_file(tree, config, tag))
    return parsed


def smoke(config: str, tree: str, quick_tests: str) -> None:
    """Test command: quick run on the series kernel; it must parse and give
    a result for every requested test that is not skipped."""
    parsed = run_bench(config, tree, quick_tests, True)
    tested = {r.test for r in parsed.results}
    missing = [t for t in quick_tests if t not in tested
               and t not in parsed.skipped]
    if missing:
        raise StageError("bench", "no results for test(s) %s" % ",".join(missing),
                         boot.log_file(tree, config, bench_tag(
                             quick_tests, True, "exact")))


def measure(allocs: list[str], tests: str, quick: bool) -> None:
    """Build base and series kernels and boot each with the module; the
    console logs in build/logs/ are what the report reads."""
    for alloc in allocs:
        for tr in (BASE_TREE, "linux"):
            kbuild.build(alloc, tr)
            for mode, letters in runs(tests):
                for r in mode_runs(mode):
                    run_bench(alloc, tr, letters, quick, mode, run=r)
