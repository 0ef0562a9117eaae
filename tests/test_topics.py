"""Unit tests for ./bulk topics (harness/topics.py), stdlib unittest only:
patches/TOPICS parses, and a file that does not cut the series into
topics (a gap, an overlap, an unknown or later requirement, a missing
cover letter) is refused saying what is wrong; the configs a topic
builds; the order git am applies a topic's requirements in; the targets
(alone, and the prefix where it differs) and the steps planned for each
(builds, then the KUnit and stress boots where the target has the suites;
none for fixes, none with --builds-only); the status a failed boot gives
its topic; a run over a tiny tree applies each target, builds and boots
(both mocked) in order and records what it applied, built and found;
export and the patch list leave TOPICS alone.  Nothing builds or boots."""
import json
import os
import shutil
import unittest
from unittest import mock

import hermetic  # noqa: F401  (first: harness on sys.path, scratch build/)
import export
import gitrepo
import kunit
import steps
import stress
import topics
from common import COVER_FILE, PATCHES, TOPICS_ROOT, TREE, StageError, log_path
from hermetic import git

SERIES = """# name  patches  requires     title
fixes   1-3      -            fixes to the bulk API
tests   4-11     fixes        the benchmark and the contract suite

slub    12-15    fixes,tests  SLUB's bulk paths
slab    16-18    fixes,tests  SLAB's native bulk calls
slob    19       fixes,tests  SLOB's native bulk calls
net     20-21    tests        bulk kfree_skb_list()
"""
NAMES = ["fixes", "tests", "slub", "slab", "slob", "net"]
COVERS = [n + ".txt" for n in NAMES]


def problems(text, count=21, covers=COVERS):
    return topics.problems(topics.parse(text), count, covers)


class Parse(unittest.TestCase):
    def test_a_topics_file(self):
        ts = topics.parse(SERIES)
        self.assertEqual([t.name for t in ts], NAMES)
        self.assertEqual([(t.first, t.last) for t in ts],
                         [(1, 3), (4, 11), (12, 15), (16, 18), (19, 19), (20, 21)])
        self.assertEqual(ts[0].requires, ())
        self.assertEqual(ts[2].requires, ("fixes", "tests"))
        self.assertEqual(ts[2].title, "SLUB's bulk paths")
        self.assertEqual(ts[2].line, 5)
        self.assertEqual(problems(SERIES), [])

    def test_lines_that_are_not_topics_are_named(self):
        with self.assertRaises(StageError) as e:
            topics.parse("fixes 1-3 -\nTests 4-11 - t\nslub 12..15 - t\n"
                         "slab 18-16 - t\n")
        self.assertIn("4 line(s) are not topics", e.exception.msg)
        detail = e.exception.detail
        self.assertIn("line 1: 'fixes 1-3 -': want NAME FIRST-LAST REQUIRES "
                      "TITLE (REQUIRES '-' for none)", detail)
        self.assertIn("line 2: topic name 'Tests'", detail)
        self.assertIn("line 3: slub: '12..15' is no patch range", detail)
        self.assertIn("line 4: slab: range 18-16 is empty", detail)


class Validate(unittest.TestCase):
    def test_a_gap(self):
        self.assertEqual(problems(SERIES.replace("tests   4-11", "tests   6-11")),
                         ["patch(es) 4-5 in no topic (a gap before tests 6-11)"])
        self.assertEqual(problems(SERIES.replace("tests   4-11", "tests   5-11")),
                         ["patch(es) 4 in no topic (a gap before tests 5-11)"])

    def test_an_overlap(self):
        self.assertEqual(problems(SERIES.replace("tests   4-11", "tests   3-11")),
                         ["tests 3-11 overlaps the topic before it, which ends "
                          "at patch 3 (each patch in one topic, in order)"])

    def test_topics_out_of_order_overlap(self):
        text = "a 4-21 - t\nb 1-3 - t\n"
        self.assertEqual(problems(text, covers=["a.txt", "b.txt"]),
                         ["patch(es) 1-3 in no topic (a gap before a 4-21)",
                          "b 1-3 overlaps the topic before it, which ends at "
                          "patch 21 (each patch in one topic, in order)"])

    def test_the_end_of_the_series(self):
        self.assertEqual(problems(SERIES, count=23),
                         ["patch(es) 22-23 in no topic (after net, the last)"])
        self.assertEqual(problems(SERIES, count=20),
                         ["net 20-21 goes past the last patch, 20"])

    def test_an_unknown_requirement(self):
        self.assertEqual(problems(SERIES.replace("fixes,tests  SLAB", "fixes,test  SLAB")),
                         ["slab requires 'test', which is no topic (did you "
                          "mean 'tests'?)"])

    def test_a_later_or_own_requirement(self):
        self.assertEqual(problems(SERIES.replace("tests   4-11     fixes",
                                                 "tests   4-11     slub")),
                         ["tests requires slub, which comes after it (a topic "
                          "requires earlier topics only)"])
        self.assertEqual(problems(SERIES.replace("fixes   1-3      -",
                                                 "fixes   1-3      fixes")),
                         ["fixes requires itself"])

    def test_a_name_twice(self):
        self.assertEqual(problems(SERIES.replace("slob    19", "slab    19"),
                                  covers=[c for c in COVERS if c != "slob.txt"]),
                         ["slab is named twice (lines 6 and 7)"])

    def test_a_missing_cover_letter_and_a_stray_one(self):
        covers = [c for c in COVERS if c != "slab.txt"] + ["slab-old.txt"]
        self.assertEqual(problems(SERIES, covers=covers), [
            "slab has no cover letter: write %s (missing or empty)"
            % os.path.join(PATCHES, "topics", "slab.txt"),
            "%s is the cover letter of no topic"
            % os.path.join(PATCHES, "topics", "slab-old.txt")])

    def test_no_topics(self):
        self.assertEqual(problems("# nothing\n"),
                         ["no topics: each line NAME FIRST-LAST REQUIRES TITLE"])


