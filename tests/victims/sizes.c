/* sizes N: N writes of each of a set of sizes to /dev/null, from 0 bytes
 * to counts the kernel refuses (EINVAL from 2^63) or cuts (to
 * 0x7ffff000 bytes): every byte-count bucket's edges, and the last. */
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
#include "victim.h"

int main(int argc, char **argv)
{
	static const uint64_t sizes[] = { 0, 1, 2, 3, 4, 5, 4096, 4097, 1 << 20, 1ULL << 40,
					  (1ULL << 63) + 5, UINT64_MAX };
	long n = arg_count(argc, argv, 1, 10);
	int fd = open("/dev/null", O_WRONLY);
	static char buf[8192];

	if (fd < 0)
		return 1;
	for (long i = 0; i < n; i++)
		for (unsigned j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
			/* /dev/null reads no byte of buf: any count is safe. */
			(void)!write(fd, buf, sizes[j]);
	return 0;
}
