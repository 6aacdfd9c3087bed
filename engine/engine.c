/*
 * engine.c -- the public engine: request intake, the continuous-batching
 * scheduler, sampling and stop rules, streaming events, stats.
 *
 * Scheduling (Colossal-Inference style): prefill and decode are separate
 * steps without padding. A prefill step runs when waiting requests reach
 * prefill_ratio x running ones, or nothing is decoding; it packs waiting
 * prompts up to max_num_seqs / max_num_batched_tokens and the free KV blocks.
 * Otherwise a decode step advances every running sequence by one token,
 * growing block tables on demand; when blocks run out the youngest running
 * sequence is preempted (blocks freed, recomputed later from its tokens) and
 * nothing is lost. Finished sequences leave at once.
 *
 * Ownership: the engine owns requests, executor, model files, tokenizer.
 * Thread-safety: add_request, cancel, get_stats, has_work and
 * set_speculation lock `mu`; everything else runs on the stepping thread.
 */
#include "engine_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- helpers */

static double now(void) { return kiln_now_sec(); }

static void req_free(kiln_engine *e, kiln_req *r) {
    if (!r) return;
    if (r->kv.blocks) kiln_kv_table_fini(&e->kv, &r->kv);
    if (r->dkv.blocks) kiln_kv_table_fini(&e->kv, &r->dkv);
    free(r->tokens);
    free(r->stop_ids);
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->stops);
    kiln_text_stream_free(&r->text);
    free(r);
}

static void emit(kiln_engine *e, kiln_req *r, int32_t token, float logprob, const kiln_logprob *top, int n_top,
                 const char *text, size_t text_len, kiln_finish_reason fin, kiln_status err, const char *msg) {
    if (!r->cb) return;
    kiln_stream_event ev = {
        .request_id = r->id, .token = token, .logprob = logprob, .top = top, .n_top = n_top,
        .text = text ? text : "", .text_len = text ? text_len : 0, .finish = fin, .error = err,
        .error_message = msg, .n_prompt_tokens = r->n_prompt, .n_generated_tokens = r->n_tokens - r->n_prompt,
    };
    if (r->cb(r->user, &ev) != 0 && fin == KILN_FINISH_NONE) r->cancel = true;
}

/* Finish a request: free its blocks, tell the client, count it. The caller
 * removes it from whichever list holds it. */
static void finish_req(kiln_engine *e, kiln_req *r, kiln_finish_reason fin, kiln_status err, const char *msg) {
    kiln_kv_release(&e->kv, &r->kv);
    if (r->dkv.blocks) kiln_kv_release(&e->kv, &r->dkv);
    r->state = KILN_REQ_DONE;
    r->finish = fin;
    const char *tail = NULL;
    size_t tail_len = 0;
    if (err == KILN_OK) kiln_text_stream_finish(&r->text, &tail, &tail_len);
    emit(e, r, -1, 0.0f, NULL, 0, tail, tail_len, fin, err, msg);
    double t = now();
    pthread_mutex_lock(&e->mu);
    e->stats.requests_finished[fin]++;
    kiln_metrics_observe_e2e(&e->metrics, t - r->t_arrival);
    pthread_mutex_unlock(&e->mu);
}

/* r leaves: the outstanding pipelined step drops its row (r is freed next) */
static void pipe_forget(kiln_engine *e, kiln_req *r) {
    for (int i = 0; i < e->pipe_n; i++)
        if (e->pipe_reqs[i] == r) e->pipe_reqs[i] = NULL;
}

static void running_remove(kiln_engine *e, int i) {
    e->running[i] = e->running[--e->n_running];
}

static void waiting_push_front(kiln_engine *e, kiln_req *r) {
    r->next = e->waiting_head;
    e->waiting_head = r;
    if (!e->waiting_tail) e->waiting_tail = r;
    e->n_waiting++;
}
static void waiting_push_back(kiln_engine *e, kiln_req *r) {
    r->next = NULL;
    if (e->waiting_tail)
        e->waiting_tail->next = r;
    else
        e->waiting_head = r;
    e->waiting_tail = r;
    e->n_waiting++;
}
static kiln_req *waiting_pop_front(kiln_engine *e) {
    kiln_req *r = e->waiting_head;
    if (!r) return NULL;
    e->waiting_head = r->next;
    if (!e->waiting_head) e->waiting_tail = NULL;
    r->next = NULL;
    e->n_waiting--;
    return r;
}

/* --------------------------------------------------------------- intake */

static kiln_status check_sampling(const kiln_engine *e, const kiln_sampling_params *s) {
    if (!(s->temperature >= 0.0f) || s->temperature > 100.0f)
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "temperature must be in [0, 100], got %g", s->temperature);
    if (!(s->top_p > 0.0f && s->top_p <= 1.0f))
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "top_p must be in (0, 1], got %g", s->top_p);
    if (s->top_k < -1) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "top_k must be -1, 0 or positive, got %d", s->top_k);
    if (!(s->min_p >= 0.0f && s->min_p <= 1.0f))
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "min_p must be in [0, 1], got %g", s->min_p);
    if (!(s->presence_penalty >= -2.0f && s->presence_penalty <= 2.0f))
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "presence_penalty must be in [-2, 2], got %g",
                         s->presence_penalty);
    if (!(s->frequency_penalty >= -2.0f && s->frequency_penalty <= 2.0f))
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "frequency_penalty must be in [-2, 2], got %g",
                         s->frequency_penalty);
    if (!(s->repetition_penalty > 0.0f && s->repetition_penalty <= 2.0f))
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "repetition_penalty must be in (0, 2], got %g",
                         s->repetition_penalty);
    if (s->no_repeat_ngram_size < 0 || s->no_repeat_ngram_size > 64)
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "no_repeat_ngram_size must be in [0, 64], got %d",
                         s->no_repeat_ngram_size);
    if (s->max_tokens == 0) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "max_tokens must be at least 1");
    if (s->min_tokens < 0) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "min_tokens must be >= 0");
    if (s->logprobs < 0 || s->logprobs > 20)
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "logprobs must be in [0, 20], got %d", s->logprobs);
    if (s->n_stop < 0 || s->n_stop > KILN_MAX_STOP_STRINGS || (s->n_stop && !s->stop))
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "at most %d stop strings are allowed", KILN_MAX_STOP_STRINGS);
    for (int i = 0; i < s->n_stop; i++) {
        if (!s->stop[i] || !*s->stop[i])
            return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "stop string %d is empty", i);
        if (strlen(s->stop[i]) > KILN_MAX_STOP_LEN)
            return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "stop string %d is longer than %d bytes", i, KILN_MAX_STOP_LEN);
    }
    if (s->n_stop_token_ids < 0 || s->n_stop_token_ids > 1024 || (s->n_stop_token_ids && !s->stop_token_ids))
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "at most 1024 stop token ids are allowed");
    for (int i = 0; i < s->n_stop_token_ids; i++)
        if (s->stop_token_ids[i] < 0 || s->stop_token_ids[i] >= e->vocab_size)
            return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "stop_token_ids[%d] = %d is outside the vocabulary [0, %d)", i,
                             s->stop_token_ids[i], e->vocab_size);
    return KILN_OK;
}