class Files(unittest.TestCase):
    """load() over patches/ as the command reads it."""

    def setUp(self):
        shutil.rmtree(PATCHES, ignore_errors=True)
        os.makedirs(os.path.join(PATCHES, "topics"))
        self.addCleanup(shutil.rmtree, PATCHES, True)
        for n in range(22):
            open(os.path.join(PATCHES, "%04d-p.patch" % n), "w").close()
        for c in COVERS:
            with open(os.path.join(PATCHES, "topics", c), "w") as f:
                f.write("Subject\n\nBody.\n")

    def test_load(self):
        with open(topics.TOPICS, "w") as f:
            f.write(SERIES)
        patches = gitrepo.patch_files(PATCHES)
        self.assertEqual(len(patches), 21)
        self.assertEqual([t.name for t in topics.load(patches)], NAMES)

    def test_the_patch_list_ignores_topics(self):
        with open(topics.TOPICS, "w") as f:
            f.write(SERIES)
        self.assertEqual([os.path.basename(p) for p in gitrepo.patch_files(PATCHES)],
                         ["%04d-p.patch" % n for n in range(1, 22)])

    def test_no_topics_file(self):
        with self.assertRaisesRegex(StageError, "no .*TOPICS: one line per "
                                    "topic, NAME FIRST-LAST REQUIRES TITLE"):
            topics.load(gitrepo.patch_files(PATCHES))

    def test_an_empty_cover_letter_and_a_gap_are_both_said(self):
        with open(topics.TOPICS, "w") as f:
            f.write(SERIES.replace("slab    16-18", "slab    17-18"))
        open(os.path.join(PATCHES, "topics", "slob.txt"), "w").close()
        with self.assertRaises(StageError) as e:
            topics.load(gitrepo.patch_files(PATCHES))
        self.assertIn("does not cut the 21 patches of", e.exception.msg)
        self.assertIn("2 problem(s)", e.exception.msg)
        self.assertIn("patch(es) 16 in no topic", e.exception.detail)
        self.assertIn("slob has no cover letter", e.exception.detail)


class Configs(unittest.TestCase):
    def test_configs_of_paths(self):
        self.assertEqual(topics.configs(["mm/slab.c", "mm/slab.h", "mm/slub.c",
                                         "include/linux/slab.h"]),
                         ["slub", "slab", "slob"])
        self.assertEqual(topics.configs(["lib/slab_bulk_kunit.c", "lib/Makefile",
                                         "Documentation/core-api/slab-bulk.rst"]),
                         ["slub", "slab", "slob"])
        self.assertEqual(topics.configs(["mm/slub.c"]), ["slub"])
        self.assertEqual(topics.configs(["mm/slab.c"]), ["slab"])
        self.assertEqual(topics.configs(["mm/slob.c"]), ["slob"])
        self.assertEqual(topics.configs(["lib/slub_kunit.c"]), ["slub"])
        # mm/slab.h is compiled by all three, each its own way.
        self.assertEqual(topics.configs(["mm/slub.c", "mm/slab.h"]),
                         ["slub", "slab", "slob"])
        # net/ compiles the same on each allocator: one build.
        self.assertEqual(topics.configs(["net/core/skbuff.c", "net/Kconfig",
                                         "include/linux/skbuff.h", "MAINTAINERS"]),
                         ["slub"])
        self.assertEqual(topics.configs(["Documentation/x.rst", "MAINTAINERS"]), [])

    def test_a_topic_of_documentation_builds_once(self):
        t = topics.Topic("docs", 1, 1, (), "t")
        with mock.patch("gitrepo.patch_paths", return_value=["Documentation/x.rst"]):
            self.assertEqual(topics.topic_configs(t, ["0001-x.patch"]), ["slub"])


class Order(unittest.TestCase):
    def setUp(self):
        self.topics = topics.parse(SERIES)
        self.patches = ["%04d.patch" % n for n in range(1, 22)]

    def names(self, name):
        return [t.name for t in topics.needs(self.topics, name)]

    def test_a_topic_with_requirements_applies_them_first_in_order(self):
        self.assertEqual(self.names("fixes"), ["fixes"])
        self.assertEqual(self.names("slab"), ["fixes", "tests", "slab"])
        alone = {t.topic.name: t for t in topics.targets(self.topics)
                 if t.kind == topics.ALONE}
        self.assertEqual(alone["slab"].files(self.patches),
                         ["%04d.patch" % n for n in list(range(1, 12)) + [16, 17, 18]])
        self.assertEqual(alone["slob"].describe(),
                         "fixes 1-3, tests 4-11, slob 19")

    def test_requirements_are_transitive_and_in_the_order_of_topics(self):
        # net names tests only; tests requires fixes.
        self.assertEqual(self.names("net"), ["fixes", "tests", "net"])
        ts = topics.parse(SERIES.replace("fixes,tests  SLUB", "tests,fixes  SLUB"))
        self.assertEqual([t.name for t in topics.needs(ts, "slub")],
                         ["fixes", "tests", "slub"])

    def test_siblings_stay_out(self):
        for name in ("slub", "slab", "slob", "net"):
            others = {"slub", "slab", "slob", "net"} - {name}
            self.assertFalse(others & set(self.names(name)), name)


