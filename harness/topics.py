"""./bulk topics: the series as topic series.  Each topic applies with
git am on the base plus the topics it requires, builds, and passes its
own suites there ("alone"); the suites pass on every prefix of the series
that ends with a topic too.

patches/TOPICS cuts the series into topics, in order, one a line:

    NAME FIRST-LAST REQUIRES TITLE...

FIRST-LAST are patch numbers (a lone N is N-N); the ranges cover patches
1 to N exactly once, in order.  REQUIRES is a comma list of earlier
topics, '-' for none; the rest of the line is the title.  Blank lines and
lines starting with '#' are ignored.  patches/topics/NAME.txt is each
topic's cover letter.  Neither is a patch file: gitrepo.patch_files()
and ./bulk export leave them alone.

Everything runs in a worktree of its own, build/topics/linux (laid out
as the bisect worktree is, so that ccache shares objects with the other
trees), never in build/linux or build/bisect.  Per topic, in the order of
TOPICS, up to two targets, one after the other:

  alone   the base, git am of the patches of the topics it requires (and
          of theirs), in the order of TOPICS, then of its own;
  prefix  the base, git am of every topic from the first through this
          one: only where that is another set of patches than alone's
          (a topic that requires every earlier topic has none: "prefix =
          alone").

Each target's apply resets the worktree to the base; its builds and boots
run before the next target's apply, and each checks that HEAD is still
where the apply left it.  A target builds the configs its topic's own
patches can affect (configs()), in build/topics/o/CONFIG (the same dirs
for every target: a later one rebuilds them, from a warm ccache).  Then,
unless --builds-only, where the target's patches add the contract suite
(lib/slab_bulk_kunit.c; the fixes topic, on the base alone, has none and
is built only), each config it built boots twice: once in exact mode
with every KUnit module the config builds (kunit.run: slub_kunit,
skb_list_test and slab_bulk_kunit where present), once on two CPUs with
the stress suite for one round of stress.TEST_SECONDS without fault
injection, in a memcg where the allocator accounts kmem (SLUB, SLAB; as
stress.TEST_RUNS does), where the patches add the stress suite too.
Every apply, build and boot is a step of its own ("slab prefix: kunit
slab"), whose failure names the step and its log, kept per target as
build/logs/topics-LABEL-WHAT.log (LABEL: the topic's name, NAME.prefix
for its prefix).

The record, topics.md and .json under build/results/per-patch/
(results/per-patch/ with --record), says per topic and target what was
applied, and per config what was built, the KUnit counts per suite, the
stress run's summary and the status; a topic passes when every step of
its targets passed.
"""
import dataclasses
import os
import re
import shutil
import time
from functools import partial
from typing import Any, Callable

import base
import build_each
import gitrepo
import kbuild
import kunit
import record as records
import registry
import steps
import stress
from common import (BASE_TAG, PATCHES, TOPICS_TREE, TREE, StageError,
                    log_path, rel, say, stream)

STEP = "topics"
COMMAND = "./bulk topics"
KIND = "per-patch"
TREE_NAME = "topics"
TOPICS = os.path.join(PATCHES, "TOPICS")
COVERS = os.path.join(PATCHES, "topics")
# Seconds per step over the runs so far (the estimate of the time left).
TIMES = "topics-times.json"
NAME_RE = re.compile(r"^[a-z][a-z0-9_-]*$")
RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
# Files whose code the allocators compile each their own way (#ifdef
# CONFIG_SLUB and the like): a topic touching one builds on all three.
# Code elsewhere (net/, a Kconfig, a Makefile) compiles the same on each:
# one build, on the first allocator, checks it.
ALLOCATOR_CODE = ("mm/", "include/linux/slab", "lib/slab_bulk_")


@dataclasses.dataclass(frozen=True)
class Topic:
    name: str
    first: int
    last: int
    requires: tuple[str, ...]
    title: str
    # The line of TOPICS it comes from, for messages.
    line: int = dataclasses.field(default=0, compare=False)

    def span(self) -> str:
        """'4-11'; '19' for a topic of one patch."""
        if self.first == self.last:
            return str(self.first)
        return "%d-%d" % (self.first, self.last)


