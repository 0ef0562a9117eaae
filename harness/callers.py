"""./bulk callers: where the bulk API really runs.  The kernel's own
callers of kmem_cache_alloc_bulk()/kmem_cache_free_bulk() in 6.1, driven
from user space and timed per operation on base and series.

The callers (build/linux; the series changes none of them, but frees
the qdisc drops' shells and kmalloc()ed heads in bulk):
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
  net/bpf/test_run.c   xdp_recv_frames(): the sk_buffs (shells) of a batch
                       of XDP_PASS frames (64 by default) with
                       kmem_cache_alloc_bulk(), in the test run's
                       live-frames mode; 6.1's other such callers (veth's
                       XDP receive, cpumap) do the same for redirected
                       frames.
  net/core/dev.c       __dev_xmit_skb(): what a qdisc dropped on enqueue
                       (its to_free list) freed with kfree_skb_list_reason(),
                       one kfree_skb() per sk_buff in 6.1, the heads in
                       bulk with the series.
  net/sched/sch_fq.c   fq_gc(): the flows that have been idle for 3 s
                       found on the way down to a new flow's place in its
                       tree, up to 8, with kmem_cache_free_bulk().

The init runs the workloads (harness.callers, initramfs/init.c's header
says what each does and what its unit is) in exact mode, where TSC ticks
are instructions: the loops never leave the CPU idle, so the ticks are
the instructions of the loop, of the system calls and of whatever kernel
work ran inside the window (the kvfree_rcu() batches, a dying ring's
teardown).  Before each loop the init idles half a second of guest time
(which -icount with sleep=off skips), so that the deferred work of the
warm-up and of the workloads before has run and a loop's figure does not
depend on the order.  Each kernel (configs/callers.config: the
benchmark's SLUB config with io_uring and the network's pieces) is
booted RUNS times; exact mode repeats bit for bit, and the runs must
agree.

The bulk calls per operation come from one more boot of each kernel with
configs/callers-count.config: kprobe events on kmem_cache_alloc_bulk()
and kmem_cache_free_bulk() (kfree_bulk() is an inline call of the latter)
with the return address and the object count, summed by hist triggers
keyed on the caller.  The init prints the hist files before and after
each timed loop; the difference is what the loop did.  That kernel's
ticks are not used (the probes cost instructions).

With --costs each kernel boots once more, after its plain runs, in exact
mode under the QEMU TCG plugin of ./bulk bench --costs
(harness/plugin/qemu-cost.c, harness/costs.py) with clock=user: its timed
regions open and close at the clock reads of user space, and the init's
only ones in such a boot are callers_one()'s two around each workload's
loop, so region k is workload k.  A region's instructions must be the
ticks the init printed for its workload in that boot (exact mode: the TSC
counts instructions); a region more or less, or other instructions, fail
the run rather than pair regions and workloads otherwise.  They are not
checked against the kernel's plain run 1: the plugin boot keeps the lock
prefixes (costs.KEEP_LOCKS, as ./bulk bench --costs does), which changes
the boot, and with it some loops' ticks (by up to 2%, uring-new's, in
boots of the base kernel with small counts; the plugin itself changes
none: a boot with noreplace-smp and no plugin ticked as the plugin boot
did).  The report says how far they are from run 1's.  Per unit, it gives the modeled cost
(instructions + events x costs.WEIGHTS, low and high band) and the events
behind it; and the instructions inside slab calls (SLAB_ENTRIES, from the
kernel's System.map, the plugin's slab=) per unit and as a share of the
loop's.

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
from typing import Any

import arch
import basetree
import boot
import costs
import kbuild
import profile
import record
from common import BUILD, StageError, rel, say

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
# units COUNT counts.  About 50 to 300 million instructions each.  The
# network ones first: a BPF test run stops with EINTR when task work is
# queued for the init (signal_pending()), as io_uring's ring teardown,
# which runs in a kworker after the uring workloads, may queue it.
WORKLOADS = (
    Workload("xdp", 65536, "frame",
             "64-byte UDP frames through an XDP program that returns "
             "XDP_PASS, 4096 per BPF_PROG_TEST_RUN in live-frames mode: "
             "the test run allocates each batch's sk_buffs (shells) with "
             "kmem_cache_alloc_bulk() (xdp_recv_frames()) and hands them "
             "to the stack on the loopback, where IP drops them as not "
             "for this host (kfree_skb(); 6.1 took each page out of the "
             "page_pool when it built the sk_buff, so the page goes to "
             "the page allocator and each batch takes 64 new pages)"),
    Workload("qdisc-one", 32768, "frame",
             "64-byte frames sent on dummy0 through an AF_PACKET socket "
             "into a tbf (8 bytes/s) whose bfifo child holds 8 KiB: every "
             "frame that arrives at the full bfifo is dropped, "
             "kfree_skb_list_reason() of a list of one (the init checks "
             "that the qdisc refused every timed frame)"),
    Workload("qdisc-batch", 32768, "frame",
             "the same with an fq_codel (limit 128) under the tbf: it "
             "drops 64 frames of its one flow at a time, "
             "kfree_skb_list_reason() of a list of 64 (the init checks "
             "that it took every timed frame)"),
    Workload("fq-gc", 4096, "datagram",
             "UDP datagrams, each to a new destination, through an fq "
             "(2 flow trees) on dummy0 that holds 65536 flows idle for "
             "3.5 s: each new flow's lookup frees the idle flows on its "
             "way down the tree, up to 8, with kmem_cache_free_bulk() "
             "(fq_gc(); the init checks that fq held 65536 flows and had "
             "freed none before the loop, and that it freed 4 or more "
             "per datagram on average in it)"),
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
# What counts as a slab call for --costs' share of the instructions in
# the slab API: a call of one of these functions (include/linux/slab.h's
# out-of-line API in 6.1: its inline functions, kmalloc(), kzalloc(),
# kfree_bulk(), kmem_cache_zalloc(), come down to them), from its entry
# until it returns, with everything it calls (SLUB's own functions, the
# page allocator, memcg's charging) and the interrupts taken meanwhile.
# A slab call made inside another counts once.  A kernel's System.map
# lacks some by config (SLOB has no kmalloc_trace()): those are left
# out, but not SLAB_REQUIRED.
SLAB_ENTRIES = ("kmem_cache_alloc", "kmem_cache_alloc_lru",
                "kmem_cache_alloc_node", "kmem_cache_free",
                "kmem_cache_alloc_bulk", "kmem_cache_free_bulk", "kfree",
                "__kmalloc", "__kmalloc_node", "__kmalloc_node_track_caller",
                "kmalloc_trace", "kmalloc_node_trace", "kmalloc_large",
                "kmalloc_large_node", "krealloc", "kfree_sensitive")
SLAB_REQUIRED = ("kmem_cache_alloc", "kmem_cache_free",
                 "kmem_cache_alloc_bulk", "kmem_cache_free_bulk", "kfree")
# The function a return address is in -> the caller it belongs to.
CALLER_PREFIXES = (("mas_", "maple"), ("mt_", "maple"), ("mtree_", "maple"),
                   ("__mt_", "maple"), ("__io_", "io_uring"),
                   ("io_", "io_uring"), ("kfree_rcu", "kvfree_rcu"),
                   ("xdp_", "BPF test run"),
                   ("bpf_test_run", "BPF test run"), ("kfree_skb_list", "skb list"),
                   ("napi_", "NAPI skb cache"),
                   # fq_gc() is inlined there; not "fq_": fq_codel_*
                   ("fq_enqueue", "sch_fq"))


def spec(workloads: tuple[Workload, ...] = WORKLOADS) -> str:
    return ",".join("%s:%d" % (w.name, w.count) for w in workloads)


def append(count: bool = False, a: arch.Arch = arch.X86_64,
           workloads: tuple[Workload, ...] = WORKLOADS) -> str:
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
    words.append("harness.callers=" + spec(workloads))
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


@dataclasses.dataclass
class CostRun:
    """A kernel's boot under the cost plugin: each workload's timed
    region, the plugin's cache geometry, and its '# slab_*' lines (how it
    followed the slab calls)."""
    tree: str
    label: str
    log: str
    geometry: str
    regions: dict[str, costs.Region]
    slab: dict[str, int] = dataclasses.field(default_factory=dict)

    def per_unit(self, w: Workload, event: str) -> float:
        return self.regions[w.name].events[event] / w.count

    def modeled(self, w: Workload, band: int) -> float:
        r = self.regions[w.name]
        return costs.modeled(r.insns, r.events, w.count, band)

    def slab_share(self, w: Workload) -> float:
        """The loop's instructions inside slab calls, over all of them
        (every region has some: at least its closing clock read)."""
        r = self.regions[w.name]
        return r.events["slab_insns"] / r.insns


def write_slab_entries(system_map: str, out: str) -> str:
    """The addresses of SLAB_ENTRIES in @system_map (text symbols), one
    hex address a line, for the plugin's slab=; a StageError when one of
    SLAB_REQUIRED is not there."""
    found: dict[str, int] = {}
    for addr, name in zip(*profile.read_symbols(system_map)):
        if name in SLAB_ENTRIES:
            found.setdefault(name, addr)
    missing = [name for name in SLAB_REQUIRED if name not in found]
    if missing:
        raise StageError("callers", "%s has no %s: no slab calls to follow"
                         % (rel(system_map), ", ".join(missing)))
    with open(out, "w") as f:
        f.write("".join("%x\n" % found[name] for name in SLAB_ENTRIES
                        if name in found))
    return out


def assign(regions: list[costs.Region], ticks: dict[str, tuple[int, int]],
           log: str, workloads: tuple[Workload, ...] = WORKLOADS
           ) -> dict[str, costs.Region]:
    """{workload: its region}: region k is workload k, whose instructions
    must be the @ticks the init printed for it in the same boot.  Anything
    else (a region more or less, other instructions) is a StageError
    naming @log, not a pairing guessed otherwise."""
    if len(regions) != len(workloads):
        raise StageError("callers", "the plugin counted %d timed regions "
                         "for %d workloads (%s): the init's clock reads "
                         "are not two per workload" % (
                             len(regions), len(workloads),
                             ", ".join(w.name for w in workloads)), log)
    for k, (r, w) in enumerate(zip(regions, workloads), 1):
        if r.insns != ticks[w.name][1]:
            raise StageError("callers", "timed region %d has %d "
                             "instructions, but the init printed tsc=%d for "
                             "workload %d, %s: the region is not its loop"
                             % (k, r.insns, ticks[w.name][1], k, w.name), log)
    return {w.name: r for w, r in zip(workloads, regions)}


# The cost table's events per unit: a heading and the events a cell
# joins with '+' (their parts, not a sum), as costs.COLUMNS has them.
COST_COLUMNS = (
    ("loads", ("loads",)),
    ("L1D load misses", ("l1d_load_misses",)),
    ("L2 load misses", ("l2_load_misses",)),
    ("LLC load misses", ("llc_load_misses",)),
    ("locked", ("locked",)),
    ("cmpxchg16b +locked", ("cmpxchg16b", "cmpxchg16b_locked")),
    ("cli+sti", ("cli", "sti")),
    ("pushf+popf", ("pushf", "popf")),
)


def cost_cell(c: CostRun, w: Workload, events: tuple[str, ...]) -> str:
    return "+".join(costs.fmt(c.per_unit(w, e)) for e in events)


def ticks_note(first: Run, c: CostRun) -> str:
    """How far the plugin boot's ticks (its regions' instructions) are
    from the kernel's run 1, at most."""
    off = {w.name: abs(c.regions[w.name].insns - first.ticks[w.name][1])
           / first.ticks[w.name][1] for w in WORKLOADS}
    worst = max(off, key=lambda name: off[name])
    if off[worst] == 0:
        return "the same for %s" % c.label
    return "at most %.2f%% off for %s (%s)" % (100 * off[worst], c.label,
                                                worst)


