"""KUnit stage: boot a built kernel, load its KUnit test modules, and parse
each module's KTAP output with the kernel's own kunit.py parser.

The suites are modules (=m in the configs) so that one kernel per config
serves the boot smoke test, KUnit and the benchmark.  KUNIT_RUNS are the
runs the test command makes at the tip (on the allocator's test kernel,
see test.TEST_KERNEL); kunit_each makes some of them, as given, at
every patch.
"""
import dataclasses
import json
import os
import re
import subprocess
from typing import Any, Callable

import boot
import kconfig
from common import StageError, log_path, say

# Test modules, in load order, with the Kconfig symbol that builds each.
# The contract suite goes last: the KASAN report that one of its cases must
# provoke turns lockdep off for the rest of the boot.
KUNIT_MODULES = {"slub_kunit": "SLUB_KUNIT_TEST",
                 "skb_list_test": "SKB_LIST_KUNIT_TEST",
                 "slab_bulk_kunit": "SLAB_BULK_KUNIT_TEST"}
CONTRACT_SUITE = "slab_bulk_kunit"
# Suites that load with KFENCE's sampling off (the init's harness.nokfence).
# 6.1's slub_kunit writes past or into a freed object and expects SLUB's
# debug checks to count the damage; when KFENCE happens to serve that
# object (one allocation per sample interval goes to KFENCE's pool, any
# cache's: timing decides, and SMP runs' timing varies from boot to boot),
# KFENCE reports the access instead and the case fails.  Upstream's slub_kunit keeps its
# caches out of KFENCE from 6.2 on; the contract suite's KFENCE case needs
# the sampling, so it stays on for the other suites.
NO_KFENCE = ("slub_kunit",)


@dataclasses.dataclass(frozen=True)
class KunitRun:
    """One boot: config, QEMU mode and extra kernel command line.  must_run
    names cases that must pass in this run, "case" for the contract suite's,
    "module:case" for another suite's: a case that skips where its run is
    the only one that can run it proves nothing."""
    config: str
    mode: str
    append: str = ""
    must_run: tuple[str, ...] = ()

    def name(self) -> str:
        return "%s %s%s" % (self.config, self.mode,
                            " " + self.append if self.append else "")


# init_on_free gets runs of its own: init_on_alloc would zero what it
# failed to wipe, and slab poisoning (slub_debug=P) opts caches out of it.
# SLUB_DEBUG_ON sends every cache through SLUB's debug paths, which the
# bulk fast paths skip: the slub-debug runs with slub_debug=- run the
# allocation fast paths under KASAN, lockdep and DEBUG_VM.  Not the
# grouped free: under KASAN, SLUB frees a bulk array one object at a
# time.  That runs on the "slub" runs' kernel (slub-faults: DEBUG_VM,
# DEBUG_LIST and KFENCE, configs/checkers.config), and with slub_debug=FZPU
# under SLUB's consistency checks of each run freed.
# KASAN prints only its first report unless kasan_multi_shot is given, and
# the contract suite provokes one (an expected double free): without it, a
# real report after that one would go unseen.
# An oops kills the test's thread and the boot would wait for the timeout
# (10 minutes): panic instead, which ends QEMU at once (panic=-1,
# -no-reboot) with the oops in the log.
KUNIT_CMDLINE = "oops=panic"
# The test kernels of SLUB and SLAB sample KFENCE objects (checkers.config):
# the runs whose must-run cases skip when a KFENCE object comes up where
# they look (an object alone in its slab, a double free SLUB checks) turn
# sampling off, so that no change of code moving a sample into them fails
# the run; the plain runs keep it, and must run the KFENCE case.
KFENCE_OFF = "kfence.sample_interval=0"

