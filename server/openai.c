/*
 * openai.c -- the generation endpoints (/v1/completions, /v1/chat/completions
 * and their aliases) and /tokenize, /detokenize. A generation request is
 * decoded and validated (api_decode.c), its prompts tokenized or its chat
 * rendered with the model's template, checked against the context length
 * and the KV cache, admitted against --max-queued-requests, and queued as
 * n x prompts engine requests. Streaming responses are produced by a
 * libmicrohttpd content reader that drains the call's token channel (SSE
 * chunks, a comment heartbeat while nothing arrives, disconnect checks);
 * non-streaming ones are built when every choice has finished, with the
 * client socket checked for a disconnect while waiting.
 * Ownership: the call (srv_internal.h) is handed to the connection context
 * (*call_out), which drops its reference when the request completes.
 * Thread-safety: runs on connection threads.
 */
#include "srv_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* --------------------------------------------------------------- helpers */

/* A call refused before its engine requests were queued: nothing to wait for. */
static void mark_all_done(srv_call *c) {
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n_choices; i++) c->choices[i].done = true;
    c->n_done = c->n_choices;
    pthread_mutex_unlock(&c->mu);
}

static void make_id(char *out, size_t cap, const char *prefix) {
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        static atomic_ullong ctr;
        unsigned long long v = atomic_fetch_add(&ctr, 1) ^ (unsigned long long)time(NULL) * 2654435761ull;
        memcpy(r, &v, sizeof v);
        memcpy(r + 8, &v, sizeof v);
    }
    size_t k = (size_t)snprintf(out, cap, "%s", prefix);
    for (size_t i = 0; i < sizeof r && k + 2 < cap; i++) k += (size_t)snprintf(out + k, cap - k, "%02x", r[i]);
}

static char *name_token(void *user, int32_t id, size_t *len) {
    srv *s = user;
    if (!s->tok) return NULL;
    char *t = NULL;
    size_t n = 0;
    if (kiln_detokenize(s->tok, &id, 1, false, &t, &n) != KILN_OK) {
        kiln_clear_error();
        return NULL;
    }
    char *copy = malloc(n + 1);
    if (copy) {
        memcpy(copy, t, n);
        copy[n] = 0;
        *len = n;
    }
    kiln_free(t);
    return copy;
}

/* "1000000010" or "more than 1e308" (numbers that overflowed when parsed). */
static void fmt_count(char *buf, size_t cap, double v) {
    if (v >= 1e308) snprintf(buf, cap, "more than 1e308");
    else if (v < 9.2e18) snprintf(buf, cap, "%lld", (long long)v);
    else snprintf(buf, cap, "%.17g", v);
}

static int status_for(kiln_status st) {
    switch (st) {
    case KILN_ERR_INVALID_ARGUMENT:
    case KILN_ERR_LIMIT:
    case KILN_ERR_TEMPLATE:
    case KILN_ERR_NOT_FOUND:
    case KILN_ERR_FORMAT: return 400;
    case KILN_ERR_BUSY:
    case KILN_ERR_UNAVAILABLE: return 503;
    case KILN_ERR_UNSUPPORTED: return 400;
    default: return 500;
    }
}

