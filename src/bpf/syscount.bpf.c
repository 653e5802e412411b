// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Exact per-syscall accounting of a set of processes, aggregated in the
 * kernel: counts, errors by errno, time in the kernel, and per-argument
 * fingerprints (paths, fds, byte-count histograms).
 *
 * The hot path makes one task-storage lookup: a traced thread carries its
 * state and its counts with it; any other thread has no storage and leaves
 * at once. Counts move to `sys_stats` when the thread exits. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "syscount.h"

#define NR_RT_SIGPROCMASK 14
#define NR_RT_SIGRETURN 15
#define NR_EXECVE 59
#define NR_EXIT 60
#define NR_EXIT_GROUP 231
#define NR_EXECVEAT 322
#define MAX_ERRNO 4095
#define EEXIST 17
#define E2BIG 7

const volatile struct syscall_spec specs[MAX_SYSCALLS] = {};
/* Stack samples: off unless set. A thread's calls of one syscall are all
 * sampled up to 2^(shift+1), then about 2^shift per doubling of its count. */
const volatile __u8 sample_stacks = 0;
const volatile __u32 sample_shift = 3;

/* Set by sysdiet when it reads out: counts freeze, so that a thread read
 * from its storage and flushed at exit is the same, whichever is seen. */
volatile __u32 stopped = 0;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sys_key);
	__type(value, struct sys_val);
} sys_stats SEC(".maps");

/* A thread's rt_sigprocmask calls by class (in sys_key.nr), moved here
 * from its task storage when it exits, like sys_stats. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sys_key);
	__type(value, __u64);
} mask_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct errno_key);
	__type(value, __u64);
} errno_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 65536); /* allocated as used: a shell script's
				       processes open many paths each */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct arg_key);
	__type(value, struct arg_val);
} arg_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct path_val);
} paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct task_info);
} tasks SEC(".maps");

/* Makes the skeleton generate struct stack_sample for the Rust side. */
const struct stack_sample *unused_stack_sample __attribute__((unused));

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

static const struct arg_val zero_arg;
static const __u64 zero_u64;

static __always_inline void count_lost(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&lost, &what);
	if (v)
		(*v)++;
}

static __always_inline __u64 syscall_arg(struct pt_regs *regs, __u8 i)
{
	switch (i) {
	case 0: return regs->di;
	case 1: return regs->si;
	case 2: return regs->dx;
	case 3: return regs->r10;
	case 4: return regs->r8;
	default: return regs->r9;
	}
}

static __always_inline __u32 log2_32(__u32 v)
{
	__u32 r, shift;

	r = (v > 0xFFFF) << 4; v >>= r;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline __u32 log2_64(__u64 v)
{
	__u32 hi = v >> 32;
	return hi ? log2_32(hi) + 32 : log2_32(v);
}

/* Bucket 0 holds 0, bucket 1 holds 1, bucket k >= 2 holds (2^(k-2), 2^(k-1)],
 * so a bucket reads as "at most 2^(k-1) bytes". The last one holds the rest. */
static __always_inline __u32 size_bucket(__u64 v)
{
	__u32 b;

	if (v <= 1)
		return v;
	b = log2_64(v - 1) + 2;
	return b < HIST_BUCKETS ? b : HIST_BUCKETS - 1;
}

/* Look up key, inserting zero first if absent; counts a full map. */
static __always_inline void *lookup_or_init(void *map, const void *key,
					    const void *zero, __u32 full)
{
	void *v = bpf_map_lookup_elem(map, key);
	long err;

	if (v)
		return v;
	err = bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		count_lost(full);
		return NULL;
	}
	return bpf_map_lookup_elem(map, key);
}

/* A 64-bit hash of the first len bytes of ts->path, eight at a time. */
static __always_inline __u64 path_hash(struct task_state *ts, __u32 len)
{
	__u64 h = 0x9E3779B97F4A7C15ULL ^ len, w;
	__u32 i;

	for (i = 0; i < PATH_LEN / 8; i++) {
		if (i * 8 >= len)
			break;
		w = *(__u64 *)&ts->path[i * 8];
		if (len - i * 8 < 8)
			w &= (1ULL << ((len - i * 8) * 8)) - 1;
		h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
		h ^= h >> 32;
	}
	return h | 1; /* never 0, which marks fd calls */
}

