"""Network stage (./bulk net): pktgen through virtio-net, base vs series.

The kernels are the benchmark's (configs/slub.config and the rest) plus
configs/net.config: virtio-net and pktgen.  QEMU gives them a virtio-net
NIC whose backend is a hub port with no peer (boot.NIC): every frame the
guest sends is dropped by QEMU, and nothing needs the host's network.

Each boot is in exact mode.  The init brings eth0 up (its sysfs flags)
and runs pktgen through /proc/net/pktgen (harness.write): COUNT UDP
packets of 64 bytes with clone_skb 0, so that every packet allocates its
sk_buff (pktgen's __netdev_alloc_skb(): the shell from skbuff_head_cache,
the head from kmalloc()) and the driver frees it.  virtio-net's TX
completion runs in NAPI (napi_tx, on by default in 6.1): its poll frees
the sent sk_buffs with napi_consume_skb(), whose NAPI skb cache returns
them to the slab allocator with kmem_cache_free_bulk() 32 at a time; but
start_xmit() also reaps finished buffers before queueing more, and frees
those one at a time (napi_consume_skb() with a budget of 0).  Then the
init prints pktgen's result, which gives the run's guest time; under
-icount the guest clock counts retired instructions, so the time over
the packets is instructions per packet (scaled by the guest's TSC
calibration, printed by the kernel).

The device side is not instruction-exact: QEMU's virtio-net handles the
TX queue in its main loop, beside the guest CPU, and when it does decides
how many completions each NAPI poll finds.  Every kernel is booted RUNS
times and the report gives each run and the spread.

The second workload frees lists of sk_buffs on a real path, with no
device in it: IP reassembly.  The init sets the loopback's MTU to 1500,
brings it up, and sends UDP datagrams of UDP_SIZES payload bytes from one
socket to another on 127.0.0.1, receiving each before sending the next
(harness.udp).  IP fragments each datagram into up to 45 packets; the
receive side reassembles them into one sk_buff whose frag_list holds the
other fragments, and when the receiver has read the datagram,
skb_release_data() frees that frag_list with kfree_skb_list().  The whole
run is inside the guest CPU, so it repeats bit for bit: each kernel is
booted twice and the two runs must agree to within UDP_TOLERANCE.  The
figure is TSC ticks per datagram, which under -icount are instructions:
the send, the fragmenting, the loopback, the reassembly, the receive and
the frees.
"""
import argparse
import dataclasses
import json
import os
import re
import statistics
import subprocess
import time

import base
import basetree
import boot
import gitrepo
import kbuild
import packages
import tree
from common import (BISECT_TREE, RESULTS, TREE, StageError, need_tools, rel,
                    say)

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


def append(count: int, clone: int = 0, profile: bool = False) -> str:
    """The command line that makes the init run pktgen and print its
    result and the NIC's counters.  clone: pktgen's clone_skb, how many
    times it sends one sk_buff before it allocates the next (0: never).
    profile: ftrace's function profiler on the slab entry points (and
    CALIBRATION) over the run, its table printed after."""
    w = ["/sys/class/net/%s/flags:0x1003" % DEV,
         "%s/kpktgend_0:rem_device_all" % PGDIR,
         "%s/kpktgend_0:add_device %s" % (PGDIR, DEV)]
    w += ["%s/%s:%s" % (PGDIR, DEV, c) for c in (
        "count %d" % count, "pkt_size %d" % PKT_SIZE, "clone_skb %d" % clone,
        "delay 0", "dst 10.0.0.2", "dst_mac 52:54:00:12:34:57")]
    if profile:
        # Each call's time without its profiled callees' (an interrupt's
        # kfree() inside a timed allocation counts once).
        w += ["%s/set_ftrace_filter:%s" % (TRACING, " ".join(
            SLAB_ENTRY + (CALIBRATION,))),
              "%s/options/graph-time:0" % TRACING,
              "%s/function_profile_enabled:1" % TRACING]
    # pgctrl drops the last byte written (echo's newline): hence the space.
    # Its write returns when pktgen has sent the count.
    w.append("%s/pgctrl:start " % PGDIR)
    if profile:
        # Off before the init reads the results: those reads allocate too.
        w.append("%s/function_profile_enabled:0" % TRACING)
    cats = ["%s/%s" % (PGDIR, DEV)] + [
        "/sys/class/net/%s/statistics/%s" % (DEV, s)
        for s in ("tx_packets", "tx_dropped", "tx_errors")]
    if profile:
        cats.append(PROFILE)
    return " ".join(["harness.write=" + x.replace(" ", "%20") for x in w]
                    + ["harness.cat=" + c for c in cats])


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


