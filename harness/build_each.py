"""The every-patch build check (./bulk build-each): every patch builds on SLUB; a
patch touching code shared with SLAB or SLOB builds there too; the full
series builds on all three, and on SLUB without SLUB_DEBUG.

All of it runs in a worktree of its own, build/bisect/linux, never in the
user's build/linux: one O= dir per config under build/bisect/o/, kept
between runs, so that each build is incremental from the one before.

It is a command of its own, not a step of ./bulk test: about 100 builds,
about an hour on a cold ccache, which would take the test command far
past its hour.  It records what it built from in build-each.json (the code of
every patch, patches/BASE, the config fragments, the planned builds) with
every build's outcome, under build/results/per-patch/, or results/per-patch/
with --record; the test command checks that the committed record is of the
series as it stands and that every build passed (check_record()), so a
series changed without running ./bulk build-each --record again fails the test.
An interrupted run keeps the builds it finished (each.py).
"""
import dataclasses
import hashlib
import json
import os
import time
from functools import partial
from typing import Any

import each
import gitrepo
import kbuild
import kconfig
import record as records
import registry
import steps
import tree
from common import (BASE_FILE, BASE_TAG, BISECT_TREE, PATCHES, TREE,
                    StageError, capture, log_path, rel, say)

ALLOCATORS = registry.ALLOCATORS
# Built at the tip only: SLUB with SLUB_DEBUG off, whose code the series
# must keep compiling (its #ifdef'd paths).
TIP_ONLY = ("slub-nodebug",)
COMMAND = "./bulk build-each"
KIND = "per-patch"
# The committed record, which the test command checks.
RECORD = records.committed(KIND, "build-each.json")
REPORT = records.committed(KIND, "build-each.md")
# Seconds per build over the runs so far (the estimate of the time left).
TIMES = "build-each-times.json"
# Files private to one allocator: a patch touching only these (and docs)
# need not be built on the other allocators' configs.
PRIVATE = {
    "slub": ("mm/slub.c", "include/linux/slub_def.h", "lib/slub_kunit.c"),
    "slab": ("mm/slab.c", "include/linux/slab_def.h"),
    "slob": ("mm/slob.c",),
}
DOC_PREFIXES = ("Documentation/", "MAINTAINERS")


def needs_build(config: str, files: list[str]) -> bool:
    """Does a patch touching files need building on this allocator?"""
    if config == "slub":
        return True
    others = [p for a, ps in PRIVATE.items() if a != config for p in ps]
    return any(not f.startswith(DOC_PREFIXES) and f not in others for f in files)


TREE_NAME = "bisect"


@dataclasses.dataclass(frozen=True)
class Build:
    """config at patch number index (0-based), or at the tip (None)."""
    config: str
    index: int | None
    label: str


def plan(patches: list[str]) -> list[Build]:
    """The builds, from the patch files alone."""
    out = []
    tip = "full series" if patches else "base"
    for config in ALLOCATORS:
        for i, p in enumerate(patches[:-1]):
            if needs_build(config, gitrepo.patch_paths(p)):
                out.append(Build(config, i, os.path.basename(p)))
        out.append(Build(config, None, tip))
    out += [Build(config, None, tip) for config in TIP_ONLY]
    return out


def at(commit: str) -> None:
    """The worktree (made when missing) at commit."""
    gitrepo.worktree(TREE, BISECT_TREE, "build-each")
    gitrepo.checkout(BISECT_TREE, commit, "build-each")


def build(b: Build, commits: list[str]) -> None:
    """b in the worktree; commits: the base commit, then the series'."""
    commit = commits[-1] if b.index is None else commits[b.index + 1]
    at(commit)
    kbuild.build(b.config, TREE_NAME, label="%s@%s" % (b.config, commit[:12]))


def step_name(b: Build) -> str:
    return "%s @ %s" % (b.config, b.label)


def patch_digest(path: str) -> str:
    """What a build depends on of a patch file: its diff, from the first
    'diff --git' line to the end (the commit message and the diffstat do
    not change what is built; ./bulk export writes no signature)."""
    with open(path, "rb") as f:
        text = f.read()
    start = text.find(b"\ndiff --git ")
    return hashlib.sha256(text[start + 1:] if start >= 0 else b"").hexdigest()[:16]


