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
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "syscount.h"
#include "bits.bpf.h"
#include "maps.bpf.h"
#include "arch.bpf.h"

#define MAX_ERRNO 4095
#define ENOMEM 12
#define E2BIG 7
#define MAX_GAP (1U << 20)
#define SLOT_FLUSH_AT (1ULL << 31) /* before a slot's u32 buckets can wrap */

const volatile struct syscall_spec specs[MAX_SYSCALLS] = {};
/* --latency: sys_enter is loaded and stamps each call. */
const volatile __u8 latency = 0;
/* Every argument key kept, from its first call (sysdiet check counts the
 * zone-file lookups of each process, even a single one). */
const volatile __u8 keep_every_key = 0;
/* sysdiet top / serve: every task on the host is a target from its first
 * syscall on, but sysdiet itself (its tgid). */
const volatile __u8 system_wide = 0;
const volatile __u32 self_tgid = 0;
/* What one CPU-clock tick stands for. */
const volatile __u64 tick_ns = 0;
/* Stack samples: off unless set. A thread starts at one sample per
 * `sample_first_gap` calls; the gap then doubles or halves to keep about
 * one sample per `sample_interval_ns` of its time. */
const volatile __u8 sample_stacks = 0;
const volatile __u32 sample_first_gap = 8;
const volatile __u64 sample_interval_ns = 1000000;

/* Set by sysdiet when it reads out: counts freeze, so that what it reads
 * from a live thread is all there is. */
volatile __u32 stopped = 0;

/* Targets' tasks made by fork, and targets' tasks that ended. With the
 * targets user space added, they bound how many may be alive: when none
 * can be, the read-out does not look through /proc for them. */
__u64 targets_forked = 0;
__u64 targets_ended = 0;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} states SEC(".maps");

/* The legacy variant of each program, for kernels before 5.11, which have
 * no task storage for them (nor bpf_loop, exchanges, bpf_task_pt_regs):
 * a thread's state is here, keyed by its tid, made when it becomes a
 * target and removed at its exit. User space loads one variant. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct task_state);
} thread_states SEC(".maps");

/* Legacy: a target thread's CPU ticks, apart from its state, since those
 * kernels let a perf_event program use only preallocated hash maps. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct tick_count);
} thread_ticks SEC(".maps");

/* Legacy: the keys being promoted right now, one mark each, so that one
 * thread promotes a key (newer kernels exchange its `once` instead). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct arg_key);
	__type(value, __u8);
} promoting SEC(".maps");

/* Argument keys: 200,000 paths seen twice each, with room for the rest. A
 * repeated key never needs room it does not have: it is promoted in place.
 * Allocated as used: preallocating cost every run ~12 ms of start-up and
 * 40 MB. A power of two, since the kernel rounds the bucket array up to
 * one, zeroes it at load and walks it at read-out: 327,680 entries made
 * 524,288 buckets, ~4 ms of every run. Values are not per-CPU, so they
 * come from the BPF allocator's per-CPU caches; none failed in tight loops
 * of 300,000 inserts, and one that does is counted (LOST_ARG_NOMEM). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct arg_key);
	__type(value, struct arg_val);
} arg_stats SEC(".maps");

/* The first sighting of each argument key, one slot per key hash. A
 * file-tree walk's paths, each seen once, cost a slot of this array (one
 * compare-and-swap) instead of an arg_stats insert (an allocation and a
 * bucket lock: ~300 ns a call). A key's second sighting finds its slot and
 * moves the first call's facts into arg_stats. A slot is never freed during
 * a run, so a key whose slot another key holds takes arg_stats' own
 * first-sighting path, exact as before. 8 MiB; one slot when every key is
 * kept anyway (top, serve). A slot's word, set by one compare-and-swap:
 * fingerprint << 32 | ns << 12 | FIRST_* flags | ret << 5 | req; 0: free. */
#define FIRST_SLOTS (1 << 20)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FIRST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} first_calls SEC(".maps");

