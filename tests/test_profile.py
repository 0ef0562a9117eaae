"""Unit tests for harness/profile.py (./bulk profile) and its QEMU plugin."""
import argparse
import collections
import os
import shutil
import subprocess
import unittest

import hermetic  # noqa: F401  (first: harness on sys.path, scratch build/)
import profile
from common import StageError

# Text symbols of a made-up kernel (System.map order need not be sorted).
SYSTEM_MAP = """\
ffffffff81000200 T kmem_cache_free_bulk
ffffffff81000100 T kmem_cache_alloc_bulk
ffffffff81000300 t __slab_free
ffffffff81000400 T kmem_cache_alloc
ffffffff81000500 T kmem_cache_free
ffffffff81000600 T _printk
ffffffff81000700 D some_data
"""

# The module's console lines: phase k runs from the k-th to the (k+1)-th.
CONSOLE = """\
[    0.1] slab_bulk_bench: allocator=SLUB tsc_khz=1000000 unit=instructions
[    0.2] slab_bulk_bench: test b: working set of 16 batches of N outstanding, obj_size=256
[    0.3] slab_bulk_bench:   34 - 296 instructions - 109 instructions improved 62.9%
[    0.3] slab_bulk_bench: R test=b variant=fallback n=34 size=256 objs=1000 cycles=300000 empty=9000
[    0.3] slab_bulk_bench: R test=b variant=bulk n=34 size=256 objs=1000 cycles=110000 empty=9000
[    0.4] other driver: hello
[    0.5] slab_bulk_bench: test b: fragmented cache
[    0.6] slab_bulk_bench:   34 - 248 instructions - 75 instructions improved 69.7%
[    0.6] slab_bulk_bench: R test=b variant=frag_fallback n=34 size=256 objs=2000 cycles=500000 empty=0
[    0.6] slab_bulk_bench: R test=b variant=frag_bulk n=34 size=256 objs=2000 cycles=150000 empty=0
[    0.7] slab_bulk_bench: done
"""


def counts(blocks, phases=10):
    """The plugin's output for CONSOLE (10 module lines): @blocks are
    (phase, entry, vaddr, instructions)."""
    return profile.Counts(clock_reads=8, phases=phases, vcpus=1,
                           blocks=list(blocks))


# Test a's shape where a row's calls sit in the phase that the previous
# row's last R line opens: the worst-order free prints its human line
# after its measurement.
CONSOLE_A = """\
[    0.1] slab_bulk_bench: test a: quick reuse
[    0.2] slab_bulk_bench: bulk - fallback (loop) - bulk API
[    0.3] slab_bulk_bench:  158 - 255 instructions - 70 instructions
[    0.3] slab_bulk_bench: R test=a variant=skb_fallback n=158 size=208 objs=100 cycles=30000 empty=0
[    0.3] slab_bulk_bench: R test=a variant=skb_bulk n=158 size=208 objs=100 cycles=8000 empty=0
[    0.4] slab_bulk_bench: worst order free, alloc+free:   64 - 224 - 101
[    0.4] slab_bulk_bench: R test=a variant=skb_worst_loop n=64 size=208 objs=64 cycles=20000 empty=0
[    0.4] slab_bulk_bench: R test=a variant=skb_worst_bulk n=64 size=208 objs=64 cycles=9000 empty=0
"""


class Symbols(unittest.TestCase):
    def setUp(self):
        self.path = os.path.join(hermetic.SCRATCH, "System.map")
        with open(self.path, "w") as f:
            f.write(SYSTEM_MAP)

    def test_text_symbols_sorted_and_looked_up(self):
        addrs, names = profile.read_symbols(self.path)
        self.assertEqual(addrs, sorted(addrs))
        self.assertNotIn("some_data", names)
        self.assertEqual(profile.function_of(addrs, names, 0xffffffff81000345),
                         "__slab_free")
        self.assertEqual(profile.function_of(addrs, names, 0xffffffff81000100),
                         "kmem_cache_alloc_bulk")
        self.assertEqual(profile.function_of(addrs, names, 0x10), "?")

    def test_symbol_address_and_missing_symbol(self):
        self.assertEqual(profile.symbol_address(self.path, "_printk"),
                         0xffffffff81000600)
        with self.assertRaisesRegex(StageError, "no text symbol nosuch"):
            profile.symbol_address(self.path, "nosuch")


