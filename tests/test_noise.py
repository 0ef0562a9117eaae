"""Unit tests for harness/noise.py (./bulk noise), stdlib unittest only."""
import argparse
import contextlib
import io
import json
import os
import tempfile
import shutil
import unittest
from unittest import mock

import hermetic  # (first: harness on sys.path, scratch build/)
import cli
import noise
from benchparse import Record, Run
from common import StageError


def rec(test, variant, n, per_obj):
    return Record(test, variant, n, 256, 1000, int(per_obj * 1000), 0, per_obj)


def run(*records):
    return Run("slub", 1000000, True, {}, list(records), [])


SOURCE = "// SPDX-License-Identifier: GPL-2.0\n/*\n * SLUB\n */\nint x;\n"


class Variants(unittest.TestCase):
    def test_the_order_covers_each_kind_in_the_first_three(self):
        self.assertEqual([(v.name, v.kind) for v in noise.VARIANTS], [
            ("c1", "code"), ("d1", "data"), ("h1", "heap"), ("c2", "code"),
            ("d2", "data"), ("h2", "heap"), ("c3", "code")])
        self.assertEqual({v.kind for v in noise.VARIANTS[:3]},
                         set(noise.KINDS))
        # The code variants of the first version of ./bulk noise, kept.
        self.assertEqual([(v.size, v.file("slub"), v.top)
                          for v in noise.VARIANTS if v.kind == "code"],
                         [(64, "mm/slub.c", True), (192, "mm/slub.c", False),
                          (128, "init/main.c", False)])

    def test_the_function_is_nops_never_called(self):
        self.assertEqual(noise.pad_code(noise.VARIANTS[0]),
                         "/* ./bulk noise c1: layout padding, never called. */\n"
                         "static noinline __used void slab_bulk_noise_c1(void)\n"
                         "{\n"
                         "\tasm volatile(\".rept 64\\n\\tnop\\n\\t.endr\");\n"
                         "}\n")

    def test_c1_at_the_top_of_the_allocator(self):
        v = noise.VARIANTS[0]
        self.assertEqual([v.file(a) for a in ("slub", "slab", "slob")],
                         ["mm/slub.c", "mm/slab.c", "mm/slob.c"])
        self.assertEqual(noise.padded(v, SOURCE),
                         "// SPDX-License-Identifier: GPL-2.0\n\n" +
                         noise.pad_code(v) + "\n/*\n * SLUB\n */\nint x;\n")

    def test_c2_at_the_end_of_the_allocator(self):
        v = noise.VARIANTS[3]
        self.assertEqual(v.file("slob"), "mm/slob.c")
        self.assertEqual(noise.padded(v, SOURCE),
                         SOURCE + "\n" + noise.pad_code(v))
        self.assertIn(".rept 192\\n", noise.pad_code(v))
        self.assertEqual(noise.padded(v, "int x;"),
                         "int x;\n\n" + noise.pad_code(v))

    def test_c3_in_a_file_linked_before_mm(self):
        v = noise.VARIANTS[6]
        self.assertEqual(v.file("slab"), "init/main.c")
        self.assertEqual(noise.padded(v, SOURCE),
                         SOURCE + "\n" + noise.pad_code(v))
        self.assertEqual(v.describe("slab"), "128 bytes of nops in a "
                         "never-called function at the end of init/main.c")

    def test_d1_an_initialised_array_in_init_main_data(self):
        v = noise.VARIANTS[1]
        self.assertEqual(noise.pad_code(v),
                         "/* ./bulk noise d1: layout padding in .data, never "
                         "read. */\n"
                         "static char slab_bulk_noise_d1[4096] __used = "
                         "{ 1 };\n")
        self.assertEqual(noise.padded(v, SOURCE),
                         SOURCE + "\n" + noise.pad_code(v))
        self.assertEqual(v.describe("slub"), "a used 4096-byte static array "
                         "in .data at the end of init/main.c")

    def test_d2_an_array_in_the_allocator_s_bss(self):
        v = noise.VARIANTS[4]
        self.assertEqual(noise.pad_code(v),
                         "/* ./bulk noise d2: layout padding in .bss, never "
                         "read. */\n"
                         "static char slab_bulk_noise_d2[4160] __used;\n")
        self.assertEqual(noise.padded(v, SOURCE),
                         "// SPDX-License-Identifier: GPL-2.0\n\n" +
                         noise.pad_code(v) + "\n/*\n * SLUB\n */\nint x;\n")
        self.assertEqual(v.describe("slab"), "a used 4160-byte static array "
                         "in .bss at the top of mm/slab.c")

    def test_h1_allocations_kept_from_a_late_initcall(self):
        v = noise.VARIANTS[2]
        code = noise.pad_code(v)
        self.assertEqual(code,
                         "/*\n"
                         " * ./bulk noise h1: MEASUREMENT ONLY, never part of "
                         "the series:\n"
                         " * objects and pages allocated once at boot and "
                         "never freed,\n"
                         " * so that every later allocation starts from other "
                         "slab and\n"
                         " * page positions.\n"
                         " */\n"
                         "static void *slab_bulk_noise_h1_kept[4] __used;\n"
                         "\n"
                         "static int __init slab_bulk_noise_h1(void)\n"
                         "{\n"
                         "\tslab_bulk_noise_h1_kept[0] = kmalloc(64, "
                         "GFP_KERNEL);\n"
                         "\tslab_bulk_noise_h1_kept[1] = kmalloc(256, "
                         "GFP_KERNEL);\n"
                         "\tslab_bulk_noise_h1_kept[2] = kmalloc(1024, "
                         "GFP_KERNEL);\n"
                         "\tslab_bulk_noise_h1_kept[3] = alloc_page("
                         "GFP_KERNEL);\n"
                         "\treturn 0;\n"
                         "}\n"
                         "late_initcall(slab_bulk_noise_h1);\n")
        # init/main.c includes slab.h (kmalloc, and alloc_page by gfp.h).
        self.assertEqual(v.file("slob"), "init/main.c")
        self.assertEqual(noise.padded(v, SOURCE), SOURCE + "\n" + code)
        self.assertEqual(v.describe("slub"), "a late_initcall at the end of "
                         "init/main.c that allocates and keeps kmalloc(64), "
                         "kmalloc(256), kmalloc(1024) and one page "
                         "(measurement only)")

    def test_h2_other_sizes_and_two_pages(self):
        v = noise.VARIANTS[5]
        code = noise.pad_code(v)
        self.assertIn("static void *slab_bulk_noise_h2_kept[6] __used;\n",
                      code)
        self.assertEqual([x.strip() for x in code.splitlines()
                          if "_kept[" in x and "=" in x], [
            "slab_bulk_noise_h2_kept[%d] = %s;" % (i, call) for i, call in
            enumerate(["kmalloc(32, GFP_KERNEL)", "kmalloc(128, GFP_KERNEL)",
                       "kmalloc(512, GFP_KERNEL)", "kmalloc(2048, GFP_KERNEL)",
                       "alloc_page(GFP_KERNEL)", "alloc_page(GFP_KERNEL)"])])
        self.assertTrue(code.endswith("late_initcall(slab_bulk_noise_h2);\n"))
        self.assertNotIn("free", code.replace("never freed", ""))
        self.assertIn("and 2 pages (measurement only)", v.describe("slub"))

    def test_subjects(self):
        self.assertEqual(noise.VARIANTS[1].subject("slub"),
                         "noise d1 (data layout): a used 4096-byte static "
                         "array in .data at the end of init/main.c; no "
                         "functional change")
        self.assertTrue(noise.VARIANTS[2].subject("slub").startswith(
            "noise h1 (heap layout): a late_initcall"))
        self.assertTrue(noise.VARIANTS[2].subject("slub").endswith(
            "; throw-away, never in patches/"))
        self.assertTrue(noise.VARIANTS[0].subject("slub").endswith(
            "; no functional change"))


