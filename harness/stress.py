"""Stress stage: the series' stress suite (slab_bulk_stress, a KUnit module,
CONFIG_SLAB_BULK_STRESS) booted on two or four CPUs, with failslab
and fail_page_alloc set up by the init through debugfs.  Its KTAP goes
through the kernel's kunit.py parser like the other suites'; its count
lines (one per cache and round) become the rows of stress.md (under
build/results/stress/, or results/stress/ with --record).

A run fails on a failed or missing KUnit case, a splat on the console
(boot.py's check), an object lost, fault injection that injected
nothing when it was asked for, or a path that ran fewer times than the
run's floor for it (StressRun.floors, per 15 guest seconds): the suite
counts its bulk calls, what the arrays given to the bulk frees were made
of (runs of one slab's objects, lone objects, KFENCE objects, objects of
another node), SLUB's event counters where the kernel has them
(configs/events.config) and the CPU hotplug cycles.  A small-guest run
(real memory pressure, no injection) also fails unless reclaim dropped
pages of the init's hog and some task (the hog's faults count too)
entered direct reclaim between the hog's first pass and the end of the
boot (the suite's rounds within it), or on an OOM kill
(reclaim_figures()).

Each boot draws a new seed for the threads' random choices (the module's
seed parameter) unless one is given (./bulk stress --seed N): the seed is
printed with the run's result and kept in stress.md, so that a failed run
can be replayed with its seed.  A replay repeats each thread's choices,
not the interleaving of the threads, which the host's scheduling decides.
"""
import argparse
import dataclasses
import math
import os
import random
import re
import time
from typing import Callable

import boot
import kconfig
import kunit
import record as records
from common import StageError, rel, say

STRESS_MODULE = "slab_bulk_stress"
STRESS_SYMBOL = "SLAB_BULK_STRESS"
# The suite's per-round limit (KUnit ends a case after 300 s).
MAX_ROUND_SECONDS = 240
# Per cent of the threads' slab and page allocations that fail when
# fault injection is on.
FAULT_PERCENT = 2
# Memory pressure: per cent of the threads' page allocations that fail,
# failslab off.  A bulk allocation then fails where it needs a new slab,
# mostly after it has taken objects from the CPU's and the partial
# slabs: the error path that gives back what the call had taken (and its
# memcg charge).  failslab fails a call at its entry instead.
PRESSURE_PERCENT = 50
# kunit_info() lines: "# <case>: stress round=N key=value ..."
ROUND_RE = re.compile(r"# [\w.]+: stress round=(\d+) (.*)$")
KV_RE = re.compile(r"(\w+)=(\S+)")
# The console's timestamps of a round's start and of each round's end.
ROUND_START_RE = re.compile(r"^\[\s*(\d+\.\d+)\] +# Subtest: slab_bulk_stress_round$", re.M)
ROUND_END_RE = re.compile(r"^\[\s*(\d+\.\d+)\] +(?:not )?ok \d+ round \d+ of \d+", re.M)
# The seeds ./bulk stress draws: the module's seed is an unsigned long.
SEED_MAX = 2 ** 32 - 1
# Failed allocations a row counts (all injected when injection is on).
FAIL_KEYS = ("bulk_fails", "single_fails", "kmalloc_fails")
# Softirq allocations fail only for want of memory: fault injection's
# task-filter leaves them alone.
OP_KEYS = ("bulk_allocs", "bulk_frees", "single_allocs", "kfree_bulks",
           "shrinks")
# What the arrays given to the bulk frees were made of (summed over the
# caches and kmalloc): runs of two or more neighbours from one slab
# (SLUB's grouped free, where KASAN is off), objects alone among other
# slabs', KFENCE objects, objects of a slab on another node.
SHAPE_KEYS = ("runs", "run_objs", "lone", "kfence", "other_node")
# Bulk allocations that asked for zeroed objects (__GFP_ZERO), all checked.
ZERO_KEY = "zeroed"
# SLUB's events over the private caches (CONFIG_SLUB_STATS): frees to a
# slab other than the CPU's, slabs given back, partial and new slabs taken.
EVENT_KEYS = ("free_slowpath", "free_slab", "alloc_from_partial",
              "alloc_slab", "cmpxchg_double_fail")
HOTPLUG_KEYS = ("hotplug_cycles", "hotplug_refused")


@dataclasses.dataclass(frozen=True)
class StressRun:
    """One boot of the stress suite: config, QEMU mode (smp: 2 CPUs,
    smp4: 4), extra command line, fault injection on or off, and the
    floors: (count, least times per boot) pairs, see floor_problems().
    @pressure: page allocations fail at PRESSURE_PERCENT and failslab
    not at all, instead of both at FAULT_PERCENT.  @small: real memory
    pressure instead, a guest of SMALL_MIB with the init's hog, never
    with injection (faults=False).  @min_seconds: where
    the full floors are checked, a boot's rounds are lengthened to this
    many guest seconds in all, for kernels whose checks make the calls
    slow (run())."""
    config: str
    mode: str = "smp"
    append: str = ""
    faults: bool = True
    floors: tuple[tuple[str, int], ...] = ()
    pressure: bool = False
    min_seconds: int = 0
    small: bool = False

    def __post_init__(self) -> None:
        if self.small and (self.faults or self.pressure):
            raise ValueError("%s: a small-guest run injects no faults "
                             "(faults=False, pressure=False)" % self.config)

    def injection(self) -> str:
        return (" pressure" if self.pressure else
                " faults" if self.faults else
                " small" if self.small else "")

    def name(self) -> str:
        return "%s %s%s%s" % (self.config, self.mode, self.injection(),
                              " " + self.append if self.append else "")

    def key(self) -> str:
        """The run among its config's: mode, injection, command line."""
        return "%s%s%s" % (self.mode, self.injection().replace(" ", "-"),
                           "-" + re.sub(r"[^\w.-]+", "_", self.append)
                           if self.append else "")

    def tag(self) -> str:
        return "stress-" + self.key()

    def ident(self) -> str:
        """The run alone, for --runs (a failure's replay): CONFIG:TAG."""
        return "%s:%s" % (self.config, self.key())


