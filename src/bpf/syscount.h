/* Shared by syscount.bpf.c and the Rust side (through the skeleton's
 * generated types): every struct here is a map key, a map value or a
 * record sent through a ring buffer. */
#ifndef SYSDIET_SYSCOUNT_H
#define SYSDIET_SYSCOUNT_H

#define MAX_SYSCALLS 512   /* x86_64 numbers stop below 470 */
#define PATH_LEN 256       /* like opensnoop's NAME_MAX + 1 */
#define HIST_BUCKETS 32    /* byte-count buckets, see size_bucket() */
#define COMM_LEN 16
#define ARG_SLOTS 16       /* a thread's cache of argument keys (power of 2) */
#define ERRNO_SLOTS 16     /* a thread's (syscall, errno) counts */
/* The distinct syscalls a thread counts in its own state; past them, its
 * process's entries in syscall_spill count the rest. */
#define THREAD_SYSCALLS 48

/* The path_hash of paths that could not be read, counted together, and of
 * a NULL path argument (utimensat(fd, NULL): the fd's own file). Real
 * hashes are odd too (path_hash), and equal these once in 2^62. */
enum path_mark {
	PATH_HASH_UNREADABLE = 1,
	PATH_HASH_NULL = 3,
};

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
	ARG_BRK = 8,         /* brk: enum brk_change */
};

