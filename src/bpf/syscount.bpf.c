// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Exact per-syscall accounting of a set of processes, aggregated in the
 * kernel: counts, errors by errno, time in the kernel, and per-argument
 * fingerprints (paths, fds, byte-count histograms). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "syscount.h"

#define NR_EXECVE 59
#define NR_EXIT 60
#define NR_EXIT_GROUP 231
#define NR_EXECVEAT 322
#define MAX_ERRNO 4095

const volatile struct syscall_spec specs[MAX_SYSCALLS] = {};

/* Whom to count: tgid -> enum target_state. Children join at fork. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u32);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sys_key);
	__type(value, struct sys_val);
} sys_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct errno_key);
	__type(value, __u64);
} errno_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct arg_key);
	__type(value, struct arg_val);
} arg_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct task_info);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* The syscall a thread is in, between enter and exit. */
struct inflight {
	__u64 start_ns;
	__u64 path_ptr; /* to re-read at exit if it faulted at entry */
	__u64 requested;
	__u32 nr;
	__u8 active;
	__u8 kind;
	__u8 path_ok;
	__u8 _pad;
	struct arg_key key;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct inflight);
} inflights SEC(".maps");

static const struct sys_val zero_sys;
static const struct arg_val zero_arg;

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
	if (err && err != -17 /* EEXIST: another CPU won */) {
		count_lost(full);
		return NULL;
	}
	return bpf_map_lookup_elem(map, key);
}

static __always_inline void read_path(struct inflight *in)
{
	long n;

	__builtin_memset(in->key.path, 0, PATH_LEN);
	n = bpf_probe_read_user_str(in->key.path, PATH_LEN, (void *)in->path_ptr);
	in->path_ok = n > 0;
	if (n == PATH_LEN)
		count_lost(LOST_PATH_TRUNCATED);
}

static __always_inline void account(struct inflight *in, __u64 pid_tgid,
				    long ret, __u64 ns)
{
	struct sys_key sk = {
		.tgid = pid_tgid >> 32, .tid = (__u32)pid_tgid, .nr = in->nr,
	};
	bool failed = ret < 0 && ret >= -MAX_ERRNO;
	struct sys_val *sv;
	struct arg_val *av;

	sv = lookup_or_init(&sys_stats, &sk, &zero_sys, LOST_SYSCALL_MAP_FULL);
	if (sv) {
		sv->calls++;
		sv->total_ns += ns;
		if (ns > sv->max_ns)
			sv->max_ns = ns;
		if (ns < sv->min_ns || sv->calls == 1)
			sv->min_ns = ns;
		if (failed)
			sv->errors++;
	}
	if (failed) {
		struct errno_key ek = { .tgid = sk.tgid, .nr = in->nr, .err = -ret };
		__u64 *ev = lookup_or_init(&errno_stats, &ek, &zero_sys.calls,
					   LOST_ERRNO_MAP_FULL);
		if (ev)
			(*ev)++;
	}
	if (in->kind == ARG_NONE)
		return;
	if (in->kind == ARG_PATH && !in->path_ok) {
		/* The kernel has just copied the string in, so its page is
		 * resident now even if it was not at entry. */
		read_path(in);
		if (!in->path_ok)
			count_lost(LOST_PATH_UNREADABLE);
	}
	av = lookup_or_init(&arg_stats, &in->key, &zero_arg, LOST_ARG_MAP_FULL);
	if (!av)
		return;
	av->calls++;
	av->total_ns += ns;
	if (failed)
		av->errors++;
	if (in->kind == ARG_FD_IO) {
		__u32 b = size_bucket(in->requested);
		if (b < HIST_BUCKETS)
			av->requested[b]++;
		b = size_bucket(failed || ret < 0 ? 0 : ret);
		if (b < HIST_BUCKETS)
			av->returned[b]++;
	}
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct syscall_spec spec;
	struct inflight *in;
	__u32 *state;

	state = bpf_map_lookup_elem(&targets, &tgid);
	if (!state)
		return 0;
	if (*state != TARGET_ACTIVE) {
		/* Held child: nothing counts before its execve. */
		if (id != NR_EXECVE && id != NR_EXECVEAT)
			return 0;
		*state = TARGET_ACTIVE;
	}
	if (id < 0 || id >= MAX_SYSCALLS) {
		count_lost(LOST_NR_OUT_OF_RANGE);
		return 0;
	}
	spec = specs[id];
	if (!spec.traced)
		return 0;
	in = bpf_task_storage_get(&inflights, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!in) {
		count_lost(LOST_NO_TASK_STORAGE);
		return 0;
	}
	in->nr = id;
	in->kind = spec.kind;
	if (spec.kind != ARG_NONE) {
		in->key.tgid = tgid;
		in->key.nr = id;
		if (spec.kind == ARG_PATH) {
			/* The argument before the path of an *at call is its dirfd. */
			in->key.fd = spec.arg > 0 ?
				(int)syscall_arg(regs, spec.arg - 1) : -1;
			in->path_ptr = syscall_arg(regs, spec.arg);
			read_path(in);
		} else {
			in->key.fd = (int)syscall_arg(regs, spec.arg);
			__builtin_memset(in->key.path, 0, PATH_LEN);
			in->requested = syscall_arg(regs, spec.size_arg);
		}
	}
	if (id == NR_EXIT || id == NR_EXIT_GROUP) {
		/* They never return: count them here, with no time. */
		in->active = 0;
		account(in, pid_tgid, 0, 0);
		return 0;
	}
	in->active = 1;
	in->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	__u64 now = bpf_ktime_get_ns();
	struct inflight *in;

	in = bpf_task_storage_get(&inflights, bpf_get_current_task_btf(), 0, 0);
	if (!in || !in->active)
		return 0;
	in->active = 0;
	account(in, bpf_get_current_pid_tgid(), ret, now - in->start_ns);
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
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u32 active = TARGET_ACTIVE;
	__u32 *state;

	state = bpf_map_lookup_elem(&targets, &ptgid);
	if (!state || *state != TARGET_ACTIVE)
		return 0;
	if (ctgid != ptgid &&
	    bpf_map_update_elem(&targets, &ctgid, &active, BPF_ANY))
		count_lost(LOST_TARGET_MAP_FULL);
	note_task(child, ctgid != ptgid ? ptgid : parent->real_parent->tgid);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	__u32 *state = bpf_map_lookup_elem(&targets, &tgid);

	if (state && *state == TARGET_ACTIVE)
		note_task(p, p->real_parent->tgid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	__u32 tid = p->pid, tgid = p->tgid;
	struct task_info *info;

	if (!bpf_map_lookup_elem(&targets, &tgid))
		return 0;
	info = bpf_map_lookup_elem(&tasks, &tid);
	if (!info) {
		note_task(p, p->real_parent->tgid);
		info = bpf_map_lookup_elem(&tasks, &tid);
		if (!info)
			return 0;
	}
	bpf_probe_read_kernel_str(info->comm, sizeof(info->comm), p->comm);
	info->exit_code = p->exit_code;
	info->exited = 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
