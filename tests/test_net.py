"""Unit tests for harness/net.py and net_*.py (./bulk net) and the NIC boot.py gives
its kernels (stdlib unittest only)."""
import dataclasses
import json
import os
import unittest
from unittest import mock

import hermetic  # noqa: F401  (first: harness on sys.path, scratch build/)
import boot
import cli
import net
import net_parse
import net_report
import net_runs
import record
import tables
from common import RESULTS, StageError

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
        r = net_parse.parse(LOG, "linux", "slub-net", 1, "x.log")
        self.assertEqual((r.packets, r.usec, r.tx_packets), (100000, 204277, 100000))
        self.assertAlmostEqual(r.tsc_mhz, 999.993)
        # guest usec at the calibrated TSC rate = instructions
        self.assertAlmostEqual(r.instructions(), 204277 * 999.993 / 100000)
        net_parse.check(r, 100000)

    def test_refined_calibration_wins(self):
        log = LOG + "[    1.0] tsc: Refined TSC clocksource calibration: 1000.001 MHz\n"
        self.assertAlmostEqual(net_parse.parse(log, "linux", "slub-net", 1, "x").tsc_mhz,
                               1000.001)

    def test_no_result_names_the_log(self):
        log = LOG.replace("Result: OK: 204277(c204257+d20) usec, 100000 (64byte,0frags)",
                          "Result: OK: dstmac 52:54:00:12:34:57")
        with self.assertRaises(StageError) as cm:
            net_parse.parse(log, "linux", "slub-net", 2, "run2.log")
        self.assertIn("no pktgen result", str(cm.exception))
        self.assertIn("run2.log", str(cm.exception.log))

    def test_missing_counter(self):
        with self.assertRaises(StageError) as cm:
            net_parse.parse(LOG.replace("tx_errors: 0\n", ""), "linux", "slub-net", 1, "x")
        self.assertIn("tx_errors", str(cm.exception))

    def test_lost_packets_fail(self):
        for old, new in (("tx_dropped: 0", "tx_dropped: 3"),
                         ("tx_packets: 100000", "tx_packets: 99990")):
            r = net_parse.parse(LOG.replace(old, new), "linux", "slub-net", 1, "x")
            with self.assertRaises(StageError):
                net_parse.check(r, 100000)
        r = net_parse.parse(LOG, "linux", "slub-net", 1, "x")
        with self.assertRaises(StageError):
            net_parse.check(r, 200000)

    def test_append_escapes_spaces(self):
        a = net_runs.append(1234)
        self.assertNotIn(" 1234", a)
        self.assertIn("harness.write=/proc/net/pktgen/eth0:count%201234", a)
        self.assertIn("harness.write=/proc/net/pktgen/eth0:clone_skb%200", a)
        # pgctrl drops the last byte written
        self.assertIn("harness.write=/proc/net/pktgen/pgctrl:start%20", a)
        self.assertIn("harness.cat=/proc/net/pktgen/eth0", a)
        # the link goes up before pktgen starts
        self.assertLess(a.index("/sys/class/net/eth0/flags"), a.index("pgctrl"))

    def test_clone(self):
        self.assertIn("clone_skb%200", net_runs.append(10))
        self.assertIn("eth0:clone_skb%2010", net_runs.append(10, 10))

    def test_clone_markdown(self):
        runs = [net_parse.NetRun("linux-base", "slub-net", i, "b", 100, u, 1000.0,
                                 100, 0, 0) for i, u in ((1, 200), (2, 210))]
        clones = [net_parse.NetRun("linux-base", "slub-net", i, "c", 100, u, 1000.0,
                                   100, 0, 0) for i, u in ((1, 150), (2, 151))]
        md = "\n".join(net_report.clone_markdown(runs, clones))
        self.assertIn("| base | 2000.0 | 1500.0 1510.0 | 1500.0 | 500.0 | "
                      "25.0% |", md)
        self.assertEqual(net_report.clone_markdown(runs, []), [])

    def test_markdown(self):
        runs = [net_parse.NetRun("linux-base", "slub-net", i, "b", 100, u, 1000.0,
                                 100, 0, 0) for i, u in ((1, 200), (2, 210))]
        runs += [net_parse.NetRun("linux", "slub-net", 1, "s", 100, 190, 1000.0,
                                  100, 0, 0)]
        md = net_report.markdown(runs, [], "./bulk net")
        self.assertIn("| base | 2 | 100 | 210 | 2100.0 |", md)
        self.assertIn("| base | 2000.0 | 2050.0 | 2100.0 | 4.88% |", md)
        self.assertIn("series/base: 0.927 of the mean (-150.0 instructions "
                      "per packet), 0.950 of the minimum (-100.0)", md)


