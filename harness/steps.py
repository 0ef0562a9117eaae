"""The test command's step framework: a planned list of steps, one
PASS/FAIL/SKIP line each (with the time, 'step i/N' and an estimate of
the time left from earlier runs' step times), and the summary as text and
JSON."""
import dataclasses
import json
import os
import time
import traceback
from typing import Callable

from common import StageError, rel

# The group of the harness's own unit tests and checks (all others test
# the kernel).
UNIT_GROUP = "unit"
# The unit group's step that is no unit test: the type check of harness/,
# counted as a harness check.
MYPY_STEP = "mypy over harness/"


class Skip(Exception):
    """The step does not apply at this point of the series."""


@dataclasses.dataclass
class Step:
    group: str
    name: str
    # Returns a detail line for the PASS line (or None); raises StageError
    # to FAIL, Skip to SKIP.
    fn: Callable[[], str | None]

    def key(self) -> str:
        return "%s: %s" % (self.group, self.name)


@dataclasses.dataclass
class StepResult:
    group: str
    name: str
    status: str
    detail: str
    seconds: float


def load_history(path: str) -> dict[str, float]:
    """Seconds per step, as save_history() left them ({} when none)."""
    try:
        with open(path) as f:
            return {str(k): float(v) for k, v in json.load(f).items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def save_history(path: str, history: dict[str, float],
                 results: list[StepResult]) -> None:
    """history with this run's times: a run of some groups (--only) keeps
    the times of the others for the next full run's estimate."""
    merged = dict(history)
    merged.update({"%s: %s" % (r.group, r.name): r.seconds for r in results})
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(merged, f, indent=1, sort_keys=True)


def estimate(rest: list[Step], history: dict[str, float]) -> str:
    """', ~N[ms] left' when the last run timed every step still to come."""
    if not rest or any(s.key() not in history for s in rest):
        return ""
    left = sum(history[s.key()] for s in rest)
    return ", ~%ds left" % left if left < 90 else ", ~%dm left" % round(left / 60)


def run_step(step: Step) -> tuple[str, str]:
    try:
        return "PASS", step.fn() or ""
    except Skip as e:
        return "SKIP", str(e)
    except StageError as e:
        return "FAIL", str(e)
    except Exception as e:  # a harness bug must still name the step
        where = traceback.extract_tb(e.__traceback__)[-1]
        return "FAIL", "harness error %s: %s (%s:%d)" % (
            type(e).__name__, e, rel(where.filename), where.lineno or 0)


def run_all(steps: list[Step], history: dict[str, float],
            on_result: Callable[[StepResult], None] | None = None) -> list[StepResult]:
    """Each step in turn; on_result(result) after each (./bulk build-each
    keeps its progress so)."""
    results = []
    for i, step in enumerate(steps, 1):
        start = time.time()
        status, detail = run_step(step)
        results.append(StepResult(step.group, step.name, status, detail,
                                  round(time.time() - start, 1)))
        line = "%-4s %s  [%s, step %d/%d%s]" % (
            status, step.key(), time.strftime("%H:%M:%S"), i, len(steps),
            estimate(steps[i:], history))
        if detail:
            line += "\n     " + detail.replace("\n", "\n     ")
        print(line, flush=True)
        if on_result:
            on_result(results[-1])
    return results


def counts(results: list[StepResult]) -> dict[str, int]:
    c = {"passed": 0, "failed": 0, "skipped": 0}
    names = {"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}
    for r in results:
        c[names[r.status]] += 1
    return c


def kind(r: StepResult) -> str:
    """What a step counts as in the summary: one of the harness's unit
    tests, a harness check (mypy) or a step on the kernel."""
    if r.group != UNIT_GROUP:
        return "kernel_steps"
    return "harness_checks" if r.name == MYPY_STEP else "harness_unit_tests"


def counts_by_kind(results: list[StepResult]) -> dict[str, dict[str, int]]:
    return {k: counts([r for r in results if kind(r) == k])
            for k in ("harness_unit_tests", "harness_checks", "kernel_steps")}


def summary(results: list[StepResult], seconds: float,
            extra: dict[str, object]) -> dict[str, object]:
    """The machine-readable summary: totals, the harness's unit tests, its
    checks (mypy) and the kernel's steps apart, and every step."""
    return dict(counts(results), seconds=round(seconds),
                **counts_by_kind(results),
                steps=[dataclasses.asdict(r) for r in results], **extra)


def write_summary(path: str, data: dict[str, object]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
