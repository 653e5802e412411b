/* futimens N: sets a file's times N times through its fd: utimensat(fd,
 * NULL, NULL, 0), a path-taking call whose path is NULL on purpose. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 100);
	char name[64];
	int fd;
	long long start = now_ns();

	/* Not mkstemp: it calls getrandom only some of the time, which would
	 * make the counts differ between runs. */
	snprintf(name, sizeof(name), "/tmp/sysdiet-futimens-%d", (int)getpid());
	fd = open(name, O_RDWR | O_CREAT | O_EXCL, 0600);

	if (fd < 0)
		return 1;
	unlink(name);
	for (long i = 0; i < n; i++)
		if (futimens(fd, NULL) < 0)
			return 1;
	report_loop(start);
	return 0;
}
