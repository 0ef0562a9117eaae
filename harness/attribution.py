"""./bulk attribution: per patch, the lines it changes in kernel code
against the gain its benchmark column shows, with the noise floor beside.

For one allocator, each patch of build/linux's series (base..HEAD, as
./bulk bench-each lists them) that can change that allocator's benchmark
kernel (bench_each.moves_kernel()) gets a row:

- lines: what it adds and deletes in the .c and .h files under mm/,
  net/, include/ and lib/ (the tests lib/slab_bulk_* and
  net/core/skb_list_test.c left out), from git show of its commit, split
  into code and comment lines (classify());
- gain: from bench-each-ALLOC.json (the committed record first, else the
  scratch copy, as bench_each.load() reads it; one of another series is
  not read), the change of a few key rows (KEY_ROWS) against the column
  before the patch's, and the best and worst change over every row of
  tests a to e and g;
- noise floor: per test letter, the largest change layout alone put on a
  row (noise-ALLOC.json's per-test maxima, when that record exists); a
  key-row change not above its test's floor is marked.

Cache misses, locked operations, IRQ-off windows and lock holds, and
stack frames are measured per series by other commands, not per patch:
the record says so (COSTS).  No build, no boot.

Writes attribution-ALLOC.md and .json under build/results/per-patch/, or
results/per-patch/ with --record.
"""
import argparse
import dataclasses
import json
import os
import re
import sys
from typing import Any

import bench_each
import each
import gitrepo
import record as records
import registry
import tables
import tree
from benchparse import Run
from common import TREE, StageError, rel, say, warn

STEP = "attribution"
KIND = "per-patch"
# Kernel code: .c and .h files under these folders, not the tests.
KERNEL_DIRS = ("mm/", "net/", "include/", "lib/")
KERNEL_SUFFIXES = (".c", ".h")
TEST_FILES = ("lib/slab_bulk_", "net/core/skb_list_test.c")
# The rows whose change each patch's row shows: (test, variant, N).
KEY_ROWS = (("a", "bulk", 8), ("a", "bulk", 64), ("a", "bulk", 1024),
            ("b", "bulk", 32), ("c", "random_bulk", 64),
            ("d", "kfree_bulk", 64), ("a", "single", 1),
            ("g", "head_list", 64))
# The tests whose rows the best and worst change are taken over.
GAIN_TESTS = "abcdeg"
# What a patch costs beyond instructions: measured per series only, by
# these commands.
COSTS = (
    ("cache misses", "./bulk bench --costs (bench/bench-ALLOCS-costs)"),
    ("locked operations", "./bulk bench --costs (bench/bench-ALLOCS-costs)"),
    ("IRQ-off windows and lock holds", "./bulk bench --costs per row, "
     "./bulk holds on 2 and 4 CPUs (bench/holds-*)"),
    ("stack", "./bulk stack (bench/stack: frames of the functions the "
     "series touches, base vs series), ./bulk stack --live "
     "(bench/stack-live)"),
)
NOT_MEASURED = "not measured per patch"
# A key-row change not above its test's noise floor.
NOISE_MARK = "°"


# -- lines --------------------------------------------------------------

def kernel_file(path: str) -> bool:
    """Is @path kernel code whose lines are counted?"""
    return path.startswith(KERNEL_DIRS) and path.endswith(KERNEL_SUFFIXES) \
        and not path.startswith(TEST_FILES)


# A line that goes on a /* */ block opened before it ("* text", "*", "*/"),
# where the opening line is not in sight (before a hunk's first line).
CONTINUATION = re.compile(r"\*(\s|/|$)")


def still_open(text: str, inside: bool) -> bool:
    """Whether a /* */ block is open at the end of @text, one being open
    at its start when @inside (string and character literals and //
    comments are skipped)."""
    i, n = 0, len(text)
    while i < n:
        if inside:
            j = text.find("*/", i)
            if j < 0:
                return True
            inside, i = False, j + 2
        elif text.startswith("//", i):
            return False
        elif text.startswith("/*", i):
            inside, i = True, i + 2
        elif text[i] in "\"'":
            quote, i = text[i], i + 1
            while i < n and text[i] != quote:
                i += 2 if text[i] == "\\" else 1
            i += 1
        else:
            i += 1
    return inside


