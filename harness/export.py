"""Export stage: build/linux base..HEAD -> patches/ (git format-patch
--cover-letter).  The cover letter's text is patches/cover-letter.txt
followed by patches/cover-tables.txt, which the report stage writes; export
only reads both.  An unchanged tree re-exports byte for byte."""
import os
import shutil

import gitrepo
from common import (BRANCH, COVER_FILE, COVER_TABLES, PATCHES, TREE,
                    StageError, log_path, run, say)

# A fixed date for the generated cover letter, so that re-exporting an
# unchanged tree gives byte-identical files.
COVER_DATE = "2000-01-01T00:00:00+0000"
# Hash length of the exported patches' "index" lines (the kernel's own
# core.abbrev, Documentation/process/submitting-patches.rst).
EXPORT_ABBREV = 12


def cover_text() -> str:
    if not os.path.exists(COVER_FILE):
        raise StageError("export", "missing %s (first line: subject; then "
                         "a blank line and the body)" % COVER_FILE)
    with open(COVER_FILE) as f:
        cover = f.read().strip() + "\n"
    if os.path.exists(COVER_TABLES):
        with open(COVER_TABLES) as f:
            cover += "\n" + f.read()
    return cover


def export() -> None:
    """Write base..HEAD back to patches/ (format-patch --cover-letter)."""
    if gitrepo.git(TREE, "export", "status", "--porcelain",
                   "--untracked-files=no").strip():
        raise StageError("export", "build/linux has uncommitted changes; "
                         "commit them (git commit -s) first")
    head = gitrepo.head_branch(TREE)
    if head != BRANCH:
        raise StageError("export", "build/linux HEAD is '%s', expected branch "
                         "'%s'" % (head or "detached", BRANCH))
    commits = gitrepo.commits(TREE, "export")
    if not commits:
        raise StageError("export", "no commits in build/linux beyond base")
    log = log_path("export.log")
    open(log, "w").close()
    run(["git", "config", "branch.%s.description" % BRANCH, cover_text()],
        "export", log, cwd=TREE)
    tmp = PATCHES + ".new"
    shutil.rmtree(tmp, ignore_errors=True)
    # --abbrev: the "index" lines' hash length would otherwise follow the
    # object count of the local repository (core.abbrev=auto), and the same
    # series would export differently on another machine.
    run(["git", "format-patch", "-q", "--cover-letter",
         "--cover-from-description=subject", "--base=base", "--zero-commit",
         "--no-signature", "--abbrev=%d" % EXPORT_ABBREV, "-o", tmp,
         "base..HEAD"],
        "export", log, cwd=TREE, env={"GIT_COMMITTER_DATE": COVER_DATE})
    for f in os.listdir(PATCHES):
        if f.endswith(".patch"):
            os.remove(os.path.join(PATCHES, f))
    for f in sorted(os.listdir(tmp)):
        os.rename(os.path.join(tmp, f), os.path.join(PATCHES, f))
    os.rmdir(tmp)
    say("export: %d patch(es) + cover letter written to patches/" % len(commits))