def parse(text: str) -> list[Topic]:
    """The topics of a TOPICS file's text; a line that is not a topic is
    an error naming it (every such line at once)."""
    out, bad = [], []
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(None, 3)
        if len(fields) < 4:
            bad.append("line %d: '%s': want NAME FIRST-LAST REQUIRES TITLE "
                       "(REQUIRES '-' for none)" % (i, line))
            continue
        name, span, req, title = fields
        m = RANGE_RE.match(span)
        if not NAME_RE.match(name):
            bad.append("line %d: topic name '%s': lower-case letters, "
                       "digits, '-' and '_', starting with a letter"
                       % (i, name))
        elif not m:
            bad.append("line %d: %s: '%s' is no patch range (FIRST-LAST, "
                       "e.g. 4-11)" % (i, name, span))
        else:
            first = int(m.group(1))
            last = int(m.group(2) or first)
            if first < 1 or last < first:
                bad.append("line %d: %s: range %s is empty or starts "
                           "before patch 1" % (i, name, span))
            requires = () if req == "-" else tuple(req.split(","))
            out.append(Topic(name, first, last, requires, title.strip(), i))
    if bad:
        raise StageError(STEP, "%s: %d line(s) are not topics" % (
            rel(TOPICS), len(bad)), detail="\n".join(bad))
    return out


def problems(topics: list[Topic], count: int,
             covers: list[str]) -> list[str]:
    """What is wrong with topics for a series of count patches, whose
    cover letters are the files named covers ([] when nothing is)."""
    out = []
    if not topics:
        return ["no topics: each line NAME FIRST-LAST REQUIRES TITLE"]
    seen: dict[str, Topic] = {}
    nxt = 1
    for t in topics:
        if t.name in seen:
            out.append("%s is named twice (lines %d and %d)"
                       % (t.name, seen[t.name].line, t.line))
        if t.first > nxt:
            out.append("patch(es) %s in no topic (a gap before %s %s)" % (
                "%d-%d" % (nxt, t.first - 1) if t.first - 1 > nxt else nxt,
                t.name, t.span()))
        elif t.first < nxt:
            out.append("%s %s overlaps the topic before it, which ends at "
                       "patch %d (each patch in one topic, in order)"
                       % (t.name, t.span(), nxt - 1))
        nxt = max(nxt, t.last + 1)
        for r in t.requires:
            if r == t.name:
                out.append("%s requires itself" % t.name)
            elif r in seen:
                continue
            elif any(u.name == r for u in topics):
                out.append("%s requires %s, which comes after it (a topic "
                           "requires earlier topics only)" % (t.name, r))
            else:
                out.append("%s requires '%s', which is no topic%s" % (
                    t.name, r, registry.did_you_mean(
                        r, [u.name for u in topics])))
        if len(set(t.requires)) != len(t.requires):
            out.append("%s names a requirement twice" % t.name)
        seen.setdefault(t.name, t)
        if t.name + ".txt" not in covers:
            out.append("%s has no cover letter: write %s (missing or "
                       "empty)" % (
                t.name, rel(os.path.join(COVERS, t.name + ".txt"))))
    if nxt - 1 < count:
        out.append("patch(es) %s in no topic (after %s, the last)" % (
            "%d-%d" % (nxt, count) if count > nxt else nxt, topics[-1].name))
    elif nxt - 1 > count:
        out.append("%s %s goes past the last patch, %d" % (
            topics[-1].name, topics[-1].span(), count))
    names = {t.name for t in topics}
    for c in covers:
        if c.endswith(".txt") and c[:-4] not in names:
            out.append("%s is the cover letter of no topic" % rel(
                os.path.join(COVERS, c)))
    return out


def covers() -> list[str]:
    """The files of patches/topics/ ([] when it is missing)."""
    try:
        return sorted(f for f in os.listdir(COVERS)
                      if os.path.isfile(os.path.join(COVERS, f)) and
                      os.path.getsize(os.path.join(COVERS, f)) > 0)
    except FileNotFoundError:
        return []


