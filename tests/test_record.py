"""Unit tests for where records go (harness/record.py), their stamps, and
the resumable per-patch loop (harness/each.py)."""
import json
import os
import re
import unittest
from unittest import mock

import hermetic
import bench_each
import each
import kunit
import kunit_each
import record
import stress
from benchparse import Run

STAMP = re.compile(r"<!-- stamp -->\n(Recorded|Committed) .* at commit `[0-9a-f]+(-dirty)?`"
                   r".*, base linux-source-6.1 .*, with `.+`\.\n\n")


def stress_result():
    return stress.StressResult("slub-debug smp", "slub-debug", "smp", False, "",
                               15, 1, ["/x/boot.log"], True, [], 0,
                               {"passed": 1, "skipped": 0, "failed": 0},
                               stress.totals([]), [], 20)


class Writers(unittest.TestCase):
    def setUp(self):
        self.scratch, self.committed = hermetic.record_roots(self)

    def check(self, md, root, kind):
        self.assertEqual(os.path.dirname(md), os.path.join(root, kind))
        with open(md) as f:
            self.assertRegex(f.read(), STAMP)
        with open(md[:-3] + ".json") as f:
            st = json.load(f)["stamp"]
        self.assertEqual(set(st), {"commit", "base_recorded", "base_installed",
                                   "date", "command"})

    def test_scratch_by_default_and_results_with_record(self):
        for rec, root in ((False, self.scratch), (True, self.committed)):
            self.check(stress.write_results([stress_result()], "cmd",
                                            record=rec), root, "stress")
            self.check(bench_each.write("slub", "cmd", "a", [bench_each.Column(
                "base", "base", "6.1", Run("SLUB", 1, True, [], []))], [], [],
                record=rec), root, "per-patch")

    def test_an_unknown_kind_is_refused(self):
        with self.assertRaises(ValueError):
            record.folder("misc", False)

    def test_readers_ignore_the_stamp(self):
        bench_each.write("slub", "cmd", "a", [bench_each.Column(
            "base", "base", "6.1", Run("SLUB", 1, True, [], []))], [], [])
        with mock.patch("sys.stderr"):
            self.assertEqual(bench_each.load("slub").command, "cmd")


class CommittedRecords(unittest.TestCase):
    RESULTS = os.path.join(hermetic.ROOT, "results")

    def records(self):
        for kind in os.listdir(self.RESULTS):
            if os.path.isdir(os.path.join(self.RESULTS, kind)):
                for name in os.listdir(os.path.join(self.RESULTS, kind)):
                    yield kind, name

    def test_every_record_is_in_a_known_folder_and_stamped(self):
        for kind, name in self.records():
            self.assertIn(kind, record.KINDS)
            path = os.path.join(self.RESULTS, kind, name)
            with open(path, "rb") as f:
                text = f.read()
            if name.endswith(".md"):
                self.assertTrue(text.startswith(b"<!-- stamp -->\n"), path)
            elif name.endswith(".json"):
                self.assertIn("stamp", json.loads(text), path)

    def test_the_index_names_every_record(self):
        with open(os.path.join(self.RESULTS, "README.md")) as f:
            index = f.read()
        for kind, name in self.records():
            # "X.md, .json" names X.json too.
            named = re.search(r"[| ]%s\b" % re.escape(re.sub(
                r"(.*)\.json$", r"\1.md, .json", name)), index)
            self.assertTrue(named, "results/README.md lacks %s/%s" % (kind, name))


