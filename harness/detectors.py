"""./bulk detectors: seven of the harness's detectors, each fired once.

A boot fails on a splat, a bad status, a timeout or a taint beyond N and
B (boot.py); a detector that stopped firing (a splat pattern out of date,
a config option lost, the taint line gone) would fail nothing and look
like a clean run.  This command breaks a scratch kernel on purpose, once
per detector, and checks that the boot fails with the problem it must
produce.

The kernel is slub-detectors: the slub-debug set plus
configs/detectors.config (LKDTM built in, the soft-lockup detector, UBSAN
bounds checking), built from the series' tree (build/linux; no patch
changes) and never part of a record of the series.  Each case (CASES)
is one boot with a short timeout and allow_fail, in exact mode but for
the soft lockup (smp mode: see CASES): the init's
harness.write= orders write LKDTM's provoke-crash/DIRECT file or a
sysctl, and the soft-lockup case sets its threshold on the kernel command
line.  The command fails when a boot does not fail, or fails without its
case's expected problem; it writes detectors.md and .json under
build/results/experiments/, or results/experiments/ with --record (a
failed run's only under build/results/, so that it never replaces the
committed record).
"""
import argparse
import dataclasses
import os
import re
from typing import Any

import boot
import kbuild
import packages
import record as records
import tree
from common import StageError, rel, say

STEP = "detectors"
KIND = "experiments"
NAME = "detectors"
CONFIG = "slub-detectors"
TREE = "linux"
# Seconds per boot: a boot of this kernel takes well under a minute in
# exact mode; a case whose detector stays silent ends here.
TIMEOUT = 180
DIRECT = "/sys/kernel/debug/provoke-crash/DIRECT"


def direct(crash: str) -> str:
    """The init's order to provoke LKDTM's @crash at once."""
    return "harness.write=%s:%s" % (DIRECT, crash)


def sysctl(name: str, value: int) -> str:
    """The init's order to write /proc/sys/kernel/@name."""
    return "harness.write=/proc/sys/kernel/%s:%d" % (name, value)


@dataclasses.dataclass(frozen=True)
class Case:
    """One detector and how to fire it: @append, the kernel command line
    (the init's harness.write= orders run in order, before modules
    load); @splat, a regex some splat line of the boot must match (None:
    the boot must show no splat at all); @problem, a regex one of the
    boot's problems must match besides."""
    name: str
    detector: str
    append: str
    splat: str | None
    problem: str | None = None
    mode: str = "exact"

    def expected(self) -> str:
        """What the boot must show, in words."""
        parts = ["a splat matching `%s`" % self.splat if self.splat
                 else "no splat"]
        if self.problem:
            parts.append("the problem `%s`" % self.problem)
        return ", ".join(parts)


CASES = (
    Case("list-corruption", "DEBUG_LIST's list corruption check",
         direct("CORRUPT_LIST_DEL"), r"list_del corruption"),
    # khungtaskd checks every hung_task_timeout_secs; with hung_task_panic
    # the report ends the boot (LKDTM's HUNG_TASK leaves the init in D
    # state for good).
    Case("hung-task", "the hung-task detector",
         " ".join([sysctl("hung_task_timeout_secs", 2),
                   sysctl("hung_task_panic", 1), direct("HUNG_TASK")]),
         r"INFO: task .* blocked for more than \d+ seconds"),
    # A lockup of 2 * watchdog_thresh seconds of guest time.  In smp mode:
    # in exact mode guest time is the instructions run, and LKDTM's spin
    # (preempt_disable(), then cpu_relax() for ever) did not get there in
    # 180 s of host time (it runs slowly under TCG).
    Case("soft-lockup", "the soft-lockup detector",
         "watchdog_thresh=1 softlockup_panic=1 " + direct("SOFTLOCKUP"),
         r"soft lockup", mode="smp"),
    Case("ubsan", "UBSAN's array index bounds check",
         direct("ARRAY_BOUNDS"), r"UBSAN: array-index-out-of-bounds"),
    # No oops=panic: the oops kills the init, whose death panics.
    Case("oops", "an oops, a NULL pointer dereference", direct("EXCEPTION"),
         r"BUG: kernel NULL pointer dereference|\bOops\b"),
    Case("warning", "a WARN_ON() and the taint check's W",
         direct("WARNING"), r"WARNING:", r"^kernel tainted [A-Z]*W"),
    Case("taint", "the taint check alone, TAINT_USER",
         sysctl("tainted", 64), None, r"^kernel tainted U\b"),
)


