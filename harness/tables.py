"""Benchmark table shaping: which rows each table has, from parsed boots
(benchparse records).  No I/O here."""
import dataclasses
import statistics

import registry
from benchparse import Run

TESTS = "".join(registry.TESTS)


@dataclasses.dataclass(frozen=True)
class Spec:
    """A table: test letter, title, the R-line field its rows are keyed by,
    the loop variant (None: no fallback column) and the bulk variant."""
    test: str
    title: str
    key: str
    loop: str | None
    bulk: str


SPECS = [
    Spec("a", "single object alloc+free (fastpath)", "n", None, "single"),
    Spec("a", "quick reuse: alloc N then free N", "n", "fallback", "bulk"),
    # Test a's second shape: sizeof(struct sk_buff) objects with
    # SLAB_HWCACHE_ALIGN, a cache created and destroyed around each
    # measurement.
    Spec("a", "sk_buff-sized, HWCACHE_ALIGN, new cache per measurement: "
         "single object alloc+free", "n", None, "skb_single"),
    Spec("a", "sk_buff-sized, HWCACHE_ALIGN, new cache per measurement: "
         "alloc N then free N", "n", "skb_fallback", "skb_bulk"),
    Spec("a", "sk_buff-sized, new cache: alloc 64, free in worst order "
         "(alloc+free timed)", "n", "skb_worst_loop", "skb_worst_bulk"),
    Spec("b", "working set: batches of N outstanding", "n", "fallback", "bulk"),
    Spec("b", "fragmented cache: N+32 free objects in half-free slabs on the "
         "node partial list, alloc N then free N", "n", "frag_fallback",
         "frag_bulk"),
    Spec("c", "free in allocation order (frees only)", "n", "order_loop", "order_bulk"),
    Spec("c", "free in random order (frees only)", "n", "random_loop", "random_bulk"),
    Spec("c", "free in worst order (frees only)", "n", "worst_loop", "worst_bulk"),
    Spec("d", "kfree_bulk, mixed sizes 8..4096 (frees only)", "n", "kfree_loop",
         "kfree_bulk"),
    Spec("e", "10000 x kmalloc(size)", "size", None, "kmalloc"),
    Spec("e", "10000 x kfree", "size", None, "kfree"),
    Spec("e", "10000 x kmalloc(size)/kfree pairs", "size", None, "pair"),
    Spec("f", "concurrent N*alloc (sum over CPUs)", "size", None, "conc_alloc"),
    Spec("f", "concurrent N*free (sum over CPUs)", "size", None, "conc_free"),
    Spec("f", "concurrent N*(alloc free)", "size", None, "conc_pair"),
    Spec("f", "remote free: alloc side", "size", None, "remote_alloc"),
    Spec("f", "remote free: free side", "size", None, "remote_free"),
    Spec("f", "1 alloc N free: alloc side", "size", None, "one_alloc"),
    Spec("f", "1 alloc N free: free side", "size", None, "one_free"),
    # Test g: kfree_skb_list() against a kfree_skb() loop, per sk_buff.
    Spec("g", "kfree_skb_list() of N sk_buffs, 64 bytes, kmalloc() head "
         "(frees only)", "n", "head_loop", "head_list"),
    Spec("g", "kfree_skb_list() of N sk_buffs, 1500 bytes, page fragment "
         "head (frees only)", "n", "pfrag_loop", "pfrag_list"),
    # Test h (SLOB, kprobes): the longest slob_lock hold, in instructions
    # per hold (objs=1), keyed by the free list length each free walks.
    Spec("h", "longest slob_lock hold (instructions), 8 objects each on its "
         "own page above L free blocks: single kmem_cache_free() vs one "
         "kmem_cache_free_bulk()", "n", "hold_single", "hold_bulk"),
    # Test i (KFENCE): N objects allocated and freed per round for a fixed
    # time; the R lines' kfence= field counts KFENCE's objects among them
    # (kfence_table()).
    Spec("i", "KFENCE at a 1 ms sample interval: alloc N then free N",
         "n", "kfence_loop", "kfence_bulk"),
]
# SLUB_STATS tables: (title, counters summed) per 1000 objects.
STAT_SPECS = [
    ("slowpath events (alloc_slowpath + free_slowpath)",
     ("alloc_slowpath", "free_slowpath")),
    ("slabs from and to the page allocator (alloc_slab + free_slab)",
     ("alloc_slab", "free_slab")),
    ("slabs taken off the node partial list (alloc_from_partial + "
     "cpu_partial_node)", ("alloc_from_partial", "cpu_partial_node")),
    ("frees that put a slab on a list (cpu_partial_free + free_add_partial)",
     ("cpu_partial_free", "free_add_partial")),
    ("CPU partial list drains to the node list (cpu_partial_drain)",
     ("cpu_partial_drain",)),
    ("list_lock acquisitions, test cache (kprobe; kernels with CONFIG_KPROBES)",
     ("list_lock",)),
]
# The bulk variants whose measurements have S lines, and their loops.
STAT_VARIANTS = {"bulk": "fallback", "frag_bulk": "frag_fallback"}