UDP_LOG = "".join("harness: udp size=%d count=10 tsc=%d\n" % (s, 1000 * s)
                  for s in net_parse.UDP_SIZES) + "harness: status=0\n"


class Udp(unittest.TestCase):
    def test_fragments_at_mtu_1500(self):
        # 1480 bytes of the UDP datagram (8-byte header included) per fragment
        self.assertEqual([net_parse.fragments(s) for s in net_parse.UDP_SIZES],
                         [1, 2, 9, 17, 18, 33, 45])
        self.assertEqual(net_parse.fragments(1473), 2)
        self.assertEqual(net_parse.fragments(65507), 45)

    def test_append(self):
        a = net_runs.udp_append(7, (100, 200))
        self.assertIn("harness.write=/sys/class/net/lo/mtu:1500", a)
        self.assertIn("harness.write=/sys/class/net/lo/flags:0x9", a)
        self.assertTrue(a.endswith("harness.udp=7:100,200"))

    def test_parse(self):
        r = net_parse.parse_udp(UDP_LOG, "linux", "series", 1, "x.log", 10)
        self.assertEqual(r.ticks[65507], 65507000)
        self.assertAlmostEqual(r.per_datagram(1472), 147200.0)

    def test_missing_size_names_the_log(self):
        log = UDP_LOG.replace("size=13312 ", "size=1 ")
        with self.assertRaises(StageError) as cm:
            net_parse.parse_udp(log, "linux", "series", 2, "run2.log", 10)
        self.assertIn("13312", str(cm.exception))
        self.assertEqual(cm.exception.log, "run2.log")

    def test_wrong_count_fails(self):
        with self.assertRaises(StageError) as cm:
            net_parse.parse_udp(UDP_LOG, "linux", "series", 1, "x", 11)
        self.assertIn("asked for 11", str(cm.exception))

    def test_runs_must_repeat(self):
        a = net_parse.parse_udp(UDP_LOG, "linux", "series", 1, "a", 10)
        b = net_parse.parse_udp(UDP_LOG, "linux", "series", 2, "b", 10)
        net_parse.check_udp_repeat(a, b)
        b.ticks[2952] = int(a.ticks[2952] * (1 + 2 * net_parse.UDP_TOLERANCE))
        with self.assertRaises(StageError) as cm:
            net_parse.check_udp_repeat(a, b)
        self.assertIn("2952", str(cm.exception))

    def test_markdown(self):
        base = net_parse.parse_udp(UDP_LOG, "linux-base", "base", 1, "a", 10)
        ser = net_parse.parse_udp(UDP_LOG, "linux", "series", 1, "b", 10)
        ser2 = net_parse.parse_udp(UDP_LOG, "linux", "series", 2, "c", 10)
        ser.ticks = {k: v - 10 * 440 for k, v in ser.ticks.items()}
        ser2.ticks = dict(ser.ticks)
        md = "\n".join(net_report.udp_markdown([base, ser, ser2]))
        self.assertIn("base runs identical; series runs identical", md)
        # 45 fragments: a frag_list of 44, -440 per datagram = -10 per sk_buff
        self.assertIn("| 65507 | 45 | 44 | 6550700.0 | 6550260.0 | -440.0 | "
                      "-10.0 | 1.000 |", md)
        # one fragment: no list, no per-sk_buff figure
        self.assertIn("| 1472 | 1 | 0 | 147200.0 | 146760.0 | -440.0 |  |", md)

    def test_patch_runs_get_logs_of_their_own(self):
        self.assertEqual(net_runs.run_tag("udp", 1000, "series", 2), "net-udp-1000-run2")
        self.assertEqual(net_runs.run_tag("pktgen", 10, "patch 33", 1),
                         "net-pktgen-10-patch-33-run1")
        self.assertEqual(net_runs.run_tag("pktgen", 10, "cache 128/16", 1),
                         "net-pktgen-10-cache-128-16-run1")
        self.assertNotEqual(net_runs.run_tag("udp", 5, "patch 33", 1),
                            net_runs.run_tag("udp", 5, "patch 35", 1))

    def test_labels_keep_patch_runs_apart(self):
        runs = [net_parse.NetRun("linux-base", "slub-net", 1, "b", 100, 200, 1000.0,
                                 100, 0, 0),
                net_parse.NetRun("bisect", "slub-net", 1, "p", 100, 195, 1000.0,
                                 100, 0, 0, "patch 33"),
                net_parse.NetRun("linux", "slub-net", 1, "s", 100, 190, 1000.0,
                                 100, 0, 0)]
        md = net_report.markdown(runs, [], "./bulk net --at 33")
        self.assertIn("| patch 33 | 1 | 100 | 195 | 1950.0 |", md)
        self.assertIn("| patch 33 | 1950.0 | 1950.0 | 1950.0 | 0.00% |", md)
        self.assertIn("series/base: 0.950 of the mean", md)


