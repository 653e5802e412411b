/* exitwith CODE | exitwith signal SIG: exit with CODE, or die by SIG. */
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
	return argc > 1 ? atoi(argv[1]) : 0;
}
