"""Unit tests for harness/callers.py (./bulk callers): the init's timing
lines, the hist triggers' snapshots and the table (stdlib unittest only)."""
import contextlib
import os
import unittest
from unittest import mock

import hermetic  # noqa: F401  (first: harness on sys.path, scratch build/)
import boot
import callers
import costs
import kconfig
from common import StageError

HIST = "/sys/kernel/debug/tracing/events/kprobes/%s/hist"


def hist_lines(entries):
    """A hist file as the kernel prints it (keys=caller.sym-offset,
    vals=size): header, one line per caller, totals."""
    out = ["# event histogram", "#",
           "# trigger info: hist:keys=caller.sym-offset:vals=hitcount,size:"
           "sort=hitcount:size=2048 [active]", "#", ""]
    for addr, sym, hits, size in entries:
        out.append("{ caller: [%s] %-55s } hitcount: %10d  size: %10d"
                   % (addr, sym, hits, size))
    out += ["", "Totals:", "    Hits: %d" % sum(e[2] for e in entries),
            "    Entries: %d" % len(entries), "    Dropped: 0"]
    return out


def snap(name, when, event, entries):
    return "".join("harness: callers snap %s %s %s: %s\n" % (
        name, when, HIST % event, line) for line in hist_lines(entries))


ONE = (callers.Workload("mmap", 4000, "mmap+munmap", "x"),)
TWO = ONE + (callers.Workload("uring-new", 512, "NOP", "y"),)
MAS_A = ("ffffffff81390a15", "mas_alloc_nodes+0x95/0x2b0")
MAS_F = ("ffffffff81391234", "mas_destroy+0x84/0x1a0")
IO_A = ("ffffffff812a0011", "__io_alloc_req_refill+0x41/0x120")


def count_log():
    return ("[    0.1] boot\n"
            + snap("mmap", "before", "bulk_alloc", [MAS_A + (100, 900)])
            + snap("mmap", "before", "bulk_free", [MAS_F + (100, 700)])
            + snap("mmap", "after", "bulk_alloc", [MAS_A + (8100, 72900)])
            + snap("mmap", "after", "bulk_free", [MAS_F + (8100, 56700)])
            + "harness: callers name=mmap count=4000 tsc=123456789\n"
            + snap("uring-new", "before", "bulk_alloc", [MAS_A + (8100, 72900)])
            + snap("uring-new", "before", "bulk_free", [MAS_F + (8100, 56700)])
            + snap("uring-new", "after", "bulk_alloc",
                   [IO_A + (64, 512), MAS_A + (8108, 72972)])
            + snap("uring-new", "after", "bulk_free", [MAS_F + (8108, 56756)])
            + "harness: callers name=uring-new count=512 tsc=999\n"
            + "harness: status=0\n")


class Timings(unittest.TestCase):
    LOG = ("harness: start (cmdline: ...)\n"
           "harness: callers name=mmap count=4000 tsc=123456789\n"
           "harness: callers name=uring-new count=512 tsc=1024000\n"
           "harness: status=0\n")

    def test_parse(self):
        got = callers.parse_timings(self.LOG, "base", 1, "x.log", TWO)
        self.assertEqual(got, {"mmap": (4000, 123456789),
                               "uring-new": (512, 1024000)})
        r = callers.Run("linux-base", "base", 1, "x.log", got)
        self.assertAlmostEqual(r.per_op("uring-new"), 2000.0)

    def test_missing_workload_names_the_log(self):
        with self.assertRaises(StageError) as cm:
            callers.parse_timings(self.LOG.replace("name=mmap", "name=mmapx"),
                                  "series", 2, "run2.log", TWO)
        self.assertIn("name=mmap", str(cm.exception))
        self.assertIn("run2.log", str(cm.exception.log))

    def test_wrong_count(self):
        with self.assertRaises(StageError) as cm:
            callers.parse_timings(self.LOG.replace("count=512", "count=256"),
                                  "base", 1, "x", TWO)
        self.assertIn("ran 256, asked for 512", str(cm.exception))

    def test_snapshot_lines_are_not_timings(self):
        log = count_log()
        got = callers.parse_timings(log, "series", 1, "x", TWO)
        self.assertEqual(got["mmap"], (4000, 123456789))

    def test_repeat(self):
        a = callers.Run("linux", "series", 1, "a", {"mmap": (4000, 1000000)})
        b = callers.Run("linux", "series", 2, "b", {"mmap": (4000, 1000000)})
        callers.check_repeat([a, b])
        self.assertEqual(callers.spread([a, b], "mmap"), 0)
        b.ticks["mmap"] = (4000, 1100000)
        with self.assertRaises(StageError) as cm:
            callers.check_repeat([a, b])
        self.assertIn("runs 1 and 2 differ on mmap", str(cm.exception))
        self.assertEqual(callers.spread([a, b], "mmap"), 100000)


