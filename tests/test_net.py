"""Unit tests for harness/net.py (./bulk net) and the NIC boot.py gives
its kernels (stdlib unittest only)."""
import unittest

import hermetic  # noqa: F401  (first: harness on sys.path, scratch build/)
import boot
import net
import tables
from common import StageError

LOG = """\
[    0.000000] tsc: Fast TSC calibration using PIT
[    0.000000] tsc: Detected 999.993 MHz processor
harness: wrote /proc/net/pktgen/pgctrl = start
harness: cat /proc/net/pktgen/eth0:      pkts-sofar: 100000  errors: 0
harness: cat /proc/net/pktgen/eth0: Result: OK: 204277(c204257+d20) usec, 100000 (64byte,0frags)
harness: cat /proc/net/pktgen/eth0:   489529pps 250Mb/sec (250638848bps) errors: 0
harness: cat /sys/class/net/eth0/statistics/tx_packets: 100000
harness: cat /sys/class/net/eth0/statistics/tx_dropped: 0
harness: cat /sys/class/net/eth0/statistics/tx_errors: 0
harness: status=0
"""


class NetParse(unittest.TestCase):
    def test_result(self):
        r = net.parse(LOG, "linux", "slub-net", 1, "x.log")
        self.assertEqual((r.packets, r.usec, r.tx_packets), (100000, 204277, 100000))
        self.assertAlmostEqual(r.tsc_mhz, 999.993)
        # guest usec at the calibrated TSC rate = instructions
        self.assertAlmostEqual(r.instructions(), 204277 * 999.993 / 100000)
        net.check(r, 100000)

    def test_refined_calibration_wins(self):
        log = LOG + "[    1.0] tsc: Refined TSC clocksource calibration: 1000.001 MHz\n"
        self.assertAlmostEqual(net.parse(log, "linux", "slub-net", 1, "x").tsc_mhz,
                               1000.001)

    def test_no_result_names_the_log(self):
        log = LOG.replace("Result: OK: 204277(c204257+d20) usec, 100000 (64byte,0frags)",
                          "Result: OK: dstmac 52:54:00:12:34:57")
        with self.assertRaises(StageError) as cm:
            net.parse(log, "linux", "slub-net", 2, "run2.log")
        self.assertIn("no pktgen result", str(cm.exception))
        self.assertIn("run2.log", str(cm.exception.log))

    def test_missing_counter(self):
        with self.assertRaises(StageError) as cm:
            net.parse(LOG.replace("tx_errors: 0\n", ""), "linux", "slub-net", 1, "x")
        self.assertIn("tx_errors", str(cm.exception))

    def test_lost_packets_fail(self):
        for old, new in (("tx_dropped: 0", "tx_dropped: 3"),
                         ("tx_packets: 100000", "tx_packets: 99990")):
            r = net.parse(LOG.replace(old, new), "linux", "slub-net", 1, "x")
            with self.assertRaises(StageError):
                net.check(r, 100000)
        r = net.parse(LOG, "linux", "slub-net", 1, "x")
        with self.assertRaises(StageError):
            net.check(r, 200000)

    def test_append_escapes_spaces(self):
        a = net.append(1234)
        self.assertNotIn(" 1234", a)
        self.assertIn("harness.write=/proc/net/pktgen/eth0:count%201234", a)
        self.assertIn("harness.write=/proc/net/pktgen/eth0:clone_skb%200", a)
        # pgctrl drops the last byte written
        self.assertIn("harness.write=/proc/net/pktgen/pgctrl:start%20", a)
        self.assertIn("harness.cat=/proc/net/pktgen/eth0", a)
        # the link goes up before pktgen starts
        self.assertLess(a.index("/sys/class/net/eth0/flags"), a.index("pgctrl"))

    def test_markdown(self):
        runs = [net.NetRun("linux-base", "slub-net", i, "b", 100, u, 1000.0,
                           100, 0, 0) for i, u in ((1, 200), (2, 210))]
        runs += [net.NetRun("linux", "slub-net", 1, "s", 100, 190, 1000.0,
                            100, 0, 0)]
        md = net.markdown(runs, [], "./bulk net")
        self.assertIn("| base | 2 | 100 | 210 | 2100.0 |", md)
        self.assertIn("| base | 2000.0 | 2050.0 | 2100.0 | 4.88% |", md)
        self.assertIn("series/base: 0.927 of the mean (-150.0 instructions "
                      "per packet), 0.950 of the minimum (-100.0)", md)


UDP_LOG = "".join("harness: udp size=%d count=10 tsc=%d\n" % (s, 1000 * s)
                  for s in net.UDP_SIZES) + "harness: status=0\n"


