"""Unit tests for harness/benchparse.py (stdlib unittest only)."""
import os
import unittest

import hermetic  # noqa: F401  (first: harness on sys.path, scratch build/)
import benchparse
import tables

# results/bench-slub-stats.json as committed, each run cut to its first
# three R and three S records.
EXCERPT = os.path.join(hermetic.HERE, "data", "bench-slub-stats-excerpt.json")

LOG = """\
[    0.000000] Linux version 6.1.192 (root@host) #1 SMP
[    1.234567] slab_bulk_bench: allocator=SLUB tsc_khz=2000000 unit=instructions
[    1.234568] slab_bulk_bench: cache slab_bulk_bench: merged=yes with kmalloc-256 (users 2, object size 256)
[    1.234600] slab_bulk_bench: test a: quick reuse, obj_size=256, per round N allocs then N frees
[    1.300000] slab_bulk_bench: R test=a variant=single n=1 size=256 objs=10000 cycles=500000 empty=20000
[    1.300001] random other driver line
[    1.400000] slab_bulk_bench:    8 - 45 cycles(tsc) 11.303 ns - 17 cycles(tsc) 4.298 ns improved 62.2%
[    1.400001] slab_bulk_bench: R test=a variant=fallback n=8 size=256 objs=10000 cycles=450000 empty=10000
slab_bulk_bench: R test=a variant=bulk n=8 size=256 objs=10000 cycles=170000 empty=10000
[   12.000000] slab_bulk_bench: test f skipped: needs 2 CPUs
[   12.500000] slab_bulk_bench: done
"""


