"""Unit tests for ./bulk detectors (harness/detectors.py): the case table
against the harness's own detectors, and the verdict on boots that fail
as a case must, fail otherwise, or do not fail; no kernel needed."""
import argparse
import io
import json
import os
import types
import unittest
from unittest import mock

import hermetic
import boot
import detectors
import kconfig
from common import CONFIGS, StageError

# A console line of each detector, as 6.1 prints it (timestamps as the
# console has them).
LINES = {
    "list-corruption": "[    4.51] list_del corruption. next->prev should "
                       "be ffffc9000001fd18, but was ffffc9000001fd28. "
                       "(next=ffffc9000001fd08)",
    "hung-task": "[    9.02] INFO: task init:1 blocked for more than 2 "
                 "seconds.",
    "soft-lockup": "[    7.33] watchdog: BUG: soft lockup - CPU#0 stuck for "
                   "2s! [init:1]",
    "ubsan": "[    4.20] UBSAN: array-index-out-of-bounds in "
             "drivers/misc/lkdtm/bugs.c:349:16",
    "oops": "[    4.20] BUG: kernel NULL pointer dereference, address: "
            "0000000000000000",
    "warning": "[    4.20] WARNING: CPU: 0 PID: 1 at "
               "drivers/misc/lkdtm/bugs.c:85 lkdtm_WARNING+0x1d/0x30",
}
# The taint flags each case's init prints when it gets that far.
TAINTS = {"warning": 0x200, "taint": 0x40, "list-corruption": 0x200,
          "ubsan": 0}


def result(case, splats=(), status=None, rc=0, taint=None, timeout=180):
    """A BootResult as boot.boot() makes it: problems from problems_of()."""
    splats = list(splats)
    problem = boot.taint_problem("harness: tainted=%d\n" % taint) \
        if taint is not None else None
    return boot.BootResult(
        detectors.CONFIG, "linux", "exact", [], case.append,
        "/x/boot-%s.log" % case.name, rc, status, 12, splats,
        "/x/decoded.log" if splats else None, ["qemu"],
        boot.problems_of(rc, status, splats, "/x/decoded.log", timeout,
                         None, problem))


def as_expected(case):
    """The boot each case must produce: the crashes panic (no status),
    the others end with status 0 and the taint line."""
    if case.name == "taint":
        return result(case, status=0, rc=1, taint=0x40)
    if case.name in TAINTS:
        return result(case, [LINES[case.name]], status=0, rc=1,
                      taint=TAINTS[case.name])
    return result(case, [LINES[case.name],
                         "[   10.00] Kernel panic - not syncing: x"])


class Cases(unittest.TestCase):
    def by(self, name):
        return next(c for c in detectors.CASES if c.name == name)

    def test_one_case_per_detector(self):
        names = [c.name for c in detectors.CASES]
        self.assertEqual(names, ["list-corruption", "hung-task",
                                 "soft-lockup", "ubsan", "oops", "warning",
                                 "taint"])
        for c in detectors.CASES:
            self.assertIn(c.mode, boot.MODES)
            # Exact mode but for the soft lockup: under -icount the
            # spinning CPU does not reach the threshold in guest time.
            self.assertEqual(c.mode, "smp" if c.name == "soft-lockup"
                             else "exact", c.name)

    def test_triggers(self):
        d = "harness.write=/sys/kernel/debug/provoke-crash/DIRECT:"
        self.assertEqual(self.by("list-corruption").append,
                         d + "CORRUPT_LIST_DEL")
        # The sysctls first: the init writes in order.
        self.assertEqual(self.by("hung-task").append,
                         "harness.write=/proc/sys/kernel/"
                         "hung_task_timeout_secs:2 harness.write=/proc/sys/"
                         "kernel/hung_task_panic:1 " + d + "HUNG_TASK")
        self.assertEqual(self.by("soft-lockup").append,
                         "watchdog_thresh=1 softlockup_panic=1 " + d +
                         "SOFTLOCKUP")
        self.assertEqual(self.by("ubsan").append, d + "ARRAY_BOUNDS")
        self.assertEqual(self.by("oops").append, d + "EXCEPTION")
        self.assertNotIn("oops=panic", self.by("oops").append)
        self.assertEqual(self.by("warning").append, d + "WARNING")
        self.assertEqual(self.by("taint").append,
                         "harness.write=/proc/sys/kernel/tainted:64")

    def test_each_expected_splat_is_a_splat_the_boot_reports(self):
        """The console line a detector prints is one boot.splats() quotes,
        and the case's pattern finds it: no case expects what the boot
        stage would not fail on."""
        for c in detectors.CASES:
            with self.subTest(c.name):
                if c.splat is None:
                    self.assertNotIn(c.name, LINES)
                    continue
                self.assertEqual(boot.splats(LINES[c.name] + "\n"),
                                 [LINES[c.name]])
                self.assertRegex(LINES[c.name], c.splat)
        self.assertRegex("[ 4.2] Oops: 0002 [#1] PREEMPT SMP KASAN",
                         self.by("oops").splat)

    def test_expected_taints_are_the_taint_checks_problems(self):
        self.assertRegex(boot.taint_problem("harness: tainted=64\n"),
                         self.by("taint").problem)
        self.assertRegex(boot.taint_problem("harness: tainted=512\n"),
                         self.by("warning").problem)
        # W among other flags still counts; U is not W.
        self.assertRegex(boot.taint_problem("harness: tainted=16896\n"),
                         self.by("warning").problem)
        self.assertNotRegex(boot.taint_problem("harness: tainted=64\n"),
                            self.by("warning").problem)
        self.assertNotRegex(boot.taint_problem("harness: tainted=576\n"),
                            self.by("taint").problem)

    def test_the_kernel_is_slub_debug_plus_the_fragment(self):
        self.assertEqual(kconfig.CONFIG_SETS[detectors.CONFIG],
                         kconfig.CONFIG_SETS["slub-debug"] + ["detectors"])
        with open(os.path.join(CONFIGS, "detectors.config")) as f:
            lines = f.read().splitlines()
        for want in ("CONFIG_LKDTM=y", "CONFIG_SOFTLOCKUP_DETECTOR=y",
                     "CONFIG_UBSAN=y", "CONFIG_UBSAN_BOUNDS=y"):
            self.assertIn(want, lines)
        # The hung-task and list checks come from debug.config, /proc/sys
        # from faults.config.
        frags = ""
        for path in kconfig.fragment_files(detectors.CONFIG):
            with open(path) as f:
                frags += f.read()
        for want in ("CONFIG_DEBUG_LIST=y", "CONFIG_DETECT_HUNG_TASK=y",
                     "CONFIG_PROC_SYSCTL=y", "CONFIG_KASAN=y"):
            self.assertIn(want, frags.splitlines())


