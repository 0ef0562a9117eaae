"""Unit tests for harness/suites.py (./bulk suites): the summary lines of
test_meminit and the maple tree's test module, the boots until every
module loaded, the table (stdlib unittest only)."""
import os
import unittest

import hermetic
import boot
import cli
import record
import suites

MEMINIT_PASS = """\
[    5.100000] test_meminit: all 11 tests in test_pages passed
[    5.200000] test_meminit: all 40 tests in test_kvmalloc passed
[    5.300000] test_meminit: all 80 tests in test_kmemcache passed
[    5.400000] test_meminit: all 30 tests in test_rcu_persistent passed
[    5.500000] test_meminit: all 161 tests passed!
"""
MEMINIT_FAIL = """\
[    5.100000] test_meminit: all 11 tests in test_pages passed
[    5.200000] test_meminit: all 40 tests in test_kvmalloc passed
[    5.300000] test_meminit: test_kmemcache failed 10 out of 80 times
[    5.400000] test_meminit: test_rcu_persistent failed 2 out of 30 times
[    5.500000] test_meminit: failures: 12 out of 161
harness: load test_meminit failed: Invalid argument (errno 22)
"""
MAPLE_PASS = """\
[   60.000000] TEST STARTING
[  300.000000] maple_tree: 3806 of 3806 tests passed
harness: loaded test_maple_tree
"""
MAPLE_FAIL = """\
[   60.000000] BUG at check_erase2_testset:1234 (1)
[   60.000100] Pass: 10 Run:11
[   61.000000] BUG at check_erase2_testset:1234 (1)
[   62.000000] BUG at check_root_expand:77 (1)
[  300.000000] maple_tree: 3803 of 3806 tests passed
harness: load test_maple_tree failed: Invalid argument (errno 22)
"""


class SummaryLines(unittest.TestCase):
    def test_meminit_passed(self):
        o = suites.parse_meminit(MEMINIT_PASS)
        self.assertTrue(o.ran)
        self.assertEqual((o.passed, o.failed, o.skipped), (161, 0, 0))
        self.assertEqual(o.cell(), "161/0/0")
        self.assertTrue(o.ok())

    def test_meminit_failed_names_the_functions(self):
        o = suites.parse_meminit(MEMINIT_FAIL)
        self.assertEqual((o.passed, o.failed), (149, 12))
        self.assertEqual(o.failures, ["test_kmemcache (10 of 80)",
                                      "test_rcu_persistent (2 of 30)"])
        self.assertFalse(o.ok())

    def test_meminit_without_summary_gave_no_result(self):
        o = suites.parse_meminit(MEMINIT_PASS.rsplit("\n", 2)[0])
        self.assertFalse(o.ran)
        self.assertEqual(o.cell(), "no result")
        self.assertFalse(o.ok())

    def test_maple_passed(self):
        o = suites.parse_maple(MAPLE_PASS)
        self.assertEqual((o.ran, o.passed, o.failed), (True, 3806, 0))

    def test_maple_failed_names_each_place_once(self):
        o = suites.parse_maple(MAPLE_FAIL)
        self.assertEqual((o.passed, o.failed), (3803, 3))
        self.assertEqual(o.failures, ["check_erase2_testset:1234",
                                      "check_root_expand:77"])

    def test_maple_crash_gave_no_result(self):
        self.assertFalse(suites.parse_maple("TEST STARTING\nOops\n").ran)


def console(*parts):
    """A console log: each (module, text, loaded) in order, then the
    status (1 when a load failed)."""
    out, status = [], 0
    for mod, text, ok in parts:
        out.append("harness: loading %s params ''" % mod)
        out.append(text.rstrip("\n"))
        if ok:
            out.append("harness: loaded %s" % mod)
        else:
            status = 1
    return "\n".join(out + ["harness: status=%d" % status]) + "\n"


class FakeBoots:
    """boot.boot's stand-in: each call writes the next console log."""

    def __init__(self, logs, problems=None):
        self.logs = list(logs)
        self.problems = list(problems or [[] for _ in logs])
        self.calls = []

    def __call__(self, config, tree, mode, load, append, timeout=None,
                 tag=None, allow_fail=False):
        self.calls.append((list(load), append, tag, allow_fail, mode))
        path = os.path.join(hermetic.SCRATCH, "suites-%d.log" % len(self.calls))
        text = self.logs.pop(0)
        with open(path, "w") as f:
            f.write(text)
        return boot.BootResult(config, tree, mode, list(load), append, path,
                               1, 0, 1, boot.splats(text), None, [],
                               self.problems.pop(0))


