"""Unit tests for harness/attribution.py (./bulk attribution), stdlib
unittest only: the comment classifier on diff snippets, the gain and
noise-floor arithmetic on small fake records, the arguments, and a whole
run over a tiny tree."""
import argparse
import contextlib
import io
import json
import os
import unittest
from unittest import mock

import hermetic  # (first: harness on sys.path, scratch build/)
import attribution
import bench_each
import cli
import record
from benchparse import Record, Run
from common import TREE, StageError
from test_cli import usage_error


def diff(path, *hunk_lines, old=None, head="@@ -1,9 +1,9 @@"):
    """A git diff of one file with one hunk."""
    a = "/dev/null" if old == "new" else "a/" + path
    return "\n".join(["diff --git a/%s b/%s" % (path, path),
                      "index 1111111..2222222 100644", "--- " + a,
                      "+++ b/" + path, head] + list(hunk_lines)) + "\n"


def counts(lines):
    return (lines.added["code"], lines.added["comment"],
            lines.deleted["code"], lines.deleted["comment"])


class Classifier(unittest.TestCase):
    def test_a_block_opened_on_an_added_line(self):
        got = attribution.count_lines(diff(
            "mm/slub.c",
            " int a;",
            "+/* A new comment",
            "-int b;",
            "+ * that goes on",
            "+ */",
            "+int b2;",
            " int c;",
            "-int d;"))
        # The deleted lines are the old file's: no block is open there.
        self.assertEqual(counts(got), (1, 3, 2, 0))
        self.assertEqual(got.files, ["mm/slub.c"])

    def test_a_block_opened_after_code_on_an_added_line(self):
        got = attribution.count_lines(diff(
            "mm/slab.h",
            "+\tx = 1; /* the count",
            "+\t * of objects */",
            "+\ty = 2;"))
        # The line that opens it after code is code; the next is inside.
        self.assertEqual(counts(got), (2, 1, 0, 0))

    def test_a_hunk_that_starts_inside_a_comment(self):
        got = attribution.count_lines(diff(
            "mm/slub.c",
            " * the context is inside a comment opened above the hunk",
            "- * old words",
            "+ * new words",
            "+ *",
            " */",
            "-\told();",
            "+\tnew();"))
        self.assertEqual(counts(got), (1, 2, 1, 1))

    def test_a_block_deleted_and_a_one_line_comment_added(self):
        got = attribution.count_lines(diff(
            "include/linux/slab.h",
            "-/*",
            "- * gone",
            "- */",
            "+/* one line */",
            "+// and a C99 one",
            "+int f(void); // code with a trailing comment",
            "+",
            "-"))
        self.assertEqual(counts(got), (1, 2, 0, 3))
        self.assertEqual((got.added["blank"], got.deleted["blank"]), (1, 1))

    def test_comment_marks_in_strings_open_nothing(self):
        got = attribution.count_lines(diff(
            "net/core/skbuff.c",
            "+\tpr_info(\"/* not a comment\");",
            "+\tc = '\"';",
            "+\tx = 1;"))
        self.assertEqual(counts(got), (3, 0, 0, 0))

    def test_classify(self):
        self.assertEqual(attribution.classify("/* a", False), ("comment", True))
        self.assertEqual(attribution.classify(" * b", False), ("comment", True))
        self.assertEqual(attribution.classify(" */ x;", True), ("comment", False))
        self.assertEqual(attribution.classify("\t*p = q;", False), ("code", False))
        self.assertEqual(attribution.classify("", True), ("comment", True))
        self.assertEqual(attribution.classify("  ", False), ("blank", False))

    def test_only_kernel_code_is_counted(self):
        for path, counted in (("mm/slub.c", True), ("include/linux/slab.h", True),
                              ("lib/string.c", True), ("net/core/skbuff.c", True),
                              ("lib/slab_bulk_bench.c", False),
                              ("lib/slab_bulk_kunit.c", False),
                              ("net/core/skb_list_test.c", False),
                              ("mm/Kconfig", False), ("lib/Makefile", False),
                              ("Documentation/core-api/slab-bulk.rst", False),
                              ("tools/testing/x.c", False)):
            self.assertEqual(attribution.kernel_file(path), counted, path)
        text = diff("lib/slab_bulk_bench.c", "+int x;", old="new") + diff(
            "mm/Kconfig", "+config X") + diff("mm/slob.c", "+int y;")
        got = attribution.count_lines(text)
        self.assertEqual((counts(got), got.files), ((1, 0, 0, 0), ["mm/slob.c"]))

    def test_a_deleted_file_counts_under_its_old_name(self):
        text = "\n".join(["diff --git a/mm/old.c b/mm/old.c",
                          "deleted file mode 100644", "--- a/mm/old.c",
                          "+++ /dev/null", "@@ -1,2 +0,0 @@", "-/* x */",
                          "-int x;"])
        got = attribution.count_lines(text)
        self.assertEqual((counts(got), got.files), ((0, 0, 1, 1), ["mm/old.c"]))

    def test_numstat(self):
        self.assertEqual(attribution.numstat(
            "3\t1\tmm/slub.c\n2\t0\tlib/slab_bulk_bench.c\n-\t-\tmm/x.h\n"
            "4\t4\tmm/Kconfig\n1\t2\tinclude/linux/slab.h\n"), (4, 3))


