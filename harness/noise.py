"""./bulk noise: the layout noise floor of the benchmark.

The series tip is built in the bisect worktree (build/bisect/linux, never
the user's build/linux) and booted in exact mode with the benchmark
module, as ./bulk bench-each boots its last column; so is each variant:
the tip plus one generated commit that changes no code path, only where
things lie (VARIANTS), of three kinds: code (a never-called function of
nops), data (a used static array in .data or .bss) and heap (a
late_initcall that allocates a few objects and pages and keeps them, so
that every later allocation, the benchmark's included, starts from other
slab and page positions; a measurement-only change, never in patches/).
How far the variants' rows read from the tip's is the noise that layout
alone puts on a row: a gain claimed for a patch must beat it.  The
record gives the largest change per kind, so that a reader sees which
kind moves rows (code alone moved none: under -icount an instruction
count does not depend on where code lies in this build).

The generated commits are made on a detached HEAD with a fixed identity
and date (the same variant of the same tip is the same commit); the
worktree goes back to the tip after each one, and the tip is built last,
so that its kernel is the one left in build/bisect/o/.  Writes
noise-<alloc>.md and .json under build/results/experiments/, or
results/experiments/ with --record.  An interrupted run keeps the kernels
it measured (each.py).
"""
import argparse
import dataclasses
import hashlib
import os
import statistics
import time
from typing import Any

import bench_each
import build_each
import each
import gitrepo
import kbuild
import kconfig
import measure
import packages
import record as records
import registry
import tree
from benchparse import Run
from common import BISECT_TREE, TREE, StageError, capture, rel, say

STEP = "noise"
KIND = "experiments"
# The tests an allocator's benchmark config runs in exact mode.
TESTS = registry.EXACT_TESTS
# The generated commits' author and committer: fixed, so that a variant of
# one tip is one commit id.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "./bulk noise",
    "GIT_AUTHOR_EMAIL": "noise@slab-bulk.invalid",
    "GIT_COMMITTER_NAME": "./bulk noise",
    "GIT_COMMITTER_EMAIL": "noise@slab-bulk.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


KINDS = ("code", "data", "heap")


@dataclasses.dataclass(frozen=True)
class Variant:
    """A layout change of one @kind in @path (None: the allocator's file,
    mm/ALLOC.c), at its top (after the SPDX line) or at its end:

    code: a never-called function of @size bytes of nops: moves where
          code lies, no code path changes;
    data: a used static array of @size bytes, initialised (in .data) or
          not (in .bss): moves where the static data after it lie;
    heap: a late_initcall that allocates and keeps one object of each
          @kmallocs size and @pages pages: every later allocation, the
          benchmark's included, starts from other slab and page
          positions.  Measurement only: the generated commit is thrown
          away, never part of patches/."""
    name: str
    kind: str
    path: str | None
    top: bool
    size: int = 0
    initialised: bool = False
    kmallocs: tuple[int, ...] = ()
    pages: int = 0

    def file(self, alloc: str) -> str:
        return self.path or "mm/%s.c" % alloc

    def where(self, alloc: str) -> str:
        return "%s of %s" % ("top" if self.top else "end", self.file(alloc))

    def describe(self, alloc: str) -> str:
        if self.kind == "code":
            return "%d bytes of nops in a never-called function at the %s" \
                % (self.size, self.where(alloc))
        if self.kind == "data":
            return "a used %d-byte static array in %s at the %s" % (
                self.size, ".data" if self.initialised else ".bss",
                self.where(alloc))
        return "a late_initcall at the %s that allocates and keeps %s and " \
            "%s (measurement only)" % (
                self.where(alloc), ", ".join("kmalloc(%d)" % n
                                             for n in self.kmallocs),
                "one page" if self.pages == 1 else "%d pages" % self.pages)

    def subject(self, alloc: str) -> str:
        """The generated commit's subject."""
        return "noise %s (%s layout): %s; %s" % (
            self.name, self.kind, self.describe(alloc),
            "throw-away, never in patches/" if self.kind == "heap"
            else "no functional change")


