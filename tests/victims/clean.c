/* clean: an ordinary small program with nothing to find. */
#include <stdio.h>

int main(void)
{
	printf("hello\n");
	return 0;
}