# The memcg that SLAB_ACCOUNT objects are charged to: the init joins it
# before loading the module.
CGROUP = "harness.cgroup=stress"
# KFENCE sampling every millisecond: its objects come up in the bulk
# calls' arrays, in and out.
KFENCE_OFTEN = "kfence.sample_interval=1"
# Full preemption (the faults kernels choose it at boot, as Debian's do),
# two threads per CPU so that a preempted thread's CPU runs another, and
# two emulated NUMA nodes, the CPUs spread over them: node partial lists,
# frees of objects from the other node's slabs.
BUSY = ("preempt=full numa=fake=2 %s.threads_per_cpu=2"
        % STRESS_MODULE)
# CPU hotplug: a CPU down and up again every 100 ms of the round.
HOTPLUG = "%s.hotplug_ms=100" % STRESS_MODULE
# The floors: the least count of each path per 15 guest seconds of a boot
# (floor_problems() scales them to the boot's rounds).  Where SLUB groups
# a bulk free (its kernels without KASAN), the suite's runs of one slab's
# objects and lone objects freed in bulk, and remote frees, at least
# 1000 each (the first runs counted 10 to 1000 times that), and SLUB's
# events: frees to other slabs, slabs given back and new slabs taken, and
# slabs taken from the partial lists but under slub_debug, whose caches
# take them one object at a time (SLUB counts no event there).  SLAB's
# and SLOB's bulk calls, which do not group by slab, and the KASAN
# kernel's, where SLUB frees one object at a time: bulk allocations and
# frees and remote frees, 1000 each, or 110 where the checks make the
# calls slow (KASAN under TCG: 474 to 1000 bulk allocations in 15 s on
# two CPUs; SLOB's one lock on four CPUs under lockdep: 856 to 4700),
# whose boots run 140 guest seconds where the full floors are checked
# (SLOW_SECONDS), so that each path runs 1000 times there too.  KFENCE
# objects: 770 to 1450 came in 15 s at one sample a millisecond on two
# CPUs, fewer than 300 under slub_debug=FZ on four.  Each NUMA run frees
# objects of the other node's slabs; each hotplug run takes CPUs down and
# up again (16 to 32 cycles on SLUB, 48 to 52 on SLAB in 15 s).  The
# floors are a quarter or less of what the runs counted, so that a host
# busy with other work, which slows the guests, does not fail them
# (tests/test_stress.py holds them to the records).
GROUPED = (("runs", 1000), ("lone", 1000), ("remote_frees", 1000))
CALLS = (("bulk_allocs", 1000), ("bulk_frees", 1000), ("remote_frees", 1000))
SLOW_CALLS = (("bulk_allocs", 110), ("bulk_frees", 110), ("remote_frees", 110))
SLOW_SECONDS = 140
SLUB_DEBUG_EVENTS = (("free_slowpath", 1000), ("free_slab", 1000),
                     ("alloc_slab", 1000))
SLUB_EVENTS = SLUB_DEBUG_EVENTS + (("alloc_from_partial", 1000),)
KFENCE_FLOOR = (("kfence", 200),)
KFENCE_SLOW_FLOOR = (("kfence", 20),)
NUMA_FLOOR = (("other_node", 1000),)
HOTPLUG_FLOOR = (("hotplug_cycles", 4),)
# Real memory pressure: a guest of SMALL_MIB (1 GiB otherwise), in which
# the init's hog (harness.hog, initramfs/init.c) writes HOG_MIB, as much
# as the guest has, of anonymous memory a MiB at a time and gives each MiB
# up with MADV_FREE, over and over; the init loads the suite once the hog
# has filled memory.  Reclaim can drop nearly all the hog's pages, so the
# suite runs with free memory near the watermarks, kswapd reclaiming and
# tasks whose allocations may reclaim entering direct reclaim, without
# fault injection and without an OOM kill.  GFP_ATOMIC allocations may go
# below the min watermark, where reclaiming tasks (the hog's faults too)
# stop and reclaim, so they are not expected to fail here: the injected
# runs cover the failure paths.  The run fails unless, between the hog's
# first pass and the end of the boot (the suite's rounds within it),
# reclaim dropped pages of the hog and some task entered direct reclaim
# (/proc/vmstat, which the init prints at both; which tasks, it does not
# say: the hog's own faults count), or on an OOM kill.
SMALL_MIB = 256
HOG_MIB = SMALL_MIB
VMSTAT_RE = re.compile(r"^harness: (hog start|cat) /proc/vmstat: (\w+) (\d+)$",
                       re.M)
# What the run's third table shows, from /proc/vmstat's counters (the
# allocstall_* ones summed) between the hog's first pass and the end:
# direct reclaims by any task, pages reclaimed directly and by kswapd,
# pages the hog gave up and pages of it dropped; OOM kills since boot.
VMSTAT_KEYS = ("allocstall", "pgsteal_direct", "pgsteal_kswapd",
               "pglazyfree", "pglazyfreed", "oom_kill")
