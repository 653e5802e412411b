/* idloop N [rusage]: ask for the process id N times (a real syscall each
 * time: glibc does not cache it); with `rusage`, then say the user time
 * the kernel accounted to it (`user_ns=`, on stderr). */
#include <string.h>
#include <sys/resource.h>
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
	if (argc > 2 && !strcmp(argv[2], "rusage")) {
		struct rusage ru;

		getrusage(RUSAGE_SELF, &ru);
		fprintf(stderr, "user_ns=%lld\n", ru.ru_utime.tv_sec * 1000000000LL + ru.ru_utime.tv_usec * 1000LL);
	}
	return 0;
}
