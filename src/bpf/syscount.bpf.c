// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Exact per-syscall accounting of a set of processes, aggregated in the
 * kernel: counts, errors by errno, CPU time, and per-argument fingerprints
 * (paths, fds, byte-count histograms).
 *
 * One hook: everything is counted at sys_exit, where the syscall number
 * (orig_ax) and the arguments are still in the user registers. A traced
 * thread carries its counts and a small cache of argument keys in its task
 * storage, so a call makes one storage lookup and, while its key is cached,
 * no map lookup at all; any other thread leaves after the lookup.
 *
 * Time is CPU time, sampled: a timer on each CPU charges its tick to the
 * syscall the traced thread is in (strace -c semantics). With --latency a
 * second hook at sys_enter measures wall time per call (strace -c -w). */
#include "state.bpf.h"
#include "arguments.bpf.h"
#include "samples.bpf.h"
#include "lifecycle.bpf.h"

/* A call, counted in its syscall's counts. */
static __always_inline void add_call(struct sys_val *sv, const struct call *c)
{
	sv->calls++;
	if (c->ns) {
		sv->ns += c->ns;
		if (c->ns > sv->max_ns)
			sv->max_ns = c->ns;
	}
	if (latency && (c->ns < sv->min_ns || sv->calls == 1))
		sv->min_ns = c->ns;
	if (c->failed)
		sv->errors++;
}

/* A call of a thread with no slot left for its syscall. A function of its
 * own, so that the verifier walks what follows once, not once more for the
 * spill's map value and key. */
static __noinline int spill_call(struct task_state *ts, const struct call *c)
{
	struct sys_val *sv = spilled(ts, c->nr);

	if (sv)
		add_call(sv, c);
	return 0;
}

/* sys_exit, of any variant: `legacy` and `loops` (bpf_loop, 5.17) are
 * constants, so each keeps only its own code. */