@dataclasses.dataclass(frozen=True)
class Row:
    """Per-object costs.  fallback is the base kernel's loop and
    series_loop the series kernel's; ratio is series/base and loop_ratio
    series/series_loop, so that "vs the loop" compares one kernel with
    itself."""
    key: int
    fallback: float | None
    base: float | None
    series: float | None
    ratio: float | None
    series_loop: float | None = None
    loop_ratio: float | None = None


@dataclasses.dataclass(frozen=True)
class SpreadRow:
    """A test measured in several runs per kernel (smp mode)."""
    key: int
    base: list[float]
    series: list[float]
    ratio: float | None


def rows_of(fb: dict[int, float], bb: dict[int, float],
            sb: dict[int, float], sl: dict[int, float] | None = None) -> list[Row]:
    sl = sl or {}
    rows = []
    for k in sorted(set(fb) | set(bb) | set(sb) | set(sl)):
        ratio = sb[k] / bb[k] if k in sb and bb.get(k) else None
        loop_ratio = sb[k] / sl[k] if k in sb and sl.get(k) else None
        rows.append(Row(k, fb.get(k), bb.get(k), sb.get(k), ratio,
                        sl.get(k), loop_ratio))
    return rows


def table(spec: Spec, base: Run, series: Run) -> list[Row]:
    def pick(run: Run, variant: str) -> dict[int, float]:
        return {r.key(spec.key): r.per_obj for r in run.results
                if r.test == spec.test and r.variant == variant}
    fb = pick(base, spec.loop) if spec.loop else {}
    sl = pick(series, spec.loop) if spec.loop else {}
    return rows_of(fb, pick(base, spec.bulk), pick(series, spec.bulk), sl)


def stats_table(test: str, events: tuple[str, ...], base: Run,
                series: Run, bulk: str = "bulk") -> list[Row]:
    """Events per 1000 objects from S lines of the @bulk variant and its
    loop.  A measurement whose S line lacks every one of @events (a
    kernel without the list_lock probe) has no row."""
    def pick(run: Run, variant: str) -> dict[int, float]:
        return {r.n: 1000.0 * sum(r.counters.get(e, 0) for e in events) / r.objs
                for r in run.stats if r.test == test and r.variant == variant
                and any(e in r.counters for e in events)}
    return rows_of(pick(base, STAT_VARIANTS[bulk]), pick(base, bulk),
                   pick(series, bulk))


def kfence_table(base: Run, series: Run, per_second: bool) -> list[Row]:
    """Test i: KFENCE's objects per million objects allocated, or per
    second of the clock (the TSC's, as the run calibrated it), for the
    loop and the bulk call on each kernel."""
    def pick(run: Run, variant: str) -> dict[int, float]:
        out = {}
        for r in run.results:
            if r.test != "i" or r.variant != variant or "kfence" not in r.extra:
                continue
            if per_second:
                if not run.tsc_khz or not r.cycles:
                    continue
                out[r.n] = r.extra["kfence"] / (r.cycles / (run.tsc_khz * 1000.0))
            elif r.objs:
                out[r.n] = 1e6 * r.extra["kfence"] / r.objs
        return out
    return rows_of(pick(base, "kfence_loop"), pick(base, "kfence_bulk"),
                   pick(series, "kfence_bulk"), pick(series, "kfence_loop"))


def spread_table(spec: Spec, base_runs: list[Run],
                 series_runs: list[Run]) -> list[SpreadRow]:
    def pick(runs: list[Run]) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for run in runs:
            for r in run.results:
                if r.test == spec.test and r.variant == spec.bulk:
                    out.setdefault(r.key(spec.key), []).append(r.per_obj)
        return out
    b, s = pick(base_runs), pick(series_runs)
    rows = []
    for k in sorted(set(b) | set(s)):
        bv, sv = b.get(k, []), s.get(k, [])
        ratio = (statistics.median(sv) / statistics.median(bv)
                 if bv and sv and statistics.median(bv) else None)
        rows.append(SpreadRow(k, bv, sv, ratio))
    return rows
