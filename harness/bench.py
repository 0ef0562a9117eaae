"""The main command (./bulk bench): benchmark base vs series, and the
report stage (./bulk report) that renders results/ from the boot logs.

Per allocator it builds
  base:   pristine 6.1 + the benchmark patch, with the benchmark module
          as the series has it                       (build/linux-base)
  series: all patches                                (build/linux)
so both columns come from the same module source, boots each in exact mode
(icount: the TSC counts instructions) with the benchmark module, and
writes <name>.md, <name>.json and <name>-ALLOC-a.png under
build/results/bench/, or results/bench/ with --record.  A --record report
of the run the cover letter quotes also writes its tables to
patches/cover-tables.txt, which export reads.
"""
import argparse
import os
import time

import arch
import archcmp
import basetree
import boot
import kbuild
import measure
import record as records
import registry
import render
import tables
from benchparse import AllocRuns, Report
from common import COVER_TABLES, StageError, rel, say

# Configs --alloc accepts: the allocators and slub's benchmark variants.
BENCH_CONFIGS = registry.BENCH_CONFIGS
# The run whose tables the cover letter quotes: all allocators when there
# is such a run, else SLUB's default run.
COVER_RUNS = ("bench-slub-slab-slob", "bench-slub")
KIND = "bench"
# What an arm64 report's figures are (--arch arm64).
ARM64_NOTE = (
    "**arm64** (`--arch arm64`): QEMU `-M virt -cpu max,cntfrq=%d`, "
    "the same exact mode. The module has no TSC there and times with "
    "`ktime_get_ns()`, which reads the generic timer's counter (CNTVCT); "
    "at %d Hz a tick is 1 ns of virtual time, and under `-icount "
    "shift=0` a nanosecond is one instruction, so the figures are "
    "instructions per object as on x86-64, to one instruction (at QEMU's "
    "default 62.5 MHz a tick would be 16 instructions). Each clock read "
    "costs more instructions than x86's `rdtsc`; like the loop, it is in "
    "the raw figure." % (arch.ARM64_CNTFRQ, arch.ARM64_CNTFRQ))


def check_args(args: argparse.Namespace) -> tuple[list[str], str]:
    """The configs (with --arch arm64, the allocators' NAME-arm64) and
    the test letters."""
    allocs = [a for a in args.alloc.split(",") if a]
    target = arch.get(args.arch)
    known = BENCH_CONFIGS if target == arch.X86_64 else [
        a for a in registry.ALLOCATORS if a in arch.ARM64_CONFIGS]
    bad = [a for a in allocs if a not in known]
    if bad or not allocs:
        raise StageError("bench", "--alloc takes a comma list of %s%s; got "
                         "'%s'" % (",".join(known), "" if target == arch.X86_64
                                   else " with --arch " + target.name,
                                   args.alloc))
    allocs = [target.config(a) for a in allocs]
    tests = args.tests.replace(",", "")
    if not tests or any(t not in tables.TESTS for t in tests) \
            or len(set(tests)) != len(tests):
        raise StageError("bench", "--tests takes letters among %s; got '%s'"
                         % (tables.TESTS, args.tests))
    return allocs, "".join(sorted(tests))


def is_cover_run(name: str) -> bool:
    """Does the cover letter quote this run (of the committed records)?"""
    for run in COVER_RUNS:
        if os.path.exists(records.committed(KIND, run + ".json")):
            return run == name
    return False


def report_name(allocs: list[str], quick: bool) -> str:
    """bench-ALLOCS[-quick]: the report's files, less their suffix
    (bench-arm64-ALLOCS for NAME-arm64 configs)."""
    target = arch.of_config(allocs[0])
    names = [a[:len(a) - len(target.suffix)] for a in allocs]
    return "bench-%s%s%s" % ("" if target == arch.X86_64 else
                             target.name + "-", "-".join(names),
                             "-quick" if quick else "")


