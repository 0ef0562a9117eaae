"""Costs that instruction counts cannot see (./bulk bench --costs).

The benchmark's figures are retired instructions per object: blind to
cache misses, locked instructions and the IRQ-flag instructions, which
cost a real core far more than one instruction's share.  This stage boots
each benchmark kernel (base and series) once more in exact mode with a
QEMU TCG plugin (harness/plugin/qemu-cost.c, built here with gcc) that
counts, inside the module's timed regions only: loads and stores, their
misses in a modeled L1D, L2 and LLC (harness/plugin/cachesim.h: LRU,
set-associative, an Intel Sapphire Rapids core's geometry by default),
locked instructions, cmpxchg16b, and cli, sti, pushf and popf.

Each timed region (a pair of the module's clock reads) is one line of the
plugin's output, with its instructions, which in exact mode equal the
module's clock delta.  The module's R lines are grouped and given their
phases as ./bulk profile does (profile.r_groups()); within a group's
phases each R line takes the consecutive regions whose instructions sum
to its cycles= exactly (one region for most variants, one per round for
those timed per round).  A line no such run of regions matches is shown
as unmatched, not guessed.

Per object the report gives those counts and a *modeled cost*:
instructions + the sum of events x weight, with a low and a high weight
per event (WEIGHTS, sources named there), so that a reader sees whether a
conclusion hangs on the weights.  It is a model, not cycles: no
out-of-order overlap beyond what the low band assumes, no prefetcher, no
instruction fetch, no other core.
"""
import argparse
import dataclasses
import os
from typing import Any

import bench
import benchparse
import holds as holdsmod
import kbuild
import profile
import measure
import record as records
from benchparse import Record
from common import BUILD, REPO, StageError, say

PLUGIN_SRC = os.path.join(REPO, "harness", "plugin", "qemu-cost.c")
PLUGIN = os.path.join(BUILD, "costs", "qemu-cost.so")
# The plugin's columns after PHASE and INSNS, in its order.  slab_insns
# (the instructions inside slab calls, with the plugin's slab=: ./bulk
# callers --costs) is a part of the instructions, not an event that costs
# more: WEIGHTS has no weight for it, and modeled() leaves it out.
EVENTS = ("loads", "stores", "lookups",
          "l1d_load_misses", "l2_load_misses", "llc_load_misses",
          "l1d_store_misses", "l2_store_misses", "llc_store_misses",
          "locked", "cmpxchg16b", "cmpxchg16b_locked",
          "cli", "sti", "pushf", "popf", "slab_insns")
TREES = profile.TREES
BOOT_TIMEOUT = 3600
# A kernel that boots on one CPU replaces its lock prefixes (and its
# modules') with DS prefixes (alternatives_smp_unlock()): keep them, as a
# machine with more than one CPU runs them.  The prefix is all that
# differs: the instructions are the same.
KEEP_LOCKS = "noreplace-smp"

# What each modeled event costs on top of its instructions, in cycles:
# (low, high).  High: the full load-to-use latency beyond an L1D hit, or
# an instruction's whole cost; low: what is left when an out-of-order core
# overlaps it with other work (independent misses in flight together, a
# store miss drained by the store buffer: stores' misses weigh 0 there).
# Sources:
#  [ORM] Intel 64 and IA-32 Architectures Optimization Reference Manual,
#        Golden Cove (Sapphire Rapids) core: L1D 5 cycles, L2 about 15-16
#        cycles load-to-use.
#  [CnC] chipsandcheese.com, "Sapphire Rapids: Golden Cove Hits the
#        Server" (2023), measured: LLC about 33 ns, DRAM about 110-130 ns
#        load-to-use, about 100 and 330-400 cycles at 3 GHz.
#  [AF]  Agner Fog, Instruction tables (Intel Skylake to Golden Cove
#        rows): a locked read-modify-write or xchg with memory about 18-20
#        cycles; cmpxchg16b about 15-25 with or without lock; popf tens of
#        cycles (microcoded; more when it changes IF, which the plugin
#        cannot see: every popf weighs as one that does); cli and sti a
#        few; pushf 1-3.
WEIGHTS: dict[str, tuple[float, float]] = {
    "l2_load_hits": (5, 11),        # [ORM]
    "llc_load_hits": (30, 100),     # [CnC]
    "dram_loads": (150, 350),       # [CnC]
    "l2_store_hits": (0, 11),       # [ORM], store buffer
    "llc_store_hits": (0, 100),     # [CnC], store buffer
    "dram_stores": (0, 350),        # [CnC], store buffer
    "locked": (15, 25),             # [AF]
    "cmpxchg16b": (10, 25),         # [AF]
    "cmpxchg16b_locked": (18, 30),  # [AF]
    "cli": (2, 8),                  # [AF]
    "sti": (2, 8),                  # [AF]
    "pushf": (1, 3),                # [AF]
    "popf": (10, 25),               # [AF]
}
SOURCES = ("[ORM] Intel 64 and IA-32 Architectures Optimization Reference "
           "Manual (Golden Cove: L1D 5, L2 about 15-16 cycles); [CnC] "
           "chipsandcheese.com, 'Sapphire Rapids: Golden Cove Hits the "
           "Server' (LLC about 33 ns, DRAM about 110-130 ns); [AF] Agner "
           "Fog, Instruction tables (locked RMW about 18-20 cycles, "
           "cmpxchg16b, popf, cli, sti, pushf)")


