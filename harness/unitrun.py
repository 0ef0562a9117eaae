"""The harness's own unit tests (tests/), run in a process of their own:
the test command lists them first (one step each), then runs them all in
one child that reports each test's outcome as JSON."""
import json
import os
import subprocess
import sys
import unittest
from typing import Iterator

from common import REPO, StageError, log_path
from steps import Skip

TESTS = os.path.join(REPO, "tests")


def iter_tests(suite: unittest.TestSuite) -> Iterator[unittest.TestCase]:
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


def child(argv: list[str]) -> int:
    """In the child: '--list' prints the test ids, 'OUT.json' runs them."""
    suite = unittest.defaultTestLoader.discover(TESTS, top_level_dir=TESTS)
    tests = list(iter_tests(suite))
    if argv == ["--list"]:
        print("\n".join(t.id() for t in tests))
        return 0
    res = unittest.TextTestRunner(stream=sys.stderr, verbosity=2).run(suite)
    bad = {t.id(): tb for t, tb in res.failures + res.errors}
    skipped = {t.id(): why for t, why in res.skipped}
    out = {}
    for t in tests:
        if t.id() in bad:
            out[t.id()] = ("FAIL", bad[t.id()].strip().splitlines()[-1])
        elif t.id() in skipped:
            out[t.id()] = ("SKIP", skipped[t.id()])
        else:
            out[t.id()] = ("PASS", "")
    with open(argv[0], "w") as f:
        json.dump(out, f)
    return 0


class UnitTests:
    """The parent's view: the test ids, and each one's outcome once the
    child has run (on the first question)."""

    def __init__(self) -> None:
        self.log = log_path("unit.log")
        self.outcomes: dict[str, tuple[str, str]] | None = None

    def child_cmd(self, *args: str) -> list[str]:
        return [sys.executable, os.path.abspath(__file__)] + list(args)

    def ids(self) -> list[str]:
        p = subprocess.run(self.child_cmd("--list"), capture_output=True,
                           text=True)
        if p.returncode != 0:
            with open(self.log, "w") as f:
                f.write(p.stderr)
            return ["(loading the unit tests)"]
        return p.stdout.split()

    def outcome(self, test_id: str) -> None:
        if self.outcomes is None:
            out = log_path("unit.json")
            with open(self.log, "w") as f:
                subprocess.run(self.child_cmd(out), stdout=f,
                               stderr=subprocess.STDOUT)
            try:
                with open(out) as f:
                    self.outcomes = {k: (v[0], v[1]) for k, v in json.load(f).items()}
            except (OSError, ValueError):
                self.outcomes = {}
        status, detail = self.outcomes.get(test_id, ("FAIL", "did not run"))
        if status == "FAIL":
            raise StageError("unit", detail, self.log)
        if status == "SKIP":
            raise Skip(detail)


if __name__ == "__main__":
    sys.exit(child(sys.argv[1:]))
