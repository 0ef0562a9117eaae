"""The test command: SKIP only for what the series lacks, FAIL for what
is missing; step lines with step i/N and an estimate; the JSON summary."""
import contextlib
import io
import os
import sys
import unittest
from unittest import mock

import hermetic
import build_each
import gitrepo
import kbuild
import kunit
import steps
import test
import unitrun
from common import BISECT_TREE, TREE, Interrupted, StageError
from fakes import fake_kernel
from hermetic import git


class AtTip:
    def at_tip(self):
        pass


class KunitSteps(unittest.TestCase):
    def setUp(self):
        fake_kernel("slub", "bisect")

    def test_suite_not_in_the_series_is_a_skip(self):
        with mock.patch.object(kunit, "expected_modules", return_value=[]):
            with self.assertRaisesRegex(steps.Skip, "in the series yet"):
                test.kunit_step(kunit.KunitRun("slab", "exact"),
                                   kunit.SuiteCounts(), AtTip())

    def test_kernel_not_built_is_a_fail_saying_what_to_run(self):
        with mock.patch.object(kunit, "expected_modules",
                               return_value=["slab_bulk_kunit"]):
            with self.assertRaisesRegex(StageError, "no kernel of slab is "
                                        "built .*: run ./bulk build slab --tree bisect"):
                test.kunit_step(kunit.KunitRun("slab", "exact"),
                                   kunit.SuiteCounts(), AtTip())


class Bisect(unittest.TestCase):
    def test_builds_run_in_the_worktree_never_in_the_users_tree(self):
        hermetic.make_repo(TREE)
        commits = [git(TREE, "rev-parse", "HEAD").strip()]
        for n in (1, 2):
            with open(TREE + "/mm/slub.c", "a") as f:
                f.write("patch %d\n" % n)
            git(TREE, "commit", "-q", "-a", "-m", "mm: patch %d" % n)
            commits.append(git(TREE, "rev-parse", "HEAD").strip())
        seen = []

        def build(config, tree, label):
            seen.append((config, tree, git(BISECT_TREE, "rev-parse", "HEAD").strip()))
        with mock.patch.object(kbuild, "build", build):
            build_each.build(build_each.Build("slub", 0, "p1"), commits)
            build_each.build(build_each.Build("slab", None, "full series"), commits)
        self.assertEqual(seen, [("slub", "bisect", commits[1]),
                                ("slab", "bisect", commits[2])])
        self.assertEqual(git(TREE, "rev-parse", "HEAD").strip(), commits[2])
        self.assertEqual(gitrepo.head_branch(TREE), "series")


    def test_worktree_is_kept_when_build_is_reached_through_a_symlink(self):
        real = os.path.join(hermetic.SCRATCH, "real")
        os.makedirs(real)
        link = os.path.join(hermetic.SCRATCH, "link")
        os.symlink(real, link)
        hermetic.make_repo(os.path.join(link, "linux"))
        wt = os.path.join(link, "wt")
        gitrepo.worktree(os.path.join(link, "linux"), wt, "bisect")
        open(os.path.join(wt, "kept"), "w").close()
        gitrepo.worktree(os.path.join(link, "linux"), wt, "bisect")
        self.assertTrue(os.path.exists(os.path.join(wt, "kept")))