# The files each patch of the series (v3, 21 patches) changes, as
# gitrepo.patch_paths() reads them: patch 5 adds the contract suite, 8 the
# stress suite, 20 skb_list_test.
SERIES_PATHS = {
    1: ["mm/slab.c", "mm/slab.h", "mm/slub.c"],
    2: ["mm/slub.c"],
    3: ["include/linux/slab.h", "mm/slab.c", "mm/slub.c"],
    4: ["MAINTAINERS", "lib/Kconfig.debug", "lib/Makefile", "lib/slab_bulk_bench.c"],
    5: ["Documentation/core-api/index.rst", "Documentation/core-api/slab-bulk.rst",
        "MAINTAINERS", "lib/Kconfig.debug", "lib/Makefile", "lib/slab_bulk_kunit.c",
        "tools/testing/kunit/configs/slab_bulk.config"],
    6: ["Documentation/core-api/slab-bulk.rst"],
    7: ["MAINTAINERS", "lib/slab_bulk_kunit.c", "lib/slab_bulk_test.h"],
    8: ["Documentation/core-api/slab-bulk.rst", "MAINTAINERS", "lib/Kconfig.debug",
        "lib/Makefile", "lib/slab_bulk_stress.c"],
    9: ["Documentation/core-api/slab-bulk.rst", "lib/slab_bulk_kunit.c"],
    10: ["Documentation/core-api/slab-bulk.rst", "lib/slab_bulk_kunit.c"],
    11: ["Documentation/core-api/slab-bulk.rst", "lib/slab_bulk_kunit.c"],
    12: ["mm/slub.c"], 13: ["mm/slub.c"], 14: ["mm/slub.c"], 15: ["mm/slab.h"],
    16: ["mm/slab.c"], 17: ["mm/slab.c"], 18: ["mm/slab.c"],
    19: ["mm/slab.h", "mm/slob.c"],
    20: ["MAINTAINERS", "net/Kconfig", "net/core/Makefile", "net/core/skb_list_test.c"],
    21: ["Documentation/core-api/slab-bulk.rst", "include/linux/skbuff.h",
          "net/core/skbuff.c"],
}
# patches/TOPICS as it is: net requires fixes and tests.
CURRENT = SERIES.replace("net     20-21    tests ", "net     20-21    fixes,tests ")
BOOTS = ["kunit slub", "stress slub", "kunit slab", "stress slab",
         "kunit slob", "stress slob"]
BUILDS = ["build slub", "build slab", "build slob"]
# The planned steps for CURRENT, after 'LABEL: '.
PLANNED = {
    "fixes": ["apply"] + BUILDS,
    "tests": ["apply"] + BUILDS + BOOTS,
    "slub": ["apply"] + BUILDS + BOOTS,
    "slab": ["apply", "build slab", "kunit slab", "stress slab"],
    "slab prefix": ["apply", "build slab", "kunit slab", "stress slab"],
    "slob": ["apply"] + BUILDS + BOOTS,
    "slob prefix": ["apply"] + BUILDS + BOOTS,
    "net": ["apply", "build slub", "kunit slub", "stress slub"],
    "net prefix": ["apply", "build slub", "kunit slub", "stress slub"],
}


def series_paths(patch):
    return SERIES_PATHS[int(os.path.basename(patch)[:4])]


class SeriesShape(unittest.TestCase):
    """The series' topics and patch names, gitrepo.patch_paths() mocked
    with the series' files: no tree, nothing runs."""

    def setUp(self):
        self.topics = topics.parse(CURRENT)
        self.patches = ["%04d-p.patch" % n for n in range(1, 22)]
        patch = mock.patch("gitrepo.patch_paths", series_paths)
        patch.start()
        self.addCleanup(patch.stop)


