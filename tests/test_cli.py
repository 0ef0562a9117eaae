"""The command line explains itself: a description per command, the
commands in order of use, --version, suggestions for near misses, every
argument checked before anything runs, --json."""
import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import unittest
from unittest import mock

import hermetic
import basetree
import cli
import kconfig
import registry
from common import StageError

ORDER = ["setup", "test", "bench", "report", "base", "tree", "export",
         "move-base",
         "config", "build", "boot", "kunit", "build-each", "kunit-each",
         "bench-each", "bench-prev", "stress", "soak", "net", "profile"]


def verbs() -> dict[str, argparse.ArgumentParser]:
    sub = [a for a in cli.parser()._actions
           if isinstance(a, argparse._SubParsersAction)][0]
    return dict(sub.choices)


def usage_error(argv: list[str]) -> str:
    """./bulk ARGV must end with exit status 2 before anything runs; its
    stderr."""
    err = io.StringIO()
    with nothing_runs(), contextlib.redirect_stderr(err):
        with unittest.TestCase().assertRaises(SystemExit) as e:
            cli.main(argv)
    assert e.exception.code == 2, (argv, e.exception.code, err.getvalue())
    return err.getvalue()


@contextlib.contextmanager
def nothing_runs():
    """apt, the packages check, the trees and the lock fail loudly."""
    def loud(*a, **k):
        raise AssertionError("ran before the arguments were checked")
    with mock.patch("packages.setup", loud), \
            mock.patch("packages.missing", loud), \
            mock.patch("base.create", loud), \
            mock.patch("tree.create", loud), \
            mock.patch("basetree.make", loud), \
            mock.patch.object(cli, "BuildLock", loud):
        yield


class Help(unittest.TestCase):
    def test_commands_in_order_of_use(self):
        # Commands added since come after these, among the longer runs.
        self.assertEqual([v for v in verbs() if v in ORDER], ORDER)
        self.assertEqual(list(verbs())[:len(ORDER)], ORDER)
        text = cli.parser().format_help()
        self.assertEqual([v for v in re.findall(r"^    (\S+)", text, re.M)
                          if v in ORDER], ORDER)
        self.assertIn("Start with ./bulk test", text)

    def test_every_command_has_a_description(self):
        for name, p in verbs().items():
            with self.subTest(name):
                desc = p.description or ""
                self.assertIn("\nwrites: ", desc)
                self.assertIn("\ntime: ", desc)
        # ./bulk --help: each command's help on its own line (80 columns)
        with mock.patch.dict(os.environ, {"COLUMNS": "80"}):
            text = cli.parser().format_help()
        listing = text.split("  COMMAND\n", 1)[1].split("\n\n", 1)[0]
        for line in listing.splitlines():
            self.assertRegex(line, r"^    [a-z-]+ +\S", line)

    def test_record_on_every_measuring_command(self):
        for name in ("bench", "report", "build-each", "kunit-each", "bench-each",
                     "bench-prev", "stress", "net", "profile"):
            defaults = {"bench-prev": ["--rev", "HEAD"]}.get(name, [])
            args = cli.parser().parse_args([name] + defaults + ["--record"])
            self.assertTrue(args.record, name)

    def test_json_on_test_and_bench(self):
        for name in ("test", "bench"):
            self.assertTrue(cli.parser().parse_args([name, "--json"]).json)


