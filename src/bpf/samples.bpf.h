/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Stack samples for call sites, on a budget in time per thread. */
#ifndef SYSDIET_SAMPLES_BPF_H
#define SYSDIET_SAMPLES_BPF_H

#include "state.bpf.h"
#include "arguments.bpf.h"

/* Sends the user registers and the top of the user stack, read a page at a
 * time so that a stack ending within STACK_BYTES still copies. */
static __always_inline void take_sample(struct task_state *ts, struct pt_regs *regs,
					struct call *c, __u64 now, __u64 period)
{
	struct stack_sample *e;
	__u64 sp = REGS_SP(regs), off = 0, len;
	int i;

	e = bpf_ringbuf_reserve(&samples, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_SAMPLES_DROPPED, 1);
		return;
	}
	e->tgid = ts->tgid;
	e->tid = (__u32)bpf_get_current_pid_tgid();
	e->nr = c->nr;
	e->flags = 0;
	e->period = period;
	e->ns = latency ? c->ns : 0;
	e->time_ns = now;
	e->fd = c->kind == ARG_NONE ? 0 : c->fd;
	e->path_hash = c->kind == ARG_NONE ? 0 : c->path_hash;
	e->ip = REGS_IP(regs);
	e->sp = sp;
	e->fp = REGS_FP(regs);
	e->lr = REGS_LR(regs);
	for (i = 0; i < STACK_BYTES / 4096 + 1; i++) {
		if (off > STACK_BYTES - 4096)
			break;
		len = 4096 - ((sp + off) & 4095);
		if (bpf_probe_read_user(e->stack + off, len, (void *)(sp + off)))
			break;
		off += len;
	}
	e->stack_len = off;
	e->_pad = 0;
	/* Wake the reader in batches; it also polls on a timer. */
	bpf_ringbuf_submit(e, wakeup_past(&samples, sample_wakeup_bytes));
}

/* A sample every `gap` calls of the thread on average (random gaps, so
 * that a program's rhythm cannot alias with them), the gap adapting to a
 * budget in time: counts stay exact, samples only share them out. Each
 * sample weighs the calls since the previous one. */
static __always_inline void maybe_sample(struct task_state *ts, struct pt_regs *regs, struct call *c)
{
	__u64 gap = ts->sample_gap ?: sample_first_gap;
	__u64 now, dt, seen, doubles, halves;

	ts->since_sample++;
	if (ts->sample_left > 1) {
		ts->sample_left--;
		return;
	}
	/* After these the registers are not the call site's: try the next. */
	if (c->nr == NR_EXECVE || c->nr == NR_EXECVEAT || c->nr == NR_RT_SIGRETURN)
		return;
	now = bpf_ktime_get_ns();
	dt = now - ts->last_sample_ns;
	/* The gap doubles when samples come too often, halves when too
	 * seldom; without a branch (bits.bpf.h), so that take_sample is
	 * verified once, not once for each way the gap went. */
	seen = 1 ^ is_zero(ts->last_sample_ns);
	doubles = seen & below(dt, sample_interval_ns / 2) & below(gap, MAX_GAP);
	halves = seen & (doubles ^ 1) & below(sample_interval_ns * 2, dt) & below(1, gap);
	gap = pick(doubles, gap << 1, pick(halves, gap >> 1, gap));
	take_sample(ts, regs, c, now, ts->since_sample);
	ts->since_sample = 0;
	ts->last_sample_ns = now;
	ts->sample_gap = gap;
	/* Between gap/2 and 3*gap/2: random enough that no rhythm of the
	 * program aliases with it, narrow enough to keep weights even. */
	ts->sample_left = pick(below(1, gap), gap / 2 + 1 + bpf_get_prandom_u32() % gap, 1);
}

#endif
