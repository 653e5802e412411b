// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The live threads' states, in one read: a task iterator that writes each
 * thread's id, name and state (its slot's or its task storage's), for the
 * threads that have one. User space would otherwise walk /proc and look
 * each thread up through a pidfd of its own (three syscalls a thread,
 * traced or not, every snapshot of a whole-host run). Loaded beside
 * syscount.bpf.c's set, with its `states` and `state_slots`. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "syscount.h"
#include "states.bpf.h"

SEC("iter/task")
int live_states(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct live_head head = {};
	struct state_slot *slot;
	struct task_state *ts;

	if (!task)
		return 0;
	slot = slot_of_tid(task->pid);
	if (slot && slot_holds(slot, task->pid, task->start_time))
		ts = &slot->s;
	else
		ts = bpf_task_storage_get(&states, task, 0, 0);
	if (!ts || ts->exited || ts->state == TARGET_PENDING_EXEC)
		return 0;
	head.tid = BPF_CORE_READ(task, pid);
	BPF_CORE_READ_STR_INTO(&head.comm, task, comm);
	bpf_seq_write(seq, &head, sizeof(head));
	bpf_seq_write(seq, ts, sizeof(*ts));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
