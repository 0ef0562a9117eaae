"""The network runs' records and how they are read from a console log.

The names every part of ./bulk net shares (the kernels' configs, the
pktgen device and sizes, the UDP workload's sizes, the profiled slab entry
points), the records of one boot (NetRun: pktgen; UdpRun: the reassembly
workload; Profile: the function profiler's table) and of a whole run
(Measured), their parsers and the checks on what they say.  Reading only:
nothing here builds or boots (net_runs.py) or writes (net_report.py);
harness/net.py says what the workloads do and why.
"""
import dataclasses
import re

from common import StageError

BASE_TREE = "linux-base"
CONFIG = "slub-net"
DEBUG_CONFIG = "slub-debug-net"
# Datagrams of each size in the KASAN + lockdep run.
DEBUG_UDP_COUNT = 50
PKT_SIZE = 64
DEV = "eth0"
PGDIR = "/proc/net/pktgen"

RESULT_RE = re.compile(r"cat %s/%s: Result: OK: (\d+)\(c(\d+)\+d(\d+)\) usec, "
                       r"(\d+) \((\d+)byte" % (PGDIR, DEV))
TSC_RE = re.compile(r"tsc: (?:Refined TSC clocksource calibration:|Detected) "
                    r"([\d.]+) MHz")
STAT_RE = re.compile(r"cat /sys/class/net/%s/statistics/(\w+): (\d+)$" % DEV,
                     re.M)
TRACING = "/sys/kernel/debug/tracing"
PROFILE = TRACING + "/trace_stat/function0"
PROFILE_RE = re.compile(r"^harness: cat %s:\s+(\w+)\s+(\d+)\s+([\d.]+) us"
                        % re.escape(PROFILE), re.M)
PROFILE_CONFIG = "slub-net-trace"
# The slab allocator's entry points in 6.1 SLUB (mm/slub.c,
# mm/slab_common.c), base and series alike.  One may run inside another
# (an interrupt's free inside a timed allocation): graph-time is off, so a
# call's time leaves out its profiled callees' and the times add up.
SLAB_ENTRY = ("kmem_cache_alloc", "kmem_cache_alloc_lru",
              "kmem_cache_alloc_node", "kmem_cache_free",
              "kmem_cache_alloc_bulk", "kmem_cache_free_bulk", "__kmalloc",
              "__kmalloc_node", "__kmalloc_node_track_caller",
              "kmalloc_trace", "kmalloc_node_trace", "kfree")
# What the profiler adds to each timed call is taken from a function of
# known length that pktgen calls for every packet: skb_put(), whose usual
# path is straight (its two branches go to a BUG()), runs a number of
# instructions that calibration_body() counts in the profiled vmlinux.
CALIBRATION = "skb_put"
INSN_RE = re.compile(r"^\s*([0-9a-f]+):\t(\S+)[ \t]*(\S*).*$", re.M)
UDP_RE = re.compile(r"^harness: udp size=(\d+) count=(\d+) tsc=(\d+)$", re.M)
# Payloads of 1, 2, 9, 17, 18, 33 and 45 fragments at MTU 1500: frag_lists
# of 0 (no list), 1, 8, 16, 17, 32 and 44 sk_buffs.
UDP_SIZES = (1472, 2952, 13312, 25152, 26632, 48832, 65507)
UDP_MTU = 1500
# Two boots of one kernel: a relative difference larger than this fails.
UDP_TOLERANCE = 0.005

# 6.1's NAPI skb cache sizes (NAPI_SKB_CACHE_SIZE, NAPI_SKB_CACHE_BULK in
# net/core/skbuff.c): the series column of the --napi-cache runs.
NAPI_DEFAULT = (64, 16)


