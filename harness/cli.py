"""./bulk: the slab bulk series harness, one command per pipeline stage.

Every command but setup, --version, --help and 'config --list' holds
build/.lock while it runs.  Its arguments are checked before anything
runs (exit status 2 for a usage error, with what is allowed).  An error
ends a command with one line naming the step and the log to read; Ctrl-C
or SIGTERM unwinds every cleanup (no half-applied series, no detached
tree) and ends it with one line, exit status 130 or 143.
"""
import argparse
import json
import os
import re
import signal
import sys
import textwrap
import time
from types import FrameType
from typing import Any, Callable, NoReturn

import arch
import attribution
import base
import build_each
import callers
import bench
import bench_each
import benchprev
import boot
import costs
import detectors
import export
import holds
import profile
import kbuild
import kconfig
import kunit
import kunit_each
import movebase
import net
import noise
import packages
import record
import registry
import stack
import stackmax
import stress
import suites
import test
import topics
import tree
from common import (BASE_FILE, COVER_TABLES, RESULTS, Interrupted,
                    StageError, read_kv, rel)
from lock import BuildLock

EPILOG = "Start with ./bulk test (the tests) and ./bulk bench (the main job)."
JSON_HELP = ("at the end, print one JSON object on stdout; the lines the "
             "command prints otherwise go to stderr (on an error: no JSON, "
             "the FAILED line and exit status 1)")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; room for the longest verb, so that each
    one's help stays on its line."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            self._action_max_length = max(
                self._action_max_length,
                self._current_indent + 2 + max(map(len, action.choices)))


class Parser(argparse.ArgumentParser):
    """argparse, plus a suggestion for a near miss among a choice's values
    (a verb, --tree, --mode)."""

    def error(self, message: str) -> NoReturn:
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)",
                      message)
        if m:
            message += registry.did_you_mean(
                m.group(1), re.findall(r"'([^']*)'", m.group(2)))
        super().error(message)


def names(allowed: list[str] | tuple[str, ...], what: str,
          many: bool = False) -> Callable[[str], str]:
    """An argparse type: one of @allowed (a comma list of them when
    @many), a near miss named."""
    def check(value: str) -> str:
        given = [v for v in value.split(",") if v] if many else [value]
        for i, v in enumerate(given):
            if v not in allowed:
                raise argparse.ArgumentTypeError(
                    "unknown %s '%s'%s; %s: %s" % (
                        what, v, registry.did_you_mean(v, allowed),
                        "a comma list of" if many else "one of",
                        ", ".join(allowed)))
            if v in given[:i]:
                raise argparse.ArgumentTypeError("%s '%s' given twice"
                                                 % (what, v))
        return value
    return check


def letters(allowed: str) -> Callable[[str], str]:
    """An argparse type: test letters among @allowed (commas ignored),
    each once."""
    def check(value: str) -> str:
        given = value.replace(",", "")
        for i, t in enumerate(given):
            if t not in allowed or t in given[:i]:
                raise argparse.ArgumentTypeError(
                    "test letter '%s' %s; give letters among %s" % (
                        t, "given twice" if t in allowed else "unknown",
                        allowed))
        if not given:
            raise argparse.ArgumentTypeError("give letters among %s" % allowed)
        return value
    return check


def positive(value: str) -> int:
    """An argparse type: a whole number, 1 or more."""
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError("'%s': give a whole number, 1 or "
                                         "more" % value)
    return int(value)


def version() -> str:
    """This repository's commit (as a record's stamp has it), the series'
    length and its base."""
    kv = read_kv(BASE_FILE) if os.path.exists(BASE_FILE) else {}
    return "./bulk %s: %d patches on %s %s" % (
        record.repo_commit(), registry.patch_count(), kv.get("PACKAGE", "linux-source-6.1"),
        kv.get("VERSION", "(no patches/BASE)"))