# Bulk allocations failed under memory pressure: in 15 s with half the
# page allocations failing, 3563 to 13374 of SLUB's 6415 to 25223 and
# 2836 to 5045 of SLAB's 32124 to 53738 (with a quarter failing, SLUB's
# were 701: a new slab fails only when both of SLUB's tries, at its
# preferred and its least order, do).
PRESSURE_FLOOR = (("bulk_fails", 700),)
# What ./bulk test runs, one short round each: every allocator on two CPUs
# with fault injection, plain and with its debug options (SLOB has none but
# lockdep), four CPUs on each allocator, init_on_free on SLUB and SLAB;
# SLUB's bulk allocation fast paths under KASAN, lockdep and DEBUG_VM on
# four CPUs (slub_debug=- turns SLUB_DEBUG_ON's debug paths off; its
# KASAN still has SLUB free a bulk array one object at a time); and the
# grouped free, which KASAN turns off, under the checkers of the faults
# kernels (checkers.config): DEBUG_VM, DEBUG_LIST and KFENCE, and with
# slub_debug=FZ the consistency checks of each run freed; SLUB fully
# preemptible with two threads per CPU on two NUMA nodes; SLUB and SLAB
# with CPUs going down and up, and under injected memory pressure; each
# allocator in a small guest under real memory pressure (SMALL_MIB).
# The small-guest runs (./bulk stress --runs small): each allocator under
# real memory pressure, SLUB and SLAB on four CPUs, SLOB (one lock, and
# lockdep in slob-debug) on two.
SMALL_RUNS = [
    StressRun("slub-faults", "smp4", CGROUP, faults=False, small=True,
              floors=GROUPED + SLUB_EVENTS),
    StressRun("slab-faults", "smp4", CGROUP, faults=False, small=True,
              floors=CALLS),
    StressRun("slob-debug", "smp", faults=False, small=True, floors=CALLS),
]
TEST_RUNS = [
    StressRun("slub-faults", "smp", CGROUP + " " + KFENCE_OFTEN,
              floors=GROUPED + SLUB_EVENTS + KFENCE_FLOOR),
    StressRun("slub-faults", "smp4", CGROUP + " init_on_free=1",
              floors=GROUPED + SLUB_EVENTS),
    StressRun("slub-faults", "smp4", CGROUP + " slub_debug=FZ " + KFENCE_OFTEN,
              floors=GROUPED + SLUB_DEBUG_EVENTS + KFENCE_SLOW_FLOOR),
    StressRun("slub-faults", "smp4", CGROUP + " " + BUSY,
              floors=GROUPED + SLUB_EVENTS + NUMA_FLOOR),
    StressRun("slub-faults", "smp4", CGROUP + " " + HOTPLUG,
              floors=GROUPED + SLUB_EVENTS + HOTPLUG_FLOOR),
    StressRun("slub-faults", "smp4", CGROUP, pressure=True,
              floors=GROUPED + SLUB_EVENTS + PRESSURE_FLOOR),
    StressRun("slub-debug", "smp", CGROUP, floors=SLOW_CALLS,
              min_seconds=SLOW_SECONDS),
    StressRun("slub-debug", "smp4", CGROUP + " slub_debug=-",
              floors=SLOW_CALLS, min_seconds=SLOW_SECONDS),
    StressRun("slab-faults", "smp", CGROUP + " " + KFENCE_OFTEN,
              floors=CALLS + KFENCE_FLOOR),
    StressRun("slab-faults", "smp4", CGROUP + " init_on_free=1", floors=CALLS),
    StressRun("slab-faults", "smp4", CGROUP + " " + HOTPLUG,
              floors=CALLS + HOTPLUG_FLOOR),
    StressRun("slab-faults", "smp4", CGROUP, pressure=True,
              floors=CALLS + PRESSURE_FLOOR),
] + SMALL_RUNS + [
    StressRun("slab-debug", "smp", CGROUP, floors=CALLS),
    StressRun("slob-debug", "smp", floors=CALLS),
    StressRun("slob-debug", "smp4", floors=SLOW_CALLS,
              min_seconds=SLOW_SECONDS),
]
TEST_SECONDS = 15
# The soak (./bulk soak, or ./bulk stress --minutes M): one run per
# allocator, four CPUs; the floors hold per boot.
SOAK_RUNS = [
    StressRun("slub-faults", "smp4", CGROUP, floors=GROUPED + SLUB_EVENTS),
    StressRun("slab-faults", "smp4", CGROUP, floors=CALLS),
    StressRun("slob-debug", "smp4", floors=SLOW_CALLS,
              min_seconds=SLOW_SECONDS),
]


# Not in the test command (each would add a boot, and slob-faults a
# kernel, to CI's budget): SLAB preemptible on two NUMA nodes, the debug
# kernels on four CPUs and SLOB without lockdep, so that every allocator
# runs plain and with its debug options on two and on four CPUs (./bulk
# stress --runs all, or by config name).
EXTRA_RUNS = [
    StressRun("slab-faults", "smp4", CGROUP + " " + BUSY,
              floors=CALLS + NUMA_FLOOR),
    StressRun("slub-debug", "smp4", CGROUP, floors=SLOW_CALLS,
              min_seconds=SLOW_SECONDS),
    StressRun("slab-debug", "smp4", CGROUP, floors=CALLS),
    StressRun("slob-faults", "smp", floors=CALLS),
    StressRun("slob-faults", "smp4", "init_on_free=1", floors=CALLS),
]


# KCSAN (./bulk stress --runs kcsan, not in the test command: three more
# kernels): each allocator with the data race detector on two and on four
# CPUs, fault injection on.  configs/kcsan.config says what it can see.
# The runs counted 2500 to 18400 bulk allocations in 15 s, but 294
# on SLOB with four CPUs (its one lock, and KCSAN's delays inside it): that
# run's floors are a quarter of that, 73 per 15 s, in boots of 210 s, so
# 1000 a boot.
KCSAN_SLOB_CALLS = tuple((key, 73) for key, _ in CALLS)
KCSAN_SLOB_SECONDS = 210
KCSAN_RUNS = [
    StressRun("slub-kcsan", "smp", CGROUP, floors=GROUPED + SLUB_EVENTS),
    StressRun("slub-kcsan", "smp4", CGROUP, floors=GROUPED + SLUB_EVENTS),
    StressRun("slab-kcsan", "smp", CGROUP, floors=CALLS),
    StressRun("slab-kcsan", "smp4", CGROUP, floors=CALLS),
    StressRun("slob-kcsan", "smp", floors=CALLS),
    StressRun("slob-kcsan", "smp4", floors=KCSAN_SLOB_CALLS,
              min_seconds=KCSAN_SLOB_SECONDS),
]