def rec(test, variant, n, per_obj, key="n"):
    size = n if key == "size" else 256
    return Record(test, variant, n if key == "n" else 0, size, 1000,
                  int(per_obj * 1000), 0, per_obj)


def run(values):
    """A Run from {(test, variant, n): per_obj}."""
    return Run("slub", 1000000, True, {}, [
        rec(t, v, n, x, "size" if t == "e" else "n")
        for (t, v, n), x in values.items()], [])


BASE = {("a", "bulk", 8): 100.0, ("a", "bulk", 64): 50.0,
        ("a", "bulk", 1024): 80.0, ("a", "fallback", 8): 200.0,
        ("a", "single", 1): 170.0, ("b", "bulk", 32): 90.0,
        ("c", "random_bulk", 64): 260.0, ("d", "kfree_bulk", 64): 160.0,
        ("e", "kmalloc", 256): 30.0, ("g", "head_list", 64): 345.0}


def changed(**by):
    """BASE with some rows scaled: by[key] = factor (key 'a_bulk_8')."""
    out = dict(BASE)
    for k, f in by.items():
        t, v, n = k.split("__")
        out[(t, v, int(n))] *= f
    return out


FLOORS = {"a": 0.005, "b": 0.0002, "c": 0.0016, "d": 0.026, "e": 0.0054,
          "g": 0.0039}


class Gain(unittest.TestCase):
    def setUp(self):
        self.prev = run(BASE)
        self.cur = run(changed(a__bulk__8=0.9, a__bulk__64=1.001,
                               d__kfree_bulk__64=0.98, e__kmalloc__256=1.2,
                               g__head_list__64=0.5, a__fallback__8=0.4))

    def test_key_rows_against_the_column_before(self):
        got = [attribution.key_change(self.prev, self.cur, *k)
               for k in attribution.KEY_ROWS]
        self.assertAlmostEqual(got[0].change, -0.1)
        self.assertEqual((got[0].before, got[0].after), (100.0, 90.0))
        self.assertAlmostEqual(got[1].change, 0.001)
        self.assertAlmostEqual(got[2].change, 0.0)
        self.assertAlmostEqual(got[5].change, -0.02)
        self.assertAlmostEqual(got[7].change, -0.5)
        # A row neither column has.
        self.assertIsNone(attribution.key_change(
            run({}), self.cur, "a", "bulk", 8))

    def test_best_and_worst_over_every_row_loops_included(self):
        best, worst = attribution.extremes(self.prev, self.cur, "abcdeg")
        self.assertEqual((best.test, best.variant, best.key), ("a", "fallback", 8))
        self.assertAlmostEqual(best.change, -0.6)
        self.assertEqual((worst.test, worst.variant, worst.key_name, worst.key),
                         ("e", "kmalloc", "size", 256))
        self.assertAlmostEqual(worst.change, 0.2)
        # Only the tests asked for.
        best, worst = attribution.extremes(self.prev, self.cur, "bc")
        self.assertAlmostEqual(best.change, 0.0)
        self.assertAlmostEqual(worst.change, 0.0)
        self.assertEqual(attribution.extremes(run({}), run({}), "a"),
                         (None, None))

    def test_noise_floor_marks(self):
        got = [attribution.key_change(self.prev, self.cur, *k)
               for k in attribution.KEY_ROWS]
        # -10% against a floor of 0.5%: above it; +0.1%, 0%: not; d's -2%
        # against its 2.6%: not; b's 0% against 0.02%: not.
        self.assertEqual([attribution.above_noise(c, FLOORS) for c in got],
                         [True, False, False, False, False, False, False, True])
        self.assertEqual([attribution.pct(c, FLOORS) for c in got[:3]],
                         ["-10.00%", "+0.10%°", "+0.00%°"])
        self.assertEqual(attribution.pct(got[5], FLOORS), "-2.00%°")
        self.assertEqual(attribution.pct(got[5], None), "-2.00%")
        self.assertIsNone(attribution.above_noise(got[0], None))
        self.assertIsNone(attribution.above_noise(got[0], {"b": 0.1}))
        self.assertEqual(attribution.pct(None, FLOORS), "-")

    def test_a_change_equal_to_the_floor_is_not_above_it(self):
        # 1016 / 1024 - 1 = -2^-7, exactly.
        c = attribution.Change("a", "quick reuse", "bulk", "n", 8, 1024.0,
                               1016.0)
        self.assertFalse(attribution.above_noise(c, {"a": 2 ** -7}))
        self.assertTrue(attribution.above_noise(c, {"a": 0.0078}))

    def test_floors_from_a_noise_record(self):
        roots = hermetic.record_roots(self)
        d = os.path.join(roots[1], "experiments")
        os.makedirs(d)
        with open(os.path.join(d, "noise-slub.json"), "w") as f:
            json.dump({"stamp": {"commit": "abc", "base_recorded": "x",
                                 "base_installed": "x", "date": "d",
                                 "command": "c"},
                       "tip": "1234", "summary": [
                           {"test": "a", "largest": 0.0006, "rows": 64},
                           {"test": "d", "largest": 0.026, "rows": 32}]}, f)
        got = attribution.noise_record("slub")
        self.assertEqual(got.floors, {"a": 0.0006, "d": 0.026})
        self.assertEqual((got.tip, got.stamp.commit), ("1234", "abc"))
        self.assertIsNone(attribution.noise_record("slab"))