class VersionAction(argparse.Action):
    """--version, computed only when asked."""

    def __call__(self, parser: argparse.ArgumentParser,
                 namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(version())
        parser.exit()


def kept(kind: str, files: str) -> str:
    """Where a measuring command's records go."""
    return ("%s in build/results/%s/ (results/%s/ with --record: the "
            "committed record)" % (files, kind, kind))


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="./bulk", description=__doc__, epilog=EPILOG,
                formatter_class=Formatter)
    ap.add_argument("--wait", action="store_true",
                    help="if another ./bulk holds build/, wait for it "
                    "instead of ending")
    ap.add_argument("--version", action=VersionAction, nargs=0,
                    help="print this repository's commit ('-dirty' when "
                    "patches/, configs/, harness/ or initramfs/ differ from "
                    "it), the number of patches and the base version, and "
                    "end")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def verb(name: str, help: str, does: str, writes: str, takes: str,
             epilog: str | None = None) -> argparse.ArgumentParser:
        """A command: @help, one line, for ./bulk --help; for ./bulk NAME
        --help what it does, what it writes and how long it takes."""
        text = "\n".join(textwrap.fill(s, 76, subsequent_indent="  ")
                         for s in ("%s: %s." % (help, does), "",
                                   "writes: " + writes, "time: " + takes))
        return sub.add_parser(name, help=help, description=text, epilog=epilog,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    config_name = names(list(kconfig.CONFIG_SETS), "config")

    def soak_opts(p: argparse.ArgumentParser, minutes: float,
                  per: str) -> None:
        """--minutes, --seconds and --seed of ./bulk stress and soak."""
        p.add_argument("--minutes", type=float, default=minutes,
                       help="minutes per %s (default %g)" % (per, minutes))
        p.add_argument("--seconds", type=positive, default=None,
                       help="seconds per round, each checked on its own "
                       "(default 60, or the whole time when shorter; at most "
                       "%d)" % stress.MAX_ROUND_SECONDS)
        p.add_argument("--seed", type=int, default=None,
                       help="the seed of the stress threads' random choices "
                       "for every boot (default: a new one per boot, "
                       "printed; a failed run prints the command that "
                       "replays it)")

    def tree_opt(p: argparse.ArgumentParser) -> None:
        p.add_argument("--tree", default="linux", choices=list(kconfig.TREES),
                       help="source tree: linux (the series), linux-base "
                       "(the benchmark's base), bisect (per-patch builds), "
                       "prev (an earlier posting, ./bulk bench-prev), topics "
                       "(./bulk topics' worktree)")

    def kernel_opts(p: argparse.ArgumentParser) -> None:
        """A built kernel to boot: its config, tree, mode and command line."""
        p.add_argument("config", type=config_name,
                       help="config name (./bulk config --list)")
        tree_opt(p)
        p.add_argument("--mode", choices=list(boot.MODES), default="exact",
                       help="exact: -icount, one CPU, bit for bit; smp: two "
                       "CPUs, no icount; smp4: four")
        p.add_argument("--append", default="", help="extra kernel command line")

    def record_opt(p: argparse.ArgumentParser) -> None:
        p.add_argument("--record", action="store_true",
                       help="write the committed record under results/ "
                       "instead of build/results/")

    def alloc_opt(p: argparse.ArgumentParser, allowed: list[str] | tuple[str, ...],
                  many: bool) -> None:
        p.add_argument("--alloc", default=registry.DEFAULT_ALLOC,
                       type=names(allowed, "allocator config", many),
                       help="%s %s (default %s)" % (
                           "comma list of" if many else "one of",
                           ",".join(allowed), registry.DEFAULT_ALLOC))

    def all_opt(p: argparse.ArgumentParser, opt: str, allowed: list[str],
                what: str) -> None:
        """An option taking a comma list of @allowed, all by default."""
        p.add_argument(opt, default=",".join(allowed),
                       type=names(allowed, what, True),
                       help="comma list of %s (default all)" % ",".join(allowed))

    def tests_opt(p: argparse.ArgumentParser, allowed: str,
                  default: str) -> None:
        p.add_argument("--tests", default=default, type=letters(allowed),
                       help="test letters among %s (default %s): %s" % (
                           allowed, default, registry.test_help(allowed)))

    def range_opts(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--from", dest="first", type=positive, default=1,
                       help="first patch number to %s (default 1)" % what)
        p.add_argument("--to", dest="last", type=positive, default=None,
                       help="last patch number to %s (default: the tip)"
                       % what)

    def arch_opt(p: argparse.ArgumentParser) -> None:
        p.add_argument("--arch", default="x86_64", choices=list(arch.ARCHES),
                       help="the kernels' architecture (default x86_64); "
                       "arm64: QEMU virt, configs NAME-arm64")

    def bench_opts(p: argparse.ArgumentParser) -> None:
        arch_opt(p)
        alloc_opt(p, list(registry.BENCH_CONFIGS), True)
        tests_opt(p, "".join(registry.TESTS), registry.DEFAULT_TESTS)
        p.add_argument("--quick", action="store_true",
                       help="the module's quick mode (fewer rounds)")
        record_opt(p)

    # What to run first.
    verb("setup", "install the Debian packages the harness needs",
         "apt-get install of what is missing, linux-source-6.1 at the "
         "version patches/BASE records while Debian serves it; apt runs "
         "in setup, test and bench, and in move-base, which installs the "
         "base it moves to; the other commands name what is missing",
         "apt packages: QEMU, linux-source-6.1 at patches/BASE's version, "
         "the kernel build tools, ccache, gnuplot, mypy, busybox",
         "about 1 min on a fresh Debian 12; seconds when all is installed")
    p = verb("test", "the tests; CI runs this",
             "setup, the harness's unit tests and mypy, the base, the series "
             "applies, checkpatch, the build-each record, builds, KUnit, boots, "
             "stress runs and a quick benchmark run, each step PASS, FAIL or "
             "SKIP",
             "build/logs/test.json (the summary) and test-times.json; one "
             "PASS/FAIL/SKIP line per step, ending 'N passed, N failed, N "
             "skipped'; exit status 1 when a step failed",
             "cold (empty ccache, nothing built): about 45 to 55 min on 2 "
             "cores (47.9 min at 884c65e); about 15 to 30 min with the "
             "ccache warm or kernels built",
             epilog="step groups, in the order they run:\n" + "\n".join(
                 "  %-11s%s" % kv for kv in test.GROUPS.items()))
    p.add_argument("--only", default="", metavar="GROUP[,GROUP]",
                   type=names(list(test.GROUPS), "step group", True),
                   help="run only these step groups (listed below)")
    p.add_argument("--json", action="store_true",
                   help=JSON_HELP + ": the summary of build/logs/test.json")
    p = verb("bench", "the main job: the benchmark, base vs series",
             "installs what is missing (apt), makes build/linux and "
             "build/linux-base, builds both kernels per allocator, boots "
             "them with the benchmark module and prints the tables side by "
             "side",
             kept("bench", "bench-ALLOCS[-quick].md, .json and -a/-g.png "
                  "plots") + "; with --record, patches/cover-tables.txt for "
             "the cover letter's run",
             "cold: two kernel builds of 6 to 7 min each plus about a "
             "minute of QEMU; warm (kernels built): about 70 s; --alloc "
             "slub,slab,slob --tests abcdefg: six builds cold, about 16 min "
             "warm")
    bench_opts(p)
    p.add_argument("--json", action="store_true",
                   help=JSON_HELP + ": the files written and the report's "
                   "JSON (its tables' figures)")
    p.add_argument("--costs", action="store_true",
                   help="then boot each kernel once more in exact mode "
                   "with a QEMU plugin counting cache misses (a modeled "
                   "cache), locked and IRQ-flag instructions in the timed "
                   "regions: bench-ALLOCS-costs.md, a modeled cost beside "
                   "the instructions (harness/costs.py)")
    p = verb("report", "re-render the benchmark's tables",
             "from the last ./bulk bench boot logs of the same --alloc and "
             "--tests; no build, no boot",
             kept("bench", "bench-ALLOCS[-quick].md, .json and plots") +
             "; with --record, patches/cover-tables.txt for the cover "
             "letter's run", "seconds")
    bench_opts(p)

    # Working on the series.
    p = verb("base", "unpack linux-source-6.1 into build/linux",
             "the tarball of the installed package, checked against "
             "patches/BASE, imported into git and tagged 'base'",
             "build/linux (tag base), build/base.stamp; with "
             "--record patches/BASE", "about 35 s to 1.3 min (78,000 files "
             "into git)")
    p.add_argument("--force", action="store_true", help="discard unexported work")
    p.add_argument("--record", action="store_true",
                   help="write the installed package into patches/BASE")
    p = verb("tree", "build/linux = base + git am of patches/",
             "makes the base first when needed; refuses to discard work "
             "not exported unless --force", "build/linux, branch series; "
             "build/logs/tree.log", "seconds once the base exists")
    p.add_argument("--force", action="store_true", help="discard unexported work")
    verb("export", "write build/linux base..HEAD to patches/",
         "git format-patch of the series, with the cover letter's text "
         "and tables",
         "patches/NNNN-*.patch and the cover letter", "seconds")
    p = verb("move-base", "move patches/BASE to Debian's newest 6.1",
             "installs the newest linux-source-6.1 (or --to VERSION), "
             "diffs the two bases under mm/, net/ and include/linux/slab.h, "
             "applies the series; then re-exports patches/, records the "
             "base, builds every patch (build-each --record) and runs the tests",
             "build/move-base/OLD..NEW.diff; patches/, patches/BASE, "
             "results/per-patch/build-each.*",
             "with --check a few minutes; else a build-each and a test run "
             "(about 1 to 2 h)")
    p.add_argument("--to", metavar="VERSION",
                   help="the Debian version to move to (default: the newest "
                   "that apt-cache madison lists)")
    p.add_argument("--check", action="store_true",
                   help="stop once the series applies: the diff of the two "
                   "bases, patches/BASE untouched")

    # Stages.
    p = verb("config", "write and verify a kernel .config",
             "allnoconfig plus the config's fragments from configs/, then "
             "every line checked to have taken effect", "build/o/TREE-NAME/.config and harness.config-key",
             "about 6 s; under a second while its inputs are unchanged")
    p.add_argument("configs", nargs="*", type=config_name,
                   help="config names (see --list)")
    p.add_argument("--list", action="store_true",
                   help="list the config names and their fragments")
    tree_opt(p)
    p = verb("build", "configure and build kernels with kbuild",
             "O= dirs, ccache, all cores; the kernel is stamped with the "
             "sources it was built from", "build/o/TREE-NAME/ with its stamp "
             "harness.stamp, build/logs/build-TREE-NAME.log",
             "cold: 6 to 7 min per kernel on 2 cores; warm: seconds to "
             "minutes, by what changed")
    p.add_argument("configs", nargs="+", type=config_name,
                   help="config names (./bulk config --list)")
    tree_opt(p)
    p = verb("boot", "boot a built kernel under QEMU",
             "its stamp must match the tree; the console is checked for "
             "splats", "build/logs/boot-"
             "*.log and .json (and a .decoded.log after a splat)",
             "under a minute (exact mode) with the kernel built")
    kernel_opts(p)
    p.add_argument("--load", default="", help="comma-separated module names to load")
    p.add_argument("--timeout", type=positive, default=600,
                   help="seconds before the boot counts as hung (default 600)")
    p.add_argument("--shell", action="store_true",
                   help="after loading the modules, a busybox shell on the "
                   "console (Ctrl-A x ends QEMU)")
    p.add_argument("--gdb", action="store_true",
                   help="QEMU waits for gdb on tcp::%d before the kernel "
                   "starts" % boot.GDB_PORT)
    p = verb("kunit", "run the KUnit suites of a built kernel",
             "boots it and parses the suites' results with the kernel's "
             "kunit.py",
             "build/logs/kunit-* (the parsed results); exit status 1 on a "
             "failed case", "a boot: about a minute; ./bulk test's KUnit "
             "runs take about 7 min together")
    kernel_opts(p)

    # Longer runs.
    p = verb("build-each", "every patch builds: the record test checks",
             "each patch built in build/bisect/linux on slub, on slab and "
             "slob where it matters, the tip on all and on slub-nodebug",
             kept("per-patch", "build-each.md and .json"),
             "warm: 16 to 19 min (105 builds); cold: about an hour")
    record_opt(p)
    p = verb("kunit-each", "the contract suite at every patch",
             "in build/bisect/linux, on slub (exact and smp mode) and "
             "slub-debug",
             kept("per-patch", "kunit-each-patch.md (-pFIRST-pLAST with "
                  "--from/--to)"),
             "warm: about 77 min (42 patches; the series has 43); --from "
             "31: about 30 min")
    range_opts(p, "run")
    record_opt(p)
    p = verb("bench-each", "the benchmark at every patch that can move it",
             "one allocator; each patch that can change its kernel built in "
             "build/bisect/linux and booted in exact mode, base too",
             kept("per-patch", "bench-each-ALLOC.md and .json "
                  "(-pFIRST-pLAST with --from/--to)"),
             "warm: 26 to 31 min for slub (32 boots), 9 for slab, 11 for "
             "slob; --from N --to N+1: about 5 min")
    alloc_opt(p, registry.ALLOCATORS, False)
    tests_opt(p, registry.EXACT_TESTS, registry.DEFAULT_TESTS)
    range_opts(p, "boot")
    p.add_argument("--report", action="store_true",
                   help="only re-render the .md from bench-each-ALLOC.json "
                   "(the run's of the same --from/--to)")
    p.add_argument("--message", type=positive, default=None, metavar="PATCH",
                   help="print, from bench-each-ALLOC.json, the rows "
                   "patch PATCH moves, as a commit message quotes them")
    p.add_argument("--table", type=positive, default=None, metavar="PATCH",
                   help="print, from bench-each-ALLOC.json, patch "
                   "PATCH's fallback / base / before / after table for the "
                   "rows given with --rows, as a commit message quotes it")
    p.add_argument("--rows", default="", metavar="T/VARIANT:N,N ...",
                   help="with --table: the rows, e.g. 'a/bulk:8,64,128 "
                   "c/order_bulk:16 e/kmalloc:64 a/single:1'")
    record_opt(p)
    p = verb("bench-prev", "the benchmark: base, an earlier posting, series",
             "the earlier posting is a commit's patches/, applied in "
             "build/prev/linux; the three kernels share the series' module",
             kept("per-patch", "bench-prev-REV-ALLOCS.md and .json") +
             "; build/prev/", "with the kernels built: about 2.5 min for "
             "slub; cold: three kernel builds more per allocator")
    p.add_argument("--rev", required=True, metavar="REV",
                   help="the commit of this repository whose patches/ is the "
                   "earlier posting (e.g. v1's)")
    alloc_opt(p, registry.ALLOCATORS, True)
    tests_opt(p, registry.EXACT_TESTS, registry.DEFAULT_TESTS)
    record_opt(p)
    p = verb("stress", "soak: the stress suite for as long as asked",
             "builds the runs' kernels and boots each again and again, "
             "checking every round",
             kept("stress", "stress.md and .json"),
             "--minutes per run (default 10) times the runs, plus the "
             "kernel builds")
    soak_opts(p, 10, "run")
    p.add_argument("--runs", default="soak",
                   help="soak (default: one run per allocator, four CPUs, "
                   "fault injection), test (the test command's runs), "
                   "small (its small-guest runs, real memory pressure), "
                   "kcsan (each allocator under KCSAN on two and four CPUs), "
                   "all (those, SLAB fully preemptible on two NUMA nodes, the "
                   "debug kernels on four CPUs and SLOB without lockdep), or "
                   "config names (every run of the config): %s; or one run "
                   "as CONFIG:TAG, as a failed run's replay names it" % ", ".join(
                       sorted({r.config for r in stress.select("all")})))
    record_opt(p)
    p = verb("soak", "the soak: ./bulk stress --runs soak, 30 minutes a run",
             "one run per allocator (SLUB, SLAB, SLOB on four CPUs, fault "
             "injection), each booted again and again for --minutes of the "
             "host's time, every round checked, each boot with its seed",
             kept("stress", "stress.md and .json"),
             "--minutes per allocator (default 30) times three, plus the "
             "kernel builds")
    soak_opts(p, 30, "allocator")
    p.add_argument("--alloc", default=",".join(registry.ALLOCATORS),
                   type=names(list(registry.ALLOCATORS), "allocator", True),
                   help="comma list of the allocators to soak (default all: "
                   "stress.md; fewer write soak-<allocators>.md)")
    record_opt(p)
    p = verb("net", "network runs, base vs series",
             "pktgen through virtio-net and UDP reassembly over loopback, a "
             "KASAN + lockdep run and a function profile",
             kept("net", "net.md, .json and net-udp.png (net-napi-cache.md "
                  "and .json with --napi-cache)"),
             "warm: about 10 min; cold: three kernel builds more; "
             "--napi-cache: about 5 min")
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
                   help="only re-render net.md from net.json")
    p.add_argument("--napi-cache", metavar="SIZE/BULK,...",
                   help="instead: pktgen on the series with 6.1's NAPI skb "
                   "cache sizes and with each SIZE/BULK given (e.g. "
                   "32/16,128/16): net-napi-cache.md")
    record_opt(p)
    p = verb("profile", "instructions per function in the slab calls",
             "per benchmark row, base vs series, counted by a QEMU TCG "
             "plugin",
             kept("experiments", "profile-ALLOC-TESTS-SIZES.md and .json") +
             "; build/profile/", "about 1 min with the kernels built; cold: "
             "two kernel builds more")
    alloc_opt(p, registry.PROFILE_CONFIGS, False)
    tests_opt(p, registry.PROFILE_TESTS, "b")
    p.add_argument("--sizes", default="34,1024",
                   help="comma list of N, the module's sizes (default 34,1024)")
    p.add_argument("--top", type=positive, default=profile.DEFAULT_TOP,
                   help="functions listed per table (default %d)"
                   % profile.DEFAULT_TOP)
    record_opt(p)
    p = verb("callers", "the bulk API's callers in the kernel, base vs series",
             "the maple tree (mmap, mprotect, brk), io_uring NOPs, "
             "kvfree_rcu(), XDP_PASS frames of the BPF test run and qdisc "
             "drops driven by the init in exact mode: instructions "
             "per operation, and the bulk calls per operation from a "
             "kernel with kprobe events",
             kept("bench", "callers.md and .json"),
             "about 2 min with the kernels built; cold: four kernel "
             "builds more")
    p.add_argument("--no-count", action="store_true",
                   help="skip the counting kernel (slub-callers-count)")
    p.add_argument("--costs", action="store_true",
                   help="also boot each kernel once more in exact mode with "
                   "the QEMU plugin of bench --costs timing the init's own "
                   "loops: per unit, cache misses (a modeled cache), locked "
                   "and IRQ-flag instructions, and a modeled cost beside the "
                   "instructions (two boots more; a second table in "
                   "callers.md; harness/costs.py)")
    arch_opt(p)
    record_opt(p)
    p = verb("suites", "the kernel's own suites that use the bulk API, "
             "base vs series",
             "kfence_test, kasan_test, slub_kunit, the maple tree's test "
             "module and test_meminit (under init_on_alloc=1 and "
             "init_on_free=1), in smp mode; SLOB runs the last two",
             kept("suites", "suites-ALLOCS.md and .json"),
             "about 1 h for the three allocators on 2 cores, most of it "
             "six kernel builds (KASAN on SLUB and SLAB)")
    all_opt(p, "--alloc", list(suites.ALLOCS), "allocator")
    all_opt(p, "--suites", list(suites.BY_MODULE), "suite")
    p.add_argument("--timeout", type=positive, default=None,
                   help="seconds before a boot counts as hung (default "
                   "900; the maple tree's, 1800)")
    record_opt(p)
    p = verb("stack", "stack frames of the bulk paths, base vs series",
             "each function's frame from objdump (the prologue's sub and "
             "pushes; checkstack.pl's figure beside it, which counts every "
             "epilogue) for every function the series adds or changes in "
             "the allocator, slab_common.o and skbuff.o, built for x86-64 "
             "(ORC; frame pointers), i386 and arm64 with SLUB, SLAB and "
             "SLOB, in build/stack/",
             kept("bench", "stack.md and .json"),
             "about 25 min cold on 2 cores (24 small builds), a minute warm")
    all_opt(p, "--arch", list(stack.VARIANT_NAMES), "variant")
    all_opt(p, "--alloc", list(registry.ALLOCATORS), "allocator")
    p.add_argument("--live", action="store_true",
                   help="instead: the stack tracer's deepest stack "
                   "(stack_max_size) after the benchmark, pktgen and UDP "
                   "reassembly, base vs series (two slub-net-stacktrace "
                   "kernels, about 30 min cold): stack-live.md")
    record_opt(p)
    p = verb("holds", "IRQ-off and lock holds on 2 and 4 CPUs",
             "the benchmark's test f under multi-threaded TCG with a QEMU "
             "plugin that follows IF and spinlocks (in exact mode, ./bulk "
             "bench --costs gives them per row)",
             kept("bench", "holds-ALLOCS.md and .json") + "; build/holds/",
             "about 3 min per allocator with the kernels built")
    alloc_opt(p, registry.ALLOCATORS, True)
    p.add_argument("--quick", action="store_true",
                   help="the module's quick sizes")
    p.add_argument("--runs", type=positive, default=holds.RUNS,
                   help="boots per kernel and CPU count (default %d)"
                   % holds.RUNS)
    p.add_argument("--cpus", default=holds.CPUS,
                   type=names([str(n) for _, n in holds.MODES], "CPU count",
                              True),
                   help="comma list of CPU counts (default %s; SLOB's test "
                   "f on four takes over 10 minutes a boot)" % holds.CPUS)
    record_opt(p)
    p = verb("noise", "the layout noise floor of the benchmark",
             "the series tip and variants of it, each the tip plus one "
             "generated commit that changes no code path, only where things "
             "lie: code (a function of nops nothing calls), data (a used "
             "static array in .data or .bss) or heap (a late_initcall that "
             "allocates and keeps a few objects and pages; measurement "
             "only), built in build/bisect/linux and booted in exact mode; "
             "per row the tip's figure, each variant's and the largest "
             "change, per kind of variant and per test the median and "
             "largest change",
             kept("experiments", "noise-ALLOC.md and .json"),
             "a kernel build and a boot per variant and for the tip: 3 min "
             "8 s for slub, tests abcdeg, all seven variants, with the tip "
             "built (a relink of 3 to 11 s and a boot of 18 s each)")
    alloc_opt(p, registry.ALLOCATORS, False)
    tests_opt(p, registry.EXACT_TESTS, registry.DEFAULT_TESTS)
    p.add_argument("--variants", type=positive, default=len(noise.VARIANTS),
                   help="how many of the %d variants to boot, the first K "
                   "(default %d; 3 covers each kind): %s" % (
                       len(noise.VARIANTS), len(noise.VARIANTS), "; ".join(
                           "%s (%s): %s" % (v.name, v.kind,
                                            v.describe("ALLOC"))
                           for v in noise.VARIANTS)))
    record_opt(p)
    p = verb("topics", "each topic and prefix applies, builds, passes its "
             "suites",
             "reads patches/TOPICS (NAME FIRST-LAST REQUIRES TITLE per line; "
             "the ranges cover the series once, in order; a topic requires "
             "earlier topics only; patches/topics/NAME.txt its cover "
             "letter) and checks it; then per topic, in build/topics/linux, "
             "one target after the other: alone (the base, git am of the "
             "patches of the topics it requires and of its own) and, where "
             "that is another set of patches, its prefix (the base, git am "
             "of every topic from the first through it; else 'prefix = "
             "alone'); each target builds each config the topic's own "
             "patches can affect (slub, slab, slob for code the allocators "
             "compile each their own way, the allocator a file is private "
             "to, slub for other code), then, where its patches add the "
             "contract suite (not fixes: built only), boots each config "
             "twice: the KUnit modules it builds in exact mode, and the "
             "stress suite for %d s on 2 CPUs without fault injection (in a "
             "memcg on SLUB and SLAB); a step per apply, build and boot, "
             "PASS or FAIL per topic" % stress.TEST_SECONDS,
             kept("per-patch", "topics.md and .json") +
             "; build/topics/, build/logs/topics-LABEL-*.log (LABEL: NAME, "
             "NAME.prefix), the boots' logs kept as "
             "topics-LABEL-kunit-CONFIG.log and topics-LABEL-stress-CONFIG.log",
             "an estimate until measured: for the series' 6 topics and 3 "
             "prefixes, 19 builds (about 20 s each with the ccache warm from "
             "./bulk build-each), 16 KUnit boots (10 to 15 s each) and 16 "
             "stress boots (25 to 35 s each), the boots' times from ./bulk "
             "test's steps: about 15 to 20 min; --builds-only: about 7 min "
             "(was 4 min 39 s for 6 topics and 14 builds, measured, before "
             "the prefixes); with an empty ccache about seven full kernel "
             "builds more (estimated 45 to 50 min on 2 cores)")
    p.add_argument("--builds-only", action="store_true",
                   help="apply and build every target, boot nothing (no "
                   "KUnit or stress suite): a quick check")
    record_opt(p)
    p = verb("attribution", "per patch, kernel lines against the "
             "benchmark's gain",
             "for each patch that can change the allocator's benchmark "
             "kernel (bench-each's rule), the code and comment lines it adds "
             "and deletes in .c and .h files under mm/, net/, include/ and "
             "lib/ (not the tests lib/slab_bulk_* and "
             "net/core/skb_list_test.c), from git show in build/linux; the "
             "change of key rows (a/bulk at N=8, 64, 1024, b/bulk 32, "
             "c/random_bulk 64, d/kfree_bulk 64, a/single 1, g/head_list "
             "64) against the column before it in bench-each-ALLOC.json "
             "(committed record first, else scratch; one of another series "
             "is passed over), and the best and worst change over every row "
             "of tests a to e and g; beside them the largest change per test "
             "of noise-ALLOC.json (when there is one), each key-row change "
             "not above it marked; cache misses, locked operations, IRQ-off "
             "windows, lock holds and stack: not measured per patch. No "
             "build, no boot",
             kept("per-patch", "attribution-ALLOC.md and .json"),
             "about 2 s for slub on the 21-patch series (git show of each "
             "patch, two records read)")
    alloc_opt(p, registry.ALLOCATORS, False)
    record_opt(p)
    p = verb("detectors", "each of the harness's detectors fires once",
             "builds the scratch kernel %s from the series' tree (the "
             "slub-debug set plus configs/detectors.config: LKDTM built in, "
             "the soft-lockup detector, UBSAN bounds checking; no patch "
             "changes) and boots it once per case, with a %d s timeout, in "
             "exact mode (the soft lockup in smp mode: under -icount the "
             "spin does not reach its threshold), each provoking one "
             "detector through the init's harness.write= orders or the "
             "command line: %s. Each boot must "
             "fail with its case's problem (a splat matching its pattern, "
             "the taint check's letter); the command fails when one does "
             "not (a failed run's record goes to build/results/ only)" % (
                 detectors.CONFIG, detectors.TIMEOUT, "; ".join(
                     "%s (%s)" % (c.name, c.detector)
                     for c in detectors.CASES)),
             kept("experiments", "detectors.md and .json") + "; the boots' "
             "logs build/logs/boot-linux-%s-detectors-CASE.log" %
             detectors.CONFIG,
             "a kernel build (KASAN, lockdep and UBSAN: 3 min 24 s measured "
             "on 2 cores; up to about 10 min with a cold ccache), then seven "
             "boots of 6 to 10 s each (about 65 s together)")
    record_opt(p)
    return ap


