"""Unit tests of the stress stage's parsing, fault knobs and report."""
import argparse
import dataclasses
import json
import os
import re
import tempfile
import unittest
from unittest import mock

import hermetic  # noqa: F401
import stress
from common import StageError

LOG = """\
harness: loading slab_bulk_stress params 'seconds=15 rounds=2'
KTAP version 1
1..1
    KTAP version 1
    # Subtest: slab_bulk_stress
    1..1
        # slab_bulk_stress_round: stress round=1 cache=plain threads=2 bulk_allocs=10 bulk_objs=900 bulk_fails=2 bulk_frees=8 single_allocs=5 single_fails=1 remote_frees=40 shrinks=1 lost=0
        # slab_bulk_stress_round: stress round=1 cache=kmalloc threads=2 kfree_bulks=7 kmalloc_objs=70 kmalloc_fails=3 remote_frees=9 lost=0
        # slab_bulk_stress_round: stress round=1 memcg_pages_before=12 memcg_pages_after=13
        # slab_bulk_stress_round: stress round=2 cache=plain threads=2 bulk_allocs=1 bulk_objs=1 bulk_fails=0 bulk_frees=1 single_allocs=0 single_fails=0 remote_frees=0 shrinks=0 lost=-1
"""


class Parse(unittest.TestCase):
    def test_round_lines_become_rows(self):
        rows = stress.parse_rounds(LOG)
        self.assertEqual(len(rows), 4)
        self.assertEqual(rows[0]["round"], "1")
        self.assertEqual(rows[0]["cache"], "plain")
        self.assertEqual(rows[0]["bulk_objs"], "900")
        self.assertEqual(rows[2]["memcg_pages_after"], "13")

    def test_totals_count_injected_failures_and_lost(self):
        t = stress.totals(stress.parse_rounds(LOG))
        self.assertEqual(t["bulk_allocs"], 11)
        self.assertEqual(t["injected"], 2 + 1 + 3)
        self.assertEqual(t["remote_frees"], 49)
        self.assertEqual(t["lost"], 0)

    def test_a_lost_object_counts(self):
        t = stress.totals(stress.parse_rounds(LOG.replace("shrinks=1 lost=0", "shrinks=1 lost=5")))
        self.assertEqual(t["lost"], 5)

    def test_no_count_anywhere_is_minus_one(self):
        t = stress.totals([{"round": "1", "cache": "plain", "lost": "-1"}])
        self.assertEqual(t["lost"], -1)


class Knobs(unittest.TestCase):
    def test_both_injections_target_the_threads_only(self):
        text = stress.fault_append(3)
        for attr in ("failslab", "fail_page_alloc"):
            d = "harness.write=/sys/kernel/debug/%s/" % attr
            self.assertIn(d + "probability:3", text)
            self.assertIn(d + "task-filter:Y", text)
            self.assertIn(d + "ignore-gfp-wait:N", text)
            self.assertIn(d + "times:-1", text)
            self.assertIn(d + "verbose:0", text)
        self.assertIn("fail_page_alloc/min-order:0", text)
        self.assertNotIn("failslab/min-order", text)

    def test_slob_gets_no_failslab_knobs(self):
        line = stress.cmdline(stress.StressRun("slob-debug", "smp"), 10, 1, 7)
        self.assertIn("fail_page_alloc/probability", line)
        self.assertNotIn("failslab", line)
        self.assertIn("failslab/probability", stress.cmdline(stress.StressRun("slab-faults"), 10, 1, 7))

    def test_cmdline_without_faults_has_no_knobs(self):
        r = stress.StressRun("slub-faults", "smp", "init_on_free=1", faults=False)
        line = stress.cmdline(r, 20, 3, 7)
        self.assertIn("slab_bulk_stress.seconds=20", line)
        self.assertIn("slab_bulk_stress.rounds=3", line)
        self.assertIn("init_on_free=1", line)
        self.assertNotIn("harness.write", line)

    def test_every_run_has_its_own_log_tag(self):
        runs = stress.select("all")
        self.assertEqual(len(runs), len(set(runs)))
        tags = {(r.config, r.tag()) for r in runs}
        self.assertEqual(len(tags), len(runs))


