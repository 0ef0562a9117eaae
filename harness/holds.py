"""IRQ-off windows and spinlock holds, in instructions (the holds= part of
harness/plugin/qemu-cost.c, and harness/plugin/qemu-holds.c; the state
machine is harness/plugin/holds.h).

This module writes the symbol ranges the plugins need from a kernel's
System.map (spinlock acquire functions, entry points), reads the plugins'
'hold' lines, charges each window or hold to a kernel function (the
function its site lies in: the caller of the spinlock function, or the
cli's own) and sums them up: count, longest, 99th percentile.  The
allocator's own locks are the holds whose site lies in a function of
mm/slub.o, mm/slab.o or mm/slob.o (SLUB's and SLAB's list_lock, SLAB's
alien locks, SLOB's slob_lock); which functions those are comes from the
object files in the kernel's O= dir.
"""
import argparse
import dataclasses
import os
import re
import subprocess
from typing import Any

import basetree
import boot
import kbuild
import measure
import profile
import record as records
import registry
from common import BUILD, REPO, StageError, rel

# Spinlock acquire functions: out of line on x86 (no ARCH_INLINE_SPIN_*),
# the queued slow path included.
ACQUIRE_RE = re.compile(r"^(_raw_spin_(try)?lock(_\w+)?|"
                        r"(native_|__pv_)?queued_spin_lock_slowpath)$")
# Entry points the CPU enters the kernel through with IF cleared (IDT
# gates and the syscall instruction), and the ranges of vector stubs.
ENTRY_RE = re.compile(r"^(asm_(exc|sysvec)_\w+|asm_common_interrupt|"
                      r"asm_spurious_interrupt|entry_SYSCALL_64|"
                      r"entry_SYSCALL_compat|entry_INT80_compat|"
                      r"entry_SYSENTER_compat)$")
STUB_STARTS = ("irq_entries_start", "spurious_entries_start")
ALLOC_OBJECTS = ("mm/slub.o", "mm/slab.o", "mm/slob.o")
# x86-64's module area: module code has no System.map symbol.
MODULES_START = 0xffffffffa0000000
KINDS = ("irq", "lock")


def syms_text(addrs: list[int], names: list[str]) -> str:
    """The plugin's holds= file for a kernel whose text symbols (sorted)
    are @addrs, @names: 'acquire|entrytext|entry START END' lines."""
    def end(i: int) -> int:
        for a in addrs[i + 1:]:
            if a > addrs[i]:
                return a
        return addrs[i] + 1
    where = dict(zip(names, addrs))
    lines = []
    for i, n in enumerate(names):
        if ACQUIRE_RE.match(n):
            lines.append("acquire %x %x" % (addrs[i], end(i)))
        elif ENTRY_RE.match(n):
            lines.append("entry %x %x" % (addrs[i], addrs[i] + 1))
        elif n in STUB_STARTS:
            lines.append("entry %x %x" % (addrs[i], end(i)))
    if "__entry_text_start" in where and "__entry_text_end" in where:
        lines.append("entrytext %x %x" % (where["__entry_text_start"],
                                          where["__entry_text_end"]))
    kinds = {line.split()[0] for line in lines}
    if "acquire" not in kinds or "entry" not in kinds:
        raise ValueError("no spinlock acquire function or no entry point "
                         "among the kernel's symbols")
    return "\n".join(lines) + "\n"


def write_syms(system_map: str, out: str, step: str) -> str:
    addrs, names = profile.read_symbols(system_map)
    try:
        text = syms_text(addrs, names)
    except ValueError as e:
        raise StageError(step, "%s: %s" % (rel(system_map), e))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    return out


