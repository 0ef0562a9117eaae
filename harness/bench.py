"""The main command (./bulk bench): benchmark base vs series.

Per allocator it builds
  base:   pristine 6.1 + the benchmark patch alone   (build/linux-base)
  series: all patches                                (build/linux)
boots each in exact mode (icount: the TSC counts instructions) with the
benchmark module, parses its 'R' lines (harness/benchparse.py) and writes
results/<name>.md, results/<name>.json and results/<name>-a.png.
"""
import json
import os
import subprocess
import time

import boot
import kbuild
import kconfig
from common import (BUILD, RESULTS, TREE, StageError, info, log_path, run,
                    need_tools)

BENCH_MODULE = "slab_bulk_bench"
BENCH_FILE = "lib/slab_bulk_bench.c"
BASE_TREE = "linux-base"
ALLOCATORS = ("slub", "slab", "slob")
TESTS = "abcdef"
# Variant pairs shown side by side per test: (loop variant, bulk variant).
PAIRS = {
    "a": ("fallback", "bulk"),
    "b": ("fallback", "bulk"),
    "d": ("fallback", "bulk"),
}


def bench_patch():
    """The patch file that adds the benchmark module (None if absent)."""
    import tree
    for p in tree.patch_files():
        with open(p, errors="replace") as f:
            if ("+++ b/%s" % BENCH_FILE) in f.read():
                return p
    return None


def make_base_tree():
    """build/linux-base = base + the benchmark patch, as a git worktree."""
    patch = bench_patch()
    path = os.path.join(BUILD, BASE_TREE)
    log = log_path("tree-base.log")
    open(log, "w").close()
    if not os.path.exists(os.path.join(path, ".git")):
        run(["git", "worktree", "prune"], "bench", cwd=TREE, log=log)
        run(["git", "worktree", "add", "-f", "--detach", path, "base"], "bench",
            cwd=TREE, log=log, quiet=True)
    if patch is None:
        run(["git", "checkout", "-q", "-f", "--detach", "base"], "bench",
            cwd=path, log=log)
        return path
    import tree as tr
    with open(patch, errors="replace") as f:
        want = tr.patch_id(f.read())
    head = subprocess.run(["git", "show", "HEAD"], cwd=path, capture_output=True,
                          text=True, errors="replace").stdout
    parent = subprocess.run(["git", "rev-parse", "HEAD^", "base"], cwd=path,
                            capture_output=True, text=True).stdout.split()
    if tr.patch_id(head) == want and len(parent) == 2 and parent[0] == parent[1]:
        return path
    run(["git", "checkout", "-q", "-f", "--detach", "base"], "bench", cwd=path, log=log)
    rc = run(["git", "am", "-q", patch], "bench", cwd=path, log=log, check=False)
    if rc != 0:
        run(["git", "am", "--abort"], "bench", cwd=path, log=log, check=False)
        raise StageError("bench", "%s does not apply alone on base"
                         % os.path.basename(patch), log)
    return path


def bench_append(tests, quick, extra=""):
    s = "%s.tests=%s" % (BENCH_MODULE, tests)
    if quick:
        s += " %s.quick=1" % BENCH_MODULE
    return (s + " " + extra).strip()


def run_bench(config, tree, tests, quick, mode="exact", timeout=1200):
    """Boot with the module; returns the parsed result dict."""
    import benchparse
    res = boot.boot(config, tree, mode, [BENCH_MODULE], bench_append(tests, quick),
                    timeout=timeout, tag="bench-%s-%s%s" % (mode, tests,
                                                           "-quick" if quick else ""))
    with open(res["log"], errors="replace") as f:
        text = f.read()
    try:
        parsed = benchparse.parse(text)
    except ValueError as e:
        raise StageError("bench", "output does not parse: %s" % e, res["log"])
    if not parsed.get("done"):
        raise StageError("bench", "benchmark did not print its end marker",
                         res["log"])
    parsed["log"] = res["log"]
    return parsed


def smoke(config, quick_tests="a"):
    """Test command: quick run on the series kernel; it must parse and give
    a result for every requested test that is not skipped."""
    parsed = run_bench(config, "linux", quick_tests, True)
    tested = {r["test"] for r in parsed["results"]}
    missing = [t for t in quick_tests if t not in tested
               and t not in parsed.get("skipped", {})]
    if missing:
        raise StageError("bench", "no results for test(s) %s" % ",".join(missing),
                         parsed["log"])
    return parsed


def table(test, base, series):
    """Rows (n, fallback, base bulk, series bulk, series/base) for a test,
    per-object costs in cycles; fallback from the base kernel."""
    loop, bulk = PAIRS.get(test, ("fallback", "bulk"))

    def pick(parsed, variant):
        return {r["n"]: r["per_obj"] for r in parsed["results"]
                if r["test"] == test and r["variant"] == variant}
    fb, bb, sb = pick(base, loop), pick(base, bulk), pick(series, bulk)
    rows = []
    for n in sorted(set(fb) | set(bb) | set(sb)):
        ratio = sb[n] / bb[n] if n in sb and bb.get(n) else None
        rows.append((n, fb.get(n), bb.get(n), sb.get(n), ratio))
    return rows


