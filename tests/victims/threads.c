/* threads T N: T threads, each calling localtime() N times. */
#include <pthread.h>
#include "victim.h"

static long per_thread;
static volatile long sink;

static void *worker(void *arg)
{
	time_t t = time(NULL);
	(void)arg;
	for (long i = 0; i < per_thread; i++)
		sink += localtime(&t)->tm_sec;
	return NULL;
}

int main(int argc, char **argv)
{
	long nthreads = arg_count(argc, argv, 1, 4);
	pthread_t tids[64];
	long long start;

	per_thread = arg_count(argc, argv, 2, 1000);
	if (nthreads < 1 || nthreads > 64)
		return 2;
	start = now_ns();
	for (long i = 0; i < nthreads; i++)
		pthread_create(&tids[i], NULL, worker, NULL);
	for (long i = 0; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	report_loop(start);
	return 0;
}
