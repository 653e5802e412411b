/* clocks MODE N: N clock reads. MODE: vdso (clock_gettime(CLOCK_MONOTONIC)
 * through libc: the vDSO, no syscall), raw (the same as a raw syscall, going
 * around the vDSO), cputime (CLOCK_PROCESS_CPUTIME_ID: always a syscall). */
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "victim.h"

static volatile long sink;

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "vdso";
	long n = arg_count(argc, argv, 2, 10000);
	struct timespec ts;
	long long start = now_ns();

	for (long i = 0; i < n; i++) {
		if (!strcmp(mode, "raw"))
			syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
		else if (!strcmp(mode, "cputime"))
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		else
			clock_gettime(CLOCK_MONOTONIC, &ts);
		sink += ts.tv_nsec;
	}
	report_loop(start);
	return 0;
}
