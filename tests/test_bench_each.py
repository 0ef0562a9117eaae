"""Unit tests for harness/bench_each.py (./bulk bench-each), stdlib
unittest only."""
import argparse
import json
import os
import unittest
from unittest import mock

import hermetic  # (first: harness on sys.path, scratch build/)
import bench_each
import cli
import record
import registry
from benchparse import Record, Run
from common import StageError


def rec(test, variant, n, per_obj):
    return Record(test, variant, n, 256, 1000, int(per_obj * 1000), 0, per_obj)


def run(*records):
    return Run("slub", 1000000, True, {}, list(records), [])


def patch(n, files, subject=None):
    return bench_each.Patch(n, "c%d" % n, subject or "patch %d" % n,
                            tuple(files))


class MovesKernel(unittest.TestCase):
    def test_allocator_files(self):
        self.assertTrue(bench_each.moves_kernel("slub", ["mm/slub.c"]))
        self.assertFalse(bench_each.moves_kernel("slub", ["mm/slab.c"]))
        self.assertTrue(bench_each.moves_kernel("slab", ["mm/slab.c"]))
        self.assertFalse(bench_each.moves_kernel("slob", ["mm/slub.c",
                                                          "mm/slab.c"]))
        # Shared files move every allocator.
        for alloc in registry.ALLOCATORS:
            self.assertTrue(bench_each.moves_kernel(alloc, ["mm/slab.h"]))
            self.assertTrue(bench_each.moves_kernel(alloc, ["net/core/skbuff.c"]))

    def test_docs_and_test_suites_do_not(self):
        self.assertFalse(bench_each.moves_kernel("slub", [
            "Documentation/core-api/slab-bulk.rst", "MAINTAINERS",
            "lib/slab_bulk_kunit.c", "lib/slab_bulk_stress.c",
            "tools/testing/kunit/configs/slab_bulk.config"]))
        self.assertTrue(bench_each.moves_kernel("slub", [
            "lib/slab_bulk_kunit.c", "mm/slub.c"]))


class Plan(unittest.TestCase):
    PATCHES = [patch(1, ["mm/slub.c"]), patch(2, ["lib/slab_bulk_bench.c"]),
               patch(3, ["Documentation/x.rst"]), patch(4, ["mm/slab.c"]),
               patch(5, ["mm/slub.c"]), patch(6, ["lib/slab_bulk_kunit.c"])]
    HAS = [False, True, True, True, True, True]

    def test_slub(self):
        p = bench_each.plan("slub", self.PATCHES, self.HAS)
        # The module's patch is the baseline; the tip is always booted.
        self.assertEqual([x.number for x in p.measured], [2, 5, 6])
        self.assertEqual([x.number for x, _ in p.skipped], [3, 4])
        self.assertEqual([x.number for x in p.before], [1])

    def test_slab_and_range(self):
        p = bench_each.plan("slab", self.PATCHES, self.HAS, first=4, last=5)
        self.assertEqual([x.number for x in p.measured], [2, 4, 5])
        # Patch 3 is left out by --from: said so, its changes go to p4.
        self.assertEqual([(x.number, why.split(":")[0]) for x, why in p.skipped],
                         [(3, "before --from 4")])

    def test_no_module_is_an_error(self):
        with self.assertRaises(StageError) as e:
            bench_each.plan("slub", self.PATCHES[:1], [False])
        self.assertIn("slab_bulk_bench.c", str(e.exception))


class Moves(unittest.TestCase):
    def test_threshold_and_variants(self):
        prev = run(rec("a", "bulk", 8, 100.0), rec("a", "bulk", 16, 100.0),
                   rec("a", "fallback", 8, 200.0), rec("c", "order_bulk", 8, 50.0))
        cur = run(rec("a", "bulk", 8, 98.0), rec("a", "bulk", 16, 100.5),
                  rec("a", "fallback", 8, 203.0), rec("c", "order_bulk", 8, 50.0))
        ms = bench_each.moves(prev, cur, "ac")
        self.assertEqual([(m.variant, m.key, round(100 * m.change, 1))
                          for m in ms], [("bulk", 8, -2.0), ("fallback", 8, 1.5)])

    def test_tests_not_asked_are_left_out(self):
        prev = run(rec("c", "order_bulk", 8, 50.0))
        cur = run(rec("c", "order_bulk", 8, 60.0))
        self.assertEqual(bench_each.moves(prev, cur, "a"), [])
        self.assertEqual(len(bench_each.moves(prev, cur, "c")), 1)


