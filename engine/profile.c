/*
 * profile.c -- the per-op time tables of the profiling mode.
 */
#include <stdio.h>
#include <stdlib.h>

#include "profile.h"

static void label_of(const kiln_program *prog, const kiln_op *o, char *buf, size_t n) {
    const char *kind = kiln_op_kind_name(o->kind);
    if (o->kind == KILN_OP_GEMM && o->w >= 0) {
        const char *id = prog->weights[o->w].id, *dot = strrchr(id, '.');
        snprintf(buf, n, "%s %s", kind, dot ? dot + 1 : id);
    } else {
        snprintf(buf, n, "%s", kind);
    }
}

void kiln_profile_add(kiln_profile *p, const kiln_program *prog, int i, double ms, bool decode) {
    if (!p->on || i < 0 || i >= prog->n_ops) return;
    if (p->n_ops != prog->n_ops) { /* first use: one row index per op, -1 until labelled */
        free(p->op_row);
        p->op_row = malloc(sizeof(int) * (size_t)prog->n_ops);
        if (!p->op_row) { p->n_ops = 0; return; }
        for (int k = 0; k < prog->n_ops; k++) p->op_row[k] = -1;
        p->n_ops = prog->n_ops;
    }
    int r = p->op_row[i];
    if (r < 0) {
        char label[sizeof p->rows[0].label];
        label_of(prog, &prog->ops[i], label, sizeof label);
        for (r = 0; r < p->n_rows; r++)
            if (!strcmp(p->rows[r].label, label)) break;
        if (r == p->n_rows) {
            if (p->n_rows == KILN_PROFILE_MAX_LABELS) r = p->n_rows - 1; /* the last row takes the rest */
            else {
                memset(&p->rows[r], 0, sizeof p->rows[r]);
                memcpy(p->rows[r].label, label, sizeof label);
                p->n_rows++;
            }
        }
        p->op_row[i] = r;
    }
    p->rows[r].ms[decode ? 0 : 1] += ms;
    p->rows[r].calls[decode ? 0 : 1]++;
}

void kiln_profile_report(const kiln_profile *p, const char *device) {
    if (!p->on) return;
    static const char *what[2] = {"decode steps", "prefill / verification steps"};
    for (int d = 0; d < 2; d++) {
        if (!p->steps[d]) continue;
        double total = 0;
        for (int r = 0; r < p->n_rows; r++) total += p->rows[r].ms[d];
        double steps = (double)p->steps[d];
        KILN_INFO("profile (%s), %s: %llu steps, %.3f ms of ops per step", device, what[d],
                  (unsigned long long)p->steps[d], total / steps);
        for (int r = 0; r < p->n_rows; r++) {
            const kiln_profile_row *w = &p->rows[r];
            if (!w->calls[d]) continue;
            KILN_INFO("  %-22s %9.4f ms per step %6.1f%%  %5.1f calls per step, %8.2f us each", w->label,
                      w->ms[d] / steps, total > 0 ? 100.0 * w->ms[d] / total : 0.0, (double)w->calls[d] / steps,
                      1e3 * w->ms[d] / (double)w->calls[d]);
        }
    }
}

void kiln_profile_free(kiln_profile *p) {
    free(p->op_row);
    p->op_row = NULL;
    p->n_ops = 0;
}
