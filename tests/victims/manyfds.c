/* manyfds ROUNDS: writes to 40 fds in turn, each ROUNDS times, fd N with
 * 1, 101 or 201 bytes (N % 3): more keys than a thread's cache holds, so
 * that each write evicts another fd's counts and byte histogram. */
#include <fcntl.h>
#include <unistd.h>
#include "victim.h"

#define FDS 40

int main(int argc, char **argv)
{
	long rounds = arg_count(argc, argv, 1, 100);
	static char buf[256];
	int fds[FDS];
	long long start = now_ns();

	for (int i = 0; i < FDS; i++)
		fds[i] = open("/dev/null", O_WRONLY);
	for (long r = 0; r < rounds; r++)
		for (int i = 0; i < FDS; i++)
			if (write(fds[i], buf, 1 + (fds[i] % 3) * 100) < 0)
				return 1;
	report_loop(start);
	return 0;
}
