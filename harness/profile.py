"""Profile stage (./bulk profile): where the benchmark's slab calls spend
their instructions, function by function, base vs series.

The benchmark (./bulk bench) gives one figure per row: the instructions of
a timed region over its objects.  This stage splits such a figure.  It
boots the benchmark's base and series kernels in exact mode with a QEMU
TCG plugin (harness/plugin/qemu-prof.c, built here with gcc) that counts
the instructions of every translated block the guest runs inside the slab
API's entry points, from a call by the benchmark module until the guest
runs module code again: kmem_cache_alloc_bulk() and
kmem_cache_free_bulk() for the bulk variants, kmem_cache_alloc() and
kmem_cache_free() for the one-at-a-time loop.  Nothing runs in the guest:
the counts are the guest's own instructions, not a sample (interrupts
taken inside a slab call count with it, in their handlers' functions).
Each block is attributed to the kernel function it starts in
(System.map).

Only the module's timed regions count: the plugin opens or closes one at
each clock read (rdtsc, rdtscp) of module code, so a measurement's
untimed setup (a warm-up round, the fragmented cache's preparation) is
left out.  It also starts a new phase at every console line the module
prints (a call of _printk() from module code).  The module measures a
row's loop and bulk variants between two of its lines and prints their R
lines together; a row's counts are those of the last phase with slab
calls before its R lines, over the objects of its variants.  Test c is
left out: it prints the R lines of its three free orders one after the
other, which this grouping takes for one row.  So are the benchmark
configs whose module runs kprobe handlers inside the slab calls
(slub-stats, slob-lockhold): module code ends a call's count.
"""
import argparse
import bisect
import collections
import dataclasses
import os
import re
import subprocess
from typing import Any

import basetree
import bench
import benchparse
import boot
import kbuild
import measure
import record as records
import registry
from benchparse import Record
from common import BUILD, REPO, StageError, need_tools, rel

PLUGIN_SRC = os.path.join(REPO, "harness", "plugin", "qemu-prof.c")
PLUGIN = os.path.join(BUILD, "profile", "qemu-prof.so")
# Entry points, in the plugin's order (its ENTRY field is 1-based), and
# whether their calls are the bulk variant's.
ENTRIES = (("kmem_cache_alloc_bulk", True), ("kmem_cache_free_bulk", True),
           ("kmem_cache_alloc", False), ("kmem_cache_free", False))
PHASE_FUNCTION = "_printk"
TESTS = registry.PROFILE_TESTS
# The benchmark configs whose module code runs only when the module runs.
ALLOCS = registry.PROFILE_CONFIGS
MODULE_LINE = re.compile(r"^\[\s*\d+\.\d+\] %s: (.*)$" % measure.BENCH_MODULE)
TREES = ((measure.BASE_TREE, "base"), ("linux", "series"))
DEFAULT_TOP = 20


@dataclasses.dataclass
class Row:
    """One R-line group: a row's variants and, per side (bulk or loop),
    instructions per function summed over the row's phase."""
    test: str
    n: int
    variants: dict[bool, list[Record]]
    insns: dict[bool, collections.Counter[str]]

    def objs(self, bulk: bool) -> int:
        return sum(r.objs for r in self.variants[bulk])

    def label(self) -> str:
        names = "/".join(r.variant for r in
                         self.variants[True] + self.variants[False])
        return "test %s N=%d (%s)" % (self.test, self.n, names)


def check_args(args: argparse.Namespace) -> tuple[str, str, list[int]]:
    if args.alloc not in ALLOCS:
        why = (" (%s's kprobe handlers are module code inside the slab "
               "calls)" % args.alloc if args.alloc in bench.BENCH_CONFIGS
               else "")
        raise StageError("profile", "--alloc takes one of %s; got '%s'%s"
                         % (",".join(ALLOCS), args.alloc, why))
    tests = "".join(sorted(set(args.tests.replace(",", ""))))
    if not tests or any(t not in TESTS for t in tests):
        raise StageError("profile", "--tests takes letters among %s (test c "
                         "prints three free orders' R lines at once); got "
                         "'%s'"
                         % (TESTS, args.tests))
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s]
    except ValueError:
        sizes = []
    if not sizes or any(not 1 <= s <= 4096 for s in sizes):
        raise StageError("profile", "--sizes takes a comma list of N in "
                         "1..4096; got '%s'" % args.sizes)
    if args.top < 1:
        raise StageError("profile", "--top takes a positive number; got %d"
                         % args.top)
    return args.alloc, tests, sizes