def has_failslab(config: str) -> bool:
    """Whether the config's kernel has failslab (SLOB's cannot)."""
    return "failslab" in kconfig.CONFIG_SETS.get(config, [])


def fault_append(percent: int, failslab: bool = True) -> str:
    """harness.write= knobs: the fault injections fail percent% of the
    allocations of tasks with make_it_fail (the stress threads), GFP_KERNEL
    and order-0 ones included, without a report per failure."""
    writes = []
    for attr in ("failslab", "fail_page_alloc")[0 if failslab else 1:]:
        knobs = [("probability", str(percent)), ("interval", "1"),
                 ("times", "-1"), ("verbose", "0"), ("task-filter", "Y"),
                 ("ignore-gfp-wait", "N")]
        if attr == "fail_page_alloc":
            knobs += [("min-order", "0"), ("ignore-gfp-highmem", "N")]
        writes += ["harness.write=/sys/kernel/debug/%s/%s:%s" % (attr, k, v)
                   for k, v in knobs]
    return " ".join(writes)


def new_seed() -> int:
    return random.SystemRandom().randint(1, SEED_MAX)


def cmdline(r: StressRun, seconds: int, rounds: int, seed: int) -> str:
    parts = ["%s.seconds=%d" % (STRESS_MODULE, seconds),
             "%s.rounds=%d" % (STRESS_MODULE, rounds),
             "%s.seed=%d" % (STRESS_MODULE, seed)]
    if r.small:
        parts.append("harness.hog=%d harness.cat=/proc/vmstat" % HOG_MIB)
    if r.pressure:
        parts.append(fault_append(PRESSURE_PERCENT, failslab=False))
    elif r.faults:
        parts.append(fault_append(FAULT_PERCENT, has_failslab(r.config)))
    if r.append:
        parts.append(r.append)
    return " ".join(parts)


def parse_rounds(text: str) -> list[dict[str, str]]:
    """The suite's count lines, one dict per line (round, cache, counts)."""
    rows = []
    for line in text.splitlines():
        m = ROUND_RE.search(line)
        if m:
            row = {"round": m.group(1)}
            row.update(KV_RE.findall(m.group(2)))
            rows.append(row)
    return rows


def parse_vmstat(text: str) -> dict[str, dict[str, int]]:
    """VMSTAT_KEYS of the two /proc/vmstat the init printed, by when:
    'hog start' (after the hog's first pass) and 'cat' (at the end);
    missing when it printed none."""
    stat: dict[str, dict[str, int]] = {}
    for when, key, value in VMSTAT_RE.findall(text):
        k = "allocstall" if key.startswith("allocstall_") else key
        if k in VMSTAT_KEYS:
            at = stat.setdefault(when, {})
            at[k] = at.get(k, 0) + int(value)
    return stat


def reclaim_figures(text: str) -> tuple[dict[str, int], list[str]]:
    """A small run's figures for the third table (VMSTAT_KEYS, the end
    minus the hog's first pass but oom_kill) and its problems: missing
    output, memory never short between the hog's first pass and the end,
    an OOM kill."""
    stat = parse_vmstat(text)
    problems = ["the init printed no /proc/vmstat %s" % where
                for when, where in (("hog start", "after the hog's first pass"),
                                    ("cat", "at the end"))
                if when not in stat]
    problems += ["/proc/vmstat has no %s" % k for k in VMSTAT_KEYS
                 for when in stat if k not in stat[when]]
    if problems:
        return {}, sorted(set(problems), key=problems.index)
    start, end = stat["hog start"], stat["cat"]
    fig = {k: end[k] - start[k] for k in VMSTAT_KEYS}
    fig["oom_kill"] = end["oom_kill"]
    if fig["oom_kill"]:
        problems.append(
            "the OOM killer ran %d time%s although the hog's pages were "
            "reclaimable: memory leaked or pinned, or a guest too small"
            % (fig["oom_kill"], "" if fig["oom_kill"] == 1 else "s"))
    if not fig["pglazyfreed"]:
        problems.append("reclaim dropped none of the hog's pages after its "
                        "first pass: no memory pressure")
    if not fig["allocstall"]:
        problems.append("no task entered direct reclaim after the hog's "
                        "first pass: memory was never short enough")
    return fig, problems


def round_seconds(text: str) -> list[float]:
    """How long each round ran by the guest's console clock: from the
    case's start to the first round's end, then end to end."""
    start = ROUND_START_RE.search(text)
    if not start:
        return []
    marks = [float(start.group(1))] + [float(m.group(1))
                                      for m in ROUND_END_RE.finditer(text)]
    return [b - a for a, b in zip(marks, marks[1:])]


def num(row: dict[str, str], key: str) -> int:
    try:
        return int(row.get(key, "0"))
    except ValueError:
        return 0


def totals(rows: list[dict[str, str]]) -> dict[str, int]:
    """Sums over rounds and caches; lost is -1 when no cache had a count."""
    t = {k: sum(num(r, k) for r in rows)
         for k in OP_KEYS + FAIL_KEYS + SHAPE_KEYS + EVENT_KEYS + HOTPLUG_KEYS
         + (ZERO_KEY, "bulk_objs", "kmalloc_objs", "remote_frees", "softirq_objs",
            "softirq_fails")}
    counted = [num(r, "lost") for r in rows if "lost" in r and num(r, "lost") >= 0]
    t["lost"] = sum(counted) if counted else -1
    t["injected"] = sum(t[k] for k in FAIL_KEYS)
    t["ops"] = sum(t[k] for k in OP_KEYS) + t["remote_frees"]
    return t


