/* manypaths N K [R [T [ROUNDS [DIR]]]]: stat N distinct paths that do not exist,
 * R times each (once by default: a file-tree walk's shape), calling
 * localtime() K times along the way; with T threads, each makes the whole
 * walk at once (every path is seen T × R times, its first sightings
 * racing). With ROUNDS = 1 the R visits are R walks over all N paths, so
 * a path comes back only after the N - 1 others (`find`'s names, back in
 * each directory). With DIR, the paths are DIR/0 to DIR/N-1, files the
 * caller made: calls that succeed. */
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include "victim.h"

static long n, k, r, rounds;
static const char *dir = "/nonexistent/sysdiet";
static pthread_barrier_t ready;

static void *walk(void *unused)
{
	long every = k > 0 ? n / k : 0;
	time_t now = time(NULL);
	volatile int sink = 0;
	char path[4096];
	struct stat st;

	(void)unused;
	pthread_barrier_wait(&ready);
	for (long round = 0; round < (rounds ? r : 1); round++) {
		for (long i = 0; i < n; i++) {
			snprintf(path, sizeof(path), "%s/%ld", dir, i);
			for (long j = 0; j < (rounds ? 1 : r); j++)
				sink += stat(path, &st);
			if (every && i % every == 0)
				sink += localtime(&now)->tm_sec;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long t = arg_count(argc, argv, 4, 1);
	pthread_t threads[64];
	long long start;

	n = arg_count(argc, argv, 1, 100000);
	k = arg_count(argc, argv, 2, 0);
	r = arg_count(argc, argv, 3, 1);
	rounds = arg_count(argc, argv, 5, 0);
	if (argc > 6)
		dir = argv[6];
	if (t < 1 || t > 64)
		t = 1;
	start = now_ns();
	if (t == 1) {
		pthread_barrier_init(&ready, NULL, 1);
		walk(NULL);
	} else {
		pthread_barrier_init(&ready, NULL, t);
		for (long i = 0; i < t; i++)
			pthread_create(&threads[i], NULL, walk, NULL);
		for (long i = 0; i < t; i++)
			pthread_join(threads[i], NULL);
	}
	report_loop(start);
	return 0;
}