def commit(files, subject):
    for path, text in files.items():
        full = os.path.join(TREE, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    hermetic.git(TREE, "add", "-A")
    hermetic.git(TREE, "commit", "-q", "-m", subject)
    return hermetic.git(TREE, "rev-parse", "HEAD").strip()


class WholeRun(unittest.TestCase):
    """base + 4 patches: a fix before the benchmark module, the module, a
    documentation patch (no row), a SLUB change."""

    def setUp(self):
        self.scratch, self.committed = hermetic.record_roots(self)
        hermetic.make_repo(TREE)
        slub = "".join("line %d\n" % i for i in range(20))
        self.c1 = commit({"mm/slub.c": slub.replace(
            "line 3\n", "line 3\n/*\n * why\n */\nfix();\n")}, "mm/slub: fix")
        self.c2 = commit({"lib/slab_bulk_bench.c": "int bench;\n",
                          "lib/Makefile": "obj-y += x\n"}, "mm/slab: bench")
        self.c3 = commit({"Documentation/x.rst": "doc\n"}, "doc")
        self.c4 = commit({"mm/slub.c": slub.replace(
            "line 3\n", "line 3\n/*\n * why\n */\nfix();\n").replace(
            "line 10\n", "faster(); /* yes */\n")}, "mm/slub: faster")
        self.cols = [
            bench_each.Column("base", "base", "6.1", run(BASE)),
            bench_each.Column("p2", self.c2, "mm/slab: bench",
                              run(changed(a__bulk__8=0.99))),
            bench_each.Column("p4", self.c4, "mm/slub: faster",
                              run(changed(a__bulk__8=0.99 * 0.5,
                                          a__single__1=1.001)))]

    def write_bench(self, cols, record_it):
        bench_each.write("slub", "./bulk bench-each --alloc slub --tests "
                         "abcdeg", "abcdeg", cols,
                         [("patch 3, doc", "touches only documentation")],
                         ["patch 1, mm/slub: fix"], record=record_it)

    def write_noise(self):
        d = record.folder("experiments", True)
        with open(os.path.join(d, "noise-slub.json"), "w") as f:
            json.dump({"tip": self.c4, "summary": [
                {"test": t, "largest": x} for t, x in FLOORS.items()]}, f)

    def attribution(self, record_it=False):
        out = io.StringIO()
        with mock.patch("tree.is_exported_series", return_value=True), \
                mock.patch("attribution.say"), \
                contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            attribution.main(argparse.Namespace(alloc="slub",
                                                record=record_it))
        folder = self.committed if record_it else self.scratch
        with open(os.path.join(folder, "per-patch",
                               "attribution-slub.json")) as f:
            return json.load(f), out.getvalue(), err.getvalue()

    def test_rows_lines_gain_and_noise(self):
        self.write_bench(self.cols, True)
        self.write_noise()
        d, md, err = self.attribution(record_it=True)
        self.assertIn("attribution: reading ", err)
        self.assertEqual(d["bench_each"]["path"], os.path.join(
            self.committed, "per-patch", "bench-each-slub.json"))
        self.assertEqual(set(d["stamp"]), {"commit", "base_recorded",
                                           "base_installed", "date",
                                           "command"})
        rows = {p["number"]: p for p in d["patches"]}
        # The documentation patch cannot change the kernel: no row.
        self.assertEqual(sorted(rows), [1, 2, 4])
        self.assertEqual(rows[1]["lines"]["added"],
                         {"code": 1, "comment": 3, "blank": 0})
        self.assertEqual(rows[2]["lines"]["files"], [])
        self.assertEqual((rows[4]["lines"]["added"]["code"],
                          rows[4]["lines"]["deleted"]["code"]), (1, 1))
        # Patch 1 is before the module: its changes are in p2's column.
        self.assertEqual((rows[1]["column"], rows[1]["own_column"],
                          rows[1]["key_rows"][0]), ("p2", False, None))
        self.assertEqual((rows[2]["column"], rows[2]["against"],
                          rows[2]["together_with"]), ("p2", "base", [1]))
        self.assertAlmostEqual(rows[2]["key_rows"][0]["change"], -0.01)
        self.assertTrue(rows[2]["key_rows"][0]["above_noise"])
        self.assertEqual((rows[4]["column"], rows[4]["against"]), ("p4", "p2"))
        single = rows[4]["key_rows"][6]
        self.assertEqual((single["test"], single["variant"], single["n"]),
                         ("a", "single", 1))
        self.assertAlmostEqual(single["change"], 0.001)
        self.assertEqual((single["noise_floor"], single["above_noise"]),
                         (0.005, False))
        self.assertAlmostEqual(rows[4]["best"]["change"], -0.5)
        self.assertAlmostEqual(rows[4]["worst"]["change"], 0.001)
        self.assertEqual(d["noise"]["tip_is"], "the series' tip now")
        self.assertEqual(d["costs"]["stack"]["per_patch"],
                         "not measured per patch")
        self.assertIn("| noise floor | | | | ±0.50% |", md)
        self.assertIn("| 4 | +1/−1 | +0/−0 | p4 vs p2 | -50.00% |", md)
        self.assertIn("| 1 | +1/−0 | +3/−0 | in p2 vs base |", md)
        self.assertIn("| +0.10%° |", md)

    def test_a_record_of_another_series_is_passed_over(self):
        stale = list(self.cols)
        stale[2] = bench_each.Column("p4", "0" * 40, "mm/slub: other", stale[2].run)
        self.write_bench(stale, True)
        self.write_bench(self.cols, False)
        d, _, err = self.attribution()
        self.assertIn("is not of this series (column p4 is 'mm/slub: other', "
                      "patch 4 is 'mm/slub: faster')", err)
        self.assertTrue(d["bench_each"]["path"].endswith(os.path.join(
            "build", "results", "per-patch", "bench-each-slub.json")))
        self.assertIsNone(d["noise"])

    def test_another_version_of_a_patch_is_not_this_series(self):
        moved = list(self.cols)
        moved[2] = bench_each.Column("p4", self.c3, "mm/slub: faster",
                                     moved[2].run)
        self.write_bench(moved, False)
        with self.assertRaises(StageError) as e:
            self.attribution()
        self.assertIn("column p4 was measured on another version of patch 4",
                      str(e.exception))
        self.assertIn("run ./bulk bench-each --alloc slub", str(e.exception))

    def test_no_record(self):
        with self.assertRaises(StageError) as e:
            self.attribution()
        self.assertIn("no bench-each record of this series", str(e.exception))


class Arguments(unittest.TestCase):
    def test_usage_errors(self):
        self.assertIn("unknown allocator config 'slub-stats'",
                      usage_error(["attribution", "--alloc", "slub-stats"]))
        self.assertIn("unknown allocator config 'slub,slab'",
                      usage_error(["attribution", "--alloc", "slub,slab"]))
        self.assertIn("unrecognized arguments: --tests",
                      usage_error(["attribution", "--tests", "a"]))
        self.assertIn("did you mean --record?",
                      usage_error(["attribution", "--recrod"]))

    def test_check_args(self):
        with self.assertRaises(StageError) as e:
            attribution.check_args(argparse.Namespace(alloc="slqb"))
        self.assertIn("--alloc takes one of slub, slab, slob", str(e.exception))
        attribution.check_args(argparse.Namespace(alloc="slob"))

    def test_options(self):
        args = cli.parser().parse_args(["attribution", "--record"])
        self.assertEqual((args.alloc, args.record), ("slub", True))


if __name__ == "__main__":
    unittest.main()
