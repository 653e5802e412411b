// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Counts the syscalls of chosen processes, by (process, syscall): exact,
 * and nothing else. `sysdiet bench` uses it to count what a call costs in
 * syscalls, where the full tracer's per-argument work would only slow the
 * loops down. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "tally.h"
#include "maps.bpf.h"


/* The processes to count, by tgid: added (PENDING) before their execve and
 * counted (COUNTING) from it on, so that what ran between fork and exec,
 * racing with the adding, is never counted. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_PROCESSES);
	__type(key, __u32);
	__type(value, __u8);
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_ENTRIES);
	__type(key, struct tally_key);
	__type(value, __u64);
} counts SEC(".maps");

/* Calls not counted because `counts` was full: shown, never silent. */
__u64 lost = 0;

SEC("tp_btf/sys_enter")
int BPF_PROG(tally_enter, struct pt_regs *regs, long id)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct tally_key key = { .tgid = tgid, .nr = (__u32)id };
	static const __u64 zero;
	__u8 *state = bpf_map_lookup_elem(&watched, &tgid);
	__u64 *n;

	if (!state || *state != TALLY_COUNTING)
		return 0;
	n = bpf_map_lookup_or_try_init(&counts, &key, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		__sync_fetch_and_add(&lost, 1);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(tally_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u8 *state = bpf_map_lookup_elem(&watched, &tgid);

	if (state)
		*state = TALLY_COUNTING;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
