/* sigblock N: N critical sections, each blocking SIGUSR1 and unblocking it
 * again without asking for the old mask (2 rt_sigprocmask each, both
 * changing the mask). */
#include <signal.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 10000);
	long long start = now_ns();
	sigset_t usr1;

	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	for (long i = 0; i < n; i++) {
		sigprocmask(SIG_BLOCK, &usr1, NULL);
		sigprocmask(SIG_UNBLOCK, &usr1, NULL);
	}
	report_loop(start);
	return 0;
}