/* Tokenize text for a request; *ids returned malloc'd. */
static bool tokenize_text(srv *s, const char *text, size_t len, bool add_special, const char *what, int32_t **ids,
                          int *n_ids, api_error *err) {
    if (!s->tok)
        return api_fail(err, 400, what, NULL, "This model has no tokenizer: send the prompt as token ids");
    /* no token covers more than 4 x the longest vocabulary entry in input
     * bytes (normalization included), so a prompt this long cannot fit:
     * reject it without tokenizing all of it */
    if (s->max_token_bytes > 0) {
        double at_least = (double)len / (4.0 * (double)s->max_token_bytes);
        if (at_least >= s->max_model_len)
            return api_fail(err, 400, what, "context_length_exceeded",
                            "This model's maximum context length is %d tokens. However, your %s has at least %.0f "
                            "tokens (%zu bytes). Please reduce the length of the %s.",
                            s->max_model_len, what, at_least, len, what);
    }
    kiln_encode_options eo = {add_special, true};
    int32_t *t = NULL;
    size_t n = 0;
    if (kiln_tokenize(s->tok, text, len, &eo, &t, &n) != KILN_OK) {
        api_fail(err, status_for(kiln_last_error_code()), what, NULL, "Cannot tokenize the %s: %s", what,
                 kiln_last_error());
        return false;
    }
    if (n > (size_t)INT_MAX / 2) {
        kiln_free(t);
        return api_fail(err, 400, what, "context_length_exceeded",
                        "This model's maximum context length is %d tokens. However, your %s has %zu tokens.",
                        s->max_model_len, what, n);
    }
    *ids = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!*ids) {
        kiln_free(t);
        return api_fail(err, 500, NULL, NULL, "out of memory");
    }
    if (n) memcpy(*ids, t, sizeof(int32_t) * n);
    kiln_free(t);
    *n_ids = (int)n;
    return true;
}

static bool render_chat(srv *s, const char *messages_json, bool add_gen, const char *extra, char **text,
                        api_error *err) {
    if (!s->tmpl)
        return api_fail(err, 400, "messages", NULL,
                        "This model has no chat template; use /v1/completions with a prompt instead");
    char *out = NULL;
    if (kiln_chat_render(s->tmpl, messages_json, add_gen, extra, &out) != KILN_OK) {
        kiln_status st = kiln_last_error_code();
        api_fail(err, status_for(st) == 503 ? 500 : status_for(st), "messages", NULL, "Chat template error: %s",
                 kiln_last_error());
        return false;
    }
    *text = out;
    return true;
}

/* ----------------------------------------------------- event processing */

static void emit_error_chunk(srv_call *c, int status, const char *msg) {
    if (c->error_sent) return;
    c->error_sent = true;
    api_error e;
    api_fail(&e, status, NULL, status >= 500 ? "engine_error" : NULL, "%s", msg);
    char *j = api_error_json(&e);
    if (j) {
        api_buf_puts(&c->out, "data: ");
        api_buf_puts(&c->out, j);
        api_buf_puts(&c->out, "\n\n");
        free(j);
    }
}

/* Consume c->local (connection thread). */
static void process_events(srv_call *c, bool stream) {
    srv *s = c->s;
    srv_evq *q = &c->local;
    api_token_namer namer = {name_token, s};
    api_kind kind = c->req.kind;
    for (size_t i = 0; i < q->n; i++) {
        const srv_ev *ev = &q->ev[i];
        srv_choice *ch = &c->choices[ev->choice];
        bool final = ev->finish != KILN_FINISH_NONE;
        api_buf delta = {0};
        api_utf8_feed(&ch->utf8, q->text.data ? q->text.data + ev->text_off : "", ev->text_len, final, &delta);
        json_t *lpj = NULL;
        if (c->req.logprobs && ev->token >= 0) {
            int n_top = ev->n_top < c->req.top_logprobs ? ev->n_top : c->req.top_logprobs;
            api_token t = {ev->token, ev->logprob, q->top + ev->top_off, n_top};
            size_t base = c->echo ? c->echo_len[ch->prompt] : 0;
            api_logprobs_add(&ch->lp, kind, &t, base + ch->text_bytes, &namer);
            if (stream) lpj = api_logprobs_take(&ch->lp, kind);
        }
        ch->text_bytes += delta.len;
        if (!stream && delta.len) api_buf_put(&ch->text, delta.data, delta.len);
        if (final) {
            ch->finish = ev->finish;
            ch->error = ev->error;
            ch->n_gen = ev->n_gen;
            c->usage_completion += ev->n_gen;
        }
        if (stream) {
            if (final && ev->error != KILN_OK) {
                char msg[640];
                pthread_mutex_lock(&c->mu);
                snprintf(msg, sizeof msg, "The request failed: %s", c->error_msg[0] ? c->error_msg : "engine error");
                pthread_mutex_unlock(&c->mu);
                emit_error_chunk(c, ev->error == KILN_ERR_LIMIT ? 400 : 500, msg);
                json_decref(lpj);
            } else if (delta.len || lpj || final || !s->tok) {
                /* without a tokenizer there is no text: one chunk per token
                 * still shows progress (and lets clients time tokens) */
                json_t *chunk = api_chunk(&c->ri, ch->index, delta.data, delta.len, false, lpj, ev->finish);
                api_sse_json(&c->out, chunk);
                json_decref(chunk);
            }
        }
        api_buf_free(&delta);
    }
    q->n = 0;
}

