/* gated T N: T threads wait until standard input ends, then each stats
 * /etc/passwd N times. A process to attach to whose threads all exist and
 * whose work has not begun: a test attaches, then closes the input, and
 * every call of the work is counted, on any machine's speed. */
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include "victim.h"

static long per_thread;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t open_gate = PTHREAD_COND_INITIALIZER;
static int gate_open;

static void *worker(void *arg)
{
	struct stat st;
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!gate_open)
		pthread_cond_wait(&open_gate, &lock);
	pthread_mutex_unlock(&lock);
	for (long i = 0; i < per_thread; i++)
		stat("/etc/passwd", &st);
	return NULL;
}

int main(int argc, char **argv)
{
	long nthreads = arg_count(argc, argv, 1, 2);
	pthread_t tids[64];
	char buf[256];

	per_thread = arg_count(argc, argv, 2, 1000);
	if (nthreads < 1 || nthreads > 64)
		return 2;
	for (long i = 0; i < nthreads; i++)
		pthread_create(&tids[i], NULL, worker, NULL);
	while (read(0, buf, sizeof buf) > 0)
		;
	pthread_mutex_lock(&lock);
	gate_open = 1;
	pthread_cond_broadcast(&open_gate);
	pthread_mutex_unlock(&lock);
	for (long i = 0; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	return 0;
}
