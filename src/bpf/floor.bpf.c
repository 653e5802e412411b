// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The floor: syscall hooks that do nothing. What a program that traces
 * syscalls at all costs every task on the host; bench/overhead measures
 * sysdiet's own work above it. User space picks which to load. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

SEC("tp_btf/sys_enter")
int BPF_PROG(floor_enter)
{
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(floor_exit)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
