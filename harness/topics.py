"""./bulk topics: the series as topic series, each of which applies with
git am on the base plus the topics it requires, and builds.

patches/TOPICS cuts the series into topics, in order, one a line:

    NAME FIRST-LAST REQUIRES TITLE...

FIRST-LAST are patch numbers (a lone N is N-N); the ranges cover patches
1 to N exactly once, in order.  REQUIRES is a comma list of earlier
topics, '-' for none; the rest of the line is the title.  Blank lines and
lines starting with '#' are ignored.  patches/topics/NAME.txt is each
topic's cover letter.  Neither is a patch file: gitrepo.patch_files()
and ./bulk export leave them alone.

Each topic is checked in a worktree of its own, build/topics/linux (laid
out as the bisect worktree is, so that ccache shares objects with the
other trees), never in build/linux or build/bisect: the base, git am of
the patches of the topics it requires (and of theirs), in the order of
TOPICS, then of its own; then the configs its own patches can affect are
built (configs()), in build/topics/o/.  The record, topics.md and .json
under build/results/per-patch/ (results/per-patch/ with --record), says
per topic what was applied, what was built, PASS or FAIL and the log.
"""
import dataclasses
import os
import re
import shutil
import time
from functools import partial
from typing import Any

import base
import build_each
import gitrepo
import kbuild
import record as records
import registry
import steps
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


def apply_order(topics: list[Topic], name: str,
                patches: list[str]) -> list[str]:
    """The patch files git am applies for topic name, in turn."""
    return [f for t in needs(topics, name) for f in files_of(t, patches)]


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


def describe(topics: list[Topic], name: str) -> str:
    """'fixes 1-3, tests 4-11, slub 12-15': what topic name's run applies."""
    return ", ".join("%s %s" % (t.name, t.span()) for t in needs(topics, name))


def topic_log(name: str, what: str) -> str:
    return log_path("topics-%s-%s.log" % (name, what))


def apply(topic: Topic, topics: list[Topic], patches: list[str],
          heads: dict[str, str]) -> str:
    """The worktree at base + git am of apply_order(); heads[topic] the
    commit it ends at.  A patch that does not apply is named, the am
    aborted."""
    heads.pop(topic.name, None)
    log = topic_log(topic.name, "apply")
    open(log, "w").close()
    gitrepo.worktree(TREE, TOPICS_TREE, STEP)
    if gitrepo.am_in_progress(TOPICS_TREE, STEP):
        gitrepo.git(TOPICS_TREE, STEP, "am", "--abort")
    gitrepo.checkout(TOPICS_TREE, BASE_TAG, STEP)
    gitrepo.git(TOPICS_TREE, STEP, "clean", "-q", "-fdx")
    files = apply_order(topics, topic.name, patches)
    for i, f in enumerate(files):
        if stream(["git", "am", "-q", f], log, cwd=TOPICS_TREE) != 0:
            gitrepo.git(TOPICS_TREE, STEP, "am", "--abort")
            on = ", ".join(os.path.basename(g) for g in files[:i])
            raise StageError(STEP, "%s does not apply on base%s" % (
                os.path.basename(f), " + " + on if on else " alone"), log)
    heads[topic.name] = gitrepo.git(TOPICS_TREE, STEP, "rev-parse",
                                    "HEAD").strip()
    return "%d patch(es): %s, at %s" % (len(files), describe(topics, topic.name),
                                       heads[topic.name][:12])


def build(topic: Topic, config: str, heads: dict[str, str]) -> str:
    """config in the worktree apply() left at topic's commit; its log
    kept as build/logs/topics-NAME-CONFIG.log."""
    head = heads.get(topic.name)
    if head is None:
        raise steps.Skip("not built: %s did not apply" % topic.name)
    now = gitrepo.git(TOPICS_TREE, STEP, "rev-parse", "HEAD").strip()
    if now != head:
        raise StageError(STEP, "%s moved to %s since %s was applied at %s" % (
            rel(TOPICS_TREE), now[:12], topic.name, head[:12]))
    kept = topic_log(topic.name, config)
    try:
        kbuild.build(config, TREE_NAME, label="%s %s@%s" % (
            topic.name, config, head[:12]))
    except StageError as e:
        if e.log and os.path.exists(e.log):
            shutil.copyfile(e.log, kept)
        raise StageError(STEP, "%s on %s: %s" % (config, topic.name, e.msg),
                         kept, e.detail) from None
    shutil.copyfile(log_path("build-%s-%s.log" % (TREE_NAME, config)), kept)
    return "log: %s" % rel(kept)


