/*
 * detok.c -- the streaming detokenizer (see tokenizer.h for its contract).
 *
 * State per stream: an open run of byte-fallback tokens (decoded when the
 * run ends, valid or one U+FFFD per byte, as decoding at once does), the raw
 * bytes not yet turned into text (an incomplete UTF-8 tail, at most 3
 * bytes), whether any byte was produced yet (for the SentencePiece "strip
 * one leading space" rule), and the text held back because it could be the
 * beginning of a stop string. Each push converts bytes with the same rules
 * as decoding at once, so the emitted text concatenates to exactly the
 * one-shot decode.
 * Ownership: the detokenizer owns copies of the stop strings; it borrows the
 * tokenizer. Thread-safety: one thread at a time per kiln_detok.
 */
#define _GNU_SOURCE /* memmem */
#include "tokenizer.h"

#include <stdlib.h>

struct kiln_detok {
    const kiln_tokenizer *t;
    bool skip_special;
    bool any_bytes; /* a raw byte was produced (prefix included)        */
    bool stopped;
    kiln_buf run;     /* bytes of an open run of <0xNN> tokens          */
    kiln_buf pending; /* raw bytes of an incomplete UTF-8 sequence      */
    kiln_buf scratch;
    kiln_buf held;    /* text that may begin a stop string              */
    char **stops;
    size_t *stop_len;
    uint32_t **stop_pi; /* KMP prefix function of each stop string */
    int n_stops;
};

void kiln_detok_destroy(kiln_detok *d) {
    if (!d) return;
    for (int i = 0; i < d->n_stops; i++) {
        free(d->stops[i]);
        if (d->stop_pi) free(d->stop_pi[i]);
    }
    free(d->stops);
    free(d->stop_len);
    free(d->stop_pi);
    kiln_buf_free(&d->run);
    kiln_buf_free(&d->pending);
    kiln_buf_free(&d->scratch);
    kiln_buf_free(&d->held);
    free(d);
}

/* Text bytes of one token, in the order decoding produces them: a byte
 * token extends the open run (nothing yet); any other token first closes
 * the run. Skipped special tokens do not interrupt a run. The bytes are
 * built in d->scratch; the leading-space rule is applied. */
static kiln_status token_bytes(kiln_detok *d, int32_t id, const char **out, size_t *len) {
    kiln_status st;
    const kiln_tokenizer *t = d->t;
    *out = "";
    *len = 0;
    if (d->skip_special && kiln_tok_is_special(t, id)) return KILN_OK;
    size_t l = 0;
    const char *b = kiln_tok_bytes(t, id, &l);
    if (!b) return KILN_OK;
    if (t->flags[id] & KILN_TOKF_BYTE) return kiln_buf_append(&d->run, b, l);
    d->scratch.len = 0;
    if ((st = kiln_tok_flush_run(&d->scratch, &d->run))) return st;
    if ((st = kiln_buf_append(&d->scratch, b, l))) return st;
    const char *p = d->scratch.data;
    size_t n = d->scratch.len;
    if (n && !d->any_bytes) {
        d->any_bytes = true;
        if (t->strip_leading_space && p[0] == ' ') {
            p++;
            n--;
        }
    }
    *out = p;
    *len = n;
    return KILN_OK;
}

/* Keep only a trailing valid-but-incomplete UTF-8 sequence of buf. */
static void keep_incomplete_tail(kiln_buf *buf) {
    size_t n = buf->len;
    const unsigned char *s = (const unsigned char *)buf->data;
    for (size_t k = n > 3 ? n - 3 : 0; k < n; k++) {
        if ((s[k] & 0xC0) == 0x80) continue;
        if (kiln_utf8_seq_len(s + k, n - k) == 0 && kiln_utf8_invalid_len(s + k, n - k, false) == 0) {
            memmove(buf->data, buf->data + k, n - k);
            buf->len = n - k;
            return;
        }
    }
    buf->len = 0;
}

