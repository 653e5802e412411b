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

#define NR_SELECT 23
#define NR_RT_SIGPROCMASK 14
#define NR_RT_SIGRETURN 15
#define NR_EXECVE 59
#define NR_EXIT 60
#define NR_EXIT_GROUP 231
#define NR_PSELECT6 270
#define NR_PPOLL 271
#define NR_EXECVEAT 322
#define MAX_ERRNO 4095
#define ENOSYS 38
#define ENOMEM 12
#define EEXIST 17
#define E2BIG 7
#define TS_COMPAT 0x0002  /* thread_info.status: an i386 syscall is active */
#define MAX_GAP (1U << 20)
#define SLOT_FLUSH_AT (1ULL << 31) /* before a slot's u32 buckets can wrap */

const volatile struct syscall_spec specs[MAX_SYSCALLS] = {};
/* --latency: sys_enter is loaded and stamps each call. */
const volatile __u8 latency = 0;
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

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} states SEC(".maps");

/* Argument keys: a file-tree walk's 200,000 paths seen once each, and the
 * keys seen again. A repeated key never needs room it does not have: it is
 * promoted in place. Preallocated: an insert fails only when full, never
 * because an allocation failed in the middle of a burst. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 327680);
	__type(key, struct arg_key);
	__type(value, struct arg_val);
} arg_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192); /* ended processes' entries are swept out */
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

/* Repeated paths' strings: a ring of their own, so that a flood of them
 * can never crowd out a thread's exit record. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} strings SEC(".maps");

/* Makes the skeleton generate these for the Rust side. */
const struct stack_sample *unused_stack_sample __attribute__((unused));
const struct slot_record *unused_slot_record __attribute__((unused));
const struct path_record *unused_path_record __attribute__((unused));

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

/* One finished call's facts, as its argument key needs them. */
struct call {
	__u32 nr;
	__u8 kind;
	__u8 failed;
	__u8 req_bucket;
	__u8 ret_bucket;
	__s64 fd;
	__u64 path_hash;
	__u64 ns;
};

/* A timeout argument as a class, not a value. */
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

/* What a finished rt_sigprocmask(how, set, oldset) did to the mask: the
 * mask before is *oldset when given, else the one this thread was last
 * seen with. */
static __always_inline __u32 classify_mask(struct task_state *ts, struct task_struct *t,
					   struct pt_regs *regs, long ret)
{
	__u64 after = t->blocked.sig[0], before = 0, oldset = regs->dx;
	int how = regs->di;
	bool known = ts->mask_known;
	__u32 c = how == 0 ? MASK_BLOCK : how == 1 ? MASK_UNBLOCK : MASK_SET;

	ts->mask = after;
	ts->mask_known = 1;
	if (!regs->si)
		return MASK_QUERY;
	if (ret < 0)
		return c;
	if (oldset && !bpf_probe_read_user(&before, sizeof(before), (void *)oldset))
		known = true;
	else
		before = ts->mask;
	if (!known)
		return c;
	if (before == after)
		return MASK_SAME;
	if (ts->last_change + 1 == ts->seq)
		c = MASK_UNDO;
	ts->last_change = ts->seq;
	return c;
}

static __always_inline void count_errno(struct task_state *ts, __u32 nr, __u32 err)
{
	__u32 i, at = (nr * 31 + err) & (ERRNO_SLOTS - 1);

	for (i = 0; i < 4; i++) {
		struct errno_slot *s = &ts->errnos[(at + i) & (ERRNO_SLOTS - 1)];

		if (s->count && s->nr == nr && s->err == err) {
			s->count++;
			return;
		}
		if (!s->count) {
			s->nr = nr;
			s->err = err;
			s->count = 1;
			return;
		}
	}
	struct errno_key k = { .tgid = ts->tgid, .nr = nr, .err = err };
	__u64 one = 1, *v = bpf_map_lookup_elem(&errno_stats, &k);

	if (v)
		(*v)++;
	else if (bpf_map_update_elem(&errno_stats, &k, &one, BPF_NOEXIST))
		ts->errnos_lost++;
}

