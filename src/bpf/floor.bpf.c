// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The floor: syscall hooks that do nothing. What a program that traces
 * syscalls at all costs every task on the host; bench/overhead measures
 * sysdiet's own work above them. User space picks which to load. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "arch.bpf.h"
#include "hash.bpf.h"

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
/* sys_exit finds the calling thread's state (made at its first call):
 * STATE_IN_TASK, in task storage, as sysdiet's sys_exit does before it
 * counts anything, the least a tracer that keeps per-thread state there
 * can cost; STATE_BY_PID, in an array indexed by the thread's id, each
 * entry told from a reused id's by its task's start time: found without a
 * helper call (the verifier inlines an array's lookup). */
enum { STATE_NONE, STATE_IN_TASK, STATE_BY_PID };
const volatile __u8 thread_state = STATE_NONE;
/* sys_exit, having read a path, adds 1 to a word of floor_keys picked by a
 * hash of the call's key (the path, its dirfd, the syscall, the process):
 * one hash and one word per key, the least any tracer that counts each
 * path in the kernel does (this one does not tell keys that share a word
 * apart). How close together the keys' words are is the table's size:
 * 16 KiB, a group's region of sysdiet's first sightings, or its 8 MiB. */
const volatile __u8 count_keys = 0;
/* The table's words less one (a power of two less one; user space sizes
 * the map to match). */
const volatile __u32 keys_mask = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} floor_keys SEC(".maps");

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
	__type(value, __u64[FLOOR_PATH_LEN / 8]);
} floor_path SEC(".maps");

struct floor_slot {
	__u64 start_time;
	__u64 calls;
};

/* STATE_BY_PID's states: one a thread id (user space sizes it to pid_max). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct floor_slot);
} floor_by_pid SEC(".maps");

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
	long id = regs_syscall_nr(regs), n;
	__u32 zero = 0, at;
	__u64 arg, h, *buf, *count;
	__u8 which;

	if (read_clock)
		bpf_ktime_get_ns();
	if (thread_state == STATE_IN_TASK) {
		__u64 *calls = bpf_task_storage_get(&floor_states, bpf_get_current_task_btf(), 0,
						    BPF_LOCAL_STORAGE_GET_F_CREATE);

		if (calls)
			(*calls)++;
	} else if (thread_state == STATE_BY_PID) {
		struct task_struct *task = bpf_get_current_task_btf();
		__u32 tid = task->pid;
		__u64 start = task->start_time;
		struct floor_slot *slot = bpf_map_lookup_elem(&floor_by_pid, &tid);

		if (slot) {
			if (slot->start_time != start) {
				slot->start_time = start;
				slot->calls = 0;
			}
			slot->calls++;
		}
	}
	if (id < 0 || id >= FLOOR_SYSCALLS || !path_arg[id])
		return 0;
	buf = bpf_map_lookup_elem(&floor_path, &zero);
	if (!buf)
		return 0;
	which = path_arg[id];
	n = bpf_probe_read_user_str(buf, FLOOR_PATH_LEN, (void *)syscall_arg(regs, which - 1));
	if (!count_keys || n <= 0)
		return 0;
	/* The argument before the path is an *at call's dirfd. */
	arg = which > 1 ? syscall_arg(regs, which - 2) : 0;
	h = hash_words(buf, FLOOR_PATH_LEN / 8, (n - 1) & (FLOOR_PATH_LEN - 1));
	h ^= (arg * 0x9E3779B97F4A7C15ULL) ^ ((id << 32 | (bpf_get_current_pid_tgid() >> 32)) * 0xC2B2AE3D27D4EB4FULL);
	h ^= h >> 29;
	at = h & keys_mask;
	count = bpf_map_lookup_elem(&floor_keys, &at);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