KUNIT_RUNS = [
    # KFENCE objects in a bulk array, on a kernel without KASAN (the
    # grouped free).
    KunitRun("slub", "exact", must_run=("slab_bulk_kfence_sampled",)),
    KunitRun("slub", "exact", "slub_debug=FZPU " + KFENCE_OFF,
             must_run=("slab_bulk_debug_redzone", "slab_bulk_debug_double_free")),
    KunitRun("slub", "exact", "init_on_alloc=1 " + KFENCE_OFF,
             must_run=("slab_bulk_init_on_alloc",)),
    KunitRun("slub", "exact", "init_on_free=1 " + KFENCE_OFF,
             must_run=("slab_bulk_init_on_free",)),
    KunitRun("slub", "smp", must_run=("slab_bulk_cross_cpu",)),
    # The debug kernels have tracepoints, AF_UNIX and page_pool
    # (debug.config): the skb_list cases that need them run there.
    KunitRun("slub-debug", "exact", "harness.cgroup=kunit kasan_multi_shot",
             must_run=("slab_bulk_kasan_poison", "slab_bulk_kasan_double_free",
                       "slab_bulk_memcg_failure", "slab_bulk_kfence_sampled",
                       "skb_list_test:skb_list_socket",
                       "skb_list_test:skb_list_trace_location",
                       "skb_list_test:skb_list_page_pool")),
    KunitRun("slub-debug", "exact",
             "harness.cgroup=kunit kasan_multi_shot slub_debug=-"),
    KunitRun("slub-debug", "smp",
             "harness.cgroup=kunit kasan_multi_shot slub_debug=-"),
    KunitRun("slab", "exact", must_run=("slab_bulk_kfence_sampled",)),
    KunitRun("slab", "exact", "init_on_alloc=1 " + KFENCE_OFF,
             must_run=("slab_bulk_init_on_alloc",)),
    KunitRun("slab", "exact", "init_on_free=1 " + KFENCE_OFF,
             must_run=("slab_bulk_init_on_free",)),
    KunitRun("slab", "smp", must_run=("slab_bulk_cross_cpu",)),
    KunitRun("slab-debug", "exact", "harness.cgroup=kunit",
             must_run=("slab_bulk_debug_slab_redzone",
                       "slab_bulk_memcg_failure")),
    KunitRun("slob", "exact"),
    KunitRun("slob", "smp"),
]


@dataclasses.dataclass(frozen=True)
class Traits:
    """What a KUnit boot has that decides which cases can run: the
    allocator, its kernel's .config (symbol -> value) and the run's
    QEMU mode and kernel command line."""
    alloc: str
    options: dict[str, str]
    mode: str
    append: str

    def on(self, symbol: str) -> bool:
        return self.options.get(symbol) in ("y", "m")

    def booted(self, word: str) -> bool:
        return word in self.append.split()

    def kfence(self) -> bool:
        """KFENCE samples objects in this boot."""
        return self.on("KFENCE") and not self.booted(KFENCE_OFF)

    def slub_flags(self) -> str:
        """The debug flags SLUB gives every cache, upper case ("" for
        none): slub_debug= on the command line, else SLUB_DEBUG_ON's."""
        if self.alloc != "slub" or not self.on("SLUB_DEBUG"):
            return ""
        every = "FZPU"
        flags = every if self.on("SLUB_DEBUG_ON") else ""
        for w in self.append.split():
            if w == "slub_debug":
                flags = every
            elif w.startswith("slub_debug="):
                given = w.partition("=")[2].split(",")[0].upper()
                flags = "" if given.startswith("-") else given or every
        return flags

    def slub_debug(self) -> bool:
        """SLUB's debug flags are on for every cache."""
        return bool(self.slub_flags())

    def poisoned(self) -> bool:
        """Every cache is poisoned: SLUB's P, or DEBUG_SLAB."""
        return "P" in self.slub_flags() or (
            self.alloc == "slab" and self.on("DEBUG_SLAB"))

    def slub_checks(self) -> bool:
        """SLUB with SLUB_DEBUG: per-cache counts and debug caches."""
        return self.alloc == "slub" and self.on("SLUB_DEBUG")


