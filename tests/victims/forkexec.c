/* forkexec N PROG: fork, exec PROG and wait for it, N times: a shell loop's
 * work, thousands of short processes. */
#include <sys/wait.h>
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 1000);
	char *prog = argc > 2 ? argv[2] : "/bin/true";
	long long start = now_ns();

	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			execl(prog, prog, (char *)NULL);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
			return 1;
	}
	report_loop(start);
	return 0;
}