# The first K are booted with --variants K: in this order K=3 already
# covers each kind.
VARIANTS = (
    Variant("c1", "code", None, True, size=64),
    # init/ links before mm/: every variable of the allocator moves.
    Variant("d1", "data", "init/main.c", False, size=4096, initialised=True),
    Variant("h1", "heap", "init/main.c", False, kmallocs=(64, 256, 1024),
            pages=1),
    Variant("c2", "code", None, False, size=192),
    # 4 KiB and a cache line: the .bss of the files linked after it moves
    # to other offsets within its pages, not by whole pages as d1's .data.
    Variant("d2", "data", None, True, size=4160),
    Variant("h2", "heap", "init/main.c", False,
            kmallocs=(32, 128, 512, 2048), pages=2),
    # init/ links before mm/: every function of the allocator moves.
    Variant("c3", "code", "init/main.c", False, size=128),
)


def pad_code(v: Variant) -> str:
    """The C a variant adds.  noinline, __used and __init come from
    compiler_types.h and init.h, which every file has (kbuild includes
    compiler_types.h first; init/main.c includes init.h and slab.h, the
    heap variants' file)."""
    if v.kind == "code":
        return ("/* ./bulk noise %s: layout padding, never called. */\n"
                "static noinline __used void slab_bulk_noise_%s(void)\n"
                "{\n"
                "\tasm volatile(\".rept %d\\n\\tnop\\n\\t.endr\");\n"
                "}\n" % (v.name, v.name, v.size))
    if v.kind == "data":
        return ("/* ./bulk noise %s: layout padding in %s, never read. */\n"
                "static char slab_bulk_noise_%s[%d] __used%s;\n" % (
                    v.name, ".data" if v.initialised else ".bss", v.name,
                    v.size, " = { 1 }" if v.initialised else ""))
    n = len(v.kmallocs) + v.pages
    return ("/*\n"
            " * ./bulk noise %s: MEASUREMENT ONLY, never part of the series:\n"
            " * objects and pages allocated once at boot and never freed,\n"
            " * so that every later allocation starts from other slab and\n"
            " * page positions.\n"
            " */\n"
            "static void *slab_bulk_noise_%s_kept[%d] __used;\n"
            "\n"
            "static int __init slab_bulk_noise_%s(void)\n"
            "{\n" % (v.name, v.name, n, v.name) +
            "".join("\tslab_bulk_noise_%s_kept[%d] = kmalloc(%d, GFP_KERNEL);"
                    "\n" % (v.name, i, size)
                    for i, size in enumerate(v.kmallocs)) +
            "".join("\tslab_bulk_noise_%s_kept[%d] = alloc_page(GFP_KERNEL);"
                    "\n" % (v.name, len(v.kmallocs) + i)
                    for i in range(v.pages)) +
            "\treturn 0;\n"
            "}\n"
            "late_initcall(slab_bulk_noise_%s);\n" % v.name)


def padded(v: Variant, text: str) -> str:
    """@text (the file's source at the tip) with the variant's code
    (pad_code): after the first line (the SPDX tag) at the top, else at
    the end."""
    code = pad_code(v)
    if v.top:
        first, nl, rest = text.partition("\n")
        return first + nl + "\n" + code + "\n" + rest
    return text + ("" if text.endswith("\n") or not text else "\n") + \
        "\n" + code


def commit_variant(path: str, v: Variant, alloc: str) -> tuple[str, str]:
    """Commit the variant on the worktree at @path, on a detached HEAD;
    its commit id and diff."""
    f = v.file(alloc)
    with open(os.path.join(path, f)) as fh:
        text = fh.read()
    with open(os.path.join(path, f), "w") as fh:
        fh.write(padded(v, text))
    gitrepo.git(path, STEP, "checkout", "-q", "--detach")
    gitrepo.git(path, STEP, "add", f)
    capture(["git", "commit", "-q", "-m", v.subject(alloc)], STEP, cwd=path,
            env=GIT_ENV)
    commit = gitrepo.git(path, STEP, "rev-parse", "HEAD").strip()
    return commit, gitrepo.git(path, STEP, "show", "--format=", commit)


@dataclasses.dataclass(frozen=True)
class Row:
    """One benchmark row: the tip's value and each variant's (None where
    a variant has no such row)."""
    test: str
    title: str
    variant: str
    key_name: str
    key: int
    tip: float
    others: tuple[float | None, ...]

    def change(self, i: int) -> float | None:
        """|variant / tip - 1| of the @i-th variant (None: no such row)."""
        o = self.others[i]
        return None if o is None else abs(o / self.tip - 1)

    def changes(self, cols: list[int] | None = None) -> list[float]:
        """|variant / tip - 1| of each variant (of those at @cols: all by
        default) that has the row."""
        got = (self.change(i) for i in (
            range(len(self.others)) if cols is None else cols))
        return [c for c in got if c is not None]

    def largest(self, cols: list[int] | None = None) -> float | None:
        return max(self.changes(cols), default=None)

    def at(self) -> str:
        return "%s %s=%d" % (self.variant, self.key_name, self.key)


