/* churn MODE N: allocate, touch and free a block N times. MODE: big (40
 * MiB, above the most glibc malloc's dynamic mmap threshold ever rises to:
 * an mmap/munmap pair each time), small (1 KiB, from the heap: no
 * syscalls). Only the first byte is touched, to keep the loop fast. */
#include <stdlib.h>
#include <string.h>
#include "victim.h"

int main(int argc, char **argv)
{
	size_t size = argc > 1 && !strcmp(argv[1], "big") ? 40 << 20 : 1024;
	long n = arg_count(argc, argv, 2, 1000);
	long long start = now_ns();

	for (long i = 0; i < n; i++) {
		char *p = malloc(size);
		if (!p)
			return 1;
		*(volatile char *)p = 1;
		free(p);
	}
	report_loop(start);
	return 0;
}