@dataclasses.dataclass
class Region:
    """One timed region: the phase it ran in, its instructions and events,
    and its number (1-based, the plugin's order: holds' REGION)."""
    phase: int
    insns: int
    events: dict[str, int]
    index: int = 0


@dataclasses.dataclass
class CostCounts:
    """The plugin's output."""
    header: dict[str, int]
    addresses: str
    caches: list[tuple[str, int, int, int]]   # name, bytes, ways, sets
    regions: list[Region]
    holds: list[holdsmod.Hold] = dataclasses.field(default_factory=list)

    def geometry(self) -> str:
        return "; ".join("%s %s %d-way (%d sets)" % (
            name.upper(), size_text(size), ways, sets)
            for name, size, ways, sets in self.caches) + \
            "; %d-byte lines; %s addresses" % (self.header["line"],
                                               self.addresses)


def size_text(n: int) -> str:
    if n % (1 << 20) == 0:
        return "%d MiB" % (n >> 20)
    if n % (1 << 10) == 0:
        return "%d KiB" % (n >> 10)
    return "%d bytes" % n


def read_costs(path: str) -> CostCounts:
    header: dict[str, int] = {}
    addresses = ""
    caches = []
    regions: list[Region] = []
    holds: list[holdsmod.Hold] = []
    columns = ["phase", "insns"] + list(EVENTS)
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if line.startswith("hold "):
                try:
                    holds.append(holdsmod.parse_line(line))
                except ValueError as e:
                    raise ValueError("%s:%d: %s" % (path, lineno, e))
                continue
            if line.startswith("# "):
                key = parts[1]
                if key == "columns":
                    if parts[2:] != columns:
                        raise ValueError("%s:%d: columns %s, not %s" % (
                            path, lineno, " ".join(parts[2:]),
                            " ".join(columns)))
                elif key == "cache":
                    caches.append((parts[2], int(parts[3]), int(parts[4]),
                                   int(parts[5])))
                elif key == "addresses":
                    addresses = parts[2]
                else:
                    header[key] = int(parts[2])
                continue
            if len(parts) != len(columns) or not all(
                    p.isdigit() for p in parts):
                raise ValueError("%s:%d: not %d numbers (%s)" % (
                    path, lineno, len(columns), " ".join(columns)))
            nums = [int(p) for p in parts]
            regions.append(Region(nums[0], nums[1],
                                  dict(zip(EVENTS, nums[2:])),
                                  len(regions) + 1))
    profile.check_header(path, header)
    if len(caches) != 3 or not addresses or "line" not in header or \
            "virtual_fallbacks" not in header:
        raise ValueError("%s: no cache geometry lines" % path)
    return CostCounts(header, addresses, caches, regions, holds)


@dataclasses.dataclass
class Measured:
    """An R line and the timed regions whose instructions make its
    cycles= (regions == 0: none matched)."""
    record: Record
    regions: int
    insns: int
    events: dict[str, int]
    # IRQ-off windows (the allocator's; any site's) and allocator lock
    # holds that started in its regions
    irq: holdsmod.Summary = dataclasses.field(
        default_factory=holdsmod.Summary)
    irq_any: holdsmod.Summary = dataclasses.field(
        default_factory=holdsmod.Summary)
    lock: holdsmod.Summary = dataclasses.field(
        default_factory=holdsmod.Summary)

    def per_obj(self, value: float) -> float:
        return value / self.record.objs

    def modeled(self, band: int) -> float:
        """Modeled cost per object (modeled())."""
        return modeled(self.insns, self.events, self.record.objs, band)


