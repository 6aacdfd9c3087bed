/*
 * engine_loop.c -- the engine thread and the token channels. The engine
 * thread sleeps until a connection queues or cancels a request, then steps
 * the engine while it has work. Stream callbacks (on the engine thread) copy
 * each event into its call's channel and queue the call for the waker
 * thread, which wakes the connection threads after each step while the
 * engine runs the next one (256 futex wakes per step cost about a tenth of
 * an 8B model's decode step when done on the engine thread); they never
 * block on the network. A channel whose reader stalls (undelivered
 * bytes over the limit, or nothing drained for send_timeout) cancels its
 * call, so a slow reader costs a bounded amount of memory.
 * Ownership: see srv_internal.h (reference-counted calls).
 * Thread-safety: srv.mu guards the wake flag and the active list; each
 * call's mu guards its channel and counters.
 */
#include "srv_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ channel */

static bool evq_push(srv_evq *q, const kiln_stream_event *ev, int choice) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 16;
        srv_ev *n = realloc(q->ev, cap * sizeof *n);
        if (!n) return false;
        q->ev = n;
        q->cap = cap;
    }
    if (ev->n_top > 0 && q->n_top + (size_t)ev->n_top > q->cap_top) {
        size_t cap = q->cap_top ? q->cap_top : 64;
        while (cap < q->n_top + (size_t)ev->n_top) cap *= 2;
        kiln_logprob *n = realloc(q->top, cap * sizeof *n);
        if (!n) return false;
        q->top = n;
        q->cap_top = cap;
    }
    srv_ev *e = &q->ev[q->n];
    e->choice = choice;
    e->token = ev->token;
    e->logprob = ev->logprob;
    e->top_off = q->n_top;
    e->n_top = ev->n_top > 0 && ev->top ? ev->n_top : 0;
    if (e->n_top) memcpy(q->top + q->n_top, ev->top, sizeof(kiln_logprob) * (size_t)e->n_top);
    q->n_top += (size_t)e->n_top;
    e->text_off = q->text.len;
    e->text_len = ev->text ? ev->text_len : 0;
    if (e->text_len) api_buf_put(&q->text, ev->text, e->text_len);
    if (q->text.oom) return false;
    e->finish = ev->finish;
    e->error = ev->error;
    e->n_prompt = ev->n_prompt_tokens;
    e->n_gen = ev->n_generated_tokens;
    q->n++;
    return true;
}

static void evq_clear(srv_evq *q) {
    q->n = 0;
    q->n_top = 0;
    q->text.len = 0;
}

static void evq_free(srv_evq *q) {
    free(q->ev);
    free(q->top);
    api_buf_free(&q->text);
    memset(q, 0, sizeof *q);
}

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool grow_wl(srv *s);

