/* fdsweep SWEEPS [MAXFD]: SWEEPS times, close every fd from 3 to MAXFD
 * (1024 by default), as a program does before exec; almost none is open.
 * fdsweep SWEEPS MAXFD open: close only fds that were just opened. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long sweeps = arg_count(argc, argv, 1, 10);
	long max = arg_count(argc, argv, 2, 1024);
	int open_only = argc > 3 && strcmp(argv[3], "open") == 0;
	long long start = now_ns();

	for (long s = 0; s < sweeps; s++) {
		if (open_only) {
			for (long i = 0; i < max; i++)
				close(open("/dev/null", O_RDONLY));
		} else {
			for (long fd = 3; fd < max; fd++)
				close(fd);
		}
	}
	report_loop(start);
	return 0;
}
