// SPDX-License-Identifier: GPL-2.0
/*
 * Drives the cache model of harness/plugin/cachesim.h through one access
 * pattern and prints what it counted; tests/test_costs.py compiles it
 * (also with the model broken on purpose) and checks the counts against
 * closed forms.  With 'classify' it prints the x86class.h class of each
 * instruction given in hex, with 'flow' whether it is a call or a return.
 *
 *   cachesim_test LINE L1D L2 LLC PATTERN ARGS...
 *   cachesim_test classify HEX...
 *   cachesim_test flow HEX...
 *
 * L1D, L2, LLC: SIZE:WAYS in bytes.  Patterns (8-byte accesses):
 *   walk BYTES STRIDE PASSES  every STRIDE bytes of BYTES, PASSES times
 *   conflict LEVEL COUNT ROUNDS  COUNT lines of one set of LEVEL (0..2),
 *                             cycled ROUNDS times
 *   hot LEVEL ROUNDS          in one set of LEVEL: a hot line, then each
 *                             of WAYS other lines with the hot line
 *                             before it, ROUNDS times
 *   straddle COUNT            COUNT accesses 4 bytes before a line's end
 * Output: 'lookups N' (lines looked up in L1D), then 'NAME MISSES' per
 * level.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cachesim.h"
#include "x86class.h"

/* Far from 0, on a boundary of every set mapping. */
#define BASE	(1ULL << 32)

static struct cachesim sim;
static uint64_t lookups, misses[CACHESIM_LEVELS];

static void access8(uint64_t addr)
{
	lookups += cachesim_access(&sim, BASE + addr, 8, misses);
}

/* The distance between two lines of one set of level @k. */
static uint64_t set_stride(int k)
{
	return (uint64_t)sim.level[k].sets << sim.line_shift;
}

static int parse_level(const char *s, uint64_t *size, unsigned int *ways)
{
	char *end;

	*size = strtoull(s, &end, 10);
	if (*end != ':')
		return -1;
	*ways = strtoul(end + 1, &end, 10);
	return *end ? -1 : 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: cachesim_test LINE L1D L2 LLC PATTERN ARGS...\n");
	return 2;
}

/* x86_class() of each argument, or with @flow x86_flow(). */
static int classify(int argc, char **argv, bool flow)
{
	static const char *const names[] = {
		"locked", "cmpxchg16b", "cmpxchg16b_locked", "cli", "sti",
		"pushf", "popf", "iretq", "sysretq", "cmpxchg"
	};
	static const char *const flows[] = { "other", "call", "ret" };
	unsigned char code[16];
	size_t n;
	int i, c;

	for (i = 0; i < argc; i++) {
		for (n = 0; n < sizeof(code) && argv[i][2 * n]; n++)
			if (sscanf(argv[i] + 2 * n, "%2hhx", &code[n]) != 1)
				return usage();
		if (flow) {
			printf("%s %s\n", argv[i], flows[x86_flow(code, n)]);
			continue;
		}
		c = x86_class(code, n);
		printf("%s %s\n", argv[i], c == X86_OTHER ? "other" : names[c]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t size[CACHESIM_LEVELS], a, i, r;
	unsigned int ways[CACHESIM_LEVELS];
	const char *pattern;
	int k;

	if (argc > 1 && !strcmp(argv[1], "classify"))
		return classify(argc - 2, argv + 2, false);
	if (argc > 1 && !strcmp(argv[1], "flow"))
		return classify(argc - 2, argv + 2, true);
	if (argc < 6)
		return usage();
	for (k = 0; k < CACHESIM_LEVELS; k++)
		if (parse_level(argv[2 + k], &size[k], &ways[k]))
			return usage();
	if (cachesim_init(&sim, strtoul(argv[1], NULL, 10), size, ways)) {
		fprintf(stderr, "cachesim_test: bad geometry\n");
		return 2;
	}
	pattern = argv[5];
	if (!strcmp(pattern, "walk") && argc == 9) {
		uint64_t bytes = strtoull(argv[6], NULL, 10);
		uint64_t stride = strtoull(argv[7], NULL, 10);

		for (r = 0; r < strtoull(argv[8], NULL, 10); r++)
			for (a = 0; a < bytes; a += stride)
				access8(a);
	} else if (!strcmp(pattern, "conflict") && argc == 9) {
		uint64_t stride = set_stride(atoi(argv[6]));

		for (r = 0; r < strtoull(argv[8], NULL, 10); r++)
			for (i = 0; i < strtoull(argv[7], NULL, 10); i++)
				access8(i * stride);
	} else if (!strcmp(pattern, "hot") && argc == 8) {
		int level = atoi(argv[6]);
		uint64_t stride = set_stride(level);

		for (r = 0; r < strtoull(argv[7], NULL, 10); r++)
			for (i = 1; i <= sim.level[level].ways; i++) {
				access8(0);
				access8(i * stride);
			}
	} else if (!strcmp(pattern, "straddle") && argc == 7) {
		uint64_t line = 1ULL << sim.line_shift;

		for (i = 0; i < strtoull(argv[6], NULL, 10); i++)
			access8(i * line + line - 4);
	} else {
		return usage();
	}
	printf("lookups %llu\n", (unsigned long long)lookups);
	for (k = 0; k < CACHESIM_LEVELS; k++)
		printf("%s %llu\n", sim.level[k].name,
		       (unsigned long long)misses[k]);
	return 0;
}
