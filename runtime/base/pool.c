/*
 * pool.c -- a fixed thread pool for data-parallel loops on the CPU backend.
 * Ownership: kiln_pool_create returns owned; destroy joins the threads.
 * Thread-safety: one kiln_pool_for at a time per pool (not reentrant).
 */
#define _GNU_SOURCE
#include "kiln_base.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct kiln_pool {
    int n_threads; /* including the caller */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t generation;
    int n_active;
    bool quit;
    /* current job */
    kiln_pool_fn fn;
    void *ctx;
    int64_t n;
    _Atomic int64_t next;
};

static void run_items(kiln_pool *p) {
    for (;;) {
        int64_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        p->fn(p->ctx, i);
    }
}

static void *worker(void *arg) {
    kiln_pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_items(p);
        pthread_mutex_lock(&p->mu);
        if (--p->n_active == 0) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

kiln_status kiln_pool_create(int n_threads, kiln_pool **out) {
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > 256) n_threads = 256;
    kiln_pool *p = calloc(1, sizeof *p);
    if (!p) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (thread pool)");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->threads) {
            free(p);
            return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (thread pool)");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
                p->n_threads = i + 1;
                kiln_pool_destroy(p);
                return KILN_FAIL(KILN_ERR_UNAVAILABLE, "cannot start thread %d of the CPU pool", i);
            }
        }
    }
    *out = p;
    return KILN_OK;
}

void kiln_pool_destroy(kiln_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p);
}

int kiln_pool_size(const kiln_pool *p) { return p ? p->n_threads : 1; }

void kiln_pool_for(kiln_pool *p, int64_t n, kiln_pool_fn fn, void *ctx) {
    if (n <= 0) return;
    if (!p || p->n_threads == 1 || n == 1) {
        for (int64_t i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->next, 0);
    p->n_active = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    run_items(p);
    pthread_mutex_lock(&p->mu);
    while (p->n_active > 0) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
