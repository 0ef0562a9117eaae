"""Unit tests for harness/benchprev.py (./bulk bench-prev), stdlib
unittest only: the earlier posting's tree, its refusals, and the rows
that count as worse."""
import argparse
import json
import os
import shutil
import tempfile
import unittest
from unittest import mock

import hermetic  # (first: harness on sys.path, scratch build/)
import benchprev
import gitrepo
from benchparse import Record, Run
from common import BASE_FILE, PATCHES, PREV_TREE, TREE, Interrupted, StageError
from hermetic import git

MODULE = "lib/slab_bulk_bench.c"
BASE_TEXT = ("PACKAGE=linux-source-6.1\nVERSION=6.1.192-2\n"
             "TARBALL_SHA256=abc\nBASE_COMMIT=def\n")


def rec(test, variant, n, per_obj):
    return Record(test, variant, n, 256, 1000, int(per_obj * 1000), 0, per_obj)


def run(*records):
    return Run("slob", 1000000, True, {}, list(records), [])


class Posting(unittest.TestCase):
    """build/linux: base + a series with the module; a project repository
    whose commits hold two postings' patches/."""

    def setUp(self):
        hermetic.make_repo(TREE)
        os.makedirs(os.path.join(TREE, "lib"))
        with open(os.path.join(TREE, MODULE), "w") as f:
            f.write("module v2\n")
        git(TREE, "add", "-A")
        git(TREE, "commit", "-q", "-m", "bench")
        self.project = tempfile.mkdtemp(prefix="project-")
        self.addCleanup(shutil.rmtree, self.project, True)
        git(self.project, "init", "-q", "-b", "main")
        git(self.project, "config", "user.name", "T")
        git(self.project, "config", "user.email", "t@example.org")
        os.makedirs(PATCHES, exist_ok=True)
        with open(BASE_FILE, "w") as f:
            f.write(BASE_TEXT)
        shutil.rmtree(os.path.dirname(PREV_TREE), ignore_errors=True)
        self.v1 = self.commit_posting({"mm/slub.c": "line 3\n",
                                       MODULE: "module v1\n"}, "v1")

    def commit_posting(self, change, subject, base_text=BASE_TEXT):
        """A scratch clone of build/linux's base with @change committed,
        exported with git format-patch into the project's patches/."""
        work = os.path.join(self.project, "work")
        shutil.rmtree(work, ignore_errors=True)
        git(self.project, "clone", "-q", TREE, work)
        git(work, "checkout", "-q", "base")
        git(work, "config", "user.name", "T")
        git(work, "config", "user.email", "t@example.org")
        for path, line in change.items():
            os.makedirs(os.path.dirname(os.path.join(work, path)), exist_ok=True)
            with open(os.path.join(work, path), "a") as f:
                f.write(line)
            git(work, "add", "-A")
            git(work, "commit", "-q", "-m", "change " + path)
        out = os.path.join(self.project, "patches")
        shutil.rmtree(out, ignore_errors=True)
        git(work, "format-patch", "-q", "--cover-letter", "-o", out, "base")
        shutil.rmtree(work)
        with open(os.path.join(out, "BASE"), "w") as f:
            f.write(base_text)
        git(self.project, "add", "-A")
        git(self.project, "commit", "-q", "-m", subject)
        return git(self.project, "rev-parse", "HEAD").strip()

    def make(self, commit):
        with mock.patch.object(benchprev, "REPO", self.project):
            return benchprev.make_tree(commit)

    def test_posting_with_the_series_module(self):
        self.make(self.v1)
        with open(os.path.join(PREV_TREE, "mm", "slub.c")) as f:
            self.assertTrue(f.read().endswith("line 19\nline 3\n"))
        with open(os.path.join(PREV_TREE, MODULE)) as f:
            self.assertEqual(f.read(), "module v2\n")
        subjects = git(PREV_TREE, "log", "--format=%s", "base..HEAD").split("\n")
        self.assertEqual(subjects[:3], ["%s as in the series (build/linux "
                                        "HEAD)" % MODULE, "change %s" % MODULE,
                                        "change mm/slub.c"])
        # Reused as it is.
        head = git(PREV_TREE, "rev-parse", "HEAD")
        with mock.patch.object(gitrepo, "checkout") as co:
            self.make(self.v1)
        co.assert_not_called()
        self.assertEqual(git(PREV_TREE, "rev-parse", "HEAD"), head)

    def test_posting_without_the_module_is_refused(self):
        v0 = self.commit_posting({"mm/slub.c": "line 3\n"}, "no module")
        with self.assertRaisesRegex(StageError, "has no %s" % MODULE):
            self.make(v0)
        self.assertFalse(os.path.exists(benchprev.STATE))

    def test_changed_module_or_tree_makes_it_again(self):
        self.make(self.v1)
        with open(os.path.join(PREV_TREE, "mm", "slub.c"), "a") as f:
            f.write("stray edit\n")
        self.make(self.v1)
        self.assertEqual(git(PREV_TREE, "status", "--porcelain"), "")
        with open(os.path.join(TREE, MODULE), "w") as f:
            f.write("module v3\n")
        git(TREE, "commit", "-q", "-a", "-m", "module v3")
        self.make(self.v1)
        with open(os.path.join(PREV_TREE, MODULE)) as f:
            self.assertEqual(f.read(), "module v3\n")

    def break_base(self):
        """Move the base tag to a commit the posting does not apply to."""
        with open(os.path.join(TREE, "mm", "slub.c"), "w") as f:
            f.write("other\n")
        git(TREE, "commit", "-q", "-a", "-m", "x")
        git(TREE, "tag", "-f", "base")

    def test_patch_that_does_not_apply_is_named(self):
        self.break_base()
        with self.assertRaisesRegex(StageError, "0001-change-mm-slub.c.patch "
                                    "does not apply"):
            self.make(self.v1)
        self.assertFalse(gitrepo.am_in_progress(PREV_TREE, "t"))
        self.assertFalse(os.path.exists(benchprev.STATE))

    def test_am_in_progress_in_a_worktree(self):
        self.make(self.v1)
        git(PREV_TREE, "checkout", "-q", "--detach", "base")
        patch = git(self.project, "show", "%s:patches/0001-change-mm-slub.c."
                    "patch" % self.v1)
        path = os.path.join(self.project, "p.patch")
        with open(path, "w") as f:
            f.write(patch)
        with open(os.path.join(PREV_TREE, "mm", "slub.c"), "w") as f:
            f.write("other\n")
        git(PREV_TREE, "commit", "-q", "-a", "-m", "other")
        with self.assertRaises(RuntimeError):
            git(PREV_TREE, "am", "-q", path)
        self.assertTrue(gitrepo.am_in_progress(PREV_TREE, "t"))
        self.assertFalse(gitrepo.am_in_progress(TREE, "t"))
        git(PREV_TREE, "am", "--abort")
        self.assertFalse(gitrepo.am_in_progress(PREV_TREE, "t"))

    def test_another_posting_replaces_the_tree(self):
        self.make(self.v1)
        v2 = self.commit_posting({"mm/slub.c": "line 4\n",
                                  MODULE: "module v1\n"}, "v1, take 2")
        self.make(v2)
        with open(os.path.join(PREV_TREE, "mm", "slub.c")) as f:
            self.assertTrue(f.read().endswith("line 19\nline 4\n"))
        with open(benchprev.STATE) as f:
            self.assertIn("POSTING=" + v2, f.read())

    def test_untracked_file_makes_it_again(self):
        self.make(self.v1)
        stray = os.path.join(PREV_TREE, "mm", "stray.o")
        open(stray, "w").close()
        self.make(self.v1)
        self.assertFalse(os.path.exists(stray))

    def test_interrupt_leaves_no_am_half_done(self):
        real = gitrepo.git
        seen = []

        def stop_in_am(tree, step, *args, **kw):
            if args[:2] == ("am", "-q"):
                try:
                    return real(tree, step, *args, **kw)
                except StageError:
                    # The patch did not apply: git am waits, half done,
                    # when the interrupt comes.
                    seen.append(gitrepo.am_in_progress(tree, step))
                    raise Interrupted("SIGTERM") from None
            return real(tree, step, *args, **kw)
        self.break_base()
        with mock.patch.object(gitrepo, "git", side_effect=stop_in_am):
            with self.assertRaises(Interrupted):
                self.make(self.v1)
        self.assertEqual(seen, [True])
        self.assertFalse(gitrepo.am_in_progress(PREV_TREE, "t"))
        self.assertEqual(git(PREV_TREE, "rev-parse", "HEAD"),
                         git(PREV_TREE, "rev-parse", "base"))
        self.assertFalse(os.path.exists(benchprev.STATE))

    def test_other_base_is_refused(self):
        other = self.commit_posting({"mm/slub.c": "line 3\n"}, "other base",
                                    BASE_TEXT.replace("192-2", "200-1"))
        with mock.patch.object(benchprev, "REPO", self.project):
            with self.assertRaisesRegex(StageError, "another base") as e:
                benchprev.check_base(other)
            self.assertIn("VERSION 6.1.200-1 there, 6.1.192-2 here",
                          str(e.exception))
            benchprev.check_base(self.v1)
        # Each recorded key counts, alone.
        for old, new in (("=abc", "=abd"), ("=def", "=deg")):
            other = self.commit_posting({"mm/slub.c": "line 3\n"}, new,
                                        BASE_TEXT.replace(old, new))
            with mock.patch.object(benchprev, "REPO", self.project):
                with self.assertRaisesRegex(StageError, "another base"):
                    benchprev.check_base(other)

    def test_unknown_rev_and_commit_without_patches(self):
        with mock.patch.object(benchprev, "REPO", self.project):
            with self.assertRaisesRegex(StageError, "--rev nope: no such "
                                        "commit"):
                benchprev.resolve("nope")
            git(self.project, "rm", "-q", "-r", "patches")
            git(self.project, "commit", "-q", "-m", "none")
            with self.assertRaisesRegex(StageError, "no patches/NNNN"):
                benchprev.posting(git(self.project, "rev-parse",
                                      "HEAD").strip())