@dataclasses.dataclass
class StressResult:
    """One run: one boot, or the boots of a soak added up.  seconds and
    rounds are what the guest was asked for (its jiffies), wall_seconds
    the host's time, boot and checks included."""
    run: str
    config: str
    mode: str
    faults: bool
    append: str
    seconds: int
    rounds: int
    logs: list[str]
    ok: bool
    problems: list[str]
    splats: int
    cases: dict[str, int]
    totals: dict[str, int]
    rows: list[dict[str, str]]
    wall_seconds: int
    boots: int = 1
    # Each boot's seed, in order.
    seeds: list[int] = dataclasses.field(default_factory=list)
    # A small-guest run's reclaim figures (reclaim_figures()), summed
    # over boots.
    reclaim: dict[str, int] = dataclasses.field(default_factory=dict)
    small: bool = False
    # The run's floors, per boot (StressRun.floors).
    floors: dict[str, int] = dataclasses.field(default_factory=dict)
    # StressRun.ident(): what --runs takes to run this run alone.
    ident: str = ""

    def replay(self) -> str:
        """The command that runs this run alone again with the last boot's
        seed: a soak stops at its first failed boot."""
        return "./bulk stress --runs %s --seed %d --minutes 1 --seconds %d" % (
            self.ident or self.config, self.seeds[-1] if self.seeds else 0,
            self.seconds)


def check_built(r: StressRun, tree: str) -> None:
    out = kconfig.tree(tree).out_dir(r.config)
    if STRESS_SYMBOL not in kconfig.declared_symbols(kconfig.tree(tree).src):
        raise StageError("stress", "%s: the tree has no stress suite (%s)" % (
            r.config, STRESS_SYMBOL))
    if STRESS_MODULE not in boot.built_modules(out):
        raise StageError("stress", "%s: %s.ko not built: ./bulk build %s" % (
            r.config, STRESS_MODULE, r.config))


def scaled_floor(least: int, guest_seconds: int) -> int:
    """A floor of @least per TEST_SECONDS, for a boot whose rounds ran
    @guest_seconds in all."""
    return math.ceil(least * guest_seconds / TEST_SECONDS)


def floor_problems(r: StressRun, t: dict[str, int], text: str,
                   guest_seconds: int = TEST_SECONDS,
                   full: bool = True) -> list[str]:
    """The paths that ran fewer times than @r's floors, scaled to the
    boot's @guest_seconds, by the totals @t of one boot; with @full
    False, fewer than once.  SLUB's events need the kernel's counters: a
    floor on one fails a kernel that has none (no events in the output
    at all)."""
    out = []
    for key, per in r.floors:
        least = scaled_floor(per, guest_seconds) if full else 1
        if key in EVENT_KEYS and " %s=" % key not in text:
            out.append("floor %s >= %d: the kernel prints no %s (no "
                       "CONFIG_SLUB_STATS?)" % (key, least, key))
        elif t.get(key, 0) < least:
            out.append("%s ran %d times, below its floor of %d" % (
                key, t.get(key, 0), least))
    return out


# What the kernel prints when a condition a run asks for took effect.
CONDITIONS = (("preempt=full", "Dynamic Preempt: full"),
              ("numa=fake=2", "nr_node_ids:2"))
# A KCSAN kernel (configs/kcsan.config) must have had it on from boot, its
# self-test passing: otherwise its runs see no race at all.
KCSAN_ON_RE = re.compile(r"kcsan: enabled early\n(?:.*\n)*?.*"
                         r"kcsan: selftest: (\d+)/\1 tests passed")


def condition_problems(r: StressRun, text: str,
                       rows: list[dict[str, str]]) -> list[str]:
    """The conditions @r's command line asks for that the boot did not
    get: the preemption model, the NUMA nodes, the threads per CPU."""
    words = r.append.split()
    out = ["%s asked, but the kernel never printed '%s'" % (word, line)
           for word, line in CONDITIONS if word in words and line not in text]
    if "kcsan" in kconfig.CONFIG_SETS.get(r.config, []) and \
            not KCSAN_ON_RE.search(text):
        out.append("a KCSAN kernel, but the console never said 'kcsan: "
                   "enabled early' and that its self-test passed")
    per_cpu = [w.split("=", 1)[1] for w in words
               if w.startswith(STRESS_MODULE + ".threads_per_cpu=")]
    if per_cpu and rows:
        want = str(int(per_cpu[0]) * boot.mode_cpus(r.mode))
        if any(row.get("threads", want) != want for row in rows):
            out.append("%s threads asked, the rounds ran %s" % (want, ", ".join(
                sorted({row["threads"] for row in rows if "threads" in row}))))
    return out


