/*
 * detok.c -- the streaming detokenizer (see tokenizer.h for its contract).
 *
 * State per stream: the raw bytes not yet turned into text (an incomplete
 * UTF-8 tail, at most 3 bytes), whether any byte was produced yet (for the
 * SentencePiece "strip one leading space" rule), and the text held back
 * because it could be the beginning of a stop string. Each push converts the
 * token's bytes with the same maximal-subpart U+FFFD rule as decoding at
 * once, so the emitted text concatenates to exactly the one-shot decode.
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
    kiln_buf pending; /* raw bytes of an incomplete UTF-8 sequence      */
    kiln_buf held;    /* text that may begin a stop string              */
    char **stops;
    size_t *stop_len;
    int n_stops;
};

void kiln_detok_destroy(kiln_detok *d) {
    if (!d) return;
    for (int i = 0; i < d->n_stops; i++) free(d->stops[i]);
    free(d->stops);
    free(d->stop_len);
    kiln_buf_free(&d->pending);
    kiln_buf_free(&d->held);
    free(d);
}

/* Raw bytes of one token after the skip and leading-space rules. */
static const char *token_bytes(kiln_detok *d, int32_t id, size_t *len) {
    const kiln_tokenizer *t = d->t;
    *len = 0;
    if (d->skip_special && kiln_tok_is_special(t, id)) return "";
    size_t l = 0;
    const char *b = kiln_tok_bytes(t, id, &l);
    if (!b) return "";
    if (l && !d->any_bytes) {
        d->any_bytes = true;
        if (t->strip_leading_space && b[0] == ' ') {
            b++;
            l--;
        }
    }
    *len = l;
    return b;
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
        KILN_CHECK_ALLOC(d->stops);
        KILN_CHECK_ALLOC(d->stop_len);
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
            d->stops[d->n_stops] = b.data;
            d->stop_len[d->n_stops] = b.len;
            d->n_stops++;
        }
    }
    /* the prompt: only whether it produced bytes and its incomplete tail */
    unsigned char tail[4];
    size_t nt = 0;
    for (size_t i = 0; i < n_prefix; i++) {
        KILN_CHECK(prefix_ids[i] >= 0 && prefix_ids[i] < tok->n_vocab, KILN_ERR_INVALID_ARGUMENT,
                   "prefix token id %d at position %zu is outside the vocabulary (size %d)", (int)prefix_ids[i], i,
                   (int)tok->n_vocab);
        size_t l;
        const char *b = token_bytes(d, prefix_ids[i], &l);
        for (size_t k = l > 3 ? l - 3 : 0; k < l; k++) {
            if (nt == 3) {
                memmove(tail, tail + 1, 2);
                nt = 2;
            }
            tail[nt++] = (unsigned char)b[k];
        }
    }
    /* keep the last lead byte onward if it is a valid but incomplete start */
    for (size_t s = 0; s < nt; s++) {
        if ((tail[s] & 0xC0) == 0x80) continue;
        if (kiln_utf8_seq_len(tail + s, nt - s) == 0 && kiln_utf8_invalid_len(tail + s, nt - s, false) == 0) {
            KILN_TRY(kiln_buf_append(&d->pending, tail + s, nt - s));
            break;
        }
    }
    *out = d;
    return KILN_OK;
fail:
    kiln_detok_destroy(d);
    return st;
}

/* Longest suffix of held that is a proper prefix of some stop string. */
static size_t stop_hold(const kiln_detok *d) {
    size_t best = 0;
    const char *h = d->held.data;
    size_t n = d->held.len;
    for (int i = 0; i < d->n_stops; i++) {
        size_t k = KILN_MIN(d->stop_len[i] - 1, n);
        for (; k > best; k--)
            if (!memcmp(h + n - k, d->stops[i], k)) {
                best = k;
                break;
            }
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

kiln_status kiln_detok_push(kiln_detok *d, int32_t id, kiln_buf *out, bool *stop_hit) {
    kiln_status st = KILN_OK;
    if (stop_hit) *stop_hit = false;
    if (!d || !out) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kiln_detok_push: NULL argument");
    if (id < 0 || id >= d->t->n_vocab)
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "token id %d is outside the vocabulary (size %d)", (int)id,
                         (int)d->t->n_vocab);
    if (!out->data && (st = kiln_buf_reserve(out, 1))) return st;
    if (d->stopped) return KILN_OK;
    size_t l;
    const char *b = token_bytes(d, id, &l);
    if (!l) return KILN_OK;
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

kiln_status kiln_detok_finish(kiln_detok *d, kiln_buf *out) {
    kiln_status st = KILN_OK;
    if (!d || !out) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kiln_detok_finish: NULL argument");
    if (!out->data && (st = kiln_buf_reserve(out, 1))) return st;
    if (d->stopped) return KILN_OK;
    if (d->pending.len) {
        if ((st = kiln_utf8_repair(&d->held, d->pending.data, d->pending.len, true, NULL))) return st;
        d->pending.len = 0;
    }
    return release(d, out, true, NULL);
}

bool kiln_detok_stopped(const kiln_detok *d) { return d && d->stopped; }
