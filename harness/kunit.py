"""KUnit stage: boot a built kernel, load its KUnit test modules, and parse
each module's KTAP output with the kernel's own kunit.py parser.

The suites are modules (=m in the configs) so that one kernel per config
serves the boot smoke test, KUnit and the benchmark.
"""
import json
import os
import subprocess

import boot
import kconfig
from common import REPO, RESULTS, StageError, info, log_path

# Test modules, in load order.  Only those built in a config are loaded.
# The contract suite goes last: the KASAN report that one of its cases must
# provoke turns lockdep off for the rest of the boot.
KUNIT_MODULES = ["slub_kunit", "slab_bulk_kunit"]


def split_by_module(text, modules):
    """Console text of each 'harness: loading <mod>' .. next marker."""
    parts, cur, buf = {}, None, []
    for line in text.splitlines():
        if "harness: loading " in line:
            if cur:
                parts[cur] = "\n".join(buf)
            cur = line.split("harness: loading ", 1)[1].split()[0]
            buf = []
        elif cur:
            buf.append(line)
    if cur:
        parts[cur] = "\n".join(buf)
    return {m: parts.get(m, "") for m in modules}


def count(node, acc):
    """Add the leaf test cases of a kunit.py JSON tree to acc."""
    for case in node.get("test_cases", []):
        acc[case.get("status", "FAIL")] = acc.get(case.get("status", "FAIL"), 0) + 1
        if case.get("status") not in ("PASS", "SKIP"):
            acc.setdefault("failed", []).append(case.get("name"))
    for sub in node.get("sub_groups", []):
        count(sub, acc)
    return acc


def parse(tree, text, name):
    """Run kunit.py parse on text; returns (ok, counts, stdout)."""
    src = kconfig.tree_dir(tree)
    kunit_py = os.path.join(src, "tools", "testing", "kunit", "kunit.py")
    jpath = log_path("kunit-%s.json" % name)
    p = subprocess.run(["python3", kunit_py, "parse", "--json=" + jpath],
                       input=text, capture_output=True, text=True, cwd=src)
    counts = {}
    if os.path.exists(jpath):
        with open(jpath) as f:
            try:
                counts = count(json.load(f), {})
            except ValueError:
                counts = {}
    ok = p.returncode == 0 and counts.get("PASS", 0) + counts.get("SKIP", 0) > 0 \
        and not counts.get("failed")
    return ok, counts, p.stdout + p.stderr


def run(config, tree="linux", mode="exact", append="", modules=None):
    out = kconfig.out_dir(config, tree)
    built = boot.built_modules(out)
    mods = [m for m in (modules or KUNIT_MODULES) if m in built]
    if not mods:
        raise StageError("kunit", "no KUnit test module built in %s" % out)
    tag = "kunit-%s%s" % (mode, "-" + append.replace(" ", "_").replace("=", "")
                          if append else "")
    res = boot.boot(config, tree, mode, mods, append, tag=tag, allow_fail=True)
    with open(res["log"], errors="replace") as f:
        text = f.read()
    summary = {"ok": not res["problems"], "suites": {}, "log": res["log"],
               "problems": list(res["problems"])}
    for mod, part in split_by_module(text, mods).items():
        ok, counts, out_text = parse(tree, part, "%s-%s-%s-%s" % (
            tree, config, tag, mod))
        with open(log_path("kunit-%s-%s-%s-%s.txt" % (tree, config, tag, mod)),
                  "w") as f:
            f.write(out_text)
        summary["suites"][mod] = counts
        if not ok:
            summary["ok"] = False
            summary["problems"].append("%s: %s" % (mod, "failed: " + ", ".join(
                counts.get("failed", [])) if counts.get("failed")
                else "no parsable KTAP result"))
        info("kunit %s-%s %s: %s passed, %s skipped, %d failed" % (
            tree, config, mod, counts.get("PASS", 0), counts.get("SKIP", 0),
            len(counts.get("failed", []))))
    return summary


SUITE_SRC = os.path.join("lib", "slab_bulk_kunit.c")