/* --------------------------------------------------------------- streams */

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    srv_call *c = cls;
    srv *s = c->s;
    for (;;) {
        if (c->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (c->out_off < c->out.len) {
            size_t n = c->out.len - c->out_off;
            if (n > max) n = max;
            memcpy(buf, c->out.data + c->out_off, n);
            c->out_off += n;
            if (c->out_off == c->out.len) c->out_off = c->out.len = 0;
            return (ssize_t)n;
        }
        if (c->stream_done) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!c->started_stream) {
            c->started_stream = true;
            for (int i = 0; i < c->n_choices; i++) {
                json_t *chunk = NULL;
                if (c->req.kind == API_CHAT)
                    chunk = api_chunk(&c->ri, i, NULL, 0, true, NULL, KILN_FINISH_NONE);
                else if (c->echo)
                    chunk = api_chunk(&c->ri, i, c->echo[c->choices[i].prompt], c->echo_len[c->choices[i].prompt],
                                      false, NULL, KILN_FINISH_NONE);
                if (chunk) api_sse_json(&c->out, chunk);
                json_decref(chunk);
            }
            if (c->out.len) continue;
        }
        pthread_mutex_lock(&c->mu);
        if (c->q.n == 0 && c->n_done < c->n_choices && atomic_load(&s->state) != SRV_STOPPING) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            long ns = (long)(s->cfg.heartbeat_s * 1e9);
            ts.tv_sec += ns / 1000000000L;
            ts.tv_nsec += ns % 1000000000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        }
        bool got = c->q.n > 0;
        if (got) srv_call_take(c);
        bool all_done = c->n_done == c->n_choices;
        pthread_mutex_unlock(&c->mu);
        if (got) process_events(c, true);
        if (all_done) {
            if (c->req.include_usage && !c->error_sent) {
                json_t *u = api_usage_chunk(&c->ri, c->usage_prompt, c->usage_completion);
                api_sse_json(&c->out, u);
                json_decref(u);
            }
            api_sse_done(&c->out);
            c->stream_done = true;
            continue;
        }
        if (!got) {
            if (atomic_load(&s->state) == SRV_STOPPING) return MHD_CONTENT_READER_END_WITH_ERROR;
            if (!srv_socket_alive(c->fd)) return MHD_CONTENT_READER_END_WITH_ERROR;
            /* an SSE comment: keeps proxies awake and finds dropped clients */
            api_buf_puts(&c->out, ": keep-alive\n\n");
        }
    }
}

static void stream_free(void *cls) { srv_call_unref(cls); }

/* ----------------------------------------------------- final responses */

