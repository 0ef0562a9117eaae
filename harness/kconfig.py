"""Config stage: allnoconfig + fragments from configs/, then verify.

A config name maps to a list of fragments.  The merged fragment is given to
kbuild as KCONFIG_ALLCONFIG for allnoconfig, olddefconfig settles the rest,
and every requested line is checked against the resulting .config.
"""
import os
import subprocess

from common import BUILD, CONFIGS, StageError, info, log_path, need_tools, run

CONFIG_SETS = {
    "slub": ["common", "hardening", "slub", "bench"],
    "slab": ["common", "hardening", "slab", "bench"],
    "slob": ["common", "slob", "bench"],
    "slub-debug": ["common", "hardening", "slub", "debug", "slub-debug"],
    "slab-debug": ["common", "hardening", "slab", "debug", "slab-debug"],
    # Benchmark variants of slub: what KFENCE costs, and the event counters.
    "slub-kfence": ["common", "hardening", "slub", "bench", "kfence"],
    "slub-stats": ["common", "hardening", "slub", "bench", "stats"],
}
ALLOCATOR = {name: name.split("-")[0] for name in CONFIG_SETS}
# The KBUILD_BUILD_* values make the image depend on the sources alone
# (Documentation/kbuild/reproducible-builds.rst). That includes the build
# number, which otherwise counts the links made in an output dir: it ends
# up in the version string, which the guest mixes into its RNG at boot
# (random_init()), and a series kernel relinked many times measured
# differently from a fresh clone's.
MAKE_VARS = ["ARCH=x86_64", "CC=ccache gcc", "HOSTCC=ccache gcc",
             "KBUILD_BUILD_USER=harness", "KBUILD_BUILD_HOST=slab-bulk",
             "KBUILD_BUILD_TIMESTAMP=2000-01-01", "KBUILD_BUILD_VERSION=1"]


def tree_dir(tree):
    return os.path.join(BUILD, tree)


def out_dir(name, tree="linux"):
    return os.path.join(BUILD, "o", "%s-%s" % (tree, name))


def parse_config(text):
    """{'CONFIG_X': 'y'|'m'|'n'|value} from .config or fragment text."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# CONFIG_") and line.endswith(" is not set"):
            out[line[2:-len(" is not set")]] = "n"
        elif line.startswith("CONFIG_") and "=" in line:
            k, _, v = line.partition("=")
            out[k] = v
    return out


def mismatches(requested, actual):
    """Lines of the fragment that did not take effect, as messages."""
    bad = []
    for k, want in requested.items():
        got = actual.get(k, "n")
        if want.strip('"') != got.strip('"'):
            bad.append("%s: requested %s, got %s" % (
                k, want, "not set" if got == "n" else got))
    return bad


def defined_in_tree(symbol, tree):
    """Is CONFIG_<symbol> declared by some Kconfig file of the tree?"""
    name = symbol[len("CONFIG_"):]
    p = subprocess.run(["git", "grep", "-q", "-E",
                        r"^\s*(menu)?config\s+%s\s*$" % name, "--", "*Kconfig*"],
                       cwd=tree_dir(tree))
    return p.returncode != 1


def fragment_text(name):
    if name not in CONFIG_SETS:
        raise StageError("config", "unknown config '%s'; known: %s" % (
            name, ", ".join(sorted(CONFIG_SETS))))
    parts = []
    for frag in CONFIG_SETS[name]:
        path = os.path.join(CONFIGS, frag + ".config")
        if not os.path.exists(path):
            raise StageError("config", "missing fragment %s" % path)
        with open(path) as f:
            parts.append("# --- %s\n%s" % (frag, f.read()))
    return "\n".join(parts)


def make_cmd(name, tree, *targets):
    need_tools("config", ["make", "gcc", "ccache", "flex", "bison", "bc"])
    src = tree_dir(tree)
    if not os.path.exists(os.path.join(src, "Makefile")):
        raise StageError("config", "no kernel tree at %s (run ./bulk tree)" % src)
    return ["make", "-C", src, "O=" + out_dir(name, tree)] + MAKE_VARS + list(targets)


def configure(name, tree="linux"):
    """Write and verify build/o/<tree>-<name>/.config.

    Runs every time (a few seconds): whether a fragment line can take effect
    depends on the tree's Kconfig files as well, which move with the series.
    kbuild rewrites include/generated/autoconf.h only when it changes, so an
    unchanged result costs no rebuild."""
    text = fragment_text(name)
    out = out_dir(name, tree)
    os.makedirs(out, exist_ok=True)
    frag = os.path.join(out, "harness.fragment")
    with open(frag, "w") as f:
        f.write(text)
    log = log_path("config-%s-%s.log" % (tree, name))
    open(log, "w").close()
    run(make_cmd(name, tree, "KCONFIG_ALLCONFIG=" + frag, "allnoconfig"),
        "config", log=log, quiet=True)
    run(make_cmd(name, tree, "olddefconfig"), "config", log=log, quiet=True)
    with open(os.path.join(out, ".config")) as f:
        bad = mismatches(parse_config(text), parse_config(f.read()))
    # Symbols the series adds (its test and benchmark modules) do not exist
    # at earlier patches or on the base: those lines cannot take effect.
    bad = [b for b in bad if defined_in_tree(b.split(":")[0], tree)]
    if bad:
        raise StageError("config", "%s: %d option(s) did not take effect:\n  %s"
                         % (name, len(bad), "\n  ".join(bad)), log)
    info("config: %s (%s) ok -> %s" % (name, " + ".join(CONFIG_SETS[name]),
                                      os.path.relpath(out, os.getcwd())))
    return out
