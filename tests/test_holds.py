"""Unit tests for the IRQ-off and spinlock-hold measures: the state
machine of harness/plugin/holds.h (driven by tests/holds_test.c, also
built broken on purpose), and harness/holds.py's symbol ranges and
summaries."""
import os
import shutil
import subprocess
import unittest

import hermetic
import holds
import test_costs

DRIVER = os.path.join(hermetic.HERE, "holds_test.c")


def build(define: str = "") -> str:
    return test_costs.build(define, DRIVER)


def run(binary: str, script: str) -> tuple[dict[str, int], set[str]]:
    """The notes and the hold lines of one script of events."""
    p = subprocess.run([binary] + script.split(), check=True,
                       capture_output=True, text=True)
    notes = {}
    lines = set()
    for line in p.stdout.splitlines():
        if line.startswith("# holds_"):
            key, value = line[8:].split()
            notes[key] = int(value)
        else:
            lines.add(line)
    return notes, lines


# Scripts (one instruction of time per event, from 0) and the hold lines
# they must give: 'hold KIND REGION SITE LEN COUNT'.
SCRIPTS = {
    # cli at 2, lock taken by the acquire function entered from the block
    # at 2000 (call site 2004) at 4, sti at 6, unlock at 8.
    "window and hold":
        ("b 2000 r 1 cli 2010 b 1000 lock 5000 b 2020 sti 2030 b 2040 "
         "st1 5000", {"hold irq 1 2010 4 1", "hold lock 1 2004 4 1"}),
    # An interrupt through a vector stub that jumps to the entry point:
    # IF was cleared by the CPU, so the handler's cli opens nothing, and
    # the stub's jump is not a second entry (one iret restores IF on).
    "interrupt: no window": (
        "b 2000 b 3100 b 3000 cli 3010 iret b 2000 cli 2010 sti 2020",
        {"hold irq 0 2010 1 1"}),
    # An exception inside a window: its iret restores IF off, and the
    # window goes on to the sti.
    "exception inside a window": (
        "b 2000 cli 2010 b 3000 iret b 2000 sti 2020",
        {"hold irq 0 2010 4 1"}),
    # Interrupt exit: the handler turns IRQs on (softirq), off again at
    # 4, and iret at 6 restores them: that window ends at the iret.
    "window ended by iret": (
        "b 2000 b 3000 sti 3010 cli 3020 b 3030 iret b 2000",
        {"hold irq 0 3020 2 1"}),
    # A syscall: entered with IF off, IRQs on in the handler, off again
    # for the exit at 4, back to user space by sysretq at 5.
    "syscall exit": (
        "b 200000 b 3000 sti 3020 cli 3030 sysret b 200000",
        {"hold irq 0 3030 1 1"}),
    # pushf; cli; popf restores IF on: the window ends at the popf (1
    # instruction after the cli).  A
    # popf with no pushf before it is noted and changes nothing.
    "pushf, cli, popf": (
        "b 2000 pushf cli 2010 popf cli 2020 popf sti 2030",
        {"hold irq 0 2010 1 1", "hold irq 0 2020 2 1"}),
    # A trylock that finds 5000 taken reads it and tries no cmpxchg: the
    # hold taken at 2 (call site 2004) goes on to the one-byte store at
    # 8; an 8-byte store to the word ends nothing.
    "failed trylock takes nothing": (
        "b 2000 b 1000 lock 5000 b 2000 b 2100 b 1000 acq 5000 b 2200 "
        "st8 5000 st1 5000",
        {"hold lock 0 2004 7 1"}),
    # A pending interrupt taken as sysretq turns IRQs on enters through a
    # vector stub right after the sysretq's block: its handler's cli
    # opens no window.
    "interrupt right after sysretq": (
        "b 200000 b 3000 b 3040 sysret b 3100 b 3000 cli 3010 iret "
        "b 200000", set()),
    # sync_core()'s iret_to_self() (an iretq outside the entry code)
    # returns to the flags it pushed: the window goes on to the sti.
    "iretq outside the entry code": (
        "b 2000 pushf cli 2010 iretat 2020 sti 2030",
        {"hold irq 0 2010 2 1"}),
    # An interrupt while spin_lock() spins with IRQs on: the acquire
    # function's call site (2004) comes back with the iretq, and the hold
    # starts at the cmpxchg that takes the lock (7).
    "interrupt inside an acquire function": (
        "b 2000 b 1000 acq 5000 b 3000 b 3040 iret b 1010 lock 5000 "
        "b 2010 st1 5000",
        {"hold lock 0 2004 2 1"}),
}


