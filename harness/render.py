"""Benchmark renderers: markdown tables, the gnuplot PNG and the cover
letter's plain-text tables."""
import os
import subprocess

from benchparse import Report
from common import StageError, need_tools
from tables import SPECS, Row, Spec, SpreadRow, table


def fmt(v: float | None, spec: str = "%.1f") -> str:
    return "-" if v is None else spec % v


def has_series_loop(rows: list[Row]) -> bool:
    return any(r.series_loop is not None for r in rows)


def markdown(alloc: str, spec: Spec, rows: list[Row]) -> str:
    out = ["### %s test %s: %s" % (alloc.upper(), spec.test, spec.title), ""]
    if has_series_loop(rows):
        out += ["| %s | loop (base) | loop (series) | base | series | series/base "
                "| series/loop |" % spec.key, "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            out.append("| %d | %s | %s | %s | %s | %s | %s |" % (
                r.key, fmt(r.fallback), fmt(r.series_loop), fmt(r.base),
                fmt(r.series), fmt(r.ratio, "%.2f"), fmt(r.loop_ratio, "%.2f")))
        return "\n".join(out) + "\n"
    out += ["| %s | fallback | base | series | series/base |" % spec.key,
            "|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append("| %d | %s | %s | %s | %s |" % (
            r.key, fmt(r.fallback), fmt(r.base), fmt(r.series), fmt(r.ratio, "%.2f")))
    return "\n".join(out) + "\n"


def markdown_spread(alloc: str, spec: Spec, rows: list[SpreadRow]) -> str:
    out = ["### %s test %s: %s (smp mode, one value per run)" % (
        alloc.upper(), spec.test, spec.title), "",
        "| %s | base runs | series runs | median series/base |" % spec.key,
        "|---:|---:|---:|---:|"]
    for r in rows:
        out.append("| %d | %s | %s | %s |" % (
            r.key, " / ".join("%.0f" % v for v in r.base) or "-",
            " / ".join("%.0f" % v for v in r.series) or "-", fmt(r.ratio, "%.2f")))
    return "\n".join(out) + "\n"


def plot_data(rows: list[Row]) -> str:
    """gnuplot's data: N and the four costs (loop on base, base bulk,
    series bulk, loop on the series), NaN where one is missing."""
    return "".join("%d %s\n" % (r.key, " ".join(
        "NaN" if v is None else "%.2f" % v
        for v in (r.fallback, r.base, r.series, r.series_loop)))
        for r in rows)


def plot(rows: list[Row], path: str, title: str,
         ylabel: str = "instructions per object (alloc+free)",
         xlabel: str = "bulk size N", bulk: str = "bulk") -> None:
    """PNG of per-object cost against N, drawn by gnuplot."""
    need_tools("bench", ["gnuplot"])
    dat = path[:-4] + ".dat"
    with open(dat, "w") as f:
        f.write(plot_data(rows))
    script = ("set terminal pngcairo size 900,540\nset output '%s'\n"
              "set title '%s'\nset logscale x 2\nset xlabel '%s'\n"
              "set ylabel '%s'\nset grid\n"
              "set key top left\nset yrange [0:*]\n"
              "plot '%s' u 1:2 w lp t 'loop (base kernel)', '' u 1:3 w lp t 'base %s', "
              "'' u 1:4 w lp t 'series %s', '' u 1:5 w lp t 'loop (series kernel)'\n"
              % (path, title, xlabel, ylabel, dat, bulk, bulk))
    p = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    if p.returncode != 0:
        raise StageError("bench", "gnuplot failed", detail=p.stderr)
    os.remove(dat)


def cover_tables(data: Report) -> str:
    """Plain-text tables for the cover letter from a results JSON: tests
    a, c (worst order) and d, the ones with a fallback."""
    out = ["Measured with the project harness: %s" % data.command,
           "(QEMU TCG -icount: instructions per object, raw: the timed",
           "region over the objects, nothing subtracted; loop = the",
           "one-at-a-time loop, measured on each kernel; series/loop",
           "compares the series' bulk call with the series' own loop).", ""]
    for alloc, entry in sorted(data.allocators.items()):
        if entry.base_exact is None or entry.series_exact is None:
            continue
        for spec in SPECS:
            if spec.test not in ("a", "c", "d") or spec.loop is None:
                continue
            if spec.test == "c" and not spec.loop.startswith("worst"):
                continue
            rows = table(spec, entry.base_exact, entry.series_exact)
            if not rows:
                continue
            out.append("%s test %s, %s:" % (alloc.upper(), spec.test, spec.title))
            out.append("  %6s %8s %8s %8s %8s %6s %6s" % (
                spec.key, "loop/b", "loop/s", "base", "series", "s/base", "s/loop"))
            for r in rows:
                out.append("  %6d %8s %8s %8s %8s %6s %6s" % (
                    r.key, fmt(r.fallback), fmt(r.series_loop), fmt(r.base),
                    fmt(r.series), fmt(r.ratio, "%.2f"), fmt(r.loop_ratio, "%.2f")))
            out.append("")
    return "\n".join(out).rstrip() + "\n"
