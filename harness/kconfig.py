"""Config stage: allnoconfig + fragments from configs/, then verify.

A config name maps to a list of fragments, merged by the kernel's
scripts/kconfig/merge_config.sh (-m: merge only).  The merged fragment is
given to kbuild as KCONFIG_ALLCONFIG for allnoconfig, olddefconfig settles
the rest, and kunit_config (tools/testing/kunit) parses both and checks
that the fragment is a subset of the result.  On top of that: every symbol
of the fragment must exist in the tree, except the series' own four before
the patch that adds them: a tree whose Kconfig files define one checks it
like any other symbol.
"""
import dataclasses
import hashlib
import importlib.util
import os
import re
import subprocess
from types import ModuleType

import arch
import gitrepo
from common import (BISECT_ROOT, BISECT_TREE, BENCH_BASE_TREE, BUILD, CONFIGS,
                    PREV_ROOT, PREV_TREE, TOPICS_ROOT, TOPICS_TREE, TREE,
                    StageError, capture, log_path, need_tools, read_kv, rel,
                    run, say, write_kv)

CONFIG_SETS = {
    "slub": ["common", "hardening", "slub", "bench"],
    "slab": ["common", "hardening", "slab", "bench"],
    "slob": ["common", "slob", "bench"],
    "slub-debug": ["common", "hardening", "slub", "debug", "slub-debug",
                   "faults", "failslab"],
    "slab-debug": ["common", "hardening", "slab", "debug", "slab-debug",
                   "faults", "failslab"],
    # SLUB without SLUB_DEBUG, with the series' modules: a build check.
    "slub-nodebug": ["common", "hardening", "slub-nodebug", "bench"],
    # The stress runs' kernels, and the test command's for KUnit, boot and
    # bench: the benchmark's, with fault injection; SLOB's with lockdep (it
    # has no debug options of its own) and without failslab (6.1's needs
    # SLAB or SLUB).
    # SLUB's and SLAB's with the checkers that see the paths the debug
    # kernels' hooks bypass (checkers.config); SLUB's with its event
    # counters, for the stress runs' floors (events.config).  The three
    # that the small-guest stress runs boot: madvise() (reclaim.config).
    "slub-faults": ["common", "hardening", "slub", "bench", "faults", "failslab",
                    "checkers", "events", "reclaim"],
    "slab-faults": ["common", "hardening", "slab", "bench", "faults", "failslab",
                    "checkers", "reclaim"],
    "slob-debug": ["common", "slob", "slob-debug", "faults", "reclaim"],
    # SLOB without lockdep, for ./bulk stress --runs all only.
    "slob-faults": ["common", "slob", "faults"],
    # KCSAN at -smp 2 and 4 (./bulk stress --runs kcsan): the faults
    # kernels with the data race detector; SLOB's without lockdep.
    "slub-kcsan": ["common", "hardening", "slub", "bench", "faults", "failslab",
                   "checkers", "events", "kcsan"],
    "slab-kcsan": ["common", "hardening", "slab", "bench", "faults", "failslab",
                   "checkers", "kcsan"],
    "slob-kcsan": ["common", "slob", "faults", "kcsan"],
    # Benchmark variants of slub: what KFENCE costs, and the event counters.
    "slub-kfence": ["common", "hardening", "slub", "bench", "kfence"],
    "slub-stats": ["common", "hardening", "slub", "bench", "stats"],
    # SLOB with kprobes, for the benchmark's test h (slob_lock holds).
    "slob-lockhold": ["common", "slob", "bench", "lockhold"],
    # The network runs (./bulk net): the benchmark config with virtio-net
    # and pktgen; the debug one with KASAN and lockdep.
    "slub-net": ["common", "hardening", "slub", "bench", "net"],
    # ./bulk net's profile of the slab entry points (the slab share).
    "slub-net-trace": ["common", "hardening", "slub", "bench", "net", "trace"],
    "slub-debug-net": ["common", "hardening", "slub", "debug", "slub-debug",
                       "net"],
    # ./bulk stack --live: the network config with the stack tracer, for
    # the deepest stack after the benchmark and after the network runs.
    "slub-net-stacktrace": ["common", "hardening", "slub", "bench", "net",
                            "stacktrace"],
    # ./bulk callers: the benchmark config with io_uring, and the same with
    # kprobe events and hist triggers that count the bulk calls.
    "slub-callers": ["common", "hardening", "slub", "bench", "callers"],
    "slub-callers-count": ["common", "hardening", "slub", "bench", "callers",
                           "callers-count"],
    # ./bulk suites: the kernel's own suites that use the bulk API, with
    # KASAN and KFENCE on SLUB and SLAB; SLOB runs the two it supports.
    "slub-suites": ["common", "hardening", "slub", "suites", "suites-kasan"],
    "slab-suites": ["common", "hardening", "slab", "suites", "suites-kasan"],
    "slob-suites": ["common", "slob", "suites"],
    # ./bulk detectors: slub-debug plus LKDTM, the soft-lockup detector
    # and UBSAN, a scratch kernel that each case breaks on purpose.
    "slub-detectors": ["common", "hardening", "slub", "debug", "slub-debug",
                       "faults", "failslab", "detectors"],
}
# The arm64 counterparts (./bulk bench --arch arm64, ./bulk callers --arch
# arm64): the same fragments with common-arm64 for common.
CONFIG_SETS.update({
    arch.ARM64.config(name): [arch.ARM64.common if f == "common" else f
                              for f in CONFIG_SETS[name]]
    for name in arch.ARM64_CONFIGS})
