/* sigprocmask N: N query-only sigprocmask calls, as in the seed. */
#include <signal.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 1000000);
	sigset_t old;
	long long start = now_ns();

	for (long i = 0; i < n; i++)
		sigprocmask(SIG_SETMASK, NULL, &old);
	report_loop(start);
	return 0;
}
