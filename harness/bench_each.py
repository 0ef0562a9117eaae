"""./bulk bench-each: the benchmark at every patch that can move it.

For one allocator, each commit of the series from the one that adds the
benchmark module on is built in the bisect worktree (build/bisect/linux,
never the user's build/linux) and booted in exact mode with the module,
as ./bulk bench boots the series kernel; base (build/linux-base: 6.1 plus
the benchmark patch) is booted the same way.  Every column uses the
module as the series has it: no later patch changes the module.

A commit whose files are all documentation, test suites or another
allocator's private files builds the same kernel as its parent for this
allocator: it is not booted, and the report names it.  The first measured
commit also carries the patches before the module (the fixes).

Writes bench-each-<alloc>.md and .json under build/results/per-patch/, or
results/per-patch/ with --record: a table per benchmark table (bulk
variant, and the loop where the test has one) with a column per measured
patch, and per patch the rows it moves by more than MOVE_THRESHOLD against
the patch measured before it.  An interrupted run keeps the columns it
measured (each.py).
"""
import argparse
import dataclasses
import json
import os
import sys
import textwrap
import time
from typing import Any

import basetree
import build_each
import each
import gitrepo
import kbuild
import kconfig
import measure
import record as records
import registry
import tables
from benchparse import Run
from common import BENCH_BASE_TREE, BISECT_TREE, TREE, StageError, rel, say

KIND = "per-patch"

# The tests an allocator's benchmark config runs in exact mode.
TESTS = registry.EXACT_TESTS
# Files that never reach a benchmark kernel's image: the KUnit suites and
# their configs (modules the benchmark boot does not load).
TEST_ONLY = ("lib/slab_bulk_kunit.c", "lib/slab_bulk_stress.c",
             "lib/slab_bulk_test.h", "net/core/skb_list_test.c",
             "tools/testing/")
# A row moves when a patch changes it by more than this fraction.
MOVE_THRESHOLD = 0.01


def moves_kernel(alloc: str, files: list[str]) -> bool:
    """Can a patch touching @files change @alloc's benchmark kernel?"""
    others = [p for a, ps in build_each.PRIVATE.items() if a != alloc
              for p in ps]
    return any(not f.startswith(build_each.DOC_PREFIXES + TEST_ONLY)
               and f not in others for f in files)


@dataclasses.dataclass(frozen=True)
class Patch:
    number: int
    commit: str
    subject: str
    files: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Plan:
    measured: list[Patch]
    # Patches after the module that are not booted, with the reason.
    skipped: list[tuple[Patch, str]]
    # Patches before the module: in the first measured column.
    before: list[Patch]


def plan(alloc: str, patches: list[Patch], has_module: list[bool],
         first: int = 1, last: int | None = None) -> Plan:
    """Which patches to boot: from the first one with the module, each one
    that can move @alloc's kernel, within first..last (patch numbers);
    the first patch with the module is always booted (it is the baseline
    of the moves), and so is @last."""
    if not any(has_module):
        raise StageError("bench-each", "no patch of the series adds %s"
                         % measure.BENCH_FILE)
    start = has_module.index(True)
    last = last or len(patches)
    measured, skipped = [], []
    for i, p in enumerate(patches[start:], start):
        if p.number < first and i != start:
            skipped.append((p, "before --from %d: its changes are in the "
                            "next booted column" % first))
            continue
        if p.number > last:
            break
        if i == start or p.number == last or moves_kernel(alloc, list(p.files)):
            measured.append(p)
        else:
            skipped.append((p, "touches only documentation, test suites or "
                            "another allocator's files"))
    return Plan(measured, skipped, patches[:start])


@dataclasses.dataclass
class Column:
    label: str
    commit: str
    subject: str
    run: Run

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "commit": self.commit,
                "subject": self.subject, "run": self.run.to_json()}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "Column":
        return cls(str(obj["label"]), str(obj["commit"]), str(obj["subject"]),
                   Run.from_json(obj["run"]))


def values(run: Run, spec: tables.Spec, variant: str) -> dict[int, float]:
    return {r.key(spec.key): r.per_obj for r in run.results
            if r.test == spec.test and r.variant == variant}


def specs(tests: str) -> list[tables.Spec]:
    """The exact-mode tables of @tests (test f is smp-only)."""
    return [s for s in tables.SPECS if s.test in tests and s.test != "f"]


def fmt(v: float | None) -> str:
    return "-" if v is None else "%.1f" % v


