/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cachesim: a data cache hierarchy model for qemu-cost.c, in a header of
 * its own so that tests/cachesim-test.c can drive it.
 *
 * Each level is set-associative with true LRU replacement; the set is
 * (address / line size) modulo the number of sets (a power of two).  An
 * access looks up L1D; a miss there looks up L2, a miss there the LLC,
 * and the line is filled into every level that missed (write-allocate,
 * loads and stores alike).  No level evicts from another (neither
 * inclusive nor exclusive: a line L2 drops may stay in L1D), there is no
 * prefetcher, no instruction fetch and no other core.  An access that
 * straddles lines is one lookup per line.
 *
 * Test builds may break the model on purpose to show that the tests see
 * it: CACHESIM_BREAK_FIFO replaces on insertion order (a hit does not
 * refresh a line), CACHESIM_BREAK_INDEX drops the lowest set index bit.
 */
#ifndef CACHESIM_H
#define CACHESIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define CACHESIM_LEVELS	3

struct cache_level {
	const char *name;
	uint64_t size;		/* bytes */
	unsigned int ways;
	unsigned int sets;	/* a power of two */
	/*
	 * Per set, its ways' line numbers + 1 (0: empty), most recently
	 * used first: a hit moves its line to the front, a miss drops the
	 * last and puts the new line at the front.
	 */
	uint64_t *lines;
};

struct cachesim {
	unsigned int line_shift;
	struct cache_level level[CACHESIM_LEVELS];
};

/* 0, or -1 when the geometry is not one the model takes. */
static inline int cache_level_init(struct cache_level *c, const char *name,
				   uint64_t size, unsigned int ways,
				   unsigned int line)
{
	uint64_t sets;

	c->name = name;
	c->size = size;
	c->ways = ways;
	if (!ways || !line || size % ((uint64_t)ways * line))
		return -1;
	sets = size / ((uint64_t)ways * line);
	if (!sets || (sets & (sets - 1)) || sets > (1u << 30))
		return -1;
	c->sets = sets;
	c->lines = calloc(sets * ways, sizeof(*c->lines));
	return c->lines ? 0 : -1;
}

/* Look @line_no up in @c; true on a hit.  A miss fills it in. */
static inline bool cache_level_access(struct cache_level *c, uint64_t line_no)
{
	uint64_t set = line_no & (c->sets - 1);
	uint64_t *ways, tag = line_no + 1;
	unsigned int i;

#ifdef CACHESIM_BREAK_INDEX
	set &= ~(uint64_t)1;
#endif
	ways = c->lines + set * c->ways;
	for (i = 0; i < c->ways; i++)
		if (ways[i] == tag)
			break;
	if (i < c->ways) {
#ifndef CACHESIM_BREAK_FIFO
		for (; i > 0; i--)
			ways[i] = ways[i - 1];
		ways[0] = tag;
#endif
		return true;
	}
	for (i = c->ways - 1; i > 0; i--)
		ways[i] = ways[i - 1];
	ways[0] = tag;
	return false;
}

static inline int cachesim_init(struct cachesim *s, unsigned int line,
				const uint64_t size[CACHESIM_LEVELS],
				const unsigned int ways[CACHESIM_LEVELS])
{
	static const char *const names[CACHESIM_LEVELS] = { "l1d", "l2", "llc" };
	int i;

	if (!line || (line & (line - 1)))
		return -1;
	for (s->line_shift = 0; (1u << s->line_shift) < line; s->line_shift++)
		;
	for (i = 0; i < CACHESIM_LEVELS; i++)
		if (cache_level_init(&s->level[i], names[i], size[i], ways[i],
				     line))
			return -1;
	return 0;
}

/*
 * One access of @size bytes at @addr: adds to misses[k] the lines that
 * missed in level k, and returns the lines looked up in L1D (two when
 * the access straddles a line boundary).
 */
static inline unsigned int cachesim_access(struct cachesim *s, uint64_t addr,
					   unsigned int size,
					   uint64_t misses[CACHESIM_LEVELS])
{
	uint64_t first = addr >> s->line_shift;
	uint64_t last = (addr + (size ? size : 1) - 1) >> s->line_shift;
	uint64_t line;
	int k;

	for (line = first; line <= last; line++)
		for (k = 0; k < CACHESIM_LEVELS; k++) {
			if (cache_level_access(&s->level[k], line))
				break;
			misses[k]++;
		}
	return last - first + 1;
}

#endif
