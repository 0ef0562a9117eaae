"""./bulk callers: where the bulk API really runs.  The kernel's own
callers of kmem_cache_alloc_bulk()/kmem_cache_free_bulk() in 6.1, driven
from user space and timed per operation on base and series.

The callers (build/linux; the series changes none of them):
  lib/maple_tree.c     mas_preallocate() asks for 1 + 3 * height nodes
                       before every change of a VMA tree (mmap, munmap,
                       mprotect, brk): mas_alloc_nodes() takes one with
                       kmem_cache_alloc() and the rest with
                       kmem_cache_alloc_bulk(); mas_destroy() gives back
                       what the store did not use with
                       kmem_cache_free_bulk().  The nodes a store replaces
                       are freed after a grace period (the mm's tree is in
                       RCU mode): one at a time (ma_free_rcu()), or a dead
                       subtree with kmem_cache_free_bulk() (mt_free_walk()).
  io_uring/io_uring.c  __io_alloc_req_refill(): 8 requests with
                       kmem_cache_alloc_bulk() when the ring's request cache
                       is empty.  Completed requests go back to that cache,
                       not to the slab, until the ring is freed: a ring
                       that has run a batch once runs the next without a
                       bulk call.
  kernel/rcu/tree.c    kfree_rcu_work(): kfree_bulk() of the pointers
                       kvfree_rcu() collected in a page, after a grace
                       period (KFREE_DRAIN_JIFFIES batches).  Reachable here
                       through kernfs: closing a sysfs attribute frees its
                       kernfs_open_node with kfree_rcu() (fs/kernfs/file.c).

The init runs the workloads (harness.callers, initramfs/init.c's header
says what each does and what its unit is) in exact mode, where TSC ticks
are instructions: the loops never leave the CPU idle, so the ticks are
the instructions of the loop, of the system calls and of whatever kernel
work ran inside the window (the kvfree_rcu() batches, a dying ring's
teardown).  Each kernel (configs/callers.config: the benchmark's SLUB
config with io_uring) is booted RUNS times; exact mode repeats bit for
bit, and the runs must agree.

The bulk calls per operation come from one more boot of each kernel with
configs/callers-count.config: kprobe events on kmem_cache_alloc_bulk()
and kmem_cache_free_bulk() (kfree_bulk() is an inline call of the latter)
with the return address and the object count, summed by hist triggers
keyed on the caller.  The init prints the hist files before and after
each timed loop; the difference is what the loop did.  That kernel's
ticks are not used (the probes cost instructions).

With --arch arm64 the same runs on arm64 kernels (slub-callers-arm64 and
slub-callers-count-arm64, QEMU virt): the init reads the generic timer's
counter, which ticks once per instruction there (arch.py), and the probes
read the object count and the return address from arm64's registers.
The record is callers-arm64.
"""
import argparse
import dataclasses
import math
import os
import re
import time

import arch
import basetree
import boot
import kbuild
import record
from common import StageError, rel, say

KIND = "bench"
NAME = "callers"
BASE_TREE = "linux-base"
KERNELS = ((BASE_TREE, "base"), ("linux", "series"))
CONFIG = "slub-callers"
COUNT_CONFIG = "slub-callers-count"
RUNS = 2


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    count: int
    unit: str
    what: str


# The init's workloads (harness.callers), in the order they run, and the
# units COUNT counts.  About 50 to 300 million instructions each.
WORKLOADS = (
    Workload("mmap", 4000, "mmap+munmap",
             "one page mapped and unmapped in the middle of a 3-page gap "
             "among 256 one-page mappings (a VMA tree of height 3): two "
             "ranges into a leaf and out again"),
    Workload("mprotect", 4000, "2 mprotect",
             "the middle page of a 3-page mapping made read-only (a split "
             "into three VMAs) and writable again (a merge), beside the "
             "same 256 mappings"),
    Workload("brk", 4000, "2 brk",
             "the heap grown by one page and shrunk back, beside the same "
             "256 mappings"),
    Workload("uring", 65536, "NOP",
             "IORING_OP_NOP, 256 per io_uring_enter() on one ring of 256 "
             "entries (its request cache warm)"),
    Workload("uring-new", 16384, "NOP",
             "the same with a new ring per 256 NOPs (setup, 2 mmaps, "
             "the batch, 2 munmaps, close): the request cache refilled "
             "8 at a time"),
    Workload("kfree_rcu", 20000, "open+close",
             "/sys/kernel/uevent_seqnum opened and closed: its "
             "kernfs_open_node freed with kfree_rcu()"),
)
TRACING = "/sys/kernel/debug/tracing"
# kprobe event -> (function, register of its object count).
PROBES = {"bulk_alloc": ("kmem_cache_alloc_bulk", "%dx"),
          "bulk_free": ("kmem_cache_free_bulk", "%si")}