/* Adds a slot's calls since its last flush to arg_stats (and io_hists). */
static __always_inline void flush_slot(struct task_state *ts, struct arg_slot *s)
{
	struct arg_key k = { .tgid = ts->tgid, .nr = s->nr, .fd = s->fd, .path_hash = s->path_hash };
	struct arg_val *v;
	struct io_hist *h;
	__u32 i;

	if (!s->used || !s->calls)
		return;
	v = bpf_map_lookup_elem(&arg_stats, &k);
	if (!v) {
		count_lost(LOST_ARG_TABLE_FULL, s->calls);
		goto out;
	}
	__sync_fetch_and_add(&v->calls, s->calls);
	__sync_fetch_and_add(&v->errors, s->errors);
	__sync_fetch_and_add(&v->ns, s->ns);
	if (specs[s->nr & (MAX_SYSCALLS - 1)].kind == ARG_FD_IO) {
		h = bpf_map_lookup_elem(&io_hists, &k);
		if (!h)
			count_lost(LOST_HIST_TABLE_FULL, s->calls);
		for (i = 0; h && i < HIST_BUCKETS; i++) {
			if (s->requested[i])
				__sync_fetch_and_add(&h->requested[i], s->requested[i]);
			if (s->returned[i])
				__sync_fetch_and_add(&h->returned[i], s->returned[i]);
		}
	}
out:
	s->calls = s->errors = s->ns = 0;
	for (i = 0; i < HIST_BUCKETS; i++)
		s->requested[i] = s->returned[i] = 0;
}

static __always_inline void summarise_once(struct call *c, __s64 keys, __s64 errors, __s64 ns)
{
	struct once_summary *o = bpf_map_lookup_elem(&once_summary, &c->nr);

	if (o) {
		o->keys += keys;
		o->errors += errors;
		o->ns += ns;
	}
}

static __always_inline void send_path(struct task_state *ts, __u64 hash)
{
	struct path_record *r = bpf_ringbuf_reserve(&strings, sizeof(*r), 0);

	if (!r) {
		count_lost(LOST_PATH_STRING, 1);
		return;
	}
	r->kind = RECORD_PATH;
	r->_pad = 0;
	r->path_hash = hash;
	__builtin_memcpy(r->path, ts->path, PATH_LEN);
	bpf_ringbuf_submit(r, 0);
}

/* A call whose key is not in the thread's cache. A key seen for the first
 * time is only summarised; its second sighting promotes it (in place), and
 * from then on it is cached and counted exactly. Returns the key's entry
 * if this call is to be counted in the cache, NULL if it is counted. */
static __noinline bool argument_miss(struct task_state *ts, struct call *c)
{
	struct arg_key k = { .tgid = ts->tgid, .nr = c->nr, .fd = c->fd, .path_hash = c->path_hash };
	struct arg_val *v = bpf_map_lookup_elem(&arg_stats, &k);
	struct arg_val nv = { .calls = 1, .errors = c->failed, .ns = c->ns, .once = 1,
			      .requested = c->req_bucket, .returned = c->ret_bucket };
	long err;

	if (!v) {
		err = bpf_map_update_elem(&arg_stats, &k, &nv, BPF_NOEXIST);
		if (err != -EEXIST) {
			if (err)
				count_lost(err == -ENOMEM ? LOST_ARG_NOMEM : LOST_ONCE_TABLE_FULL, 1);
			summarise_once(c, 1, c->failed, c->ns);
			return false; /* not cached: one-shot keys would evict hot ones */
		}
		v = bpf_map_lookup_elem(&arg_stats, &k); /* another thread's, just made */
		if (!v)
			return false;
	}
	/* Seen before. The one that clears `once` promotes the key: its first
	 * call leaves the summary for the key's own counts. */
	if (v->once && __sync_lock_test_and_set(&v->once, 0)) {
		summarise_once(c, -1, -(__s64)v->errors, -(__s64)v->ns);
		if (c->kind == ARG_FD_IO) {
			struct io_hist *h;

			bpf_map_update_elem(&io_hists, &k, &zero_hist, BPF_NOEXIST);
			h = bpf_map_lookup_elem(&io_hists, &k);
			if (h) {
				h->requested[v->requested & (HIST_BUCKETS - 1)]++;
				h->returned[v->returned & (HIST_BUCKETS - 1)]++;
			} else {
				count_lost(LOST_HIST_TABLE_FULL, 1);
			}
		}
		if (c->kind == ARG_PATH && c->path_hash != 1)
			send_path(ts, c->path_hash);
	}
	return true;
}

