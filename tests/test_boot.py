"""The boot stage against a fake QEMU: status, panic, timeout, splats."""
import contextlib
import io
import json
import os
import time
import unittest

import hermetic  # noqa: F401
import boot
import kconfig
from common import StageError
from fakes import CONSOLE, fake_kernel, fake_program, fake_qemu


class FakeQemuBoot(unittest.TestCase):
    def setUp(self):
        fake_kernel()

    def test_status_zero_passes_and_is_saved(self):
        fake_qemu(self, CONSOLE, rc=1)
        res = boot.boot("slub", load=["slab_bulk_kunit"], tag="t")
        self.assertEqual((res.qemu_rc, res.status, res.problems), (1, 0, []))
        with open(res.log[:-4] + ".json") as f:
            self.assertEqual(json.load(f)["status"], 0)
        with open(res.log) as f:
            self.assertIn("harness: status=0", f.read())

    def test_the_guest_gets_the_memory_asked(self):
        fake_qemu(self, CONSOLE, rc=1)
        for mem, want in ((None, "1G"), ("256M", "256M")):
            res = boot.boot("slub", tag="t", **({"mem": mem} if mem else {}))
            self.assertEqual(res.cmd[res.cmd.index("-m") + 1], want)

    def test_nonzero_status_fails_naming_the_log(self):
        fake_qemu(self, CONSOLE.replace("status=0", "status=1"), rc=3)
        with self.assertRaises(StageError) as e:
            boot.boot("slub", tag="t")
        self.assertIn("init reported status 1", str(e.exception))
        self.assertIn("(log: ", str(e.exception).splitlines()[0])
        self.assertIn("boot-linux-slub-t.log", str(e.exception))

    def test_panic_without_status_fails(self):
        fake_qemu(self, "[    1.0] Kernel panic - not syncing: x\n", rc=0)
        with self.assertRaisesRegex(StageError, "printed no status"):
            boot.boot("slub", tag="t")

    def test_timeout_fails_in_time(self):
        fake_qemu(self, "[    0.1] booting\n", sleep=60)
        start = time.time()
        with self.assertRaisesRegex(StageError, "timed out after 1s"):
            boot.boot("slub", timeout=1, tag="t")
        self.assertLess(time.time() - start, 15)

    def test_splat_fails_quoted_and_decoded(self):
        splat = "[    2.0] WARNING: CPU: 0 PID: 1 at mm/slub.c:100 foo+0x1/0x2\n"
        fake_qemu(self, CONSOLE + splat, rc=1)
        with self.assertRaises(StageError) as e:
            boot.boot("slub", tag="t")
        msg = str(e.exception)
        self.assertIn("1 kernel splat(s)", msg.splitlines()[0])
        self.assertIn("WARNING: CPU: 0 PID: 1 at mm/slub.c:100", msg)
        decoded = msg.split("(decoded: ")[1].split(")")[0]
        with open(decoded) as f:
            self.assertIn("decoded: " + splat.strip(), f.read())

    def test_allow_fail_returns_the_problems(self):
        fake_qemu(self, CONSOLE.replace("status=0", "status=2") +
                  "[    3.0] BUG: KASAN: use-after-free in x\n", rc=5)
        res = boot.boot("slub", tag="t", allow_fail=True)
        self.assertEqual(res.status, 2)
        self.assertEqual(len(res.problems), 2)
        self.assertTrue(os.path.exists(res.decoded))

    def test_decoder_that_fails_is_a_problem_of_its_own(self):
        fake_program(os.path.join(kconfig.tree("linux").src, "scripts",
                                  "decode_stacktrace.sh"),
                     "echo 'vmlinux: no such file'; exit 2")
        fake_qemu(self, CONSOLE + "[    2.0] BUG: KASAN: double-free in x\n", rc=1)
        res = boot.boot("slub", tag="t", allow_fail=True)
        self.assertEqual(len(res.problems), 2)
        self.assertRegex(res.problems[1], r"^decode_stacktrace.sh exited 2: the "
                         r"decoded log is incomplete \(.*boot-linux-slub-t.decoded.log\)")

    def test_interactive_run_checks_qemu_exit(self):
        for rc, msg in ((0, None), (1, None), (5, "--gdb: init reported status 2"),
                        (6, "--gdb: QEMU exited 6")):
            fake_qemu(self, CONSOLE, rc=rc)
            with contextlib.redirect_stdout(io.StringIO()):
                if msg is None:
                    self.assertIsNone(boot.boot("slub", gdb=True))
                    continue
                with self.assertRaises(StageError) as e:
                    boot.boot("slub", gdb=True)
            self.assertEqual(str(e.exception), "[boot] " + msg)