# Per architecture: the registers of the object counts (the third and the
# second argument), and where the return address is at the function's
# entry (x86-64: the top of the stack; arm64: the link register).
ARCH_PROBES = {
    "x86_64": (PROBES, "$stack0"),
    "arm64": ({"bulk_alloc": ("kmem_cache_alloc_bulk", "%x2"),
               "bulk_free": ("kmem_cache_free_bulk", "%x1")}, "%lr"),
}
TIMING_RE = re.compile(r"^harness: callers name=(\S+) count=(\d+) tsc=(\d+)$",
                       re.M)
SNAP_RE = re.compile(r"^harness: callers snap (\S+) (before|after) "
                     r"%s/events/kprobes/(\w+)/hist: (.*)$"
                     % re.escape(TRACING), re.M)
# A hist trigger's line for one caller (keys=caller.sym-offset, vals=size).
HIST_RE = re.compile(r"^\{ caller: \[[0-9a-f]+\] +([\w.]+?)"
                     r"(?:\+0x[0-9a-f]+/0x[0-9a-f]+)?(?: \[\w+\])? *\} "
                     r"hitcount: +(\d+) +size: +(\d+)\s*$")
# The function a return address is in -> the caller it belongs to.
CALLER_PREFIXES = (("mas_", "maple"), ("mt_", "maple"), ("mtree_", "maple"),
                   ("__mt_", "maple"), ("__io_", "io_uring"),
                   ("io_", "io_uring"), ("kfree_rcu", "kvfree_rcu"))


def spec(workloads: tuple[Workload, ...] = WORKLOADS) -> str:
    return ",".join("%s:%d" % (w.name, w.count) for w in workloads)


def append(count: bool = False, a: arch.Arch = arch.X86_64) -> str:
    """The command line for the workloads; with count, the kprobe events
    and hist triggers first, and their hist files around each loop."""
    words = []
    if count:
        # The probe's fields: the return address (the top of the stack or
        # the link register at the function's entry) and the object count
        # (its size argument).
        probes, ret = ARCH_PROBES[a.name]
        words += ["harness.write=%s/kprobe_events:p:%s %s caller=%s:x64 "
                  "size=%s:u64" % (TRACING, event, func, ret, reg)
                  for event, (func, reg) in probes.items()]
        words += ["harness.write=%s/events/kprobes/%s/trigger:hist:"
                  "keys=caller.sym-offset:vals=size" % (TRACING, event)
                  for event in PROBES]
        words += ["harness.callers_snap=%s/events/kprobes/%s/hist"
                  % (TRACING, event) for event in PROBES]
    words.append("harness.callers=" + spec())
    # The init splits words at spaces; "%20" is a space in a value.
    return " ".join(w.replace(" ", "%20") for w in words)


@dataclasses.dataclass
class Run:
    tree: str
    label: str
    run: int
    log: str
    # workload -> (units, TSC ticks)
    ticks: dict[str, tuple[int, int]]

    def per_op(self, name: str) -> float:
        units, ticks = self.ticks[name]
        return ticks / units


