/* SPDX-License-Identifier: GPL-2.0 */
/*
 * IRQ-off windows and spinlock holds, in instructions, for qemu-cost.c
 * (one vCPU, per timed region) and qemu-holds.c (any number of vCPUs).
 *
 * IRQ-off: the plugins cannot read EFLAGS (QEMU 7.2 plugins read no
 * registers), so each vCPU's IF is followed from the instructions it
 * runs.  On x86-64 6.1, local_irq_save() is pushf; pop; cli and
 * local_irq_restore() a conditional sti (no popf), so:
 *   - cli with IF on opens a window; sti closes it;
 *   - entering the kernel through an IDT or syscall entry point (a block
 *     that starts at one, unless the block before was a vector stub that
 *     jumps there) saves IF and clears it, without a window: the hardware
 *     did it, not the code the window would be charged to;
 *   - an iretq of the entry code restores the IF saved at the matching
 *     entry; a window still open when it restores IF on closes there (the
 *     last cli of the interrupt exit path, ended by iret).  An iretq
 *     elsewhere (sync_core()'s iret_to_self()) returns to the flags it
 *     pushed itself: IF does not change;
 *   - sysretq turns IF on (a window open there closes), and a block in
 *     user space means IF on, nothing saved.
 * popf restores the IF that the vCPU's last pushf saw (pushf; cli; ...;
 * popf, as this_cpu_cmpxchg16b_emu() has it): its value is not seen, so
 * a popf with no pushf before it is counted (HOLDS_POPF_UNPAIRED) and
 * leaves IF as it was.
 *
 * Spinlock holds: the lock's address is that of the first cmpxchg or
 * locked access made by a spinlock acquire function (syms' acquire
 * ranges: _raw_spin_lock*, _raw_spin_trylock*, the queued slow path; a
 * kernel booted on one CPU turns its lock prefixes into DS prefixes
 * unless booted with noreplace-smp, hence cmpxchg with or without one);
 * a trylock that finds the lock taken reads it and tries no cmpxchg, and
 * takes nothing.  The hold starts at the last access to that word made
 * inside those functions and ends at the next one-byte store to it made
 * outside them (queued_spin_unlock()'s smp_store_release() of the locked
 * byte, inline or not).  An interrupt taken inside an acquire function
 * (plain spin_lock() spins with IRQs on) saves its state with IF and gets
 * it back at the iretq.
 *
 * Each window or hold is charged to a site: the address of the call that
 * entered the acquire function (for a cli in one, and for every hold), or
 * the cli's own address.  The state is per vCPU; the caller gives each
 * event's time (the vCPU's instructions so far) and its timed region.
 */
#ifndef HOLDS_H
#define HOLDS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOLDS_MAX_NEST	32
#define HOLDS_MAX_HELD	8

enum hold_kind { HOLD_IRQ, HOLD_LOCK };
static const char *const hold_kind_names[] = { "irq", "lock" };

/* What the state machine noticed, counted per vCPU. */
enum hold_note {
	HOLDS_POPF_UNPAIRED,	/* a popf with no pushf before it */
	HOLDS_NEST_OVERFLOW,	/* entries nested beyond HOLDS_MAX_NEST */
	HOLDS_USER_IN_WINDOW,	/* user code ran with a window open */
	HOLDS_HELD_DROPPED,	/* a held lock pushed out: more than 8 held */
	NR_HOLD_NOTES
};
static const char *const hold_note_names[NR_HOLD_NOTES] = {
	"popf_unpaired", "nest_overflow", "user_in_window", "held_dropped",
};

struct hold_range {
	uint64_t start, end;	/* [start, end) */
};

/* The kernel's addresses the state machine needs (from System.map). */
struct hold_syms {
	struct hold_range *acquire;	/* spinlock acquire functions */
	size_t nr_acquire;
	struct hold_range *entry_text;	/* entry code: not a new entry */
	size_t nr_entry_text;
	struct hold_range *entry;	/* entry points: [start, start + 1) */
	size_t nr_entry;		/* or a range of vector stubs */
};