def bench_command(allocs: list[str], tests: str, quick: bool) -> str:
    """The ./bulk bench command line of a run of these configs (NAME-arm64
    ones: --arch arm64 --alloc NAME)."""
    target = arch.of_config(allocs[0])
    return "./bulk bench%s --alloc %s --tests %s%s" % (
        "" if target == arch.X86_64 else " --arch " + target.name,
        ",".join(a[:len(a) - len(target.suffix)] for a in allocs), tests,
        " --quick" if quick else "")


def report(allocs: list[str], tests: str, quick: bool,
           record: bool = False) -> None:
    """bench-<allocs>[-quick].{md,json} and a PNG per allocator, under
    results/bench/ when record, else build/results/bench/."""
    out = records.folder(KIND, record)
    name = report_name(allocs, quick)
    command = bench_command(allocs, tests, quick)
    data = Report(command)
    for alloc in allocs:
        entry = AllocRuns()
        for label, tr in (("base", measure.BASE_TREE), ("series", "linux")):
            exact, smp = None, None
            for mode, letters in measure.runs(tests):
                parsed = [measure.load_run(alloc, tr, letters, quick, mode, r)
                          for r in measure.mode_runs(mode)]
                if mode == "smp":
                    smp = parsed
                else:
                    exact = parsed[0]
            if label == "base":
                entry.base_exact, entry.base_smp_runs = exact, smp
            else:
                entry.series_exact, entry.series_smp_runs = exact, smp
        data.allocators[alloc] = entry
    md = markdown_report(name, data, allocs, tests, out)
    # The figures are parsed from the last boot logs now: a fresh stamp.
    st = records.stamp()
    records.write_markdown(os.path.join(out, name + ".md"), "\n".join(md), st)
    records.write_json(os.path.join(out, name + ".json"), data.to_json(), st)
    say("report: %s.md, .json and the plots written, in %s" % (
        rel(os.path.join(out, name)), records.where(record)))
    if not is_cover_run(name):
        return
    if not record:
        say("report: %s left as it is: the cover letter quotes the run "
            "with --record" % rel(COVER_TABLES))
        return
    with open(COVER_TABLES, "w") as f:
        f.write(render.cover_tables(data))
    say("report: %s written (./bulk export puts it in the cover letter)"
        % rel(COVER_TABLES))


def markdown_report(name: str, data: Report, allocs: list[str], tests: str,
                    plot_dir: str | None) -> list[str]:
    """The lines of <name>.md from the report's runs; the tables
    are printed too, and each allocator's plot goes to @plot_dir (None:
    no plot)."""
    md = ["# Slab bulk benchmark: base vs series", "",
          "Command: `%s`" % data.command, "",
          "Kernels: *base* = Debian linux-source-6.1 (patches/BASE) plus the "
          "benchmark patch, with the module as the series has it; *series* = "
          "all of patches/. Configs: "
          "configs/ (`./bulk config NAME`).", "",
          "Tests a-e and g run in exact mode: QEMU TCG `-icount shift=0,sleep=off "
          "-smp 1`, where the guest TSC counts retired instructions, so every "
          "figure is **instructions per object**, raw (the timed region's "
          "instructions over the objects it handled, nothing subtracted) "
          "and repeats bit for bit. Test f runs in smp mode (`-smp 2`, no "
          "icount), %d boots per kernel: its figures are noise, so each row "
          "shows every run. loop (base) and loop (series) = the "
          "one-at-a-time loop measured on each kernel (fallback, where a "
          "table has one loop column, is the base kernel's); series/base "
          "and series/loop (the series' bulk call against the series' own "
          "loop) below 1 is better." % measure.SMP_RUNS, ""]
    if arch.of_config(allocs[0]) == arch.ARM64:
        md += [ARM64_NOTE, ""]
    for alloc in allocs:
        plot = (os.path.join(plot_dir, "%s-%s-a.png" % (name, alloc))
                if plot_dir is not None else None)
        md += alloc_tables(alloc, tests, data.allocators[alloc], plot)
    target = arch.of_config(allocs[0])
    if target != arch.X86_64:
        for alloc in allocs:
            md += archcmp.markdown(alloc[:len(alloc) - len(target.suffix)],
                                   tests, data.allocators[alloc].exact(alloc))
            print("\n".join(md[-1:]))
    return md