def parse_timings(text: str, label: str, run: int, log: str,
                  workloads: tuple[Workload, ...] = WORKLOADS
                  ) -> dict[str, tuple[int, int]]:
    """{workload: (count, ticks)} from the init's 'harness: callers'
    lines; every workload must be there with the count asked for."""
    found = {}
    for m in TIMING_RE.finditer(text):
        found[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    for w in workloads:
        if w.name not in found:
            raise StageError("callers", "%s run %d: no 'harness: callers "
                             "name=%s' line in the log" % (label, run, w.name),
                             log)
        if found[w.name][0] != w.count:
            raise StageError("callers", "%s run %d: %s ran %d, asked for %d"
                             % (label, run, w.name, found[w.name][0], w.count),
                             log)
    return {w.name: found[w.name] for w in workloads}


def parse_hist(lines: list[str]) -> dict[str, tuple[int, int]]:
    """{function: (calls, objects)} of a hist file's lines, offsets within
    a function summed."""
    out: dict[str, tuple[int, int]] = {}
    for line in lines:
        m = HIST_RE.match(line.strip())
        if m:
            calls, objs = out.get(m.group(1), (0, 0))
            out[m.group(1)] = (calls + int(m.group(2)), objs + int(m.group(3)))
    return out


# workload -> {(event, function): (calls, objects)}
Counts = dict[str, dict[tuple[str, str], tuple[int, int]]]


def parse_counts(text: str, label: str, log: str,
                 workloads: tuple[Workload, ...] = WORKLOADS) -> Counts:
    """What each timed loop added to the hist triggers: the hist files
    printed after it less those printed before."""
    snaps: dict[tuple[str, str, str], list[str]] = {}
    for m in SNAP_RE.finditer(text):
        snaps.setdefault((m.group(1), m.group(2), m.group(3)), []).append(
            m.group(4))
    counts: Counts = {}
    for w in workloads:
        got: dict[tuple[str, str], tuple[int, int]] = {}
        for event in PROBES:
            if (w.name, "after", event) not in snaps:
                raise StageError("callers", "%s count run: no %s hist after "
                                 "%s in the log" % (label, event, w.name), log)
            before = parse_hist(snaps.get((w.name, "before", event), []))
            after = parse_hist(snaps[(w.name, "after", event)])
            for func, (calls, objs) in after.items():
                c0, o0 = before.get(func, (0, 0))
                if calls > c0:
                    got[(event, func)] = (calls - c0, objs - o0)
        counts[w.name] = got
    return counts


def caller_of(func: str) -> str:
    """The bulk API caller a return address's function belongs to."""
    for prefix, caller in CALLER_PREFIXES:
        if func.startswith(prefix):
            return caller
    return "other"


def num(x: float) -> str:
    """x to three significant digits, without an exponent."""
    if x == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(abs(x))))
    out = "%.*f" % (digits, x)
    return out.rstrip("0").rstrip(".") if "." in out else out


def describe(counts: dict[tuple[str, str], tuple[int, int]],
             units: int) -> str:
    """'alloc 2 calls x 9 objects (maple: mas_alloc_nodes); ...': calls per
    unit, objects per call."""
    if not counts:
        return "none"
    return "; ".join("%s %s calls x %s objects (%s: %s)" % (
        event.split("_")[1], num(calls / units), num(objs / calls),
        caller_of(func), func)
        for (event, func), (calls, objs) in sorted(counts.items()))


def check_repeat(runs: list[Run]) -> None:
    """The runs of one kernel tick the same on every workload, within
    0.5% (exact mode repeats bit for bit; a difference is reported)."""
    first = runs[0]
    for r in runs[1:]:
        for name, (units, ticks) in first.ticks.items():
            other = r.ticks[name][1]
            if abs(other - ticks) > 0.005 * min(other, ticks):
                raise StageError("callers", "%s: runs %d and %d differ on %s "
                                 "(%d and %d ticks); exact mode should "
                                 "repeat" % (first.label, first.run, r.run,
                                             name, ticks, other), r.log)


def spread(runs: list[Run], name: str) -> int:
    """Largest difference in ticks between runs of one kernel."""
    ticks = [r.ticks[name][1] for r in runs]
    return max(ticks) - min(ticks)


