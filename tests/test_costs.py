"""Unit tests for the cost model of ./bulk bench --costs: the cache model
(harness/plugin/cachesim.h, driven by tests/cachesim_test.c) against
closed forms, and that these checks fail on a broken model."""
import dataclasses
import os
import shutil
import subprocess
import unittest

import hermetic
import costs
import test_profile

PLUGIN_DIR = os.path.join(hermetic.ROOT, "harness", "plugin")
DRIVER = os.path.join(hermetic.HERE, "cachesim_test.c")
LINE = 64
# A small hierarchy, so that every pattern is quick: (size, ways) per level.
SMALL = ((4 << 10, 4), (32 << 10, 8), (256 << 10, 16))
# The plugin's default: Sapphire Rapids' L1D and L2, 16 LLC slices.
SERVER = ((48 << 10, 12), (2 << 20, 16), (30 << 20, 15))
LEVELS = ("L1D", "L2", "LLC")


def build(define: str = "", driver: str = DRIVER) -> str:
    """@driver (a C file of tests/), compiled with the plugin's headers
    (broken by -D@define if given)."""
    out = os.path.join(hermetic.SCRATCH, os.path.basename(driver)[:-2] + (
        "-" + define if define else ""))
    if os.path.exists(out):
        return out
    cmd = ["gcc", "-O2", "-Wall", "-Werror", "-I", PLUGIN_DIR, "-o", out,
           driver]
    if define:
        cmd.insert(1, "-D" + define)
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def run(binary: str, geometry: tuple[tuple[int, int], ...],
        *pattern: object) -> tuple[int, int, int, int]:
    """(lookups, L1D, L2, LLC misses) of one pattern."""
    p = subprocess.run([binary, str(LINE)] + ["%d:%d" % g for g in geometry]
                       + [str(a) for a in pattern],
                       check=True, capture_output=True, text=True)
    d = dict(line.split() for line in p.stdout.splitlines())
    return (int(d["lookups"]), int(d["l1d"]), int(d["l2"]), int(d["llc"]))


def sets(level: tuple[int, int]) -> int:
    return level[0] // (level[1] * LINE)


def walk_misses(geometry: tuple[tuple[int, int], ...], nbytes: int,
                passes: int) -> tuple[int, int, int, int]:
    """A line-stride walk over @nbytes, @passes times: each level misses
    every line once when the walk fits it, else every line on every pass
    (the walk is sized to give each set more lines than ways)."""
    lines = nbytes // LINE
    out = [lines * passes]
    for size, _ in geometry:
        out.append(lines if nbytes <= size else lines * passes)
    return out[0], out[1], out[2], out[3]


def failures(binary: str) -> list[str]:
    """The closed-form checks the model at @binary fails (names)."""
    bad = []

    def check(name: str, got: tuple[int, ...], want: tuple[int, ...]) -> None:
        if tuple(got) != tuple(want):
            bad.append("%s: got %s, want %s" % (name, got, want))

    for geo_name, geo in (("small", SMALL), ("server", SERVER)):
        for k, level in enumerate(geo):
            # Each set gets ways + 1 lines: nothing survives a pass.
            over = level[0] + sets(level) * LINE
            check("%s walk over %s" % (geo_name, LEVELS[k]),
                  run(binary, geo, "walk", over, LINE, 3),
                  walk_misses(geo, over, 3))
            # Exactly the level's size: only the first pass misses there.
            check("%s reuse fitting %s" % (geo_name, LEVELS[k]),
                  run(binary, geo, "walk", level[0], LINE, 4),
                  walk_misses(geo, level[0], 4))
    for k, level in enumerate(SMALL):
        ways, rounds = level[1], 10
        # ways + 1 lines of one set, cycled: LRU misses every access (and
        # the levels above, whose sets the lines share too, as well).
        got = run(binary, SMALL, "conflict", k, ways + 1, rounds)
        n = (ways + 1) * rounds
        check("conflict in %s" % LEVELS[k], got[:k + 2], (n,) * (k + 2))
        # Below the conflicting level the lines fit: one miss each.
        check("conflict in %s, levels below" % LEVELS[k], got[k + 2:],
              (ways + 1,) * (2 - k))
    # A hot line used between the others stays under LRU: of the first
    # level only the ways lines cycled through ways - 1 places miss each
    # time, the hot line once.
    ways, rounds = SMALL[0][1], 10
    check("hot line kept by LRU", run(binary, SMALL, "hot", 0, rounds),
          (2 * ways * rounds, 1 + ways * rounds, ways + 1, ways + 1))
    # 8 bytes 4 before a line's end: two lines per access, all new but
    # the one the previous access touched.
    check("straddling accesses", run(binary, SMALL, "straddle", 10),
          (20, 11, 11, 11))
    return bad


