// SPDX-License-Identifier: GPL-2.0
/*
 * qemu-prof: a QEMU TCG plugin for ./bulk profile (harness/profile.py).
 *
 * Counts the guest instructions of every translated block that runs while
 * the guest is inside one of the kernel functions named with e=ADDR (the
 * slab API's entry points), from a call by module code until the guest
 * runs module code again (the benchmark module is the only caller of
 * interest; its code lies at or above MODULES_VADDR, the kernel's text
 * below), and only inside the module's timed regions: each rdtsc or
 * rdtscp that module code runs (the benchmark's clock reads, which come in
 * pairs) opens or closes one.  Interrupts taken inside such a call count
 * with it.  A block that an exception cuts short is counted whole.
 *
 * A block whose last instruction did not run (a page-crossing instruction
 * QEMU translates again in the next block: ran_short() in
 * qemu-plugin-api.h) has its count for that run cut by one.
 *
 * One vCPU only (exact mode): the state below is not per vCPU.  A second
 * vCPU is reported in the output and the counts are refused.
 *
 * Phases: every call of the function at p=ADDR (_printk()) made straight
 * from module code starts a new phase, so that the counts can be matched
 * with the module's console lines.
 *
 * Output (out=PATH): lines "# clock_reads N" (N must be even), "# phases N"
 * (the calls of p= from module code) and "# vcpus N", then one line per
 * (phase, entry, block) that ran:
 *   PHASE ENTRY VADDR INSNS EXECS CUT
 * where ENTRY is the 1-based index of the e= argument and CUT the runs
 * whose last instruction did not run (see above): the block ran
 * INSNS * EXECS - CUT instructions.
 *
 * Written for QEMU 7.2's plugin API (QEMU_PLUGIN_VERSION 1), as
 * qemu-plugin-api.h declares it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu-plugin-api.h"

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_ENTRIES	8

/* A translated block: its address, size and whether it is an entry. */
struct block {
	struct tb_shape shape;
	int entry;		/* 1-based index of an e= address, or 0 */
	bool module;		/* module code: leaves any entry */
	bool phase;		/* the p= function */
};

struct count {
	struct count *next;
	struct block *block;
	unsigned int phase;
	int entry;
	uint64_t execs;
	uint64_t cut;
};

static uint64_t entries[MAX_ENTRIES];
static int nr_entries;
static uint64_t phase_addr;
static const char *out_path;

/* The guest state (one vCPU: exact mode). */
static int cur_entry;
static bool from_module;
static unsigned int cur_phase;
static bool timed;
static unsigned long long clock_reads;
static unsigned int nr_vcpus;
/* The block that ran last, and its count if it was counted. */
static struct block *prev_block;
static struct count *prev_count;

/* Counts hashed by (block, phase, entry). */
#define HASH_BITS	20
static struct count *table[1 << HASH_BITS];

static struct count *lookup(struct block *b, unsigned int phase, int entry)
{
	uint64_t h = ((uintptr_t)b >> 4) * 0x9e3779b97f4a7c15ULL;
	struct count **slot, *c;

	h ^= (uint64_t)phase * 0xff51afd7ed558ccdULL + (uint64_t)entry;
	slot = &table[(h * 0xc4ceb9fe1a85ec53ULL) >> (64 - HASH_BITS)];
	for (c = *slot; c; c = c->next)
		if (c->block == b && c->phase == phase && c->entry == entry)
			return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->block = b;
	c->phase = phase;
	c->entry = entry;
	c->next = *slot;
	*slot = c;
	return c;
}

static void block_exec(unsigned int vcpu, void *userdata)
{
	struct block *b = userdata;

	if (prev_count && ran_short(&prev_block->shape, &b->shape))
		prev_count->cut++;
	prev_block = b;
	prev_count = NULL;
	if (b->module) {
		cur_entry = 0;
		from_module = true;
		return;
	}
	if (b->phase && from_module)
		cur_phase++;
	if (b->entry && !cur_entry && from_module)
		cur_entry = b->entry;
	from_module = false;
	if (cur_entry && timed) {
		prev_count = lookup(b, cur_phase, cur_entry);
		prev_count->execs++;
	}
}

static void clock_read(unsigned int vcpu, void *userdata)
{
	timed = !timed;
	clock_reads++;
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
	nr_vcpus++;
}

static void block_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
	size_t k, n = qemu_plugin_tb_n_insns(tb);
	struct block *b;
	int i;

	if (vaddr < KERNEL_START)
		return;
	b = calloc(1, sizeof(*b));
	if (!b)
		abort();
	tb_shape_init(&b->shape, tb);
	b->module = vaddr >= MODULES_START;
	b->phase = vaddr == phase_addr;
	for (i = 0; i < nr_entries; i++)
		if (vaddr == entries[i])
			b->entry = i + 1;
	if (b->module) {
		for (k = 0; k < n; k++) {
			struct qemu_plugin_insn *insn =
				qemu_plugin_tb_get_insn(tb, k);

			if (is_clock_read(qemu_plugin_insn_data(insn),
					  qemu_plugin_insn_size(insn)))
				qemu_plugin_register_vcpu_insn_exec_cb(
					insn, clock_read,
					QEMU_PLUGIN_CB_NO_REGS, NULL);
		}
	}
	qemu_plugin_register_vcpu_tb_exec_cb(tb, block_exec,
					     QEMU_PLUGIN_CB_NO_REGS, b);
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
	FILE *f = fopen(out_path, "w");
	struct count *c;
	size_t i;

	if (!f) {
		perror(out_path);
		return;
	}
	/* Unpaired clock reads: the counts are not the timed regions'. */
	write_header(f, clock_reads, cur_phase, nr_vcpus);
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		for (c = table[i]; c; c = c->next)
			fprintf(f, "%u %d %llx %u %llu %llu\n", c->phase,
				c->entry, (unsigned long long)c->block->shape.vaddr,
				c->block->shape.insns, (unsigned long long)c->execs,
				(unsigned long long)c->cut);
	if (ferror(f) | fclose(f))
		perror(out_path);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info,
			int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4)) {
			out_path = argv[i] + 4;
		} else if (!strncmp(argv[i], "e=", 2)) {
			if (nr_entries == MAX_ENTRIES) {
				fprintf(stderr, "qemu-prof: more than %d e=\n",
					MAX_ENTRIES);
				return -1;
			}
			entries[nr_entries++] = strtoull(argv[i] + 2, NULL, 16);
		} else if (!strncmp(argv[i], "p=", 2)) {
			phase_addr = strtoull(argv[i] + 2, NULL, 16);
		} else {
			fprintf(stderr, "qemu-prof: unknown argument %s\n",
				argv[i]);
			return -1;
		}
	}
	if (!out_path || !nr_entries) {
		fprintf(stderr, "qemu-prof: out= and e= are required\n");
		return -1;
	}
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_tb_trans_cb(id, block_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