class Plan(SeriesShape):
    """targets() and plan() for the series' shape."""

    def plan(self, builds_only=False, state=None):
        return topics.plan(self.topics, self.patches, state or topics.State(),
                           builds_only)

    def test_a_prefix_only_where_it_differs_from_alone(self):
        ts = topics.targets(self.topics)
        self.assertEqual([t.label() for t in ts], list(PLANNED))
        by = {t.label(): t for t in ts}
        self.assertEqual(by["slab"].describe(), "fixes 1-3, tests 4-11, slab 16-18")
        self.assertEqual(by["slab prefix"].describe(),
                         "fixes 1-3, tests 4-11, slub 12-15, slab 16-18")
        self.assertEqual(by["net prefix"].describe(),
                         "fixes 1-3, tests 4-11, slub 12-15, slab 16-18, "
                         "slob 19, net 20-21")
        self.assertEqual(by["slob prefix"].files(self.patches),
                         self.patches[:19])
        self.assertEqual((by["slub"].kind, by["slab prefix"].kind),
                         (topics.ALONE, topics.PREFIX))
        self.assertEqual(by["slab prefix"].log_name(), "slab.prefix")
        # The test file's own TOPICS (net requires tests only): the same.
        self.assertEqual([t.label() for t in topics.targets(topics.parse(SERIES))],
                         list(PLANNED))

    def test_a_series_whose_topics_require_all_before_has_no_prefix(self):
        ts = topics.parse("a 1 - a\nb 2 a b\nc 3 a,b c\n")
        self.assertEqual([t.label() for t in topics.targets(ts)], ["a", "b", "c"])

    def test_the_steps_of_each_target_in_order(self):
        todo = self.plan()
        self.assertEqual([s.name for s in todo],
                         ["%s: %s" % (label, n) for label, names in PLANNED.items()
                          for n in names])
        self.assertEqual({s.group for s in todo}, {"topics"})
        self.assertEqual(len(todo), 9 + 19 + 16 + 16)

    def test_fixes_is_built_only(self):
        fixes = topics.targets(self.topics)[0]
        self.assertEqual(topics.suites_of(fixes, self.patches), [])
        self.assertEqual(topics.planned(fixes, self.patches),
                         ["apply", "build slub", "build slab", "build slob"])
        self.assertNotIn("fixes", {s.name.split(":")[0] for s in self.plan()
                                   if ": kunit " in s.name or ": stress " in s.name})

    def test_the_stress_suite_boots_only_where_the_patches_add_it(self):
        # A series whose tests topic stops before patch 8: KUnit, no stress.
        ts = topics.parse("fixes 1-3 - f\ntests 4-7 fixes t\n")
        tests = topics.targets(ts)[1]
        self.assertEqual(topics.suites_of(tests, self.patches), ["kunit"])
        self.assertEqual(topics.planned(tests, self.patches),
                         ["apply"] + BUILDS + ["kunit slub", "kunit slab", "kunit slob"])

    def test_builds_only_plans_no_boots(self):
        todo = self.plan(builds_only=True)
        self.assertEqual([s.name for s in todo],
                         ["%s: %s" % (label, n) for label, names in PLANNED.items()
                          for n in names if n.split()[0] in ("apply", "build")])
        self.assertFalse([s for s in todo if ": kunit " in s.name or ": stress " in s.name])

    def test_each_step_calls_its_function_on_its_target_and_config(self):
        state = topics.State()
        todo = {s.name: s.fn for s in self.plan(state=state)}
        fn = todo["slab prefix: kunit slab"]
        self.assertIs(fn.func, topics.kunit_step)
        target, config, st = fn.args
        self.assertEqual((target.label(), config), ("slab prefix", "slab"))
        self.assertIs(st, state)
        self.assertIs(todo["net: stress slub"].func, topics.stress_step)
        self.assertIs(todo["slob prefix: build slob"].func, topics.build)
        self.assertIs(todo["slob prefix: apply"].func, topics.apply)

    def test_the_stress_run_of_each_allocator(self):
        for config, append in (("slub", stress.CGROUP), ("slab", stress.CGROUP),
                               ("slob", "")):
            r = topics.stress_run(config)
            self.assertEqual((r.config, r.mode, r.append, r.faults),
                             (config, "smp", append, False), config)


def result(name, status="PASS", detail=""):
    return steps.StepResult("topics", name, status, detail, 1.0)