def calibration_body(out: str) -> int:
    """straight_body() of CALIBRATION in the vmlinux of O= dir out."""
    vmlinux = os.path.join(out, "vmlinux")
    need_tools("net", ["nm", "objdump"])
    syms = subprocess.run(["nm", vmlinux], capture_output=True, text=True)
    addr = next((line.split()[0] for line in syms.stdout.splitlines()
                 if line.split()[2:3] == [CALIBRATION]), None)
    if syms.returncode or addr is None:
        raise StageError("net", "no symbol %s in %s" % (CALIBRATION, rel(vmlinux)))
    start = int(addr, 16)
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn",
                          "--start-address=0x%x" % start,
                          "--stop-address=0x%x" % (start + 128), vmlinux],
                         capture_output=True, text=True)
    if dis.returncode:
        raise StageError("net", "objdump of %s failed: %s" % (
            CALIBRATION, dis.stderr.strip()))
    text = dis.stdout.split("<%s>:" % CALIBRATION, 1)[-1]
    return straight_body(text, CALIBRATION)


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


def udp_append(count: int, sizes: tuple[int, ...] = UDP_SIZES) -> str:
    """The command line for the reassembly workload (see the docstring)."""
    return " ".join(["harness.write=/sys/class/net/lo/mtu:%d" % UDP_MTU,
                     "harness.write=/sys/class/net/lo/flags:0x9",
                     "harness.udp=%d:%s" % (count, ",".join(map(str, sizes)))])


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


def run_tag(kind: str, count: int, label: str, run: int) -> str:
    """The boot's log tag: runs at different patches or with different
    NAPI cache sizes share the bisect tree's log names, so the label goes
    into the tag."""
    at = "" if label in ("", "base", "series") else \
        re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")
    return "-".join(["net", kind, str(count)] + ([at] if at else [])
                    + ["run%d" % run])


def one(tree_name: str, config: str, run: int, count: int,
        label: str = "", clone: int = 0, kind: str = "pktgen") -> NetRun:
    tag = run_tag(kind + "-clone" if clone else kind, count, label, run)
    res = boot.boot(config, tree_name, "exact", [], append(count, clone), 600,
                    tag=tag)
    assert res is not None
    with open(res.log, errors="replace") as f:
        r = parse(f.read(), tree_name, config, run, res.log)
    r.label = label
    check(r, count)
    say("net %s (%s) run %d: %d packets, %.1f instructions per packet" % (
        r.name(), config, run, r.packets, r.instructions()))
    return r


