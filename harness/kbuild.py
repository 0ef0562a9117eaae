"""Build stage: kbuild with O=, all cores, ccache; progress on stdout,
the full log in build/logs/build-<tree>-<config>.log."""
import os
import re
import subprocess
import sys
import time

import kconfig
from common import StageError, info, log_path

ERROR_RE = re.compile(r"(error:|Error \d|undefined reference|\*\*\* )")


def first_error(log):
    with open(log, errors="replace") as f:
        for line in f:
            if ERROR_RE.search(line):
                return line.rstrip()
    return None


def build(name, tree="linux", targets=("bzImage", "modules"), label=None):
    out = kconfig.configure(name, tree)
    log = log_path("build-%s-%s.log" % (tree, name))
    cmd = kconfig.make_cmd(name, tree, "-j%d" % os.cpu_count(), *targets)
    label = label or "%s-%s" % (tree, name)
    env = dict(os.environ, CCACHE_BASEDIR=os.path.dirname(kconfig.tree_dir(tree)))
    start = time.time()
    lines, last = 0, ""
    shown = start
    with open(log, "w") as f:
        f.write("$ %s\n" % " ".join(cmd))
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors="replace", env=env)
        for line in p.stdout:
            f.write(line)
            lines += 1
            if line.lstrip().startswith(("CC", "LD", "AR", "AS")):
                last = line.strip()
            now = time.time()
            if now - shown >= 20 and sys.stdout.isatty() or now - shown >= 60:
                info("build %s: %4ds, %d lines, %s" % (label, now - start, lines, last))
                shown = now
        rc = p.wait()
    if rc != 0:
        err = first_error(log) or "(no compiler error line found)"
        raise StageError("build", "%s failed: %s" % (label, err), log)
    info("build %s: done in %ds" % (label, time.time() - start))
    return out
