/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* x86-64: the syscall numbers the programs name, and where a syscall's
 * number, return slot and a stack's registers are in the saved user
 * registers (struct pt_regs, the ptrace ABI's layout). */
#ifndef SYSDIET_ARCH_X86_BPF_H
#define SYSDIET_ARCH_X86_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "../bits.bpf.h"

#define NR_SELECT 23 /* 0: none on this architecture */
#define NR_RT_SIGPROCMASK 14
#define NR_RT_SIGRETURN 15
#define NR_EXECVE 59
#define NR_EXIT 60
#define NR_EXIT_GROUP 231
#define NR_PSELECT6 270
#define NR_PPOLL 271
#define NR_EXECVEAT 322

/* The calls that make a task: a new task's return from one of them, with
 * 0, is the parent's call, not its own. 1 or 0, without a branch (see
 * bits.bpf.h). */
static __always_inline __u64 nr_is_fork(long nr)
{
	return is_zero(nr - 56 /* clone */) | is_zero(nr - 57 /* fork */) | is_zero(nr - 58 /* vfork */) |
	       is_zero(nr - 435 /* clone3 */);
}

#ifndef ENOSYS
#define ENOSYS 38
#endif
#define TS_COMPAT 0x0002 /* thread_info.status: an i386 syscall is active */

/* The syscall number in a syscall tracepoint's registers (-1: rt_sigreturn
 * restored them). */
static __always_inline long regs_syscall_nr(struct pt_regs *regs)
{
	return regs->orig_ax;
}

/* The number of the syscall a task is in, by the user registers it saved
 * at its last entry to the kernel; -1 if that entry was no syscall or the
 * syscall returned. A running syscall's return slot holds -ENOSYS (an
 * exception or interrupt has no syscall number, but a page fault's error
 * code is in the number's slot, hence both). `u` is not a BTF pointer
 * (bpf_task_pt_regs), so it is read with probes. */
static __always_inline long regs_running_syscall(struct pt_regs *u)
{
	long nr = -1, ret = 0;

	bpf_probe_read_kernel(&nr, sizeof(nr), &u->orig_ax);
	bpf_probe_read_kernel(&ret, sizeof(ret), &u->ax);
	return ret == -ENOSYS ? nr : -1;
}

/* Whether a task's own BTF-typed registers are those of a running
 * syscall (its exit or exit_group, which never return). */
static __always_inline bool regs_in_syscall_btf(struct pt_regs *u)
{
	return (long)u->orig_ax >= 0 && (long)u->ax == -ENOSYS;
}

/* Whether a task's own BTF-typed registers are those an interrupt saved
 * when it found the task running its own code, or a fault's from it:
 * both set orig_ax to -1. */
static __always_inline bool regs_interrupted_user_btf(struct pt_regs *u)
{
	return (long)u->orig_ax < 0;
}

/* Whether the task is in a syscall made through the i386 entry; `probe`:
 * `t` is no BTF pointer (a legacy kernel's current task). */
static __always_inline bool task_in_compat_syscall(struct task_struct *t, const bool probe)
{
	return (probe ? BPF_CORE_READ(t, thread_info.status) : t->thread_info.status) & TS_COMPAT;
}

/* Where a task's user registers are saved, for kernels without
 * bpf_task_pt_regs (5.15): at the top of its kernel stack, THREAD_SIZE
 * (16 KiB, without KASAN, as distributions build) above its base. */
#define THREAD_SIZE (4096 << 2)

static __always_inline struct pt_regs *task_user_regs(struct task_struct *t)
{
	void *stack = BPF_CORE_READ(t, stack);

	return stack ? (struct pt_regs *)(stack + THREAD_SIZE) - 1 : NULL;
}

/* Whether a perf event's sample interrupted user mode: the ring in the low
 * bits of cs. The context's registers are bpf_user_pt_regs_t (struct
 * pt_regs, at offset 0), and the context allows only 8-byte loads of them:
 * cs is read as the whole 8-byte slot 17, at a fixed place, not through
 * vmlinux.h, where kernels with FRED (6.9) split the slot into a 2-byte cs
 * and other fields, a size that kernels without it cannot relocate. */
static __always_inline bool perf_sample_in_user_mode(struct bpf_perf_event_data *ctx)
{
	return *(volatile __u64 *)((void *)ctx + 17 * sizeof(__u64)) & 3;
}

/* What a stack sample needs to unwind from: the instruction pointer, the
 * stack pointer and the frame pointer; a call leaves its return address
 * on the stack, in no link register. */
#define REGS_IP(regs) ((regs)->ip)
#define REGS_SP(regs) ((regs)->sp)
#define REGS_FP(regs) ((regs)->bp)
#define REGS_LR(regs) 0

#endif
