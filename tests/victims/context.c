/* context N: N round trips between main and a coroutine with
 * swapcontext, which saves and restores the signal mask each time. */
#include <ucontext.h>
#include "victim.h"

static ucontext_t main_ctx, co_ctx;
static char co_stack[64 * 1024];
static volatile long switches;

static void coroutine(void)
{
	for (;;) {
		switches++;
		swapcontext(&co_ctx, &main_ctx);
	}
}

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 100000);
	long long start;

	getcontext(&co_ctx);
	co_ctx.uc_stack.ss_sp = co_stack;
	co_ctx.uc_stack.ss_size = sizeof(co_stack);
	co_ctx.uc_link = &main_ctx;
	makecontext(&co_ctx, coroutine, 0);
	start = now_ns();
	for (long i = 0; i < n; i++)
		swapcontext(&main_ctx, &co_ctx);
	report_loop(start);
	return switches == n ? 0 : 1;
}