class Arguments(unittest.TestCase):
    def test_unknown_config_is_named(self):
        with self.assertRaisesRegex(StageError, "unknown stress config.*nope"):
            stress.select("nope")

    def test_config_names_select_each_run_once(self):
        runs = stress.select("slob-debug")
        self.assertEqual(len(runs), len(set(runs)))
        with self.assertRaisesRegex(StageError, "unknown stress config"):
            stress.select(",")
        with self.assertRaisesRegex(StageError, "alone"):
            stress.select("soak,slob-debug")

    def test_a_run_alone_by_its_ident(self):
        # A failure's replay names its run alone, not its config's runs.
        every = stress.select("all")
        self.assertEqual(len({r.ident() for r in every}), len(every))
        for r in every:
            self.assertEqual(stress.select(r.ident()), [r])
            self.assertRegex(r.ident(), r"^[\w.-]+:[\w.-]+$")
        r = stress.SMALL_RUNS[0]
        self.assertGreater(len(stress.select(r.config)), 1)
        self.assertEqual(stress.select(r.config + "," + r.ident()),
                         stress.select(r.config))
        with self.assertRaisesRegex(StageError, "unknown.*slub-faults:nope.*CONFIG:TAG"):
            stress.select("slub-faults:nope")
        self.assertNotIn(":", stress.results_name(r.ident()))

    def check(self, minutes, seconds=None, seed=None):
        stress.check_args(argparse.Namespace(runs="soak", minutes=minutes,
                                             seconds=seconds, seed=seed))

    def test_the_soak_command_takes_no_runs(self):
        # ./bulk soak: the soak's runs, 30 minutes each unless told.
        stress.check_args(argparse.Namespace(minutes=30, seconds=None, seed=None))
        with self.assertRaisesRegex(StageError, "minutes"):
            stress.check_args(argparse.Namespace(minutes=0, seconds=None, seed=None))
        import cli
        args = cli.parser().parse_args(["soak"])
        self.assertEqual((args.cmd, args.minutes, args.record), ("soak", 30, False))

    def test_the_soak_of_some_allocators(self):
        # ./bulk soak --alloc slab,slob: their soak runs, in a record of
        # their own, so that SLUB's in stress.md stays.
        runs = stress.select("soak", "slab,slob")
        self.assertEqual([r.config for r in runs], ["slab-faults", "slob-debug"])
        self.assertEqual(stress.select("soak", ""), stress.SOAK_RUNS)
        self.assertEqual(stress.results_name("soak", "slab,slob"), "soak-slab-slob")
        self.assertEqual(stress.results_name("soak", ""), "stress")
        for empty in (",", ""):
            with self.assertRaisesRegex(StageError, "--alloc '%s'" % empty):
                stress.check_args(argparse.Namespace(
                    minutes=30, seconds=None, seed=None, alloc=empty))
        import cli
        args = cli.parser().parse_args(["soak", "--alloc", "slob"])
        self.assertEqual(args.alloc, "slob")
        with self.assertRaises(SystemExit):
            cli.parser().parse_args(["soak", "--alloc", "slub,slom"])
        # Any order names one record: the registry's order.
        seen = []
        with mock.patch("stress.soak", lambda *a: seen.append(a) or 0):
            for given in ("slob,slab", "slab,,slob", "slob,slub,slab"):
                cli.main(["soak", "--alloc", given])
        self.assertEqual([a[-1] for a in seen], ["slab,slob", "slab,slob", ""])
        self.assertEqual(seen[0][3], "./bulk soak --alloc slab,slob --minutes 30")

    def test_seed_must_fit(self):
        self.check(1, seed=0)
        self.check(1, seed=stress.SEED_MAX)
        for bad in (-1, stress.SEED_MAX + 1):
            with self.assertRaisesRegex(StageError, "--seed"):
                self.check(1, seed=bad)

    def test_minutes_must_be_a_finite_number(self):
        for bad in (float("nan"), float("inf"), -1.0, 0):
            with self.assertRaisesRegex(StageError, "minutes"):
                self.check(bad)

    def test_zero_seconds_is_refused_not_defaulted(self):
        for bad in (0, stress.MAX_ROUND_SECONDS + 1):
            with self.assertRaisesRegex(StageError, "seconds"):
                self.check(1, bad)

    def test_round_lengths_come_from_the_console(self):
        text = ("[    1.000000]         # Subtest: slab_bulk_stress_round\n"
                "[   16.500000]         ok 1 round 1 of 2\n"
                "[   31.000000]         not ok 2 round 2 of 2\n")
        self.assertEqual(stress.round_seconds(text), [15.5, 14.5])
        self.assertEqual(stress.round_seconds("no rounds"), [])

    def test_all_runs_every_allocator_plain_and_debug_on_two_and_four_cpus(self):
        runs = stress.select("all")
        self.assertEqual(len(runs), len(set(runs)))
        kinds = {("slub", "faults"): "slub-faults", ("slub", "debug"): "slub-debug",
                 ("slab", "faults"): "slab-faults", ("slab", "debug"): "slab-debug",
                 ("slob", "faults"): "slob-faults", ("slob", "debug"): "slob-debug"}
        for config in kinds.values():
            for mode in ("smp", "smp4"):
                with self.subTest(config=config, mode=mode):
                    self.assertTrue(any(r.config == config and r.mode == mode
                                        for r in runs))
        self.assertTrue(all(r.config in stress.kconfig.CONFIG_SETS for r in runs))
        # The extra runs stay out of the test command.
        self.assertFalse(set(stress.EXTRA_RUNS) & set(stress.TEST_RUNS))

    def test_named_selections(self):
        self.assertEqual(stress.select("soak"), stress.SOAK_RUNS)
        self.assertEqual(stress.select("test"), stress.TEST_RUNS)
        self.assertEqual(stress.select("small"), stress.SMALL_RUNS)
        self.assertTrue(all(r in stress.TEST_RUNS and r.small for r in stress.SMALL_RUNS))
        self.assertTrue(all(r.config == "slob-debug" for r in stress.select("slob-debug")))

    def test_only_the_soak_writes_results_stress(self):
        self.assertEqual(stress.results_name("soak"), "stress")
        self.assertEqual(stress.results_name("slub-debug,slab-debug"), "stress-slub-debug_slab-debug")
        self.assertEqual(stress.results_name("test"), "stress-test")

    def test_round_length_is_bounded(self):
        with self.assertRaisesRegex(StageError, "seconds per round"):
            stress.run(stress.TEST_RUNS[0], seconds=stress.MAX_ROUND_SECONDS + 1)

    def test_slow_runs_are_lengthened_where_the_full_floors_count(self):
        lines = []

        def fake_boot(config, tree, mode, modules, line, timeout, **kw):
            lines.append(line)
            raise StageError("boot", "stop here")
        r = stress.StressRun("slob-debug", "smp4", floors=stress.SLOW_CALLS,
                             min_seconds=60)
        with mock.patch("stress.check_built", lambda *a: None), \
                mock.patch("stress.boot.boot", fake_boot):
            for full, rounds, seconds in ((True, 1, 15), (False, 1, 15),
                                          (True, 5, 60), (True, 2, 15)):
                with self.assertRaisesRegex(StageError, "stop here"):
                    stress.run(r, seconds=seconds, rounds=rounds, seed=1,
                               full_floors=full)
        got = [re.search(r"seconds=(\d+) ", x).group(1) for x in lines]
        self.assertEqual(got, ["60", "15", "60", "30"])

    def fake_run(self, r, log_text, **kw):
        """run() on a boot whose console is @log_text, with KUnit's verdict
        and the kernel's files faked; the floors' guest seconds are kept."""
        seen = {}
        real = stress.floor_problems

        def floors(r_, t, text, guest_seconds=stress.TEST_SECONDS, full=True):
            seen["guest_seconds"] = guest_seconds
            return real(r_, t, text, guest_seconds, full)
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "boot.log")
            with open(log, "w") as f:
                f.write(log_text)
            booted = mock.Mock(log=log, problems=[], splats=[])
            counts = mock.Mock(passed=kw.get("rounds", 1), skipped=0, failed=[])
            with mock.patch("stress.check_built", lambda *a: None), \
                    mock.patch("stress.boot.boot", lambda *a, **k: booted), \
                    mock.patch("stress.kunit.split_by_module",
                               lambda text, mods: {mods[0]: text}), \
                    mock.patch("stress.kunit.parse", lambda *a: (True, counts)), \
                    mock.patch("stress.round_seconds", lambda text: []), \
                    mock.patch("stress.floor_problems", floors):
                res = stress.run(r, seed=1, **kw)
        return res, seen

    def test_lengthened_runs_scale_their_floors_to_the_time_they_ran(self):
        r = stress.StressRun("slub-debug", "smp4", floors=stress.SLOW_CALLS,
                             min_seconds=stress.SLOW_SECONDS)
        line = ("# slab_bulk_stress_round: stress round=1 cache=plain threads=4 "
                "bulk_allocs=999 bulk_fails=3 bulk_frees=5000 remote_frees=5000 "
                "lost=0\n")
        res, seen = self.fake_run(r, line, seconds=15)
        self.assertEqual(seen["guest_seconds"], stress.SLOW_SECONDS)
        self.assertEqual(res.seconds, stress.SLOW_SECONDS)
        least = stress.scaled_floor(dict(stress.SLOW_CALLS)["bulk_allocs"],
                                    stress.SLOW_SECONDS)
        self.assertGreaterEqual(least, 1000)
        self.assertEqual(res.problems, ["bulk_allocs ran 999 times, below its "
                                        "floor of %d" % least])
        # Capped at the longest round.
        long_run = dataclasses.replace(r, min_seconds=10 * stress.MAX_ROUND_SECONDS)
        res, seen = self.fake_run(long_run, line.replace("999", "99999"), seconds=15)
        self.assertEqual(res.seconds, stress.MAX_ROUND_SECONDS)
        # The test command keeps its 15 s and asks each path once.
        res, seen = self.fake_run(r, line, seconds=15, full_floors=False)
        self.assertEqual((seen["guest_seconds"], res.ok), (15, True))

    def test_a_failed_runs_replay_selects_that_run_alone(self):
        r = stress.TEST_RUNS[1]
        self.assertGreater(len(stress.select(r.config)), 1)
        line = ("# slab_bulk_stress_round: stress round=1 cache=plain threads=4 "
                "bulk_allocs=9 lost=3\n")
        res, _ = self.fake_run(r, line, seconds=15)
        self.assertFalse(res.ok)
        self.assertEqual(res.ident, r.ident())
        argv = res.replay().split()
        self.assertEqual(argv[:3], ["./bulk", "stress", "--runs"])
        self.assertEqual(stress.select(argv[3]), [r])
        self.assertIn("--seed 1 ", res.replay())

    def test_a_round_without_its_shadow_fails(self):
        r = stress.StressRun("slub-faults", "smp")
        line = ("# slab_bulk_stress_round: no shadow of the objects held "
                "(RAM span 20480 MiB)\n"
                "# slab_bulk_stress_round: stress round=1 cache=plain threads=2 "
                "bulk_allocs=9 lost=0\n")
        res, _ = self.fake_run(r, line, seconds=15)
        self.assertFalse(res.ok)
        self.assertTrue(any("without its shadow" in p for p in res.problems),
                        res.problems)

    @staticmethod
    def vmstat(when, allocstall, lazyfree, lazyfreed, oom=0):
        return "".join("harness: %s /proc/vmstat: %s %d\n" % (when, k, v) for k, v in (
            ("allocstall_dma", 0), ("allocstall_normal", allocstall),
            ("allocstall_movable", 1), ("pgsteal_direct", 10 * allocstall),
            ("pgsteal_kswapd", 100 + allocstall), ("pgscan_direct", 999),
            ("pglazyfree", lazyfree), ("pglazyfreed", lazyfreed), ("oom_kill", oom)))

    def small_log(self, end_lazyfreed=700, end_stalls=17, oom=0):
        return (self.vmstat("hog start", 5, 100, 50, min(oom, 1)) +
                self.vmstat("cat", end_stalls, 900, end_lazyfreed, oom))

    def test_vmstat_sums_the_stalls_and_keeps_what_the_table_shows(self):
        got = stress.parse_vmstat(self.vmstat("cat", 7, 1, 2))
        self.assertEqual(got, {"cat": {"allocstall": 8, "pgsteal_direct": 70,
                                       "pgsteal_kswapd": 107, "pglazyfree": 1,
                                       "pglazyfreed": 2, "oom_kill": 0}})
        self.assertEqual(stress.parse_vmstat("harness: status=0\n"), {})

    def test_reclaim_figures_count_from_the_hogs_first_pass(self):
        fig, problems = stress.reclaim_figures(self.small_log())
        self.assertEqual(problems, [])
        self.assertEqual(fig, {"allocstall": 12, "pgsteal_direct": 120,
                               "pgsteal_kswapd": 12, "pglazyfree": 800,
                               "pglazyfreed": 650, "oom_kill": 0})

    def test_a_small_run_must_show_pressure_on_the_suite_and_no_oom_kill(self):
        for log, words in (
                (self.small_log(oom=2), "OOM killer ran 2 times although"),
                (self.small_log(end_lazyfreed=50), "dropped none of the hog's pages"),
                (self.small_log(end_stalls=5),
                 "no task entered direct reclaim after the hog's first pass"),
                (self.vmstat("cat", 17, 900, 700),
                 "no /proc/vmstat after the hog's first pass"),
                (self.small_log().replace("pglazyfreed", "pgother"),
                 "/proc/vmstat has no pglazyfreed")):
            with self.subTest(words=words):
                _, got = stress.reclaim_figures(log)
                self.assertEqual(len(got), 1, got)
                self.assertIn(words, got[0])

    def test_a_small_run_injects_nothing(self):
        with self.assertRaisesRegex(ValueError, "injects no faults"):
            stress.StressRun("slub-faults", "smp4", small=True)
        with self.assertRaisesRegex(ValueError, "injects no faults"):
            stress.StressRun("slub-faults", "smp4", faults=False, pressure=True,
                             small=True)
        self.assertNotIn("harness.hog", stress.cmdline(
            stress.StressRun("slub-faults", "smp4", faults=False), 15, 1, 7))

    def test_small_runs_boot_a_small_guest_with_the_hog_and_no_injection(self):
        r = stress.StressRun("slab-faults", "smp4", stress.CGROUP, faults=False,
                             small=True, floors=stress.CALLS)
        line = stress.cmdline(r, 15, 1, 7)
        self.assertIn("harness.hog=%d " % stress.HOG_MIB, line)
        self.assertIn("harness.cat=/proc/vmstat", line.split())
        self.assertNotIn("fail_page_alloc", line)
        self.assertNotIn("failslab", line)
        self.assertIn(" small", r.name())
        self.assertEqual(r.tag(), "stress-smp4-small-harness.cgroup_stress")
        row = ("# slab_bulk_stress_round: stress round=1 cache=plain threads=4 "
               "bulk_allocs=5000 bulk_frees=5000 remote_frees=5000 lost=0\n"
               "# slab_bulk_stress_round: stress round=1 memcg_pages_before=3 "
               "memcg_pages_after=3\n")
        res, _ = self.fake_run(r, row.replace("lost=0", "bulk_fails=2 softirq_fails=1 lost=0")
                               + self.small_log(), seconds=15)
        self.assertTrue(res.ok, res.problems)
        self.assertEqual(res.reclaim["allocstall"], 12)
        self.assertIn("| slab-faults smp4 small harness.cgroup=stress | 12 | 120 | "
                      "12 | 800 | 650 | 0 | 3 |", stress.render([res], "cmd"))
        res, _ = self.fake_run(r, row, seconds=15)
        self.assertFalse(res.ok)
        self.assertIn("no /proc/vmstat at the end", "; ".join(res.problems))
        self.assertIn("| slab-faults smp4 small harness.cgroup=stress | n/a | n/a | "
                      "n/a | n/a | n/a | n/a | 0 |", stress.render([res], "cmd"))
        # Each allocator has one in the test command, on a kernel whose
        # config has madvise() (configs/reclaim.config).
        small = [x for x in stress.TEST_RUNS if x.small]
        self.assertEqual(sorted(x.config.split("-")[0] for x in small),
                         ["slab", "slob", "slub"])
        for x in small:
            self.assertFalse(x.faults or x.pressure, x.name())
            self.assertIn("reclaim", stress.kconfig.CONFIG_SETS[x.config])
        with open(os.path.join(os.path.dirname(stress.__file__), "..",
                               "configs", "reclaim.config")) as f:
            lines = f.read().split()
        self.assertIn("CONFIG_ADVISE_SYSCALLS=y", lines)

    def test_the_small_guest_gets_its_memory(self):
        seen = []

        def fake_boot(config, tree, mode, modules, line, timeout, **kw):
            seen.append(kw.get("mem"))
            raise StageError("boot", "stop here")
        with mock.patch("stress.check_built", lambda *a: None), \
                mock.patch("stress.boot.boot", fake_boot):
            for small in (True, False):
                with self.assertRaisesRegex(StageError, "stop here"):
                    stress.run(stress.StressRun("slub-faults", "smp4", faults=not small,
                                                small=small), seed=1)
        self.assertEqual(seen, ["%dM" % stress.SMALL_MIB, "1G"])

    def test_exact_mode_is_refused(self):
        with self.assertRaisesRegex(StageError, "several CPUs"):
            stress.run(stress.StressRun("slub-faults", "exact"))


