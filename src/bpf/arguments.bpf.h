/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A finished call's argument key (path, fd, clock, timeout, mask change)
 * and where it is counted: the thread's cache of repeated keys, or
 * arg_stats, or the summary of keys seen once. */
#ifndef SYSDIET_ARGUMENTS_BPF_H
#define SYSDIET_ARGUMENTS_BPF_H

#include "state.bpf.h"
#include "hash.bpf.h"

/* Bucket 0 holds 0, bucket 1 holds 1, bucket k >= 2 holds (2^(k-2), 2^(k-1)],
 * so a bucket reads as "at most 2^(k-1) bytes". The last one holds the rest. */
static __always_inline __u32 size_bucket(__u64 v)
{
	/* Without a branch, as log2_64: each bucket a way of its own would
	 * have the verifier walk the rest of sys_exit once for each. v - 1
	 * for v = 0 is 2^64 - 1, whose bucket is dropped by the pick. */
	__u64 b = pick(below(v, 2), v, log2_64(v - 1) + 2);

	return pick(below(b, HIST_BUCKETS), b, HIST_BUCKETS - 1);
}

/* A 64-bit hash of the first len bytes of r->path (len < PATH_LEN), never 0,
 * which marks fd calls. The path is at offset 16: read a word at a time, not
 * a byte (which the compiler would otherwise assume of a char array). */
static __always_inline __u64 hash_path(struct path_record *r, __u32 len)
{
	if (!r)
		return PATH_HASH_UNREADABLE;
	return hash_words(__builtin_assume_aligned(r->path, 8), PATH_LEN / 8, len);
}

/* Kernels before 5.12 take no pointer argument of a global function, and
 * their verifier is another's: a static function there, verified with each
 * caller. */
static __noinline __u64 path_hash_legacy(struct path_record *r, __u32 len)
{
	return hash_path(r, len);
}

