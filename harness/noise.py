"""./bulk noise: the layout noise floor of the benchmark.

The series tip is built in the bisect worktree (build/bisect/linux, never
the user's build/linux) and booted in exact mode with the benchmark
module, as ./bulk bench-each boots its last column; so is each variant:
the tip plus one generated commit that adds a never-called function of
nops, which changes no code path, only where code lies (VARIANTS).  How
far the variants' rows read from the tip's is the noise that code layout
alone puts on a row: a gain claimed for a patch must beat it.

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


@dataclasses.dataclass(frozen=True)
class Variant:
    """A no-op layout change: a function of @size bytes of nops in @path
    (None: the allocator's file, mm/ALLOC.c), at its top (after the SPDX
    line) or at its end."""
    name: str
    size: int
    path: str | None
    top: bool

    def file(self, alloc: str) -> str:
        return self.path or "mm/%s.c" % alloc

    def describe(self, alloc: str) -> str:
        return "%d bytes of nops in a function at the %s of %s" % (
            self.size, "top" if self.top else "end", self.file(alloc))


VARIANTS = (
    Variant("v1", 64, None, True),
    Variant("v2", 192, None, False),
    # init/ links before mm/: every function of the allocator moves.
    Variant("v3", 128, "init/main.c", False),
)


def pad_code(v: Variant) -> str:
    """The function a variant adds: never called, kept by __used, not
    inlined; noinline and __used come from compiler_types.h, which kbuild
    includes in every file first."""
    return ("/* ./bulk noise %s: layout padding, never called. */\n"
            "static noinline __used void slab_bulk_noise_%s(void)\n"
            "{\n"
            "\tasm volatile(\".rept %d\\n\\tnop\\n\\t.endr\");\n"
            "}\n" % (v.name, v.name, v.size))


def padded(v: Variant, text: str) -> str:
    """@text (the file's source at the tip) with the variant's function:
    after the first line (the SPDX tag) at the top, else at the end."""
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
    capture(["git", "commit", "-q", "-m", "noise %s: %s (no functional "
             "change)" % (v.name, v.describe(alloc))], STEP, cwd=path,
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

    def changes(self) -> list[float]:
        """|variant / tip - 1| of each variant that has the row."""
        return [abs(o / self.tip - 1) for o in self.others if o is not None]

    def largest(self) -> float | None:
        return max(self.changes(), default=None)


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
class Summary:
    """One test letter: its rows, and the median and largest of every
    variant's |change| on them."""
    test: str
    rows: int
    median: float
    largest: float
    where: Row


def summary(rs: list[Row]) -> list[Summary]:
    out = []
    for test in sorted({r.test for r in rs}):
        mine = [r for r in rs if r.test == test and r.changes()]
        if not mine:
            continue
        where = max(mine, key=lambda r: r.largest() or 0.0)
        out.append(Summary(test, len(mine), statistics.median(
            [c for r in mine for c in r.changes()]), where.largest() or 0.0,
            where))
    return out


@dataclasses.dataclass
class Column:
    label: str
    commit: str
    description: str
    diff: str
    run: Run

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "commit": self.commit,
                "description": self.description, "diff": self.diff,
                "run": self.run.to_json()}


def pct(x: float | None) -> str:
    return "-" if x is None else "%.3f%%" % (100 * x)


def markdown(alloc: str, command: str, tests: str,
             cols: list[Column]) -> str:
    tip, variants = cols[0], cols[1:]
    rs = rows(tip.run, [c.run for c in variants], tests)
    out = ["# Layout noise floor (%s)" % alloc.upper(), "",
           "Command: `%s`" % command, "",
           "Exact mode (QEMU TCG -icount, one CPU): raw **instructions per "
           "object**, as in `./bulk bench`. *tip* is the series' last commit "
           "(`%s`, %s), built in the bisect worktree as `./bulk bench-each` "
           "builds its last column; each variant is the tip plus one "
           "generated commit that adds a function of nops that nothing calls: "
           "no code path changes, only where code lies. Each column is one "
           "boot (exact mode repeats bit for bit on one image), so a row's "
           "*largest change* is what code layout alone moved it by: a gain "
           "claimed for a patch must beat it." % (tip.commit[:12],
                                                  tip.description), "",
           "Variants:", ""]
    out += ["- %s: %s" % (c.label, c.description) for c in variants]
    out += ["", "## Summary", "",
            "Per test, over its rows (bulk and loop variants): the median and "
            "the largest |variant / tip - 1| of every variant on every row.",
            "", "| test | rows | median change | largest change | at |",
            "|---|---:|---:|---:|---|"]
    for s in summary(rs):
        out.append("| %s | %d | %s | %s | %s %s=%d |" % (
            s.test, s.rows, pct(s.median), pct(s.largest), s.where.variant,
            s.where.key_name, s.where.key))
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
                    spec.key, " | ".join(c.label for c in variants)),
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
        cols = [Column("tip", tip, subject, "", Run.from_json(outs[-1]["run"]))]
        cols += [Column(v.name, o["commit"], v.describe(alloc), o["diff"],
                        Run.from_json(o["run"]))
                 for v, o in zip(variants, outs)]
        rs = rows(cols[0].run, [c.run for c in cols[1:]], tests)
        name = os.path.join(records.folder(KIND, args.record),
                            "noise-%s" % alloc)
        return records.publish(STEP, name, markdown(
            alloc, command, tests, cols), {
                "alloc": alloc, "command": command, "tests": tests,
                "tip": tip, "columns": [c.to_json() for c in cols],
                "summary": [{"test": s.test, "rows": s.rows,
                             "median": s.median, "largest": s.largest}
                            for s in summary(rs)]}, args.record)

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
