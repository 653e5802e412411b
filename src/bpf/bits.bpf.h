/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Bit arithmetic. */
#ifndef SYSDIET_BITS_BPF_H
#define SYSDIET_BITS_BPF_H

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

#endif
