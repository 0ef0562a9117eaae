"""Command line: one sub-command per pipeline stage, plus 'test' and 'bench'.

Every command but setup and 'config --list' holds build/.lock while it
runs.  An error ends it with one line naming the step and the log to read;
Ctrl-C or SIGTERM unwinds every cleanup (no half-applied series, no
detached tree) and ends it with one line, exit status 130 or 143.
"""
import argparse
import signal
import sys
from types import FrameType

import base
import bisectplan
import bench
import bench_each
import benchprev
import boot
import export
import funcprof
import kbuild
import kconfig
import kunit
import kunit_each
import net
import packages
import stress
import testcmd
import tree
from common import Interrupted, StageError
from lock import BuildLock


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="./bulk", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wait", action="store_true",
                    help="if another ./bulk holds build/, wait for it "
                    "instead of ending")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def tree_opt(p: argparse.ArgumentParser) -> None:
        p.add_argument("--tree", default="linux", choices=list(kconfig.TREES),
                       help="source tree: linux (the series), linux-base "
                       "(the benchmark's base), bisect (per-patch builds), "
                       "prev (an earlier posting, ./bulk bench-prev)")

    def mode_opt(p: argparse.ArgumentParser) -> None:
        p.add_argument("--mode", choices=list(boot.MODES), default="exact",
                       help="exact: -icount, one CPU, bit for bit; smp: two "
                       "CPUs, no icount; smp4: four")

    def bench_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument("--alloc", default="slub",
                       help="comma list of %s (default slub)"
                       % ",".join(bench.BENCH_CONFIGS))
        p.add_argument("--tests", default="abcdeg",
                       help="test letters among abcdefghi (default abcdeg; f "
                       "runs in smp mode)")
        p.add_argument("--quick", action="store_true",
                       help="the module's quick mode (fewer rounds)")

    sub.add_parser("setup", help="install the Debian packages the harness needs")
    p = sub.add_parser("base", help="unpack linux-source-6.1 into build/linux, tag 'base'")
    p.add_argument("--force", action="store_true", help="discard unexported work")
    p.add_argument("--record", action="store_true",
                   help="write the installed package into patches/BASE")
    p = sub.add_parser("tree", help="build/linux = base + git am patches/")
    p.add_argument("--force", action="store_true", help="discard unexported work")
    sub.add_parser("export", help="write build/linux base..HEAD to patches/")
    p = sub.add_parser("config", help="write and verify a kernel .config")
    p.add_argument("configs", nargs="*", help="config names (see --list)")
    p.add_argument("--list", action="store_true",
                   help="list the config names and their fragments")
    tree_opt(p)
    p = sub.add_parser("build", help="configure and build kernels with kbuild")
    p.add_argument("configs", nargs="+", help="config names (./bulk config --list)")
    tree_opt(p)
    p = sub.add_parser("boot", help="boot a built kernel under QEMU")
    p.add_argument("config", help="config name (./bulk config --list)")
    tree_opt(p)
    mode_opt(p)
    p.add_argument("--load", default="", help="comma-separated module names to load")
    p.add_argument("--append", default="", help="extra kernel command line")
    p.add_argument("--timeout", type=int, default=600,
                   help="seconds before the boot counts as hung (default 600)")
    p.add_argument("--shell", action="store_true",
                   help="after loading the modules, a busybox shell on the "
                   "console (Ctrl-A x ends QEMU)")
    p.add_argument("--gdb", action="store_true",
                   help="QEMU waits for gdb on tcp::%d before the kernel "
                   "starts" % boot.GDB_PORT)
    p = sub.add_parser("kunit", help="run the KUnit suites of a built kernel")
    p.add_argument("config", help="config name (./bulk config --list)")
    tree_opt(p)
    mode_opt(p)
    p.add_argument("--append", default="", help="extra kernel command line")
    sub.add_parser("bisect", help="every patch builds (slub; slab, slob where "
                   "it matters; the tip on all and on slub-nodebug): "
                   "results/bisect.md, the record ./bulk test checks")
    p = sub.add_parser("kunit-each", help="the contract suite at every patch "
                       "(slub exact/smp, slub-debug): results/kunit-each-patch.md")
    p.add_argument("--from", dest="first", type=int, default=1,
                   help="first patch number to run (default 1); with --from or "
                   "--to the results go to results/kunit-each-patch-pFIRST-pLAST.md")
    p.add_argument("--to", dest="last", type=int, default=None,
                   help="last patch number to run (default: the tip)")
    p = sub.add_parser("bench-each", help="the benchmark at every patch that "
                       "can move it: results/bench-each-ALLOC.md")
    p.add_argument("--alloc", default="slub",
                   help="one of %s (default slub)" % ",".join(bench_each.ALLOCS))
    p.add_argument("--tests", default=bench_each.DEFAULT_TESTS,
                   help="test letters among abcdeg (default %s)"
                   % bench_each.DEFAULT_TESTS)
    p.add_argument("--from", dest="first", type=int, default=1,
                   help="first patch number to boot (the first patch with "
                   "the module is always booted); with --from or --to the "
                   "results go to results/bench-each-ALLOC-pFIRST-pLAST.md, "
                   "and --report, --message and --table read that run's "
                   "file when given the same range")
    p.add_argument("--to", dest="last", type=int, default=None,
                   help="last patch number to boot (default: the tip)")
    p.add_argument("--report", action="store_true",
                   help="only re-render the .md from results/bench-each-ALLOC.json")
    p.add_argument("--message", type=int, default=None, metavar="PATCH",
                   help="print, from results/bench-each-ALLOC.json, the rows "
                   "patch PATCH moves, as a commit message quotes them")
    p.add_argument("--table", type=int, default=None, metavar="PATCH",
                   help="print, from results/bench-each-ALLOC.json, patch "
                   "PATCH's fallback / base / before / after table for the "
                   "rows given with --rows, as a commit message quotes it")
    p.add_argument("--rows", default="", metavar="T/VARIANT:N,N ...",
                   help="with --table: the rows, e.g. 'a/bulk:8,64,128 "
                   "c/order_bulk:16 e/kmalloc:64 a/single:1'")
    p = sub.add_parser("bench-prev", help="the benchmark on base, an earlier "
                       "posting (a commit's patches/) and the series, one "
                       "module: results/bench-prev-REV-ALLOCS.md")
    p.add_argument("--rev", required=True, metavar="REV",
                   help="the commit of this repository whose patches/ is the "
                   "earlier posting (e.g. v1's)")
    p.add_argument("--alloc", default="slub",
                   help="comma list of %s (default slub)"
                   % ",".join(benchprev.ALLOCS))
    p.add_argument("--tests", default=bench_each.DEFAULT_TESTS,
                   help="test letters among %s (default %s)"
                   % (bench_each.TESTS, bench_each.DEFAULT_TESTS))
    p = sub.add_parser("test", help="the test command (README); CI runs it",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="step groups, in the order they run:\n" + "\n".join(
                           "  %-11s%s" % kv for kv in testcmd.GROUPS.items()))
    p.add_argument("--only", default="", metavar="GROUP[,GROUP]",
                   help="run only these step groups (listed below)")
    p = sub.add_parser("stress", help="soak: the stress suite for as long as "
                       "asked: results/stress.md")
    p.add_argument("--minutes", type=float, default=10,
                   help="minutes per run (default 10)")
    p.add_argument("--seconds", type=int, default=None,
                   help="seconds per round, each checked on its own (default "
                   "60, or the whole time when shorter; at most %d)"
                   % stress.MAX_ROUND_SECONDS)
    p.add_argument("--runs", default="soak",
                   help="soak (default: one run per allocator, four CPUs, "
                   "fault injection), test (the test command's runs), all "
                   "(those, the debug kernels on four CPUs and SLOB without "
                   "lockdep), or config names: %s" % ", ".join(sorted(
                       {r.config for r in stress.TEST_RUNS + stress.SOAK_RUNS
                        + stress.EXTRA_RUNS})))
    p = sub.add_parser("bench", help="the main command: base vs series benchmark")
    bench_opts(p)
    p = sub.add_parser("net", help="pktgen through virtio-net and UDP "
                       "reassembly over loopback, base vs series: "
                       "results/net.md")
    p.add_argument("--count", type=int, default=100000,
                   help="packets per run (default 100000)")
    p.add_argument("--runs", type=int, default=5,
                   help="boots per kernel (default 5)")
    p.add_argument("--debug-count", type=int, default=net.DEFAULT_DEBUG_COUNT,
                   help="packets of the KASAN + lockdep run (default 20000)")
    p.add_argument("--no-debug", action="store_true",
                   help="skip the KASAN + lockdep run")
    p.add_argument("--clone-runs", type=int, default=net.DEFAULT_CLONE_RUNS,
                   help="boots per kernel with clone_skb equal to --count: "
                   "pktgen sends one sk_buff over and over, which prices "
                   "the sk_buff's allocation and free (default 2; 0 skips)")
    p.add_argument("--no-profile", action="store_true",
                   help="skip the function-profiler run (slub-net-trace) "
                   "that gives the slab allocator's share of a packet")
    p.add_argument("--udp-count", type=int, default=net.DEFAULT_UDP_COUNT,
                   help="UDP datagrams of each size in the loopback "
                   "reassembly runs (default 1000; 0 skips them)")
    p.add_argument("--at", type=int, action="append", metavar="PATCH",
                   help="also measure the series at patch PATCH (1-based; "
                   "may repeat), built in the bisect worktree")
    p.add_argument("--report", action="store_true",
                   help="only re-render results/net.md from results/net.json")
    p.add_argument("--napi-cache", metavar="SIZE/BULK,...",
                   help="instead: pktgen on the series with 6.1's NAPI skb "
                   "cache sizes and with each SIZE/BULK given (e.g. "
                   "32/16,128/16): results/net-napi-cache.md")
    p = sub.add_parser("profile", help="instructions per object by kernel "
                       "function inside the slab calls of benchmark rows, "
                       "base vs series (QEMU plugin): results/profile-*.md")
    p.add_argument("--alloc", default="slub",
                   help="one of %s (default slub)" % ",".join(funcprof.ALLOCS))
    p.add_argument("--tests", default="b",
                   help="test letters among %s (default b)" % funcprof.TESTS)
    p.add_argument("--sizes", default="34,1024",
                   help="comma list of N, the module's sizes (default 34,1024)")
    p.add_argument("--top", type=int, default=funcprof.DEFAULT_TOP,
                   help="functions listed per table (default %d)"
                   % funcprof.DEFAULT_TOP)
    p = sub.add_parser("report", help="re-render results/ (and the cover "
                       "letter's tables) from the last bench logs")
    bench_opts(p)
    return ap