def build_plugin(src: str = PLUGIN_SRC, lib: str = PLUGIN,
                 step: str = "profile") -> str:
    """Compile a plugin of harness/plugin/ when its source or a header
    there is newer than the library."""
    need_tools(step, ["gcc"])
    plugin_dir = os.path.dirname(src)
    deps = [src] + [os.path.join(plugin_dir, f)
                    for f in os.listdir(plugin_dir) if f.endswith(".h")]
    if os.path.exists(lib) and os.path.getmtime(lib) >= max(
            os.path.getmtime(d) for d in deps):
        return lib
    os.makedirs(os.path.dirname(lib), exist_ok=True)
    p = subprocess.run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o",
                        lib, src], capture_output=True, text=True)
    if p.returncode != 0:
        raise StageError(step, "building the QEMU plugin %s failed: %s"
                         % (rel(src), p.stderr.strip()))
    return lib


def read_symbols(system_map: str) -> tuple[list[int], list[str]]:
    """The text symbols of a System.map, sorted by address."""
    syms = []
    with open(system_map) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[1] in "tTwW":
                syms.append((int(parts[0], 16), parts[2]))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def symbol_address(system_map: str, name: str) -> int:
    addrs, names = read_symbols(system_map)
    for a, n in zip(addrs, names):
        if n == name:
            return a
    raise StageError("profile", "no text symbol %s in %s" % (
        name, rel(system_map)))


def function_of(addrs: list[int], names: list[str], vaddr: int) -> str:
    i = bisect.bisect_right(addrs, vaddr) - 1
    return names[i] if i >= 0 else "?"


@dataclasses.dataclass
class Counts:
    """The plugin's output: its header lines and per block (phase, entry,
    vaddr, instructions)."""
    clock_reads: int
    phases: int
    vcpus: int
    blocks: list[tuple[int, int, int, int]]


def read_counts(path: str) -> Counts:
    header: dict[str, int] = {}
    blocks = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if line.startswith("# ") and len(parts) == 3:
                header[parts[1]] = int(parts[2])
                continue
            if len(parts) != 6:
                raise ValueError("%s:%d: not 'PHASE ENTRY VADDR INSNS EXECS "
                                 "CUT'" % (path, lineno))
            blocks.append((int(parts[0]), int(parts[1]), int(parts[2], 16),
                           int(parts[3]) * int(parts[4]) - int(parts[5])))
    check_header(path, header)
    return Counts(header["clock_reads"], header["phases"], header["vcpus"],
                  blocks)


def check_header(path: str, header: dict[str, int]) -> None:
    """A plugin's counts (qemu-prof.c's, qemu-cost.c's) are one vCPU's,
    of whole timed regions; ValueError if not."""
    missing = [k for k in ("clock_reads", "phases", "vcpus")
               if k not in header]
    if missing:
        raise ValueError("%s: no '# %s' line" % (path, missing[0]))
    if header["vcpus"] != 1:
        raise ValueError("%s: %d vCPUs; the plugin counts for one (exact "
                         "mode)" % (path, header["vcpus"]))
    if header["clock_reads"] == 0:
        raise ValueError("%s: the module read no TSC (rdtsc/rdtscp): no "
                         "timed region to count" % path)
    if header["clock_reads"] % 2:
        raise ValueError("%s: an odd number of clock reads (%d): the timed "
                         "regions are not pairs" % (path,
                                                    header["clock_reads"]))


def module_lines(console: str) -> list[str]:
    """The benchmark module's console lines, in order."""
    out = []
    for line in console.splitlines():
        m = MODULE_LINE.match(line.strip())
        if m:
            out.append(m.group(1))
    return out


def r_groups(console: str, phases: int, through_last: bool = False) -> list[
        tuple[list[Record], int, int]]:
    """The module's R lines, consecutive ones grouped (a row), each group
    with the phases its measurements can lie in: (group, first, last)
    where phase k runs from the module's k-th console line to its
    (k+1)-th, so that a group's phases run from the one the previous
    group's last R line opens to the one its own first R line ends
    (@through_last: its last R line; test c and g print a row's pairs as
    each is measured, and the later pairs' regions lie between them).
    @phases: the calls of _printk() from module code the plugin saw."""
    lines = module_lines(console)
    if phases != len(lines):
        raise ValueError("the plugin saw %d calls of %s from module code, "
                         "the console has %d module lines: phases and lines "
                         "do not match" % (phases, PHASE_FUNCTION,
                                           len(lines)))
    out: list[tuple[list[Record], int, int]] = []
    last = 0
    i = 0
    while i < len(lines):
        if not lines[i].startswith("R "):
            i += 1
            continue
        group = []
        first = i
        while i < len(lines) and lines[i].startswith("R "):
            group.append(benchparse.parse_r_line(lines[i][2:], i + 1))
            i += 1
        # Line first + 1 (1-based) ends phase first.
        out.append((group, last, i - 1 if through_last else first))
        last = i
    return out