/* Engine thread: called for every token and for the end of each request. */
int srv_on_event(void *user, const kiln_stream_event *ev) {
    srv_choice *ch = user;
    srv_call *c = ch->call;
    srv *s = c->s;
    bool first = false, final = ev->finish != KILN_FINISH_NONE;
    pthread_mutex_lock(&c->mu);
    if (!ch->started) {
        ch->started = true;
        first = true;
    }
    /* a final event must always arrive; an event that does not fit in
     * memory cancels the call instead */
    if (!evq_push(&c->q, ev, (int)(ch - c->choices))) {
        c->cancelled = true;
        if (final) {
            kiln_stream_event fin = *ev;
            fin.text = NULL;
            fin.text_len = 0;
            fin.n_top = 0;
            fin.error = KILN_ERR_OUT_OF_MEMORY;
            evq_clear(&c->q);
            evq_push(&c->q, &fin, (int)(ch - c->choices));
        }
    }
    if (ev->error != KILN_OK && !c->error_msg[0])
        snprintf(c->error_msg, sizeof c->error_msg, "%s",
                 ev->error_message && *ev->error_message ? ev->error_message : kiln_status_name(ev->error));
    double t = srv_now();
    if (c->pending == 0) c->pending_since = t;
    c->pending += ev->text_len + sizeof(srv_ev) + sizeof(kiln_logprob) * (size_t)(ev->n_top > 0 ? ev->n_top : 0);
    if (c->req.stream && !c->cancelled &&
        (c->pending > s->cfg.stream_buffer_bytes || t - c->pending_since > s->cfg.send_timeout_s)) {
        c->cancelled = true;
        c->slow_abort = true;
        atomic_fetch_add(&s->slow_aborts, 1);
    }
    if (final) {
        ch->done = true;
        c->n_done++;
    }
    int ret = c->cancelled ? 1 : 0;
    /* the reader is woken by the waker thread after this engine step (a
     * call already queued is woken once for all its events); when the list
     * cannot grow, wake it here */
    bool direct = false;
    if (!c->wake_queued) {
        pthread_mutex_lock(&s->wmu);
        if (s->waker_running && (s->wl_n < s->wl_cap || grow_wl(s))) {
            s->wl[s->wl_n++] = c;
            c->wake_queued = true;
            c->refs++;
        } else {
            direct = true;
        }
        pthread_mutex_unlock(&s->wmu);
    }
    if (direct) pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (first) atomic_fetch_sub(&s->queued, 1);
    if (final) srv_call_unref(c);
    return ret;
}

/* ---------------------------------------------------------------- waker */

/* under s->wmu */
static bool grow_wl(srv *s) {
    int cap = s->wl_cap ? s->wl_cap * 2 : 256;
    srv_call **n = realloc(s->wl, sizeof *n * (size_t)cap);
    if (!n) return false;
    s->wl = n;
    s->wl_cap = cap;
    return true;
}

/* The engine thread, after a step: hand the queued calls to the waker. */
static void flush_wakes(srv *s) {
    pthread_mutex_lock(&s->wmu);
    if (s->wl_n > 0) {
        s->wl_go = true;
        pthread_cond_signal(&s->wcv);
    }
    pthread_mutex_unlock(&s->wmu);
}

static void *waker_main(void *arg) {
    srv *s = arg;
    srv_call **batch = NULL;
    int cap = 0;
    pthread_mutex_lock(&s->wmu);
    for (;;) {
        while (!s->wl_go && !s->wl_quit) pthread_cond_wait(&s->wcv, &s->wmu);
        bool quit = s->wl_quit;
        int n = s->wl_n;
        if (n > cap) {
            srv_call **nb = realloc(batch, sizeof *nb * (size_t)n);
            if (nb) batch = nb, cap = n;
            else n = cap; /* take what fits; the rest waits for the next round */
        }
        if (n > 0) memcpy(batch, s->wl, sizeof *batch * (size_t)n);
        memmove(s->wl, s->wl + n, sizeof *s->wl * (size_t)(s->wl_n - n));
        s->wl_n -= n;
        s->wl_go = s->wl_n > 0;
        pthread_mutex_unlock(&s->wmu);
        for (int i = 0; i < n; i++) {
            srv_call *c = batch[i];
            pthread_mutex_lock(&c->mu);
            c->wake_queued = false;
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
            srv_call_unref(c);
        }
        pthread_mutex_lock(&s->wmu);
        if (quit && s->wl_n == 0) break;
    }
    pthread_mutex_unlock(&s->wmu);
    free(batch);
    return NULL;
}

/* ---------------------------------------------------------------- calls */

srv_call *srv_call_new(srv *s) {
    srv_call *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->s = s;
    c->refs = 1;
    c->fd = -1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    return c;
}

void srv_call_ref(srv_call *c) {
    pthread_mutex_lock(&c->mu);
    c->refs++;
    pthread_mutex_unlock(&c->mu);
}