@dataclasses.dataclass
class Profile:
    """One profiled pktgen run: per function, calls and guest time."""
    tree: str
    label: str
    log: str
    packets: int
    usec: int
    tsc_mhz: float
    # function -> (hits, microseconds, callees included but profiled ones)
    funcs: dict[str, tuple[int, float]]
    # CALIBRATION's instructions from its fentry call to its return
    body: int = 0

    def overhead(self) -> float:
        """The profiler's own instructions inside each timed call: the
        calibration function's time per call less its body."""
        hits, us = self.funcs[CALIBRATION]
        return us * self.tsc_mhz / hits - self.body

    def calls(self, f: str) -> float:
        return self.funcs.get(f, (0, 0.0))[0] / self.packets

    def slab(self) -> float:
        """Instructions per packet inside the slab entry points, the
        profiler's overhead taken out."""
        c = self.overhead()
        return sum(us * self.tsc_mhz - hits * c for f, (hits, us)
                   in self.funcs.items() if f in SLAB_ENTRY) / self.packets


def straight_body(disasm: str, func: str) -> int:
    """Instructions func runs from after its fentry call to its first ret
    (included), from objdump -d output that starts at func; a StageError
    unless that path is straight: no unconditional jump, and every
    conditional one leaving it (its target past the ret or elsewhere)."""
    insns = [(int(m.group(1), 16), m.group(2), m.group(3), m.group(0))
             for m in INSN_RE.finditer(disasm)]
    if not insns or not insns[0][1].startswith("call") or \
            "<__fentry__>" not in insns[0][3]:
        raise StageError("net", "%s does not start with a call to __fentry__ "
                         "(is the kernel built with the function tracer?)"
                         % func)
    end = next((i for i, insn in enumerate(insns) if insn[1].startswith("ret")),
               None)
    if end is None:
        raise StageError("net", "no ret in %s's first instructions" % func)
    first, last = insns[0][0], insns[end][0]
    for addr, op, arg, _line in insns[1:end]:
        if op in ("jmp", "jmpq"):
            raise StageError("net", "%s: a jmp at %x on its usual path; "
                             "count its instructions by hand" % (func, addr))
        if op.startswith("j"):
            target = int(arg, 16) if re.fullmatch(r"[0-9a-f]+", arg) else -1
            if first <= target <= last:
                raise StageError("net", "%s: a branch at %x lands before its "
                                 "ret: its path is not straight" % (func, addr))
    return end


def parse_profile(text: str, tree_name: str, label: str, log: str) -> Profile:
    m = RESULT_RE.search(text)
    tsc = TSC_RE.findall(text)
    if not m or not tsc:
        raise StageError("net", "%s profile: no pktgen result or TSC line in "
                         "the log" % label, log)
    funcs = {f: (int(h), float(t)) for f, h, t in PROFILE_RE.findall(text)}
    if CALIBRATION not in funcs:
        raise StageError("net", "%s profile: no %s line in %s (profiler "
                         "off, or the function was not called?)" % (
                             label, CALIBRATION, PROFILE), log)
    if not any(f in funcs for f in SLAB_ENTRY):
        raise StageError("net", "%s profile: no slab entry point in %s" % (
            label, PROFILE), log)
    return Profile(tree_name, label, log, int(m.group(4)), int(m.group(1)),
                   float(tsc[-1]), funcs)