class Udp(unittest.TestCase):
    def test_fragments_at_mtu_1500(self):
        # 1480 bytes of the UDP datagram (8-byte header included) per fragment
        self.assertEqual([net.fragments(s) for s in net.UDP_SIZES],
                         [1, 2, 9, 17, 18, 33, 45])
        self.assertEqual(net.fragments(1473), 2)
        self.assertEqual(net.fragments(65507), 45)

    def test_append(self):
        a = net.udp_append(7, (100, 200))
        self.assertIn("harness.write=/sys/class/net/lo/mtu:1500", a)
        self.assertIn("harness.write=/sys/class/net/lo/flags:0x9", a)
        self.assertTrue(a.endswith("harness.udp=7:100,200"))

    def test_parse(self):
        r = net.parse_udp(UDP_LOG, "linux", "series", 1, "x.log", 10)
        self.assertEqual(r.ticks[65507], 65507000)
        self.assertAlmostEqual(r.per_datagram(1472), 147200.0)

    def test_missing_size_names_the_log(self):
        log = UDP_LOG.replace("size=13312 ", "size=1 ")
        with self.assertRaises(StageError) as cm:
            net.parse_udp(log, "linux", "series", 2, "run2.log", 10)
        self.assertIn("13312", str(cm.exception))
        self.assertEqual(cm.exception.log, "run2.log")

    def test_wrong_count_fails(self):
        with self.assertRaises(StageError) as cm:
            net.parse_udp(UDP_LOG, "linux", "series", 1, "x", 11)
        self.assertIn("asked for 11", str(cm.exception))

    def test_runs_must_repeat(self):
        a = net.parse_udp(UDP_LOG, "linux", "series", 1, "a", 10)
        b = net.parse_udp(UDP_LOG, "linux", "series", 2, "b", 10)
        net.check_udp_repeat(a, b)
        b.ticks[2952] = int(a.ticks[2952] * (1 + 2 * net.UDP_TOLERANCE))
        with self.assertRaises(StageError) as cm:
            net.check_udp_repeat(a, b)
        self.assertIn("2952", str(cm.exception))

    def test_markdown(self):
        base = net.parse_udp(UDP_LOG, "linux-base", "base", 1, "a", 10)
        ser = net.parse_udp(UDP_LOG, "linux", "series", 1, "b", 10)
        ser2 = net.parse_udp(UDP_LOG, "linux", "series", 2, "c", 10)
        ser.ticks = {k: v - 10 * 440 for k, v in ser.ticks.items()}
        ser2.ticks = dict(ser.ticks)
        md = "\n".join(net.udp_markdown([base, ser, ser2]))
        self.assertIn("base runs identical; series runs identical", md)
        # 45 fragments: a frag_list of 44, -440 per datagram = -10 per sk_buff
        self.assertIn("| 65507 | 45 | 44 | 6550700.0 | 6550260.0 | -440.0 | "
                      "-10.0 | 1.000 |", md)
        # one fragment: no list, no per-sk_buff figure
        self.assertIn("| 1472 | 1 | 0 | 147200.0 | 146760.0 | -440.0 |  |", md)

    def test_patch_runs_get_logs_of_their_own(self):
        self.assertEqual(net.run_tag("udp", 1000, "series", 2), "net-udp-1000-run2")
        self.assertEqual(net.run_tag("pktgen", 10, "patch 33", 1),
                         "net-pktgen-10-patch33-run1")
        self.assertNotEqual(net.run_tag("udp", 5, "patch 33", 1),
                            net.run_tag("udp", 5, "patch 35", 1))

    def test_labels_keep_patch_runs_apart(self):
        runs = [net.NetRun("linux-base", "slub-net", 1, "b", 100, 200, 1000.0,
                           100, 0, 0),
                net.NetRun("bisect", "slub-net", 1, "p", 100, 195, 1000.0,
                           100, 0, 0, "patch 33"),
                net.NetRun("linux", "slub-net", 1, "s", 100, 190, 1000.0,
                           100, 0, 0)]
        md = net.markdown(runs, [], "./bulk net --at 33")
        self.assertIn("| patch 33 | 1 | 100 | 195 | 1950.0 |", md)
        self.assertIn("| patch 33 | 1950.0 | 1950.0 | 1950.0 | 0.00% |", md)
        self.assertIn("series/base: 0.950 of the mean", md)


class NetBoot(unittest.TestCase):
    def test_nic_only_for_net_configs(self):
        self.assertTrue(boot.has_nic("slub-net"))
        self.assertTrue(boot.has_nic("slub-debug-net"))
        self.assertFalse(boot.has_nic("slub"))
        cmd = boot.qemu_cmd("k", "i", "exact", "c", nic=True)
        self.assertIn("virtio-net-pci,netdev=net0,mac=52:54:00:12:34:56", cmd)
        # the sink port: a hub with one port refuses frames (TX stalls)
        self.assertIn("hubport,id=sink,hubid=0", cmd)
        self.assertNotIn("-netdev", boot.qemu_cmd("k", "i", "exact", "c"))


class TestG(unittest.TestCase):
    def test_specs(self):
        self.assertIn("g", tables.TESTS)
        g = [s for s in tables.SPECS if s.test == "g"]
        self.assertEqual([(s.loop, s.bulk) for s in g],
                         [("head_loop", "head_list"), ("pfrag_loop", "pfrag_list")])


if __name__ == "__main__":
    unittest.main()
