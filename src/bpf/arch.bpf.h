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

#endif
