// SPDX-License-Identifier: GPL-2.0
/*
 * Drives the slab call tracker of harness/plugin/slabtrack.h (qemu-cost.c's
 * slab=) through a script of stack accesses and blocks and prints what it
 * made of them; tests/test_slabtrack.py compiles it (also with the tracker
 * broken on purpose) and checks the outcome.
 *
 *   slabtrack_test EVENT...
 *
 * Events (SLOT: a stack address, hex):
 *   call SLOT   a call stores its return address at SLOT
 *   icall ADDR SLOT  a call through memory: loads its target from ADDR,
 *               then stores its return address at SLOT
 *   ret SLOT    a ret loads its return address from SLOT
 *   iret SLOT   an iretq loads its frame from SLOT on (RIP at SLOT, then
 *               CS, RFLAGS, RSP and SS above it: five loads, as QEMU's
 *               helper makes them)
 *   k           a kernel block starts
 *   e           a kernel block starts at a slab entry point
 *   u           a block of user space starts
 *   mov SLOT    a plain store to SLOT by a kernel instruction
 * Output, one 'KEY VALUE' a line: blocks (per block event, I when its
 * instructions run inside a slab call, . when not; - for none), the
 * counters calls, after_ret, lost, past and resets, inside (0 or 1) and
 * slot (hex) at the end, shadow (the live slots kept) and top (hex: the
 * innermost live slot of the stack of the last call's store or ret's or
 * iretq's load, 0 for none).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slabtrack.h"

static struct slabtrack t;

int main(int argc, char **argv)
{
	char *blocks = calloc(argc + 1, 1);
	size_t nr_blocks = 0;
	int i, k;

	if (!blocks)
		return 2;
	for (i = 1; i < argc; i++) {
		const char *e = argv[i];
		uint64_t a = 0;
		char *end = NULL;

		if (!strcmp(e, "call") || !strcmp(e, "icall") ||
		    !strcmp(e, "ret") || !strcmp(e, "iret") ||
		    !strcmp(e, "mov")) {
			if (i + 1 == argc)
				goto bad;
			a = strtoull(argv[++i], &end, 16);
			if (*end)
				goto bad;
		}
		if (!strcmp(e, "call")) {
			slabtrack_access(&t, X86_CALL, X86_OTHER, a, true);
		} else if (!strcmp(e, "icall")) {
			slabtrack_access(&t, X86_CALL, X86_OTHER, a, false);
			if (i + 1 == argc)
				goto bad;
			a = strtoull(argv[++i], &end, 16);
			if (*end)
				goto bad;
			slabtrack_access(&t, X86_CALL, X86_OTHER, a, true);
		} else if (!strcmp(e, "ret")) {
			slabtrack_access(&t, X86_RET, X86_OTHER, a, false);
		} else if (!strcmp(e, "iret")) {
			for (k = 0; k < 5; k++)
				slabtrack_access(&t, X86_FLOW_OTHER, X86_IRETQ,
						 a + 8 * k, false);
		} else if (!strcmp(e, "mov")) {
			slabtrack_access(&t, X86_FLOW_OTHER, X86_OTHER, a,
					 true);
		} else if (!strcmp(e, "k") || !strcmp(e, "e") ||
			   !strcmp(e, "u")) {
			blocks[nr_blocks++] =
				slabtrack_block(&t, *e != 'u', *e == 'e') ?
				'I' : '.';
		} else {
			goto bad;
		}
	}
	printf("blocks %s\n", nr_blocks ? blocks : "-");
	printf("calls %llu\n", t.calls);
	printf("after_ret %llu\n", t.after_ret);
	printf("lost %llu\n", t.lost);
	printf("past %llu\n", t.past);
	printf("resets %llu\n", t.resets);
	printf("inside %d\n", t.inside);
	printf("slot %llx\n", (unsigned long long)t.slot);
	printf("shadow %u\n", t.shadow_len);
	printf("top %llx\n", (unsigned long long)
	       slabtrack_shadow_top(&t, t.last_stack_op));
	free(blocks);
	return 0;
bad:
	fprintf(stderr, "slabtrack_test: bad event %s\n", argv[i]);
	return 2;
}
