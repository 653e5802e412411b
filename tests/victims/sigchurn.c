/* sigchurn N [once]: N operations, each setting a SIGINT handler and
 * restoring the old one around a getpid (2 rt_sigaction per operation).
 * once: every handler installed once at the start, then N getpids. */
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include "victim.h"

static void on_signal(int sig) { (void)sig; }

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 10000);
	int once = argc > 2 && strcmp(argv[2], "once") == 0;
	struct sigaction sa, old;
	long long start;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	if (once)
		for (int sig = 1; sig < 32; sig++)
			if (sig != SIGKILL && sig != SIGSTOP)
				sigaction(sig, &sa, NULL);
	start = now_ns();
	for (long i = 0; i < n; i++) {
		if (!once)
			sigaction(SIGINT, &sa, &old);
		getpid();
		if (!once)
			sigaction(SIGINT, &old, NULL);
	}
	report_loop(start);
	return 0;
}