def load(patches: list[str]) -> list[Topic]:
    """patches/TOPICS, checked against the series' patch files."""
    try:
        with open(TOPICS) as f:
            text = f.read()
    except FileNotFoundError:
        raise StageError(STEP, "no %s: one line per topic, NAME FIRST-LAST "
                         "REQUIRES TITLE (see harness/topics.py)"
                         % rel(TOPICS)) from None
    topics = parse(text)
    bad = problems(topics, len(patches), covers())
    if bad:
        raise StageError(STEP, "%s does not cut the %d patches of %s into "
                         "topics: %d problem(s)" % (
                             rel(TOPICS), len(patches), rel(PATCHES),
                             len(bad)), detail="\n".join(bad))
    return topics


def needs(topics: list[Topic], name: str) -> list[Topic]:
    """The topics to apply for topic name, in the order of TOPICS: those
    it requires, theirs, and itself last."""
    by_name = {t.name: t for t in topics}
    want = {name}
    todo = [name]
    while todo:
        for r in by_name[todo.pop()].requires:
            if r not in want:
                want.add(r)
                todo.append(r)
    return [t for t in topics if t.name in want]


def files_of(topic: Topic, patches: list[str]) -> list[str]:
    """The topic's own patch files."""
    return patches[topic.first - 1:topic.last]


def configs(paths: list[str]) -> list[str]:
    """The allocator configs a change to paths can affect: the allocator
    whose private file it is (build_each.PRIVATE), all three for code they
    compile each their own way (ALLOCATOR_CODE), the first for other code;
    documentation none."""
    out: set[str] = set()
    for p in paths:
        if p.startswith(build_each.DOC_PREFIXES):
            continue
        private = [a for a, fs in build_each.PRIVATE.items() if p in fs]
        if private:
            out.update(private)
        elif p.startswith(ALLOCATOR_CODE):
            out.update(registry.ALLOCATORS)
        else:
            out.add(registry.ALLOCATORS[0])
    return [a for a in registry.ALLOCATORS if a in out]


def topic_configs(topic: Topic, patches: list[str]) -> list[str]:
    """What topic's own patches can affect; the first allocator when
    they change documentation only (the topic must still build)."""
    paths = [p for f in files_of(topic, patches)
             for p in gitrepo.patch_paths(f)]
    return configs(paths) or [registry.ALLOCATORS[0]]


ALONE = "alone"
PREFIX = "prefix"
# The series' suites: a target whose patches add the contract suite's
# source boots its configs with the KUnit modules; the stress suite's, with
# that too.
SUITE_SRC = os.path.join("lib", kunit.CONTRACT_SUITE + ".c")
STRESS_SRC = os.path.join("lib", stress.STRESS_MODULE + ".c")
KUNIT_MODE = "exact"
STRESS_MODE = "smp"


@dataclasses.dataclass(frozen=True)
class Target:
    """One apply and what runs on it: topic on what it requires (alone),
    or every topic from the first through topic (prefix)."""
    topic: Topic
    kind: str
    applies: tuple[Topic, ...]

    def label(self) -> str:
        """'slab' alone, 'slab prefix': the steps' names start with it."""
        if self.kind == ALONE:
            return self.topic.name
        return "%s %s" % (self.topic.name, self.kind)

    def log_name(self) -> str:
        """'slab', 'slab.prefix' (no topic name has a '.')."""
        return self.label().replace(" ", ".")

    def describe(self) -> str:
        """'fixes 1-3, tests 4-11, slab 16-18'."""
        return ", ".join("%s %s" % (t.name, t.span()) for t in self.applies)

    def files(self, patches: list[str]) -> list[str]:
        """The patch files git am applies, in turn."""
        return [f for t in self.applies for f in files_of(t, patches)]


