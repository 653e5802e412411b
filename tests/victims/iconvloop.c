/* iconvloop N each|once: convert a string N times into four charsets in
 * turn, with an iconv_open/iconv_close per conversion (each) or one
 * iconv_t per charset kept (once). glibc unloads a charset's gconv module
 * soon after its last iconv_close, so "each" loads them again and again. */
#include <iconv.h>
#include <string.h>
#include "victim.h"

static const char *const charsets[] = {"UTF-16", "EUC-JP", "KOI8-R", "SHIFT_JIS"};

static int convert(iconv_t cd)
{
	char in[] = "hello", out[64];
	char *ip = in, *op = out;
	size_t il = strlen(in), ol = sizeof out;
	iconv(cd, NULL, NULL, NULL, NULL);
	return iconv(cd, &ip, &il, &op, &ol) != (size_t)-1;
}

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 3000);
	int each = argc <= 2 || strcmp(argv[2], "once") != 0;
	iconv_t kept[4];
	long ok = 0;
	long long start = now_ns();

	for (int c = 0; c < 4 && !each; c++)
		kept[c] = iconv_open(charsets[c], "UTF-8");
	for (long i = 0; i < n; i++) {
		iconv_t cd = each ? iconv_open(charsets[i % 4], "UTF-8") : kept[i % 4];
		if (cd == (iconv_t)-1)
			return 1;
		ok += convert(cd);
		if (each)
			iconv_close(cd);
	}
	report_loop(start);
	return ok == n ? 0 : 1;
}
