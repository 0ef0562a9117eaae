"""Shared paths, the error types, and running programs.

Stages talk through files under build/; nothing here keeps state in memory
between stages.  SLABBULK_BUILD, SLABBULK_RESULTS and SLABBULK_PATCHES
move build/, results/ and patches/ (the unit tests point them at a
temporary directory).
"""
import os
import selectors
import shutil
import subprocess
import sys
import time
from typing import Callable, Mapping, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SLABBULK_BUILD", os.path.join(REPO, "build"))
TREE = os.path.join(BUILD, "linux")
# Worktrees of TREE: the benchmark's base kernel, and the bisect builds
# (its own dir, so that its O= dirs sit at the same relative path to their
# source as TREE's: ccache, with CCACHE_BASEDIR, shares their objects).
BENCH_BASE_TREE = os.path.join(BUILD, "linux-base")
BISECT_ROOT = os.path.join(BUILD, "bisect")
BISECT_TREE = os.path.join(BISECT_ROOT, "linux")
# An earlier posting of the series (./bulk bench-prev), laid out as the
# bisect worktree is, for the same reason.
PREV_ROOT = os.path.join(BUILD, "prev")
PREV_TREE = os.path.join(PREV_ROOT, "linux")
# ./bulk topics' worktree (each topic on the base and the topics it
# requires), laid out as the bisect worktree is, for the same reason.
TOPICS_ROOT = os.path.join(BUILD, "topics")
TOPICS_TREE = os.path.join(TOPICS_ROOT, "linux")
LOGS = os.path.join(BUILD, "logs")
PATCHES = os.environ.get("SLABBULK_PATCHES", os.path.join(REPO, "patches"))
CONFIGS = os.path.join(REPO, "configs")
RESULTS = os.environ.get("SLABBULK_RESULTS", os.path.join(REPO, "results"))
BASE_FILE = os.path.join(PATCHES, "BASE")
COVER_FILE = os.path.join(PATCHES, "cover-letter.txt")
# Written by the report stage, read by export: the cover letter's tables.
COVER_TABLES = os.path.join(PATCHES, "cover-tables.txt")
# The base commit's tag and the series branch of every tree.
BASE_TAG = "base"
BRANCH = "series"


def rel(path: str) -> str:
    """A path as the user would type it from the current directory."""
    return os.path.relpath(path) if path.startswith(REPO) else path


class StageError(Exception):
    """A stage failed: one line naming the step, why, and the log to read;
    details, when there are some, follow on indented lines."""

    def __init__(self, step: str, msg: str, log: Optional[str] = None,
                 detail: str = ""):
        self.step = step
        self.msg = msg
        self.log = log
        self.detail = detail
        super().__init__(str(self))

    def __str__(self) -> str:
        s = "[%s] %s" % (self.step, self.msg)
        if self.log:
            s += " (log: %s)" % rel(self.log)
        if self.detail:
            s += "\n    " + self.detail.strip().replace("\n", "\n    ")
        return s


class Interrupted(BaseException):
    """SIGTERM arrived (SIGINT raises KeyboardInterrupt): unwind, run every
    cleanup on the way, then end with one line.  A BaseException, as
    KeyboardInterrupt is, so that no 'except Exception' (the test command's
    harness-bug catch) takes it for a failed step and runs on."""


def log_path(name: str) -> str:
    os.makedirs(LOGS, exist_ok=True)
    return os.path.join(LOGS, name)


def need_tools(step: str, tools: Sequence[str]) -> None:
    """Fail early, naming every missing program and the setup command."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise StageError(step, "missing tool(s): %s; run ./bulk setup "
                         "(installs them with apt)" % ", ".join(missing))


def capture(cmd: Sequence[str], step: str, cwd: Optional[str] = None,
            env: Optional[Mapping[str, str]] = None,
            stdin: Optional[str] = None) -> str:
    """Run cmd and return its stdout; a non-zero exit is a StageError
    carrying the command's last line of stderr."""
    full_env = dict(os.environ, **env) if env else None
    try:
        p = subprocess.run(list(cmd), cwd=cwd, env=full_env, input=stdin,
                           text=True, capture_output=True, errors="replace")
    except FileNotFoundError:
        # Also raised for a missing cwd: not a missing program then.
        if cwd is not None and not os.path.isdir(cwd):
            raise StageError(step, "%s does not exist" % rel(cwd)) from None
        raise StageError(step, "%s is not installed; run ./bulk setup"
                         % cmd[0]) from None
    if p.returncode != 0:
        why = (p.stderr or p.stdout).strip().splitlines()
        raise StageError(step, "%s failed (%d)%s" % (
            " ".join(cmd[:3]), p.returncode, ": " + why[-1] if why else ""))
    return p.stdout


