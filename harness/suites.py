"""./bulk suites: the kernel's own test suites that use the bulk API, run on
the base and on the series alike.

They were written by others and are the cheapest outside check there is:
KFENCE's and KASAN's KUnit suites (kfence_test: test_free_bulk and
test_memcache_alloc_bulk; kasan_test: kmem_cache_bulk), SLUB's slub_kunit,
test_meminit (do_kmem_cache_size_bulk and the bulk half of every
kmem_cache test) and the maple tree's test module (the maple tree takes its
nodes with kmem_cache_alloc_bulk() and frees them with
kmem_cache_free_bulk()).  SLOB supports neither KASAN, KFENCE nor
SLUB_DEBUG: it runs test_meminit and the maple tree's.

Kernels: the configs ALLOCS names (configs/suites*.config), built on
build/linux-base (basetree: the base plus the benchmark patch, which only
adds a module; its O= dirs, ccache sharing and stamps are the benchmark's
own, so no third worktree) and on build/linux (the series).

Boots: smp mode.  kfence_test waits, case after case, for KFENCE to sample
one of its allocations (one every kfence.sample_interval, 100 ms): in smp
mode that interval is wall-clock time, while exact mode's -icount counts it
in guest instructions (10^8 of them, a second or more of TCG each time);
and none of these suites compares figures that exact mode would make
repeatable.  test_meminit checks that memory comes initialised, which only
init_on_alloc or init_on_free promise: it gets a boot under each, alone.
KASAN's and slub_kunit load with KFENCE sampling off (the init's
harness.nokfence): an object KFENCE happens to serve does not get the
report they expect.  A module that fails to load (test_meminit and the
maple tree's return -EINVAL on a failure) ends the init's loading: the
modules after it get another boot.

Results: the KUnit suites' KTAP through the kernel's kunit.py parser
(kunit.parse), the other two by their summary lines; a kernel splat in a
suite's part of the console fails it, except in kasan_test's and
kfence_test's, which provoke reports on purpose and check them themselves.
The table (suite | allocator | base | series, passed/failed/skipped) goes
through record.py (kind "suites").
"""
import argparse
import dataclasses
import os
import re
import time
from typing import Any, Callable, Optional

import basetree
import boot
import kbuild
import kconfig
import kunit
import record
from common import StageError, rel, say


@dataclasses.dataclass(frozen=True)
class Suite:
    """A test module: its Kconfig symbol, how its result is read (ktap,
    meminit, maple), whether it provokes KASAN/KFENCE reports on purpose,
    whether it loads with KFENCE sampling off, and its cases that use the
    bulk API."""
    module: str
    symbol: str
    parser: str
    reports: bool
    nokfence: bool
    bulk: str


# In load order within a boot.
SUITES = [
    Suite("kfence_test", "KFENCE_KUNIT_TEST", "ktap", True, False,
          "test_free_bulk, test_memcache_alloc_bulk"),
    Suite("kasan_test", "KASAN_KUNIT_TEST", "ktap", True, True,
          "kmem_cache_bulk"),
    Suite("slub_kunit", "SLUB_KUNIT_TEST", "ktap", False, True,
          "none (SLUB's debug checks, on the caches bulk calls use)"),
    Suite("test_maple_tree", "TEST_MAPLE_TREE", "maple", False, False,
          "every node allocation and free (mas_alloc_nodes, mt_free_bulk)"),
    Suite("test_meminit", "TEST_MEMINIT", "meminit", False, False,
          "do_kmem_cache_size_bulk, the bulk half of do_kmem_cache_size"),
]
BY_MODULE = {s.module: s for s in SUITES}
# The allocators and their configs.
ALLOCS = {"slub": "slub-suites", "slab": "slab-suites", "slob": "slob-suites"}
# Base first: a suite that fails there is the base's, not the series'.
SIDES = (("base", "linux-base"), ("series", "linux"))
MODE = "smp"


@dataclasses.dataclass(frozen=True)
class Boot:
    """A row group: the modules of one kernel command line."""
    label: str
    modules: tuple[str, ...]
    append: str = ""
    timeout: int = 900


