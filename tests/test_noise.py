"""Unit tests for harness/noise.py (./bulk noise), stdlib unittest only."""
import argparse
import contextlib
import io
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
    def test_the_function_is_nops_never_called(self):
        self.assertEqual(noise.pad_code(noise.VARIANTS[0]),
                         "/* ./bulk noise v1: layout padding, never called. */\n"
                         "static noinline __used void slab_bulk_noise_v1(void)\n"
                         "{\n"
                         "\tasm volatile(\".rept 64\\n\\tnop\\n\\t.endr\");\n"
                         "}\n")
        self.assertEqual([v.size for v in noise.VARIANTS], [64, 192, 128])

    def test_v1_at_the_top_of_the_allocator(self):
        v = noise.VARIANTS[0]
        self.assertEqual([v.file(a) for a in ("slub", "slab", "slob")],
                         ["mm/slub.c", "mm/slab.c", "mm/slob.c"])
        self.assertEqual(noise.padded(v, SOURCE),
                         "// SPDX-License-Identifier: GPL-2.0\n\n" +
                         noise.pad_code(v) + "\n/*\n * SLUB\n */\nint x;\n")

    def test_v2_at_the_end_of_the_allocator(self):
        v = noise.VARIANTS[1]
        self.assertEqual(v.file("slob"), "mm/slob.c")
        self.assertEqual(noise.padded(v, SOURCE),
                         SOURCE + "\n" + noise.pad_code(v))
        self.assertIn(".rept 192\\n", noise.pad_code(v))
        self.assertEqual(noise.padded(v, "int x;"),
                         "int x;\n\n" + noise.pad_code(v))

    def test_v3_in_a_file_linked_before_mm(self):
        v = noise.VARIANTS[2]
        self.assertEqual(v.file("slab"), "init/main.c")
        self.assertEqual(noise.padded(v, SOURCE),
                         SOURCE + "\n" + noise.pad_code(v))
        self.assertEqual(v.describe("slab"), "128 bytes of nops in a "
                         "function at the end of init/main.c")


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

    def test_one_commit_on_a_detached_head_adding_only_the_function(self):
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
        v = noise.VARIANTS[1]
        first, _ = noise.commit_variant(self.repo, v, "slub")
        hermetic.git(self.repo, "checkout", "-q", "--detach", self.tip)
        self.assertEqual(noise.commit_variant(self.repo, v, "slub")[0], first)