def run(r: StressRun, tree: str = "linux", seconds: int = TEST_SECONDS,
        rounds: int = 1, tag: str | None = None,
        seed: int | None = None, full_floors: bool = True) -> StressResult:
    """Boot r's kernel with the stress suite for rounds of seconds each,
    its threads seeded with @seed (a new one when None).  @full_floors
    False (the test command): each path of the run's floors must have run
    at least once.  The full floors count how much the guests got done,
    which a busy host cuts many times over (a 4-CPU guest beside another
    one on 2 host CPUs: 15 times fewer bulk calls), so they are checked
    where the figures are recorded: ./bulk stress and ./bulk soak, which
    lengthen a boot's rounds to @r.min_seconds in all."""
    if not 1 <= seconds <= MAX_ROUND_SECONDS:
        raise StageError("stress", "seconds per round must be 1 to %d, not %d"
                         % (MAX_ROUND_SECONDS, seconds))
    if rounds < 1:
        raise StageError("stress", "rounds must be 1 or more, not %d" % rounds)
    if r.mode not in boot.MODES or r.mode == "exact":
        raise StageError("stress", "mode %s: the stress runs on several CPUs "
                         "(smp, smp4)" % r.mode)
    check_built(r, tree)
    if full_floors and seconds * rounds < r.min_seconds:
        seconds = min(MAX_ROUND_SECONDS, math.ceil(r.min_seconds / rounds))
        say("stress %s: rounds of %d s, the run's least time" % (
            r.name(), seconds))
    if seed is None:
        seed = new_seed()
    start = time.time()
    # A boot takes seconds to a minute under TCG. A round that hangs is
    # ended by KUnit 300 s after it started, so each round may take that
    # long before KUnit says why; only a hang spends the margin.
    timeout = 300 + rounds * max(seconds + 60, 330)
    tag = tag or r.tag()
    res = boot.boot(r.config, tree, r.mode, [STRESS_MODULE],
                    cmdline(r, seconds, rounds, seed), timeout, tag=tag,
                    allow_fail=True,
                    mem="%dM" % SMALL_MIB if r.small else "1G")
    assert res is not None
    with open(res.log, errors="replace") as f:
        text = f.read()
    part = kunit.split_by_module(text, [STRESS_MODULE])[STRESS_MODULE]
    kunit_py = os.path.join(kconfig.tree(tree).src, "tools", "testing",
                            "kunit", "kunit.py")
    ok, counts = kunit.parse(kunit_py, part, "%s-%s-%s" % (tree, r.config,
                                                           tag))
    rows = parse_rounds(part)
    t = totals(rows)
    problems = ["%s: %s" % (rel(res.log), p) for p in res.problems]
    if not ok:
        problems.append("KUnit: %s" % ("failed: " + ", ".join(counts.failed)
                                       if counts.failed else
                                       "no parsable KTAP result"))
    if counts.passed != rounds:
        problems.append("%d of %d rounds passed" % (counts.passed, rounds))
    if t["lost"] > 0:
        problems.append("%d objects lost" % t["lost"])
    if r.faults and ok and t["injected"] == 0:
        problems.append("fault injection is on but no allocation failed "
                        "(are the debugfs knobs there?)")
    # The module's parameters must have taken effect: every round as long
    # as asked (6.1's KUnit once ran the suite before they were parsed).
    short = [d for d in round_seconds(part) if d < seconds * 0.95]
    if ok and short:
        problems.append("a round ran %.1f s of the %d asked: module "
                        "parameters ignored?" % (min(short), seconds))
    if ok and "harness.cgroup=" in r.append and not any(
            num(row, "memcg_pages_before") >= 0 for row in rows
            if "memcg_pages_before" in row):
        problems.append("the run joins a memcg but no memcg charge was "
                        "checked (kmem accounting off?)")
    problems += condition_problems(r, text, rows)
    reclaim: dict[str, int] = {}
    if r.small:
        reclaim, found = reclaim_figures(text)
        problems += found
    if ok:
        problems += floor_problems(r, t, part, seconds * rounds, full_floors)
    if ok and "no shadow of the objects held" in part:
        problems.append("the suite ran without its shadow of the objects "
                        "held (its bitmap could not be had)")
    if ok and r.config.startswith("slob") and not any(
            "slob_pages_before" in row for row in rows):
        problems.append("no count of SLOB's pages in the output")
    out = StressResult(r.name(), r.config, r.mode, r.faults, r.append, seconds,
                       rounds, [res.log], not problems, problems, len(res.splats),
                       {"passed": counts.passed, "skipped": counts.skipped,
                        "failed": len(counts.failed)}, t, rows,
                       round(time.time() - start), seeds=[seed],
                       floors=dict(r.floors), reclaim=reclaim, small=r.small,
                       ident=r.ident())
    say("stress %s (seed %d): %s" % (r.name(), seed, "ok" if out.ok else
                                     "; ".join(problems)))
    return out


def merge(parts: list[StressResult]) -> StressResult:
    """The boots of one soak run as one result."""
    first = parts[0]
    rows = [row for p in parts for row in p.rows]
    cases = {k: sum(p.cases[k] for p in parts) for k in first.cases}
    return StressResult(first.run, first.config, first.mode, first.faults,
                        first.append, first.seconds,
                        sum(p.rounds for p in parts),
                        [log for p in parts for log in p.logs],
                        all(p.ok for p in parts),
                        [x for p in parts for x in p.problems],
                        sum(p.splats for p in parts), cases, totals(rows), rows,
                        sum(p.wall_seconds for p in parts), len(parts),
                        seeds=[s for p in parts for s in p.seeds],
                        floors=first.floors, ident=first.ident,
                        reclaim={k: sum(p.reclaim.get(k, 0) for p in parts)
                                 for k in dict.fromkeys(
                                     k for p in parts for k in p.reclaim)},
                        small=first.small)


def soak_run(r: StressRun, minutes: float, seconds: int,
             rounds: int, seed: int | None = None) -> StressResult:
    """Boots r again and again, rounds of seconds each time, until minutes
    of the host's time have passed or a boot failed; each boot with a new
    seed, or all with @seed."""
    parts: list[StressResult] = []
    start = time.time()
    while not parts or (time.time() - start < minutes * 60 and parts[-1].ok):
        parts.append(run(r, "linux", seconds, rounds,
                         "%s-boot%d" % (r.tag(), len(parts) + 1), seed))
    return merge(parts)


def summary(res: StressResult) -> str:
    t = res.totals
    return ("%d s, seed%s %s: %d bulk allocations (%d objects), %d remote "
            "frees, %d kfree_bulk() calls, %d runs and %d lone objects freed "
            "in bulk, %d %s, lost %s" % (
                res.wall_seconds, "s" if len(res.seeds) > 1 else "",
                ", ".join(str(x) for x in res.seeds), t["bulk_allocs"],
                t["bulk_objs"], t["remote_frees"], t["kfree_bulks"],
                t.get("runs", 0), t.get("lone", 0), t["injected"],
                "injected failures" if res.faults else
                "failed allocations (nothing injected)",
                t["lost"] if t["lost"] >= 0 else "n/a (no count)"))


def injection_text(results: list[StressResult]) -> str:
    """render()'s words on fault injection, for the runs that have it."""
    if not any(r.faults for r in results):
        return "No run injects faults. "
    return ("Faults: failslab and fail_page_alloc (SLOB: fail_page_alloc "
            "only, 6.1's failslab needs SLAB or SLUB) at %d%% of the threads' "
            "allocations; *pressure* runs: fail_page_alloc at %d%% of their "
            "page allocations and failslab off, so that bulk allocations fail "
            "where they need a new slab, mostly after taking objects. " % (
                FAULT_PERCENT, PRESSURE_PERCENT))