def udp_plot(runs: list[UdpRun], path: str) -> None:
    """PNG of instructions per fragment against the datagram's fragments,
    one line per kernel (the first run of each)."""
    first: dict[str, UdpRun] = {}
    for r in runs:
        first.setdefault(r.label, r)
    if not first:
        return
    need_tools("net", ["gnuplot"])
    dat = path[:-4] + ".dat"
    with open(dat, "w") as f:
        for size in UDP_SIZES:
            f.write("%d %s\n" % (fragments(size), " ".join(
                "%.2f" % (r.per_datagram(size) / fragments(size))
                for r in first.values())))
    script = ("set terminal pngcairo size 900,540 noenhanced\n"
              "set output '%s'\nset title 'UDP over loopback at MTU %d, reassembled: the "
              "frag_list freed by kfree_skb_list()'\n"
              "set xlabel 'IP fragments per datagram (frag_list: one less)'\n"
              "set ylabel 'instructions per fragment (whole path)'\n"
              "set grid\nset key top right\nplot %s\n" % (
                  path, UDP_MTU, ", ".join(
                      "'%s' u 1:%d w lp t '%s'" % (dat if i == 0 else "",
                                                   i + 2, label)
                      for i, label in enumerate(first))))
    p = subprocess.run(["gnuplot"], input=script, capture_output=True,
                       text=True)
    os.remove(dat)
    if p.returncode != 0:
        raise StageError("net", "gnuplot failed", detail=p.stderr)


def one_udp(tree_name: str, label: str, config: str, run: int,
            count: int) -> UdpRun:
    tag = run_tag("udp", count, label, run)
    res = boot.boot(config, tree_name, "exact", [], udp_append(count), 600,
                    tag=tag)
    assert res is not None
    with open(res.log, errors="replace") as f:
        r = parse_udp(f.read(), tree_name, label, run, res.log, count)
    say("net %s udp run %d: %s instructions per datagram" % (
        label, run, ", ".join("%.0f" % r.per_datagram(s) for s in UDP_SIZES)))
    return r


def udp_markdown(runs: list[UdpRun]) -> list[str]:
    """The reassembly table: the first run of each kernel, base first."""
    first: dict[str, UdpRun] = {}
    for r in runs:
        first.setdefault(r.label, r)
    labels = list(first)
    if not labels:
        return []
    md = ["", "## UDP over loopback, reassembled: kfree_skb_list() of the "
          "frag_list", "",
          "Instructions per datagram (send, fragment, loopback, reassemble, "
          "receive, free), %d datagrams per size, MTU %d. Each kernel was "
          "booted twice: %s." % (
              first[labels[0]].count, UDP_MTU,
              "; ".join("%s runs %s" % (l, "identical" if all(
                  r.ticks == first[l].ticks for r in runs if r.label == l)
                  else "within %.1f%%" % (100 * UDP_TOLERANCE))
                  for l in labels)), "",
          "| payload bytes | fragments | frag_list | " +
          " | ".join(labels) + " | %s - %s | (%s - %s) / frag_list | "
          "%s/%s |" % ((labels[-1], labels[0]) * 3),
          "|---:|---:|---:|" + "---:|" * (len(labels) + 3)]
    for size in UDP_SIZES:
        f = fragments(size)
        v = [first[l].per_datagram(size) for l in labels]
        d = v[-1] - v[0]
        md.append("| %d | %d | %d | %s | %+.1f | %s | %.3f |" % (
            size, f, f - 1, " | ".join("%.1f" % x for x in v), d,
            "%+.1f" % (d / (f - 1)) if f > 1 else "",
            v[-1] / v[0]))
    return md


def clone_markdown(runs: list[NetRun], clones: list[NetRun]) -> list[str]:
    """What allocating and freeing each packet's sk_buff costs: clone_skb 0
    against pktgen sending one sk_buff over and over."""
    if not clones:
        return []
    md = ["", "## The sk_buff's allocation and free, per packet", "",
          "The same pktgen runs with `clone_skb` equal to the count: one "
          "sk_buff, sent over and over, so that no packet allocates or "
          "frees one. The difference of the minima bounds what a packet "
          "spends allocating its sk_buff (shell and head from the slab "
          "allocator, header set-up), filling it, and freeing it (release, "
          "head kfree(), shell to the NAPI cache and from there "
          "kmem_cache_free_bulk()): the slab allocator's share is part of "
          "it.", "",
          "| kernel | clone_skb 0, min | clone_skb count, runs | min | "
          "allocate + fill + free, per packet (bound) | share of the packet |",
          "|---|---:|---|---:|---:|---:|"]
    for label in dict.fromkeys(r.name() for r in clones):
        v0 = [r.instructions() for r in runs if r.name() == label]
        v1 = [r.instructions() for r in clones if r.name() == label]
        if not v0:
            continue
        d = min(v0) - min(v1)
        md.append("| %s | %.1f | %s | %.1f | %.1f | %.1f%% |" % (
            label, min(v0), " ".join("%.1f" % x for x in v1), min(v1), d,
            100 * d / min(v0)))
    return md


