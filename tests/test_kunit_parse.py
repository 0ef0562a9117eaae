"""kunit.parse (the kernel's kunit.py parse) on a real console log of
./bulk kunit slub, and on the same log with a failed and a lost case."""
import os
import unittest

import hermetic
import kunit

LOG = os.path.join(hermetic.HERE, "data", "kunit-slub-exact.log")
MODULES = list(kunit.KUNIT_MODULES)


class RealLog(unittest.TestCase):
    def setUp(self):
        self.kunit_py = os.path.join(hermetic.kunit_tools(self), "kunit.py")
        with open(LOG) as f:
            self.text = f.read()

    def parse(self, text):
        parts = kunit.split_by_module(text, MODULES)
        return {m: kunit.parse(self.kunit_py, part, "t-" + m)
                for m, part in parts.items()}

    def test_passing_run(self):
        res = self.parse(self.text)
        self.assertEqual(res["slub_kunit"], (True, kunit.SuiteCounts(5, 0, [])))
        ok, counts = res["slab_bulk_kunit"]
        self.assertTrue(ok)
        self.assertEqual(counts.summary(), "34 passed, 7 skipped, 0 failed")

    def test_failed_case_is_named(self):
        text = self.text.replace("    ok 18 slab_bulk_free_reverse",
                                 "    not ok 18 slab_bulk_free_reverse")
        ok, counts = self.parse(text)["slab_bulk_kunit"]
        self.assertFalse(ok)
        self.assertEqual(counts.failed, ["slab_bulk_free_reverse"])

    def test_crash_mid_suite_is_no_pass(self):
        text = self.text.split("    ok 19 slab_bulk_free_random")[0]
        ok, counts = self.parse(text)["slab_bulk_kunit"]
        self.assertFalse(ok)
        self.assertTrue(counts.failed)
