"""Unit tests for harness/stack.py (./bulk stack): the objdump and
checkstack.pl parsers on real output (tests/data/stack/: functions cut
whole from objdump -d of objects ./bulk stack built, each file with
checkstack.pl's output for it beside it), the source-function diff, and
the rows and flags of the record."""
import os
import unittest

import hermetic
import stack

DATA = os.path.join(hermetic.HERE, "data", "stack")


def data(name: str) -> str:
    with open(os.path.join(DATA, name)) as f:
        return f.read()


class Checkstack(unittest.TestCase):
    def test_parses_its_lines(self):
        out = stack.parse_checkstack(
            "0x0000000000008940 bulk_free_grouped [slub.o]:\t\t1680\n"
            "0x00000000000024d0 __memcg_slab_post_alloc_hook [slub.o]:32\n"
            "0x0000000000001380 slab_pad_check.part.0 [slub.o]:\t64\n"
            "wrong or unknown architecture \"foo\"\n")
        self.assertEqual(out, {"bulk_free_grouped": 1680,
                               "__memcg_slab_post_alloc_hook": 32,
                               "slab_pad_check.part.0": 64})

    def test_x86_64_checkstack_sums_the_epilogues(self):
        # What the record's checkstack.pl column shows, and why it is not
        # the frame: kfree_skb_list_reason's 'sub $0x8,%rsp' and its four
        # 'add $0x8,%rsp' give 40.
        cs = stack.parse_checkstack(data("x86_64.checkstack"))
        self.assertEqual(cs["kfree_skb_list_reason"], 40)
        self.assertEqual(cs["min_partial_store"], 24)


class X86(unittest.TestCase):
    def setUp(self):
        self.frames = stack.parse_objdump(data("x86_64.dis"), "x86_64")
        self.cs = stack.parse_checkstack(data("x86_64.checkstack"))

    def test_the_prologue_sub_not_the_sum_of_every_adjustment(self):
        f = self.frames["kfree_skb_list_reason"]
        self.assertEqual((f.sub, f.saved, f.frame), (8, 0, 8))
        # Summing the epilogues, as checkstack.pl does, would say 40.
        self.assertNotEqual(f.sub, self.cs["kfree_skb_list_reason"])

    def test_pushes_are_the_saved_registers(self):
        f = self.frames["min_partial_store"]
        self.assertEqual(f.regs, ("%rbp", "%rbx"))
        # sub $0x8 (twice 'add $0x8' on the way out) + two pushes
        self.assertEqual((f.sub, f.saved, f.frame), (8, 2, 24))

    def test_a_128_byte_frame_is_an_add_of_minus_128(self):
        # 'add $0xffffffffffffff80,%rsp' in, 'sub $0xffffffffffffff80,%rsp'
        # out: checkstack.pl's sum comes out negative and it lists nothing.
        f = self.frames["set_track_prepare"]
        self.assertEqual((f.sub, f.saved, f.frame), (128, 2, 144))
        self.assertNotIn("set_track_prepare", self.cs)
        self.assertEqual(stack.x86_decrement("add", "$0xffffff80,%esp", 4),
                         128)
        self.assertEqual(stack.x86_decrement("sub", "$0xffffff80,%esp", 4), 0)

    def test_frame_pointer(self):
        frames = stack.parse_objdump(data("x86_64-fp.dis"), "x86_64")
        f = frames["min_partial_store"]
        # push %rbp; mov %rsp,%rbp; push %r12; push %rbx; sub $0x8,%rsp
        self.assertEqual(f.regs, ("%rbp", "%r12", "%rbx"))
        self.assertEqual((f.sub, f.saved, f.frame), (8, 3, 32))
        cs = stack.parse_checkstack(data("x86_64-fp.checkstack"))
        self.assertEqual(cs["min_partial_store"], 24)

    def test_i386_argument_pops_are_not_the_frame(self):
        frames = stack.parse_objdump(data("i386.dis"), "i386")
        cs = stack.parse_checkstack(data("i386.checkstack"))
        # kmem_cache_destroy: test/je before the prologue (shrink-wrapped),
        # sub $0x10 and two 'add $0x10,%esp' on the way out.
        # kmem_cache_init: no sub; 'add $0x18' and 'add $0x28,%esp' pop
        # the arguments of two calls, which checkstack.pl counts.
        want = {"kmem_cache_destroy": (16, 3, 28, 48),
                "kmem_cache_init": (0, 2, 8, 64)}
        for name, (sub, saved, size, checkstack) in want.items():
            with self.subTest(name):
                f = frames[name]
                self.assertEqual((f.sub, f.saved, f.frame), (sub, saved, size))
                self.assertEqual(cs[name], checkstack)

    def test_continuation_lines_and_comments(self):
        insns = stack.disassembly(data("x86_64.dis"))["kfree_skb_list_reason"]
        self.assertIn(("lock", "xadd %eax,0xcc(%rdi)"), insns)
        self.assertIn(("jmp", "3b50 <kfree_skb_list_bulk>"), insns)
        # '3b33: 00' (the rest of the lock xadd's bytes) is no instruction
        self.assertEqual(len(insns), 30)

    def test_shrink_wrapped_frame_without_pushes(self):
        f = stack.x86_frame([("test", "%rdi,%rdi"), ("je", "10 <f+0x10>"),
                             ("sub", "$0x18,%rsp"), ("call", "0 <g>"),
                             ("add", "$0x18,%rsp"), ("ret", "")], 8)
        self.assertEqual((f.sub, f.saved, f.frame), (24, 0, 24))

    def test_a_sub_after_the_first_call_is_not_the_prologue(self):
        f = stack.x86_frame([("push", "%rbx"), ("call", "0 <g>"),
                             ("sub", "$0x40,%rsp"), ("pop", "%rbx"),
                             ("ret", "")], 8)
        self.assertEqual((f.sub, f.saved, f.frame), (0, 1, 8))


