"""The main command (./bulk bench): benchmark base vs series.

Per allocator it builds
  base:   pristine 6.1 + the benchmark patch, with the benchmark module
          as the series has it                       (build/linux-base)
  series: all patches                                (build/linux)
so both columns come from the same module source.
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
from common import (BUILD, REPO, RESULTS, TREE, StageError, info, log_path,
                    need_tools, run)

BENCH_MODULE = "slab_bulk_bench"
BENCH_FILE = "lib/slab_bulk_bench.c"
BASE_TREE = "linux-base"
ALLOCATORS = ("slub", "slab", "slob")
# Configs --alloc accepts: the allocators and slub's benchmark variants.
BENCH_CONFIGS = ALLOCATORS + ("slub-kfence", "slub-stats")
TESTS = "abcdef"
# Test f runs in smp mode, where timings are noise: it is booted this many
# times per kernel and reported as the spread of the runs.
SMP_RUNS = 3
# The tables: (test, title, key, loop variant, bulk variant).  key is the
# R-line field the rows are keyed by; a None loop variant has no fallback.
SPECS = [
    ("a", "single object alloc+free (fastpath)", "n", None, "single"),
    ("a", "quick reuse: alloc N then free N", "n", "fallback", "bulk"),
    ("b", "working set: batches of N outstanding", "n", "fallback", "bulk"),
    ("c", "free in allocation order (frees only)", "n", "order_loop", "order_bulk"),
    ("c", "free in random order (frees only)", "n", "random_loop", "random_bulk"),
    ("c", "free in worst order (frees only)", "n", "worst_loop", "worst_bulk"),
    ("d", "kfree_bulk, mixed sizes 8..4096 (frees only)", "n", "kfree_loop",
     "kfree_bulk"),
    ("e", "10000 x kmalloc(size)", "size", None, "kmalloc"),
    ("e", "10000 x kfree", "size", None, "kfree"),
    ("e", "10000 x kmalloc(size)/kfree pairs", "size", None, "pair"),
    ("f", "concurrent N*alloc (sum over CPUs)", "size", None, "conc_alloc"),
    ("f", "concurrent N*free (sum over CPUs)", "size", None, "conc_free"),
    ("f", "concurrent N*(alloc free)", "size", None, "conc_pair"),
    ("f", "remote free: alloc side", "size", None, "remote_alloc"),
    ("f", "remote free: free side", "size", None, "remote_free"),
    ("f", "1 alloc N free: alloc side", "size", None, "one_alloc"),
    ("f", "1 alloc N free: free side", "size", None, "one_free"),
]


def bench_patch():
    """The patch file that adds the benchmark module (None if absent)."""
    import tree
    for p in tree.patch_files():
        with open(p, errors="replace") as f:
            if ("+++ b/%s" % BENCH_FILE) in f.read():
                return p
    return None


def _git_out(args, cwd):
    return subprocess.run(["git"] + args, cwd=cwd, capture_output=True,
                          text=True, errors="replace").stdout


def make_base_tree():
    """build/linux-base = base + the benchmark patch, as a git worktree, plus
    one commit that brings the module to its source in the series (build/
    linux HEAD) when a later patch changed it: base and series are measured
    with the same module."""
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
    module = _git_out(["show", "HEAD:" + BENCH_FILE], TREE)
    if not module:
        raise StageError("bench", "%s is not in build/linux HEAD although %s "
                         "adds it" % (BENCH_FILE, os.path.basename(patch)), log)
    # HEAD is the benchmark patch on base, or the module commit on top of it.
    commits = _git_out(["rev-list", "base..HEAD"], path).split()
    if commits and len(commits) <= 2:
        first = commits[-1]
        if (tr.patch_id(_git_out(["show", first], path)) == want
                and _git_out(["rev-parse", first + "^"], path) ==
                _git_out(["rev-parse", "base"], path)
                and _git_out(["show", "HEAD:" + BENCH_FILE], path) == module
                and (len(commits) == 1 or
                     _git_out(["diff", "--name-only", first, "HEAD"], path).split()
                     == [BENCH_FILE])):
            return path
    run(["git", "checkout", "-q", "-f", "--detach", "base"], "bench", cwd=path, log=log)
    rc = run(["git", "am", "-q", patch], "bench", cwd=path, log=log, check=False)
    if rc != 0:
        run(["git", "am", "--abort"], "bench", cwd=path, log=log, check=False)
        raise StageError("bench", "%s does not apply alone on base"
                         % os.path.basename(patch), log)
    if _git_out(["show", "HEAD:" + BENCH_FILE], path) != module:
        with open(os.path.join(path, BENCH_FILE), "w") as f:
            f.write(module)
        import base
        run(["git", "commit", "-q", "-a", "-m",
             "%s as in the series (build/linux HEAD)" % BENCH_FILE],
            "bench", cwd=path, log=log, env=base.BASE_ENV)
    return path


def bench_append(tests, quick, extra=""):
    s = "%s.tests=%s" % (BENCH_MODULE, tests)
    if quick:
        s += " %s.quick=1" % BENCH_MODULE
    return (s + " " + extra).strip()


def run_bench(config, tree, tests, quick, mode="exact", timeout=1200, run=None):
    """Boot with the module; returns the parsed result dict. @run numbers
    the repeated boots of smp mode (their logs are kept apart)."""
    boot.boot(config, tree, mode, [BENCH_MODULE], bench_append(tests, quick),
              timeout=timeout, tag=bench_tag(tests, quick, mode, run))
    parsed = load_run(config, tree, tests, quick, mode, run)
    if not parsed.get("done"):
        raise StageError("bench", "benchmark did not print its end marker",
                         os.path.join(REPO, parsed["log"]))
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
                         os.path.join(REPO, parsed["log"]))
    return parsed


def table(spec, base, series):
    """Rows (key, fallback, base, series, series/base) of per-object costs;
    the fallback (one-at-a-time loop) is the base kernel's."""
    test, _, key, loop, bulk = spec

    def pick(parsed, variant):
        return {r[key]: r["per_obj"] for r in parsed["results"]
                if r["test"] == test and r["variant"] == variant}
    fb = pick(base, loop) if loop else {}
    return rows_of(fb, pick(base, bulk), pick(series, bulk))


