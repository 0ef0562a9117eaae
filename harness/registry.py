"""One place for each fact the commands share: the allocators, the
benchmark's configs and its test letters, the defaults, and how many
patches the series has.  The config names themselves are kconfig.py's
(CONFIG_SETS, from configs/).  No I/O but reading patches/."""
import difflib

import gitrepo
from common import PATCHES

ALLOCATORS = ("slub", "slab", "slob")
# The configs ./bulk bench --alloc takes, and the allocator each one is:
# the allocators and slub's and slob's benchmark variants.
BENCH_CONFIGS = {
    "slub": "slub", "slab": "slab", "slob": "slob",
    "slub-kfence": "slub",   # test i: what KFENCE costs
    "slub-stats": "slub",    # SLUB_STATS event counters beside the figures
    "slob-lockhold": "slob",  # test h: kprobes on slob_lock
}
# The benchmark module's tests, by letter.
TESTS = {
    "a": "quick reuse: alloc N then free N, and single alloc+free",
    "b": "working set: batches of N outstanding; a fragmented cache",
    "c": "free in allocation, random and worst order (frees only)",
    "d": "kfree_bulk() of mixed sizes 8..4096 (frees only)",
    "e": "10000 x kmalloc(size), kfree and the pair",
    "f": "concurrent alloc/free and remote frees on two CPUs (smp mode)",
    "g": "kfree_skb_list() of N sk_buffs against a kfree_skb() loop",
    "h": "longest slob_lock hold (slob-lockhold's kprobes)",
    "i": "KFENCE objects at a 1 ms sample interval (slub-kfence)",
}
# The tests booted in smp mode (two CPUs, no icount): their figures are
# noise, every run is shown.  The others run in exact mode.
SMP_TESTS = "f"
# Tests that need a config of their own to say anything.
OWN_CONFIG_TESTS = {"h": "slob-lockhold", "i": "slub-kfence"}
# What an allocator's plain benchmark config measures in exact mode: the
# tests ./bulk bench-each and bench-prev take.
EXACT_TESTS = "".join(t for t in TESTS
                      if t not in SMP_TESTS and t not in OWN_CONFIG_TESTS)
DEFAULT_TESTS = EXACT_TESTS
DEFAULT_ALLOC = "slub"
# ./bulk profile: the configs whose module code runs only while the module
# runs (not slub-stats' counters nor slob-lockhold's kprobe handlers), and
# the tests whose R lines it can tell apart.
PROFILE_CONFIGS = ("slub", "slab", "slob", "slub-kfence")
PROFILE_TESTS = "ab"


def test_help(letters: str) -> str:
    """'a: ...; b: ...' for an option's help."""
    return "; ".join("%s: %s" % (t, TESTS[t]) for t in letters)


def patch_count() -> int:
    """The patches in patches/, cover letter excluded."""
    return len(gitrepo.patch_files(PATCHES))


def closest(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The one of @choices nearest @word, if one is near: first one with
    the same letters (slba: slab, not slub)."""
    close = [c for c in choices if sorted(c) == sorted(word)] or \
        difflib.get_close_matches(word, list(choices), n=1)
    return close[0] if close else None


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """" (did you mean 'x'?)" for a near miss among @choices, else ''."""
    close = closest(word, choices)
    return " (did you mean '%s'?)" % close if close else ""