def one_profile(tree_name: str, label: str, count: int) -> Profile:
    body = calibration_body(kbuild.check_stamp(PROFILE_CONFIG, tree_name, "net"))
    res = boot.boot(PROFILE_CONFIG, tree_name, "exact", [],
                    append(count, profile=True), 600,
                    tag=run_tag("pktgen-profile", count, label, 1))
    assert res is not None
    with open(res.log, errors="replace") as f:
        text = f.read()
    check(parse(text, tree_name, PROFILE_CONFIG, 1, res.log), count)
    p = parse_profile(text, tree_name, label, res.log)
    p.body = body
    say("net %s profile: %.1f instructions per packet in the slab entry "
        "points (profiler overhead %.1f per call)" % (label, p.slab(),
                                                        p.overhead()))
    return p


def profile_markdown(runs: list[NetRun], profiles: list[Profile]) -> list[str]:
    """The slab share of a packet, from the function profiler."""
    if not profiles:
        return []
    md = ["", "## The slab allocator's share of a packet", "",
          "One more pktgen run per kernel on `%s` (the same config plus "
          "ftrace's function profiler, configs/trace.config), profiling the "
          "slab entry points and `%s`. Calls are counted exactly. Each call's "
          "time (entry to return, under -icount in instructions; what "
          "it calls included, except the profiled functions' own time, "
          "graph-time being off) holds some of the profiler's own work: that "
          "overhead is `%s`'s time per call less its own instructions "
          "(counted in the profiled vmlinux: %s), and is taken out of every "
          "call. Interrupt work that lands in a timed call stays in it, "
          "in `%s`'s as in the others': the calibration moves by a few "
          "instructions from run to run, and per-call differences of that "
          "size are within the method. The share is of the packet's "
          "minimum from the runs above "
          "(the profiled kernel runs slower: its own figure is given "
          "too)." % (PROFILE_CONFIG, CALIBRATION, CALIBRATION, ", ".join(
              "%s %d" % (p.label, p.body) for p in profiles),
                     CALIBRATION), "",
          "| calls per packet | " + " | ".join(p.label for p in profiles)
          + " |", "|---|" + "---:|" * len(profiles)]
    for f in SLAB_ENTRY:
        if any(p.calls(f) for p in profiles):
            md.append("| `%s` | %s |" % (f, " | ".join(
                "%.3f" % p.calls(f) for p in profiles)))
    rows = [("profiled packet, instructions", lambda p, m: "%.1f" % (
                p.usec * p.tsc_mhz / p.packets)),
            ("profiler overhead per call", lambda p, m: "%.1f" % p.overhead()),
            ("in the slab entry points, per packet",
             lambda p, m: "%.1f" % p.slab()),
            ("packet (min of the runs above)",
             lambda p, m: "%.1f" % m if m else ""),
            ("slab share", lambda p, m: "%.1f%%" % (100 * p.slab() / m)
             if m else "")]
    for name, fmt in rows:
        md.append("| %s | %s |" % (name, " | ".join(fmt(p, min(
            (r.instructions() for r in runs if r.name() == p.label),
            default=0.0)) for p in profiles)))
    if len(profiles) == 2:
        a, b = profiles
        ma = min((r.instructions() for r in runs if r.name() == a.label),
                 default=0.0)
        mb = min((r.instructions() for r in runs if r.name() == b.label),
                 default=0.0)
        if ma and mb:
            md += ["", "%s - %s: %+.1f instructions per packet in the slab "
                   "entry points, %+.1f for the whole packet (minima)." % (
                       b.label, a.label, b.slab() - a.slab(), mb - ma)]
    return md