/* This and errno_stats are allocated as used too: they are rarely
 * written (a promotion, a flush, a thread's 17th errno), and preallocated
 * they cost every start-up ~7 ms. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192); /* ended processes' entries are swept out */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct arg_key);
	__type(value, struct io_hist);
} io_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SYSCALLS);
	__type(key, __u32);
	__type(value, struct once_summary);
} once_summary SEC(".maps");

/* (process, syscall, errno) counts that did not fit a thread's slots. */
struct errno_key {
	__u32 tgid;
	__u32 nr;
	__u32 err;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct errno_key);
	__type(value, __u64);
} errno_stats SEC(".maps");

/* Exited threads' counts and their cached argument counts. */
#define EXITS_BYTES (4 << 20)
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, EXITS_BYTES);
} exits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exit_record);
} exit_scratch SEC(".maps");

/* Where a path record is put together before it is sent, cut to size. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct path_record);
} path_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exec_record);
} exec_scratch SEC(".maps");

/* Repeated paths' strings: a ring of their own, so that a flood of them
 * can never crowd out a thread's exit record. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} strings SEC(".maps");

/* Makes the skeleton generate these for the Rust side. */
const struct stack_sample *unused_stack_sample __attribute__((unused));
const struct slot_record *unused_slot_record __attribute__((unused));
const struct exec_record *unused_exec_record __attribute__((unused));
const struct path_record *unused_path_record __attribute__((unused));
const enum arg_kind *unused_arg_kind __attribute__((unused));
const enum target_state *unused_target_state __attribute__((unused));
const enum lost_counter *unused_lost_counter __attribute__((unused));
const enum record_kind *unused_record_kind __attribute__((unused));

#define SAMPLES_BYTES (16 << 20)
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SAMPLES_BYTES);
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static const struct io_hist zero_hist;

static __always_inline void count_lost(__u32 what, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&lost, &what);
	if (v)
		*v += n;
}

/* The i-th argument of the syscall whose user registers `regs` are. */
static __always_inline __u64 syscall_arg(struct pt_regs *regs, __u8 i)
{
	switch (i) {
	case 0: return PT_REGS_PARM1_SYSCALL(regs);
	case 1: return PT_REGS_PARM2_SYSCALL(regs);
	case 2: return PT_REGS_PARM3_SYSCALL(regs);
	case 3: return PT_REGS_PARM4_SYSCALL(regs);
	case 4: return PT_REGS_PARM5_SYSCALL(regs);
	default: return PT_REGS_PARM6_SYSCALL(regs);
	}
}

/* Whether the user string at `p` has a byte other than NUL at PATH_LEN - 1,
 * the place of the NUL that bpf_probe_read_user_str wrote when it cut. */
static __always_inline bool path_goes_on(const char *p)
{
	char c = 0;

	bpf_probe_read_user(&c, 1, p + PATH_LEN - 1);
	return c != 0;
}

static const struct task_state empty_state;
static const struct tick_count no_ticks;

/* The state of target thread `t` (`tid`: read by the legacy variant only),
 * made if `create` and there is none; NULL if it is no target, or with no
 * room. */
static __always_inline struct task_state *state_of(struct task_struct *t, __u32 tid, bool create, const bool legacy)
{
	struct task_state *ts;

	if (!legacy)
		return bpf_task_storage_get(&states, t, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!create)
		return bpf_map_lookup_elem(&thread_states, &tid);
	ts = bpf_map_lookup_or_try_init(&thread_states, &tid, &empty_state);
	if (ts && bpf_map_update_elem(&thread_ticks, &tid, &no_ticks, BPF_ANY))
		count_lost(LOST_NO_TASK_STORAGE, 1); /* counted, its CPU time unseen */
	return ts;
}

/* The running task: a BTF pointer, or on legacy kernels (before 5.11) an
 * address whose fields are read with probes. */