class Summary(SeriesShape):
    """summarize() and markdown() over step results made up here."""

    def setUp(self):
        super().setUp()
        self.state = topics.State()
        for label, names in PLANNED.items():
            for n in names:
                what, _, config = n.partition(" ")
                if what == "kunit":
                    self.state.kunit[(label, config)] = {
                        "slab_bulk_kunit": {"passed": 40, "skipped": 2, "failed": []}}
                elif what == "stress":
                    self.state.stress[(label, config)] = {
                        "run": "%s smp" % config, "ok": True, "summary": "20 s: ...",
                        "problems": []}
        self.results = [result("%s: %s" % (label, n))
                        for label, names in PLANNED.items() for n in names]

    def summarize(self, results, builds_only=False):
        return {t["name"]: t for t in topics.summarize(
            self.topics, self.patches, results, self.state, builds_only)}

    def test_all_passed(self):
        got = self.summarize(self.results)
        self.assertEqual({t["status"] for t in got.values()}, {"PASS"})
        slab = got["slab"]
        self.assertEqual([r["target"] for r in slab["targets"]], ["alone", "prefix"])
        self.assertEqual(slab["prefix"], "fixes 1-3, tests 4-11, slub 12-15, slab 16-18")
        self.assertEqual(got["slub"]["prefix"], "= alone")
        self.assertEqual(slab["targets"][1]["per_config"], [{
            "config": "slab", "built": True,
            "kunit": {"slab_bulk_kunit": {"passed": 40, "skipped": 2, "failed": []}},
            "kunit_status": "PASS",
            "stress": {"run": "slab smp", "ok": True, "summary": "20 s: ...",
                       "problems": []},
            "stress_status": "PASS", "status": "PASS"}])
        fixes = got["fixes"]["targets"][0]
        self.assertEqual(fixes["suites"], [])
        self.assertIn("built only", fixes["runs"])
        self.assertEqual([c["kunit_status"] for c in fixes["per_config"]], [None] * 3)

    def test_a_failed_kunit_step_fails_its_target_and_topic(self):
        results = [result(r.name, "FAIL", "[topics] kunit slab exact on slab prefix")
                   if r.name == "slab prefix: kunit slab" else r for r in self.results]
        got = self.summarize(results)
        slab = got["slab"]
        self.assertEqual(slab["status"], "FAIL")
        self.assertEqual([r["status"] for r in slab["targets"]], ["PASS", "FAIL"])
        c = slab["targets"][1]["per_config"][0]
        self.assertEqual((c["built"], c["kunit_status"], c["stress_status"], c["status"]),
                         (True, "FAIL", "PASS", "FAIL"))
        self.assertEqual([t for t, v in got.items() if v["status"] != "PASS"], ["slab"])

    def test_a_planned_step_that_did_not_run_fails(self):
        results = [r for r in self.results if r.name != "net prefix: stress slub"]
        got = self.summarize(results)
        self.assertEqual(got["net"]["status"], "FAIL")
        step = got["net"]["steps"][-1]
        self.assertEqual((step["name"], step["status"]),
                         ("net prefix: stress slub", "NOT RUN"))

    def test_a_skipped_boot_fails_its_topic(self):
        results = [result(r.name, "SKIP", "not booted") if r.name == "tests: kunit slob"
                   else r for r in self.results]
        got = self.summarize(results)
        self.assertEqual(got["tests"]["status"], "FAIL")
        self.assertEqual(got["tests"]["targets"][0]["per_config"][2]["status"], "SKIP")

    def test_builds_only(self):
        results = [r for r in self.results
                   if r.name.split(": ")[1].split()[0] in ("apply", "build")]
        got = self.summarize(results, builds_only=True)
        self.assertEqual({t["status"] for t in got.values()}, {"PASS"})
        self.assertEqual(got["tests"]["targets"][0]["runs"], "built only (--builds-only)")

    def test_the_markdown_says_what_ran(self):
        per = topics.summarize(self.topics, self.patches, self.results, self.state)
        rec = {"command": "./bulk topics", "date": "d", "seconds": 1,
               "compiler": "gcc", "topics": per, "passed": 6, "failed": 0}
        md = topics.markdown(rec)
        self.assertIn("one boot in exact mode (one CPU) loading every KUnit module", md)
        self.assertIn("stress suite (`slab_bulk_stress`) for one round of 15 s", md)
        self.assertIn("| fixes | 1-3 | - | alone | fixes 1-3 (3 patches) | slub, slab, "
                      "slob | not run | not run | PASS |\n"
                      "|  |  |  | prefix | = alone (the same patches, not run twice) "
                      "| - | - | - | - |\n", md)
        self.assertIn("- prefix = alone: the same patches, not run twice.", md)
        self.assertIn("| slab | 16-18 | fixes, tests | alone | fixes 1-3, tests 4-11, "
                      "slab 16-18 (14 patches) | slab | 1 of 1 passed | 1 of 1 passed "
                      "| PASS |", md)
        self.assertIn("|  |  |  | prefix | fixes 1-3, tests 4-11, slub 12-15, slab 16-18 "
                      "(18 patches) | slab | 1 of 1 passed | 1 of 1 passed | PASS |", md)
        self.assertIn("- alone: applies fixes 1-3; builds slub, slab, slob; boots: "
                      "built only: its patches add no contract suite", md)
        self.assertIn("| prefix | slab | yes | slab_bulk_kunit 40/2/0 | slab smp: pass, "
                      "20 s: ... | PASS |", md)
        rec["builds_only"] = True
        self.assertIn("`--builds-only`: nothing was booted", topics.markdown(rec))


