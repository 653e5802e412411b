/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Stack samples for call sites, on a budget in time per thread. */
#ifndef SYSDIET_SAMPLES_BPF_H
#define SYSDIET_SAMPLES_BPF_H

#include "state.bpf.h"
#include "arguments.bpf.h"

/* Bytes copied above the stack's start: an outermost frame's rule may
 * read a word or two past it (the start is argc's address). */
#define STACK_ABOVE_START 256

/* Where a sample is put together, a slot for sys_exit, one for
 * sys_exit_backup (as path_scratch), then sent cut to the stack it holds:
 * a record reserved in the ring whole (16 KiB) would spread a loop's
 * samples, most under 1 KiB, over a fresh part of the ring each, and
 * writing into memory that far off costs more than copying twice. Made
 * only with stack samples. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct stack_sample);
} sample_scratch SEC(".maps");

/* How much of the stack from `sp` up a sample needs: the main thread's
 * frames all lie below its stack's start (where exec left sp), so a
 * shallow stack (a short command's, a loop's) copies its frames, not
 * STACK_BYTES of its arguments and environment. Another thread's stack,
 * or one a program switched to, is elsewhere: STACK_BYTES. */
static __always_inline __u64 stack_wanted(struct task_struct *t, __u64 sp)
{
	/* Probed, not t->mm->start_stack: the verifier looks a BTF pointer
	 * field's trust up by name, a walk of the kernel's whole BTF, at each
	 * state it reaches the load in; a probe costs only the rare sample. */
	__u64 start = BPF_CORE_READ(t, mm, start_stack);
	/* Below the start, or just above it; else it wraps, past STACK_BYTES. */
	__u64 want = start + STACK_ABOVE_START - sp;

	return pick(below(want, STACK_BYTES), want, STACK_BYTES);
}

/* Sends the user registers and the top of the user stack, as much as it
 * needs (stack_wanted), read a page at a time so that a stack ending
 * within STACK_BYTES still copies. */
static __always_inline void take_sample(struct task_state *ts, struct task_struct *t, struct pt_regs *regs,
					struct call *c, __u64 now, __u64 period, const bool legacy)
{
	__u64 sp = REGS_SP(regs), off = 0, len, want = stack_wanted(t, sp);
	__u32 slot = c->scratch & 1;
	struct stack_sample *e = bpf_map_lookup_elem(&sample_scratch, &slot);
	int i;

	if (!e)
		return;
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
		if (off > STACK_BYTES - 4096 || off >= want)
			break;
		len = 4096 - ((sp + off) & 4095);
		/* At most what is wanted, without a branch (each would split
		 * the verifier's walk of the turns after it); the mask keeps
		 * the bound it can see, 1 to 4096, and changes nothing. */
		len = pick(below(want - off, len), want - off, len);
		len = ((len - 1) & 4095) + 1;
		if (bpf_probe_read_user(e->stack + off, len, (void *)(sp + off)))
			break;
		off += len;
	}
	e->stack_len = off;
	e->_pad = 0;
	/* (a bound the verifier can see: the loop copies at most this) */
	if (off > STACK_BYTES)
		off = STACK_BYTES;
	/* Wake the reader in batches; it also polls on a timer. */
	if (bpf_ringbuf_output(&samples, e, offsetof(struct stack_sample, stack) + off,
			       wakeup_past(&samples, sample_wakeup_bytes)))
		count_lost(LOST_SAMPLES_DROPPED, 1);
}

/* A sample every `gap` calls of the thread on average (random gaps, so
 * that a program's rhythm cannot alias with them), the gap adapting to a
 * budget in time: counts stay exact, samples only share them out. Each
 * sample weighs the calls since the previous one. */
static __always_inline void maybe_sample(struct task_state *ts, struct task_struct *t, struct pt_regs *regs, struct call *c,
					 const bool legacy)
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
	take_sample(ts, t, regs, c, now, ts->since_sample, legacy);
	ts->since_sample = 0;
	ts->last_sample_ns = now;
	ts->sample_gap = gap;
	/* Between gap/2 and 3*gap/2: random enough that no rhythm of the
	 * program aliases with it, narrow enough to keep weights even. */
	ts->sample_left = pick(below(1, gap), gap / 2 + 1 + bpf_get_prandom_u32() % gap, 1);
}

#endif
