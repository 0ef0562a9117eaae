"""The test command's bisect policy: every patch builds on SLUB; a patch
touching code shared with SLAB or SLOB builds there too; the full series
builds on all three.

All of it runs in a worktree of its own, build/bisect/linux, never in the
user's build/linux: one O= dir per config under build/bisect/o/, kept
between runs, so that each build is incremental from the one before.  Each
config's sequence ends at the tip, whose kernels the test command's debug,
KUnit, boot and bench steps then use: no build is made twice.
"""
import dataclasses
import os

import gitrepo
import kbuild
from common import BISECT_TREE, TREE

ALLOCATORS = ("slub", "slab", "slob")
# Files private to one allocator: a patch touching only these (and docs)
# need not be built on the other allocators' configs.
PRIVATE = {
    "slub": ("mm/slub.c", "include/linux/slub_def.h", "lib/slub_kunit.c"),
    "slab": ("mm/slab.c", "include/linux/slab_def.h"),
    "slob": ("mm/slob.c",),
}
DOC_PREFIXES = ("Documentation/", "MAINTAINERS")


def needs_build(config: str, files: list[str]) -> bool:
    """Does a patch touching files need building on this allocator?"""
    if config == "slub":
        return True
    others = [p for a, ps in PRIVATE.items() if a != config for p in ps]
    return any(not f.startswith(DOC_PREFIXES) and f not in others for f in files)


TREE_NAME = "bisect"


@dataclasses.dataclass(frozen=True)
class Build:
    """config at patch number index (0-based), or at the tip (None)."""
    config: str
    index: int | None
    label: str


def plan(patches: list[str]) -> list[Build]:
    """The builds, from the patch files alone."""
    out = []
    tip = "full series" if patches else "base"
    for config in ALLOCATORS:
        for i, p in enumerate(patches[:-1]):
            if needs_build(config, gitrepo.patch_paths(p)):
                out.append(Build(config, i, os.path.basename(p)))
        out.append(Build(config, None, tip))
    return out


def at(commit: str) -> None:
    """The worktree (made when missing) at commit."""
    gitrepo.worktree(TREE, BISECT_TREE, "bisect")
    gitrepo.checkout(BISECT_TREE, commit, "bisect")


def build(b: Build, commits: list[str]) -> None:
    """b in the worktree; commits: the base commit, then the series'."""
    commit = commits[-1] if b.index is None else commits[b.index + 1]
    at(commit)
    kbuild.build(b.config, TREE_NAME, label="%s@%s" % (b.config, commit[:12]))
