"""./bulk stack --live: the deepest kernel stack while the benchmark and
the network workloads run, base vs series, from the kernel's own stack
tracer (CONFIG_STACK_TRACER; configs/stacktrace.config).

./bulk stack gives each function's frame from its code; this gives what
the frames add up to on the paths that ran.  The stack tracer checks the
stack pointer at every traced function's entry while it is on (from boot:
'stacktrace' on the command line) and keeps the deepest stack it saw
(stack_max_size, in bytes) with its trace (stack_trace: each frame's
depth and size).  The init sets stack_max_size to 0 just before the
workload and prints both files after it: so each figure is the deepest
task stack of the workload, its module's loading and the init's own
writes, and of whatever else ran on a task stack meanwhile (kworkers,
ksoftirqd).  The tracer skips a stack pointer that is not on the task's
stack: hardirqs and the softirqs they run on exit (NAPI's TX completion
among them) run on the IRQ stack on x86-64 and are not seen.  A leaf's
own frame below its last
traced call is not seen (the tracer samples at function entry), and
every function carries an fentry call, so the kernels are for this only.

Workloads, each one boot of the slub-net-stacktrace kernel of each tree:
the benchmark module's exact-mode tests (quick sizes), pktgen and UDP
reassembly over loopback.
"""
import argparse
import dataclasses
import os
import re
from typing import Any

import basetree
import boot
import kbuild
import measure
import net_runs
import profile
import record as records
import registry
from common import StageError, rel, say

CONFIG = "slub-net-stacktrace"
TRACING = "/sys/kernel/debug/tracing"
MAX_SIZE = TRACING + "/stack_max_size"
TRACE = TRACING + "/stack_trace"
PKTGEN_COUNT = 20000
UDP_COUNT = 200
BOOT_TIMEOUT = 1800
# Functions of the bulk paths whose presence on the deepest stack is
# worth a line.
CAT_RE = re.compile(r"^(?:\[[^\]]*\] )?harness: cat (\S+): (.*)$", re.M)
# stack_trace's lines: "  3)     2992     208   func+0x1a/0x80"
TRACE_RE = re.compile(r"^\s*(\d+)\)\s+(\d+)\s+(\d+)\s+(\S+)")


@dataclasses.dataclass
class Frame:
    depth: int
    size: int
    function: str


@dataclasses.dataclass
class Deepest:
    """One workload's deepest stack on one kernel."""
    workload: str
    side: str
    max_size: int
    frames: list[Frame]
    log: str

    def top(self, n: int) -> str:
        """The @n largest frames on that stack, 'func size'."""
        big = sorted(self.frames, key=lambda f: -f.size)[:n]
        return ", ".join("%s %d" % (f.function, f.size) for f in big)

    def sizes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.frames:
            out.setdefault(f.function, f.size)
        return out


def differ(base: Deepest, series: Deepest) -> str:
    """The functions on both deepest stacks whose frames differ, 'func
    base -> series', and those on one stack only."""
    b, s = base.sizes(), series.sizes()
    parts = ["%s %d -> %d" % (f, b[f], s[f]) for f in s
             if f in b and b[f] != s[f]]
    parts += ["%s (series only) %d" % (f, s[f]) for f in s if f not in b]
    parts += ["%s (base only) %d" % (f, b[f]) for f in b if f not in s]
    return ", ".join(parts) or "none"


def parse(console: str, log: str) -> tuple[int, list[Frame]]:
    """stack_max_size and stack_trace's frames from the init's cat lines."""
    size = None
    frames = []
    for path, line in CAT_RE.findall(console):
        if path == MAX_SIZE and line.strip().isdigit():
            size = int(line)
        elif path == TRACE:
            m = TRACE_RE.match(line)
            if m:
                frames.append(Frame(int(m.group(2)), int(m.group(3)),
                                    m.group(4).split("+")[0]))
    if size is None:
        raise StageError("stack", "no %s line in the console: is the stack "
                         "tracer built in (%s)?" % (MAX_SIZE, CONFIG), log)
    return size, frames


