/*
 * exec_tp.c -- tensor parallelism as one executor over several rank
 * executors (CPU ranks simulate it in CI; GPU ranks talk through NCCL).
 * Each step, the batch (host memory, read-only) is handed to the worker
 * threads and run on every rank at once; the programs' all-reduce and
 * all-gather ops meet in the comm group. Rank 0 samples; its outputs are the
 * step's. A rank that fails aborts the group, so no rank waits forever, and
 * the step fails with that rank's error.
 * Ownership: owns the rank executors and the worker threads.
 * Thread-safety: one thread drives it; workers only run forwards.
 */
#include "comm.h"
#include "exec.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct exec_tp exec_tp;

/* What the workers run on ranks > 0: a forward whose outputs stay on the
 * device (rank 0 samples), or the pipelined launch / collect of a sampled
 * step (every rank samples the same all-gathered logits alike, so each
 * rank's fed tokens are rank 0's) */
typedef enum { TP_FORWARD, TP_LAUNCH, TP_COLLECT } tp_job;

typedef struct tp_worker {
    exec_tp *tp;
    int rank;
    pthread_t th;
    kiln_status st;
    char err[1024];
} tp_worker;

struct exec_tp {
    kiln_exec base;
    kiln_exec_vt vt;
    kiln_comm_group *group;
    int n;
    kiln_exec **ranks;
    tp_worker *w;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t gen;
    int n_done;
    bool quit;
    const kiln_batch *batch;
    tp_job job;
    const kiln_sample_req *rows;
    const int32_t *feed;
};

static void *worker_main(void *arg) {
    tp_worker *w = arg;
    exec_tp *tp = w->tp;
    uint64_t seen = 0;
    pthread_mutex_lock(&tp->mu);
    for (;;) {
        while (!tp->quit && tp->gen == seen) pthread_cond_wait(&tp->cv_work, &tp->mu);
        if (tp->quit) break;
        seen = tp->gen;
        const kiln_batch *b = tp->batch;
        const tp_job job = tp->job;
        const kiln_sample_req *rows = tp->rows;
        const int32_t *feed = tp->feed;
        pthread_mutex_unlock(&tp->mu);
        kiln_exec *x = tp->ranks[w->rank];
        if (job == TP_LAUNCH) w->st = x->vt->launch_sample(x, b, rows, feed);
        else if (job == TP_COLLECT) w->st = x->vt->collect_sample(x, NULL, NULL);
        else w->st = x->vt->forward(x, b, NULL);
        if (w->st) {
            snprintf(w->err, sizeof w->err, "%s", kiln_last_error());
            kiln_comm_abort(kiln_comm_group_member(tp->group, w->rank)); /* nobody waits for this rank */
        }
        pthread_mutex_lock(&tp->mu);
        tp->n_done++;
        pthread_cond_signal(&tp->cv_done);
    }
    pthread_mutex_unlock(&tp->mu);
    return NULL;
}

/* Hand the batch to the workers, run rank 0 with fn, wait for everyone. */
static kiln_status run_all(exec_tp *tp, const kiln_batch *b, kiln_status (*fn)(kiln_exec *, void *), void *arg,
                           tp_job job, const kiln_sample_req *rows, const int32_t *feed) {
    pthread_mutex_lock(&tp->mu);
    tp->batch = b;
    tp->job = job;
    tp->rows = rows;
    tp->feed = feed;
    tp->n_done = 0;
    tp->gen++;
    pthread_cond_broadcast(&tp->cv_work);
    pthread_mutex_unlock(&tp->mu);
    kiln_status st0 = fn(tp->ranks[0], arg);
    char err0[1024];
    snprintf(err0, sizeof err0, "%s", st0 ? kiln_last_error() : "");
    if (st0) kiln_comm_abort(kiln_comm_group_member(tp->group, 0));
    pthread_mutex_lock(&tp->mu);
    while (tp->n_done < tp->n - 1) pthread_cond_wait(&tp->cv_done, &tp->mu);
    pthread_mutex_unlock(&tp->mu);
    /* the root cause, not a rank that only saw the abort */
    if (st0 && st0 != KILN_ERR_CANCELLED) return KILN_FAIL(st0, "tensor-parallel rank 0: %s", err0);
    for (int r = 1; r < tp->n; r++)
        if (tp->w[r].st && tp->w[r].st != KILN_ERR_CANCELLED)
            return KILN_FAIL(tp->w[r].st, "tensor-parallel rank %d: %s", r, tp->w[r].err);
    if (st0) return KILN_FAIL(st0, "tensor-parallel rank 0: %s", err0);
    for (int r = 1; r < tp->n; r++)
        if (tp->w[r].st) return KILN_FAIL(tp->w[r].st, "tensor-parallel rank %d: %s", r, tp->w[r].err);
    if (job != TP_COLLECT) tp->base.n_forward++;
    return KILN_OK;
}

