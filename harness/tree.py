"""Tree and export stages.

tree:   build/linux = base + 'git am' of patches/ (cover letter skipped), one
        commit per patch, on branch 'series'.  Refuses to discard work that
        is not exported unless forced.
export: base..HEAD -> patches/ with git format-patch --cover-letter; the cover
        letter text comes from patches/cover-letter.txt.
"""
import glob
import os
import subprocess

from common import (COVER_FILE, PATCHES, TREE, StageError, info, log_path,
                    run, warn)

BRANCH = "series"
# A fixed date for the generated cover letter, so that re-exporting an
# unchanged tree gives byte-identical files.
COVER_DATE = "2000-01-01T00:00:00+0000"


def patch_files():
    """The series in order, cover letter excluded."""
    files = sorted(glob.glob(os.path.join(PATCHES, "[0-9][0-9][0-9][0-9]-*.patch")))
    return [f for f in files if not os.path.basename(f).startswith("0000-cover-letter")]


def patch_id(text):
    p = subprocess.run(["git", "patch-id", "--stable"], input=text,
                       capture_output=True, text=True)
    return p.stdout.split()[0] if p.stdout.strip() else None


def series_ids():
    ids = []
    for f in patch_files():
        with open(f, errors="replace") as fh:
            ids.append(patch_id(fh.read()))
    return ids


def tree_commits():
    out = subprocess.run(["git", "rev-list", "--reverse", "base..HEAD"],
                         cwd=TREE, capture_output=True, text=True).stdout
    return out.split()


def commit_ids(commits):
    ids = []
    for c in commits:
        show = subprocess.run(["git", "show", c], cwd=TREE, capture_output=True,
                              text=True, errors="replace").stdout
        ids.append(patch_id(show))
    return ids


def unexported_work():
    """Reasons why re-creating the tree would lose work ([] when none)."""
    if not os.path.isdir(os.path.join(TREE, ".git")):
        return []
    reasons = []
    if os.path.isdir(os.path.join(TREE, ".git", "rebase-apply")):
        reasons.append("a 'git am' is in progress in build/linux")
    st = subprocess.run(["git", "status", "--porcelain"], cwd=TREE,
                        capture_output=True, text=True).stdout
    if st.strip():
        n = len(st.strip().splitlines())
        reasons.append("build/linux has %d uncommitted or untracked path(s) "
                       "(git -C build/linux status)" % n)
    exported = set(series_ids())
    extra = [c for c, pid in zip(tree_commits(), commit_ids(tree_commits()))
             if pid not in exported]
    if extra:
        reasons.append("build/linux has %d commit(s) not in patches/: %s "
                       "(run ./bulk export)" % (len(extra), ", ".join(
                           c[:12] for c in extra)))
    return reasons


def is_exported_series():
    """True when build/linux is clean, on BRANCH, and base..HEAD is exactly
    the series in patches/ (so re-applying would change nothing)."""
    if not os.path.isdir(os.path.join(TREE, ".git")):
        return False
    head = subprocess.run(["git", "symbolic-ref", "-q", "--short", "HEAD"],
                          cwd=TREE, capture_output=True, text=True).stdout.strip()
    if head != BRANCH or unexported_work():
        return False
    return commit_ids(tree_commits()) == series_ids()


def refuse_unexported(force):
    reasons = unexported_work()
    if reasons and not force:
        raise StageError("tree", "refusing to re-create build/linux, it holds "
                         "work that is not exported:\n  - " +
                         "\n  - ".join(reasons) +
                         "\n  Export it (./bulk export), or pass --force to "
                         "discard it.")
    if reasons:
        warn("tree: --force: discarding: " + "; ".join(reasons))