def targets(topics: list[Topic]) -> list[Target]:
    """Per topic in order: alone, then its prefix where that applies
    another set of patches."""
    out = []
    for i, t in enumerate(topics):
        alone = tuple(needs(topics, t.name))
        out.append(Target(t, ALONE, alone))
        upto = tuple(topics[:i + 1])
        if [u.name for u in upto] != [u.name for u in alone]:
            out.append(Target(t, PREFIX, upto))
    return out


def suites_of(target: Target, patches: list[str]) -> list[str]:
    """What boots on target's configs: 'kunit' where its patches add the
    contract suite, and 'stress' with it where they add the stress suite;
    [] (built only) where they add no contract suite."""
    paths = {p for f in target.files(patches) for p in gitrepo.patch_paths(f)}
    if SUITE_SRC not in paths:
        return []
    return ["kunit"] + (["stress"] if STRESS_SRC in paths else [])


def planned(target: Target, patches: list[str],
            builds_only: bool = False) -> list[str]:
    """target's steps, each name after 'LABEL: ', in order: apply, a build
    per config, then per config its kunit and stress boots (none with
    builds_only)."""
    configs_ = topic_configs(target.topic, patches)
    out = ["apply"] + ["build " + c for c in configs_]
    suites = [] if builds_only else suites_of(target, patches)
    for c in configs_:
        out += ["%s %s" % (s, c) for s in suites]
    return out


@dataclasses.dataclass
class State:
    """What the steps of a run hand on: the commit each target's apply
    ended at (by label), the configs built there, and what the boots
    found (by label and config)."""
    heads: dict[str, str] = dataclasses.field(default_factory=dict)
    built: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    kunit: dict[tuple[str, str], dict[str, dict[str, Any]]] = \
        dataclasses.field(default_factory=dict)
    stress: dict[tuple[str, str], dict[str, Any]] = \
        dataclasses.field(default_factory=dict)


def topic_log(name: str, what: str) -> str:
    return log_path("topics-%s-%s.log" % (name, what))


def apply(target: Target, patches: list[str], state: State) -> str:
    """The worktree at base + git am of target's patches; state.heads[label]
    the commit it ends at.  A patch that does not apply is named, the am
    aborted."""
    label = target.label()
    state.heads.pop(label, None)
    for key in [k for k in state.built if k[0] == label]:
        del state.built[key]
    log = topic_log(target.log_name(), "apply")
    open(log, "w").close()
    gitrepo.worktree(TREE, TOPICS_TREE, STEP)
    if gitrepo.am_in_progress(TOPICS_TREE, STEP):
        gitrepo.git(TOPICS_TREE, STEP, "am", "--abort")
    gitrepo.checkout(TOPICS_TREE, BASE_TAG, STEP)
    gitrepo.git(TOPICS_TREE, STEP, "clean", "-q", "-fdx")
    files = target.files(patches)
    for i, f in enumerate(files):
        if stream(["git", "am", "-q", f], log, cwd=TOPICS_TREE) != 0:
            gitrepo.git(TOPICS_TREE, STEP, "am", "--abort")
            on = ", ".join(os.path.basename(g) for g in files[:i])
            raise StageError(STEP, "%s does not apply on base%s" % (
                os.path.basename(f), " + " + on if on else " alone"), log)
    state.heads[label] = gitrepo.git(TOPICS_TREE, STEP, "rev-parse",
                                     "HEAD").strip()
    return "%d patch(es): %s, at %s" % (len(files), target.describe(),
                                       state.heads[label][:12])


def at_head(target: Target, state: State, what: str) -> str:
    """The commit target's apply left the worktree at; Skip when it did
    not apply, StageError when the worktree moved since."""
    label = target.label()
    head = state.heads.get(label)
    if head is None:
        raise steps.Skip("not %s: %s did not apply" % (what, label))
    now = gitrepo.git(TOPICS_TREE, STEP, "rev-parse", "HEAD").strip()
    if now != head:
        raise StageError(STEP, "%s moved to %s since %s was applied at %s" % (
            rel(TOPICS_TREE), now[:12], label, head[:12]))
    return head