static __always_inline void read_path(struct task_state *ts)
{
	long n = bpf_probe_read_user_str(ts->path, PATH_LEN, (void *)ts->path_ptr);

	ts->path_ok = n > 0;
	if (n <= 0) {
		ts->key.path_hash = 1; /* the hash of "": unreadable paths count there */
		return;
	}
	if (n == PATH_LEN)
		count_lost(LOST_PATH_TRUNCATED);
	ts->key.path_hash = path_hash(ts, n - 1);
}

/* A timeout argument as a class, not a value: zero (a poll that never
 * waits), finite, or none. */
static __always_inline __s64 classify_timeout(__u8 kind, __u64 arg)
{
	__u64 t[2];

	if (kind == ARG_TIMEOUT_MS)
		return (int)arg < 0 ? TIMEOUT_NONE : (int)arg == 0 ? TIMEOUT_ZERO : TIMEOUT_FINITE;
	if (!arg)
		return TIMEOUT_NONE;
	/* struct timespec and struct timeval: two longs either way. */
	if (bpf_probe_read_user(t, sizeof(t), (void *)arg))
		return TIMEOUT_UNREADABLE;
	return (t[0] | t[1]) ? TIMEOUT_FINITE : TIMEOUT_ZERO;
}

/* What rt_sigprocmask(how, set, ...) does to the mask the thread has.
 * `prev_change`: the thread's previous syscall changed the mask too. */
static __always_inline __s64 classify_mask(struct pt_regs *regs, bool prev_change)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 set = regs->si, cur = t->blocked.sig[0], m, next;
	int how = regs->di;

	if (!set)
		return MASK_QUERY;
	if (bpf_probe_read_user(&m, sizeof(m), (void *)set))
		return MASK_SET;
	m &= ~((1ULL << 8) | (1ULL << 18)); /* SIGKILL, SIGSTOP: never blocked */
	next = how == 0 ? cur | m : how == 1 ? cur & ~m : m;
	if (next == cur)
		return MASK_SAME;
	if (prev_change)
		return MASK_UNDO;
	return how == 0 ? MASK_BLOCK : how == 1 ? MASK_UNBLOCK : MASK_SET;
}

/* Counts one finished call; true if it is the first of its (syscall,
 * argument) key on this CPU. */
static __always_inline bool account(struct task_state *ts, long ret, __u64 ns)
{
	bool failed = ret < 0 && ret >= -MAX_ERRNO;
	struct sys_val *sv = &ts->stats[ts->nr & (MAX_SYSCALLS - 1)];
	struct arg_val *av;

	sv->calls++;
	sv->total_ns += ns;
	if (ns > sv->max_ns)
		sv->max_ns = ns;
	if (ns < sv->min_ns || sv->calls == 1)
		sv->min_ns = ns;
	if (failed) {
		struct errno_key ek = { .tgid = ts->key.tgid, .nr = ts->nr, .err = -ret };
		__u64 *ev;

		sv->errors++;
		ev = lookup_or_init(&errno_stats, &ek, &zero_u64, LOST_ERRNO_MAP_FULL);
		if (ev)
			(*ev)++;
	}
	if (ts->kind == ARG_NONE)
		return false;
	if (ts->kind == ARG_SIGMASK) {
		__u64 class = ts->key.fd;

		return class < MASK_CLASSES && ++ts->mask_calls[class] == 1;
	}
	if (ts->kind == ARG_PATH && !ts->path_ok) {
		/* The kernel has just copied the string in, so its page is
		 * resident now even if it was not at entry. */
		read_path(ts);
		if (!ts->path_ok)
			count_lost(LOST_PATH_UNREADABLE);
	}
	av = bpf_map_lookup_elem(&arg_stats, &ts->key);
	if (!av) {
		if (ts->kind == ARG_PATH && ts->path_ok &&
		    bpf_map_update_elem(&paths, &ts->key.path_hash, ts->path, BPF_NOEXIST) == -E2BIG)
			count_lost(LOST_PATH_MAP_FULL);
		av = lookup_or_init(&arg_stats, &ts->key, &zero_arg, LOST_ARG_MAP_FULL);
		if (!av)
			return false;
	}
	av->calls++;
	av->total_ns += ns;
	if (failed)
		av->errors++;
	if (ts->kind == ARG_FD_IO) {
		__u32 b = size_bucket(ts->requested);
		if (b < HIST_BUCKETS)
			av->requested[b]++;
		b = size_bucket(ret < 0 ? 0 : ret);
		if (b < HIST_BUCKETS)
			av->returned[b]++;
	}
	return av->calls == 1;
}

