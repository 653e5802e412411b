/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The architecture's facts, chosen by the target the programs are built
 * for (libbpf-cargo passes -D__TARGET_ARCH_<arch>): each header gives the
 * same names. */
#ifndef SYSDIET_ARCH_BPF_H
#define SYSDIET_ARCH_BPF_H

#if defined(__TARGET_ARCH_x86)
#include "arch/x86.bpf.h"
#elif defined(__TARGET_ARCH_arm64)
#include "arch/arm64.bpf.h"
#else
#error "sysdiet's BPF programs know x86-64 and arm64 only"
#endif

#include <bpf/bpf_tracing.h>

/* The i-th argument of the syscall whose user registers `regs` are. */
static __always_inline __u64 syscall_arg(struct pt_regs *regs, __u8 i)
{
	switch (i) {
	case 0: return PT_REGS_PARM1_SYSCALL(regs);
	case 1: return PT_REGS_PARM2_SYSCALL(regs);
	case 2: return PT_REGS_PARM3_SYSCALL(regs);
	case 3: return PT_REGS_PARM4_SYSCALL(regs);
	case 4: return PT_REGS_PARM5_SYSCALL(regs);
	default: return PT_REGS_PARM6_SYSCALL(regs);
	}
}

#endif
