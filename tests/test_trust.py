"""A result always names the kernel it came from: stale kernels are
refused, a second run is locked out, a misspelled config fails, and an
interrupt leaves the tree as it was."""
import os
import signal
import subprocess
import sys
import time
import unittest
from unittest import mock

import hermetic
import boot
import gitrepo
import kbuild
import kconfig
import tree
from common import BUILD, TREE, Interrupted, StageError, write_kv
from hermetic import git
from fakes import CONSOLE, fake_kernel, fake_qemu
from lock import BuildLock

class StaleKernel(unittest.TestCase):
    def setUp(self):
        fake_kernel()
        fake_qemu(self, CONSOLE)

    def test_kernel_of_the_current_tree_boots(self):
        res = boot.boot("slub", load=["slab_bulk_kunit"])
        self.assertEqual((res.status, res.problems), (0, []))

    def test_kernel_of_an_older_commit_is_refused(self):
        with open(os.path.join(TREE, "mm", "slub.c"), "a") as f:
            f.write("new line\n")
        # Uncommitted: not what the kernel was built from either.
        with self.assertRaisesRegex(StageError, "was built from .*, the tree is "
                                    "at .* \\+ uncommitted changes"):
            boot.boot("slub")
        git(TREE, "commit", "-q", "-a", "-m", "patch N")
        with self.assertRaises(StageError) as e:
            boot.boot("slub")
        self.assertIn("run ./bulk build slub", str(e.exception))

    def test_same_sources_in_another_commit_are_the_same_kernel(self):
        git(TREE, "commit", "-q", "--amend", "-m", "base, reworded")
        self.assertEqual(boot.boot("slub").problems, [])

    def test_kernel_of_other_fragments_is_refused(self):
        out = kconfig.tree("linux").out_dir("slub")
        have = kbuild.read_stamp(out)
        kbuild.write_stamp(out, kbuild.Stamp(have.commit, have.tree, have.diff,
                                             "0" * 16))
        with self.assertRaisesRegex(StageError, "configs/ 0000"):
            boot.boot("slub")

    def test_builds_use_ccache_depend_mode(self):
        # kbuild.CCACHE_ENV: no second preprocessing on a cache miss.
        out = kconfig.tree("linux").out_dir("slub")
        seen = {}

        def stream(cmd, log, env, progress):
            seen.update(env)
            return 2
        with mock.patch.object(kconfig, "configure", return_value=out), \
                mock.patch.object(kconfig, "make_cmd", return_value=["make"]), \
                mock.patch.object(kbuild, "stream", stream):
            with self.assertRaisesRegex(StageError, "slub failed"):
                kbuild.build("slub")
        self.assertEqual(seen.get("CCACHE_DEPEND"), "1")
        self.assertEqual(seen.get("CCACHE_BASEDIR"),
                         kconfig.tree("linux").ccache_base)

    def test_failed_build_leaves_no_stamp(self):
        out = kconfig.tree("linux").out_dir("slub")
        with mock.patch.object(kconfig, "configure", return_value=out), \
                mock.patch.object(kconfig, "make_cmd", return_value=["make"]), \
                mock.patch.object(kbuild, "stream", return_value=2):
            with self.assertRaisesRegex(StageError, "slub failed"):
                kbuild.build("slub")
        with self.assertRaisesRegex(StageError, "no kernel of slub is built"):
            boot.boot("slub")