def derived(events: dict[str, int]) -> dict[str, int]:
    """The events and, per level, the misses the next level served."""
    e = dict(events)
    for kind in ("load", "store"):
        l1, l2, llc = (e["%s_%s_misses" % (lvl, kind)]
                       for lvl in ("l1d", "l2", "llc"))
        e["l2_%s_hits" % kind] = l1 - l2
        e["llc_%s_hits" % kind] = l2 - llc
        e["dram_%ss" % kind] = llc
    return e


def modeled(insns: int, events: dict[str, int], units: int,
            band: int) -> float:
    """Modeled cost per unit (an object here, a workload's unit for
    ./bulk callers --costs): instructions + events x weights, with the low
    (band 0) or high (band 1) weights."""
    e = derived(events)
    return (insns + sum(e[k] * w[band] for k, w in WEIGHTS.items())) / units


def match_segments(regions: list[Region], records: list[Record]) -> list[
        list[Region] | None]:
    """For each record, the earliest run of consecutive unused regions
    whose instructions sum to its cycles exactly, or None."""
    prefix = [0]
    for r in regions:
        prefix.append(prefix[-1] + r.insns)
    # Every region has instructions (at least the closing clock read), so
    # the prefix sums rise and each has one position.
    where = {p: i for i, p in enumerate(prefix)}
    used = [False] * len(regions)
    out: list[list[Region] | None] = []
    for rec in records:
        found = None
        for i in range(len(regions)):
            j = where.get(prefix[i] + rec.cycles)
            if j is not None and j > i and not any(used[i:j]):
                found = (i, j)
                break
        if found is None:
            out.append(None)
            continue
        i, j = found
        for k in range(i, j):
            used[k] = True
        out.append(regions[i:j])
    return out


def measured(console: str, counts: CostCounts,
             syms: holdsmod.Symbols | None = None) -> list[Measured]:
    """Every R line of the console with its regions' counts summed, and
    (with @syms) the IRQ-off windows and allocator lock holds that started
    in them."""
    out = []
    for group, first, last in profile.r_groups(console, counts.header[
            "phases"], through_last=True):
        regions = [r for r in counts.regions if first <= r.phase <= last]
        for rec, seg in zip(group, match_segments(regions, group)):
            events = {k: sum(r.events[k] for r in seg or []) for k in EVENTS}
            m = Measured(rec, len(seg or []),
                         sum(r.insns for r in seg or []), events)
            if syms is not None and seg:
                idx = {r.index for r in seg}
                m.irq = holdsmod.summarize(holdsmod.select(
                    counts.holds, "irq", idx, syms.is_allocator), syms.name)
                m.irq_any = holdsmod.summarize(holdsmod.select(
                    counts.holds, "irq", idx), syms.name)
                m.lock = holdsmod.summarize(holdsmod.select(
                    counts.holds, "lock", idx, syms.is_allocator), syms.name)
            out.append(m)
    return out


def boot_costs(alloc: str, tree: str, letters: str, quick: bool,
               plugin: str, out_path: str) -> tuple[str, CostCounts,
                                                    list[Measured]]:
    """Boot a built kernel with the module and the plugin; its console,
    the plugin's counts (written to @out_path) and the R lines'."""
    out_dir = kbuild.check_stamp(alloc, tree, "costs")
    system_map = os.path.join(out_dir, "System.map")
    syms_path = holdsmod.write_syms(system_map, out_path + ".syms", "costs")
    console, log = profile.plugin_boot(
        "costs", alloc, tree, measure.bench_append(letters, quick) + " " +
        KEEP_LOCKS,
        "costs-" + measure.bench_tag(letters, quick, "exact"), BOOT_TIMEOUT,
        plugin, out_path, "holds=" + syms_path)
    try:
        counts = read_costs(out_path)
        return console, counts, measured(
            console, counts, holdsmod.Symbols(system_map, out_dir))
    except ValueError as e:
        raise StageError("costs", str(e), log)