def check_range(args: argparse.Namespace) -> None:
    """--from/--to: FIRST <= LAST, both patches of the series."""
    if args.last is not None and args.last < args.first:
        raise StageError(args.cmd, "--from %d --to %d: the first patch "
                         "comes after the last" % (args.first, args.last))
    n = registry.patch_count()
    if n and max(args.first, args.last or 0) > n:
        raise StageError(args.cmd, "--from/--to: the series has patches 1 "
                         "to %d" % n)


def check_config(args: argparse.Namespace) -> None:
    if not args.list and not args.configs:
        raise StageError("config", "name the config(s) to write; "
                         "./bulk config --list lists them")


def check_bench_each(args: argparse.Namespace) -> None:
    bench_each.check_args(args)
    check_range(args)


def check_bench(args: argparse.Namespace) -> None:
    bench.check_args(args)
    if args.costs and args.arch != "x86_64":
        raise StageError("bench", "--costs counts x86-64 instructions: "
                         "not with --arch %s" % args.arch)


def check_callers(args: argparse.Namespace) -> None:
    if args.costs and args.arch != "x86_64":
        raise StageError("callers", "--costs counts x86-64 instructions: "
                         "not with --arch %s" % args.arch)


def check_bench_prev(args: argparse.Namespace) -> None:
    benchprev.check_args(args)
    benchprev.check_base(benchprev.resolve(args.rev))