static __always_inline void count_argument(struct task_state *ts, struct call *c)
{
	__u64 h = c->path_hash ^ ((__u64)c->fd * 0x9E3779B97F4A7C15ULL) ^ (c->nr * 0x45D9F3BU);
	struct arg_slot *s = &ts->slots[(h ^ (h >> 32) ^ (h >> 17)) & (ARG_SLOTS - 1)];

	if (!(s->used && s->nr == c->nr && s->fd == c->fd && s->path_hash == c->path_hash)) {
		if (!argument_miss(ts, c))
			return;
		/* A repeated key: it takes the slot, with this call. */
		flush_slot(ts, s);
		s->used = 1;
		s->nr = c->nr;
		s->fd = c->fd;
		s->path_hash = c->path_hash;
	}
	s->calls++;
	s->errors += c->failed;
	s->ns += c->ns;
	if (c->kind == ARG_FD_IO) {
		s->requested[c->req_bucket & (HIST_BUCKETS - 1)]++;
		s->returned[c->ret_bucket & (HIST_BUCKETS - 1)]++;
	}
	if (s->calls >= SLOT_FLUSH_AT)
		flush_slot(ts, s);
}

/* Sends the user registers and the top of the user stack, read a page at a
 * time so that a stack ending within STACK_BYTES still copies. */
static __always_inline void take_sample(struct task_state *ts, struct pt_regs *regs,
					struct call *c, __u64 now, __u64 period)
{
	struct stack_sample *e;
	__u64 sp = regs->sp, off = 0, len;
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

/* A sample every `gap` calls of the thread on average (random gaps, so
 * that a program's rhythm cannot alias with them), the gap adapting to a
 * budget in time: counts stay exact, samples only share them out. Each
 * sample weighs the calls since the previous one. */
static __always_inline void maybe_sample(struct task_state *ts, struct pt_regs *regs, struct call *c)
{
	__u32 gap = ts->sample_gap ?: sample_first_gap;
	__u64 now, dt;

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
	if (ts->last_sample_ns) {
		if (dt < sample_interval_ns / 2 && gap < MAX_GAP)
			gap <<= 1;
		else if (dt > sample_interval_ns * 2 && gap > 1)
			gap >>= 1;
	}
	take_sample(ts, regs, c, now, ts->since_sample);
	ts->since_sample = 0;
	ts->last_sample_ns = now;
	ts->sample_gap = gap;
	/* Between gap/2 and 3*gap/2: random enough that no rhythm of the
	 * program aliases with it, narrow enough to keep weights even. */
	ts->sample_left = gap > 1 ? gap / 2 + 1 + bpf_get_prandom_u32() % gap : 1;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct task_state *ts = bpf_task_storage_get(&states, t, 0, 0);
	struct syscall_spec spec;
	struct sys_val *sv;
	struct call c = {};
	__u64 ticks;
	__u8 in_call;
	long id;

	if (!ts || stopped)
		return 0;
	if (ts->state != TARGET_ACTIVE) {
		if (ts->state == TARGET_FORKED)
			ts->state = TARGET_ACTIVE;
		return 0;
	}
	id = regs->orig_ax;
	/* The time of the call that just ended is its own, counted or not:
	 * taken here so that it never spills into the next one. */
	ticks = ts->ticks;
	if (ticks)
		ts->ticks = 0;
	in_call = ts->in_call;
	if (latency)
		ts->in_call = 0;
	if (t->thread_info.status & TS_COMPAT) {
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
		ts->mask = t->blocked.sig[0];
		ts->mask_known = 1;
	}
	switch (c.kind) {
	case ARG_NONE:
		break;
	case ARG_SIGMASK: {
		__u32 cls = classify_mask(ts, t, regs, ret);

		if (cls < MASK_CLASSES)
			ts->mask_calls[cls]++;
		c.kind = ARG_NONE;
		break;
	}
	case ARG_PATH: {
		long n = bpf_probe_read_user_str(ts->path, PATH_LEN, (void *)syscall_arg(regs, spec.arg));

		/* The argument before the path of an *at call is its dirfd. */
		c.fd = spec.arg > 0 ? (int)syscall_arg(regs, spec.arg - 1) : -1;
		if (n <= 0) {
			count_lost(LOST_PATH_UNREADABLE, 1);
			c.path_hash = 1; /* unreadable paths count together */
		} else {
			if (n == PATH_LEN)
				count_lost(LOST_PATH_TRUNCATED, 1);
			c.path_hash = path_hash(ts, n - 1);
		}
		count_argument(ts, &c);
		break;
	}
	case ARG_FD_IO:
		c.req_bucket = size_bucket(syscall_arg(regs, spec.size_arg));
		c.ret_bucket = size_bucket(ret < 0 ? 0 : ret);
		/* fall through */
	case ARG_FD:
	case ARG_CLOCK:
		c.fd = (int)syscall_arg(regs, spec.arg);
		count_argument(ts, &c);
		break;
	default: /* the timeouts */
		if (latency)
			c.fd = ts->timeout_class;
		else
			c.fd = classify_timeout(spec.kind, syscall_arg(regs, spec.arg));
		if (!latency && c.fd == TIMEOUT_ZERO && ret == 0 &&
		    (c.nr == NR_SELECT || c.nr == NR_PSELECT6 || c.nr == NR_PPOLL))
			c.fd = TIMEOUT_RAN_OUT;
		count_argument(ts, &c);
		break;
	}
	if (sample_stacks)
		maybe_sample(ts, regs, &c);
	return 0;
}

/* --latency only: stamps the call's start. */
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	struct task_state *ts = bpf_task_storage_get(&states, bpf_get_current_task_btf(), 0, 0);