def each_patch_runs():
    """The runs of each_patch(), taken from the test command's KUnit runs:
    SLUB without extra options (exact and smp) and slub-debug (KASAN,
    lockdep), as issue 5 asks of every patch."""
    import testcmd
    return [r for r in testcmd.KUNIT_RUNS
            if (r[0] == "slub" and not r[2]) or r[0] == "slub-debug"]


def each_patch_rows(commits, subjects, has_suite, run_one, runs):
    """Rows (commit, subject, run name, status, detail) for every commit and
    every (config, mode, append) of @runs; run_one(commit, config, mode,
    append) returns a kunit.run() summary or raises StageError.  A commit
    without the suite gets one SKIP row."""
    rows = []
    for c, subj in zip(commits, subjects):
        if not has_suite(c):
            rows.append((c, subj, "-", "SKIP", "no contract suite at this patch"))
            continue
        for config, mode, append in runs:
            name = "%s %s" % (config, mode)
            try:
                s = run_one(c, config, mode, append)
            except StageError as e:
                rows.append((c, subj, name, "FAIL", "; ".join(
                    line.strip() for line in str(e).splitlines() if line.strip())))
                continue
            suite = s["suites"].get("slab_bulk_kunit", {})
            detail = "%d passed, %d skipped, %d failed" % (
                suite.get("PASS", 0), suite.get("SKIP", 0),
                len(suite.get("failed", [])))
            if not s["ok"]:
                detail += "; " + "; ".join(s["problems"]) + "; log: " + \
                    os.path.relpath(s["log"], REPO)
            rows.append((c, subj, name, "PASS" if s["ok"] else "FAIL", detail))
    return rows


def each_patch_markdown(rows):
    out = ["# Contract suite at every patch", "",
           "`./bulk kunit-each`: for every commit of build/linux (base..series), "
           "builds `slub` and `slub-debug` and runs the KUnit modules as `./bulk kunit` does; "
           "the counts are the contract suite's (`slab_bulk_kunit`).", "",
           "| # | patch | run | status | slab_bulk_kunit |", "|---:|---|---|---|---|"]
    num = {}
    for c, subj, name, status, detail in rows:
        num.setdefault(c, len(num) + 1)
        out.append("| %d | %s | %s | %s | %s |" % (num[c], subj.replace("|", "\\|"),
                                                   name, status, detail))
    return "\n".join(out) + "\n"


def each_patch():
    """./bulk kunit-each: the contract suite at every patch of the series.
    Writes results/kunit-each-patch.md; returns the number of failed rows."""
    import kbuild
    import tree
    tree.create()
    commits = tree.tree_commits()
    src = kconfig.tree_dir("linux")
    subjects = [subprocess.run(["git", "log", "-1", "--format=%s", c], cwd=src,
                               capture_output=True, text=True).stdout.strip()
                for c in commits]

    def has_suite(c):
        return subprocess.run(["git", "cat-file", "-e", "%s:%s" % (c, SUITE_SRC)],
                              cwd=src, capture_output=True).returncode == 0

    built = {}

    def run_one(c, config, mode, append):
        if built.get(config) != c:
            subprocess.run(["git", "checkout", "-q", "--detach", c], cwd=src,
                           check=True)
            kbuild.build(config, label="%s@%s" % (config, c[:12]))
            built[config] = c
        return run(config, "linux", mode, append)

    try:
        rows = each_patch_rows(commits, subjects, has_suite, run_one,
                               each_patch_runs())
    finally:
        subprocess.run(["git", "checkout", "-q", "series"], cwd=src)
    path = os.path.join(RESULTS, "kunit-each-patch.md")
    with open(path, "w") as f:
        f.write(each_patch_markdown(rows))
    failed = [r for r in rows if r[3] == "FAIL"]
    info("kunit-each: %d rows, %d failed; %s" % (len(rows), len(failed),
                                                 os.path.relpath(path, REPO)))
    for r in failed:
        info("FAIL %s %s: %s" % (r[1], r[2], r[4]))
    return len(failed)