class Version(unittest.TestCase):
    def test_format(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        for f in ("0000-cover-letter.patch", "0001-a.patch", "0002-b.patch"):
            open(os.path.join(d, f), "w").close()
        base = os.path.join(d, "BASE")
        with open(base, "w") as f:
            f.write("PACKAGE=linux-source-6.1\nVERSION=6.1.192-2\n")
        out = io.StringIO()
        with mock.patch.object(registry, "PATCHES", d), \
                mock.patch.object(cli, "BASE_FILE", base), \
                contextlib.redirect_stdout(out), \
                self.assertRaises(SystemExit) as e:
            cli.main(["--version"])
        self.assertEqual(e.exception.code, 0)
        self.assertRegex(out.getvalue(), r"^\./bulk [0-9a-f]{4,}(-dirty)?: 2 "
                         r"patches on linux-source-6\.1 6\.1\.192-2\n$")


class NearMisses(unittest.TestCase):
    def test_verb(self):
        self.assertIn("did you mean 'bench'?", usage_error(["bnech"]))
        self.assertIn("did you mean 'bench-each'?",
                      usage_error(["bench-eahc"]))

    def test_allocator_and_config(self):
        self.assertIn("did you mean 'slub'?",
                      usage_error(["bench", "--alloc", "slub,slbu"]))
        self.assertIn("did you mean 'slub-debug'?",
                      usage_error(["build", "slub-debgu"]))
        self.assertIn("did you mean 'slab'?",
                      usage_error(["boot", "slabb"]))
        self.assertIn("did you mean 'kunit'?",
                      usage_error(["test", "--only", "knuit"]))
        self.assertIn("did you mean 'slab'?",
                      usage_error(["bench", "--alloc", "slba"]))

    def test_option(self):
        self.assertIn("unrecognized arguments: --aloc; did you mean --alloc?",
                      usage_error(["bench", "--aloc", "slub"]))

    def test_given_twice(self):
        self.assertIn("'slub' given twice",
                      usage_error(["bench", "--alloc", "slub,slub"]))
        self.assertIn("'a' given twice", usage_error(["bench", "--tests", "aa"]))


class CheckedFirst(unittest.TestCase):
    """Bad arguments end with a usage error before setup, apt, the trees
    or the lock."""

    def test_alloc(self):
        for argv in (["bench", "--alloc", "slqb"],
                     ["report", "--alloc", "slub,nope"],
                     ["bench-each", "--alloc", "slub-stats"],
                     ["bench-prev", "--rev", "HEAD", "--alloc", "slub-kfence"],
                     ["profile", "--alloc", "slub-stats"]):
            msg = usage_error(argv)
            self.assertIn("--alloc", msg)
            self.assertIn("slub", msg.split("--alloc", 1)[1], argv)

    def test_tests(self):
        self.assertIn("--tests", usage_error(["bench", "--tests", "az"]))
        self.assertIn("--tests", usage_error(["bench-each", "--tests", "f"]))
        self.assertIn("--tests", usage_error(["profile", "--tests", "c"]))

    def test_from_and_to(self):
        self.assertIn("--from", usage_error(["bench-each", "--from", "0"]))
        self.assertIn("--to", usage_error(["kunit-each", "--to", "-3"]))
        self.assertIn("comes after", usage_error(
            ["kunit-each", "--from", "5", "--to", "3"]))
        self.assertIn("--from 5 --to 3", usage_error(
            ["bench-each", "--from", "5", "--to", "3"]))
        with mock.patch.object(registry, "patch_count", return_value=43):
            self.assertIn("patches 1 to 43", usage_error(
                ["bench-each", "--to", "44"]))
            self.assertIn("patches 1 to 43", usage_error(
                ["kunit-each", "--from", "50"]))

    def test_rev(self):
        msg = usage_error(["bench-prev", "--rev", "no-such-commit"])
        self.assertIn("--rev no-such-commit: no such commit", msg)

    def test_other_options(self):
        for argv, want in ((["stress", "--runs", "slub-nope"], "slub-faults"),
                           (["net", "--napi-cache", "33/16"], "SIZE must be"),
                           (["net", "--at", "0"], "--at 0"),
                           (["profile", "--sizes", "0"], "--sizes"),
                           (["config"], "name the config"),
                           (["boot", "slub", "--timeout", "0"], "--timeout"),
                           (["stress", "--minutes", "nan"], "--minutes"),
                           (["stress", "--seconds", "999"], "--seconds"),
                           (["move-base", "--to", "6.1 x"], "Debian version"),
                           (["callers", "--costs", "--arch", "arm64"],
                            "--costs counts x86-64 instructions")):
            self.assertIn(want, usage_error(argv), argv)


class NoApt(unittest.TestCase):
    def test_measuring_commands_name_the_missing_packages(self):
        with mock.patch("packages.missing", return_value=["qemu-system-x86"]), \
                mock.patch("packages.setup", side_effect=AssertionError), \
                mock.patch("tree.create", side_effect=AssertionError):
            with self.assertRaises(StageError) as e:
                basetree.prepare("bench-each")
        self.assertIn("not installed: qemu-system-x86; run ./bulk setup",
                      str(e.exception))


class NoTree(unittest.TestCase):
    def test_build_without_a_tree_says_run_tree(self):
        gone = kconfig.Tree("linux", os.path.join(hermetic.SCRATCH, "no-tree"),
                            os.path.join(hermetic.SCRATCH, "no-o"),
                            hermetic.SCRATCH, "./bulk tree")
        with mock.patch.dict(kconfig.TREES, {"linux": gone}):
            with self.assertRaises(StageError) as e:
                kconfig.configure("slub", "linux")
        self.assertIn("no-tree does not exist: run ./bulk tree",
                      str(e.exception))


class Json(unittest.TestCase):
    def run_fds(self, argv):
        """cli.main(argv) with fds 1 and 2 captured: (rc, stdout, stderr)."""
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        saved = os.dup(1), os.dup(2)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            rc = cli.main(argv)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode())
            f.close()
        return rc, texts[0], texts[1]

    def test_test_json_is_alone_on_stdout(self):
        def fake(only, summary=None):
            print("PASS unit: x")
            print("1 passed, 0 failed, 0 skipped")
            if summary is not None:
                summary.update({"passed": 1, "failed": 0})
            return 0
        with mock.patch.object(cli.test, "main", fake):
            rc, out, err = self.run_fds(["test", "--json"])
            self.assertEqual(rc, 0)
            self.assertEqual(json.loads(out), {"passed": 1, "failed": 0})
            self.assertIn("1 passed, 0 failed, 0 skipped", err)
            # without --json the closing line stays on stdout
            rc, out, err = self.run_fds(["test"])
            self.assertEqual(out.splitlines()[-1], "1 passed, 0 failed, 0 skipped")


if __name__ == "__main__":
    unittest.main()