static enum MHD_Result respond_final(srv_call *c, struct MHD_Connection *conn) {
    /* an engine error fails the whole request */
    for (int i = 0; i < c->n_choices; i++) {
        if (c->choices[i].error != KILN_OK) {
            api_error e;
            pthread_mutex_lock(&c->mu);
            api_fail(&e, c->choices[i].error == KILN_ERR_LIMIT ? 400 : 500, NULL,
                     c->choices[i].error == KILN_ERR_LIMIT ? NULL : "engine_error", "The request failed: %s",
                     c->error_msg[0] ? c->error_msg : kiln_status_name(c->choices[i].error));
            pthread_mutex_unlock(&c->mu);
            return srv_respond_error(conn, &e);
        }
    }
    api_kind kind = c->req.kind;
    json_t *o = json_object(), *choices = json_array();
    json_object_set_new(o, "id", json_string(c->id));
    json_object_set_new(o, "object", json_string(kind == API_CHAT ? "chat.completion" : "text_completion"));
    json_object_set_new(o, "created", json_integer(c->ri.created));
    json_object_set_new(o, "model", json_string(c->ri.model));
    for (int i = 0; i < c->n_choices; i++) {
        srv_choice *ch = &c->choices[i];
        json_t *cj = json_object();
        json_object_set_new(cj, "index", json_integer(i));
        api_buf text = {0};
        if (c->echo) api_buf_put(&text, c->echo[ch->prompt], c->echo_len[ch->prompt]);
        api_buf_put(&text, ch->text.data ? ch->text.data : "", ch->text.len);
        json_t *tj = json_stringn(text.data ? text.data : "", text.len);
        api_buf_free(&text);
        if (!tj) tj = json_string("");
        if (kind == API_CHAT) {
            json_t *m = json_object();
            json_object_set_new(m, "role", json_string("assistant"));
            json_object_set_new(m, "content", tj);
            json_object_set_new(cj, "message", m);
        } else {
            json_object_set_new(cj, "text", tj);
        }
        json_object_set_new(cj, "logprobs", c->req.logprobs ? api_logprobs_take(&ch->lp, kind) : json_null());
        const char *fin = api_finish_name(ch->finish);
        json_object_set_new(cj, "finish_reason", fin ? json_string(fin) : json_null());
        json_object_set_new(cj, "stop_reason", json_null());
        json_array_append_new(choices, cj);
    }
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", api_usage(c->usage_prompt, c->usage_completion));
    char *j = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!j) {
        api_error e;
        api_fail(&e, 500, NULL, NULL, "out of memory building the response");
        return srv_respond_error(conn, &e);
    }
    enum MHD_Result r = srv_respond_json(conn, 200, j, NULL, NULL);
    free(j);
    return r;
}

/* ------------------------------------------------------------ generation */

