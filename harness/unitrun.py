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