class Boots(unittest.TestCase):
    B = suites.Boot("", ("test_maple_tree", "test_meminit"))

    def run_boot(self, fake, mods=("test_maple_tree", "test_meminit")):
        return suites.run_boot("slob-suites", "linux", self.B, list(mods),
                               False, "/nonexistent/kunit.py", fake)

    def test_failed_load_gets_the_rest_another_boot(self):
        fake = FakeBoots([console(("test_maple_tree", MAPLE_FAIL, False)),
                          console(("test_meminit", MEMINIT_PASS, True))])
        out = self.run_boot(fake)
        self.assertEqual([c[0] for c in fake.calls],
                         [["test_maple_tree", "test_meminit"],
                          ["test_meminit"]])
        self.assertEqual(out["test_maple_tree"].failed, 3)
        self.assertEqual(out["test_maple_tree"].problems, [])
        self.assertTrue(out["test_meminit"].ok())
        self.assertEqual(fake.calls[0][2], "suites-test_maple_tree-1")
        self.assertEqual(fake.calls[1][2], "suites-test_meminit-2")
        self.assertEqual(fake.calls[0][4], "smp")
        self.assertTrue(fake.calls[0][3])

    def test_one_boot_when_all_load(self):
        fake = FakeBoots([console(("test_maple_tree", MAPLE_PASS, True),
                                  ("test_meminit", MEMINIT_PASS, True))])
        out = self.run_boot(fake)
        self.assertEqual(len(fake.calls), 1)
        self.assertTrue(all(o.ok() for o in out.values()))

    def test_timeout_is_the_running_module_s(self):
        text = "harness: loading test_maple_tree params ''\nTEST STARTING\n"
        fake = FakeBoots([text, console(("test_meminit", MEMINIT_PASS, True))],
                         [["timed out after 2400s"], []])
        out = self.run_boot(fake)
        maple = out["test_maple_tree"]
        self.assertFalse(maple.ran)
        self.assertEqual(maple.problems, ["timed out after 2400s"])
        self.assertTrue(out["test_meminit"].ok())

    def test_nothing_loaded_ends_the_loop(self):
        fake = FakeBoots(["Kernel panic - not syncing\n"],
                         [["QEMU exited 0 and the init printed no status"]])
        out = self.run_boot(fake)
        self.assertEqual(len(fake.calls), 1)
        for o in out.values():
            self.assertFalse(o.ran)
            self.assertIn("not loaded: QEMU exited 0", o.problems[0])

    def test_splat_fails_a_suite_that_expects_none(self):
        splat = MEMINIT_PASS + "[    5.6] BUG: KASAN: use-after-free in x\n"
        fake = FakeBoots([console(("test_meminit", splat, True))],
                         [["1 kernel splat(s) in the console (decoded: x)"]])
        out = self.run_boot(fake, ["test_meminit"])
        o = out["test_meminit"]
        self.assertEqual(o.cell(), "161/0/0 (!)")
        self.assertIn("1 kernel splat(s), first: [    5.6] BUG: KASAN",
                      o.problems[0])
        self.assertEqual(len(o.problems), 1)

    def test_reports_are_expected_in_kasan_and_kfence_suites(self):
        s = suites.Suite("x", "X", "maple", True, False, "")
        o = suites.judge(s, MAPLE_PASS + "BUG: KFENCE: out-of-bounds\n", "", "x")
        self.assertTrue(o.ok())


class Commandline(unittest.TestCase):
    def test_kasan_and_nokfence(self):
        self.assertEqual(
            suites.cmdline(["kfence_test", "kasan_test", "slub_kunit"], "",
                           True),
            "oops=panic harness.nokfence=kasan_test,slub_kunit "
            "kasan_multi_shot")
        self.assertEqual(suites.cmdline(["test_meminit"], "init_on_free=1",
                                        False), "oops=panic init_on_free=1")

    def test_every_module_is_in_one_boot(self):
        mods = [m for b in suites.BOOTS for m in b.modules]
        self.assertEqual(sorted(set(mods) - {"test_meminit"}),
                         sorted(s.module for s in suites.SUITES
                                if s.module != "test_meminit"))
        self.assertEqual(mods.count("test_meminit"), 2)


class Table(unittest.TestCase):
    def test_rows_and_verdict(self):
        good = suites.Outcome(True, 10, 0, 2)
        bad = suites.Outcome(True, 9, 1, 2, ["kmem_cache_bulk"])
        results = {
            "base": {"": {"kasan_test": good},
                     "init_on_alloc=1": {"test_meminit": good}},
            "series": {"": {"kasan_test": bad},
                       "init_on_alloc=1": {"test_meminit": good}}}
        rows = suites.suite_rows("slub", results, {},
                                 ["kasan_test", "test_meminit"])
        self.assertEqual([r.suite for r in rows],
                         ["kasan_test", "test_meminit (init_on_alloc=1)"])
        self.assertEqual([r.same() for r in rows], [False, True])
        md = suites.markdown(rows)
        self.assertIn("| kasan_test | slub | 10/0/2 | 9/1/2 | **series "
                      "worse** |", md)
        self.assertIn("| test_meminit (init_on_alloc=1) | slub | 10/0/2 | "
                      "10/0/2 |  |", md)
        self.assertIn("- kasan_test, slub, series: failed: kmem_cache_bulk",
                      md)

    def test_same_failure_on_base_is_no_regression(self):
        b = suites.Outcome(True, 149, 12, 0)
        s = suites.Outcome(True, 149, 12, 0)
        self.assertTrue(suites.Row("test_meminit", "slob",
                                   {"base": b, "series": s}).same())

    def test_a_side_that_did_not_build_is_a_row_with_its_error(self):
        results = {"base": {"": {"test_maple_tree": suites.Outcome(
            True, 5, 0, 0)}}}
        rows = suites.suite_rows("slob", results,
                                 {"series": "build: linux-slob-suites failed"},
                                 ["test_maple_tree", "test_meminit"])
        self.assertEqual([r.suite for r in rows],
                         ["test_meminit (init_on_alloc=1)",
                          "test_meminit (init_on_free=1)", "test_maple_tree"])
        maple = rows[2]
        self.assertFalse(maple.same())
        self.assertIn("no result", suites.markdown(rows))


class Wiring(unittest.TestCase):
    def test_record_kind(self):
        self.assertIn("suites", record.KINDS)

    def test_configs_exist(self):
        for config in suites.ALLOCS.values():
            self.assertIn(config, suites.kconfig.CONFIG_SETS)

    def test_cli(self):
        args = cli.parser().parse_args(["suites", "--alloc", "slob,slab"])
        self.assertEqual((args.cmd, args.alloc, args.record),
                         ("suites", "slob,slab", False))
        with self.assertRaises(SystemExit):
            cli.parser().parse_args(["suites", "--alloc", "slub2"])


if __name__ == "__main__":
    unittest.main()
