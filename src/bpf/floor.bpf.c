// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The floor: syscall hooks that do nothing. What a program that traces
 * syscalls at all costs every task on the host; bench/overhead measures
 * sysdiet's own work above them. User space picks which to load. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "arch.bpf.h"

#define FLOOR_SYSCALLS 512
#define FLOOR_PATH_LEN 256

/* Each hook reads the clock and nothing else: the least any tracer that
 * times each call exactly (strace -c -w, --latency) can cost. */
const volatile __u8 read_clock = 0;
/* sys_exit reads a path-taking syscall's path (1 + the index of its path
 * argument; 0: none) and nothing else: the least any tracer that counts
 * calls per path exactly can cost, since the path is in the caller's
 * memory and may change between calls. */
const volatile __u8 path_arg[FLOOR_SYSCALLS] = {};
/* sys_exit finds the calling thread's state in task storage (made at its
 * first call), as sysdiet's sys_exit does before it counts anything: the
 * least a tracer that keeps per-thread state there can cost. */
const volatile __u8 thread_state = 0;

/* The state: a count of the thread's calls, so that it is written. Made
 * only with thread_state (it needs 5.11). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} floor_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, char[FLOOR_PATH_LEN]);
} floor_path SEC(".maps");

SEC("tp_btf/sys_enter")
int BPF_PROG(floor_enter)
{
	if (read_clock)
		bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(floor_exit, struct pt_regs *regs)
{
	long id = regs_syscall_nr(regs);
	__u32 zero = 0;
	__u64 arg;
	char *buf;

	if (read_clock)
		bpf_ktime_get_ns();
	if (thread_state) {
		__u64 *calls = bpf_task_storage_get(&floor_states, bpf_get_current_task_btf(), 0,
						    BPF_LOCAL_STORAGE_GET_F_CREATE);

		if (calls)
			(*calls)++;
	}
	if (id < 0 || id >= FLOOR_SYSCALLS || !path_arg[id])
		return 0;
	buf = bpf_map_lookup_elem(&floor_path, &zero);
	if (!buf)
		return 0;
	arg = path_arg[id] == 1 ? PT_REGS_PARM1_SYSCALL(regs) :
	      path_arg[id] == 2 ? PT_REGS_PARM2_SYSCALL(regs) : PT_REGS_PARM3_SYSCALL(regs);
	bpf_probe_read_user_str(buf, FLOOR_PATH_LEN, (void *)arg);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
