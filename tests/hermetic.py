"""Imported first by every test module: puts harness/ on sys.path and
build/, results/ and patches/ in a temporary directory, so that no test
writes the real build/ or patches/ or reads the real results/."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRATCH = tempfile.mkdtemp(prefix="slabbulk-test-")
atexit.register(shutil.rmtree, SCRATCH, True)
assert "common" not in sys.modules, "import hermetic before the harness"
os.environ["SLABBULK_BUILD"] = os.path.join(SCRATCH, "build")
os.environ["SLABBULK_RESULTS"] = os.path.join(SCRATCH, "results")
os.environ["SLABBULK_PATCHES"] = os.path.join(SCRATCH, "patches")
sys.path.insert(0, os.path.join(ROOT, "harness"))
TARBALL = "/usr/src/linux-source-6.1.tar.xz"
_kunit_tools = []


def kunit_tools(test: unittest.TestCase) -> str:
    """tools/testing/kunit of the installed linux-source-6.1 (unpacked
    once per process; about 20 s)."""
    if not _kunit_tools:
        if not os.path.exists(TARBALL):
            # Missing, not "not in the series": a FAIL saying what to run.
            test.fail("%s not installed: run ./bulk setup" % TARBALL)
        dest = os.path.join(SCRATCH, "kernel-tools")
        os.makedirs(dest)
        subprocess.run(["tar", "-xJf", TARBALL, "-C", dest, "--wildcards",
                        "*/tools/testing/kunit/*.py"], check=True)
        top = os.listdir(dest)[0]
        _kunit_tools.append(os.path.join(dest, top, "tools", "testing", "kunit"))
    return _kunit_tools[0]


def record_roots(test: unittest.TestCase) -> tuple[str, str]:
    """record.py's two roots, build/results (scratch) and results/
    (committed), in a fresh directory for this test's time."""
    d = tempfile.mkdtemp(dir=SCRATCH)
    roots = (os.path.join(d, "build", "results"), os.path.join(d, "results"))
    for name, path in zip(("SCRATCH", "RESULTS"), roots):
        patch = mock.patch("record." + name, path)
        patch.start()
        test.addCleanup(patch.stop)
    return roots


def git(cwd: str, *args: str) -> str:
    p = subprocess.run(["git"] + list(args), cwd=cwd, capture_output=True,
                       text=True)
    if p.returncode:
        raise RuntimeError(p.stderr)
    return p.stdout


def make_repo(path: str) -> None:
    """A tiny git tree with a base tag, on branch series."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(os.path.join(path, "mm"))
    git(path, "init", "-q", "-b", "base-import")
    git(path, "config", "user.name", "T")
    git(path, "config", "user.email", "t@example.org")
    with open(os.path.join(path, "mm", "slub.c"), "w") as f:
        f.write("".join("line %d\n" % i for i in range(20)))
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    git(path, "tag", "base")
    git(path, "checkout", "-q", "-b", "series")
