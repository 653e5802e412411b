/* tinywrite N [SIZE]: N writes of SIZE bytes (1 by default) to stdout,
 * unbuffered. */
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 10000);
	long size = arg_count(argc, argv, 2, 1);
	char *buf = calloc(1, size);
	long long start = now_ns();

	for (long i = 0; i < n; i++)
		if (write(1, buf, size) != size)
			return 1;
	report_loop(start);
	return 0;
}
