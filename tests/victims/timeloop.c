/* timeloop MODE N: N calls of one time function (the seeds' benchmark).
 * MODE: none | localtime | localtime_r | gettimeofday | strftime | mktime */
#include <string.h>
#include <sys/time.h>
#include "victim.h"

static volatile long sink;

static void use_localtime(time_t t) { sink += localtime(&t)->tm_sec; }

static void use_localtime_r(time_t t)
{
	struct tm tm;
	sink += localtime_r(&t, &tm)->tm_sec;
}

static void use_gettimeofday(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	sink += tv.tv_usec;
}

static void use_strftime(time_t t)
{
	struct tm tm;
	char buf[64];
	gmtime_r(&t, &tm);
	sink += strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
}

static void use_mktime(time_t t)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	sink += mktime(&tm);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "none";
	long n = arg_count(argc, argv, 2, 1000000);
	time_t t = time(NULL);
	long long start = now_ns();

	for (long i = 0; i < n; i++) {
		if (!strcmp(mode, "none"))
			sink += i;
		else if (!strcmp(mode, "localtime"))
			use_localtime(t);
		else if (!strcmp(mode, "localtime_r"))
			use_localtime_r(t);
		else if (!strcmp(mode, "gettimeofday"))
			use_gettimeofday();
		else if (!strcmp(mode, "strftime"))
			use_strftime(t);
		else if (!strcmp(mode, "mktime"))
			use_mktime(t);
		else {
			fprintf(stderr, "usage: timeloop none|localtime|localtime_r|gettimeofday|strftime|mktime N\n");
			return 2;
		}
	}
	report_loop(start);
	return 0;
}
