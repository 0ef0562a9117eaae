"""Shared paths, process helpers and the error type every stage raises.

Stages talk through files under build/; nothing here keeps state in memory
between stages.
"""
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SLABBULK_BUILD", os.path.join(REPO, "build"))
TREE = os.path.join(BUILD, "linux")
LOGS = os.path.join(BUILD, "logs")
PATCHES = os.path.join(REPO, "patches")
CONFIGS = os.path.join(REPO, "configs")
RESULTS = os.path.join(REPO, "results")
BASE_FILE = os.path.join(PATCHES, "BASE")
COVER_FILE = os.path.join(PATCHES, "cover-letter.txt")


class StageError(Exception):
    """A stage failed: says which step, why, and which log to read."""

    def __init__(self, step, msg, log=None):
        self.step = step
        self.msg = msg
        self.log = log
        super().__init__(str(self))

    def __str__(self):
        s = "[%s] %s" % (self.step, self.msg)
        if self.log:
            s += "\n  log: %s" % os.path.relpath(self.log, os.getcwd()) \
                if self.log.startswith(REPO) else "\n  log: %s" % self.log
        return s


def info(msg):
    print(msg, flush=True)


def warn(msg):
    print("WARNING: " + msg, file=sys.stderr, flush=True)


def log_path(name):
    os.makedirs(LOGS, exist_ok=True)
    return os.path.join(LOGS, name)


def need_tools(step, tools):
    """Fail early, naming every missing program and the setup command."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise StageError(step, "missing tool(s): %s; run ./bulk setup "
                         "(installs them with apt)" % ", ".join(missing))


def run(cmd, step, cwd=None, log=None, env=None, check=True, quiet=False,
        timeout=None):
    """Run cmd; with log, output goes there (and is echoed unless quiet).

    Raises StageError naming the step and the log on a non-zero exit.
    """
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    if log is None:
        p = subprocess.run(cmd, cwd=cwd, env=full_env, text=True,
                           capture_output=True, timeout=timeout)
        if check and p.returncode != 0:
            raise StageError(step, "command failed (%d): %s\n%s" % (
                p.returncode, " ".join(cmd), (p.stderr or p.stdout).strip()))
        return p
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        p = subprocess.Popen(cmd, cwd=cwd, env=full_env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             errors="replace")
        start = time.time()
        for line in p.stdout:
            f.write(line)
            if not quiet:
                sys.stdout.write(line)
                sys.stdout.flush()
            if timeout and time.time() - start > timeout:
                p.kill()
        p.stdout.close()
        rc = p.wait()
    if check and rc != 0:
        raise StageError(step, "command failed (%d): %s" % (rc, " ".join(cmd)),
                         log)
    return rc


def read_kv(path):
    """Read a KEY=VALUE file (comments with #)."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def write_kv(path, kv, header=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        if header:
            f.write("# %s\n" % header)
        for k, v in kv.items():
            f.write("%s=%s\n" % (k, v))
