// SPDX-License-Identifier: GPL-2.0
/*
 * qemu-cost: a QEMU TCG plugin for ./bulk bench --costs (harness/costs.py).
 *
 * Counts, inside the benchmark module's timed regions only, what a count
 * of retired instructions cannot see:
 *   - memory accesses, loads and stores apart, and the misses they take
 *     in a modeled L1D, L2 and last-level cache (cachesim.h), loads' and
 *     stores' apart (a core's store buffer hides much of a store miss);
 *   - locked instructions: any with a lock prefix (f0) and xchg with a
 *     memory operand (86, 87), except cmpxchg8b/cmpxchg16b (0f c7 /1),
 *     counted apart with and without a lock prefix (SLUB's per-CPU
 *     this_cpu_cmpxchg_double() runs it unlocked; x86class.h);
 *   - the IRQ-flag instructions cli, sti, pushf and popf, each apart
 *     (whether a popf changes IF is not known here: no register reads).
 * and the instructions of each region, which equal the module's own
 * clock delta in exact mode (-icount shift=0: the TSC counts retired
 * instructions), so that the counts can be matched with its R lines.
 *
 * Timed regions: each rdtsc or rdtscp that module code runs (the
 * benchmark's clock reads, which come in pairs) opens or closes one; with
 * clock=user, each one that user space runs instead (a virtual address
 * below USER_END: ./bulk callers --costs, whose init times each workload
 * between two reads, harness/callers.py), and the kernel's and modules'
 * reads are not counted.  In icount mode the clock read ends its block,
 * so a region's instructions are those of the blocks that start inside
 * it: from the opening read (left out) to the closing one (counted), as
 * the TSC delta has them.
 * A block counts when its last instruction starts, or, when QEMU left it
 * earlier, with the instructions that ran (insns_before()).
 * Memory accesses and flagged instructions count from the instruction
 * after the opening read.  Interrupts taken inside a region count with it.
 *
 * The cache model sees every data access of the whole run, timed or not
 * (so the untimed setup warms it as it would warm a real cache); only the
 * timed regions' accesses and misses are counted.  Addresses are
 * physical (QEMU's RAM address of the guest page), or the guest's virtual
 * address with addr=virt (the kernel's direct map maps physical memory at
 * a fixed offset, so the set index is the same there; vmalloc'ed stacks
 * and arrays differ).  Accesses QEMU gives no RAM address for (MMIO, or
 * a TLB entry gone) fall back to the virtual one and are counted, timed
 * or not (# virtual_fallbacks).
 *
 * Phases, as qemu-prof.c has them: every call of the function at p=ADDR
 * (_printk()) made straight from module code starts a new phase.
 *
 * With holds=PATH (the symbol ranges harness/holds.py writes), also the
 * IRQ-off windows and spinlock holds of the whole run, charged to the
 * timed region they started in (holds.h): '# holds_NOTE N' and 'hold'
 * lines after the regions.
 *
 * With slab=PATH (a file of hex addresses, one a line: the slab API's
 * entry points, harness/callers.py), also each region's instructions
 * inside slab calls (SLAB_INSNS): from a block that starts at an entry
 * point until that call returns, everything the CPU runs meanwhile
 * included: its callees, the interrupts it takes and, should it sleep,
 * other tasks' kernel code until one of them returns to user space.
 * With no register reads in the plugin API, the calls are followed
 * through their stack accesses, with a shadow stack of the live return
 * slots (slabtrack.h, which explains how): the store of each call's
 * return address and the loads of each ret and iretq (x86_flow()).  The
 * block of the ret that ends a call still counts.  Header lines then:
 * slab_entries (the addresses read), slab_calls,
 * slab_entries_after_ret (those reached without a call right before: a
 * tail call, or an iretq back into an entry point's block),
 * slab_lost (an entry point started with no live slot known: not counted),
 * slab_past (calls ended by a ret from above their slot, a frame gone),
 * slab_resets (calls ended by a block of user space: a slab call the
 * plugin lost track of).  Without slab= the column is 0.
 *
 * Arguments: out=PATH (required), p=ADDR (hex), l1d=SIZE:WAYS,
 * l2=SIZE:WAYS, llc=SIZE:WAYS (SIZE in bytes, or with K or M), line=BYTES,
 * addr=phys|virt, holds=PATH, slab=PATH, clock=module|user (whose clock
 * reads open and close the timed regions, above).  Defaults: module clock
 * reads, and as caches an Intel Xeon Sapphire Rapids (Golden Cove) core's:
 * L1D 48 KiB 12-way, L2 2 MiB 16-way, 64-byte lines, and as LLC 16 of its
 * 1.875 MiB 15-way slices, 30 MiB 15-way (a single thread uses the whole
 * LLC; the slices' address hash is not modeled).
 *
 * Output (out=PATH): '# KEY VALUE...' lines (clock_reads, phases, vcpus,
 * addresses, virtual_fallbacks, line, one 'cache NAME SIZE WAYS SETS' per
 * level, and 'columns' naming the fields of the lines after), then one
 * line per timed region, in the order they ran:
 *   PHASE INSNS LOADS STORES LOOKUPS L1D_LOAD_MISSES L2_LOAD_MISSES
 *   LLC_LOAD_MISSES L1D_STORE_MISSES L2_STORE_MISSES LLC_STORE_MISSES
 *   LOCKED CMPXCHG16B CMPXCHG16B_LOCKED CLI STI PUSHF POPF SLAB_INSNS
 * (LOOKUPS: the cache lines the accesses touched, two for an access that
 * straddles a line boundary.)  Deterministic in exact mode: one vCPU, no
 * time, no randomness.  A second vCPU is reported (# vcpus) and refused
 * by costs.py (callers.py reads it with costs.py): the state below is not
 * per vCPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cachesim.h"
#include "holds.h"
#include "qemu-plugin-api.h"
#include "slabtrack.h"
#include "x86class.h"

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/*
 * The misses of each level, loads' then stores', follow their first; the
 * flagged instructions come in x86class.h's order; the instructions
 * inside slab calls (slab=) last.
 */
