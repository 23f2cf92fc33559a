#include <stdio.h>
int main(void) { puts("asgd " ASGD_VERSION); return 0; }