@unittest.skipIf(shutil.which("gcc") is None, "gcc not installed")
class CacheModel(unittest.TestCase):
    def test_model_matches_closed_forms(self):
        self.assertEqual(failures(build()), [])

    def test_checks_catch_a_fifo_model(self):
        bad = failures(build("CACHESIM_BREAK_FIFO"))
        self.assertTrue(any(b.startswith("hot line kept by LRU") for b in bad),
                        bad)

    def test_checks_catch_a_dropped_index_bit(self):
        bad = failures(build("CACHESIM_BREAK_INDEX"))
        self.assertTrue(any("reuse fitting L1" in b for b in bad), bad)


# Instruction bytes (objdump's) and the class the plugin counts them as.
CLASSES = {
    "f0480fc10e": "locked",             # lock xadd %rcx,(%rsi)
    "f00fb111": "locked",               # lock cmpxchg %edx,(%rcx)
    "48870e": "locked",                 # xchg %rcx,(%rsi): locked anyway
    "4887c1": "other",                  # xchg %rax,%rcx: no memory
    "65480fc70f": "cmpxchg16b",         # cmpxchg16b %gs:(%rdi), per CPU
    "f0480fc74d00": "cmpxchg16b_locked",  # lock cmpxchg16b 0x0(%rbp)
    "480fc7f0": "other",                # rdrand %rax: 0f c7 /6
    "fa": "cli", "fb": "sti", "9c": "pushf", "9d": "popf",
    "669d": "popf",                     # popfw
    "f3a4": "other",                    # rep movsb
    "488b07": "other",                  # mov (%rdi),%rax
    "3e0fb117": "cmpxchg",              # ds cmpxchg %edx,(%rdi): on UP
    "48cf": "iretq", "480f07": "sysretq",
}


# Instruction bytes and whether the plugin follows them as a call (its
# store of the return address) or a ret (its load of it), with slab=.
FLOWS = {
    "e8a0b1c2d3": "call",               # call rel32
    "ffd0": "call",                     # call *%rax
    "ff5008": "call",                   # call *0x8(%rax)
    "41ffd3": "call",                   # call *%r11: REX first
    "2ee8a0b1c2d3": "call",             # cs call rel32
    "c3": "ret",
    "c20800": "ret",                    # ret $0x8
    "f3c3": "ret",                      # rep ret
    "e9a0b1c2d3": "other",              # jmp rel32: a tail call
    "ffe0": "other",                    # jmp *%rax
    "ff5808": "other",                  # lcall *0x8(%rax): far, ff /3
    "cb": "other",                      # lret
    "48cf": "other",                    # iretq
    "488b07": "other",                  # mov (%rdi),%rax
}


@unittest.skipIf(shutil.which("gcc") is None, "gcc not installed")
class InstructionClasses(unittest.TestCase):
    def test_counted_instructions_are_told_apart(self):
        p = subprocess.run([build(), "classify"] + list(CLASSES),
                           check=True, capture_output=True, text=True)
        self.assertEqual(dict(line.split() for line in p.stdout.splitlines()),
                         CLASSES)

    def test_calls_and_returns_are_told_apart(self):
        p = subprocess.run([build(), "flow"] + list(FLOWS),
                           check=True, capture_output=True, text=True)
        self.assertEqual(dict(line.split() for line in p.stdout.splitlines()),
                         FLOWS)


# The module's console: two rows of test b; phase k runs from the k-th
# module line to the (k+1)-th (profile.r_groups()).
CONSOLE = test_profile.CONSOLE
HEAD = """\
# clock_reads %d
# phases 10
# vcpus 1
# addresses physical
# virtual_fallbacks 0
# line 64
# cache l1d 49152 12 64
# cache l2 2097152 16 2048
# cache llc 31457280 15 32768
# columns phase insns %s
"""


def region_line(phase, insns, **events):
    return " ".join(str(v) for v in [phase, insns] + [
        events.get(e, 0) for e in costs.EVENTS]) + "\n"


