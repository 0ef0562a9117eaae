"""Build stage: kbuild with O=, all cores, ccache; progress on stdout,
the full log in build/logs/build-<tree>-<config>.log.

Every O= dir carries a stamp, harness.stamp: the tree's commit and its
source tree (git's tree id: the same sources after a re-applied series give
the same id), a hash of its uncommitted changes and a hash of the config's
fragments.  It is
removed before a build and written after a successful one; a boot checks
it against the tree as it is now and refuses a kernel built from anything
else.
"""
import dataclasses
import os
import re

import arch
import gitrepo
import kconfig
from common import Progress, StageError, log_path, read_kv, rel, say, stream, write_kv

ERROR_RE = re.compile(r"(error:|Error \d|undefined reference|\*\*\* )")
STAMP = "harness.stamp"
# ccache's depend mode: on a miss, ccache takes the headers a file
# includes from the dependency file the compiler writes (kbuild passes
# -Wp,-MMD) rather than running the preprocessor once more to hash its
# output.  Kernel sources spend much of their compile time preprocessing,
# so a build on an empty cache is faster (docs/commands.md, ./bulk test);
# hits are direct-mode hits as before.  An entry is keyed on the command
# line, the source and the headers it read, less the system headers that
# -MMD leaves out: the kernel's own objects read none (-nostdinc); the
# host programs of scripts/Makefile.host (fixdep, kconfig, modpost) read
# libc's, so a libc header changed without a new compiler would not
# rebuild those (ccache -C clears the cache).  objtool's build passes
# -Wp,-MD, which lists them.
CCACHE_ENV = {"CCACHE_DEPEND": "1"}


@dataclasses.dataclass(frozen=True)
class Stamp:
    # Named in messages; the sources are the tree id's.
    commit: str = dataclasses.field(compare=False)
    tree: str
    diff: str
    fragments: str

    def describe(self) -> str:
        return "%s (sources %s)%s, configs/ %s" % (
            self.commit[:12], self.tree[:12] or "not recorded",
            " + uncommitted changes" if self.diff else "", self.fragments)


def current_stamp(config: str, t: kconfig.Tree, step: str) -> Stamp:
    """The stamp a kernel built from the tree as it is now would carry."""
    commit, tree = gitrepo.git(t.src, step, "rev-parse", "HEAD",
                               "HEAD^{tree}").split()
    return Stamp(commit, tree, gitrepo.diff_digest(t.src, step),
                 kconfig.fragment_digest(config))


def read_stamp(out: str) -> Stamp | None:
    path = os.path.join(out, STAMP)
    if not os.path.exists(path):
        return None
    kv = read_kv(path)
    return Stamp(kv.get("COMMIT", ""), kv.get("TREE", ""), kv.get("DIFF", ""),
                 kv.get("FRAGMENTS", ""))


def write_stamp(out: str, stamp: Stamp) -> None:
    write_kv(os.path.join(out, STAMP), {"COMMIT": stamp.commit, "TREE": stamp.tree,
                                        "DIFF": stamp.diff,
                                        "FRAGMENTS": stamp.fragments},
             "written by ./bulk build: what this kernel was built from")


def check_stamp(config: str, tree_name: str, step: str) -> str:
    """The O= dir of a kernel built from the tree as it is now; otherwise
    a StageError saying what was built and what to run."""
    t = kconfig.tree(tree_name)
    out = t.out_dir(config)
    want = current_stamp(config, t, step)
    have = read_stamp(out)
    again = "run ./bulk build %s%s" % (
        config, " --tree " + tree_name if tree_name != "linux" else "")
    if tree_name == "bisect":
        again += (" (./bulk test builds its kernels at the tip in its build and "
                  "debug steps; ./bulk build-each builds slub, slab, slob and "
                  "slub-nodebug)")
    if have is None:
        raise StageError(step, "no kernel of %s is built from %s at %s: %s"
                         % (config, tree_name, want.describe(), again))
    if have != want:
        raise StageError(step, "the %s kernel in %s was built from %s, the "
                         "tree is at %s: %s" % (config, rel(out),
                                                have.describe(),
                                                want.describe(), again))
    return out


def first_error(log: str) -> str | None:
    with open(log, errors="replace") as f:
        for line in f:
            if ERROR_RE.search(line):
                return line.rstrip()
    return None


def is_build_line(line: str) -> bool:
    return line.lstrip().startswith(("CC", "LD", "AR", "AS"))


def build(config: str, tree_name: str = "linux",
          label: str | None = None) -> str:
    """Configure and build the image (bzImage, arm64's Image) and modules;
    returns the O= dir."""
    out = kconfig.configure(config, tree_name)
    t = kconfig.tree(tree_name)
    stamp_path = os.path.join(out, STAMP)
    if os.path.exists(stamp_path):
        os.remove(stamp_path)
    stamp = current_stamp(config, t, "build")
    log = log_path("build-%s-%s.log" % (tree_name, config))
    open(log, "w").close()
    label = label or "%s-%s" % (tree_name, config)
    progress = Progress("build " + label, is_build_line,
                        every=20 if os.isatty(1) else 60)
    rc = stream(kconfig.make_cmd(t, config, "-j%d" % (os.cpu_count() or 1),
                                 arch.of_config(config).image, "modules"),
                log,
                env=dict(CCACHE_ENV, CCACHE_BASEDIR=t.ccache_base),
                progress=progress)
    if rc != 0:
        err = first_error(log) or "(no compiler error line found)"
        raise StageError("build", "%s failed: %s" % (label, err), log)
    if current_stamp(config, t, "build") != stamp:
        raise StageError("build", "%s: the tree changed during the build; "
                         "build again" % label, log)
    write_stamp(out, stamp)
    say("build %s: done in %ds" % (label, progress.elapsed()))
    return out
