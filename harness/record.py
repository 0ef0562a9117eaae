"""Where a run's results go, and the stamp every record carries.

Every command that measures writes its records through this module: by
default under build/results/KIND/ (a scratch copy that never touches the
committed record), and under results/KIND/ only when the command was given
--record.  Each record carries a stamp: this repository's commit (with
'-dirty' when patches/, configs/, harness/ or initramfs/ differ from it),
the base (the version patches/BASE records, and the one build/linux was
unpacked from, which the run measured), the date and the command.

KIND is one of KINDS, the folders of results/ (results/README.md is the
index).
"""
import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Any, Optional

from common import BASE_FILE, BUILD, REPO, RESULTS, read_kv, rel, say

# The folders of results/, and what each holds (results/README.md says
# the same for a reader).
KINDS = {
    "bench": "the benchmark, base vs series (the main record and its variants)",
    "per-patch": "runs at every patch: builds, the contract suite, the benchmark",
    "net": "the network runs",
    "stress": "the stress suite and soaks",
    "suites": "the kernel's own suites that use the bulk API, base vs series",
    "experiments": "one-off measurements of variants not in the series",
    "superseded": "records a later run replaced, kept for their history",
    "v2": "the v2 series' records (43 patches), kept for the review that "
          "bounced it: the code they measured is not in patches/",
}
SCRATCH = os.path.join(BUILD, "results")


@dataclasses.dataclass
class Stamp:
    """What a record was measured on, and how."""
    commit: str
    base_recorded: str
    base_installed: str
    date: str
    command: str
    # Set on a stamp written after the run, when the record was committed:
    # the commit is the one that committed it, measured just before it.
    note: str = ""

    def to_json(self) -> dict[str, str]:
        return {k: v for k, v in dataclasses.asdict(self).items()
                if v or k != "note"}

    @classmethod
    def from_json(cls, obj: Any) -> Optional["Stamp"]:
        """A record's stamp as write_json() wrote it (None if it has none):
        a record rendered again keeps what it was measured on."""
        try:
            return cls(**{f.name: str(obj[f.name])
                          for f in dataclasses.fields(cls) if f.name in obj})
        except TypeError:
            return None

    def markdown(self) -> str:
        """The stamp as the first lines of a .md record."""
        base = self.base_recorded
        if self.base_installed and self.base_installed != self.base_recorded:
            base += " (measured on %s)" % self.base_installed
        when = ("Committed %s at commit `%s` (measured just before)"
                if self.note else "Recorded %s at commit `%s`")
        return ("<!-- stamp -->\n" + when % (self.date, self.commit) +
                ", base linux-source-6.1 %s, with `%s`.\n" % (base, self.command))


def repo_commit() -> str:
    """This repository's HEAD, '-dirty' when what a run depends on
    (patches/, configs/, harness/, initramfs/) differs from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"],
                              cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--",
                                "patches", "configs", "harness", "initramfs"],
                               cwd=REPO, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def installed_base() -> str:
    """The version the trees were unpacked from (build/base.stamp), which
    is what a run measured; the installed package's without a stamp."""
    made = os.path.join(BUILD, "base.stamp")
    if os.path.exists(made):
        return read_kv(made).get("VERSION", "")
    p = subprocess.run(["dpkg-query", "-W", "-f=${Version}",
                        "linux-source-6.1"], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else ""


def stamp(command: Optional[str] = None) -> Stamp:
    """The stamp of a record written now; command defaults to this
    process's own command line."""
    recorded = (read_kv(BASE_FILE).get("VERSION", "")
                if os.path.exists(BASE_FILE) else "")
    return Stamp(repo_commit(), recorded, installed_base(),
                 time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 command or " ".join(["./bulk"] + sys.argv[1:]))


def folder(kind: str, record: bool) -> str:
    """The folder a record of this kind goes to (made if missing):
    results/KIND with --record, else build/results/KIND."""
    if kind not in KINDS:
        raise ValueError("record kind %r is not one of %s" % (kind, ", ".join(KINDS)))
    d = os.path.join(RESULTS if record else SCRATCH, kind)
    os.makedirs(d, exist_ok=True)
    return d


def committed(kind: str, name: str) -> str:
    """results/KIND/NAME: where a committed record is read from."""
    return os.path.join(RESULTS, kind, name)


def find(kind: str, name: str) -> str:
    """A record to read: the committed one when there is one, else the
    scratch copy of a run without --record (the committed path when
    neither exists, for the error message)."""
    scratch = os.path.join(SCRATCH, kind, name)
    path = committed(kind, name)
    return scratch if not os.path.exists(path) and os.path.exists(scratch) else path


def write_markdown(path: str, text: str, st: Stamp) -> str:
    """path gets the stamp, then text."""
    with open(path, "w") as f:
        f.write(st.markdown() + "\n" + text.rstrip("\n") + "\n")
    return path


def write_json(path: str, data: dict[str, Any], st: Stamp) -> str:
    """path gets data with the stamp under the key 'stamp'."""
    out = {"stamp": st.to_json()}
    out.update({k: v for k, v in data.items() if k != "stamp"})
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    return path


def publish(step: str, name: str, md: str, data: dict[str, Any],
            record: bool) -> str:
    """A measuring command's end: @name.json and @name.md (@name without
    its suffix, in folder()'s folder) stamped, the markdown printed, and
    a line saying where they went.  The markdown's path."""
    st = stamp()
    write_json(name + ".json", data, st)
    path = write_markdown(name + ".md", md, st)
    print(md)
    say("%s: wrote %s, in %s" % (step, rel(path), where(record)))
    return path


def where(record: bool) -> str:
    """A few words for the end of a run: where its records went."""
    if record:
        return "results/ (the committed record)"
    return "%s (scratch; --record writes results/)" % rel(SCRATCH)
