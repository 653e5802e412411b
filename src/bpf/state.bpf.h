/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What every part of syscount.bpf.c shares: the options user space sets
 * before load, the maps, and how a task's state is found, made and
 * described. A target thread's state lives in a slot by its tid
 * (`state_slots`) or its task storage (`states`), or on kernels before 5.15
 * (the legacy programs) in a map keyed by its tid. */
#ifndef SYSDIET_STATE_BPF_H
#define SYSDIET_STATE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "syscount.h"
#include "states.bpf.h"
#include "bits.bpf.h"
#include "maps.bpf.h"
#include "arch.bpf.h"

#define MAX_ERRNO 4095
#define ENOMEM 12
#define E2BIG 7
#define MAX_GAP (1U << 20)
#define SLOT_FLUSH_AT (1ULL << 31) /* before a slot's u32 buckets can wrap */

/* The read-only data: every value is user space's (set_spec.rs), which
 * names a kept set by them; none has a value of its own here. */
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
/* Ticks of tick_ns each CPU-clock tick counts for: user space slows the
 * clock down once a run is past its start (backend/bpf/ticks.rs), and
 * raises this with it. Its own section, so that user space writes it
 * alone. */
__u64 tick_weight SEC(".data.ticks") = 1;
/* The kernel's own tick handler (its address), set by user space once a
 * run is past its start (kernel_tick, syscount.bpf.c); 0: not looked for. */
__u64 kernel_tick_fn SEC(".data.ticks") = 0;
/* The kernel's ticks seen since, on any CPU: user space hands the CPU
 * time over to them only once one is seen (else the handler was not the
 * tick's), ... */
__u64 kernel_ticks_seen SEC(".data.ticks") = 0;
/* ... and then stops its clock and sets what each weighs, in ticks of
 * tick_ns; 0: they are seen, not charged. */
__u64 kernel_tick_weight SEC(".data.ticks") = 0;
/* Stack samples: off unless set. A thread starts at one sample per
 * `sample_first_gap` calls; the gap then doubles or halves to keep about
 * one sample per `sample_interval_ns` of its time. */
const volatile __u8 sample_stacks = 0;
const volatile __u32 sample_first_gap = 0;
const volatile __u64 sample_interval_ns = 0;
/* Unread sample bytes past which a sample wakes the reader: a sixteenth
 * of the ring, whose size user space picks. */
const volatile __u64 sample_wakeup_bytes = 0;
/* Unread exit bytes past which an exit record wakes the reader: an
 * eighth of its ring. */
const volatile __u64 exits_wakeup_bytes = 0;
/* The same for path strings and exec records: an eighth of theirs. */
const volatile __u64 strings_wakeup_bytes = 0;

/* Tests only (SYSDIET_TEST_SKIP=N): one run in N of the current programs'
 * sys_exit, fork, exec, exit and signal hooks, at random, does nothing, as
 * if the kernel had skipped it, so that the backups are tested on any
 * kernel (SYSDIET_BACKUP_HOOK=1). 0: none. */
const volatile __u64 test_skip_one_in = 0;

/* The backups are loaded (0: not). A word, so that the
 * section's own constants after the variables (find_tick_fn's names) start
 * past the end of the struct user space writes, not in its padding. */
const volatile __u64 backup_hook = 0;

/* Set by sysdiet when it reads out: counts freeze, so that what it reads
 * from a live thread is all there is. */
volatile __u32 stopped = 0;

/* Legacy kernels: how many threads' tick_counts hold ticks not yet taken.
 * While none does, a syscall's exit need not look its thread's up: the
 * tick that charges one raises this first (on the CPU the thread runs on,
 * before its exit there or after a migration's barriers). */
__u64 legacy_ticks_pending = 0;

/* Syscall ends sys_exit_backup took over, and forks, execs and thread
 * exits the lifecycle hooks' backups did (the hooks' recursion_misses less
 * these were taken by neither). */