def variant_table(spec: tables.Spec, variant: str, title: str,
                  cols: list[Column]) -> list[str]:
    per = [values(c.run, spec, variant) for c in cols]
    keys = sorted(set().union(*per))
    if not keys:
        return []
    out = ["### test %s: %s: %s" % (spec.test, spec.title, title), "",
           "| %s | %s |" % (spec.key, " | ".join(c.label for c in cols)),
           "|---:|%s" % ("---:|" * len(cols))]
    for k in keys:
        out.append("| %d | %s |" % (k, " | ".join(fmt(p.get(k)) for p in per)))
    return out + [""]


@dataclasses.dataclass(frozen=True)
class Move:
    test: str
    title: str
    variant: str
    key_name: str
    key: int
    before: float
    after: float

    @property
    def change(self) -> float:
        return self.after / self.before - 1


def moves(prev: Run, cur: Run, tests: str,
          threshold: float = MOVE_THRESHOLD) -> list[Move]:
    """The rows (bulk and loop variants) that @cur moves against @prev by
    more than @threshold."""
    out, seen = [], set()
    for spec in specs(tests):
        for variant in (spec.bulk, spec.loop):
            if variant is None or (spec.test, variant) in seen:
                continue
            seen.add((spec.test, variant))
            a, b = values(prev, spec, variant), values(cur, spec, variant)
            for k in sorted(set(a) & set(b)):
                if a[k] and abs(b[k] / a[k] - 1) > threshold:
                    out.append(Move(spec.test, spec.title, variant, spec.key,
                                    k, a[k], b[k]))
    return out


def markdown(alloc: str, command: str, tests: str, cols: list[Column],
             skipped: list[tuple[str, str]], before: list[str]) -> str:
    out = ["# Benchmark at every patch (%s)" % alloc.upper(), "",
           "Command: `%s`" % command, "",
           "Exact mode (QEMU TCG -icount, one CPU): raw **instructions per "
           "object**, as in `./bulk bench`. *base* is 6.1 plus the benchmark "
           "patch; *pN* is the series up to patch N, built in the bisect "
           "worktree, with the same module. Each column is one boot; exact "
           "mode repeats bit for bit, but any change to the kernel image can "
           "move a row (alignment), so a move is credited to a patch only "
           "where its code is on that row's path.", ""]
    if before:
        out += ["The first column after base also holds the patches before "
                "the benchmark module: %s." % "; ".join(before), ""]
    if skipped:
        out += ["Not booted (the %s kernel is the same as at the patch "
                "before):" % alloc, ""]
        out += ["- %s" % s for s, _ in skipped] + [""]
    out += ["## Moves", "",
            "Per patch, the rows it changes by more than %.0f%% against the "
            "column before it (bulk and loop variants)." % (
                MOVE_THRESHOLD * 100), ""]
    for prev, cur in zip(cols, cols[1:]):
        ms = moves(prev.run, cur.run, tests)
        with_before = ""
        if prev is cols[0] and before:
            with_before = " (with patch 1 before it)" if len(before) == 1 \
                else " (with patches 1 to %d before it)" % len(before)
        out.append("### %s: %s%s" % (cur.label, cur.subject, with_before))
        out.append("")
        if not ms:
            out += ["No row moves by more than %.0f%%." % (
                MOVE_THRESHOLD * 100), ""]
            continue
        out += ["| test | table | variant | key | before | after | change |",
                "|---|---|---|---:|---:|---:|---:|"]
        for m in ms:
            out.append("| %s | %s | %s | %s=%d | %.1f | %.1f | %+.1f%% |" % (
                m.test, m.title.replace("|", "\\|"), m.variant, m.key_name,
                m.key, m.before, m.after, 100 * m.change))
        out.append("")
    out += ["## Tables", ""]
    for spec in specs(tests):
        out += variant_table(spec, spec.bulk, "bulk call (%s)" % spec.bulk, cols)
        if spec.loop:
            out += variant_table(spec, spec.loop, "one-at-a-time loop (%s)"
                                 % spec.loop, cols)
    return "\n".join(out)


MESSAGE_ROWS = 12


