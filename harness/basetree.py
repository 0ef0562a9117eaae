"""The benchmark's base tree: build/linux-base = base + the benchmark
patch, as a git worktree of build/linux, plus one commit that brings the
module to its source in the series (build/linux HEAD) when a later patch
changed it: base and series are measured with the same module."""
import os

import base
import gitrepo
import packages
import tree
from common import (BASE_TAG, BENCH_BASE_TREE, PATCHES, TREE, StageError,
                    log_path, run)
from measure import BENCH_FILE


def bench_patch() -> str | None:
    """The patch file that adds the benchmark module (None if absent)."""
    for p in gitrepo.patch_files(PATCHES):
        if BENCH_FILE in gitrepo.patch_paths(p):
            return p
    return None


def show(tree: str, rev: str) -> str:
    """rev:BENCH_FILE in tree ('' when it has no such file)."""
    try:
        return gitrepo.git(tree, "bench", "show", "%s:%s" % (rev, BENCH_FILE))
    except StageError:
        return ""


def is_current(path: str, want: str, module: str) -> bool:
    """HEAD is the benchmark patch on base, or the module commit on top."""
    revs = gitrepo.git(path, "bench", "rev-list", BASE_TAG + "..HEAD").split()
    if not revs or len(revs) > 2:
        return False
    first = revs[-1]

    def git(*args: str) -> str:
        return gitrepo.git(path, "bench", *args)
    return (gitrepo.patch_id(git("show", first)) == want
            and git("rev-parse", first + "^") == git("rev-parse", BASE_TAG)
            and show(path, "HEAD") == module
            and (len(revs) == 1 or
                 git("diff", "--name-only", first, "HEAD").split() == [BENCH_FILE]))


def make() -> str:
    path = gitrepo.worktree(TREE, BENCH_BASE_TREE, "bench")
    patch = bench_patch()
    if patch is None:
        gitrepo.checkout(path, BASE_TAG, "bench")
        return path
    with open(patch, errors="replace") as f:
        want = gitrepo.patch_id(f.read())
    module = show(TREE, "HEAD")
    if not module:
        raise StageError("bench", "%s is not in build/linux HEAD although %s "
                         "adds it" % (BENCH_FILE, os.path.basename(patch)))
    if is_current(path, want, module):
        return path
    log = log_path("tree-base.log")
    open(log, "w").close()
    gitrepo.checkout(path, BASE_TAG, "bench")
    try:
        gitrepo.git(path, "bench", "am", "-q", patch)
    except StageError:
        gitrepo.git(path, "bench", "am", "--abort")
        raise StageError("bench", "%s does not apply alone on base"
                         % os.path.basename(patch), log) from None
    if show(path, "HEAD") != module:
        with open(os.path.join(path, BENCH_FILE), "w") as f:
            f.write(module)
        run(["git", "commit", "-q", "-a", "-m",
             "%s as in the series (build/linux HEAD)" % BENCH_FILE],
            "bench", log, cwd=path, env=base.BASE_ENV)
    return path


def prepare(step: str, install: bool = False) -> None:
    """How every command that measures base against the series starts:
    the packages (installed when @install, as ./bulk bench does; else
    checked), build/linux = base + the series (./bulk tree), and
    build/linux-base (make())."""
    if install:
        packages.setup()
    else:
        packages.require(step)
    tree.create()
    make()
