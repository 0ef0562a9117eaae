"""Base stage: Debian's linux-source-6.1 tarball -> build/linux, one commit tagged 'base'.

The recorded base lives in patches/BASE (package version, tarball sha256 and
the resulting base commit id).  The base commit is made with a fixed author,
committer and date so that the same tarball gives the same commit id on every
machine; 'base-commit:' in the exported series then means something.
"""
import dataclasses
import glob
import hashlib
import os
import shutil
from typing import Optional

import gitrepo
import packages
from common import (BASE_FILE, BASE_TAG, BENCH_BASE_TREE, BISECT_TREE, BUILD,
                    PREV_TREE, TOPICS_TREE,
                    PATCHES, TREE, StageError,
                    capture, log_path, need_tools, read_kv, run, say, warn,
                    write_kv)

PACKAGE = packages.SOURCE_PACKAGE
STAMP = os.path.join(BUILD, "base.stamp")
# Fixed identity and date for the base commit: reproducible commit ids.
BASE_ENV = {
    "GIT_AUTHOR_NAME": "Debian linux-source-6.1",
    "GIT_AUTHOR_EMAIL": "debian-kernel@lists.debian.org",
    "GIT_COMMITTER_NAME": "Debian linux-source-6.1",
    "GIT_COMMITTER_EMAIL": "debian-kernel@lists.debian.org",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}
DEBIAN_BLOCK_MARK = "# Debian packaging: ignore everything at the top level"


@dataclasses.dataclass
class BaseState:
    """The installed package against the one patches/BASE records."""
    version: str
    tarball: str
    sha256: str
    drift: Optional[str]
    recorded: dict[str, str]


def installed_package() -> tuple[str, str]:
    """(version, tarball path) of the installed linux-source-6.1."""
    need_tools("base", ["dpkg-query", "dpkg"])
    try:
        version = capture(["dpkg-query", "-W", "-f=${Version}", PACKAGE],
                          "base").strip()
    except StageError:
        version = ""
    if not version:
        raise StageError("base", "%s is not installed; run ./bulk setup "
                         "(apt-get install %s)" % (PACKAGE, PACKAGE))
    files = capture(["dpkg", "-L", PACKAGE], "base").split()
    tars = [f for f in files if f.endswith(".tar.xz")]
    if not tars:
        raise StageError("base", "dpkg -L %s names no .tar.xz" % PACKAGE)
    return version, tars[0]


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def drift_message(recorded: dict[str, str], version: str,
                  digest: str) -> Optional[str]:
    """None when the installed package is the recorded one, else a warning."""
    if recorded.get("VERSION") != version:
        return packages.drift_note(version, recorded.get("VERSION"))
    if recorded.get("TARBALL_SHA256") != digest:
        return ("BASE DRIFT: %s %s tarball sha256 is %s, recorded %s." %
                (PACKAGE, version, digest, recorded.get("TARBALL_SHA256")))
    return None


def drop_debian_gitignore(text: str) -> tuple[str, list[str]]:
    """Remove the Debian packaging block ('/*', '!/debian/') at the end of
    the top-level .gitignore.  Returns (new_text, removed_lines)."""
    lines = text.split("\n")
    try:
        i = next(n for n, l in enumerate(lines) if l.startswith(DEBIAN_BLOCK_MARK))
    except StopIteration:
        return text, []
    start = i - 1 if i > 0 and lines[i - 1] == "#" else i
    end = i
    while end < len(lines) and lines[end] != "!/debian/":
        end += 1
    if end == len(lines):
        raise StageError("base", ".gitignore: Debian block has no '!/debian/'")
    removed = lines[start:end + 1]
    rest = lines[:start] + lines[end + 1:]
    # keep one trailing newline, drop the blank line that preceded the block
    while len(rest) > 1 and rest[-1] == "" and rest[-2] == "":
        rest.pop()
    return "\n".join(rest), removed


def check(quiet: bool = False) -> BaseState:
    """Compare the installed package with patches/BASE."""
    recorded = read_kv(BASE_FILE) if os.path.exists(BASE_FILE) else {}
    version, tarball = installed_package()
    digest = sha256(tarball)
    drift = drift_message(recorded, version, digest) if recorded else None
    if drift and not quiet:
        packages.note_drift(drift)
    return BaseState(version, tarball, digest, drift, recorded)