static void call_free(srv_call *c) {
    srv_call_unlist(c->s, c);
    for (int i = 0; i < c->n_choices; i++) {
        api_buf_free(&c->choices[i].text);
        api_logprobs_free(&c->choices[i].lp);
    }
    free(c->choices);
    if (c->prompt_ids)
        for (int i = 0; i < c->req.n_prompts; i++) free(c->prompt_ids[i]);
    free(c->prompt_ids);
    free(c->n_prompt_ids);
    if (c->echo)
        for (int i = 0; i < c->req.n_prompts; i++) free(c->echo[i]);
    free(c->echo);
    free(c->echo_len);
    api_request_free(&c->req);
    evq_free(&c->q);
    evq_free(&c->local);
    api_buf_free(&c->out);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

void srv_call_unref(srv_call *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    int left = --c->refs;
    pthread_mutex_unlock(&c->mu);
    if (left == 0) call_free(c);
}

void srv_call_cancel(srv_call *c) {
    uint64_t ids[64];
    int n_ids = 0;
    pthread_mutex_lock(&c->mu);
    c->cancelled = true;
    for (int i = 0; i < c->n_choices; i++) {
        if (c->choices[i].id && !c->choices[i].done) {
            if (n_ids == 64) {
                pthread_mutex_unlock(&c->mu);
                for (int k = 0; k < n_ids; k++) kiln_engine_cancel(c->s->eng, ids[k]);
                n_ids = 0;
                pthread_mutex_lock(&c->mu);
            }
            ids[n_ids++] = c->choices[i].id;
        }
    }
    pthread_mutex_unlock(&c->mu);
    /* a finished id is answered NOT_FOUND or ignored: both are fine */
    for (int k = 0; k < n_ids; k++) kiln_engine_cancel(c->s->eng, ids[k]);
    kiln_clear_error();
    srv_engine_wake(c->s);
}

void srv_call_take(srv_call *c) {
    evq_clear(&c->local);
    srv_evq t = c->q;
    c->q = c->local;
    c->local = t;
    c->pending = 0;
}

bool srv_call_list(srv *s, srv_call *c) {
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->state) != SRV_READY) {
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    c->prev = NULL;
    c->next = s->active;
    if (s->active) s->active->prev = c;
    s->active = c;
    c->listed = true;
    s->n_active++;
    pthread_mutex_unlock(&s->mu);
    return true;
}

