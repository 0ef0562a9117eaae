"""Unit tests for qemu-cost.c's slab calls (slab=): the tracker of
harness/plugin/slabtrack.h, driven by tests/slabtrack_test.c (also built
broken on purpose) through made-up scripts of stack accesses and blocks,
with the exact counters and the inside or outside state of every block
checked."""
import os
import shutil
import subprocess
import unittest

import hermetic
import test_costs

DRIVER = os.path.join(hermetic.HERE, "slabtrack_test.c")
SHADOW_MAX = 1024

# A task's stack, the 16 KiB block at ffffc90000010000 (vmalloc'ed): the
# slab call's return slot S, its caller's O above it.
S = 0xffffc90000013e58
O = S + 0x20
# The per-CPU IRQ stack, another 16 KiB block, above the task's.
IRQ = 0xffffc9000002bff0


def build(define: str = "") -> str:
    return test_costs.build(define, DRIVER)


def script(*events: object) -> list[str]:
    """Events, slots (ints) written in hex."""
    return ["%x" % e if isinstance(e, int) else str(e) for e in events]


def run(binary: str, events: list[str]) -> dict[str, str]:
    p = subprocess.run([binary] + events, check=True, capture_output=True,
                       text=True)
    return dict(line.split() for line in p.stdout.splitlines())


def want(blocks: str, slot: int = S, shadow: int = 0, top: int = 0,
         inside: int = 0, **counters: int) -> dict[str, str]:
    """The driver's whole output: the counters not given are 0."""
    out = {"blocks": blocks, "inside": str(inside), "slot": "%x" % slot,
           "shadow": str(shadow), "top": "%x" % top}
    for c in ("calls", "after_ret", "lost", "past", "resets"):
        out[c] = str(counters.pop(c, 0))
    assert not counters, counters
    return out


def deep(n: int, below: int) -> list[object]:
    """@n nested calls, each slot 8 bytes below the one before, from 8
    below @below on."""
    out: list[object] = []
    for i in range(1, n + 1):
        out += ["call", below - 8 * i]
    return out


# Scripts and the output they must give.  'k': a kernel block, 'e': one
# at a slab entry point, 'u': one of user space; blocks: I where the
# block runs inside a slab call.
SCRIPTS = {
    # A call from O's frame stores S; inside, the entry point's own calls
    # and rets lie below S; the ret from S ends it, its block counted.
    "plain call": (
        script("k", "call", O, "k", "call", S, "e", "k", "call", S - 0x30,
               "k", "ret", S - 0x30, "k", "call", S - 0x48, "ret", S - 0x48,
               "k", "ret", S, "k"),
        want("..IIIII.", shadow=1, top=O, calls=1)),
    # The function called at S calls a callee (S - 16), which returns,
    # then jumps to the entry point: the slot is S, the innermost live
    # one, not the callee's gone S - 16.
    "tail call": (
        script("k", "call", O, "k", "call", S, "k", "call", S - 16, "k",
               "ret", S - 16, "e", "k", "call", S - 0x40, "ret", S - 0x40,
               "k", "ret", S, "k"),
        want("....III.", shadow=1, top=O, calls=1, after_ret=1)),
    # An interrupt inside the slab call's callee (S - 0x40): its frame
    # (RIP at S - 0x100) and the entry code's call below it on the task's
    # stack, the handler's frames on the IRQ stack (a block above the
    # task's), with an entry point reached inside (kfree() from the
    # handler: part of the same call); the iretq back does not end it.
    "interrupt inside": (
        script("k", "call", O, "k", "call", S, "e", "k", "call", S - 0x40,
               "k", "call", S - 0x108, "k", "ret", S - 0x108, "k",
               "call", IRQ, "k", "call", IRQ - 0x60, "e", "ret", IRQ - 0x60,
               "k", "ret", IRQ, "k", "iret", S - 0x100, "k",
               "ret", S - 0x40, "k", "ret", S, "k"),
        want("..IIIIIIIIIII.", shadow=1, top=O, calls=1)),
    # An interrupt right after the call's store, before the entry point's
    # first block: the iretq returns into it, reached without a call.
    "iretq into the entry point": (
        script("k", "call", O, "k", "call", S, "k", "call", IRQ, "k",
               "ret", IRQ, "k", "iret", S - 0x30, "e", "k", "ret", S, "k"),
        want(".....II.", shadow=1, top=O, calls=1, after_ret=1)),
    # User space while inside: the call is over, counted as a reset.
    "user space ends it": (
        script("k", "call", O, "k", "call", S, "e", "k", "u", "k"),
        want("..II..", shadow=2, top=S, calls=1, resets=1)),
    # A ret from O, above the slot on its stack: S's frame is gone.
    "ret from above the slot": (
        script("k", "call", O, "k", "call", S, "e", "k", "ret", O, "k"),
        want("..II.", calls=1, past=1)),
    # Task B (stack at ffff888000104000) was switched out inside
    # schedule(); task A (the block below) calls the entry point, sleeps
    # in it and B runs: B's rets, above A's slot and less than 16 KiB
    # from it, are on another stack and do not end A's call; B's kernel
    # code counts inside it until A's ret from its slot.
    "neighbouring stacks": (
        script("k", "call", 0xffff888000104180, "k",
               "call", 0xffff888000104100, "k",
               "k", "call", 0xffff888000103f40, "k",
               "call", 0xffff888000103f00, "e", "k",
               "call", 0xffff888000103eb0, "k",
               "ret", 0xffff888000104100, "k",
               "call", 0xffff888000104100, "k",
               "ret", 0xffff888000103eb0, "k",
               "ret", 0xffff888000103f00, "k"),
        want(".....IIIIII.", slot=0xffff888000103f00, shadow=3,
             top=0xffff888000103f40, calls=1)),
    # An entry point with no live slot known on the last stack used: lost,
    # not started; the first one before any call, the second after the
    # only call returned.  The next call is followed.
    "no live slot": (
        script("e", "k", "call", S, "k", "ret", S, "e", "k", "call", S,
               "e", "ret", S, "k"),
        want(".....I.", calls=1, lost=2)),
    # Plain stores (a mov) are not calls.
    "a store is not a call": (
        script("k", "mov", S, "e", "k"),
        want("...", slot=0, lost=1)),
    # A call through memory (call *0x8(%rax), a function pointer in a
    # heap object) loads its target: only its store is a return slot.
    "call through memory": (
        script("k", "call", O, "k", "icall", 0xffff888000200048, S, "e",
               "k", "ret", S, "k"),
        want("..II.", shadow=1, top=O, calls=1)),
}