class Markdown(unittest.TestCase):
    def cols(self):
        return [bench_each.Column("base", "base", "6.1", run(rec("a", "bulk", 8, 100.0))),
                bench_each.Column("p4", "c4", "add the module",
                                  run(rec("a", "bulk", 8, 100.0))),
                bench_each.Column("p7", "c7", "make it fast",
                                  run(rec("a", "bulk", 8, 50.0),
                                      rec("a", "bulk", 16, 40.0)))]

    def test_tables_and_moves(self):
        md = bench_each.markdown("slub", "./bulk bench-each --alloc slub --tests a",
                                 "a", self.cols(), [("patch 5, docs", "why")],
                                 ["patch 1, a fix"])
        self.assertIn("| n | base | p4 | p7 |", md)
        self.assertIn("| 8 | 100.0 | 100.0 | 50.0 |", md)
        self.assertIn("| 16 | - | - | 40.0 |", md)
        self.assertIn("### p4: add the module (with patch 1 before it)\n\n"
                      "No row moves", md)
        self.assertIn("| a | quick reuse: alloc N then free N | bulk | n=8 | "
                      "100.0 | 50.0 | -50.0% |", md)
        self.assertIn("- patch 5, docs", md)
        self.assertIn("patch 1, a fix", md)

    def test_report_rerenders_from_json(self):
        scratch, _ = hermetic.record_roots(self)
        d = os.path.join(scratch, "per-patch")
        st = record.Stamp("c0ffee", "6.1.1-1", "", "2026-01-01 00:00 UTC", "cmd")
        bench_each.write("slub", "cmd", "a", self.cols(), [], [], st=st)
        with open(os.path.join(d, "bench-each-slub.md")) as f:
            first = f.read()
        os.remove(os.path.join(d, "bench-each-slub.md"))
        with mock.patch("sys.stderr"):
            self.assertEqual(bench_each.rerender("slub"), 0)
        with open(os.path.join(d, "bench-each-slub.md")) as f:
            self.assertEqual(f.read(), first)  # the stamp of the run too
        with open(os.path.join(d, "bench-each-slub.json"), "w") as f:
            json.dump({"columns": [{}]}, f)
        with self.assertRaises(StageError) as e, mock.patch("sys.stderr"):
            bench_each.rerender("slub")
        self.assertIn("does not parse", str(e.exception))

    def test_reading_options_take_the_committed_record_first(self):
        scratch, committed = hermetic.record_roots(self)
        bench_each.write("slub", "scratch run", "a", self.cols(), [], [])
        with mock.patch("sys.stderr") as err:
            self.assertEqual(bench_each.load("slub").command, "scratch run")
        self.assertIn(scratch, str(err.mock_calls))
        bench_each.write("slub", "recorded run", "a", self.cols(), [], [],
                         record=True)
        with mock.patch("sys.stderr") as err:
            self.assertEqual(bench_each.load("slub").command, "recorded run")
        self.assertIn(committed, str(err.mock_calls))

    def test_table_for_a_commit_message(self):
        cols = self.cols()
        cols[2].run.results.append(rec("a", "fallback", 8, 190.0))
        cols[0].run.results.append(rec("a", "single", 1, 170.0))
        cols[1].run.results.append(rec("a", "single", 1, 166.0))
        cols[2].run.results.append(rec("a", "single", 1, 165.0))
        out = bench_each.table_block(cols, 7, bench_each.parse_rows(
            "a/bulk:8,16; a/single:1"))
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["test", "N", "fallback", "base",
                                            "before", "after"])
        self.assertEqual(lines[1].split(), ["test", "a,", "quick", "reuse",
                                            "8", "190.0", "100.0", "100.0",
                                            "50.0"])
        self.assertEqual(lines[2].split(), ["16", "-", "-", "-", "40.0"])
        self.assertEqual(lines[3].split(), ["single", "alloc+free", "-", "-",
                                            "170.0", "166.0", "165.0"])
        with self.assertRaises(StageError) as e:
            bench_each.table_block(cols, 4, bench_each.parse_rows("a/bulk:8"))
        self.assertIn("--table 4", str(e.exception))

    def test_table_rows_are_checked(self):
        for bad in ("a/bulk", "a:8", "z/bulk:8", "a/nosuch:8", "a/bulk:x",
                    "f/conc_alloc:64", ""):
            with self.assertRaises(StageError, msg=bad) as e:
                bench_each.parse_rows(bad)
            self.assertIn("--rows", str(e.exception))
        args = argparse.Namespace(alloc="slub", tests="abcdeg", first=1,
                                  last=None, message=None, report=False,
                                  table=37, rows="")
        with self.assertRaises(StageError) as e:
            bench_each.main(args)
        self.assertIn("needs --rows", str(e.exception))

    def test_report_without_json_says_what_to_run(self):
        hermetic.record_roots(self)
        with self.assertRaises(StageError) as e:
            bench_each.rerender("slab")
        self.assertIn("./bulk bench-each --alloc slab", str(e.exception))

    def test_a_range_gets_its_own_file(self):
        """A run limited with --from/--to never overwrites the record of
        every patch, and the reading options find it with the same range."""
        cols = Message().cols()
        hermetic.record_roots(self)
        bench_each.write("slub", "./bulk bench-each --alloc slub", "a",
                         cols, [], [])
        md = bench_each.write("slub", "cmd", "a", cols[:2], [], [], 40, 41)
        self.assertEqual(os.path.basename(md), "bench-each-slub-p40-p41.md")
        with mock.patch("sys.stderr"):
            self.assertEqual(len(bench_each.load("slub").cols), 3)
            self.assertEqual(len(bench_each.load("slub", 40, 41).cols), 2)
        self.assertEqual(bench_each.out_name("slub", 7), "bench-each-slub-p7-ptip")
        with self.assertRaises(StageError) as e:
            bench_each.load("slub", 7)
        self.assertIn("--alloc slub --from 7 first", str(e.exception))


