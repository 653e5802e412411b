/* idloop N: ask for the process id N times (a real syscall each time:
 * glibc does not cache it). */
#include <unistd.h>
#include "victim.h"

static volatile long sink;

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 10000);
	long long start = now_ns();

	for (long i = 0; i < n; i++)
		sink += getpid();
	report_loop(start);
	return 0;
}