def markdown(runs: list[NetRun], debug: list[NetRun], command: str,
             udp: list[UdpRun] | None = None,
             udp_debug: list[UdpRun] | None = None,
             clones: list[NetRun] | None = None,
             profiles: list[Profile] | None = None) -> str:
    by_label: dict[str, list[float]] = {}
    for r in runs:
        by_label.setdefault(r.name(), []).append(r.instructions())
    md = ["# pktgen through virtio-net (napi_tx), base vs series", "",
          "Produced by `%s`.  Exact mode (`-icount shift=0,sleep=off -smp 1`): "
          "guest instructions per packet over pktgen's run, %d-byte UDP "
          "packets, `clone_skb 0`, config `%s` (see harness/net.py for what "
          "the run does and why the device side makes runs differ)." % (
              command, PKT_SIZE, CONFIG), "",
          "| kernel | run | packets | guest usec | instructions/packet |",
          "|---|---:|---:|---:|---:|"]
    for r in runs:
        md.append("| %s | %d | %d | %d | %.1f |" % (
            r.name(), r.run, r.packets, r.usec, r.instructions()))
    md += ["", "| kernel | min | mean | max | spread (max-min)/mean |",
           "|---|---:|---:|---:|---:|"]
    for label, v in by_label.items():
        md.append("| %s | %.1f | %.1f | %.1f | %.2f%% |" % (
            label, min(v), statistics.mean(v), max(v),
            100 * (max(v) - min(v)) / statistics.mean(v)))
    if by_label.get("base") and by_label.get("series"):
        b, s = by_label["base"], by_label["series"]
        md += ["", "series/base: %.3f of the mean (%+.1f instructions per "
               "packet), %.3f of the minimum (%+.1f)." % (
                   statistics.mean(s) / statistics.mean(b),
                   statistics.mean(s) - statistics.mean(b),
                   min(s) / min(b), min(s) - min(b)),
               "", "While the TX ring is full, pktgen retries in a loop "
               "until QEMU has taken packets off it; how long depends on "
               "the host's scheduling of QEMU's main loop, and those "
               "instructions count. They only add: the minimum is the "
               "closest to the packet's own work. Run nothing else on the "
               "host meanwhile: a second QEMU beside it once made a run "
               "read 3281 instead of about 2040."]
    md += clone_markdown(runs, clones or [])
    md += profile_markdown(runs, profiles or [])
    md += udp_markdown(udp or [])
    if udp:
        md += ["", "![instructions per fragment](net-udp.png)"]
    for r in debug:
        md += ["", "Debug run (`%s`: KASAN, lockdep, slub_debug): %d packets "
               "sent, %d dropped, no splat." % (r.config, r.tx_packets,
                                                 r.tx_dropped)]
    for u in udp_debug or []:
        md += ["", "Debug run of the UDP workload (`%s`): %d datagrams of "
               "each size received whole, no splat." % (DEBUG_CONFIG, u.count)]
    return "\n".join(md) + "\n"


SKBUFF_C = os.path.join("net", "core", "skbuff.c")
# The command's defaults (harness/cli.py uses them).
DEFAULT_CLONE_RUNS = 2
DEFAULT_UDP_COUNT = 1000
DEFAULT_DEBUG_COUNT = 20000
NAPI_DEFAULT = (64, 16)