__u64 backup_runs = 0;

/* How many states may be in task storage (the others are in slots): none,
 * and a task with no slot of its own is no target without a helper call
 * to learn it. Raised before a state is put there (user space raises it
 * for the states it makes through a pidfd), lowered once one leaves it;
 * never below the true count. */
__u64 stored_states = 0;

/* Targets' tasks made by fork, and targets' tasks that ended. With the
 * targets user space added, they bound how many may be alive: when none
 * can be, the read-out does not look through /proc for them. */
__u64 targets_forked = 0;
__u64 targets_ended = 0;

/* The legacy variant of each program, for kernels before 5.15, which lack
 * some of what the others use (task storage: 5.11, exchanges: 5.12,
 * bpf_task_pt_regs: 5.15): a thread's state is here, keyed by its tid,
 * made when it becomes a target and removed at its exit. User space loads
 * one variant. */
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
 * Allocated as used: preallocated, every run would zero the whole table at
 * load. A power of two, since the kernel rounds the bucket array up to
 * one, zeroes it at load and walks it at read-out. Values are not per-CPU,
 * so they come from the BPF allocator's per-CPU caches; one that fails is
 * counted (LOST_ARG_NOMEM). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct arg_key);
	__type(value, struct arg_val);
} arg_stats SEC(".maps");

/* The first ARG_KEYS_LOGGED keys made in arg_stats, in the order made,
 * and how many were made in all: a run's read-out, and its keeper's reset,
 * find their entries by key instead of walking every bucket of the table
 * (262,144, a millisecond or more). A count over ARG_KEYS_LOGGED says to
 * walk it. */
#define ARG_KEYS_LOGGED 4096
struct arg_key arg_keys_logged[ARG_KEYS_LOGGED] = {};
__u64 arg_keys_made = 0;

/* The logged keys' entries, copied here by copy_logged (syscount.bpf.c)
 * for the read-out, which reads them where user space maps the globals:
 * one run of a program, not a lookup syscall per key. Found: 1 where the
 * key had an entry (one swept out since has none). Words: the first_calls
 * word of an entry that counts in one (`counting`), else 0, so that the
 * read-out need not map first_calls for them. */
struct arg_val logged_vals[ARG_KEYS_LOGGED] = {};
__u8 logged_found[ARG_KEYS_LOGGED] = {};
__u64 logged_words[ARG_KEYS_LOGGED] = {};

/* The first sighting of each argument key, a slot per key. A
 * file-tree walk's paths, each seen once, cost a slot of this array (one
 * compare-and-swap) instead of an arg_stats insert (an allocation and a
 * bucket lock). A key's second sighting finds its slot and
 * moves the first call's facts into arg_stats. A slot is never freed during
 * a run, so a key that finds no free slot of its own takes arg_stats' own
 * first-sighting path, exact as before. A key's slots: the ways of a line
 * in its group's region (first_sighting, arguments.bpf.h), then of a line
 * in its group's wide region, then one anywhere. 8 MiB; one slot when
 * every key is kept anyway (top, serve). A slot's word, set by one
 * compare-and-swap:
 * fingerprint << 32 | ns << 12 | FIRST_* flags | ret << 5 | req; 0: free.
 * Promoted, the key's untimed calls are counted in it (enum first_word),
 * with no lookup of arg_stats. */
#define FIRST_SLOTS (1 << 20)
/* The first half: the regions, and the slots anywhere; the second: the
 * wide regions, whose slots are taken by their tags (first_tags), each
 * written unread by the key that claimed its tag; none taken another way. */
#define FIRST_NARROW_SLOTS (FIRST_SLOTS / 2)
#define FIRST_REGION_SLOTS 2048        /* a group's region: 16 KiB */
#define FIRST_WIDE_REGION_SLOTS 262144 /* its wide region: 2 MiB */
#define FIRST_WAYS 4                   /* slots of a line: 32 bytes */

