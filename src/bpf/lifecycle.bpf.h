/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Following the targets' lives: a new task of a target is a target
 * (fork), a held child starts counting at its exec, a signal handler makes
 * the known mask stale, and an exiting thread sends its counts and cached
 * argument keys to user space. syscount.bpf.c's programs on those
 * tracepoints call these. */
#ifndef SYSDIET_LIFECYCLE_BPF_H
#define SYSDIET_LIFECYCLE_BPF_H

#include "state.bpf.h"
#include "arguments.bpf.h"

/* 1 if it made the child a target, else 0. */
static __always_inline int follow_fork(struct task_struct *parent, struct task_struct *child, const bool legacy)
{
	struct task_state *pts, *cts;

	pts = state_of(parent, parent->pid, false, legacy);
	if (!pts || pts->state != TARGET_ACTIVE)
		return 0;
	/* Threads and processes alike: every new task gets its own state. */
	cts = state_of(child, child->pid, true, legacy);
	if (!cts) {
		count_lost(LOST_NO_TASK_STORAGE, 1);
		return 0;
	}
	cts->state = TARGET_FORKED;
	__sync_fetch_and_add(&targets_forked, 1);
	note_task(cts, child, child->tgid != parent->tgid ? parent->tgid : BPF_CORE_READ(parent, real_parent, tgid));
	cts->mask = child->blocked.sig[0];
	cts->mask_known = 1;
	return 1;
}

/* The new program: the file it runs, and its environment as exec laid it
 * out on its stack. */
static __always_inline void send_exec(struct task_struct *p, struct task_state *ts, struct linux_binprm *bprm,
				      const bool backup)
{
	__u32 slot = backup;
	struct exec_record *r = bpf_map_lookup_elem(&exec_scratch, &slot);
	__u64 start = BPF_CORE_READ(p, mm, env_start), end = BPF_CORE_READ(p, mm, env_end);
	__u64 len = end > start ? end - start : 0;

	if (!r)
		return;
	r->kind = RECORD_EXEC;
	r->tgid = p->tgid;
	r->exe = ts->exe;
	if (bpf_probe_read_kernel_str(r->exe_name, sizeof(r->exe_name), BPF_CORE_READ(bprm, interp)) < 0)
		r->exe_name[0] = 0;
	r->cut = len > ENV_BYTES - 1 ? ENV_CUT : ENV_WHOLE;
	if (len > ENV_BYTES - 1)
		len = ENV_BYTES - 1;
	len &= ENV_BYTES - 1;
	if (len && bpf_probe_read_user(r->env, len, (void *)start)) {
		len = 0;
		r->cut = ENV_UNREAD;
	}
	r->len = len;
	if (bpf_ringbuf_output(&strings, r, offsetof(struct exec_record, env) + len,
			       wakeup_past(&strings, strings_wakeup_bytes)))
		count_lost(LOST_EXEC, 1);
}

/* A thread other than its process's leader that execs takes the leader's
 * tid and start time (de_thread): a state in the slot of its old tid moves
 * to its new tid's slot, or to its task storage if that is not free (a
 * legacy one, to its new tid's key). The exec hook and its backup both
 * call this before anything looks the state up; the second finds nothing
 * to move. */
static __always_inline void follow_tid_change(struct task_struct *p, __u32 old_pid, const bool legacy)
{
	struct state_slot *from, *to;
	struct task_state *ts;
	struct tick_count *tc;
	__u32 pid = p->pid;

	if (old_pid == pid)
		return;
	/* The legacy maps are keyed by tid: the entries move to the new one. */
	if (legacy) {
		ts = bpf_map_lookup_elem(&thread_states, &old_pid);
		if (!ts)
			return;
		if (bpf_map_update_elem(&thread_states, &pid, ts, BPF_ANY))
			count_lost(LOST_NO_TASK_STORAGE, 1);
		tc = bpf_map_lookup_elem(&thread_ticks, &old_pid);
		if (tc && bpf_map_update_elem(&thread_ticks, &pid, tc, BPF_ANY))
			count_lost(LOST_NO_TASK_STORAGE, 1);
		bpf_map_delete_elem(&thread_states, &old_pid);
		bpf_map_delete_elem(&thread_ticks, &old_pid);
		return;
	}
	from = slot_of_tid(old_pid);
	/* The old tid was this thread's until now: a slot tagged with it is its
	 * own (a start time it no longer has). */
	if (!from || from->tid != old_pid || from->s.tgid != p->tgid)
		return;
	to = slot_of_tid(pid);
	if (!to || !claim_slot(to, pid, p->start_time, &from->s)) {
		ts = stored_state_made(p);
		if (ts)
			bpf_probe_read_kernel(ts, sizeof(*ts), &from->s);
		else
			count_lost(LOST_NO_TASK_STORAGE, 1);
	}
	free_slot(from);
}

