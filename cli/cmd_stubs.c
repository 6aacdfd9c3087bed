/*
 * cmd_stubs.c -- subcommands whose issue has not landed yet. Each says so
 * plainly and exits 1. Remove an entry when its cmd_NAME.c lands.
 */
#include "cli.h"

#include <stdio.h>

#define KILN_STUB(fn, name)                                                              \
    int fn(int argc, char **argv) {                                                      \
        (void)argc;                                                                      \
        (void)argv;                                                                      \
        fprintf(stderr, "kiln %s: not available in this build yet\n", name);             \
        return 1;                                                                        \
    }