kiln_status kiln_detok_create(const kiln_tokenizer *tok, const int32_t *prefix_ids, size_t n_prefix,
                              bool skip_special, const char *const *stops, int n_stops, kiln_detok **out) {
    kiln_status st = KILN_OK;
    kiln_detok *d = NULL;
    KILN_CHECK(tok && out && (prefix_ids || !n_prefix) && (stops || n_stops <= 0), KILN_ERR_INVALID_ARGUMENT,
               "kiln_detok_create: NULL argument");
    d = calloc(1, sizeof *d);
    KILN_CHECK_ALLOC(d);
    d->t = tok;
    d->skip_special = skip_special;
    if (n_stops > 0) {
        d->stops = calloc((size_t)n_stops, sizeof *d->stops);
        d->stop_len = calloc((size_t)n_stops, sizeof *d->stop_len);
        d->stop_pi = calloc((size_t)n_stops, sizeof *d->stop_pi);
        KILN_CHECK_ALLOC(d->stops);
        KILN_CHECK_ALLOC(d->stop_len);
        KILN_CHECK_ALLOC(d->stop_pi);
        for (int i = 0; i < n_stops; i++) {
            KILN_CHECK(stops[i], KILN_ERR_INVALID_ARGUMENT, "stop string %d is NULL", i);
            size_t l = strlen(stops[i]);
            if (!l) continue; /* an empty stop string never matches */
            kiln_buf b = {0};
            /* stop strings match decoded text, which is valid UTF-8 */
            st = kiln_utf8_repair(&b, stops[i], l, true, NULL);
            if (st) {
                kiln_buf_free(&b);
                goto fail;
            }
            uint32_t *pi = malloc(b.len * sizeof *pi);
            if (!pi) {
                kiln_buf_free(&b);
                KILN_CHECK_ALLOC(pi);
            }
            pi[0] = 0; /* prefix function: longest proper border of s[0..i] */
            for (size_t q = 1, k = 0; q < b.len; q++) {
                while (k > 0 && b.data[q] != b.data[k]) k = pi[k - 1];
                if (b.data[q] == b.data[k]) k++;
                pi[q] = (uint32_t)k;
            }
            d->stops[d->n_stops] = b.data;
            d->stop_len[d->n_stops] = b.len;
            d->stop_pi[d->n_stops] = pi;
            d->n_stops++;
        }
    }
    /* the prompt: only whether it produced text, and an incomplete UTF-8
     * character at its end (raw bytes or an open byte run) that the
     * generated tokens may complete */
    for (size_t i = 0; i < n_prefix; i++) {
        KILN_CHECK(prefix_ids[i] >= 0 && prefix_ids[i] < tok->n_vocab, KILN_ERR_INVALID_ARGUMENT,
                   "prefix token id %d at position %zu is outside the vocabulary (size %d)", (int)prefix_ids[i], i,
                   (int)tok->n_vocab);
        const char *b;
        size_t l;
        KILN_TRY(token_bytes(d, prefix_ids[i], &b, &l));
        if (l) { /* a rolling window of the last 3 bytes */
            if (l > 3) {
                b += l - 3;
                l = 3;
            }
            KILN_TRY(kiln_buf_append(&d->pending, b, l));
            if (d->pending.len > 3) {
                memmove(d->pending.data, d->pending.data + d->pending.len - 3, 3);
                d->pending.len = 3;
            }
        }
    }
    if (d->run.len) {
        size_t before = d->run.len;
        keep_incomplete_tail(&d->run);
        if (d->run.len < before) d->any_bytes = true;
        d->pending.len = 0;
    } else {
        keep_incomplete_tail(&d->pending);
    }
    *out = d;
    return KILN_OK;
fail:
    kiln_detok_destroy(d);
    return st;
}

/* Longest suffix of held that is a proper prefix of some stop string:
 * KMP over the last |stop| - 1 bytes, O(|stop|) per stop string. */
static size_t stop_hold(const kiln_detok *d) {
    size_t best = 0;
    const char *h = d->held.data;
    size_t n = d->held.len;
    for (int i = 0; i < d->n_stops; i++) {
        const char *st = d->stops[i];
        const uint32_t *pi = d->stop_pi[i];
        size_t L = d->stop_len[i], q = 0;
        for (size_t p = n > L - 1 ? n - (L - 1) : 0; p < n; p++) {
            while (q > 0 && (q == L || st[q] != h[p])) q = pi[q - 1];
            if (st[q] == h[p]) q++;
        }
        if (q == L) q = pi[L - 1]; /* a full match is handled by stop_find */
        if (q > best) best = q;
    }
    return best;
}