static __always_inline int count_exit(struct task_struct *t, struct pt_regs *regs, long ret, const bool legacy,
				      const bool loops, const bool backup)
{
	__u32 tid = legacy_tid(legacy);
	struct task_state *ts = state_of(t, tid, false, legacy);
	struct syscall_spec spec;
	struct call c = {};
	__u64 ticks = 0;
	__u8 in_call;
	__u32 at;
	long id;

	if (!ts && system_wide && !stopped)
		ts = enrol(t, legacy);
	if (!ts)
		return 0;
	/* For sys_exit_backup: this thread's hook ran for this call; or the
	 * backup takes over a call its hook was skipped for. */
	if (backup)
		__sync_fetch_and_add(&backup_runs, 1);
	else if (backup_hook)
		ts->exit_hooked = 1;
	if (stopped)
		return 0;
	/* The time of the call that just ended is its own, counted or not:
	 * taken here so that it never spills into the next one. A legacy
	 * thread's ticks are taken in every state, as on_tick cannot tell. */
	if (legacy)
		ticks = take_legacy_ticks(ts, tid);
	id = regs_syscall_nr(regs);
	if (ts->state == TARGET_FORKED) {
		ts->state = TARGET_ACTIVE;
		/* On x86-64 a new task returns from its fork through this
		 * tracepoint (the parent's call counts it); on arm64 it does
		 * not, and its first exit is its own first call. */
		if (is_zero(ret) & nr_is_fork(id))
			return 0;
	}
	if (ts->state != TARGET_ACTIVE)
		return 0;
	if (!legacy) {
		ticks = ts->ticks;
		if (ticks)
			ts->ticks = 0;
	}
	in_call = ts->in_call;
	if (latency)
		ts->in_call = 0;
	if (task_in_compat_syscall(t, legacy)) {
		count_lost(LOST_COMPAT, 1);
		return 0;
	}
	/* -1: rt_sigreturn, whose registers are the restored ones. Without a
	 * branch, so that the verifier does not walk the rest once for a
	 * known number (each fact it learns here splits its walk). */
	id = pick(is_zero(id + 1), NR_RT_SIGRETURN, id);
	if (id < 0 || id >= MAX_SYSCALLS) {
		count_lost(LOST_NR_OUT_OF_RANGE, 1);
		return 0;
	}
	spec = specs[id];
	if (!spec.traced)
		return 0;
	c.nr = id;
	c.scratch = backup;
	c.kind = spec.kind;
	c.failed = is_error_return(ret);
	if (latency) {
		if (in_call)
			c.ns = bpf_ktime_get_ns() - ts->start_ns;
	} else {
		c.ns = ticks * tick_ns;
	}
	ts->seq++;
	at = syscall_slot(ts, c.nr);
	c.stat_at = at;
	if (at < THREAD_SYSCALLS) {
		/* Read now, before the path: see count_argument. */
		c.last_slot = ts->last_slot[at];
		add_call(&ts->stats[at], &c);
	} else {
		spill_call(ts, &c);
	}
	if (c.failed)
		count_errno(ts, c.nr, -ret);
	if (is_zero(c.nr ^ NR_RT_SIGRETURN)) {
		ts->mask = blocked_signals(t, legacy);
		ts->mask_known = 1;
	}
	switch (c.kind) {
	case ARG_NONE:
		break;
	case ARG_SIGMASK: {
		/* One walk on, not one per class. */
		__u32 cls = forget(ts, classify_mask(ts, t, regs, ret, legacy));

		if (cls < MASK_CLASSES)
			ts->mask_calls[cls]++;
		c.kind = ARG_NONE;
		break;
	}
	case ARG_PATH: {
		/* Read into this CPU's record, not the thread's storage: a
		 * per-CPU map value costs the kernel's hardened-usercopy check
		 * less than a slab object does. */
		__u32 slot = backup;
		void *p = (void *)syscall_arg(regs, spec.arg);
		struct path_record *r = p ? bpf_map_lookup_elem(&path_scratch, &slot) : NULL;
		long n = r ? bpf_probe_read_user_str(r->path, PATH_LEN, p) : -1;

		/* Older kernels (6.1 and 5.10, seen) read the empty path (fstat's "") as 0
		 * bytes, not 1: a string still, its NUL written. */
		n += is_zero(n);
		/* The argument before the path of an *at call is its dirfd. */
		c.fd = spec.arg > 0 ? (int)syscall_arg(regs, spec.arg - 1) : -1;
		if (!p) {
			c.path_hash = PATH_HASH_NULL;
		} else if (!r || n <= 0) {
			count_lost(LOST_PATH_UNREADABLE, 1);
			c.path_hash = PATH_HASH_UNREADABLE; /* counted together */
		} else {
			c.path_hash = legacy ? path_hash_legacy(r, n - 1) : hash_path(r, n - 1);
			r->len = n;
			/* A full buffer holds a 255-byte path, or the start of a
			 * longer one: the byte after says which. A cut path is
			 * marked by a length past the buffer. */
			if (n == PATH_LEN && path_goes_on(p)) {
				count_lost(LOST_PATH_TRUNCATED, 1);
				r->len = PATH_LEN + 1;
			}
		}
		break;
	}
	case ARG_BRK: {
		__u64 now = (__u64)ret;

		c.fd = !syscall_arg(regs, 0) ? BRK_QUERY : now == ts->brk ? BRK_SAME :
		       now < ts->brk ? BRK_SHRINK : BRK_GROW;
		ts->brk = now;
		break;
	}
	case ARG_FD_IO:
		c.req_bucket = size_bucket(syscall_arg(regs, spec.size_arg));
		c.ret_bucket = size_bucket(ret < 0 ? 0 : ret);
		/* fall through */
	case ARG_FD:
	case ARG_CLOCK:
		c.fd = (int)syscall_arg(regs, spec.arg);
		break;
	default: /* the timeouts */
		if (latency)
			c.fd = ts->timeout_class;
		else
			c.fd = classify_timeout(spec.kind, syscall_arg(regs, spec.arg));
		if (!latency && c.fd == TIMEOUT_ZERO && ret == 0 &&
		    (c.nr == NR_SELECT || c.nr == NR_PSELECT6 || c.nr == NR_PPOLL))
			c.fd = TIMEOUT_RAN_OUT;
		break;
	}
	/* One call site: each inlined copy would be verified on its own;
	 * and one walk of it, not one per kind. */
	c.kind = forget(ts, c.kind);
	if (c.kind != ARG_NONE)
		count_argument(ts, &c, legacy, loops);
	if (sample_stacks)
		maybe_sample(ts, t, regs, &c, legacy);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	/* One helper call for both: on a CPU that mitigates returns, each
	 * call is a few nanoseconds of every syscall. */
	struct task_struct *t = bpf_get_current_task_btf();

	if (skipped_for_test(t))
		return 0;
	return count_exit(t, regs, ret, false, true, false);
}