def message_block(alloc: str, command: str, tests: str, cols: list[Column],
                  number: int) -> str:
    """The lines a commit message quotes for patch @number: the rows it
    moves against the column before it, the largest MESSAGE_ROWS of them
    in test, variant and key order."""
    labels = [c.label for c in cols]
    label = "p%d" % number
    if label not in labels:
        raise StageError("bench-each", "--message %d: patch %d has no column "
                         "(booted: %s)" % (number, number, ", ".join(labels)))
    i = labels.index(label)
    if i == 0:
        raise StageError("bench-each", "--message %d: no column before it"
                         % number)
    if i == 1:
        raise StageError("bench-each", "--message %d: the first column after "
                         "base also holds every patch before the module's, so "
                         "its moves are not patch %d's alone" % (number, number))
    prev = cols[i - 1]
    ms = moves(prev.run, cols[i].run, tests)
    before = "patch %s" % prev.label[1:]
    # A run limited with --from/--to booted only some patches.
    where = ("at %s and this one" % before
             if "--from" in command.split() or "--to" in command.split()
             else "at every patch")
    head = ("Re-taken on v2 %s with this series' benchmark "
            "module (%s; exact mode, raw instructions per object, %s -> "
            "this patch):" % (where, command, before))
    out = textwrap.wrap(head, 72, break_on_hyphens=False) + [""]
    if not ms:
        return "\n".join(out + ["  no row moves by more than %.0f%%." % (
            MOVE_THRESHOLD * 100)]) + "\n"
    top = sorted(sorted(ms, key=lambda m: -abs(m.change))[:MESSAGE_ROWS],
                 key=lambda m: (m.test, m.variant, m.key))
    out.append("  %-4s  %-15s %5s  %8s  %8s  %7s" % (
        "test", "variant", "N", "before", "after", "change"))
    for m in top:
        key = "%dB" % m.key if m.key_name == "size" else "%d" % m.key
        out.append("  %-4s  %-15s %5s  %8.1f  %8.1f  %+6.1f%%" % (
            m.test, m.variant, key, m.before, m.after, 100 * m.change))
    rest = len(ms) - len(top)
    if rest:
        # Signed: a row the patch makes dearer must not hide behind the
        # gains' size.
        others = [m.change for m in ms if m not in top]
        out.append("  (%d more rows move, from %+.1f%% to %+.1f%%)" % (
            rest, 100 * min(others), 100 * max(others)))
    return "\n".join(out) + "\n"


# Short row titles of the per-patch tables in commit messages, by (test,
# variant); other rows are titled "test T, VARIANT".
TABLE_TITLES = {
    ("a", "single"): "single alloc+free",
    ("a", "bulk"): "test a, quick reuse",
    ("a", "skb_bulk"): "test a, sk_buff shape",
    ("b", "bulk"): "test b, working set",
    ("b", "frag_bulk"): "test b, fragmented",
    ("c", "order_bulk"): "test c, alloc-order free",
    ("c", "random_bulk"): "test c, random-order free",
    ("c", "worst_bulk"): "test c, worst-order free",
    ("d", "kfree_bulk"): "test d, kfree_bulk()",
    ("e", "kmalloc"): "test e, kmalloc(), bytes",
}


def parse_rows(text: str) -> list[tuple[tables.Spec, str, list[int]]]:
    """--rows: items TEST/VARIANT:N,N,... separated by spaces or ';'."""
    out = []
    for item in text.replace(";", " ").split():
        try:
            name, keys = item.split(":", 1)
            test, variant = name.split("/", 1)
            ns = [int(k) for k in keys.split(",") if k]
        except ValueError:
            raise StageError("bench-each", "--rows: '%s' is not TEST/VARIANT:"
                             "N,N,... (e.g. a/bulk:8,64)" % item) from None
        found = [s for s in specs(TESTS) if s.test == test and
                 variant in (s.bulk, s.loop)]
        if not found or not ns:
            raise StageError("bench-each", "--rows: no exact-mode table has "
                             "test %s variant %s, or no N given ('%s')"
                             % (test, variant, item))
        out.append((found[0], variant, ns))
    if not out:
        raise StageError("bench-each", "--rows: no row given")
    return out