kiln_status kiln_engine_add_request(kiln_engine *e, const kiln_request *rq, uint64_t *id) {
    kiln_status st = KILN_OK;
    kiln_req *r = NULL;
    int32_t *text_ids = NULL;
    size_t n_text_ids = 0;
    KILN_CHECK(e && rq, KILN_ERR_INVALID_ARGUMENT, "null engine or request");
    KILN_CHECK(!atomic_load(&e->fatal), KILN_ERR_FATAL, "the engine has failed: %s", e->fatal_msg);
    const int32_t *ids = rq->prompt_ids;
    int n = rq->n_prompt_ids;
    if (!ids) {
        KILN_CHECK(rq->prompt, KILN_ERR_INVALID_ARGUMENT, "the request has neither prompt text nor prompt ids");
        KILN_CHECK(e->tok, KILN_ERR_INVALID_ARGUMENT,
                   "the model has no tokenizer: give prompt token ids instead of text");
        kiln_encode_options eo = {rq->add_special, true};
        KILN_TRY(kiln_tokenize(e->tok, rq->prompt, strlen(rq->prompt), &eo, &text_ids, &n_text_ids));
        KILN_CHECK(n_text_ids <= (size_t)INT32_MAX, KILN_ERR_LIMIT, "prompt too long");
        ids = text_ids;
        n = (int)n_text_ids;
    }
    KILN_CHECK(n >= 1, KILN_ERR_INVALID_ARGUMENT, "the prompt is empty");
    for (int i = 0; i < n; i++)
        KILN_CHECK(ids[i] >= 0 && ids[i] < e->vocab_size, KILN_ERR_INVALID_ARGUMENT,
                   "prompt token %d (id %d) is outside the vocabulary [0, %d)", i, ids[i], e->vocab_size);
    KILN_TRY(check_sampling(e, &rq->sampling));
    int max_new = rq->sampling.max_tokens;
    KILN_CHECK(n < e->max_model_len, KILN_ERR_LIMIT,
               "This model's maximum context length is %d tokens. However, your prompt has %d tokens, which leaves "
               "no room for generation.",
               e->max_model_len, n);
    if (max_new > 0) {
        KILN_CHECK((int64_t)n + max_new <= e->max_model_len, KILN_ERR_LIMIT,
                   "This model's maximum context length is %d tokens. However, you requested %lld tokens (%d in the "
                   "prompt, %d for the completion).",
                   e->max_model_len, (long long)n + max_new, n, max_new);
    } else {
        max_new = e->max_model_len - n;
    }
    /* a sequence must at least hold its prompt and first token in the pool */
    KILN_CHECK(kiln_kv_admission(&e->kv, 0, n + 1) != KILN_KV_NEVER_FITS, KILN_ERR_LIMIT,
               "the prompt (%d tokens) can never fit in the KV cache (%d blocks of %d tokens)", n, e->kv.num_blocks,
               e->kv.block_size);

    r = calloc(1, sizeof *r);
    KILN_CHECK_ALLOC(r);
    r->cap = n + max_new + 1;
    r->tokens = malloc(sizeof(int32_t) * (size_t)r->cap);
    KILN_CHECK_ALLOC(r->tokens);
    memcpy(r->tokens, ids, sizeof(int32_t) * (size_t)n);
    r->n_tokens = r->n_prompt = n;
    r->max_new = max_new;
    r->sp = rq->sampling;
    r->sp.stop = NULL;
    r->sp.stop_token_ids = NULL;
    if (rq->sampling.n_stop_token_ids) {
        r->stop_ids = malloc(sizeof(int32_t) * (size_t)rq->sampling.n_stop_token_ids);
        KILN_CHECK_ALLOC(r->stop_ids);
        memcpy(r->stop_ids, rq->sampling.stop_token_ids, sizeof(int32_t) * (size_t)rq->sampling.n_stop_token_ids);
        r->n_stop_ids = rq->sampling.n_stop_token_ids;
    }
    if (rq->sampling.n_stop) {
        r->stops = calloc((size_t)rq->sampling.n_stop, sizeof(char *));
        KILN_CHECK_ALLOC(r->stops);
        for (int i = 0; i < rq->sampling.n_stop; i++) {
            r->stops[i] = kiln_strdup(rq->sampling.stop[i]);
            r->n_stops++;
            KILN_CHECK_ALLOC(r->stops[i]);
        }
    }
    r->cb = rq->on_event;
    r->user = rq->user;
    KILN_TRY(kiln_kv_table_init(&e->kv, &r->kv));
    if (e->draft_exec) KILN_TRY(kiln_kv_table_init(&e->kv, &r->dkv));
    KILN_CHECK(rq->num_speculative_tokens >= -1, KILN_ERR_INVALID_ARGUMENT, "num_speculative_tokens must be >= -1");
    r->spec_k = rq->num_speculative_tokens < 0 ? e->spec_k : KILN_MIN(rq->num_speculative_tokens, e->spec_k);
    KILN_TRY(kiln_text_stream_init(&r->text, e->tok, r->tokens, n, rq->sampling.skip_special_tokens,
                                   (const char *const *)r->stops, r->n_stops));
    r->t_arrival = now();
    pthread_mutex_lock(&e->mu);
    if (e->n_incoming + e->n_waiting_shadow + e->n_running_shadow >= e->max_queued) {
        pthread_mutex_unlock(&e->mu);
        st = KILN_FAIL(KILN_ERR_BUSY, "the engine queue is full (%d requests)", e->max_queued);
        goto fail;
    }
    r->id = ++e->next_id;
    r->seed = rq->sampling.has_seed ? rq->sampling.seed : kiln_hash64(&r->id, sizeof r->id, e->seed);
    r->next = NULL;
    if (e->incoming_tail)
        e->incoming_tail->next = r;
    else
        e->incoming_head = r;
    e->incoming_tail = r;
    e->n_incoming++;
    if (id) *id = r->id;
    pthread_mutex_unlock(&e->mu);
    free(text_ids);
    return KILN_OK;
fail:
    if (r) req_free(e, r);
    free(text_ids);
    return st;
}