def classify(text: str, inside: bool) -> tuple[str, bool]:
    """A line of C: 'comment' when it is inside a /* */ block (@inside:
    one is open before it) or starts one, or starts with //; 'blank' when
    empty outside a comment; else 'code'.  With it, whether a block is
    open after it.  A line such as ' * text' or ' */' counts as inside a
    block whose opening line is out of sight (a hunk's context starts in
    the middle of a comment)."""
    s = text.strip()
    if not inside and CONTINUATION.match(s):
        inside = True
    if inside or s.startswith(("/*", "//")):
        kind = "comment"
    elif not s:
        kind = "blank"
    else:
        kind = "code"
    return kind, still_open(text, inside)


@dataclasses.dataclass
class Lines:
    """Lines added and deleted, by kind, and the files counted."""
    added: dict[str, int] = dataclasses.field(
        default_factory=lambda: {"code": 0, "comment": 0, "blank": 0})
    deleted: dict[str, int] = dataclasses.field(
        default_factory=lambda: {"code": 0, "comment": 0, "blank": 0})
    files: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"added": dict(self.added), "deleted": dict(self.deleted),
                "files": list(self.files)}


HUNK = re.compile(r"@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def count_lines(diff: str) -> Lines:
    """The kernel code lines (kernel_file()) a diff (git show --format=
    --no-renames) adds and deletes, each classified in its own file's
    version: a deleted line against the old file's /* */ blocks, an added
    one against the new file's (context lines go on both)."""
    out = Lines()
    path: str | None = None
    header = False
    old = new = False
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            path, header = None, True
            continue
        if header:
            if line.startswith("--- ") or line.startswith("+++ "):
                name = line[4:].strip()
                if name != "/dev/null" and (path is None
                                            or line.startswith("+++ ")):
                    path = name[2:] if name[:2] in ("a/", "b/") else name
                continue
            if not HUNK.match(line):
                continue
            header = False
        if HUNK.match(line):
            old = new = False
            continue
        if path is None or not kernel_file(path) or not line \
                or line[0] not in " +-":
            continue
        text = line[1:]
        if line[0] == " ":
            old = classify(text, old)[1]
            new = classify(text, new)[1]
            continue
        if path not in out.files:
            out.files.append(path)
        if line[0] == "-":
            kind, old = classify(text, old)
            out.deleted[kind] += 1
        else:
            kind, new = classify(text, new)
            out.added[kind] += 1
    return out


def numstat(text: str) -> tuple[int, int]:
    """The kernel code lines added and deleted, from git show --numstat
    (binary files, '-', count none)."""
    added = deleted = 0
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and kernel_file(parts[2]) and \
                parts[0].isdigit() and parts[1].isdigit():
            added += int(parts[0])
            deleted += int(parts[1])
    return added, deleted


def patch_lines(commit: str) -> Lines:
    """count_lines() of a commit of build/linux, checked against git's
    own count (--numstat)."""
    args = ("show", "--format=", "--no-renames", "--no-color",
            "--no-ext-diff", "--no-textconv")
    got = count_lines(gitrepo.git(TREE, STEP, *args, commit))
    want = numstat(gitrepo.git(TREE, STEP, *args, "--numstat", commit))
    if (sum(got.added.values()), sum(got.deleted.values())) != want:
        raise StageError(STEP, "commit %s: counted +%d -%d kernel lines, git "
                         "--numstat says +%d -%d" % (
                             commit[:12], sum(got.added.values()),
                             sum(got.deleted.values()), *want))
    return got


# -- gain ---------------------------------------------------------------

def spec_of(test: str, variant: str) -> tables.Spec:
    """The exact-mode table with that test's variant (bulk or loop)."""
    for s in bench_each.specs(GAIN_TESTS):
        if s.test == test and variant in (s.bulk, s.loop):
            return s
    raise ValueError("no exact-mode table has test %s variant %s"
                     % (test, variant))


# A row's figure in the column before and in the patch's column: the
# per-patch benchmark's own Move.
Change = bench_each.Move


def change_at(c: Change) -> str:
    return "%s %s %s=%d" % (c.test, c.variant, c.key_name, c.key)


def change_json(c: Change) -> dict[str, Any]:
    return {"test": c.test, "variant": c.variant, c.key_name: c.key,
            "before": c.before, "after": c.after, "change": c.change}


def key_change(prev: Run, cur: Run, test: str, variant: str,
               key: int) -> Change | None:
    """The key row's change (None: a column lacks it, or it is 0)."""
    spec = spec_of(test, variant)
    a = bench_each.values(prev, spec, variant).get(key)
    b = bench_each.values(cur, spec, variant).get(key)
    if not a or b is None:
        return None
    return Change(test, spec.title, variant, spec.key, key, a, b)


def extremes(prev: Run, cur: Run,
             tests: str) -> tuple[Change | None, Change | None]:
    """The best (lowest: fewest instructions) and the worst change over
    every row, bulk call and loop, of @tests in both columns."""
    ms = bench_each.moves(prev, cur, tests, threshold=-1)
    if not ms:
        return None, None
    return (min(ms, key=lambda c: c.change), max(ms, key=lambda c: c.change))


def above_noise(c: Change, floors: dict[str, float] | None) -> bool | None:
    """Is the change larger than the noise floor of its test?  (None: no
    floor known for it.)"""
    if floors is None or c.test not in floors:
        return None
    return abs(c.change) > floors[c.test]


def pct(c: Change | None, floors: dict[str, float] | None) -> str:
    """A change in percent, marked when not above its test's floor."""
    if c is None:
        return "-"
    return "%+.2f%%%s" % (100 * c.change, NOISE_MARK
                          if above_noise(c, floors) is False else "")


# -- the records read ---------------------------------------------------

def tree_of(commit: str) -> str | None:
    """The source tree of a commit of build/linux (None: not there)."""
    try:
        return gitrepo.git(TREE, STEP, "rev-parse", "-q", "--verify",
                           commit + "^{tree}").strip() or None
    except StageError:
        return None


def mismatch(saved: bench_each.Saved, patches: list[bench_each.Patch],
             trees: dict[str, str]) -> str | None:
    """Why a bench-each record is not of this series (None: it is).  Its
    column pN must be patch N by subject, and by source tree where its
    commit is still in build/linux (a series applied again has new commit
    ids, the same trees).  @trees: each patch's tree, by commit."""
    for c in saved.cols[1:]:
        if not re.fullmatch(r"p\d+", c.label):
            return "column '%s' is not a patch" % c.label
        n = int(c.label[1:])
        if n > len(patches):
            return "column %s: the series has %d patches" % (c.label,
                                                               len(patches))
        p = patches[n - 1]
        if c.subject != p.subject:
            return "column %s is '%s', patch %d is '%s'" % (
                c.label, c.subject, n, p.subject)
        was = tree_of(c.commit)
        if was is not None and was != trees[p.commit]:
            return "column %s was measured on another version of patch %d " \
                "(commit %s)" % (c.label, n, c.commit[:12])
    return None


def bench_record(alloc: str, patches: list[bench_each.Patch],
                 trees: dict[str, str]) -> tuple[str, bench_each.Saved]:
    """bench-each-ALLOC.json of this series: the committed record, else
    the scratch copy (as bench_each.load() reads them); a record of
    another series is passed over, saying why."""
    name = bench_each.out_name(alloc) + ".json"
    paths = [records.committed(bench_each.KIND, name),
             os.path.join(records.SCRATCH, bench_each.KIND, name)]
    why = []
    for path in paths:
        if not os.path.exists(path):
            continue
        saved = bench_each.read(path)
        bad = mismatch(saved, patches, trees)
        if bad is None:
            print("%s: reading %s" % (STEP, rel(path)), file=sys.stderr)
            return path, saved
        why.append("%s: %s" % (rel(path), bad))
        warn("%s: %s is not of this series (%s)" % (STEP, rel(path), bad))
    raise StageError(STEP, "no bench-each record of this series%s: run "
                     "./bulk bench-each --alloc %s" % (
                         " (%s)" % "; ".join(why) if why else "", alloc))


@dataclasses.dataclass
class Noise:
    path: str
    floors: dict[str, float]
    tip: str
    stamp: records.Stamp | None


def noise_floors(obj: dict[str, Any]) -> dict[str, float]:
    """Per test letter, the largest change of any variant on its rows
    (noise-ALLOC.json's 'summary', harness/noise.py)."""
    return {str(s["test"]): float(s["largest"]) for s in obj["summary"]}


def noise_record(alloc: str) -> Noise | None:
    """noise-ALLOC.json (committed first, else scratch), if there is one."""
    path = records.find("experiments", "noise-%s.json" % alloc)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        try:
            d = json.load(f)
            return Noise(path, noise_floors(d), str(d.get("tip", "")),
                         records.Stamp.from_json(d.get("stamp")))
        except (ValueError, KeyError, TypeError) as e:
            raise StageError(STEP, "%s does not parse: %s" % (
                rel(path), e)) from None


# -- rows ---------------------------------------------------------------

@dataclasses.dataclass
class Row:
    patch: bench_each.Patch
    lines: Lines
    # The column the patch's changes are in and the one before it (None:
    # none); own: the changes shown are that column's (a patch before the
    # benchmark module has none: its changes are in the first patch
    # column, shown on that patch's row); together: the patches measured
    # with it in that column.
    column: str | None
    against: str | None
    own: bool
    together: list[int]
    keys: list[Change | None]
    best: Change | None
    worst: Change | None

    def measured(self) -> str:
        if self.column is None:
            return "no column"
        if not self.own:
            return "in %s vs %s" % (self.column, self.against)
        if not self.together:
            return "%s vs %s" % (self.column, self.against)
        return "%s vs %s, with patch%s %s" % (
            self.column, self.against, "es" if len(self.together) > 1 else "",
            span(self.together))

    def to_json(self, floors: dict[str, float] | None) -> dict[str, Any]:
        def change(c: Change | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return dict(change_json(c), noise_floor=None if floors is None
                        else floors.get(c.test),
                        above_noise=above_noise(c, floors))
        return {"number": self.patch.number, "commit": self.patch.commit,
                "subject": self.patch.subject,
                "lines": self.lines.to_json(), "column": self.column,
                "against": self.against, "own_column": self.own,
                "together_with": self.together,
                "key_rows": [change(c) for c in self.keys],
                "best": change(self.best), "worst": change(self.worst)}


def span(ns: list[int]) -> str:
    """1, 2, 3 -> '1 to 3'; 5 -> '5'."""
    if len(ns) > 2 and ns == list(range(ns[0], ns[-1] + 1)):
        return "%d to %d" % (ns[0], ns[-1])
    return ", ".join(str(n) for n in ns)


def build_rows(alloc: str, patches: list[bench_each.Patch],
               lines: dict[int, Lines], saved: bench_each.Saved) -> list[Row]:
    """A row per patch that can change @alloc's kernel.  A patch gets the
    change of its own column against the column before it; the patches
    before the benchmark module (saved.before) have no column of their
    own: their changes are in the first patch column's, against base,
    which the row of that patch shows."""
    labels = [c.label for c in saved.cols]
    tests = "".join(t for t in GAIN_TESTS if t in saved.tests)
    early = list(range(1, len(saved.before) + 1))
    out = []
    for p in patches:
        if not bench_each.moves_kernel(alloc, list(p.files)):
            continue
        label = "p%d" % p.number
        keys: list[Change | None] = [None] * len(KEY_ROWS)
        best = worst = None
        if p.number in early and len(labels) > 1:
            out.append(Row(p, lines[p.number], labels[1], labels[0], False,
                           [n for n in early + [int(labels[1][1:])]
                            if n != p.number], keys, best, worst))
            continue
        if label not in labels or labels.index(label) == 0:
            out.append(Row(p, lines[p.number], None, None, False, [], keys,
                           best, worst))
            continue
        i = labels.index(label)
        prev, cur = saved.cols[i - 1].run, saved.cols[i].run
        keys = [key_change(prev, cur, *k) for k in KEY_ROWS]
        best, worst = extremes(prev, cur, tests)
        out.append(Row(p, lines[p.number], label, labels[i - 1], True,
                       early if i == 1 else [], keys, best, worst))
    return out


# -- the record ---------------------------------------------------------

def where(c: Change | None) -> str:
    """Where a best or worst change is ('-': none, or no row moved)."""
    return "-" if c is None or c.change == 0 else change_at(c)


def stamp_line(st: records.Stamp | None) -> str:
    return "no stamp" if st is None else "recorded %s at `%s`, `%s`" % (
        st.date, st.commit, st.command)


def markdown(alloc: str, command: str, rows: list[Row], bench_path: str,
             saved: bench_each.Saved, noise: Noise | None,
             noise_tip: str) -> str:
    floors = noise.floors if noise else None
    heads = ["%s/%s %d" % k for k in KEY_ROWS]
    out = ["# Attribution per patch (%s)" % alloc.upper(), "",
           "Command: `%s`" % command, "",
           "Per patch of the series that can change %s's benchmark kernel "
           "(`./bulk bench-each`'s rule: not only documentation, test suites "
           "or another allocator's files), the lines it adds and deletes in "
           "kernel code against the change its benchmark column shows over "
           "the column before it." % alloc.upper(), "",
           "- **Lines**: `.c` and `.h` files under `mm/`, `net/`, "
           "`include/` and `lib/`, not the tests `lib/slab_bulk_*` and "
           "`net/core/skb_list_test.c`, from `git show` of the patch's "
           "commit in build/linux (base..HEAD). A line is a comment when "
           "it is inside a `/* */` block or starts one, or starts with "
           "`//`; blank lines are in neither (the .json has them). "
           "*+a/−d*: added/deleted.",
           "- **Gain**: from `%s` (%s): raw instructions per object in exact "
           "mode; change = the patch's column / the column before it − 1, "
           "negative is fewer instructions. Key rows: test/variant N (%s); "
           "*best* and *worst*: the lowest and highest change over every "
           "row, bulk call and loop, of tests %s. A patch before the "
           "benchmark module has no column of its own: its change is in "
           "the first patch column's, against base, on that patch's row." % (
               rel(bench_path), stamp_line(saved.stamp), ", ".join(heads),
               ", ".join(t for t in GAIN_TESTS if t in saved.tests))]
    if noise is None:
        out.append("- **Noise floor**: no noise-%s.json (`./bulk noise "
                   "--alloc %s --record`): the changes are not marked." % (
                       alloc, alloc))
    else:
        out.append(
            "- **Noise floor**: from `%s` (%s; its tip `%s`, %s): per test, "
            "the largest change that layout alone (code, data, heap "
            "placement) put on any of its rows: %s. A key-row, best or "
            "worst change marked %s is not above its test's floor." % (
                rel(noise.path), stamp_line(noise.stamp), noise.tip[:12],
                noise_tip, ", ".join("%s %.2f%%" % (t, 100 * f)
                                     for t, f in sorted(noise.floors.items())),
                NOISE_MARK))
    out.append("- **Costs**: %s, %s (per series: see the section below)."
               % (", ".join(c for c, _ in COSTS), NOT_MEASURED))
    out += ["", "## Lines and gain", "",
            "| patch | code +/− | comments +/− | measured | %s | best | "
            "worst |" % " | ".join(heads),
            "|---:|---:|---:|---|%s---:|---:|" % ("---:|" * len(heads))]
    if floors is not None:
        out.append("| noise floor | | | | %s | | |" % " | ".join(
            "±%.2f%%" % (100 * floors[t]) if t in floors else "-"
            for t, _, _ in KEY_ROWS))
    for r in rows:
        a, d = r.lines.added, r.lines.deleted
        if not r.own:
            gains = [""] * (len(heads) + 2)
        else:
            gains = [pct(c, floors) for c in r.keys] + [
                pct(r.best, floors), pct(r.worst, floors)]
        out.append("| %d | +%d/−%d | +%d/−%d | %s | %s |" % (
            r.patch.number, a["code"], d["code"], a["comment"],
            d["comment"], r.measured(), " | ".join(gains)))
    out += ["", "## The patches", "",
            "*best at*, *worst at*: the row of the best and the worst change "
            "(- when it is 0).", "",
            "| patch | subject | kernel files counted | best at | worst at |",
            "|---:|---|---|---|---|"]
    for r in rows:
        out.append("| %d | %s | %s | %s | %s |" % (
            r.patch.number, r.patch.subject.replace("|", "\\|"),
            ", ".join("`%s`" % f for f in r.lines.files) or "-",
            where(r.best), where(r.worst)))
    out += ["", "## Costs", "",
            "Not measured per patch; each is measured per series (base "
            "against the whole series) by:", ""]
    out += ["- %s: %s" % c for c in COSTS]
    return "\n".join(out)


def check_args(args: argparse.Namespace) -> None:
    if args.alloc not in registry.ALLOCATORS:
        raise StageError(STEP, "--alloc takes one of %s; got '%s'" % (
            ", ".join(registry.ALLOCATORS), args.alloc))


def main(args: argparse.Namespace) -> int:
    check_args(args)
    alloc = args.alloc
    if not tree.is_exported_series():
        warn("%s: build/linux is not the exported series (patches/): "
             "counting its base..HEAD" % STEP)
    patches = bench_each.patches_of_tree()
    if not patches:
        raise StageError(STEP, "build/linux has no patch over base")
    trees = dict(zip([p.commit for p in patches], each.tree_ids(
        TREE, STEP, [p.commit for p in patches])))
    path, saved = bench_record(alloc, patches, trees)
    noise = noise_record(alloc)
    noise_tip = ""
    if noise is not None:
        was = tree_of(noise.tip) if noise.tip else None
        noise_tip = ("the series' tip now" if was == trees[patches[-1].commit]
                     else "not the series' tip now" if was
                     else "not in build/linux")
    lines = {p.number: patch_lines(p.commit) for p in patches
             if bench_each.moves_kernel(alloc, list(p.files))}
    rows = build_rows(alloc, patches, lines, saved)
    command = "./bulk attribution --alloc %s" % alloc
    floors = noise.floors if noise else None
    name = os.path.join(records.folder(KIND, args.record),
                        "attribution-%s" % alloc)
    records.publish(STEP, name, markdown(
        alloc, command, rows, path, saved, noise, noise_tip), {
            "alloc": alloc, "command": command,
            "bench_each": {"path": rel(path), "command": saved.command,
                           "stamp": saved.stamp.to_json()
                           if saved.stamp else None},
            "noise": None if noise is None else {
                "path": rel(noise.path), "tip": noise.tip,
                "tip_is": noise_tip, "floors": noise.floors,
                "stamp": noise.stamp.to_json() if noise.stamp else None},
            "kernel_files": {"dirs": list(KERNEL_DIRS),
                             "suffixes": list(KERNEL_SUFFIXES),
                             "excluded": list(TEST_FILES)},
            "key_rows": [{"test": t, "variant": v, "n": n}
                         for t, v, n in KEY_ROWS],
            "gain_tests": GAIN_TESTS,
            "patches": [r.to_json(floors) for r in rows],
            "costs": {c: {"per_patch": NOT_MEASURED, "per_series": where}
                      for c, where in COSTS}}, args.record)
    if args.record:
        say("%s: name per-patch/attribution-%s.md in results/README.md's "
            "per-patch table when you commit it" % (STEP, alloc))
    return 0