enum event {
	LOADS, STORES, LOOKUPS,
	L1D_LOAD_MISSES, L2_LOAD_MISSES, LLC_LOAD_MISSES,
	L1D_STORE_MISSES, L2_STORE_MISSES, LLC_STORE_MISSES,
	LOCKED, CMPXCHG16B, CMPXCHG16B_LOCKED, CLI, STI, PUSHF, POPF,
	SLAB_INSNS,
	NR_EVENTS
};
static const char *const event_names[NR_EVENTS] = {
	"loads", "stores", "lookups",
	"l1d_load_misses", "l2_load_misses", "llc_load_misses",
	"l1d_store_misses", "l2_store_misses", "llc_store_misses",
	"locked", "cmpxchg16b", "cmpxchg16b_locked", "cli", "sti", "pushf",
	"popf", "slab_insns",
};
_Static_assert(CMPXCHG16B - LOCKED == X86_CMPXCHG16B &&
	       POPF - LOCKED == X86_POPF, "events in x86class.h's order");

struct region {
	unsigned int phase;
	uint64_t insns;
	uint64_t ev[NR_EVENTS];
};

struct block;

/* An instruction of a block, as its callbacks see it. */
struct insn_ref {
	struct block *b;
	unsigned int k;		/* its index in the block */
	enum x86_class cls;
	enum x86_flow flow;	/* a call or a ret (slab=) */
	bool acquire;		/* in a spinlock acquire function (holds.h) */
};

/* A translated block. */
struct block {
	struct tb_shape shape;
	bool kernel;		/* kernel text or modules */
	bool module;		/* module code */
	bool phase;		/* the p= function */
	bool slab_entry;	/* starts at a slab entry point (slab=) */
	struct insn_ref *refs;	/* of each instruction, with holds= or slab= */
	uint64_t insn_vaddr[];	/* of each instruction */
};

static const char *out_path;
static uint64_t phase_addr;
static bool virtual_addresses;
static bool user_clock;		/* clock=user */
static struct cachesim cache;
static uint64_t cache_size[CACHESIM_LEVELS] = {
	48 << 10, 2 << 20, 30 << 20
};
static unsigned int cache_ways[CACHESIM_LEVELS] = { 12, 16, 15 };
static unsigned int line_size = 64;
/* holds=PATH: IRQ-off windows and spinlock holds (holds.h). */
static bool holds_on;
static struct hold_syms hold_syms;
static struct holds_cpu holds;
/* slab=PATH: the slab API's entry points, sorted. */
static bool slab_on;
static uint64_t *slab_entries;
static size_t nr_slab_entries;

/* The guest state (one vCPU: exact mode). */
static struct region *regions;
static size_t nr_regions, max_regions;
static bool timed;		/* inside regions[nr_regions - 1] */
static unsigned long long clock_reads, virtual_fallbacks;
static unsigned int cur_phase, nr_vcpus;
static bool from_module;
/*
 * The block that started last, the region (1-based, 0: none) its
 * instructions count in, and whether its last instruction started.
 */