/* A window or hold: charged to @site and @region, started at @start. */
struct hold_open {
	uint64_t start, site, addr;
	unsigned int region;
};

/* One line of the output: count of windows/holds of one length. */
struct hold_bucket {
	uint64_t site, len, count;
	unsigned int region;
	unsigned char kind;
	bool used;
};

/* An acquire function's state, kept across an interrupt. */
struct hold_acquire {
	uint64_t lock_site, acq_addr, acq_time;
	bool in_acquire;
};

struct holds_cpu {
	bool irqs_off, window;
	/* What the last pushf saw, and whether a popf has used it. */
	bool pushf_off, pushf_valid;
	struct hold_open win;
	unsigned int depth;
	bool saved[HOLDS_MAX_NEST];
	struct hold_acquire saved_acq[HOLDS_MAX_NEST];
	/* The call site of the acquire function being run, and its lock. */
	struct hold_acquire acq;
	struct hold_open held[HOLDS_MAX_HELD];
	unsigned int nr_held;
	uint64_t notes[NR_HOLD_NOTES];
	struct hold_bucket *table;
	size_t table_size, table_used;
};

static inline bool hold_in(const struct hold_range *r, size_t n, uint64_t a)
{
	size_t lo = 0, hi = n;

	/* @r sorted by start, not overlapping. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (a < r[mid].start)
			hi = mid;
		else if (a >= r[mid].end)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

static inline bool holds_is_acquire(const struct hold_syms *s, uint64_t a)
{
	return hold_in(s->acquire, s->nr_acquire, a);
}

static int hold_range_cmp(const void *a, const void *b)
{
	const struct hold_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * Read @path: lines 'acquire START END', 'entrytext START END' and
 * 'entry START END' (hex).  0 on success.
 */
static inline int holds_read_syms(struct hold_syms *s, const char *path)
{
	FILE *f = fopen(path, "r");
	char kind[32];
	unsigned long long a, b;

	memset(s, 0, sizeof(*s));
	if (!f)
		return -1;
	while (fscanf(f, "%31s %llx %llx", kind, &a, &b) == 3) {
		struct hold_range **r;
		size_t *n;

		if (!strcmp(kind, "acquire"))
			r = &s->acquire, n = &s->nr_acquire;
		else if (!strcmp(kind, "entrytext"))
			r = &s->entry_text, n = &s->nr_entry_text;
		else if (!strcmp(kind, "entry"))
			r = &s->entry, n = &s->nr_entry;
		else
			break;
		*r = realloc(*r, (*n + 1) * sizeof(**r));
		if (!*r)
			abort();
		(*r)[(*n)++] = (struct hold_range){ a, b };
	}
	if (!feof(f) || !s->nr_acquire || !s->nr_entry) {
		fclose(f);
		return -1;
	}
	fclose(f);
	qsort(s->acquire, s->nr_acquire, sizeof(*s->acquire), hold_range_cmp);
	qsort(s->entry_text, s->nr_entry_text, sizeof(*s->entry_text),
	      hold_range_cmp);
	qsort(s->entry, s->nr_entry, sizeof(*s->entry), hold_range_cmp);
	return 0;
}

static inline uint64_t hold_hash(unsigned char kind, unsigned int region,
				 uint64_t site, uint64_t len)
{
	uint64_t h = site * 0x9e3779b97f4a7c15ULL;

	h ^= (len + ((uint64_t)region << 20) + kind) * 0xc2b2ae3d27d4eb4fULL;
	return h ^ (h >> 29);
}

static inline void holds_count(struct holds_cpu *c, enum hold_kind kind,
			       const struct hold_open *o, uint64_t end)
{
	uint64_t len = end - o->start;
	size_t i;

	if (2 * (c->table_used + 1) > c->table_size) {
		struct hold_bucket *old = c->table;
		size_t k, old_size = c->table_size;

		c->table_size = old_size ? 2 * old_size : 1024;
		c->table = calloc(c->table_size, sizeof(*c->table));
		if (!c->table)
			abort();
		for (k = 0; k < old_size; k++) {
			const struct hold_bucket *e = &old[k];

			if (!e->used)
				continue;
			i = hold_hash(e->kind, e->region, e->site, e->len) &
			    (c->table_size - 1);
			while (c->table[i].used)
				i = (i + 1) & (c->table_size - 1);
			c->table[i] = *e;
		}
		free(old);
	}
	i = hold_hash(kind, o->region, o->site, len) & (c->table_size - 1);
	for (;; i = (i + 1) & (c->table_size - 1)) {
		struct hold_bucket *e = &c->table[i];

		if (!e->used) {
			*e = (struct hold_bucket){ o->site, len, 1, o->region,
						   kind, true };
			c->table_used++;
			return;
		}
		if (e->kind == kind && e->region == o->region &&
		    e->site == o->site && e->len == len) {
			e->count++;
			return;
		}
	}
}

/*
 * A block starts at @vaddr, after one at @prev_vaddr whose last
 * instruction was at @prev_last (0, 0: none), in timed region @region.
 */
static inline void holds_block(struct holds_cpu *c, const struct hold_syms *s,
			       uint64_t vaddr, uint64_t prev_vaddr,
			       uint64_t prev_last, bool user,
			       unsigned int region)
{
	bool acquire;

	struct hold_acquire *a = &c->acq;

	if (user) {
		if (c->window)
			c->notes[HOLDS_USER_IN_WINDOW]++;
		c->irqs_off = c->window = a->in_acquire = false;
		c->depth = 0;
		return;
	}
	/*
	 * Only the vector stubs jump to an entry point; any other way in is
	 * the CPU's, also right after an iretq or sysretq that let a pending
	 * interrupt in.
	 */
	if (hold_in(s->entry, s->nr_entry, vaddr) &&
	    !hold_in(s->entry, s->nr_entry, prev_vaddr)) {
		if (c->depth < HOLDS_MAX_NEST) {
			c->saved_acq[c->depth] = *a;
			c->saved[c->depth++] = c->irqs_off;
		} else {
			c->notes[HOLDS_NEST_OVERFLOW]++;
		}
		c->irqs_off = true;
		a->in_acquire = false;
	}
	acquire = holds_is_acquire(s, vaddr);
	if (acquire && !a->in_acquire) {
		a->lock_site = prev_last;
		a->acq_addr = 0;
	} else if (!acquire && a->in_acquire && a->acq_addr) {
		/* Left the acquire function: the lock is held. */
		unsigned int i;

		for (i = 0; i < c->nr_held; i++)
			if (c->held[i].addr == a->acq_addr)
				break;
		if (i == c->nr_held && c->nr_held == HOLDS_MAX_HELD) {
			c->notes[HOLDS_HELD_DROPPED]++;
			memmove(&c->held[0], &c->held[1],
				(HOLDS_MAX_HELD - 1) * sizeof(c->held[0]));
			i = --c->nr_held;
		}
		c->held[i] = (struct hold_open){ a->acq_time, a->lock_site,
						 a->acq_addr, region };
		if (i == c->nr_held)
			c->nr_held++;
	}
	a->in_acquire = acquire;
}

/* cli (@set false) or sti (@set true) at @pc, time @now. */
static inline void holds_if(struct holds_cpu *c, const struct hold_syms *s,
			    bool set, uint64_t pc, uint64_t now,
			    unsigned int region)
{
	if (!set) {
		if (c->irqs_off)
			return;
		c->irqs_off = c->window = true;
		c->win = (struct hold_open){
			now, holds_is_acquire(s, pc) ? c->acq.lock_site : pc, 0,
			region };
		return;
	}
	if (c->irqs_off && c->window)
		holds_count(c, HOLD_IRQ, &c->win, now);
	c->irqs_off = c->window = false;
}

/* sysretq at time @now: back to user space, IF on. */
static inline void holds_sysret(struct holds_cpu *c, uint64_t now)
{
	if (c->window)
		holds_count(c, HOLD_IRQ, &c->win, now);
	c->irqs_off = c->window = c->acq.in_acquire = false;
	c->depth = 0;
}

/*
 * iretq at @pc, time @now: IF (and an interrupted acquire function's
 * state) as the matching entry found it.
 */
static inline void holds_iret(struct holds_cpu *c, const struct hold_syms *s,
			      uint64_t pc, uint64_t now)
{
	if (!hold_in(s->entry_text, s->nr_entry_text, pc))
		return;
	if (c->depth) {
		c->depth--;
		c->irqs_off = c->saved[c->depth];
		c->acq = c->saved_acq[c->depth];
	} else {
		c->irqs_off = false;
	}
	if (!c->irqs_off && c->window) {
		holds_count(c, HOLD_IRQ, &c->win, now);
		c->window = false;
	}
}

static inline void holds_pushf(struct holds_cpu *c)
{
	c->pushf_off = c->irqs_off;
	c->pushf_valid = true;
}

/* popf at time @now: IF as the last pushf saw it. */
static inline void holds_popf(struct holds_cpu *c, uint64_t now)
{
	if (!c->pushf_valid) {
		c->notes[HOLDS_POPF_UNPAIRED]++;
		return;
	}
	c->pushf_valid = false;
	if (c->pushf_off) {
		c->irqs_off = true;
		return;
	}
	if (c->irqs_off && c->window)
		holds_count(c, HOLD_IRQ, &c->win, now);
	c->irqs_off = c->window = false;
}

/*
 * A data access to @addr of @size bytes at time @now; @store: its kind;
 * @cmpxchg: made by a cmpxchg or a locked instruction; @acquire: by an
 * instruction of an acquire function.
 */
static inline void holds_access(struct holds_cpu *c, uint64_t addr,
				unsigned int size, bool store, bool cmpxchg,
				bool acquire, uint64_t now)
{
	struct hold_acquire *a = &c->acq;
	unsigned int i;

	if (acquire) {
		if (!a->acq_addr && cmpxchg)
			a->acq_addr = addr & ~3ULL;
		if (a->acq_addr && (addr & ~3ULL) == a->acq_addr)
			a->acq_time = now;
		return;
	}
	if (!store || size != 1 || !c->nr_held)
		return;
	for (i = 0; i < c->nr_held; i++) {
		if (c->held[i].addr != addr)
			continue;
		holds_count(c, HOLD_LOCK, &c->held[i], now);
		memmove(&c->held[i], &c->held[i + 1],
			(c->nr_held - i - 1) * sizeof(c->held[0]));
		c->nr_held--;
		return;
	}
}

/*
 * Output: '# holds_NOTE N' lines, then one line per bucket:
 *   hold KIND REGION SITE LEN COUNT  (SITE in hex)
 */
static inline void holds_write(FILE *f, struct holds_cpu *cpus, unsigned int n)
{
	unsigned int v, k;
	size_t i;

	for (k = 0; k < NR_HOLD_NOTES; k++) {
		uint64_t sum = 0;

		for (v = 0; v < n; v++)
			sum += cpus[v].notes[k];
		fprintf(f, "# holds_%s %llu\n", hold_note_names[k],
			(unsigned long long)sum);
	}
	for (v = 0; v < n; v++)
		for (i = 0; i < cpus[v].table_size; i++) {
			const struct hold_bucket *e = &cpus[v].table[i];

			if (e->used)
				fprintf(f, "hold %s %u %llx %llu %llu\n",
					hold_kind_names[e->kind], e->region,
					(unsigned long long)e->site,
					(unsigned long long)e->len,
					(unsigned long long)e->count);
		}
}

#endif