kiln_status kiln_engine_cancel(kiln_engine *e, uint64_t id) {
    if (!e) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "null engine");
    pthread_mutex_lock(&e->mu);
    bool known = id >= 1 && id <= e->next_id;
    if (known && e->n_cancel < KILN_MAX_PENDING_CANCELS) e->cancel_ids[e->n_cancel++] = id;
    pthread_mutex_unlock(&e->mu);
    if (!known) return KILN_FAIL(KILN_ERR_NOT_FOUND, "no request with id %llu", (unsigned long long)id);
    return KILN_OK;
}

bool kiln_engine_has_work(kiln_engine *e) {
    pthread_mutex_lock(&e->mu);
    bool w = e->n_incoming + e->n_waiting_shadow + e->n_running_shadow > 0;
    pthread_mutex_unlock(&e->mu);
    return w;
}

/* Move new requests into the waiting queue and apply cancellations. */
static void intake(kiln_engine *e) {
    uint64_t cancels[KILN_MAX_PENDING_CANCELS];
    int n_cancel;
    pthread_mutex_lock(&e->mu);
    kiln_req *in = e->incoming_head;
    e->incoming_head = e->incoming_tail = NULL;
    e->n_incoming = 0;
    n_cancel = e->n_cancel;
    memcpy(cancels, e->cancel_ids, sizeof(uint64_t) * (size_t)n_cancel);
    e->n_cancel = 0;
    pthread_mutex_unlock(&e->mu);
    while (in) {
        kiln_req *next = in->next;
        in->seq_no = ++e->arrivals;
        waiting_push_back(e, in);
        in = next;
    }
    for (int c = 0; c < n_cancel; c++) {
        for (int i = 0; i < e->n_running; i++)
            if (e->running[i]->id == cancels[c]) e->running[i]->cancel = true;
        for (kiln_req *r = e->waiting_head; r; r = r->next)
            if (r->id == cancels[c]) r->cancel = true;
    }
    /* drop cancelled requests */
    for (int i = 0; i < e->n_running;) {
        kiln_req *r = e->running[i];
        if (r->cancel) {
            running_remove(e, i);
            finish_req(e, r, KILN_FINISH_ABORT, KILN_OK, NULL);
            pipe_forget(e, r);
            req_free(e, r);
        } else {
            i++;
        }
    }
    kiln_req **pp = &e->waiting_head;
    e->waiting_tail = NULL;
    while (*pp) {
        kiln_req *r = *pp;
        if (r->cancel) {
            *pp = r->next;
            e->n_waiting--;
            finish_req(e, r, KILN_FINISH_ABORT, KILN_OK, NULL);
            req_free(e, r);
        } else {
            e->waiting_tail = r;
            pp = &r->next;
        }
    }
}

/* ------------------------------------------------------------- batching */

static void batch_reset(kiln_engine *e) {
    e->b_ntok = e->b_nseq = e->b_nout = 0;
    e->b_qstart[0] = 0;
    e->b_outstart[0] = 0;
    e->b_max_q = e->b_max_ctx = 0;
}

/* Append sequence r feeding tokens [from, to) of r->tokens followed by its
 * n_draft proposals; logits of the last fed token, or of every fed token
 * when it speculates. Its block table must already hold every fed token. */
static void batch_add(kiln_engine *e, kiln_req *r, int from, int to, const int32_t *draft, int n_draft) {
    int s = e->b_nseq++;
    for (int q = 0; q < n_draft; q++) r->tokens[to + q] = draft[q]; /* scratch: r->tokens has room */
    to += n_draft;
    for (int p = from; p < to; p++) {
        int t = e->b_ntok++;
        e->b_tokens[t] = r->tokens[p];
        e->b_pos[t] = p;
        e->b_slots[t] = kiln_kv_slot(&e->kv, &r->kv, p);
    }
    e->b_qstart[s + 1] = e->b_ntok;
    e->b_ctx[s] = to;
    memcpy(e->b_tables + (size_t)s * (size_t)e->kv.max_blocks_per_seq, r->kv.blocks,
           sizeof(int32_t) * (size_t)r->kv.n_blocks);
    for (int q = n_draft; q >= 0; q--) e->b_out[e->b_nout++] = e->b_ntok - 1 - q;
    e->b_outstart[s + 1] = e->b_nout;
    e->b_ndraft[s] = n_draft;
    if (n_draft) memcpy(e->b_draft + (size_t)s * (size_t)e->spec_k, draft, sizeof(int32_t) * (size_t)n_draft);
    e->b_reqs[s] = r;
    if (to - from > e->b_max_q) e->b_max_q = to - from;
    if (to > e->b_max_ctx) e->b_max_ctx = to;
}

/* Preempt the youngest running request: free its blocks and queue it for
 * recomputation at the front of the waiting queue. */
static void preempt_youngest(kiln_engine *e) {
    int y = 0;
    for (int i = 1; i < e->n_running; i++)
        if (e->running[i]->seq_no > e->running[y]->seq_no) y = i;
    kiln_req *r = e->running[y];
    running_remove(e, y);
    kiln_kv_release(&e->kv, &r->kv);
    if (r->dkv.blocks) kiln_kv_release(&e->kv, &r->dkv);
    r->d_computed = 0;
    r->n_computed = 0;
    r->state = KILN_REQ_WAITING;
    r->in_running = false;
    r->preempted++;
    waiting_push_front(e, r);
    pthread_mutex_lock(&e->mu);
    e->stats.num_preemptions_total++;
    pthread_mutex_unlock(&e->mu);
    KILN_DEBUG("preempted request %llu (%d tokens)", (unsigned long long)r->id, r->n_tokens);
}

static bool schedule_prefill(kiln_engine *e) {
    batch_reset(e);
    int budget = e->max_batched_tokens;
    while (e->waiting_head && e->n_running + e->b_nseq < e->max_num_seqs) {
        kiln_req *r = e->waiting_head;
        int need = r->n_tokens - r->n_computed;
        if (e->b_nseq > 0 && need > budget) break;
        if (need > e->max_tokens_plan) break; /* cannot happen: checked at intake */
        kiln_kv_fit fit = kiln_kv_admission(&e->kv, r->n_computed, r->n_tokens);
        if (fit == KILN_KV_NEVER_FITS) {
            waiting_pop_front(e);
            finish_req(e, r, KILN_FINISH_ABORT, KILN_ERR_LIMIT, "the request can never fit in the KV cache");
            req_free(e, r);
            continue;
        }
        if (fit == KILN_KV_FITS_LATER || !kiln_kv_grow(&e->kv, &r->kv, r->n_tokens)) break;
        waiting_pop_front(e);
        r->state = KILN_REQ_RUNNING;
        batch_add(e, r, r->n_computed, r->n_tokens, NULL, 0);
        budget -= need;
    }
    return e->b_nseq > 0;
}