/* Where a syscall's hook can be preempted (7.x's lazy preemption, or full),
 * another task's syscall end on that CPU finds it still running, and the
 * kernel skips it there (its recursion_misses). This second hook, attached
 * after sys_exit, counts such a call: its thread's sys_exit did not run since
 * its last backup (count_exit marks the thread's state, this takes the mark
 * off). A thread's own two hooks run in turn, whatever preempts them or
 * wherever it migrates between them, so a call is never counted twice. */
SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_backup, struct pt_regs *regs, long ret)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct task_state *ts = state_of(t, 0, false, false);

	if (ts && ts->exit_hooked) {
		ts->exit_hooked = 0;
		return 0;
	}
	/* Not traced: sys_exit enrols every other task of a host. */
	if (!ts && !system_wide)
		return 0;
	return count_exit(t, regs, ret, false, true, true);
}

/* The bounded variant's (5.15 and 5.16: task storage, no bpf_loop): the
 * current programs but for this and sched_process_exit_bounded. */
SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_bounded, struct pt_regs *regs, long ret)
{
	return count_exit(current_task(false), regs, ret, false, false, false);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_legacy, struct pt_regs *regs, long ret)
{
	return count_exit(current_task(true), regs, ret, true, false, false);
}

/* --latency only: stamps the call's start. */
static __always_inline int stamp_entry(struct pt_regs *regs, long id, const bool legacy)
{
	struct task_state *ts = state_of(current_task(legacy), legacy_tid(legacy), false, legacy);

	if (!ts)
		return 0;
	if (id >= 0 && id < MAX_SYSCALLS && specs[id].kind >= ARG_TIMEOUT_MS &&
	    specs[id].kind <= ARG_TIMEOUT_PTR)
		ts->timeout_class = classify_timeout(specs[id].kind, syscall_arg(regs, specs[id].arg));
	ts->in_call = 1;
	ts->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	return stamp_entry(regs, id, false);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter_legacy, struct pt_regs *regs, long id)
{
	return stamp_entry(regs, id, true);
}

/* A CPU-clock tick on some CPU: charged to the syscall the traced thread
 * running there is in (paid at its exit), or to its user time. */
static __always_inline void charge_tick(struct bpf_perf_event_data *ctx, struct task_struct *t,
					__u64 *ticks, __u64 *user_ticks, const bool legacy)
{
	__u64 weight = tick_weight;
	struct pt_regs *u;
	long nr;

	if (perf_sample_in_user_mode(ctx)) {
		(*user_ticks) += weight;
		return;
	}
	/* In the kernel: in a syscall if the saved user registers say so. */
	u = legacy ? task_user_regs(t) : (struct pt_regs *)bpf_task_pt_regs(t);
	nr = u ? regs_running_syscall(u) : -1;
	if (nr >= 0 && nr < MAX_SYSCALLS)
		(*ticks) += weight;
}