def table_block(cols: list[Column], number: int,
                rows: list[tuple[tables.Spec, str, list[int]]]) -> str:
    """A commit message's table for patch @number: per row, the one-at-a-
    time loop on this patch's kernel (fallback), base's call, and the call
    up to the patch before (before) and up to this one (after)."""
    labels = [c.label for c in cols]
    label = "p%d" % number
    if label not in labels or labels.index(label) < 2:
        raise StageError("bench-each", "--table %d: patch %d has no column "
                         "with a measured column before it (booted: %s)"
                         % (number, number, ", ".join(labels)))
    i = labels.index(label)
    base, prev, cur = cols[0].run, cols[i - 1].run, cols[i].run
    out = ["  %-26s %5s  %8s  %7s  %7s  %7s" % (
        "test", "N", "fallback", "base", "before", "after")]
    for spec, variant, ns in rows:
        title = TABLE_TITLES.get((spec.test, variant),
                                 "test %s, %s" % (spec.test, variant))
        loop = values(cur, spec, spec.loop) if spec.loop and \
            variant == spec.bulk else {}
        got = [values(r, spec, variant) for r in (base, prev, cur)]
        for j, n in enumerate(ns):
            key = "-" if spec.loop is None and ns == [1] else str(n)
            out.append("  %-26s %5s  %8s  %7s  %7s  %7s" % (
                title if j == 0 else "", key, fmt(loop.get(n)),
                *(fmt(g.get(n)) for g in got)))
    return "\n".join(out) + "\n"


def print_table(alloc: str, number: int, rows: str, first: int = 1,
                last: int | None = None) -> int:
    d = load(alloc, first, last)
    print(table_block(d.cols, number, parse_rows(rows)), end="")
    return 0


@dataclasses.dataclass
class Saved:
    """bench-each-<alloc>.json as written by write()."""
    command: str
    tests: str
    cols: list[Column]
    skipped: list[tuple[str, str]]
    before: list[str]
    stamp: records.Stamp | None = None


def load(alloc: str, first: int = 1, last: int | None = None) -> Saved:
    """The committed record of the run over first..last, else the scratch
    copy of a run without --record (stderr names the one read)."""
    path = records.find(KIND, out_name(alloc, first, last) + ".json")
    if not os.path.exists(path):
        raise StageError("bench-each", "no %s: run ./bulk bench-each --alloc "
                         "%s%s first" % (rel(path), alloc,
                                         range_args(first, last)))
    print("bench-each: reading %s" % rel(path), file=sys.stderr)
    return read(path)


def read(path: str) -> Saved:
    """A bench-each record as write() wrote it."""
    with open(path) as f:
        try:
            d = json.load(f)
            return Saved(str(d["command"]), str(d["tests"]),
                         [Column.from_json(c) for c in d["columns"]],
                         [(str(x[0]), str(x[1])) for x in d["skipped"]],
                         [str(x) for x in d["before"]],
                         records.Stamp.from_json(d.get("stamp")))
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise StageError("bench-each", "%s does not parse: %s" % (
                rel(path), e)) from None


def print_message(alloc: str, number: int, first: int = 1,
                  last: int | None = None) -> int:
    d = load(alloc, first, last)
    print(message_block(alloc, d.command, d.tests, d.cols, number), end="")
    return 0


def check_args(args: argparse.Namespace) -> str:
    if args.alloc not in registry.ALLOCATORS:
        raise StageError("bench-each", "--alloc takes one of %s; got '%s'"
                         % (", ".join(registry.ALLOCATORS), args.alloc))
    tests = args.tests.replace(",", "")
    if not tests or any(t not in TESTS for t in tests) \
            or len(set(tests)) != len(tests):
        raise StageError("bench-each", "--tests takes letters among %s (f "
                         "is smp-only, h and i need configs of their own); "
                         "got '%s'" % (TESTS, args.tests))
    if args.first < 1 or (args.last is not None and args.last < args.first):
        raise StageError("bench-each", "--from %d --to %s: not a range of "
                         "patch numbers" % (args.first, args.last))
    return "".join(sorted(tests))


def range_args(first: int, last: int | None) -> str:
    """The --from/--to arguments of a run over first..last."""
    return "%s%s" % (" --from %d" % first if first > 1 else "",
                     " --to %d" % last if last else "")


def out_name(alloc: str, first: int = 1, last: int | None = None) -> str:
    """bench-each-ALLOC for a run over the whole series; a run limited
    with --from or --to gets a name of its own (bench-each-ALLOC-pFIRST-
    pLAST), so that it never overwrites the record of every patch."""
    name = "bench-each-%s" % alloc
    if first > 1 or last is not None:
        name += "-p%d-p%s" % (first, last if last is not None else "tip")
    return name


def patches_of_tree() -> list[Patch]:
    commits = gitrepo.commits(TREE, "bench-each")
    out = []
    for i, c in enumerate(commits, 1):
        subject = gitrepo.git(TREE, "bench-each", "log", "-1", "--format=%s",
                              c).strip()
        files = gitrepo.git(TREE, "bench-each", "show", "--format=",
                            "--name-only", c).split()
        out.append(Patch(i, c, subject, tuple(files)))
    return out