/* How many tokens r may draft this step: the request's setting, room in
 * the context and in max_tokens (the step emits up to k + 1 tokens). */
static int spec_budget(const kiln_engine *e, const kiln_req *r) {
    int k = r->spec_k;
    k = KILN_MIN(k, e->max_model_len - r->n_tokens - 1);
    k = KILN_MIN(k, r->max_new - (r->n_tokens - r->n_prompt) - 1);
    return KILN_MAX(k, 0);
}

static kiln_status schedule_decode(kiln_engine *e, bool *have) {
    kiln_status st = KILN_OK;
    batch_reset(e);
    bool spec = e->spec_method != KILN_SPEC_NONE && atomic_load(&e->spec_on);
    int32_t *k = e->b_ndraft; /* per running index, reused below per batch slot */
    /* every running sequence needs room for one more token, speculating ones
     * for their drafts too (dropping the drafts before preempting anyone) */
    for (int i = 0; i < e->n_running;) {
        kiln_req *r = e->running[i];
        int kr = spec ? spec_budget(e, r) : 0;
        if (kr > 0 && !kiln_kv_grow(&e->kv, &r->kv, r->n_tokens + kr)) kr = 0;
        if (kr > 0 && e->draft_exec && !kiln_kv_grow(&e->kv, &r->dkv, r->n_tokens + kr - 1)) kr = 0;
        if (kr == 0) kiln_kv_truncate(&e->kv, &r->kv, r->n_tokens);
        if (kiln_kv_grow(&e->kv, &r->kv, r->n_tokens)) {
            k[i] = kr;
            i++;
            continue;
        }
        preempt_youngest(e);
        i = 0; /* the list changed: rescan */
    }
    int32_t *drafts = e->b_draft;
    int K = e->spec_k;
    bool drafting = false;
    for (int i = 0; i < e->n_running && spec && !drafting; i++) drafting = k[i] > 0;
    double t_draft = drafting ? now() : 0.0;
    if (spec && e->spec_method == KILN_SPEC_NGRAM) {
        for (int i = 0; i < e->n_running; i++) {
            kiln_req *r = e->running[i];
            if (k[i] > 0) k[i] = kiln_spec_ngram_propose(r->tokens, r->n_tokens, k[i], e->ngram_min, e->ngram_max,
                                                         drafts + (size_t)i * (size_t)K);
        }
    } else if (spec && e->spec_method == KILN_SPEC_DRAFT) {
        KILN_TRY(kiln_spec_draft_propose(e, e->running, k, e->n_running, drafts, K));
    }
    if (drafting) {
        double dt = now() - t_draft;
        pthread_mutex_lock(&e->mu);
        e->stats.draft_calls_total++;
        e->stats.draft_seconds_total += dt;
        pthread_mutex_unlock(&e->mu);
    }
    /* pack: keep the token budget of the plan */
    int32_t tmp[64];
    int tokens = 0;
    for (int i = 0; i < e->n_running; i++) {
        kiln_req *r = e->running[i];
        int kr = k[i];
        if (tokens + 1 + kr > e->max_tokens_plan) kr = 0;
        kiln_kv_truncate(&e->kv, &r->kv, r->n_tokens + kr);
        memcpy(tmp, drafts + (size_t)i * (size_t)K, sizeof(int32_t) * (size_t)kr);
        batch_add(e, r, r->n_tokens - 1, r->n_tokens, tmp, kr);
        tokens += 1 + kr;
    }
    *have = e->b_nseq > 0;
fail:
    return st;
}

/* ------------------------------------------------------------ sampling */

static bool is_eos(const kiln_engine *e, int32_t t) {
    for (int i = 0; i < e->n_eos; i++)
        if (e->eos[i] == t) return true;
    return false;
}

static void ban_tokens(kiln_engine *e, kiln_req *r, float *logits) {
    int n_gen = r->n_tokens - r->n_prompt;
    if (n_gen < r->sp.min_tokens) {
        for (int i = 0; i < e->n_eos; i++) logits[e->eos[i]] = -INFINITY;
        for (int i = 0; i < r->n_stop_ids; i++) logits[r->stop_ids[i]] = -INFINITY;
    }
    int ng = r->sp.no_repeat_ngram_size;
    if (ng > 0 && r->n_tokens >= ng) {
        /* ban t if tokens[-(ng-1):] + [t] occurred before (HF semantics) */
        const int32_t *tk = r->tokens;
        int n = r->n_tokens;
        for (int start = 0; start + ng <= n; start++) {
            bool match = true;
            for (int k = 0; k < ng - 1 && match; k++) match = tk[start + k] == tk[n - ng + 1 + k];
            if (match) logits[tk[start + ng - 1]] = -INFINITY;
        }
    }
}

/* Sample, append, stream and apply stop rules for each sequence of the
 * batch. Finished requests leave the running list. */
/* Append, stream and check one chosen token for r. Returns true when r
 * finished. */
static bool commit_token(kiln_engine *e, kiln_req *r, int32_t tok, float lp, int n_top, bool prefill, double t) {
    int gen = r->n_tokens - r->n_prompt;
    r->tokens[r->n_tokens++] = tok;
    pthread_mutex_lock(&e->mu);
    if (gen == 0) {
        r->t_first = t;
        kiln_metrics_observe_ttft(&e->metrics, t - r->t_arrival);
    } else if (t > r->t_last) {
        kiln_metrics_observe_itl(&e->metrics, t - r->t_last);
    }
    e->stats.generation_tokens_total++;
    if (prefill && r->preempted == 0 && gen == 0) e->stats.prompt_tokens_total += (uint64_t)r->n_prompt;
    pthread_mutex_unlock(&e->mu);
    r->t_last = t;

    /* stop rules (EOS and stop ids were banned before min_tokens) */
    int n_gen = gen + 1;
    kiln_finish_reason fin = KILN_FINISH_NONE;
    bool hide_token = false;
    if (!r->sp.ignore_eos && is_eos(e, tok)) fin = KILN_FINISH_STOP, hide_token = true;
    for (int i = 0; i < r->n_stop_ids && !fin; i++)
        if (r->stop_ids[i] == tok) fin = KILN_FINISH_STOP, hide_token = true;
    const char *text = NULL;
    size_t text_len = 0;
    bool stop_hit = false;
    if (!hide_token) kiln_text_stream_push(&r->text, tok, &text, &text_len, &stop_hit);
    if (stop_hit && !fin) fin = KILN_FINISH_STOP;
    if (!fin && (n_gen >= r->max_new || r->n_tokens >= e->max_model_len)) fin = KILN_FINISH_LENGTH;
    emit(e, r, tok, lp, e->top_tmp, n_top, text, text_len, KILN_FINISH_NONE, KILN_OK, NULL);
    if (r->cancel && !fin) fin = KILN_FINISH_ABORT;
    if (fin) r->finish = fin;
    return fin != KILN_FINISH_NONE;
}