class Report(unittest.TestCase):
    def test_failed_run_says_why(self):
        rows = stress.parse_rounds(LOG)
        ok = stress.StressResult("slub-faults smp faults", "slub-faults", "smp", True, "",
                                 15, 2, ["/x/boot.log"], True, [], 0,
                                 {"passed": 2, "skipped": 0, "failed": 0},
                                 stress.totals(rows), rows, 40)
        bad = stress.StressResult("slob-debug smp4 faults", "slob-debug", "smp4", True, "",
                                  15, 1, ["/x/boot2.log"], False, ["3 objects lost"], 1,
                                  {"passed": 0, "skipped": 0, "failed": 1},
                                  stress.totals([]), [], 40)
        md = stress.render([ok, bad], "./bulk stress")
        self.assertIn("| slub-faults smp faults | 1 | - | 30 s | 40 s | 11 | 901 |", md)
        self.assertIn("FAIL: 3 objects lost", md)
        self.assertIn("| 6 | 0 | 0 | pass |", md)

    def test_merged_boots_keep_floors_and_reclaim_apart(self):
        def one(stalls):
            return stress.StressResult("r small", "slab-faults", "smp4", False, "", 15, 1,
                                       ["/a.log"], True, [], 0, {"passed": 1}, {}, [], 20,
                                       seeds=[stalls], floors={"bulk_allocs": 1000},
                                       reclaim={"allocstall": stalls, "oom_kill": 0})
        got = stress.merge([one(3), one(4)])
        self.assertEqual(got.floors, {"bulk_allocs": 1000})
        self.assertEqual(got.reclaim, {"allocstall": 7, "oom_kill": 0})
        self.assertEqual(got.seeds, [3, 4])

    def test_soak_boots_add_up(self):
        rows = stress.parse_rounds(LOG)
        one = stress.StressResult("r", "slub-faults", "smp4", True, "", 60, 5, ["/a.log"],
                                  True, [], 0, {"passed": 5, "skipped": 0, "failed": 0},
                                  stress.totals(rows), rows, 100)
        two = stress.StressResult("r", "slub-faults", "smp4", True, "", 60, 5, ["/b.log"],
                                  False, ["/b.log: 1 objects lost"], 0,
                                  {"passed": 4, "skipped": 0, "failed": 1},
                                  stress.totals(rows), rows, 120)
        m = stress.merge([one, two])
        self.assertEqual((m.boots, m.rounds, m.wall_seconds), (2, 10, 220))
        self.assertFalse(m.ok)
        self.assertEqual(m.logs, ["/a.log", "/b.log"])
        self.assertEqual(m.totals["bulk_allocs"], 22)
        self.assertEqual(m.cases["failed"], 1)


