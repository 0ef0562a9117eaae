"""Unit tests of the harness's own logic (no kernel build needed)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import hermetic
import base
import basetree
import build_each
import boot
import export
import gitrepo
import kbuild
import kconfig
import kunit
import kunit_each
import measure
import render
import tables
import tree
from benchparse import AllocRuns, Record, Report, Run
from common import (BENCH_BASE_TREE, COVER_FILE, COVER_TABLES, PATCHES, REPO,
                    TREE, StageError)
from hermetic import git

GITIGNORE_TAIL = """# Rust analyzer configuration
/rust-project.json

#
# Debian packaging: ignore everything at the top level, since it isn't
# included in our repository
#
/*
!/debian/
"""


class BaseStage(unittest.TestCase):
    def test_drops_exactly_the_debian_block(self):
        text, removed = base.drop_debian_gitignore(GITIGNORE_TAIL)
        self.assertEqual(text, "# Rust analyzer configuration\n/rust-project.json\n")
        self.assertEqual(removed[0], "#")
        self.assertEqual(removed[-2:], ["/*", "!/debian/"])
        self.assertEqual(len(removed), 6)

    def test_gitignore_without_block_is_unchanged(self):
        text = "*.o\n/vmlinux\n"
        self.assertEqual(base.drop_debian_gitignore(text), (text, []))

    def test_block_without_end_is_an_error(self):
        with self.assertRaises(StageError):
            base.drop_debian_gitignore(GITIGNORE_TAIL.replace("!/debian/\n", ""))

    def test_no_drift(self):
        rec = {"VERSION": "6.1.192-2", "TARBALL_SHA256": "ab"}
        self.assertIsNone(base.drift_message(rec, "6.1.192-2", "ab"))

    def test_newer_debian_version_is_reported(self):
        rec = {"VERSION": "6.1.192-2", "TARBALL_SHA256": "ab"}
        msg = base.drift_message(rec, "6.1.199-1", "cd")
        self.assertIn("BASE DRIFT", msg)
        self.assertIn("6.1.199-1", msg)
        self.assertIn("6.1.192-2", msg)

    def test_same_version_other_tarball_is_reported(self):
        rec = {"VERSION": "6.1.192-2", "TARBALL_SHA256": "ab"}
        self.assertIn("sha256", base.drift_message(rec, "6.1.192-2", "cd"))


class ConfigStage(unittest.TestCase):
    def test_every_config_has_its_fragments(self):
        for name in kconfig.CONFIG_SETS:
            for path in kconfig.fragment_files(name):
                with open(path) as f:
                    self.assertIn("CONFIG_", f.read())

    def test_unknown_config_is_refused(self):
        with self.assertRaises(StageError) as e:
            kconfig.fragment_files("defconfig")
        self.assertIn("unknown config", str(e.exception))

    def test_unknown_tree_is_refused(self):
        with self.assertRaises(StageError) as e:
            kconfig.tree("../x")
        self.assertIn("unknown tree '../x'", str(e.exception))

    def test_allocator_fragments_choose_one_allocator(self):
        for name in kconfig.CONFIG_SETS:
            text = ""
            for path in kconfig.fragment_files(name):
                with open(path) as f:
                    text += f.read()
            self.assertIn("CONFIG_%s=y" % name.split("-")[0].upper(), text, name)

    def test_stamp_follows_the_fragments(self):
        self.assertNotEqual(kconfig.fragment_digest("slub"),
                            kconfig.fragment_digest("slub-debug"))

    def test_list_names_every_config(self):
        lines = kconfig.listing().splitlines()
        self.assertEqual([l.split()[0] for l in lines], list(kconfig.CONFIG_SETS))
        # The fragments start in one column, past the longest name.
        column = max(map(len, kconfig.CONFIG_SETS)) + 1
        for line, (name, frags) in zip(lines, kconfig.CONFIG_SETS.items()):
            self.assertEqual(line[column:], " + ".join(frags), line)
            self.assertEqual(line[:column].rstrip(), name)


class BuildStage(unittest.TestCase):
    def test_first_compiler_error_is_found(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        log = os.path.join(d, "build.log")
        with open(log, "w") as f:
            f.write("  CC      mm/slab_common.o\n"
                    "../mm/slub.c: In function 'kmem_cache_free_bulk':\n"
                    "../mm/slub.c:3801:9: error: 'df' undeclared (first use in this function)\n"
                    "../mm/slub.c:3802:9: error: expected ';' before 'if'\n"
                    "make[3]: *** [scripts/Makefile.build:250: mm/slub.o] Error 1\n")
        self.assertIn("3801:9: error: 'df' undeclared", kbuild.first_error(log))

    def test_clean_log_has_no_error(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        log = os.path.join(d, "build.log")
        with open(log, "w") as f:
            f.write("  CC      mm/slub.o\n  LD      vmlinux\n")
        self.assertIsNone(kbuild.first_error(log))


class BootStage(unittest.TestCase):
    def test_taint(self):
        """N (KUnit) and B (reports some cases provoke, failed through
        their own lines) pass; any other flag fails, named by its letter;
        no taint line, no verdict."""
        for text in ("harness: tainted=0\n", "harness: tainted=262144\n",
                     "harness: tainted=262176\n", "harness: status=0\n",
                     "harness: tainted=unknown\n"):
            with self.subTest(text=text):
                self.assertIsNone(boot.taint_problem(text))
        self.assertEqual(boot.taint_problem("harness: tainted=262688\n"),
                         "kernel tainted W (0x200; flags beyond BN)")
        self.assertIn("kernel tainted L",
                      boot.taint_problem("harness: tainted=16384\n"))
        self.assertEqual(boot.taint_letters(0x40 | 0x4000), "UL")
        self.assertIn("kernel tainted U", boot.problems_of(
            1, 0, [], None, 60, None,
            boot.taint_problem("harness: tainted=64\n"))[0])

    def test_splats_found(self):
        log = ("[    0.1] Linux version 6.1\n"
               "[    1.2] WARNING: CPU: 0 PID: 1 at mm/slub.c:100 foo\n"
               "[    1.3] BUG: KASAN: slab-out-of-bounds in bar\n"
               "[    1.4] BUG kmalloc-256 (Not tainted): Redzone overwritten\n"
               "[    1.5] general protection fault, probably for non-canonical\n"
               "[    1.6] Oops: 0000 [#1] SMP\n"
               "harness: status=0\n")
        found = boot.splats(log)
        self.assertEqual(len(found), 5)
        self.assertIn("Redzone", found[2])

    def test_each_kind_of_splat_fails_a_boot(self):
        """One console line of each kind, in the formats 6.1 prints."""
        lines = [
            "[   12.345678] kernel BUG at mm/slub.c:432!",
            # BUG() without CONFIG_DEBUG_BUGVERBOSE, as VM_BUG_ON() prints it.
            "[    2.509491] Kernel BUG at refill_cpu_freelist+0xdc/0x230 "
            "[verbose debug info unavailable]",
            "[   12.345690] invalid opcode: 0000 [#1] PREEMPT SMP NOPTI",
            "[   61.000001] rcu: INFO: rcu_sched self-detected stall on CPU",
            "[   61.000002] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
            "[   48.100000] watchdog: BUG: soft lockup - CPU#1 stuck for 26s! "
            "[slab_bulk_stres:77]",
            "[  245.7] INFO: task kworker/0:1:15 blocked for more than 122 seconds.",
            "[  245.8]       \"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" "
            "disables this message.",
            "[  246.0] Kernel panic - not syncing: hung_task: blocked tasks",
            "[    3.1] list_add corruption. prev->next should be next "
            "(ffff888003c4a0c0), but was ffff888003c4a0d0. (prev=ffff888003c4a0e0).",
            "[    3.2] list_del corruption, ffff888003c4a0c0->next is LIST_POISON1 "
            "(dead000000000100)",
            "[    4.0] Slab corruption (Not tainted): slab_bulk start=ffff888003c4a000, "
            "len=256",
            "[    4.1] slab error in verify_redzone_free(): cache `slab_bulk': "
            "double free detected",
            # x86 die() headers beyond the page fault's "Oops:".
            "[    5.0] divide error: 0000 [#1] PREEMPT SMP NOPTI",
            "[    5.1] stack segment: 0000 [#1] SMP",
            "[    5.2] double fault: 0000 [#1] PREEMPT SMP NOPTI",
        ]
        for line in lines:
            with self.subTest(line=line):
                self.assertEqual(boot.splats(line + "\n"), [line.strip()])
        # A command line that names the knobs is no splat.
        self.assertEqual(boot.splats(
            "[    0.0] Kernel command line: console=ttyS0 hung_task_panic=1 "
            "softlockup_panic=1 slab_bulk.list_del=1\n"), [])

    def test_clean_log_has_no_splat(self):
        log = ("[    0.1] SLUB: HWalign=64, Order=0-3, MinObjects=0, CPUs=1\n"
               "[    0.2] Warning: unable to open an initial console.\n"
               "    ok 1 - slab_bulk_free_reverse\n"
               "harness: status=0\n")
        self.assertEqual(boot.splats(log), [])

    def test_announced_kasan_report_is_excused(self):
        report = ("[    8.1] slab_bulk: expected KASAN report: double-free follows\n"
                  "[    8.2] ==========\n"
                  "[    8.3] BUG: KASAN: double-free in bulk_free_run_hooked+0xa4/0xd0\n"
                  "[    8.4] ==========\n")
        end = "[    8.5] slab_bulk: expected KASAN report: end\n"
        self.assertEqual(boot.splats(report + end), [])
        # Without its end line, or of another kind, or outside the
        # announced stretch, a report is a splat.
        self.assertEqual(len(boot.splats(report)), 1)
        other = report.replace("BUG: KASAN: double-free", "BUG: KASAN: use-after-free")
        self.assertEqual(len(boot.splats(other + end)), 1)
        self.assertEqual(len(boot.splats(
            report + end + "[    9.0] BUG: KASAN: double-free in foo\n")), 1)
        warn = report + "[    8.4] WARNING: CPU: 0 PID: 1 at mm/slub.c:1 x\n" + end
        self.assertEqual(len(boot.splats(warn)), 1)

    def test_announced_slab_redzone_report_is_excused(self):
        report = ("[    8.1] slab_bulk: expected SLAB report: redzone follows\n"
                  "[    8.2] slab error in verify_redzone_free(): cache "
                  "`slab_bulk_test': memory outside object was overwritten\n"
                  "[    8.3] CPU: 0 PID: 80 Comm: kunit_try_catch Tainted: G    B\n"
                  "[    8.4] ffff888004b1c000: redzone 1:0x12d2c2c2c2c2c2c2, "
                  "redzone 2:0x9f911029d74e35b\n")
        end = "[    8.5] slab_bulk: expected SLAB report: end\n"
        self.assertEqual(boot.splats(report + end), [])
        self.assertEqual(len(boot.splats(report)), 1)
        # A double free is never the announced kind, nor is a KASAN report
        # or a KASAN end line.
        double = report.replace("memory outside object was overwritten",
                                "double free detected")
        self.assertEqual(len(boot.splats(double + end)), 1)
        kasan = report + "[    8.45] BUG: KASAN: double-free in foo\n" + end
        self.assertEqual(len(boot.splats(kasan)), 1)
        self.assertEqual(len(boot.splats(
            report + "[    8.5] slab_bulk: expected KASAN report: end\n")), 1)
        self.assertEqual(len(boot.splats(
            report.replace("expected SLAB report: redzone",
                           "expected SLAB report: poison") + end)), 1)

    def test_exit_status(self):
        self.assertEqual(boot.exit_status(1), 0)
        self.assertEqual(boot.exit_status(3), 1)
        self.assertIsNone(boot.exit_status(0))
        self.assertIsNone(boot.exit_status(-9))

    def test_logged_status(self):
        self.assertEqual(boot.logged_status("x\nharness: status=2\n"), 2)
        self.assertIsNone(boot.logged_status("[ 1.0] Kernel panic - not syncing\n"))

    def test_modes(self):
        self.assertIn("shift=0,sleep=off", boot.MODES["exact"])
        self.assertEqual(boot.MODES["exact"][:2], ["-smp", "1"])
        self.assertNotIn("-icount", boot.MODES["smp"])

    def test_qemu_uses_cpu_max_and_no_reboot(self):
        cmd = boot.qemu_cmd("bz", "rd", "exact", "console=ttyS0")
        self.assertTrue(cmd[cmd.index("-cpu") + 1].startswith("max"))
        self.assertIn("-no-reboot", cmd)

    def test_guest_rng_is_seeded_and_trusted(self):
        # Exact runs repeat only if RDRAND is seeded; slab tests measure
        # the allocator only if the CRNG is ready (trust_cpu).
        cmd = boot.qemu_cmd("bz", "rd", "exact", "console=ttyS0")
        self.assertEqual(cmd[cmd.index("-seed") + 1], boot.QEMU_SEED)
        self.assertNotIn("-rdrand", cmd[cmd.index("-cpu") + 1])
        line = boot.kernel_cmdline(["slab_bulk_bench"], "x.y=1").split()
        self.assertIn("random.trust_cpu=on", line)
        self.assertIn("harness.load=slab_bulk_bench", line)
        self.assertEqual(line[-1], "x.y=1")

    def test_missing_module_is_named(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        with open(os.path.join(d, "modules.order"), "w") as f:
            f.write("lib/a.ko\n")
        open(os.path.join(d, "lib_a.ko"), "w").close()
        with self.assertRaises(StageError) as e:
            boot.find_modules(d, ["b"])
        self.assertIn("module b not built", str(e.exception))


class KunitStage(unittest.TestCase):
    def test_split_by_module(self):
        text = ("x\nharness: loading a params ''\nA1\nA2\n"
                "harness: loading b params 'p=1'\nB1\nharness: status=0\n")
        parts = kunit.split_by_module(text, ["a", "b", "c"])
        self.assertEqual(parts["a"], "A1\nA2")
        self.assertIn("B1", parts["b"])
        self.assertEqual(parts["c"], "")

    def test_each_patch_rows_name_the_failing_patch_and_run(self):
        def run_one(c, r):
            if c == "c3" and r.config == "slub-debug":
                raise StageError("build", "slub-debug@c3: build failed")
            failed = ["slab_bulk_x"] if (c, r.mode) == ("c2", "smp") else []
            return kunit.KunitResult(
                not failed, os.path.join(hermetic.ROOT, "build", "l.log"),
                ["slab_bulk_kunit: failed: slab_bulk_x"] if failed else [],
                {"slab_bulk_kunit": kunit.SuiteCounts(30, 2, failed)})
        runs = kunit_each.RUNS
        self.assertEqual([(r.config, r.mode) for r in runs],
                         [("slub", "exact"), ("slub", "smp"), ("slub-debug", "exact")])
        rows = kunit_each.rows(["c1", "c2", "c3"], ["one", "two", "three"],
                               lambda c: c != "c1", run_one, runs)
        self.assertEqual(rows[0].status, "SKIP")
        self.assertEqual(len(rows), 1 + 2 * len(runs))
        failed = [(r.commit, r.run) for r in rows if r.status == "FAIL"]
        self.assertEqual(failed, [("c2", "slub smp"), ("c3", "slub-debug exact")])
        bad = [r for r in rows if r.commit == "c2" and r.status == "FAIL"][0]
        self.assertIn("slab_bulk_x", bad.detail)
        self.assertIn("build/l.log", bad.detail)
        md = kunit_each.markdown(rows)
        self.assertIn("| 2 | two | slub smp | FAIL |", md)
        self.assertRegex(md, r"\| 3 \| three \| slub-debug exact \| FAIL \| "
                         r".*slub-debug@c3: build failed")

    def test_kunit_each_range(self):
        commits = ["c%d" % i for i in range(1, 6)]
        self.assertEqual(kunit_each.select(commits), commits)
        self.assertEqual(kunit_each.select(commits, 3), ["c3", "c4", "c5"])
        self.assertEqual(kunit_each.select(commits, 2, 3), ["c2", "c3"])
        for first, last in ((0, None), (6, None), (3, 2), (1, 6)):
            with self.assertRaises(StageError) as e:
                kunit_each.select(commits, first, last)
            self.assertIn("patches 1 to 5", str(e.exception))
        self.assertTrue(kunit_each.out_path().endswith("/kunit-each-patch.md"))
        self.assertTrue(kunit_each.out_path(3, 4).endswith(
            "/kunit-each-patch-p3-p4.md"))
        self.assertTrue(kunit_each.out_path(3).endswith(
            "/kunit-each-patch-p3-ptip.md"))
        row = kunit_each.Row("c3", "three", "slub exact", "PASS", "1 passed")
        md = kunit_each.markdown([row], 3)
        self.assertIn("`./bulk kunit-each --from 3`: for patches 3 to the tip", md)
        self.assertIn("| 3 | three | slub exact | PASS |", md)

    def test_count_json_tree(self):
        tree_json = {"name": "main", "sub_groups": [{"name": "s", "test_cases": [
            {"name": "t1", "status": "PASS"}, {"name": "t2", "status": "SKIP"},
            {"name": "t3", "status": "FAIL"}]}], "test_cases": []}
        c = kunit.count(tree_json, kunit.SuiteCounts())
        self.assertEqual((c.passed, c.skipped, c.failed), (1, 1, ["t3"]))
        self.assertEqual(c.summary(), "1 passed, 1 skipped, 1 failed")

    def test_debug_kunit_runs_load_from_a_memcg(self):
        # The contract suite's memcg case skips unless the init that loads
        # it sits in a non-root memcg.
        for config in ("slub-debug", "slab-debug"):
            appends = [r.append for r in kunit.KUNIT_RUNS if r.config == config]
            self.assertTrue(appends, config)
            for append in appends:
                self.assertIn("harness.cgroup=", append, config)

    def test_kasan_run_keeps_reporting_after_the_expected_report(self):
        appends = [r.append for r in kunit.KUNIT_RUNS if r.config == "slub-debug"]
        self.assertTrue(appends)
        for append in appends:
            self.assertIn("kasan_multi_shot", append.split())
        # The expected report turns lockdep off: the contract suite last.
        self.assertEqual(list(kunit.KUNIT_MODULES)[-1], kunit.CONTRACT_SUITE)

    def test_kunit_boots_panic_on_an_oops(self):
        # An oops would leave the boot waiting for its timeout.
        self.assertIn("oops=panic", kunit.KUNIT_CMDLINE.split())

    def test_slub_kunit_loads_with_kfence_sampling_off(self):
        # 6.1's slub_kunit fails when KFENCE serves its object (an SMP
        # timing accident); the other suites keep KFENCE sampling.
        line = kunit.cmdline(list(kunit.KUNIT_MODULES), "slub_debug=-")
        self.assertEqual(line.split(), ["oops=panic",
                                        "harness.nokfence=slub_kunit",
                                        "slub_debug=-"])
        line = kunit.cmdline(["skb_list_test", "slab_bulk_kunit"], "")
        self.assertEqual(line, "oops=panic")
        with open(boot.INIT_SRC) as f:
            src = f.read()
        self.assertIn('param("harness.nokfence"', src)
        self.assertIn("/sys/module/kfence/parameters/sample_interval", src)

    def test_kfence_switch_is_checked_in_the_console(self):
        mods = ["slub_kunit", "slab_bulk_kunit"]
        good = ("harness: KFENCE sampling off (interval was 100 ms)\n"
                "[    5.2] kfence: disabled\n"
                "harness: loading slub_kunit params ''\n"
                "[    5.3]     ok 1 test_clobber_zone\n"
                "harness: loaded slub_kunit\n"
                "[    5.4] kfence: re-enabled\n"
                "harness: KFENCE sampling on again (interval 100 ms)\n"
                "harness: loading slab_bulk_kunit params ''\n"
                "harness: loaded slab_bulk_kunit\n")
        self.assertEqual(kunit.kfence_switch_problems(good, mods, True), [])
        never_on = good.replace(
            "harness: KFENCE sampling on again (interval 100 ms)\n", "")
        self.assertEqual(kunit.kfence_switch_problems(never_on, mods, True),
                         ["slub_kunit: KFENCE sampling not turned on again "
                          "after it"])
        never_off = good.replace(
            "harness: KFENCE sampling off (interval was 100 ms)\n", "")
        self.assertEqual(kunit.kfence_switch_problems(never_off, mods, True),
                         ["slub_kunit: loaded without KFENCE sampling off"])
        # A kernel without KFENCE: the init must have found none.
        self.assertEqual(kunit.kfence_switch_problems(good, mods, False),
                         ["slub_kunit: init did not find KFENCE absent"])
        absent = ("harness: KFENCE sampling absent\n"
                  "harness: loading slub_kunit params ''\n"
                  "harness: loaded slub_kunit\n")
        self.assertEqual(kunit.kfence_switch_problems(absent, mods, False),
                         [])
        self.assertEqual(kunit.kfence_switch_problems("", mods, False),
                         ["slub_kunit: never loaded"])
        # Sampling off from the command line (kunit.KFENCE_OFF): nothing
        # to turn on again.
        already = ("harness: KFENCE sampling already off\n"
                   "harness: loading slub_kunit params ''\n"
                   "harness: loaded slub_kunit\n")
        self.assertEqual(kunit.kfence_switch_problems(already, mods, True),
                         [])
        # Modules without the switch are not looked at.
        self.assertEqual(kunit.kfence_switch_problems("", mods[1:], True), [])

    def test_fast_paths_run_under_kasan_and_debug_vm(self):
        # SLUB_DEBUG_ON routes every cache around the bulk fast paths;
        # slub_debug=- turns it off for a run of the KASAN kernel, where
        # DEBUG_VM checks the frozen and CPU slab states.
        modes = [r.mode for r in kunit.KUNIT_RUNS if r.config == "slub-debug"
                 and "slub_debug=-" in r.append.split()]
        self.assertEqual(sorted(modes), ["exact", "smp"])
        path = os.path.join(REPO, "configs", "debug.config")
        with open(path, encoding="utf-8") as f:
            self.assertIn("CONFIG_DEBUG_VM=y", f.read().split())

    def test_a_must_run_case_that_skips_fails_the_run(self):
        r = kunit.KunitRun("slub-stats", "exact", must_run=("a", "b"))
        tree = {"name": "slab_bulk", "sub_groups": [], "test_cases": [
            {"name": "a", "status": "PASS"}, {"name": "b", "status": "SKIP"},
            {"name": "c", "status": "SKIP"}]}
        counts = kunit.count(tree, kunit.SuiteCounts())
        self.assertEqual(kunit.must_run_problems(
            r, {kunit.CONTRACT_SUITE: counts}),
            ["slab_bulk_kunit: b skipped, which this run must run"])
        tree["test_cases"][1]["status"] = "PASS"
        counts = kunit.count(tree, kunit.SuiteCounts())
        self.assertEqual(kunit.must_run_problems(
            r, {kunit.CONTRACT_SUITE: counts}), [])
        del tree["test_cases"][0]
        counts = kunit.count(tree, kunit.SuiteCounts())
        self.assertEqual(kunit.must_run_problems(
            r, {kunit.CONTRACT_SUITE: counts}),
            ["slab_bulk_kunit: a did not run"])
        self.assertEqual(kunit.must_run_problems(r, {}),
                         ["slab_bulk_kunit: a did not run",
                          "slab_bulk_kunit: b did not run"])
        # "module:case" names another suite's case.
        other = kunit.KunitRun("slub-debug", "exact",
                               must_run=("skb_list_test:s",))
        skb = kunit.count({"name": "skb_list", "test_cases": [
            {"name": "s", "status": "SKIP"}]}, kunit.SuiteCounts())
        self.assertEqual(kunit.must_run_problems(
            other, {kunit.CONTRACT_SUITE: counts, "skb_list_test": skb}),
            ["skb_list_test: s skipped, which this run must run"])
        self.assertEqual(kunit.must_run_problems(
            other, {kunit.CONTRACT_SUITE: counts}),
            ["skb_list_test: s did not run"])
        # ./bulk kunit on the series' tree takes a listed run's cases.
        listed = [r for r in kunit.KUNIT_RUNS if r.must_run][0]
        self.assertEqual(kunit.listed_run(listed.config, listed.mode,
                                          listed.append), listed)
        self.assertEqual(kunit.listed_run("slub-stats", "smp", "").must_run,
                         ())

    def test_a_skip_fails_unless_its_reason_holds_in_the_run(self):
        text = ("[    0.29]     ok 14 slab_bulk_init_on_alloc # SKIP init_on_alloc "
                "is off (boot with init_on_alloc=1)\r\n"
                "[    0.64]     ok 36 slab_bulk_cross_cpu # SKIP needs at least "
                "two online CPUs\n"
                "    ok 37 slab_bulk_plain\n"
                "    ok 38 slab_bulk_new # SKIP a reason nobody listed\n")
        reasons = kunit.skip_reasons(text)
        self.assertEqual(sorted(reasons), ["slab_bulk_cross_cpu",
                                           "slab_bulk_init_on_alloc",
                                           "slab_bulk_new"])
        self.assertEqual(reasons["slab_bulk_cross_cpu"],
                         "needs at least two online CPUs")
        del reasons["slab_bulk_new"]
        plain = kunit.Traits("slub", {"SLUB_DEBUG": "y"}, "exact", "")
        self.assertEqual(kunit.skip_problems("m", reasons, plain), [])
        # The boot asked for what the case says is missing.
        smp = kunit.Traits("slub", {}, "smp", "init_on_alloc=1")
        self.assertEqual(kunit.skip_problems("m", reasons, smp), [
            'm: slab_bulk_cross_cpu skipped ("needs at least two online '
            'CPUs"), which does not hold in this run',
            'm: slab_bulk_init_on_alloc skipped ("init_on_alloc is off (boot '
            'with init_on_alloc=1)"), which does not hold in this run'])
        self.assertIn("a reason no run may skip for", kunit.skip_problems(
            "m", {"x": "a reason nobody listed"}, plain)[0])
        # Options come from the built .config; KFENCE's excuses hold only
        # where it samples.
        t = kunit.Traits("slub", {"KFENCE": "y"}, "exact", "")
        why = "no object alone in its slab (KFENCE, or KASAN's quarantine?)"
        self.assertTrue(kunit.SKIP_REASONS[why](t))
        t = kunit.Traits("slub", {"KFENCE": "y"}, "exact", kunit.KFENCE_OFF)
        self.assertFalse(kunit.SKIP_REASONS[why](t))
        # slub_debug= on the command line decides over SLUB_DEBUG_ON.
        why = "fewer than 12 objects per slab"
        on = {"SLUB_DEBUG": "y", "SLUB_DEBUG_ON": "y"}
        debug = {"SLUB_DEBUG": "y"}
        for alloc, options, append, holds in (
                ("slub", on, "", True), ("slub", on, "slub_debug=-", False),
                ("slub", debug, "slub_debug=FZPU", True),
                ("slub", debug, "slub_debug", True),
                ("slub", debug, "slub_debug=fz,kmalloc-64", True),
                ("slub", debug, "", False), ("slub", {}, "slub_debug=FZPU", False),
                ("slab", debug, "slub_debug=FZPU", False)):
            self.assertEqual(kunit.SKIP_REASONS[why](
                kunit.Traits(alloc, options, "exact", append)), holds,
                (alloc, options, append))
        # Only poisoning opts caches out of init_on_alloc.
        why = "poisoned cache (slab debugging) opts out of init_on_alloc"
        self.assertFalse(kunit.SKIP_REASONS[why](
            kunit.Traits("slub", debug, "exact", "slub_debug=FZ")))
        self.assertTrue(kunit.SKIP_REASONS[why](
            kunit.Traits("slub", debug, "exact", "slub_debug=FZPU")))
        self.assertTrue(kunit.SKIP_REASONS[why](
            kunit.Traits("slab", {"DEBUG_SLAB": "y"}, "exact", "")))
        # A module would not load: AF_UNIX must be built in.
        why = "no AF_UNIX socket: -97"
        self.assertTrue(kunit.SKIP_REASONS[why](
            kunit.Traits("slub", {"UNIX": "m"}, "exact", "")))
        self.assertFalse(kunit.SKIP_REASONS[why](
            kunit.Traits("slub", {"UNIX": "y"}, "exact", "")))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, ".config")
            with open(path, "w") as f:
                f.write("# CONFIG_KASAN is not set\nCONFIG_KFENCE=y\n"
                        "CONFIG_NR_CPUS=4\n")
            self.assertEqual(kunit.built_options(path),
                             {"KFENCE": "y", "NR_CPUS": "4"})

    def test_every_skip_reason_of_the_suites_is_listed(self):
        # Each kunit_skip() message the series' suites print (a %d
        # standing for a number) has an entry in kunit.SKIP_REASONS.
        said = set()
        for name in sorted(os.listdir(os.path.join(REPO, "patches"))):
            if name.endswith(".patch"):
                with open(os.path.join(REPO, "patches", name)) as f:
                    said |= set(re.findall(
                        r'^\+.*kunit_skip\(test,\s*"((?:[^"\\]|\\.)*)"',
                        f.read(), re.M))
        self.assertGreater(len(said), 20)
        for msg in said:
            pattern = re.escape(msg).replace("%d", "-?[0-9]+")
            self.assertTrue(any(re.fullmatch(pattern, k)
                                for k in kunit.SKIP_REASONS), msg)

    def test_init_on_free_runs_unmasked(self):
        # init_on_alloc=1 zeroes objects init_on_free failed to wipe, and
        # poisoned caches opt out of init_on_free: each allocator needs a
        # run with init_on_free=1 and neither.
        for config in ("slub", "slab"):
            unmasked = [r for r in kunit.KUNIT_RUNS if r.config == config
                        and "init_on_free=1" in r.append.split()
                        and "init_on_alloc=1" not in r.append.split()
                        and not any(w.startswith("slub_debug=") and "P" in w
                                    for w in r.append.split())]
            self.assertTrue(unmasked, config)


class BisectPlan(unittest.TestCase):
    def test_needs_build(self):
        self.assertTrue(build_each.needs_build("slub", ["Documentation/x.rst"]))
        self.assertFalse(build_each.needs_build("slab", ["mm/slub.c", "MAINTAINERS"]))
        self.assertTrue(build_each.needs_build("slab", ["mm/slab.c"]))
        self.assertTrue(build_each.needs_build("slob", ["mm/slab_common.c"]))
        self.assertFalse(build_each.needs_build("slob", ["mm/slab.c"]))

    def test_each_patch_where_it_matters_then_the_tip_per_allocator(self):
        d = os.path.join(hermetic.SCRATCH, "plan")
        os.makedirs(d, exist_ok=True)
        paths = []
        for i, f in enumerate(("mm/slab_common.c", "mm/slub.c", "mm/slob.c"), 1):
            paths.append(os.path.join(d, "%04d-p.patch" % i))
            with open(paths[-1], "w") as fh:
                fh.write("diff --git a/%s b/%s\n" % (f, f))
        plan = [(b.config, b.index) for b in build_each.plan(paths)]
        self.assertEqual(plan, [("slub", 0), ("slub", 1), ("slub", None),
                                ("slab", 0), ("slab", None),
                                ("slob", 0), ("slob", None),
                                ("slub-nodebug", None)])


class InitProgram(unittest.TestCase):
    def test_every_option_read_is_documented(self):
        with open(boot.INIT_SRC) as f:
            src = f.read()
        header = src.split("*/", 1)[0]
        read = set(re.findall(r'param\("(harness\.\w+)"', src))
        self.assertIn("harness.cgroup", read)
        for opt in read:
            self.assertIn(opt + "=", header, opt)

    def test_shell_only_in_the_shell_build(self):
        with open(boot.INIT_SRC) as f:
            main = f.read().split("int main(void)", 1)[1]
        shell = main.split("#ifdef HARNESS_SHELL", 1)[1].split("#endif", 1)[0]
        self.assertIn('execl("/bin/sh"', shell)
        self.assertNotIn("/bin/sh", main.replace(shell, ""))

    def test_joins_cgroup_before_loading(self):
        with open(boot.INIT_SRC) as f:
            main = f.read().split("int main(void)", 1)[1]
        self.assertLess(main.index("join_cgroup("), main.index("SYS_finit_module"))
        # The group (memcg_kmem_enabled_key's code patch) before the hog
        # runs the page allocator; the hog itself outside the group.
        self.assertLess(main.index("make_cgroup("), main.index("start_hog("))
        self.assertLess(main.index("start_hog("), main.index("join_cgroup("))