def build(target: Target, config: str, state: State) -> str:
    """config in the worktree apply() left at target's commit; its log
    kept as build/logs/topics-LABEL-CONFIG.log."""
    label = target.label()
    head = at_head(target, state, "built")
    kept = topic_log(target.log_name(), config)
    try:
        kbuild.build(config, TREE_NAME, label="%s %s@%s" % (
            label, config, head[:12]))
    except StageError as e:
        if e.log and os.path.exists(e.log):
            shutil.copyfile(e.log, kept)
        raise StageError(STEP, "%s on %s: %s" % (config, label, e.msg),
                         kept, e.detail) from None
    shutil.copyfile(log_path("build-%s-%s.log" % (TREE_NAME, config)), kept)
    state.built[(label, config)] = head
    return "log: %s" % rel(kept)


def built_here(target: Target, config: str, state: State) -> None:
    """A boot's precondition: target applied, config built there, the
    worktree still at that commit (Skip or StageError otherwise)."""
    head = at_head(target, state, "booted")
    if state.built.get((target.label(), config)) != head:
        raise steps.Skip("not booted: %s did not build on %s"
                         % (config, target.label()))


def keep(log: str, kept: str) -> str:
    """A boot's log copied to kept (the next target's boot of the config
    overwrites the original); kept, or log where it is missing."""
    if os.path.exists(log):
        shutil.copyfile(log, kept)
        return kept
    return log


def kunit_step(target: Target, config: str, state: State) -> str:
    """config booted in exact mode with every KUnit module it builds in
    the worktree; the counts per suite go to state.kunit."""
    built_here(target, config, state)
    label = target.label()
    mods = kunit.expected_modules(config, TREE_NAME)
    if kunit.CONTRACT_SUITE not in mods:
        raise StageError(STEP, "%s on %s: builds no %s (modules: %s), though "
                         "its patches add %s" % (
                             config, label, kunit.CONTRACT_SUITE,
                             ", ".join(mods) or "none", SUITE_SRC))
    res = kunit.run(kunit.KunitRun(config, KUNIT_MODE), TREE_NAME)
    log = keep(res.log, topic_log(target.log_name(), "kunit-" + config))
    state.kunit[(label, config)] = {
        m: {"passed": c.passed, "skipped": c.skipped, "failed": list(c.failed)}
        for m, c in res.suites.items()}
    if not res.ok:
        raise StageError(STEP, "kunit %s %s on %s" % (
            config, KUNIT_MODE, label), log, "\n".join(res.problems))
    return "%s; log: %s" % (res.summary(), rel(log))


def stress_run(config: str) -> stress.StressRun:
    """The short stress run of config: two CPUs, no fault injection, in
    the memcg where the test command's runs of that allocator join it
    (stress.TEST_RUNS: SLUB and SLAB; SLOB accounts no kmem)."""
    alloc = config.split("-")[0]
    memcg = any(r.config.split("-")[0] == alloc and
                stress.CGROUP in r.append.split() for r in stress.TEST_RUNS)
    return stress.StressRun(config, STRESS_MODE,
                            stress.CGROUP if memcg else "", faults=False)


def stress_step(target: Target, config: str, state: State) -> str:
    """config booted with the stress suite for one round of
    stress.TEST_SECONDS; its summary goes to state.stress."""
    built_here(target, config, state)
    label = target.label()
    r = stress_run(config)
    res = stress.run(r, TREE_NAME, stress.TEST_SECONDS)
    log = keep(res.logs[0], topic_log(target.log_name(), "stress-" + config))
    state.stress[(label, config)] = {
        "run": r.name(), "ok": res.ok, "summary": stress.summary(res),
        "problems": list(res.problems)}
    if not res.ok:
        raise StageError(STEP, "stress %s on %s" % (r.name(), label), log,
                         "\n".join(res.problems))
    return "%s; log: %s" % (stress.summary(res), rel(log))


# The steps on one config of a target, by the first word of their names.
CONFIG_STEPS: dict[str, Callable[[Target, str, State], str]] = {
    "build": build, "kunit": kunit_step, "stress": stress_step}


