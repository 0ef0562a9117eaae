/* SPDX-License-Identifier: GPL-2.0 */
/*
 * slabtrack: follows slab API calls for qemu-cost.c's slab= (the
 * instructions run inside slab calls), in a header of its own, with no
 * QEMU API and no globals, so that tests/slabtrack_test.c can drive it
 * through made-up sequences of stack accesses and blocks.
 *
 * A slab call runs from a block that starts at an entry point until that
 * call returns, everything the CPU runs meanwhile included: its callees,
 * the interrupts it takes and, should it sleep, other tasks' kernel code
 * until one of them returns to user space.  With no register reads in
 * the plugin API, the calls are followed through their stack accesses:
 * the store of each call's return address and the load of each ret's
 * (x86_flow()), and the loads of iretq (slabtrack_access()).  A shadow
 * stack keeps the return slots of the frames still live; a slab call's
 * slot is the innermost one of the stack last used when its entry point
 * starts (slabtrack_block()): the slot its call just stored, or, when a
 * jmp got there (a tail call, as in a function that ends with kfree()
 * after calls of its own: the last slot stored is then a callee's, long
 * gone), the caller's own slot, which the entry point's ret returns
 * through.  The call returns when a ret loads from that slot (or from
 * above it on the same stack, a frame gone: counted in ->past,
 * qemu-cost.c's # slab_past); the ret's block still counts.  So tail
 * calls inside the slab call and interrupts (their frames lie below, or
 * on another stack) do not end it.  Blocks of user space while inside
 * one end it too (->resets: a slab call the tracker lost track of).
 *
 * Two return slots are on the same stack when they lie in the same
 * 16 KiB block: x86-64's THREAD_SIZE without KASAN, and every kernel
 * stack is such a block, aligned to its size (a task's comes from the
 * page allocator, or vmalloc with VMAP_STACK; the per-CPU IRQ stack is
 * declared aligned to IRQ_STACK_SIZE).  Two tasks' stacks may lie side
 * by side: a distance below 16 KiB would take them for one.  The
 * callers' kernels have no KASAN, whose THREAD_SIZE is 32 KiB: with it
 * two slots of one stack could be taken for two stacks'.  The shadow
 * stack holds the slots of the stacks' live frames, those of one stack
 * in the order they were stored (so from outer to inner); those of other
 * stacks (another task switched out, the IRQ stack) lie between them and
 * are passed over.  When it is full, the oldest half goes: a slab call
 * entered in a frame that old is lost (->lost), not mistaken.
 *
 * Test builds may break the tracker on purpose to show that the tests
 * see it: SLABTRACK_BREAK_DISTANCE takes two slots less than 16 KiB
 * apart for one stack's, SLABTRACK_BREAK_LAST_SLOT takes the slot of the
 * last call's store or ret's load as a slab call's, live or not.
 */
#ifndef SLABTRACK_H
#define SLABTRACK_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "x86class.h"

#define SLABTRACK_STACK_SHIFT	14
#define SLABTRACK_SHADOW_MAX	1024

struct slabtrack {
	uint64_t shadow[SLABTRACK_SHADOW_MAX];
	unsigned int shadow_len;
	/* The slot of the last call's store or ret's or iretq's load. */
	uint64_t last_stack_op;
	bool last_op_call;	/* that was a call's */
	bool inside;		/* inside a slab call */
	uint64_t slot;		/* the return slot of the slab call inside */
	/*
	 * The slab calls started; those of them whose entry point was
	 * reached without a call right before (a tail call, or an iretq
	 * back into an entry point's block); entry points started with no
	 * live slot known (not counted); calls ended by a ret from above
	 * their slot; calls ended by a block of user space.
	 */
	unsigned long long calls, after_ret, lost, past, resets;
};

static inline bool slabtrack_same_stack(uint64_t a, uint64_t b)
{
#ifdef SLABTRACK_BREAK_DISTANCE
	return (a > b ? a - b : b - a) < 1ULL << SLABTRACK_STACK_SHIFT;
#else
	return a >> SLABTRACK_STACK_SHIFT == b >> SLABTRACK_STACK_SHIFT;
#endif
}

/*
 * The frames of @at's stack whose slots lie at or below @at are gone:
 * a ret or iretq loaded from @at, or a call stored there.
 */
static inline void slabtrack_shadow_pop(struct slabtrack *t, uint64_t at)
{
	unsigned int i, j;

	for (i = t->shadow_len; i > 0; i--)
		if (slabtrack_same_stack(t->shadow[i - 1], at) &&
		    t->shadow[i - 1] > at)
			break;
	/* From i on, @at's stack has no live slot: keep the others'. */
	for (j = i; i < t->shadow_len; i++)
		if (!slabtrack_same_stack(t->shadow[i], at))
			t->shadow[j++] = t->shadow[i];
	t->shadow_len = j;
}

static inline void slabtrack_shadow_push(struct slabtrack *t, uint64_t at)
{
	slabtrack_shadow_pop(t, at);
	if (t->shadow_len == SLABTRACK_SHADOW_MAX) {
		memmove(t->shadow, t->shadow + SLABTRACK_SHADOW_MAX / 2,
			SLABTRACK_SHADOW_MAX / 2 * sizeof(t->shadow[0]));
		t->shadow_len = SLABTRACK_SHADOW_MAX / 2;
	}
	t->shadow[t->shadow_len++] = at;
}

/* The innermost live slot of @at's stack, or 0. */
static inline uint64_t slabtrack_shadow_top(const struct slabtrack *t,
					    uint64_t at)
{
	unsigned int i;

	for (i = t->shadow_len; i > 0; i--)
		if (slabtrack_same_stack(t->shadow[i - 1], at))
			return t->shadow[i - 1];
	return 0;
}

/*
 * A memory access at @vaddr (a store if @store) of a kernel instruction
 * whose x86_flow() is @flow and x86_class() @cls: only a call's store and
 * a ret's or an iretq's loads matter.
 */
static inline void slabtrack_access(struct slabtrack *t, enum x86_flow flow,
				    enum x86_class cls, uint64_t vaddr,
				    bool store)
{
	if (flow == X86_CALL && store) {
		slabtrack_shadow_push(t, vaddr);
		t->last_op_call = true;
	} else if (!store && (flow == X86_RET || cls == X86_IRETQ)) {
		if (t->inside && flow == X86_RET && vaddr >= t->slot &&
		    slabtrack_same_stack(vaddr, t->slot)) {
			t->inside = false;
			t->past += vaddr > t->slot;
		}
		slabtrack_shadow_pop(t, vaddr);
		t->last_op_call = false;
	} else {
		return;
	}
	t->last_stack_op = vaddr;
}

/*
 * A block starts, of the kernel (@kernel: text or modules) or of user
 * space, at a slab entry point or not (@entry): does a slab call start
 * or end before it?  Whether its instructions run inside one.
 */
static inline bool slabtrack_block(struct slabtrack *t, bool kernel,
				   bool entry)
{
	if (!kernel) {
		if (t->inside)
			t->resets++;
		t->inside = false;
	} else if (entry && !t->inside) {
#ifdef SLABTRACK_BREAK_LAST_SLOT
		uint64_t slot = t->last_stack_op;
#else
		uint64_t slot = slabtrack_shadow_top(t, t->last_stack_op);
#endif

		if (slot) {
			t->inside = true;
			t->slot = slot;
			t->calls++;
			t->after_ret += !t->last_op_call;
		} else {
			t->lost++;
		}
	}
	return t->inside;
}

#endif