class Counts(unittest.TestCase):
    def test_hist_line(self):
        lines = hist_lines([MAS_A + (3, 27), MAS_F + (2, 14),
                            ("ffffffff81390b00", "mas_alloc_nodes+0x180/0x2b0",
                             1, 9)])
        self.assertEqual(callers.parse_hist(lines),
                         {"mas_alloc_nodes": (4, 36), "mas_destroy": (2, 14)})

    def test_hist_without_symbol_or_in_a_module(self):
        self.assertEqual(callers.parse_hist([
            "{ caller: [ffffffffa0001234] foo+0x4/0x10 [bar]   } "
            "hitcount:          1  size:          8",
            "{ caller: [ffffffff81000000] ffffffff81000000   } "
            "hitcount:          2  size:          4"]),
            {"foo": (1, 8), "ffffffff81000000": (2, 4)})

    def test_deltas(self):
        got = callers.parse_counts(count_log(), "series", "c.log", TWO)
        self.assertEqual(got["mmap"], {
            ("bulk_alloc", "mas_alloc_nodes"): (8000, 72000),
            ("bulk_free", "mas_destroy"): (8000, 56000)})
        self.assertEqual(got["uring-new"], {
            ("bulk_alloc", "__io_alloc_req_refill"): (64, 512),
            ("bulk_alloc", "mas_alloc_nodes"): (8, 72),
            ("bulk_free", "mas_destroy"): (8, 56)})
        text = callers.describe(got["mmap"], 4000)
        self.assertEqual(text, "alloc 2 calls x 9 objects (maple: "
                         "mas_alloc_nodes); free 2 calls x 7 objects "
                         "(maple: mas_destroy)")
        self.assertIn("alloc 0.125 calls x 8 objects (io_uring: "
                      "__io_alloc_req_refill)",
                      callers.describe(got["uring-new"], 512))
        self.assertEqual(callers.describe({}, 10), "none")

    def test_numbers_without_exponent(self):
        for x, text in ((0, "0"), (3.05e-5, "0.0000305"), (0.00215, "0.00215"),
                        (2, "2"), (0.125, "0.125"), (7.333, "7.33"),
                        (404.3, "404"), (1234.5, "1234")):
            self.assertEqual(callers.num(x), text)

    def test_missing_snapshot(self):
        log = count_log().replace("uring-new after", "uring-new later")
        with self.assertRaises(StageError) as cm:
            callers.parse_counts(log, "base", "c.log", TWO)
        self.assertIn("after uring-new", str(cm.exception))

    def test_callers(self):
        self.assertEqual(callers.caller_of("mas_destroy"), "maple")
        self.assertEqual(callers.caller_of("mt_destroy_walk"), "maple")
        self.assertEqual(callers.caller_of("__io_alloc_req_refill"), "io_uring")
        self.assertEqual(callers.caller_of("kfree_rcu_work"), "kvfree_rcu")
        self.assertEqual(callers.caller_of("skb_release_data"), "other")


