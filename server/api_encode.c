/*
 * api_encode.c -- engine output to OpenAI JSON: streaming chunks, usage,
 * logprobs objects, Server-Sent Event framing, and the UTF-8 carry that
 * keeps every emitted string valid (multi-byte characters are never cut
 * across chunks; invalid bytes become U+FFFD).
 * Ownership: functions returning json_t* return a new reference.
 * Thread-safety: pure functions.
 */
#include "api.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- buffers */

static bool buf_reserve(api_buf *b, size_t extra) {
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->oom = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void api_buf_put(api_buf *b, const void *p, size_t n) {
    if (!buf_reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void api_buf_puts(api_buf *b, const char *s) { api_buf_put(b, s, strlen(s)); }

void api_buf_printf(api_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !buf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void api_buf_free(api_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* ---------------------------------------------------------------- UTF-8 */

/* Length of the UTF-8 sequence at s (n bytes available): > 0 valid, 0 a
 * valid but incomplete prefix, -k an invalid sequence whose maximal valid
 * prefix is k bytes (k >= 1: one U+FFFD replaces those k bytes). */
static int utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F; /* no surrogates */
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return -1;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return 0;
        unsigned b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return -i;
    }
    return len;
}

static void utf8_run(api_utf8 *u, const unsigned char *s, size_t n, bool flush, api_buf *out) {
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] < 0x80) j++;
        if (j > i) api_buf_put(out, s + i, j - i);
        i = j;
        if (i >= n) break;
        int l = utf8_seq(s + i, n - i);
        if (l > 0) {
            api_buf_put(out, s + i, (size_t)l);
            i += (size_t)l;
        } else if (l == 0 && !flush) {
            u->n_pend = (int)(n - i);
            memcpy(u->pend, s + i, n - i);
            return;
        } else {
            api_buf_puts(out, "\xEF\xBF\xBD");
            i += l == 0 ? n - i : (size_t)-l;
        }
    }
}

void api_utf8_feed(api_utf8 *u, const char *text, size_t len, bool flush, api_buf *out) {
    const unsigned char *t = (const unsigned char *)text;
    if (u->n_pend) {
        /* the carry is a valid incomplete prefix: complete it with at most
         * 4 - k new bytes */
        unsigned char tmp[8];
        size_t k = (size_t)u->n_pend, take = len < 4 - k ? len : 4 - k;
        memcpy(tmp, u->pend, k);
        if (take) memcpy(tmp + k, t, take);
        int l = utf8_seq(tmp, k + take);
        u->n_pend = 0;
        if (l > 0) {
            api_buf_put(out, tmp, (size_t)l);
            t += (size_t)l - k;
            len -= (size_t)l - k;
        } else if (l == 0) {
            /* still incomplete: every new byte was consumed */
            if (!flush) {
                memcpy(u->pend, tmp, k + take);
                u->n_pend = (int)(k + take);
                return;
            }
            api_buf_puts(out, "\xEF\xBF\xBD");
            t += take;
            len -= take;
        } else {
            /* broken by a new byte: one U+FFFD for the prefix, rescan from there */
            api_buf_puts(out, "\xEF\xBF\xBD");
            size_t used = (size_t)-l > k ? (size_t)-l - k : 0;
            t += used;
            len -= used;
        }
    }
    if (len) utf8_run(u, t, len, flush, out);
}

/* --------------------------------------------------------------- pieces */

const char *api_finish_name(kiln_finish_reason f) {
    switch (f) {
    case KILN_FINISH_STOP: return "stop";
    case KILN_FINISH_LENGTH: return "length";
    case KILN_FINISH_ABORT: return "abort";
    default: return NULL;
    }
}

/* A JSON string from arbitrary bytes (invalid UTF-8 replaced). */
static json_t *text_json(const char *s, size_t n) {
    api_buf b = {0};
    api_utf8 u = {0};
    api_utf8_feed(&u, s ? s : "", s ? n : 0, true, &b);
    json_t *j = json_stringn(b.data ? b.data : "", b.len);
    api_buf_free(&b);
    return j;
}

/* JSON has no infinities: -inf logprobs (masked tokens) become -9999. */
static json_t *logprob_json(float lp) { return json_real(isfinite(lp) ? (double)lp : -9999.0); }

static json_t *token_name(const api_token_namer *nm, int32_t id) {
    size_t len = 0;
    char *s = nm && nm->name ? nm->name(nm->user, id, &len) : NULL;
    json_t *j;
    if (s) {
        j = text_json(s, len);
        free(s);
    } else {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "<%d>", (int)id);
        j = json_string(tmp);
    }
    return j;
}

static json_t *bytes_json(const json_t *str) {
    json_t *a = json_array();
    const unsigned char *s = (const unsigned char *)json_string_value(str);
    size_t n = json_string_length(str);
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(s[i]));
    return a;
}

void api_logprobs_init(api_logprobs *lp, api_kind kind) {
    memset(lp, 0, sizeof *lp);
    if (kind == API_CHAT) {
        lp->content = json_array();
    } else {
        lp->tokens = json_array();
        lp->token_logprobs = json_array();
        lp->top_logprobs = json_array();
        lp->text_offset = json_array();
    }
}