class Verdict(unittest.TestCase):
    def test_every_case_as_expected(self):
        for c in detectors.CASES:
            with self.subTest(c.name):
                res = as_expected(c)
                self.assertTrue(res.problems)
                self.assertEqual(detectors.verdict(c, res.problems,
                                                   res.splats), [])

    def test_a_boot_that_does_not_fail(self):
        for c in detectors.CASES:
            with self.subTest(c.name):
                res = result(c, status=0, rc=1, taint=0)
                self.assertEqual(res.problems, [])
                self.assertEqual(detectors.verdict(c, [], []),
                                 ["the boot did not fail"])

    def test_a_boot_that_fails_without_its_splat(self):
        # Timed out: the detector stayed silent.
        for c in detectors.CASES:
            if c.splat is None:
                continue
            with self.subTest(c.name):
                res = result(c, rc=None)
                self.assertEqual(detectors.verdict(c, res.problems,
                                                   res.splats),
                                 ["no splat matching '%s'" % c.splat] + (
                                     ["no problem matching '%s'" % c.problem]
                                     if c.problem else []))
        # Another detector's splat is not this case's.
        hung = next(c for c in detectors.CASES if c.name == "hung-task")
        res = result(hung, [LINES["soft-lockup"]])
        self.assertEqual(detectors.verdict(hung, res.problems, res.splats),
                         ["no splat matching '%s'" % hung.splat])

    def test_a_warning_without_its_taint(self):
        c = next(c for c in detectors.CASES if c.name == "warning")
        res = result(c, [LINES["warning"]], status=0, rc=1, taint=0)
        self.assertEqual(detectors.verdict(c, res.problems, res.splats),
                         ["no problem matching '%s'" % c.problem])
        # A tainted=unknown line (no /proc/sys) gives no taint verdict.
        res = result(c, [LINES["warning"]], status=0, rc=1)
        self.assertEqual(len(detectors.verdict(c, res.problems, res.splats)),
                         1)

    def test_the_taint_case_with_a_splat_or_another_flag(self):
        c = next(c for c in detectors.CASES if c.name == "taint")
        res = result(c, [LINES["warning"]], status=0, rc=1, taint=0x240)
        self.assertEqual(detectors.verdict(c, res.problems, res.splats), [
            "1 splat(s) where none was expected",
            "no problem matching '%s'" % c.problem])
        res = result(c, status=0, rc=1, taint=0x200)
        self.assertEqual(detectors.verdict(c, res.problems, res.splats),
                         ["no problem matching '%s'" % c.problem])

    def test_judge_keeps_the_first_and_the_matched_splat(self):
        c = next(c for c in detectors.CASES if c.name == "list-corruption")
        res = result(c, ["[ 4.5] ------------[ cut here ]------------ "
                         "WARNING: x", LINES[c.name]], status=0, rc=1,
                     taint=0x200)
        out = detectors.judge(c, res)
        self.assertTrue(out.ok)
        self.assertEqual(out.first_splat, res.splats[0])
        self.assertEqual(out.matched, LINES[c.name])
        self.assertEqual(out.trigger, c.append)
        # A BootResult-like object is enough.
        like = types.SimpleNamespace(problems=["timed out after 180s"],
                                     splats=[], log="/x/l.log", seconds=180)
        out = detectors.judge(c, like)
        self.assertFalse(out.ok)
        self.assertIsNone(out.first_splat)
        self.assertIsNone(out.matched)


