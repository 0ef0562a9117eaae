// SPDX-License-Identifier: GPL-2.0
/*
 * Drives the IRQ-off and spinlock-hold state machine of
 * harness/plugin/holds.h through a script of events and prints its
 * output; tests/test_holds.py compiles it (also with the machine broken
 * on purpose) and checks what it counted.
 *
 *   holds_test EVENT...
 *
 * The kernel here: spinlock acquire functions at [0x1000, 0x1100), an
 * entry point at 0x3000 and vector stubs at [0x3100, 0x3200) inside the
 * entry text [0x3000, 0x4000); from 0x100000 on is user space, below it
 * kernel text.  Each event takes one instruction of time.
 *   b ADDR      a block starts at ADDR (hex); its call site is ADDR + 4
 *               for the next block
 *   cli PC | sti PC     at PC (hex)
 *   pushf | popf | iret | sysret    (iret: of the entry code, at 0x3050)
 *   iretat PC   an iretq at PC (hex)
 *   lock ADDR   a cmpxchg of ADDR by an acquire function
 *   acq ADDR    a plain access to ADDR by an acquire function
 *   st1 ADDR | st8 ADDR  a 1- or 8-byte store outside them
 *   r N         the timed region from now on
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "holds.h"

static struct hold_range acquire[] = { { 0x1000, 0x1100 } };
static struct hold_range entry_text[] = { { 0x3000, 0x4000 } };
static struct hold_range entry[] = { { 0x3000, 0x3001 }, { 0x3100, 0x3200 } };

int main(int argc, char **argv)
{
	struct hold_syms s = { acquire, 1, entry_text, 1, entry, 2 };
	struct holds_cpu c;
	uint64_t now = 0, prev = 0;
	unsigned int region = 0;
	int i;

#ifdef HOLDS_BREAK_ENTRY
	/* Broken on purpose: no entry point is known. */
	s.nr_entry = 0;
#endif
	memset(&c, 0, sizeof(c));
	for (i = 1; i < argc; i++, now++) {
		const char *e = argv[i];
		uint64_t a = i + 1 < argc ? strtoull(argv[i + 1], NULL, 16) : 0;

		if (!strcmp(e, "b")) {
			holds_block(&c, &s, a, prev, prev ? prev + 4 : 0,
				    a >= 0x100000, region);
			prev = a;
			i++;
		} else if (!strcmp(e, "cli") || !strcmp(e, "sti")) {
			holds_if(&c, &s, !strcmp(e, "sti"), a, now, region);
			i++;
		} else if (!strcmp(e, "pushf")) {
			holds_pushf(&c);
		} else if (!strcmp(e, "popf")) {
			holds_popf(&c, now);
		} else if (!strcmp(e, "iret")) {
			holds_iret(&c, &s, 0x3050, now);
		} else if (!strcmp(e, "iretat")) {
			holds_iret(&c, &s, a, now);
			i++;
		} else if (!strcmp(e, "sysret")) {
			holds_sysret(&c, now);
		} else if (!strcmp(e, "lock") || !strcmp(e, "acq")) {
			holds_access(&c, a, 4, true, !strcmp(e, "lock"), true,
				     now);
			i++;
		} else if (!strcmp(e, "st1") || !strcmp(e, "st8")) {
			holds_access(&c, a, e[2] - '0', true, false, false, now);
			i++;
		} else if (!strcmp(e, "r")) {
			region = atoi(argv[++i]);
		} else {
			fprintf(stderr, "holds_test: unknown event %s\n", e);
			return 2;
		}
	}
	holds_write(stdout, &c, 1);
	return 0;
}