def commit(path, text, subject, more=None):
    for p, t in [(path, text)] + sorted((more or {}).items()):
        full = os.path.join(TREE, p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(t)
    git(TREE, "add", "-A")
    git(TREE, "commit", "-q", "-m", subject)


TOPICS_SRC = os.path.join(TOPICS_ROOT, "linux")


class Run(unittest.TestCase):
    """main() over a tiny tree: four real patches, git am for real in
    build/topics/linux; the kernel builds and the boots (kunit.run,
    stress.run) mocked, each call noted in self.events in order."""

    def setUp(self):
        self.roots = hermetic.record_roots(self)
        shutil.rmtree(PATCHES, ignore_errors=True)
        shutil.rmtree(TOPICS_ROOT, ignore_errors=True)
        self.addCleanup(shutil.rmtree, PATCHES, True)
        self.addCleanup(shutil.rmtree, TOPICS_ROOT, True)
        hermetic.make_repo(TREE)
        commit("mm/slab.h", "fixed\n", "mm/slab: a fix")
        commit("lib/slab_bulk_kunit.c", "cases\n", "mm/slab: the suites",
               {"lib/slab_bulk_stress.c": "threads\n"})
        commit("mm/slab.h", "fixed\nand faster\n", "mm/slub: faster")
        commit("net/core/skbuff.c", "bulk\n", "net: bulk")
        git(TREE, "format-patch", "-q", "-o", PATCHES, "base..HEAD")
        os.makedirs(os.path.join(PATCHES, "topics"))
        for name in ("fixes", "tests", "slub", "net"):
            with open(os.path.join(PATCHES, "topics", name + ".txt"), "w") as f:
                f.write("%s\n\nWhat it does.\n" % name)
        self.built = []
        self.events = []
        self.kunit_fails = set()

    def write(self, text):
        with open(topics.TOPICS, "w") as f:
            f.write(text)

    def tree_files(self):
        return sorted(git(TOPICS_SRC, "ls-files").split())

    def build(self, config, tree_name, label=None):
        self.assertEqual(tree_name, "topics")
        target = label.rsplit(" ", 1)[0]
        self.built.append((target, config, self.tree_files()))
        self.events.append(("build", target, config))
        with open(log_path("build-topics-%s.log" % config), "w") as f:
            f.write("built %s\n" % label)
        return ""

    def expected_modules(self, config, tree):
        self.assertEqual(tree, "topics")
        if not os.path.exists(os.path.join(TOPICS_SRC, "lib", "slab_bulk_kunit.c")):
            return ["slub_kunit"] if config == "slub" else []
        return (["slub_kunit"] if config == "slub" else []) + ["slab_bulk_kunit"]

    def kunit_run(self, r, tree):
        self.assertEqual((r.mode, r.append, tree), ("exact", "", "topics"))
        self.events.append(("kunit", self.tree_files(), r.config))
        log = log_path("boot-topics-%s-kunit-exact.log" % r.config)
        with open(log, "w") as f:
            f.write("kunit %s\n" % r.config)
        subject = git(TOPICS_SRC, "log", "-1", "--format=%s").strip()
        failed = (r.config, subject) in self.kunit_fails
        suites = {m: kunit.SuiteCounts(5, 1, ["case_x"] if failed else [])
                  for m in self.expected_modules(r.config, tree)}
        return kunit.KunitResult(not failed, log,
                                 ["slab_bulk_kunit: failed: case_x"] if failed else [],
                                 suites)

    def stress_run(self, r, tree, seconds):
        self.assertEqual((r.mode, r.faults, tree, seconds),
                         ("smp", False, "topics", stress.TEST_SECONDS))
        self.events.append(("stress", self.tree_files(), r.config, r.append))
        log = log_path("boot-topics-%s-%s.log" % (r.config, r.tag()))
        with open(log, "w") as f:
            f.write("stress %s\n" % r.config)
        t = {k: 0 for k in ("bulk_allocs", "bulk_objs", "remote_frees",
                            "kfree_bulks", "injected")}
        t["lost"] = 0
        return stress.StressResult(r.name(), r.config, r.mode, r.faults, r.append,
                                   seconds, 1, [log], True, [], 0,
                                   {"passed": 1, "skipped": 0, "failed": 0}, t, [], 20)

    def run_main(self, record=False, builds_only=False):
        with mock.patch("base.create"), \
                mock.patch("kbuild.build", self.build), \
                mock.patch("kunit.expected_modules", self.expected_modules), \
                mock.patch("kunit.run", self.kunit_run), \
                mock.patch("stress.run", self.stress_run), \
                mock.patch("build_each.compiler", return_value="gcc (T) 12"), \
                mock.patch("sys.stdout"):
            return topics.main(record, builds_only)

    def result(self, record=False):
        with open(os.path.join(self.roots[1 if record else 0], "per-patch",
                               "topics.json")) as f:
            return json.load(f)

    def markdown(self, record=False):
        with open(os.path.join(self.roots[1 if record else 0], "per-patch",
                               "topics.md")) as f:
            return f.read()

    SHAPE = "fixes 1 - f\ntests 2 fixes t\nslub 3 fixes,tests s\nnet 4 tests n\n"
    BASE = ["mm/slub.c"]
    FIX = BASE + ["mm/slab.h"]
    SUITES = FIX + ["lib/slab_bulk_kunit.c", "lib/slab_bulk_stress.c"]

    def test_each_target_applies_builds_and_boots_in_turn(self):
        self.write(self.SHAPE)
        head = git(TREE, "rev-parse", "HEAD")
        self.assertEqual(self.run_main(record=True), 0)
        self.assertEqual(git(TREE, "rev-parse", "HEAD"), head)
        self.assertEqual(gitrepo.head_branch(TREE), "series")
        alls = ("slub", "slab", "slob")
        suites, net = sorted(self.SUITES), sorted(self.SUITES + ["net/core/skbuff.c"])
        cg = stress.CGROUP
        # fixes: builds only; each target's boots after its builds and
        # before the next apply; net's prefix (with slub) after net alone.
        self.assertEqual(self.events, [
            ("build", "fixes", c) for c in alls] + [
            ("build", "tests", c) for c in alls] + [
            ("kunit", suites, "slub"), ("stress", suites, "slub", cg),
            ("kunit", suites, "slab"), ("stress", suites, "slab", cg),
            ("kunit", suites, "slob"), ("stress", suites, "slob", "")] + [
            ("build", "slub", c) for c in alls] + [
            ("kunit", suites, "slub"), ("stress", suites, "slub", cg),
            ("kunit", suites, "slab"), ("stress", suites, "slab", cg),
            ("kunit", suites, "slob"), ("stress", suites, "slob", ""),
            ("build", "net", "slub"), ("kunit", net, "slub"),
            ("stress", net, "slub", cg),
            ("build", "net prefix", "slub"), ("kunit", net, "slub"),
            ("stress", net, "slub", cg)])
        self.assertEqual(self.built[0], ("fixes", "slub", sorted(self.FIX)))
        rec = self.result(record=True)
        self.assertEqual((rec["passed"], rec["failed"], rec["builds_only"]), (4, 0, False))
        fixes, tests, slub, netr = rec["topics"]
        self.assertEqual([len(t["targets"]) for t in rec["topics"]], [1, 1, 1, 2])
        self.assertEqual((fixes["prefix"], netr["prefix"]),
                         ("= alone", "fixes 1, tests 2, slub 3, net 4"))
        self.assertEqual(netr["applies"], "fixes 1, tests 2, net 4")
        self.assertEqual(netr["applied"], ["0001-mm-slab-a-fix.patch",
                                           "0002-mm-slab-the-suites.patch",
                                           "0004-net-bulk.patch"])
        self.assertEqual(netr["targets"][1]["applied"][2], "0003-mm-slub-faster.patch")
        self.assertEqual((netr["configs"], netr["built"], netr["status"]),
                         (["slub"], ["slub"], "PASS"))
        self.assertEqual(fixes["targets"][0]["suites"], [])
        self.assertEqual({c["kunit"] for c in fixes["targets"][0]["per_config"]}, {None})
        c = tests["targets"][0]["per_config"][0]
        self.assertEqual(c["kunit"], {"slub_kunit": {"passed": 5, "skipped": 1, "failed": []},
                                      "slab_bulk_kunit": {"passed": 5, "skipped": 1,
                                                          "failed": []}})
        self.assertEqual((c["kunit_status"], c["stress_status"], c["status"]),
                         ("PASS", "PASS", "PASS"))
        self.assertEqual(c["stress"]["run"], "slub smp harness.cgroup=stress")
        self.assertIn("lost 0", c["stress"]["summary"])
        step = [s for s in netr["steps"] if s["name"] == "net prefix: kunit slub"][0]
        self.assertIn("topics-net.prefix-kunit-slub.log", step["detail"])
        with open(log_path("topics-net-slub.log")) as f:
            self.assertIn("built net slub@", f.read())
        with open(log_path("topics-net.prefix-slub.log")) as f:
            self.assertIn("built net prefix slub@", f.read())
        with open(log_path("topics-tests-stress-slob.log")) as f:
            self.assertEqual(f.read(), "stress slob\n")
        md = self.markdown(record=True)
        self.assertIn("4 of 4 topics passed.", md)
        self.assertIn("| slub | 3 | fixes, tests | alone | fixes 1, tests 2, "
                      "slub 3 (3 patches) | slub, slab, slob | 3 of 3 passed | "
                      "3 of 3 passed | PASS |", md)
        self.assertIn("|  |  |  | prefix | fixes 1, tests 2, slub 3, net 4 (4 patches) "
                      "| slub | 1 of 1 passed | 1 of 1 passed | PASS |", md)

    def test_builds_only_boots_nothing(self):
        self.write(self.SHAPE)
        self.assertEqual(self.run_main(builds_only=True), 0)
        self.assertEqual({e[0] for e in self.events}, {"build"})
        self.assertEqual([(t, c) for _, t, c in self.events][-2:],
                         [("net", "slub"), ("net prefix", "slub")])
        rec = self.result()
        self.assertEqual((rec["command"], rec["builds_only"], rec["passed"]),
                         ("./bulk topics --builds-only", True, 4))
        self.assertNotIn(": kunit ", json.dumps(rec))
        self.assertIn("`--builds-only`: nothing was booted", self.markdown())

    def test_a_failed_kunit_boot_fails_its_topic_naming_step_and_log(self):
        self.write(self.SHAPE)
        # slab's KUnit boot fails on slub's topic (at slub's patch).
        self.kunit_fails.add(("slab", "mm/slub: faster"))
        self.assertEqual(self.run_main(), 1)
        rec = self.result()
        self.assertEqual([t["status"] for t in rec["topics"]],
                         ["PASS", "PASS", "FAIL", "PASS"])
        slub = rec["topics"][2]
        failed = [s for s in slub["steps"] if s["status"] != "PASS"]
        self.assertEqual([s["name"] for s in failed], ["slub: kunit slab"])
        self.assertIn("kunit slab exact on slub", failed[0]["detail"])
        self.assertIn("topics-slub-kunit-slab.log", failed[0]["detail"])
        self.assertIn("slab_bulk_kunit: failed: case_x", failed[0]["detail"])
        c = slub["targets"][0]["per_config"][1]
        self.assertEqual((c["config"], c["kunit_status"], c["stress_status"], c["status"]),
                         ("slab", "FAIL", "PASS", "FAIL"))
        self.assertEqual(c["kunit"]["slab_bulk_kunit"]["failed"], ["case_x"])
        self.assertIn("slab_bulk_kunit 5/1/1 (failed: case_x)", self.markdown())

    def after_build(self, prefix, then):
        """Builds as before, then run then() after the one whose label
        starts with prefix."""
        real = self.build

        def build(config, tree_name, label=None):
            real(config, tree_name, label)
            if label.startswith(prefix):
                then()
            return ""
        self.build = build

    def test_a_tree_that_moved_fails_the_steps_after(self):
        self.write(self.SHAPE)
        self.after_build("tests slob", lambda: git(
            TOPICS_SRC, "-c", "user.name=T", "-c", "user.email=t@e",
            "commit", "-q", "--allow-empty", "-m", "moved"))
        self.assertEqual(self.run_main(), 1)
        tests = self.result()["topics"][1]
        self.assertEqual(tests["status"], "FAIL")
        boots = [s for s in tests["steps"] if s["name"].split(": ")[1][:5] in
                 ("kunit", "stres")]
        self.assertEqual({s["status"] for s in boots}, {"FAIL"})
        self.assertIn("moved to", boots[0]["detail"])
        self.assertNotIn("kunit", [e[0] for e in self.events[:9]])
        # The next target starts from the base again and passes.
        self.assertEqual(self.result()["topics"][2]["status"], "PASS")

    def test_a_topic_that_does_not_apply_fails_naming_the_patch(self):
        # slub's patch changes what the fix wrote: it needs fixes.
        self.write("fixes 1 - f\ntests 2 - t\nslub 3 tests s\nnet 4 tests n\n")
        self.assertEqual(self.run_main(), 1)
        rec = self.result()
        # slub alone fails; its prefix (fixes, tests, slub) applies.
        self.assertEqual([t["status"] for t in rec["topics"]],
                         ["PASS", "PASS", "FAIL", "PASS"])
        slub = rec["topics"][2]
        self.assertEqual([r["status"] for r in slub["targets"]], ["FAIL", "PASS"])
        self.assertEqual((slub["applied"], slub["built"]), ([], []))
        alone = slub["targets"][0]["steps"]
        apply, builds, boots = alone[0], alone[1:4], alone[4:]
        self.assertEqual(apply["status"], "FAIL")
        self.assertIn("0003-mm-slub-faster.patch does not apply on base + "
                      "0002-mm-slab-the-suites.patch", apply["detail"])
        self.assertIn("topics-slub-apply.log", apply["detail"])
        self.assertEqual([b["status"] for b in builds], ["SKIP"] * 3)
        self.assertEqual([b["status"] for b in boots], ["SKIP"] * 6)
        self.assertIn("not booted: slub did not apply", boots[0]["detail"])
        self.assertNotIn("slub", [b[0] for b in self.built])
        self.assertEqual([b[0] for b in self.built].count("slub prefix"), 3)
        # The next target starts from the base again.
        self.assertEqual(self.built[-2][0], "net")
        self.assertFalse(gitrepo.am_in_progress(TOPICS_SRC, "t"))

    def test_a_failed_build_fails_its_topic_with_the_log(self):
        self.write(self.SHAPE)

        def fail():
            raise StageError("build", "tests slab failed: error: x",
                             log_path("build-topics-slab.log"))
        self.after_build("tests slab", fail)
        self.assertEqual(self.run_main(), 1)
        tests = self.result()["topics"][1]
        self.assertEqual((tests["status"], tests["built"]), ("FAIL", ["slub", "slob"]))
        failed = [s for s in tests["steps"] if s["status"] == "FAIL"]
        self.assertEqual([s["name"] for s in failed], ["tests: build slab"])
        self.assertIn("topics-tests-slab.log", failed[0]["detail"])
        skipped = [s for s in tests["steps"] if s["status"] == "SKIP"]
        self.assertEqual([s["name"] for s in skipped],
                         ["tests: kunit slab", "tests: stress slab"])
        self.assertIn("not booted: slab did not build on tests", skipped[0]["detail"])
        self.assertNotIn(("kunit", sorted(self.SUITES), "slab"), self.events[:12])
        with open(log_path("topics-tests-slab.log")) as f:
            self.assertIn("built tests slab@", f.read())

    def test_a_bad_topics_file_stops_before_anything_runs(self):
        self.write("fixes 1-2 - f\ntests 2 fixes t\nslub 3 fixes s\nnet 4 tests n\n")
        with self.assertRaisesRegex(StageError, "1 problem"):
            self.run_main()
        self.assertEqual(self.events, [])
        self.assertFalse(os.path.exists(TOPICS_ROOT))


class Export(unittest.TestCase):
    """./bulk export rewrites the patch files and nothing else."""

    def setUp(self):
        shutil.rmtree(PATCHES, ignore_errors=True)
        self.addCleanup(shutil.rmtree, PATCHES, True)
        hermetic.make_repo(TREE)
        commit("mm/slab.h", "fixed\n", "mm/slab: a fix")
        os.makedirs(os.path.join(PATCHES, "topics"))
        with open(COVER_FILE, "w") as f:
            f.write("Subject\n\nBody.\n")
        with open(topics.TOPICS, "w") as f:
            f.write("fixes 1 - f\n")
        with open(os.path.join(PATCHES, "topics", "fixes.txt"), "w") as f:
            f.write("fixes\n\nWhat it does.\n")
        open(os.path.join(PATCHES, "0002-old.patch"), "w").close()

    def test_export_keeps_topics(self):
        with mock.patch("sys.stdout"):
            export.export()
        self.assertEqual(sorted(os.listdir(PATCHES)), [
            "0000-cover-letter.patch", "0001-mm-slab-a-fix.patch", "TOPICS",
            "cover-letter.txt", "topics"])
        with open(os.path.join(PATCHES, "topics", "fixes.txt")) as f:
            self.assertEqual(f.read(), "fixes\n\nWhat it does.\n")
        with open(topics.TOPICS) as f:
            self.assertEqual(f.read(), "fixes 1 - f\n")


if __name__ == "__main__":
    unittest.main()