def verdict(case: Case, problems: list[str], splats: list[str]) -> list[str]:
    """Why a case's boot, which showed @problems and @splats, is not what
    the case must produce ([] when it is)."""
    if not problems:
        return ["the boot did not fail"]
    out = []
    if case.splat is None:
        if splats:
            out.append("%d splat(s) where none was expected" % len(splats))
    elif not any(re.search(case.splat, s) for s in splats):
        out.append("no splat matching '%s'" % case.splat)
    if case.problem and not any(re.search(case.problem, p)
                                for p in problems):
        out.append("no problem matching '%s'" % case.problem)
    return out


@dataclasses.dataclass
class Outcome:
    """A case's boot and its verdict (@wrong: [] when as expected)."""
    case: str
    trigger: str
    mode: str
    problems: list[str]
    first_splat: str | None
    matched: str | None
    wrong: list[str]
    log: str
    seconds: int

    @property
    def ok(self) -> bool:
        return not self.wrong


def judge(case: Case, res: boot.BootResult) -> Outcome:
    found = res.splats
    matched = next((s for s in found
                    if case.splat and re.search(case.splat, s)), None)
    return Outcome(case.name, case.append, case.mode, list(res.problems),
                   found[0] if found else None, matched,
                   verdict(case, res.problems, found), rel(res.log),
                   res.seconds)


def run_case(case: Case) -> Outcome:
    res = boot.boot(CONFIG, TREE, case.mode, [], case.append,
                    timeout=TIMEOUT, tag="detectors-" + case.name,
                    allow_fail=True)
    assert res is not None
    out = judge(case, res)
    say("detectors %s: %s" % (case.name, "as expected" if out.ok
                              else "NOT AS EXPECTED: " + "; ".join(out.wrong)))
    return out


def cell(text: str | None) -> str:
    """@text in a markdown table cell, as code."""
    if not text:
        return "-"
    return "`%s`" % text.replace("|", "\\|").replace("`", "'")


def markdown(command: str, outs: list[Outcome]) -> str:
    by = {c.name: c for c in CASES}
    good = sum(o.ok for o in outs)
    md = ["# Each detector of the harness, fired once", "",
          "Command: `%s`" % command, "",
          "The scratch kernel `%s` (the `slub-debug` set plus "
          "`configs/detectors.config`: LKDTM built in, the soft-lockup "
          "detector, UBSAN bounds checking), built from the series' tree, "
          "booted once per case with a %d s timeout (in exact mode; the soft "
          "lockup in smp mode, as under -icount the spinning CPU did not "
          "reach the detector's threshold of guest time). Each case fires one "
          "detector through the init's `harness.write=` orders (LKDTM's "
          "`provoke-crash/DIRECT`, a sysctl) and, for the soft lockup, the "
          "kernel command line; the boot must fail with the problem it "
          "names (harness/boot.py: splats, status, timeout, taint beyond N "
          "and B). See harness/detectors.py." % (CONFIG, TIMEOUT), "",
          "%d of %d cases as expected." % (good, len(outs)), "",
          "| case | detector | trigger | mode | expected | the boot's "
          "problems | first splat line | verdict |",
          "|---|---|---|---|---|---|---|---|"]
    for o in outs:
        c = by[o.case]
        md.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            o.case, c.detector, cell(o.trigger), o.mode,
            c.expected().replace("|", "\\|"),
            "; ".join(o.problems).replace("|", "\\|") or "none",
            cell(o.first_splat),
            "as expected" if o.ok else "**not as expected**: " +
            "; ".join(o.wrong)))
    md += ["", "The splat line each case matched, and the logs:", ""]
    md += ["- %s: %s (%s, %d s)" % (o.case, cell(o.matched), o.log,
                                    o.seconds) for o in outs]
    return "\n".join(md)


def to_json(command: str, outs: list[Outcome]) -> dict[str, Any]:
    by = {c.name: c for c in CASES}
    return {"command": command, "config": CONFIG, "tree": TREE,
            "timeout": TIMEOUT,
            "cases": [dict(dataclasses.asdict(o), detector=by[o.case].detector,
                           expected_splat=by[o.case].splat,
                           expected_problem=by[o.case].problem, ok=o.ok)
                      for o in outs]}


def main(args: argparse.Namespace) -> int:
    command = "./bulk detectors"
    packages.require(STEP)
    tree.create()
    kbuild.build(CONFIG, TREE)
    outs = [run_case(c) for c in CASES]
    bad = [o for o in outs if not o.ok]
    # A failed run never replaces the committed record.
    name = os.path.join(records.folder(KIND, args.record and not bad), NAME)
    path = records.publish(STEP, name, markdown(command, outs),
                           to_json(command, outs), args.record and not bad)
    if bad:
        raise StageError(STEP, "%d of %d cases not as expected (record: %s)"
                         % (len(bad), len(outs), rel(path)), bad[0].log,
                         "\n".join("%s: %s" % (o.case, "; ".join(o.wrong))
                                   for o in bad))
    return 0