SKBUFF = """\
#define NAPI_SKB_CACHE_SIZE\t64
#define NAPI_SKB_CACHE_BULK\t16
#define NAPI_SKB_CACHE_HALF\t(NAPI_SKB_CACHE_SIZE / 2)
"""


class NapiCache(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(net.parse_napi_cache("32/16,128/32"), [(32, 16), (128, 32)])

    def test_bad_specs(self):
        for bad in ("128", "128/0", "33/16", "16/32", "64/16", "a/b", "0/0"):
            with self.assertRaises(StageError, msg=bad):
                net.parse_napi_cache(bad)

    def test_source(self):
        out = net_runs.napi_source(SKBUFF, 128, 32)
        self.assertIn("#define NAPI_SKB_CACHE_SIZE\t128\n", out)
        self.assertIn("#define NAPI_SKB_CACHE_BULK\t32\n", out)
        self.assertIn("(NAPI_SKB_CACHE_SIZE / 2)", out)

    def test_source_that_moved_is_refused(self):
        for text in (SKBUFF.replace("SIZE\t64", "SIZE\t(64)"),
                     SKBUFF + "#define NAPI_SKB_CACHE_BULK\t8\n",
                     SKBUFF.replace("(NAPI_SKB_CACHE_SIZE / 2)", "32")):
            with self.assertRaises(StageError):
                net_runs.napi_source(text, 128, 16)

    def test_markdown(self):
        runs = [net_parse.NetRun("linux", "slub-net", i, "s", 100, u, 1000.0, 100,
                                 0, 0, "series") for i, u in ((1, 200), (2, 204))]
        runs += [net_parse.NetRun("bisect", "slub-net", 1, "v", 100, 199, 1000.0,
                                  100, 0, 0, "cache 128/16")]
        md = net_report.napi_markdown(runs, "./bulk net --napi-cache 128/16")
        self.assertIn("| series | 2000.0 2040.0 | 2000.0 | 2020.0 | 2040.0 | "
                      "+0.0 | +0.0 |", md)
        self.assertIn("| cache 128/16 | 1990.0 | 1990.0 | 1990.0 | 1990.0 | "
                      "-10.0 | -30.0 |", md)


PROF = "harness: cat %s:" % net_parse.PROFILE
PROFILE_LOG = LOG.replace("harness: status=0\n", "") + "\n".join([
    PROF + "   Function                               Hit    Time            Avg             s^2",
    PROF + "   --------                               ---    ----            ---             ---",
    PROF + "   kmem_cache_alloc_node                100000    10000.000 us     0.100 us        0.001 us",
    PROF + "   kfree                                100000    9000.000 us     0.090 us        0.001 us",
    PROF + "   skb_put                              300000    15000.000 us     0.050 us        0.000 us",
    PROF + "   kmem_cache_free_bulk                   3125    1000.000 us     0.320 us        0.001 us",
    "harness: status=0", ""])


class SlabShare(unittest.TestCase):
    def test_parse_and_overhead(self):
        p = net_parse.parse_profile(PROFILE_LOG, "linux", "series", "p.log")
        self.assertEqual(p.funcs["kfree"], (100000, 9000.0))
        self.assertEqual(p.packets, 100000)
        self.assertAlmostEqual(p.calls("kmem_cache_free_bulk"), 0.03125)
        self.assertEqual(p.calls("kmem_cache_alloc_bulk"), 0)
        # skb_put: 50 instructions per call (us x MHz), less its body
        p.body = 12
        c = 15000.0 * 999.993 / 300000 - 12
        self.assertAlmostEqual(p.overhead(), c)
        # the calibration function itself is not slab time
        slab = ((10000 + 9000 + 1000) * 999.993 - (200000 + 3125) * c) / 100000
        self.assertAlmostEqual(p.slab(), slab)

    def test_durations_as_the_kernel_prints_them(self):
        # trace_print_graph_duration(): fewer decimals as the time grows
        log = PROFILE_LOG.replace("10000.000 us", "12345.67 us").replace(
            "9000.000 us", "1234567 us")
        p = net_parse.parse_profile(log, "linux", "series", "p.log")
        self.assertEqual(p.funcs["kmem_cache_alloc_node"], (100000, 12345.67))
        self.assertEqual(p.funcs["kfree"], (100000, 1234567.0))

    def test_profiler_stops_before_the_results_are_read(self):
        a = net_runs.append(10, profile=True)
        self.assertIn("options/graph-time:0", a)
        self.assertLess(a.index("pgctrl"), a.index("function_profile_enabled:0"))
        self.assertLess(a.index("function_profile_enabled:0"),
                        a.index("harness.cat="))

    def test_no_calibration_line(self):
        with self.assertRaises(StageError) as cm:
            net_parse.parse_profile(PROFILE_LOG.replace("skb_put ", "skb_push "),
                                    "linux", "series", "p.log")
        self.assertIn("skb_put", str(cm.exception))
        self.assertEqual(cm.exception.log, "p.log")

    def test_append_profiles_before_pktgen_starts(self):
        a = net_runs.append(10, profile=True)
        self.assertLess(a.index("function_profile_enabled:1"), a.index("pgctrl"))
        self.assertLess(a.index("set_ftrace_filter"), a.index("function_profile_enabled"))
        self.assertIn("harness.cat=" + net_parse.PROFILE, a)
        self.assertNotIn("set_ftrace_filter", net_runs.append(10))

    def test_markdown(self):
        p = net_parse.parse_profile(PROFILE_LOG, "linux", "series", "p.log")
        runs = [net_parse.NetRun("linux", "slub-net", 1, "s", 100000, 200000, 1000.0,
                                 100000, 0, 0)]
        md = "\n".join(net_report.profile_markdown(runs, [p]))
        self.assertIn("| `kmem_cache_free_bulk` | 0.031 |", md)
        self.assertNotIn("kmem_cache_alloc_bulk", md)
        self.assertIn("| slab share | %.1f%% |" % (100 * p.slab() / 2000.0), md)


SKB_PUT = """
ffffffff81233210 <skb_put>:
ffffffff81233210:\tcall   ffffffff81034e20 <__fentry__>
ffffffff81233215:\tmov    0xac(%rdi),%eax
ffffffff8123321b:\tmov    0x6c(%rdi),%ecx
ffffffff81233228:\ttest   %ecx,%ecx
ffffffff8123322a:\tjne    ffffffff81233244 <skb_put+0x34>
ffffffff8123322c:\tadd    %esi,%edx
ffffffff8123323d:\tjb     ffffffff813361f1 <skb_put.cold>
ffffffff81233243:\tret
ffffffff81233244:\tud2
"""


class Calibration(unittest.TestCase):
    def test_straight_path(self):
        # five instructions and the ret after the fentry call
        self.assertEqual(net_parse.straight_body(SKB_PUT, "skb_put"), 7)

    def test_older_mnemonics(self):
        old = SKB_PUT.replace("call ", "callq").replace("\tret", "\tretq")
        self.assertEqual(net_parse.straight_body(old, "skb_put"), 7)
        with self.assertRaises(StageError):
            net_parse.straight_body(old.replace("jb     ", "jmpq   "), "skb_put")

    def test_paths_that_are_not_straight(self):
        for old, new in (
                ("jne    ffffffff81233244", "jne    ffffffff8123322c"),
                ("jb     ffffffff813361f1", "jmp    ffffffff813361f1"),
                ("call   ffffffff81034e20 <__fentry__>", "nop"),
                ("ret", "int3")):
            with self.assertRaises(StageError, msg=new):
                net_parse.straight_body(SKB_PUT.replace(old, new), "skb_put")


class Options(unittest.TestCase):
    """net.validate(): every option checked before anything runs."""
    PATCHES = ["%04d-x.patch" % n for n in range(1, 44)]

    def check(self, *argv):
        args = cli.parser().parse_args(["net"] + list(argv))
        with mock.patch.object(net.gitrepo, "patch_files",
                               return_value=self.PATCHES):
            return net.validate(args)

    def error(self, *argv):
        with self.assertRaises(StageError, msg=" ".join(argv)) as cm:
            self.check(*argv)
        return str(cm.exception)

    def test_defaults(self):
        self.assertEqual(self.check(), [])
        self.assertEqual(self.check("--napi-cache", "128/16"), [(128, 16)])
        self.assertEqual(self.check("--at", "1", "--at", "42"), [])
        self.assertEqual(self.check("--udp-count", "0", "--clone-runs", "0"),
                         [])
        self.assertEqual(self.check("--report"), [])

    def test_bad_options_fail_before_anything_runs(self):
        for argv in (["--runs", "0"], ["--udp-count", "-1"],
                     ["--clone-runs", "-1"], ["--at", "33", "--at", "33"],
                     ["--napi-cache", "32/16,32/16"],
                     ["--napi-cache", "128/16", "--at", "33"],
                     ["--napi-cache", "128/16", "--udp-count", "5"],
                     ["--napi-cache", "128/16", "--no-profile"]):
            self.error(*argv)

    def test_errors_say_what_is_allowed(self):
        for argv, want in (
                (["--count", "0"], "--count 0: packets per run, 1 or more"),
                (["--runs", "-2"], "--runs -2: boots per kernel, 1 or more"),
                (["--debug-count", "0"], "--debug-count 0: packets of the "
                 "debug run, 1 or more"),
                (["--clone-runs", "-1"], "0 skips them, 0 or more"),
                (["--udp-count", "-1"], "0 skips the UDP runs, 0 or more"),
                (["--at", "0"], "--at 0: the series has patches 1 to 43"),
                (["--at", "43"], "43 is the series itself"),
                (["--at", "44"], "--at 44"),
                (["--at", "3", "--at", "3"], "a patch given twice"),
                (["--napi-cache", "128"], "'128' is not SIZE/BULK"),
                (["--napi-cache", "33/16"], "SIZE must be even"),
                (["--napi-cache", "64/16"], "6.1's own"),
                (["--napi-cache", "128/16", "--no-debug"],
                 "--no-debug does not apply")):
            self.assertIn(want, self.error(*argv), argv)

    def test_debug_udp_count_is_refused(self):
        # net.json tells the debug kernel's UDP run apart by its count
        msg = self.error("--udp-count", str(net_parse.DEBUG_UDP_COUNT))
        self.assertIn("the debug run's own count", msg)

    def test_main_checks_before_setup_or_trees(self):
        args = cli.parser().parse_args(["net", "--runs", "0"])
        with mock.patch.object(net.packages, "missing") as missing, \
                mock.patch.object(net.tree, "create") as create:
            with self.assertRaises(StageError):
                net.main(args)
        missing.assert_not_called()
        create.assert_not_called()

    def test_missing_packages_say_run_setup(self):
        args = cli.parser().parse_args(["net"])
        with mock.patch.object(net.gitrepo, "patch_files",
                               return_value=self.PATCHES), \
                mock.patch.object(net.packages, "missing",
                                  return_value=["qemu-system-x86"]), \
                mock.patch.object(net.packages, "setup") as setup, \
                mock.patch.object(net.tree, "create") as create:
            with self.assertRaises(StageError) as cm:
                net.main(args)
        self.assertIn("qemu-system-x86", str(cm.exception))
        self.assertIn("run ./bulk setup", str(cm.exception))
        setup.assert_not_called()
        create.assert_not_called()


def record_json(stamp=True, **extra):
    """results/net/net.json as a run writes it (with its stamp; extra
    keys in the stamp)."""
    runs = [net_parse.NetRun("linux-base", "slub-net", 1, "b", 100, 200,
                             1000.0, 100, 0, 0, "base"),
            net_parse.NetRun("linux", "slub-debug-net", 1, "d", 100, 900,
                             1000.0, 100, 0, 0, "series")]
    udp = net_parse.parse_udp(UDP_LOG, "linux-base", "base", 1, "u", 10)
    prof = net_parse.parse_profile(PROFILE_LOG, "linux-base", "base", "p")
    prof.body = 12
    d = {"command": "./bulk net",
         "runs": [dataclasses.asdict(r) for r in runs],
         "udp": [dataclasses.asdict(udp)],
         "profiles": [dataclasses.asdict(prof)]}
    if stamp:
        d["stamp"] = dict(STAMP.to_json(), **extra)
    os.makedirs(os.path.dirname(net_report.RECORD_JSON), exist_ok=True)
    with open(net_report.RECORD_JSON, "w") as f:
        json.dump(d, f)


STAMP = record.Stamp("0123456789ab", "6.1.1-1", "6.1.1-1",
                     "2025-01-01 00:00 UTC", "./bulk net --record")


class Rerender(unittest.TestCase):
    def read(self, folder, name="net.md"):
        with open(os.path.join(folder, "net", name)) as f:
            return f.read()

    def test_from_json(self):
        record_json()
        net_report.rerender(False)
        md = self.read(record.SCRATCH)
        self.assertIn("| base | 1 | 100 | 200 | 2000.0 |", md)
        self.assertIn("Debug run (`slub-debug-net`", md)
        self.assertIn("| 65507 | 45 | 44 | 6550700.0 |", md)
        self.assertIn("| `kfree` | 1.000 |", md)
        # the stamp of the run that wrote the JSON, not today's
        self.assertTrue(md.startswith(STAMP.markdown()), md[:200])
        self.assertTrue(os.path.exists(os.path.join(record.SCRATCH, "net",
                                                    "net-udp.png")))

    def test_record_writes_the_committed_folder(self):
        record_json()
        net_report.rerender(True)
        self.assertIn("| base | 1 | 100 | 200 | 2000.0 |",
                      self.read(RESULTS))

    def test_a_backfilled_stamp_keeps_its_note(self):
        note = "committed at this commit; measured just before it"
        record_json(note=note)
        net_report.rerender(False)
        md = self.read(record.SCRATCH)
        self.assertTrue(md.startswith(dataclasses.replace(
            STAMP, note=note).markdown()), md[:200])
        self.assertIn("(measured just before)", md)

    def test_json_from_before_stamps(self):
        record_json(stamp=False)
        net_report.rerender(False)
        md = self.read(record.SCRATCH)
        self.assertTrue(md.startswith("# pktgen through virtio-net"), md[:80])

    def test_write_then_read_back(self):
        m = net_parse.Measured(
            runs=[net_parse.NetRun("linux-base", "slub-net", 1, "b", 100, 200,
                                   1000.0, 100, 0, 0, "base")],
            debug=[net_parse.NetRun("linux", "slub-debug-net", 1, "d", 100,
                                    900, 1000.0, 100, 0, 0, "series")],
            udp=[net_parse.parse_udp(UDP_LOG, "linux-base", "base", 1, "u",
                                     10)])
        md, path = net_report.write(m, "./bulk net", False)
        self.assertEqual(path, os.path.join(record.SCRATCH, "net", "net.md"))
        self.assertIn("<!-- stamp -->", self.read(record.SCRATCH))
        with open(os.path.join(record.SCRATCH, "net", "net.json")) as f:
            d = json.load(f)
        self.assertIn("stamp", d)
        self.assertEqual(net_report.from_json(d), m)
        self.assertEqual(net_report.run_markdown(net_report.from_json(d),
                                                 d["command"]), md)

    def test_udp_plot(self):
        os.makedirs(RESULTS, exist_ok=True)
        path = os.path.join(RESULTS, "udp-test.png")
        runs = [net_parse.parse_udp(UDP_LOG, t, l, 1, "u", 10)
                for t, l in (("linux-base", "base"), ("linux", "series"))]
        net_report.udp_plot(runs, path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertFalse(os.path.exists(path[:-4] + ".dat"))

    def test_no_json(self):
        if os.path.exists(net_report.RECORD_JSON):
            os.remove(net_report.RECORD_JSON)
        with self.assertRaises(StageError):
            net_report.rerender(False)


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
