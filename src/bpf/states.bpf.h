/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A target thread's state in its task storage: syscount.bpf.c's programs
 * keep it, live.bpf.c's iterator reads it (user space hands it the set's
 * map), so both objects define it here. */
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

#endif