class Report(unittest.TestCase):
    RUNS = {"base": run(rec("a", "bulk", 8, 200.0), rec("a", "fallback", 8, 300.0),
                        rec("c", "random_bulk", 8, 100.0)),
            "prev": run(rec("a", "bulk", 8, 100.0), rec("a", "fallback", 8, 300.0),
                        rec("c", "random_bulk", 8, 90.0)),
            "series": run(rec("a", "bulk", 8, 102.0), rec("a", "fallback", 8, 306.1),
                          rec("c", "random_bulk", 8, 80.0))}

    def test_worse_is_more_than_the_threshold(self):
        # 102.0 against 100.0 is 2%, not more; the loop's 306.1 is.
        self.assertEqual(benchprev.worse(self.RUNS, "ac"),
                         [("a", "fallback", 8, 300.0, 306.1)])
        self.assertEqual(benchprev.worse(self.RUNS, "c"), [])

    def test_json_lists_the_worse_rows(self):
        scratch, _ = hermetic.record_roots(self)
        md = benchprev.write("cmd", "0590532" + "0" * 33, "v1", "ac",
                             {"slob": self.RUNS}, ["slob"])
        with open(md[:-3] + ".json") as f:
            obj = json.load(f)
        self.assertEqual(md, os.path.join(scratch, "per-patch",
                                          "bench-prev-0590532-slob.md"))
        self.assertEqual(obj["worse"]["slob"], [
            {"test": "a", "variant": "fallback", "key": 8, "prev": 300.0,
             "series": 306.1}])
        self.assertEqual(Run.from_json(obj["runs"]["slob"]["series"]),
                         self.RUNS["series"])

    def test_markdown(self):
        md = benchprev.markdown("./bulk bench-prev --rev abc", "0590532" + "0" * 33,
                                "v1", "ac", {"slob": self.RUNS})
        self.assertIn("| 8 | 200.0 | 100.0 | 102.0 | 0.500 | 0.510 | 1.020 |", md)
        self.assertIn("more than 2%: 1.", md)
        self.assertIn("| a | fallback | 8 | 300.0 | 306.1 | 1.020 |", md)
        self.assertIn("### SLOB test c: free in random order", md)

    def test_bad_arguments(self):
        def ns(**kw):
            d = dict(rev="abc", alloc="slob", tests="abcdeg")
            d.update(kw)
            return argparse.Namespace(**d)
        self.assertEqual(benchprev.check_args(ns(alloc="slob,slub",
                                                 tests="ca")),
                         (["slob", "slub"], "ac"))
        for bad in (dict(alloc="slob-lockhold"), dict(alloc=""),
                    dict(alloc="slob,slob"), dict(tests="f"), dict(tests=""),
                    dict(tests="aa"), dict(rev="")):
            with self.assertRaises(StageError, msg=str(bad)):
                benchprev.check_args(ns(**bad))


if __name__ == "__main__":
    unittest.main()
