/* pollzero N: N polls of a pipe with a zero timeout (a busy poll). */
#include <poll.h>
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 10000);
	int p[2];
	struct pollfd pfd;
	long long start;

	if (pipe(p))
		return 1;
	pfd.fd = p[0];
	pfd.events = POLLIN;
	start = now_ns();
	for (long i = 0; i < n; i++)
		if (poll(&pfd, 1, 0) != 0)
			return 1;
	report_loop(start);
	return 0;
}
