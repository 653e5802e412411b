/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Map helpers, as libbpf-tools' maps.bpf.h has them. */
#ifndef SYSDIET_MAPS_BPF_H
#define SYSDIET_MAPS_BPF_H

#include <bpf/bpf_helpers.h>

#ifndef EEXIST
#define EEXIST 17
#endif

/* The entry for `key`, made from `init` if there is none yet (by this
 * thread or, racing, another); NULL when the map has no room. */
static __always_inline void *bpf_map_lookup_or_try_init(void *map, const void *key, const void *init)
{
	void *val;
	/* int, not long: with long, clang may compare only the low 32 bits of
	 * the helper's result against -EEXIST after sign extension in a way
	 * the verifier rejects (the trap libbpf-tools' header warns about). */
	int err;

	val = bpf_map_lookup_elem(map, key);
	if (val)
		return val;
	err = bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	if (err && err != -EEXIST)
		return 0;
	return bpf_map_lookup_elem(map, key);
}

#endif