def compare_runs(plain: list[Record], here: list[Record]) -> str:
    """How this boot's R lines compare with ./bulk bench's."""
    if [r.to_json() for r in plain] == [r.to_json() for r in here]:
        return "the same R lines as ./bulk bench's"
    keys = [(r.test, r.variant, r.n) for r in plain]
    if keys != [(r.test, r.variant, r.n) for r in here]:
        return "**other** R lines than ./bulk bench's"
    worst = max((abs(b.cycles - a.cycles) / a.cycles
                 for a, b in zip(plain, here) if a.cycles), default=0.0)
    fields = sorted({k for a, b in zip(plain, here)
                     for k, v in a.to_json().items() if b.to_json()[k] != v})
    return ("the R lines of ./bulk bench with other %s, instruction counts "
            "within %.2f%% of them (noreplace-smp changes the boot, and "
            "with it where timer interrupts land)" % (
                ", ".join(fields), 100 * worst))


def fmt(x: float) -> str:
    return "%.0f" % x if abs(x) >= 100 else "%.1f" % x if abs(x) >= 10 \
        else "%.2f" % x


# The table's columns: a heading and the events whose counts per object
# a cell shows, joined by '+' (their parts, not a sum).
COLUMNS = (
    ("instructions", ("insns",)),
    ("loads+stores", ("loads", "stores")),
    ("L1D misses ld+st", ("l1d_load_misses", "l1d_store_misses")),
    ("L2 misses ld+st", ("l2_load_misses", "l2_store_misses")),
    ("LLC misses ld+st", ("llc_load_misses", "llc_store_misses")),
    ("locked", ("locked",)),
    ("cmpxchg16b +locked", ("cmpxchg16b", "cmpxchg16b_locked")),
    ("cli+sti", ("cli", "sti")),
    ("pushf+popf", ("pushf", "popf")),
)


def cell(m: Measured, events: tuple[str, ...]) -> str:
    return "+".join(fmt(m.per_obj(m.insns if e == "insns" else m.events[e]))
                    for e in events)


def alloc_tables(alloc: str, sides: dict[str, list[Measured]]) -> tuple[
        list[str], list[dict[str, Any]]]:
    """The markdown tables of one allocator, base vs series, and its
    rows for the JSON."""
    base, series = sides["base"], sides["series"]
    keys = [(m.record.test, m.record.variant, m.record.n) for m in base]
    if keys != [(m.record.test, m.record.variant, m.record.n)
                for m in series]:
        raise StageError("costs", "%s: base and series printed different R "
                         "lines" % alloc)
    md: list[str] = []
    rows: list[dict[str, Any]] = []
    test = None
    for b, s in zip(base, series):
        r = b.record
        if r.test != test:
            test = r.test
            md += ["", "### %s, test %s: per object, base / series" % (
                alloc.upper(), test), "",
                "| variant | N | " + " | ".join(c for c, _ in COLUMNS) +
                " | modeled cost base | modeled cost series | series/base |",
                "|---|---:|" + "---:|" * (len(COLUMNS) + 3)]
        if not b.regions or not s.regions:
            md.append("| %s | %d | %s |" % (r.variant, r.n, " | ".join(
                ["unmatched: no run of timed regions sums to the R line's "
                 "cycles"] + [""] * (len(COLUMNS) + 2))))
            rows.append({"test": r.test, "variant": r.variant, "n": r.n,
                         "matched": False})
            continue
        lo = [m.modeled(0) for m in (b, s)]
        hi = [m.modeled(1) for m in (b, s)]
        md.append("| %s | %d | %s | %s–%s | %s–%s | %.2f–%.2f |" % (
            r.variant, r.n, " | ".join(
                "%s / %s" % (cell(b, get), cell(s, get))
                for _, get in COLUMNS),
            fmt(lo[0]), fmt(hi[0]), fmt(lo[1]), fmt(hi[1]),
            min(lo[1] / lo[0], hi[1] / hi[0]),
            max(lo[1] / lo[0], hi[1] / hi[0])))
        rows.append({"test": r.test, "variant": r.variant, "n": r.n,
                     "matched": True, **{side: {
                         "objs": m.record.objs, "regions": m.regions,
                         "instructions": m.insns, "events": m.events,
                         "modeled_low": round(m.modeled(0), 2),
                         "modeled_high": round(m.modeled(1), 2)}
                         for side, m in (("base", b), ("series", s))}})
    return md, rows


def holds_cell(b: holdsmod.Summary, s: holdsmod.Summary,
               field: str) -> str:
    return "%s / %s" % (getattr(b, field) or "-", getattr(s, field) or "-")


