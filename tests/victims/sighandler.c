/* sighandler N: N SIGUSR1s sent to itself, each handled by a handler that
 * blocks SIGUSR1 and asks for the old mask: the kernel blocked it on the
 * handler's entry, so each of the N rt_sigprocmask changes nothing. */
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include "victim.h"

static void on_usr1(int sig)
{
	sigset_t set, old;

	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_BLOCK, &set, &old);
}

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 1000);
	struct sigaction sa;
	long long start;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	start = now_ns();
	for (long i = 0; i < n; i++)
		kill(getpid(), SIGUSR1);
	report_loop(start);
	return 0;
}
