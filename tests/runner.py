"""Runs the unit tests for ./bulk test (harness/unitrun.py): '--list'
prints the test ids, 'OUT.json' runs them all and writes each outcome.
With no argument it runs them all; exit status 1 when one failed."""
import json
import os
import sys
import unittest
from typing import Iterator

TESTS = os.path.dirname(os.path.abspath(__file__))


def iter_tests(suite: unittest.TestSuite) -> Iterator[unittest.TestCase]:
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


def main(argv: list[str]) -> int:
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
    if argv:
        with open(argv[0], "w") as f:
            json.dump(out, f)
        return 0
    return 0 if res.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
