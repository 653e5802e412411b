/* The bench loops: each calls one libc function n times in a tight loop.
 * Every loop has the same shape, void k(uint64_t n, intptr_t arg), so the
 * Rust side can time any of them the same way. State a call needs is
 * thread-local: the same loop runs from several threads at once. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* Results go here so that no call is optimised away. */
static __thread volatile long sink;

#define LOOP(n) for (uint64_t i_ = 0; i_ < (n); i_++)

/* The loop alone: what every other loop's figure includes. */
void sd_none(uint64_t n, intptr_t arg)
{
	(void)arg;
	LOOP(n) __asm__ volatile("" ::: "memory");
}

void sd_time(uint64_t n, intptr_t arg)
{
	(void)arg;
	LOOP(n) sink = time(NULL);
}

void sd_gettimeofday(uint64_t n, intptr_t arg)
{
	struct timeval tv;
	(void)arg;
	LOOP(n) {
		gettimeofday(&tv, NULL);
		sink = tv.tv_usec;
	}
}

/* arg: the clock id. */
void sd_clock_gettime(uint64_t n, intptr_t arg)
{
	struct timespec ts;
	LOOP(n) {
		clock_gettime((clockid_t)arg, &ts);
		sink = ts.tv_nsec;
	}
}

void sd_localtime(uint64_t n, intptr_t arg)
{
	time_t t = time(NULL);
	(void)arg;
	LOOP(n) sink = localtime(&t)->tm_hour;
}

void sd_localtime_r(uint64_t n, intptr_t arg)
{
	time_t t = time(NULL);
	struct tm tm;
	(void)arg;
	LOOP(n) sink = localtime_r(&t, &tm)->tm_hour;
}

void sd_gmtime_r(uint64_t n, intptr_t arg)
{
	time_t t = time(NULL);
	struct tm tm;
	(void)arg;
	LOOP(n) sink = gmtime_r(&t, &tm)->tm_hour;
}

/* arg: the format, a NUL-terminated string. */
void sd_strftime(uint64_t n, intptr_t arg)
{
	time_t t = time(NULL);
	struct tm tm;
	char buf[64];
	localtime_r(&t, &tm);
	LOOP(n) sink = strftime(buf, sizeof buf, (const char *)arg, &tm);
}

void sd_mktime(uint64_t n, intptr_t arg)
{
	time_t t = time(NULL);
	struct tm tm, copy;
	(void)arg;
	localtime_r(&t, &tm);
	LOOP(n) {
		copy = tm;
		sink = mktime(&copy);
	}
}

void sd_tzset(uint64_t n, intptr_t arg)
{
	(void)arg;
	LOOP(n) tzset();
}

/* Blocking a signal that is already blocked: the kernel is asked anyway. */
void sd_sigprocmask(uint64_t n, intptr_t arg)
{
	sigset_t set;
	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	LOOP(n) sigprocmask(SIG_BLOCK, &set, NULL);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
}

void sd_pthread_sigmask(uint64_t n, intptr_t arg)
{
	sigset_t set;
	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	LOOP(n) pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static __thread ucontext_t context;
static __thread volatile int resumed;

/* One save and one switch back to it, as a coroutine library does. */
static __attribute__((noinline)) void context_round(void)
{
	resumed = 0;
	getcontext(&context);
	if (!resumed) {
		resumed = 1;
		setcontext(&context);
	}
}

void sd_getcontext_setcontext(uint64_t n, intptr_t arg)
{
	(void)arg;
	LOOP(n) context_round();
}

static __thread sigjmp_buf sigjmp_env;

static __attribute__((noinline)) void sigjmp_round(int savemask)
{
	if (sigsetjmp(sigjmp_env, savemask) == 0)
		siglongjmp(sigjmp_env, 1);
}

/* arg: sigsetjmp's savemask. */
void sd_sigsetjmp(uint64_t n, intptr_t arg)
{
	LOOP(n) sigjmp_round((int)arg);
}

static __thread jmp_buf jmp_env;

static __attribute__((noinline)) void jmp_round(void)
{
	if (_setjmp(jmp_env) == 0)
		_longjmp(jmp_env, 1);
}

void sd_setjmp(uint64_t n, intptr_t arg)
{
	(void)arg;
	LOOP(n) jmp_round();
}

/* arg: the path, a NUL-terminated string. */
void sd_stat(uint64_t n, intptr_t arg)
{
	struct stat st;
	LOOP(n) sink = stat((const char *)arg, &st);
}

void sd_getpid(uint64_t n, intptr_t arg)
{
	(void)arg;
	LOOP(n) sink = getpid();
}
