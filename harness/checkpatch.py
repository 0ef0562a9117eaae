"""scripts/checkpatch.pl --strict over the series: 0 errors, 0 warnings,
0 checks; and a self-test that it flags a patch with a known warning."""
import os
import subprocess

from common import TREE, StageError, log_path

SELFTEST = ("From: Harness <harness@example.org>\n"
            "Subject: [PATCH] mm/slub: selftest\n\n"
            "Deliberately bad patch.\n\n"
            "Signed-off-by: Harness <harness@example.org>\n---\n"
            "diff --git a/mm/slub.c b/mm/slub.c\n"
            "--- a/mm/slub.c\n+++ b/mm/slub.c\n"
            "@@ -1,3 +1,4 @@\n"
            " // SPDX-License-Identifier: GPL-2.0\n"
            "+static int harness_selftest_value_with_a_long_name = 1; /* this "
            "comment pushes the added line well past the 100 column limit */\n"
            " /*\n"
            "  * SLUB: A slab allocator that limits cache line use instead of queuing\n")


def checkpatch(patch: str) -> None:
    patch = os.path.abspath(patch)
    script = os.path.join(TREE, "scripts", "checkpatch.pl")
    if not os.path.exists(script):
        raise StageError("checkpatch", "%s missing: run ./bulk tree" % script)
    # Debian's python3 first: scripts/spdxcheck.py needs its python3-ply
    # and python3-git, which another python3 on PATH may lack.
    env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""))
    p = subprocess.run(["perl", script, "--strict", "--color=never", patch],
                       cwd=TREE, env=env, capture_output=True, text=True)
    log = log_path("checkpatch-%s.log" % os.path.basename(patch))
    with open(log, "w") as f:
        f.write(p.stdout + p.stderr)
    if "Traceback" in p.stderr:
        raise StageError("checkpatch", "checkpatch.pl's helper failed (run "
                         "./bulk setup): " + p.stderr.strip().splitlines()[-1], log)
    verdict = [l for l in p.stdout.splitlines() if l.startswith("total:")]
    if p.returncode != 0 or not verdict or \
            "0 errors, 0 warnings, 0 checks" not in verdict[0]:
        issues = [l for l in p.stdout.splitlines()
                  if l.startswith(("ERROR:", "WARNING:", "CHECK:"))]
        raise StageError("checkpatch", "%s: %s" % (
            os.path.basename(patch), verdict[0] if verdict else "no verdict"),
            log, "\n".join(issues[:10]))


def selftest() -> None:
    """checkpatch must flag a patch with a known style warning; otherwise a
    clean verdict on the series would mean nothing."""
    bad = log_path("checkpatch-selftest.patch")
    with open(bad, "w") as f:
        f.write(SELFTEST)
    try:
        checkpatch(bad)
    except StageError as e:
        if "WARNING: line length" in str(e):
            return
        raise
    raise StageError("checkpatch", "checkpatch.pl did not flag a patch with "
                     "a line over 100 columns", bad)
