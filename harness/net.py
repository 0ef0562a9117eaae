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
import kbuild
import packages
import tree
from common import RESULTS, StageError, rel, say

BASE_TREE = "linux-base"
CONFIG = "slub-net"
DEBUG_CONFIG = "slub-debug-net"
PKT_SIZE = 64
DEV = "eth0"
PGDIR = "/proc/net/pktgen"

RESULT_RE = re.compile(r"cat %s/%s: Result: OK: (\d+)\(c(\d+)\+d(\d+)\) usec, "
                       r"(\d+) \((\d+)byte" % (PGDIR, DEV))
TSC_RE = re.compile(r"tsc: (?:Refined TSC clocksource calibration:|Detected) "
                    r"([\d.]+) MHz")
STAT_RE = re.compile(r"cat /sys/class/net/%s/statistics/(\w+): (\d+)$" % DEV,
                     re.M)


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


def one(tree_name: str, config: str, run: int, count: int) -> NetRun:
    tag = "net-pktgen-%d-run%d" % (count, run)
    res = boot.boot(config, tree_name, "exact", [], append(count), 600, tag=tag)
    assert res is not None
    with open(res.log, errors="replace") as f:
        r = parse(f.read(), tree_name, config, run, res.log)
    check(r, count)
    say("net %s-%s run %d: %d packets, %.1f instructions per packet" % (
        tree_name, config, run, r.packets, r.instructions()))
    return r


def markdown(runs: list[NetRun], debug: list[NetRun], command: str) -> str:
    by_tree: dict[str, list[float]] = {}
    for r in runs:
        by_tree.setdefault(r.tree, []).append(r.instructions())
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
            "base" if r.tree == BASE_TREE else "series", r.run, r.packets,
            r.usec, r.instructions()))
    md += ["", "| kernel | min | mean | max | spread (max-min)/mean |",
           "|---|---:|---:|---:|---:|"]
    for t, label in ((BASE_TREE, "base"), ("linux", "series")):
        v = by_tree.get(t, [])
        if v:
            md.append("| %s | %.1f | %.1f | %.1f | %.2f%% |" % (
                label, min(v), statistics.mean(v), max(v),
                100 * (max(v) - min(v)) / statistics.mean(v)))
    if by_tree.get(BASE_TREE) and by_tree.get("linux"):
        b, s = by_tree[BASE_TREE], by_tree["linux"]
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
    for r in debug:
        md += ["", "Debug run (`%s`: KASAN, lockdep, slub_debug): %d packets "
               "sent, %d dropped, no splat." % (r.config, r.tx_packets,
                                                 r.tx_dropped)]
    return "\n".join(md) + "\n"


def main(args: argparse.Namespace) -> int:
    start = time.time()
    if args.runs < 1 or args.count < 1:
        raise StageError("net", "--runs and --count take positive numbers")
    packages.setup()
    base.create()
    tree.create()
    basetree.make()
    runs: list[NetRun] = []
    for tr in (BASE_TREE, "linux"):
        kbuild.build(CONFIG, tr)
        for i in range(1, args.runs + 1):
            runs.append(one(tr, CONFIG, i, args.count))
    debug: list[NetRun] = []
    if not args.no_debug:
        kbuild.build(DEBUG_CONFIG, "linux")
        debug.append(one("linux", DEBUG_CONFIG, 1, args.debug_count))
    command = "./bulk net --count %d --runs %d%s" % (
        args.count, args.runs, " --no-debug" if args.no_debug else
        " --debug-count %d" % args.debug_count)
    md = markdown(runs, debug, command)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "net.md"), "w") as f:
        f.write(md)
    with open(os.path.join(RESULTS, "net.json"), "w") as f:
        json.dump({"command": command,
                   "runs": [dataclasses.asdict(r) for r in runs + debug]},
                  f, indent=1)
    print(md)
    say("net: results/net.md written; done in %dm%02ds" % divmod(
        int(time.time() - start), 60))
    say("net: logs %s" % ", ".join(rel(r.log) for r in runs + debug))
    return 0
