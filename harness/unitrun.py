"""The harness's own unit tests (tests/), run in a process of their own
(tests/runner.py, which imports no harness module before the tests set up
their scratch build/): the test command lists them first, one step each,
then runs them all in one child that reports each outcome as JSON."""
import json
import os
import subprocess
import sys

from common import REPO, StageError, log_path
from steps import Skip

RUNNER = os.path.join(REPO, "tests", "runner.py")


class UnitTests:
    """The parent's view: the test ids, and each one's outcome once the
    child has run (on the first question)."""

    def __init__(self) -> None:
        self.log = log_path("unit.log")
        self.outcomes: dict[str, tuple[str, str]] | None = None
        self.crash: str | None = None

    def child_cmd(self, *args: str) -> list[str]:
        return [sys.executable, RUNNER] + list(args)

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
            if os.path.exists(out):  # a previous run's outcomes are no answer
                os.remove(out)
            with open(self.log, "w") as f:
                rc = subprocess.run(self.child_cmd(out), stdout=f,
                                    stderr=subprocess.STDOUT).returncode
            try:
                with open(out) as f:
                    self.outcomes = {k: (v[0], v[1]) for k, v in json.load(f).items()}
            except (OSError, ValueError):
                self.outcomes = {}
            # The child writes its JSON and exits 0 whatever the tests did:
            # any other exit is a crash, which every unreported test shows.
            self.crash = None if rc == 0 else (
                "the unit-test runner crashed (%s) before reporting this test"
                % ("killed by signal %d" % -rc if rc < 0 else "exit %d" % rc))
        status, detail = self.outcomes.get(
            test_id, ("FAIL", self.crash or "did not run"))
        if status == "FAIL":
            raise StageError("unit", detail, self.log)
        if status == "SKIP":
            raise Skip(detail)