class Loop(unittest.TestCase):
    def setUp(self):
        hermetic.record_roots(self)
        self.done = []

    def work(self, item):
        if item == "stop":
            raise KeyboardInterrupt
        self.done.append(item)
        return {"out": item.upper()}

    def run_loop(self, keys, items, setting="s"):
        with mock.patch("each.say") as said:
            out = each.loop("cmd", setting, list(zip(keys, items)), self.work,
                            lambda outs: [o["out"] for o in outs])
        return out, " ".join(str(c) for c in said.mock_calls)

    def test_an_interrupted_run_resumes(self):
        keys = each.chain(["d1", "d2", "d3", "d4"])
        with self.assertRaises(KeyboardInterrupt):
            self.run_loop(keys, ["a", "b", "stop", "d"])
        self.assertEqual(self.done, ["a", "b"])
        out, said = self.run_loop(keys, ["a", "b", "c", "d"])
        self.assertEqual(out, ["A", "B", "C", "D"])
        self.assertEqual(self.done, ["a", "b", "c", "d"])
        self.assertIn("resuming: 2 of 4 done", said)
        # The record is written: the next run starts afresh.
        self.run_loop(keys, ["a", "b", "c", "d"])
        self.assertEqual(self.done, ["a", "b", "c", "d"] * 2)

    def test_a_changed_patch_is_done_again_and_every_one_after_it(self):
        with self.assertRaises(KeyboardInterrupt):
            self.run_loop(each.chain(["d1", "d2", "d3"]), ["a", "b", "stop"])
        self.done.clear()
        out, said = self.run_loop(each.chain(["d1", "D2", "d3"]), ["a", "b", "c"])
        self.assertEqual((out, self.done), (["A", "B", "C"], ["b", "c"]))
        self.assertIn("resuming: 1 of 3 done", said)

    def test_other_arguments_start_afresh(self):
        keys = each.chain(["d1", "d2"])
        with self.assertRaises(KeyboardInterrupt):
            self.run_loop(keys, ["a", "stop"])
        self.done.clear()
        out, said = self.run_loop(keys, ["a", "b"], setting="other")
        self.assertEqual(self.done, ["a", "b"])
        self.assertNotIn("resuming", said)


class KunitEach(unittest.TestCase):
    """./bulk kunit-each through the loop, on a mocked tree of 3 commits."""

    def setUp(self):
        self.scratch, self.committed = hermetic.record_roots(self)
        self.trees = "t1\nt2\nt3\n"
        self.booted = []

    def git(self, tree, step, *args):
        return {"log": "subject\n", "rev-parse": self.trees}.get(args[0], "")

    def run_kunit(self, r, tree):
        if len(self.booted) == self.stop_at:
            raise KeyboardInterrupt
        self.booted.append(r.config)
        return kunit.KunitResult(True, "/l.log", [], {
            kunit.CONTRACT_SUITE: kunit.SuiteCounts(3, 0, [])})

    def each_patch(self, record_run=False):
        with mock.patch("tree.create"), mock.patch("kbuild.build"), \
                mock.patch("gitrepo.commits", return_value=["c1", "c2", "c3"]), \
                mock.patch("gitrepo.git", self.git), \
                mock.patch("gitrepo.worktree"), mock.patch("gitrepo.checkout"), \
                mock.patch("kunit.run", self.run_kunit), \
                mock.patch("kunit_each.say"), mock.patch("each.say") as said:
            failed = kunit_each.each_patch(record=record_run)
        return failed, str(said.mock_calls)

    def test_resumes_and_writes_where_asked(self):
        runs = len(kunit_each.RUNS)
        self.stop_at = runs + 1
        with self.assertRaises(KeyboardInterrupt):
            self.each_patch()
        self.stop_at = -1
        self.assertEqual(self.each_patch(record_run=True),
                         (0, "[call('kunit-each: resuming: 1 of 3 done (%s; "
                          "delete it to start afresh)')]" % os.path.join(
                              self.scratch, "progress", "kunit-each.json")))
        # c1 kept; c2 from its first run again, as it was not finished.
        self.assertEqual(len(self.booted), 3 * runs + 1)
        with open(os.path.join(self.committed, "per-patch", "kunit-each-patch.md")) as f:
            text = f.read()
        self.assertRegex(text, STAMP)
        self.assertEqual(text.count("| PASS | 3 passed, 0 skipped, 0 failed |"), 3 * runs)
        self.assertFalse(os.path.exists(os.path.join(self.scratch, "progress",
                                                     "kunit-each.json")))


class ProgressRanges(unittest.TestCase):
    def test_finish_keeps_other_ranges(self):
        with mock.patch("each.say"):
            whole = each.Progress("t", "s", ["a", "b"])
            whole.save("a", 1)
            part = each.Progress("t", "s", ["b"])
            part.save("b", 2)
            part.finish()
            self.assertEqual(each.Progress("t", "s", ["a", "b"]).done, {"a": 1})
            whole.finish()
        self.assertFalse(os.path.exists(whole.path))


if __name__ == "__main__":
    unittest.main()
