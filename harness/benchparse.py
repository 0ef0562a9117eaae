"""Parse the console output of the slab_bulk_bench kernel module.

The module prints, besides its human readable tables, one line per
measurement:

    slab_bulk_bench: R test=a variant=bulk n=8 size=256 objs=100000 cycles=1234567 empty=12345

plus "slab_bulk_bench: allocator=SLUB tsc_khz=2000000 [unit=instructions]"
at the start, "slab_bulk_bench: cache NAME: merged=no (...)" or "merged=yes
with OTHER (...)" for each test cache (whether slab merging gave it an
existing cache),
"slab_bulk_bench: S test=a variant=bulk n=8 objs=100000 alloc_slowpath=12 ..."
(SLUB event counter deltas, kernels with CONFIG_SLUB_STATS only),
"slab_bulk_bench: test X skipped: <reason>" (or the older "test X skipped:
<reason>" form) for skipped tests and "slab_bulk_bench: done" at the end.
Lines may carry a printk timestamp ("[    1.234567] ") and may be
interleaved with any other console output.

The parsed lines are Record (R) and StatRecord (S), a parsed boot is a Run;
results/*.json holds a Report of Runs.  Each type converts to and from its
JSON form explicitly (to_json/from_json), and Report.dumps() is the text of
results/<name>.json.
"""
import dataclasses
import json
import re
from typing import Any

PREFIX = "slab_bulk_bench: "
REQUIRED = ("test", "variant", "n", "size", "objs", "cycles", "empty")

_TS = re.compile(r"^\s*(?:<\d+>)?\s*\[\s*\d+\.\d+\]\s*")
_KV = re.compile(r"^([a-z_]+)=(\S+)$")
_ALLOC = re.compile(r"^allocator=(\S+)\s+tsc_khz=(\d+)(?:\s+unit=\S+)?\s*$")
_MERGED = re.compile(r"^cache (\S+): (merged=(?:yes|no).*)$")
_SKIP = re.compile(r"^test ([a-z]) skipped:\s*(.*)$")


def _strip(line: str) -> str | None:
    """The part of @line after the module prefix, or None."""
    line = _TS.sub("", line.rstrip("\r\n"), count=1)
    i = line.find(PREFIX)
    if i < 0:
        return None
    return line[i + len(PREFIX):].strip()


def _fields(obj: Any, what: str, required: tuple[str, ...]) -> dict[str, Any]:
    """A JSON object holding @required; ValueError when it is not one."""
    if not isinstance(obj, dict):
        raise ValueError("%s: not a JSON object: %r" % (what, obj))
    missing = [k for k in required if k not in obj]
    if missing:
        raise ValueError("%s lacks %s: %r" % (what, ", ".join(missing), obj))
    return obj


def _ints(obj: dict[str, Any], what: str) -> dict[str, int]:
    bad = [k for k, v in obj.items() if type(v) is not int]
    if bad:
        raise ValueError("%s: %s not integer(s): %r" % (what, ", ".join(bad), obj))
    return obj


@dataclasses.dataclass
class Record:
    """An R line: one measurement.  per_obj = cycles / objs (raw);
    @extra holds integer fields the module added beyond REQUIRED."""
    test: str
    variant: str
    n: int
    size: int
    objs: int
    cycles: int
    empty: int
    per_obj: float
    extra: dict[str, int] = dataclasses.field(default_factory=dict)

    def key(self, field: str) -> int:
        """The value of an integer field by name (a table's row key)."""
        if field in ("n", "size", "objs", "cycles", "empty"):
            return int(getattr(self, field))
        return self.extra[field]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        out.update(test=self.test, variant=self.variant, n=self.n, size=self.size,
                   objs=self.objs, cycles=self.cycles, empty=self.empty,
                   per_obj=self.per_obj)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> "Record":
        d = dict(_fields(obj, "R record", REQUIRED + ("per_obj",)))
        test, variant, per_obj = d.pop("test"), d.pop("variant"), d.pop("per_obj")
        if not isinstance(per_obj, (int, float)):
            raise ValueError("R record: per_obj %r is not a number" % per_obj)
        ints = _ints(d, "R record")
        return cls(str(test), str(variant), ints.pop("n"), ints.pop("size"),
                   ints.pop("objs"), ints.pop("cycles"), ints.pop("empty"),
                   per_obj, ints)


