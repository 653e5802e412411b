/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A path's 64-bit hash, eight bytes at a time: sysdiet's argument keys
 * (arguments.bpf.h) and the floor that counts each path (floor.bpf.c)
 * hash alike. */
#ifndef SYSDIET_HASH_BPF_H
#define SYSDIET_HASH_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

/* The first len bytes of `words` (len < words_len * 8): eight at a time,
 * then the last len % 8 of them. words_len is a power of two, a constant.
 * The loop has a single way out, and what it learnt of `full` there is
 * forgotten (recomputed from a `len` the verifier cannot relate to it): each
 * turn's way out then leaves the same state, verified once with the rest of
 * the program, not once per turn. So the hash is inlined, with no call (a
 * call costs more than the hash: docs/overhead.md). Never 0. */
static __always_inline __u64 hash_words(const __u64 *words, __u32 words_len, __u32 len)
{
	__u64 h = 0x9E3779B97F4A7C15ULL ^ len, w;
	__u32 i, full = len / 8, left;

	for (i = 0; i < words_len; i++) {
		if (i >= full)
			break;
		h = (h ^ words[i]) * 0xFF51AFD7ED558CCDULL;
		h ^= h >> 32;
	}
	barrier_var(len);
	full = len / 8;
	left = len % 8;
	if (left) {
		w = words[full & (words_len - 1)] & ((1ULL << (left * 8)) - 1);
		h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
		h ^= h >> 32;
	}
	return h | 1;
}

#endif
