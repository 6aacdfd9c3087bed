/* fuzz_files.h -- writing a fuzz input into a harness's private folder
 * (fuzz_config.c, fuzz_safetensors.c). A failure to write is the harness's
 * own, not the parser's: it aborts, naming the harness and the path. */
#ifndef KILN_FUZZ_FILES_H
#define KILN_FUZZ_FILES_H
#include <stdio.h>
#include <stdlib.h>

static void kiln_fuzz_write(const char *who, const char *dir, const char *name, const void *data, size_t size) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "%s: cannot write %s\n", who, path);
        abort();
    }
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
}
#endif
