/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Where a target thread's state lives: syscount.bpf.c's programs keep it,
 * live.bpf.c's iterator reads it (user space hands it the set's maps), so
 * both objects define them here. */
#ifndef SYSDIET_STATES_BPF_H
#define SYSDIET_STATES_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "syscount.h"

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} states SEC(".maps");

/* A thread's state is found here without a helper call, at the slot of its
 * tid's low bits while the slot's tag is its tid and start time; moved here
 * from task storage at its first sight (state_of, state.bpf.h) when the
 * slot is free. A thread whose slot another holds keeps its task storage.
 * Mappable: the keeper (keeper.rs) frees every slot between runs. */
#define STATE_SLOTS 256
struct state_slot {
	__u64 tid;   /* 0: free; set first, by the compare-and-swap that takes it
		        (a word: older compilers' atomics are 64-bit) */
	__u64 start; /* the task's start_time, set once its state is copied in */
	struct task_state s;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STATE_SLOTS);
	__type(key, __u32);
	__type(value, struct state_slot);
} state_slots SEC(".maps");

/* The slot of thread `tid`: its own if tagged with it (slot_holds). */
static __always_inline struct state_slot *slot_of_tid(__u32 tid)
{
	__u32 at = tid & (STATE_SLOTS - 1);

	return bpf_map_lookup_elem(&state_slots, &at);
}

/* Whether `slot` holds the state of the thread with `tid` and `start`. */
static __always_inline bool slot_holds(struct state_slot *slot, __u32 tid, __u64 start)
{
	return slot->tid == tid && slot->start == start;
}

/* Takes `slot`, if free, for the thread with `tid` and `start`, its state
 * copied from `from`: the tid by a compare-and-swap first, the start last,
 * so that no hook reads a half-copied state as the thread's own. */
static __always_inline bool claim_slot(struct state_slot *slot, __u32 tid, __u64 start, const void *from)
{
	if (slot->tid || __sync_val_compare_and_swap(&slot->tid, 0, tid))
		return false;
	bpf_probe_read_kernel(&slot->s, sizeof(slot->s), from);
	slot->start = start;
	return true;
}

/* Frees the slot: its tag's start first, then its tid by an atomic (an
 * ordered store on arm64 too), so that no thread taking it afterwards has
 * the start it writes overwritten. */
static __always_inline void free_slot(struct state_slot *slot)
{
	slot->start = 0;
	__sync_fetch_and_and(&slot->tid, 0);
}

#endif
