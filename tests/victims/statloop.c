/* statloop PATH N: stat the same path N times. */
#include <sys/stat.h>
#include "victim.h"

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/etc/passwd";
	long n = arg_count(argc, argv, 2, 10000);
	struct stat st;
	long ok = 0;
	long long start = now_ns();

	for (long i = 0; i < n; i++)
		ok += stat(path, &st) == 0;
	report_loop(start);
	return ok == n ? 0 : 1;
}
