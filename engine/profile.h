/*
 * profile.h -- the executors' profiling mode ($KILN_PROFILE=1): time spent
 * per op kind (host clock on the CPU, CUDA events on the GPU, where decode
 * graphs are then disabled so each op is timed), printed as a table when the
 * executor is destroyed.
 * Thread-safety: one executor, one thread.
 */
#ifndef KILN_PROFILE_H
#define KILN_PROFILE_H

#include "program.h"

#include <stdlib.h>

typedef struct kiln_profile {
    bool on;
    double ms[KILN_OP_COUNT];
    uint64_t calls[KILN_OP_COUNT];
    uint64_t steps;
} kiln_profile;

static inline bool kiln_profile_enabled(void) {
    const char *v = getenv("KILN_PROFILE");
    return v && *v && strcmp(v, "0");
}

void kiln_profile_report(const kiln_profile *p, const char *device);

#endif
