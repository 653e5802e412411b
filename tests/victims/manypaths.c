/* manypaths N K [R]: stat N distinct paths that do not exist, R times each
 * (once by default: a file-tree walk's shape), calling localtime() K times
 * along the way. */
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 100000);
	long k = arg_count(argc, argv, 2, 0);
	long r = arg_count(argc, argv, 3, 1);
	long every = k > 0 ? n / k : 0;
	time_t now = time(NULL);
	volatile int sink = 0;
	char path[64];
	struct stat st;
	long long start = now_ns();

	for (long i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/nonexistent/sysdiet/%ld", i);
		for (long j = 0; j < r; j++)
			sink += stat(path, &st);
		if (every && i % every == 0)
			sink += localtime(&now)->tm_sec;
	}
	report_loop(start);
	return 0;
}