static __always_inline struct task_struct *current_task(const bool legacy)
{
	return legacy ? (struct task_struct *)bpf_get_current_task() : bpf_get_current_task_btf();
}

/* The running thread's id where the legacy variant keys its maps by it;
 * 0 for the current one, which would pay a helper call on every syscall
 * for nothing. */
static __always_inline __u32 legacy_tid(const bool legacy)
{
	return legacy ? (__u32)bpf_get_current_pid_tgid() : 0;
}

/* Its blocked signals (the first 64). */
static __always_inline __u64 blocked_signals(struct task_struct *t, const bool legacy)
{
	return legacy ? BPF_CORE_READ(t, blocked.sig[0]) : t->blocked.sig[0];
}

/* Read with probes: `t` may be a legacy kernel's current task. */
static __always_inline void note_task(struct task_state *ts, struct task_struct *t, __u32 ppid)
{
	ts->tgid = BPF_CORE_READ(t, tgid);
	ts->ppid = ppid;
	ts->cgroup = BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
	/* A kernel thread has no mm: the reads give 0. */
	ts->exe.ino = BPF_CORE_READ(t, mm, exe_file, f_inode, i_ino);
	ts->exe.dev = BPF_CORE_READ(t, mm, exe_file, f_inode, i_sb, s_dev);
	bpf_probe_read_kernel_str(ts->comm, sizeof(ts->comm), t->comm);
}

/* System-wide: a task not yet known becomes a target at its first syscall
 * (that call counts). NULL for sysdiet's own tasks, or with no room. */
static __always_inline struct task_state *enrol(struct task_struct *t, const bool legacy)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_state *ts;

	if (id >> 32 == self_tgid)
		return NULL;
	ts = state_of(t, (__u32)id, true, legacy);
	if (!ts) {
		count_lost(LOST_NO_TASK_STORAGE, 1);
		return NULL;
	}
	ts->state = TARGET_ACTIVE;
	note_task(ts, t, BPF_CORE_READ(t, real_parent, tgid));
	return ts;
}

#include "arguments.bpf.h"
#include "samples.bpf.h"

/* A legacy thread's ticks since its last syscall exit: those in the call
 * that ends, returned, and those in user mode, added to its state. */
static __always_inline __u64 take_legacy_ticks(struct task_state *ts, __u32 tid)
{
	struct tick_count *tc = bpf_map_lookup_elem(&thread_ticks, &tid);
	__u64 ticks;

	if (!tc)
		return 0;
	ticks = tc->ticks;
	if (ticks)
		tc->ticks = 0;
	if (tc->user_ticks) {
		ts->user_ticks += tc->user_ticks;
		tc->user_ticks = 0;
	}
	return ticks;
}

/* sys_exit, of either variant: `legacy` is a constant, so each keeps only
 * its own code. */