@dataclasses.dataclass
class StatRecord:
    """An S line: SLUB event counter deltas of one measurement."""
    test: str
    variant: str
    n: int
    objs: int
    counters: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.counters)
        out.update(test=self.test, variant=self.variant, n=self.n, objs=self.objs)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> "StatRecord":
        d = dict(_fields(obj, "S record", ("test", "variant", "n", "objs")))
        test, variant = d.pop("test"), d.pop("variant")
        ints = _ints(d, "S record")
        return cls(str(test), str(variant), ints.pop("n"), ints.pop("objs"), ints)


@dataclasses.dataclass
class Run:
    """A parsed boot of the benchmark module (see parse()); @log is the
    console log it came from, relative to the repository (set by the
    report, None straight from parse())."""
    allocator: str | None = None
    tsc_khz: int | None = None
    done: bool = False
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)
    results: list[Record] = dataclasses.field(default_factory=list)
    stats: list[StatRecord] = dataclasses.field(default_factory=list)
    log: str | None = None
    # Test cache name -> "merged=no (...)" / "merged=yes with X (...)".
    caches: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "allocator": self.allocator, "tsc_khz": self.tsc_khz,
            "done": self.done, "skipped": dict(self.skipped),
            "results": [r.to_json() for r in self.results],
            "stats": [s.to_json() for s in self.stats]}
        if self.log is not None:
            out["log"] = self.log
        if self.caches:
            out["caches"] = dict(self.caches)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> "Run":
        d = _fields(obj, "run", ("allocator", "tsc_khz", "done", "skipped",
                                 "results", "stats"))
        unknown = set(d) - {"allocator", "tsc_khz", "done", "skipped", "results",
                            "stats", "log", "caches"}
        if unknown:
            raise ValueError("run: unknown field(s) %s" % ", ".join(sorted(unknown)))
        return cls(d["allocator"], d["tsc_khz"], bool(d["done"]), dict(d["skipped"]),
                   [Record.from_json(r) for r in d["results"]],
                   [StatRecord.from_json(s) for s in d["stats"]], d.get("log"),
                   {str(k): str(v) for k, v in dict(d.get("caches", {})).items()})


@dataclasses.dataclass
class AllocRuns:
    """One allocator's runs in a report: each kernel's exact-mode boot
    (tests a-e) and its smp-mode boots (test f), those it has."""
    base_exact: Run | None = None
    series_exact: Run | None = None
    base_smp_runs: list[Run] | None = None
    series_smp_runs: list[Run] | None = None

    def exact(self, alloc: str) -> tuple[Run, Run]:
        """The base and series exact-mode runs; ValueError without them."""
        if self.base_exact is None or self.series_exact is None:
            raise ValueError("%s: no exact-mode run of both kernels" % alloc)
        return self.base_exact, self.series_exact

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Run):
                out[f.name.replace("_", "-")] = v.to_json()
            elif v is not None:
                out[f.name.replace("_", "-")] = [r.to_json() for r in v]
        return out

    @classmethod
    def from_json(cls, obj: Any) -> "AllocRuns":
        d = _fields(obj, "allocator entry", ())
        out = cls()
        for key, v in d.items():
            name = key.replace("-", "_")
            if name in ("base_exact", "series_exact"):
                setattr(out, name, Run.from_json(v))
            elif name in ("base_smp_runs", "series_smp_runs"):
                setattr(out, name, [Run.from_json(r) for r in v])
            else:
                raise ValueError("allocator entry: unknown field %r" % key)
        return out