static __always_inline int follow_exec(struct task_struct *p, struct linux_binprm *bprm, const bool legacy,
				       const bool backup)
{
	struct task_state *ts = state_of(p, p->pid, false, legacy);

	if (!ts)
		return 0;
	/* A held child's time counts from here too. */
	if (legacy && ts->state != TARGET_ACTIVE)
		drop_legacy_ticks(p->pid);
	/* For sched_process_exec_backup: this exec is done (the mark is the
	 * thread's own, as sys_exit's is). */
	if (!legacy && !backup && backup_hook)
		ts->exec_hooked = 1;
	/* A held child counts from here: its execve is counted at its exit. */
	ts->state = TARGET_ACTIVE;
	ts->failures_seen = 0; /* the new program's own */
	note_task(ts, p, BPF_CORE_READ(p, real_parent, tgid));
	send_exec(p, ts, bprm, backup);
	return 0;
}

/* A handler runs with another mask: the one last seen is stale. */
static __always_inline int forget_mask(const bool legacy)
{
	struct task_state *ts = state_of(current_task(legacy), legacy_tid(legacy), false, legacy);

	if (ts)
		ts->mask_known = 0;
	return 0;
}

struct exit_ctx {
	struct task_state *ts;
	struct exit_record *rec;
	__u32 tid;
	__u64 calls;
};

/* Sends one cached argument key's pending calls. */
static long send_slot(__u32 idx, struct exit_ctx *x)
{
	__u64 i = idx;
	struct slot_record r = { .kind = RECORD_SLOT, .tgid = x->ts->tgid, .tid = x->tid };
	struct arg_slot *s;

	barrier_var(i);
	if (i >= ARG_SLOTS)
		return 1;
	s = &x->ts->slots[i];
	if (!s->used || !s->calls)
		return 0;
	r.slot = *s;
	if (bpf_ringbuf_output(&exits, &r, sizeof(r), wakeup_past(&exits, exits_wakeup_bytes)))
		count_lost(LOST_EXIT_RECORDS, s->calls);
	return 0;
}

/* Copies the thread's i-th syscall's counts into the record, packed;
 * 1 past the last one it made. */
static __always_inline long pack(__u32 i, struct exit_ctx *x)
{
	struct exit_record *rec = x->rec;
	struct sys_val *v;
	__u64 at = i, n = rec->entries;

	/* One register each, so that the checks bound what is indexed. */
	barrier_var(at);
	barrier_var(n);
	if (at >= THREAD_SYSCALLS || at >= x->ts->syscalls_used || n >= THREAD_SYSCALLS)
		return 1;
	v = &x->ts->stats[at];
	rec->e[n].nr = x->ts->stat_nr[at];
	rec->e[n].v = *v;
	rec->entries = n + 1;
	x->calls += v->calls;
	return 0;
}

/* pack() as bpf_loop calls it. */
static long pack_entry(__u32 i, struct exit_ctx *x)
{
	return pack(i, x);
}

/* The syscall an exiting task is in, by its saved user registers: exit
 * or exit_group, which never return (-1 for none). */
static __always_inline long exiting_syscall(struct task_struct *p, const bool legacy)
{
	struct pt_regs *regs;

	if (legacy) {
		regs = task_user_regs(p);
		return regs ? regs_running_syscall(regs) : -1;
	}
	regs = (struct pt_regs *)bpf_task_pt_regs(p);
	return regs && regs_in_syscall_btf(regs) ? regs_syscall_nr(regs) : -1;
}