static struct block *last_block;
static size_t last_region;
static bool last_done;
/* Whether it started inside a slab call (its instructions count there). */
static bool last_inside;
/*
 * The instructions run before the current block: an event at its k-th
 * instruction happened at block_start + k.
 */
static uint64_t executed, block_start;

static struct region *cur(void)
{
	return &regions[nr_regions - 1];
}

/*
 * The instructions of @b that ran when the block after it starts at
 * @next without @b's last instruction having started: those before @next
 * when @next lies inside @b (in icount mode an instruction that does I/O
 * anywhere but at the end of its block makes QEMU stop the block there,
 * run that instruction alone, with no instruction callbacks, and go on
 * after it; or @b's last instruction crossed a page, see ran_short());
 * else an exception left @b, after an instruction not known here: all of
 * @b counts.
 */
static unsigned int insns_before(const struct block *b, uint64_t next)
{
	unsigned int i;

	if (next <= b->shape.vaddr || next > b->shape.last_vaddr)
		return b->shape.insns;
	for (i = 0; i < b->shape.insns && b->insn_vaddr[i] < next; i++)
		;
	return i;
}

/* Slab calls (slab=): slabtrack.h. */
static struct slabtrack slab;

/* @b starts: does a slab call start or end before it? */
static void slab_block(const struct block *b)
{
	last_inside = slabtrack_block(&slab, b->kernel, b->slab_entry);
}

static int addr_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

/* Read slab=PATH: a hex address a line.  0 on success. */
static int read_slab_entries(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[64];
	int ret = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *end;
		uint64_t a = strtoull(line, &end, 16);

		if (end == line || (*end && *end != '\n')) {
			ret = -1;
			break;
		}
		slab_entries = realloc(slab_entries, (nr_slab_entries + 1) *
				       sizeof(*slab_entries));
		if (!slab_entries)
			abort();
		slab_entries[nr_slab_entries++] = a;
	}
	fclose(f);
	if (ret || !nr_slab_entries)
		return -1;
	qsort(slab_entries, nr_slab_entries, sizeof(*slab_entries), addr_cmp);
	return 0;
}

static void block_exec(unsigned int vcpu, void *userdata)
{
	struct block *b = userdata;

	if (last_block) {
		uint64_t ran = 0;

		if (!last_done)
			ran = insns_before(last_block, b->shape.vaddr);
		else if (ran_short(&last_block->shape, &b->shape))
			ran = -1;
		executed += ran;
		if (last_region) {
			regions[last_region - 1].insns += ran;
			if (last_inside)
				regions[last_region - 1].ev[SLAB_INSNS] += ran;
		}
	}
	if (slab_on)
		slab_block(b);
	block_start = executed;
	if (holds_on)
		holds_block(&holds, &hold_syms, b->shape.vaddr,
			    last_block ? last_block->shape.vaddr : 0,
			    last_block ? last_block->shape.last_vaddr : 0,
			    !b->kernel, timed ? nr_regions : 0);
	last_block = b;
	last_region = timed ? nr_regions : 0;
	last_done = false;
	if (!b->kernel)
		return;
	if (b->module) {
		from_module = true;
		return;
	}
	if (b->phase && from_module)
		cur_phase++;
	from_module = false;
}

/*
 * A block's instructions count when its last one starts (which may be
 * after a clock read closed the region: the region is the block's).
 */
static void last_insn(unsigned int vcpu, void *userdata)
{
	last_done = true;
	executed += last_block->shape.insns;
	if (last_region) {
		regions[last_region - 1].insns += last_block->shape.insns;
		if (last_inside)
			regions[last_region - 1].ev[SLAB_INSNS] +=
				last_block->shape.insns;
	}
}

static void clock_read(unsigned int vcpu, void *userdata)
{
	clock_reads++;
	timed = !timed;
	if (!timed)
		return;
	if (nr_regions == max_regions) {
		max_regions = max_regions ? 2 * max_regions : 4096;
		regions = realloc(regions, max_regions * sizeof(*regions));
		if (!regions)
			abort();
	}
	memset(&regions[nr_regions], 0, sizeof(*regions));
	regions[nr_regions++].phase = cur_phase;
}