def create(force=False):
    """Reset build/linux to base and apply the series with git am."""
    import base
    st = base.create(force=force)
    refuse_unexported(force)
    if is_exported_series():
        info("tree: build/linux already is base + the %d exported patch(es)"
             % len(patch_files()))
        return patch_files()
    log = log_path("tree.log")
    open(log, "w").close()
    if os.path.isdir(os.path.join(TREE, ".git", "rebase-apply")):
        run(["git", "am", "--abort"], "tree", cwd=TREE, log=log, quiet=True)
    run(["git", "checkout", "-q", "-f", "-B", BRANCH, "base"], "tree",
        cwd=TREE, log=log, quiet=True)
    run(["git", "clean", "-q", "-fdx", "-e", "/build"], "tree", cwd=TREE,
        log=log, quiet=True)
    files = patch_files()
    apply_series(TREE, files, log, st.get("drift"))
    info("tree: build/linux = base + %d patch(es) on branch '%s'" % (
        len(files), BRANCH))
    return files


def apply_series(tree_dir, files, log, drift=None):
    """git am each patch in turn; on failure abort, reset to base and name
    the first patch that does not apply."""
    for f in files:
        name = os.path.basename(f)
        rc = run(["git", "am", "-q", f], "tree", cwd=tree_dir, log=log,
                 quiet=True, check=False)
        if rc != 0:
            run(["git", "am", "--abort"], "tree", cwd=tree_dir, log=log,
                quiet=True, check=False)
            run(["git", "checkout", "-q", "-f", "-B", BRANCH, "base"], "tree",
                cwd=tree_dir, log=log, quiet=True, check=False)
            hint = "\n  (%s)" % drift if drift else ""
            raise StageError("tree", "patch does not apply: %s%s" % (name, hint),
                             log)


# Hash length of the exported patches' "index" lines (the kernel's own
# core.abbrev, Documentation/process/submitting-patches.rst).
EXPORT_ABBREV = 12


def export():
    """Write base..HEAD back to patches/ (format-patch --cover-letter)."""
    log = log_path("export.log")
    open(log, "w").close()
    st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                        cwd=TREE, capture_output=True, text=True).stdout
    if st.strip():
        raise StageError("export", "build/linux has uncommitted changes; "
                         "commit them (git commit -s) first")
    commits = tree_commits()
    if not commits:
        raise StageError("export", "no commits in build/linux beyond base")
    if not os.path.exists(COVER_FILE):
        raise StageError("export", "missing %s (first line: subject; then "
                         "a blank line and the body)" % COVER_FILE)
    with open(COVER_FILE) as f:
        cover = f.read().strip() + "\n"
    # The cover letter's tables come from the committed results/.
    import bench
    tables = bench.cover_summary()
    if tables:
        cover += "\n" + tables
    run(["git", "config", "branch.%s.description" % BRANCH, cover], "export",
        cwd=TREE, log=log)
    head_branch = subprocess.run(["git", "symbolic-ref", "-q", "--short", "HEAD"],
                                 cwd=TREE, capture_output=True, text=True).stdout.strip()
    if head_branch != BRANCH:
        raise StageError("export", "build/linux HEAD is '%s', expected branch "
                         "'%s'" % (head_branch or "detached", BRANCH))
    old = glob.glob(os.path.join(PATCHES, "*.patch"))
    tmp = PATCHES + ".new"
    run(["rm", "-rf", tmp], "export")
    # --abbrev: the "index" lines' hash length would otherwise follow the
    # object count of the local repository (core.abbrev=auto), and the same
    # series would export differently on another machine.
    run(["git", "format-patch", "-q", "--cover-letter",
         "--cover-from-description=subject", "--base=base", "--zero-commit",
         "--no-signature", "--abbrev=%d" % EXPORT_ABBREV, "-o", tmp,
         "base..HEAD"],
        "export", cwd=TREE, log=log, env={"GIT_COMMITTER_DATE": COVER_DATE})
    for f in old:
        os.remove(f)
    for f in sorted(os.listdir(tmp)):
        os.rename(os.path.join(tmp, f), os.path.join(PATCHES, f))
    os.rmdir(tmp)
    info("export: %d patch(es) + cover letter written to patches/" % len(commits))
