"""Git over a kernel tree: the series' commits and patch files, work that
is not exported yet, worktrees, and putting a tree back as it was."""
import contextlib
import glob
import hashlib
import os
import re
import shutil
from typing import Iterator, Optional

from common import BASE_TAG, StageError, capture

DIFF_RE = re.compile(r"^diff --git a/\S+ b/(\S+)$", re.M)


def git(tree: str, step: str, *args: str, stdin: Optional[str] = None) -> str:
    if not os.path.exists(os.path.join(tree, ".git")):
        raise StageError(step, "no kernel tree at %s: run ./bulk tree" % tree)
    return capture(["git"] + list(args), step, cwd=tree, stdin=stdin)


def patch_files(patches: str) -> list[str]:
    """The series in order, cover letter excluded."""
    files = sorted(glob.glob(os.path.join(patches, "[0-9][0-9][0-9][0-9]-*.patch")))
    return [f for f in files if not os.path.basename(f).startswith("0000-")]


def patch_paths(patch: str) -> list[str]:
    """The files a patch file changes."""
    with open(patch, errors="replace") as f:
        return DIFF_RE.findall(f.read())


def patch_id(text: str) -> str:
    out = capture(["git", "patch-id", "--stable"], "tree", stdin=text).split()
    return out[0] if out else ""


def series_ids(patches: str) -> list[str]:
    ids = []
    for f in patch_files(patches):
        with open(f, errors="replace") as fh:
            ids.append(patch_id(fh.read()))
    return ids


def commits(tree: str, step: str) -> list[str]:
    """base..HEAD, oldest first; a tree without the base tag is an error."""
    git(tree, step, "rev-parse", "-q", "--verify", BASE_TAG + "^{commit}")
    return git(tree, step, "rev-list", "--reverse", BASE_TAG + "..HEAD").split()


def commit_ids(tree: str, revs: list[str]) -> list[str]:
    return [patch_id(git(tree, "tree", "show", c)) for c in revs]


def head_branch(tree: str) -> str:
    """The branch checked out ('' when HEAD is detached)."""
    return capture(["git", "branch", "--show-current"], "tree", cwd=tree).strip()


def unexported_work(tree: str, patches: str) -> list[str]:
    """Reasons why re-creating the tree would lose work ([] when none)."""
    if not os.path.isdir(os.path.join(tree, ".git")):
        return []
    reasons = []
    if am_in_progress(tree, "tree"):
        reasons.append("a 'git am' is in progress in build/linux")
    st = git(tree, "tree", "status", "--porcelain")
    if st.strip():
        reasons.append("build/linux has %d uncommitted or untracked path(s) "
                       "(git -C build/linux status)" % len(st.strip().splitlines()))
    try:
        revs = commits(tree, "tree")
    except StageError:
        return reasons + ["build/linux has no tag '%s'" % BASE_TAG]
    exported = set(series_ids(patches))
    extra = [c for c, pid in zip(revs, commit_ids(tree, revs)) if pid not in exported]
    if extra:
        reasons.append("build/linux has %d commit(s) not in patches/: %s "
                       "(run ./bulk export)" % (len(extra), ", ".join(
                           c[:12] for c in extra)))
    return reasons


def refuse_unexported(tree: str, patches: str, force: bool, step: str) -> None:
    reasons = unexported_work(tree, patches)
    if reasons and not force:
        raise StageError(step, "refusing to re-create build/linux, it holds "
                         "work that is not exported; export it (./bulk "
                         "export), or pass --force to discard it",
                         detail="\n".join("- " + r for r in reasons))
    if reasons:
        print("%s: --force: discarding: %s" % (step, "; ".join(reasons)))


def diff_digest(tree: str, step: str) -> str:
    """Hash of the uncommitted changes to tracked files ('' when clean)."""
    diff = git(tree, step, "diff", "HEAD", "--binary")
    return hashlib.sha256(diff.encode()).hexdigest()[:16] if diff else ""


def am_in_progress(tree: str, step: str) -> bool:
    """Is a 'git am' stopped half way in @tree?  A worktree keeps that
    state in its own git dir, not in @tree/.git."""
    path = git(tree, step, "rev-parse", "--git-path", "rebase-apply").strip()
    return os.path.isdir(os.path.join(tree, path))


@contextlib.contextmanager
def kept_as_is(tree: str, step: str) -> Iterator[None]:
    """Put the tree back on its branch and commit when the body fails or is
    interrupted: no 'git am' left half done, no detached HEAD."""
    branch = head_branch(tree)
    head = git(tree, step, "rev-parse", "HEAD").strip()
    try:
        yield
    except BaseException:
        if am_in_progress(tree, step):
            git(tree, step, "am", "--abort")
        if branch:
            git(tree, step, "checkout", "-q", "-f", "-B", branch, head)
        else:
            git(tree, step, "checkout", "-q", "-f", "--detach", head)
        raise


def worktree(tree: str, path: str, step: str) -> str:
    """A git worktree of tree at path (detached at base), made unless it is
    already one.  Builds of other commits run there, never in tree."""
    gitfile = os.path.join(path, ".git")
    if os.path.isfile(gitfile):
        with open(gitfile) as f:
            gitdir = f.read().partition("gitdir:")[2].strip()
        # git writes the real path: compare real paths, or a build/ reached
        # through a symlink would get a fresh worktree (and full rebuilds)
        # on every call.
        if os.path.isdir(gitdir) and os.path.realpath(gitdir).startswith(
                os.path.join(os.path.realpath(tree), ".git") + os.sep):
            return path
    shutil.rmtree(path, ignore_errors=True)
    git(tree, step, "worktree", "prune")
    git(tree, step, "worktree", "add", "-q", "-f", "--detach", path, BASE_TAG)
    return path


def checkout(path: str, rev: str, step: str) -> None:
    """Check out rev in a worktree (discarding what a stopped run left)."""
    git(path, step, "checkout", "-q", "-f", "--detach", rev)