def cost_table(base: CostRun, series: CostRun, firsts: dict[str, Run]
               ) -> list[str]:
    """The modeled costs per unit, base / series, and what they rest on;
    @firsts: each kernel's run 1."""
    md = ["", "## Modeled costs (--costs)", "",
          "One more boot of each kernel in exact mode under the QEMU TCG "
          "plugin of ./bulk bench --costs (`harness/plugin/qemu-cost.c`, "
          "`clock=user`: a timed region between the init's two clock reads "
          "around each workload's loop, region k for workload k, its "
          "instructions the ticks the init printed in that boot), with "
          "`%s` (on one CPU a kernel otherwise turns its lock prefixes "
          "into DS prefixes, and no locked instruction would be seen). "
          "That changes the boot, and with it some loops' ticks: against "
          "each kernel's run 1 (the table above), %s.  Per unit, base / "
          "series: loads, their misses in a modeled cache (%s; LRU, "
          "write-allocate, no prefetcher), locked instructions (lock "
          "prefix, xchg with memory), cmpxchg16b unlocked+locked and the "
          "IRQ-flag instructions, of everything that ran in the loop, the "
          "kernel's work included.  **Modeled cost** = instructions + sum "
          "of events x weight, with the low and the high weights of "
          "harness/costs.py (%s): a model, not cycles; series/base per "
          "band." % (
              costs.KEEP_LOCKS, " and ".join(
                  ticks_note(firsts[c.label], c) for c in (base, series)),
              series.geometry, ", ".join(
                  "%s %g–%g" % (k, lo, hi)
                  for k, (lo, hi) in costs.WEIGHTS.items())),
          "", "Weights' sources: %s." % costs.SOURCES, "",
          "| workload | unit | modeled cost base | modeled cost series "
          "| series/base low | series/base high | " +
          " | ".join(h for h, _ in COST_COLUMNS) + " |",
          "|---|---|" + "---:|" * (4 + len(COST_COLUMNS))]
    for w in WORKLOADS:
        lo = [c.modeled(w, 0) for c in (base, series)]
        hi = [c.modeled(w, 1) for c in (base, series)]
        md.append("| %s | %s | %s–%s | %s–%s | %.4f | %.4f | %s |" % (
            w.name, w.unit, costs.fmt(lo[0]), costs.fmt(hi[0]),
            costs.fmt(lo[1]), costs.fmt(hi[1]), lo[1] / lo[0], hi[1] / hi[0],
            " | ".join("%s / %s" % (cost_cell(base, w, get),
                                    cost_cell(series, w, get))
                       for _, get in COST_COLUMNS)))
    return md + slab_table(base, series)