def parse_napi_cache(spec: str) -> list[tuple[int, int]]:
    """--napi-cache SIZE/BULK[,SIZE/BULK...]: NAPI_SKB_CACHE_SIZE (an even
    number, HALF being SIZE / 2) and NAPI_SKB_CACHE_BULK (1 to SIZE)."""
    out = []
    for item in spec.split(","):
        m = re.fullmatch(r"(\d+)/(\d+)", item.strip())
        if not m:
            raise StageError("net", "--napi-cache: '%s' is not SIZE/BULK "
                             "(e.g. 128/16)" % item)
        size, bulk = int(m.group(1)), int(m.group(2))
        if size < 2 or size % 2 or not 1 <= bulk <= size:
            raise StageError("net", "--napi-cache: %d/%d: SIZE must be even "
                             "and at least 2, BULK from 1 to SIZE" % (size, bulk))
        if (size, bulk) in out:
            raise StageError("net", "--napi-cache: %d/%d given twice" % (
                size, bulk))
        if (size, bulk) == NAPI_DEFAULT:
            raise StageError("net", "--napi-cache: %d/%d is 6.1's own (the "
                             "series column)" % NAPI_DEFAULT)
        out.append((size, bulk))
    return out


def napi_source(text: str, size: int, bulk: int) -> str:
    """net/core/skbuff.c with the NAPI skb cache's sizes set; each define
    must be there exactly once (HALF is defined from SIZE in 6.1)."""
    for name, value in (("NAPI_SKB_CACHE_SIZE", size),
                        ("NAPI_SKB_CACHE_BULK", bulk)):
        text, n = re.subn(r"^(#define\s+%s\s+)\d+$" % name,
                          r"\g<1>%d" % value, text, flags=re.M)
        if n != 1:
            raise StageError("net", "%s: %d numeric definitions of %s, "
                             "expected one" % (SKBUFF_C, n, name))
    if not re.search(r"^#define\s+NAPI_SKB_CACHE_HALF\s+\(NAPI_SKB_CACHE_SIZE"
                     r" / 2\)$", text, re.M):
        raise StageError("net", "%s: NAPI_SKB_CACHE_HALF is no longer "
                         "SIZE / 2" % SKBUFF_C)
    return text


def napi_markdown(runs: list[NetRun], command: str) -> str:
    by_label: dict[str, list[float]] = {}
    for r in runs:
        by_label.setdefault(r.name(), []).append(r.instructions())
    ref = by_label.get("series")
    md = ["# NAPI skb cache sizes under pktgen through virtio-net", "",
          "Produced by `%s`: the series at its tip, with 6.1's sizes "
          "(`series`, %d/%d) and with each other SIZE/BULK (the bisect "
          "worktree, net/core/skbuff.c edited and put back). Same workload "
          "as results/net.md (exact mode, instructions per packet). "
          "virtio-net frees a sent sk_buff in one of two places: its TX NAPI "
          "poll, through napi_consume_skb() into the cache, which frees SIZE "
          "/ 2 shells with kmem_cache_free_bulk() when it holds SIZE; or "
          "start_xmit(), which reaps finished buffers before queueing more "
          "and frees them one at a time (napi_consume_skb() with a budget "
          "of 0). results/net.md's profile gives the split. BULK is the "
          "refill of napi_alloc_skb() and napi_build_skb(), which this "
          "TX-only workload never calls." % ((command,) + NAPI_DEFAULT), "",
          "| kernel | runs | min | mean | max | min vs series | mean vs "
          "series |", "|---|---:|---:|---:|---:|---:|---:|"]
    for label, v in by_label.items():
        md.append("| %s | %s | %.1f | %.1f | %.1f | %s | %s |" % (
            label, " ".join("%.1f" % x for x in v), min(v),
            statistics.mean(v), max(v),
            "%+.1f" % (min(v) - min(ref)) if ref else "",
            "%+.1f" % (statistics.mean(v) - statistics.mean(ref))
            if ref else ""))
    return "\n".join(md) + "\n"