class Counts(unittest.TestCase):
    def write(self, lines, reads=None):
        path = os.path.join(hermetic.SCRATCH, "costs.txt")
        with open(path, "w") as f:
            f.write(HEAD % (reads if reads is not None else 2 * len(lines),
                            " ".join(costs.EVENTS)) + "".join(lines))
        return path

    def test_regions_and_geometry_are_read(self):
        c = costs.read_costs(self.write([region_line(2, 500, loads=7,
                                                     popf=1)]))
        self.assertEqual(c.regions, [costs.Region(2, 500, dict(
            {e: 0 for e in costs.EVENTS}, loads=7, popf=1), 1)])
        self.assertEqual(c.geometry(), "L1D 48 KiB 12-way (64 sets); L2 2 "
                         "MiB 16-way (2048 sets); LLC 30 MiB 15-way (32768 "
                         "sets); 64-byte lines; physical addresses")

    def test_unpaired_clock_reads_and_bad_lines_are_refused(self):
        with self.assertRaisesRegex(ValueError, "odd number of clock reads"):
            costs.read_costs(self.write([region_line(2, 5)], reads=3))
        with self.assertRaisesRegex(ValueError, ":11: not 19 numbers"):
            costs.read_costs(self.write(["2 5 1\n"]))

    def test_columns_must_be_the_plugins(self):
        path = self.write([])
        with open(path) as f:
            text = f.read().replace(" slab_insns\n", " slab_insns extra\n")
        with open(path, "w") as f:
            f.write(text)
        with self.assertRaisesRegex(ValueError, "columns"):
            costs.read_costs(path)


def rec(variant, cycles, objs=1000):
    return costs.Record("b", variant, 34, 256, objs, cycles, 0,
                        cycles / objs)


