/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the harness's QEMU TCG plugins (qemu-prof.c, qemu-cost.c) share:
 * the part of QEMU 7.2's plugin API they use, the guest's address layout
 * and the benchmark module's clock reads.
 *
 * Debian 12 ships QEMU with plugin support but without qemu-plugin.h, so
 * the declarations used are given here, as QEMU 7.2's header has them
 * (QEMU_PLUGIN_VERSION 1).
 */
#ifndef QEMU_PLUGIN_API_H
#define QEMU_PLUGIN_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
struct qemu_plugin_hwaddr;
struct qemu_info_t;
enum qemu_plugin_cb_flags {
	QEMU_PLUGIN_CB_NO_REGS,
	QEMU_PLUGIN_CB_R_REGS,
	QEMU_PLUGIN_CB_RW_REGS,
};
enum qemu_plugin_mem_rw {
	QEMU_PLUGIN_MEM_R = 1,
	QEMU_PLUGIN_MEM_W,
	QEMU_PLUGIN_MEM_RW,
};
typedef void (*tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*vcpu_mem_cb_t)(unsigned int vcpu_index,
			      qemu_plugin_meminfo_t info, uint64_t vaddr,
			      void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags,
					  void *userdata);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
						 size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id,
				       vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
					    vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags,
					    void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn,
				      vcpu_mem_cb_t cb,
				      enum qemu_plugin_cb_flags flags,
				      enum qemu_plugin_mem_rw rw,
				      void *userdata);
unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(qemu_plugin_meminfo_t info,
						  uint64_t vaddr);
bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *haddr);
uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *haddr);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, udata_cb_t cb,
				    void *userdata);

/*
 * The guest's layout (x86-64, nokaslr): user space below the canonical
 * hole; the kernel's text, then modules.
 */
#define USER_END	0x0000800000000000ULL
#define MODULES_START	0xffffffffa0000000ULL
#define KERNEL_START	0xffff800000000000ULL

/*
 * The benchmark's clock reads: rdtsc (0f 31) or rdtscp (0f 01 f9),
 * without prefixes.  Module code reads the clock in pairs, each pair a
 * timed region.
 */
static inline bool is_clock_read(const unsigned char *code, size_t len)
{
	if (len == 2)
		return code[0] == 0x0f && code[1] == 0x31;
	return len == 3 && code[0] == 0x0f && code[1] == 0x01 &&
	       code[2] == 0xf9;
}

/*
 * QEMU 7.2's x86 translator ends a block before an instruction that
 * crosses a page, unless it is the block's first, and translates it again
 * as the first of the next block; the plugin API still lists it, with the
 * bytes read before the translator gave up, as the first block's last.
 * So when a block's successor starts at the address of the block's last
 * instruction and that instruction is longer there, the block's last
 * instruction did not run (ran_short()).  (A rep string instruction,
 * which jumps to itself, starts its successor at its own address too, but
 * with the same length.)
 */
struct tb_shape {
	uint64_t vaddr;
	uint64_t last_vaddr;	/* of its last instruction */
	unsigned int first_size, last_size;
	unsigned int insns;
};

static inline void tb_shape_init(struct tb_shape *s,
				 const struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	struct qemu_plugin_insn *first = qemu_plugin_tb_get_insn(tb, 0);
	struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);

	s->vaddr = qemu_plugin_tb_vaddr(tb);
	s->insns = n;
	s->first_size = qemu_plugin_insn_size(first);
	s->last_vaddr = qemu_plugin_insn_vaddr(last);
	s->last_size = qemu_plugin_insn_size(last);
}

/* Did @prev's last instruction not run, @next running right after it? */
static inline bool ran_short(const struct tb_shape *prev,
			     const struct tb_shape *next)
{
	return prev->insns > 1 && prev->last_vaddr == next->vaddr &&
	       prev->last_size < next->first_size;
}

/*
 * The first lines of both plugins' output, which the harness checks
 * before it reads the counts (harness/profile.py, check_header()).
 */
static inline void write_header(FILE *f, unsigned long long clock_reads,
				unsigned int phases, unsigned int vcpus)
{
	fprintf(f, "# clock_reads %llu\n", clock_reads);
	fprintf(f, "# phases %u\n", phases);
	fprintf(f, "# vcpus %u\n", vcpus);
}

#endif
