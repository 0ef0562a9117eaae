// SPDX-License-Identifier: GPL-2.0
/*
 * qemu-holds: a QEMU TCG plugin for ./bulk holds (harness/holds.py):
 * IRQ-off windows and spinlock holds, in each vCPU's own instructions, on
 * any number of vCPUs (multi-threaded TCG, no icount); holds.h has the
 * state machine, kept per vCPU (a vCPU's callbacks run on its thread).
 *
 * Region 0 is the boot before any module code ran, region 1 the rest:
 * the module's run and what it set going.
 *
 * Arguments: out=PATH and holds=PATH (the symbol ranges holds.py
 * writes), both required.  Output: '# vcpus N', '# holds_NOTE N' lines,
 * then holds.h's 'hold' lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "holds.h"
#include "qemu-plugin-api.h"
#include "x86class.h"

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_VCPUS 16

struct block;

struct insn_ref {
	struct block *b;
	unsigned int k;
	enum x86_class cls;
	bool acquire;
	uint64_t vaddr;
};

struct block {
	struct tb_shape shape;
	bool kernel, module;
	struct insn_ref refs[];
};

/* One vCPU's state: its instructions so far and the last block it ran. */
struct vcpu {
	uint64_t executed, block_start;
	struct block *last_block;
	bool last_done;
	struct holds_cpu holds;
};

static const char *out_path;
static struct hold_syms syms;
static struct vcpu vcpus[MAX_VCPUS];
static unsigned int nr_vcpus;
static bool module_ran;

static struct vcpu *vcpu_of(unsigned int i)
{
	return i < MAX_VCPUS ? &vcpus[i] : NULL;
}

/* As qemu-cost.c's insns_before(). */
static unsigned int ran_before(const struct block *b, uint64_t next)
{
	unsigned int i;

	if (next <= b->shape.vaddr || next > b->shape.last_vaddr)
		return b->shape.insns;
	for (i = 0; i < b->shape.insns && b->refs[i].vaddr < next; i++)
		;
	return i;
}

static void block_exec(unsigned int vcpu_index, void *userdata)
{
	struct block *b = userdata;
	struct vcpu *v = vcpu_of(vcpu_index);
	struct block *prev;

	if (!v)
		return;
	prev = v->last_block;
	if (prev) {
		if (!v->last_done)
			v->executed += ran_before(prev, b->shape.vaddr);
		else if (ran_short(&prev->shape, &b->shape))
			v->executed--;
	}
	v->block_start = v->executed;
	if (b->module)
		module_ran = true;
	holds_block(&v->holds, &syms, b->shape.vaddr,
		    prev ? prev->shape.vaddr : 0,
		    prev ? prev->shape.last_vaddr : 0, !b->kernel,
		    module_ran);
	v->last_block = b;
	v->last_done = false;
}

static void last_insn(unsigned int vcpu_index, void *userdata)
{
	struct vcpu *v = vcpu_of(vcpu_index);

	if (!v)
		return;
	v->last_done = true;
	v->executed += v->last_block->shape.insns;
}

static void if_insn(unsigned int vcpu_index, void *userdata)
{
	const struct insn_ref *ref = userdata;
	struct vcpu *v = vcpu_of(vcpu_index);
	uint64_t now;

	if (!v)
		return;
	now = v->block_start + ref->k;
	switch (ref->cls) {
	case X86_CLI:
	case X86_STI:
		holds_if(&v->holds, &syms, ref->cls == X86_STI,
			 ref->vaddr, now,
			 module_ran);
		break;
	case X86_PUSHF:
		holds_pushf(&v->holds);
		break;
	case X86_POPF:
		holds_popf(&v->holds, now);
		break;
	case X86_IRETQ:
		holds_iret(&v->holds, &syms, ref->vaddr, now);
		break;
	case X86_SYSRETQ:
		holds_sysret(&v->holds, now);
		break;
	default:
		break;
	}
}

static void mem_access(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
		       uint64_t vaddr, void *userdata)
{
	const struct insn_ref *ref = userdata;
	struct vcpu *v = vcpu_of(vcpu_index);

	if (!v)
		return;
	holds_access(&v->holds, vaddr, 1u << qemu_plugin_mem_size_shift(info),
		     qemu_plugin_mem_is_store(info),
		     ref->cls == X86_LOCKED || ref->cls == X86_CMPXCHG,
		     ref->acquire, v->block_start + ref->k);
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
	if (vcpu_index + 1 > nr_vcpus)
		nr_vcpus = vcpu_index + 1;
}

static void block_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t k, n = qemu_plugin_tb_n_insns(tb);
	struct block *b = calloc(1, sizeof(*b) + n * sizeof(b->refs[0]));

	if (!b)
		abort();
	tb_shape_init(&b->shape, tb);
	b->kernel = b->shape.vaddr >= KERNEL_START;
	b->module = b->shape.vaddr >= MODULES_START;
	for (k = 0; k < n; k++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, k);
		const unsigned char *code = qemu_plugin_insn_data(insn);
		uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
		struct insn_ref *ref = &b->refs[k];

		*ref = (struct insn_ref){ b, k,
			x86_class(code, qemu_plugin_insn_size(insn)),
			holds_is_acquire(&syms, vaddr), vaddr };
		if (b->kernel && ref->cls >= X86_CLI && ref->cls <= X86_SYSRETQ)
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, if_insn, QEMU_PLUGIN_CB_NO_REGS, ref);
		if (b->kernel)
			qemu_plugin_register_vcpu_mem_cb(
				insn, mem_access, QEMU_PLUGIN_CB_NO_REGS,
				ref->acquire ? QEMU_PLUGIN_MEM_RW :
					       QEMU_PLUGIN_MEM_W, ref);
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
	struct holds_cpu cpus[MAX_VCPUS];
	unsigned int i, n = nr_vcpus < MAX_VCPUS ? nr_vcpus : MAX_VCPUS;

	if (!f) {
		perror(out_path);
		return;
	}
	for (i = 0; i < n; i++)
		cpus[i] = vcpus[i].holds;
	fprintf(f, "# vcpus %u\n", nr_vcpus);
	holds_write(f, cpus, n);
	if (ferror(f) | fclose(f))
		perror(out_path);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info,
			int argc, char **argv)
{
	const char *syms_path = NULL;
	int i;

	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4)) {
			out_path = argv[i] + 4;
		} else if (!strncmp(argv[i], "holds=", 6)) {
			syms_path = argv[i] + 6;
		} else {
			fprintf(stderr, "qemu-holds: unknown argument %s\n",
				argv[i]);
			return -1;
		}
	}
	if (!out_path || !syms_path) {
		fprintf(stderr, "qemu-holds: out= and holds= are required\n");
		return -1;
	}
	if (holds_read_syms(&syms, syms_path)) {
		fprintf(stderr, "qemu-holds: cannot read the symbol ranges in "
			"%s\n", syms_path);
		return -1;
	}
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_tb_trans_cb(id, block_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