def has_module(c: str) -> bool:
    try:
        gitrepo.git(TREE, "bench-each", "cat-file", "-e",
                    "%s:%s" % (c, measure.BENCH_FILE))
    except StageError:
        return False
    return True


def write(alloc: str, command: str, tests: str, cols: list[Column],
          skipped: list[tuple[str, str]], before: list[str], first: int = 1,
          last: int | None = None, record: bool = False,
          st: records.Stamp | None = None) -> str:
    """The record (stamped st, else now)."""
    name = os.path.join(records.folder(KIND, record),
                        out_name(alloc, first, last))
    st = st or records.stamp()
    records.write_json(name + ".json", {
        "alloc": alloc, "command": command, "tests": tests,
        "columns": [c.to_json() for c in cols],
        "skipped": [list(s) for s in skipped], "before": before}, st)
    return records.write_markdown(name + ".md", markdown(
        alloc, command, tests, cols, skipped, before), st)


def rerender(alloc: str, first: int = 1, last: int | None = None,
             record: bool = False) -> int:
    d = load(alloc, first, last)
    md = write(alloc, d.command, d.tests, d.cols, d.skipped, d.before,
               first, last, record, d.stamp)
    say("bench-each: %s re-rendered, in %s" % (rel(md), records.where(record)))
    return 0


def main(args: argparse.Namespace) -> int:
    tests = check_args(args)
    if args.message is not None:
        return print_message(args.alloc, args.message, args.first,
                             args.last)
    if args.table is not None:
        if not args.rows:
            raise StageError("bench-each", "--table %d needs --rows "
                             "TEST/VARIANT:N,N,..." % args.table)
        return print_table(args.alloc, args.table, args.rows, args.first,
                           args.last)
    if args.report:
        return rerender(args.alloc, args.first, args.last, args.record)
    start = time.time()
    basetree.prepare("bench-each")
    patches = patches_of_tree()
    if args.last is not None and args.last > len(patches):
        raise StageError("bench-each", "--to %d: the series has %d patches"
                         % (args.last, len(patches)))
    p = plan(args.alloc, patches, [has_module(x.commit) for x in patches],
             args.first, args.last)
    command = "./bulk bench-each --alloc %s --tests %s%s" % (
        args.alloc, tests, range_args(args.first, args.last))
    say("bench-each: %d boots (base and patches %s)" % (
        len(p.measured) + 1, ", ".join(str(x.number) for x in p.measured)))
    gitrepo.worktree(TREE, BISECT_TREE, "bench-each")

    def work(x: Patch | None) -> dict[str, Any]:
        """The run of base (None) or of patch x."""
        if x is None:
            kbuild.build(args.alloc, measure.BASE_TREE)
            return measure.run_bench(args.alloc, measure.BASE_TREE, tests,
                                     False).to_json()
        gitrepo.checkout(BISECT_TREE, x.commit, "bench-each")
        kbuild.build(args.alloc, build_each.TREE_NAME,
                     label="%s@%s" % (args.alloc, x.commit[:12]))
        return measure.run_bench(args.alloc, build_each.TREE_NAME, tests,
                                 False, suffix="-p%02d" % x.number).to_json()

    def write_record(runs: list[dict[str, Any]]) -> str:
        cols = [Column("base", "base", "6.1 plus the benchmark patch",
                       Run.from_json(runs[0]))]
        cols += [Column("p%d" % x.number, x.commit, x.subject, Run.from_json(r))
                 for x, r in zip(p.measured, runs[1:])]
        return write(args.alloc, command, tests, cols,
                     [("patch %d, %s" % (x.number, x.subject), why)
                      for x, why in p.skipped],
                     ["patch %d, %s" % (x.number, x.subject) for x in p.before],
                     args.first, args.last, args.record)

    items: list[tuple[str, Patch | None]] = [(
        "base " + each.tree_ids(BENCH_BASE_TREE, "bench-each", ["HEAD"])[0], None)]
    items += zip(each.tree_ids(TREE, "bench-each",
                               [x.commit for x in p.measured]), p.measured)
    # The setting: the tests and the config's fragments (as bisect's keys).
    md = each.loop("bench-each-" + args.alloc, "%s %s" % (
        tests, kconfig.fragment_digest(args.alloc)), items, work, write_record)
    say("bench-each: %s written, in %s; done in %dm%02ds" % (
        rel(md), records.where(args.record),
        *divmod(int(time.time() - start), 60)))
    return 0