def file_digest(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except OSError:
        return "missing"


def compiler() -> str:
    """The first line of gcc --version: the record says what built it."""
    try:
        return capture(["gcc", "--version"], "build-each").splitlines()[0]
    except (StageError, IndexError):
        return "unknown"


def inputs(patches: list[str]) -> dict[str, Any]:
    """What a run of the builds of plan(patches) was made from."""
    builds = plan(patches)
    return {"base": file_digest(BASE_FILE),
            "patches": [[os.path.basename(p), patch_digest(p)] for p in patches],
            "configs": {c: kconfig.fragment_digest(c)
                        for c in sorted({b.config for b in builds})},
            "builds": [step_name(b) for b in builds]}


def differences(have: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """How a recorded run's inputs differ from the series' (empty when
    they do not).  Patches compare by position and diff: a patch renamed
    for a new subject is the same patch; the ones that differ are named by
    their names in patches/."""
    out = []
    if have.get("base") != want["base"]:
        out.append("patches/BASE changed")
    had = [d for _, d in have.get("patches", [])]
    wanted = want["patches"]
    changed = [n for i, (n, d) in enumerate(wanted)
               if i >= len(had) or had[i] != d]
    if changed:
        out.append("%d patch(es) new or changed since (%s%s)" % (
            len(changed), ", ".join(changed[:3]), ", ..." if len(changed) > 3 else ""))
    if len(had) > len(wanted):
        out.append("%d patch(es) recorded that patches/ no longer has"
                   % (len(had) - len(wanted)))
    cfg_had = have.get("configs", {})
    cfg_want = want["configs"]
    cfgs = sorted(c for c in cfg_want if cfg_had.get(c) != cfg_want[c])
    if cfgs:
        out.append("the fragments of %s changed" % ", ".join(cfgs))
    if not out and have.get("builds") != want["builds"]:
        out.append("the planned builds changed")
    return out


AGAIN = "run %s --record (about an hour on a cold ccache) and commit %s and %s" % (
    COMMAND, rel(RECORD), rel(REPORT))


def check_record(patches: list[str]) -> str:
    """The test command's build-each step: RECORD must be a run of
    ./bulk build-each on the series as patches/ and configs/ hold it, with every
    planned build passed.  Returns the PASS line's detail."""
    try:
        with open(RECORD) as f:
            rec = json.load(f)
        have = rec["inputs"]
        names = [r["name"] for r in rec["results"]]
        failed = [r["name"] for r in rec["results"] if r["status"] != "PASS"]
        if not isinstance(have, dict) or not isinstance(have.get("builds"), list):
            raise TypeError("no planned builds")
    except FileNotFoundError:
        raise StageError("build-each", "no record of the every-patch builds: " + AGAIN)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StageError("build-each", "%s is not a record of %s (%s): %s" % (
            rel(RECORD), COMMAND, e, AGAIN))
    diff = differences(have, inputs(patches))
    if diff:
        raise StageError("build-each", "%s is not of this series: %s; %s" % (
            rel(RECORD), "; ".join(diff), AGAIN), REPORT)
    if names != have["builds"]:
        raise StageError("build-each", "%s records %d builds, not the %d planned: %s" % (
            rel(RECORD), len(names), len(have["builds"]), AGAIN), REPORT)
    if failed:
        raise StageError("build-each", "the recorded run has %d of %d builds failed "
                         "(%s%s); fix them, then %s" % (
                             len(failed), len(names), ", ".join(failed[:3]),
                             ", ..." if len(failed) > 3 else "", AGAIN), REPORT)
    return "%d builds passed, recorded %s at %s with %s" % (
        len(names), rec.get("date", "?"), str(rec.get("tip", "?"))[:12],
        rec.get("compiler", "?"))


def markdown(rec: dict[str, Any]) -> str:
    res: list[dict[str, Any]] = rec["results"]
    out = ["# Every patch builds", "",
           "`%s` (%s, %d s, %s): every patch of the series built in "
           "build/bisect/linux on `slub`, and on `slab` and `slob` where it "
           "touches code they compile; the tip on all three and on "
           "`slub-nodebug` (SLUB_DEBUG off). Tip: %s. The test command "
           "checks that results/per-patch/build-each.json is of the series as it "
           "stands and that every build passed." % (
               COMMAND, rec["date"], rec["seconds"], rec["compiler"], rec["tip"]),
           "", "%d passed, %d failed." % (rec["passed"], rec["failed"]), "",
           "| build | status | seconds | detail |", "|---|---|---:|---|"]
    for r in res:
        out.append("| %s | %s | %s | %s |" % (
            r["name"], r["status"], r["seconds"],
            str(r["detail"]).replace("|", "\\|").replace("\n", " ")))
    return "\n".join(out) + "\n"


def keys(built_from: dict[str, Any], builds: list[Build]) -> list[str]:
    """Each build's key for the resumable loop: its config's fragments and
    the code of base and of every patch up to the one built."""
    series = each.chain([built_from["base"]] +
                        [d for _, d in built_from["patches"]])
    return ["%s %s %s" % (step_name(b), built_from["configs"][b.config],
                          series[len(built_from["patches"]) if b.index is None
                                 else b.index + 1]) for b in builds]


def main(record: bool = False) -> int:
    """./bulk build-each: every build of plan(); writes the record and its
    report (under results/ when record), returns 1 if a build failed."""
    start = time.time()
    tree.create()
    if not tree.is_exported_series():
        raise StageError("build-each", "build/linux is not base + patches/: run ./bulk tree")
    commits = [gitrepo.git(TREE, "build-each", "rev-parse", BASE_TAG).strip()]
    commits += gitrepo.commits(TREE, "build-each")
    patches = gitrepo.patch_files(PATCHES)
    if len(commits) != len(patches) + 1:
        raise StageError("build-each", "build/linux has %d commits over base, patches/ "
                         "%d patches: run ./bulk tree" % (len(commits) - 1, len(patches)))
    built_from = inputs(patches)
    builds = plan(patches)
    key = dict(zip(map(step_name, builds), keys(built_from, builds)))
    gcc = compiler()
    progress = each.Progress("build-each", gcc, list(key.values()))
    kept = sum(r["seconds"] for r in progress.done.values())
    todo = [steps.Step("build-each", step_name(b), partial(build, b, commits))
            for b in builds if key[step_name(b)] not in progress.done]
    times = log_path(TIMES)
    history = steps.load_history(times)
    steps.save_history(times, history, steps.run_all(
        todo, history, lambda r: progress.save(key[r.name], dataclasses.asdict(r))))
    results = [steps.StepResult(**progress.done[k]) for k in key.values()]
    # The builds are of build/linux as it was at the start: a patches/ or
    # configs/ changed meanwhile (a checkout, an export) is not what they
    # built, and no record may say it is.
    if (inputs(gitrepo.patch_files(PATCHES)) != built_from or
            not tree.is_exported_series()):
        raise StageError("build-each", "patches/, patches/BASE, configs/ or "
                         "build/linux changed during the run: no record "
                         "written; run %s again" % COMMAND)
    c = steps.counts(results)
    rec: dict[str, Any] = {
        "command": COMMAND,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(time.time() - start + kept), "tip": commits[-1],
        "compiler": gcc, "inputs": built_from,
        "results": [{"name": r.name, "status": r.status, "detail": r.detail,
                     "seconds": r.seconds} for r in results],
        "passed": c["passed"], "failed": c["failed"]}
    out = records.folder(KIND, record)
    st = records.stamp()
    records.write_json(os.path.join(out, "build-each.json"), rec, st)
    md = records.write_markdown(os.path.join(out, "build-each.md"), markdown(rec), st)
    progress.finish()
    say("build-each: %d builds, %d passed, %d failed in %dm%02ds; %s, in %s" % (
        len(results), c["passed"], c["failed"], *divmod(int(time.time() - start), 60),
        rel(md), records.where(record)))
    if not record:
        say("build-each: the test command checks %s: run %s --record after "
            "changing the series" % (rel(RECORD), COMMAND))
    return 1 if c["failed"] else 0