class ParseTest(unittest.TestCase):
    def test_full_log(self):
        res = benchparse.parse(LOG)
        self.assertEqual(res.allocator, "SLUB")
        self.assertEqual(res.tsc_khz, 2000000)
        self.assertTrue(res.done)
        self.assertEqual(res.skipped, {"f": "needs 2 CPUs"})
        self.assertEqual(res.caches, {"slab_bulk_bench": "merged=yes with kmalloc-256 "
                                      "(users 2, object size 256)"})
        self.assertEqual(len(res.results), 3)
        single, fb, bulk = res.results
        self.assertEqual(single.variant, "single")
        self.assertEqual(fb.n, 8)
        self.assertEqual(fb.objs, 10000)
        # Raw figures: cycles / objs, the empty loop not subtracted.
        self.assertAlmostEqual(fb.per_obj, 45.0)
        self.assertAlmostEqual(bulk.per_obj, 17.0)
        self.assertAlmostEqual(single.per_obj, 50.0)
        self.assertEqual(fb.empty, 10000)
        self.assertEqual(bulk.test, "a")
        self.assertIsInstance(bulk.cycles, int)

    def test_timestamps_and_loglevel(self):
        text = ("<6>[ 1234.567890] slab_bulk_bench: R test=e variant=pair n=1 "
                "size=8 objs=4 cycles=40 empty=0\r\n")
        res = benchparse.parse(text)
        self.assertEqual(res.results[0].size, 8)
        self.assertAlmostEqual(res.results[0].per_obj, 10.0)

    def test_missing_done(self):
        text = "\n".join(LOG.splitlines()[:-1])
        res = benchparse.parse(text)
        self.assertFalse(res.done)
        self.assertEqual(len(res.results), 3)

    def test_empty_log(self):
        res = benchparse.parse("")
        self.assertIsNone(res.allocator)
        self.assertFalse(res.done)
        self.assertEqual(res.results, [])

    def test_malformed_value(self):
        text = ("slab_bulk_bench: R test=a variant=bulk n=8 size=256 objs=100 "
                "cycles=12.5 empty=1\n")
        with self.assertRaisesRegex(ValueError, "cycles"):
            benchparse.parse(text)

    def test_missing_key(self):
        text = "[ 1.0] slab_bulk_bench: R test=a variant=bulk n=8 size=256 objs=100 cycles=5\n"
        with self.assertRaisesRegex(ValueError, "empty"):
            benchparse.parse(text)

    def test_bad_token(self):
        text = "slab_bulk_bench: R test=a variant=bulk n=8 garbage size=1 objs=1 cycles=1 empty=0\n"
        with self.assertRaisesRegex(ValueError, "garbage"):
            benchparse.parse(text)

    def test_negative_and_zero_objs(self):
        with self.assertRaises(ValueError):
            benchparse.parse("slab_bulk_bench: R test=a variant=bulk n=-8 size=1 "
                             "objs=1 cycles=1 empty=0\n")
        with self.assertRaises(ValueError):
            benchparse.parse("slab_bulk_bench: R test=a variant=bulk n=8 size=1 "
                             "objs=0 cycles=1 empty=0\n")

    def test_duplicate_key(self):
        with self.assertRaisesRegex(ValueError, "duplicate"):
            benchparse.parse("slab_bulk_bench: R test=a variant=bulk n=8 n=9 size=1 "
                             "objs=1 cycles=1 empty=0\n")

    def test_line_number_in_error(self):
        text = "boot\nslab_bulk_bench: R test=a\n"
        with self.assertRaisesRegex(ValueError, "line 2"):
            benchparse.parse(text)

    def test_other_module_lines_ignored(self):
        text = "other_mod: R test=a variant=bulk\nslab_bulk_bench: test a: header\n"
        res = benchparse.parse(text)
        self.assertEqual(res.results, [])

    def test_stats_line(self):
        text = ("[ 1.0] slab_bulk_bench: S test=a variant=bulk n=8 objs=1000 "
                "alloc_slowpath=12 free_slab=3\n")
        res = benchparse.parse(text)
        self.assertEqual([r.to_json() for r in res.stats], [{"test": "a", "variant": "bulk", "n": 8,
                                         "objs": 1000, "alloc_slowpath": 12,
                                         "free_slab": 3}])
        self.assertEqual(res.results, [])

    def test_stats_line_errors(self):
        for body, msg in (("test=a variant=bulk n=8 objs=0", "objs=0"),
                          ("test=a variant=bulk objs=5", "without n"),
                          ("test=a variant=bulk n=8 objs=5 free_slab=x",
                           "not a number")):
            with self.assertRaisesRegex(ValueError, msg):
                benchparse.parse("slab_bulk_bench: S " + body + "\n")

    def test_stats_table_per_1000(self):
        S = benchparse.StatRecord
        base = benchparse.Run(stats=[
            S("a", "fallback", 8, 2000, {"alloc_slowpath": 10, "free_slowpath": 10}),
            S("a", "bulk", 8, 2000, {"alloc_slowpath": 4, "free_slowpath": 4})])
        series = benchparse.Run(stats=[S("a", "bulk", 8, 2000, {"alloc_slowpath": 2})])
        rows = tables.stats_table("a", ("alloc_slowpath", "free_slowpath"),
                                  base, series)
        self.assertEqual(rows, [tables.Row(8, 10.0, 4.0, 1.0, 0.25)])

    def test_stats_table_frag_variants_and_missing_counter(self):
        # The fragmented shape's S lines pair frag_bulk with frag_fallback;
        # a kernel whose lines lack list_lock (no kprobe) gives no row.
        S = benchparse.StatRecord
        base = benchparse.Run(stats=[
            S("b", "frag_fallback", 64, 1000, {"list_lock": 30}),
            S("b", "frag_bulk", 64, 1000, {"list_lock": 20}),
            S("b", "bulk", 64, 1000, {"list_lock": 99}),
            S("b", "frag_bulk", 128, 1000, {"alloc_slab": 1})])
        series = benchparse.Run(stats=[
            S("b", "frag_bulk", 64, 1000, {"list_lock": 5}),
            S("b", "frag_bulk", 128, 1000, {"alloc_slab": 1})])
        rows = tables.stats_table("b", ("list_lock",), base, series,
                                  "frag_bulk")
        self.assertEqual(rows, [tables.Row(64, 30.0, 20.0, 5.0, 0.25)])