def rows(console: str, counts: Counts,
         addrs: list[int], names: list[str]) -> list[Row]:
    """Group the module's R lines (r_groups()) and give each the counts of
    the last phase with slab calls before it."""
    groups = r_groups(console, counts.phases)
    per_phase: dict[int, dict[bool, collections.Counter[str]]] = {}
    for phase, entry, vaddr, insns in counts.blocks:
        if not 1 <= entry <= len(ENTRIES):
            raise ValueError("entry %d out of range" % entry)
        side = ENTRIES[entry - 1][1]
        d = per_phase.setdefault(phase, {True: collections.Counter(),
                                         False: collections.Counter()})
        d[side][function_of(addrs, names, vaddr)] += insns
    out: list[Row] = []
    for group, first_phase, last_phase in groups:
        # The last phase with calls after the previous row.
        work = [k for k in per_phase if first_phase <= k <= last_phase]
        if group[0].test not in TESTS:
            continue
        row = "test %s N=%d (%s)" % (group[0].test, group[0].n, "/".join(
            r.variant for r in group))
        if not work:
            raise ValueError("%s: no slab calls counted before its R lines"
                             % row)
        calls = per_phase[max(work)]
        variants = {b: [r for r in group if ("bulk" in r.variant) == b]
                    for b in (True, False)}
        for side in (True, False):
            counted = sum(calls[side].values())
            timed = sum(r.cycles for r in variants[side])
            if counted > timed:
                raise ValueError("%s: %d instructions counted in the slab "
                                 "calls, more than the timed region's %d"
                                 % (row, counted, timed))
        out.append(Row(group[0].test, group[0].n, variants, calls))
    return out


def plugin_boot(step: str, alloc: str, tree: str, append: str, tag: str,
                timeout: int, plugin: str, out_path: str,
                args: str = "") -> tuple[str, str]:
    """Boot @alloc's built kernel in exact mode with the benchmark module
    under a QEMU plugin (@args, then the phase function p=) that writes
    @out_path: the console and the boot log's path."""
    system_map = os.path.join(kbuild.check_stamp(alloc, tree, step),
                              "System.map")
    if os.path.exists(out_path):
        os.remove(out_path)
    res = boot.boot(alloc, tree, "exact", [measure.BENCH_MODULE], append,
                    timeout=timeout, tag=tag, qemu_extra=["-plugin", ",".join(
                        [plugin, "out=" + out_path] + ([args] if args else [])
                        + ["p=%x" % symbol_address(system_map, PHASE_FUNCTION)])])
    assert res is not None
    if not os.path.exists(out_path):
        raise StageError(step, "the QEMU plugin wrote no counts (%s)"
                         % rel(out_path), res.log)
    with open(res.log, errors="replace") as f:
        return f.read(), res.log


def boot_profiled(alloc: str, tree: str, tests: str, sizes: list[int],
                  plugin: str) -> list[Row]:
    system_map = os.path.join(kbuild.check_stamp(alloc, tree, "profile"),
                              "System.map")
    entries = ",".join("e=%x" % symbol_address(system_map, name)
                       for name, _ in ENTRIES)
    counts = os.path.join(BUILD, "profile", "%s-%s-%s-%s.txt" % (
        tree, alloc, tests, "-".join(map(str, sizes))))
    console, log = plugin_boot(
        "profile", alloc, tree,
        measure.bench_append(tests, False) + " %s.sizes=%s" % (
            measure.BENCH_MODULE, ",".join(map(str, sizes))),
        "profile-%s-%s" % (tests, "-".join(map(str, sizes))), 1800, plugin,
        counts, entries)
    addrs, names = read_symbols(system_map)
    try:
        found = rows(console, read_counts(counts), addrs, names)
    except ValueError as e:
        raise StageError("profile", str(e), log)
    if not found:
        raise StageError("profile", "no rows of tests %s in the console"
                         % tests, log)
    return found