def plan(topics: list[Topic], patches: list[str], state: State,
         builds_only: bool = False) -> list[steps.Step]:
    """Per target (targets()), its steps (planned()): the apply, the
    builds, then the boots, all before the next target's apply."""
    out = []
    for t in targets(topics):
        for name in planned(t, patches, builds_only):
            what, _, config = name.partition(" ")
            fn = (partial(apply, t, patches, state) if what == "apply" else
                  partial(CONFIG_STEPS[what], t, config, state))
            out.append(steps.Step(STEP, "%s: %s" % (t.label(), name), fn))
    return out


def inputs(patches: list[str]) -> dict[str, Any]:
    """What a run was made from: the base, TOPICS and its cover letters,
    the patches' code."""
    return {"base": build_each.file_digest(os.path.join(PATCHES, "BASE")),
            "topics": build_each.file_digest(TOPICS),
            "covers": {c: build_each.file_digest(os.path.join(COVERS, c))
                       for c in covers()},
            "patches": [[os.path.basename(p), build_each.patch_digest(p)]
                        for p in patches]}


def runs(suites: list[str], builds_only: bool) -> str:
    """What boots on a target's configs, in words."""
    if builds_only:
        return "built only (--builds-only)"
    if not suites:
        return "built only: its patches add no contract suite (%s)" % SUITE_SRC
    return " and ".join({"kunit": "KUnit (%s)" % KUNIT_MODE,
                         "stress": "stress (%s, %d s)" % (
                             STRESS_MODE, stress.TEST_SECONDS)}[s]
                        for s in suites)


def config_status(statuses: list[str]) -> str:
    """FAIL if a step failed or did not run, PASS if all passed, else SKIP."""
    if any(s not in ("PASS", "SKIP") for s in statuses):
        return "FAIL"
    return "PASS" if all(s == "PASS" for s in statuses) else "SKIP"


def summarize_target(t: Target, patches: list[str],
                     results: list[steps.StepResult], state: State,
                     builds_only: bool) -> dict[str, Any]:
    """One target: what it applied, per config what was built and what
    the boots found, its status (PASS when every planned step passed)."""
    label = t.label()
    mine = {r.name.split(": ", 1)[1]: r for r in results
            if r.name.startswith(label + ": ")}
    names = planned(t, patches, builds_only)
    status = {n: mine[n].status if n in mine else "NOT RUN" for n in names}
    applied = status["apply"] == "PASS"
    configs_ = topic_configs(t.topic, patches)
    suites = [] if builds_only else suites_of(t, patches)
    per_config = []
    for c in configs_:
        own = [n for n in names if n.endswith(" " + c)]
        per_config.append({
            "config": c, "built": status["build " + c] == "PASS",
            "kunit": state.kunit.get((label, c)),
            "kunit_status": status.get("kunit " + c),
            "stress": state.stress.get((label, c)),
            "stress_status": status.get("stress " + c),
            "status": config_status([status[n] for n in own])})
    return {
        "target": t.kind, "label": label, "applies": t.describe(),
        "applied": ([os.path.basename(f) for f in t.files(patches)]
                    if applied else []),
        "configs": configs_,
        "built": [c["config"] for c in per_config if c["built"]],
        "suites": suites, "runs": runs(suites, builds_only),
        "per_config": per_config,
        "status": "PASS" if all(s == "PASS" for s in status.values())
        else "FAIL",
        "steps": [{"name": "%s: %s" % (label, n), "status": status[n],
                   "detail": mine[n].detail if n in mine else "",
                   "seconds": mine[n].seconds if n in mine else 0}
                  for n in names]}


