/* sigjmp N [0|1]: N sigsetjmp/siglongjmp round trips; the second
 * argument is savesigs (default 1, which costs a syscall each way). */
#include <setjmp.h>
#include "victim.h"

static sigjmp_buf env;

static void jump_back(void) { siglongjmp(env, 1); }

int main(int argc, char **argv)
{
	long n = arg_count(argc, argv, 1, 100000);
	int savesigs = (int)arg_count(argc, argv, 2, 1);
	volatile long i = 0;
	long long start = now_ns();

	for (; i < n; i++) {
		if (sigsetjmp(env, savesigs) == 0)
			jump_back();
	}
	report_loop(start);
	return 0;
}