def rows_of(fb, bb, sb):
    """Rows (key, fallback, base, series, series/base) from three dicts."""
    rows = []
    for k in sorted(set(fb) | set(bb) | set(sb)):
        ratio = sb[k] / bb[k] if k in sb and bb.get(k) else None
        rows.append((k, fb.get(k), bb.get(k), sb.get(k), ratio))
    return rows


# SLUB_STATS tables: (title, counters summed) per 1000 objects.
STAT_SPECS = [
    ("slowpath events (alloc_slowpath + free_slowpath)",
     ("alloc_slowpath", "free_slowpath")),
    ("slabs from and to the page allocator (alloc_slab + free_slab)",
     ("alloc_slab", "free_slab")),
]


def stats_table(test, events, base, series):
    """Rows (n, fallback, base, series, series/base) of events per 1000
    objects from S lines; the fallback is the base kernel's loop."""
    def pick(parsed, variant):
        return {r["n"]: 1000.0 * sum(r.get(e, 0) for e in events) / r["objs"]
                for r in parsed.get("stats", [])
                if r["test"] == test and r["variant"] == variant}
    return rows_of(pick(base, "fallback"), pick(base, "bulk"), pick(series, "bulk"))


def fmt(v, spec="%.1f"):
    return "-" if v is None else spec % v


def spread_table(spec, base_runs, series_runs):
    """Rows (key, base values, series values, ratio of the medians) of a
    test measured in several runs per kernel (smp mode)."""
    import statistics
    test, _, key, _, bulk = spec

    def pick(runs):
        out = {}
        for parsed in runs:
            for r in parsed["results"]:
                if r["test"] == test and r["variant"] == bulk:
                    out.setdefault(r[key], []).append(r["per_obj"])
        return out
    b, s = pick(base_runs), pick(series_runs)
    rows = []
    for k in sorted(set(b) | set(s)):
        bv, sv = b.get(k, []), s.get(k, [])
        ratio = (statistics.median(sv) / statistics.median(bv)
                 if bv and sv and statistics.median(bv) else None)
        rows.append((k, bv, sv, ratio))
    return rows