def napi_main(args: argparse.Namespace, variants: list[tuple[int, int]],
              start: float) -> int:
    """--napi-cache: the series with other NAPI skb cache sizes, each
    against the same worktree unedited."""
    tip = gitrepo.commits(TREE, "net")[-1]
    # Checked on the commit before anything is built or booted.
    committed = gitrepo.git(TREE, "net", "show", "%s:%s" % (tip, SKBUFF_C))
    for v in [NAPI_DEFAULT] + variants:
        napi_source(committed, *v)
    gitrepo.worktree(TREE, BISECT_TREE, "net")
    gitrepo.checkout(BISECT_TREE, tip, "net")
    path = os.path.join(BISECT_TREE, SKBUFF_C)
    with open(path) as f:
        orig = f.read()
    runs: list[NetRun] = []
    try:
        for v in [NAPI_DEFAULT] + variants:
            label = "series" if v == NAPI_DEFAULT else "cache %d/%d" % v
            with open(path, "w") as f:
                f.write(napi_source(orig, *v))
            kbuild.build(CONFIG, "bisect", label="%s %s" % (CONFIG, label))
            for i in range(1, args.runs + 1):
                runs.append(one("bisect", CONFIG, i, args.count, label,
                                kind="pktgen-napi"))
    finally:
        with open(path, "w") as f:
            f.write(orig)
    command = "./bulk net --napi-cache %s --count %d --runs %d" % (
        ",".join("%d/%d" % v for v in variants), args.count, args.runs)
    md = napi_markdown(runs, command)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "net-napi-cache.md"), "w") as f:
        f.write(md)
    with open(os.path.join(RESULTS, "net-napi-cache.json"), "w") as f:
        json.dump({"command": command,
                   "runs": [dataclasses.asdict(r) for r in runs]}, f, indent=1)
    print(md)
    say("net: results/net-napi-cache.md written; done in %dm%02ds" % divmod(
        int(time.time() - start), 60))
    say("net: logs %s" % ", ".join(rel(r.log) for r in runs))
    return 0


def check_options(args: argparse.Namespace) -> list[tuple[int, int]]:
    """Option errors before anything runs; the NAPI cache variants."""
    if args.runs < 1 or args.count < 1 or args.udp_count < 0 \
            or args.clone_runs < 0 or args.debug_count < 1:
        raise StageError("net", "--runs, --count and --debug-count take "
                         "positive numbers, --udp-count and --clone-runs a "
                         "positive number or 0")
    if len(set(args.at or [])) != len(args.at or []):
        raise StageError("net", "--at: a patch given twice")
    if not args.napi_cache:
        return []
    others = [o for o, given in (
        ("--at", bool(args.at)), ("--no-profile", args.no_profile),
        ("--no-debug", args.no_debug),
        ("--clone-runs", args.clone_runs != DEFAULT_CLONE_RUNS),
        ("--udp-count", args.udp_count != DEFAULT_UDP_COUNT),
        ("--debug-count", args.debug_count != DEFAULT_DEBUG_COUNT)) if given]
    if others:
        raise StageError("net", "--napi-cache runs pktgen only (--count, "
                         "--runs): %s does not apply" % ", ".join(others))
    return parse_napi_cache(args.napi_cache)


def rerender() -> int:
    """--report: results/net.md again from results/net.json (the text as
    this harness writes it, the figures of the run that wrote the JSON)."""
    path = os.path.join(RESULTS, "net.json")
    try:
        with open(path) as f:
            d = json.load(f)
        runs = [NetRun(**r) for r in d["runs"]]
        for u in d.get("udp", []):
            # JSON object keys are strings
            u["ticks"] = {int(k): v for k, v in u["ticks"].items()}
        md = markdown([r for r in runs if r.config == CONFIG],
                      [r for r in runs if r.config == DEBUG_CONFIG],
                      d["command"],
                      [UdpRun(**u) for u in d.get("udp", [])
                       if u["count"] != DEBUG_UDP_COUNT],
                      [UdpRun(**u) for u in d.get("udp", [])
                       if u["count"] == DEBUG_UDP_COUNT],
                      [NetRun(**r) for r in d.get("clone_runs", [])],
                      [Profile(**p) for p in d.get("profiles", [])])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StageError("net", "cannot re-render from %s: %s" % (
            rel(path), e)) from None
    with open(os.path.join(RESULTS, "net.md"), "w") as f:
        f.write(md)
    udp_plot([UdpRun(**u) for u in d.get("udp", [])
              if u["count"] != DEBUG_UDP_COUNT],
             os.path.join(RESULTS, "net-udp.png"))
    say("net: results/net.md and net-udp.png re-rendered from %s" % rel(path))
    return 0