# The maple tree's test module boots last and alone: with
# DEBUG_MAPLE_TREE's validation of every tree it checks, under KASAN and
# TCG, it runs for many minutes, and some of its loops hold a CPU for
# longer than RCU's 21 s stall timeout without a quiescent state (an RCU
# stall report on the base kernel, SLUB with KASAN, on a loaded host, in
# a run stopped for this): the timeout at its most, 300 s.  It covers
# normal grace periods only; 6.1 keeps expedited ones at 21 s.
MAPLE_APPEND = "rcupdate.rcu_cpu_stall_timeout=300"
BOOTS = [
    Boot("", ("kfence_test", "kasan_test", "slub_kunit")),
    Boot("init_on_alloc=1", ("test_meminit",), "init_on_alloc=1", 600),
    Boot("init_on_free=1", ("test_meminit",), "init_on_free=1", 600),
    Boot("", ("test_maple_tree",), MAPLE_APPEND, 1800),
]


@dataclasses.dataclass
class Outcome:
    """One suite's result in one boot: counts (when it gave a result), the
    failed cases, and problems besides (splats, a crash, a timeout)."""
    ran: bool = False
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)

    def ok(self) -> bool:
        return self.ran and not self.failed and not self.problems

    def cell(self) -> str:
        if not self.ran:
            return "no result"
        return "%d/%d/%d%s" % (self.passed, self.failed, self.skipped,
                               " (!)" if self.problems else "")

    def notes(self) -> list[str]:
        out = []
        if self.failures:
            shown = self.failures[:8]
            more = len(self.failures) - len(shown)
            out.append("failed: " + ", ".join(shown)
                       + (" and %d more" % more if more else ""))
        return out + self.problems


MEMINIT_PASSED_RE = re.compile(r"test_meminit: all (\d+) tests passed!")
MEMINIT_FAILED_RE = re.compile(r"test_meminit: failures: (\d+) out of (\d+)")
MEMINIT_FN_RE = re.compile(r"test_meminit: (\w+) failed (\d+) out of (\d+) "
                           r"times")
MAPLE_RE = re.compile(r"maple_tree: (\d+) of (\d+) tests passed")
MAPLE_BUG_RE = re.compile(r"BUG at (\w+:\d+)")


def parse_meminit(text: str) -> Outcome:
    """test_meminit's console lines: its summary ('all N tests passed!' or
    'failures: F out of N') and the functions that failed."""
    out = Outcome()
    m = MEMINIT_PASSED_RE.search(text)
    if m:
        out.ran, out.passed = True, int(m.group(1))
        return out
    m = MEMINIT_FAILED_RE.search(text)
    if m:
        failed, total = int(m.group(1)), int(m.group(2))
        out.ran, out.passed, out.failed = True, total - failed, failed
        out.failures = ["%s (%s of %s)" % f.groups()
                        for f in MEMINIT_FN_RE.finditer(text)]
    return out


def parse_maple(text: str) -> Outcome:
    """test_maple_tree's 'maple_tree: P of R tests passed', and where its
    failed checks are ('BUG at fn:line', MT_BUG_ON with
    DEBUG_MAPLE_TREE)."""
    out = Outcome()
    m = MAPLE_RE.search(text)
    if m:
        passed, total = int(m.group(1)), int(m.group(2))
        out.ran, out.passed, out.failed = True, passed, total - passed
        out.failures = sorted(set(MAPLE_BUG_RE.findall(text)))
    return out


def parse_ktap(kunit_py: str, text: str, name: str) -> Outcome:
    """A KUnit module's KTAP, through the kernel's kunit.py parser."""
    _, counts = kunit.parse(kunit_py, text, name)
    out = Outcome(passed=counts.passed, skipped=counts.skipped,
                  failed=len(counts.failed), failures=list(counts.failed))
    out.ran = bool(out.passed + out.skipped + out.failed)
    return out


def loaded(text: str) -> list[str]:
    """The modules the init began to load, in order."""
    out = []
    for line in text.splitlines():
        if "harness: loading " in line:
            out.append(line.split("harness: loading ", 1)[1].split()[0])
    return out


def judge(suite: Suite, part: str, kunit_py: str, name: str) -> Outcome:
    """One module's outcome from its part of the console."""
    if suite.parser == "ktap":
        out = parse_ktap(kunit_py, part, name)
    elif suite.parser == "meminit":
        out = parse_meminit(part)
    else:
        out = parse_maple(part)
    if not suite.reports:
        found = boot.splats(part)
        if found:
            out.problems.append("%d kernel splat(s), first: %s"
                                % (len(found), found[0]))
    if re.search(r"harness: load %s failed" % re.escape(suite.module), part) \
            and out.ran and not out.failed:
        out.problems.append("its load failed although it reported no failure")
    return out


