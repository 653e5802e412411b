/* Shared by the victims: argument parsing and the loop's own timing, read
 * with the vDSO clock so that timing adds no syscall. */
#ifndef VICTIM_H
#define VICTIM_H
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline long arg_count(int argc, char **argv, int i, long dflt)
{
	return argc > i ? atol(argv[i]) : dflt;
}

/* The loop's own time, for bench/overhead; on stderr, one line. */
static inline void report_loop(long long start)
{
	fprintf(stderr, "loop_ns=%lld\n", now_ns() - start);
}
#endif