class Arm64(unittest.TestCase):
    def setUp(self):
        self.frames = stack.parse_objdump(data("arm64.dis"), "arm64")
        self.cs = stack.parse_checkstack(data("arm64.checkstack"))

    def test_pre_indexed_frame_record(self):
        f = self.frames["set_track_prepare"]
        self.assertEqual((f.sub, f.frame), (160, 160))
        self.assertEqual(f.regs[:2], ("x29", "x30"))
        self.assertEqual(self.cs["set_track_prepare"], 160)

    def test_sub_then_frame_record(self):
        # sub sp, sp, #0x250; stp x29, x30, [sp]; two 'add sp, sp,
        # #0x250' on the way out, which checkstack.pl's arm64 regexes do
        # not count.
        f = self.frames["__kmem_cache_do_shrink"]
        self.assertEqual((f.sub, f.frame), (0x250, 0x250))
        self.assertEqual(f.regs, ("x29", "x30", "x19", "x20", "x21", "x22",
                                  "x23"))
        self.assertEqual(self.cs["__kmem_cache_do_shrink"], 0x250)

    def test_separately_shrink_wrapped_saves(self):
        # kmem_cache_alloc_bulk saves x21 and x22 after its first branch.
        f = self.frames["kmem_cache_alloc_bulk"]
        self.assertEqual((f.sub, f.saved), (160, 12))
        self.assertIn("x21", f.regs)

    def test_comments_and_immediates(self):
        insns = stack.disassembly(data("arm64.dis"))["set_track_prepare"]
        self.assertEqual(insns[0], ("stp", "x29, x30, [sp, #-160]!"))
        self.assertEqual(stack.arm64_decrement("sub", "sp, sp, #0x1, lsl #12"),
                         4096)
        self.assertEqual(stack.arm64_decrement("add", "sp, sp, #0x250"), 0)
        self.assertEqual(stack.arm64_decrement("ldp", "x29, x30, [sp], #160"),
                         0)


SOURCE_BASE = """\
static inline void *get_freepointer(struct kmem_cache *s, void *object)
{
	return freelist_dereference(s, object + s->offset);
}

static void __slab_free(struct kmem_cache *s, struct slab *slab,
			void *head, void *tail, int cnt,
			unsigned long addr)

{
	old = 1;
}

static void deactivate_slab(struct kmem_cache *s, struct slab *slab,
			    void *freelist)
	__releases(&n->list_lock)
{
	int tail = DEACTIVATE_TO_HEAD;
}

/* comment */
int kmem_cache_alloc_bulk(struct kmem_cache *s, gfp_t flags, size_t size,
			  void **p)
{
	return 0;
}
EXPORT_SYMBOL(kmem_cache_alloc_bulk);
"""