	if (!ts)
		return 0;
	if (id >= 0 && id < MAX_SYSCALLS && specs[id].kind >= ARG_TIMEOUT_MS &&
	    specs[id].kind <= ARG_TIMEOUT_PTR)
		ts->timeout_class = classify_timeout(specs[id].kind, syscall_arg(regs, specs[id].arg));
	ts->in_call = 1;
	ts->start_ns = bpf_ktime_get_ns();
	return 0;
}

/* A CPU-clock tick on some CPU: charged to the syscall the traced thread
 * running there is in (paid at its exit), or to its user time. */
SEC("perf_event")
int on_tick(struct bpf_perf_event_data *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct task_state *ts = bpf_task_storage_get(&states, t, 0, 0);
	struct pt_regs *u;
	long nr = -1, ax = 0;

	if (!ts || ts->state != TARGET_ACTIVE)
		return 0;
	/* The interrupted code's ring, read as the 8-byte slot the context
	 * allows (newer kernels split cs into smaller fields). */
	if (*(volatile __u64 *)((void *)&ctx->regs + offsetof(struct pt_regs, cs)) & 3) {
		ts->user_ticks++;
		return 0;
	}
	/* In the kernel: in a syscall if the saved user registers say so (a
	 * syscall's return slot holds -ENOSYS until it returns; an exception
	 * or interrupt from user mode has no syscall number). */
	u = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!u)
		return 0;
	bpf_probe_read_kernel(&nr, sizeof(nr), &u->orig_ax);
	bpf_probe_read_kernel(&ax, sizeof(ax), &u->ax);
	if (nr >= 0 && nr < MAX_SYSCALLS && ax == -ENOSYS)
		ts->ticks++;
	return 0;
}

