"""Unit tests for harness/callers.py (./bulk callers): the init's timing
lines, the hist triggers' snapshots and the table (stdlib unittest only)."""
import os
import unittest

import hermetic  # noqa: F401  (first: harness on sys.path, scratch build/)
import callers
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
        self.assertEqual(got["mmap"], (4000, 63375978))

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
        self.assertTrue(callers.spec().startswith("mmap:"))

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


if __name__ == "__main__":
    unittest.main()