/* Choose a token for r from host logits row `src` (sampler.h), verifying a
 * draft when given, then commit it. */
static bool emit_token(kiln_engine *e, kiln_req *r, const float *src, const int32_t *draft, bool *accepted,
                       bool prefill, double t) {
    int V = e->vocab_size;
    float *row = e->logits_tmp;
    memcpy(row, src, sizeof(float) * (size_t)V);
    kiln_sampler_apply_penalties(row, V, r->tokens, r->n_prompt, r->tokens + r->n_prompt, r->n_tokens - r->n_prompt,
                                 r->sp.repetition_penalty, r->sp.presence_penalty, r->sp.frequency_penalty,
                                 e->pen_scratch);
    ban_tokens(e, r, row);
    int gen = r->n_tokens - r->n_prompt;
    kiln_sample_row sr = {r->sp.temperature, r->sp.top_p, r->sp.top_k, r->sp.min_p, r->seed, (uint64_t)gen};
    int32_t tok;
    *accepted = false;
    if (draft)
        tok = kiln_sampler_verify(row, V, &sr, *draft, accepted, e->sample_work);
    else
        tok = kiln_sampler_sample(row, V, &sr, e->sample_work);
    float lp = 0.0f;
    int n_top = r->sp.logprobs;
    if (n_top > 0 || r->cb) lp = kiln_sampler_logprobs(row, V, tok, n_top, e->top_tmp);
    return commit_token(e, r, tok, lp, n_top, prefill, t);
}

/* Banned ids for r's next token if the sequence were tokens[0, n): EOS and
 * stop ids before min_tokens, and no_repeat_ngram completions. */
static int collect_bans(const kiln_engine *e, const kiln_req *r, int n, int32_t *out, int cap) {
    int k = 0;
    if (n - r->n_prompt < r->sp.min_tokens) {
        for (int i = 0; i < e->n_eos && k < cap; i++) out[k++] = e->eos[i];
        for (int i = 0; i < r->n_stop_ids && k < cap; i++) out[k++] = r->stop_ids[i];
    }
    int ng = r->sp.no_repeat_ngram_size;
    if (ng > 0 && n >= ng) {
        const int32_t *tk = r->tokens;
        for (int start = 0; start + ng <= n && k < cap; start++) {
            bool match = true;
            for (int q = 0; q < ng - 1 && match; q++) match = tk[start + q] == tk[n - ng + 1 + q];
            if (match) out[k++] = tk[start + ng - 1];
        }
    }
    return k;
}

/* Can this batch be sampled on the device? Every row must need nothing but
 * a token and its logprob, and speculating rows must be greedy. */
static bool device_sampling_ok(const kiln_engine *e) {
    if (!e->exec->vt->forward_sample || e->host_sampling) return false;
    for (int s = 0; s < e->b_nseq; s++) {
        const kiln_req *r = e->b_reqs[s];
        if (r->sp.logprobs > 0) return false;
        if (e->b_ndraft[s] > 0 && r->sp.temperature > 0) return false;
    }
    return true;
}

/* Per-row sampling requests for the device path. Row i of a speculating
 * sequence sees its drafts d_0..d_{i-1} as generated tokens (they sit in
 * r->tokens past n_tokens, written by batch_add). ahead: tokens an
 * outstanding pipelined step adds before these rows (1 there, else 0; such
 * rows have no penalties or bans, which would read them). */
static bool build_sample_reqs(kiln_engine *e, int ahead) {
    int nb = 0;
    for (int s = 0; s < e->b_nseq; s++) {
        kiln_req *r = e->b_reqs[s];
        for (int i = 0; i <= e->b_ndraft[s]; i++) {
            kiln_sample_req *q = &e->srows[e->b_outstart[s] + i];
            int n = r->n_tokens + ahead + i, gen = n - r->n_prompt;
            q->p = (kiln_sample_row){r->sp.temperature, r->sp.top_p, r->sp.top_k, r->sp.min_p, r->seed, (uint64_t)gen};
            q->repetition = r->sp.repetition_penalty;
            q->presence = r->sp.presence_penalty;
            q->frequency = r->sp.frequency_penalty;
            bool pen = q->repetition != 1.0f || q->presence != 0.0f || q->frequency != 0.0f;
            q->prompt = r->tokens;
            q->n_prompt = pen ? r->n_prompt : 0;
            q->output = r->tokens + r->n_prompt;
            q->n_output = pen ? gen : 0;
            int cap = e->ban_cap - nb;
            int k = collect_bans(e, r, n, e->ban_buf + nb, cap);
            if (k == cap) return false; /* too many bans: the host path applies them all */
            q->banned = e->ban_buf + nb;
            q->n_banned = k;
            nb += k;
        }
    }
    return true;
}

/* Finished requests leave the running list (and an outstanding pipelined
 * step drops their rows). */
static void retire_finished(kiln_engine *e) {
    for (int i = 0; i < e->n_running;) {
        kiln_req *r = e->running[i];
        if (r->finish != KILN_FINISH_NONE) {
            running_remove(e, i);
            finish_req(e, r, r->finish, KILN_OK, NULL);
            pipe_forget(e, r);
            req_free(e, r);
        } else {
            i++;
        }
    }
}

/* Sample, verify drafts, append, stream and apply stop rules for each
 * sequence of the batch. Finished requests leave the running list. */
