/* fuzz_replay.h -- replay(target, fn): run a fuzz target's entry point on
 * every file kept under tests/data/fuzz/<target>/ (crashers and seeds);
 * the number of files, or -1 when the folder is missing. Included by the
 * ctest replays (test_*_fuzz_regress.c) after the targets' sources. */
#ifndef KILN_FUZZ_REPLAY_H
#define KILN_FUZZ_REPLAY_H
#include "kiln_base.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int replay(const char *target, int (*fn)(const uint8_t *, size_t)) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fuzz/%s", KT_DATA, target);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "README.md")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *data = NULL;
        size_t len = 0;
        if (kiln_read_file(path, &data, &len)) continue;
        fprintf(stderr, "  %s/%s\n", target, e->d_name);
        fn((const uint8_t *)data, len);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

#endif