class Progress:
    """Says every @every seconds that a long command still runs: how long
    it has run and the last line @keep() accepted."""

    def __init__(self, label: str, keep: Callable[[str], bool],
                 every: float = 60):
        self.label = label
        self.keep = keep
        self.every = every
        self.start = self.shown = time.time()
        self.last = ""

    def elapsed(self) -> int:
        return int(time.time() - self.start)

    def line(self, line: str) -> None:
        if self.keep(line):
            self.last = line.strip()
        now = time.time()
        if now - self.shown >= self.every:
            self.shown = now
            say("%s: %ds, %s" % (self.label, self.elapsed(), self.last))


def say(msg: str) -> None:
    """One timestamped line per line of msg on stdout."""
    stamp = time.strftime("%H:%M:%S")
    for line in msg.splitlines() or [""]:
        print("%s %s" % (stamp, line), flush=True)


def warn(msg: str) -> None:
    print("%s WARNING: %s" % (time.strftime("%H:%M:%S"), msg),
          file=sys.stderr, flush=True)


def stream(cmd: Sequence[str], log: str, cwd: Optional[str] = None,
           env: Optional[Mapping[str, str]] = None,
           timeout: Optional[float] = None,
           progress: Optional[Progress] = None) -> Optional[int]:
    """Run cmd with its output appended to log after a line '$ cmd', each
    line also shown to progress.

    Returns the exit code, or None when timeout seconds passed first.  The
    child never outlives this call, whatever ends it (an interrupt too).
    """
    full_env = dict(os.environ, **env) if env else None
    with open(log, "ab") as f:
        f.write(("$ %s\n" % " ".join(cmd)).encode())
        f.flush()
        p = subprocess.Popen(list(cmd), cwd=cwd, env=full_env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        assert p.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        deadline = time.time() + timeout if timeout else None
        pending = b""
        try:
            while True:
                wait = min(5.0, deadline - time.time()) if deadline else 5.0
                if wait <= 0:
                    return None
                if not sel.select(wait):
                    if progress:
                        progress.line("")
                    continue
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                f.write(chunk)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    if progress:
                        progress.line(raw.decode(errors="replace"))
            return p.wait()
        finally:
            sel.close()
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()


def last_line(path: str) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 4096))
        lines = f.read().decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else ""


def watch(cmd: Sequence[str], log: str, timeout: Optional[float],
          progress: Progress) -> Optional[int]:
    """Run cmd with its output written straight into log (QEMU's console
    bytes, as a file gets them), telling progress the log's last line.

    Returns the exit code, or None when timeout seconds passed first; the
    child never outlives this call."""
    with open(log, "wb") as f:
        p = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=f,
                             stderr=subprocess.STDOUT)
    deadline = time.time() + timeout if timeout else None
    try:
        while True:
            wait = min(5.0, deadline - time.time()) if deadline else 5.0
            if wait <= 0:
                return None
            try:
                return p.wait(wait)
            except subprocess.TimeoutExpired:
                progress.line(last_line(log))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def run(cmd: Sequence[str], step: str, log: str, cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None) -> None:
    """Run cmd with its output in log; a non-zero exit is a StageError
    naming the step and the log."""
    rc = stream(cmd, log, cwd=cwd, env=env)
    if rc != 0:
        raise StageError(step, "%s failed (%s)" % (" ".join(cmd[:3]), rc), log)


def parse_kv(text: str) -> dict[str, str]:
    """KEY=VALUE lines (comments with #)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        k, _, v = line.partition("=")
        out[k.strip()] = v.strip()
    return out


def read_kv(path: str) -> dict[str, str]:
    """Read a KEY=VALUE file (comments with #)."""
    with open(path) as f:
        return parse_kv(f.read())


def write_kv(path: str, kv: Mapping[str, str], header: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("# %s\n" % header)
        for k, v in kv.items():
            f.write("%s=%s\n" % (k, v))