class RealLog(unittest.TestCase):
    """The 'harness: callers' lines of a counting boot of the series
    (slub-callers-count, exact mode), as the kernel printed them."""

    def setUp(self):
        with open(os.path.join(hermetic.HERE, "data",
                               "callers-count.log")) as f:
            self.text = f.read()

    def test_timings(self):
        got = callers.parse_timings(self.text, "series", 1, "x")
        self.assertEqual(set(got), {w.name for w in callers.WORKLOADS})
        self.assertEqual(got["mmap"], (4000, 62073233))

    def test_counts(self):
        got = callers.parse_counts(self.text, "series", "x")
        # a VMA tree of height 3: mas_preallocate() asks for 1 + 3 * 3
        # nodes, one of them singly
        self.assertEqual(got["mmap"], {
            ("bulk_alloc", "mas_alloc_nodes"): (8000, 72000),
            ("bulk_free", "mas_destroy"): (8000, 56000)})
        calls, objs = got["uring-new"][("bulk_alloc", "__io_alloc_req_refill")]
        self.assertEqual((calls, objs), (16384 // 8, 16384))
        self.assertEqual([k for k in got["kfree_rcu"]],
                         [("bulk_free", "kfree_rcu_work")])
        self.assertNotIn(("bulk_alloc", "__io_alloc_req_refill"), got["uring"])
        # the BPF test run's batches of 64 skb heads
        self.assertEqual(got["xdp"], {
            ("bulk_alloc", "bpf_test_run_xdp_live"): (65536 // 64, 65536)})
        # a list of one is no batch; lists of 64 flush 8 shells and 8
        # kmalloc()ed heads at a time: every frame is dropped
        self.assertEqual(got["qdisc-one"], {})
        self.assertEqual(sum(objs for (event, func), (calls, objs) in
                             got["qdisc-batch"].items()
                             if func.startswith("kfree_skb_list")),
                         2 * 32768)


class CommandLine(unittest.TestCase):
    def test_append(self):
        a = callers.append()
        self.assertEqual(a.split(), ["harness.callers=" + callers.spec()])
        self.assertNotIn("kprobe", a)
        c = callers.append(True)
        words = c.split()
        # the probes are defined before their triggers are set
        first_trigger = min(i for i, w in enumerate(words) if "trigger" in w)
        self.assertTrue(all(i < first_trigger for i, w in enumerate(words)
                            if "kprobe_events" in w))
        self.assertIn("kprobe_events:p:bulk_alloc%20kmem_cache_alloc_bulk"
                      "%20caller=$stack0:x64%20size=%dx:u64", c)
        self.assertIn("p:bulk_free%20kmem_cache_free_bulk%20caller=$stack0"
                      ":x64%20size=%si:u64", c)
        self.assertIn("harness.callers_snap=" + HIST % "bulk_free", words)
        self.assertLess(len(c) + 200, 2048)  # x86's COMMAND_LINE_SIZE

    def test_spec_and_units(self):
        for w in callers.WORKLOADS:
            if w.name.startswith("uring"):
                self.assertEqual(w.count % 256, 0, w.name)
        self.assertTrue(callers.spec().startswith("xdp:65536,"))

    def test_configs(self):
        self.assertEqual(kconfig.CONFIG_SETS[callers.CONFIG],
                         kconfig.CONFIG_SETS["slub"] + ["callers"])
        self.assertEqual(kconfig.CONFIG_SETS[callers.COUNT_CONFIG],
                         kconfig.CONFIG_SETS[callers.CONFIG]
                         + ["callers-count"])


class Table(unittest.TestCase):
    def test_markdown(self):
        runs = [callers.Run(t, label, i, "%s%d.log" % (label, i),
                            {w.name: (w.count, w.count * (100 if label == "base"
                                                          else 90))
                             for w in callers.WORKLOADS})
                for t, label in callers.KERNELS for i in (1, 2)]
        counts = {"series": {"mmap": {("bulk_alloc", "mas_alloc_nodes"):
                                      (4000, 36000)}}}
        md = callers.markdown(runs, counts, "./bulk callers")
        self.assertIn("| mmap | mmap+munmap | 100.0 | 90.0 | 0.9000 | 0 / 0 | "
                      "alloc 1 calls x 9 objects (maple: mas_alloc_nodes) |", md)
        self.assertIn("| brk | 2 brk | 100.0 | 90.0 | 0.9000 | 0 / 0 | none |",
                      md)
        self.assertNotIn("Base's counts", md)
        counts["base"] = {"mmap": {("bulk_alloc", "mas_alloc_nodes"):
                                   (4000, 36000)},
                          "kfree_rcu": {("bulk_free", "kfree_rcu_work"):
                                        (40, 16000)}}
        md = callers.markdown(runs, counts, "./bulk callers")
        self.assertIn("Base's counts where they differ", md)
        self.assertIn("- kfree_rcu: free 0.002 calls x 400 objects "
                      "(kvfree_rcu: kfree_rcu_work)", md)
        self.assertNotIn("- mmap:", md)


def region(insns, **events):
    return costs.Region(0, insns, dict({e: 0 for e in costs.EVENTS},
                                       **events))


# qemu-cost.c's lines on the slab calls it followed, with slab=.
SLAB_HEAD = ("# slab_entries 16\n# slab_calls 900\n"
             "# slab_entries_after_ret 50\n# slab_lost 0\n# slab_past 0\n"
             "# slab_resets 1\n")


def plugin_output(insns, vcpus=1, slab=True):
    """qemu-cost.c's output for regions of @insns instructions, a quarter
    of them inside slab calls."""
    return "".join([
        "# clock_reads %d\n# phases 0\n# vcpus %d\n" % (2 * len(insns), vcpus),
        "# addresses physical\n# virtual_fallbacks 0\n# line 64\n",
        SLAB_HEAD if slab else "",
        "# cache l1d 49152 12 64\n# cache l2 2097152 16 2048\n",
        "# cache llc 31457280 15 32768\n",
        "# columns phase insns %s\n" % " ".join(costs.EVENTS)] + [
        "0 %d %s %d\n" % (n, " ".join(["7"] + ["0"] * (len(costs.EVENTS) - 2)),
                          n // 4)
        for n in insns])


# The text symbols of SLAB_ENTRIES in a System.map, and two others.
SYSTEM_MAP = """\
ffffffff81128800 T kmalloc_trace
ffffffff81129050 T kfree
ffffffff81129060 t kfree_helper
ffffffff811524e0 T kmem_cache_alloc
ffffffff81153710 T kmem_cache_free
ffffffff811541a0 T kmem_cache_free_bulk
ffffffff811541b0 T kmem_cache_alloc_bulk
ffffffff82000000 D kfree_data
"""


class Costs(unittest.TestCase):
    """--costs: the plugin's regions paired with the workloads, and the
    second table."""
    TICKS = {"mmap": (4000, 1000000), "uring-new": (512, 51200)}

    def test_region_k_is_workload_k(self):
        regs = [region(1000000, loads=5), region(51200)]
        got = callers.assign(regs, self.TICKS, "c.log", TWO)
        self.assertEqual(got, {"mmap": regs[0], "uring-new": regs[1]})

    def test_other_instructions_are_refused(self):
        with self.assertRaises(StageError) as cm:
            callers.assign([region(1000000), region(51201)], self.TICKS,
                           "c.log", TWO)
        self.assertIn("timed region 2 has 51201 instructions, but the init "
                      "printed tsc=51200 for workload 2, uring-new",
                      str(cm.exception))
        self.assertEqual(cm.exception.log, "c.log")
        # in the other order: not paired by their counts either
        with self.assertRaises(StageError):
            callers.assign([region(51200), region(1000000)], self.TICKS,
                           "c.log", TWO)

    def test_a_region_more_or_less_is_refused(self):
        for regs in ([region(1000000)],
                     [region(1000000), region(51200), region(9)]):
            with self.assertRaises(StageError) as cm:
                callers.assign(regs, self.TICKS, "c.log", TWO)
            self.assertIn("%d timed regions for 2 workloads" % len(regs),
                          str(cm.exception))
            self.assertEqual(cm.exception.log, "c.log")

    @contextlib.contextmanager
    def fake_boot(self, insns, vcpus=1, tsc=None, system_map=SYSTEM_MAP,
                  slab=True):
        """boot.boot as the plugin boot would go: the plugin's output
        where out= says, the init's timing lines in the log; the call
        is kept in self.call, the slab= file's lines in self.entries.
        The kernel's O= dir (kbuild.check_stamp()) holds @system_map."""
        out_dir = os.path.join(hermetic.SCRATCH, "o-slub-callers")
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "System.map"), "w") as f:
            f.write(system_map)

        def fake(config, tree, mode, load, append, timeout, tag,
                 qemu_extra):
            self.call = (config, tree, mode, list(load), append, tag,
                         list(qemu_extra))
            args = dict(a.split("=", 1) for a in qemu_extra[1].split(",")
                        if "=" in a)
            with open(args["slab"]) as f:
                self.entries = f.read().splitlines()
            with open(args["out"], "w") as f:
                f.write(plugin_output(insns, vcpus, slab))
            log = os.path.join(hermetic.SCRATCH, "costs-boot.log")
            with open(log, "w") as f:
                f.write("".join("harness: callers name=%s count=%d tsc=%d\n"
                                % (w.name, w.count, t)
                                for w, t in zip(TWO, tsc or insns)))
            return boot.BootResult(config, tree, mode, list(load), append,
                                   log, 1, 0, 1, [], None, [], [])
        with mock.patch.object(callers.boot, "boot", fake), \
                mock.patch.object(callers.kbuild, "check_stamp",
                                  lambda config, tree, step: out_dir):
            yield

    def test_the_plugin_boot(self):
        with self.fake_boot([4000 * 250, 512 * 100]):
            c = callers.costs_boot("slub-callers", "linux", "series",
                                   "/p/qemu-cost.so", TWO)
        config, tree, mode, load, append, tag, extra = self.call
        self.assertEqual((config, tree, mode, load), ("slub-callers", "linux",
                                                      "exact", []))
        self.assertEqual(append.split(), ["harness.callers=mmap:4000,"
                                          "uring-new:512", costs.KEEP_LOCKS])
        self.assertEqual(extra[0], "-plugin")
        self.assertEqual(extra[1].split(",")[0], "/p/qemu-cost.so")
        self.assertIn("clock=user", extra[1].split(","))
        self.assertNotIn("p=", extra[1])
        self.assertEqual(c.regions["uring-new"].insns, 51200)
        self.assertEqual(c.regions[TWO[1].name].insns / TWO[1].count, 100)
        self.assertEqual(c.per_unit(TWO[0], "loads"), 7 / 4000)
        self.assertIn("L1D 48 KiB 12-way", c.geometry)
        # slab= names the entry points the System.map has, in
        # SLAB_ENTRIES' order, text symbols only
        self.assertTrue(any(a.startswith("slab=") and a.endswith(".slab")
                            for a in extra[1].split(",")))
        self.assertEqual(self.entries, [
            "ffffffff811524e0", "ffffffff81153710", "ffffffff811541b0",
            "ffffffff811541a0", "ffffffff81129050", "ffffffff81128800"])
        self.assertEqual(c.per_unit(TWO[1], "slab_insns"), 25)
        self.assertEqual(c.slab_share(TWO[0]), 0.25)
        self.assertEqual(c.slab["slab_resets"], 1)
        self.assertEqual(c.slab["slab_calls"], 900)

    def test_the_plugin_boot_needs_the_slab_api(self):
        """A kernel without kfree() or the bulk calls, or a plugin that
        did not follow the slab calls, is refused."""
        no_bulk = "".join(line + "\n" for line in SYSTEM_MAP.splitlines()
                          if "_bulk" not in line)
        with self.fake_boot([1000, 512], system_map=no_bulk):
            with self.assertRaisesRegex(StageError, "System.map has no "
                                        "kmem_cache_alloc_bulk, "
                                        "kmem_cache_free_bulk"):
                callers.costs_boot("slub-callers", "linux", "series", "p",
                                   TWO)
        with self.fake_boot([1000, 512], slab=False):
            with self.assertRaisesRegex(StageError, "no '# slab_calls' line"):
                callers.costs_boot("slub-callers", "linux", "series", "p",
                                   TWO)

    def test_the_plugin_boot_refuses_two_vcpus_and_other_ticks(self):
        with self.fake_boot([1000, 512], vcpus=2):
            with self.assertRaisesRegex(StageError, "2 vCPUs"):
                callers.costs_boot("slub-callers", "linux", "series", "p",
                                   TWO)
        with self.fake_boot([1000, 512], tsc=[1000, 513]):
            with self.assertRaises(StageError) as cm:
                callers.costs_boot("slub-callers", "linux", "series", "p",
                                   TWO)
        self.assertIn("timed region 2 has 512 instructions, but the init "
                      "printed tsc=513", str(cm.exception))
        self.assertTrue(cm.exception.log.endswith("costs-boot.log"))

    def test_table(self):
        runs = [callers.Run(t, label, i, "%s%d.log" % (label, i),
                            {w.name: (w.count, w.count * (
                                100 if label == "base" else 90))
                             for w in callers.WORKLOADS})
                for t, label in callers.KERNELS for i in (1, 2)]
        geometry = "L1D 48 KiB 12-way (64 sets); 64-byte lines"
        # base: 100 instructions per unit, as its run 1; series: 90 (90.9
        # on mmap, 1% more than its run 1), per unit an L1D load miss that
        # hits L2 (5-11), a cmpxchg16b (10-25), a locked one (18-30) and
        # two cli (2-8 each)
        # and inside slab calls, base 40 per unit, series 27 (30% of 90;
        # mmap: 27.27 of 90.9)
        cost_runs = {
            "base": callers.CostRun("linux-base", "base", "cb.log", geometry, {
                w.name: region(w.count * 100, loads=w.count * 3,
                               slab_insns=w.count * 40)
                for w in callers.WORKLOADS}, {
                    "slab_calls": 1000, "slab_entries_after_ret": 100,
                    "slab_lost": 0, "slab_past": 0, "slab_resets": 0}),
            "series": callers.CostRun("linux", "series", "cs.log", geometry, {
                w.name: region(w.count * (909 if w.name == "mmap" else 900)
                               // 10, loads=w.count * 3,
                               l1d_load_misses=w.count, cmpxchg16b=w.count,
                               cmpxchg16b_locked=w.count, cli=2 * w.count,
                               slab_insns=w.count * (
                                   2727 if w.name == "mmap" else 2700) // 100)
                for w in callers.WORKLOADS}, {
                    "slab_calls": 990, "slab_entries_after_ret": 90,
                    "slab_lost": 0, "slab_past": 0, "slab_resets": 2})}
        md = callers.markdown(runs, {}, "./bulk callers --costs",
                              cost_runs=cost_runs)
        self.assertLess(md.index("| mmap | mmap+munmap | 100.0 | 90.0 |"),
                        md.index("## Modeled costs"))
        self.assertLess(md.index("## Modeled costs"), md.index("Workloads"))
        self.assertIn("| brk | 2 brk | 100–100 | 127–172 | 1.2700 | 1.7200 "
                      "| 3.00 / 3.00 | 0.00 / 1.00 | 0.00 / 0.00 | "
                      "0.00 / 0.00 | 0.00 / 0.00 | 0.00+0.00 / 1.00+1.00 | "
                      "0.00+0.00 / 2.00+0.00 | 0.00+0.00 / 0.00+0.00 |", md)
        self.assertIn("Weights' sources: %s." % costs.SOURCES, md)
        self.assertIn("against each kernel's run 1 (the table above), the "
                      "same for base and at most 1.00% off for series "
                      "(mmap).", md)
        self.assertIn(geometry, md)
        self.assertIn("cb.log, cs.log.", md)
        # the slab calls' share, after the modeled costs: the slab
        # instructions are not weighed there (brk's 127-172 above)
        self.assertLess(md.index("## Modeled costs"),
                        md.index("### Slab calls' share"))
        self.assertLess(md.index("### Slab calls' share"),
                        md.index("Workloads"))
        self.assertIn("| workload | unit | slab instructions per unit base "
                      "| series | share base | share series |", md)
        self.assertIn("| brk | 2 brk | 40.0 | 27.0 | 40.00% | 30.00% |", md)
        self.assertIn("| mmap | mmap+munmap | 40.0 | 27.3 | 40.00% | "
                      "30.00% |", md)
        self.assertIn("from the function's entry until the call returns (the "
                      "load of its return address by a ret)", md)
        self.assertIn("`kmem_cache_free_bulk()`", md)
        self.assertIn("x86-64 only", md)
        self.assertIn("series 990 (90 reached after a ret, not a "
                      "call: tail calls, or an interrupt's return into an "
                      "entry point), 0 lost (no return slot known), 0 "
                      "ended by a ret above their slot, 2 cut short by user "
                      "space.", md)
        data = callers.cost_json(cost_runs)
        self.assertEqual(data["series"]["brk"]["insns"], 4000 * 90)
        self.assertEqual(data["series"]["brk"]["events"]["cli"], 8000)
        self.assertEqual(data["series"]["brk"]["modeled_high"], 172.0)
        self.assertEqual(data["series"]["brk"]["events"]["slab_insns"],
                         4000 * 27)
        self.assertEqual(data["series"]["brk"]["slab_insns_per_unit"], 27.0)
        self.assertEqual(data["series"]["brk"]["slab_share"], 0.3)
        self.assertEqual(data["base"]["mmap"]["slab_share"], 0.4)
        self.assertNotIn("Modeled costs", callers.markdown(
            runs, {}, "./bulk callers"))


if __name__ == "__main__":
    unittest.main()