/* Sends the user registers and the top of the user stack, read a page at a
 * time so that a stack ending within STACK_BYTES still copies. */
static __always_inline void take_sample(struct task_state *ts, struct pt_regs *regs,
					__u64 ns, __u64 now, __u64 period, __u32 flags)
{
	struct stack_sample *e;
	__u64 sp = regs->sp, off = 0, len;
	int i;

	e = bpf_ringbuf_reserve(&samples, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_SAMPLES_DROPPED);
		return;
	}
	e->tgid = ts->key.tgid;
	e->tid = (__u32)bpf_get_current_pid_tgid();
	e->nr = ts->nr;
	e->flags = flags;
	e->period = period;
	e->ns = ns;
	e->time_ns = now;
	e->fd = ts->kind == ARG_NONE ? 0 : ts->key.fd;
	e->path_hash = ts->kind == ARG_NONE ? 0 : ts->key.path_hash;
	e->ip = regs->ip;
	e->sp = sp;
	e->bp = regs->bp;
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
	bpf_ringbuf_submit(e, bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) >= SAMPLES_BYTES / 16 ?
				      BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

static __always_inline void maybe_sample(struct task_state *ts, struct pt_regs *regs,
					 __u64 ns, __u64 now, bool key_first)
{
	__u32 nr = ts->nr & (MAX_SYSCALLS - 1);
	struct sampler *s = &ts->samplers[nr];
	__u64 calls = ts->stats[nr].calls, period;
	__u32 b;

	/* After these the registers are not the call site's. */
	if (ts->nr == NR_EXECVE || ts->nr == NR_EXECVEAT || ts->nr == NR_RT_SIGRETURN)
		return;
	if (s->left) {
		s->left--;
		if (key_first)
			take_sample(ts, regs, ns, now, 0, SAMPLE_FIRST_OF_KEY);
		return;
	}
	/* Every call up to 2^(shift+1); then gaps averaging 2^(b-shift) for
	 * the 2^b-th call: 2^shift samples per doubling of the count. */
	b = log2_64(calls);
	period = b > sample_shift ? 1ULL << (b - sample_shift) : 1;
	s->left = period > 1 ? bpf_get_prandom_u32() & (2 * period - 1) : 0;
	period = (__u32)calls - s->last;
	s->last = calls;
	take_sample(ts, regs, ns, now, period, 0);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	struct task_state *ts;
	struct syscall_spec spec;
	__u32 prev_nr;

	ts = bpf_task_storage_get(&states, bpf_get_current_task_btf(), 0, 0);
	if (!ts || stopped)
		return 0;
	prev_nr = ts->nr;
	if (ts->state != TARGET_ACTIVE) {
		/* Held child: nothing counts before its execve. */
		if (id != NR_EXECVE && id != NR_EXECVEAT)
			return 0;
		ts->state = TARGET_ACTIVE;
	}
	if (id < 0 || id >= MAX_SYSCALLS) {
		count_lost(LOST_NR_OUT_OF_RANGE);
		return 0;
	}
	spec = specs[id];
	if (!spec.traced)
		return 0;
	ts->nr = id;
	ts->kind = spec.kind;
	ts->key.tgid = bpf_get_current_pid_tgid() >> 32;
	if (spec.kind != ARG_NONE) {
		ts->key.nr = id;
		if (spec.kind == ARG_PATH) {
			/* The argument before the path of an *at call is its dirfd. */
			ts->key.fd = spec.arg > 0 ?
				(int)syscall_arg(regs, spec.arg - 1) : -1;
			ts->path_ptr = syscall_arg(regs, spec.arg);
			read_path(ts);
		} else if (spec.kind >= ARG_CLOCK) {
			__u64 arg = syscall_arg(regs, spec.arg);

			ts->key.path_hash = 0;
			if (spec.kind == ARG_CLOCK)
				ts->key.fd = (int)arg;
			else if (spec.kind == ARG_SIGMASK)
				/* The key still holds the previous call's class. */
				ts->key.fd = classify_mask(regs, prev_nr == NR_RT_SIGPROCMASK &&
								 ts->key.fd >= MASK_BLOCK);
			else
				ts->key.fd = classify_timeout(spec.kind, arg);
		} else {
			ts->key.fd = (int)syscall_arg(regs, spec.arg);
			ts->key.path_hash = 0;
			ts->requested = syscall_arg(regs, spec.size_arg);
		}
	}
	if (id == NR_EXIT || id == NR_EXIT_GROUP) {
		/* They never return: count them here, with no time. */
		ts->active = 0;
		account(ts, 0, 0);
		return 0;
	}
	ts->active = 1;
	ts->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	struct task_state *ts;
	__u64 now, ns;
	bool key_first;

	ts = bpf_task_storage_get(&states, bpf_get_current_task_btf(), 0, 0);
	if (!ts || !ts->active)
		return 0;
	now = bpf_ktime_get_ns();
	ts->active = 0;
	if (stopped)
		return 0;
	ns = now - ts->start_ns;
	key_first = account(ts, ret, ns);
	if (sample_stacks)
		maybe_sample(ts, regs, ns, now, key_first);
	return 0;
}

