"""Stand-ins for a built kernel and for QEMU (after hermetic)."""
import os
import subprocess
import time
import unittest
from unittest import mock

import hermetic
import boot
import kbuild
import kconfig

CONSOLE = ("[    0.000000] Linux version 6.1.192\n"
           "harness: loading slab_bulk_kunit params ''\n"
           "harness: status=0\n")


def fake_kernel(config: str = "slub", tree: str = "linux") -> str:
    """A tree (a tiny repo) and a 'built' kernel of it, stamped."""
    t = kconfig.tree(tree)
    hermetic.make_repo(t.src)
    scripts = os.path.join(t.src, "scripts")
    os.makedirs(scripts)
    fake_program(os.path.join(scripts, "decode_stacktrace.sh"),
                 "sed 's/^/decoded: /'")
    out = t.out_dir(config)
    subprocess.run(["rm", "-rf", out], check=True)
    for d in ("arch/x86/boot", "usr", "lib"):
        os.makedirs(os.path.join(out, d))
    open(os.path.join(out, "arch/x86/boot/bzImage"), "w").close()
    open(os.path.join(out, "lib/slab_bulk_kunit.ko"), "w").close()
    with open(os.path.join(out, "modules.order"), "w") as f:
        f.write("lib/slab_bulk_kunit.o\n")
    fake_program(os.path.join(out, "usr/gen_init_cpio"), "echo cpio")
    os.makedirs(os.path.dirname(boot.INIT_BIN), exist_ok=True)
    open(boot.INIT_BIN, "w").close()
    future = time.time() + 3600
    os.utime(boot.INIT_BIN, (future, future))
    kbuild.write_stamp(out, kbuild.current_stamp(config, t, "test"))
    return out


def fake_program(path: str, body: str) -> None:
    with open(path, "w") as f:
        f.write("#!/bin/sh\n%s\n" % body)
    os.chmod(path, 0o755)


def fake_qemu(test: unittest.TestCase, console: str, rc: int = 1,
              sleep: int = 0) -> str:
    """qemu-system-x86_64 on PATH: prints console, then exits rc or
    sleeps (as itself: its pid is written to the returned file)."""
    bindir = os.path.join(hermetic.SCRATCH, "bin")
    os.makedirs(bindir, exist_ok=True)
    pidfile = os.path.join(bindir, "qemu.pid")
    if os.path.exists(pidfile):
        os.remove(pidfile)
    with open(os.path.join(bindir, "console"), "w") as f:
        f.write(console)
    fake_program(os.path.join(bindir, "qemu-system-x86_64"),
                 'echo $$ > %s\ncat %s/console\n%s' % (
                     pidfile, bindir, "exec sleep %d" % sleep if sleep
                     else "exit %d" % rc))
    patch = mock.patch.dict(os.environ, {"PATH": bindir + ":" + os.environ["PATH"]})
    patch.start()
    test.addCleanup(patch.stop)
    return pidfile