/* The first FIRST_SLOTS_LOGGED slots taken in first_calls, and how many
 * were taken in all (past the log's end, at least FIRST_SLOTS_LOGGED + 1):
 * a short run's keeper zeroes these words, not the whole 8 MiB. */
#define FIRST_SLOTS_LOGGED 1024
__u32 first_slots_logged[FIRST_SLOTS_LOGGED] = {};
__u64 first_slots_taken = 0;

/* Mappable, so that a keeper (keeper.rs) zeroes it with one memset
 * between runs (a long run's), not a million updates. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, FIRST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} first_calls SEC(".maps");

/* The tags of first_calls' wide regions (its second half): a byte of
 * each slot's key (0: free), FIRST_TAGGED slots' (two lines') in a word.
 * A wide region's lines are cold memory (2 MiB a group), its tags an
 * eighth of that: a new key learns it is new from them, claims its slot
 * there, and writes its word without reading its line (take_wide,
 * arguments.bpf.h). A keeper zeroes it whole between runs. */
#define FIRST_TAGGED 8
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, (FIRST_SLOTS - FIRST_NARROW_SLOTS) / FIRST_TAGGED);
	__type(key, __u32);
	__type(value, __u64);
} first_tags SEC(".maps");

/* This and errno_stats are allocated as used too: they are rarely
 * written (a promotion, a flush, a thread's 17th errno), and preallocated
 * they would be zeroed at every start-up. */
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

/* The counts of syscalls a thread made past its THREAD_SYSCALLS distinct
 * ones, by process and syscall: per-CPU, so that no other CPU adds to a
 * copy. Rare: a thread makes a few dozen kinds of syscall. */
struct spill_key {
	__u32 tgid;
	__u32 nr;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct spill_key);
	__type(value, struct sys_val);
} syscall_spill SEC(".maps");

/* Exited threads' counts and their cached argument counts. Sized by
 * user space to the CPUs, as are the other rings (RingSize in mod.rs). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} exits SEC(".maps");

/* Where an exit record is put together: a slot for sched_process_exit,
 * one for its backup, which runs on the CPU while a preempted run of the
 * hook fills its own (7.x). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct exit_record);
} exit_scratch SEC(".maps");

/* Where a path record is put together before it is sent, cut to size: a
 * slot for sys_exit, one for sys_exit_backup. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct path_record);
} path_scratch SEC(".maps");

/* The same for an exec record: the exec hook's slot, its backup's. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct exec_record);
} exec_scratch SEC(".maps");

/* Repeated paths' strings: a ring of their own, so that a flood of them
 * can never crowd out a thread's exit record. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} strings SEC(".maps");

/* Makes the skeleton generate these for the Rust side. */
const struct stack_sample *unused_stack_sample __attribute__((unused));
const struct slot_record *unused_slot_record __attribute__((unused));
const struct exec_record *unused_exec_record __attribute__((unused));
const struct path_record *unused_path_record __attribute__((unused));
const struct failure_record *unused_failure_record __attribute__((unused));
const struct live_head *unused_live_head __attribute__((unused));
const struct state_slot *unused_state_slot __attribute__((unused));
const enum arg_kind *unused_arg_kind __attribute__((unused));
const enum target_state *unused_target_state __attribute__((unused));
const enum lost_counter *unused_lost_counter __attribute__((unused));
const enum record_kind *unused_record_kind __attribute__((unused));
const enum path_mark *unused_path_mark __attribute__((unused));
const enum env_sent *unused_env_sent __attribute__((unused));
const enum first_word *unused_first_word __attribute__((unused));
const enum timeout_class *unused_timeout_class __attribute__((unused));
const enum mask_change *unused_mask_change __attribute__((unused));
const enum brk_change *unused_brk_change __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static const struct io_hist zero_hist;

/* Adds to a per-CPU counter. Where hooks can be preempted (backup_hook),
 * another program may run on this CPU between a plain add's load and its
 * store, and one of the two adds would be lost. */