@unittest.skipIf(shutil.which("gcc") is None, "gcc not installed")
class StateMachine(unittest.TestCase):
    def test_scripts(self):
        binary = build()
        for name, (script, want) in SCRIPTS.items():
            with self.subTest(name):
                notes, got = run(binary, script)
                self.assertEqual(got, want)

    def test_notes(self):
        notes, _ = run(build(), "b 2000 popf cli 2010 b 200000")
        self.assertEqual(notes["popf_unpaired"], 1)
        self.assertEqual(notes["user_in_window"], 1)

    def test_checks_catch_a_machine_that_misses_entries(self):
        """Without entry points, the handler's cli opens a window that
        the interrupt's iret ends: the script's check fails."""
        script, want = SCRIPTS["interrupt: no window"]
        _, got = run(build("HOLDS_BREAK_ENTRY"), script)
        self.assertNotEqual(got, want)


class Symbols(unittest.TestCase):
    NAMES = [(0x1000, "_raw_spin_lock_irqsave"), (0x1040, "_raw_spin_lock"),
             (0x1080, "queued_spin_lock_slowpath"), (0x1200, "foo"),
             (0x3000, "__entry_text_start"), (0x3010, "entry_SYSCALL_64"),
             (0x3100, "irq_entries_start"),
             (0x3200, "spurious_entries_start"), (0x3280, "asm_exc_page_fault"),
             (0x3300, "__entry_text_end"), (0x3400, "_raw_spin_unlock")]

    def test_ranges(self):
        text = holds.syms_text([a for a, _ in self.NAMES],
                               [n for _, n in self.NAMES])
        self.assertEqual(text.splitlines(), [
            "acquire 1000 1040", "acquire 1040 1080", "acquire 1080 1200",
            "entry 3010 3011", "entry 3100 3200", "entry 3200 3280",
            "entry 3280 3281", "entrytext 3000 3300"])

    def test_kernel_without_spinlock_functions_is_refused(self):
        with self.assertRaises(ValueError):
            holds.syms_text([0x1000], ["foo"])


class Summaries(unittest.TestCase):
    def test_parse_line(self):
        self.assertEqual(holds.parse_line("hold lock 3 ffffffff81001000 40 7"),
                         holds.Hold("lock", 3, 0xffffffff81001000, 40, 7))
        for bad in ("hold spin 3 10 40 7", "hold irq 3 10 40", "irq 1 2 3"):
            with self.assertRaises(ValueError):
                holds.parse_line(bad)

    def test_longest_and_p99(self):
        hs = [holds.Hold("irq", 1, 0x10, 5, 98),
              holds.Hold("irq", 1, 0x20, 9, 1),
              holds.Hold("irq", 1, 0x30, 500, 1)]
        s = holds.summarize(hs, lambda site: "f%x" % site)
        self.assertEqual((s.count, s.longest, s.p99, s.where),
                         (100, 500, 9, "f30"))
        self.assertEqual(holds.summarize([], str), holds.Summary())

    def test_select(self):
        hs = [holds.Hold("irq", 1, 0x10, 5, 1), holds.Hold("lock", 1, 0x10, 5, 1),
              holds.Hold("irq", 2, 0x20, 5, 1)]
        self.assertEqual(holds.select(hs, "irq", {1}), hs[:1])
        self.assertEqual(holds.select(hs, "irq", None, lambda s: s == 0x20),
                         hs[2:])


if __name__ == "__main__":
    unittest.main()