def record(test, variant, n, size, per_obj):
    """An R record with @per_obj (the raw counts do not matter here)."""
    return Record(test, variant, n, size, 1, 0, 0, per_obj)


class BenchReport(unittest.TestCase):
    def test_table_ratio_and_missing(self):
        def res(v, n, per):
            return record("a", v, n, 256, per)
        b = Run(results=[res("fallback", 1, 200.0), res("bulk", 1, 100.0),
                         res("bulk", 8, 80.0)])
        s = Run(results=[res("bulk", 1, 50.0)])
        spec = tables.Spec("a", "quick reuse", "n", "fallback", "bulk")
        rows = tables.table(spec, b, s)
        self.assertEqual(rows[0], tables.Row(1, 200.0, 100.0, 50.0, 0.5))
        self.assertEqual(rows[1], tables.Row(8, None, 80.0, None, None))
        self.assertIn("| 8 | - | 80.0 | - | - |", render.markdown("slub", spec, rows))

    def test_plot_data_marks_only_missing_values(self):
        self.assertEqual(render.plot_data([tables.Row(8, -1.5, None, 2.0, None),
                                           tables.Row(16, None, -0.25, -3.0, 12.0,
                                                      4.0)]),
                         "8 -1.50 NaN 2.00 NaN\n16 NaN -0.25 -3.00 4.00\n")

    def test_loop_is_measured_on_both_kernels(self):
        def res(v, n, per):
            return record("a", v, n, 256, per)
        b = Run(results=[res("fallback", 8, 200.0), res("bulk", 8, 100.0)])
        s = Run(results=[res("fallback", 8, 160.0), res("bulk", 8, 40.0)])
        spec = tables.Spec("a", "quick reuse", "n", "fallback", "bulk")
        rows = tables.table(spec, b, s)
        self.assertEqual(rows, [tables.Row(8, 200.0, 100.0, 40.0, 0.4, 160.0, 0.25)])
        text = render.markdown("slub", spec, rows)
        self.assertIn("| n | loop (base) | loop (series) | base | series | "
                      "series/base | series/loop |", text)
        self.assertIn("| 8 | 200.0 | 160.0 | 100.0 | 40.0 | 0.40 | 0.25 |", text)

    def test_smp_runs_are_reported_as_a_spread(self):
        def run(*vals):
            return Run(results=[record("f", "conc_alloc", 1, 8, v) for v in vals])
        spec = tables.Spec("f", "concurrent N*alloc", "size", None, "conc_alloc")
        rows = tables.spread_table(spec, [run(100.0), run(300.0), run(200.0)],
                                   [run(90.0), run(110.0), run(100.0)])
        self.assertEqual(rows, [tables.SpreadRow(8, [100.0, 300.0, 200.0],
                                                 [90.0, 110.0, 100.0], 0.5)])
        self.assertIn("| 8 | 100 / 300 / 200 | 90 / 110 / 100 | 0.50 |",
                      render.markdown_spread("slub", spec, rows))
        self.assertEqual(measure.mode_runs("smp"), list(range(1, measure.SMP_RUNS + 1)))
        self.assertEqual(measure.mode_runs("exact"), [None])
        self.assertNotEqual(measure.bench_tag("f", False, "smp", 1),
                            measure.bench_tag("f", False, "smp", 2))

    def test_report_reads_the_boot_stage_log(self):
        with self.assertRaises(StageError) as e:
            measure.load_run("slub", "linux", "abcde", False, "exact")
        self.assertIn(boot.log_file("linux", "slub", "bench-exact-abcde"),
                      str(e.exception))

    def test_cover_tables_show_the_tests_with_a_fallback(self):
        def res(t, v, n, per):
            return record(t, v, n, 256, per)
        entry = AllocRuns(Run(results=[res("a", "fallback", 8, 200.0),
                                       res("a", "bulk", 8, 100.0),
                                       res("b", "bulk", 8, 1.0)]),
                          Run(results=[res("a", "bulk", 8, 50.0)]))
        text = render.cover_tables(Report("./bulk bench", {"slub": entry}))
        self.assertIn("SLUB test a, quick reuse: alloc N then free N:\n", text)
        self.assertIn("       8    200.0        -    100.0     50.0   0.50      -\n", text)
        self.assertNotIn("test b", text)

    def test_skb_rows_have_their_own_table(self):
        def res(v, n, per):
            return record("a", v, n, 208, per)
        b = Run(results=[res("fallback", 8, 300.0), res("bulk", 8, 290.0),
                         res("skb_fallback", 8, 700.0),
                         res("skb_bulk", 8, 690.0)])
        s = Run(results=[res("bulk", 8, 150.0), res("skb_bulk", 8, 280.0)])
        spec = [sp for sp in tables.SPECS if sp.bulk == "skb_bulk"][0]
        rows = tables.table(spec, b, s)
        self.assertEqual([(r.key, r.fallback, r.base, r.series) for r in rows],
                         [(8, 700.0, 690.0, 280.0)])
        self.assertIn("skb_worst_bulk", [sp.bulk for sp in tables.SPECS])

    def test_specs_name_known_tests(self):
        for spec in tables.SPECS:
            self.assertIn(spec.test, tables.TESTS)
            self.assertIn(spec.key, ("n", "size"))


