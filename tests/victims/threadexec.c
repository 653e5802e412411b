/* threadexec N: the main thread makes N getppid calls, then a second
 * thread makes N getuid calls and execs this program again ("after N"),
 * which takes the main thread's tid (the kernel's de_thread) and makes N
 * getpid calls. */
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "victim.h"

static long n;
static char *self;

static void *worker(void *arg)
{
	char count[32];

	(void)arg;
	for (long i = 0; i < n; i++)
		syscall(SYS_getuid);
	snprintf(count, sizeof(count), "%ld", n);
	execl(self, self, "after", count, (char *)NULL);
	_exit(127);
}

int main(int argc, char **argv)
{
	pthread_t t;

	if (argc > 2 && !strcmp(argv[1], "after")) {
		n = atol(argv[2]);
		for (long i = 0; i < n; i++)
			syscall(SYS_getpid);
		return 0;
	}
	n = arg_count(argc, argv, 1, 100);
	self = "/proc/self/exe";
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	pthread_create(&t, NULL, worker, NULL);
	pthread_join(t, NULL);
	return 1;
}