void api_logprobs_add(api_logprobs *lp, api_kind kind, const api_token *t, size_t text_offset,
                      const api_token_namer *namer) {
    json_t *name = token_name(namer, t->id);
    if (!name) return;
    if (kind == API_CHAT) {
        json_t *e = json_object(), *tops = json_array();
        for (int i = 0; i < t->n_top; i++) {
            json_t *tn = token_name(namer, t->top[i].id);
            if (!tn) continue;
            json_t *te = json_object();
            json_object_set_new(te, "token", tn);
            json_object_set_new(te, "logprob", logprob_json(t->top[i].logprob));
            json_object_set_new(te, "bytes", bytes_json(tn));
            json_array_append_new(tops, te);
        }
        json_object_set_new(e, "token", name);
        json_object_set_new(e, "logprob", logprob_json(t->logprob));
        json_object_set_new(e, "bytes", bytes_json(name));
        json_object_set_new(e, "top_logprobs", tops);
        json_array_append_new(lp->content, e);
    } else {
        json_t *tops = json_object();
        for (int i = 0; i < t->n_top; i++) {
            json_t *tn = token_name(namer, t->top[i].id);
            if (!tn) continue;
            json_object_set_new(tops, json_string_value(tn), logprob_json(t->top[i].logprob));
            json_decref(tn);
        }
        /* the sampled token is always listed with its own logprob */
        json_object_set_new(tops, json_string_value(name), logprob_json(t->logprob));
        json_array_append_new(lp->tokens, name);
        json_array_append_new(lp->token_logprobs, logprob_json(t->logprob));
        json_array_append_new(lp->top_logprobs, tops);
        json_array_append_new(lp->text_offset, json_integer((json_int_t)text_offset));
    }
}

json_t *api_logprobs_take(api_logprobs *lp, api_kind kind) {
    json_t *o = json_object();
    if (kind == API_CHAT) {
        json_object_set_new(o, "content", lp->content ? lp->content : json_array());
    } else {
        json_object_set_new(o, "text_offset", lp->text_offset ? lp->text_offset : json_array());
        json_object_set_new(o, "token_logprobs", lp->token_logprobs ? lp->token_logprobs : json_array());
        json_object_set_new(o, "tokens", lp->tokens ? lp->tokens : json_array());
        json_object_set_new(o, "top_logprobs", lp->top_logprobs ? lp->top_logprobs : json_array());
    }
    memset(lp, 0, sizeof *lp);
    api_logprobs_init(lp, kind);
    return o;
}

void api_logprobs_free(api_logprobs *lp) {
    json_decref(lp->tokens);
    json_decref(lp->token_logprobs);
    json_decref(lp->top_logprobs);
    json_decref(lp->text_offset);
    json_decref(lp->content);
    memset(lp, 0, sizeof *lp);
}

/* ------------------------------------------------------------- chunks */

void api_sse_json(api_buf *out, json_t *obj) {
    char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    if (!s) {
        out->oom = true;
        return;
    }
    api_buf_puts(out, "data: ");
    api_buf_puts(out, s);
    api_buf_puts(out, "\n\n");
    free(s);
}

void api_sse_done(api_buf *out) { api_buf_puts(out, "data: [DONE]\n\n"); }

static json_t *chunk_head(const api_resp_info *ri) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(ri->id));
    json_object_set_new(o, "object", json_string(ri->kind == API_CHAT ? "chat.completion.chunk" : "text_completion"));
    json_object_set_new(o, "created", json_integer(ri->created));
    json_object_set_new(o, "model", json_string(ri->model));
    return o;
}

json_t *api_chunk(const api_resp_info *ri, int index, const char *text, size_t text_len, bool role_first,
                  json_t *logprobs, kiln_finish_reason finish) {
    json_t *o = chunk_head(ri), *choices = json_array(), *c = json_object();
    json_object_set_new(c, "index", json_integer(index));
    if (ri->kind == API_CHAT) {
        json_t *delta = json_object();
        if (role_first) {
            json_object_set_new(delta, "role", json_string("assistant"));
            json_object_set_new(delta, "content", json_string(""));
        } else if (text && text_len) {
            json_object_set_new(delta, "content", text_json(text, text_len));
        }
        json_object_set_new(c, "delta", delta);
    } else {
        json_object_set_new(c, "text", text_json(text, text ? text_len : 0));
    }
    json_object_set_new(c, "logprobs", logprobs ? logprobs : json_null());
    const char *fin = api_finish_name(finish);
    json_object_set_new(c, "finish_reason", fin ? json_string(fin) : json_null());
    if (fin) json_object_set_new(c, "stop_reason", json_null());
    json_array_append_new(choices, c);
    json_object_set_new(o, "choices", choices);
    if (ri->include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *api_usage(int prompt_tokens, int completion_tokens) {
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(prompt_tokens));
    json_object_set_new(u, "completion_tokens", json_integer(completion_tokens));
    json_object_set_new(u, "total_tokens", json_integer((json_int_t)prompt_tokens + completion_tokens));
    return u;
}

json_t *api_usage_chunk(const api_resp_info *ri, int prompt_tokens, int completion_tokens) {
    json_t *o = chunk_head(ri);
    json_object_set_new(o, "choices", json_array());
    json_object_set_new(o, "usage", api_usage(prompt_tokens, completion_tokens));
    return o;
}