/* In arg_key.fd for the timeout kinds. */
enum timeout_class {
	TIMEOUT_ZERO = 0,
	TIMEOUT_FINITE = 1,
	TIMEOUT_NONE = 2,       /* wait forever */
	TIMEOUT_UNREADABLE = 3,
	TIMEOUT_RAN_OUT = 4,    /* read at exit as zero after timing out: select,
				   pselect6 and ppoll write the time left back,
				   so zero and an expired finite timeout look
				   alike (exact with --latency, read at entry) */
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

/* In arg_key.fd for brk: which way the call moved the heap's end, against
 * the break this thread last saw (0 unknown: a move counts as growing). */
enum brk_change {
	BRK_QUERY = 0,  /* brk(0): reads the break */
	BRK_GROW = 1,
	BRK_SHRINK = 2, /* malloc trimming the heap top */
	BRK_SAME = 3,   /* no move (a failed grow returns the old break) */
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
	TARGET_FORKED = 3,       /* new: its first exit may be the return from
				    the fork, which the parent's call counts */
};

/* Things that went unseen, each counted in what it cost (calls, unless
 * said otherwise) and shown in every report. */
enum lost_counter {
	LOST_NO_TASK_STORAGE = 0, /* tasks: a new task of a target got no state */
	LOST_EXIT_RECORDS,    /* calls of exited threads: exit ring buffer full */
	LOST_ARG_TABLE_FULL,  /* calls whose repeated argument had no room */
	LOST_ARG_NOMEM,       /* calls whose argument entry could not be allocated */
	LOST_ONCE_TABLE_FULL, /* calls summarised as one-shot unchecked: no room */
	LOST_ERRNO_TABLE_FULL,/* failed calls whose errno was not kept */
	LOST_PATH_UNREADABLE, /* calls whose path could not be read */
	LOST_PATH_TRUNCATED,  /* calls whose path was cut at 255 bytes */
	LOST_PATH_STRING,     /* repeated paths whose string was not sent: ring full */
	LOST_COMPAT,          /* calls made through the i386 entry (int 0x80) */
	LOST_NR_OUT_OF_RANGE, /* calls with a number beyond the table (x32) */
	LOST_SAMPLES_DROPPED, /* stack samples: ring buffer full */
	LOST_HIST_TABLE_FULL, /* calls of repeated read/write keys without
				 their byte-count histogram: table full */
	LOST_EXEC,            /* execs not sent (environment, file name): ring full */
	LOST_FIRST_RACE,      /* calls of a path summarised as one-shot: another
				 thread was taking a slot of its wide line */
	LOST_SYSCALL_SPILL_FULL, /* calls not counted: their thread had no room
				    for another syscall, syscall_spill none */
	LOST_FAILURE_NAME,    /* failed lookups seen once not sent by name
				 (failure_record): ring full */
	LOST__COUNT,
};

/* Per (process, syscall, argument fingerprint). Paths are keyed by a
 * 64-bit hash of the string; the string is in `paths`. */
struct arg_key {
	__u32 tgid;
	__u32 nr;
	__s64 fd;        /* the fd, or the dirfd of a path call (-1: none) */
	__u64 path_hash; /* 0 for fd calls */
};

/* A key seen once holds that call's facts (`once` set, counted in
 * once_summary); its second sighting clears `once`, and from then on it is
 * a repeated key, counted exactly. */
struct arg_val {
	__u64 calls;
	__u64 errors;
	__u64 ns;
	__u64 once;     /* 64-bit: swapped atomically */
	__u8 requested; /* the first call's size buckets, ARG_FD_IO only */
	__u8 returned;
	__u8 counting;  /* its first_calls word counts calls too: add them */
	__u8 _pad;
	__u32 first_slot; /* that word's index */
};

/* A promoted key's first_calls word, once `counting` (arguments.bpf.h):
 * its untimed calls counted there, in the bits from FIRST_WORD_CALLS_SHIFT,
 * and those that failed in the low bits; each count is moved to the entry
 * when it reaches its FLUSH_AT, far below its MAX. */
enum first_word {
	FIRST_WORD_ERRORS_MAX = 0x3FF,
	FIRST_WORD_ERRORS_FLUSH_AT = 1 << 8,
	FIRST_WORD_COUNTING = 1 << 10,
	FIRST_WORD_PROMOTED = 1 << 11,
	FIRST_WORD_CALLS_SHIFT = 12,
	FIRST_WORD_CALLS_MAX = 0xFFFFF,
	FIRST_WORD_FLUSH_AT = 1 << 12,
};

/* Byte counts asked for and returned, per read/write-family key. */
struct io_hist {
	__u64 requested[HIST_BUCKETS];
	__u64 returned[HIST_BUCKETS];
};

/* Calls whose argument key was seen once only, per syscall. */
struct once_summary {
	__u64 keys;
	__u64 errors;
	__u64 ns;
};

struct sys_val {
	__u64 calls;
	__u64 errors;
	__u64 ns;     /* CPU time sampled, or wall time measured (--latency) */
	__u64 min_ns; /* --latency only */
	__u64 max_ns;
};

/* A repeated argument key held by a thread, with the calls it made since
 * the key was last flushed to arg_stats. */
struct arg_slot {
	__u32 nr;   /* 0 with hash 0 and fd 0: empty (read(0) keys have hash 0
		       too, so `used` tells) */
	__u16 used;
	/* The fingerprint of the last key that missed this slot: a key that
	 * misses it twice running is hot and takes it (see count_argument). */
	__u16 candidate;
	__s64 fd;
	__u64 path_hash;
	__u64 calls;
	__u64 errors;
	__u64 ns;
	__u32 requested[HIST_BUCKETS]; /* flushed long before they could wrap */
	__u32 returned[HIST_BUCKETS];
};

struct errno_slot {
	__u16 nr;
	__u16 err;
	__u32 _pad;
	__u64 count;
};

/* Which file a process runs: its executable's inode and device, so that
 * exited processes of one program fold together and two programs of one
 * name (comm) stay apart. Zero for kernel threads. */
struct exe_id {
	__u64 ino;
	__u32 dev;
	__u32 _pad;
};

/* One per traced thread, in task storage: its state, its counts and its
 * cache of argument keys. Created by sysdiet (run, attach) or at fork. */
struct task_state {
	__u32 state;    /* enum target_state */
	__u32 tgid;
	__u32 ppid;     /* tgid of the parent */
	__u8 exited;    /* flushed: its counts are in an exit record */
	__u8 mask_known;
	__u8 in_call;   /* --latency: between enter and exit */
	__u8 timeout_class; /* --latency: read at entry */
	__u8 exit_hooked; /* sys_exit ran since sys_exit_backup last ran */
	__u8 exec_hooked; /* the same for sched_process_exec and its backup */
	char comm[COMM_LEN];
	__u64 cgroup;   /* its cgroup v2 id, at fork or exec */
	struct exe_id exe; /* at fork or exec */
	__u64 seq;      /* syscalls counted */
	__u64 start_ns; /* --latency: entry time of the call in progress */
	__u64 ticks;    /* CPU ticks in the call in progress */
	__u64 user_ticks;
	__u64 mask;     /* the signal mask after the last change seen */
	__u64 last_change; /* seq of the last rt_sigprocmask that changed it */
	__u64 brk;      /* the program break after this thread's last brk */
	__u64 leader_start; /* its process leader's start_time, read once: in
			       first sightings' hashes, so that a reused pid
			       is a new process */
	__u64 forgotten; /* a value stored and read back (forget(), state.bpf.h) */
	/* stack sampling: a sample every `gap` calls on average */
	__u32 sample_left;
	__u32 sample_gap;
	__u64 since_sample;
	__u64 last_sample_ns;
	/* Its syscalls' counts, in the order it first made them: syscall nr's
	 * are stats[stat_of[nr] - 1] (0: not made yet, or spilled), whose
	 * number is stat_nr[] there. */
	__u32 syscalls_used;
	__u32 failures_seen; /* failed calls of new path keys since its exec,
				up to FAILURES_SEEN_MAX */
	__u8 stat_of[MAX_SYSCALLS];
	__u16 stat_nr[THREAD_SYSCALLS];
	/* The slot of `slots` each of them last counted a key in: looked at
	 * first by its next call (count_argument). */
	__u8 last_slot[THREAD_SYSCALLS];
	struct sys_val stats[THREAD_SYSCALLS];
	/* rt_sigprocmask calls by enum mask_change: kept here, so that the
	 * hot path makes no hash lookup for them. */
	__u64 mask_calls[MASK_CLASSES];
	struct errno_slot errnos[ERRNO_SLOTS];
	__u64 errnos_lost;
	struct arg_slot slots[ARG_SLOTS];
};

/* Since 6.19 the kernel allocates task storage with kmalloc_nolock(), which
 * serves at most 8 KiB (two 4 KiB pages), its 72-byte header included:
 * anything larger fails every thread's state with ENOMEM. Kept below with
 * room for the header to grow. */
#define TASK_STATE_MAX 8000
_Static_assert(sizeof(struct task_state) <= TASK_STATE_MAX, "task_state outgrows 7.x's task storage");

/* What the task iterator (live.bpf.c) writes before each live thread's
 * task_state. */
struct live_head {
	__u32 tid;
	char comm[COMM_LEN];
	__u32 _pad;
};

/* Legacy kernels (before 5.15): a thread's CPU ticks, kept apart from its
 * task_state, charged to it at its next syscall exit. */
struct tick_count {
	__u64 ticks;      /* in the syscall in progress */
	__u64 user_ticks;
};

/* What an exiting thread leaves: sent through the `exits` ring buffer, so
 * that no fixed table bounds how many processes a run can have. */
struct exit_entry {
	__u32 nr;
	__u32 _pad;
	struct sys_val v;
};

enum record_kind {
	RECORD_SLOT = 1,
	RECORD_EXIT = 2,
	RECORD_PATH = 3,
	RECORD_EXEC = 4,
	RECORD_FAILURE = 5,
};

/* Of a thread's failed path calls whose key is new, counted from its exec,
 * those sent by name (failure_record): the first FAILURES_NAMED_ALL, then
 * one in FAILURES_NAMED_EVERY until FAILURES_SEEN_MAX (64 in all), as
 * model::named_failure picks them. Enough for a rule to see each place a
 * search looked (the loader tries ~40 paths per directory), few enough
 * that a process costs a handful of records. Odd and small: the loader's
 * lookups alternate, a library then its directory, ~8 to ~40 a directory,
 * and each kind is sampled in each. */
#define FAILURES_NAMED_ALL 16
#define FAILURES_NAMED_EVERY 3
#define FAILURES_SEEN_MAX (FAILURES_NAMED_ALL + 48 * FAILURES_NAMED_EVERY)

/* The start of a process's environment at its exec, as the program got it:
 * the variables rules read (TZ, PYTHONUNBUFFERED, MALLOC_*...) are the
 * process's own, not sysdiet's. Bytes past ENV_BYTES are not sent. */
#define ENV_BYTES 4096
#define EXE_NAME_LEN 256

/* exec_record.cut: how much of the environment was sent. */
enum env_sent {
	ENV_WHOLE = 0,
	ENV_CUT = 1,    /* it went on past ENV_BYTES */
	ENV_UNREAD = 2, /* not read: none sent */
};

/* A process's exec: the file it runs now and its environment. */
struct exec_record {
	__u32 kind; /* RECORD_EXEC */
	__u32 tgid;
	__u32 len;  /* bytes of env sent; the record is cut there */
	__u32 cut;  /* enum env_sent */
	struct exe_id exe;
	/* The file as exec named it (the interpreter's, for a script):
	 * user space prefers /proc/PID/exe while the process lives. */
	char exe_name[EXE_NAME_LEN];
	char env[ENV_BYTES];
};

/* The string of a path key seen a second time: sent once per promotion,
 * so that no kernel table bounds how many repeated paths a run has. */
struct path_record {
	__u32 kind; /* RECORD_PATH */
	__u32 len;  /* bytes of path sent, its NUL included: the record is
		       cut there, so that a flood of short paths fits;
		       PATH_LEN + 1 when the path itself was cut */
	__u64 path_hash;
	char path[PATH_LEN];
};

/* A failed path call whose key was new, its path in the path_record sent
 * just after: the paths a process tries once each (the dynamic loader's
 * search of LD_LIBRARY_PATH) are otherwise only counted, in once_summary,
 * where it stays counted too. */
struct failure_record {
	__u32 kind; /* RECORD_FAILURE */
	__u32 tgid;
	__u32 nr;
	__u32 _pad;
	__s64 fd;   /* the dirfd, as arg_key's */
	__u64 path_hash;
	__u64 ns;
};

/* An exiting thread's cached argument key with calls not yet flushed. */
struct slot_record {
	__u32 kind; /* RECORD_SLOT */
	__u32 tgid;
	__u32 tid;
	__u32 _pad;
	struct arg_slot slot;
};

struct exit_record {
	__u32 kind; /* RECORD_EXIT */
	__u32 tgid;
	__u32 tid;
	__u32 ppid;
	__s32 exit_code;  /* wait(2) status */
	__u32 leader;     /* tid == tgid: the process ended */
	__u32 entries;
	__u32 _pad;
	char comm[COMM_LEN];
	__u64 cgroup;
	struct exe_id exe;
	__u64 user_ticks;
	__u64 mask_calls[MASK_CLASSES];
	struct errno_slot errnos[ERRNO_SLOTS];
	__u64 errnos_lost;
	struct exit_entry e[THREAD_SYSCALLS];
};

/* A stack sample, taken at syscall exit (the user registers and stack are
 * those of the call site) and sent through the `samples` ring buffer. The
 * counts stay exact; samples only share them out among call sites. */
#define STACK_BYTES 16384

struct stack_sample {
	__u32 tgid;
	__u32 tid;
	__u32 nr;
	__u32 flags;
	__u64 period;    /* this sample stands for `period` calls: the
			    thread's calls since its previous sample */
	__u64 ns;        /* the call's time, with --latency; else 0 */
	__u64 time_ns;   /* CLOCK_MONOTONIC at exit, to pick the mappings */
	__s64 fd;        /* the argument key, as in struct arg_key */
	__u64 path_hash;
	__u64 ip;
	__u64 sp;
	__u64 fp;        /* the frame pointer register */
	__u64 lr;        /* the link register (arm64); 0 on x86-64 */
	__u32 stack_len; /* bytes copied from sp up */
	__u32 _pad;
	__u8 stack[STACK_BYTES];
};

#endif