static __always_inline void note_task(struct task_struct *t, __u32 ppid)
{
	struct task_info info = {
		.tgid = BPF_CORE_READ(t, tgid),
		.ppid = ppid,
	};
	__u32 tid = BPF_CORE_READ(t, pid);

	bpf_probe_read_kernel_str(info.comm, sizeof(info.comm), t->comm);
	if (bpf_map_update_elem(&tasks, &tid, &info, BPF_ANY))
		count_lost(LOST_TASK_MAP_FULL);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent,
	     struct task_struct *child)
{
	struct task_state *pts, *cts;

	pts = bpf_task_storage_get(&states, parent, 0, 0);
	if (!pts || pts->state != TARGET_ACTIVE)
		return 0;
	/* Threads and processes alike: every new task gets its own state. */
	cts = bpf_task_storage_get(&states, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!cts) {
		count_lost(LOST_NO_TASK_STORAGE);
		return 0;
	}
	cts->state = TARGET_ACTIVE;
	note_task(child, child->tgid != parent->tgid ? parent->tgid :
						       parent->real_parent->tgid);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	struct task_state *ts = bpf_task_storage_get(&states, p, 0, 0);

	if (ts && ts->state == TARGET_ACTIVE)
		note_task(p, p->real_parent->tgid);
	return 0;
}

struct flush_ctx {
	struct task_state *ts;
	__u32 tgid;
	__u32 tid;
};

static long flush_one(__u32 nr, struct flush_ctx *c)
{
	struct sys_key k = { .tgid = c->tgid, .tid = c->tid, .nr = nr };
	struct sys_val *v;

	if (nr >= MAX_SYSCALLS)
		return 1;
	v = &c->ts->stats[nr];
	if (v->calls && bpf_map_update_elem(&sys_stats, &k, v, BPF_ANY))
		count_lost(LOST_SYSCALL_MAP_FULL);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	struct flush_ctx c = { .tgid = p->tgid, .tid = p->pid };
	struct task_info *info;

	c.ts = bpf_task_storage_get(&states, p, 0, 0);
	if (!c.ts)
		return 0;
	/* The thread's counts outlive it here; its storage goes with it. */
	bpf_loop(MAX_SYSCALLS, flush_one, &c, 0);
	for (int i = 0; i < MASK_CLASSES; i++) {
		struct sys_key k = { .tgid = c.tgid, .tid = c.tid, .nr = i };

		if (c.ts->mask_calls[i] &&
		    bpf_map_update_elem(&mask_stats, &k, &c.ts->mask_calls[i], BPF_ANY))
			count_lost(LOST_ARG_MAP_FULL);
	}
	info = bpf_map_lookup_elem(&tasks, &c.tid);
	if (!info) {
		note_task(p, p->real_parent->tgid);
		info = bpf_map_lookup_elem(&tasks, &c.tid);
		if (!info)
			return 0;
	}
	bpf_probe_read_kernel_str(info->comm, sizeof(info->comm), p->comm);
	info->exit_code = p->exit_code;
	info->exited = 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