# Symbols the series adds (its KUnit suites and benchmark module): they do
# not exist on the base or before their patch, where a fragment's line for
# one is excused; once the tree defines it, it must take effect.  Any other
# unknown symbol is a typo.
SERIES_SYMBOLS = ("SLAB_BULK_KUNIT_TEST", "SLAB_BULK_BENCH", "SLAB_BULK_STRESS",
                  "SKB_LIST_KUNIT_TEST")
# The KBUILD_BUILD_* values make the image depend on the sources alone
# (Documentation/kbuild/reproducible-builds.rst). That includes the build
# number, which otherwise counts the links made in an output dir: it ends
# up in the version string, which the guest mixes into its RNG at boot
# (random_init()), and a series kernel relinked many times measured
# differently from a fresh clone's.
# The architecture's own (ARCH=, the compiler) come first (make_vars()).
MAKE_VARS = ["HOSTCC=ccache gcc",
             "KBUILD_BUILD_USER=harness", "KBUILD_BUILD_HOST=slab-bulk",
             "KBUILD_BUILD_TIMESTAMP=2000-01-01", "KBUILD_BUILD_VERSION=1"]
SYMBOL_RE = re.compile(r"^\s*(?:menu)?config\s+(\w+)\s*$", re.M)


@dataclasses.dataclass(frozen=True)
class Tree:
    """A source tree and where its kernels are built (O= dirs)."""
    name: str
    src: str
    out_root: str
    # CCACHE_BASEDIR: every tree's O= dir sits at ../../linux* from its
    # source, so ccache shares objects between trees.
    ccache_base: str
    # The command that makes the source tree.
    made_by: str

    def out_dir(self, config: str) -> str:
        return os.path.join(self.out_root, "%s-%s" % (
            os.path.basename(self.src), config))


TREES = {t.name: t for t in (
    Tree("linux", TREE, os.path.join(BUILD, "o"), BUILD, "./bulk tree"),
    Tree("linux-base", BENCH_BASE_TREE, os.path.join(BUILD, "o"), BUILD,
         "./bulk bench"),
    Tree("bisect", BISECT_TREE, os.path.join(BISECT_ROOT, "o"), BISECT_ROOT,
         "./bulk build-each"),
    Tree("prev", PREV_TREE, os.path.join(PREV_ROOT, "o"), PREV_ROOT,
         "./bulk bench-prev"),
    Tree("topics", TOPICS_TREE, os.path.join(TOPICS_ROOT, "o"), TOPICS_ROOT,
         "./bulk topics"),
)}


def tree(name: str) -> Tree:
    if name not in TREES:
        raise StageError("config", "unknown tree '%s'; known: %s" % (
            name, ", ".join(TREES)))
    return TREES[name]


def fragment_files(name: str) -> list[str]:
    if name not in CONFIG_SETS:
        raise StageError("config", "unknown config '%s'; known: %s" % (
            name, ", ".join(sorted(CONFIG_SETS))))
    paths = [os.path.join(CONFIGS, frag + ".config") for frag in CONFIG_SETS[name]]
    for path in paths:
        if not os.path.exists(path):
            raise StageError("config", "missing fragment %s" % path)
    return paths


