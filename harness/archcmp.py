"""An arm64 benchmark report's comparison with x86-64: per table, each
row's series/base on both, from the committed x86-64 record of the same
allocator (results/bench/, the main record first) and the arm64 run.
No I/O but reading that record."""
import json
import os

import record
import tables
from benchparse import AllocRuns, Run

# The committed x86-64 records to compare with, in order of preference.
X86_RECORDS = ("bench-slub-slab-slob", "bench-slub")
# The difference in series/base that counts as "the same" (issue 48), at
# N >= CLOSE_FROM.
CLOSE = 0.05
CLOSE_FROM = 8


def x86_runs(alloc: str) -> tuple[str, Run, Run] | None:
    """(record name, base run, series run) of @alloc's exact-mode runs in
    the first committed x86-64 record that has them."""
    for name in X86_RECORDS:
        path = record.committed("bench", name + ".json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            allocs = json.load(f).get("allocators", {})
        if alloc not in allocs:
            continue
        entry = AllocRuns.from_json(allocs[alloc])
        if entry.base_exact is not None and entry.series_exact is not None:
            return name, entry.base_exact, entry.series_exact
    return None


def rows(spec: tables.Spec, x86: tuple[Run, Run], arm: tuple[Run, Run]
         ) -> list[tuple[int, tables.Row, tables.Row]]:
    """(N, x86-64's row, arm64's row) of the keys both have a ratio for."""
    xr = {r.key: r for r in tables.table(spec, *x86) if r.ratio is not None}
    ar = {r.key: r for r in tables.table(spec, *arm) if r.ratio is not None}
    return [(k, xr[k], ar[k]) for k in sorted(set(xr) & set(ar))]


def far(rows_: list[tuple[int, tables.Row, tables.Row]]) -> list[int]:
    """The N >= CLOSE_FROM whose series/base differ by more than CLOSE."""
    return [k for k, x, a in rows_ if k >= CLOSE_FROM and x.ratio is not None
            and a.ratio is not None and abs(a.ratio - x.ratio) > CLOSE + 1e-9]


def markdown(alloc: str, tests: str, arm: tuple[Run, Run]) -> list[str]:
    """The comparison's markdown blocks for one allocator (x86-64's name
    @alloc); a line saying so when no x86-64 record has it."""
    found = x86_runs(alloc)
    if found is None:
        return ["No committed x86-64 record of %s (%s) to compare with." % (
            alloc, ", ".join(X86_RECORDS))]
    name, xbase, xseries = found
    md = ["## %s: series/base on x86-64 and on arm64" % alloc.upper(), "",
          "x86-64 from the committed record `results/bench/%s.json`; arm64 "
          "from this run. Instructions per object, raw, on both; *diff* = "
          "arm64's series/base less x86-64's; **far**: more than %.2f apart "
          "at N >= %d." % (name, CLOSE, CLOSE_FROM), ""]
    total, outside = 0, []
    for spec in tables.SPECS:
        if spec.test not in tests or spec.test not in "abc":
            continue
        got = rows(spec, (xbase, xseries), arm)
        if not got:
            continue
        bad = far(got)
        total += sum(1 for k, _, _ in got if k >= CLOSE_FROM)
        outside += ["%s %s N=%d" % (spec.test, spec.bulk, k) for k in bad]
        md += ["### %s test %s: %s" % (alloc.upper(), spec.test, spec.title),
               "", "| n | x86-64 base | x86-64 series | x86-64 series/base "
               "| arm64 base | arm64 series | arm64 series/base | diff |",
               "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for k, x, a in got:
            assert x.ratio is not None and a.ratio is not None
            md.append("| %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | "
                      "%+.2f%s |" % (k, x.base or 0, x.series or 0, x.ratio,
                                     a.base or 0, a.series or 0, a.ratio,
                                     a.ratio - x.ratio,
                                     " **far**" if k in bad else ""))
        md.append("")
    md.append("%s, tests %s: %d of %d rows at N >= %d within %.2f of "
              "x86-64's series/base%s." % (
                  alloc.upper(), "".join(t for t in tests if t in "abc"),
                  total - len(outside), total, CLOSE_FROM, CLOSE,
                  "; outside: " + ", ".join(outside) if outside else ""))
    return md
