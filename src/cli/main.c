/* placeholder: being written */
#include <stdio.h>
int main(void) { fputs("delayq: not built yet\n", stderr); return 2; }
