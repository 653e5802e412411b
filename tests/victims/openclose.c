/* openclose PATH N: open, read a little, close the same file N times. */
#include <fcntl.h>
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/etc/passwd";
	long n = arg_count(argc, argv, 2, 10000);
	char buf[64];
	long long start = now_ns();

	for (long i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 1;
		if (read(fd, buf, sizeof(buf)) < 0)
			return 1;
		close(fd);
	}
	report_loop(start);
	return 0;
}
