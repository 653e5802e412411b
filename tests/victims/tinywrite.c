/* tinywrite N: N one-byte writes to stdout, unbuffered. */
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 10000);
	long long start = now_ns();

	for (long i = 0; i < n; i++)
		if (write(1, "x", 1) != 1)
			return 1;
	report_loop(start);
	return 0;
}