class Lock(unittest.TestCase):
    def test_second_run_is_told_who_holds_build(self):
        with BuildLock(wait=False):
            p = subprocess.run([sys.executable, os.path.join(hermetic.ROOT, "bulk"),
                                "tree"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("[lock] build/ is in use by pid %d" % os.getpid(), p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1)
        with BuildLock(wait=False) as lock:  # released: free again
            self.assertIsNotNone(lock.file)


class MisspelledConfig(unittest.TestCase):
    def setUp(self):
        src = os.path.dirname(os.path.dirname(os.path.dirname(
            hermetic.kunit_tools(self))))
        self.kc = kconfig.kunit_config(src)
        self.declared = {"KASAN", "KASAN_GENERIC", "SLUB", "KFENCE"}

    def verify(self, requested, actual):
        return kconfig.verify(self.kc, requested, actual, self.declared, "frag")

    def test_misspelled_symbol_fails(self):
        bad = self.verify("CONFIG_KASAN=y\nCONFIG_KASAN_GENRIC=y\n",
                          "CONFIG_KASAN=y\nCONFIG_KASAN_GENERIC=y\n")
        self.assertEqual(bad, ["CONFIG_KASAN_GENRIC: no such symbol in this "
                               "tree (misspelled?)"])
        self.assertTrue(self.verify("# CONFIG_KFENSE is not set\n", ""))

    def test_only_the_series_symbols_may_be_absent(self):
        self.assertEqual(self.verify("CONFIG_SLUB=y\nCONFIG_SLAB_BULK_BENCH=m\n"
                                     "CONFIG_SLAB_BULK_KUNIT_TEST=m\n",
                                     "CONFIG_SLUB=y\n"), [])
        self.declared.add("SLAB_BULK_BENCH")
        self.assertEqual(self.verify("CONFIG_SLAB_BULK_BENCH=m\n", ""),
                         ["CONFIG_SLAB_BULK_BENCH: requested m, got not set"])

    def test_series_symbol_is_excused_only_before_its_patch(self):
        # The declared set as configure() reads it: the tree's Kconfig files.
        hermetic.make_repo(TREE)
        frag = "CONFIG_SLUB=y\nCONFIG_SLAB_BULK_BENCH=m\n"
        with open(os.path.join(TREE, "mm", "Kconfig"), "w") as f:
            f.write("config SLUB\n\tbool \"SLUB\"\n")
        git(TREE, "add", "-A")
        git(TREE, "commit", "-q", "-m", "mm: Kconfig")
        before = kconfig.declared_symbols(TREE)
        self.assertNotIn("SLAB_BULK_BENCH", before)
        self.assertEqual(kconfig.verify(self.kc, frag, "CONFIG_SLUB=y\n",
                                        before, "frag"), [])
        with open(os.path.join(TREE, "mm", "Kconfig"), "a") as f:
            f.write("\nconfig SLAB_BULK_BENCH\n\ttristate \"bench\"\n")
        git(TREE, "commit", "-q", "-a", "-m", "lib: add the benchmark module")
        after = kconfig.declared_symbols(TREE)
        self.assertIn("SLAB_BULK_BENCH", after)
        self.assertEqual(kconfig.verify(self.kc, frag, "CONFIG_SLUB=y\n",
                                        after, "frag"),
                         ["CONFIG_SLAB_BULK_BENCH: requested m, got not set"])
        self.assertEqual(kconfig.verify(self.kc, frag, "CONFIG_SLUB=y\n"
                                        "CONFIG_SLAB_BULK_BENCH=m\n", after,
                                        "frag"), [])

    def test_values_that_did_not_take_effect_are_named(self):
        self.assertEqual(self.verify("# CONFIG_KFENCE is not set\nCONFIG_SLUB=y\n",
                                     "CONFIG_KFENCE=y\nCONFIG_SLUB=y\n"),
                         ["CONFIG_KFENCE: requested n, got y"])

    def test_malformed_line_is_an_error(self):
        for line in ("CONFIG_SLUB = y", "SLUB=y", "CONFIG_SLUB=y trailing"):
            with self.assertRaisesRegex(StageError, "frag: Failed to parse"):
                self.verify(line + "\n", "")


class ConfigSkipped(unittest.TestCase):
    """configure() runs again whenever what a .config depends on moved,
    and only then."""

    def setUp(self):
        hermetic.make_repo(TREE)
        for path in ("mm/Kconfig", "scripts/kconfig/conf.c", "Makefile"):
            os.makedirs(os.path.dirname(os.path.join(TREE, path)), exist_ok=True)
            with open(os.path.join(TREE, path), "w") as f:
                f.write("x\n")
        git(TREE, "add", "-A")
        git(TREE, "commit", "-q", "-m", "kconfig")
        self.t = kconfig.tree("linux")

    def key(self, name="slub"):
        return kconfig.config_key(name, self.t)

    def commit(self, path, text="y\n"):
        with open(os.path.join(TREE, path), "a") as f:
            f.write(text)
        git(TREE, "commit", "-q", "-a", "-m", "change " + path)

    def test_key_follows_kconfig_files_fragments_and_tools(self):
        k = self.key()
        self.assertEqual(self.key(), k)
        self.assertNotEqual(self.key("slab"), k)
        self.commit("mm/slub.c")
        self.assertEqual(self.key(), k)
        seen = {k}
        for path in ("mm/Kconfig", "scripts/kconfig/conf.c"):
            self.commit(path)
            seen.add(self.key())
        self.assertEqual(len(seen), 3)
        k = self.key()
        real = kconfig.tool_answer
        for tool in ("gcc", "ld", "pahole"):
            with mock.patch.object(kconfig, "tool_answer", side_effect=lambda
                                   cmd, tool=tool: "other" if cmd[0] == tool
                                   else real(cmd)):
                self.assertNotEqual(self.key(), k, tool)
        with mock.patch.object(kconfig, "MAKE_VARS", kconfig.MAKE_VARS + ["W=1"]):
            self.assertNotEqual(self.key(), k)
        for var in ("LLVM", "KCONFIG_WARN"):
            with mock.patch.dict(os.environ, {var: "1"}):
                self.assertNotEqual(self.key(), k, var)
        self.assertEqual(self.key(), k)

    def test_uncommitted_input_change_always_configures(self):
        git(TREE, "mv", "mm/Kconfig", "mm/Kconfig.old")  # staged rename
        self.assertIsNone(self.key())
        git(TREE, "reset", "-q", "--hard")
        with open(os.path.join(TREE, "mm", "slub.c"), "a") as f:
            f.write("not a config input\n")
        self.assertIsNotNone(self.key())
        with open(os.path.join(TREE, "scripts", "kconfig", "conf.c"), "a") as f:
            f.write("dirty\n")
        self.assertIsNone(self.key())
        self.assertFalse(kconfig.is_configured(self.t.out_dir("slub"), None))

    def configure_with(self, bad):
        """configure() with the kernel's tools replaced: the make steps
        write a .config, verify() answers @bad."""
        out = self.t.out_dir("slub")

        def fake_run(cmd, step, log, cwd=None, env=None):
            os.makedirs(out, exist_ok=True)
            for name in ("harness.fragment", ".config"):
                with open(os.path.join(out, name), "w") as f:
                    f.write("CONFIG_SLUB=y\n")
        with mock.patch.object(kconfig, "run", side_effect=fake_run) as run, \
                mock.patch.object(kconfig, "kunit_config"), \
                mock.patch.object(kconfig, "declared_symbols"), \
                mock.patch.object(kconfig, "verify", return_value=bad):
            try:
                kconfig.configure("slub")
            except StageError as e:
                if not bad:
                    raise
                self.assertIn("did not take effect", str(e))
            return run.call_count, os.path.exists(
                os.path.join(out, kconfig.CONFIG_KEY))

    def test_key_written_only_after_a_good_verification(self):
        self.assertEqual(self.configure_with(["CONFIG_X: bad"]), (3, False))
        self.assertEqual(self.configure_with([]), (3, True))
        self.assertEqual(self.configure_with([]), (0, True))
        self.commit("mm/Kconfig")
        self.assertEqual(self.configure_with(["CONFIG_X: bad"]), (3, False))
        self.assertEqual(self.configure_with(["CONFIG_X: bad"]), (3, False))

    def test_configure_skipped_only_for_the_verified_config(self):
        out = self.t.out_dir("slub")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, ".config"), "w") as f:
            f.write("CONFIG_SLUB=y\n")
        write_kv(os.path.join(out, kconfig.CONFIG_KEY),
                 {"KEY": self.key(), "CONFIG": kconfig.file_digest(
                     os.path.join(out, ".config"))}, "test")
        with mock.patch.object(kconfig, "run", side_effect=AssertionError(
                "configured again")):
            self.assertEqual(kconfig.configure("slub"), out)
        # Another key, or a .config that kbuild or a hand changed since:
        # configured again, and the key file goes first (a failed run
        # leaves none).

        def touch_config():
            with open(os.path.join(out, ".config"), "a") as f:
                f.write("# changed\n")
        for change in (lambda: self.commit("mm/Kconfig"), touch_config):
            write_kv(os.path.join(out, kconfig.CONFIG_KEY),
                     {"KEY": self.key(), "CONFIG": kconfig.file_digest(
                         os.path.join(out, ".config"))}, "test")
            change()
            with mock.patch.object(kconfig, "run", side_effect=StageError(
                    "config", "ran")):
                with self.assertRaisesRegex(StageError, "ran"):
                    kconfig.configure("slub")
            self.assertFalse(os.path.exists(os.path.join(out, kconfig.CONFIG_KEY)))