class UnitChild(unittest.TestCase):
    def units(self, code):
        units = unitrun.UnitTests()
        units.child_cmd = lambda *args: [sys.executable, "-c", code] + list(args)
        return units

    def test_a_crashed_child_is_a_fail_naming_the_log(self):
        with open(unitrun.log_path("unit.json"), "w") as f:
            f.write('{"test_x.T.test_y": ["PASS", ""]}')  # an earlier run's
        units = self.units("import sys; print('Segmentation fault'); sys.exit(139)")
        with self.assertRaises(StageError) as e:
            units.outcome("test_x.T.test_y")
        self.assertEqual(e.exception.msg, "the unit-test runner crashed (exit 139) "
                         "before reporting this test")
        self.assertEqual(e.exception.log, units.log)
        with open(units.log) as f:
            self.assertIn("Segmentation fault", f.read())

    def test_a_child_killed_by_a_signal_says_so(self):
        units = self.units("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
        with self.assertRaisesRegex(StageError, r"crashed \(killed by signal 9\)"):
            units.outcome("test_x.T.test_y")

    def test_outcomes_of_a_clean_child(self):
        units = self.units("import json, sys; json.dump({'a': ['PASS', ''], "
                           "'b': ['FAIL', 'AssertionError: x']}, open(sys.argv[1], 'w'))")
        units.outcome("a")
        with self.assertRaisesRegex(StageError, "AssertionError: x"):
            units.outcome("b")
        with self.assertRaisesRegex(StageError, "did not run"):
            units.outcome("c")


class Runner(unittest.TestCase):
    def run_steps(self, todo, history):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            results = steps.run_all(todo, history)
        return results, out.getvalue().splitlines()

    def test_lines_count_steps_and_estimate_what_is_left(self):
        def skip():
            raise steps.Skip("not yet")

        def fail():
            raise StageError("build", "slub failed", "/x/build.log")
        todo = [steps.Step("unit", "a", lambda: None),
                steps.Step("kunit", "b", skip), steps.Step("kunit", "c", fail)]
        history = {"unit: a": 60, "kunit: b": 120, "kunit: c": 240}
        results, lines = self.run_steps(todo, history)
        self.assertRegex(lines[0], r"^PASS unit: a  \[\d\d:\d\d:\d\d, step 1/3, ~6m left\]$")
        self.assertRegex(lines[1], r"^SKIP kunit: b  \[.*step 2/3, ~4m left\]$")
        self.assertRegex(lines[3], r"^FAIL kunit: c  \[.*step 3/3\]$")
        self.assertEqual(lines[4].strip(), "[build] slub failed (log: /x/build.log)")
        data = steps.summary(results, 12.3, {})
        self.assertEqual((data["passed"], data["failed"], data["skipped"]), (1, 1, 1))
        self.assertEqual(data["harness_unit_tests"]["passed"], 1)
        self.assertEqual(data["kernel_steps"], {"passed": 0, "failed": 1, "skipped": 1})

    def test_mypy_counts_as_a_harness_check_not_a_unit_test(self):
        todo = [steps.Step("unit", "test_a.T.test_b", lambda: None),
                steps.Step("unit", steps.MYPY_STEP, lambda: None),
                steps.Step("boot", "slub smoke", lambda: None)]
        results, _ = self.run_steps(todo, {})
        data = steps.summary(results, 1.0, {})
        self.assertEqual(data["passed"], 3)
        self.assertEqual(data["harness_unit_tests"], {"passed": 1, "failed": 0, "skipped": 0})
        self.assertEqual(data["harness_checks"], {"passed": 1, "failed": 0, "skipped": 0})
        self.assertEqual(data["kernel_steps"], {"passed": 1, "failed": 0, "skipped": 0})
        mypy = [s for s in test.plan(["unit"], kunit.SuiteCounts())
                if s.name == steps.MYPY_STEP]
        self.assertEqual([s.group for s in mypy], ["unit"])

    def test_unknown_durations_give_no_estimate(self):
        _, lines = self.run_steps([steps.Step("unit", "a", lambda: None),
                                   steps.Step("unit", "new", lambda: None)],
                                  {"unit: a": 60})
        self.assertNotIn("left", lines[0])

    def test_a_partial_run_keeps_the_other_steps_times(self):
        path = os.path.join(hermetic.SCRATCH, "times.json")
        steps.save_history(path, {}, [steps.StepResult("bisect", "x", "PASS", "", 300.0)])
        history = steps.load_history(path)
        results, _ = self.run_steps([steps.Step("unit", "a", lambda: None)], history)
        steps.save_history(path, history, results)
        self.assertEqual(set(steps.load_history(path)), {"bisect: x", "unit: a"})
        self.assertEqual(steps.load_history(path)["bisect: x"], 300.0)

    def test_harness_bug_still_names_the_step(self):
        results, _ = self.run_steps([steps.Step("unit", "a", lambda: 1 / 0)], {})
        self.assertEqual(results[0].status, "FAIL")
        self.assertIn("ZeroDivisionError", results[0].detail)

    def test_sigterm_in_a_step_ends_the_run(self):
        def term():
            raise Interrupted("SIGTERM")
        after = []
        with self.assertRaises(Interrupted):
            self.run_steps([steps.Step("bisect", "a", term),
                            steps.Step("bisect", "b", lambda: after.append(1))],
                           {})
        self.assertEqual(after, [])

    def test_plan_puts_every_group_in_order(self):
        todo = test.plan(["kunit", "boot"], kunit.SuiteCounts())
        self.assertEqual([s.group for s in todo],
                         ["kunit"] * len(kunit.KUNIT_RUNS) + ["boot"] * 2)