/* `loops`: the kernel has bpf_loop (5.17); `backup`: the exit hook's
 * backup runs it (its own scratch slot). 1 if it took the thread (a target
 * not sent before), else 0. */
static __always_inline int send_exit(struct task_struct *p, const bool legacy, const bool loops, const bool backup)
{
	struct exit_ctx x = { .tid = p->pid };
	struct task_state *ts = state_of(p, x.tid, false, legacy);
	struct state_slot *home;
	struct exit_record *rec;
	__u32 slot = backup, i;
	/* 64-bit: checked, the size is what the ring's output is given, not a
	 * copy cut to 32 bits whose bound the verifier does not learn. */
	__u64 size, n;
	long nr;

	if (!ts || ts->exited)
		return 0;
	if (legacy)
		take_legacy_ticks(ts, x.tid);
	/* exit and exit_group never return: count the one it is in. */
	if (ts->state == TARGET_ACTIVE && !stopped) {
		nr = exiting_syscall(p, legacy);
		if ((nr == NR_EXIT || nr == NR_EXIT_GROUP) && !task_in_compat_syscall(p, false) &&
		    specs[nr].traced) {
			struct sys_val *v;

			i = syscall_slot(ts, nr);
			if (i < THREAD_SYSCALLS)
				ts->stats[i].calls++;
			else if ((v = spilled(ts, nr)))
				v->calls++;
			ts->seq++;
		}
	}
	ts->exited = 1;
	__sync_fetch_and_add(&targets_ended, 1);
	rec = bpf_map_lookup_elem(&exit_scratch, &slot);
	if (!rec)
		goto out;
	x.ts = ts;
	x.rec = rec;
	rec->kind = RECORD_EXIT;
	rec->tgid = p->tgid;
	rec->tid = x.tid;
	rec->ppid = ts->ppid;
	rec->exit_code = p->exit_code;
	rec->leader = p->pid == p->tgid;
	rec->entries = 0;
	bpf_probe_read_kernel_str(rec->comm, sizeof(rec->comm), p->comm);
	rec->cgroup = ts->cgroup;
	rec->exe = ts->exe;
	rec->user_ticks = ts->user_ticks;
	__builtin_memcpy(rec->mask_calls, ts->mask_calls, sizeof(rec->mask_calls));
	__builtin_memcpy(rec->errnos, ts->errnos, sizeof(rec->errnos));
	rec->errnos_lost = ts->errnos_lost;
	if (loops)
		bpf_loop(THREAD_SYSCALLS, pack_entry, &x, 0);
	else
		for (i = 0; i < THREAD_SYSCALLS; i++)
			if (pack(i, &x))
				break;
	n = rec->entries;
	if (n > THREAD_SYSCALLS)
		n = THREAD_SYSCALLS;
	size = sizeof(*rec) - sizeof(rec->e) + n * sizeof(rec->e[0]);
	if (size > sizeof(*rec))
		goto out;
	if (bpf_ringbuf_output(&exits, rec, size, wakeup_past(&exits, exits_wakeup_bytes)))
		count_lost(LOST_EXIT_RECORDS, x.calls);
	/* After the record: user space files a thread's slots where its
	 * record went. */
	if (loops)
		bpf_loop(ARG_SLOTS, send_slot, &x, 0);
	else
		for (i = 0; i < ARG_SLOTS; i++)
			send_slot(i, &x);
out:
	/* A legacy thread's state is no task's storage: it goes now. A slot
	 * is free for the next thread of its tid's low bits. A stored state
	 * goes too, counted out: the one just sent, or one user space gave
	 * the thread since its state took its slot (a thread it armed as a
	 * fork made it a target), which the backup would send. */
	if (legacy) {
		bpf_map_delete_elem(&thread_states, &x.tid);
		bpf_map_delete_elem(&thread_ticks, &x.tid);
	} else {
		if ((home = slot_of_tid(x.tid)) && slot_holds(home, x.tid, p->start_time))
			free_slot(home);
		stored_state_gone(p);
	}
	return 1;
}

#endif
