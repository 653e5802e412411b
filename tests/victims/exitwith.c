/* exitwith CODE: exit with CODE.  exitwith signal SIG: die by SIG.
 * exitwith sleep: print the pid, wait for a signal to end it.
 * exitwith stubborn: the same, ignoring SIGTERM and SIGHUP; prints "alive"
 * each time it gets SIGUSR1, "got SIGINT" each time it gets SIGINT (so a
 * test knows a forwarded one arrived), and exits 0 on SIGUSR2. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "signal")) {
		signal(atoi(argv[2]), SIG_DFL);
		kill(getpid(), atoi(argv[2]));
		pause();
	}
	if (argc > 1 && !strcmp(argv[1], "sleep")) {
		/* Runs until a signal ends it; prints its pid first. */
		printf("%d\n", getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	if (argc > 1 && !strcmp(argv[1], "stubborn")) {
		sigset_t usr;
		int sig;

		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		sigemptyset(&usr);
		sigaddset(&usr, SIGUSR1);
		sigaddset(&usr, SIGUSR2);
		sigaddset(&usr, SIGINT);
		sigprocmask(SIG_BLOCK, &usr, NULL);
		printf("%d\n", getpid());
		fflush(stdout);
		while (sigwait(&usr, &sig) == 0 && sig != SIGUSR2) {
			printf(sig == SIGINT ? "got SIGINT\n" : "alive\n");
			fflush(stdout);
		}
		return 0;
	}
	return argc > 1 ? atoi(argv[1]) : 0;
}