def tracer_writes() -> str:
    """The tracer on from boot ('stacktrace': these kernels have no
    /proc/sys), its deepest stack reset before the workload's own
    writes."""
    return "stacktrace harness.write=%s:0" % MAX_SIZE


def tracer_cats() -> str:
    return "harness.cat=%s harness.cat=%s" % (MAX_SIZE, TRACE)


def workloads() -> list[tuple[str, list[str], str]]:
    """(name, modules to load, command line) of each boot."""
    return [
        ("benchmark tests %s, quick" % registry.EXACT_TESTS,
         [measure.BENCH_MODULE],
         " ".join([tracer_writes(), measure.bench_append(
             registry.EXACT_TESTS, True), tracer_cats()])),
        ("pktgen, %d packets" % PKTGEN_COUNT, [],
         " ".join([tracer_writes(), net_runs.append(PKTGEN_COUNT),
                   tracer_cats()])),
        ("UDP reassembly, %d datagrams of each size" % UDP_COUNT, [],
         " ".join([tracer_writes(), net_runs.udp_append(UDP_COUNT),
                   tracer_cats()])),
    ]


def run_one(tree: str, side: str, name: str, load: list[str],
            append: str, k: int) -> Deepest:
    res = boot.boot(CONFIG, tree, "exact", load, append,
                    timeout=BOOT_TIMEOUT, tag="stackmax-%d" % k)
    assert res is not None
    with open(res.log, errors="replace") as f:
        size, frames = parse(f.read(), res.log)
    say("stack --live %s %s: %d bytes" % (side, name, size))
    return Deepest(name, side, size, frames, rel(res.log))


def render(cmd: str, found: list[Deepest]) -> tuple[str, dict[str, Any]]:
    md = ["# The deepest kernel stack under the benchmark and the network "
          "workloads, base vs series", "", "Command: `%s`" % cmd, "",
          "The stack tracer's `stack_max_size` (bytes; the tracer on from "
          "boot, `stacktrace`), reset just before each workload and read "
          "after it, on the %s kernel "
          "(SLUB, the network config, `configs/stacktrace.config`): the "
          "deepest task stack seen at any traced function's entry while the "
          "workload ran (its module's loading and the init's own writes "
          "included, and whatever else ran on a task stack). Hardirqs and "
          "the softirqs they run on exit use the IRQ stack, which the "
          "tracer skips: NAPI's TX completion under pktgen is not seen. The "
          "largest frames on that stack are from its `stack_trace`. See "
          "harness/stackmax.py; each function's own frame is in "
          "stack.md." % CONFIG, "",
          "| workload | base | series | series - base | frames that differ "
          "on the two deepest stacks (bytes) | largest frames on the "
          "series' deepest stack |", "|---|---:|---:|---:|---|---|"]
    by = {(d.workload, d.side): d for d in found}
    for name in dict.fromkeys(d.workload for d in found):
        b, s = by[(name, "base")], by[(name, "series")]
        md.append("| %s | %d | %d | %+d | %s | %s |" % (
            name, b.max_size, s.max_size, s.max_size - b.max_size,
            differ(b, s), s.top(4)))
    data = {"command": cmd, "config": CONFIG, "runs": [
        {"workload": d.workload, "side": d.side, "max_size": d.max_size,
         "frames": [dataclasses.asdict(f) for f in d.frames], "log": d.log}
        for d in found]}
    return "\n".join(md), data


def main(args: argparse.Namespace) -> int:
    cmd = "./bulk stack --live"
    basetree.prepare("stack")
    if basetree.bench_patch() is None:
        raise StageError("stack", "the benchmark module (%s) is not in the "
                         "series yet" % measure.BENCH_FILE)
    found = []
    for tr, side in profile.TREES:
        kbuild.build(CONFIG, tr)
        for k, (name, load, append) in enumerate(workloads()):
            found.append(run_one(tr, side, name, load, append, k))
    md, data = render(cmd, found)
    name = os.path.join(records.folder("bench", args.record), "stack-live")
    records.publish("stack --live", name, md, data, args.record)
    return 0