static __always_inline int count_exit(struct pt_regs *regs, long ret, const bool legacy)
{
	struct task_struct *t = current_task(legacy);
	__u32 tid = legacy_tid(legacy);
	struct task_state *ts = state_of(t, tid, false, legacy);
	struct syscall_spec spec;
	struct sys_val *sv;
	struct call c = {};
	__u64 ticks = 0;
	__u8 in_call;
	long id;

	if (!ts && system_wide && !stopped)
		ts = enrol(t, legacy);
	if (!ts || stopped)
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
		if (ret == 0 && nr_is_fork(id))
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
	if (id == -1) /* rt_sigreturn: the registers are the restored ones */
		id = NR_RT_SIGRETURN;
	if (id < 0 || id >= MAX_SYSCALLS) {
		count_lost(LOST_NR_OUT_OF_RANGE, 1);
		return 0;
	}
	spec = specs[id];
	if (!spec.traced)
		return 0;
	c.nr = id;
	c.kind = spec.kind;
	c.failed = ret < 0 && ret >= -MAX_ERRNO;
	if (latency) {
		if (in_call)
			c.ns = bpf_ktime_get_ns() - ts->start_ns;
	} else {
		c.ns = ticks * tick_ns;
	}
	ts->seq++;
	sv = &ts->stats[c.nr & (MAX_SYSCALLS - 1)];
	sv->calls++;
	if (c.ns) {
		sv->ns += c.ns;
		if (c.ns > sv->max_ns)
			sv->max_ns = c.ns;
	}
	if (latency && (c.ns < sv->min_ns || sv->calls == 1))
		sv->min_ns = c.ns;
	if (c.failed) {
		sv->errors++;
		count_errno(ts, c.nr, -ret);
	}
	if (c.nr == NR_RT_SIGRETURN) {
		ts->mask = blocked_signals(t, legacy);
		ts->mask_known = 1;
	}
	switch (c.kind) {
	case ARG_NONE:
		break;
	case ARG_SIGMASK: {
		__u32 cls = classify_mask(ts, t, regs, ret, legacy);

		if (cls < MASK_CLASSES)
			ts->mask_calls[cls]++;
		c.kind = ARG_NONE;
		break;
	}
	case ARG_PATH: {
		/* Read into this CPU's record, not the thread's storage: a
		 * per-CPU map value costs the kernel's hardened-usercopy check
		 * less than a slab object does. */
		__u32 zero = 0;
		void *p = (void *)syscall_arg(regs, spec.arg);
		struct path_record *r = p ? bpf_map_lookup_elem(&path_scratch, &zero) : NULL;
		long n = r ? bpf_probe_read_user_str(r->path, PATH_LEN, p) : -1;

		/* Older kernels (6.1 and 5.10, seen) read the empty path (fstat's "") as 0
		 * bytes, not 1: a string still, its NUL written. */
		if (n == 0)
			n = 1;
		/* The argument before the path of an *at call is its dirfd. */
		c.fd = spec.arg > 0 ? (int)syscall_arg(regs, spec.arg - 1) : -1;
		if (!p) {
			c.path_hash = PATH_HASH_NULL;
		} else if (!r || n <= 0) {
			count_lost(LOST_PATH_UNREADABLE, 1);
			c.path_hash = PATH_HASH_UNREADABLE; /* counted together */
		} else {
			c.path_hash = legacy ? path_hash_legacy(r, n - 1) : path_hash(r, n - 1);
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
	/* One call site: each inlined copy would be verified on its own. */
	if (c.kind != ARG_NONE)
		count_argument(ts, &c, legacy);
	if (sample_stacks)
		maybe_sample(ts, regs, &c);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	return count_exit(regs, ret, false);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_legacy, struct pt_regs *regs, long ret)
{
	return count_exit(regs, ret, true);
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
	struct pt_regs *u;
	long nr;

	if (perf_sample_in_user_mode(ctx)) {
		(*user_ticks)++;
		return;
	}
	/* In the kernel: in a syscall if the saved user registers say so. */
	u = legacy ? task_user_regs(t) : (struct pt_regs *)bpf_task_pt_regs(t);
	nr = u ? regs_running_syscall(u) : -1;
	if (nr >= 0 && nr < MAX_SYSCALLS)
		(*ticks)++;
}

SEC("perf_event")
int on_tick(struct bpf_perf_event_data *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct task_state *ts = bpf_task_storage_get(&states, t, 0, 0);

	if (ts && ts->state == TARGET_ACTIVE)
		charge_tick(ctx, t, &ts->ticks, &ts->user_ticks, false);
	return 0;
}

/* The same on legacy kernels, into the thread's tick_count: its state's
 * map is no place for a perf_event program there, and bpf_task_pt_regs is
 * not there (5.15). */
SEC("perf_event")
int on_tick_legacy(struct bpf_perf_event_data *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct tick_count *tc = bpf_map_lookup_elem(&thread_ticks, &tid);

	if (tc)
		charge_tick(ctx, current_task(true), &tc->ticks, &tc->user_ticks, true);
	return 0;
}

#include "lifecycle.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";