def markdown(runs: list[Run], counts: dict[str, Counts],
             command: str, a: arch.Arch = arch.X86_64) -> str:
    """The table (first run of each kernel), then what each workload is."""
    by_label: dict[str, list[Run]] = {}
    for r in runs:
        by_label.setdefault(r.label, []).append(r)
    base_runs, series_runs = by_label["base"], by_label["series"]
    md = ["# Where the bulk API really runs: its callers in the kernel",
          "",
          "`%s`: SLUB%s, base (build/linux-base) and series, configs %s; "
          "exact mode, instructions (%s) per unit; each kernel "
          "booted %d times (*runs differ*: largest difference between "
          "its runs, in ticks over the whole loop).  Bulk calls and objects "
          "per unit from one boot of %s (kprobe events, hist triggers); "
          "series shown%s.  The loops never leave the CPU idle: their "
          "ticks include the kernel work that ran inside them, deferred "
          "work included (kvfree_rcu()'s batches are freed by "
          "kfree_rcu_work() in a kworker; the objects a loop's batches "
          "free per unit fall short of one by the batch still pending "
          "when it ends)." % (
              command, "" if a == arch.X86_64 else " on " + a.name,
              a.config(CONFIG), "TSC ticks" if a == arch.X86_64 else
              "ticks of the generic timer's counter at 1 GHz, one per "
              "instruction under -icount shift=0",
              len(series_runs), a.config(COUNT_CONFIG),
              "" if not counts else
              (", base the same" if counts.get("base") == counts.get("series")
               else ", base's where they differ below")),
          "",
          "| workload | unit | per unit base | per unit series | series/base "
          "| runs differ (base / series) | bulk calls and objects per unit |",
          "|---|---|---:|---:|---:|---:|---|"]
    for w in WORKLOADS:
        b = base_runs[0].per_op(w.name)
        s = series_runs[0].per_op(w.name)
        c = counts.get("series", counts.get("base", {}))
        md.append("| %s | %s | %.1f | %.1f | %.4f | %d / %d | %s |" % (
            w.name, w.unit, b, s, s / b, spread(base_runs, w.name),
            spread(series_runs, w.name),
            describe(c.get(w.name, {}), w.count) if c else "not counted"))
    differ = [w for w in WORKLOADS if counts.get("base") and
              counts.get("series") and counts["base"].get(w.name) !=
              counts["series"].get(w.name)]
    if differ:
        md += ["", "Base's counts where they differ.  The calls the "
               "operations make themselves are the same; what moves is "
               "deferred work (RCU callbacks such as mt_free_walk(), "
               "kvfree_rcu()'s batches), which falls inside a loop or after "
               "it depending on the instructions run before:", ""]
        md += ["- %s: %s" % (w.name, describe(counts["base"].get(w.name, {}),
                                              w.count)) for w in differ]
    md += ["", "Workloads (initramfs/init.c, harness.callers):", ""]
    md += ["- **%s** (%d units): %s." % (w.name, w.count, w.what)
           for w in WORKLOADS]
    md += ["", "Logs: %s." % ", ".join(rel(r.log) for r in runs)]
    return "\n".join(md) + "\n"


def one(tree_name: str, label: str, run: int,
        a: arch.Arch = arch.X86_64) -> Run:
    res = boot.boot(a.config(CONFIG), tree_name, "exact", [], append(), 900,
                    tag="callers-run%d" % run)
    assert res is not None
    with open(res.log, errors="replace") as f:
        ticks = parse_timings(f.read(), label, run, res.log)
    r = Run(tree_name, label, run, res.log, ticks)
    say("callers %s run %d: %s" % (label, run, ", ".join(
        "%s %.0f" % (w.name, r.per_op(w.name)) for w in WORKLOADS)))
    return r


def one_count(tree_name: str, label: str,
              a: arch.Arch = arch.X86_64) -> tuple[Counts, str]:
    res = boot.boot(a.config(COUNT_CONFIG), tree_name, "exact", [],
                    append(True, a), 900,
                    tag="callers-count")
    assert res is not None
    with open(res.log, errors="replace") as f:
        counts = parse_counts(f.read(), label, res.log)
    for w in WORKLOADS:
        say("callers %s %s: %s" % (label, w.name,
                                   describe(counts[w.name], w.count)))
    return counts, res.log


def main(args: argparse.Namespace) -> int:
    start = time.time()
    a = arch.get(args.arch)
    config, count_config = a.config(CONFIG), a.config(COUNT_CONFIG)
    basetree.prepare("callers")
    runs: list[Run] = []
    counts: dict[str, Counts] = {}
    count_logs = []
    for tree_name, label in KERNELS:
        kbuild.build(config, tree_name, label="%s %s" % (config, label))
        mine = [one(tree_name, label, i, a) for i in range(1, RUNS + 1)]
        check_repeat(mine)
        runs += mine
        if not args.no_count:
            kbuild.build(count_config, tree_name,
                         label="%s %s" % (count_config, label))
            counts[label], log = one_count(tree_name, label, a)
            count_logs.append(log)
    command = "./bulk callers" + (" --no-count" if args.no_count else "") + (
        "" if a == arch.X86_64 else " --arch " + a.name)
    md = markdown(runs, counts, command, a)
    name = NAME + a.suffix
    out = record.folder(KIND, args.record)
    st = record.stamp()
    record.write_markdown(os.path.join(out, name + ".md"), md, st)
    record.write_json(os.path.join(out, name + ".json"), {
        "workloads": [dataclasses.asdict(w) for w in WORKLOADS],
        "runs": [dataclasses.asdict(r) for r in runs],
        "counts": {label: {name: [[event, func, calls, objs] for
                                  (event, func), (calls, objs) in sorted(
                                      got.items())]
                           for name, got in per.items()}
                   for label, per in counts.items()},
        "count_logs": count_logs}, st)
    print(md)
    say("callers: %s.md written in %s; done in %dm%02ds" % (
        name, record.where(args.record),
        *divmod(int(time.time() - start), 60)))
    return 0
