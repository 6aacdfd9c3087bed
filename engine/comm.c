/*
 * comm.c -- host-memory collectives for in-process tensor-parallel ranks
 * (see comm.h). The barrier is a generation-counted mutex/condvar so that an
 * abort can wake everyone.
 */
#include "comm.h"

#include <stdlib.h>

struct kiln_comm {
    kiln_comm_group *g;
    int rank;
    void *dev;
};

struct kiln_comm_group {
    int n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    uint64_t generation;
    bool aborted;
    kiln_comm *members;
    const float **send; /* [n] per-rank buffers published for a collective */
    const void **bytes; /* [n] the same for byte collectives */
    float *scratch;
    size_t scratch_cap;
};

kiln_status kiln_comm_group_create(int n, kiln_comm_group **out) {
    if (n < 1 || n > 1024) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "bad rank count %d", n);
    kiln_comm_group *g = calloc(1, sizeof *g);
    if (!g) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    g->n = n;
    g->members = calloc((size_t)n, sizeof *g->members);
    g->send = calloc((size_t)n, sizeof *g->send);
    g->bytes = calloc((size_t)n, sizeof *g->bytes);
    if (!g->members || !g->send || !g->bytes) {
        free(g->members);
        free(g->send);
        free(g->bytes);
        free(g);
        return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    for (int r = 0; r < n; r++) g->members[r] = (kiln_comm){g, r, NULL};
    *out = g;
    return KILN_OK;
}

void kiln_comm_group_destroy(kiln_comm_group *g) {
    if (!g) return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->members);
    free(g->send);
    free(g->bytes);
    free(g->scratch);
    free(g);
}

kiln_comm *kiln_comm_group_member(kiln_comm_group *g, int rank) { return &g->members[rank]; }
int kiln_comm_rank(const kiln_comm *c) { return c->rank; }
int kiln_comm_size(const kiln_comm *c) { return c->g->n; }
void *kiln_comm_device(const kiln_comm *c) { return c->dev; }
void kiln_comm_set_device(kiln_comm *c, void *d) { c->dev = d; }

bool kiln_comm_barrier(kiln_comm *c) {
    kiln_comm_group *g = c->g;
    pthread_mutex_lock(&g->mu);
    if (g->aborted) {
        pthread_mutex_unlock(&g->mu);
        return false;
    }
    uint64_t gen = g->generation;
    if (++g->arrived == g->n) {
        g->arrived = 0;
        g->generation++;
        pthread_cond_broadcast(&g->cv);
    } else {
        while (gen == g->generation && !g->aborted) pthread_cond_wait(&g->cv, &g->mu);
    }
    bool ok = !g->aborted;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

void kiln_comm_abort(kiln_comm *c) {
    kiln_comm_group *g = c->g;
    pthread_mutex_lock(&g->mu);
    g->aborted = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static kiln_status aborted(void) {
    return KILN_FAIL(KILN_ERR_CANCELLED, "another tensor-parallel rank failed");
}

kiln_status kiln_comm_all_reduce_f32(kiln_comm *c, float *buf, size_t n) {
    kiln_comm_group *g = c->g;
    if (g->n == 1) return KILN_OK;
    g->send[c->rank] = buf;
    if (!kiln_comm_barrier(c)) return aborted();
    /* each rank sums its own chunk over all ranks, in rank order */
    size_t chunk = (n + (size_t)g->n - 1) / (size_t)g->n, lo = (size_t)c->rank * chunk, hi = KILN_MIN(n, lo + chunk);
    if (c->rank == 0) {
        if (g->scratch_cap < n) {
            float *p = realloc(g->scratch, n * sizeof(float));
            if (p) {
                g->scratch = p;
                g->scratch_cap = n;
            }
        }
    }
    if (!kiln_comm_barrier(c)) return aborted();
    if (g->scratch_cap < n) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory for an all-reduce");
    for (size_t i = lo; i < hi; i++) {
        float s = 0;
        for (int r = 0; r < g->n; r++) s += g->send[r][i];
        g->scratch[i] = s;
    }
    if (!kiln_comm_barrier(c)) return aborted();
    memcpy(buf, g->scratch, n * sizeof(float));
    if (!kiln_comm_barrier(c)) return aborted();
    return KILN_OK;
}

kiln_status kiln_comm_all_gather_cols_f32(kiln_comm *c, const float *send, float *recv, size_t rows, size_t cols) {
    kiln_comm_group *g = c->g;
    g->send[c->rank] = send;
    if (!kiln_comm_barrier(c)) return aborted();
    size_t full = cols * (size_t)g->n;
    for (size_t i = 0; i < rows; i++)
        for (int r = 0; r < g->n; r++) memcpy(recv + i * full + (size_t)r * cols, g->send[r] + i * cols, cols * sizeof(float));
    if (!kiln_comm_barrier(c)) return aborted();
    return KILN_OK;
}

kiln_status kiln_comm_broadcast(kiln_comm *c, void *buf, size_t n) {
    kiln_comm_group *g = c->g;
    if (c->rank == 0) g->send[0] = buf;
    if (!kiln_comm_barrier(c)) return aborted();
    if (c->rank != 0) memcpy(buf, g->send[0], n);
    if (!kiln_comm_barrier(c)) return aborted();
    return KILN_OK;
}

kiln_status kiln_comm_all_gather(kiln_comm *c, const void *send, void *recv, size_t n) {
    kiln_comm_group *g = c->g;
    g->bytes[c->rank] = send;
    if (!kiln_comm_barrier(c)) return aborted();
    for (int r = 0; r < g->n; r++) memcpy((char *)recv + (size_t)r * n, g->bytes[r], n);
    if (!kiln_comm_barrier(c)) return aborted();
    return KILN_OK;
}
