// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The floor: syscall hooks that do nothing. What a program that traces
 * syscalls at all costs every task on the host; bench/overhead measures
 * sysdiet's own work above them. User space picks which to load. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* Each hook reads the clock and nothing else: the least any tracer that
 * times each call exactly (strace -c -w, --latency) can cost. */
const volatile __u8 read_clock = 0;

SEC("tp_btf/sys_enter")
int BPF_PROG(floor_enter)
{
	if (read_clock)
		bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(floor_exit)
{
	if (read_clock)
		bpf_ktime_get_ns();
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