/* Tokenize / render the prompts and fix each prompt's max_tokens. */
static bool prepare(srv *s, srv_call *c, int *max_tokens, api_error *err) {
    api_request *r = &c->req;
    int np = r->kind == API_CHAT ? 1 : r->n_prompts;
    c->prompt_ids = calloc((size_t)np, sizeof *c->prompt_ids);
    c->n_prompt_ids = calloc((size_t)np, sizeof *c->n_prompt_ids);
    if (!c->prompt_ids || !c->n_prompt_ids) return api_fail(err, 500, NULL, NULL, "out of memory");
    if (r->kind == API_CHAT) {
        r->n_prompts = 1; /* the rendered chat is the one prompt */
        r->prompts = calloc(1, sizeof *r->prompts);
        if (!r->prompts) return api_fail(err, 500, NULL, NULL, "out of memory");
        char *text = NULL;
        if (!render_chat(s, r->messages_json, r->add_generation_prompt, r->template_extra_json, &text, err))
            return false;
        bool ok = tokenize_text(s, text, strlen(text), r->add_special_tokens, "messages", &c->prompt_ids[0],
                                &c->n_prompt_ids[0], err);
        kiln_free(text);
        if (!ok) return false;
    } else {
        if (r->echo) {
            c->echo = calloc((size_t)np, sizeof *c->echo);
            c->echo_len = calloc((size_t)np, sizeof *c->echo_len);
            if (!c->echo || !c->echo_len) return api_fail(err, 500, NULL, NULL, "out of memory");
        }
        for (int p = 0; p < np; p++) {
            api_prompt *pr = &r->prompts[p];
            if (pr->text) {
                if (!tokenize_text(s, pr->text, pr->text_len, r->add_special_tokens, "prompt", &c->prompt_ids[p],
                                   &c->n_prompt_ids[p], err))
                    return false;
            } else {
                c->prompt_ids[p] = pr->ids;
                c->n_prompt_ids[p] = pr->n_ids;
                pr->ids = NULL;
                pr->n_ids = 0;
            }
        }
    }
    const char *what = r->kind == API_CHAT ? "messages" : "prompt";
    for (int p = 0; p < np; p++) {
        int n = c->n_prompt_ids[p];
        if (n == 0) return api_fail(err, 400, what, NULL, "The %s is empty after tokenization", what);
        if (n >= s->max_model_len)
            return api_fail(err, 400, what, "context_length_exceeded",
                            "This model's maximum context length is %d tokens. However, your %s has %d tokens, "
                            "which leaves no room for generation. Please reduce the length of the %s.",
                            s->max_model_len, what, n, what);
        if (n + 1 > s->kv_capacity)
            return api_fail(err, 400, what, "kv_cache_exceeded",
                            "Your %s has %d tokens but the KV cache holds only %d tokens: it can never run on "
                            "this server",
                            what, n, s->kv_capacity);
        if (r->max_tokens_set) {
            double total = (double)n + r->max_tokens;
            char tot[40], mt[40];
            fmt_count(tot, sizeof tot, total);
            fmt_count(mt, sizeof mt, r->max_tokens);
            if (total > s->max_model_len)
                return api_fail(err, 400, r->max_tokens_param, "context_length_exceeded",
                                "This model's maximum context length is %d tokens. However, you requested %s tokens "
                                "(%d in the %s, %s for the completion). Please reduce the length of the %s or the "
                                "completion.",
                                s->max_model_len, tot, n, what, mt, what);
            if (total > s->kv_capacity)
                return api_fail(err, 400, r->max_tokens_param, "kv_cache_exceeded",
                                "This request needs up to %s tokens of KV cache (%d in the %s, %s for the "
                                "completion) but the cache holds %d tokens: it can never complete on this server. "
                                "Reduce %s.",
                                tot, n, what, mt, s->kv_capacity, r->max_tokens_param);
            max_tokens[p] = (int)r->max_tokens;
        } else {
            int cap = s->max_model_len < s->kv_capacity ? s->max_model_len : s->kv_capacity;
            int room = cap - n;
            max_tokens[p] = r->kind == API_COMPLETION && room > 16 ? 16 : room;
        }
        if (r->min_tokens > max_tokens[p])
            return api_fail(err, 400, "min_tokens", NULL, "'min_tokens' (%d) exceeds the tokens this request can generate (%d)",
                            r->min_tokens, max_tokens[p]);
        c->usage_prompt += n;
        if (c->echo) {
            api_prompt *pr = &r->prompts[p];
            if (pr->text) {
                c->echo[p] = pr->text;
                c->echo_len[p] = pr->text_len;
                pr->text = NULL;
            } else if (s->tok) {
                char *t = NULL;
                size_t tl = 0;
                if (kiln_detokenize(s->tok, c->prompt_ids[p], (size_t)n, false, &t, &tl) != KILN_OK)
                    return api_fail(err, 400, "prompt", NULL, "Cannot detokenize the prompt for echo: %s",
                                    kiln_last_error());
                /* keep the echoed text valid UTF-8 */
                api_buf b = {0};
                api_utf8 u = {0};
                api_utf8_feed(&u, t, tl, true, &b);
                kiln_free(t);
                c->echo[p] = b.data ? b.data : strdup("");
                c->echo_len[p] = b.len;
            } else {
                c->echo[p] = strdup("");
            }
        }
    }
    return true;
}