typedef struct fwd_arg {
    const kiln_batch *b;
    const float **logits;
    const kiln_sample_req *rows;
    int32_t *tokens;
    float *logprobs;
    const int32_t *feed;
} fwd_arg;

static kiln_status rank0_forward(kiln_exec *x, void *a) {
    fwd_arg *f = a;
    return x->vt->forward(x, f->b, f->logits);
}
static kiln_status rank0_sample(kiln_exec *x, void *a) {
    fwd_arg *f = a;
    return x->vt->forward_sample(x, f->b, f->rows, f->tokens, f->logprobs);
}

static kiln_status rank0_launch(kiln_exec *x, void *a) {
    fwd_arg *f = a;
    return x->vt->launch_sample(x, f->b, f->rows, f->feed);
}
static kiln_status rank0_collect(kiln_exec *x, void *a) {
    fwd_arg *f = a;
    return x->vt->collect_sample(x, f->tokens, f->logprobs);
}

static kiln_status tp_forward(kiln_exec *base, const kiln_batch *b, const float **logits) {
    fwd_arg f = {b, logits, NULL, NULL, NULL, NULL};
    return run_all((exec_tp *)base, b, rank0_forward, &f, TP_FORWARD, NULL, NULL);
}

static kiln_status tp_forward_sample(kiln_exec *base, const kiln_batch *b, const kiln_sample_req *rows,
                                     int32_t *tokens, float *logprobs) {
    fwd_arg f = {b, NULL, rows, tokens, logprobs, NULL};
    return run_all((exec_tp *)base, b, rank0_sample, &f, TP_FORWARD, NULL, NULL);
}

/* Pipelined decode: every rank launches (and later collects) the sampled
 * step; rank 0's tokens are the step's */
static kiln_status tp_launch_sample(kiln_exec *base, const kiln_batch *b, const kiln_sample_req *rows,
                                    const int32_t *feed) {
    fwd_arg f = {b, NULL, rows, NULL, NULL, feed};
    return run_all((exec_tp *)base, b, rank0_launch, &f, TP_LAUNCH, rows, feed);
}

static kiln_status tp_collect_sample(kiln_exec *base, int32_t *tokens, float *logprobs) {
    fwd_arg f = {NULL, NULL, NULL, tokens, logprobs, NULL};
    return run_all((exec_tp *)base, NULL, rank0_collect, &f, TP_COLLECT, NULL, NULL);
}

static void tp_kv_layer(kiln_exec *base, int layer, const void **k, const void **v, const kiln_kv_layout **l) {
    exec_tp *tp = (exec_tp *)base;
    tp->ranks[0]->vt->kv_layer(tp->ranks[0], layer, k, v, l);
}

/* FP8 scales: each rank keeps its own heads (global head ids throughout);
 * calibration forwards run through tp_forward like any other. */