class Conditions(unittest.TestCase):
    """A run's conditions must show in its boot, or it fails."""

    R = stress.StressRun("slub-faults", "smp4", stress.BUSY)
    GOOD = ("[    0.0] setup_percpu: NR_CPUS:8 nr_cpumask_bits:4 nr_cpu_ids:4 "
            "nr_node_ids:2\n[    0.0] Dynamic Preempt: full\n")

    def test_all_took_effect(self):
        rows = [{"round": "1", "cache": "plain", "threads": "8"}]
        self.assertEqual(stress.condition_problems(self.R, self.GOOD, rows), [])

    def test_each_missing_one_is_named(self):
        rows = [{"round": "1", "cache": "plain", "threads": "4"}]
        text = self.GOOD.replace("Dynamic Preempt: full",
                                 "Dynamic Preempt: voluntary")
        text = text.replace("nr_node_ids:2", "nr_node_ids:1")
        got = stress.condition_problems(self.R, text, rows)
        self.assertEqual(len(got), 3, got)
        self.assertIn("preempt=full asked", got[0])
        self.assertIn("numa=fake=2 asked", got[1])
        self.assertIn("8 threads asked, the rounds ran 4", got[2])

    def test_plain_runs_ask_nothing(self):
        r = stress.StressRun("slub-faults", "smp", stress.CGROUP)
        self.assertEqual(stress.condition_problems(r, "", []), [])

    def test_kcsan_must_be_on_and_its_self_test_pass(self):
        r = stress.StressRun("slub-kcsan", "smp", stress.CGROUP)
        on = ("[    0.2] kcsan: enabled early\n[    0.2] kcsan: non-strict mode "
              "configured\n[    0.7] kcsan: selftest: 4/4 tests passed\n")
        self.assertEqual(stress.condition_problems(r, on, []), [])
        for text in ("", on.replace("4/4", "3/4"),
                     on.replace("enabled early", "enabled by debugfs")):
            with self.subTest(text=text):
                got = stress.condition_problems(r, text, [])
                self.assertEqual(len(got), 1, got)
                self.assertIn("KCSAN", got[0])
        # A kernel without KCSAN asks nothing of it.
        self.assertEqual(stress.condition_problems(
            stress.StressRun("slub-faults", "smp", stress.CGROUP), "", []), [])

    def test_kcsan_kernels_leave_kasan_out(self):
        # KCSAN depends on !KASAN: a set with both would build without it.
        self.assertTrue(os.path.exists(os.path.join(
            os.path.dirname(stress.kconfig.__file__), "..", "configs",
            "kcsan.config")))
        for name, frags in stress.kconfig.CONFIG_SETS.items():
            if "kcsan" in frags:
                with self.subTest(config=name):
                    self.assertFalse({"debug", "slub-debug", "suites-kasan"}
                                     & set(frags))

    def test_kcsan_runs_every_allocator_on_two_and_four_cpus(self):
        runs = stress.select("kcsan")
        self.assertEqual(runs, stress.KCSAN_RUNS)
        self.assertEqual({(r.config.split("-")[0], r.mode) for r in runs},
                         {(a, m) for a in ("slub", "slab", "slob")
                          for m in ("smp", "smp4")})
        for r in runs:
            self.assertIn("kcsan", stress.kconfig.CONFIG_SETS[r.config])
            self.assertTrue(r.faults)
        self.assertFalse(set(runs) & set(stress.TEST_RUNS))
        self.assertTrue(set(runs) <= set(stress.select("all")))

    def test_seed_on_the_command_line_and_in_the_replay(self):
        line = stress.cmdline(self.R, 15, 1, 12345)
        self.assertIn("slab_bulk_stress.seed=12345", line.split())
        res = stress.StressResult("r", "slub-faults", "smp4", True, "", 15, 1,
                                  ["/a.log"], False, ["x"], 0, {}, {}, [], 1,
                                  seeds=[5, 12345], ident=self.R.ident())
        self.assertEqual(res.replay(), "./bulk stress --runs %s "
                         "--seed 12345 --minutes 1 --seconds 15" % self.R.ident())
        # merge() keeps it.
        self.assertEqual(stress.merge([res, res]).ident, self.R.ident())