# Each reason for which a suite may skip a case, with when the reason
# holds.  A case that skips for a reason not listed here, or for one that
# does not hold in its run (a kernel that has the option, a boot that has
# the parameter), fails the run: in each run, every case runs that can.
SKIP_REASONS: dict[str, Callable[[Traits], bool]] = {
    "SLOB has no per-cache slabs to fill": lambda t: t.alloc == "slob",
    "SLOB only zeroes sub-page objects on __GFP_ZERO":
        lambda t: t.alloc == "slob",
    "SLOB keeps free-block headers inside freed objects":
        lambda t: t.alloc == "slob",
    "SLOB cannot kfree() kmem_cache objects": lambda t: t.alloc == "slob",
    "CONFIG_SLAB_FREELIST_RANDOM is off":
        lambda t: not t.on("SLAB_FREELIST_RANDOM"),
    # Red zones and tracking make the objects of debug caches larger.
    "fewer than 8 objects per slab": lambda t: t.slub_debug(),
    "fewer than 12 objects per slab": lambda t: t.slub_debug(),
    "init_on_alloc is off (boot with init_on_alloc=1)":
        lambda t: not t.booted("init_on_alloc=1")
        and not t.on("INIT_ON_ALLOC_DEFAULT_ON"),
    "init_on_free is off (boot with init_on_free=1)":
        lambda t: not t.booted("init_on_free=1")
        and not t.on("INIT_ON_FREE_DEFAULT_ON"),
    "poisoned cache (slab debugging) opts out of init_on_alloc":
        lambda t: t.poisoned(),
    "poisoned cache (slab debugging) opts out of init_on_free":
        lambda t: t.poisoned(),
    "needs ZONE_DMA with a known size (MAX_DMA_PFN) to force a failure":
        lambda t: not t.on("ZONE_DMA"),
    "needs SLUB, or SLAB with CONFIG_NET":
        lambda t: t.alloc == "slob" or t.alloc == "slab" and not t.on("NET"),
    "needs fault injection (CONFIG_FAULT_INJECTION)":
        lambda t: not t.on("FAULT_INJECTION"),
    # sbt_failing_points() in the contract suite.
    "no fault point that fails a call here (see above)":
        lambda t: not t.on("FAILSLAB") and not (
            t.on("FAIL_PAGE_ALLOC") and (
                t.alloc == "slob" or t.alloc == "slab" and not t.on("NUMA"))),
    "needs CONFIG_KFENCE": lambda t: not t.on("KFENCE"),
    "KFENCE sampled nothing in 10 s (kfence.sample_interval=0?)":
        lambda t: t.booted(KFENCE_OFF),
    # Where KFENCE samples, a sample can take the object a case needs;
    # KASAN's quarantine keeps a freed object in its slab.
    "no object alone in its slab (KFENCE, or KASAN's quarantine?)":
        lambda t: t.kfence() or t.on("KASAN"),
    "KFENCE object is not checked by SLUB": lambda t: t.kfence(),
    "only KFENCE objects in the second half": lambda t: t.kfence(),
    "KFENCE object: KFENCE checks its frees itself": lambda t: t.kfence(),
    "no per-cache object count (SLOB, or SLUB without SLUB_DEBUG)":
        lambda t: t.alloc == "slob" or t.alloc == "slub" and not t.slub_checks(),
    "nothing to check without the count":
        lambda t: t.alloc == "slob" or t.alloc == "slub" and not t.slub_checks(),
    "needs at least two online CPUs": lambda t: t.mode == "exact",
    "red zone checks need SLUB with CONFIG_SLUB_DEBUG":
        lambda t: not t.slub_checks(),
    "double free detection needs SLUB consistency checks (CONFIG_SLUB_DEBUG)":
        lambda t: not t.slub_checks(),
    "KASAN quarantines the object before SLUB checks it":
        lambda t: t.on("KASAN"),
    "needs SLAB with CONFIG_DEBUG_SLAB and printk (SLUB: debug_redzone)":
        lambda t: t.alloc != "slab" or not t.on("DEBUG_SLAB"),
    "suite loaded from the root memcg":
        lambda t: not any(w.startswith("harness.cgroup=")
                          for w in t.append.split()),
    "kmem accounting is off (cgroup.memory=nokmem?)":
        lambda t: t.booted("cgroup.memory=nokmem") or not t.on("MEMCG_KMEM"),
    "needs memcg kmem accounting and ZONE_DMA with a known size":
        lambda t: not t.on("MEMCG_KMEM") or not t.on("ZONE_DMA"),
    "needs generic KASAN (CONFIG_KASAN_GENERIC)":
        lambda t: not t.on("KASAN_GENERIC"),
    "needs generic KASAN and tracepoints":
        lambda t: not t.on("KASAN_GENERIC") or not t.on("TRACEPOINTS"),
    # A module would not be in the initramfs.
    "no AF_UNIX socket: -97": lambda t: t.options.get("UNIX") != "y",
    "no page_pool here (CONFIG_PAGE_POOL)": lambda t: not t.on("PAGE_POOL"),
    "no tracepoints": lambda t: not t.on("TRACEPOINTS"),
    "no symbols to name the location": lambda t: not t.on("KALLSYMS"),
}
# A KTAP result line with a SKIP directive, after any console prefix.
SKIP_LINE = re.compile(r"(?:^|\s)ok \d+ (?:- )?(\w+) # SKIP ?(.*?)\s*$")