static void process_outputs(kiln_engine *e, const float *logits, const int32_t *dev_tokens, const float *dev_lps,
                            bool prefill) {
    double t = now();
    uint64_t drafted = 0, accepted_total = 0, spec_seqs = 0;
    for (int s = 0; s < e->b_nseq; s++) {
        kiln_req *r = e->b_reqs[s];
        int n_before = r->n_tokens, nd = e->b_ndraft[s], acc = 0;
        const int32_t *drafts = e->b_draft + (size_t)s * (size_t)e->spec_k;
        for (int i = 0; i <= nd; i++) {
            int row = e->b_outstart[s] + i;
            bool ok = false, done;
            if (dev_tokens) { /* chosen on the device; drafts here are greedy */
                int32_t tok = dev_tokens[row];
                ok = i < nd && tok == drafts[i];
                done = commit_token(e, r, tok, dev_lps ? dev_lps[row] : 0.0f, 0, prefill, t);
            } else {
                const float *src = logits + (size_t)row * (size_t)e->logits_stride;
                done = emit_token(e, r, src, i < nd ? &drafts[i] : NULL, &ok, prefill, t);
            }
            if (done || !ok) break;
            acc++;
        }
        /* K/V are valid for the fed tokens that were kept: the last token
         * before the step and the accepted drafts */
        r->n_computed = KILN_MIN(n_before + acc, r->n_tokens);
        if (nd) {
            kiln_kv_truncate(&e->kv, &r->kv, r->n_tokens);
            if (r->dkv.blocks) {
                r->d_computed = KILN_MIN(r->d_computed, r->n_tokens - 1);
                kiln_kv_truncate(&e->kv, &r->dkv, r->n_tokens);
            }
            drafted += (uint64_t)nd;
            accepted_total += (uint64_t)acc;
            spec_seqs++;
        }
    }
    if (spec_seqs) {
        pthread_mutex_lock(&e->mu);
        e->stats.spec_draft_tokens_total += drafted;
        e->stats.spec_accepted_tokens_total += accepted_total;
        e->stats.spec_steps_total += spec_seqs;
        pthread_mutex_unlock(&e->mu);
    }
    /* move prefilled sequences into the running list, retire finished ones */
    for (int s = 0; s < e->b_nseq; s++) {
        kiln_req *r = e->b_reqs[s];
        if (prefill && r->state == KILN_REQ_RUNNING && !r->in_running) {
            e->running[e->n_running++] = r;
            r->in_running = true;
        }
    }
    retire_finished(e);
}

/* ------------------------------------------------------ pipelined decode */

/* Where the executor overlaps (the GPU), a plain decode step is launched and
 * collected by the next kiln_engine_step call, after that call has launched
 * the step behind it: step N + 1's input tokens are fed on the device from
 * step N's sampled ones (kiln_exec_vt.launch_sample with feed), so the host's
 * work between steps -- collecting, committing and streaming step N's tokens,
 * stop rules, scheduling and packing step N + 1 -- runs while the GPU
 * computes. A row whose request step N finishes (EOS, a stop id or string, a
 * cancel) computes one wasted token in step N + 1, which is dropped; requests
 * that step N surely finishes (max_tokens, the context length) are left out
 * of step N + 1. Anything that needs the host between steps (arrivals and
 * prefill, speculation, penalties, bans, logprobs, host sampling, a full KV
 * pool) collects first and falls back to the synchronous path. */

/* Can r's row of the next step be launched before r's current token is
 * known? (device sampling with nothing that depends on the token history) */
static bool pipe_row_ok(const kiln_req *r, int n_next) {
    const kiln_sampling_params *sp = &r->sp;
    if (r->cancel || sp->logprobs > 0 || sp->repetition_penalty != 1.0f || sp->presence_penalty != 0.0f ||
        sp->frequency_penalty != 0.0f || sp->no_repeat_ngram_size > 0)
        return false;
    /* EOS and stop ids are banned while the sequence is shorter than min_tokens */
    return n_next - r->n_prompt >= sp->min_tokens;
}

/* Does the token r gets from the outstanding step surely finish it? */
static bool pipe_surely_done(const kiln_engine *e, const kiln_req *r) {
    return r->n_tokens + 1 - r->n_prompt >= r->max_new || r->n_tokens + 1 >= e->max_model_len;
}

static bool pipe_wanted(kiln_engine *e) {
    if (!e->pipe_on || e->host_sampling || e->n_waiting > 0) return false;
    if (e->spec_method != KILN_SPEC_NONE && atomic_load(&e->spec_on)) return false;
    pthread_mutex_lock(&e->mu);
    bool quiet = e->n_incoming == 0 && e->n_cancel == 0;
    pthread_mutex_unlock(&e->mu);
    return quiet;
}

/* Build the step behind the outstanding one in e->b_*: every row that
 * continues, fed from its row there. False (nothing built) when a row
 * cannot be launched blind or the pool has no room. */
static bool pipe_build_next(kiln_engine *e) {
    batch_reset(e);
    /* every running request is a row of the outstanding step (nothing joins
     * while one is outstanding); otherwise one would never be scheduled */
    int rows = 0;
    for (int i = 0; i < e->pipe_n; i++) rows += e->pipe_reqs[i] != NULL;
    if (rows != e->n_running) return false;
    for (int i = 0; i < e->pipe_n; i++) {
        kiln_req *r = e->pipe_reqs[i];
        if (!r || pipe_surely_done(e, r)) continue;
        if (!pipe_row_ok(r, r->n_tokens + 1)) return false;
    }
    for (int i = 0; i < e->pipe_n; i++) {
        kiln_req *r = e->pipe_reqs[i];
        if (!r || pipe_surely_done(e, r)) continue;
        const int p = r->n_tokens; /* the position of the token the outstanding step chooses */
        if (!kiln_kv_grow(&e->kv, &r->kv, p + 1)) return false; /* no room: the synchronous path preempts */
        e->pipe_feed[e->b_nseq] = i;
        e->pipe_next[e->b_nseq] = r;
        r->tokens[p] = 0; /* scratch (the token is fed on the device); the commit overwrites it */
        batch_add(e, r, p, p + 1, NULL, 0);
    }
    return e->b_nseq > 0;
}

static kiln_batch current_batch(const kiln_engine *e) {
    return (kiln_batch){
        .n_tokens = e->b_ntok, .n_seqs = e->b_nseq, .n_out = e->b_nout, .tokens = e->b_tokens,
        .positions = e->b_pos, .qstart = e->b_qstart, .ctx_len = e->b_ctx, .block_tables = e->b_tables,
        .max_blocks = e->kv.max_blocks_per_seq, .slots = e->b_slots, .out_rows = e->b_out,
        .max_q_len = e->b_max_q, .max_ctx_len = e->b_max_ctx,
    };
}

static void count_decode_step(kiln_engine *e, double seconds) {
    pthread_mutex_lock(&e->mu);
    e->stats.steps_total++;
    e->stats.decode_steps_total++;
    e->stats.decode_forward_seconds_total += seconds;
    pthread_mutex_unlock(&e->mu);
}

