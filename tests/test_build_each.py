"""Unit tests for ./bulk build-each's record (harness/build_each.py) and the
test command's check of it, stdlib unittest only: a record of the series
as it stands passes; a changed patch, BASE or fragment, a missing or
unreadable record and a failed build each fail, saying what to run."""
import json
import os
import shutil
import unittest
from unittest import mock

import hermetic  # noqa: F401  (first: harness on sys.path, scratch build/)
import build_each
import kconfig
import kbuild
import record
import test
import tree
from common import BASE_FILE, PATCHES, RESULTS, StageError

PATCH = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
Subject: [PATCH %d/2] mm: patch %d

%s

Signed-off-by: T <t@example.org>
---
 %s | 1 +
 1 file changed, 1 insertion(+)

diff --git a/%s b/%s
--- a/%s
+++ b/%s
@@ -1 +1,2 @@
 x
+%s
-- 
2.39.5
"""


def write_patch(n, path, line, message="message", subject="patch"):
    name = os.path.join(PATCHES, "%04d-mm-%s-%d.patch" % (n, subject, n))
    with open(name, "w") as f:
        f.write(PATCH % (n, n, message, path, path, path, path, path, line))
    return name


def main_with(build, commits=("c1", "c2"), record=True):
    """build_each.main(record) over a tree mocked to be base0 + commits."""
    with mock.patch.object(tree, "create"), \
            mock.patch.object(tree, "is_exported_series", return_value=True), \
            mock.patch("gitrepo.git", return_value="base0\n"), \
            mock.patch("gitrepo.commits", return_value=list(commits)), \
            mock.patch.object(build_each, "build", build), \
            mock.patch.object(build_each, "compiler", return_value="gcc (T) 12"), \
            mock.patch("sys.stdout"):
        return build_each.main(record)


class Record(unittest.TestCase):
    def setUp(self):
        shutil.rmtree(PATCHES, ignore_errors=True)
        shutil.rmtree(RESULTS, ignore_errors=True)
        shutil.rmtree(record.SCRATCH, ignore_errors=True)
        os.makedirs(PATCHES)
        with open(BASE_FILE, "w") as f:
            f.write("VERSION=6.1.192-2\n")
        self.patches = [write_patch(1, "mm/slab_common.c", "a"),
                        write_patch(2, "mm/slub.c", "b")]

    def tearDown(self):
        shutil.rmtree(PATCHES, ignore_errors=True)
        shutil.rmtree(RESULTS, ignore_errors=True)

    def record(self, statuses=None):
        """A record of ./bulk build-each on the current patches/, as main()
        writes it; statuses: per build, PASS when not given."""
        builds = build_each.plan(self.patches)
        statuses = statuses or ["PASS"] * len(builds)
        rec = {"command": build_each.COMMAND, "date": "2026-11-27 13:00 UTC",
               "seconds": 10, "tip": "f" * 40, "compiler": "gcc (T) 12",
               "inputs": build_each.inputs(self.patches),
               "results": [{"name": build_each.step_name(b), "status": s,
                            "detail": "", "seconds": 1.0}
                           for b, s in zip(builds, statuses)],
               "passed": statuses.count("PASS"),
               "failed": statuses.count("FAIL")}
        os.makedirs(os.path.dirname(build_each.RECORD), exist_ok=True)
        with open(build_each.RECORD, "w") as f:
            json.dump(rec, f)

    def test_a_record_of_this_series_passes(self):
        self.record()
        detail = build_each.check_record(self.patches)
        self.assertRegex(detail, r"^7 builds passed, recorded 2026-11-27 13:00 UTC at f{12} with gcc \(T\) 12$")

    def test_no_record_says_what_to_run(self):
        with self.assertRaisesRegex(StageError, "no record of the every-patch "
                                    "builds: run ./bulk build-each --record .*commit .*results/per-patch/build-each.json"):
            build_each.check_record(self.patches)

    def test_an_unreadable_record_fails(self):
        os.makedirs(os.path.dirname(build_each.RECORD), exist_ok=True)
        with open(build_each.RECORD, "w") as f:
            f.write("{not json")
        with self.assertRaisesRegex(StageError, "is not a record of ./bulk build-each"):
            build_each.check_record(self.patches)

    def test_a_changed_patch_fails_naming_it(self):
        self.record()
        write_patch(2, "mm/slub.c", "c")
        with self.assertRaisesRegex(StageError, r"not of this series: 1 patch\(es\) "
                                    r"new or changed since \(0002-mm-patch-2.patch\); "
                                    "run ./bulk build-each"):
            build_each.check_record(self.patches)

    def test_a_new_message_or_subject_alone_needs_no_new_run(self):
        self.record()
        os.remove(self.patches[1])
        renamed = write_patch(2, "mm/slub.c", "b", message="a better message",
                              subject="better-subject")
        self.assertIn("builds passed",
                      build_each.check_record([self.patches[0], renamed]))

    def test_patches_in_another_order_fail(self):
        self.record()
        with self.assertRaisesRegex(StageError, r"2 patch\(es\) new or changed "
                                    r"since \(0002-mm-patch-2.patch, 0001"):
            build_each.check_record(self.patches[::-1])

    def test_a_dropped_and_a_new_patch_fail(self):
        self.record()
        with self.assertRaisesRegex(StageError, r"1 patch\(es\) recorded that "
                                    "patches/ no longer has"):
            build_each.check_record(self.patches[:1])
        third = write_patch(3, "mm/slob.c", "d")
        with self.assertRaisesRegex(StageError, r"1 patch\(es\) new or changed "
                                    r"since \(0003-mm-patch-3.patch\)"):
            build_each.check_record(self.patches + [third])

    def test_a_change_after_a_line_like_a_signature_counts(self):
        with open(self.patches[1], "a") as f:
            f.write("diff --git a/x.rst b/x.rst\n--- a/x.rst\n+++ b/x.rst\n"
                    "@@ -1,2 +1,1 @@\n-- \n-z\n")
        self.record()
        with open(self.patches[1], "a") as f:
            f.write("+y\n")
        with self.assertRaisesRegex(StageError, "0002-mm-patch-2.patch"):
            build_each.check_record(self.patches)

    def test_a_changed_plan_fails(self):
        self.record()
        with mock.patch.object(build_each, "TIP_ONLY", ()):
            with self.assertRaisesRegex(StageError, "the planned builds changed"):
                build_each.check_record(self.patches)

    def test_a_record_of_other_builds_fails(self):
        self.record()
        with open(build_each.RECORD) as f:
            rec = json.load(f)
        rec["results"][0]["name"] = "slub @ something else"
        with open(build_each.RECORD, "w") as f:
            json.dump(rec, f)
        with self.assertRaisesRegex(StageError, "records 7 builds, not the 7 planned"):
            build_each.check_record(self.patches)
        rec["results"].pop()
        with open(build_each.RECORD, "w") as f:
            json.dump(rec, f)
        with self.assertRaisesRegex(StageError, "records 6 builds, not the 7 planned"):
            build_each.check_record(self.patches)

    def test_a_record_without_results_is_not_a_record(self):
        self.record()
        with open(build_each.RECORD) as f:
            rec = json.load(f)
        del rec["results"]
        with open(build_each.RECORD, "w") as f:
            json.dump(rec, f)
        with self.assertRaisesRegex(StageError, "is not a record of ./bulk build-each"):
            build_each.check_record(self.patches)

    def test_a_changed_base_fails(self):
        self.record()
        with open(BASE_FILE, "a") as f:
            f.write("TARBALL_SHA256=new\n")
        with self.assertRaisesRegex(StageError, "patches/BASE changed"):
            build_each.check_record(self.patches)

    def test_a_changed_fragment_fails(self):
        with mock.patch("kconfig.fragment_digest", lambda c: "old"):
            self.record()
        with mock.patch("kconfig.fragment_digest",
                        lambda c: "new" if c in ("slab", "slub-nodebug") else "old"):
            with self.assertRaisesRegex(StageError, "the fragments of slab, "
                                        "slub-nodebug changed"):
                build_each.check_record(self.patches)

    def test_a_failed_build_fails_naming_it(self):
        self.record(["PASS", "FAIL"] + ["PASS"] * 5)
        with self.assertRaisesRegex(StageError, r"1 of 7 builds failed "
                                    r"\(slub @ full series\)"):
            build_each.check_record(self.patches)

    def test_main_writes_a_record_that_the_check_accepts(self):
        built = []
        self.assertEqual(main_with(lambda b, c: built.append((b.config, b.index, c))), 0)
        self.assertEqual(len(built), 7)
        self.assertTrue(all(c == ["base0", "c1", "c2"] for _, _, c in built))
        self.assertIn("7 builds passed", build_each.check_record(self.patches))
        with open(build_each.REPORT) as f:
            self.assertIn("| slub-nodebug @ full series | PASS |", f.read())

    def test_main_without_record_writes_the_scratch_copy(self):
        self.assertEqual(main_with(lambda b, c: None, record=False), 0)
        self.assertFalse(os.path.exists(build_each.RECORD))
        with open(os.path.join(record.SCRATCH, "per-patch", "build-each.json")) as f:
            self.assertEqual(json.load(f)["passed"], 7)

    def test_an_interrupted_run_resumes_where_it_stopped(self):
        built = []

        def build(b, commits):
            if len(built) == 3:
                raise KeyboardInterrupt
            built.append(b)
        with self.assertRaises(KeyboardInterrupt):
            main_with(build)
        with mock.patch("each.say") as said:
            self.assertEqual(main_with(lambda b, c: built.append(b)), 0)
        self.assertIn("resuming: 3 of 7 done", str(said.mock_calls))
        self.assertEqual(len(built), 7)
        self.assertIn("7 builds passed", build_each.check_record(self.patches))
        # Patch 2 changed after an interruption: the builds at patch 1
        # stand, the tip's are done again.
        built.clear()
        with self.assertRaises(KeyboardInterrupt):
            main_with(build)
        write_patch(2, "mm/slub.c", "changed")
        built.clear()
        with mock.patch("each.say") as said:
            main_with(lambda b, c: built.append(b))
        self.assertIn("resuming: 2 of 7 done", str(said.mock_calls))
        self.assertEqual([build_each.step_name(b) for b in built], [
            "slub @ full series", "slab @ full series",
            "slob @ 0001-mm-patch-1.patch", "slob @ full series",
            "slub-nodebug @ full series"])

    def test_main_records_a_failed_build_and_exits_1(self):
        def build(b, commits):
            if b.config == "slab" and b.index is None:
                raise StageError("build", "slab failed", "/x.log")
        self.assertEqual(main_with(build), 1)
        with self.assertRaisesRegex(StageError, r"1 of 7 builds failed \(slab @ full series\)"):
            build_each.check_record(self.patches)

    def test_main_writes_no_record_when_patches_change_during_the_run(self):
        def build(b, commits):
            if b.config == "slob":
                write_patch(2, "mm/slub.c", "changed")
        with self.assertRaisesRegex(StageError, "changed during the run: no record"):
            main_with(build)
        self.assertFalse(os.path.exists(build_each.RECORD))

    def test_main_refuses_a_tree_that_is_not_the_series(self):
        with self.assertRaisesRegex(StageError, "1 commits over base, "
                                    "patches/ 2 patches: run ./bulk tree"):
            main_with(lambda b, c: None, commits=("c1",))
        with mock.patch.object(tree, "create"), \
                mock.patch.object(tree, "is_exported_series", return_value=False):
            with self.assertRaisesRegex(StageError, r"not base \+ patches/: run ./bulk tree"):
                build_each.main()


class TestPlan(unittest.TestCase):
    def test_the_test_command_checks_the_record_and_builds_the_tip_kernels(self):
        with mock.patch("gitrepo.patch_files", return_value=[]):
            todo = test.plan(["build-each", "build", "debug"], mock.Mock())
        self.assertEqual([(s.group, s.name) for s in todo], [
            ("build-each", "every patch builds: the record of ./bulk build-each"),
            ("build", "slub-faults @ full series"),
            ("build", "slab-faults @ full series"),
            ("debug", "slub-debug @ full series"),
            ("debug", "slab-debug @ full series"),
            ("debug", "slob-debug @ full series")])

    def test_kunit_boot_and_bench_use_the_tip_kernels_built(self):
        with mock.patch("gitrepo.patch_files", return_value=[]):
            built = {s.name.split()[0] for s in test.plan(
                ["build", "debug"], mock.Mock())}
            todo = test.plan(["kunit"], mock.Mock())
        for s in todo:
            self.assertIn(s.name.split()[0], built)
        booted = []
        with mock.patch("boot.boot", lambda c, *a: booted.append(c)):
            test.boot_step("exact", mock.Mock())
        with mock.patch("measure.smoke", lambda c, *a, **k: booted.append(c)), \
                mock.patch("kconfig.declared_symbols",
                           return_value={test.measure.BENCH_SYMBOL}):
            test.bench_step("slab", mock.Mock())
        self.assertEqual(booted, ["slub-faults", "slab-faults"])

    def test_test_kernels_are_the_benchmarks_with_faults_and_checkers(self):
        # SLUB's and SLAB's; SLOB's is its debug kernel (below).
        for alloc, config in test.TEST_KERNEL.items():
            if alloc == "slob":
                # The debug step builds it: one build fewer.  Fault
                # injection for slab_bulk_fail_nth and the stress runs,
                # madvise() for the small-guest run, the benchmark's module
                # from common.
                self.assertIn(config, test.DEBUG_CONFIGS)
                self.assertNotIn(config, test.tip_configs())
                self.assertEqual(kconfig.CONFIG_SETS[config],
                                 ["common", "slob", "slob-debug", "faults",
                                  "reclaim"])
                with open(os.path.join(kconfig.CONFIGS, "common.config")) as f:
                    self.assertIn("CONFIG_%s=m" % test.measure.BENCH_SYMBOL,
                                  f.read().split())
                continue
            # SLUB's with its event counters, for the stress runs' floors.
            self.assertEqual(kconfig.CONFIG_SETS[config],
                             kconfig.CONFIG_SETS[alloc] + ["faults", "failslab",
                                                           "checkers"]
                             + (["events"] if alloc == "slub" else [])
                             + ["reclaim"])

    def test_every_stress_run_boots_a_kernel_the_build_or_debug_step_built(self):
        # So that no stress step of a whole run needs make.
        tip = set(test.tip_configs()) | set(test.DEBUG_CONFIGS)
        for r in test.stress.TEST_RUNS:
            self.assertIn(r.config, tip, r.name())

    def test_a_stress_step_boots_a_kernel_built_in_this_run_without_make(self):
        built = []

        def build(c, *a, **k):
            if c == "slob-debug":
                raise StageError("build", "slob-debug failed")
            built.append(c)
        series = test.Series()
        series.at_tip = mock.Mock()
        r = test.stress.StressRun("slab-faults", "smp")
        res = mock.Mock(ok=True)
        src = os.path.join(test.BISECT_TREE, "lib", "%s.c"
                           % test.stress.STRESS_MODULE)
        os.makedirs(os.path.dirname(src), exist_ok=True)
        open(src, "w").close()
        self.addCleanup(os.remove, src)
        with mock.patch.object(kbuild, "build", build), \
                mock.patch.object(test.stress, "run", return_value=res), \
                mock.patch.object(test.stress, "summary", return_value=""):
            test.stress_step(r, series)
            test.stress_step(r, series)
            test.tip_step("slub-faults", series)
            test.stress_step(test.stress.StressRun("slub-faults", "smp"), series)
            # A kernel that failed to build is not taken as built.
            for _ in range(2):
                with self.assertRaisesRegex(StageError, "slob-debug failed"):
                    test.tip_step("slob-debug", series)
        self.assertEqual(built, ["slab-faults", "slub-faults"])
        self.assertEqual(series.built, {"slab-faults", "slub-faults"})


if __name__ == "__main__":
    unittest.main()