def allocator_functions(obj_dir: str) -> set[str]:
    """The functions that mm/slub.o, mm/slab.o and mm/slob.o (those built
    in @obj_dir) define."""
    out: set[str] = set()
    for obj in ALLOC_OBJECTS:
        path = os.path.join(obj_dir, obj)
        if not os.path.exists(path):
            continue
        p = subprocess.run(["nm", "--defined-only", path],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise StageError("holds", "nm %s: %s" % (rel(path),
                                                      p.stderr.strip()))
        for line in p.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tT":
                out.add(parts[2])
    return out


@dataclasses.dataclass(frozen=True)
class Hold:
    """Windows (kind irq) or holds (kind lock) of one length, one site
    and one region (0: outside the timed regions)."""
    kind: str
    region: int
    site: int
    length: int
    count: int


def parse_line(line: str) -> Hold:
    """One 'hold KIND REGION SITE LEN COUNT' line; ValueError if not."""
    parts = line.split()
    if len(parts) != 6 or parts[0] != "hold" or parts[1] not in KINDS:
        raise ValueError("not a hold line: %r" % line.strip())
    return Hold(parts[1], int(parts[2]), int(parts[3], 16), int(parts[4]),
                int(parts[5]))


@dataclasses.dataclass
class Summary:
    """Windows or holds of some sites: how many, the longest, the 99th
    percentile (nearest rank) and the function of the longest."""
    count: int = 0
    longest: int = 0
    p99: int = 0
    where: str = ""

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def summarize(holds: list[Hold], name_of) -> Summary:
    """@holds summed up; @name_of(site) names a site's function."""
    if not holds:
        return Summary()
    total = sum(h.count for h in holds)
    ordered = sorted(holds, key=lambda h: h.length)
    rank = -(-99 * total // 100)            # ceil(0.99 * total)
    seen = 0
    p99 = ordered[-1].length
    for h in ordered:
        seen += h.count
        if seen >= rank:
            p99 = h.length
            break
    top = ordered[-1]
    return Summary(total, top.length, p99, name_of(top.site))


class Symbols:
    """Names the functions of a kernel's sites (System.map; module code
    is 'module')."""

    def __init__(self, system_map: str, obj_dir: str):
        self.addrs, self.names = profile.read_symbols(system_map)
        self.allocator = allocator_functions(obj_dir)

    def name(self, site: int) -> str:
        if site >= MODULES_START:
            return "module"
        return profile.function_of(self.addrs, self.names, site)

    def is_allocator(self, site: int) -> bool:
        return self.name(site) in self.allocator


def select(holds: list[Hold], kind: str, regions: set[int] | None = None,
           site=None) -> list[Hold]:
    """The holds of @kind in @regions (None: all), whose site @site(site)
    accepts (None: all)."""
    return [h for h in holds if h.kind == kind and
            (regions is None or h.region in regions) and
            (site is None or site(h.site))]


# ./bulk holds: the benchmark's concurrent test on two and four CPUs.
PLUGIN_SRC = os.path.join(REPO, "harness", "plugin", "qemu-holds.c")
PLUGIN = os.path.join(BUILD, "holds", "qemu-holds.so")
# Multi-threaded TCG: (mode, CPUs).
MODES = (("smp", 2), ("smp4", 4))
TEST = "f"
BOOT_TIMEOUT = 1800
# Boots per kernel and CPU count: the range over them is the figure.
RUNS = 3
CPUS = ",".join(str(n) for _, n in MODES)


def read_holds(path: str) -> tuple[dict[str, int], list[Hold]]:
    """qemu-holds.c's output: its '# key N' lines and its hold lines."""
    header: dict[str, int] = {}
    out = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if line.startswith("# "):
                parts = line.split()
                header[parts[1]] = int(parts[2])
            elif line.strip():
                try:
                    out.append(parse_line(line))
                except ValueError as e:
                    raise ValueError("%s:%d: %s" % (path, lineno, e))
    if "vcpus" not in header:
        raise ValueError("%s: no '# vcpus' line" % path)
    return header, out


@dataclasses.dataclass
class SmpRun:
    """One boot of test f under qemu-holds.c: what ran after the module
    started (region 1)."""
    alloc: str
    side: str
    mode: str
    run: int
    vcpus: int
    irq: Summary
    lock: Summary
    irq_any: Summary
    notes: dict[str, int]


def boot_holds(alloc: str, tree: str, side: str, mode: str, run: int,
               quick: bool, plugin: str) -> SmpRun:
    out_dir = kbuild.check_stamp(alloc, tree, "holds")
    system_map = os.path.join(out_dir, "System.map")
    tag = measure.bench_tag(TEST, quick, mode, run)
    path = os.path.join(BUILD, "holds", "%s-%s-%s.txt" % (tree, alloc, tag))
    syms = write_syms(system_map, path + ".syms", "holds")
    if os.path.exists(path):
        os.remove(path)
    res = boot.boot(alloc, tree, mode, [measure.BENCH_MODULE],
                    measure.bench_append(TEST, quick, mode),
                    timeout=BOOT_TIMEOUT, tag="holds-" + tag,
                    qemu_extra=["-plugin", "%s,out=%s,holds=%s" % (
                        plugin, path, syms)])
    assert res is not None
    if not os.path.exists(path):
        raise StageError("holds", "the QEMU plugin wrote nothing (%s)"
                         % rel(path), res.log)
    try:
        header, hs = read_holds(path)
    except ValueError as e:
        raise StageError("holds", str(e), res.log)
    sy = Symbols(system_map, out_dir)
    return SmpRun(alloc, side, mode, run, header["vcpus"],
                  summarize(select(hs, "irq", {1}, sy.is_allocator),
                            sy.name),
                  summarize(select(hs, "lock", {1}, sy.is_allocator),
                            sy.name),
                  summarize(select(hs, "irq", {1}), sy.name),
                  {k[6:]: v for k, v in header.items()
                   if k.startswith("holds_")})


def span(values: list[int]) -> str:
    """'a' or 'a–b': the range over the runs."""
    lo, hi = min(values), max(values)
    return "%d" % lo if lo == hi else "%d–%d" % (lo, hi)


def where(values: list[str]) -> str:
    return ", ".join(sorted({v for v in values if v})) or "-"


def render(cmd: str, runs: list[SmpRun]) -> tuple[str, dict[str, Any]]:
    md = ["# IRQ-off windows and allocator lock holds on two and four CPUs",
          "", "Command: `%s`" % cmd, "",
          "The benchmark's test f (%s) booted under multi-threaded TCG (no "
          "icount) with the QEMU plugin `harness/plugin/qemu-holds.c`, "
          "which follows each vCPU's IF and spinlocks from the "
          "instructions it runs (`harness/plugin/holds.h`). Lengths are "
          "the vCPU's own instructions, from the module's first "
          "instruction to the end of the boot. *IRQ-off*: from a cli made "
          "with IRQs on to the sti, popf, iretq or sysretq that turns them "
          "on, spinning for a lock inside it included; *lock holds*: from "
          "a spinlock's acquiring access to its releasing store, waiting "
          "excluded. Both the allocator's: those whose site (the function "
          "that called the spinlock function, or ran the cli) is in "
          "mm/slub.c, mm/slab.c or mm/slob.c (list_lock, SLAB's alien "
          "locks, SLOB's slob_lock, the per-CPU sections); the last "
          "columns give the longest IRQ-off window of any site for scale. "
          "Multi-threaded TCG is not deterministic, and its vCPU threads "
          "share the host's cores: a vCPU whose thread the host preempts "
          "while it holds a lock makes the others spin, so the longest "
          "IRQ-off windows vary from boot to boot. Each cell is the range "
          "over the boots (runs)."
          % registry.TESTS[TEST], "",
          "| allocator | CPUs | kernel | runs | IRQ-off windows | longest | "
          "p99 | where the longest starts | lock holds | longest | p99 | "
          "where the longest is taken | longest IRQ-off, any site | where |",
          "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---|"]
    groups: dict[tuple[str, str, str], list[SmpRun]] = {}
    for r in runs:
        groups.setdefault((r.alloc, r.mode, r.side), []).append(r)
    for (alloc, mode, side), rs in groups.items():
        md.append("| %s | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | "
                  "%s | %s | %s |" % (
                      alloc.upper(), rs[0].vcpus, side, len(rs),
                      span([r.irq.count for r in rs]),
                      span([r.irq.longest for r in rs]),
                      span([r.irq.p99 for r in rs]),
                      where([r.irq.where for r in rs]),
                      span([r.lock.count for r in rs]),
                      span([r.lock.longest for r in rs]),
                      span([r.lock.p99 for r in rs]),
                      where([r.lock.where for r in rs]),
                      span([r.irq_any.longest for r in rs]),
                      where([r.irq_any.where for r in rs])))
    notes = sorted({"%s %s %s run %d: %s" % (
        r.alloc, r.mode, r.side, r.run, ", ".join(
            "%s %d" % kv for kv in sorted(r.notes.items()) if kv[1]))
        for r in runs if any(r.notes.values())})
    md += ["", "State-machine notes (holds.h; a popf with no pushf before "
           "it, user code with a window open, a held lock pushed out): %s."
           % ("; ".join(notes) if notes else "none")]
    data = {"command": cmd, "runs": [{
        "alloc": r.alloc, "side": r.side, "mode": r.mode, "run": r.run,
        "vcpus": r.vcpus, "irq": r.irq.to_json(), "lock": r.lock.to_json(),
        "irq_any": r.irq_any.to_json(), "notes": r.notes} for r in runs]}
    return "\n".join(md), data


def check_args(args: argparse.Namespace) -> list[str]:
    allocs = [a for a in args.alloc.split(",") if a]
    bad = [a for a in allocs if a not in registry.ALLOCATORS]
    if bad:
        raise StageError("holds", "unknown allocator %s (%s)" % (
            bad[0], ", ".join(registry.ALLOCATORS)))
    return allocs


def modes(cpus: str) -> list[str]:
    """The boot modes of --cpus (a comma list of 2 and 4)."""
    return [mode for mode, n in MODES if str(n) in cpus.split(",")]


def main(args: argparse.Namespace) -> int:
    allocs = check_args(args)
    cmd = "./bulk holds --alloc %s --cpus %s --runs %d%s" % (
        ",".join(allocs), args.cpus, args.runs,
        " --quick" if args.quick else "")
    basetree.prepare("holds")
    if basetree.bench_patch() is None:
        raise StageError("holds", "the benchmark module (%s) is not in the "
                         "series yet" % measure.BENCH_FILE)
    plugin = profile.build_plugin(PLUGIN_SRC, PLUGIN, "holds")
    runs = []
    for alloc in allocs:
        for tr, side in profile.TREES:
            kbuild.build(alloc, tr)
            for mode in modes(args.cpus):
                for run in range(1, args.runs + 1):
                    runs.append(boot_holds(alloc, tr, side, mode, run,
                                           args.quick, plugin))
    md, data = render(cmd, runs)
    name = os.path.join(records.folder("bench", args.record),
                        "holds-%s%s%s" % (
                            "-".join(allocs), "" if args.cpus == CPUS else
                            "-cpus" + args.cpus.replace(",", ""),
                            "-quick" if args.quick else ""))
    records.publish("holds", name, md, data, args.record)
    return 0