enum MHD_Result srv_handle_generate(srv *s, struct MHD_Connection *conn, api_kind kind, const char *body,
                                    size_t len, srv_call **call_out) {
    api_error err;
    json_t *root = api_parse_body(body, len, &err);
    if (!root) return srv_respond_error(conn, &err);
    srv_call *c = srv_call_new(s);
    if (!c) {
        json_decref(root);
        return MHD_NO;
    }
    *call_out = c; /* the connection's reference, dropped on completion */
    api_limits lim = {s->cfg.max_n, s->vocab_size};
    bool ok = api_decode_request(root, kind, &lim, &c->req, &err);
    json_decref(root);
    if (!ok) return srv_respond_error(conn, &err);
    api_request *r = &c->req;
    if (r->model && strcmp(r->model, s->served_name) && strcmp(r->model, s->ep->model)) {
        api_fail(&err, 404, "model", "model_not_found", "The model `%.200s` does not exist (this server serves `%.200s`)",
                 r->model, s->served_name);
        return srv_respond_error(conn, &err);
    }
    int np = kind == API_CHAT ? 1 : r->n_prompts;
    int *max_tokens = calloc((size_t)np, sizeof(int));
    if (!max_tokens) return MHD_NO;
    if (!prepare(s, c, max_tokens, &err)) {
        free(max_tokens);
        return srv_respond_error(conn, &err);
    }
    int k = np * r->n;
    if (k > s->cfg.max_queued_requests) {
        free(max_tokens);
        api_fail(&err, 400, "n", NULL,
                 "This request asks for %d sequences (%d prompt%s x n = %d) but the server queues at most %d", k, np,
                 np == 1 ? "" : "s", r->n, s->cfg.max_queued_requests);
        return srv_respond_error(conn, &err);
    }
    c->choices = calloc((size_t)k, sizeof *c->choices);
    if (!c->choices) {
        free(max_tokens);
        return MHD_NO;
    }
    c->n_choices = k;
    make_id(c->id, sizeof c->id, kind == API_CHAT ? "chatcmpl-" : "cmpl-");
    c->ri = (api_resp_info){kind, c->id, (long long)time(NULL), s->served_name, r->include_usage};
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    c->fd = ci ? ci->connect_fd : -1;
    for (int j = 0; j < k; j++) {
        c->choices[j].call = c;
        c->choices[j].index = j;
        c->choices[j].prompt = j / r->n;
        if (r->logprobs) api_logprobs_init(&c->choices[j].lp, kind);
    }

    /* admission */
    int prev = atomic_fetch_add(&s->queued, k);
    if (prev + k > s->cfg.max_queued_requests) {
        atomic_fetch_sub(&s->queued, k);
        atomic_fetch_add(&s->rejected_busy, 1);
        free(max_tokens);
        mark_all_done(c);
        api_fail(&err, 503, NULL, "server_busy",
                 "The server is busy: %d requests are waiting (limit %d, this request adds %d). Retry later.", prev,
                 s->cfg.max_queued_requests, k);
        return srv_respond_error(conn, &err);
    }
    if (atomic_load(&s->fatal)) {
        atomic_fetch_sub(&s->queued, k);
        free(max_tokens);
        mark_all_done(c);
        api_fail(&err, 500, NULL, "engine_error", "The engine has failed; restart the server");
        return srv_respond_error(conn, &err);
    }
    if (!srv_call_list(s, c)) {
        atomic_fetch_sub(&s->queued, k);
        atomic_fetch_add(&s->rejected_draining, 1);
        free(max_tokens);
        mark_all_done(c);
        api_fail(&err, 503, NULL, "shutting_down", "The server is shutting down and accepts no new requests");
        return srv_respond_error(conn, &err);
    }

    kiln_sampling_params sp;
    kiln_sampling_default_params(&sp);
    sp.temperature = r->temperature;
    sp.top_p = r->top_p;
    sp.top_k = r->top_k;
    sp.min_p = r->min_p;
    sp.presence_penalty = r->presence_penalty;
    sp.frequency_penalty = r->frequency_penalty;
    sp.repetition_penalty = r->repetition_penalty;
    sp.min_tokens = r->min_tokens;
    sp.ignore_eos = r->ignore_eos;
    sp.stop = (const char *const *)r->stop;
    sp.n_stop = r->n_stop;
    sp.stop_token_ids = r->stop_token_ids;
    sp.n_stop_token_ids = r->n_stop_token_ids;
    sp.skip_special_tokens = r->skip_special_tokens;
    sp.logprobs = r->logprobs ? r->top_logprobs : 0;
    for (int j = 0; j < k; j++) {
        srv_choice *ch = &c->choices[j];
        int p = ch->prompt;
        kiln_request rq;
        kiln_request_default(&rq);
        rq.prompt_ids = c->prompt_ids[p];
        rq.n_prompt_ids = c->n_prompt_ids[p];
        rq.sampling = sp;
        rq.sampling.max_tokens = max_tokens[p];
        if (r->has_seed) {
            rq.sampling.has_seed = true;
            /* n > 1 with a seed: different, reproducible samples */
            rq.sampling.seed = r->seed + (uint64_t)(j % r->n) * 0x9E3779B97F4A7C15ull;
        }
        rq.on_event = srv_on_event;
        rq.user = ch;
        srv_call_ref(c); /* the engine request's reference */
        uint64_t id = 0;
        if (kiln_engine_add_request(s->eng, &rq, &id) != KILN_OK) {
            kiln_status st = kiln_last_error_code();
            api_fail(&err, status_for(st), NULL,
                     st == KILN_ERR_LIMIT ? "context_length_exceeded" : st == KILN_ERR_FATAL ? "engine_error" : NULL,
                     "%s", kiln_last_error());
            atomic_fetch_sub(&s->queued, k - j);
            pthread_mutex_lock(&c->mu);
            for (int m = j; m < k; m++) c->choices[m].done = true;
            c->n_done += k - j;
            pthread_mutex_unlock(&c->mu);
            srv_call_unref(c); /* no callback will come for this one */
            srv_call_cancel(c);
            free(max_tokens);
            if (st == KILN_ERR_FATAL) atomic_store(&s->fatal, true);
            return srv_respond_error(conn, &err);
        }
        pthread_mutex_lock(&c->mu);
        ch->id = id;
        pthread_mutex_unlock(&c->mu);
    }
    free(max_tokens);
    srv_engine_wake(s);

    if (r->stream) {
        srv_call_ref(c); /* the response's reference (stream_free) */
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, c,
                                                                      stream_free);
        if (!resp) {
            srv_call_unref(c);
            return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        enum MHD_Result ret = MHD_queue_response(conn, 200, resp);
        MHD_destroy_response(resp);
        if (ret == MHD_YES && s) atomic_fetch_add(&s->http_requests[2], 1);
        return ret;
    }

    /* non-streaming: wait for every choice, checking the client socket at
     * least every heartbeat (tokens arriving do not postpone the check) */
    double next_check = srv_now() + s->cfg.heartbeat_s;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->q.n) {
            srv_call_take(c);
            pthread_mutex_unlock(&c->mu);
            process_events(c, false);
            pthread_mutex_lock(&c->mu);
        }
        if (c->n_done == c->n_choices && c->q.n == 0) break;
        if (atomic_load(&s->state) == SRV_STOPPING) {
            pthread_mutex_unlock(&c->mu);
            return MHD_NO;
        }
        if (srv_now() >= next_check) {
            pthread_mutex_unlock(&c->mu);
            /* gone: on_completed counts the disconnect and cancels the call */
            if (!srv_socket_alive(c->fd)) return MHD_NO;
            next_check = srv_now() + s->cfg.heartbeat_s;
            pthread_mutex_lock(&c->mu);
            continue;
        }
        if (c->q.n) continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = (long)((next_check - srv_now()) * 1e9);
        if (ns < 1000000) ns = 1000000;
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec += ns % 1000000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return respond_final(c, conn);
}