def is_current(st: BaseState) -> bool:
    """build/linux was made from this tarball and still has its base tag."""
    if not os.path.exists(STAMP) or not os.path.isdir(os.path.join(TREE, ".git")):
        return False
    try:
        gitrepo.git(TREE, "base", "rev-parse", "-q", "--verify",
                    BASE_TAG + "^{commit}")
    except StageError:
        return False
    return read_kv(STAMP).get("TARBALL_SHA256") == st.sha256


def create(force: bool = False) -> BaseState:
    """Make build/linux from the tarball unless it is already there.

    The new tree is made beside the old one and swapped in at the end: an
    interrupt before that leaves the old tree as it was."""
    need_tools("base", ["git", "tar", "xz"])
    st = check()
    if not force and is_current(st):
        have = read_kv(STAMP)
        say("base: build/linux already at %s (%s)" % (
            have.get("VERSION"), have.get("BASE_COMMIT", "")[:12]))
        return st
    gitrepo.refuse_unexported(TREE, PATCHES, force, "base")
    log = log_path("base.log")
    open(log, "w").close()
    tmp = os.path.join(BUILD, ".unpack")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    say("base: unpacking %s (%s)" % (st.tarball, st.version))
    run(["tar", "-xf", st.tarball, "-C", tmp], "base", log)
    tops = glob.glob(os.path.join(tmp, "*"))
    if len(tops) != 1:
        raise StageError("base", "tarball has %d top-level entries" % len(tops), log)
    new = tops[0]
    gi = os.path.join(new, ".gitignore")
    with open(gi) as f:
        text, removed = drop_debian_gitignore(f.read())
    with open(gi, "w") as f:
        f.write(text)
    if not removed:
        warn("base: .gitignore has no Debian packaging block; nothing dropped")
    say("base: git add + commit of the whole tree (about a minute)")
    for cmd in (["init", "-q", "-b", "base-import"],
                ["config", "core.autocrlf", "false"],
                # No background 'git gc --auto' repacking 78,000 objects
                # during builds.
                ["config", "gc.auto", "0"], ["add", "-A"]):
        run(["git"] + cmd, "base", log, cwd=new)
    msg = ("Linux %s from Debian %s %s\n\n"
           "Unpacked from %s (sha256 %s).\n\n"
           "Only change to the tarball: the Debian packaging block at the end\n"
           "of the top-level .gitignore is dropped. It ignores every top-level\n"
           "path ('/*', '!/debian/'), so new files under mm/ or lib/ would stay\n"
           "invisible to git. Dropped lines:\n\n%s\n" % (
               st.version.split("-")[0], PACKAGE, st.version,
               os.path.basename(st.tarball), st.sha256,
               "\n".join("  " + l for l in removed)))
    run(["git", "commit", "-q", "-m", msg], "base", log, cwd=new, env=BASE_ENV)
    run(["git", "tag", "-f", BASE_TAG], "base", log, cwd=new)
    commit = gitrepo.git(new, "base", "rev-parse", BASE_TAG).strip()
    old = os.path.join(BUILD, ".old-linux")
    if os.path.exists(TREE):
        os.rename(TREE, old)
    os.rename(new, TREE)
    for path in (old, tmp, BENCH_BASE_TREE, BISECT_TREE, PREV_TREE,
                 TOPICS_TREE):
        shutil.rmtree(path, ignore_errors=True)
    rec = st.recorded.get("BASE_COMMIT")
    if rec and rec != commit and not st.drift:
        warn("base: commit id %s differs from recorded %s (same tarball): "
             "git or the import changed" % (commit, rec))
    write_kv(STAMP, {"VERSION": st.version, "TARBALL_SHA256": st.sha256,
                     "BASE_COMMIT": commit}, "written by ./bulk base")
    say("base: build/linux tagged base = %s" % commit[:12])
    return st


def record() -> None:
    """Write patches/BASE from what is installed (after a deliberate rebase)."""
    st = check(quiet=True)
    if not os.path.exists(STAMP):
        raise StageError("base", "no build/base.stamp: run ./bulk base first")
    have = read_kv(STAMP)
    if have.get("TARBALL_SHA256") != st.sha256:
        raise StageError("base", "build/linux was not made from the installed "
                         "%s %s: run ./bulk base first" % (PACKAGE, st.version))
    write_kv(BASE_FILE, {"PACKAGE": PACKAGE, "VERSION": st.version,
                         "TARBALL": os.path.basename(st.tarball),
                         "TARBALL_SHA256": st.sha256,
                         "BASE_COMMIT": have["BASE_COMMIT"]},
             "the base this series applies to; ./bulk base checks it")
    say("base: recorded %s %s in patches/BASE" % (PACKAGE, st.version))