static __always_inline void note_task(struct task_state *ts, struct task_struct *t, __u32 ppid)
{
	ts->tgid = t->tgid;
	ts->ppid = ppid;
	bpf_probe_read_kernel_str(ts->comm, sizeof(ts->comm), t->comm);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	struct task_state *pts, *cts;

	pts = bpf_task_storage_get(&states, parent, 0, 0);
	if (!pts || pts->state != TARGET_ACTIVE)
		return 0;
	/* Threads and processes alike: every new task gets its own state. */
	cts = bpf_task_storage_get(&states, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!cts) {
		count_lost(LOST_NO_TASK_STORAGE, 1);
		return 0;
	}
	cts->state = TARGET_FORKED;
	note_task(cts, child, child->tgid != parent->tgid ? parent->tgid : parent->real_parent->tgid);
	cts->mask = child->blocked.sig[0];
	cts->mask_known = 1;
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct task_state *ts = bpf_task_storage_get(&states, p, 0, 0);

	if (!ts)
		return 0;
	/* A held child counts from here: its execve is counted at its exit. */
	ts->state = TARGET_ACTIVE;
	note_task(ts, p, p->real_parent->tgid);
	return 0;
}

/* A handler runs with another mask: the one last seen is stale. */
SEC("tp_btf/signal_deliver")
int BPF_PROG(signal_deliver, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	struct task_state *ts = bpf_task_storage_get(&states, bpf_get_current_task_btf(), 0, 0);

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
	if (bpf_ringbuf_output(&exits, &r, sizeof(r), 0))
		count_lost(LOST_EXIT_RECORDS, s->calls);
	return 0;
}

/* Copies one syscall's counts into the record, packed. */
static long pack_entry(__u32 i, struct exit_ctx *x)
{
	struct exit_record *rec = x->rec;
	struct sys_val *v;
	__u64 nr = i, n = rec->entries;

	/* One register each, so that the checks bound what is indexed. */
	barrier_var(nr);
	barrier_var(n);
	if (nr >= MAX_SYSCALLS || n >= MAX_SYSCALLS)
		return 1;
	v = &x->ts->stats[nr];
	if (!v->calls)
		return 0;
	rec->e[n].nr = nr;
	rec->e[n].v = *v;
	rec->entries = n + 1;
	x->calls += v->calls;
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	struct exit_ctx x = { .tid = p->pid };
	struct task_state *ts = bpf_task_storage_get(&states, p, 0, 0);
	struct exit_record *rec;
	struct pt_regs *regs;
	__u32 zero = 0, size, n;
	long nr;

	if (!ts || ts->exited)
		return 0;
	/* exit and exit_group never return: count the one it is in. */
	regs = (struct pt_regs *)bpf_task_pt_regs(p);
	if (regs && ts->state == TARGET_ACTIVE && !stopped) {
		nr = regs->orig_ax;
		if ((nr == NR_EXIT || nr == NR_EXIT_GROUP) && regs->ax == -ENOSYS &&
		    !(p->thread_info.status & TS_COMPAT) && specs[nr].traced) {
			ts->stats[nr].calls++;
			ts->seq++;
		}
	}
	ts->exited = 1;
	rec = bpf_map_lookup_elem(&exit_scratch, &zero);
	if (!rec)
		return 0;
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
	rec->user_ticks = ts->user_ticks;
	__builtin_memcpy(rec->mask_calls, ts->mask_calls, sizeof(rec->mask_calls));
	__builtin_memcpy(rec->errnos, ts->errnos, sizeof(rec->errnos));
	rec->errnos_lost = ts->errnos_lost;
	bpf_loop(MAX_SYSCALLS, pack_entry, &x, 0);
	n = rec->entries;
	if (n > MAX_SYSCALLS)
		n = MAX_SYSCALLS;
	size = sizeof(*rec) - sizeof(rec->e) + n * sizeof(rec->e[0]);
	if (size > sizeof(*rec))
		return 0;
	if (bpf_ringbuf_output(&exits, rec, size,
			       bpf_ringbuf_query(&exits, BPF_RB_AVAIL_DATA) >= EXITS_BYTES / 8 ?
				       BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP))
		count_lost(LOST_EXIT_RECORDS, x.calls);
	/* After the record: user space files a thread's slots where its
	 * record went. */
	bpf_loop(ARG_SLOTS, send_slot, &x, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
