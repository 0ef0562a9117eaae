"""What ./bulk net writes (harness/net.py says what the runs measure).

The markdown of a run (the pktgen table and spread, the clone_skb bound,
the profiler's slab share, the UDP reassembly table) and of the
--napi-cache variants, the UDP plot (gnuplot), the records written
through record.py (build/results/net/, results/net/ with --record), and
--report's re-render from the committed results/net/net.json.
"""
import dataclasses
import json
import os
import statistics
import subprocess
from typing import Any

import record
from common import StageError, need_tools, rel, say
from net_parse import (CALIBRATION, CONFIG, DEBUG_CONFIG, DEBUG_UDP_COUNT,
                       NAPI_DEFAULT, PKT_SIZE, PROFILE_CONFIG, SLAB_ENTRY,
                       UDP_MTU, UDP_SIZES, UDP_TOLERANCE, Measured, NetRun,
                       Profile, UdpRun, fragments)

# The committed record --report re-renders.
RECORD_JSON = record.committed("net", "net.json")


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


def napi_markdown(runs: list[NetRun], command: str) -> str:
    by_label: dict[str, list[float]] = {}
    for r in runs:
        by_label.setdefault(r.name(), []).append(r.instructions())
    ref = by_label.get("series")
    md = ["# NAPI skb cache sizes under pktgen through virtio-net", "",
          "Produced by `%s`: the series at its tip, with 6.1's sizes "
          "(`series`, %d/%d) and with each other SIZE/BULK (the bisect "
          "worktree, net/core/skbuff.c edited and put back). Same workload "
          "as results/net/net.md (exact mode, instructions per packet). "
          "virtio-net frees a sent sk_buff in one of two places: its TX NAPI "
          "poll, through napi_consume_skb() into the cache, which frees SIZE "
          "/ 2 shells with kmem_cache_free_bulk() when it holds SIZE; or "
          "start_xmit(), which reaps finished buffers before queueing more "
          "and frees them one at a time (napi_consume_skb() with a budget "
          "of 0). results/net/net.md's profile gives the split. BULK is the "
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


def to_json(m: Measured, command: str) -> dict[str, Any]:
    """net.json's content (record.write_json adds the stamp)."""
    return {"command": command,
            "runs": [dataclasses.asdict(r) for r in m.runs + m.debug],
            "clone_runs": [dataclasses.asdict(r) for r in m.clones],
            "profiles": [dataclasses.asdict(p) for p in m.profiles],
            "udp": [dataclasses.asdict(r) for r in m.udp + m.udp_debug]}


def from_json(d: dict[str, Any]) -> Measured:
    """A run back from net.json's content (keys other than to_json()'s,
    the stamp among them, are left alone)."""
    runs = [NetRun(**r) for r in d["runs"]]
    # JSON object keys are strings
    udp = [UdpRun(**dict(u, ticks={int(k): v for k, v in u["ticks"].items()}))
           for u in d.get("udp", [])]
    return Measured(runs=[r for r in runs if r.config == CONFIG],
                    clones=[NetRun(**r) for r in d.get("clone_runs", [])],
                    profiles=[Profile(**p) for p in d.get("profiles", [])],
                    udp=[u for u in udp if u.count != DEBUG_UDP_COUNT],
                    debug=[r for r in runs if r.config == DEBUG_CONFIG],
                    udp_debug=[u for u in udp if u.count == DEBUG_UDP_COUNT])


def run_markdown(m: Measured, command: str) -> str:
    return markdown(m.runs, m.debug, command, m.udp, m.udp_debug, m.clones,
                    m.profiles)


def write(m: Measured, command: str, rec: bool) -> tuple[str, str]:
    """net.md, net-udp.png and net.json in record.folder("net", rec); the
    markdown and its path."""
    d = record.folder("net", rec)
    st = record.stamp()
    md = run_markdown(m, command)
    path = record.write_markdown(os.path.join(d, "net.md"), md, st)
    udp_plot(m.udp, os.path.join(d, "net-udp.png"))
    record.write_json(os.path.join(d, "net.json"), to_json(m, command), st)
    return md, path


def write_napi(runs: list[NetRun], command: str, rec: bool) -> tuple[str, str]:
    """net-napi-cache.md and .json in record.folder("net", rec); the
    markdown and its path."""
    d = record.folder("net", rec)
    st = record.stamp()
    md = napi_markdown(runs, command)
    path = record.write_markdown(os.path.join(d, "net-napi-cache.md"), md, st)
    record.write_json(os.path.join(d, "net-napi-cache.json"), {
        "command": command, "runs": [dataclasses.asdict(r) for r in runs]},
        st)
    return md, path


def stamp_of(d: dict[str, Any]) -> record.Stamp | None:
    """The stamp a JSON record carries; None for a record from before
    stamps."""
    return record.Stamp.from_json(d.get("stamp"))


def rerender(rec: bool) -> int:
    """--report: net.md and net-udp.png again from the committed
    results/net/net.json (the text as this harness writes it, the figures
    and stamp of the run that wrote the JSON), into record.folder("net",
    rec): build/results/net/, or results/net/ itself with --record."""
    try:
        with open(RECORD_JSON) as f:
            d = json.load(f)
        m = from_json(d)
        md = run_markdown(m, d["command"])
        st = stamp_of(d)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise StageError("net", "cannot re-render from %s: %s" % (
            rel(RECORD_JSON), e)) from None
    out = record.folder("net", rec)
    path = os.path.join(out, "net.md")
    if st:
        record.write_markdown(path, md, st)
    else:
        # A record from before stamps: it gets none rather than today's.
        with open(path, "w") as f:
            f.write(md)
    udp_plot(m.udp, os.path.join(out, "net-udp.png"))
    say("net: %s and net-udp.png re-rendered from %s" % (rel(path),
                                                         rel(RECORD_JSON)))
    return 0