class Arithmetic(unittest.TestCase):
    TIP = run(rec("a", "bulk", 8, 100.0), rec("a", "bulk", 16, 50.0),
              rec("a", "fallback", 8, 200.0), rec("a", "single", 1, 80.0),
              rec("c", "order_bulk", 8, 40.0))
    V1 = run(rec("a", "bulk", 8, 102.0), rec("a", "bulk", 16, 50.0),
             rec("a", "fallback", 8, 199.0), rec("a", "single", 1, 80.0),
             rec("c", "order_bulk", 8, 40.4))
    V2 = run(rec("a", "bulk", 8, 97.0), rec("a", "bulk", 16, 50.5),
             rec("a", "fallback", 8, 200.0), rec("c", "order_bulk", 8, 40.0))

    def test_rows_and_their_largest_change(self):
        rs = noise.rows(self.TIP, [self.V1, self.V2], "ac")
        got = {(r.variant, r.key): (r.tip, r.others, round(100 * r.largest(), 3))
               for r in rs}
        self.assertEqual(got, {
            ("single", 1): (80.0, (80.0, None), 0.0),
            ("bulk", 8): (100.0, (102.0, 97.0), 3.0),
            ("bulk", 16): (50.0, (50.0, 50.5), 1.0),
            ("fallback", 8): (200.0, (199.0, 200.0), 0.5),
            ("order_bulk", 8): (40.0, (40.4, 40.0), 1.0)})
        # Tests not asked for are left out.
        self.assertEqual({r.test for r in noise.rows(self.TIP, [self.V1], "c")},
                         {"c"})

    def test_summary_per_test(self):
        s = noise.summary(noise.rows(self.TIP, [self.V1, self.V2], "ac"))
        self.assertEqual([x.test for x in s], ["a", "c"])
        a, c = s
        # Test a: |changes| 0 (single, v1 only), 2, 3 (bulk 8), 0, 1
        # (bulk 16), 0.5, 0 (fallback): median 0.5, largest 3 at bulk n=8.
        self.assertEqual((a.rows, round(100 * a.median, 6),
                          round(100 * a.largest, 6)), (4, 0.5, 3.0))
        self.assertEqual((a.where.variant, a.where.key), ("bulk", 8))
        self.assertEqual((c.rows, round(100 * c.median, 6),
                          round(100 * c.largest, 6)), (1, 0.5, 1.0))

    def test_markdown(self):
        cols = [noise.Column("tip", "c" * 40, "patch 9, tip", "", self.TIP),
                noise.Column("v1", "d" * 40, noise.VARIANTS[0].describe("slub"),
                             "--- a/mm/slub.c\n+++ b/mm/slub.c\n+x\n", self.V1),
                noise.Column("v2", "e" * 40, noise.VARIANTS[1].describe("slub"),
                             "+y\n", self.V2)]
        md = noise.markdown("slub", "./bulk noise --alloc slub --tests ac "
                            "--variants 2", "ac", cols)
        self.assertIn("Command: `./bulk noise --alloc slub --tests ac "
                      "--variants 2`", md)
        self.assertIn("| a | 4 | 0.500% | 3.000% | bulk n=8 |", md)
        self.assertIn("| n | tip | v1 | v2 | largest change |", md)
        self.assertIn("| 8 | 100.0 | 102.0 | 97.0 | 3.000% |", md)
        self.assertIn("| 1 | 80.0 | 80.0 | - | 0.000% |", md)
        self.assertIn("- v1: 64 bytes of nops in a function at the top of "
                      "mm/slub.c", md)
        self.assertIn("```diff\n--- a/mm/slub.c\n+++ b/mm/slub.c\n+x\n```", md)


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
                         ("slub", "abcdeg", 3, False))
        self.assertEqual(noise.check_args(a), ("abcdeg", 3))
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
                            ({"variants": 4}, "--variants")):
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
        self.assertIn("--variants takes 1 to 3",
                      usage_error(["noise", "--variants", "4"]))


class Main(unittest.TestCase):
    """The command through the resumable loop, on a mocked tree."""

    def setUp(self):
        self.scratch, _ = hermetic.record_roots(self)
        self.calls = []

    def build(self, config, tree, label):
        self.calls.append(("build", config, tree, label.split()[-1]))

    def bench(self, config, tree, tests, quick, suffix):
        self.calls.append(("boot", suffix))
        return {"-noise-v1": Arithmetic.V1, "-noise-v2": Arithmetic.V2,
                "-noise-tip": Arithmetic.TIP}[suffix]

    def commit(self, path, v, alloc):
        self.calls.append(("commit", v.name, alloc))
        return "f" * 40, "+pad\n"

    def checkout(self, path, rev, step):
        self.calls.append(("checkout", rev))

    def test_variants_then_the_tip_and_the_worktree_back_at_the_tip(self):
        args = argparse.Namespace(alloc="slub", tests="ac", variants=2,
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
            ("checkout", "c2"), ("commit", "v1", "slub"),
            ("build", "slub", "bisect", "v1"), ("boot", "-noise-v1"),
            ("checkout", "c2"),
            ("checkout", "c2"), ("commit", "v2", "slub"),
            ("build", "slub", "bisect", "v2"), ("boot", "-noise-v2"),
            ("checkout", "c2"),
            ("checkout", "c2"), ("build", "slub", "bisect", "tip"),
            ("boot", "-noise-tip"), ("checkout", "c2")])
        with open(os.path.join(self.scratch, "experiments",
                               "noise-slub.md")) as f:
            md = f.read()
        self.assertTrue(md.startswith("<!-- stamp -->\n"))
        self.assertIn("Command: `./bulk noise --alloc slub --tests ac "
                      "--variants 2`", md)
        self.assertIn("(`c2`, patch 2, the tip)", md)
        self.assertIn("| a | 4 | 0.500% | 3.000% | bulk n=8 |", md)
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
                                      ("commit", "v1", "slab"),
                                      ("checkout", "c1")])


if __name__ == "__main__":
    unittest.main()