def summarize(topics: list[Topic], patches: list[str],
              results: list[steps.StepResult], state: State | None = None,
              builds_only: bool = False) -> list[dict[str, Any]]:
    """Per topic: its targets (summarize_target()), the alone target's
    apply and builds at the top as before, and its status: PASS when
    every step of every target of it passed."""
    state = state or State()
    out = []
    all_targets = targets(topics)
    for t in topics:
        rows = [summarize_target(x, patches, results, state, builds_only)
                for x in all_targets if x.topic.name == t.name]
        alone = rows[0]
        out.append({
            "name": t.name, "patches": t.span(), "title": t.title,
            "requires": list(t.requires), "applies": alone["applies"],
            "applied": alone["applied"], "configs": alone["configs"],
            "built": alone["built"],
            "prefix": rows[1]["applies"] if len(rows) > 1 else "= alone",
            "targets": rows,
            "status": "PASS" if all(r["status"] == "PASS" for r in rows)
            else "FAIL",
            "steps": [s for r in rows for s in r["steps"]]})
    return out


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def kunit_cell(c: dict[str, Any]) -> str:
    """'slub_kunit 8/0/0, slab_bulk_kunit 40/2/0' (passed/skipped/failed
    per suite), the failed cases named; '-' where nothing was counted."""
    if not c["kunit"]:
        return "-" if c["kunit_status"] is None else c["kunit_status"]
    return ", ".join("%s %d/%d/%d%s" % (
        m, n["passed"], n["skipped"], len(n["failed"]),
        " (failed: %s)" % ", ".join(n["failed"]) if n["failed"] else "")
        for m, n in c["kunit"].items())


def stress_cell(c: dict[str, Any]) -> str:
    if not c["stress"]:
        return "-" if c["stress_status"] is None else c["stress_status"]
    s = c["stress"]
    return "%s: %s%s" % (s["run"], "pass" if s["ok"] else "FAIL",
                         ", " + s["summary"] if s["ok"] else
                         ": " + "; ".join(s["problems"]))


def boots_cell(row: dict[str, Any], kind: str) -> str:
    """A target's boots of one kind in the topics table: 'not run (...)'
    or 'N of M passed'."""
    if kind not in row["suites"]:
        return "not run"
    st = [c[kind + "_status"] for c in row["per_config"]]
    return "%d of %d passed" % (st.count("PASS"), len(st))


def markdown(rec: dict[str, Any]) -> str:
    builds_only = rec.get("builds_only", False)
    out = ["# Topic series", "",
           "`%s` (%s, %d s, %s), in build/topics/linux:" % (
               rec["command"], rec["date"], rec["seconds"], rec["compiler"]),
           "",
           "- alone: each topic of patches/TOPICS applied with `git am` on "
           "the base plus the topics it requires (and theirs), and built on "
           "the configs its own patches can affect (the allocator a file is "
           "private to; all three for code they compile each their own way; "
           "`slub` for other code);",
           "- prefix: every topic from the first through this one, in the "
           "order of TOPICS, applied and built on the same configs, where "
           "that is another set of patches than alone's (\"prefix = alone\" "
           "where it is the same);"]
    if builds_only:
        out.append("- `--builds-only`: nothing was booted; no KUnit or "
                   "stress suite was run.")
    else:
        out.append(
            "- on every config a target built, where its patches add the "
            "contract suite (`%s`): one boot in %s mode (one CPU) loading "
            "every KUnit module the config builds (`slub_kunit`, "
            "`skb_list_test`, `slab_bulk_kunit` where present; counts are "
            "passed/skipped/failed cases per suite), and one boot on two "
            "CPUs (%s) running the stress suite (`%s`) for one round of %d "
            "s, without fault injection, in a memcg (`%s`) on SLUB and "
            "SLAB, none on SLOB (no kmem accounting). A target whose "
            "patches add no contract suite (fixes) is built only: nothing "
            "boots there, not even the base's own `slub_kunit`." % (
                SUITE_SRC, KUNIT_MODE, STRESS_MODE, stress.STRESS_MODULE,
                stress.TEST_SECONDS, stress.CGROUP))
    out += ["", "A topic passes when every step of its targets passed. "
            "%d of %d topics passed." % (rec["passed"], len(rec["topics"])),
            "", "| topic | patches | requires | target | applied | built | "
            "KUnit boots | stress boots | status |",
            "|---|---|---|---|---|---|---|---|---|"]
    row = "| %s | %s | %s | %s | %s | %s | %s | %s | %s |"
    for t in rec["topics"]:
        for i, r in enumerate(t["targets"]):
            out.append(row % (
                t["name"] if i == 0 else "", t["patches"] if i == 0 else "",
                (", ".join(t["requires"]) or "-") if i == 0 else "",
                r["target"],
                "%s (%d patches)" % (r["applies"], len(r["applied"]))
                if r["applied"] else "no", ", ".join(r["built"]) or "-",
                boots_cell(r, "kunit"), boots_cell(r, "stress"), r["status"]))
        if len(t["targets"]) == 1:
            out.append(row % ("", "", "", PREFIX, "= alone (the same patches, "
                              "not run twice)", "-", "-", "-", "-"))
    for t in rec["topics"]:
        out += ["", "## %s: %s (%s)" % (t["name"], t["title"], t["status"]),
                ""]
        for r in t["targets"]:
            out.append("- %s: applies %s; builds %s; boots: %s." % (
                r["target"], r["applies"], ", ".join(r["configs"]), r["runs"]))
        if len(t["targets"]) == 1:
            out.append("- prefix = alone: the same patches, not run twice.")
        out += ["", "| target | config | built | KUnit (passed/skipped/failed) "
                "| stress | status |", "|---|---|---|---|---|---|"]
        out += ["| %s | %s | %s | %s | %s | %s |" % (
            r["target"], c["config"], "yes" if c["built"] else "no",
            cell(kunit_cell(c)), cell(stress_cell(c)), c["status"])
            for r in t["targets"] for c in r["per_config"]]
        out += ["", "| step | status | seconds | detail |", "|---|---|---:|---|"]
        out += ["| %s | %s | %s | %s |" % (s["name"], s["status"], s["seconds"],
                                           cell(s["detail"]))
                for s in t["steps"]]
    return "\n".join(out) + "\n"