SEC("perf_event")
int on_tick(struct bpf_perf_event_data *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct task_state *ts = found_state(t);

	if (ts && ts->state == TARGET_ACTIVE)
		charge_tick(ctx, t, &ts->ticks, &ts->user_ticks, false);
	return 0;
}

/* The same on legacy kernels, into the thread's tick_count: its state's
 * map is no place for a perf_event program there, and bpf_task_pt_regs is
 * not there (5.15). A count that was empty and is not now is one more
 * pending (take_legacy_ticks). */
SEC("perf_event")
int on_tick_legacy(struct bpf_perf_event_data *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct tick_count *tc = bpf_map_lookup_elem(&thread_ticks, &tid);
	bool empty;

	if (!tc)
		return 0;
	empty = !(tc->ticks | tc->user_ticks);
	charge_tick(ctx, current_task(true), &tc->ticks, &tc->user_ticks, true);
	if (empty && (tc->ticks | tc->user_ticks))
		__sync_fetch_and_add(&legacy_ticks_pending, 1);
	return 0;
}

/* The kernel's own tick, once a run is past its first second (the whole
 * host's past its fine start): seen, then charged as on_tick charges a
 * tick of the CPU clock, which user space stops in between (ticks.rs).
 * The kernel ticks a busy CPU anyway, so this costs no interrupt of ours.
 * Its hrtimer is told by its handler. */
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(kernel_tick, struct hrtimer *timer)
{
	__u64 fn = kernel_tick_fn, weight;
	struct task_struct *t;
	struct task_state *ts;
	struct pt_regs *u;

	if (!fn || (__u64)timer->function != fn)
		return 0;
	weight = kernel_tick_weight;
	if (!weight) {
		__sync_fetch_and_add(&kernel_ticks_seen, 1);
		return 0;
	}
	t = bpf_get_current_task_btf();
	ts = found_state(t);
	if (!ts || ts->state != TARGET_ACTIVE)
		return 0;
	/* The thread's own registers say whether the tick found it in a
	 * syscall, or in its own code or a fault of it (its user time, where
	 * on_tick charges a fault's tick to nothing); else it was in the
	 * kernel past a syscall's end (its exit's work, ours among it),
	 * which on_tick does not charge either. */
	u = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!u)
		return 0;
	if (regs_in_syscall_btf(u))
		ts->ticks += weight;
	else if (regs_interrupted_user_btf(u))
		ts->user_ticks += weight;
	return 0;
}

/* The kernel's tick handler's address, for kernel_tick_fn: run once by
 * user space (its ctx is the answer); 0 when found. The high-resolution
 * tick's handler is tick_sched_timer before 6.8, tick_nohz_highres_handler
 * in 6.8 (Ubuntu 24.04's), and tick_nohz_handler since 6.9; before 6.9 a
 * tick_nohz_handler is the low-resolution one's (no hrtimer), so it is
 * looked up last. */
struct kernel_tick_answer {
	__u64 fn;
};

SEC("syscall")
int find_tick_fn(struct kernel_tick_answer *answer)
{
	static const char before_6_8[] = "tick_sched_timer";
	static const char in_6_8[] = "tick_nohz_highres_handler";
	static const char handler[] = "tick_nohz_handler";
	__u64 fn = 0;

	if (bpf_kallsyms_lookup_name(before_6_8, sizeof(before_6_8), 0, &fn) &&
	    bpf_kallsyms_lookup_name(in_6_8, sizeof(in_6_8), 0, &fn) &&
	    bpf_kallsyms_lookup_name(handler, sizeof(handler), 0, &fn))
		return 1;
	answer->fn = fn;
	return 0;
}

