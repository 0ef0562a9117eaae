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
completion runs in NAPI (napi_tx, on by default in 6.1): it frees the
sent sk_buffs with napi_consume_skb(), whose NAPI skb cache returns them
to the slab allocator with kmem_cache_free_bulk() 32 at a time.  Then the
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
import time

import base
import basetree
import boot
import gitrepo
import kbuild
import packages
import tree
from common import BISECT_TREE, RESULTS, TREE, StageError, rel, say

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
UDP_RE = re.compile(r"^harness: udp size=(\d+) count=(\d+) tsc=(\d+)$", re.M)
# Payloads of 1, 2, 9, 17, 18, 33 and 45 fragments at MTU 1500: frag_lists
# of 0 (no list), 1, 8, 16, 17, 32 and 44 sk_buffs.
UDP_SIZES = (1472, 2952, 13312, 25152, 26632, 48832, 65507)
UDP_MTU = 1500
# Two boots of one kernel: a relative difference larger than this fails.
UDP_TOLERANCE = 0.005


def append(count: int) -> str:
    """The command line that makes the init run pktgen and print its
    result and the NIC's counters."""
    w = ["/sys/class/net/%s/flags:0x1003" % DEV,
         "%s/kpktgend_0:rem_device_all" % PGDIR,
         "%s/kpktgend_0:add_device %s" % (PGDIR, DEV)]
    w += ["%s/%s:%s" % (PGDIR, DEV, c) for c in (
        "count %d" % count, "pkt_size %d" % PKT_SIZE, "clone_skb 0",
        "delay 0", "dst 10.0.0.2", "dst_mac 52:54:00:12:34:57")]
    # pgctrl drops the last byte written (echo's newline): hence the space.
    w.append("%s/pgctrl:start " % PGDIR)
    cats = ["%s/%s" % (PGDIR, DEV)] + [
        "/sys/class/net/%s/statistics/%s" % (DEV, s)
        for s in ("tx_packets", "tx_dropped", "tx_errors")]
    return " ".join(["harness.write=" + x.replace(" ", "%20") for x in w]
                    + ["harness.cat=" + c for c in cats])


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
    """The boot's log tag: runs at different patches share the bisect
    tree's log names, so the patch goes into the tag."""
    at = label.replace(" ", "") if label.startswith("patch") else ""
    return "-".join(["net", kind, str(count)] + ([at] if at else [])
                    + ["run%d" % run])


def one(tree_name: str, config: str, run: int, count: int,
        label: str = "") -> NetRun:
    tag = run_tag("pktgen", count, label, run)
    res = boot.boot(config, tree_name, "exact", [], append(count), 600, tag=tag)
    assert res is not None
    with open(res.log, errors="replace") as f:
        r = parse(f.read(), tree_name, config, run, res.log)
    r.label = label
    check(r, count)
    say("net %s (%s) run %d: %d packets, %.1f instructions per packet" % (
        r.name(), config, run, r.packets, r.instructions()))
    return r


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
          " | ".join(labels) + " | %s - %s | per frag_list sk_buff | "
          "%s/%s |" % (labels[-1], labels[0], labels[-1], labels[0]),
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


def markdown(runs: list[NetRun], debug: list[NetRun], command: str,
             udp: list[UdpRun] | None = None,
             udp_debug: list[UdpRun] | None = None) -> str:
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
    md += udp_markdown(udp or [])
    for r in debug:
        md += ["", "Debug run (`%s`: KASAN, lockdep, slub_debug): %d packets "
               "sent, %d dropped, no splat." % (r.config, r.tx_packets,
                                                 r.tx_dropped)]
    for u in udp_debug or []:
        md += ["", "Debug run of the UDP workload (`%s`): %d datagrams of "
               "each size received whole, no splat." % (DEBUG_CONFIG, u.count)]
    return "\n".join(md) + "\n"


def main(args: argparse.Namespace) -> int:
    start = time.time()
    if args.runs < 1 or args.count < 1 or args.udp_count < 0:
        raise StageError("net", "--runs and --count take positive numbers, "
                         "--udp-count a positive number or 0")
    packages.setup()
    base.create()
    tree.create()
    basetree.make()
    runs: list[NetRun] = []
    udp: list[UdpRun] = []
    kernels = [(BASE_TREE, "base", None)]
    commits = gitrepo.commits(TREE, "net")
    for n in args.at or []:
        if not 1 <= n <= len(commits):
            raise StageError("net", "--at %d: the series has patches 1 to %d"
                             % (n, len(commits)))
        kernels.append(("bisect", "patch %d" % n, commits[n - 1]))
    kernels.append(("linux", "series", None))
    for tr, label, commit in kernels:
        if commit:
            gitrepo.worktree(TREE, BISECT_TREE, "net")
            gitrepo.checkout(BISECT_TREE, commit, "net")
        kbuild.build(CONFIG, tr, label="%s %s" % (CONFIG, label))
        for i in range(1, args.runs + 1):
            runs.append(one(tr, CONFIG, i, args.count, label))
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
    command = "./bulk net --count %d --runs %d --udp-count %d%s%s" % (
        args.count, args.runs, args.udp_count,
        "".join(" --at %d" % n for n in args.at or []),
        " --no-debug" if args.no_debug else
        " --debug-count %d" % args.debug_count)
    md = markdown(runs, debug, command, udp, udp_debug)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "net.md"), "w") as f:
        f.write(md)
    with open(os.path.join(RESULTS, "net.json"), "w") as f:
        json.dump({"command": command,
                   "runs": [dataclasses.asdict(r) for r in runs + debug],
                   "udp": [dataclasses.asdict(r) for r in udp + udp_debug]},
                  f, indent=1)
    print(md)
    say("net: results/net.md written; done in %dm%02ds" % divmod(
        int(time.time() - start), 60))
    say("net: logs %s" % ", ".join(rel(r.log) for r in
                                   list(runs + debug) + list(udp + udp_debug)))
    return 0
