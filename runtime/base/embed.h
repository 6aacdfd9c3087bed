/*
 * embed.h -- source files compiled into libkiln (kernel_src .cu files, policies,
 * engine/configs), generated at build time by cmake/embed.cmake.
 * Paths are relative to the repository root ("kernel_src/rmsnorm.cu").
 * Thread-safety: read-only static data.
 */
#ifndef KILN_EMBED_H
#define KILN_EMBED_H

#include <stddef.h>

typedef struct kiln_embedded_file {
    const char *path;
    const char *data; /* NUL-terminated */
    size_t len;
} kiln_embedded_file;

extern const kiln_embedded_file kiln_embedded_files[]; /* ends with {NULL} */
extern const size_t kiln_embedded_count;

/* The embedded file at path, or NULL. */
const kiln_embedded_file *kiln_embedded_find(const char *path);

#endif