class Matching(unittest.TestCase):
    def regions(self, *insns):
        return [costs.Region(2, n, {e: 0 for e in costs.EVENTS})
                for n in insns]

    def test_one_region_per_variant(self):
        regs = self.regions(300000, 110000, 9000)
        got = costs.match_segments(regs, [rec("fallback", 300000),
                                          rec("bulk", 110000)])
        self.assertEqual(got, [regs[0:1], regs[1:2]])

    def test_a_variant_timed_per_round_takes_consecutive_regions(self):
        # empty loop (3 rounds of 10), loop (3 of 50), bulk (3 of 20)
        regs = self.regions(10, 10, 10, 50, 51, 50, 20, 20, 21)
        got = costs.match_segments(regs, [rec("loop", 151),
                                          rec("bulk", 61)])
        self.assertEqual(got, [regs[3:6], regs[6:9]])

    def test_no_exact_sum_is_unmatched_not_guessed(self):
        regs = self.regions(300000, 110000)
        self.assertEqual(costs.match_segments(
            regs, [rec("fallback", 300001), rec("bulk", 110000)]),
            [None, regs[1:2]])

    def test_a_region_serves_one_record(self):
        regs = self.regions(100, 100)
        self.assertEqual(costs.match_segments(
            regs, [rec("x", 100), rec("y", 100), rec("z", 100)]),
            [regs[0:1], regs[1:2], None])

    def test_rows_take_their_phases_regions(self):
        path = os.path.join(hermetic.SCRATCH, "costs.txt")
        with open(path, "w") as f:
            f.write(HEAD % (10, " ".join(costs.EVENTS)) + "".join([
                region_line(1, 999),                 # before the rows
                region_line(2, 300000, loads=4000),  # fallback
                region_line(2, 110000, loads=2000, l1d_load_misses=500,
                            locked=1000),            # bulk
                region_line(2, 9000),                # empty loop
                region_line(6, 150000, stores=3000),  # frag_bulk
                region_line(6, 500000, cli=2000)]))  # frag_fallback
        got = costs.measured(CONSOLE, costs.read_costs(path))
        self.assertEqual([(m.record.variant, m.regions, m.insns)
                          for m in got],
                         [("fallback", 1, 300000), ("bulk", 1, 110000),
                          ("frag_fallback", 1, 500000),
                          ("frag_bulk", 1, 150000)])
        bulk = got[1]
        self.assertEqual(bulk.per_obj(bulk.events["locked"]), 1.0)
        # 110 instructions, 0.5 L1D load misses that hit L2, 1 locked:
        # low 110 + 0.5 * 5 + 15, high 110 + 0.5 * 11 + 25
        self.assertAlmostEqual(bulk.modeled(0), 127.5)
        self.assertAlmostEqual(bulk.modeled(1), 140.5)
        # the same model per unit of anything (./bulk callers --costs)
        self.assertAlmostEqual(costs.modeled(
            bulk.insns, bulk.events, bulk.record.objs, 1), 140.5)
        self.assertEqual(got[2].per_obj(got[2].events["cli"]), 1.0)

    def test_a_row_printed_pair_by_pair_takes_the_regions_between(self):
        """Test c prints each pair's R lines as it measures it: the later
        pairs' regions lie after the first pair's lines (phases 4, 6)."""
        console = "".join("[    0.1] slab_bulk_bench: %s\n" % line for line in (
            "test c",
            "R test=c variant=order_loop n=1 size=256 objs=10 cycles=100 "
            "empty=0",
            "R test=c variant=order_bulk n=1 size=256 objs=10 cycles=50 "
            "empty=0",
            "R test=c variant=random_loop n=1 size=256 objs=10 cycles=120 "
            "empty=0",
            "R test=c variant=random_bulk n=1 size=256 objs=10 cycles=60 "
            "empty=0",
            "done"))
        path = os.path.join(hermetic.SCRATCH, "costs.txt")
        with open(path, "w") as f:
            f.write((HEAD % (8, " ".join(costs.EVENTS))).replace(
                "phases 10", "phases 6") + "".join([
                    region_line(1, 100), region_line(1, 50),
                    region_line(3, 120), region_line(3, 60)]))
        got = costs.measured(console, costs.read_costs(path))
        self.assertEqual([(m.record.variant, m.regions) for m in got], [
            ("order_loop", 1), ("order_bulk", 1), ("random_loop", 1),
            ("random_bulk", 1)])

    def test_holds_count_for_the_row_whose_regions_they_start_in(self):
        """Hold lines name the region (1-based, the plugin's order) they
        started in; a row takes those of its regions, the allocator's
        (by site) apart from any site's."""
        path = os.path.join(hermetic.SCRATCH, "costs.txt")
        with open(path, "w") as f:
            f.write(HEAD % (6, " ".join(costs.EVENTS)) + "".join([
                region_line(1, 999),
                region_line(2, 300000),              # fallback: region 2
                region_line(2, 110000)]) +           # bulk: region 3
                "hold irq 2 a0 40 99\n"
                "hold irq 2 a0 70 1\n"
                "hold irq 3 a0 500 1\n"
                "hold irq 3 f0 9000 1\n"
                "hold lock 3 a4 300 2\n"
                "hold lock 0 a4 7000 1\n")

        class Syms:
            def name(self, site):
                return "alloc_fn" if site < 0xf0 else "other_fn"

            def is_allocator(self, site):
                return site < 0xf0
        got = costs.measured(CONSOLE, costs.read_costs(path), Syms())
        fallback, bulk = got[0], got[1]
        self.assertEqual((fallback.irq.count, fallback.irq.longest,
                          fallback.irq.p99), (100, 70, 40))
        self.assertEqual((bulk.irq.count, bulk.irq.longest), (1, 500))
        self.assertEqual((bulk.irq_any.longest, bulk.irq_any.where),
                         (9000, "other_fn"))
        self.assertEqual((bulk.lock.count, bulk.lock.longest), (2, 300))
        self.assertEqual(fallback.lock.count, 0)
        longer_bulk = dataclasses.replace(
            bulk, irq=costs.holdsmod.Summary(1, 600, 600, "x"))
        lines, longer = costs.holds_tables("slub", {
            "base": got, "series": [fallback, longer_bulk] + got[2:]})
        md = "\n".join(lines)
        self.assertIn("| bulk | 34 | 1 / 1 | 500 / 600 | 500 / 600 | "
                      "alloc_fn / x | 2 / 2 | 300 / 300 |", md)
        self.assertEqual(len(longer), 1)
        self.assertEqual(longer, ["the IRQ-off window in x, 1 row, most at "
                                  "test b bulk N=34: 500 -> 600"])


