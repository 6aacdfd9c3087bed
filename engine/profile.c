/*
 * profile.c -- the per-op-kind time table of the profiling mode.
 */
#include <stdlib.h>

#include "profile.h"

void kiln_profile_report(const kiln_profile *p, const char *device) {
    if (!p->on || !p->steps) return;
    double total = 0;
    for (int k = 0; k < KILN_OP_COUNT; k++) total += p->ms[k];
    KILN_INFO("profile (%s): %llu steps, %.3f ms of ops per step", device, (unsigned long long)p->steps,
              total / (double)p->steps);
    for (int k = 0; k < KILN_OP_COUNT; k++) {
        if (!p->calls[k]) continue;
        KILN_INFO("  %-16s %10.3f ms per step %6.1f%%  (%llu calls)", kiln_op_kind_name((kiln_op_kind)k),
                  p->ms[k] / (double)p->steps, total > 0 ? 100.0 * p->ms[k] / total : 0.0,
                  (unsigned long long)p->calls[k]);
    }
}