class Interrupt(unittest.TestCase):
    def test_interrupted_apply_leaves_the_tree_as_it_was(self):
        hermetic.make_repo(TREE)
        for n in (1, 2):
            with open(os.path.join(TREE, "mm", "slub.c"), "a") as f:
                f.write("patch %d\n" % n)
            git(TREE, "commit", "-q", "-a", "-m", "mm: patch %d" % n)
        out = git(TREE, "format-patch", "-q", "-o", hermetic.SCRATCH + "/ip",
                  "base..HEAD")
        patches = sorted(os.path.join(hermetic.SCRATCH, "ip", f)
                         for f in os.listdir(hermetic.SCRATCH + "/ip"))
        self.assertEqual(out, "")
        # The tree is at patch 2: the interrupt comes after patch 1 is
        # applied again, so only putting the tree back gets patch 2 back.
        head = git(TREE, "rev-parse", "HEAD")
        real = gitrepo.git
        calls = []

        def interrupted_second_am(path, step, *args, **kw):
            if args[0] == "am" and args[1] == "-q":
                calls.append(args)
                if len(calls) == 2:
                    raise Interrupted("SIGTERM")
            return real(path, step, *args, **kw)
        with mock.patch.object(gitrepo, "git", interrupted_second_am):
            with self.assertRaises(Interrupted):
                tree.apply_series(TREE, patches, os.path.join(BUILD, "t.log"))
        self.assertEqual(git(TREE, "rev-parse", "HEAD"), head)
        self.assertEqual(gitrepo.head_branch(TREE), "series")
        self.assertEqual(git(TREE, "status", "--porcelain"), "")

    def test_sigterm_ends_a_boot_with_one_line(self):
        fake_kernel()
        pidfile = fake_qemu(self, CONSOLE, sleep=60)
        p = subprocess.Popen([sys.executable, os.path.join(hermetic.ROOT, "bulk"),
                              "boot", "slub"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.assertIn("boot linux-slub", p.stdout.readline())
        for _ in range(100):
            if os.path.exists(pidfile) and os.path.getsize(pidfile):
                break
            time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 143)
        self.assertNotIn("Traceback", err)
        self.assertEqual(err.strip().splitlines(), [
            "./bulk boot: interrupted (SIGTERM); build/linux left as it was"])
        with open(pidfile) as f:
            qemu = int(f.read())
        # Killed, and reaped by whoever inherited it: on a loaded machine
        # the reaping may take a moment.
        for _ in range(50):
            try:
                os.kill(qemu, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        with self.assertRaises(ProcessLookupError):
            os.kill(qemu, 0)