static __always_inline void percpu_add(__u64 *v, __u64 n)
{
	if (backup_hook)
		__sync_fetch_and_add(v, n);
	else
		*v += n;
}

/* Global, so verified once, not with each caller, and its lookup inlined
 * once: a call of it is rare (something lost), its call sites many. */
__noinline int count_lost(__u32 what, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&lost, &what);
	if (v)
		percpu_add(v, n);
	return 0;
}

/* The slot of syscall `nr` among the thread's counts, taken at its first
 * call; THREAD_SYSCALLS when none is left (syscall_spill counts it). */
static __always_inline __u32 syscall_slot(struct task_state *ts, __u32 nr)
{
	__u32 at = ts->stat_of[nr & (MAX_SYSCALLS - 1)], n;

	if (at)
		return at - 1;
	n = ts->syscalls_used;
	if (n >= THREAD_SYSCALLS)
		return THREAD_SYSCALLS;
	ts->syscalls_used = n + 1;
	ts->stat_of[nr & (MAX_SYSCALLS - 1)] = n + 1;
	ts->stat_nr[n] = nr;
	return n;
}

/* The counts of syscall `nr` of the thread's process on this CPU, for a
 * thread with no slot left; NULL with no room (the call counted lost). */
static __always_inline struct sys_val *spilled(struct task_state *ts, __u32 nr)
{
	static const struct sys_val no_calls;
	struct spill_key k = { .tgid = ts->tgid, .nr = nr };
	struct sys_val *v = bpf_map_lookup_or_try_init(&syscall_spill, &k, &no_calls);

	if (!v)
		count_lost(LOST_SYSCALL_SPILL_FULL, 1);
	return v;
}

/* The flags of a record's output to `ring`: the reader is woken once more
 * than `limit` bytes wait unread; else it finds them at its next poll (every
 * 50 ms). A wakeup for each record (flags 0, when the reader keeps up) costs
 * the writer an irq_work, microseconds in a VM, on every promoted path. */
static __always_inline __u64 wakeup_past(void *ring, __u64 limit)
{
	return bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) >= limit ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* Whether the user string at `p` has a byte other than NUL at PATH_LEN - 1,
 * the place of the NUL that bpf_probe_read_user_str wrote when it cut. */
static __always_inline bool path_goes_on(const char *p)
{
	char c = 0;

	bpf_probe_read_user(&c, 1, p + PATH_LEN - 1);
	return c != 0;
}

/* `v`, read back from the thread's storage: the verifier then knows only
 * its type, not its value. A constant it knew (a syscall's argument kind,
 * a brk class) would otherwise split its walk of everything after, once
 * per value, wherever the value reaches an index or a predictable branch:
 * a store and a load instead of hundreds of instructions verified again
 * at every load. */
static __always_inline __u64 forget(struct task_state *ts, __u64 v)
{
	ts->forgotten = v;
	return *(volatile __u64 *)&ts->forgotten;
}

static const struct task_state empty_state;
static const struct tick_count no_ticks;

/* The state of target thread `t`, without moving it: its slot's, or its
 * task storage's (the tick programs, which may interrupt a hook, use
 * this). */
static __always_inline struct task_state *found_state(struct task_struct *t)
{
	struct state_slot *slot = slot_of_tid(t->pid);

	if (slot && slot_holds(slot, t->pid, t->start_time))
		return &slot->s;
	if (!stored_states)
		return NULL;
	return bpf_task_storage_get(&states, t, 0, 0);
}

/* A state made in task `t`'s storage, counted in stored_states first;
 * NULL with no room. */
static __always_inline struct task_state *stored_state_made(struct task_struct *t)
{
	struct task_state *ts;

	__sync_fetch_and_add(&stored_states, 1);
	ts = bpf_task_storage_get(&states, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts)
		__sync_fetch_and_add(&stored_states, -1);
	return ts;
}