def fmt(v, spec="%.1f"):
    return "-" if v is None else spec % v


def markdown(alloc, test, rows):
    out = ["### %s, test %s (instructions per object, exact mode)" % (
        alloc.upper(), test), "",
        "| N | fallback | base bulk | series bulk | series/base |",
        "|---:|---:|---:|---:|---:|"]
    for n, fb, bb, sb, r in rows:
        out.append("| %d | %s | %s | %s | %s |" % (n, fmt(fb), fmt(bb), fmt(sb),
                                                   fmt(r, "%.2f")))
    return "\n".join(out) + "\n"


def plot(rows, path, title):
    """PNG of per-object cost against N, drawn by gnuplot."""
    need_tools("bench", ["gnuplot"])
    dat = path[:-4] + ".dat"
    with open(dat, "w") as f:
        for n, fb, bb, sb, _ in rows:
            f.write("%d %s %s %s\n" % (n, fmt(fb, "%.2f").replace("-", "NaN"),
                                       fmt(bb, "%.2f").replace("-", "NaN"),
                                       fmt(sb, "%.2f").replace("-", "NaN")))
    script = ("set terminal pngcairo size 900,540\nset output '%s'\n"
              "set title '%s'\nset logscale x 2\nset xlabel 'bulk size N'\n"
              "set ylabel 'instructions per object (alloc+free)'\nset grid\n"
              "set key top left\n"
              "plot '%s' u 1:2 w lp t 'fallback (loop)', '' u 1:3 w lp t 'base bulk', "
              "'' u 1:4 w lp t 'series bulk'\n" % (path, title, dat))
    p = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    if p.returncode != 0:
        raise StageError("bench", "gnuplot failed: %s" % p.stderr)
    os.remove(dat)


def main(args):
    start = time.time()
    allocs = [a for a in args.alloc.split(",") if a]
    bad = [a for a in allocs if a not in ALLOCATORS]
    if bad or not allocs:
        raise StageError("bench", "--alloc takes a comma list of %s; got '%s'"
                         % (",".join(ALLOCATORS), args.alloc))
    tests = args.tests.replace(",", "")
    if not tests or any(t not in TESTS for t in tests):
        raise StageError("bench", "--tests takes letters among %s; got '%s'"
                         % (TESTS, args.tests))
    import base
    import cli
    import tree
    cli.setup(None)
    base.create()
    tree.create()
    make_base_tree()
    if bench_patch() is None:
        # Nothing to measure yet: prove the pipeline end to end instead.
        for alloc in allocs:
            for tr in (BASE_TREE, "linux"):
                kbuild.build(alloc, tr)
                boot.boot(alloc, tr, "exact", [], "", 300)
        info("bench: the benchmark module (%s) is not in the series yet; base "
             "and series kernels of %s build and boot" % (BENCH_FILE, ",".join(allocs)))
        return 0
    exact = "".join(t for t in tests if t != "f")
    os.makedirs(RESULTS, exist_ok=True)
    name = "bench-%s%s" % ("-".join(allocs), "-quick" if args.quick else "")
    md = ["# Slab bulk benchmark: base vs series", "",
          "Command: `./bulk bench --alloc %s --tests %s%s`" % (
              ",".join(allocs), tests, " --quick" if args.quick else ""), "",
          "Exact mode: QEMU TCG, `-icount shift=0,sleep=off -smp 1`; the guest "
          "TSC counts retired instructions, so each figure is instructions per "
          "object (empty-loop cost subtracted). fallback = one-at-a-time loop on "
          "the base kernel; series/base < 1 is better.", ""]
    data = {"command": md[2], "allocators": {}}
    for alloc in allocs:
        kbuild.build(alloc, BASE_TREE)
        kbuild.build(alloc, "linux")
        entry = {}
        for label, tr in (("base", BASE_TREE), ("series", "linux")):
            if exact:
                entry[label] = run_bench(alloc, tr, exact, args.quick)
            if "f" in tests:
                entry[label + "-smp"] = run_bench(alloc, tr, "f", args.quick, "smp")
        data["allocators"][alloc] = {k: {kk: vv for kk, vv in v.items()}
                                     for k, v in entry.items()}
        for t in exact:
            rows = table(t, entry["base"], entry["series"])
            if not rows:
                continue
            md.append(markdown(alloc, t, rows))
            print(md[-1])
            if t == "a":
                plot(rows, os.path.join(RESULTS, "%s-%s-a.png" % (name, alloc)),
                     "%s quick reuse: per-object cost vs bulk size" % alloc.upper())
    with open(os.path.join(RESULTS, name + ".md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(RESULTS, name + ".json"), "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    info("bench: results/%s.md, .json and plots written in %dm%02ds" % (
        (name,) + divmod(int(time.time() - start), 60)))
    return 0
