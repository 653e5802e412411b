/* crowdedslots N G: stats 3 names under each of G descriptors of "/" (each
 * descriptor's names a key group of their own, a few keys each), then N
 * new paths (a walk: one group, past its region into its wide one), then
 * the G × 3 names twice more. Each name is stat'ed 3 times: however the
 * walk's keys take their slots, they must not take the small groups'. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include "victim.h"

static int fds[1024];

static void names(long g)
{
	static const char *const name[] = { "sysdiet-a", "sysdiet-b", "sysdiet-c" };
	struct stat st;

	for (long i = 0; i < g; i++)
		for (int j = 0; j < 3; j++)
			fstatat(fds[i], name[j], &st, 0);
}

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 200000), g = arg_count(argc, argv, 2, 200);
	char path[64];
	struct stat st;

	if (g > 1024)
		g = 1024;
	for (long i = 0; i < g; i++)
		if ((fds[i] = open("/", O_RDONLY | O_DIRECTORY)) < 0)
			return 1;
	names(g);
	for (long i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/nonexistent/sysdiet/%ld", i);
		stat(path, &st);
	}
	names(g);
	names(g);
	return 0;
}