/* Deletes task `t`'s stored state, if it has one. */
static __always_inline void stored_state_gone(struct task_struct *t)
{
	if (stored_states && !bpf_task_storage_delete(&states, t))
		__sync_fetch_and_add(&stored_states, -1);
}

/* The state of target thread `t` (`tid`: read by the legacy variant only),
 * made if `create` and there is none; NULL if it is no target, or with no
 * room. A state found in task storage moves into the thread's slot if that
 * is free. */
static __always_inline struct task_state *state_of(struct task_struct *t, __u32 tid, bool create, const bool legacy)
{
	struct state_slot *slot;
	struct task_state *ts;
	__u32 pid;

	if (!legacy) {
		pid = t->pid;
		slot = slot_of_tid(pid);
		if (!slot)
			return NULL;
		if (slot_holds(slot, pid, t->start_time))
			return &slot->s;
		if (create)
			ts = stored_state_made(t);
		else if (stored_states)
			ts = bpf_task_storage_get(&states, t, 0, 0);
		else
			return NULL;
		if (!ts || !claim_slot(slot, pid, t->start_time, ts))
			return ts;
		stored_state_gone(t);
		return &slot->s;
	}
	if (!create)
		return bpf_map_lookup_elem(&thread_states, &tid);
	ts = bpf_map_lookup_or_try_init(&thread_states, &tid, &empty_state);
	if (ts && bpf_map_update_elem(&thread_ticks, &tid, &no_ticks, BPF_ANY))
		count_lost(LOST_NO_TASK_STORAGE, 1); /* counted, its CPU time unseen */
	return ts;
}

/* Hook runs skipped_for_test skipped: taken by the backups, or missed, as
 * the kernel's skips are. */
__u64 test_skips = 0;

/* Whether this run of a current program's hook for task `t` is drawn to
 * be skipped: only a traced task's, so that each skip stands for a run that
 * counted; not a held child's, whose state comes marked (add_target) for
 * the call it is in. */
static __always_inline bool drawn_for_test_skip(struct task_struct *t)
{
	struct task_state *ts;

	if (!test_skip_one_in || bpf_get_prandom_u32() % test_skip_one_in)
		return false;
	ts = state_of(t, 0, false, false);
	return ts && ts->state != TARGET_PENDING_EXEC;
}

/* The same for a hook whose skipped runs are counted as missed. */
static __always_inline bool skipped_for_test(struct task_struct *t)
{
	if (!drawn_for_test_skip(t))
		return false;
	__sync_fetch_and_add(&test_skips, 1);
	return true;
}

/* The running task: a BTF pointer, or on legacy kernels (before 5.15) an
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

/* Empties a thread's tick count: one fewer pending if it held any (the
 * one place legacy_ticks_pending goes down). */
static __always_inline void clear_legacy_ticks(struct tick_count *tc)
{
	if (!(tc->ticks | tc->user_ticks))
		return;
	tc->ticks = 0;
	tc->user_ticks = 0;
	__sync_fetch_and_add(&legacy_ticks_pending, -1);
}

/* A legacy thread's ticks since its last syscall exit: those in the call
 * that ends, returned, and those in user mode, added to its state. */
static __always_inline __u64 take_legacy_ticks(struct task_state *ts, __u32 tid)
{
	struct tick_count *tc;
	__u64 ticks;

	if (!legacy_ticks_pending)
		return 0;
	tc = bpf_map_lookup_elem(&thread_ticks, &tid);
	if (!tc)
		return 0;
	ticks = tc->ticks;
	ts->user_ticks += tc->user_ticks;
	clear_legacy_ticks(tc);
	return ticks;
}

/* A held child's ticks before its exec, which are not its command's. */
static __always_inline void drop_legacy_ticks(__u32 tid)
{
	struct tick_count *tc = bpf_map_lookup_elem(&thread_ticks, &tid);

	if (tc)
		clear_legacy_ticks(tc);
}

#endif