def expected(config: str, tree: str) -> list[str]:
    """The suites' modules the config builds in this tree."""
    src = kconfig.tree(tree).src
    declared = kconfig.declared_symbols(src)
    wanted = kconfig.requested(config, src)
    return [s.module for s in SUITES
            if wanted.get(s.symbol) == "m" and s.symbol in declared]


def cmdline(mods: list[str], append: str, kasan: bool) -> str:
    """The kernel command line words a boot of @mods adds."""
    words = [kunit.KUNIT_CMDLINE]
    quiet = [m for m in mods if BY_MODULE[m].nokfence]
    if quiet:
        words.append("harness.nokfence=" + ",".join(quiet))
    # Every KASAN report printed, not the first only (kasan_test turns
    # multi-shot on for itself and back after).
    if kasan:
        words.append("kasan_multi_shot")
    return " ".join(words + ([append] if append else []))


BootFn = Callable[..., Optional[boot.BootResult]]


def run_boot(config: str, tree: str, b: Boot, mods: list[str], kasan: bool,
             kunit_py: str, boot_fn: BootFn = boot.boot,
             timeout: Optional[int] = None) -> dict[str, Outcome]:
    """Boot until every module of @mods was loaded once (a module that
    fails to load ends the init's loading); each one's outcome."""
    outcomes: dict[str, Outcome] = {}
    remaining = list(mods)
    n = 0
    while remaining:
        n += 1
        tag = "suites-%s%s-%d" % (remaining[0], "-" + b.append.replace(
            "=", "") if b.append else "", n)
        res = boot_fn(config, tree, MODE, remaining,
                      cmdline(remaining, b.append, kasan),
                      timeout=timeout or b.timeout, tag=tag, allow_fail=True)
        assert res is not None
        with open(res.log, errors="replace") as f:
            text = f.read()
        began = [m for m in loaded(text) if m in remaining]
        # Problems of the boot besides a failed load: a timeout, a panic.
        trouble = [p for p in res.problems
                   if not p.startswith(("init reported status",
                                        "%d kernel splat" % len(res.splats)))
                   and "decode" not in p]
        if not began:
            for m in remaining:
                outcomes[m] = Outcome(problems=["not loaded: %s (%s)" % (
                    "; ".join(res.problems) or "the init loaded nothing",
                    rel(res.log))])
            break
        parts = kunit.split_by_module(text, began)
        head = text.split("harness: loading ", 1)[0]
        for m in began:
            out = judge(BY_MODULE[m], parts[m], kunit_py, "suites-%s-%s-%s-%s"
                        % (tree, config, tag, m))
            if m == began[0] and boot.splats(head):
                out.problems.append("kernel splat(s) before the first module "
                                    "loaded")
            outcomes[m] = out
        outcomes[began[-1]].problems += trouble
        for m in began:
            say("suites %s-%s %s: %s %s" % (
                tree, config, m, outcomes[m].cell(),
                "; ".join(outcomes[m].notes())))
        # A boot that died inside began[-1] leaves the modules after it
        # to the next boot.
        remaining = remaining[remaining.index(began[-1]) + 1:]
    return outcomes


@dataclasses.dataclass
class Row:
    suite: str
    alloc: str
    side: dict[str, Outcome]

    def same(self) -> bool:
        """The series does no worse than the base."""
        b, s = self.side.get("base"), self.side.get("series")
        if b is None or s is None:
            return False
        return (s.ran >= b.ran and s.failed <= b.failed
                and (not s.problems or bool(b.problems)))


def suite_rows(alloc: str, results: dict[str, dict[str, dict[str, Outcome]]],
               errors: dict[str, str], wanted: list[str]) -> list[Row]:
    """Rows of one allocator: results[side][boot label][module], for the
    modules @wanted (a side in @errors gets its error in each)."""
    rows = []
    for b in BOOTS:
        for m in [m for m in b.modules if m in wanted]:
            name = m + (" (%s)" % b.label if b.label else "")
            side = {}
            for s, _ in SIDES:
                got = results.get(s, {}).get(b.label, {}).get(m)
                if got is None and s in errors:
                    got = Outcome(problems=[errors[s]])
                if got is not None:
                    side[s] = got
            if side:
                rows.append(Row(name, alloc, side))
    return rows