def rows(tip: Run, others: list[Run], tests: str) -> list[Row]:
    """Every row of the tip's exact-mode tables of @tests, bulk call and
    loop (each variant of the module's once, as bench-each's moves)."""
    out, seen = [], set()
    for spec in bench_each.specs(tests):
        for variant in (spec.bulk, spec.loop):
            if variant is None or (spec.test, variant) in seen:
                continue
            seen.add((spec.test, variant))
            t = bench_each.values(tip, spec, variant)
            vs = [bench_each.values(o, spec, variant) for o in others]
            for k in sorted(t):
                if t[k]:
                    out.append(Row(spec.test, spec.title, variant, spec.key,
                                   k, t[k], tuple(v.get(k) for v in vs)))
    return out


@dataclasses.dataclass(frozen=True)
class Spread:
    """The |changes| of some variants (columns) on some rows: the rows
    they have, how many of those any of them moves, the median and the
    largest |change|, and where the largest is (None when nothing moved:
    no row is the largest)."""
    rows: int
    moved: int
    median: float
    largest: float
    where: Row | None
    by: int | None

    def at(self, labels: list[str]) -> str:
        """Where the largest change is, and which variant made it."""
        if self.where is None or self.by is None:
            return "-"
        return "test %s %s (%s)" % (self.where.test, self.where.at(),
                                    labels[self.by])

    def to_json(self, labels: list[str]) -> dict[str, Any]:
        return {"rows": self.rows, "moved": self.moved,
                "median": self.median, "largest": self.largest,
                "at": None if self.where is None or self.by is None else {
                    "test": self.where.test, "variant": self.where.variant,
                    self.where.key_name: self.where.key,
                    "by": labels[self.by]}}


def spread(rs: list[Row], cols: list[int]) -> Spread | None:
    """The spread of the variants at @cols over @rs (None: they have
    none of the rows)."""
    mine = [r for r in rs if r.changes(cols)]
    if not mine:
        return None
    changes = [c for r in mine for c in r.changes(cols)]
    largest = max(changes)
    where = by = None
    if largest > 0:
        # The first row and column with it, in the tables' order.
        where = next(r for r in mine if r.largest(cols) == largest)
        by = next(i for i in cols if where.change(i) == largest)
    return Spread(len(mine), sum(1 for r in mine if r.largest(cols)),
                  statistics.median(changes), largest, where, by)


def kind_columns(kinds: list[str]) -> list[tuple[str, list[int]]]:
    """Each kind of KINDS that a variant has, with its variants' columns
    (@kinds: each variant's kind, in column order)."""
    return [(k, [i for i, x in enumerate(kinds) if x == k])
            for k in KINDS if k in kinds]


@dataclasses.dataclass(frozen=True)
class Summary:
    """One test letter: the spread of every variant on its rows, and the
    largest change of each kind's variants (None: a kind without the
    test's rows)."""
    test: str
    all: Spread
    kinds: tuple[tuple[str, float | None], ...]


def summary(rs: list[Row], kinds: list[str]) -> list[Summary]:
    """Per test letter; @kinds: each variant's kind, in column order."""
    out = []
    everything = list(range(len(kinds)))
    for test in sorted({r.test for r in rs}):
        mine = [r for r in rs if r.test == test]
        s = spread(mine, everything)
        if s is None:
            continue
        out.append(Summary(test, s, tuple(
            (k, None if ks is None else ks.largest)
            for k, ks in ((k, spread(mine, cols))
                          for k, cols in kind_columns(kinds)))))
    return out


def by_kind(rs: list[Row],
            kinds: list[str]) -> list[tuple[str, list[int], Spread]]:
    """Per kind of variant, over every row of every test: its variants'
    columns and their spread."""
    out = []
    for k, cols in kind_columns(kinds):
        s = spread(rs, cols)
        if s is not None:
            out.append((k, cols, s))
    return out


@dataclasses.dataclass
class Column:
    label: str
    kind: str
    commit: str
    description: str
    diff: str
    run: Run

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "kind": self.kind,
                "commit": self.commit, "description": self.description,
                "diff": self.diff, "run": self.run.to_json()}


def pct(x: float | None) -> str:
    return "-" if x is None else "%.3f%%" % (100 * x)