def render(results: list[StressResult], command: str) -> str:
    lines = [
        "# Stress runs of the slab bulk API",
        "",
        "Command: `%s` (%s). Each run boots the config's kernel under QEMU "
        "(multi-threaded TCG) and loads `%s`: one thread per CPU mixes bulk "
        "and single allocations and frees, remote frees, `kfree_bulk()` and "
        "`kmem_cache_shrink()` on five caches (plain, ctor, "
        "SLAB_TYPESAFE_BY_RCU, SLAB_ACCOUNT in a non-root memcg where the "
        "run joins one, debug flags) and the kmalloc caches. %s"
        "Injected: allocations that failed (bulk, single, "
        "kmalloc; in runs without injection, what failed for want "
        "of memory). Lost: objects left in use after each round, summed "
        "over the private caches and (SLUB, SLAB) the kmalloc caches; n/a "
        "where the kernel keeps no count. SLOB has no kmalloc caches: there "
        "a round also fails when the pages SLOB holds do not come back. "
        "Splats: console lines that fail a boot. Seeds: each boot's seed of "
        "the threads' random choices (`./bulk stress --runs CONFIG:TAG --seed N` "
        "replays one run, as a failed run's replay says; the threads' "
        "interleaving is the host's).%s"
        % (command, time.strftime("%Y-%m-%d"), STRESS_MODULE,
           injection_text(results),
           " *small*: a guest of %d MiB under real memory pressure, no fault "
           "injection (the third table)." % SMALL_MIB
           if any(r.small for r in results) else ""),
        "",
        "| run | boots | seeds | guest time | host time | bulk allocs | "
        "objects | bulk frees | single | remote frees | softirq objects | "
        "kfree_bulk | shrinks | injected | lost | splats | result |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        t = r.totals
        lines.append("| %s | %d | %s | %d s | %d s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s | %d | %s |" % (
            r.run, r.boots, " ".join(str(x) for x in r.seeds) or "-",
            r.seconds * r.rounds, r.wall_seconds,
            t["bulk_allocs"], t["bulk_objs"],
            t["bulk_frees"], t["single_allocs"], t["remote_frees"],
            t["softirq_objs"], t["kfree_bulks"], t["shrinks"], t["injected"],
            t["lost"] if t["lost"] >= 0 else "n/a", r.splats,
            "pass" if r.ok else "FAIL: " + "; ".join(r.problems) +
            " (replay: `%s`)" % r.replay()))
    lines += ["", "Guest time: rounds times their length (the guest's "
              "jiffies); host time: the boots' wall time, boot and checks "
              "included.", ""]
    lines += paths_table(results)
    lines += pressure_table(results)
    lines += ["",
              "Logs: " + ", ".join("`%s`" % rel(log) for r in results
                                   for log in r.logs), ""]
    return "\n".join(lines)


def floors_text(r: StressResult) -> str:
    return ", ".join("%s %d" % kv for kv in r.floors.items()) or "-"


def paths_table(results: list[StressResult]) -> list[str]:
    """Which paths each run exercised, with the floors it had to reach."""
    lines = [
        "## The paths each run exercised",
        "",
        "Counted by the suite over the arrays its threads gave "
        "`kmem_cache_free_bulk()` and `kfree_bulk()`, before each call: "
        "*runs*, runs of two or more neighbours from one slab (SLUB without "
        "KASAN links such a run and frees it at once; elsewhere the count "
        "only says what the arrays held), with their objects; *lone*, "
        "objects whose neighbours come from other slabs; "
        "*KFENCE* objects; *other node*, objects of a slab on another node "
        "than that of the CPU the thread counted on; *zeroed*, bulk "
        "allocations that asked for zeroed objects (`__GFP_ZERO`), each "
        "object checked. Then SLUB's event counters for the private "
        "caches (CONFIG_SLUB_STATS, slub-faults only; - elsewhere): frees "
        "to a slab other than the CPU's (*slow frees*), slabs given back "
        "(*slabs freed*), slabs taken from the partial lists (*partial*) "
        "and new ones (*new slabs*), failed cmpxchg_double (*cmpxchg "
        "fails*). *Hotplug*: CPUs taken down and brought back (refused "
        "downs in brackets). A run fails when a count is below its floor "
        "(per 15 guest seconds of a boot, harness/stress.py; the bulk "
        "calls' floors are on the counts of the first table).",
        "",
        "| run | runs (objects) | lone | KFENCE | other node | zeroed | "
        "slow frees | slabs freed | partial | new slabs | cmpxchg fails | "
        "hotplug | floors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        t = r.totals
        events = any(k in row for row in r.rows for k in EVENT_KEYS)
        ev = ["%d" % t[k] if events else "-" for k in EVENT_KEYS]
        hp = ("%d (%d)" % (t["hotplug_cycles"], t["hotplug_refused"])
              if any("hotplug_cycles" in row for row in r.rows) else "-")
        lines.append("| %s | %d (%d) | %d | %d | %d | %d | %s | %s | %s |" % (
            r.run, t["runs"], t["run_objs"], t["lone"], t["kfence"],
            t["other_node"], t.get(ZERO_KEY, 0), " | ".join(ev), hp,
            floors_text(r)))
    return lines


def pressure_table(results: list[StressResult]) -> list[str]:
    """The small-guest runs' reclaim figures."""
    small = [r for r in results if r.small]
    if not small:
        return []
    lines = [
        "",
        "## Real memory pressure",
        "",
        "The *small* runs: a guest of %d MiB in which the init's hog writes "
        "%d MiB of anonymous memory a MiB at a time and gives each MiB up "
        "with MADV_FREE, over and over (initramfs/init.c, harness.hog); the "
        "suite loads once the hog has filled memory. Between then and the "
        "end of each boot (summed over boots), from the guest's /proc/vmstat: "
        "direct reclaims by any task (the hog's included), pages reclaimed "
        "directly and by kswapd, pages the hog gave up with MADV_FREE and "
        "pages of it dropped, and OOM kills (since boot); *failed*: the suite's "
        "allocations that failed (bulk, single, kmalloc, softirq; nothing "
        "injected). A small run fails unless the hog's pages were dropped "
        "and some task reclaimed directly, or on an OOM kill; n/a: its "
        "figures were missing." % (SMALL_MIB, HOG_MIB),
        "",
        "| run | direct reclaims | reclaimed directly | by kswapd | "
        "hog pages given up | dropped | OOM kills | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in small:
        v = r.reclaim
        cells = (["%d" % v[k] for k in VMSTAT_KEYS] if v
                 else ["n/a"] * len(VMSTAT_KEYS))
        lines.append("| %s | %s | %d |" % (
            r.run, " | ".join(cells),
            r.totals["injected"] + r.totals["softirq_fails"]))
    return lines


def results_name(names: str, allocs: str = "") -> str:
    """<name>.md: stress for the soak, soak-<allocators> for the soak of
    some allocators, stress-<runs> for others, so that a short run of some
    configs or allocators does not replace the whole soak's."""
    if names in ("", "soak"):
        return "soak-" + allocs.replace(",", "-") if allocs else "stress"
    return "stress-" + re.sub(r"[^\w.-]+", "_", names)


def write_results(results: list[StressResult], command: str,
                  name: str = "stress", record: bool = False) -> str:
    path = os.path.join(records.folder("stress", record), name)
    st = records.stamp()
    records.write_json(path + ".json", {
        "command": command, "runs": [dataclasses.asdict(r) for r in results]}, st)
    return records.write_markdown(path + ".md", render(results, command), st)


def check_args(args: argparse.Namespace) -> None:
    """./bulk stress's arguments, before anything runs."""
    select(getattr(args, "runs", "soak"))
    alloc = getattr(args, "alloc", None)
    if alloc is not None and not [a for a in alloc.split(",") if a]:
        raise StageError("stress", "--alloc '%s': give one or more of slub, "
                         "slab, slob" % alloc)
    if not math.isfinite(args.minutes) or args.minutes <= 0:
        raise StageError("stress", "--minutes %s: give a number of minutes "
                         "more than 0" % args.minutes)
    if args.seconds is not None and not 1 <= args.seconds <= MAX_ROUND_SECONDS:
        raise StageError("stress", "--seconds %d: give 1 to %d"
                         % (args.seconds, MAX_ROUND_SECONDS))
    seed = getattr(args, "seed", None)
    if seed is not None and not 0 <= seed <= SEED_MAX:
        raise StageError("stress", "--seed %d: give 0 to %d" % (seed, SEED_MAX))


def select(names: str, allocs: str = "") -> list[StressRun]:
    """--runs: 'soak' (default), 'test', 'small', 'kcsan', 'all', or config
    names (every run of the config) and runs (StressRun.ident(), as a
    failure's replay names it); allocs (./bulk soak --alloc): the soak's
    runs of these allocators alone."""
    every = list(dict.fromkeys(TEST_RUNS + SOAK_RUNS + EXTRA_RUNS +
                               KCSAN_RUNS))
    if names in ("", "soak"):
        return [r for r in SOAK_RUNS
                if not allocs or r.config.split("-")[0] in allocs.split(",")]
    if names == "test":
        return TEST_RUNS
    if names == "kcsan":
        return KCSAN_RUNS
    if names == "small":
        return SMALL_RUNS
    if names == "all":
        return every
    wanted = [n for n in names.split(",") if n]
    known = {r.config for r in every}
    bad = [n for n in wanted
           if n not in known and n not in {r.ident() for r in every}]
    if bad or not wanted:
        config = bad[0].split(":")[0] if bad else ""
        runs_of = sorted(r.ident() for r in every if r.config == config)
        raise StageError("stress", "unknown stress config(s) '%s'; give soak, "
                         "test, small, kcsan or all alone, or config names: %s; "
                         "or a run as CONFIG:TAG (a failure's replay names "
                         "it)%s" % (", ".join(bad) or names, ", ".join(sorted(known)),
                                    "; the runs of %s: %s" % (config, ", ".join(runs_of))
                                    if runs_of else ""))
    return [r for r in every if r.config in wanted or r.ident() in wanted]


# A soak boot: rounds of this many guest seconds each.
SOAK_SECONDS = 60
SOAK_ROUNDS = 5


def soak(names: str, minutes: float, seconds: int | None, command: str,
         build_fn: Callable[[str], object], record: bool = False,
         seed: int | None = None, allocs: str = "") -> int:
    """./bulk stress: build, run each run for minutes of host time and
    write stress.md (results/stress/ when record); 1 if any run failed.
    The arguments are check_args()'s; allocs: ./bulk soak --alloc, when
    it names fewer than all three."""
    runs = select(names, allocs)
    per_round = SOAK_SECONDS if seconds is None else seconds
    # Short soaks: one round, as long as asked in guest seconds.
    rounds = SOAK_ROUNDS if minutes * 60 >= per_round * SOAK_ROUNDS else 1
    per_round = min(per_round, max(1, round(minutes * 60)))
    for c in dict.fromkeys(r.config for r in runs):
        build_fn(c)
    results: list[StressResult] = []
    md = ""
    for run_ in runs:
        results.append(soak_run(run_, minutes, per_round, rounds, seed))
        # After each run: an interrupted soak keeps what it finished.
        md = write_results(results, command, results_name(names, allocs),
                           record)
    say("stress: %s, in %s" % (rel(md), records.where(record)))
    for res in results:
        print("%-4s %s: %s" % ("PASS" if res.ok else "FAIL", res.run,
                               summary(res)))
        for p in res.problems:
            print("     %s" % p)
        if not res.ok:
            print("     replay: %s" % res.replay())
    return 0 if all(res.ok for res in results) else 1