/* ----------------------------------------------------- tokenize endpoints */

static bool model_ok(srv *s, const char *model, api_error *err) {
    if (!model || !strcmp(model, s->served_name) || !strcmp(model, s->ep->model)) return true;
    return api_fail(err, 404, "model", "model_not_found", "The model `%.200s` does not exist (this server serves `%.200s`)",
                    model, s->served_name);
}

enum MHD_Result srv_handle_tokenize(srv *s, struct MHD_Connection *conn, const char *body, size_t len) {
    api_error err;
    json_t *root = api_parse_body(body, len, &err);
    if (!root) return srv_respond_error(conn, &err);
    api_tokenize_req tr;
    bool ok = api_decode_tokenize(root, &tr, &err);
    json_decref(root);
    if (!ok) return srv_respond_error(conn, &err);
    int32_t *ids = NULL;
    int n = 0;
    char *rendered = NULL;
    if (!model_ok(s, tr.model, &err)) goto fail;
    if (tr.messages_json) {
        if (!render_chat(s, tr.messages_json, tr.add_generation_prompt, tr.template_extra_json, &rendered, &err))
            goto fail;
        if (!tokenize_text(s, rendered, strlen(rendered), tr.add_special_tokens, "messages", &ids, &n, &err)) goto fail;
    } else {
        if (!tokenize_text(s, tr.prompt, tr.prompt_len, tr.add_special_tokens, "prompt", &ids, &n, &err)) goto fail;
    }
    json_t *o = json_object(), *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    json_object_set_new(o, "count", json_integer(n));
    json_object_set_new(o, "max_model_len", json_integer(s->max_model_len));
    json_object_set_new(o, "tokens", a);
    char *j = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    enum MHD_Result r = srv_respond_json(conn, 200, j, NULL, NULL);
    free(j);
    free(ids);
    kiln_free(rendered);
    api_tokenize_req_free(&tr);
    return r;
fail:
    free(ids);
    kiln_free(rendered);
    api_tokenize_req_free(&tr);
    return srv_respond_error(conn, &err);
}