def markdown(rows: list[Row]) -> str:
    lines = ["| suite | allocator | base | series | |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s |" % (
            r.suite, r.alloc, r.side["base"].cell() if "base" in r.side
            else "not run", r.side["series"].cell() if "series" in r.side
            else "not run", "" if r.same() else "**series worse**"))
    lines.append("")
    lines.append("Cells: passed/failed/skipped (test_meminit and the maple "
                 "tree's: their summary line's checks; KUnit's: cases); "
                 "(!) marks problems besides, listed below.")
    notes = []
    for r in rows:
        for s, _ in SIDES:
            o = r.side.get(s)
            for n in o.notes() if o else []:
                notes.append("- %s, %s, %s: %s" % (r.suite, r.alloc, s, n))
    if notes:
        lines += ["", "Notes:", ""] + notes
    lines += ["", "Cases that use the bulk API:", ""]
    lines += ["- %s: %s" % (s.module, s.bulk) for s in SUITES]
    return "\n".join(lines)


def run_side(alloc: str, tree: str, only: list[str],
             timeout: Optional[int] = None,
             build: Callable[[str, str], Any] = kbuild.build,
             boot_fn: BootFn = boot.boot) -> dict[str, dict[str, Outcome]]:
    """Build one allocator's kernel on one tree and run its boots."""
    config = ALLOCS[alloc]
    build(config, tree)
    mods = [m for m in expected(config, tree) if m in only]
    src = kconfig.tree(tree).src
    kasan = kconfig.requested(config, src).get("KASAN") == "y"
    kunit_py = os.path.join(src, "tools", "testing", "kunit", "kunit.py")
    out: dict[str, dict[str, Outcome]] = {}
    for b in BOOTS:
        want = [m for m in b.modules if m in mods]
        if want:
            out.setdefault(b.label, {}).update(run_boot(
                config, tree, b, want, kasan, kunit_py, boot_fn, timeout))
    return out


def command_line(allocs: list[str], only: list[str],
                 timeout: Optional[int] = None) -> str:
    return "./bulk suites --alloc %s%s%s" % (
        ",".join(allocs), "" if set(only) == set(BY_MODULE)
        else " --suites " + ",".join(only),
        " --timeout %d" % timeout if timeout else "")


def write(rows: list[Row], data: dict[str, Any], command: str,
          allocs: list[str], only: list[str], rec: bool) -> tuple[str, str]:
    """The record, markdown and JSON; (the table, the .md's path)."""
    md = markdown(rows)
    st = record.stamp(command)
    d = record.folder("suites", rec)
    name = "suites-%s" % "-".join(allocs)
    if set(only) != set(BY_MODULE):
        name += "-" + "-".join(m for m in BY_MODULE if m in only)
    path = record.write_markdown(os.path.join(d, name + ".md"),
                                 "# The kernel's own suites that use the bulk "
                                 "API, base vs series\n\n" + md, st)
    record.write_json(os.path.join(d, name + ".json"), data, st)
    return md, path


def main(args: argparse.Namespace) -> int:
    allocs = [a for a in args.alloc.split(",") if a]
    only = [m for m in args.suites.split(
        ",") if m]
    rec = args.record
    start = time.time()
    basetree.prepare("suites")
    rows: list[Row] = []
    data: dict[str, Any] = {"mode": MODE, "allocators": {}}
    md = path = ""
    for alloc in allocs:
        results: dict[str, dict[str, dict[str, Outcome]]] = {}
        errors: dict[str, str] = {}
        for side, tree in SIDES:
            try:
                results[side] = run_side(alloc, tree, only,
                                         args.timeout)
            except StageError as e:
                say("suites: %s %s: %s" % (alloc, side, e))
                errors[side] = "%s: %s" % (e.step, e.msg)
        wanted = [m for m in expected(ALLOCS[alloc], "linux") if m in only]
        rows += suite_rows(alloc, results, errors, wanted)
        data["allocators"][alloc] = {
            "config": ALLOCS[alloc], "errors": errors, "wanted": wanted,
            "results": {s: {label: {m: dataclasses.asdict(o)
                                    for m, o in mods.items()}
                            for label, mods in by.items()}
                        for s, by in results.items()}}
        # After each allocator: an interrupted run keeps what it has.
        md, path = write(rows, data, command_line(
            allocs, only, args.timeout), allocs, only, rec)
    print(md)
    say("suites: %s written; records in %s; done in %dm%02ds" % (
        rel(path), record.where(rec), *divmod(int(time.time() - start), 60)))
    return 0 if all(r.same() for r in rows) else 1