# The holds tables' columns: a heading, the Measured field and the
# Summary field a cell shows, base / series.
HOLD_COLUMNS = (
    ("IRQ-off windows", "irq", "count"), ("longest", "irq", "longest"),
    ("p99", "irq", "p99"), ("where the longest starts", "irq", "where"),
    ("lock holds", "lock", "count"), ("longest", "lock", "longest"),
    ("p99", "lock", "p99"), ("where the longest is taken", "lock", "where"),
    ("longest IRQ-off, any site", "irq_any", "longest"),
    ("where", "irq_any", "where"),
)


def holds_tables(alloc: str, sides: dict[str, list[Measured]]) -> tuple[
        list[str], list[str]]:
    """Per test, the allocator's IRQ-off windows and lock holds that
    started in each row's timed regions, and the longest IRQ-off window
    of any site, base / series; and a sentence for each row where the
    series' longest allocator window or hold is longer than base's, by
    kind and the function it starts in: how many rows, and the largest
    growth."""
    md: list[str] = []
    longer: list[str] = []
    grown: list[tuple[str, str, int, str]] = []
    test = None
    for b, s in zip(sides["base"], sides["series"]):
        r = b.record
        if r.test != test:
            test = r.test
            md += ["", "### %s, test %s: IRQ-off windows and lock holds, in "
                   "instructions, base / series" % (alloc.upper(), test), "",
                   "| variant | N | " + " | ".join(
                       h for h, _, _ in HOLD_COLUMNS) + " |",
                   "|---|---:|" + "".join(
                       "---|" if f == "where" else "---:|"
                       for _, _, f in HOLD_COLUMNS)]
        if not b.regions or not s.regions:
            md.append("| %s | %d | unmatched |%s" % (
                r.variant, r.n, "|" * (len(HOLD_COLUMNS) - 1)))
            continue
        md.append("| %s | %d | %s |" % (r.variant, r.n, " | ".join(
            holds_cell(getattr(b, m), getattr(s, m), f)
            for _, m, f in HOLD_COLUMNS)))
        for what, x, y in (("IRQ-off window", b.irq, s.irq),
                           ("lock hold", b.lock, s.lock)):
            if y.longest > x.longest:
                grown.append((what, y.where, y.longest - x.longest,
                              "test %s %s N=%d: %d -> %d" % (
                                  r.test, r.variant, r.n, x.longest,
                                  y.longest)))
    # One sentence per kind and site: how many rows, and the largest.
    groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for what, site, more, text in grown:
        groups.setdefault((what, site), []).append((more, text))
    for (what, site), items in groups.items():
        more, text = max(items)
        longer.append("the %s in %s, %d row%s, most at %s" % (
            what, site, len(items), "" if len(items) == 1 else "s", text))
    return md, longer