static kiln_status tp_kv_calibrate(kiln_exec *base, int n_tokens) {
    exec_tp *tp = (exec_tp *)base;
    for (int r = 0; r < tp->n; r++) {
        kiln_status st = tp->ranks[r]->vt->kv_calibrate(tp->ranks[r], n_tokens);
        if (st) return st;
    }
    return KILN_OK;
}
static void tp_kv_amax(kiln_exec *base, float *amax) {
    exec_tp *tp = (exec_tp *)base;
    for (int r = 0; r < tp->n; r++) tp->ranks[r]->vt->kv_amax(tp->ranks[r], amax);
}
static kiln_status tp_set_kv_scales(kiln_exec *base, const float *scales) {
    exec_tp *tp = (exec_tp *)base;
    for (int r = 0; r < tp->n; r++) {
        kiln_status st = tp->ranks[r]->vt->set_kv_scales(tp->ranks[r], scales);
        if (st) return st;
    }
    return KILN_OK;
}

static void tp_destroy(kiln_exec *base) {
    exec_tp *tp = (exec_tp *)base;
    if (!tp) return;
    pthread_mutex_lock(&tp->mu);
    tp->quit = true;
    pthread_cond_broadcast(&tp->cv_work);
    pthread_mutex_unlock(&tp->mu);
    for (int r = 1; r < tp->n; r++)
        if (tp->w[r].th) pthread_join(tp->w[r].th, NULL);
    for (int r = 0; r < tp->n; r++) kiln_exec_destroy(tp->ranks[r]);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv_work);
    pthread_cond_destroy(&tp->cv_done);
    free(tp->ranks);
    free(tp->w);
    free(tp);
}

static const kiln_exec_vt tp_vt = {tp_forward,      tp_forward_sample, tp_destroy,      tp_kv_layer,
                                   tp_kv_calibrate, tp_kv_amax,        tp_set_kv_scales, tp_launch_sample, tp_collect_sample,
                                   false};

kiln_status kiln_exec_tp_create(kiln_exec **ranks, int n, kiln_comm_group *group, kiln_exec **out) {
    kiln_status st = KILN_OK;
    exec_tp *tp = calloc(1, sizeof *tp);
    if (!tp) {
        for (int r = 0; r < n; r++) kiln_exec_destroy(ranks[r]);
        return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv_work, NULL);
    pthread_cond_init(&tp->cv_done, NULL);
    tp->n = n;
    tp->ranks = calloc((size_t)n, sizeof *tp->ranks);
    tp->w = calloc((size_t)n, sizeof *tp->w);
    if (!tp->ranks || !tp->w) {
        for (int r = 0; r < n; r++) kiln_exec_destroy(ranks[r]);
        tp_destroy(&tp->base);
        return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    memcpy(tp->ranks, ranks, sizeof *ranks * (size_t)n);
    tp->group = group;
    tp->base = *ranks[0];
    tp->vt = tp_vt;
    if (!ranks[0]->vt->forward_sample) tp->vt.forward_sample = NULL;
    tp->vt.overlaps = true;
    for (int r = 0; r < n; r++) {
        if (!ranks[r]->vt->launch_sample || !ranks[r]->vt->collect_sample)
            tp->vt.launch_sample = NULL, tp->vt.collect_sample = NULL;
        tp->vt.overlaps &= ranks[r]->vt->overlaps;
    }
    for (int r = 0; r < n; r++)
        if (!ranks[r]->vt->kv_calibrate || !ranks[r]->vt->kv_amax || !ranks[r]->vt->set_kv_scales)
            tp->vt.kv_calibrate = NULL, tp->vt.kv_amax = NULL, tp->vt.set_kv_scales = NULL;
    tp->base.vt = &tp->vt;
    /* every rank must offer the same pool: the smallest */
    for (int r = 1; r < n; r++) tp->base.num_kv_blocks = KILN_MIN(tp->base.num_kv_blocks, ranks[r]->num_kv_blocks);
    for (int r = 1; r < n; r++) {
        tp->w[r] = (tp_worker){.tp = tp, .rank = r};
        if (pthread_create(&tp->w[r].th, NULL, worker_main, &tp->w[r]) != 0) {
            tp->w[r].th = 0;
            st = KILN_FAIL(KILN_ERR_UNAVAILABLE, "cannot start the thread of tensor-parallel rank %d", r);
            tp_destroy(&tp->base);
            return st;
        }
    }
    *out = &tp->base;
    return KILN_OK;
}