def tracking(c: CostRun) -> str:
    """How the plugin followed @c's slab calls (its '# slab_*' lines)."""
    return ("%s %d (%d reached after a ret, not a call: tail calls, or "
            "an interrupt's return into an entry point), "
            "%d lost (no return slot known), %d ended by a ret above their "
            "slot, %d cut short by user space" % (
                c.label, c.slab.get("slab_calls", 0),
                c.slab.get("slab_entries_after_ret", 0),
                c.slab.get("slab_lost", 0), c.slab.get("slab_past", 0),
                c.slab.get("slab_resets", 0)))


def slab_table(base: CostRun, series: CostRun) -> list[str]:
    """Per workload, the instructions inside slab calls per unit and
    their share of the loop's, base and series."""
    md = ["", "### Slab calls' share", "",
          "| workload | unit | slab instructions per unit base | series "
          "| share base | share series |", "|---|---|---:|---:|---:|---:|"]
    for w in WORKLOADS:
        md.append("| %s | %s | %.1f | %.1f | %.2f%% | %.2f%% |" % (
            w.name, w.unit, base.per_unit(w, "slab_insns"),
            series.per_unit(w, "slab_insns"), 100 * base.slab_share(w),
            100 * series.slab_share(w)))
    md += ["", "The instructions inside calls of %s, from the function's "
           "entry until the call returns (the load of its return address "
           "by a ret), whatever the CPU runs meanwhile included (what it "
           "calls, the interrupts taken, other tasks should it sleep), as "
           "the plugin follows the calls' stack "
           "accesses in the same boot (`slab=`, x86-64 only); the share is "
           "of all the instructions of the workload's loop.  The whole "
           "boot's slab calls: %s." % (
               ", ".join("`%s()`" % f for f in SLAB_ENTRIES),
               "; ".join(tracking(c) for c in (base, series)))]
    return md