def fragment_digest(name: str) -> str:
    """What a kernel's stamp records of its config: the fragments' text."""
    h = hashlib.sha256()
    for path in fragment_files(name):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def kunit_config(src: str) -> ModuleType:
    """The tree's tools/testing/kunit/kunit_config.py."""
    path = os.path.join(src, "tools", "testing", "kunit", "kunit_config.py")
    spec = importlib.util.spec_from_file_location("kunit_config", path)
    if spec is None or spec.loader is None or not os.path.exists(path):
        raise StageError("config", "%s missing: run ./bulk tree" % path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def declared_symbols(src: str) -> set[str]:
    """Every symbol some Kconfig file of the tree declares."""
    out = gitrepo.git(src, "config", "grep", "-h", "-E",
                      r"^\s*(menu)?config\s+\w+\s*$", "--", "*Kconfig*")
    return set(SYMBOL_RE.findall(out))


def parse(kc: ModuleType, text: str, what: str) -> dict[str, str]:
    """{'X': value} of CONFIG_X lines ('n' for 'is not set'); a line that
    is neither such a line nor a comment is an error."""
    try:
        return {e.name: e.value for e in kc.parse_from_string(text).as_entries()}
    except kc.KconfigParseError as e:
        raise StageError("config", "%s: %s" % (what, e)) from None


def requested(name: str, src: str) -> dict[str, str]:
    """The symbols a config's fragments set, parsed by the tree's
    kunit_config."""
    text = ""
    for path in fragment_files(name):
        with open(path) as f:
            text += f.read() + "\n"
    return parse(kunit_config(src), text, "configs/ for %s" % name)


def verify(kc: ModuleType, requested_text: str, actual_text: str,
           declared: set[str], what: str) -> list[str]:
    """Problems of a fragment against the resulting .config, as messages
    ([] when it took effect)."""
    requested = parse(kc, requested_text, what)
    # Only a series symbol this tree does not define yet is excused; the
    # check below takes every declared symbol, the series' own included.
    not_yet = set(SERIES_SYMBOLS) - declared
    unknown = sorted(set(requested) - declared - not_yet)
    if unknown:
        return ["CONFIG_%s: no such symbol in this tree (misspelled?)" % s
                for s in unknown]
    wanted = kc.parse_from_string("\n".join(
        "CONFIG_%s=%s" % (k, v) if v != "n" else "# CONFIG_%s is not set" % k
        for k, v in requested.items() if k in declared))
    actual = kc.parse_from_string(actual_text)
    if wanted.is_subset_of(actual):
        return []
    got = {e.name: e.value for e in actual.as_entries()}
    return ["CONFIG_%s: requested %s, got %s" % (
        k, v, "not set" if got.get(k, "n") == "n" else got[k])
        for k, v in requested.items()
        if k in declared and v != got.get(k, "n")]


def make_vars(config: str) -> list[str]:
    """The make variables of a config's builds: its architecture's, then
    MAKE_VARS."""
    return list(arch.of_config(config).make_vars) + MAKE_VARS


def make_cmd(t: Tree, config: str, *targets: str) -> list[str]:
    a = arch.of_config(config)
    need_tools("config", ["make", "gcc", a.tool("gcc"), "ccache", "flex",
                          "bison", "bc"])
    if not os.path.exists(os.path.join(t.src, "Makefile")):
        raise StageError("config", "no kernel tree at %s (run ./bulk tree)" % t.src)
    return (["make", "-C", t.src, "O=" + t.out_dir(config)] + make_vars(config)
            + list(targets))


# In an O= dir: what its .config was written and verified from (KEY) and
# the .config's own hash (CONFIG), written by configure() after a good
# verification.
CONFIG_KEY = "harness.config-key"
# Programs whose answers Kconfig's $(shell,...) probes record in a .config
# (scripts/Kconfig.include, init/Kconfig): compiler, assembler, linker,
# pahole, Rust, the GCC plugin headers.  A missing one counts as an answer.
CONFIG_TOOLS = (["gcc", "--version"],
                ["gcc", "-Wa,--version", "-c", "-x", "c", "/dev/null",
                 "-o", "/dev/null"],
                ["gcc", "-print-file-name=plugin"], ["ld", "--version"],
                ["pahole", "--version"], ["rustc", "--version"],
                ["bindgen", "--version"])
# Environment variables the kernel's Makefile or Kconfig read (and every
# KCONFIG_*), besides the make variables the harness passes.
CONFIG_ENV = ("LLVM", "LLVM_IAS", "CROSS_COMPILE", "USERCFLAGS",
              "USERLDFLAGS", "KCFLAGS", "KAFLAGS", "KBUILD_KCONFIG")
# Files of the tree besides the Kconfig files that the config step runs
# or reads: the top Makefiles (tool names, versions), scripts/ (the probe
# scripts and scripts/kconfig), and the KUnit parser verify() uses.
CONFIG_FILES = ("Makefile", "arch/x86/Makefile", "arch/arm64/Makefile",
                "tools/testing/kunit/kunit_config.py")


def config_tools(config: str) -> list[list[str]]:
    """CONFIG_TOOLS with the compiler, assembler and linker of the
    config's architecture."""
    a = arch.of_config(config)
    return [[a.tool(c[0]) if c[0] in ("gcc", "ld") else c[0]] + c[1:]
            for c in CONFIG_TOOLS]


def is_config_input(path: str) -> bool:
    """Can a change to @path change what configure() writes?"""
    return (os.path.basename(path).startswith("Kconfig")
            or path.startswith("scripts/") or path in CONFIG_FILES)


def tool_answer(cmd: list[str]) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           errors="replace", stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return "%s: missing" % cmd[0]
    return "%d %s %s" % (p.returncode, p.stdout, p.stderr)


def config_key(name: str, t: Tree) -> str | None:
    """What configure() writes depends on: the fragments, the tree's
    Kconfig files and the other inputs above (index blob ids, equal to
    HEAD's in a clean tree), the make variables, the environment, the
    toolchain and this module's own code.  None when one of those files
    differs from HEAD: then configure() always runs."""
    env = {"GIT_OPTIONAL_LOCKS": "0"}
    changed = capture(["git", "diff", "--no-renames", "--name-only", "-z",
                       "HEAD"], "config", cwd=t.src, env=env).split("\0")
    if any(is_config_input(path) for path in changed if path):
        return None
    inputs = capture(["git", "ls-files", "-s", "-z", "--",
                      ":(glob)**/Kconfig*", "scripts/"] + list(CONFIG_FILES),
                     "config", cwd=t.src, env=env)
    h = hashlib.sha256()
    parts = [fragment_digest(name), " ".join(make_vars(name)), inputs,
             file_digest(os.path.abspath(__file__))]
    parts += ["%s=%s" % (k, v) for k, v in sorted(os.environ.items())
              if k in CONFIG_ENV or k.startswith("KCONFIG_")]
    parts += [tool_answer(cmd) for cmd in config_tools(name)]
    for part in parts:
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def file_digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def is_configured(out: str, key: str | None) -> bool:
    """Does @out hold a .config that configure() wrote and verified from
    @key, unchanged since (kbuild's syncconfig rewrites it when the
    environment it depends on moved)?"""
    path = os.path.join(out, CONFIG_KEY)
    config = os.path.join(out, ".config")
    if key is None or not os.path.exists(path) or not os.path.exists(config):
        return False
    kv = read_kv(path)
    return kv.get("KEY") == key and kv.get("CONFIG") == file_digest(config)


def configure(name: str, tree_name: str = "linux") -> str:
    """Write and verify the .config of build/o/<tree>-<name>.

    Whether a fragment line can take effect depends on the tree's Kconfig
    files as well, which move with the series: it runs again (a few
    seconds) whenever config_key() changes, and is skipped while the
    fragments, those files and the toolchain are what the O= dir's .config
    was verified from.  kbuild rewrites include/generated/autoconf.h only
    when it changes, so an unchanged result costs no rebuild."""
    t = tree(tree_name)
    files = fragment_files(name)
    if not os.path.isdir(t.src):
        raise StageError("config", "%s does not exist: run %s"
                         % (rel(t.src), t.made_by))
    out = t.out_dir(name)
    os.makedirs(out, exist_ok=True)
    key = config_key(name, t)
    if is_configured(out, key):
        say("config: %s (%s) unchanged since verified -> %s" % (
            name, " + ".join(CONFIG_SETS[name]), rel(out)))
        return out
    if os.path.exists(os.path.join(out, CONFIG_KEY)):
        os.remove(os.path.join(out, CONFIG_KEY))
    log = log_path("config-%s-%s.log" % (tree_name, name))
    open(log, "w").close()
    frag = os.path.join(out, "harness.fragment")
    run([os.path.join(t.src, "scripts", "kconfig", "merge_config.sh"), "-m"]
        + files, "config", log, cwd=out, env={"KCONFIG_CONFIG": frag})
    run(make_cmd(t, name, "KCONFIG_ALLCONFIG=" + frag, "allnoconfig"),
        "config", log)
    run(make_cmd(t, name, "olddefconfig"), "config", log)
    with open(frag) as f:
        requested = f.read()
    with open(os.path.join(out, ".config")) as f:
        actual = f.read()
    bad = verify(kunit_config(t.src), requested, actual,
                 declared_symbols(t.src), "configs/ for %s" % name)
    if bad:
        raise StageError("config", "%s: %d line(s) of configs/ did not take "
                         "effect" % (name, len(bad)), log, "\n".join(bad))
    if key is not None:
        write_kv(os.path.join(out, CONFIG_KEY),
                 {"KEY": key, "CONFIG": file_digest(os.path.join(out, ".config"))},
                 "written by ./bulk config: what .config was verified from")
    say("config: %s (%s) ok -> %s" % (name, " + ".join(CONFIG_SETS[name]),
                                     rel(out)))
    return out


def listing() -> str:
    """The configs and their fragments (./bulk config --list), the
    fragments in one column."""
    width = max(map(len, CONFIG_SETS))
    return "\n".join("%-*s %s" % (width, n, " + ".join(f))
                     for n, f in CONFIG_SETS.items())
