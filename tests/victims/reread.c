/* reread PATH N: open the same file N times and read it to its end each
 * time, 64 KiB a read, as a reader of a compressed file that goes back in
 * it must (a stream cannot seek back: it starts again). */
#include <fcntl.h>
#include <unistd.h>
#include "victim.h"

static char buf[65536];

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/etc/passwd";
	long n = arg_count(argc, argv, 2, 1000);
	long long start = now_ns();
	ssize_t got;

	for (long i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 1;
		while ((got = read(fd, buf, sizeof(buf))) > 0)
			;
		close(fd);
		if (got < 0)
			return 1;
	}
	report_loop(start);
	return 0;
}
