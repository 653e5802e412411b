/* Shared by syscount.bpf.c and the Rust side (through the skeleton's
 * generated types): every struct here is a map key or value. */
#ifndef SYSDIET_SYSCOUNT_H
#define SYSDIET_SYSCOUNT_H

#define MAX_SYSCALLS 512   /* x86_64 numbers stop below 470 */
#define PATH_LEN 256       /* like opensnoop's NAME_MAX + 1 */
#define HIST_BUCKETS 32    /* byte-count buckets, see size_bucket() */
#define COMM_LEN 16

/* What the fingerprint of one syscall's argument is. */
enum arg_kind {
	ARG_NONE = 0,
	ARG_PATH = 1,  /* a user string: the path */
	ARG_FD = 2,    /* an fd number */
	ARG_FD_IO = 3, /* an fd, plus requested and returned byte counts */
	ARG_CLOCK = 4,       /* a clock id */
	ARG_TIMEOUT_MS = 5,  /* an int timeout in ms: enum timeout_class */
	ARG_TIMEOUT_PTR = 6, /* a timespec/timeval pointer: enum timeout_class */
	ARG_SIGMASK = 7,     /* rt_sigprocmask: enum mask_change */
};

/* In arg_key.fd for the timeout kinds. */
enum timeout_class {
	TIMEOUT_ZERO = 0,
	TIMEOUT_FINITE = 1,
	TIMEOUT_NONE = 2,       /* wait forever */
	TIMEOUT_UNREADABLE = 3,
};

/* In arg_key.fd for rt_sigprocmask: what the call does to the mask. */
enum mask_change {
	MASK_QUERY = 0,  /* set == NULL: reads the mask only */
	MASK_SAME = 1,   /* sets the mask it already has */
	MASK_BLOCK = 2,
	MASK_UNBLOCK = 3,
	MASK_SET = 4,    /* SIG_SETMASK to another mask */
	MASK_UNDO = 5,   /* a change right after a change, nothing between */
	MASK_CLASSES = 6,
};

/* Set per syscall number from user space before load. */
struct syscall_spec {
	__u8 traced;   /* counted at all (-e trace=SET) */
	__u8 kind;     /* enum arg_kind */
	__u8 arg;      /* index of the path or fd argument */
	__u8 size_arg; /* index of the byte-count argument, ARG_FD_IO only */
};

enum target_state {
	TARGET_PENDING_EXEC = 1, /* spawned, held: counts start at its execve */
	TARGET_ACTIVE = 2,
};

/* Things that went unseen. Each is shown in every report. */
enum lost_counter {
	LOST_SYSCALL_MAP_FULL = 0,
	LOST_ARG_MAP_FULL,
	LOST_ERRNO_MAP_FULL,
	LOST_TASK_MAP_FULL,
	LOST_NO_TASK_STORAGE, /* a new task of a target got no state: untraced */
	LOST_PATH_UNREADABLE,
	LOST_PATH_TRUNCATED,
	LOST_NR_OUT_OF_RANGE,
	LOST_PATH_MAP_FULL,
	LOST_SAMPLES_DROPPED, /* stack samples: ring buffer full */
	LOST__COUNT,
};

/* Per (process, thread, syscall): kept in the thread's own task storage
 * while it runs (no lookups, no contention), moved here when it exits. */
struct sys_key {
	__u32 tgid;
	__u32 tid;
	__u32 nr;
	__u32 _pad;
};

struct sys_val {
	__u64 calls;
	__u64 errors;
	__u64 total_ns;
	__u64 min_ns;
	__u64 max_ns;
};

struct errno_key {
	__u32 tgid;
	__u32 nr;
	__u32 err;
	__u32 _pad;
};

/* Per (process, syscall, argument fingerprint); per-CPU values. Paths are
 * keyed by a 64-bit hash of the string; the string is in `paths`. */
struct arg_key {
	__u32 tgid;
	__u32 nr;
	__s64 fd;        /* the fd, or the dirfd of a path call (-1: none) */
	__u64 path_hash; /* 0 for fd calls */
};

struct path_val {
	char path[PATH_LEN];
};

/* Where a thread is in sampling one syscall's calls. The gaps between
 * samples are random, so that a program's own rhythm (two call sites
 * taking turns) cannot alias with the sampling. */
struct sampler {
	__u32 left; /* calls to let pass before the next sample */
	__u32 last; /* the call count at the last sample */
};

/* One per traced thread, in task storage: its state, the syscall it is
 * in, and its counts. Created by sysdiet (run, attach) or at fork. */
struct task_state {
	__u32 state;    /* enum target_state */
	__u32 nr;       /* the syscall in progress */
	__u8 active;    /* between enter and exit */
	__u8 kind;      /* enum arg_kind of nr */
	__u8 path_ok;
	__u8 _pad[5];
	__u64 start_ns;
	__u64 path_ptr; /* to re-read at exit if it faulted at entry */
	__u64 requested;
	struct arg_key key;
	char path[PATH_LEN];
	struct sys_val stats[MAX_SYSCALLS];
	struct sampler samplers[MAX_SYSCALLS];
	/* rt_sigprocmask calls by enum mask_change: kept here, not in
	 * arg_stats, so that the hot path makes no hash lookup for them. */
	__u64 mask_calls[MASK_CLASSES];
};

struct arg_val {
	__u64 calls;
	__u64 errors;
	__u64 total_ns;
	__u64 requested[HIST_BUCKETS];
	__u64 returned[HIST_BUCKETS];
};

/* Per thread (or process: tid == tgid). */
struct task_info {
	__u32 tgid;
	__u32 ppid;      /* tgid of the parent */
	__s32 exit_code; /* wait(2) status, valid when exited */
	__u32 exited;
	char comm[COMM_LEN];
};

/* A stack sample, taken at syscall exit (the user registers and stack are
 * those of the call site) and sent through the `samples` ring buffer. The
 * counts stay exact; samples only share them out among call sites. */
#define STACK_BYTES 16384
#define SAMPLE_FIRST_OF_KEY 1 /* not a periodic sample: the first call of its
				 (syscall, argument) on this CPU; weight 0 */

struct stack_sample {
	__u32 tgid;
	__u32 tid;
	__u32 nr;
	__u32 flags;
	__u64 period;    /* this sample stands for `period` calls: those since
			    the thread's last sample of this syscall */
	__u64 ns;        /* the call's time in the kernel */
	__u64 time_ns;   /* CLOCK_MONOTONIC at exit, to pick the mappings */
	__s64 fd;        /* the argument key, as in struct arg_key */
	__u64 path_hash;
	__u64 ip;
	__u64 sp;
	__u64 bp;
	__u32 stack_len; /* bytes copied from sp up */
	__u32 _pad;
	__u8 stack[STACK_BYTES];
};

#endif
