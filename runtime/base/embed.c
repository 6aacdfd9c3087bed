/* embed.c -- lookup in the embedded file table. Thread-safety: read-only. */
#include "embed.h"

#include <string.h>

const kiln_embedded_file *kiln_embedded_find(const char *path) {
    for (size_t i = 0; i < kiln_embedded_count; i++)
        if (!strcmp(kiln_embedded_files[i].path, path)) return &kiln_embedded_files[i];
    return NULL;
}