/* One finished call's facts, as its argument key needs them. */
struct call {
	__u32 nr;
	__u8 kind;
	__u8 failed;
	__u8 req_bucket;
	__u8 ret_bucket;
	__u8 scratch; /* its path's slot of path_scratch: 1 in sys_exit_backup */
	__u8 stat_at;   /* its syscall's slot of the thread's counts (THREAD_SYSCALLS: none) */
	__u8 last_slot; /* the key slot that syscall's last call counted in */
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
 * mask before is the one this thread was last seen with (every change is
 * seen: this call, sigreturn, a handler's entry makes it unknown), else
 * *oldset when given; neither, and a change is not told from none. */
static __always_inline __u32 classify_mask(struct task_state *ts, struct task_struct *t,
					   struct pt_regs *regs, long ret, const bool legacy)
{
	__u64 after = blocked_signals(t, legacy), before = ts->mask, oldset = PT_REGS_PARM3_SYSCALL(regs);
	int how = PT_REGS_PARM1_SYSCALL(regs);
	bool known = ts->mask_known;
	__u32 c = how == 0 ? MASK_BLOCK : how == 1 ? MASK_UNBLOCK : MASK_SET;

	ts->mask = after;
	ts->mask_known = 1;
	if (!PT_REGS_PARM2_SYSCALL(regs))
		return MASK_QUERY;
	if (ret < 0)
		return c;
	if (!known && oldset && !bpf_probe_read_user(&before, sizeof(before), (void *)oldset))
		known = true;
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
	static const __u64 zero;
	__u64 *v = bpf_map_lookup_or_try_init(&errno_stats, &k, &zero);

	if (v)
		(*v)++; /* per-CPU: no other CPU adds to this copy */
	else
		ts->errnos_lost++;
}

/* One byte-count bucket of a slot added to its key's histogram. */
struct hist_merge {
	struct io_hist *h;
	struct arg_slot *s;
};

static int merge_bucket(__u32 i, struct hist_merge *m)
{
	struct arg_slot *s = m->s;
	struct io_hist *h = m->h;

	if (!s || !h)
		return 1;
	i &= HIST_BUCKETS - 1; /* bpf_loop stops at HIST_BUCKETS */
	if (s->requested[i])
		__sync_fetch_and_add(&h->requested[i], s->requested[i]);
	if (s->returned[i])
		__sync_fetch_and_add(&h->returned[i], s->returned[i]);
	return 0;
}

/* Adds a slot's calls since its last flush to arg_stats (and io_hists);
 * `tgid` is the slot's owner. The buckets are merged by bpf_loop where
 * the kernel has it (`loops`: 5.17), which the verifier checks once, not
 * for each of the 32 turns with each of their two branches; else a
 * bounded loop. */
static __always_inline int flush(__u32 tgid, struct arg_slot *s, const bool loops)
{
	struct hist_merge m = { .s = s };
	struct arg_key k;
	struct arg_val *v;
	__u32 i;

	if (!s || !s->used || !s->calls)
		return 0;
	k = (struct arg_key){ .tgid = tgid, .nr = s->nr, .fd = s->fd, .path_hash = s->path_hash };
	v = bpf_map_lookup_elem(&arg_stats, &k);
	if (!v) {
		count_lost(LOST_ARG_TABLE_FULL, s->calls);
		goto out;
	}
	__sync_fetch_and_add(&v->calls, s->calls);
	__sync_fetch_and_add(&v->errors, s->errors);
	__sync_fetch_and_add(&v->ns, s->ns);
	if (specs[s->nr & (MAX_SYSCALLS - 1)].kind == ARG_FD_IO) {
		m.h = bpf_map_lookup_elem(&io_hists, &k);
		if (!m.h)
			count_lost(LOST_HIST_TABLE_FULL, s->calls);
		else if (loops)
			bpf_loop(HIST_BUCKETS, merge_bucket, &m, 0);
		else
			for (i = 0; i < HIST_BUCKETS; i++)
				merge_bucket(i, &m);
	}
out:
	s->calls = s->errors = s->ns = 0;
	__builtin_memset(s->requested, 0, sizeof(s->requested));
	__builtin_memset(s->returned, 0, sizeof(s->returned));
	return 0;
}

/* Global, so verified once, not with each caller: called only when a slot
 * changes hands or fills. */
__noinline int flush_slot(__u32 tgid, struct arg_slot *s)
{
	return flush(tgid, s, true);
}

/* The same without bpf_loop (the bounded programs: 5.15 and 5.16). */
__noinline int flush_slot_bounded(__u32 tgid, struct arg_slot *s)
{
	return flush(tgid, s, false);
}

/* The same on legacy kernels, which take no pointer argument of a global
 * function (before 5.12): the slot is found again by the thread and its
 * index. A static function would be verified again at each call. */
__noinline int flush_slot_legacy(__u32 tgid, __u32 index)
{
	/* A legacy state is found by its tid alone (no task is read). */
	struct task_state *ts = state_of(0, legacy_tid(true), false, true);

	/* Never NULL: the caller, this thread's syscall, holds the state. */
	if (!ts)
		return 0;
	return flush(tgid, &ts->slots[index & (ARG_SLOTS - 1)], false);
}

static __always_inline void summarise_once(struct call *c, __s64 keys, __s64 errors, __s64 ns)
{
	/* The key on the stack: `c` may be a global function's argument,
	 * which kernels before 6.3 take as no map key. */
	__u32 nr = c->nr;
	struct once_summary *o = bpf_map_lookup_elem(&once_summary, &nr);

	if (o) {
		percpu_add(&o->keys, keys);
		percpu_add(&o->errors, errors);
		percpu_add(&o->ns, ns);
	}
}

/* The path this call read is in this CPU's path_scratch, in the slot of the
 * hook that read it (sys_exit_backup runs while a preempted sys_exit may
 * be between its read and this). */
static __always_inline bool send_path(const struct call *c)
{
	__u32 slot = c->scratch & 1, len;
	struct path_record *r = bpf_map_lookup_elem(&path_scratch, &slot);

	if (!r)
		return false;
	r->kind = RECORD_PATH;
	r->path_hash = c->path_hash;
	len = r->len; /* PATH_LEN + 1: cut (see sys_exit) */
	if (len > PATH_LEN)
		len = PATH_LEN;
	return !bpf_ringbuf_output(&strings, r, offsetof(struct path_record, path) + len,
				   wakeup_past(&strings, strings_wakeup_bytes));
}

/* A key's first call, summarised: if it is a failed path call, the
 * thread's first few since its exec and a sample of the rest go out by
 * name too (syscount.h, FAILURES_NAMED_ALL). */
static __always_inline void name_failure(struct task_state *ts, const struct call *c)
{
	struct failure_record r;
	__u32 seen = ts->failures_seen;

	if (!c->failed || c->kind != ARG_PATH || c->path_hash == PATH_HASH_UNREADABLE ||
	    c->path_hash == PATH_HASH_NULL || seen >= FAILURES_SEEN_MAX)
		return;
	ts->failures_seen = seen + 1;
	if (seen >= FAILURES_NAMED_ALL && (seen - FAILURES_NAMED_ALL) % FAILURES_NAMED_EVERY)
		return;
	r = (struct failure_record){ .kind = RECORD_FAILURE, .tgid = ts->tgid, .nr = c->nr,
				     .fd = c->fd, .path_hash = c->path_hash, .ns = c->ns };
	if (bpf_ringbuf_output(&strings, &r, sizeof(r), BPF_RB_NO_WAKEUP) || !send_path(c))
		count_lost(LOST_FAILURE_NAME, 1);
}

/* A first call's word: its facts until the key is promoted; then, once
 * its entry names the word, the count of the key's plain calls (syscount.h,
 * enum first_word). FIRST_FAILED is the first call's until promotion,
 * FIRST_WORD_COUNTING after: promotion clears the facts. */
#define FIRST_FAILED ((__u64)FIRST_WORD_COUNTING)
#define FIRST_PROMOTED ((__u64)FIRST_WORD_PROMOTED)
#define FIRST_NS_MAX 0xFFFFFULL /* 20 bits: a 4-tick call, or ~1 ms measured */
/* A first call too long for its word (FIRST_NS_MAX and more) leaves this
 * in the word's ns bits instead: its facts went to an arg_stats entry of
 * its own (`once`), as when the key has no slot, and so do its key's later
 * calls. Seen once, such a key is one-shot like any other. */
#define FIRST_NS_ELSEWHERE (FIRST_NS_MAX << 12)
/* A word's high half: the 32 bits of its key's hash that tell the keys
 * sharing a slot apart. */
#define FIRST_FINGERPRINT 0xFFFFFFFF00000000ULL

/* Logs slot `i` just taken in first_calls (FIRST_SLOTS_LOGGED), as
 * log_made_key logs a key: an index lost to other CPUs makes the count
 * say the log is not whole. Global, so verified once; called only while
 * the log has room, so a walk's later names only read the count. */
__noinline int log_first_slot(__u32 i)
{
	__u64 n = first_slots_taken, seen;
	int tries;

	for (tries = 0; tries < 3 && n < FIRST_SLOTS_LOGGED; tries++) {
		seen = __sync_val_compare_and_swap(&first_slots_taken, n, n + 1);
		if (seen == n) {
			first_slots_logged[n & (FIRST_SLOTS_LOGGED - 1)] = i;
			return 0;
		}
		n = seen;
	}
	if (n <= FIRST_SLOTS_LOGGED)
		__sync_fetch_and_add(&first_slots_taken, FIRST_SLOTS_LOGGED + 1);
	return 0;
}

/* What first_calls knows of a key. */
enum sighting {
	SIGHTING_FIRST,    /* its first call: now in a slot of its own (in
			      none, when it lost a race: LOST_FIRST_RACE) */
	SIGHTING_SECOND,   /* its second: the first call's facts are handed over */
	SIGHTING_REPEATED, /* promoted already: its counts are in arg_stats */
	SIGHTING_UNKNOWN,  /* no slot of its own, or its first call was too
			      long for the word: ask arg_stats */
	SIGHTING_COUNTED,  /* found promoted in arg_stats */
	SIGHTING_WORD,     /* promoted, and its word counts a call like this */
};

/* Makes the count of keys made say that not all are logged, once: every
 * key made after that (a walk's, by the thousand) only reads the count,
 * with no atomic write to a line all CPUs share. */
static __always_inline void unlogged_key(__u64 made)
{
	if (made <= ARG_KEYS_LOGGED)
		__sync_fetch_and_add(&arg_keys_made, ARG_KEYS_LOGGED + 1);
}

/* Logs a key just made in arg_stats (ARG_KEYS_LOGGED): its index taken by
 * compare-and-swap (fetching adds need a newer instruction set than the
 * object's). A key not logged, when the log is full or the index was lost
 * to other CPUs, makes the count say so. Global, so verified once. */
__noinline int log_made_key(struct arg_key *k)
{
	__u64 i, seen;
	int tries;

	if (!k)
		return 0;
	i = arg_keys_made;
	for (tries = 0; tries < 3 && i < ARG_KEYS_LOGGED; tries++) {
		seen = __sync_val_compare_and_swap(&arg_keys_made, i, i + 1);
		if (seen == i) {
			arg_keys_logged[i] = *k;
			return 0;
		}
		i = seen;
	}
	unlogged_key(i);
	return 0;
}

/* A key just made in arg_stats: logged, where the kernel can (legacy
 * kernels have no compare-and-swap: their count says to walk the table). */
static __always_inline void made_key(struct arg_key *k, const bool legacy)
{
	if (legacy)
		unlogged_key(arg_keys_made);
	else
		log_made_key(k);
}

/* The key's arg_stats entry, made (and logged) if it has none. */
static __always_inline struct arg_val *entry_or_make(struct arg_key *k, const bool legacy)
{
	static const struct arg_val repeated; /* once = 0 */
	struct arg_val *v = bpf_map_lookup_elem(&arg_stats, k);
	int err;

	if (v)
		return v;
	/* int: see bpf_map_lookup_or_try_init */
	err = bpf_map_update_elem(&arg_stats, k, &repeated, BPF_NOEXIST);
	if (!err)
		made_key(k, legacy);
	else if (err != -EEXIST)
		return 0;
	return bpf_map_lookup_elem(&arg_stats, k);
}

/* Whether a call of a promoted key whose word counts can be counted
 * there: one that took no measured time and has no byte histogram. */
static __always_inline bool word_counts(struct call *c)
{
	return c->kind != ARG_FD_IO && !c->ns;
}

/* Every slot a key may take holds another key's word (no word is 1: a
 * fingerprint is never 0). */
#define OTHER_KEYS 1ULL
/* A way of the key's wide line bears its tag, and its word is not written
 * yet: another thread is between the tag and the word (no word is 2). */
#define RACING_KEY 2ULL

/* Sets a slot's word to `mine` if it is free: the word found there (0:
 * taken, now `mine`). Read first: a taken slot costs no locked write. */
static __always_inline __u64 take_free(__u64 *f, __u64 mine)
{
	__u64 word = *(volatile __u64 *)f;

	if (!word)
		word = __sync_val_compare_and_swap(f, 0, mine);
	return word;
}

/* Slot `i` for the key whose fingerprint is `ours`: the word found there
 * if it is the key's (0: it was free, and is the key's now, `mine`
 * written), else OTHER_KEYS; `*word_at` is the slot's word. */
static __always_inline __u64 take_slot(__u32 i, __u64 mine, __u64 ours, __u64 **word_at)
{
	__u64 *f = bpf_map_lookup_elem(&first_calls, &i);
	__u64 word;

	if (!f)
		return OTHER_KEYS;
	word = take_free(f, mine);
	if (word && (word & FIRST_FINGERPRINT) != ours)
		return OTHER_KEYS;
	*word_at = f;
	return word;
}

/* The key's way in its wide line (`wide`, its first slot), by the line's
 * tags (first_tags): the word of the first way that bears the key's tag
 * and its fingerprint (`*slot`, `*word_at`: its slot and word); else the
 * first free way's, claimed by its tag and then written `mine` without
 * being read (0); OTHER_KEYS when every way holds another key. Claiming
 * the tag first keeps one way a key's: a second thread with the key finds
 * the tag, and the word once written. Between the two it finds 0, and
 * says RACING_KEY, as when the tags change between its read and its
 * claim (another key's claim in the same two lines that instant). */
static __always_inline __u64 take_wide(__u32 wide, __u64 h, __u64 ours, __u64 mine, __u32 *slot, __u64 **word_at)
{
	__u32 at = (wide - FIRST_NARROW_SLOTS) / FIRST_TAGGED, first = wide % FIRST_TAGGED * 8, j;
	__u64 *tags = bpf_map_lookup_elem(&first_tags, &at);
	__u64 tag = h >> 56, t, b, *f, word;

	if (!tags)
		return OTHER_KEYS;
	tag |= is_zero(tag);
	t = *(volatile __u64 *)tags;
	for (j = 0; j < FIRST_WAYS; j++) {
		b = t >> (first + j * 8) & 0xFF;
		if (!b)
			break;
		if (b != tag)
			continue;
		*slot = wide + j;
		f = bpf_map_lookup_elem(&first_calls, slot);
		if (!f)
			return OTHER_KEYS;
		word = *(volatile __u64 *)f;
		if (!word)
			return RACING_KEY;
		if ((word & FIRST_FINGERPRINT) == ours) {
			*word_at = f;
			return word;
		}
	}
	if (j >= FIRST_WAYS)
		return OTHER_KEYS;
	if (__sync_val_compare_and_swap(tags, t, t | tag << (first + j * 8)) != t)
		return RACING_KEY;
	*slot = wide + j;
	f = bpf_map_lookup_elem(&first_calls, slot);
	if (!f)
		return OTHER_KEYS;
	*f = mine;
	*word_at = f;
	return 0;
}

/* Looks `k` up in first_calls, taking a free slot for a new key; for a
 * second sighting, `*first` is the first call's word; `*slot` is the
 * key's slot and `*word_at` its word, when it has one.
 * A key's slot is in one line of its group's region (the process, the
 * syscall, the fd: a walk's names share one), the first of the line's
 * FIRST_WAYS that is free or its own; a full line sends it to a line of
 * the group's wide region, then to one slot anywhere. So a walk's keys,
 * each back once per directory, are a few pages and lines, not one of
 * each per key, and a walk of new paths writes its words into 2 MiB,
 * not 8, without reading them: their tags say they are new (take_wide;
 * docs/overhead.md).
 * The key's hash has the process's start time in it, so that a reused pid
 * is a new key. Keys that share a line or a slot are told apart by 32
 * bits of it, and a key whose lines are full compares itself with each
 * of their ways: a walk of 200,000 new paths takes two of them for one (one
 * call counted under the other's path; the syscall's count stays exact)
 * about once in 4,000 runs, a walk of 1,000 names once in millions. */
static __always_inline int first_sighting(struct task_state *ts, struct call *c, struct arg_key *k, __u64 *first,
					  __u32 *slot, __u64 **word_at)
{
	__u64 g, h, ours, word = 0, mine, seen, leader_start, *f = 0;
	__u32 i = 0, j, line, wide;

	if (!ts->leader_start)
		ts->leader_start = BPF_CORE_READ(bpf_get_current_task_btf(), group_leader, start_time);
	/* Read again, and `mine` made without a branch: each state that
	 * reached the ways' loop apart walked all nine of its turns. */
	leader_start = *(volatile __u64 *)&ts->leader_start;
	g = ((__u64)k->fd * 0x9E3779B97F4A7C15ULL) ^ (((__u64)k->nr << 32 | k->tgid) * 0xC2B2AE3D27D4EB4FULL) ^
	    (leader_start * 0x165667B19E3779F9ULL);
	g ^= g >> 31;
	g *= 0x94D049BB133111EBULL;
	g ^= g >> 29;
	h = k->path_hash ^ g;
	h ^= h >> 29;
	h *= 0xBF58476D1CE4E5B9ULL;
	h ^= h >> 32;
	/* Never 0 (a free slot), and all 32 bits of the hash otherwise. */
	ours = h & FIRST_FINGERPRINT;
	ours |= is_zero(ours) << 32;
	mine = pick(below(c->ns, FIRST_NS_MAX),
		    ours | c->ns << 12 | (__u64)(c->failed & 1) * FIRST_FAILED | (__u64)(c->ret_bucket & 31) << 5 |
			    (c->req_bucket & 31),
		    ours | FIRST_NS_ELSEWHERE);
	line = (g & (FIRST_NARROW_SLOTS - 1) & ~(FIRST_REGION_SLOTS - 1)) | (h & (FIRST_REGION_SLOTS / FIRST_WAYS - 1)) * FIRST_WAYS;
	wide = FIRST_NARROW_SLOTS | (g >> 32 & (FIRST_NARROW_SLOTS - 1) & ~(FIRST_WIDE_REGION_SLOTS - 1)) |
	       (h >> 9 & (FIRST_WIDE_REGION_SLOTS / FIRST_WAYS - 1)) * FIRST_WAYS;
	for (j = 0; j < FIRST_WAYS; j++) {
		i = line + j;
		word = take_slot(i, mine, ours, &f);
		if (word != OTHER_KEYS)
			break;
	}
	/* Its line full: its wide line, then its one slot outside its regions. */
	if (word == OTHER_KEYS)
		word = take_wide(wide, h, ours, mine, &i, &f);
	if (word == OTHER_KEYS) {
		i = h & (FIRST_NARROW_SLOTS - 1);
		word = take_slot(i, mine, ours, &f);
		if (word == OTHER_KEYS)
			return SIGHTING_UNKNOWN;
	}
	if (word == RACING_KEY) {
		count_lost(LOST_FIRST_RACE, 1);
		return SIGHTING_FIRST;
	}
	/* Logged here, not in the loop: each way the loop leaves a turn by
	 * is one more walk of the next turn for the verifier. */
	if (!word && first_slots_taken < FIRST_SLOTS_LOGGED)
		log_first_slot(i);
	*slot = i;
	*word_at = f;
	if (!word)
		return (mine & FIRST_NS_ELSEWHERE) == FIRST_NS_ELSEWHERE ? SIGHTING_UNKNOWN : SIGHTING_FIRST;
	if (word & FIRST_PROMOTED)
		return (word & FIRST_WORD_COUNTING) && word_counts(c) ? SIGHTING_WORD : SIGHTING_REPEATED;
	if ((word & FIRST_NS_ELSEWHERE) == FIRST_NS_ELSEWHERE)
		return SIGHTING_UNKNOWN;
	/* Promoted with its facts cleared: the bits they held count calls
	 * once the entry names the word. Only promotion changes a word that
	 * is set, so a swap that fails lost to another promoter. */
	seen = __sync_val_compare_and_swap(f, word, ours | FIRST_PROMOTED);
	if (seen != word)
		return SIGHTING_REPEATED;
	*first = word;
	return SIGHTING_SECOND;
}

/* Makes a just-promoted key's word count its plain calls: the entry
 * names the word first, so that the read-out adds every call counted
 * there. Not for read/write keys, whose byte histograms need the entry. */
static __always_inline void start_word(struct arg_val *v, struct call *c, __u32 slot, __u64 *word)
{
	if (!word || c->kind == ARG_FD_IO)
		return;
	v->first_slot = slot;
	v->counting = 1;
	__sync_fetch_and_or(word, FIRST_WORD_COUNTING);
}

/* Counts an untimed call of a promoted key in its word: no table lookup.
 * The call that brings a count to its FLUSH_AT moves that many to the
 * entry, so the word never fills. */
static __always_inline void count_in_word(__u64 *word, struct call *c, struct arg_key *k)
{
	__u64 old, calls, errors;
	struct arg_val *v;

	old = __sync_fetch_and_add(word, (1ULL << FIRST_WORD_CALLS_SHIFT) | c->failed);
	calls = is_zero(((old >> FIRST_WORD_CALLS_SHIFT) & FIRST_WORD_CALLS_MAX) ^ (FIRST_WORD_FLUSH_AT - 1)) *
		FIRST_WORD_FLUSH_AT;
	errors = (c->failed & is_zero((old & FIRST_WORD_ERRORS_MAX) ^ (FIRST_WORD_ERRORS_FLUSH_AT - 1))) *
		 FIRST_WORD_ERRORS_FLUSH_AT;
	if (!(calls | errors))
		return;
	__sync_fetch_and_sub(word, calls << FIRST_WORD_CALLS_SHIFT | errors);
	v = bpf_map_lookup_elem(&arg_stats, k);
	if (!v) {
		count_lost(LOST_ARG_TABLE_FULL, calls);
		return;
	}
	if (calls)
		__sync_fetch_and_add(&v->calls, calls);
	if (errors)
		__sync_fetch_and_add(&v->errors, errors);
}

/* A key counted exactly from now on (the caller counts this call). A
 * first call that was summarised (its facts: errors, ns, sizes) leaves the summary and
 * starts the key's byte histogram; the key's string is sent. */
static __always_inline void promote(struct task_state *ts, struct call *c, struct arg_key *k, __u64 errors,
				    __u64 ns, __u8 requested, __u8 returned)
{
	summarise_once(c, -1, -(__s64)errors, -(__s64)ns);
	if (c->kind == ARG_FD_IO) {
		struct io_hist *h;

		/* Later calls' sizes are added at their slot's flush. */
		h = bpf_map_lookup_or_try_init(&io_hists, k, &zero_hist);
		if (!h)
			count_lost(LOST_HIST_TABLE_FULL, 1);
		/* Shared: another thread's call of the key may be adding. */
		if (h) {
			__sync_fetch_and_add(&h->requested[requested & (HIST_BUCKETS - 1)], 1);
			__sync_fetch_and_add(&h->returned[returned & (HIST_BUCKETS - 1)], 1);
		}
	}
	if (c->kind == ARG_PATH && c->path_hash != PATH_HASH_UNREADABLE && c->path_hash != PATH_HASH_NULL &&
	    !send_path(c))
		count_lost(LOST_PATH_STRING, 1);
}

/* A hash of a call's key, for the thread's cache: its slot is picked by
 * the low bits, and a key that missed a slot is marked by the high ones. */
static __always_inline __u64 key_hash(struct call *c)
{
	return c->path_hash ^ ((__u64)c->fd * 0x9E3779B97F4A7C15ULL) ^ (c->nr * 0x45D9F3BU);
}

/* Counts a call in its key's arg_stats entry itself, not in the thread's
 * cache: a repeated key that is not hot there (a file-tree walk's names,
 * each back once per directory). */
static __always_inline void count_in_entry(struct arg_val *v, struct call *c, struct arg_key *k)
{
	struct io_hist *h;

	__sync_fetch_and_add(&v->calls, 1);
	if (c->failed)
		__sync_fetch_and_add(&v->errors, 1);
	if (c->ns)
		__sync_fetch_and_add(&v->ns, c->ns);
	if (c->kind != ARG_FD_IO)
		return;
	h = bpf_map_lookup_elem(&io_hists, k);
	if (!h) {
		count_lost(LOST_HIST_TABLE_FULL, 1);
		return;
	}
	__sync_fetch_and_add(&h->requested[c->req_bucket & (HIST_BUCKETS - 1)], 1);
	__sync_fetch_and_add(&h->returned[c->ret_bucket & (HIST_BUCKETS - 1)], 1);
}

/* Whether a repeated key that missed slot `s` takes it: when it is free,
 * or when the key missed it last time too (nothing else missed in
 * between). A key that comes back only after many others (a walk's names)
 * never does, so it evicts no hot key and costs no flush: it is counted
 * in its entry. */
static __always_inline bool takes_slot(struct arg_slot *s, struct call *c)
{
	__u16 mark = (key_hash(c) >> 48) | 1;

	if (!s->used || s->candidate == mark) {
		s->candidate = 0;
		return true;
	}
	s->candidate = mark;
	return false;
}

/* Whether this thread is the one to promote the key whose entry is `v`,
 * clearing its `once`: exactly one thread is. Legacy kernels (before 5.12)
 * have no exchange: a mark in `promoting` is held by one thread at a time,
 * and `once` is read again under it (a thread that takes the mark after
 * the promoter let it go finds `once` cleared). */
static __always_inline bool claim_promotion(struct arg_val *v, struct arg_key *k, const bool legacy)
{
	static const __u8 mark = 1;
	bool mine;

	if (!v->once)
		return false;
	if (!legacy)
		return __sync_lock_test_and_set(&v->once, 0);
	if (bpf_map_update_elem(&promoting, k, &mark, BPF_NOEXIST))
		return false;
	mine = v->once;
	v->once = 0;
	bpf_map_delete_elem(&promoting, k);
	return mine;
}

/* A call whose key is not in the thread's cache (`s`: its slot there). A
 * key seen for the first time is only summarised; its second sighting
 * promotes it, and from then on it is counted exactly, in the thread's
 * cache if it takes the slot (true: the caller counts this call there),
 * else in its entry (false: counted already).
 * Legacy kernels (before 5.12) have no compare-and-swap: there every key
 * takes arg_stats' own first-sighting path. */
static __always_inline bool miss(struct task_state *ts, struct call *c, struct arg_slot *s, const bool legacy)
{
	__u64 first = 0, first_ns, first_failed, *word = 0;
	struct arg_val *v = 0, nv;
	struct arg_key k;
	__u32 slot = 0;
	int sighting;
	long err;

	if (!ts || !c || !s)
		return false;
	k = (struct arg_key){ .tgid = ts->tgid, .nr = c->nr, .fd = c->fd, .path_hash = c->path_hash };
	/* first_calls first: a new key (a walk's names) then costs no table
	 * lookup, and a promoted one whose word counts costs none either. */
	sighting = keep_every_key || legacy ? SIGHTING_UNKNOWN : first_sighting(ts, c, &k, &first, &slot, &word);
	if (sighting == SIGHTING_UNKNOWN) {
		v = bpf_map_lookup_elem(&arg_stats, &k);
		if (v && !v->once)
			sighting = SIGHTING_COUNTED;
	}
	switch (sighting) {
	case SIGHTING_WORD:
		if (takes_slot(s, c))
			return true;
		if (word)
			count_in_word(word, c, &k);
		return false;
	case SIGHTING_COUNTED:
		break;
	case SIGHTING_FIRST:
		summarise_once(c, 1, c->failed, c->ns);
		name_failure(ts, c);
		return false;
	case SIGHTING_SECOND:
		v = entry_or_make(&k, legacy);
		if (!v) {
			/* The first call stays summarised; this one is lost. */
			count_lost(LOST_ARG_TABLE_FULL, 1);
			return false;
		}
		first_ns = (first >> 12) & FIRST_NS_MAX;
		first_failed = !!(first & FIRST_FAILED);
		__sync_fetch_and_add(&v->calls, 1);
		if (first_failed)
			__sync_fetch_and_add(&v->errors, 1);
		if (first_ns)
			__sync_fetch_and_add(&v->ns, first_ns);
		promote(ts, c, &k, first_failed, first_ns, first & 31, (first >> 5) & 31);
		start_word(v, c, slot, word);
		break;
	case SIGHTING_REPEATED:
		/* Its promoter may not have made the entry yet. */
		v = entry_or_make(&k, legacy);
		if (!v) {
			count_lost(LOST_ARG_TABLE_FULL, 1);
			return false;
		}
		break;
	default: /* unknown: v is NULL, or the key's entry while it has been seen once */
		nv = (struct arg_val){ .calls = 1, .errors = c->failed, .ns = c->ns, .once = 1,
				       .requested = c->req_bucket, .returned = c->ret_bucket };
		if (!v) {
			err = bpf_map_update_elem(&arg_stats, &k, &nv, BPF_NOEXIST);
			if (!err)
				made_key(&k, legacy);
			if (err != -EEXIST) {
				summarise_once(c, 1, c->failed, c->ns);
				/* Every key kept: this one is promoted below. */
				if (err || !keep_every_key)
					name_failure(ts, c);
				if (err)
					count_lost(err == -ENOMEM ? LOST_ARG_NOMEM : LOST_ONCE_TABLE_FULL, 1);
				/* Counted in its new entry; promoted at once when
				 * every key is kept. Not cached: one-shot keys
				 * would evict hot ones. */
				if (!err && keep_every_key) {
					v = bpf_map_lookup_elem(&arg_stats, &k);
					if (v && claim_promotion(v, &k, legacy))
						promote(ts, c, &k, v->errors, v->ns, v->requested, v->returned);
				}
				return false;
			}
			v = bpf_map_lookup_elem(&arg_stats, &k); /* another thread's, just made */
			if (!v)
				return false;
		}
		/* Seen before. The one that clears `once` promotes the key: its
		 * first call leaves the summary for the key's own counts. */
		if (claim_promotion(v, &k, legacy))
			promote(ts, c, &k, v->errors, v->ns, v->requested, v->returned);
		break;
	}
	if (takes_slot(s, c))
		return true;
	count_in_entry(v, c, &k);
	return false;
}

/* Global, so verified once, not with each caller: called on a miss only. */
__noinline bool argument_miss(struct task_state *ts, struct call *c, struct arg_slot *s)
{
	return miss(ts, c, s, false);
}

static __noinline bool argument_miss_legacy(struct task_state *ts, struct call *c, struct arg_slot *s)
{
	return miss(ts, c, s, true);
}

/* Whether slot `s` counts the call's key. */
static __always_inline bool holds(struct arg_slot *s, struct call *c)
{
	return s->used && s->nr == c->nr && s->fd == c->fd && s->path_hash == c->path_hash;
}

/* Flushes the thread's slot `index` (`s`) by the variant's function. */
static __always_inline void flush_at(struct task_state *ts, __u32 index, struct arg_slot *s,
				     const bool legacy, const bool loops)
{
	if (legacy)
		flush_slot_legacy(ts->tgid, index);
	else if (loops)
		flush_slot(ts->tgid, s);
	else
		flush_slot_bounded(ts->tgid, s);
}

/* A key is only ever in the slot its hash picks. The slot its syscall's
 * last call counted in is looked at first: its address was known before
 * the path was read, so a call that repeats the last one (a loop's)
 * compares it while the hash is still being made, and does not wait for
 * the hash, then the slot's load, to find it. */
static __always_inline void count_argument(struct task_state *ts, struct call *c, const bool legacy,
					   const bool loops)
{
	__u32 index = c->last_slot & (ARG_SLOTS - 1);
	struct arg_slot *s = &ts->slots[index];
	__u64 h;

	if (!holds(s, c)) {
		h = forget(ts, key_hash(c));
		index = (h ^ (h >> 32) ^ (h >> 17)) & (ARG_SLOTS - 1);
		s = &ts->slots[index];
		if (!holds(s, c)) {
			if (!(legacy ? argument_miss_legacy(ts, c, s) : argument_miss(ts, c, s)))
				return;
			/* A repeated key: it takes the slot, with this call. */
			flush_at(ts, index, s, legacy, loops);
			s->used = 1;
			s->nr = c->nr;
			s->fd = c->fd;
			s->path_hash = c->path_hash;
		}
		if (c->stat_at < THREAD_SYSCALLS)
			ts->last_slot[c->stat_at] = index;
	}
	s->calls++;
	s->errors += c->failed;
	s->ns += c->ns;
	if (c->kind == ARG_FD_IO) {
		s->requested[c->req_bucket & (HIST_BUCKETS - 1)]++;
		s->returned[c->ret_bucket & (HIST_BUCKETS - 1)]++;
	}
	if (s->calls >= SLOT_FLUSH_AT)
		flush_at(ts, index, s, legacy, loops);
}

#endif