class Sources(unittest.TestCase):
    def test_functions(self):
        fns = stack.source_functions(SOURCE_BASE)
        self.assertEqual(sorted(fns), ["__slab_free", "deactivate_slab",
                                       "get_freepointer",
                                       "kmem_cache_alloc_bulk"])
        self.assertTrue(fns["kmem_cache_alloc_bulk"][0].startswith("int kmem"))
        self.assertTrue(fns["kmem_cache_alloc_bulk"][0].endswith("}"))

    def test_changes(self):
        series = SOURCE_BASE.replace("old = 1;", "new = 1;").replace(
            "/* comment */\n", "static void bulk_free_grouped(void)\n{\n}\n\n")
        series = series.replace(
            "static inline void *get_freepointer", "static void *gone")
        self.assertEqual(stack.changed_functions(SOURCE_BASE, series), {
            "__slab_free": "changed", "bulk_free_grouped": "added",
            "get_freepointer": "removed", "gone": "added"})

    def test_declared_name(self):
        self.assertEqual(stack.declared_name(
            "static __always_inline void *slab_alloc_node(struct kmem_cache "
            "*s, gfp_t gfpflags, int (*fn)(void *), size_t orig_size)"),
            "slab_alloc_node")
        self.assertEqual(stack.declared_name(
            "static void f(struct kmem_cache_node *n) "
            "__must_hold(&n->list_lock)"), "f")
        self.assertIsNone(stack.declared_name("struct foo bar ="))

    def test_clones_are_their_function(self):
        for sym in ("kmem_cache_free_bulk.part.0", "foo.constprop.0",
                    "foo.isra.0", "foo"):
            self.assertEqual(stack.function_of(sym), sym.split(".")[0])
        self.assertTrue(stack.is_cold("___slab_alloc.cold"))


def frame(sub, saved, word=8):
    return stack.Frame(sub, saved, sub + word * saved)


class Rows(unittest.TestCase):
    def test_which_rows_and_flags(self):
        base = {"kmem_cache_alloc_bulk": frame(24, 6),
                "kmem_cache_free_bulk.part.0": frame(112, 6),
                "untouched": frame(40, 2), "moved": frame(8, 1),
                "shrunk": frame(0, 3), "___slab_alloc.cold": frame(0, 0)}
        series = {"kmem_cache_alloc_bulk": frame(56, 6),
                  "bulk_free_grouped": frame(560, 6),
                  "untouched": frame(40, 2), "moved": frame(8, 2),
                  "shrunk": frame(8, 1), "___slab_alloc.cold": frame(0, 0)}
        changes = {"kmem_cache_alloc_bulk": "changed",
                   "kmem_cache_free_bulk": "changed",
                   "bulk_free_grouped": "added", "shrunk": "changed"}
        rows = stack.rows_for("mm/slub.o", base, series, {}, {}, changes)
        got = {(r.base_symbol, r.series_symbol): r.flags() for r in rows}
        self.assertEqual(got, {
            (None, "bulk_free_grouped"): [">256", "new"],
            ("kmem_cache_alloc_bulk", "kmem_cache_alloc_bulk"): ["GREW"],
            ("kmem_cache_free_bulk.part.0", None): ["gone"],
            # unchanged source, but a push more: an inlined helper moved
            ("moved", "moved"): ["GREW"],
            # 24 -> 16 bytes: the sub grew, the frame did not
            ("shrunk", "shrunk"): []})
        self.assertEqual([r.function for r in rows if stack.is_flagged(r)],
                         ["bulk_free_grouped", "kmem_cache_alloc_bulk",
                          "moved"])

    def test_clones_pair_across_trees(self):
        self.assertEqual(stack.pair_symbols(["a.isra.0", "b"],
                                            ["a.constprop.0", "b", "c"]),
                         [("a.isra.0", "a.constprop.0"), ("b", "b"),
                          (None, "c")])

    def test_render(self):
        r = stack.Row("mm/slub.o", "bulk_free_grouped", None,
                      "bulk_free_grouped", None, frame(560, 6), None, 1680,
                      "added")
        text = stack.render([{"variant": "x86_64-orc", "title": "x86-64",
                              "alloc": "slub", "config": {"CONFIG_X": "y"},
                              "row_objs": [r],
                              "inlined": {"mm/slub.o": ["bulk_free_slot_a"]}}],
                            "./bulk stack")
        self.assertIn("| `bulk_free_grouped` (added) | slub.o | - | 608 | "
                      "-→6 | -→560 | -→1680 | **>256** **new** |", text)
        self.assertIn("x86_64-orc slub: `bulk_free_grouped` (added) >256",
                      text)
        self.assertIn("`bulk_free_slot_a`", text)


if __name__ == "__main__":
    unittest.main()
