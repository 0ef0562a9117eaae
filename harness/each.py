"""The resumable per-patch loop of ./bulk build-each, kunit-each and bench-each.

Each item of a run (a patch, or a build at a patch) has a key: a digest of
what its outcome depends on, the series up to that patch included, so an
outcome kept for a series that has changed since is never taken for the
new one.  Each outcome is saved as it finishes in
build/results/progress/NAME.json; started again with the same arguments
after an interruption, the command skips what is done ("resuming: N of M
done").  A run's items go from the file once it has written its record.
"""
import hashlib
import json
import os
from typing import Any, Callable, Iterable, TypeVar

import gitrepo
import record
from common import rel, say

T = TypeVar("T")
R = TypeVar("R")


def chain(digests: Iterable[str]) -> list[str]:
    """One key per patch from the patches' own digests: each covers its
    patch and every one before it."""
    out, key = [], ""
    for d in digests:
        key = hashlib.sha256((key + d).encode()).hexdigest()[:16]
        out.append(key)
    return out


def tree_ids(repo: str, step: str, revs: list[str]) -> list[str]:
    """The source tree of each commit: what a kernel built there is built
    from, the same for a series applied again (new commit ids)."""
    if not revs:
        return []
    return gitrepo.git(repo, step, "rev-parse",
                       *[r + "^{tree}" for r in revs]).split()


class Progress:
    """The outcomes kept of an earlier run of command NAME with the same
    setting (its arguments: another setting starts afresh), for the items
    of this run's keys.  The file keeps other runs' items too (another
    --from/--to range), until their own run finishes."""

    def __init__(self, name: str, setting: str, keys: list[str]):
        self.path = os.path.join(record.SCRATCH, "progress", name + ".json")
        self.setting = setting
        self.keys = keys
        try:
            with open(self.path) as f:
                saved = json.load(f)
            self.kept: dict[str, Any] = dict(
                saved["done"] if saved["setting"] == setting else {})
        except (OSError, ValueError, KeyError, TypeError):
            self.kept = {}
        self.done: dict[str, Any] = {k: self.kept[k] for k in keys
                                     if k in self.kept}
        if self.done:
            say("%s: resuming: %d of %d done (%s; delete it to start afresh)"
                % (name, len(self.done), len(keys), rel(self.path)))

    def save(self, key: str, outcome: Any) -> None:
        self.done[key] = self.kept[key] = outcome
        self.write()

    def write(self) -> None:
        """The file, or none when nothing is kept."""
        if not self.kept:
            if os.path.exists(self.path):
                os.remove(self.path)
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path + ".tmp", "w") as f:
            json.dump({"setting": self.setting, "done": self.kept}, f, indent=1)
        os.replace(self.path + ".tmp", self.path)

    def finish(self) -> None:
        """The record is written: this run's items go, the next run of
        them starts afresh."""
        for k in self.keys:
            self.kept.pop(k, None)
        self.write()


def loop(name: str, setting: str, items: list[tuple[str, T]],
         work: Callable[[T], Any], write: Callable[[list[Any]], R]) -> R:
    """work(item) for each (key, item) not done by an interrupted run, its
    outcome (JSON data) saved as it finishes; then write(every outcome, in
    order) writes the record, and its result is returned."""
    progress = Progress(name, setting, [k for k, _ in items])
    for key, item in items:
        if key not in progress.done:
            progress.save(key, work(item))
    out = write([progress.done[k] for k, _ in items])
    progress.finish()
    return out
