/* manykinds N: one thread makes N rounds of some 60 kinds of syscall
 * (x86-64; some 50 on arm64), each through syscall(2), so that none is
 * answered by the vDSO, and some failing: more kinds than a thread's own
 * state counts (THREAD_SYSCALLS), so that the rest are counted apart. It
 * ends in exit_group, one kind more. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 100);
	int null = open("/dev/null", O_RDWR), root = open("/", O_RDONLY | O_DIRECTORY);
	char buf[4096], one = 'x';
	struct iovec io = { &one, 1 };
	struct timespec zero = { 0, 0 };
	struct __user_cap_header_struct cap = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct rlimit rl;
	unsigned long mask[16];
	long long start;
	void *page;

	if (null < 0 || root < 0)
		return 1;
	start = now_ns();
	for (long i = 0; i < n; i++) {
		syscall(SYS_getpid);
		syscall(SYS_getppid);
		syscall(SYS_getuid);
		syscall(SYS_geteuid);
		syscall(SYS_getgid);
		syscall(SYS_getegid);
		syscall(SYS_gettid);
		syscall(SYS_getpgid, 0);
		syscall(SYS_getsid, 0);
		syscall(SYS_umask, 022);
		syscall(SYS_sched_yield);
		syscall(SYS_getcwd, buf, sizeof(buf));
		syscall(SYS_uname, buf);
		syscall(SYS_getrusage, RUSAGE_SELF, buf);
		syscall(SYS_times, buf);
		syscall(SYS_sysinfo, buf);
		syscall(SYS_getpriority, PRIO_PROCESS, 0);
		syscall(SYS_getresuid, buf, buf + 4, buf + 8);
		syscall(SYS_getresgid, buf, buf + 4, buf + 8);
		syscall(SYS_getgroups, 0, NULL);
		syscall(SYS_sched_getaffinity, 0, sizeof(mask), mask);
		syscall(SYS_sched_getscheduler, 0);
		syscall(SYS_sched_getparam, 0, buf);
		syscall(SYS_sched_get_priority_max, SCHED_OTHER);
		syscall(SYS_sched_get_priority_min, SCHED_OTHER);
		syscall(SYS_sched_rr_get_interval, 0, buf);
		syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl);
		syscall(SYS_gettimeofday, buf, NULL);
		syscall(SYS_clock_gettime, CLOCK_MONOTONIC, buf);
		syscall(SYS_clock_getres, CLOCK_MONOTONIC, buf);
		syscall(SYS_capget, &cap, NULL);
		syscall(SYS_personality, 0xffffffffUL);
		syscall(SYS_prctl, PR_GET_DUMPABLE, 0, 0, 0, 0);
		syscall(SYS_getcpu, buf, buf + 4, NULL);
		syscall(SYS_sigaltstack, NULL, buf);
		syscall(SYS_rt_sigpending, buf, 8);
		syscall(SYS_rt_sigaction, SIGUSR1, NULL, buf, 8);
		syscall(SYS_getitimer, ITIMER_REAL, buf);
		syscall(SYS_nanosleep, &zero, NULL);
		syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &zero, NULL);
		syscall(SYS_ppoll, NULL, 0, &zero, NULL, 8);
		syscall(SYS_faccessat, AT_FDCWD, "/", R_OK);
		syscall(SYS_newfstatat, AT_FDCWD, "/", buf, 0);
		syscall(SYS_statfs, "/", buf);
		syscall(SYS_fstatfs, null, buf);
		syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", buf, sizeof(buf));
		syscall(SYS_fcntl, null, F_GETFD);
		syscall(SYS_fstat, null, buf);
		syscall(SYS_lseek, root, 0, SEEK_SET);
		syscall(SYS_getdents64, root, buf, sizeof(buf));
		syscall(SYS_ioctl, null, 0x5401 /* TCGETS: ENOTTY */, buf);
		syscall(SYS_read, null, buf, 1);
		syscall(SYS_write, null, &one, 1);
		syscall(SYS_pread64, null, buf, 1, 0);
		syscall(SYS_pwrite64, null, &one, 1, 0);
		syscall(SYS_readv, null, &io, 1);
		syscall(SYS_writev, null, &io, 1);
		syscall(SYS_getrandom, buf, 8, 0);
		syscall(SYS_getxattr, "/", "user.sysdiet", buf, 0);
		page = (void *)syscall(SYS_mmap, NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		syscall(SYS_mprotect, page, 4096, PROT_READ | PROT_WRITE);
		syscall(SYS_madvise, page, 4096, MADV_NORMAL);
		syscall(SYS_munmap, page, 4096);
#ifdef SYS_getpgrp
		syscall(SYS_getpgrp);
#endif
#ifdef SYS_access
		syscall(SYS_access, "/nonexistent/sysdiet", R_OK);
#endif
#ifdef SYS_getrlimit
		syscall(SYS_getrlimit, RLIMIT_NOFILE, &rl);
#endif
#ifdef SYS_poll
		syscall(SYS_poll, NULL, 0, 0);
#endif
	}
	report_loop(start);
	return 0;
}