def fragments(size: int, mtu: int = UDP_MTU) -> int:
    """IPv4 fragments of a UDP datagram of size payload bytes: each carries
    a multiple of 8 bytes of the UDP datagram (header included)."""
    per = (mtu - 20) // 8 * 8
    return -(-(size + 8) // per)


@dataclasses.dataclass
class UdpRun:
    tree: str
    label: str
    run: int
    log: str
    count: int
    # payload size -> TSC ticks (instructions) for count datagrams
    ticks: dict[int, int]

    def per_datagram(self, size: int) -> float:
        return self.ticks[size] / self.count


def parse_udp(text: str, tree_name: str, label: str, run: int, log: str,
              count: int, sizes: tuple[int, ...] = UDP_SIZES) -> UdpRun:
    ticks = {}
    for m in UDP_RE.finditer(text):
        if int(m.group(2)) != count:
            raise StageError("net", "%s run %d: %s datagrams of %s bytes, "
                             "asked for %d" % (label, run, m.group(2),
                                               m.group(1), count), log)
        ticks[int(m.group(1))] = int(m.group(3))
    missing = [str(s) for s in sizes if s not in ticks]
    if missing:
        raise StageError("net", "%s run %d: no udp result for %s bytes in "
                         "the log (the init's 'harness: udp' lines)" % (
                             label, run, ", ".join(missing)), log)
    return UdpRun(tree_name, label, run, log, count, ticks)


def check_udp_repeat(a: UdpRun, b: UdpRun) -> None:
    """Two boots of one kernel agree (the workload has no device side)."""
    for size in sorted(a.ticks):
        x, y = a.per_datagram(size), b.per_datagram(size)
        if abs(x - y) > UDP_TOLERANCE * min(x, y):
            raise StageError("net", "%s: runs %d and %d differ at %d bytes "
                             "(%.1f and %.1f instructions per datagram); the "
                             "workload should repeat" % (
                                 a.label, a.run, b.run, size, x, y), b.log)


@dataclasses.dataclass
class NetRun:
    tree: str
    config: str
    run: int
    log: str
    packets: int
    usec: int
    tsc_mhz: float
    tx_packets: int
    tx_dropped: int
    tx_errors: int
    # "base", "series" or "patch N"; empty: from the tree
    label: str = ""

    def name(self) -> str:
        return self.label or ("base" if self.tree == BASE_TREE else "series")

    def instructions(self) -> float:
        """Guest instructions per packet over pktgen's run."""
        return self.usec * self.tsc_mhz / self.packets


def parse(text: str, tree_name: str, config: str, run: int, log: str) -> NetRun:
    m = RESULT_RE.search(text)
    if not m:
        raise StageError("net", "%s-%s run %d: no pktgen result in the log"
                         % (tree_name, config, run), log)
    tsc = TSC_RE.findall(text)
    if not tsc:
        raise StageError("net", "%s-%s run %d: no TSC calibration line in the "
                         "log" % (tree_name, config, run), log)
    stats = {k: int(v) for k, v in STAT_RE.findall(text)}
    missing = [s for s in ("tx_packets", "tx_dropped", "tx_errors")
               if s not in stats]
    if missing:
        raise StageError("net", "%s-%s run %d: no %s in the log" % (
            tree_name, config, run, ", ".join(missing)), log)
    return NetRun(tree_name, config, run, log, int(m.group(4)),
                  int(m.group(1)), float(tsc[-1]), stats["tx_packets"],
                  stats["tx_dropped"], stats["tx_errors"])


def check(r: NetRun, count: int) -> None:
    """Every packet pktgen was asked for was sent, none dropped."""
    if r.packets != count or r.tx_packets < count or r.tx_dropped \
            or r.tx_errors:
        raise StageError("net", "%s-%s run %d: pktgen sent %d of %d, the NIC "
                         "counted %d sent, %d dropped, %d errors" % (
                             r.tree, r.config, r.run, r.packets, count,
                             r.tx_packets, r.tx_dropped, r.tx_errors), r.log)


@dataclasses.dataclass
class Measured:
    """Everything one ./bulk net run (not --napi-cache) measured."""
    runs: list[NetRun] = dataclasses.field(default_factory=list)
    clones: list[NetRun] = dataclasses.field(default_factory=list)
    profiles: list[Profile] = dataclasses.field(default_factory=list)
    udp: list[UdpRun] = dataclasses.field(default_factory=list)
    debug: list[NetRun] = dataclasses.field(default_factory=list)
    udp_debug: list[UdpRun] = dataclasses.field(default_factory=list)

    def logs(self) -> list[str]:
        """The boot logs, in the order the run took them."""
        return [r.log for r in self.runs + self.clones + self.debug] + \
            [u.log for u in self.udp + self.udp_debug] + \
            [p.log for p in self.profiles]