def main(record: bool = False, builds_only: bool = False) -> int:
    """./bulk topics: every target applied and built, and (unless
    builds_only) its suites booted; writes the record (under results/
    when record); 1 when a topic failed."""
    start = time.time()
    command = COMMAND + (" --builds-only" if builds_only else "")
    patches = gitrepo.patch_files(PATCHES)
    topics = load(patches)
    base.create()
    made_from = inputs(patches)
    state = State()
    todo = plan(topics, patches, state, builds_only)
    say("topics: %d topic(s), %d target(s), %d step(s)%s: %s" % (
        len(topics), len(targets(topics)), len(todo),
        " (--builds-only: no boots)" if builds_only else "", "; ".join(
            "%s %s requires %s" % (t.name, t.span(), ",".join(t.requires) or "-")
            for t in topics)))
    times = log_path(TIMES)
    history = steps.load_history(times)
    results = steps.run_all(todo, history)
    steps.save_history(times, history, results)
    if inputs(gitrepo.patch_files(PATCHES)) != made_from:
        raise StageError(STEP, "patches/ changed during the run: no record "
                         "written; run %s again" % command)
    per_topic = summarize(topics, patches, results, state, builds_only)
    failed = [t["name"] for t in per_topic if t["status"] != "PASS"]
    rec: dict[str, Any] = {
        "command": command, "builds_only": builds_only,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(time.time() - start),
        "compiler": build_each.compiler(), "inputs": made_from,
        "topics": per_topic, "passed": len(per_topic) - len(failed),
        "failed": len(failed)}
    name = os.path.join(records.folder(KIND, record), "topics")
    records.publish(STEP, name, markdown(rec), rec, record)
    for t in per_topic:
        for r in t["targets"]:
            say("topics: %-6s %s: applied %s; built %s; %s" % (
                r["status"], r["label"],
                "%d patch(es), %s" % (len(r["applied"]), r["applies"])
                if r["applied"] else "nothing (did not apply)",
                ", ".join(r["built"]) or "nothing", r["runs"]))
    say("topics: %d of %d topic(s) passed in %dm%02ds" % (
        len(per_topic) - len(failed), len(per_topic),
        *divmod(int(time.time() - start), 60)))
    return 1 if failed else 0