def report(alloc: str, cmd: str, sides: dict[str, list[Row]],
           top: int) -> tuple[str, dict[str, Any]]:
    md = ["# Slab bulk profile: base vs series", "",
          "Command: `%s`" % cmd, "",
          "Instructions per object inside the slab API's entry points, by "
          "the kernel function they ran in (QEMU TCG plugin "
          "`harness/plugin/qemu-prof.c`, exact mode, %s config; see "
          "harness/profile.py). *bulk*: inside kmem_cache_alloc_bulk() and "
          "kmem_cache_free_bulk(), over the bulk variant's objects; *loop*: "
          "inside kmem_cache_alloc() and kmem_cache_free(), over the loop "
          "variant's; timed regions only. The *benchmark* line is the "
          "module's own raw figure for the timed region, whose caller's "
          "loop and clock reads the entry points leave out." % alloc, ""]
    data: dict[str, Any] = {"command": cmd, "alloc": alloc, "rows": []}
    base_rows, series_rows = sides["base"], sides["series"]
    if [(r.test, r.n) for r in base_rows] != \
            [(r.test, r.n) for r in series_rows]:
        raise StageError("profile", "base and series printed different rows")
    for b, s in zip(base_rows, series_rows):
        row_sides: dict[str, Any] = {}
        entry = {"test": b.test, "n": b.n, "sides": row_sides}
        for bulk in (True, False):
            if not b.variants[bulk] or not s.variants[bulk]:
                continue
            side = "bulk" if bulk else "loop"
            bo, so = b.objs(bulk), s.objs(bulk)
            per: dict[str, tuple[float, float]] = {}
            for fn in set(b.insns[bulk]) | set(s.insns[bulk]):
                per[fn] = (b.insns[bulk][fn] / bo, s.insns[bulk][fn] / so)
            order = sorted(per, key=lambda f: (-max(per[f]), f))
            md.append("## test %s N=%d, %s (%s)" % (
                b.test, b.n, side, "/".join(r.variant for r in
                                            b.variants[bulk])))
            md.append("")
            md.append("| function | base | series | series - base |")
            md.append("|---|---:|---:|---:|")
            shown = order[:top]
            for fn in shown:
                x, y = per[fn]
                md.append("| %s | %.1f | %.1f | %+.1f |" % (fn, x, y, y - x))
            ox = sum(per[f][0] for f in order[top:])
            oy = sum(per[f][1] for f in order[top:])
            if order[top:]:
                md.append("| (%d other functions) | %.1f | %.1f | %+.1f |" % (
                    len(order) - top, ox, oy, oy - ox))
            tx = sum(v[0] for v in per.values())
            ty = sum(v[1] for v in per.values())
            md.append("| **total in the entry points** | %.1f | %.1f | %+.1f |"
                      % (tx, ty, ty - tx))
            bx = sum(r.cycles for r in b.variants[bulk]) / bo
            by = sum(r.cycles for r in s.variants[bulk]) / so
            md.append("| *benchmark (timed region, raw)* | %.1f | %.1f | %+.1f |"
                      % (bx, by, by - bx))
            md.append("")
            row_sides[side] = {
                "objs": {"base": bo, "series": so},
                "functions": {fn: {"base": round(per[fn][0], 2),
                                   "series": round(per[fn][1], 2)}
                              for fn in order},
                "total": {"base": round(tx, 2), "series": round(ty, 2)},
                "benchmark": {"base": round(bx, 2), "series": round(by, 2)}}
        data["rows"].append(entry)
    return "\n".join(md), data


def main(args: argparse.Namespace) -> int:
    alloc, tests, sizes = check_args(args)
    cmd = "./bulk profile --alloc %s --tests %s --sizes %s%s" % (
        alloc, tests, ",".join(map(str, sizes)),
        " --top %d" % args.top if args.top != DEFAULT_TOP else "")
    basetree.prepare("profile")
    plugin = build_plugin()
    if basetree.bench_patch() is None:
        raise StageError("profile", "the benchmark module (%s) is not in the "
                         "series yet" % measure.BENCH_FILE)
    sides = {}
    for tr, side in TREES:
        kbuild.build(alloc, tr)
        sides[side] = boot_profiled(alloc, tr, tests, sizes, plugin)
    md, data = report(alloc, cmd, sides, args.top)
    name = os.path.join(records.folder("experiments", args.record), "profile-%s-%s-%s"
                        % (alloc, tests, "-".join(map(str, sizes))))
    records.publish("profile", name, md, data, args.record)
    return 0
