/* gated T N [hold]: T threads wait until standard input ends, then each stats
 * /etc/passwd N times. A process to attach to whose threads all exist and
 * whose work has not begun: a test attaches, then closes the input, and
 * every call of the work is counted, on any machine's speed. With `hold`,
 * each thread then names itself w<i>, and once all have, the process prints
 * "worked" and its threads stay alive, blocked, until it is killed: threads
 * a tracer finds alive at its end. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "victim.h"

static long per_thread;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t open_gate = PTHREAD_COND_INITIALIZER;
static pthread_cond_t all_worked = PTHREAD_COND_INITIALIZER;
static int gate_open, hold;
static long worked;

static void *worker(void *arg)
{
	struct stat st;
	char name[16];

	pthread_mutex_lock(&lock);
	while (!gate_open)
		pthread_cond_wait(&open_gate, &lock);
	pthread_mutex_unlock(&lock);
	for (long i = 0; i < per_thread; i++)
		stat("/etc/passwd", &st);
	if (!hold)
		return NULL;
	snprintf(name, sizeof name, "w%ld", (long)arg);
	prctl(PR_SET_NAME, name);
	pthread_mutex_lock(&lock);
	worked++;
	pthread_cond_broadcast(&all_worked);
	pthread_mutex_unlock(&lock);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	long nthreads = arg_count(argc, argv, 1, 2);
	pthread_t tids[64];
	char buf[256];

	per_thread = arg_count(argc, argv, 2, 1000);
	hold = argc > 3 && strcmp(argv[3], "hold") == 0;
	if (nthreads < 1 || nthreads > 64)
		return 2;
	for (long i = 0; i < nthreads; i++)
		pthread_create(&tids[i], NULL, worker, (void *)i);
	while (read(0, buf, sizeof buf) > 0)
		;
	pthread_mutex_lock(&lock);
	gate_open = 1;
	pthread_cond_broadcast(&open_gate);
	while (hold && worked < nthreads)
		pthread_cond_wait(&all_worked, &lock);
	pthread_mutex_unlock(&lock);
	if (hold) {
		printf("worked\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	for (long i = 0; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	return 0;
}
