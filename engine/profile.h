/*
 * profile.h -- the executors' profiling mode ($KILN_PROFILE=1): time spent
 * per op (host clock on the CPU, CUDA events on the GPU, where decode graphs
 * are then disabled so each op is timed), grouped by label -- the op kind,
 * and for GEMMs the weight without its layer prefix ("gemm qkv") -- and kept
 * apart for decode steps (one token per sequence) and the others (prefill,
 * verification). Printed as two tables when the executor is destroyed.
 * Thread-safety: one executor, one thread.
 */
#ifndef KILN_PROFILE_H
#define KILN_PROFILE_H

#include "program.h"

#include <stdlib.h>
#include <string.h>

#define KILN_PROFILE_MAX_LABELS 48

typedef struct kiln_profile_row {
    char label[40];
    double ms[2];       /* [0] decode steps, [1] other steps */
    uint64_t calls[2];
} kiln_profile_row;

typedef struct kiln_profile {
    bool on;
    int n_rows;
    kiln_profile_row rows[KILN_PROFILE_MAX_LABELS];
    uint64_t steps[2];
    int *op_row;        /* per program op: its row (made on first use) */
    int n_ops;
} kiln_profile;

static inline bool kiln_profile_enabled(void) {
    const char *v = getenv("KILN_PROFILE");
    return v && *v && strcmp(v, "0");
}

/* Add ms to program op i's row for a decode (or other) step. */
void kiln_profile_add(kiln_profile *p, const kiln_program *prog, int i, double ms, bool decode);
/* Count one step of the kind. */
static inline void kiln_profile_step(kiln_profile *p, bool decode) { p->steps[decode ? 0 : 1]++; }
void kiln_profile_report(const kiln_profile *p, const char *device);
void kiln_profile_free(kiln_profile *p);

#endif
