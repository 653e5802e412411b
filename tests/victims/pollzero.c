/* pollzero N [zero|wait|yield]: N polls of a pipe with a zero timeout (a
 * busy poll); with `wait`, N polls that wait (no timeout) on a pipe that
 * has data, so they return at once without spinning; with `yield`, N
 * sched_yield calls (a spin). */
#include <poll.h>
#include <unistd.h>
#include <sched.h>
#include <string.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 10000);
	int p[2];
	struct pollfd pfd;
	long long start;

	const char *mode = argc > 2 ? argv[2] : "zero";
	int wait = !strcmp(mode, "wait");

	if (pipe(p))
		return 1;
	if (wait && write(p[1], "x", 1) != 1)
		return 1;
	pfd.fd = p[0];
	pfd.events = POLLIN;
	start = now_ns();
	for (long i = 0; i < n; i++) {
		if (!strcmp(mode, "yield"))
			sched_yield();
		else if (poll(&pfd, 1, wait ? -1 : 0) != wait)
			return 1;
	}
	report_loop(start);
	return 0;
}
