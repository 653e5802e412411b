/* pipeline N: a fork + exec pipeline. A forked writer sends N bytes one at
 * a time into a pipe; a reader started with posix_spawn (vfork) re-execs
 * this program as "pipeline read" and reads them one at a time. Every
 * count is deterministic: 1-byte reads return exactly one byte.
 * SIGCHLD is blocked: under strace (ptrace) even an ignored SIGCHLD stops
 * the process and interrupts its wait4, which strace then counts twice. */
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "victim.h"

extern char **environ;

static int reader(void)
{
	char c;
	long got = 0;

	while (read(0, &c, 1) == 1)
		got++;
	return got > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	long n;
	int p[2], status, failed = 0;
	pid_t writer, rd;
	posix_spawn_file_actions_t fa;
	char *args[] = { argv[0], "read", NULL };
	sigset_t chld;

	if (argc > 1 && !strcmp(argv[1], "read"))
		return reader();
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	n = arg_count(argc, argv, 1, 1000);
	if (pipe(p))
		return 1;
	writer = fork();
	if (writer == 0) {
		close(p[0]);
		for (long i = 0; i < n; i++)
			if (write(p[1], "x", 1) != 1)
				_exit(1);
		_exit(0);
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[0], 0);
	posix_spawn_file_actions_addclose(&fa, p[1]);
	if (posix_spawn(&rd, argv[0], &fa, NULL, args, environ))
		return 1;
	close(p[0]);
	close(p[1]);
	waitpid(writer, &status, 0);
	failed |= !WIFEXITED(status) || WEXITSTATUS(status);
	waitpid(rd, &status, 0);
	failed |= !WIFEXITED(status) || WEXITSTATUS(status);
	return failed;
}