# The checks of the arguments that their own type cannot check alone,
# per command: each module's own check, and the patch range.
CHECKS: dict[str, Callable[[argparse.Namespace], object]] = {
    "config": check_config,
    "bench": check_bench,
    "report": bench.check_args,
    "kunit-each": check_range,
    "bench-each": check_bench_each,
    "bench-prev": check_bench_prev,
    "callers": check_callers,
    "stress": stress.check_args,
    "soak": stress.check_args,
    "move-base": movebase.check_args,
    "net": net.validate,
    "profile": profile.check_args,
    "holds": holds.check_args,
    "noise": noise.check_args,
    "attribution": attribution.check_args,
}


def validate(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every argument, before anything runs: a usage error (exit status 2)
    saying what is allowed."""
    check = CHECKS.get(args.cmd)
    if check is None:
        return
    try:
        check(args)
    except StageError as e:
        command(ap, args.cmd).error(
            e.msg + ("\n" + e.detail if e.detail else ""))


def command(ap: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The sub-parser of command @name."""
    sub = [a for a in ap._actions
           if isinstance(a, argparse._SubParsersAction)][0]
    return sub.choices[name]


def unrecognized(ap: argparse.ArgumentParser, args: argparse.Namespace,
                 extra: list[str]) -> NoReturn:
    """The usage error for arguments the command does not take, with a
    near miss among its options named."""
    p = command(ap, args.cmd)
    given = [a.split("=", 1)[0] for a in extra if a.startswith("-")] or extra
    options = [o for a in p._actions for o in a.option_strings]
    near = [registry.closest(g, options) for g in given]
    p.error("unrecognized arguments: %s%s" % (" ".join(given), "".join(
        "; did you mean %s?" % n for n in near if n)))


def written_since(start: float) -> list[str]:
    """The files of results/, build/results/ and patches/cover-tables.txt
    written since @start."""
    out = [COVER_TABLES] if os.path.exists(COVER_TABLES) and \
        os.path.getmtime(COVER_TABLES) >= start else []
    for root in (RESULTS, record.SCRATCH):
        for d, _, files in os.walk(root):
            out += [os.path.join(d, f) for f in sorted(files)
                    if os.path.getmtime(os.path.join(d, f)) >= start]
    return out


def bench_json(args: argparse.Namespace, start: float,
               rc: int) -> dict[str, Any]:
    """./bulk bench --json: the files written and the report's JSON."""
    files = written_since(start)
    name = bench.report_name(bench.check_args(args)[0], args.quick) + ".json"
    reports = [f for f in files if os.path.basename(f) == name]
    report = None
    if reports:
        with open(reports[0]) as f:
            report = json.load(f)
    return {"command": "./bulk " + " ".join(sys.argv[1:]),
            "exit_status": rc, "files": [rel(f) for f in files],
            "report": report}


def with_json(args: argparse.Namespace) -> int:
    """--json: the command with its stdout on stderr, then one JSON object
    on stdout."""
    start = time.time()
    summary: dict[str, object] = {}
    args.summary = summary
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        rc = dispatch(args)
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
    obj = summary if args.cmd == "test" else bench_json(args, start, rc)
    print(json.dumps(obj, indent=1))
    return rc


# The commands that are one module's main(args).
MAINS: dict[str, Callable[[argparse.Namespace], int]] = {
    "move-base": movebase.main, "bench-each": bench_each.main,
    "bench-prev": benchprev.main, "net": net.main, "profile": profile.main,
    "callers": callers.main, "report": bench.report_main,
    "suites": suites.main, "holds": holds.main, "noise": noise.main,
    "attribution": attribution.main, "detectors": detectors.main,
    "stack": lambda args: (stackmax.main if args.live else stack.main)(args),
}


def dispatch(args: argparse.Namespace) -> int:
    if args.cmd in MAINS:
        return MAINS[args.cmd](args)
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
    elif args.cmd == "build-each":
        return build_each.main(args.record)
    elif args.cmd == "topics":
        return topics.main(args.record, args.builds_only)
    elif args.cmd == "kunit-each":
        return 1 if kunit_each.each_patch(args.first, args.last, args.record) else 0
    elif args.cmd == "test":
        return test.main(args.only, getattr(args, "summary", None))
    elif args.cmd in ("stress", "soak"):
        runs = getattr(args, "runs", "soak")
        # One name per set of allocators, in the registry's order.
        given = getattr(args, "alloc", "").split(",")
        allocs = ",".join(a for a in registry.ALLOCATORS if a in given)
        if allocs == ",".join(registry.ALLOCATORS):
            allocs = ""
        return stress.soak(runs, args.minutes, args.seconds,
                           "./bulk %s%s --minutes %g%s%s" % (
                               args.cmd, " --runs %s" % runs
                               if args.cmd == "stress" else
                               " --alloc %s" % allocs if allocs else "",
                               args.minutes,
                               " --seconds %d" % args.seconds
                               if args.seconds is not None else "",
                               " --seed %d" % args.seed
                               if args.seed is not None else ""),
                           kbuild.build, args.record, args.seed, allocs)
    elif args.cmd == "bench":
        rc = bench.main(args)
        if rc == 0 and args.costs:
            rc = costs.main(args)
        return rc
    return 0


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Interrupted("SIGTERM")


def main(argv: list[str]) -> int:
    ap = parser()
    args, extra = ap.parse_known_args(argv)
    if extra:
        unrecognized(ap, args, extra)
    validate(ap, args)
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        if args.cmd == "setup":
            packages.setup()
            return 0
        if args.cmd == "config" and args.list:
            print(kconfig.listing())
            return 0
        with BuildLock(args.wait):
            if getattr(args, "json", False):
                return with_json(args)
            return dispatch(args)
    except StageError as e:
        print("FAILED %s" % e, file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Interrupted) as e:
        sig = "SIGTERM" if isinstance(e, Interrupted) else "SIGINT"
        print("\n./bulk %s: interrupted (%s); build/linux left as it was"
              % (args.cmd, sig), file=sys.stderr)
        return 143 if isinstance(e, Interrupted) else 130