def main(args: argparse.Namespace) -> int:
    if args.report:
        return rerender()
    start = time.time()
    variants = check_options(args)
    packages.setup()
    base.create()
    tree.create()
    if variants:
        return napi_main(args, variants, start)
    kernels = [(BASE_TREE, "base", None)]
    commits = gitrepo.commits(TREE, "net")
    for n in sorted(args.at or []):
        if not 1 <= n < len(commits):
            raise StageError("net", "--at %d: the series has patches 1 to %d, "
                             "and %d is the series itself" % (
                                 n, len(commits), len(commits)))
        kernels.append(("bisect", "patch %d" % n, commits[n - 1]))
    basetree.make()
    runs: list[NetRun] = []
    clones: list[NetRun] = []
    profiles: list[Profile] = []
    udp: list[UdpRun] = []
    kernels.append(("linux", "series", None))
    for tr, label, commit in kernels:
        if commit:
            gitrepo.worktree(TREE, BISECT_TREE, "net")
            gitrepo.checkout(BISECT_TREE, commit, "net")
        kbuild.build(CONFIG, tr, label="%s %s" % (CONFIG, label))
        for i in range(1, args.runs + 1):
            runs.append(one(tr, CONFIG, i, args.count, label))
        for i in range(1, args.clone_runs + 1):
            clones.append(one(tr, CONFIG, i, args.count, label, args.count))
        if not args.no_profile and not commit:
            kbuild.build(PROFILE_CONFIG, tr, label="%s %s" % (PROFILE_CONFIG,
                                                               label))
            profiles.append(one_profile(tr, label, args.count))
        if args.udp_count:
            pair = [one_udp(tr, label, CONFIG, i, args.udp_count)
                    for i in (1, 2)]
            check_udp_repeat(*pair)
            udp += pair
    debug: list[NetRun] = []
    udp_debug: list[UdpRun] = []
    if not args.no_debug:
        kbuild.build(DEBUG_CONFIG, "linux")
        debug.append(one("linux", DEBUG_CONFIG, 1, args.debug_count,
                         "series"))
        if args.udp_count:
            udp_debug.append(one_udp("linux", "series", DEBUG_CONFIG, 1,
                                     DEBUG_UDP_COUNT))
    command = "./bulk net --count %d --runs %d --clone-runs %d --udp-count " \
        "%d%s%s" % (
        args.count, args.runs, args.clone_runs, args.udp_count,
        "".join(" --at %d" % n for n in args.at or [])
        + (" --no-profile" if args.no_profile else ""),
        " --no-debug" if args.no_debug else
        " --debug-count %d" % args.debug_count)
    md = markdown(runs, debug, command, udp, udp_debug, clones, profiles)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "net.md"), "w") as f:
        f.write(md)
    udp_plot(udp, os.path.join(RESULTS, "net-udp.png"))
    with open(os.path.join(RESULTS, "net.json"), "w") as f:
        json.dump({"command": command,
                   "runs": [dataclasses.asdict(r) for r in runs + debug],
                   "clone_runs": [dataclasses.asdict(r) for r in clones],
                   "profiles": [dataclasses.asdict(p) for p in profiles],
                   "udp": [dataclasses.asdict(r) for r in udp + udp_debug]},
                  f, indent=1)
    print(md)
    say("net: results/net.md written; done in %dm%02ds" % divmod(
        int(time.time() - start), 60))
    say("net: logs %s" % ", ".join(rel(r.log) for r in
                                   list(runs + clones + debug)
                                   + list(udp + udp_debug) + list(profiles)))
    return 0
