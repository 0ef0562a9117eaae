"""Tree stage: build/linux = base + 'git am' of patches/ (cover letter
skipped), one commit per patch, on branch 'series'.  Refuses to discard work
that is not exported unless forced; a patch that does not apply, or an
interrupt, leaves the tree as it was."""
import os

import base
import gitrepo
from common import BASE_TAG, BRANCH, PATCHES, TREE, StageError, log_path, say


def is_exported_series() -> bool:
    """True when build/linux is clean, on BRANCH, and base..HEAD is exactly
    the series in patches/ (so re-applying would change nothing)."""
    if not os.path.isdir(os.path.join(TREE, ".git")):
        return False
    if gitrepo.head_branch(TREE) != BRANCH or gitrepo.unexported_work(TREE, PATCHES):
        return False
    revs = gitrepo.commits(TREE, "tree")
    return gitrepo.commit_ids(TREE, revs) == gitrepo.series_ids(PATCHES)


def create(force: bool = False) -> list[str]:
    """Reset build/linux to base and apply the series with git am."""
    st = base.create(force=force)
    files = gitrepo.patch_files(PATCHES)
    if is_exported_series():
        say("tree: build/linux already is base + the %d exported patch(es)"
            % len(files))
        return files
    gitrepo.refuse_unexported(TREE, PATCHES, force, "tree")
    log = log_path("tree.log")
    open(log, "w").close()
    if gitrepo.am_in_progress(TREE, "tree"):
        gitrepo.git(TREE, "tree", "am", "--abort")
    apply_series(TREE, files, log, st.drift)
    say("tree: build/linux = base + %d patch(es) on branch '%s'" % (
        len(files), BRANCH))
    return files


def apply_series(tree: str, files: list[str], log: str,
                 drift: str | None = None) -> None:
    """Branch BRANCH = base + git am of each patch in turn.  On a patch
    that does not apply, name it; then, as on an interrupt, the tree is put
    back on the branch and commit it was on."""
    with gitrepo.kept_as_is(tree, "tree"):
        gitrepo.git(tree, "tree", "checkout", "-q", "-f", "-B", BRANCH, BASE_TAG)
        gitrepo.git(tree, "tree", "clean", "-q", "-fdx", "-e", "/build")
        for f in files:
            try:
                gitrepo.git(tree, "tree", "am", "-q", f)
            except StageError as e:
                with open(log, "a") as out:
                    out.write("git am %s: %s\n" % (f, e))
                raise StageError("tree", "patch does not apply: %s"
                                 % os.path.basename(f), log,
                                 drift or "") from None
