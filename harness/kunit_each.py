"""./bulk kunit-each: the contract suite at every patch of the series.

Each commit is built in the bisect worktree (build/bisect/linux, never the
user's build/linux) and booted as ./bulk kunit does; the runs are those of
kunit.KUNIT_RUNS on slub without extra options (exact and smp; the test
command makes them on slub-faults) and on slub-debug (KASAN, lockdep).
Writes kunit-each-patch.md under build/results/per-patch/, or
results/per-patch/ with --record; a run limited with --from/--to writes
kunit-each-patch-pFIRST-pLAST.md, so that it never overwrites the record of
every patch.  An interrupted run keeps the patches it finished (each.py).
"""
import dataclasses
import os
from typing import Callable

import each
import gitrepo
import kbuild
import kconfig
import kunit
import record as records
import tree
from common import BISECT_TREE, REPO, TREE, StageError, rel, say

SUITE_SRC = os.path.join("lib", "slab_bulk_kunit.c")
# slub-debug's slub_debug=- runs (the fast paths under KASAN and DEBUG_VM)
# are the test command's: two more boots at each of 32 patches.
RUNS = [r for r in kunit.KUNIT_RUNS
        if (r.config == "slub" and not r.append) or
        (r.config == "slub-debug" and "slub_debug=-" not in r.append.split())]


@dataclasses.dataclass
class Row:
    commit: str
    subject: str
    run: str
    status: str
    detail: str


def rows(commits: list[str], subjects: list[str],
         has_suite: Callable[[str], bool],
         run_one: Callable[[str, kunit.KunitRun], kunit.KunitResult],
         runs: list[kunit.KunitRun]) -> list[Row]:
    """A row for every commit and run; run_one(commit, run) returns the
    run's result or raises StageError.  A commit without the suite gets one
    SKIP row."""
    out = []
    for c, subj in zip(commits, subjects):
        if not has_suite(c):
            out.append(Row(c, subj, "-", "SKIP", "no contract suite at this patch"))
            continue
        for r in runs:
            name = "%s %s" % (r.config, r.mode)
            try:
                s = run_one(c, r)
            except StageError as e:
                out.append(Row(c, subj, name, "FAIL", "; ".join(
                    line.strip() for line in str(e).splitlines() if line.strip())))
                continue
            detail = s.suites.get(kunit.CONTRACT_SUITE, kunit.SuiteCounts()).summary()
            if not s.ok:
                detail += "; " + "; ".join(s.problems) + "; log: " + \
                    os.path.relpath(s.log, REPO)
            out.append(Row(c, subj, name, "PASS" if s.ok else "FAIL", detail))
    return out


def select(commits: list[str], first: int = 1,
           last: int | None = None) -> list[str]:
    """Patches first..last (numbers from 1) of @commits; a range outside
    the series is an error, not an empty run."""
    n = len(commits)
    top = n if last is None else last
    if not 1 <= first <= top <= n:
        raise StageError("kunit-each", "--from %d --to %s: not a range of "
                         "the series' patches 1 to %d" % (
                             first, "the tip" if last is None else last, n))
    return commits[first - 1:top]


def out_path(first: int = 1, last: int | None = None,
             record: bool = False) -> str:
    name = "kunit-each-patch"
    if first > 1 or last is not None:
        name += "-p%d-p%s" % (first, last if last is not None else "tip")
    return os.path.join(records.folder("per-patch", record), name + ".md")


def markdown(table: list[Row], first: int = 1,
             last: int | None = None) -> str:
    limited = first > 1 or last is not None
    what = ("for patches %d to %s of build/linux" % (
        first, "the tip" if last is None else last) if limited else
        "for every commit of build/linux (base..series)")
    cmd = "./bulk kunit-each" + ("%s%s" % (
        " --from %d" % first if first > 1 else "",
        " --to %d" % last if last is not None else "") if limited else "")
    out = ["# Contract suite at every patch", "",
           "`%s`: %s, " % (cmd, what) +
           "builds `slub` and `slub-debug` and runs the KUnit modules as `./bulk kunit` does; "
           "the counts are the contract suite's (`slab_bulk_kunit`).", "",
           "| # | patch | run | status | slab_bulk_kunit |", "|---:|---|---|---|---|"]
    num: dict[str, int] = {}
    for r in table:
        num.setdefault(r.commit, len(num) + first)
        out.append("| %d | %s | %s | %s | %s |" % (
            num[r.commit], r.subject.replace("|", "\\|"), r.run, r.status, r.detail))
    return "\n".join(out) + "\n"


def each_patch(first: int = 1, last: int | None = None,
               record: bool = False) -> int:
    """Writes kunit-each-patch.md (see out_path() for a limited run);
    returns the number of failed rows."""
    tree.create()
    commits = select(gitrepo.commits(TREE, "kunit-each"), first, last)
    subjects = [gitrepo.git(TREE, "kunit-each", "log", "-1", "--format=%s",
                            c).strip() for c in commits]
    gitrepo.worktree(TREE, BISECT_TREE, "kunit-each")

    def has_suite(c: str) -> bool:
        try:
            gitrepo.git(TREE, "kunit-each", "cat-file", "-e", "%s:%s" % (c, SUITE_SRC))
        except StageError:
            return False
        return True

    built: dict[str, str] = {}

    def run_one(c: str, r: kunit.KunitRun) -> kunit.KunitResult:
        if built.get(r.config) != c:
            gitrepo.checkout(BISECT_TREE, c, "kunit-each")
            kbuild.build(r.config, "bisect", label="%s@%s" % (r.config, c[:12]))
            built[r.config] = c
        return kunit.run(r, "bisect")

    def work(i: int) -> list[list[str]]:
        return [[r.run, r.status, r.detail] for r in rows(
            commits[i:i + 1], subjects[i:i + 1], has_suite, run_one, RUNS)]

    def write(done: list[list[list[str]]]) -> list[Row]:
        table = [Row(c, subj, *r) for c, subj, rs in zip(commits, subjects, done)
                 for r in rs]
        path = records.write_markdown(out_path(first, last, record),
                                      markdown(table, first, last),
                                      records.stamp())
        say("kunit-each: %d rows, %d failed; %s, in %s" % (
            len(table), sum(r.status == "FAIL" for r in table), rel(path),
            records.where(record)))
        return table

    # The runs and their configs' fragments (as bisect's keys).
    setting = "; ".join("%s %s %s %s" % (r.config, kconfig.fragment_digest(
        r.config), r.mode, r.append) for r in RUNS)
    table = each.loop("kunit-each", setting, list(zip(
        each.tree_ids(TREE, "kunit-each", commits), range(len(commits)))),
        work, write)
    failed = [r for r in table if r.status == "FAIL"]
    for r in failed:
        say("FAIL %s %s: %s" % (r.subject, r.run, r.detail))
    return len(failed)