def dispatch(args: argparse.Namespace) -> int:
    if args.cmd == "base":
        if args.record:
            base.record()
        else:
            base.create(force=args.force)
    elif args.cmd == "tree":
        tree.create(force=args.force)
    elif args.cmd == "export":
        export.export()
    elif args.cmd == "config":
        for c in args.configs:
            kconfig.configure(c, args.tree)
    elif args.cmd == "build":
        for c in args.configs:
            kbuild.build(c, args.tree)
    elif args.cmd == "boot":
        r = boot.boot(args.config, args.tree, args.mode,
                      [m for m in args.load.split(",") if m], args.append,
                      args.timeout, shell=args.shell, gdb=args.gdb)
        if r:
            print(r.log)
    elif args.cmd == "kunit":
        # The series' tree has the cases a listed run must run; an
        # earlier or other tree may not.
        run = (kunit.listed_run(args.config, args.mode, args.append)
               if args.tree == "linux" else
               kunit.KunitRun(args.config, args.mode, args.append))
        res = kunit.run(run, args.tree)
        if res.ok:
            return 0
        raise StageError("kunit", "%s %s" % (args.config, args.mode),
                         res.log, "\n".join(res.problems))
    elif args.cmd == "bench-each":
        return bench_each.main(args)
    elif args.cmd == "bench-prev":
        return benchprev.main(args)
    elif args.cmd == "bisect":
        return bisectplan.main()
    elif args.cmd == "kunit-each":
        return 1 if kunit_each.each_patch(args.first, args.last) else 0
    elif args.cmd == "test":
        return testcmd.main(args.only)
    elif args.cmd == "stress":
        return stress.soak(args.runs, args.minutes, args.seconds,
                           "./bulk stress --runs %s --minutes %g%s" % (
                               args.runs, args.minutes,
                               " --seconds %d" % args.seconds
                               if args.seconds is not None else ""),
                           kbuild.build)
    elif args.cmd == "bench":
        return bench.main(args)
    elif args.cmd == "net":
        return net.main(args)
    elif args.cmd == "profile":
        return funcprof.main(args)
    elif args.cmd == "report":
        return bench.report_main(args)
    return 0


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Interrupted("SIGTERM")


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        if args.cmd == "setup":
            packages.setup()
            return 0
        if args.cmd == "config" and args.list:
            print(kconfig.listing())
            return 0
        if args.cmd == "config" and not args.configs:
            raise StageError("config", "name the config(s) to write; "
                             "./bulk config --list lists them")
        with BuildLock(args.wait):
            return dispatch(args)
    except StageError as e:
        print("FAILED %s" % e, file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Interrupted) as e:
        sig = "SIGTERM" if isinstance(e, Interrupted) else "SIGINT"
        print("\n./bulk %s: interrupted (%s); build/linux left as it was"
              % (args.cmd, sig), file=sys.stderr)
        return 143 if isinstance(e, Interrupted) else 130
