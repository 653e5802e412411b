/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Bit arithmetic, as libbpf-tools' bits.bpf.h has it. */
#ifndef SYSDIET_BITS_BPF_H
#define SYSDIET_BITS_BPF_H

static __always_inline __u64 log2_32(__u32 v)
{
	__u32 shift, r;

	r = (v > 0xFFFF) << 4; v >>= r;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline __u64 log2_64(__u64 v)
{
	__u32 hi = v >> 32;

	if (hi)
		return log2_32(hi) + 32;
	return log2_32(v);
}

#endif
