"""Unit tests for ./bulk topics (harness/topics.py), stdlib unittest only:
patches/TOPICS parses, and a file that does not cut the series into
topics (a gap, an overlap, an unknown or later requirement, a missing
cover letter) is refused saying what is wrong; the configs a topic
builds; the order git am applies a topic's requirements in; a run over a
tiny tree applies each topic on its requirements and records what it
applied and built; export and the patch list leave TOPICS alone."""
import json
import os
import shutil
import unittest
from unittest import mock

import hermetic  # noqa: F401  (first: harness on sys.path, scratch build/)
import export
import gitrepo
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
        self.assertEqual(topics.apply_order(self.topics, "slab", self.patches),
                         ["%04d.patch" % n for n in list(range(1, 12)) + [16, 17, 18]])
        self.assertEqual(topics.describe(self.topics, "slob"),
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


def commit(path, text, subject):
    full = os.path.join(TREE, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)
    git(TREE, "add", "-A")
    git(TREE, "commit", "-q", "-m", subject)


class Run(unittest.TestCase):
    """main() over a tiny tree: four real patches, git am for real in
    build/topics/linux, the kernel builds mocked."""

    def setUp(self):
        self.roots = hermetic.record_roots(self)
        shutil.rmtree(PATCHES, ignore_errors=True)
        shutil.rmtree(TOPICS_ROOT, ignore_errors=True)
        self.addCleanup(shutil.rmtree, PATCHES, True)
        self.addCleanup(shutil.rmtree, TOPICS_ROOT, True)
        hermetic.make_repo(TREE)
        commit("mm/slab.h", "fixed\n", "mm/slab: a fix")
        commit("lib/slab_bulk_kunit.c", "cases\n", "mm/slab: a suite")
        commit("mm/slab.h", "fixed\nand faster\n", "mm/slub: faster")
        commit("net/core/skbuff.c", "bulk\n", "net: bulk")
        git(TREE, "format-patch", "-q", "-o", PATCHES, "base..HEAD")
        os.makedirs(os.path.join(PATCHES, "topics"))
        for name in ("fixes", "tests", "slub", "net"):
            with open(os.path.join(PATCHES, "topics", name + ".txt"), "w") as f:
                f.write("%s\n\nWhat it does.\n" % name)
        self.built = []

    def write(self, text):
        with open(topics.TOPICS, "w") as f:
            f.write(text)

    def build(self, config, tree_name, label=None):
        src = os.path.join(TOPICS_ROOT, "linux")
        files = git(src, "ls-files").split()
        self.built.append((label.split()[0], config, sorted(files)))
        with open(log_path("build-topics-%s.log" % config), "w") as f:
            f.write("built %s\n" % label)
        return ""

    def run_main(self, record=False):
        with mock.patch("base.create"), \
                mock.patch("kbuild.build", self.build), \
                mock.patch("build_each.compiler", return_value="gcc (T) 12"), \
                mock.patch("sys.stdout"):
            return topics.main(record)

    def result(self, record=False):
        with open(os.path.join(self.roots[1 if record else 0], "per-patch",
                               "topics.json")) as f:
            return json.load(f)

    def test_each_topic_applies_on_its_requirements_and_builds(self):
        self.write("fixes 1 - f\ntests 2 fixes t\nslub 3 fixes,tests s\n"
                   "net 4 tests n\n")
        head = git(TREE, "rev-parse", "HEAD")
        self.assertEqual(self.run_main(record=True), 0)
        self.assertEqual(git(TREE, "rev-parse", "HEAD"), head)
        self.assertEqual(gitrepo.head_branch(TREE), "series")
        base = ["mm/slub.c"]
        self.assertEqual(self.built, [
            ("fixes", c, sorted(base + ["mm/slab.h"])) for c in ("slub", "slab", "slob")] + [
            ("tests", c, sorted(base + ["mm/slab.h", "lib/slab_bulk_kunit.c"]))
            for c in ("slub", "slab", "slob")] + [
            ("slub", c, sorted(base + ["mm/slab.h", "lib/slab_bulk_kunit.c"]))
            for c in ("slub", "slab", "slob")] + [
            ("net", "slub", sorted(base + ["mm/slab.h", "lib/slab_bulk_kunit.c",
                                           "net/core/skbuff.c"]))])
        rec = self.result(record=True)
        self.assertEqual((rec["passed"], rec["failed"]), (4, 0))
        net = rec["topics"][3]
        self.assertEqual(net["applies"], "fixes 1, tests 2, net 4")
        self.assertEqual(net["applied"], ["0001-mm-slab-a-fix.patch",
                                          "0002-mm-slab-a-suite.patch",
                                          "0004-net-bulk.patch"])
        self.assertEqual((net["configs"], net["built"], net["status"]),
                         (["slub"], ["slub"], "PASS"))
        with open(log_path("topics-net-slub.log")) as f:
            self.assertIn("built net slub@", f.read())
        with open(os.path.join(self.roots[1], "per-patch", "topics.md")) as f:
            md = f.read()
        self.assertIn("4 of 4 topics passed.", md)
        self.assertIn("| slub | 3 | fixes, tests | fixes 1, tests 2, "
                      "slub 3 (3 patches) | slub, slab, slob | PASS |", md)

    def test_a_topic_that_does_not_apply_fails_naming_the_patch(self):
        # slub's patch changes what the fix wrote: it needs fixes.
        self.write("fixes 1 - f\ntests 2 - t\nslub 3 tests s\nnet 4 tests n\n")
        self.assertEqual(self.run_main(), 1)
        rec = self.result()
        self.assertEqual([t["status"] for t in rec["topics"]],
                         ["PASS", "PASS", "FAIL", "PASS"])
        slub = rec["topics"][2]
        self.assertEqual((slub["applied"], slub["built"]), ([], []))
        apply, *builds = slub["steps"]
        self.assertEqual(apply["status"], "FAIL")
        self.assertIn("0003-mm-slub-faster.patch does not apply on base + "
                      "0002-mm-slab-a-suite.patch", apply["detail"])
        self.assertIn("topics-slub-apply.log", apply["detail"])
        self.assertEqual([b["status"] for b in builds], ["SKIP"] * 3)
        self.assertNotIn("slub", [b[0] for b in self.built])
        # The next topic starts from the base again.
        self.assertEqual(self.built[-1][0], "net")
        self.assertFalse(gitrepo.am_in_progress(os.path.join(TOPICS_ROOT, "linux"),
                                                "t"))

    def test_a_failed_build_fails_its_topic_with_the_log(self):
        self.write("fixes 1 - f\ntests 2 fixes t\nslub 3 fixes,tests s\n"
                   "net 4 tests n\n")
        real = self.build

        def build(config, tree_name, label=None):
            real(config, tree_name, label)
            if label.startswith("tests slab"):
                log = log_path("build-topics-slab.log")
                raise StageError("build", "tests slab failed: error: x", log)
            return ""
        self.build = build
        self.assertEqual(self.run_main(), 1)
        tests = self.result()["topics"][1]
        self.assertEqual((tests["status"], tests["built"]), ("FAIL", ["slub", "slob"]))
        failed = [s for s in tests["steps"] if s["status"] == "FAIL"][0]
        self.assertEqual(failed["name"], "tests: build slab")
        self.assertIn("topics-tests-slab.log", failed["detail"])
        with open(log_path("topics-tests-slab.log")) as f:
            self.assertIn("built tests slab@", f.read())

    def test_a_bad_topics_file_stops_before_anything_runs(self):
        self.write("fixes 1-2 - f\ntests 2 fixes t\nslub 3 fixes s\nnet 4 tests n\n")
        with self.assertRaisesRegex(StageError, "1 problem"):
            self.run_main()
        self.assertEqual(self.built, [])
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