class Commit(unittest.TestCase):
    """The generated commit, on a real git tree."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=hermetic.SCRATCH)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.repo = os.path.join(self.dir, "linux")
        hermetic.make_repo(self.repo)
        os.makedirs(os.path.join(self.repo, "init"))
        with open(os.path.join(self.repo, "init", "main.c"), "w") as f:
            f.write(SOURCE)
        hermetic.git(self.repo, "add", "-A")
        hermetic.git(self.repo, "commit", "-q", "-m", "patch 1")
        self.tip = hermetic.git(self.repo, "rev-parse", "HEAD").strip()

    def test_one_commit_on_a_detached_head_adding_only_the_variant(self):
        for v in noise.VARIANTS:
            with self.subTest(v.name):
                hermetic.git(self.repo, "checkout", "-q", "series")
                commit, diff = noise.commit_variant(self.repo, v, "slub")
                self.assertEqual(hermetic.git(self.repo, "rev-parse",
                                              commit + "^").strip(), self.tip)
                # No branch moved: the commit is on a detached HEAD.
                self.assertEqual(hermetic.git(self.repo, "rev-parse",
                                              "series").strip(), self.tip)
                self.assertEqual(hermetic.git(
                    self.repo, "branch", "--show-current").strip(), "")
                self.assertEqual(hermetic.git(self.repo, "diff", "--name-only",
                                              self.tip, commit).split(),
                                 [v.file("slub")])
                self.assertEqual(hermetic.git(self.repo, "log", "-1",
                                              "--format=%s", commit).strip(),
                                 v.subject("slub"))
                added = [x for x in diff.splitlines()
                         if x.startswith("+") and not x.startswith("+++")]
                self.assertFalse([x for x in diff.splitlines()
                                  if x.startswith("-") and
                                  not x.startswith("---")])
                self.assertEqual("\n".join(x[1:] for x in added).strip(),
                                 noise.pad_code(v).strip())
                self.assertEqual(hermetic.git(self.repo, "status",
                                              "--porcelain"), "")

    def test_the_same_variant_is_the_same_commit(self):
        v = noise.VARIANTS[2]
        first, _ = noise.commit_variant(self.repo, v, "slub")
        hermetic.git(self.repo, "checkout", "-q", "--detach", self.tip)
        self.assertEqual(noise.commit_variant(self.repo, v, "slub")[0], first)


class Arithmetic(unittest.TestCase):
    TIP = run(rec("a", "bulk", 8, 100.0), rec("a", "bulk", 16, 50.0),
              rec("a", "fallback", 8, 200.0), rec("a", "single", 1, 80.0),
              rec("c", "order_bulk", 8, 40.0))
    # Code moves nothing (as in the first runs), data and heap do.
    C1 = TIP
    D1 = run(rec("a", "bulk", 8, 102.0), rec("a", "bulk", 16, 50.0),
             rec("a", "fallback", 8, 199.0), rec("a", "single", 1, 80.0),
             rec("c", "order_bulk", 8, 40.4))
    H1 = run(rec("a", "bulk", 8, 97.0), rec("a", "bulk", 16, 50.5),
             rec("a", "fallback", 8, 200.0), rec("c", "order_bulk", 8, 40.0))
    KINDS = ["code", "data", "heap"]
    LABELS = ["c1", "d1", "h1"]

    def rows(self, tests="ac"):
        return noise.rows(self.TIP, [self.C1, self.D1, self.H1], tests)

    def test_rows_and_their_largest_change(self):
        got = {(r.variant, r.key): (r.tip, r.others, round(100 * r.largest(), 3))
               for r in self.rows()}
        self.assertEqual(got, {
            ("single", 1): (80.0, (80.0, 80.0, None), 0.0),
            ("bulk", 8): (100.0, (100.0, 102.0, 97.0), 3.0),
            ("bulk", 16): (50.0, (50.0, 50.0, 50.5), 1.0),
            ("fallback", 8): (200.0, (200.0, 199.0, 200.0), 0.5),
            ("order_bulk", 8): (40.0, (40.0, 40.4, 40.0), 1.0)})
        # Per column: the data variant's largest at bulk n=8 is 2%.
        bulk8 = [r for r in self.rows() if r.key == 8 and r.variant == "bulk"]
        self.assertEqual(round(100 * bulk8[0].largest([1]), 6), 2.0)
        self.assertEqual(bulk8[0].largest([0]), 0.0)
        single = [r for r in self.rows() if r.variant == "single"][0]
        self.assertEqual((single.change(2), single.largest([2])), (None, None))
        # Tests not asked for are left out.
        self.assertEqual({r.test for r in noise.rows(self.TIP, [self.D1],
                                                     "c")}, {"c"})

    def test_kind_columns(self):
        self.assertEqual(noise.kind_columns(["heap", "code", "data", "code"]),
                         [("code", [1, 3]), ("data", [2]), ("heap", [0])])
        self.assertEqual(noise.kind_columns(["code"]), [("code", [0])])

    def test_by_kind(self):
        got = {k: (cs, s.rows, s.moved, round(100 * s.median, 6),
                   round(100 * s.largest, 6), s.at(self.LABELS))
               for k, cs, s in noise.by_kind(self.rows(), self.KINDS)}
        self.assertEqual(got, {
            # Five rows, none moved: no row is the largest.
            "code": ([0], 5, 0, 0.0, 0.0, "-"),
            # |changes| 0 (single), 2 (bulk 8), 0 (bulk 16), 0.5
            # (fallback), 1 (order_bulk): median 0.5, largest 2.
            "data": ([1], 5, 3, 0.5, 2.0, "test a bulk n=8 (d1)"),
            # No single row: 3, 1, 0, 0.
            "heap": ([2], 4, 2, 0.5, 3.0, "test a bulk n=8 (h1)")})

    def test_two_variants_of_a_kind_and_the_one_at_the_largest(self):
        rs = noise.rows(self.TIP, [self.H1, self.D1], "a")
        (k, cs, s), = noise.by_kind(rs, ["data", "data"])
        self.assertEqual((k, cs, s.rows, s.moved), ("data", [0, 1], 4, 3))
        self.assertEqual(s.at(["x1", "x2"]), "test a bulk n=8 (x1)")
        self.assertEqual(s.to_json(["x1", "x2"]), {
            "rows": 4, "moved": 3, "median": s.median, "largest": s.largest,
            "at": {"test": "a", "variant": "bulk", "n": 8, "by": "x1"}})

    def test_summary_per_test(self):
        s = noise.summary(self.rows(), self.KINDS)
        self.assertEqual([x.test for x in s], ["a", "c"])
        a, c = s
        # Test a: |changes| single 0 0, bulk 8 0 2 3, bulk 16 0 0 1,
        # fallback 0 0.5 0: eleven, seven of them 0: median 0, largest 3
        # at bulk n=8 by h1; three of its four rows moved.
        self.assertEqual((a.all.rows, a.all.moved, round(100 * a.all.median, 6),
                          round(100 * a.all.largest, 6)), (4, 3, 0.0, 3.0))
        self.assertEqual(a.all.at(self.LABELS), "test a bulk n=8 (h1)")
        self.assertEqual([(k, round(100 * x, 6)) for k, x in a.kinds],
                         [("code", 0.0), ("data", 2.0), ("heap", 3.0)])
        self.assertEqual((c.all.rows, c.all.moved, round(100 * c.all.median, 6),
                          round(100 * c.all.largest, 6)), (1, 1, 0.0, 1.0))
        self.assertEqual(c.all.at(self.LABELS), "test c order_bulk n=8 (d1)")
        self.assertEqual([(k, round(100 * x, 6)) for k, x in c.kinds],
                         [("code", 0.0), ("data", 1.0), ("heap", 0.0)])

    def test_a_kind_without_a_test_s_rows(self):
        only_c = run(rec("c", "order_bulk", 8, 41.0))
        s = noise.summary(noise.rows(self.TIP, [self.D1, only_c], "ac"),
                          ["data", "heap"])
        a, c = s
        self.assertEqual((a.test, a.kinds[1]), ("a", ("heap", None)))
        self.assertEqual((c.test, c.kinds[1][0], round(100 * c.kinds[1][1], 6)),
                         ("c", "heap", 2.5))

    def columns(self):
        return [noise.Column("tip", "", "c" * 40, "patch 9, tip", "",
                             self.TIP),
                noise.Column("c1", "code", "d" * 40,
                             noise.VARIANTS[0].describe("slub"),
                             "--- a/mm/slub.c\n+++ b/mm/slub.c\n+x\n", self.C1),
                noise.Column("d1", "data", "e" * 40,
                             noise.VARIANTS[1].describe("slub"), "+y\n",
                             self.D1),
                noise.Column("h1", "heap", "f" * 40,
                             noise.VARIANTS[2].describe("slub"), "+z\n",
                             self.H1)]

    def test_markdown(self):
        md = noise.markdown("slub", "./bulk noise --alloc slub --tests ac "
                            "--variants 3", "ac", self.columns())
        self.assertIn("Command: `./bulk noise --alloc slub --tests ac "
                      "--variants 3`", md)
        # Which variants move code, data or heap.
        self.assertIn("- **code** (c1): a never-called function of nops", md)
        self.assertIn("- **data** (d1): a used static array, in .data or "
                      ".bss", md)
        self.assertIn("- **heap** (h1): a late_initcall that allocates", md)
        self.assertIn("(a measurement-only change, never part of the series;",
                      md)
        self.assertIn("- c1 (code): 64 bytes of nops in a never-called "
                      "function at the top of mm/slub.c", md)
        self.assertIn("- h1 (heap): a late_initcall at the end of "
                      "init/main.c", md)
        self.assertIn("| kind | variants | rows | rows moved | median change "
                      "| largest change | at |", md)
        self.assertIn("| code | c1 | 5 | 0 | 0.000% | 0.000% | - |", md)
        self.assertIn("| data | d1 | 5 | 3 | 0.500% | 2.000% | test a bulk "
                      "n=8 (d1) |", md)
        self.assertIn("| heap | h1 | 4 | 2 | 0.500% | 3.000% | test a bulk "
                      "n=8 (h1) |", md)
        self.assertIn("| test | rows | rows moved | median change | largest "
                      "change | at | largest, code | largest, data | largest, "
                      "heap |", md)
        self.assertIn("| a | 4 | 3 | 0.000% | 3.000% | bulk n=8 (h1) | 0.000% "
                      "| 2.000% | 3.000% |", md)
        self.assertIn("| c | 1 | 1 | 0.000% | 1.000% | order_bulk n=8 (d1) | "
                      "0.000% | 1.000% | 0.000% |", md)
        self.assertIn("| n | tip | c1 | d1 | h1 | largest change |", md)
        self.assertIn("| 8 | 100.0 | 100.0 | 102.0 | 97.0 | 3.000% |", md)
        self.assertIn("| 1 | 80.0 | 80.0 | 80.0 | - | 0.000% |", md)
        self.assertIn("```diff\n--- a/mm/slub.c\n+++ b/mm/slub.c\n+x\n```", md)

    def test_markdown_of_one_kind(self):
        md = noise.markdown("slub", "./bulk noise --variants 1", "ac",
                            self.columns()[:2])
        self.assertIn("| code | c1 | 5 | 0 | 0.000% | 0.000% | - |", md)
        self.assertIn("| at | largest, code |\n", md)
        self.assertIn("| a | 4 | 0 | 0.000% | 0.000% | - | 0.000% |", md)
        self.assertNotIn("**data**", md)


def usage_error(argv):
    """./bulk ARGV ends with exit status 2 before the lock; its stderr."""
    err = io.StringIO()
    with mock.patch.object(cli, "BuildLock", side_effect=AssertionError), \
            contextlib.redirect_stderr(err), \
            unittest.TestCase().assertRaises(SystemExit) as e:
        cli.main(argv)
    assert e.exception.code == 2, (argv, e.exception.code, err.getvalue())
    return err.getvalue()


class Args(unittest.TestCase):
    def parse(self, *argv):
        return cli.parser().parse_args(["noise", *argv])

    def test_defaults(self):
        a = self.parse()
        self.assertEqual((a.alloc, a.tests, a.variants, a.record),
                         ("slub", "abcdeg", 7, False))
        self.assertEqual(noise.check_args(a), ("abcdeg", 7))
        self.assertEqual(noise.check_args(self.parse(
            "--alloc", "slob", "--tests", "c,a", "--variants", "1",
            "--record")), ("ac", 1))

    def test_bad_arguments(self):
        for given, what in (({"alloc": "slub-stats"}, "--alloc"),
                            ({"alloc": "slqb"}, "--alloc"),
                            ({"tests": "af"}, "--tests"),
                            ({"tests": "aa"}, "--tests"),
                            ({"tests": ""}, "--tests"),
                            ({"variants": 0}, "--variants"),
                            ({"variants": 8}, "--variants")):
            with self.subTest(given=given):
                args = self.parse()
                vars(args).update(given)
                with self.assertRaises(StageError) as e:
                    noise.check_args(args)
                self.assertIn(what, str(e.exception))

    def test_usage_errors_before_anything_runs(self):
        self.assertIn("did you mean 'slab'?",
                      usage_error(["noise", "--alloc", "slba"]))
        self.assertIn("--tests", usage_error(["noise", "--tests", "f"]))
        self.assertIn("--variants", usage_error(["noise", "--variants", "0"]))
        self.assertIn("--variants takes 1 to 7",
                      usage_error(["noise", "--variants", "8"]))


class Main(unittest.TestCase):
    """The command through the resumable loop, on a mocked tree."""

    def setUp(self):
        self.scratch, _ = hermetic.record_roots(self)
        self.calls = []

    def build(self, config, tree, label):
        self.calls.append(("build", config, tree, label.split()[-1]))

    def bench(self, config, tree, tests, quick, suffix):
        self.calls.append(("boot", suffix))
        return {"-noise-c1": Arithmetic.C1, "-noise-d1": Arithmetic.D1,
                "-noise-h1": Arithmetic.H1,
                "-noise-tip": Arithmetic.TIP}[suffix]

    def commit(self, path, v, alloc):
        self.calls.append(("commit", v.name, alloc))
        return "f" * 40, "+pad\n"

    def checkout(self, path, rev, step):
        self.calls.append(("checkout", rev))

    def test_variants_then_the_tip_and_the_worktree_back_at_the_tip(self):
        args = argparse.Namespace(alloc="slub", tests="ac", variants=3,
                                  record=False)
        with mock.patch("packages.require"), mock.patch("tree.create"), \
                mock.patch("gitrepo.commits", return_value=["c1", "c2"]), \
                mock.patch("gitrepo.git", return_value="the tip\n"), \
                mock.patch("bench_each.has_module", return_value=True), \
                mock.patch("each.tree_ids", return_value=["t2"]), \
                mock.patch("kconfig.fragment_digest", return_value="frag"), \
                mock.patch("gitrepo.worktree"), \
                mock.patch("gitrepo.checkout", self.checkout), \
                mock.patch("noise.commit_variant", self.commit), \
                mock.patch("kbuild.build", self.build), \
                mock.patch("measure.run_bench", self.bench), \
                mock.patch("noise.say"), mock.patch("record.say"), \
                mock.patch("sys.stdout", io.StringIO()):
            self.assertEqual(noise.main(args), 0)
        self.assertEqual(self.calls, [
            ("checkout", "c2"), ("commit", "c1", "slub"),
            ("build", "slub", "bisect", "c1"), ("boot", "-noise-c1"),
            ("checkout", "c2"),
            ("checkout", "c2"), ("commit", "d1", "slub"),
            ("build", "slub", "bisect", "d1"), ("boot", "-noise-d1"),
            ("checkout", "c2"),
            ("checkout", "c2"), ("commit", "h1", "slub"),
            ("build", "slub", "bisect", "h1"), ("boot", "-noise-h1"),
            ("checkout", "c2"),
            ("checkout", "c2"), ("build", "slub", "bisect", "tip"),
            ("boot", "-noise-tip"), ("checkout", "c2")])
        with open(os.path.join(self.scratch, "experiments",
                               "noise-slub.md")) as f:
            md = f.read()
        self.assertTrue(md.startswith("<!-- stamp -->\n"))
        self.assertIn("Command: `./bulk noise --alloc slub --tests ac "
                      "--variants 3`", md)
        self.assertIn("(`c2`, patch 2, the tip)", md)
        self.assertIn("| heap | h1 | 4 | 2 | 0.500% | 3.000% | test a bulk "
                      "n=8 (h1) |", md)
        self.assertIn("| a | 4 | 3 | 0.000% | 3.000% | bulk n=8 (h1) | 0.000% "
                      "| 2.000% | 3.000% |", md)
        with open(os.path.join(self.scratch, "experiments",
                               "noise-slub.json")) as f:
            js = json.load(f)
        self.assertEqual([(c["label"], c["kind"]) for c in js["columns"]],
                         [("tip", ""), ("c1", "code"), ("d1", "data"),
                          ("h1", "heap")])
        self.assertEqual([(k["kind"], k["variants"], k["moved"], k["at"])
                          for k in js["by_kind"]], [
            ("code", ["c1"], 0, None),
            ("data", ["d1"], 3, {"test": "a", "variant": "bulk", "n": 8,
                                 "by": "d1"}),
            ("heap", ["h1"], 2, {"test": "a", "variant": "bulk", "n": 8,
                                 "by": "h1"})])
        self.assertEqual([(t["test"], t["rows"], t["kinds"]["code"])
                          for t in js["summary"]], [("a", 4, 0.0),
                                                    ("c", 1, 0.0)])
        self.assertFalse(os.path.exists(os.path.join(
            self.scratch, "progress", "noise-slub.json")))

    def test_a_failed_build_puts_the_worktree_back(self):
        args = argparse.Namespace(alloc="slab", tests="a", variants=1,
                                  record=False)

        def fail(*a, **k):
            raise StageError("build", "boom")
        with mock.patch("packages.require"), mock.patch("tree.create"), \
                mock.patch("gitrepo.commits", return_value=["c1"]), \
                mock.patch("gitrepo.git", return_value="the tip\n"), \
                mock.patch("bench_each.has_module", return_value=True), \
                mock.patch("each.tree_ids", return_value=["t1"]), \
                mock.patch("kconfig.fragment_digest", return_value="frag"), \
                mock.patch("gitrepo.worktree"), \
                mock.patch("gitrepo.checkout", self.checkout), \
                mock.patch("noise.commit_variant", self.commit), \
                mock.patch("kbuild.build", fail), mock.patch("noise.say"), \
                self.assertRaises(StageError):
            noise.main(args)
        self.assertEqual(self.calls, [("checkout", "c1"),
                                      ("commit", "c1", "slab"),
                                      ("checkout", "c1")])


if __name__ == "__main__":
    unittest.main()
