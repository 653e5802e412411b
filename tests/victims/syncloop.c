/* syncloop MODE N: append N 4 KiB records to a file in /tmp, then remove
 * it. MODE: each (fdatasync after every record, as a database committing
 * per statement), end (one fsync at the end). */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	int each = argc > 1 && !strcmp(argv[1], "each");
	long n = arg_count(argc, argv, 2, 1000);
	char path[] = "/tmp/sysdiet-syncloop-XXXXXX", rec[4096];
	int fd = mkstemp(path);
	long long start = now_ns();

	if (fd < 0)
		return 1;
	memset(rec, 'r', sizeof(rec));
	for (long i = 0; i < n; i++) {
		if (write(fd, rec, sizeof(rec)) != sizeof(rec))
			return 1;
		if (each && fdatasync(fd))
			return 1;
	}
	if (!each && fsync(fd))
		return 1;
	close(fd);
	unlink(path);
	report_loop(start);
	return 0;
}