class Main(unittest.TestCase):
    def setUp(self):
        self.scratch, self.results = hermetic.record_roots(self)
        self.calls = []

    def run_main(self, record, boots):
        def build(config, tree):
            self.calls.append(("build", config, tree))

        def fake_boot(config, tree, mode, load, append, timeout, tag,
                      allow_fail):
            self.calls.append(("boot", config, tree, mode, tuple(load),
                               append, timeout, tag, allow_fail))
            return boots(next(c for c in detectors.CASES
                              if c.append == append))
        args = argparse.Namespace(record=record)
        with mock.patch("packages.require"), mock.patch("tree.create"), \
                mock.patch("kbuild.build", build), \
                mock.patch("boot.boot", fake_boot), \
                mock.patch("detectors.say"), mock.patch("record.say"), \
                mock.patch("sys.stdout", io.StringIO()):
            return detectors.main(args)

    def test_every_case_booted_once_and_recorded(self):
        self.assertEqual(self.run_main(True, as_expected), 0)
        self.assertEqual(self.calls[0], ("build", "slub-detectors", "linux"))
        self.assertEqual(self.calls[1:], [
            ("boot", "slub-detectors", "linux", c.mode, (), c.append, 180,
             "detectors-" + c.name, True) for c in detectors.CASES])
        with open(os.path.join(self.results, "experiments",
                               "detectors.md")) as f:
            md = f.read()
        self.assertTrue(md.startswith("<!-- stamp -->\n"))
        self.assertIn("Command: `./bulk detectors`", md)
        self.assertIn("7 of 7 cases as expected.", md)
        self.assertIn("| taint | the taint check alone, TAINT_USER | "
                      "`harness.write=/proc/sys/kernel/tainted:64` | exact | "
                      "no splat, the problem `^kernel tainted U\\b` | kernel "
                      "tainted U (0x40; flags beyond BN) | - | as expected |",
                      md)
        with open(os.path.join(self.results, "experiments",
                               "detectors.json")) as f:
            js = json.load(f)
        self.assertIn("stamp", js)
        self.assertEqual([(c["case"], c["ok"]) for c in js["cases"]],
                         [(c.name, True) for c in detectors.CASES])
        # A regex's | escaped in its cell.
        self.assertIn("| a splat matching `BUG: kernel NULL pointer "
                      "dereference\\|\\bOops\\b` |", md)
        hung = js["cases"][1]
        self.assertEqual(hung["matched"], LINES["hung-task"])
        self.assertIn("QEMU exited 0 and the init printed no status "
                      "(kernel panic?)", hung["problems"])
        self.assertFalse(os.path.exists(os.path.join(self.scratch,
                                                     "experiments")))

    def test_a_silent_detector_fails_the_command_naming_its_log(self):
        def boots(case):
            if case.name == "soft-lockup":
                return result(case, rc=None)
            if case.name == "taint":
                return result(case, status=0, rc=1, taint=0)
            return as_expected(case)
        with self.assertRaises(StageError) as e:
            self.run_main(True, boots)
        msg = str(e.exception)
        self.assertIn("2 of 7 cases not as expected", msg)
        self.assertIn("(log: /x/boot-soft-lockup.log)", msg)
        self.assertIn("soft-lockup: no splat matching 'soft lockup'", msg)
        self.assertIn("taint: the boot did not fail", msg)
        # Every case still booted; the record went to scratch only.
        self.assertEqual(len(self.calls), 1 + len(detectors.CASES))
        self.assertFalse(os.path.exists(os.path.join(self.results,
                                                     "experiments")))
        with open(os.path.join(self.scratch, "experiments",
                               "detectors.md")) as f:
            md = f.read()
        self.assertIn("5 of 7 cases as expected.", md)
        self.assertIn("| timed out after 180s | - | **not as expected**: "
                      "no splat matching 'soft lockup' |", md)


class Markdown(unittest.TestCase):
    def test_pipes_and_backquotes_in_cells(self):
        self.assertEqual(detectors.cell("a|b `c`"), "`a\\|b 'c'`")
        self.assertEqual(detectors.cell(None), "-")


if __name__ == "__main__":
    unittest.main()