/* The logged keys' entries (state.bpf.h), one a turn. */
static long copy_one_logged(__u32 i, void *unused)
{
	struct arg_val *v;
	__u64 *word = NULL;
	__u32 slot;

	i &= ARG_KEYS_LOGGED - 1; /* bpf_loop stops at the log's count */
	v = bpf_map_lookup_elem(&arg_stats, &arg_keys_logged[i]);
	logged_found[i] = !!v;
	if (!v)
		return 0;
	logged_vals[i] = *v;
	if (v->counting) {
		slot = v->first_slot;
		word = bpf_map_lookup_elem(&first_calls, &slot);
	}
	logged_words[i] = word ? *word : 0;
	return 0;
}

/* Run by user space once counting has stopped (BPF_PROG_TEST_RUN), never
 * attached: copies the entries of the keys the programs logged into
 * logged_vals. 1 when the log does not hold every key made: the read-out
 * walks the table then. A raw tracepoint's, so that it runs where
 * sleepable programs could not use the table (before 6.1). */
SEC("raw_tp")
int copy_logged(void *ctx)
{
	__u64 n = arg_keys_made;

	if (n > ARG_KEYS_LOGGED)
		return 1;
	bpf_loop(n, copy_one_logged, NULL, 0);
	return 0;
}

/* Following the targets' lives (lifecycle.bpf.h). */

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	if (skipped_for_test(parent))
		return 0;
	follow_fork(parent, child, false);
	return 0;
}

/* The lifecycle hooks' backups, attached after each where hooks can be
 * preempted (backup_hook): the kernel skips a hook for a task whose event
 * comes on a CPU where a run of it is preempted. Each does what its hook
 * did not, and nothing where it did: a target's child has its state, a
 * held child that exec'd counts, an ended thread's record went. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork_backup, struct task_struct *parent, struct task_struct *child)
{
	if (!state_of(child, child->pid, false, false) && follow_fork(parent, child, false))
		__sync_fetch_and_add(&backup_runs, 1);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork_legacy, struct task_struct *parent, struct task_struct *child)
{
	follow_fork(parent, child, true);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	follow_tid_change(p, old_pid, false);
	if (skipped_for_test(p))
		return 0;
	return follow_exec(p, bprm, false, false);
}

/* Where sched_process_exec was skipped, a held child would go uncounted
 * and a target's new program unnamed (its counts the old one's). The hook
 * marks the thread's state; an exec that finds no mark is the backup's. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec_backup, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct task_state *ts;

	follow_tid_change(p, old_pid, false);
	ts = state_of(p, p->pid, false, false);
	if (!ts)
		return 0;
	if (ts->exec_hooked) {
		ts->exec_hooked = 0;
		return 0;
	}
	__sync_fetch_and_add(&backup_runs, 1);
	return follow_exec(p, bprm, false, true);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec_legacy, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	follow_tid_change(p, old_pid, true);
	return follow_exec(p, bprm, true, false);
}

SEC("tp_btf/signal_deliver")
int BPF_PROG(signal_deliver, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	/* Not a missed run when skipped: no count goes with it. */
	if (drawn_for_test_skip(bpf_get_current_task_btf()))
		return 0;
	return forget_mask(false);
}

/* A skipped signal_deliver would leave the mask of a thread that took a
 * signal known, and its next sigprocmask misclassed (never miscounted).
 * Forgetting twice does no harm: no mark is needed. */
SEC("tp_btf/signal_deliver")
int BPF_PROG(signal_deliver_backup, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	return forget_mask(false);
}

SEC("tp_btf/signal_deliver")
int BPF_PROG(signal_deliver_legacy, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	return forget_mask(true);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	if (skipped_for_test(p))
		return 0;
	send_exit(p, false, true, false);
	return 0;
}

/* An ended thread's counts would go with its storage. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit_backup, struct task_struct *p)
{
	if (send_exit(p, false, true, true))
		__sync_fetch_and_add(&backup_runs, 1);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit_bounded, struct task_struct *p)
{
	send_exit(p, false, false, false);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit_legacy, struct task_struct *p)
{
	send_exit(p, true, false, false);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