class TreeStage(unittest.TestCase):
    """The tree/export logic on a tiny git repo at build/linux (scratch)."""

    def setUp(self):
        hermetic.make_repo(TREE)
        for d in (PATCHES, BENCH_BASE_TREE):
            subprocess.run(["rm", "-rf", d], check=True)
        os.makedirs(PATCHES)
        with open(COVER_FILE, "w") as f:
            f.write("mm/slab: test series\n\nBody text.\n")

    def write(self, rel, text):
        path = os.path.join(TREE, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def read(self, name):
        with open(os.path.join(PATCHES, name)) as f:
            return f.read()

    def commit(self, rel, old, new, msg):
        with open(os.path.join(TREE, rel)) as f:
            text = f.read()
        self.write(rel, text.replace(old, new))
        git(TREE, "commit", "-q", "-a", "-s", "-m", msg)

    def test_unexported_commit_is_refused(self):
        self.commit("mm/slub.c", "line 3\n", "line three\n", "mm: change")
        with self.assertRaises(StageError) as e:
            gitrepo.refuse_unexported(TREE, PATCHES, False, "tree")
        self.assertIn("not in patches/", str(e.exception))
        gitrepo.refuse_unexported(TREE, PATCHES, True, "tree")  # forced

    def test_dirty_tree_is_refused(self):
        self.write("mm/slub.c", "changed\n")
        with self.assertRaises(StageError) as e:
            gitrepo.refuse_unexported(TREE, PATCHES, False, "tree")
        self.assertIn("uncommitted", str(e.exception))

    def test_missing_base_tag_is_named(self):
        git(TREE, "tag", "-d", "base")
        with self.assertRaises(StageError) as e:
            gitrepo.commits(TREE, "export")
        self.assertIn("[export]", str(e.exception))
        self.assertIn("build/linux has no tag 'base'",
                      gitrepo.unexported_work(TREE, PATCHES))

    def test_export_round_trip_is_stable(self):
        self.commit("mm/slub.c", "line 3\n", "line three\n", "mm: one")
        self.commit("mm/slub.c", "line 9\n", "line nine\n", "mm: two")
        with open(COVER_TABLES, "w") as f:
            f.write("Measured with the project harness: x\n")
        export.export()
        files = sorted(os.listdir(PATCHES))
        self.assertEqual(len([f for f in files if f.endswith(".patch")]), 3)
        snap = {f: self.read(f) for f in files}
        self.assertEqual(gitrepo.unexported_work(TREE, PATCHES), [])
        self.assertTrue(tree.is_exported_series())
        export.export()
        again = {f: self.read(f) for f in sorted(os.listdir(PATCHES))}
        self.assertEqual(snap, again)
        cover = [v for k, v in snap.items() if k.startswith("0000-")][0]
        self.assertIn("Subject: [PATCH 0/2] mm/slab: test series", cover)
        self.assertIn("Body text.\n\nMeasured with the project harness: x\n", cover)
        # Blob hashes have a fixed length, whatever the repository's size.
        index = [line for v in snap.values() for line in v.splitlines()
                 if line.startswith("index ")]
        self.assertTrue(index)
        for line in index:
            self.assertRegex(line, r"^index [0-9a-f]{%d}\.\.[0-9a-f]{%d} "
                             % ((export.EXPORT_ABBREV,) * 2))
        self.assertIn("base-commit:", cover)

    def test_export_without_a_tree_is_one_line(self):
        subprocess.run(["rm", "-rf", TREE], check=True)
        with self.assertRaises(StageError) as e:
            export.export()
        self.assertEqual(str(e.exception), "[export] no kernel tree at %s: "
                         "run ./bulk tree" % TREE)

    def test_patch_that_does_not_apply_is_named_and_the_tree_kept(self):
        self.commit("mm/slub.c", "line 3\n", "line three\n", "mm: one")
        self.commit("mm/slub.c", "line 9\n", "line nine\n", "mm: two")
        export.export()
        # The base moves under the second patch: its context no longer matches.
        git(TREE, "checkout", "-q", "-f", "base")
        git(TREE, "checkout", "-q", "-b", "newbase")
        self.commit("mm/slub.c", "line 9\n", "line 9 (6.1.y)\n", "stable update")
        git(TREE, "tag", "-f", "base")
        head = git(TREE, "rev-parse", "HEAD")
        log = os.path.join(hermetic.SCRATCH, "am.log")
        with self.assertRaises(StageError) as e:
            tree.apply_series(TREE, gitrepo.patch_files(PATCHES), log, "drifted")
        self.assertIn("0002-mm-two.patch", str(e.exception))
        self.assertIn("drifted", str(e.exception))
        self.assertFalse(os.path.isdir(os.path.join(TREE, ".git", "rebase-apply")))
        self.assertEqual(git(TREE, "rev-parse", "HEAD"), head)
        self.assertEqual(gitrepo.head_branch(TREE), "newbase")


class BenchBaseTree(unittest.TestCase):
    """build/linux-base: base + the benchmark patch + the series' module."""

    setUp = TreeStage.setUp
    write = TreeStage.write
    commit = TreeStage.commit

    def test_base_measures_the_series_module(self):
        self.write(measure.BENCH_FILE, "module v1\n")
        git(TREE, "add", "-A")
        git(TREE, "commit", "-q", "-s", "-m", "lib: add the benchmark")
        self.commit("mm/slub.c", "line 3\n", "line three\n", "mm: speed")
        self.commit(measure.BENCH_FILE, "v1", "v2", "lib: benchmark fix")
        export.export()
        path = basetree.make()
        with open(os.path.join(path, measure.BENCH_FILE)) as f:
            self.assertEqual(f.read(), "module v2\n")
        with open(os.path.join(path, "mm/slub.c")) as f:
            self.assertIn("line 3\n", f.read())  # no series change but the module
        head = git(path, "rev-parse", "HEAD")
        self.assertEqual(basetree.make(), path)
        self.assertEqual(git(path, "rev-parse", "HEAD"), head)  # up to date: kept
        # The series changes its module again: base follows.
        self.commit(measure.BENCH_FILE, "v2", "v3", "lib: benchmark fix 2")
        basetree.make()
        with open(os.path.join(path, measure.BENCH_FILE)) as f:
            self.assertEqual(f.read(), "module v3\n")
        self.assertEqual(len(git(path, "rev-list", "base..HEAD").split()), 2)


class CommandLine(unittest.TestCase):
    def run_bulk(self, *args, env=None):
        bulk = os.path.join(hermetic.ROOT, "bulk")
        return subprocess.run([sys.executable, bulk] + list(args),
                              capture_output=True, text=True,
                              env=dict(os.environ, **(env or {})))

    def assert_one_line(self, p, text):
        self.assertEqual(p.returncode, 1)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn(text, p.stderr)

    def test_export_without_a_tree(self):
        shutil.rmtree(TREE, ignore_errors=True)
        self.assert_one_line(self.run_bulk("export"),
                             "[export] no kernel tree at %s: run ./bulk tree" % TREE)

    def test_tree_outside_build_is_refused(self):
        p = self.run_bulk("build", "slub", "--tree", "../x")
        self.assertEqual(p.returncode, 2)
        self.assertIn("invalid choice: '../x'", p.stderr)

    def test_no_dpkg(self):
        bindir = os.path.join(hermetic.SCRATCH, "nodpkg")
        os.makedirs(bindir, exist_ok=True)
        for tool in ("git", "tar", "xz"):
            if not os.path.exists(os.path.join(bindir, tool)):
                os.symlink(shutil.which(tool), os.path.join(bindir, tool))
        p = self.run_bulk("base", env={"PATH": bindir})
        self.assert_one_line(p, "[base] missing tool(s): dpkg-query, dpkg; "
                             "run ./bulk setup")

    def test_kunit_steps_on_a_fresh_clone_fail_saying_what_to_run(self):
        fresh = os.path.join(hermetic.SCRATCH, "fresh-build")
        p = self.run_bulk("test", "--only", "kunit", env={"SLABBULK_BUILD": fresh})
        self.assertEqual(p.returncode, 1)
        fails = [l for l in p.stdout.splitlines() if l.startswith("FAIL kunit: ")]
        self.assertEqual(len(fails), len(kunit.KUNIT_RUNS))
        self.assertIn("run ./bulk tree", p.stdout)
        self.assertEqual(p.stdout.splitlines()[-1],
                         "0 passed, %d failed, 0 skipped" % len(kunit.KUNIT_RUNS))

    def test_config_list(self):
        p = self.run_bulk("config", "--list")
        self.assertEqual(p.returncode, 0)
        names = [l.split()[0] for l in p.stdout.splitlines()]
        for name in ("slub", "slab", "slob", "slub-debug", "slub-kfence",
                     "slob-lockhold", "slub-net"):
            self.assertIn(name, names)
        self.assertEqual(names, list(kconfig.CONFIG_SETS))
        self.assertIn("slub  ", p.stdout)
        self.assertIn("common + hardening + slub + bench", p.stdout)

    def test_wrong_argument_is_refused(self):
        p = self.run_bulk("boot", "slub", "--mode", "fast")
        self.assertEqual(p.returncode, 2)
        self.assertIn("invalid choice", p.stderr)

    def test_unknown_config_is_a_clear_error(self):
        p = self.run_bulk("config", "defconfig")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown config 'defconfig'", p.stderr)
        self.assertIn("slub-debug", p.stderr)  # what is allowed

    def test_bad_bench_options(self):
        p = self.run_bulk("bench", "--alloc", "slqb")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--alloc", p.stderr)
        p = self.run_bulk("bench", "--tests", "az")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--tests", p.stderr)

    def test_unknown_test_group(self):
        p = self.run_bulk("test", "--only", "nosuch")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown step group", p.stderr)


if __name__ == "__main__":
    unittest.main()