class Counts(unittest.TestCase):
    def write(self, text):
        path = os.path.join(hermetic.SCRATCH, "counts.txt")
        with open(path, "w") as f:
            f.write(text)
        return path

    HEAD = "# clock_reads %d\n# phases 7\n# vcpus %d\n"

    def test_lines_give_instructions(self):
        path = self.write(self.HEAD % (4, 1) + "3 1 ffffffff81000100 12 5 2\n")
        c = profile.read_counts(path)
        self.assertEqual((c.clock_reads, c.phases, c.vcpus), (4, 7, 1))
        # 5 runs of 12 instructions, two of them without their last
        self.assertEqual(c.blocks, [(3, 1, 0xffffffff81000100, 58)])

    def test_bad_headers_are_refused(self):
        for head, msg in ((self.HEAD % (3, 1), "odd number of clock reads"),
                          (self.HEAD % (0, 1), "read no TSC"),
                          (self.HEAD % (4, 2), "2 vCPUs"),
                          ("# clock_reads 4\n# vcpus 1\n", "no '# phases'")):
            with self.subTest(msg=msg):
                path = self.write(head + "3 1 ffffffff81000100 12 5 0\n")
                with self.assertRaisesRegex(ValueError, msg):
                    profile.read_counts(path)

    def test_malformed_line_is_refused(self):
        path = self.write(self.HEAD % (4, 1) + "3 1 ffffffff81000100 12 5\n")
        with self.assertRaisesRegex(ValueError, ":4: not 'PHASE ENTRY"):
            profile.read_counts(path)


class Rows(unittest.TestCase):
    def setUp(self):
        path = os.path.join(hermetic.SCRATCH, "System.map")
        with open(path, "w") as f:
            f.write(SYSTEM_MAP)
        self.addrs, self.names = profile.read_symbols(path)

    def test_rows_take_the_phase_before_their_r_lines(self):
        c = counts([
            # phase 1 (before line 2): setup calls, not a row's
            (1, 1, 0xffffffff81000110, 999),
            # phase 2: the working set, bulk (entries 1, 2) and loop (3, 4)
            (2, 1, 0xffffffff81000110, 30000),
            (2, 2, 0xffffffff81000210, 50000),
            (2, 2, 0xffffffff81000310, 20000),
            (2, 3, 0xffffffff81000410, 100000),
            (2, 4, 0xffffffff81000310, 150000),
            # phase 6: the fragmented cache
            (6, 2, 0xffffffff81000210, 40000),
            (6, 4, 0xffffffff81000510, 200000),
        ])
        rows = profile.rows(CONSOLE, c, self.addrs, self.names)
        self.assertEqual([(r.test, r.n) for r in rows], [("b", 34), ("b", 34)])
        ws, frag = rows
        self.assertEqual([r.variant for r in ws.variants[True]], ["bulk"])
        self.assertEqual([r.variant for r in ws.variants[False]], ["fallback"])
        self.assertEqual(ws.insns[True], collections.Counter({
            "kmem_cache_alloc_bulk": 30000, "kmem_cache_free_bulk": 50000,
            "__slab_free": 20000}))
        self.assertEqual(ws.insns[False], collections.Counter({
            "kmem_cache_alloc": 100000, "__slab_free": 150000}))
        self.assertEqual(frag.objs(True), 2000)
        self.assertEqual(frag.insns[False], collections.Counter({
            "kmem_cache_free": 200000}))

    def test_entry_out_of_range_is_refused(self):
        with self.assertRaisesRegex(ValueError, "entry 9"):
            profile.rows(CONSOLE, counts([(2, 9, 0xffffffff81000110, 1)]),
                          self.addrs, self.names)

    def test_row_in_the_phase_its_previous_row_opens(self):
        c = counts([(3, 1, 0xffffffff81000110, 2000),   # skb N=158
                    (5, 2, 0xffffffff81000210, 3000),   # worst order
                    (5, 4, 0xffffffff81000510, 7000)], phases=8)
        skb, worst = profile.rows(CONSOLE_A, c, self.addrs, self.names)
        self.assertEqual(sum(skb.insns[True].values()), 2000)
        self.assertEqual((worst.n, sum(worst.insns[True].values()),
                          sum(worst.insns[False].values())), (64, 3000, 7000))

    def test_phases_must_match_the_module_lines(self):
        with self.assertRaisesRegex(ValueError, "saw 9 calls of _printk"):
            profile.rows(CONSOLE, counts([(2, 1, 0xffffffff81000110, 1)],
                                          phases=9), self.addrs, self.names)

    def test_a_row_without_calls_is_refused(self):
        with self.assertRaisesRegex(ValueError, "N=34 .*no slab calls"):
            profile.rows(CONSOLE, counts([(6, 2, 0xffffffff81000210, 1)]),
                          self.addrs, self.names)

    def test_more_than_the_timed_region_is_refused(self):
        with self.assertRaisesRegex(ValueError, "more than the timed "
                                    "region's 110000"):
            profile.rows(CONSOLE, counts([(2, 1, 0xffffffff81000110,
                                            110001)]),
                          self.addrs, self.names)

    def test_report_per_object_base_vs_series(self):
        def side(scale):
            return profile.rows(CONSOLE, counts([
                (2, 1, 0xffffffff81000110, 30000 * scale),
                (2, 3, 0xffffffff81000410, 100000),
                (6, 2, 0xffffffff81000210, 40000 * scale),
                (6, 4, 0xffffffff81000510, 200000)]), self.addrs, self.names)
        md, data = profile.report("slub", "./bulk profile", {
            "base": side(2), "series": side(1)}, 20)
        self.assertIn("| kmem_cache_alloc_bulk | 60.0 | 30.0 | -30.0 |", md)
        self.assertIn("| *benchmark (timed region, raw)* | 110.0 | 110.0 |", md)
        first = data["rows"][0]["sides"]
        self.assertEqual(first["bulk"]["total"], {"base": 60.0, "series": 30.0})
        self.assertEqual(first["loop"]["total"], {"base": 100.0,
                                                  "series": 100.0})

    def test_report_refuses_different_rows(self):
        one = profile.rows(CONSOLE, counts([(2, 1, 0xffffffff81000110, 1),
                                             (6, 2, 0xffffffff81000210, 1)]),
                            self.addrs, self.names)
        two = profile.rows(CONSOLE_A, counts([(3, 1, 0xffffffff81000110, 1),
                                               (5, 1, 0xffffffff81000110, 1)],
                                              phases=8),
                            self.addrs, self.names)
        with self.assertRaisesRegex(StageError, "different rows"):
            profile.report("slub", "x", {"base": one, "series": two}, 5)


