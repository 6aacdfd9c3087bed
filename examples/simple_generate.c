/* simple_generate.c -- placeholder until the engine lands (issue 3). */
#include "kiln.h"
#include <stdio.h>
int main(void) { printf("kiln %d.%d\n", KILN_VERSION_MAJOR, KILN_VERSION_MINOR); return 0; }
