"""./bulk setup: the Debian packages every stage needs.

linux-source-6.1 is pinned to the version patches/BASE records while
Debian's archive still serves it (the security archive keeps older point
releases for a while).  Once it no longer does, the newest one is
installed and one line says so: the test command then judges the series
by whether it applies, builds and passes on that base.
"""
import os
import subprocess
from typing import Optional

from common import (BASE_FILE, StageError, capture, need_tools, read_kv,
                    say, warn)

SOURCE_PACKAGE = "linux-source-6.1"
APT_PACKAGES = [
    "qemu-system-x86", SOURCE_PACKAGE, "build-essential", "flex", "bison",
    "bc", "libelf-dev", "libssl-dev", "cpio", "ccache", "python3", "git",
    "xz-utils", "kmod", "gnuplot-nox", "rsync",
    # checkpatch.pl's SPDX check runs scripts/spdxcheck.py with these
    "python3-ply", "python3-git",
    # the test command's type check; ./bulk boot --shell's busybox
    "mypy", "busybox-static",
    # ./bulk stack's arm64 objects (its binutils: aarch64-linux-gnu-objdump),
    # and --arch arm64's kernels, QEMU and static init
    "gcc-aarch64-linux-gnu", "qemu-system-arm", "libc6-dev-arm64-cross",
]
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}


def sudo() -> list[str]:
    return [] if os.geteuid() == 0 else ["sudo"]


def installed_versions(names: list[str]) -> dict[str, str]:
    """{package: version} of those installed."""
    need_tools("setup", ["dpkg-query"])
    p = subprocess.run(
        ["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Package} ${Version}\n"]
        + names, capture_output=True, text=True)
    out = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0] == "ii":
            out[f[1]] = f[2]
    return out


def missing() -> list[str]:
    have = installed_versions(APT_PACKAGES)
    return [p for p in APT_PACKAGES if p not in have]


def require(step: str) -> None:
    """Only setup, test and bench install packages: the other commands
    name what is missing and end."""
    need = missing()
    if need:
        raise StageError(step, "not installed: %s; run ./bulk setup"
                         % " ".join(need))


def recorded_version() -> Optional[str]:
    """The linux-source-6.1 version patches/BASE records, if any."""
    if not os.path.exists(BASE_FILE):
        return None
    return read_kv(BASE_FILE).get("VERSION") or None


def served_versions(text: str) -> list[str]:
    """Versions in 'apt-cache madison' output, newest first."""
    out = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) >= 2 and f[1] and f[1] not in out:
            out.append(f[1])
    return out


def source_choice(recorded: Optional[str], installed: Optional[str],
                  served: list[str]) -> tuple[Optional[str], Optional[str]]:
    """(version to install, or None to leave the package alone; a drift
    note or None).

    The recorded version while it is served; else the newest served one,
    with a note."""
    if recorded and recorded in served:
        return (None if installed == recorded else recorded), None
    newest = served[0] if served else None
    version = None if installed and installed == newest else newest
    if not recorded:
        return version, None
    return version, drift_note(version or installed or "nothing", recorded)


def drift_note(installed: str, recorded: str | None) -> str:
    """The one line that says the installed base is not the recorded one."""
    return ("BASE DRIFT: installed %s %s, patches/BASE records %s; the series "
            "is tested on %s (./bulk move-base moves the record)"
            % (SOURCE_PACKAGE, installed, recorded, installed))


# The drift notes said so far: a command says its note once.
NOTED: list[str] = []


def note_drift(note: str) -> None:
    """Warn of a drift, unless this command already has."""
    if note not in NOTED:
        warn(note)
        NOTED.append(note)


def setup() -> None:
    """Install what is missing (Debian 12, as root or with sudo), with
    linux-source-6.1 at the recorded version while it is served."""
    need = missing()
    recorded = recorded_version()
    installed = installed_versions([SOURCE_PACKAGE]).get(SOURCE_PACKAGE)
    done = "setup: all packages installed (%s %s)" % (SOURCE_PACKAGE, installed)
    if not need and (not recorded or installed == recorded):
        say(done)
        return
    # A drift with nothing missing and the newest listed version installed:
    # apt-get update only while apt's lists still name the recorded one.
    listed = listed_sources()
    if not need and recorded not in listed and listed[:1] == [installed]:
        note_drift(drift_note(installed or "nothing", recorded))
        say(done)
        return
    served = served_sources()
    version, note = source_choice(recorded, installed, served)
    if note:
        note_drift(note)
    want = [p for p in need if p != SOURCE_PACKAGE]
    if version:
        want.append("%s=%s" % (SOURCE_PACKAGE, version))
    elif SOURCE_PACKAGE in need:
        raise StageError("setup", "apt-cache madison %s lists no version"
                         % SOURCE_PACKAGE)
    if not want:
        say(done)
        return
    apt_install(want)


def apt_install(want: list[str], step: str = "setup") -> None:
    """apt-get install want (NAME or NAME=VERSION), downgrades allowed."""
    say("%s: apt-get install %s" % (step, " ".join(want)))
    capture(sudo() + ["apt-get", "install", "-y", "-q", "--allow-downgrades"]
            + want, step, env=APT_ENV)


def served_sources(step: str = "setup") -> list[str]:
    """The linux-source-6.1 versions Debian serves now, newest first
    (after apt-get update)."""
    capture(sudo() + ["apt-get", "update", "-q"], step, env=APT_ENV)
    return listed_sources(step)


def listed_sources(step: str = "setup") -> list[str]:
    """The linux-source-6.1 versions apt's lists name, newest first."""
    return served_versions(capture(["apt-cache", "madison", SOURCE_PACKAGE],
                                   step))