class JsonTest(unittest.TestCase):
    def test_results_json_round_trips_byte_for_byte(self):
        with open(EXCERPT) as f:
            text = f.read()
        report = benchparse.Report.loads(text)
        run = report.allocators["slub-stats"].base_exact
        assert run is not None
        self.assertIsInstance(run.results[0], benchparse.Record)
        self.assertEqual((run.results[0].variant, run.results[0].per_obj),
                         ("single", 149.0451))
        self.assertEqual(run.stats[0].counters["alloc_slowpath"], 0)
        self.assertEqual(report.dumps(), text)

    def test_parsed_run_is_the_json_the_report_writes(self):
        run = benchparse.parse(LOG)
        run.log = "build/logs/x.log"
        self.assertEqual(benchparse.Run.from_json(run.to_json()), run)
        self.assertEqual(run.to_json()["results"][2],
                         {"test": "a", "variant": "bulk", "n": 8, "size": 256,
                          "objs": 10000, "cycles": 170000, "empty": 10000,
                          "per_obj": 17.0})
        self.assertNotIn("log", benchparse.parse(LOG).to_json())

    def test_extra_r_fields_survive(self):
        rec = benchparse.parse_r_line("test=a variant=bulk n=8 size=1 objs=2 "
                                      "cycles=10 empty=2 order=3")
        self.assertEqual(rec.extra, {"order": 3})
        self.assertEqual(benchparse.Record.from_json(rec.to_json()), rec)

    def test_malformed_json_is_refused(self):
        with self.assertRaisesRegex(ValueError, "lacks per_obj"):
            benchparse.Record.from_json({"test": "a", "variant": "b", "n": 1,
                                         "size": 1, "objs": 1, "cycles": 1,
                                         "empty": 0})
        with self.assertRaisesRegex(ValueError, "unknown field"):
            benchparse.AllocRuns.from_json({"base-fast": {}})


class NewTests(unittest.TestCase):
    """Tests h (slob_lock holds) and i (KFENCE sampling): their R lines
    parse, and test i's kfence= field gives the per-million and per-second
    tables."""
    LOG = "\n".join([
        "slab_bulk_bench: allocator=SLUB tsc_khz=1000000 unit=instructions",
        "slab_bulk_bench: R test=h variant=hold_single n=64 size=8 objs=1 "
        "cycles=900 empty=0",
        "slab_bulk_bench: R test=h variant=hold_bulk n=64 size=8 objs=1 "
        "cycles=1500 empty=0 holds=4",
        "slab_bulk_bench: R test=i variant=kfence_loop n=8 size=256 "
        "objs=2000000 cycles=500000000 empty=0 kfence=120",
        "slab_bulk_bench: R test=i variant=kfence_bulk n=8 size=256 "
        "objs=5000000 cycles=500000000 empty=0 kfence=125",
        "slab_bulk_bench: done", ""])

    def test_hold_rows(self):
        run = benchparse.parse(self.LOG)
        spec = [s for s in tables.SPECS if s.test == "h"][0]
        rows = tables.table(spec, run, run)
        self.assertEqual([(r.key, r.fallback, r.series, r.loop_ratio)
                          for r in rows], [(64, 900.0, 1500.0, 1500.0 / 900.0)])
        holds = [r for r in run.results if r.variant == "hold_bulk"][0]
        self.assertEqual(holds.extra["holds"], 4)

    def test_kfence_tables(self):
        run = benchparse.parse(self.LOG)
        per_m = tables.kfence_table(run, run, per_second=False)
        self.assertEqual([(r.key, r.fallback, r.series) for r in per_m],
                         [(8, 60.0, 25.0)])
        per_s = tables.kfence_table(run, run, per_second=True)
        # 500000000 ticks at 1000000 kHz: half a second.
        self.assertEqual([(r.key, r.fallback, r.series) for r in per_s],
                         [(8, 240.0, 250.0)])

    def test_no_kfence_field_no_row(self):
        run = benchparse.parse(self.LOG.replace(" kfence=125", ""))
        self.assertEqual([r.series for r in
                          tables.kfence_table(run, run, per_second=False)], [None])


if __name__ == "__main__":
    unittest.main()