/* Earliest stop-string match in held, or SIZE_MAX. */
static size_t stop_find(const kiln_detok *d) {
    size_t best = SIZE_MAX;
    for (int i = 0; i < d->n_stops; i++) {
        const char *p = memmem(d->held.data, d->held.len, d->stops[i], d->stop_len[i]);
        if (p && (size_t)(p - d->held.data) < best) best = (size_t)(p - d->held.data);
    }
    return best;
}

/* Move the safe part of held to out; on a stop match, end the stream. */
static kiln_status release(kiln_detok *d, kiln_buf *out, bool final, bool *stop_hit) {
    kiln_status st = KILN_OK;
    if (!d->held.len) return KILN_OK;
    size_t at = d->n_stops ? stop_find(d) : SIZE_MAX;
    if (at != SIZE_MAX) {
        if ((st = kiln_buf_append(out, d->held.data, at))) return st;
        d->held.len = 0;
        d->pending.len = 0;
        d->stopped = true;
        if (stop_hit) *stop_hit = true;
        return KILN_OK;
    }
    size_t keep = (final || !d->n_stops) ? 0 : stop_hold(d);
    size_t emit = d->held.len - keep;
    if ((st = kiln_buf_append(out, d->held.data, emit))) return st;
    memmove(d->held.data, d->held.data + emit, keep);
    d->held.len = keep;
    d->held.data[keep] = 0;
    return KILN_OK;
}

/* Append decoded bytes to the stream and release what is safe. */
static kiln_status feed(kiln_detok *d, const char *b, size_t l, kiln_buf *out, bool *stop_hit) {
    kiln_status st;
    const char *src = b;
    size_t n = l;
    if (d->pending.len) {
        if ((st = kiln_buf_append(&d->pending, b, l))) return st;
        src = d->pending.data;
        n = d->pending.len;
    }
    size_t used;
    if ((st = kiln_utf8_repair(&d->held, src, n, false, &used))) return st;
    /* keep the unconsumed tail (<= 3 bytes) for the next push */
    if (used < n) {
        unsigned char rest[4];
        size_t r = n - used;
        memcpy(rest, src + used, r);
        d->pending.len = 0;
        if ((st = kiln_buf_append(&d->pending, rest, r))) return st;
    } else {
        d->pending.len = 0;
    }
    return release(d, out, false, stop_hit);
}

kiln_status kiln_detok_push(kiln_detok *d, int32_t id, kiln_buf *out, bool *stop_hit) {
    kiln_status st = KILN_OK;
    if (stop_hit) *stop_hit = false;
    if (!d || !out) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kiln_detok_push: NULL argument");
    if (id < 0 || id >= d->t->n_vocab)
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "token id %d is outside the vocabulary (size %d)", (int)id,
                         (int)d->t->n_vocab);
    if (!out->data && (st = kiln_buf_reserve(out, 1))) return st;
    if (d->stopped) return KILN_OK;
    const char *b;
    size_t l;
    if ((st = token_bytes(d, id, &b, &l))) return st;
    if (!l) return KILN_OK;
    return feed(d, b, l, out, stop_hit);
}

kiln_status kiln_detok_finish(kiln_detok *d, kiln_buf *out) {
    kiln_status st = KILN_OK;
    if (!d || !out) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kiln_detok_finish: NULL argument");
    if (!out->data && (st = kiln_buf_reserve(out, 1))) return st;
    if (d->stopped) return KILN_OK;
    if (d->run.len) { /* the generation ended inside a byte run */
        d->scratch.len = 0;
        if ((st = kiln_tok_flush_run(&d->scratch, &d->run))) return st;
        const char *p = d->scratch.data;
        size_t n = d->scratch.len;
        if (!d->any_bytes) {
            d->any_bytes = true;
            if (d->t->strip_leading_space && p[0] == ' ') p++, n--;
        }
        if ((st = feed(d, p, n, out, NULL))) return st;
        if (d->stopped) return KILN_OK;
    }
    if (d->pending.len) {
        if ((st = kiln_utf8_repair(&d->held, d->pending.data, d->pending.len, true, NULL))) return st;
        d->pending.len = 0;
    }
    return release(d, out, true, NULL);
}

bool kiln_detok_stopped(const kiln_detok *d) { return d && d->stopped; }