def report(allocs: list[str], cmd: str, runs: dict[str, dict[str, list[
        Measured]]], geometry: str, notes: dict[str, list[str]]) -> tuple[
        str, dict[str, Any]]:
    """The markdown and the JSON of the run; @notes: per allocator, what
    its boots showed besides the counts (sentences)."""
    md = ["# Slab bulk benchmark: costs that instruction counts cannot see",
          "", "Command: `%s`" % cmd, "",
          "Per object, inside the benchmark's timed regions, base / series: "
          "the instructions (the benchmark's own figure), loads and "
          "stores, their misses in a modeled cache (%s; LRU, "
          "write-allocate, loads and stores alike, no prefetcher; default: "
          "an Intel Sapphire Rapids core), locked instructions (lock "
          "prefix, xchg with memory), cmpxchg16b unlocked (locked), and "
          "the IRQ-flag instructions; QEMU TCG plugin "
          "`harness/plugin/qemu-cost.c`, exact mode, see harness/costs.py. "
          "The kernels boot with `%s`: on one CPU a kernel otherwise turns "
          "its lock prefixes into DS prefixes, and no locked instruction "
          "would be seen." % (geometry, KEEP_LOCKS), "",
          "**Modeled cost** = instructions + sum of events x weight, with "
          "the low and the high weights below: a model, not cycles. An "
          "L1D miss that hits L2, an L2 miss that hits the LLC and an LLC "
          "miss weigh as below, loads and stores apart (a store buffer "
          "hides a store miss: its low weight is 0). series/base gives the "
          "range over both bands: a conclusion that holds at both ends "
          "does not hang on the weights.", "",
          "**IRQ-off windows** run from a cli made with IRQs on to the "
          "sti, popf, iretq or sysretq that turns them on again, as the "
          "plugin follows IF from the instructions (harness/plugin/holds.h: "
          "interrupt and syscall entries clear IF without opening a "
          "window); **lock holds** from a spinlock's acquiring access to "
          "the store that releases it. Both count for the row whose timed "
          "regions they start in, in instructions, with the 99th "
          "percentile by nearest rank. The allocator's are those whose "
          "site (the function that called the spinlock function, or ran "
          "the cli) is in mm/slub.c, mm/slab.c or mm/slob.c: list_lock, "
          "SLAB's alien locks, SLOB's slob_lock, and the per-CPU sections; "
          "the last two columns give the longest window of any site (the "
          "page allocator's, a timer's) for scale.", "",
          "| event | low | high |", "|---|---:|---:|"]
    md += ["| %s | %g | %g |" % (k, lo, hi) for k, (lo, hi) in WEIGHTS.items()]
    md += ["", "Weights' sources: %s." % SOURCES]
    data: dict[str, Any] = {"command": cmd, "geometry": geometry,
                            "weights": {k: list(v) for k, v in
                                        WEIGHTS.items()},
                            "sources": SOURCES, "allocators": {}}
    for alloc in allocs:
        tables, rows = alloc_tables(alloc, runs[alloc])
        matched = sum(1 for r in rows if r["matched"])
        md += ["", "## %s" % alloc.upper(), "",
               " ".join(["%d of %d R lines matched to timed regions whose "
                         "instructions sum to their cycles= exactly."
                         % (matched, len(rows))] + notes[alloc])]
        md += tables
        htables, longer = holds_tables(alloc, runs[alloc])
        md += htables
        md += ["", "Where the series' longest allocator IRQ-off window or "
               "lock hold is longer than base's (base -> series, "
               "instructions): %s." % ("; ".join(longer) if longer
                                       else "nowhere")]
        for row, b, s in zip(rows, runs[alloc]["base"],
                             runs[alloc]["series"]):
            if row["matched"]:
                for side, m in (("base", b), ("series", s)):
                    row[side].update({f: getattr(m, f).to_json() for f in (
                        "irq", "irq_any", "lock")})
        data["allocators"][alloc] = {"rows": rows, "notes": notes[alloc],
                                     "holds_longer": longer}
    return "\n".join(md), data


def main(args: argparse.Namespace) -> int:
    """./bulk bench --costs, after ./bulk bench has built and booted the
    kernels: boot each once more with the plugin."""
    allocs, tests = bench.check_args(args)
    letters = "".join(t for mode, t in measure.runs(tests) if mode == "exact")
    if not letters:
        say("costs: no exact-mode test among %s; nothing to count" % tests)
        return 0
    plugin = profile.build_plugin(PLUGIN_SRC, PLUGIN, "costs")
    runs: dict[str, dict[str, list[Measured]]] = {}
    notes: dict[str, list[str]] = {}
    geometry = ""
    for alloc in allocs:
        runs[alloc] = {}
        notes[alloc] = []
        for tr, side in TREES:
            counts_path = os.path.join(BUILD, "costs", "%s-%s-%s%s.txt" % (
                tr, alloc, letters, "-quick" if args.quick else ""))
            console, counts, runs[alloc][side] = boot_costs(
                alloc, tr, letters, args.quick, plugin, counts_path)
            geometry = counts.geometry()
            # The plugin must not change what the guest runs; noreplace-smp
            # changes the boot a little, and with it where timer interrupts
            # land in the timed regions.
            plain = measure.load_run(alloc, tr, letters, args.quick, "exact")
            notes[alloc].append(
                "The %s kernel's boot with the plugin printed %s; %d "
                "accesses of the whole boot had no RAM address (MMIO) and "
                "were modeled at their virtual address." % (
                    side, compare_runs(plain.results, benchparse.parse(
                        console).results),
                    counts.header["virtual_fallbacks"]))
    cmd = "./bulk bench --alloc %s --tests %s%s --costs" % (
        ",".join(allocs), tests, " --quick" if args.quick else "")
    md, data = report(allocs, cmd, runs, geometry, notes)
    record = args.record
    name = os.path.join(records.folder("bench", record),
                        bench.report_name(allocs, args.quick) + "-costs")
    records.publish("costs", name, md, data, record)
    return 0