def alloc_tables(alloc: str, tests: str, entry: AllocRuns,
                 plot: str | None) -> list[str]:
    """The markdown tables of one allocator (printed too), and its plot
    (to the path @plot, unless None)."""
    md = []
    for kernel, run in (("base", entry.base_exact), ("series", entry.series_exact)):
        if run is not None and run.caches:
            md.append("%s, %s kernel, test caches: %s\n" % (
                alloc.upper(), kernel, "; ".join(
                    "%s %s" % kv for kv in sorted(run.caches.items()))))
            print(md[-1])
    for spec in tables.SPECS:
        if spec.test not in tests:
            continue
        if spec.test == "f":
            srows = tables.spread_table(spec, entry.base_smp_runs or [],
                                        entry.series_smp_runs or [])
            if srows:
                md.append(render.markdown_spread(alloc, spec, srows))
                print(md[-1])
            continue
        base, series = entry.exact(alloc)
        rows = tables.table(spec, base, series)
        if not rows:
            continue
        md.append(render.markdown(alloc, spec, rows))
        print(md[-1])
        if spec.bulk in tables.STAT_VARIANTS:
            for title, events in tables.STAT_SPECS:
                strows = tables.stats_table(spec.test, events, base, series,
                                            spec.bulk)
                if strows:
                    md.append(render.markdown(alloc, tables.Spec(
                        spec.test, title + " per 1000 objects, SLUB_STATS", "n",
                        None, ""), strows))
                    print(md[-1])
        if spec.test == "i":
            for per_second, what in ((False, "per million objects"),
                                     (True, "per second")):
                krows = tables.kfence_table(base, series, per_second)
                if krows:
                    md.append(render.markdown(alloc, tables.Spec(
                        "i", "KFENCE objects " + what, "n", None, ""), krows))
                    print(md[-1])
        if spec.test == "a" and spec.bulk == "bulk" and plot is not None:
            render.plot(rows, plot,
                        "%s quick reuse: instructions per object vs bulk size N"
                        % alloc.upper())
        if spec.test == "g" and spec.bulk == "head_list" and plot is not None:
            render.plot(rows, plot[:-len("-a.png")] + "-g.png",
                        "%s kfree_skb_list(), 64-byte sk_buffs: instructions "
                        "per sk_buff vs list length N" % alloc.upper(),
                        ylabel="instructions per sk_buff (free)",
                        xlabel="list length N", bulk="kfree_skb_list()")
    return md


def main(args: argparse.Namespace) -> int:
    start = time.time()
    allocs, tests = check_args(args)
    basetree.prepare("bench", install=True)
    if basetree.bench_patch() is None:
        # Nothing to measure yet: prove the pipeline end to end instead.
        for alloc in allocs:
            for tr in (measure.BASE_TREE, "linux"):
                kbuild.build(alloc, tr)
                boot.boot(alloc, tr, "exact", [], "", 300)
        say("bench: the benchmark module (%s) is not in the series yet; base "
            "and series kernels of %s build and boot" % (
                measure.BENCH_FILE, ",".join(allocs)))
        return 0
    measure.measure(allocs, tests, args.quick)
    report(allocs, tests, args.quick, args.record)
    say("bench: done in %dm%02ds" % divmod(int(time.time() - start), 60))
    return 0


def report_main(args: argparse.Namespace) -> int:
    allocs, tests = check_args(args)
    report(allocs, tests, args.quick, args.record)
    return 0