/* One call with a step outstanding: launch the next one when it can go
 * blind, then collect the outstanding step and commit its tokens. */
static kiln_status pipe_step(kiln_engine *e) {
    kiln_status st = KILN_OK;
    double t0 = now();
    int next_n = 0;
    if (pipe_wanted(e) && pipe_build_next(e)) {
        kiln_batch b = current_batch(e);
        build_sample_reqs(e, 1); /* no bans in blind rows: cannot run out of room */
        KILN_TRY(e->exec->vt->launch_sample(e->exec, &b, e->srows, e->pipe_feed));
        next_n = e->b_nseq;
        pthread_mutex_lock(&e->mu);
        e->stats.decode_pipelined_steps_total++;
        pthread_mutex_unlock(&e->mu);
    }
    KILN_TRY(e->exec->vt->collect_sample(e->exec, e->dev_tokens, e->dev_lps));
    count_decode_step(e, now() - t0);
    /* commit the outstanding step's tokens (rows of requests that left are NULL) */
    const int n = e->pipe_n;
    kiln_req **rows = e->pipe_reqs;
    e->pipe_reqs = e->pipe_next; /* the launched step's rows, forgotten below as requests leave */
    e->pipe_next = rows;
    e->pipe_n = next_n;
    double t = now();
    for (int i = 0; i < n; i++) {
        kiln_req *r = rows[i];
        if (!r) continue;
        int n_before = r->n_tokens;
        commit_token(e, r, e->dev_tokens[i], e->dev_lps[i], 0, false, t);
        r->n_computed = KILN_MIN(n_before, r->n_tokens);
    }
    retire_finished(e);
fail:
    return st;
}

/* ----------------------------------------------------------------- step */

static void fail_all(kiln_engine *e, kiln_status err, const char *msg) {
    e->pipe_n = 0; /* an outstanding step's tokens are never collected */
    while (e->n_running) {
        kiln_req *r = e->running[e->n_running - 1];
        e->n_running--;
        finish_req(e, r, KILN_FINISH_ABORT, err, msg);
        req_free(e, r);
    }
    kiln_req *r;
    while ((r = waiting_pop_front(e))) {
        finish_req(e, r, KILN_FINISH_ABORT, err, msg);
        req_free(e, r);
    }
}

/* Abort every queued and running request (engine teardown). */
void kiln_engine_abort_all(kiln_engine *e) {
    intake(e);
    fail_all(e, KILN_OK, NULL);
}

static void publish_counts(kiln_engine *e) {
    pthread_mutex_lock(&e->mu);
    e->n_waiting_shadow = e->n_waiting;
    e->n_running_shadow = e->n_running;
    e->stats.num_running = e->n_running;
    e->stats.num_waiting = e->n_waiting + e->n_incoming;
    e->stats.num_free_kv_blocks = e->kv.n_free;
    e->stats.kv_cache_usage = e->kv.num_blocks ? 1.0 - (double)e->kv.n_free / e->kv.num_blocks : 0.0;
    pthread_mutex_unlock(&e->mu);
}

/* The engine is dead (e->fatal_msg says why): every request ends. */
static kiln_status engine_dead(kiln_engine *e, int *n_unfinished) {
    fail_all(e, KILN_ERR_FATAL, e->fatal_msg);
    publish_counts(e);
    if (n_unfinished) *n_unfinished = 0;
    return KILN_FAIL(KILN_ERR_FATAL, "the engine has failed: %s", e->fatal_msg);
}

/* A forward failed: the engine dies with the executor's error. */
static void forward_failed(kiln_engine *e) {
    snprintf(e->fatal_msg, sizeof e->fatal_msg, "%s", kiln_last_error());
    atomic_store(&e->fatal, true);
    KILN_ERROR("engine step failed, the engine is now dead: %s", e->fatal_msg);
}

static kiln_status step_done(kiln_engine *e, int *n_unfinished) {
    publish_counts(e);
    if (n_unfinished) *n_unfinished = e->n_running + e->n_waiting + e->n_incoming;
    return KILN_OK;
}

kiln_status kiln_engine_step(kiln_engine *e, int *n_unfinished) {
    kiln_status st = KILN_OK;
    if (!e) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "null engine");
    if (atomic_load(&e->fatal)) {
        intake(e);
        return engine_dead(e, n_unfinished);
    }
    intake(e);
    if (e->pipe_n > 0) {
        if (pipe_step(e)) {
            forward_failed(e);
            return engine_dead(e, n_unfinished);
        }
        return step_done(e, n_unfinished);
    }
    bool prefill = false, have = false;
    bool want_prefill = e->n_waiting > 0 && e->n_running < e->max_num_seqs &&
                        (e->n_running == 0 || (double)e->n_waiting >= e->prefill_ratio * (double)e->n_running);
    if (want_prefill) have = prefill = schedule_prefill(e);
    if (!have && e->n_running > 0) {
        st = schedule_decode(e, &have);
        if (st) {
            snprintf(e->fatal_msg, sizeof e->fatal_msg, "draft model: %s", kiln_last_error());
            atomic_store(&e->fatal, true);
            return engine_dead(e, n_unfinished);
        }
    }
    if (!have && e->n_waiting > 0 && e->n_running == 0) {
        /* nothing runs and the head of the queue does not fit now: it never will */
        kiln_req *r = waiting_pop_front(e);
        finish_req(e, r, KILN_FINISH_ABORT, KILN_ERR_LIMIT, "the request does not fit in the KV cache");
        req_free(e, r);
    }
    if (have) {
        kiln_batch b = current_batch(e);
        const float *logits = NULL;
        bool dev = device_sampling_ok(e) && build_sample_reqs(e, 0);
        bool verify = false;
        for (int s = 0; s < e->b_nseq && !prefill && !verify; s++) verify = e->b_ndraft[s] > 0;
        double t_fwd = now();
        bool blind = dev && !prefill && !verify && pipe_wanted(e);
        for (int s = 0; s < e->b_nseq && blind; s++) blind = pipe_row_ok(e->b_reqs[s], e->b_reqs[s]->n_tokens);
        if (blind) {
            /* launch; the next call launches the step behind it, then collects this one */
            st = e->exec->vt->launch_sample(e->exec, &b, e->srows, NULL);
            if (!st) {
                for (int s = 0; s < e->b_nseq; s++) e->pipe_reqs[s] = e->b_reqs[s];
                e->pipe_n = e->b_nseq;
                return step_done(e, n_unfinished);
            }
        } else if (dev) {
            st = e->exec->vt->forward_sample(e->exec, &b, e->srows, e->dev_tokens, e->dev_lps);
        } else {
            st = e->exec->vt->forward(e->exec, &b, &logits);
        }
        t_fwd = now() - t_fwd;
        if (st) {
            forward_failed(e);
            /* requests of this batch are in the running list or were popped
             * from waiting: put prefills back so fail_all sees them */
            for (int s = 0; s < e->b_nseq; s++)
                if (!e->b_reqs[s]->in_running) waiting_push_back(e, e->b_reqs[s]);
            return engine_dead(e, n_unfinished);
        }
        process_outputs(e, logits, dev ? e->dev_tokens : NULL, dev ? e->dev_lps : NULL, prefill);
        pthread_mutex_lock(&e->mu);
        e->stats.steps_total++;
        if (prefill) {
            e->stats.prefill_steps_total++;
            e->stats.prefill_forward_seconds_total += t_fwd;
        } else if (verify) {
            e->stats.verify_steps_total++;
            e->stats.verify_forward_seconds_total += t_fwd;
        } else {
            e->stats.decode_steps_total++;
            e->stats.decode_forward_seconds_total += t_fwd;
        }
        pthread_mutex_unlock(&e->mu);
    }
    return step_done(e, n_unfinished);
}