static void mem_access(unsigned int vcpu, qemu_plugin_meminfo_t info,
		       uint64_t vaddr, void *userdata)
{
	unsigned int size = 1u << qemu_plugin_mem_size_shift(info);
	uint64_t addr = vaddr, ignored[CACHESIM_LEVELS] = { 0 };
	const struct insn_ref *ref = userdata;
	struct region *r;

	if (ref && holds_on)
		holds_access(&holds, vaddr, size, qemu_plugin_mem_is_store(info),
			     ref->cls == X86_LOCKED || ref->cls == X86_CMPXCHG,
			     ref->acquire, block_start + ref->k);
	if (ref && slab_on)
		slabtrack_access(&slab, ref->flow, ref->cls, vaddr,
				 qemu_plugin_mem_is_store(info));
	if (!virtual_addresses) {
		struct qemu_plugin_hwaddr *hw =
			qemu_plugin_get_hwaddr(info, vaddr);

		/*
		 * QEMU 7.2 gives an I/O address for MMIO and also when the
		 * access's TLB entry is gone: use the virtual one there.
		 */
		if (hw && !qemu_plugin_hwaddr_is_io(hw))
			addr = qemu_plugin_hwaddr_phys_addr(hw);
		else
			virtual_fallbacks++;
	}
	if (!timed) {
		cachesim_access(&cache, addr, size, ignored);
		return;
	}
	r = cur();
	if (qemu_plugin_mem_is_store(info)) {
		r->ev[STORES]++;
		r->ev[LOOKUPS] += cachesim_access(&cache, addr, size,
						  &r->ev[L1D_STORE_MISSES]);
	} else {
		r->ev[LOADS]++;
		r->ev[LOOKUPS] += cachesim_access(&cache, addr, size,
						  &r->ev[L1D_LOAD_MISSES]);
	}
}

static void flagged_insn(unsigned int vcpu, void *userdata)
{
	if (timed)
		cur()->ev[(uintptr_t)userdata]++;
}

/* cli, sti, pushf, popf, iretq and sysretq, with holds=. */
static void if_insn(unsigned int vcpu, void *userdata)
{
	const struct insn_ref *ref = userdata;
	uint64_t now = block_start + ref->k;

	switch (ref->cls) {
	case X86_CLI:
	case X86_STI:
		holds_if(&holds, &hold_syms, ref->cls == X86_STI,
			 ref->b->insn_vaddr[ref->k], now,
			 timed ? nr_regions : 0);
		break;
	case X86_PUSHF:
		holds_pushf(&holds);
		break;
	case X86_POPF:
		holds_popf(&holds, now);
		break;
	case X86_IRETQ:
		holds_iret(&holds, &hold_syms, ref->b->insn_vaddr[ref->k], now);
		break;
	case X86_SYSRETQ:
		holds_sysret(&holds, now);
		break;
	default:
		break;
	}
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
	nr_vcpus++;
}

static void block_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t k, n = qemu_plugin_tb_n_insns(tb);
	struct block *b = calloc(1, sizeof(*b) + n * sizeof(b->insn_vaddr[0]));

	if (!b)
		abort();
	tb_shape_init(&b->shape, tb);
	b->kernel = b->shape.vaddr >= KERNEL_START;
	b->module = b->shape.vaddr >= MODULES_START;
	b->phase = b->shape.vaddr == phase_addr;
	b->slab_entry = slab_on && bsearch(&b->shape.vaddr, slab_entries,
					   nr_slab_entries,
					   sizeof(*slab_entries), addr_cmp);
	if ((holds_on || slab_on) && b->kernel) {
		b->refs = calloc(n, sizeof(*b->refs));
		if (!b->refs)
			abort();
	}
	for (k = 0; k < n; k++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, k);
		const unsigned char *code = qemu_plugin_insn_data(insn);
		size_t len = qemu_plugin_insn_size(insn);
		enum x86_class c = x86_class(code, len);

		b->insn_vaddr[k] = qemu_plugin_insn_vaddr(insn);
		if ((user_clock ? b->insn_vaddr[k] < USER_END : b->module) &&
		    is_clock_read(code, len))
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, clock_read, QEMU_PLUGIN_CB_NO_REGS, NULL);
		if (c != X86_OTHER && c <= X86_POPF)
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, flagged_insn, QEMU_PLUGIN_CB_NO_REGS,
				(void *)(uintptr_t)(LOCKED + c));
		if (b->refs) {
			struct insn_ref *ref = &b->refs[k];

			*ref = (struct insn_ref){
				b, k, c, x86_flow(code, len), holds_on &&
				holds_is_acquire(&hold_syms, b->insn_vaddr[k])
			};
			if (holds_on && c >= X86_CLI && c <= X86_SYSRETQ)
				qemu_plugin_register_vcpu_insn_exec_cb(
					insn, if_insn, QEMU_PLUGIN_CB_NO_REGS,
					ref);
		}
		qemu_plugin_register_vcpu_mem_cb(insn, mem_access,
						 QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW,
						 b->refs ? &b->refs[k] : NULL);
		if (k == n - 1)
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, last_insn, QEMU_PLUGIN_CB_NO_REGS, NULL);
	}
	qemu_plugin_register_vcpu_tb_exec_cb(tb, block_exec,
					     QEMU_PLUGIN_CB_NO_REGS, b);
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
	FILE *f = fopen(out_path, "w");
	size_t i;
	int k;

	if (!f) {
		perror(out_path);
		return;
	}
	write_header(f, clock_reads, cur_phase, nr_vcpus);
	fprintf(f, "# addresses %s\n", virtual_addresses ? "virtual" : "physical");
	fprintf(f, "# virtual_fallbacks %llu\n", virtual_fallbacks);
	fprintf(f, "# line %u\n", line_size);
	if (slab_on) {
		fprintf(f, "# slab_entries %zu\n", nr_slab_entries);
		fprintf(f, "# slab_calls %llu\n", slab.calls);
		fprintf(f, "# slab_entries_after_ret %llu\n", slab.after_ret);
		fprintf(f, "# slab_lost %llu\n", slab.lost);
		fprintf(f, "# slab_past %llu\n", slab.past);
		fprintf(f, "# slab_resets %llu\n", slab.resets);
	}
	for (k = 0; k < CACHESIM_LEVELS; k++)
		fprintf(f, "# cache %s %llu %u %u\n", cache.level[k].name,
			(unsigned long long)cache.level[k].size,
			cache.level[k].ways, cache.level[k].sets);
	fprintf(f, "# columns phase insns");
	for (k = 0; k < NR_EVENTS; k++)
		fprintf(f, " %s", event_names[k]);
	fprintf(f, "\n");
	for (i = 0; i < nr_regions; i++) {
		fprintf(f, "%u %llu", regions[i].phase,
			(unsigned long long)regions[i].insns);
		for (k = 0; k < NR_EVENTS; k++)
			fprintf(f, " %llu", (unsigned long long)regions[i].ev[k]);
		fprintf(f, "\n");
	}
	if (holds_on)
		holds_write(f, &holds, 1);
	if (ferror(f) | fclose(f))
		perror(out_path);
}