def skip_reasons(text: str) -> dict[str, str]:
    """Each skipped case's reason in a suite's KTAP text (kunit.py's JSON
    keeps only the status)."""
    out = {}
    for line in text.splitlines():
        m = SKIP_LINE.search(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def skip_problems(mod: str, reasons: dict[str, str], t: Traits) -> list[str]:
    """The skips in reasons that this run does not excuse."""
    out = []
    for case, why in sorted(reasons.items()):
        holds = SKIP_REASONS.get(why)
        if holds is None:
            out.append("%s: %s skipped (\"%s\"), a reason no run may skip "
                       "for (kunit.SKIP_REASONS)" % (mod, case, why))
        elif not holds(t):
            out.append("%s: %s skipped (\"%s\"), which does not hold in "
                       "this run" % (mod, case, why))
    return out


def built_options(path: str) -> dict[str, str]:
    """A .config's symbols (without CONFIG_) and values."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.startswith("CONFIG_") and "=" in line:
                k, _, v = line.strip().partition("=")
                out[k[len("CONFIG_"):]] = v
    return out


def traits(r: KunitRun, tree: str) -> Traits:
    """r's Traits, from its built kernel's .config."""
    alloc = r.config.split("-")[0]
    cfg = os.path.join(kconfig.tree(tree).out_dir(r.config), ".config")
    return Traits(alloc, built_options(cfg), r.mode, r.append)


@dataclasses.dataclass
class SuiteCounts:
    passed: int = 0
    skipped: int = 0
    failed: list[str] = dataclasses.field(default_factory=list)
    # Every case's KTAP status, by name (PASS, SKIP, FAIL, ...); not
    # compared: the counts are the summary.
    status: dict[str, str] = dataclasses.field(default_factory=dict,
                                               compare=False)

    def summary(self) -> str:
        return "%d passed, %d skipped, %d failed" % (
            self.passed, self.skipped, len(self.failed))


@dataclasses.dataclass
class KunitResult:
    ok: bool
    log: str
    problems: list[str]
    suites: dict[str, SuiteCounts]

    def summary(self) -> str:
        return "; ".join("%s %s" % (m, c.summary()) for m, c in self.suites.items())


def split_by_module(text: str, modules: list[str]) -> dict[str, str]:
    """Console text of each 'harness: loading <mod>' .. next marker."""
    parts: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        if "harness: loading " in line:
            cur = line.split("harness: loading ", 1)[1].split()[0]
            parts[cur] = []
        elif cur:
            parts[cur].append(line)
    return {m: "\n".join(parts.get(m, [])) for m in modules}


def count(node: dict[str, Any], acc: SuiteCounts) -> SuiteCounts:
    """Add the leaf test cases of a kunit.py JSON tree to acc."""
    for case in node.get("test_cases", []):
        status = case.get("status")
        acc.status[case.get("name", "?")] = str(status)
        if status == "PASS":
            acc.passed += 1
        elif status == "SKIP":
            acc.skipped += 1
        else:
            acc.failed.append(case.get("name", "?"))
    for sub in node.get("sub_groups", []):
        count(sub, acc)
    return acc


def parse(kunit_py: str, text: str, name: str) -> tuple[bool, SuiteCounts]:
    """Run the kernel's kunit.py parse on text; (ok, counts).  Its output
    goes to build/logs/kunit-<name>.txt and .json."""
    jpath = log_path("kunit-%s.json" % name)
    if os.path.exists(jpath):
        os.remove(jpath)
    p = subprocess.run(["python3", kunit_py, "parse", "--json=" + jpath],
                       input=text, capture_output=True, text=True,
                       cwd=os.path.dirname(kunit_py))
    with open(log_path("kunit-%s.txt" % name), "w") as f:
        f.write(p.stdout + p.stderr)
    counts = SuiteCounts()
    if os.path.exists(jpath):
        with open(jpath) as f:
            try:
                count(json.load(f), counts)
            except ValueError:
                pass
    ok = p.returncode == 0 and counts.passed + counts.skipped > 0 \
        and not counts.failed
    return ok, counts


def expected_modules(config: str, tree: str) -> list[str]:
    """The KUnit modules a config builds at this point of the series: the
    config asks for them and the tree declares their symbol."""
    src = kconfig.tree(tree).src
    declared = kconfig.declared_symbols(src)
    wanted = kconfig.requested(config, src)
    return [m for m, sym in KUNIT_MODULES.items()
            if wanted.get(sym) == "m" and sym in declared]


def cmdline(mods: list[str], append: str) -> str:
    """The kernel command line words a KUnit boot adds for mods."""
    quiet = [m for m in mods if m in NO_KFENCE]
    words = [KUNIT_CMDLINE]
    if quiet:
        words.append("harness.nokfence=" + ",".join(quiet))
    return " ".join(words + ([append] if append else []))


def kfence_switch_problems(text: str, mods: list[str],
                           has_kfence: bool) -> list[str]:
    """What the init's console lines say went wrong with the KFENCE switch
    around each of mods that NO_KFENCE lists ([] when nothing did)."""
    # As split_by_module: a kernel line may share the console line.
    lines = [ln[ln.index("harness: "):].strip() for ln in text.splitlines()
             if "harness: " in ln]
    out = []
    for mod in mods:
        if mod not in NO_KFENCE:
            continue
        load = "harness: loading %s " % mod
        at = next((i for i, ln in enumerate(lines) if ln.startswith(load)),
                  None)
        if at is None:
            out.append("%s: never loaded" % mod)
            continue
        before = lines[at - 1] if at else ""
        after = lines[at + 2] if at + 2 < len(lines) else ""
        if not has_kfence:
            if before != "harness: KFENCE sampling absent":
                out.append("%s: init did not find KFENCE absent" % mod)
        elif before == "harness: KFENCE sampling already off":
            # kfence.sample_interval=0 on the command line (KFENCE_OFF):
            # nothing to turn on again.
            continue
        elif not before.startswith("harness: KFENCE sampling off "):
            out.append("%s: loaded without KFENCE sampling off" % mod)
        elif not after.startswith("harness: KFENCE sampling on again "):
            out.append("%s: KFENCE sampling not turned on again after it"
                       % mod)
    return out


def listed_run(config: str, mode: str, append: str) -> KunitRun:
    """The KUNIT_RUNS entry with this config, mode and append (with its
    must_run), or a run of them that names no case."""
    for r in KUNIT_RUNS:
        if (r.config, r.mode, r.append) == (config, mode, append):
            return r
    return KunitRun(config, mode, append)


def must_run_problems(r: KunitRun, suites: dict[str, SuiteCounts]) -> list[str]:
    """The cases r.must_run names that did not pass in their suite's counts
    (a failed one is reported as failed already)."""
    out = []
    for entry in r.must_run:
        mod, _, case = entry.rpartition(":")
        mod = mod or CONTRACT_SUITE
        counts = suites.get(mod)
        status = counts.status.get(case) if counts else None
        if status == "SKIP":
            out.append("%s: %s skipped, which this run must run"
                       % (mod, case))
        elif status is None:
            out.append("%s: %s did not run" % (mod, case))
    return out


def run(r: KunitRun, tree: str = "linux") -> KunitResult:
    """Boot r's kernel with its KUnit modules and parse each."""
    mods = expected_modules(r.config, tree)
    if not mods:
        raise StageError("kunit", "no KUnit suite in %s at this point of the "
                         "series" % r.config)
    tag = "kunit-%s%s" % (r.mode, "-" + r.append.replace(" ", "_").replace(
        "=", "") if r.append else "")
    res = boot.boot(r.config, tree, r.mode, mods,
                    cmdline(mods, r.append), tag=tag, allow_fail=True)
    assert res is not None
    with open(res.log, errors="replace") as f:
        text = f.read()
    kunit_py = os.path.join(kconfig.tree(tree).src, "tools", "testing",
                            "kunit", "kunit.py")
    out = KunitResult(not res.problems, res.log, list(res.problems), {})
    run_traits = traits(r, tree)
    has_kfence = run_traits.on("KFENCE")
    for problem in kfence_switch_problems(text, mods, has_kfence):
        out.ok = False
        out.problems.append(problem)
    for mod, part in split_by_module(text, mods).items():
        ok, counts = parse(kunit_py, part, "%s-%s-%s-%s" % (
            tree, r.config, tag, mod))
        out.suites[mod] = counts
        for problem in skip_problems(mod, skip_reasons(part), run_traits):
            out.ok = False
            out.problems.append(problem)
        if not ok:
            out.ok = False
            out.problems.append("%s: %s" % (mod, "failed: " + ", ".join(
                counts.failed) if counts.failed else "no parsable KTAP result"))
        say("kunit %s-%s %s: %s" % (tree, r.config, mod, counts.summary()))
    for problem in must_run_problems(r, out.suites):
        out.ok = False
        out.problems.append(problem)
    return out