class Model(unittest.TestCase):
    def test_each_level_weighs_the_misses_the_next_level_served(self):
        """10 L1D store misses, 4 of them L2 misses, 1 an LLC miss: 6 L2
        hits, 3 LLC hits, 1 DRAM store, which the store buffer hides in
        the low band."""
        ev = dict({e: 0 for e in costs.EVENTS}, l1d_store_misses=10,
                  l2_store_misses=4, llc_store_misses=1, cli=1)
        d = costs.derived(ev)
        self.assertEqual((d["l2_store_hits"], d["llc_store_hits"],
                          d["dram_stores"]), (6, 3, 1))
        self.assertAlmostEqual(costs.modeled(100, ev, 2, 0), (100 + 2) / 2)
        self.assertAlmostEqual(costs.modeled(100, ev, 2, 1),
                               (100 + 6 * 11 + 3 * 100 + 350 + 8) / 2)
        # the instructions inside slab calls are some of the 100: no cost
        # of their own
        ev["slab_insns"] = 40
        self.assertAlmostEqual(costs.modeled(100, ev, 2, 1),
                               (100 + 6 * 11 + 3 * 100 + 350 + 8) / 2)
        self.assertNotIn("slab_insns", costs.WEIGHTS)
        self.assertNotIn("slab_insns", [e for _, get in costs.COLUMNS
                                        for e in get])


class Report(unittest.TestCase):
    def side(self, insns, misses):
        ev = {e: 0 for e in costs.EVENTS}
        ev.update(l1d_load_misses=misses, l2_load_misses=misses,
                  llc_load_misses=misses)
        return [costs.Measured(rec("bulk", insns), 1, insns, ev),
                costs.Measured(rec("fallback", 300000), 0, 0, dict(ev))]

    def test_table_has_both_kernels_and_both_bands(self):
        md, data = costs.report(["slub"], "./bulk bench --costs", {
            "slub": {"base": self.side(200000, 0),
                     "series": self.side(100000, 1000)}},
            "L1D ...", {"slub": ["A note."]})
        # 100 instructions + 1 DRAM load: 250-450 against 200
        self.assertIn("| bulk | 34 | 200 / 100 | 0.00+0.00 / 0.00+0.00 | "
                      "0.00+0.00 / 1.00+0.00 |", md)
        self.assertIn("| 200–200 | 250–450 | 1.25–2.25 |", md)
        self.assertIn("unmatched", md)
        self.assertIn("1 of 2 R lines matched to timed regions whose "
                      "instructions sum to their cycles= exactly. A note.", md)
        self.assertIn("Modeled cost", md)
        self.assertNotIn("cycles per object", md)
        row = data["allocators"]["slub"]["rows"][0]
        self.assertEqual(row["series"]["modeled_high"], 450.0)


class Plugin(unittest.TestCase):
    def test_plugin_builds_and_qemu_loads_it(self):
        """QEMU loads the plugin, whose install function refuses an
        unknown argument and a geometry the model does not take."""
        for tool in ("gcc", "qemu-system-x86_64"):
            if shutil.which(tool) is None:
                self.fail("%s not installed: run ./bulk setup" % tool)
        lib = costs.profile.build_plugin(costs.PLUGIN_SRC, costs.PLUGIN,
                                          "costs")
        self.assertTrue(lib.startswith(hermetic.SCRATCH))
        # clock= takes module or user, slab= a file of hex addresses; an
        # argument taken lets the install go on to the geometry, which it
        # refuses.
        entries = os.path.join(hermetic.SCRATCH, "slab-entries.txt")
        with open(entries, "w") as f:
            f.write("ffffffff81129050\nffffffff811524e0\n")
        junk = os.path.join(hermetic.SCRATCH, "slab-junk.txt")
        with open(junk, "w") as f:
            f.write("ffffffff81129050\nkfree\n")
        for arg, msg in (("bogus=1", "qemu-cost: unknown argument bogus=1"),
                         ("out=x,l1d=47K:12", "a cache geometry"),
                         ("out=x,slab=%s,l1d=47K:12" % entries,
                          "a cache geometry"),
                         ("out=x,slab=%s" % junk, "cannot read the slab "
                          "entry points"),
                         ("out=x,slab=/nonexistent", "cannot read the slab "
                          "entry points"),
                         ("out=x,clock=wall", "unknown argument clock=wall"),
                         ("out=x,clock=user,l1d=47K:12", "a cache geometry"),
                         ("out=x,clock=module,l1d=47K:12",
                          "a cache geometry")):
            p = subprocess.run(["qemu-system-x86_64", "-M", "none",
                                "-display", "none", "-monitor", "none",
                                "-serial", "none", "-plugin",
                                lib + "," + arg],
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(msg, p.stderr)
