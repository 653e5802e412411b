/* failing N: calls that fail, N times each: open of a missing file
 * (ENOENT), close of a bad fd (EBADF), a terminal ioctl on a pipe (ENOTTY),
 * access of a missing file (ENOENT). */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 1000);
	int p[2];
	struct termios t;
	long long start;

	if (pipe(p))
		return 1;
	start = now_ns();
	for (long i = 0; i < n; i++) {
		if (open("/nonexistent/sysdiet", O_RDONLY) >= 0)
			return 1;
		if (close(-1) == 0)
			return 1;
		if (ioctl(p[0], TCGETS, &t) == 0)
			return 1;
		if (access("/nonexistent/sysdiet", R_OK) == 0)
			return 1;
	}
	report_loop(start);
	return 0;
}
