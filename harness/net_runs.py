"""Building and booting the network runs (./bulk net; harness/net.py says
what the workloads do and why).

The kernel command lines that make the init run pktgen (append) and the
UDP reassembly workload (udp_append); one boot of each, parsed and
checked (one, one_udp, one_profile, the last with the profiled vmlinux's
calibration); the kernels a run measures and the boots of each
(series_kernels, measure); and the --napi-cache variants, built from the
series' tip with net/core/skbuff.c edited and put back (napi_runs).
"""
import argparse
import os
import re
import subprocess

import boot
import gitrepo
import kbuild
from common import BISECT_TREE, TREE, StageError, need_tools, rel, say
from net_parse import (BASE_TREE, CALIBRATION, CONFIG, DEBUG_CONFIG,
                       DEBUG_UDP_COUNT, DEV, NAPI_DEFAULT, PGDIR, PKT_SIZE,
                       PROFILE, PROFILE_CONFIG, SLAB_ENTRY, TRACING, UDP_MTU,
                       UDP_SIZES, Measured, NetRun, Profile, UdpRun, check,
                       check_udp_repeat, parse, parse_profile, parse_udp,
                       straight_body)

SKBUFF_C = os.path.join("net", "core", "skbuff.c")
# A kernel to measure: (tree, label, commit to check out in the bisect
# worktree or None for the tree as it is).
Kernel = tuple[str, str, str | None]


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


def udp_append(count: int, sizes: tuple[int, ...] = UDP_SIZES) -> str:
    """The command line for the reassembly workload (see the docstring)."""
    return " ".join(["harness.write=/sys/class/net/lo/mtu:%d" % UDP_MTU,
                     "harness.write=/sys/class/net/lo/flags:0x9",
                     "harness.udp=%d:%s" % (count, ",".join(map(str, sizes)))])


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


def series_kernels(at: list[int]) -> list[Kernel]:
    """The base, the series at each patch of at (in the bisect worktree;
    net.validate() checked the numbers), then the series."""
    commits = gitrepo.commits(TREE, "net")
    out: list[Kernel] = [(BASE_TREE, "base", None)]
    out += [("bisect", "patch %d" % n, commits[n - 1]) for n in sorted(at)]
    return out + [("linux", "series", None)]


def measure(kernels: list[Kernel], args: argparse.Namespace) -> Measured:
    """Each kernel built and booted: --runs pktgen runs, --clone-runs with
    clone_skb equal to the count, the profiled run (not at a patch), two
    UDP runs that must agree; then the debug kernel's runs."""
    m = Measured()
    for tr, label, commit in kernels:
        if commit:
            gitrepo.worktree(TREE, BISECT_TREE, "net")
            gitrepo.checkout(BISECT_TREE, commit, "net")
        kbuild.build(CONFIG, tr, label="%s %s" % (CONFIG, label))
        for i in range(1, args.runs + 1):
            m.runs.append(one(tr, CONFIG, i, args.count, label))
        for i in range(1, args.clone_runs + 1):
            m.clones.append(one(tr, CONFIG, i, args.count, label, args.count))
        if not args.no_profile and not commit:
            kbuild.build(PROFILE_CONFIG, tr, label="%s %s" % (PROFILE_CONFIG,
                                                               label))
            m.profiles.append(one_profile(tr, label, args.count))
        if args.udp_count:
            pair = [one_udp(tr, label, CONFIG, i, args.udp_count)
                    for i in (1, 2)]
            check_udp_repeat(*pair)
            m.udp += pair
    if not args.no_debug:
        kbuild.build(DEBUG_CONFIG, "linux")
        m.debug.append(one("linux", DEBUG_CONFIG, 1, args.debug_count,
                           "series"))
        if args.udp_count:
            m.udp_debug.append(one_udp("linux", "series", DEBUG_CONFIG, 1,
                                       DEBUG_UDP_COUNT))
    return m


def napi_runs(variants: list[tuple[int, int]], count: int,
              runs: int) -> list[NetRun]:
    """The series' tip in the bisect worktree with 6.1's NAPI skb cache
    sizes and with each variant's, each built and booted runs times;
    net/core/skbuff.c is checked on the commit for every variant before
    anything is built, and put back after."""
    tip = gitrepo.commits(TREE, "net")[-1]
    committed = gitrepo.git(TREE, "net", "show", "%s:%s" % (tip, SKBUFF_C))
    for v in [NAPI_DEFAULT] + variants:
        napi_source(committed, *v)
    gitrepo.worktree(TREE, BISECT_TREE, "net")
    gitrepo.checkout(BISECT_TREE, tip, "net")
    path = os.path.join(BISECT_TREE, SKBUFF_C)
    with open(path) as f:
        orig = f.read()
    out: list[NetRun] = []
    try:
        for v in [NAPI_DEFAULT] + variants:
            label = "series" if v == NAPI_DEFAULT else "cache %d/%d" % v
            with open(path, "w") as f:
                f.write(napi_source(orig, *v))
            kbuild.build(CONFIG, "bisect", label="%s %s" % (CONFIG, label))
            for i in range(1, runs + 1):
                out.append(one("bisect", CONFIG, i, count, label,
                               kind="pktgen-napi"))
    finally:
        with open(path, "w") as f:
            f.write(orig)
    return out
