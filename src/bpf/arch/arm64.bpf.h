/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* arm64: the syscall numbers the programs name (asm-generic's table), and
 * where a syscall's number and a stack's registers are in the saved user
 * registers (struct pt_regs: user_pt_regs, then orig_x0 and syscallno). */
#ifndef SYSDIET_ARCH_ARM64_BPF_H
#define SYSDIET_ARCH_ARM64_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "../bits.bpf.h"

#define NR_SELECT 0xffffffff /* none on arm64: matches no number */
#define NR_RT_SIGPROCMASK 135
#define NR_RT_SIGRETURN 139
#define NR_EXECVE 221
#define NR_EXIT 93
#define NR_EXIT_GROUP 94
#define NR_PSELECT6 72
#define NR_PPOLL 73
#define NR_EXECVEAT 281

/* The calls that make a task (arm64 has no fork or vfork): a new task's
 * return from one of them, with 0, is the parent's call, not its own. */
static __always_inline __u64 nr_is_fork(long nr)
{
	return is_zero(nr - 220 /* clone */) | is_zero(nr - 435 /* clone3 */);
}

#define TIF_32BIT 22 /* thread_info.flags: an AArch32 task */

/* The syscall number in a syscall tracepoint's registers (-1, NO_SYSCALL:
 * rt_sigreturn restored them). */
static __always_inline long regs_syscall_nr(struct pt_regs *regs)
{
	return regs->syscallno;
}

/* The number of the syscall a task is in, by the user registers it saved
 * at its last entry to the kernel; -1 if that entry was no syscall. Every
 * entry from user mode stores NO_SYSCALL (-1) there first, and only the
 * syscall path stores a number; a syscall that returned leaves it, but a
 * task that runs in the kernel again entered it again. `u` is not a BTF
 * pointer (bpf_task_pt_regs), so it is read with a probe. */
static __always_inline long regs_running_syscall(struct pt_regs *u)
{
	int nr = -1;

	bpf_probe_read_kernel(&nr, sizeof(nr), &u->syscallno);
	return nr;
}

/* Whether a task's own BTF-typed registers are those of a running
 * syscall (its exit or exit_group, which never return). */
static __always_inline bool regs_in_syscall_btf(struct pt_regs *u)
{
	return u->syscallno >= 0;
}

/* Whether a task's own BTF-typed registers are those an interrupt saved
 * when it found the task running its own code, or a fault's from it:
 * they look the same. */
static __always_inline bool regs_interrupted_user_btf(struct pt_regs *u)
{
	return u->syscallno < 0;
}

/* Whether the task is an AArch32 one (its numbers are arm's, not arm64's);
 * `probe`: `t` is no BTF pointer (a legacy kernel's current task). */
static __always_inline bool task_in_compat_syscall(struct task_struct *t, const bool probe)
{
	return ((probe ? BPF_CORE_READ(t, thread_info.flags) : t->thread_info.flags) >> TIF_32BIT) & 1;
}

/* Where a task's user registers are saved, for kernels without
 * bpf_task_pt_regs (5.15): at the top of its kernel stack, THREAD_SIZE
 * (16 KiB with 4 KiB pages and without KASAN, as distributions build)
 * above its base. */
#define THREAD_SIZE (4096 << 2)

static __always_inline struct pt_regs *task_user_regs(struct task_struct *t)
{
	void *stack = BPF_CORE_READ(t, stack);

	return stack ? (struct pt_regs *)(stack + THREAD_SIZE) - 1 : NULL;
}

/* Whether a perf event's sample interrupted user mode: EL0 in the mode
 * bits of pstate (AArch32 user mode too). The context's registers are
 * bpf_user_pt_regs_t (struct user_pt_regs: x0-x30, sp, pc, pstate), read
 * as the whole 8-byte slot 33, as the context allows. */
static __always_inline bool perf_sample_in_user_mode(struct bpf_perf_event_data *ctx)
{
	return (*(volatile __u64 *)((void *)ctx + 33 * sizeof(__u64)) & 0xf) == 0;
}

/* What a stack sample needs to unwind from: the instruction pointer, the
 * stack pointer, the frame pointer (x29) and the link register (x30: a
 * leaf function's caller, which is on no stack). */
#define REGS_IP(regs) ((regs)->pc)
#define REGS_SP(regs) ((regs)->sp)
#define REGS_FP(regs) ((regs)->regs[29])
#define REGS_LR(regs) ((regs)->regs[30])

#endif
