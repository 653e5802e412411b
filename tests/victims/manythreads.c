/* manythreads N [BATCH]: N short threads, BATCH at a time, each making a
 * few syscalls of its own; every batch is joined before the next starts,
 * so glibc reuses its cached stacks the same way every run. */
#include <pthread.h>
#include <unistd.h>
#include "victim.h"

static void *work(void *arg)
{
	for (int i = 0; i < 10; i++)
		getppid();
	return arg;
}

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 2000);
	long batch = arg_count(argc, argv, 2, 50);
	pthread_t t[256];
	long long start = now_ns();

	if (batch > 256)
		batch = 256;
	for (long done = 0; done < n; done += batch) {
		long k = n - done < batch ? n - done : batch;

		for (long i = 0; i < k; i++)
			if (pthread_create(&t[i], NULL, work, NULL))
				return 1;
		for (long i = 0; i < k; i++)
			pthread_join(t[i], NULL);
	}
	report_loop(start);
	return 0;
}