def markdown_spread(alloc, spec, rows):
    test, title, key, _, _ = spec
    out = ["### %s test %s: %s (smp mode, one value per run)" % (
        alloc.upper(), test, title), "",
        "| %s | base runs | series runs | median series/base |" % key,
        "|---:|---:|---:|---:|"]
    for k, bv, sv, r in rows:
        out.append("| %d | %s | %s | %s |" % (
            k, " / ".join("%.0f" % v for v in bv) or "-",
            " / ".join("%.0f" % v for v in sv) or "-", fmt(r, "%.2f")))
    return "\n".join(out) + "\n"


def markdown(alloc, spec, rows):
    test, title, key, loop, _ = spec
    out = ["### %s test %s: %s" % (alloc.upper(), test, title), "",
           "| %s | fallback | base | series | series/base |" % key,
           "|---:|---:|---:|---:|---:|"]
    for k, fb, bb, sb, r in rows:
        out.append("| %d | %s | %s | %s | %s |" % (k, fmt(fb), fmt(bb), fmt(sb),
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
              "set key top left\nset yrange [0:*]\n"
              "plot '%s' u 1:2 w lp t 'fallback (loop)', '' u 1:3 w lp t 'base bulk', "
              "'' u 1:4 w lp t 'series bulk'\n" % (path, title, dat))
    p = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    if p.returncode != 0:
        raise StageError("bench", "gnuplot failed: %s" % p.stderr)
    os.remove(dat)


def bench_tag(tests, quick, mode, run=None):
    return "bench-%s-%s%s%s" % (mode, tests, "-quick" if quick else "",
                                "-run%d" % run if run else "")


def mode_runs(mode):
    """The run numbers of a mode's boots: None (one boot) in exact mode."""
    return list(range(1, SMP_RUNS + 1)) if mode == "smp" else [None]


def runs(tests):
    """(mode, test letters) boots: exact for a-e, smp for f."""
    out = []
    exact = "".join(t for t in tests if t != "f")
    if exact:
        out.append(("exact", exact))
    if "f" in tests:
        out.append(("smp", "f"))
    return out


def measure(allocs, tests, quick):
    """Build base and series kernels and boot each with the module; the
    console logs in build/logs/ are what report() reads."""
    for alloc in allocs:
        for tr in (BASE_TREE, "linux"):
            kbuild.build(alloc, tr)
            for mode, letters in runs(tests):
                for r in mode_runs(mode):
                    run_bench(alloc, tr, letters, quick, mode, run=r)


def load_run(alloc, tr, letters, quick, mode, run=None):
    import benchparse
    log = log_path("boot-%s-%s-%s.log" % (tr, alloc, bench_tag(letters, quick,
                                                                mode, run)))
    if not os.path.exists(log):
        raise StageError("report", "no benchmark log %s: run ./bulk bench with "
                         "the same options first" % log)
    with open(log, errors="replace") as f:
        try:
            parsed = benchparse.parse(f.read())
        except ValueError as e:
            raise StageError("report", "output does not parse: %s" % e, log)
    parsed["log"] = os.path.relpath(log, REPO)
    return parsed


def report(allocs, tests, quick):
    """results/bench-<allocs>[-quick].{md,json} and a PNG per allocator."""
    os.makedirs(RESULTS, exist_ok=True)
    name = "bench-%s%s" % ("-".join(allocs), "-quick" if quick else "")
    command = "./bulk bench --alloc %s --tests %s%s" % (
        ",".join(allocs), tests, " --quick" if quick else "")
    md = ["# Slab bulk benchmark: base vs series", "",
          "Command: `%s`" % command, "",
          "Kernels: *base* = Debian linux-source-6.1 (patches/BASE) plus the "
          "benchmark patch, with the module as the series has it; *series* = "
          "all of patches/. Configs: "
          "configs/ (`./bulk config NAME`).", "",
          "Tests a-e run in exact mode: QEMU TCG `-icount shift=0,sleep=off "
          "-smp 1`, where the guest TSC counts retired instructions, so every "
          "figure is **instructions per object** (empty-loop cost subtracted) "
          "and repeats bit for bit. Test f runs in smp mode (`-smp 2`, no "
          "icount), %d boots per kernel: its figures are noise, so each row "
          "shows every run. fallback = the one-at-a-time loop on the base "
          "kernel; series/base below 1 is better." % SMP_RUNS, ""]
    data = {"command": command, "allocators": {}}
    for alloc in allocs:
        entry = {}
        for label, tr in (("base", BASE_TREE), ("series", "linux")):
            for mode, letters in runs(tests):
                parsed = [load_run(alloc, tr, letters, quick, mode, r)
                          for r in mode_runs(mode)]
                if mode == "smp":
                    entry["%s-%s-runs" % (label, mode)] = parsed
                else:
                    entry["%s-%s" % (label, mode)] = parsed[0]
        data["allocators"][alloc] = entry
        for spec in SPECS:
            if spec[0] not in tests:
                continue
            if spec[0] == "f":
                rows = spread_table(spec, entry["base-smp-runs"],
                                    entry["series-smp-runs"])
                if rows:
                    md.append(markdown_spread(alloc, spec, rows))
                    print(md[-1])
                continue
            rows = table(spec, entry["base-exact"], entry["series-exact"])
            if not rows:
                continue
            md.append(markdown(alloc, spec, rows))
            print(md[-1])
            if spec[4] == "bulk":
                for title, events in STAT_SPECS:
                    srows = stats_table(spec[0], events, entry["base-exact"],
                                        entry["series-exact"])
                    if srows:
                        md.append(markdown(alloc, (spec[0], title + " per 1000 "
                                                   "objects, SLUB_STATS", "n",
                                                   None, None), srows))
                        print(md[-1])
            if spec[0] == "a" and spec[4] == "bulk":
                plot(rows, os.path.join(RESULTS, "%s-%s-a.png" % (name, alloc)),
                     "%s quick reuse: instructions per object vs bulk size N"
                     % alloc.upper())
    with open(os.path.join(RESULTS, name + ".md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(RESULTS, name + ".json"), "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    info("report: results/%s.md, results/%s.json and the plots written" % (name, name))


def cover_summary(path=None):
    """Plain-text tables for the cover letter, from the committed results
    of the default run ('' when there are none)."""
    if path is None:
        # The all-allocator run when there is one, else SLUB's default run.
        path = os.path.join(RESULTS, "bench-slub-slab-slob.json")
        if not os.path.exists(path):
            path = os.path.join(RESULTS, "bench-slub.json")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        data = json.load(f)
    out = ["Measured with the project harness: %s" % data["command"],
           "(QEMU TCG -icount: instructions per object; fallback = the",
           "one-at-a-time loop on the base kernel).", ""]
    for alloc, entry in sorted(data["allocators"].items()):
        if "base-exact" not in entry:
            continue
        for spec in SPECS:
            if spec[0] not in ("a", "c", "d") or spec[3] is None:
                continue
            if spec[0] == "c" and not spec[3].startswith("worst"):
                continue
            rows = table(spec, entry["base-exact"], entry["series-exact"])
            if not rows:
                continue
            out.append("%s test %s, %s:" % (alloc.upper(), spec[0], spec[1]))
            out.append("  %6s %9s %9s %9s %12s" % (spec[2], "fallback", "base",
                                                  "series", "series/base"))
            for k, fb, bb, sb, r in rows:
                out.append("  %6d %9s %9s %9s %12s" % (k, fmt(fb), fmt(bb), fmt(sb),
                                                      fmt(r, "%.2f")))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def check_args(args):
    allocs = [a for a in args.alloc.split(",") if a]
    bad = [a for a in allocs if a not in BENCH_CONFIGS]
    if bad or not allocs:
        raise StageError("bench", "--alloc takes a comma list of %s; got '%s'"
                         % (",".join(BENCH_CONFIGS), args.alloc))
    tests = args.tests.replace(",", "")
    if not tests or any(t not in TESTS for t in tests) or len(set(tests)) != len(tests):
        raise StageError("bench", "--tests takes letters among %s; got '%s'"
                         % (TESTS, args.tests))
    return allocs, "".join(sorted(tests))


def main(args):
    start = time.time()
    allocs, tests = check_args(args)
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
    measure(allocs, tests, args.quick)
    report(allocs, tests, args.quick)
    info("bench: done in %dm%02ds" % divmod(int(time.time() - start), 60))
    return 0


def report_main(args):
    allocs, tests = check_args(args)
    report(allocs, tests, args.quick)
    return 0
