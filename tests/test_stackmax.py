"""Unit tests for ./bulk stack --live (harness/stackmax.py): the stack
tracer's files as the init prints them."""
import unittest

import hermetic  # noqa: F401  (sets the paths)
import stackmax
from common import StageError

CONSOLE = """\
[    9.1] harness: cat /sys/kernel/debug/tracing/stack_max_size: 3216
[    9.1] harness: cat /sys/kernel/debug/tracing/stack_trace:         Depth    Size   Location    (3 entries)
[    9.1] harness: cat /sys/kernel/debug/tracing/stack_trace:         -----    ----   --------
[    9.1] harness: cat /sys/kernel/debug/tracing/stack_trace:   0)     3216     616   bulk_free_grouped+0x5/0x3a0
[    9.1] harness: cat /sys/kernel/debug/tracing/stack_trace:   1)     2600     104   kmem_cache_free_bulk+0x1c/0x40
[    9.1] harness: cat /sys/kernel/debug/tracing/stack_trace:   2)     2496      48   napi_skb_cache_put+0x2a/0x80
harness: cat /proc/meminfo: MemTotal: 1 kB
"""


class Parse(unittest.TestCase):
    def test_size_and_frames(self):
        size, frames = stackmax.parse(CONSOLE, "log")
        self.assertEqual(size, 3216)
        self.assertEqual([(f.depth, f.size, f.function) for f in frames], [
            (3216, 616, "bulk_free_grouped"),
            (2600, 104, "kmem_cache_free_bulk"),
            (2496, 48, "napi_skb_cache_put")])
        d = stackmax.Deepest("w", "series", size, frames, "log")
        self.assertEqual(d.top(2), "bulk_free_grouped 616, "
                         "kmem_cache_free_bulk 104")

    def test_frames_that_differ(self):
        _, frames = stackmax.parse(CONSOLE, "log")
        series = stackmax.Deepest("w", "series", 3216, frames, "log")
        base = stackmax.Deepest("w", "base", 2600, [
            stackmax.Frame(2600, 96, "kmem_cache_free_bulk"),
            stackmax.Frame(2504, 48, "napi_skb_cache_put"),
            stackmax.Frame(2456, 8, "net_rx_action")], "log")
        self.assertEqual(stackmax.differ(base, series),
                         "kmem_cache_free_bulk 96 -> 104, bulk_free_grouped "
                         "(series only) 616, net_rx_action (base only) 8")

    def test_no_tracer_is_an_error_naming_the_config(self):
        with self.assertRaisesRegex(StageError, "slub-net-stacktrace"):
            stackmax.parse("harness: status=0\n", "log")

    def test_workloads_reset_the_tracer_before_their_own_writes(self):
        for name, _, append in stackmax.workloads():
            self.assertTrue(append.startswith(
                "stacktrace harness.write=%s:0 " % stackmax.MAX_SIZE), name)
            self.assertTrue(append.endswith("harness.cat=%s" % stackmax.TRACE))


if __name__ == "__main__":
    unittest.main()
