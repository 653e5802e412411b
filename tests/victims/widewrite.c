/* widewrite N: N wide characters to stdout through glibc's wide-character
 * stdio (putwchar), with a 64 KiB buffer asked for by setvbuf. */
#include <locale.h>
#include <stdio.h>
#include <wchar.h>
#include "victim.h"

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 100000);
	long long start = now_ns();

	setlocale(LC_ALL, "");
	setvbuf(stdout, NULL, _IOFBF, 65536);
	for (long i = 0; i < n; i++)
		if (putwchar(L'a' + i % 26) == WEOF)
			return 1;
	report_loop(start);
	return 0;
}