WHAT = {
    "code": "a never-called function of nops: no code path changes, only "
            "where code lies",
    "data": "a used static array, in .data or .bss: where the static "
            "data after it lie",
    "heap": "a late_initcall that allocates a few objects of several "
            "kmalloc sizes and pages and keeps them: every later "
            "allocation, the benchmark's included, starts from other slab "
            "and page positions (a measurement-only change, never part of "
            "the series; its function, in .init.text, and its array of "
            "pointers, in .bss, move a little code and data too)",
}


def markdown(alloc: str, command: str, tests: str,
             cols: list[Column]) -> str:
    tip, variants = cols[0], cols[1:]
    labels = [c.label for c in variants]
    kinds = [c.kind for c in variants]
    rs = rows(tip.run, [c.run for c in variants], tests)
    out = ["# Layout noise floor (%s)" % alloc.upper(), "",
           "Command: `%s`" % command, "",
           "Exact mode (QEMU TCG -icount, one CPU): raw **instructions per "
           "object**, as in `./bulk bench`. *tip* is the series' last commit "
           "(`%s`, %s), built in the bisect worktree as `./bulk bench-each` "
           "builds its last column; each variant is the tip plus one "
           "generated commit that adds, by kind:" % (
               tip.commit[:12], tip.description), ""]
    groups = kind_columns(kinds)
    out += ["- **%s** (%s): %s%s" % (k, ", ".join(labels[i] for i in cs),
                                    WHAT[k], "." if n == len(groups) else ";")
            for n, (k, cs) in enumerate(groups, 1)]
    out += ["", "Each column is one boot (exact mode repeats bit for bit on "
            "one image), so a row's *largest change* is what those layout "
            "changes alone moved it by: a gain claimed for a patch must beat "
            "it.", "", "Variants:", ""]
    out += ["- %s (%s): %s" % (c.label, c.kind, c.description)
            for c in variants]
    out += ["", "## Summary by kind", "",
            "Over every row of every test (bulk and loop variants): how many "
            "rows the kind's variants move at all, the median and the "
            "largest |variant / tip - 1| of its variants, and where the "
            "largest is.", "",
            "| kind | variants | rows | rows moved | median change | "
            "largest change | at |", "|---|---|---:|---:|---:|---:|---|"]
    for k, cs, s in by_kind(rs, kinds):
        out.append("| %s | %s | %d | %d | %s | %s | %s |" % (
            k, ", ".join(labels[i] for i in cs), s.rows, s.moved,
            pct(s.median), pct(s.largest), s.at(labels)))
    ks = [k for k, _ in kind_columns(kinds)]
    out += ["", "## Summary per test", "",
            "Per test, over its rows: the median and the largest |variant / "
            "tip - 1| of every variant, where the largest is, and the "
            "largest of each kind's variants.", "",
            "| test | rows | rows moved | median change | largest change | "
            "at | %s |" % " | ".join("largest, %s" % k for k in ks),
            "|---|---:|---:|---:|---:|---|%s" % ("---:|" * len(ks))]
    for t in summary(rs, kinds):
        out.append("| %s | %d | %d | %s | %s | %s | %s |" % (
            t.test, t.all.rows, t.all.moved, pct(t.all.median),
            pct(t.all.largest), t.all.at(labels).replace(
                "test %s " % t.test, "", 1),
            " | ".join(pct(x) for _, x in t.kinds)))
    out += ["", "## Tables", ""]
    for spec in bench_each.specs(tests):
        for variant in (spec.bulk, spec.loop):
            mine = [r for r in rs if r.test == spec.test and
                    r.variant == variant and r.title == spec.title]
            if not mine:
                continue
            out += ["### test %s: %s: %s" % (
                spec.test, spec.title, "bulk call (%s)" % variant
                if variant == spec.bulk else "one-at-a-time loop (%s)"
                % variant), "",
                "| %s | tip | %s | largest change |" % (
                    spec.key, " | ".join(labels)),
                "|---:|---:|%s---:|" % ("---:|" * len(variants))]
            for r in mine:
                out.append("| %d | %.1f | %s | %s |" % (
                    r.key, r.tip, " | ".join(bench_each.fmt(o)
                                             for o in r.others),
                    pct(r.largest())))
            out.append("")
    out += ["## The variants' commits", ""]
    for c in variants:
        out += ["%s (`%s`):" % (c.label, c.commit[:12]), "", "```diff",
                c.diff.rstrip("\n"), "```", ""]
    return "\n".join(out)