def cost_json(cost_runs: dict[str, CostRun]) -> dict[str, dict[str, Any]]:
    """Per kernel and workload: its region's instructions and events, the
    modeled cost per unit in both bands, and the instructions inside slab
    calls per unit and their share."""
    return {label: {w.name: {
        "units": w.count, "insns": c.regions[w.name].insns,
        "events": c.regions[w.name].events,
        "modeled_low": round(c.modeled(w, 0), 2),
        "modeled_high": round(c.modeled(w, 1), 2),
        "slab_insns_per_unit": round(c.per_unit(w, "slab_insns"), 2),
        "slab_share": round(c.slab_share(w), 5)} for w in WORKLOADS}
        for label, c in cost_runs.items()}


def markdown(runs: list[Run], counts: dict[str, Counts],
             command: str, a: arch.Arch = arch.X86_64,
             cost_runs: dict[str, CostRun] | None = None) -> str:
    """The table (first run of each kernel), with --costs the modeled
    costs' (cost_table()), then what each workload is."""
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
          "when it ends); before each loop the init idles half a second "
          "of guest time, so that the deferred work of what ran before "
          "is done." % (
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
    if cost_runs:
        md += cost_table(cost_runs["base"], cost_runs["series"], {
            "base": base_runs[0], "series": series_runs[0]})
    md += ["", "Workloads (initramfs/init.c, harness.callers):", ""]
    md += ["- **%s** (%d units): %s." % (w.name, w.count, w.what)
           for w in WORKLOADS]
    md += ["", "Logs: %s." % ", ".join(
        [rel(r.log) for r in runs] +
        [rel(c.log) for c in (cost_runs or {}).values()])]
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


def costs_boot(config: str, tree_name: str, label: str, plugin: str,
               workloads: tuple[Workload, ...] = WORKLOADS) -> CostRun:
    """Boot @config's kernel of @tree_name in exact mode with no module,
    under qemu-cost.c counting between the init's clock reads
    (clock=user), with the lock prefixes kept (costs.KEEP_LOCKS) as
    ./bulk bench --costs has them; profile.plugin_boot() would load the
    benchmark module and time its clock reads instead.  The plugin also
    follows the calls of SLAB_ENTRIES (slab=, their addresses from the
    kernel's System.map)."""
    out_path = os.path.join(BUILD, "costs", "callers-%s-%s.txt" % (
        tree_name, config))
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    if os.path.exists(out_path):
        os.remove(out_path)
    slab_path = write_slab_entries(os.path.join(kbuild.check_stamp(
        config, tree_name, "callers"), "System.map"), out_path + ".slab")
    res = boot.boot(config, tree_name, "exact", [],
                    append(workloads=workloads) + " " + costs.KEEP_LOCKS,
                    costs.BOOT_TIMEOUT, tag="callers-costs",
                    qemu_extra=["-plugin", ",".join(
                        [plugin, "out=" + out_path, "clock=user",
                         "slab=" + slab_path])])
    assert res is not None
    if not os.path.exists(out_path):
        raise StageError("callers", "the QEMU plugin wrote no counts (%s)"
                         % rel(out_path), res.log)
    with open(res.log, errors="replace") as f:
        ticks = parse_timings(f.read(), label + " costs", 1, res.log,
                              workloads)
    try:
        # One vCPU, whole pairs of clock reads (profile.check_header()).
        counts = costs.read_costs(out_path)
    except ValueError as e:
        raise StageError("callers", str(e), res.log)
    if "slab_calls" not in counts.header:
        raise StageError("callers", "%s has no '# slab_calls' line: the "
                         "plugin did not follow the slab calls (slab=)"
                         % rel(out_path), res.log)
    r = CostRun(tree_name, label, res.log, counts.geometry(),
                assign(counts.regions, ticks, res.log, workloads),
                {k: v for k, v in counts.header.items()
                 if k.startswith("slab_")})
    say("callers %s costs: %s" % (label, ", ".join(
        "%s %.0f-%.0f" % (w.name, r.modeled(w, 0), r.modeled(w, 1))
        for w in workloads)))
    say("callers %s slab calls' share: %s (%s)" % (label, ", ".join(
        "%s %.1f per %s, %.2f%%" % (w.name, r.per_unit(w, "slab_insns"),
                                    w.unit, 100 * r.slab_share(w))
        for w in workloads), ", ".join(
            "%s %d" % (k, v) for k, v in r.slab.items())))
    return r


def main(args: argparse.Namespace) -> int:
    start = time.time()
    a = arch.get(args.arch)
    config, count_config = a.config(CONFIG), a.config(COUNT_CONFIG)
    basetree.prepare("callers")
    plugin = (profile.build_plugin(costs.PLUGIN_SRC, costs.PLUGIN, "callers")
              if args.costs else "")
    cost_runs: dict[str, CostRun] = {}
    runs: list[Run] = []
    counts: dict[str, Counts] = {}
    count_logs = []
    for tree_name, label in KERNELS:
        kbuild.build(config, tree_name, label="%s %s" % (config, label))
        mine = [one(tree_name, label, i, a) for i in range(1, RUNS + 1)]
        check_repeat(mine)
        runs += mine
        if args.costs:
            cost_runs[label] = costs_boot(config, tree_name, label, plugin)
        if not args.no_count:
            kbuild.build(count_config, tree_name,
                         label="%s %s" % (count_config, label))
            counts[label], log = one_count(tree_name, label, a)
            count_logs.append(log)
    command = "./bulk callers" + (" --no-count" if args.no_count else "") + (
        " --costs" if args.costs else "") + (
        "" if a == arch.X86_64 else " --arch " + a.name)
    md = markdown(runs, counts, command, a, cost_runs)
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
        "count_logs": count_logs,
        "costs": cost_json(cost_runs),
        "cost_slab_tracking": {label: c.slab
                               for label, c in cost_runs.items()},
        "cost_logs": [c.log for c in cost_runs.values()]}, st)
    print(md)
    say("callers: %s.md written in %s; done in %dm%02ds" % (
        name, record.where(args.record),
        *divmod(int(time.time() - start), 60)))
    return 0