class Floors(unittest.TestCase):
    """A run whose paths ran fewer times than its floors fails."""

    LINE = ("# slab_bulk_stress_round: stress round=1 cache=plain threads=4 "
            "bulk_allocs=9 lost=0 runs=%d run_objs=5000 lone=1500 kfence=3 "
            "other_node=0%s\n")
    EVENTS = (" free_slowpath=2000 free_slab=1200 alloc_from_partial=1100 "
              "alloc_slab=1300 cmpxchg_double_fail=4")

    def problems(self, r, text):
        return stress.floor_problems(r, stress.totals(stress.parse_rounds(text)), text)

    def test_counts_at_or_above_the_floors_pass(self):
        r = stress.StressRun("slub-faults", "smp4", floors=stress.GROUPED[:2] + stress.SLUB_EVENTS)
        self.assertEqual(self.problems(r, self.LINE % (1000, self.EVENTS)), [])

    def test_a_count_below_its_floor_is_named(self):
        r = stress.StressRun("slub-faults", "smp4", floors=stress.GROUPED[:2])
        got = self.problems(r, self.LINE % (999, ""))
        self.assertEqual(got, ["runs ran 999 times, below its floor of 1000"])

    def test_a_floor_on_an_event_needs_the_counters(self):
        r = stress.StressRun("slab-faults", "smp4", floors=(("free_slab", 1),))
        got = self.problems(r, self.LINE % (1000, ""))
        self.assertEqual(len(got), 1)
        self.assertIn("no CONFIG_SLUB_STATS", got[0])

    def test_the_kmalloc_line_adds_to_the_paths(self):
        text = (self.LINE % (600, "") +
                "# slab_bulk_stress_round: stress round=1 cache=kmalloc threads=4 "
                "kfree_bulks=5 lost=0 runs=400 run_objs=900 lone=7 kfence=0 other_node=2\n")
        t = stress.totals(stress.parse_rounds(text))
        self.assertEqual((t["runs"], t["lone"], t["other_node"]), (1000, 1507, 2))

    def test_hotplug_cycles_have_a_floor(self):
        r = stress.StressRun("slub-faults", "smp4", stress.HOTPLUG, floors=(("hotplug_cycles", 5),))
        text = "# slab_bulk_stress_round: stress round=1 hotplug_cycles=3 hotplug_refused=1\n"
        self.assertEqual(self.problems(r, text), ["hotplug_cycles ran 3 times, below its floor of 5"])
        self.assertEqual(self.problems(r, text.replace("=3 ", "=5 ")), [])

    def test_pressure_fails_pages_alone_at_its_rate(self):
        r = stress.StressRun("slub-faults", "smp4", stress.CGROUP, pressure=True,
                             floors=stress.PRESSURE_FLOOR)
        line = stress.cmdline(r, 15, 1, 7)
        self.assertIn("fail_page_alloc/probability:%d" % stress.PRESSURE_PERCENT, line)
        self.assertNotIn("failslab", line)
        self.assertIn("pressure", r.name())
        self.assertNotEqual(r.tag(), stress.StressRun("slub-faults", "smp4", stress.CGROUP).tag())
        for c in ("slub-faults", "slab-faults"):
            self.assertTrue(any(x.pressure and x.config == c for x in stress.TEST_RUNS), c)

    def test_every_run_has_floors_on_its_paths(self):
        for r in stress.select("all"):
            with self.subTest(run=r.name()):
                keys = dict(r.floors)
                grouped = r.config in ("slub-faults", "slub-kcsan")
                if grouped:
                    # SLUB groups its bulk frees here (no KASAN).
                    self.assertEqual((keys.get("runs"), keys.get("lone")), (1000, 1000))
                    self.assertEqual(keys.get("free_slab"), 1000)
                    if "slub_debug" not in r.append:
                        self.assertEqual(keys.get("alloc_from_partial"), 1000)
                else:
                    self.assertNotIn("runs", keys)
                # Each path at least 1000 times in a boot of the run's
                # recorded length.
                boot_s = max(stress.TEST_SECONDS, r.min_seconds)
                for key in (("runs", "lone") if grouped else
                            ("bulk_allocs", "bulk_frees")) + ("remote_frees",):
                    self.assertGreaterEqual(
                        stress.scaled_floor(keys.get(key, 0), boot_s), 1000, key)
                if stress.HOTPLUG in r.append:
                    self.assertIn("hotplug_cycles", keys)
                if "numa=fake" in r.append:
                    self.assertIn("other_node", keys)

    def test_floors_are_a_quarter_of_what_the_records_counted(self):
        # harness/stress.py's rule, against the records of the runs that
        # have one: a busy host may cut a guest's work to a quarter.
        runs = {r.name(): r for r in stress.select("all")}
        root = os.path.join(os.path.dirname(stress.__file__), "..", "results",
                            "stress")
        for name in ("stress-test.json", "stress-small.json", "stress-kcsan.json"):
            with open(os.path.join(root, name)) as f:
                recorded = json.load(f)["runs"]
            for rec in recorded:
                r = runs.get(rec["run"])
                if r is None:
                    continue
                guest = rec["seconds"] * rec["rounds"]
                for key, per in r.floors:
                    with self.subTest(record=name, run=r.name(), key=key):
                        self.assertLessEqual(4 * per * guest / stress.TEST_SECONDS,
                                             rec["totals"].get(key, 0))

    def test_the_test_command_only_asks_that_each_path_ran(self):
        r = stress.StressRun("slub-faults", "smp4", floors=(("runs", 1000), ("kfence", 200)))
        text = (self.LINE % (5, "")).replace("kfence=3", "kfence=0")
        t = stress.totals(stress.parse_rounds(text))
        self.assertEqual(stress.floor_problems(r, t, text, 15, full=False),
                         ["kfence ran 0 times, below its floor of 1"])
        self.assertEqual(len(stress.floor_problems(r, t, text, 15)), 2)

    def test_floors_scale_with_the_guest_time(self):
        r = stress.StressRun("slub-faults", "smp4", floors=(("runs", 1000),))
        text = self.LINE % (1500, "")
        self.assertEqual(stress.floor_problems(r, stress.totals(stress.parse_rounds(text)), text, 15), [])
        self.assertEqual(stress.floor_problems(r, stress.totals(stress.parse_rounds(text)), text, 30),
                         ["runs ran 1500 times, below its floor of 2000"])
        # A 6-second round needs 400.
        self.assertEqual(stress.scaled_floor(1000, 6), 400)
        self.assertEqual(stress.scaled_floor(10, 1), 1)

    def test_the_paths_table_shows_counts_and_floors(self):
        rows = stress.parse_rounds(self.LINE % (1200, " zeroed=7" + self.EVENTS))
        res = stress.StressResult("slub-faults smp4", "slub-faults", "smp4", True, "", 15, 1,
                                  ["/a.log"], True, [], 0, {}, stress.totals(rows), rows, 30,
                                  seeds=[1], floors={"runs": 1000})
        md = "\n".join(stress.paths_table([res]))
        self.assertIn("| slub-faults smp4 | 1200 (5000) | 1500 | 3 | 0 | 7 | 2000 | 1200 | "
                      "1100 | 1300 | 4 | - | runs 1000 |", md)


if __name__ == "__main__":
    unittest.main()
