"""./bulk setup: the Debian packages every stage needs."""
import os
import subprocess

from common import capture, need_tools, say

APT_PACKAGES = [
    "qemu-system-x86", "linux-source-6.1", "build-essential", "flex", "bison",
    "bc", "libelf-dev", "libssl-dev", "cpio", "ccache", "python3", "git",
    "xz-utils", "kmod", "gnuplot-nox", "rsync",
    # checkpatch.pl's SPDX check runs scripts/spdxcheck.py with these
    "python3-ply", "python3-git",
    # the test command's type check; ./bulk boot --shell's busybox
    "mypy", "busybox-static",
]


def missing() -> list[str]:
    need_tools("setup", ["dpkg-query"])
    p = subprocess.run(
        ["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Package}\n"] + APT_PACKAGES,
        capture_output=True, text=True)
    have = {l.split()[-1] for l in p.stdout.splitlines() if l.startswith("ii")}
    return [p for p in APT_PACKAGES if p not in have]


def setup() -> None:
    """Install what is missing (Debian 12, as root or with sudo)."""
    need = missing()
    if not need:
        say("setup: all packages installed")
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    say("setup: apt-get install %s" % " ".join(need))
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    capture(sudo + ["apt-get", "update", "-q"], "setup", env=env)
    capture(sudo + ["apt-get", "install", "-y", "-q"] + need, "setup", env=env)
