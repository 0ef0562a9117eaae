"""Parse the console output of the slab_bulk_bench kernel module.

The module prints, besides its human readable tables, one line per
measurement:

    slab_bulk_bench: R test=a variant=bulk n=8 size=256 objs=100000 cycles=1234567 empty=12345

plus "slab_bulk_bench: allocator=SLUB tsc_khz=2000000" at the start,
"slab_bulk_bench: S test=a variant=bulk n=8 objs=100000 alloc_slowpath=12 ..."
(SLUB event counter deltas, kernels with CONFIG_SLUB_STATS only),
"slab_bulk_bench: test X skipped: <reason>" (or the older "test X skipped:
<reason>" form) for skipped tests and "slab_bulk_bench: done" at the end.
Lines may carry a printk timestamp ("[    1.234567] ") and may be
interleaved with any other console output.
"""
import re
from typing import Any

# A parsed console log (see parse()); the report keeps it as it is in
# results/*.json.
Parsed = dict[str, Any]
PREFIX = "slab_bulk_bench: "
REQUIRED = ("test", "variant", "n", "size", "objs", "cycles", "empty")

_TS = re.compile(r"^\s*(?:<\d+>)?\s*\[\s*\d+\.\d+\]\s*")
_KV = re.compile(r"^([a-z_]+)=(\S+)$")
_ALLOC = re.compile(r"^allocator=(\S+)\s+tsc_khz=(\d+)\s*$")
_SKIP = re.compile(r"^test ([a-z]) skipped:\s*(.*)$")


def _strip(line: str) -> str | None:
    """The part of @line after the module prefix, or None."""
    line = _TS.sub("", line.rstrip("\r\n"), count=1)
    i = line.find(PREFIX)
    if i < 0:
        return None
    return line[i + len(PREFIX):].strip()


def parse_r_line(body: str, lineno: int | None = None) -> dict[str, Any]:
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
    rec["per_obj"] = (rec["cycles"] - rec["empty"]) / rec["objs"]
    return rec


def parse_s_line(body: str, lineno: int | None = None) -> dict[str, Any]:
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
    return rec


def parse(text: str) -> Parsed:
    """Parse a console log; see the module docstring for the line formats.

    Returns {"allocator": str or None, "tsc_khz": int or None, "done": bool,
    "skipped": {test: reason}, "results": [record, ...], "stats": [S record,
    ...]} where each record
    has test, variant, n, size, objs, cycles, empty and per_obj (float,
    (cycles - empty) / objs).  Raises ValueError on a malformed R line.
    """
    out: dict[str, Any] = {"allocator": None, "tsc_khz": None, "done": False,
           "skipped": {}, "results": [], "stats": []}
    for lineno, line in enumerate(text.splitlines(), 1):
        body = _strip(line)
        if body is None:
            continue
        if body == "R" or body.startswith("R "):
            out["results"].append(parse_r_line(body[2:], lineno))
            continue
        if body.startswith("S "):
            out["stats"].append(parse_s_line(body[2:], lineno))
            continue
        m = _ALLOC.match(body)
        if m:
            out["allocator"] = m.group(1)
            out["tsc_khz"] = int(m.group(2))
            continue
        m = _SKIP.match(body)
        if m:
            out["skipped"][m.group(1)] = m.group(2).strip()
            continue
        if body == "done":
            out["done"] = True
    return out


if __name__ == "__main__":
    import json
    import sys

    with open(sys.argv[1], errors="replace") as f:
        print(json.dumps(parse(f.read()), indent=1))