# Overflow: O, S and 1100 nested calls below S: the 1025th push finds
# SHADOW_MAX slots and drops the oldest half (O, S, D1 .. D510), leaving
# D511 .. D1022, then D1023 .. D1100 come: 590.
NESTED = 1100
OVERFLOW = script("k", "call", O, "k", "call", S, "e", "k",
                  *deep(NESTED, S), "k")
OVERFLOW_KEPT = SHADOW_MAX // 2 + NESTED + 2 - SHADOW_MAX
# Then the rets back to D511 (its frame and all below it gone: nothing of
# the stack left), and the slab call still ends at the ret from S, though
# S is no longer kept; an entry point reached by a jmp from O's frame,
# dropped, is lost; a new call is followed.
OVERFLOW_END = OVERFLOW + script("ret", S - 8 * 511, "k", "ret", S, "k",
                                 "e", "k", "call", S, "e", "ret", S, "k")


@unittest.skipIf(shutil.which("gcc") is None, "gcc not installed")
class SlabCalls(unittest.TestCase):
    def test_scripts(self):
        binary = build()
        for name, (events, expected) in SCRIPTS.items():
            with self.subTest(name):
                self.assertEqual(run(binary, events), expected)

    def test_shadow_overflow_drops_the_oldest_half(self):
        binary = build()
        self.assertEqual(OVERFLOW_KEPT, 590)
        self.assertEqual(run(binary, OVERFLOW), want(
            "..III", shadow=OVERFLOW_KEPT, top=S - 8 * NESTED, inside=1,
            calls=1))
        self.assertEqual(run(binary, OVERFLOW_END), want(
            "..IIII...I.", calls=2, lost=1))

    def test_no_overflow_below_shadow_max(self):
        """O, S and SHADOW_MAX - 2 calls: all kept, the ret from D1 then
        leaves O and S."""
        events = script("k", "call", O, "k", "call", S, "e", "k",
                        *deep(SHADOW_MAX - 2, S), "k")
        self.assertEqual(run(build(), events), want(
            "..III", shadow=SHADOW_MAX, top=S - 8 * (SHADOW_MAX - 2),
            inside=1, calls=1))
        self.assertEqual(run(build(), events + script("ret", S - 8)), want(
            "..III", shadow=2, top=S, inside=1, calls=1))

    def test_checks_catch_a_tracker_taking_the_last_slot(self):
        """Taking the callee's gone slot for the tail-called entry
        point's, the ret from S ends the call from above its slot."""
        events, expected = SCRIPTS["tail call"]
        got = run(build("SLABTRACK_BREAK_LAST_SLOT"), events)
        self.assertNotEqual(got, expected)
        self.assertEqual((got["slot"], got["past"]), ("%x" % (S - 16), "1"))

    def test_checks_catch_a_tracker_telling_stacks_by_distance(self):
        """Slots less than 16 KiB apart taken for one stack's: task B's
        ret ends task A's call."""
        events, expected = SCRIPTS["neighbouring stacks"]
        got = run(build("SLABTRACK_BREAK_DISTANCE"), events)
        self.assertNotEqual(got, expected)
        self.assertEqual(got["past"], "1")


if __name__ == "__main__":
    unittest.main()