/* SIZE:WAYS, SIZE in bytes or with a K or M suffix; 0 when it parses. */
static int parse_level(const char *s, uint64_t *size, unsigned int *ways)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	if (*end != ':' || !v)
		return -1;
	*size = v;
	*ways = strtoul(end + 1, &end, 10);
	return *end || !*ways ? -1 : 0;
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info,
			int argc, char **argv)
{
	static const char *const level_args[CACHESIM_LEVELS] = {
		"l1d=", "l2=", "llc="
	};
	int i, k;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		for (k = 0; k < CACHESIM_LEVELS; k++)
			if (!strncmp(a, level_args[k], strlen(level_args[k])))
				break;
		if (k < CACHESIM_LEVELS) {
			if (parse_level(a + strlen(level_args[k]),
					&cache_size[k], &cache_ways[k]))
				goto bad;
		} else if (!strncmp(a, "out=", 4)) {
			out_path = a + 4;
		} else if (!strncmp(a, "p=", 2)) {
			phase_addr = strtoull(a + 2, NULL, 16);
		} else if (!strncmp(a, "holds=", 6)) {
			if (holds_read_syms(&hold_syms, a + 6)) {
				fprintf(stderr, "qemu-cost: cannot read the symbol "
					"ranges in %s\n", a + 6);
				return -1;
			}
			holds_on = true;
		} else if (!strncmp(a, "slab=", 5)) {
			if (read_slab_entries(a + 5)) {
				fprintf(stderr, "qemu-cost: cannot read the "
					"slab entry points (hex addresses) "
					"in %s\n", a + 5);
				return -1;
			}
			slab_on = true;
		} else if (!strncmp(a, "line=", 5)) {
			line_size = strtoul(a + 5, NULL, 10);
		} else if (!strcmp(a, "addr=phys") || !strcmp(a, "addr=virt")) {
			virtual_addresses = !strcmp(a, "addr=virt");
		} else if (!strcmp(a, "clock=module") ||
			   !strcmp(a, "clock=user")) {
			user_clock = !strcmp(a, "clock=user");
		} else {
			goto bad;
		}
	}
	if (!out_path) {
		fprintf(stderr, "qemu-cost: out= is required\n");
		return -1;
	}
	if (cachesim_init(&cache, line_size, cache_size, cache_ways)) {
		fprintf(stderr, "qemu-cost: a cache geometry the model does not "
			"take (line a power of two, SIZE = WAYS * line * a power "
			"of two)\n");
		return -1;
	}
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_tb_trans_cb(id, block_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
bad:
	fprintf(stderr, "qemu-cost: unknown argument %s\n", argv[i]);
	return -1;
}
