/* churn MODE N: allocate, touch and free a block N times. MODE: big (40
 * MiB, above the most glibc malloc's dynamic mmap threshold ever rises to:
 * an mmap/munmap pair each time), heap (512 KiB from the heap, as a program
 * that fixed the mmap threshold with mallopt gets it: brk grows the heap
 * and the free trims it, each time), small (1 KiB, from the heap: no
 * syscalls). Only the first byte is touched, to keep the loop fast. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include "victim.h"

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "small";
	size_t size = !strcmp(mode, "big") ? 40 << 20 : !strcmp(mode, "heap") ? 512 << 10 : 1024;
	long n = arg_count(argc, argv, 2, 1000);
	long long start = now_ns();

	if (!strcmp(mode, "heap"))
		mallopt(M_MMAP_THRESHOLD, 1 << 20);

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
