/* compat N: N getpid calls through the i386 entry (int 0x80) of a 64-bit
 * program, and N through the x86_64 one. */
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 1000);
	volatile long sink = 0;
	long long start = now_ns();

	for (long i = 0; i < n; i++) {
		long r;

		asm volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory"); /* i386 getpid */
		sink += r + getpid();
	}
	report_loop(start);
	return 0;
}
