/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared by tally.bpf.c and src/bench/tally.rs. */
#ifndef __TALLY_H
#define __TALLY_H

#define TALLY_PROCESSES 1024
#define TALLY_ENTRIES 16384

enum tally_state {
	TALLY_PENDING = 0,
	TALLY_COUNTING = 1,
};

struct tally_key {
	__u32 tgid;
	__u32 nr;
};

#endif /* __TALLY_H */