def plan(topics: list[Topic], patches: list[str],
         heads: dict[str, str]) -> list[steps.Step]:
    """Per topic: apply, then a build per config it can affect."""
    out = []
    for t in topics:
        out.append(steps.Step(STEP, "%s: apply" % t.name,
                              partial(apply, t, topics, patches, heads)))
        out += [steps.Step(STEP, "%s: build %s" % (t.name, c),
                           partial(build, t, c, heads))
                for c in topic_configs(t, patches)]
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


def summarize(topics: list[Topic], patches: list[str],
              results: list[steps.StepResult]) -> list[dict[str, Any]]:
    """Per topic: what it applied, its builds and its status."""
    out = []
    for t in topics:
        mine = [r for r in results if r.name.startswith(t.name + ": ")]
        applied = [r for r in mine if r.name.endswith(": apply")]
        builds = [r for r in mine if not r.name.endswith(": apply")]
        ok = bool(applied) and all(r.status == "PASS" for r in mine)
        out.append({
            "name": t.name, "patches": t.span(), "title": t.title,
            "requires": list(t.requires),
            "applies": describe(topics, t.name),
            "applied": ([os.path.basename(f) for f in
                         apply_order(topics, t.name, patches)]
                        if applied and applied[0].status == "PASS" else []),
            "configs": topic_configs(t, patches),
            "built": [r.name.split(" build ", 1)[1] for r in builds
                      if r.status == "PASS"],
            "status": "PASS" if ok else "FAIL",
            "steps": [{"name": r.name, "status": r.status, "detail": r.detail,
                       "seconds": r.seconds} for r in mine]})
    return out


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(rec: dict[str, Any]) -> str:
    out = ["# Topic series", "",
           "`%s` (%s, %d s, %s): each topic of patches/TOPICS applied with "
           "`git am` on the base plus the topics it requires, in "
           "build/topics/linux, and built on the configs its own patches "
           "can affect (the allocator a file is private to; all three for "
           "code they compile each their own way; `slub` for other code)." % (
               COMMAND, rec["date"], rec["seconds"], rec["compiler"]),
           "", "%d of %d topics passed." % (rec["passed"], len(rec["topics"])),
           "", "| topic | patches | requires | applied | built | status |",
           "|---|---|---|---|---|---|"]
    for t in rec["topics"]:
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            t["name"], t["patches"], ", ".join(t["requires"]) or "-",
            "%s (%d patches)" % (t["applies"], len(t["applied"]))
            if t["applied"] else "no", ", ".join(t["built"]) or "-",
            t["status"]))
    for t in rec["topics"]:
        out += ["", "## %s: %s" % (t["name"], t["title"]), "",
                "Applies %s; builds %s." % (t["applies"], ", ".join(t["configs"])),
                "", "| step | status | seconds | detail |", "|---|---|---:|---|"]
        out += ["| %s | %s | %s | %s |" % (s["name"], s["status"], s["seconds"],
                                           cell(s["detail"]))
                for s in t["steps"]]
    return "\n".join(out) + "\n"


def main(record: bool = False) -> int:
    """./bulk topics: every topic applied and built; writes the record
    (under results/ when record); 1 when a topic failed."""
    start = time.time()
    patches = gitrepo.patch_files(PATCHES)
    topics = load(patches)
    base.create()
    made_from = inputs(patches)
    heads: dict[str, str] = {}
    todo = plan(topics, patches, heads)
    say("topics: %d topic(s), %d step(s): %s" % (
        len(topics), len(todo), "; ".join(
            "%s %s requires %s" % (t.name, t.span(), ",".join(t.requires) or "-")
            for t in topics)))
    times = log_path(TIMES)
    history = steps.load_history(times)
    results = steps.run_all(todo, history)
    steps.save_history(times, history, results)
    if inputs(gitrepo.patch_files(PATCHES)) != made_from:
        raise StageError(STEP, "patches/ changed during the run: no record "
                         "written; run %s again" % COMMAND)
    per_topic = summarize(topics, patches, results)
    failed = [t["name"] for t in per_topic if t["status"] != "PASS"]
    rec: dict[str, Any] = {
        "command": COMMAND,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(time.time() - start),
        "compiler": build_each.compiler(), "inputs": made_from,
        "topics": per_topic, "passed": len(per_topic) - len(failed),
        "failed": len(failed)}
    name = os.path.join(records.folder(KIND, record), "topics")
    records.publish(STEP, name, markdown(rec), rec, record)
    for t in per_topic:
        say("topics: %-6s %s: applied %s; built %s" % (
            t["status"], t["name"],
            "%d patch(es), %s" % (len(t["applied"]), t["applies"])
            if t["applied"] else "nothing (did not apply)",
            ", ".join(t["built"]) or "nothing"))
    say("topics: %d of %d topic(s) passed in %dm%02ds" % (
        len(per_topic) - len(failed), len(per_topic),
        *divmod(int(time.time() - start), 60)))
    return 1 if failed else 0