class Args(unittest.TestCase):
    def args(self, **kw):
        d = dict(alloc="slub", tests="b", sizes="34,1024", top=20)
        d.update(kw)
        return argparse.Namespace(**d)

    def test_good_arguments(self):
        self.assertEqual(profile.check_args(self.args(tests="ba")),
                         ("slub", "ab", [34, 1024]))

    def test_bad_arguments_are_named(self):
        for kw, msg in ((dict(alloc="slob2"), "--alloc takes one of"),
                        (dict(alloc="slub-stats"), "kprobe handlers"),
                        (dict(tests="c"), "--tests takes letters among ab"),
                        (dict(sizes="x"), "--sizes takes a comma list"),
                        (dict(sizes="0"), "--sizes takes a comma list"),
                        (dict(top=0), "--top takes a positive number")):
            with self.subTest(kw=kw):
                with self.assertRaisesRegex(StageError, msg):
                    profile.check_args(self.args(**kw))


class Plugin(unittest.TestCase):
    def test_plugin_builds_and_qemu_loads_it(self):
        """QEMU loads the plugin and calls its install function, which
        refuses an unknown argument: the ABI matches this QEMU."""
        for tool in ("gcc", "qemu-system-x86_64"):
            if shutil.which(tool) is None:
                self.fail("%s not installed: run ./bulk setup" % tool)
        lib = profile.build_plugin()
        self.assertTrue(lib.startswith(hermetic.SCRATCH))
        p = subprocess.run(["qemu-system-x86_64", "-M", "none", "-display",
                            "none", "-monitor", "none", "-serial", "none",
                            "-plugin", lib + ",bogus=1"],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("qemu-prof: unknown argument bogus=1", p.stderr)
