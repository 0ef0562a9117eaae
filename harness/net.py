"""Network stage (./bulk net): pktgen through virtio-net, base vs series.

This module is the command: its options checked (validate), then the
runs (net_runs.py: builds and boots; net_parse.py: the records read from
the logs) and their records (net_report.py).  What the runs do, and why:

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
import re
import time

import basetree
import gitrepo
import net_report
import net_runs
import packages
import record
import tree
from common import PATCHES, StageError, rel, say
from net_parse import DEBUG_UDP_COUNT, NAPI_DEFAULT

# The command's defaults (harness/cli.py uses them).
DEFAULT_CLONE_RUNS = 2
DEFAULT_UDP_COUNT = 1000
DEFAULT_DEBUG_COUNT = 20000


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


def validate(args: argparse.Namespace) -> list[tuple[int, int]]:
    """./bulk net's options checked before anything runs (harness/cli.py
    may call this before setup): a StageError that says what is allowed,
    else the --napi-cache variants ([] without it)."""
    for opt, value, least, what in (
            ("--count", args.count, 1, "packets per run"),
            ("--runs", args.runs, 1, "boots per kernel"),
            ("--debug-count", args.debug_count, 1,
             "packets of the debug run"),
            ("--clone-runs", args.clone_runs, 0,
             "boots per kernel with clone_skb; 0 skips them"),
            ("--udp-count", args.udp_count, 0,
             "datagrams of each size; 0 skips the UDP runs")):
        if value < least:
            raise StageError("net", "%s %d: %s, %d or more" % (
                opt, value, what, least))
    if args.udp_count == DEBUG_UDP_COUNT:
        raise StageError("net", "--udp-count %d: the debug run's own count "
                         "(net.json tells the runs apart by it); give "
                         "another" % DEBUG_UDP_COUNT)
    at = args.at or []
    if len(set(at)) != len(at):
        raise StageError("net", "--at: a patch given twice")
    patches = len(gitrepo.patch_files(PATCHES))
    for n in at:
        if not 1 <= n < patches:
            raise StageError("net", "--at %d: the series has patches 1 to %d, "
                             "and %d is the series itself" % (
                                 n, patches, patches))
    if not args.napi_cache:
        return []
    others = [o for o, given in (
        ("--at", bool(at)), ("--no-profile", args.no_profile),
        ("--no-debug", args.no_debug),
        ("--clone-runs", args.clone_runs != DEFAULT_CLONE_RUNS),
        ("--udp-count", args.udp_count != DEFAULT_UDP_COUNT),
        ("--debug-count", args.debug_count != DEFAULT_DEBUG_COUNT)) if given]
    if others:
        raise StageError("net", "--napi-cache runs pktgen only (--count, "
                         "--runs): %s does not apply" % ", ".join(others))
    return parse_napi_cache(args.napi_cache)


def command_line(args: argparse.Namespace) -> str:
    """The run's options as the record quotes them."""
    return "./bulk net --count %d --runs %d --clone-runs %d --udp-count " \
        "%d%s%s" % (
            args.count, args.runs, args.clone_runs, args.udp_count,
            "".join(" --at %d" % n for n in args.at or [])
            + (" --no-profile" if args.no_profile else ""),
            " --no-debug" if args.no_debug else
            " --debug-count %d" % args.debug_count)


def main(args: argparse.Namespace) -> int:
    variants = validate(args)
    rec = args.record
    if args.report:
        return net_report.rerender(rec)
    start = time.time()
    packages.require("net")
    tree.create()
    if variants:
        return napi_main(args, variants, rec, start)
    kernels = net_runs.series_kernels(args.at or [])
    basetree.make()
    m = net_runs.measure(kernels, args)
    md, path = net_report.write(m, command_line(args), rec)
    done(md, path, rec, start, m.logs())
    return 0


def napi_main(args: argparse.Namespace, variants: list[tuple[int, int]],
              rec: bool, start: float) -> int:
    """--napi-cache: the series with other NAPI skb cache sizes, each
    against the same worktree unedited."""
    runs = net_runs.napi_runs(variants, args.count, args.runs)
    command = "./bulk net --napi-cache %s --count %d --runs %d" % (
        ",".join("%d/%d" % v for v in variants), args.count, args.runs)
    md, path = net_report.write_napi(runs, command, rec)
    done(md, path, rec, start, [r.log for r in runs])
    return 0


def done(md: str, path: str, rec: bool, start: float, logs: list[str]) -> None:
    print(md)
    say("net: %s written; records in %s; done in %dm%02ds" % (
        rel(path), record.where(rec), *divmod(int(time.time() - start), 60)))
    say("net: logs %s" % ", ".join(rel(log) for log in logs))