def check_args(args: argparse.Namespace) -> tuple[str, int]:
    """The test letters (sorted) and the number of variants."""
    if args.alloc not in registry.ALLOCATORS:
        raise StageError(STEP, "--alloc takes one of %s; got '%s'"
                         % (", ".join(registry.ALLOCATORS), args.alloc))
    tests = args.tests.replace(",", "")
    if not tests or any(t not in TESTS for t in tests) \
            or len(set(tests)) != len(tests):
        raise StageError(STEP, "--tests takes letters among %s (f is "
                         "smp-only, h and i need configs of their own); got "
                         "'%s'" % (TESTS, args.tests))
    if not 1 <= args.variants <= len(VARIANTS):
        raise StageError(STEP, "--variants takes 1 to %d; got %d"
                         % (len(VARIANTS), args.variants))
    return "".join(sorted(tests)), args.variants


def main(args: argparse.Namespace) -> int:
    tests, k = check_args(args)
    alloc = args.alloc
    start = time.time()
    packages.require(STEP)
    tree.create()
    commits = gitrepo.commits(TREE, STEP)
    if not commits or not bench_each.has_module(commits[-1]):
        raise StageError(STEP, "the series' tip has no %s"
                         % measure.BENCH_FILE)
    tip = commits[-1]
    subject = "patch %d, %s" % (len(commits), gitrepo.git(
        TREE, STEP, "log", "-1", "--format=%s", tip).strip())
    command = "./bulk noise --alloc %s --tests %s --variants %d" % (
        alloc, tests, k)
    variants = list(VARIANTS[:k])
    say("noise: %d boots (%s, then the tip, %s)" % (
        k + 1, ", ".join(v.name for v in variants), tip[:12]))
    gitrepo.worktree(TREE, BISECT_TREE, STEP)

    def work(v: Variant | None) -> dict[str, Any]:
        """The run of the tip (None) or of variant v."""
        gitrepo.checkout(BISECT_TREE, tip, STEP)
        commit, diff = tip, ""
        try:
            if v is not None:
                commit, diff = commit_variant(BISECT_TREE, v, alloc)
            label = v.name if v else "tip"
            kbuild.build(alloc, build_each.TREE_NAME, label="%s@%s %s" % (
                alloc, tip[:12], label))
            run = measure.run_bench(alloc, build_each.TREE_NAME, tests,
                                    False, suffix="-noise-" + label)
        finally:
            gitrepo.checkout(BISECT_TREE, tip, STEP)
        return {"commit": commit, "diff": diff, "run": run.to_json()}

    def write(outs: list[dict[str, Any]]) -> str:
        # The tip was booted last, and is the first column.
        cols = [Column("tip", "", tip, subject, "",
                       Run.from_json(outs[-1]["run"]))]
        cols += [Column(v.name, v.kind, o["commit"], v.describe(alloc),
                        o["diff"], Run.from_json(o["run"]))
                 for v, o in zip(variants, outs)]
        rs = rows(cols[0].run, [c.run for c in cols[1:]], tests)
        labels = [v.name for v in variants]
        kinds = [v.kind for v in variants]
        name = os.path.join(records.folder(KIND, args.record),
                            "noise-%s" % alloc)
        return records.publish(STEP, name, markdown(
            alloc, command, tests, cols), {
                "alloc": alloc, "command": command, "tests": tests,
                "tip": tip, "columns": [c.to_json() for c in cols],
                "by_kind": [dict(s.to_json(labels), kind=k,
                                 variants=[labels[i] for i in cs])
                            for k, cs, s in by_kind(rs, kinds)],
                "summary": [dict(s.all.to_json(labels), test=s.test,
                                 kinds=dict(s.kinds))
                            for s in summary(rs, kinds)]}, args.record)

    tip_tree = each.tree_ids(TREE, STEP, [tip])[0]
    items: list[tuple[str, Variant | None]] = [
        (hashlib.sha256(("%s %s %s" % (tip_tree, v, pad_code(v))).encode())
         .hexdigest()[:16], v) for v in variants]
    items.append((tip_tree, None))
    md = each.loop("noise-" + alloc, "%s %s" % (
        tests, kconfig.fragment_digest(alloc)), items, work, write)
    say("noise: done in %dm%02ds" % divmod(int(time.time() - start), 60))
    if args.record:
        say("noise: name %s in results/README.md's experiments/ table when "
            "you commit it (tests/test_record.py checks the index)" % rel(md))
    return 0