@dataclasses.dataclass
class Report:
    """results/<name>.json: the command and each allocator's runs."""
    command: str
    allocators: dict[str, AllocRuns] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command,
                "allocators": {a: e.to_json() for a, e in self.allocators.items()}}

    @classmethod
    def from_json(cls, obj: Any) -> "Report":
        d = _fields(obj, "report", ("command", "allocators"))
        return cls(str(d["command"]), {a: AllocRuns.from_json(e)
                                       for a, e in d["allocators"].items()})

    def dumps(self) -> str:
        """The text of results/<name>.json."""
        return json.dumps(self.to_json(), indent=1, sort_keys=True)

    @classmethod
    def loads(cls, text: str) -> "Report":
        return cls.from_json(json.loads(text))


def parse_r_line(body: str, lineno: int | None = None) -> Record:
    """Parse the part of an R line after "R "; raise ValueError if malformed."""
    where = "line %d" % lineno if lineno is not None else "R line"
    rec: dict[str, Any] = {}
    for tok in body.split():
        m = _KV.match(tok)
        if not m:
            raise ValueError("%s: malformed token %r in R line %r" % (where, tok, body))
        key, val = m.groups()
        if key in rec:
            raise ValueError("%s: duplicate key %r in R line %r" % (where, key, body))
        rec[key] = val
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise ValueError("%s: R line lacks %s: %r" % (where, ", ".join(missing), body))
    if not re.match(r"^[a-z]$", rec["test"]):
        raise ValueError("%s: bad test %r in R line %r" % (where, rec["test"], body))
    if not re.match(r"^[a-z_]+$", rec["variant"]):
        raise ValueError("%s: bad variant %r in R line %r" % (where, rec["variant"], body))
    for key in rec:
        if key in ("test", "variant"):
            continue
        if not re.match(r"^\d+$", rec[key]):
            raise ValueError("%s: %s=%r is not a non-negative integer in R line %r"
                             % (where, key, rec[key], body))
        rec[key] = int(rec[key])
    if rec["objs"] == 0:
        raise ValueError("%s: objs=0 in R line %r" % (where, body))
    # Raw: the timed region over the objects it handled.  The empty loop
    # has the fallback's shape, not the bulk call's, so it is not
    # subtracted from anything (it stays in the record for reference).
    rec["per_obj"] = rec["cycles"] / rec["objs"]
    return Record.from_json(rec)


def parse_s_line(body: str, lineno: int | None = None) -> StatRecord:
    """An S line: test, variant and integer counters (n, objs, events)."""
    rec: dict[str, Any] = {}
    for tok in body.split():
        m = _KV.match(tok)
        if not m:
            raise ValueError("line %s: bad field %r in S line" % (lineno, tok))
        k, v = m.groups()
        if k in ("test", "variant"):
            rec[k] = v
        else:
            try:
                rec[k] = int(v)
            except ValueError:
                raise ValueError("line %s: %s=%r is not a number in S line"
                                 % (lineno, k, v)) from None
    for k in ("test", "variant", "n", "objs"):
        if k not in rec:
            raise ValueError("line %s: S line without %s" % (lineno, k))
    if rec["objs"] == 0:
        raise ValueError("line %s: objs=0 in S line" % lineno)
    return StatRecord.from_json(rec)


def parse(text: str) -> Run:
    """Parse a console log; see the module docstring for the line formats.

    Returns a Run whose results are the R lines and stats the S lines.
    Raises ValueError on a malformed R or S line.
    """
    out = Run()
    for lineno, line in enumerate(text.splitlines(), 1):
        body = _strip(line)
        if body is None:
            continue
        if body == "R" or body.startswith("R "):
            out.results.append(parse_r_line(body[2:], lineno))
            continue
        if body.startswith("S "):
            out.stats.append(parse_s_line(body[2:], lineno))
            continue
        m = _ALLOC.match(body)
        if m:
            out.allocator = m.group(1)
            out.tsc_khz = int(m.group(2))
            continue
        m = _SKIP.match(body)
        if m:
            out.skipped[m.group(1)] = m.group(2).strip()
            continue
        m = _MERGED.match(body)
        if m:
            out.caches[m.group(1)] = m.group(2).strip()
            continue
        if body == "done":
            out.done = True
    return out


if __name__ == "__main__":
    import sys

    with open(sys.argv[1], errors="replace") as f:
        print(json.dumps(parse(f.read()).to_json(), indent=1))