void srv_set_state(srv *s, int state) {
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->state, state);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void srv_call_unlist(srv *s, srv_call *c) {
    pthread_mutex_lock(&s->mu);
    if (c->listed) {
        if (c->prev) c->prev->next = c->next;
        else s->active = c->next;
        if (c->next) c->next->prev = c->prev;
        c->listed = false;
        s->n_active--;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Cancel every active call (shutdown). */
void srv_cancel_all(srv *s) {
    for (;;) {
        /* take references so calls stay alive while cancelled outside the lock */
        srv_call *batch[64];
        int n = 0;
        pthread_mutex_lock(&s->mu);
        for (srv_call *c = s->active; c && n < 64; c = c->next) {
            pthread_mutex_lock(&c->mu);
            /* refs == 0: being freed by another thread (waiting on s->mu) */
            bool skip = c->cancelled || c->refs == 0;
            if (!skip) c->refs++;
            pthread_mutex_unlock(&c->mu);
            if (!skip) batch[n++] = c;
        }
        pthread_mutex_unlock(&s->mu);
        if (n == 0) return;
        for (int i = 0; i < n; i++) {
            srv_call_cancel(batch[i]);
            srv_call_unref(batch[i]);
        }
    }
}

/* ------------------------------------------------------------ the thread */

void srv_engine_wake(srv *s) {
    pthread_mutex_lock(&s->mu);
    s->wake = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* The engine thread owns the engine from creation to destruction: a GPU
 * backend binds its device context to the thread that creates the engine,
 * so creating, stepping and destroying all happen here. Other threads only
 * use the thread-safe calls (add_request, cancel, stats, metrics, the
 * tokenizer and chat template). */
static void *engine_main(void *arg) {
    srv *s = arg;
    /* tests: $KILN_SERVE_STEP_DELAY_MS slows every step down, standing in
     * for a big model so disconnects, queues and drains can be timed */
    const char *d = getenv("KILN_SERVE_STEP_DELAY_MS");
    long delay_ms = d && *d ? strtol(d, NULL, 10) : 0;
    kiln_engine *e = NULL;
    kiln_status cst = kiln_engine_create(s->ep, &e);
    pthread_mutex_lock(&s->mu);
    if (cst == KILN_OK) {
        s->eng = e;
    } else {
        snprintf(s->load_error, sizeof s->load_error, "%s", kiln_last_error());
        s->load_failed = true;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (cst != KILN_OK) return NULL;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->wake && !s->quit) pthread_cond_wait(&s->cv, &s->mu);
        s->wake = false;
        bool quit = s->quit;
        pthread_mutex_unlock(&s->mu);
        if (quit) break;
        while (kiln_engine_has_work(e)) {
            if (delay_ms > 0) {
                struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
                nanosleep(&ts, NULL);
            }
            kiln_status st = kiln_engine_step(e, NULL);
            flush_wakes(s);
            if (st == KILN_ERR_FATAL && !atomic_exchange(&s->fatal, true))
                fprintf(stderr, "kiln serve: the engine has failed: %s\n", kiln_last_error());
            else if (st != KILN_OK && st != KILN_ERR_FATAL)
                fprintf(stderr, "kiln serve: engine step: %s\n", kiln_last_error());
            pthread_mutex_lock(&s->mu);
            quit = s->quit;
            pthread_mutex_unlock(&s->mu);
            if (quit) break;
        }
        if (quit) break;
    }
    /* stepping is over; the engine lives until no connection thread can
     * touch it any more (srv_engine_destroy) */
    pthread_mutex_lock(&s->mu);
    while (!s->destroy) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    /* aborts what is left: every callback gets its final event and the last
     * references to calls are dropped */
    kiln_engine_destroy(e);
    flush_wakes(s);
    return NULL;
}

static void stop_waker(srv *s) {
    if (s->waker_running) {
        pthread_mutex_lock(&s->wmu);
        s->wl_quit = true;
        pthread_cond_signal(&s->wcv);
        pthread_mutex_unlock(&s->wmu);
        pthread_join(s->waker, NULL);
        pthread_mutex_lock(&s->wmu);
        s->waker_running = false;
        pthread_mutex_unlock(&s->wmu);
    }
    free(s->wl);
    s->wl = NULL;
    s->wl_cap = s->wl_n = 0;
    pthread_mutex_destroy(&s->wmu);
    pthread_cond_destroy(&s->wcv);
}

kiln_status srv_engine_start(srv *s) {
    s->quit = s->destroy = false;
    pthread_mutex_init(&s->wmu, NULL);
    pthread_cond_init(&s->wcv, NULL);
    s->wl_n = 0;
    s->wl_go = s->wl_quit = false;
    pthread_mutex_lock(&s->wmu);
    grow_wl(s); /* a first list; callbacks wake directly when it cannot grow */
    pthread_mutex_unlock(&s->wmu);
    s->waker_running = pthread_create(&s->waker, NULL, waker_main, s) == 0;
    if (pthread_create(&s->engine_thread, NULL, engine_main, s) != 0) {
        stop_waker(s);
        return KILN_ERR_INTERNAL;
    }
    s->engine_running = true;
    /* wait for the model to load */
    pthread_mutex_lock(&s->mu);
    while (!s->eng && !s->load_failed) pthread_cond_wait(&s->cv, &s->mu);
    bool ok = s->eng != NULL;
    pthread_mutex_unlock(&s->mu);
    return ok ? KILN_OK : KILN_ERR_INVALID_ARGUMENT;
}

void srv_engine_stop(srv *s) {
    if (!s->engine_running) return;
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void srv_engine_destroy(srv *s) {
    if (!s->engine_running) return;
    pthread_mutex_lock(&s->mu);
    s->quit = s->destroy = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->engine_thread, NULL);
    s->engine_running = false;
    s->eng = NULL;
    /* the engine's last callbacks are queued: the waker wakes them, then exits */
    stop_waker(s);
}