class Args(unittest.TestCase):
    def parse(self, *argv):
        return cli.parser().parse_args(["bench-each", *argv])

    def test_defaults(self):
        a = self.parse()
        self.assertEqual((a.alloc, a.tests, a.first, a.last, a.report),
                         ("slub", "abcdeg", 1, None, False))
        self.assertEqual(bench_each.check_args(a), "abcdeg")

    def test_bad_arguments(self):
        # As given by a caller other than the command line, whose parser
        # refuses a bad --alloc or --from itself (tests/test_cli.py).
        for given, what in (({"alloc": "slub-stats"}, "--alloc"),
                            ({"tests": "af"}, "--tests"),
                            ({"tests": "aa"}, "--tests"),
                            ({"tests": ""}, "--tests"),
                            ({"first": 0}, "--from"),
                            ({"first": 9, "last": 5}, "--from")):
            with self.subTest(given=given):
                args = self.parse()
                vars(args).update(given)
                with self.assertRaises(StageError) as e:
                    bench_each.check_args(args)
                self.assertIn(what, str(e.exception))

    def test_namespace_shape(self):
        a = argparse.Namespace(alloc="slub", tests="c,a", first=1, last=None,
                               report=False)
        self.assertEqual(bench_each.check_args(a), "ac")



class Message(unittest.TestCase):
    def cols(self):
        prev = run(*[rec("a", "bulk", n, 100.0) for n in range(1, 20)])
        cur = run(*[rec("a", "bulk", n, 100.0 - n if n > 1 else 100.0)
                    for n in range(1, 20)])
        return [bench_each.Column("base", "base", "6.1", prev),
                bench_each.Column("p4", "c4", "module", prev),
                bench_each.Column("p7", "c7", "fast", cur)]

    def test_largest_moves_in_order_and_the_rest_counted(self):
        text = bench_each.message_block("slub", "./bulk bench-each --alloc slub",
                                        "a", self.cols(), 7)
        lines = text.splitlines()
        self.assertTrue(all(len(x) <= 72 for x in lines), lines)
        self.assertIn("patch 4 -> this patch", " ".join(lines))
        rows = [x.split() for x in lines if x.startswith("  a ")]
        # n=2..19 move by more than 1%; the twelve largest are 8..19.
        self.assertEqual([int(r[2]) for r in rows], list(range(8, 20)))
        self.assertEqual(rows[-1], ["a", "bulk", "19", "100.0", "81.0", "-19.0%"])
        self.assertIn("(6 more rows move, from -7.0% to -2.0%)", text)
        self.assertIn("at every patch", " ".join(lines))

    def test_the_rest_shows_rows_made_dearer(self):
        cols = self.cols()
        # n=2 gets dearer by 3%, less than any of the twelve largest moves.
        cur = run(*[rec("a", "bulk", n, 100.0 - n if n > 2 else
                        (103.0 if n == 2 else 100.0)) for n in range(1, 20)])
        cols[2] = bench_each.Column("p7", "c7", "fast", cur)
        text = bench_each.message_block("slub", "./bulk bench-each --alloc slub",
                                        "a", cols, 7)
        self.assertIn("(6 more rows move, from -7.0% to +3.0%)", text)

    def test_a_limited_run_names_the_patches_it_booted(self):
        text = bench_each.message_block(
            "slub", "./bulk bench-each --alloc slub --from 7", "a",
            self.cols(), 7)
        joined = " ".join(text.split())
        self.assertIn("Re-taken on v2 at patch 4 and this one", joined)
        self.assertNotIn("every patch", joined)

    def test_no_move_and_bad_patch(self):
        cols = self.cols()
        cols.append(bench_each.Column("p9", "c9", "same", cols[2].run))
        text = bench_each.message_block("slub", "cmd", "a", cols, 9)
        self.assertIn("patch 7 -> this patch", " ".join(text.split()))
        self.assertIn("no row moves by more than 1%", text)
        # p4 also holds the patches before the module: no message of its own.
        for n, what in ((5, "has no column"), (4, "first column after base")):
            with self.assertRaises(StageError) as e:
                bench_each.message_block("slub", "cmd", "a", self.cols(), n)
            self.assertIn(what, str(e.exception))


if __name__ == "__main__":
    unittest.main()
