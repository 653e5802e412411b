/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Bit arithmetic without branches. Each fact the verifier learns from a
 * branch (a return value is 0, a bucket is 1) splits its walk: it goes
 * over the rest of sys_exit once for each, unless the states meet again.
 * A value computed without a branch is one walk. */
#ifndef SYSDIET_BITS_BPF_H
#define SYSDIET_BITS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

/* The floor of log2(v) (0 for 0), as libbpf-tools' bits.bpf.h has it but
 * without a branch: BPF has no set-on-compare, so each `v > c` there is a
 * branch, and the verifier walks all 64 ways through (twice per call, 1,400
 * of sys_exit's instructions). (c - v) >> 63 is v > c while v < 2^32, and
 * the barriers keep the compiler from turning it back into a compare. */
static __always_inline __u64 log2_64(__u64 v)
{
	__u64 r, shift, t = v >> 32;

	t |= -t; /* top bit set: the high half is not 0 */
	barrier_var(t);
	r = (t >> 63) << 5;
	v >>= r;
	t = 0xFFFF - v; barrier_var(t); shift = (t >> 63) << 4; v >>= shift; r |= shift;
	t = 0xFF - v; barrier_var(t); shift = (t >> 63) << 3; v >>= shift; r |= shift;
	t = 0xF - v; barrier_var(t); shift = (t >> 63) << 2; v >>= shift; r |= shift;
	t = 0x3 - v; barrier_var(t); shift = (t >> 63) << 1; v >>= shift; r |= shift;
	return r | (v >> 1);
}

/* 1 if a < b (unsigned), else 0, without a branch (BPF has no
 * set-on-compare): a value the verifier does not split its walk on. The
 * borrow out of a - b, as Hacker's Delight computes it. */
static __always_inline __u64 below(__u64 a, __u64 b)
{
	__u64 t = (~a & b) | ((~a | b) & (a - b));

	barrier_var(t);
	return t >> 63;
}

/* 1 if v is 0, else 0, without a branch. */
static __always_inline __u64 is_zero(__u64 v)
{
	__u64 t = v | -v;

	barrier_var(t);
	return (t >> 63) ^ 1;
}

/* a if `pick` is 1, b if it is 0, without a branch. */
static __always_inline __u64 pick(__u64 pick, __u64 a, __u64 b)
{
	__u64 m = -pick;

	barrier_var(m);
	return (a & m) | (b & ~m);
}

/* Whether a syscall's return value is an error (-4095..-1): -ret - 1 is
 * below 4095. */
static __always_inline __u8 is_error_return(long ret)
{
	return below(-(__u64)ret - 1, 4095);
}

#endif