/* -------------------------------------------------------------- generate */

typedef struct gen_ctx {
    kiln_result *res;
    kiln_buf text;
    kiln_vec ids;
    kiln_stream_fn user_cb;
    void *user;
    bool done;
} gen_ctx;

static int gen_cb(void *u, const kiln_stream_event *ev) {
    gen_ctx *g = u;
    if (ev->token >= 0) kiln_vec_push(&g->ids, &ev->token);
    if (ev->text_len) kiln_buf_append(&g->text, ev->text, ev->text_len);
    int ret = g->user_cb ? g->user_cb(g->user, ev) : 0;
    if (ev->finish != KILN_FINISH_NONE) {
        g->done = true;
        g->res->finish = ev->finish;
        g->res->error = ev->error;
        g->res->n_prompt_tokens = ev->n_prompt_tokens;
    }
    return ret;
}

kiln_status kiln_engine_generate(kiln_engine *e, const kiln_request *reqs, int n, kiln_result *results) {
    kiln_status st = KILN_OK;
    gen_ctx *g = NULL;
    KILN_CHECK(e && (n == 0 || (reqs && results)) && n >= 0, KILN_ERR_INVALID_ARGUMENT, "bad arguments");
    g = calloc((size_t)(n > 0 ? n : 1), sizeof *g);
    KILN_CHECK_ALLOC(g);
    for (int i = 0; i < n; i++) {
        memset(&results[i], 0, sizeof results[i]);
        g[i].res = &results[i];
        g[i].ids = (kiln_vec)KILN_VEC_INIT(int32_t);
        g[i].user_cb = reqs[i].on_event;
        g[i].user = reqs[i].user;
        kiln_request r = reqs[i];
        r.on_event = gen_cb;
        r.user = &g[i];
        if (kiln_engine_add_request(e, &r, NULL) != KILN_OK) {
            results[i].error = kiln_last_error_code();
            results[i].finish = KILN_FINISH_ABORT;
            g[i].done = true;
            KILN_WARN("request %d rejected: %s", i, kiln_last_error());
        }
    }
    for (;;) {
        bool all = true;
        for (int i = 0; i < n; i++) all &= g[i].done;
        if (all) break;
        st = kiln_engine_step(e, NULL);
        if (st == KILN_ERR_FATAL) break;
    }
    for (int i = 0; i < n; i++) {
        results[i].ids = g[i].ids.data;
        results[i].n_ids = (int)g[i].ids.len;
        g[i].ids.data = NULL;
        results[i].text = e->tok ? kiln_buf_steal(&g[i].text) : NULL;
        kiln_buf_free(&g[i].text);
    }
fail:
    free(g);
    return st;
}

void kiln_result_free(kiln_result *r) {
    if (!r) return;
    free(r->ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------ accessors */

void kiln_engine_get_stats(kiln_engine *e, kiln_stats *s) {
    pthread_mutex_lock(&e->mu);
    *s = e->stats;
    s->num_kv_blocks = e->kv.num_blocks;
    s->block_size = e->kv.block_size;
    s->fatal = atomic_load(&e->fatal);
    pthread_mutex_unlock(&e->mu);
}

const kiln_tokenizer *kiln_engine_tokenizer(const kiln_engine *e) { return e ? e->tok : NULL; }
const kiln_chat_template *kiln_engine_chat_template(const kiln_engine *e) { return e ? e->tmpl : NULL; }

void kiln_engine_model_info(const kiln_engine *e, kiln_model_info *info) {
    memset(info, 0, sizeof *info);
    info->architecture = e->mf.cfg.architecture;
    info->model_path = e->mf.dir ? e->mf.dir : e->params.model;
    info->vocab_size = e->vocab_size;
    info->max_model_len = e->max_model_len;
    info->hidden_size = e->mf.cfg.hidden_size;
    info->num_layers = e->mf.cfg.num_layers;
    info->device = e->exec->device;
    info->dtype = kiln_dtype_name(e->exec->act_dtype);
    info->kv_cache_dtype = kiln_dtype_name(e->exec->kv_dtype);
    info->kv_cache_scales = e->kv_scales_src;
    info->kv_cache_tokens = e->kv.num_blocks * e->kv.block_size;
}

kiln_status kiln_engine_set_speculation(kiln_engine *e, bool enabled) {
    if (!e) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "null engine");
    if (e->spec_method == KILN_SPEC_NONE)
        return KILN_FAIL(KILN_ERR_UNSUPPORTED, "this engine was created without speculative decoding");
    atomic_store(&e->spec_on, enabled);
    return KILN_OK;
}

const char *const kiln_spec_method_names[KILN_SPEC_COUNT] = {"none", "ngram", "draft", "glide"};

void kiln_engine_speculation_info(kiln_engine *e, kiln_speculation_info *info) {
    memset(info, 0, sizeof *info);
    info->method = kiln_spec_method_names[KILN_SPEC_NONE];
    if (!e) return;
    info->method = kiln_spec_method_names[e->spec_method];
    info->num_speculative_tokens = e->spec_method == KILN_SPEC_NONE ? 0 : e->spec_k;
    info->enabled = e->spec_method != KILN_SPEC_NONE && atomic_load(&e->spec_on);
}
