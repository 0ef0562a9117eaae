/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The x86-64 instructions qemu-cost.c counts apart, from their bytes:
 * locked read-modify-writes, cmpxchg8b/16b, the IRQ-flag instructions, and
 * the returns that restore IF (iretq, sysretq: holds.h); and calls and
 * returns apart (x86_flow(): slab calls are followed by them).
 * In a header of its own so that tests/cachesim_test.c can check it.
 */
#ifndef X86CLASS_H
#define X86CLASS_H

#include <stdbool.h>
#include <stddef.h>

enum x86_class {
	X86_OTHER = -1,
	X86_LOCKED,		/* lock prefix (f0), or xchg (86, 87) with memory */
	X86_CMPXCHG16B,		/* 0f c7 /1 with memory: cmpxchg8b/16b */
	X86_CMPXCHG16B_LOCKED,	/* the same with a lock prefix */
	X86_CLI,		/* fa */
	X86_STI,		/* fb */
	X86_PUSHF,		/* 9c */
	X86_POPF,		/* 9d */
	X86_IRETQ,		/* 48 cf: IF as the stack has it */
	X86_SYSRETQ,		/* 48 0f 07: back to user space */
	X86_CMPXCHG,		/* 0f b0/b1 without lock prefix (DS on UP) */
};

/*
 * The index of the opcode: legacy prefixes and a REX prefix may come
 * before it (*lock: one of them was f0).  @len when there is none.
 */
static inline size_t x86_opcode(const unsigned char *code, size_t len,
				bool *lock)
{
	size_t i = 0;

	*lock = false;
	for (; i < len; i++) {
		unsigned char c = code[i];

		if (c == 0xf0)
			*lock = true;
		else if (c != 0xf2 && c != 0xf3 && c != 0x2e && c != 0x36 &&
			 c != 0x3e && c != 0x26 && c != 0x64 && c != 0x65 &&
			 c != 0x66 && c != 0x67)
			break;
	}
	if (i < len && (code[i] & 0xf0) == 0x40)	/* REX */
		i++;
	return i;
}

/* The ModRM byte's mod field (its top two bits) is 3 for a register operand. */
static inline enum x86_class x86_class(const unsigned char *code, size_t len)
{
	bool lock;
	size_t i = x86_opcode(code, len, &lock);

	if (i >= len)
		return X86_OTHER;
	if (code[i] == 0xcf && i > 0 && code[i - 1] == 0x48)
		return X86_IRETQ;
	if (code[i] == 0x0f && i + 1 < len && code[i + 1] == 0x07 && i > 0 &&
	    code[i - 1] == 0x48)
		return X86_SYSRETQ;
	if (code[i] == 0x0f && i + 2 < len && code[i + 1] == 0xc7 &&
	    ((code[i + 2] >> 3) & 7) == 1 && (code[i + 2] >> 6) != 3)
		return lock ? X86_CMPXCHG16B_LOCKED : X86_CMPXCHG16B;
	if (lock)
		return X86_LOCKED;
	if (code[i] == 0x0f && i + 1 < len &&
	    (code[i + 1] == 0xb0 || code[i + 1] == 0xb1))
		return X86_CMPXCHG;
	if ((code[i] == 0x86 || code[i] == 0x87) && i + 1 < len &&
	    (code[i + 1] >> 6) != 3)
		return X86_LOCKED;
	switch (code[i]) {
	case 0xfa: return X86_CLI;
	case 0xfb: return X86_STI;
	case 0x9c: return X86_PUSHF;
	case 0x9d: return X86_POPF;
	default: return X86_OTHER;
	}
}

enum x86_flow {
	X86_FLOW_OTHER,
	X86_CALL,		/* e8 rel32, ff /2: pushes its return address */
	X86_RET,		/* c3, c2 imm16: loads it back */
};

/*
 * Near calls and returns, whose push and load of the return address
 * qemu-cost.c follows (its slab=).  Prefixes do not change them: a cs
 * prefix (2e) pads a call of a retpoline thunk so that it can be patched
 * into an indirect call in place, and rep ret (f3 c3) is an old AMD
 * idiom.  Far calls (ff /3) and far returns (cb, ca) are neither: the
 * kernel makes none.
 */
static inline enum x86_flow x86_flow(const unsigned char *code, size_t len)
{
	bool lock;
	size_t i = x86_opcode(code, len, &lock);

	if (i >= len)
		return X86_FLOW_OTHER;
	switch (code[i]) {
	case 0xe8:
		return X86_CALL;
	case 0xff:
		return i + 1 < len && ((code[i + 1] >> 3) & 7) == 2 ?
			X86_CALL : X86_FLOW_OTHER;
	case 0xc3:
	case 0xc2:
		return X86_RET;
	default:
		return X86_FLOW_OTHER;
	}
}

#endif