enum MHD_Result srv_handle_detokenize(srv *s, struct MHD_Connection *conn, const char *body, size_t len) {
    api_error err;
    json_t *root = api_parse_body(body, len, &err);
    if (!root) return srv_respond_error(conn, &err);
    int32_t *ids = NULL;
    int n = 0;
    char *model = NULL;
    bool ok = api_decode_detokenize(root, &ids, &n, &model, &err);
    json_decref(root);
    if (!ok) return srv_respond_error(conn, &err);
    enum MHD_Result r;
    if (!model_ok(s, model, &err)) {
        r = srv_respond_error(conn, &err);
    } else if (!s->tok) {
        api_fail(&err, 400, NULL, NULL, "This model has no tokenizer");
        r = srv_respond_error(conn, &err);
    } else {
        char *text = NULL;
        size_t tl = 0;
        if (kiln_detokenize(s->tok, ids, (size_t)n, false, &text, &tl) != KILN_OK) {
            api_fail(&err, 400, "tokens", NULL, "Cannot detokenize: %s", kiln_last_error());
            r = srv_respond_error(conn, &err);
        } else {
            api_buf b = {0};
            api_utf8 u = {0};
            api_utf8_feed(&u, text, tl, true, &b);
            kiln_free(text);
            json_t *o = json_object();
            json_object_set_new(o, "prompt", json_stringn(b.data ? b.data : "", b.len));
            api_buf_free(&b);
            char *j = json_dumps(o, JSON_COMPACT);
            json_decref(o);
            r = srv_respond_json(conn, 200, j, NULL, NULL);
            free(j);
        }
    }
    free(ids);
    free(model);
    return r;
}
