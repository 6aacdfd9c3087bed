/*
 * fuzz_server_stop.c -- libFuzzer target for the stop-string path the
 * server streams through: the engine's per-request text stream (streaming
 * detokenizer + stop strings) on the tiny models' tokenizers, fed random
 * prompts, generated ids and stop strings, one token at a time as the
 * engine does. Checks: every piece is valid UTF-8; the output never
 * contains a stop string (nothing of it leaks); when the text holds no stop
 * string the pieces add up to decoding everything at once, and when it does
 * the output ends exactly where a stop string starts.
 * Uses the engine's internal header (tests may). Tokenizers come from
 * $KILN_SOURCE_DIR/tests/data/models (or FUZZ_SOURCE_DIR at build time).
 */
#include "engine_internal.h"
#include "../../server/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif
#ifndef FUZZ_SOURCE_DIR
#define FUZZ_SOURCE_DIR "."
#endif

#define STOP_REQUIRE(c)                                                                            \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_server_stop: invariant failed: %s (line %d)\n", #c, __LINE__);    \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static kiln_tokenizer *stop_toks[3];
static int stop_n_toks = -1;

static void stop_load(void) {
    if (stop_n_toks >= 0) return;
    stop_n_toks = 0;
    const char *src = getenv("KILN_SOURCE_DIR");
    if (!src || !*src) src = FUZZ_SOURCE_DIR;
    static const char *models[] = {"llama3-gqa", "llama2-mha", "qwen2-bias"};
    for (int i = 0; i < 3; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/data/models/%s/tokenizer.json", src, models[i]);
        kiln_tokenizer *t = NULL;
        if (kiln_tokenizer_load(path, &t) == KILN_OK) stop_toks[stop_n_toks++] = t;
        else kiln_clear_error();
    }
}

static bool stop_valid_utf8(const char *s, size_t n) {
    api_buf b = {0};
    api_utf8 u = {0};
    api_utf8_feed(&u, s, n, true, &b);
    bool same = b.len == n && (n == 0 || !memcmp(b.data, s, n));
    api_buf_free(&b);
    return same;
}

/* Is id a byte-fallback piece ("<0xNN>")? *invisible: a special token
 * that skip_special drops (text without skipping, none with). */
static bool stop_byte_piece(const kiln_tokenizer *tok, int32_t id, bool skip_special, bool *invisible) {
    const char *t = kiln_tokenizer_token_text(tok, id);
    char *d = NULL, *d2 = NULL;
    size_t l = 0, l2 = 0;
    *invisible = skip_special && kiln_detokenize(tok, &id, 1, true, &d, &l) == KILN_OK && l == 0 &&
                 kiln_detokenize(tok, &id, 1, false, &d2, &l2) == KILN_OK && l2 > 0;
    kiln_free(d);
    kiln_free(d2);
    kiln_clear_error();
    return t && strlen(t) == 6 && !strncmp(t, "<0x", 3) && t[5] == '>';
}

/* first occurrence of needle in hay[0..n), or -1 */
static long stop_find(const char *hay, size_t n, const char *needle) {
    size_t l = strlen(needle);
    if (l == 0 || l > n) return -1;
    for (size_t i = 0; i + l <= n; i++)
        if (!memcmp(hay + i, needle, l)) return (long)i;
    return -1;
}

int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    stop_load();
    if (stop_n_toks == 0 || size < 3) return 0; /* no tokenizer in this build */
    const kiln_tokenizer *tok = stop_toks[data[0] % stop_n_toks];
    bool skip_special = (data[0] & 0x10) != 0;
    int n_stops = data[1] % 5;
    size_t i = 2;
    char *stops[4] = {0};
    int ns = 0;
    for (int k = 0; k < n_stops && i < size; k++) {
        size_t l = data[i++] % 9 + 1;
        if (l > size - i) l = size - i;
        /* stop strings reach the engine as valid UTF-8 (the JSON decoder) */
        api_buf b = {0};
        api_utf8 u = {0};
        api_utf8_feed(&u, (const char *)data + i, l, true, &b);
        i += l;
        if (b.len && !memchr(b.data, 0, b.len)) stops[ns++] = b.data;
        else api_buf_free(&b);
    }
    int32_t V = kiln_tokenizer_vocab_size(tok);
    int32_t ids[512];
    int n = 0;
    for (; i + 1 < size && n < 512; i += 2) ids[n++] = (int32_t)((data[i] | (data[i + 1] << 8)) % V);
    int n_prompt = n ? 1 + (int)(data[0] >> 5) % (n < 4 ? n : 4) : 0;
    if (n_prompt >= n) goto out;

    kiln_text_stream ts;
    if (kiln_text_stream_init(&ts, tok, ids, n_prompt, skip_special, (const char *const *)stops, ns) != KILN_OK) {
        kiln_clear_error();
        goto out;
    }
    api_buf got = {0};
    bool hit = false;
    for (int k = n_prompt; k < n && !hit; k++) {
        const char *t = NULL;
        size_t tl = 0;
        kiln_text_stream_push(&ts, ids[k], &t, &tl, &hit);
        STOP_REQUIRE(stop_valid_utf8(t, tl));
        api_buf_put(&got, t, tl);
    }
    const char *t = NULL;
    size_t tl = 0;
    kiln_text_stream_finish(&ts, &t, &tl);
    STOP_REQUIRE(stop_valid_utf8(t, tl));
    STOP_REQUIRE(!hit || tl == 0);
    api_buf_put(&got, t, tl);
    kiln_text_stream_free(&ts);

    /* reference: decode everything at once, minus the prompt's text. That
     * difference is defined only while the prompt's text stays a prefix of
     * every longer decode: generated bytes can change how the prompt's own
     * bytes decode (an incomplete UTF-8 tail, a byte-fallback run the
     * generated bytes extend) and the stream resolves those on the
     * generated side. Then only the stop-string checks apply. */
    bool stable = true, inv = false;
    int a = n_prompt - 1, b = n_prompt;
    while (a > 0 && (stop_byte_piece(tok, ids[a], skip_special, &inv), inv)) a--;
    while (b < n - 1 && (stop_byte_piece(tok, ids[b], skip_special, &inv), inv)) b++;
    if (stop_byte_piece(tok, ids[a], skip_special, &inv) && stop_byte_piece(tok, ids[b], skip_special, &inv))
        stable = false; /* a byte-fallback run spans the prompt/generated boundary */
    char *all = NULL, *pre = NULL;
    size_t la = 0, lp = 0;
    const char *g = got.data ? got.data : "";
    for (int k = 0; k < ns; k++) STOP_REQUIRE(stop_find(g, got.len, stops[k]) < 0); /* nothing leaks */
    if (kiln_detokenize(tok, ids, (size_t)n_prompt, skip_special, &pre, &lp) == KILN_OK && stable)
        stable = !(lp >= 3 && !memcmp(pre + lp - 3, "\xef\xbf\xbd", 3));
    for (int j = n_prompt + 1; stable && j <= n; j++) {
        char *part = NULL;
        size_t lpart = 0;
        stable = kiln_detokenize(tok, ids, (size_t)j, skip_special, &part, &lpart) == KILN_OK && lpart >= lp &&
                 !memcmp(part, pre, lp);
        kiln_free(part);
    }
    if (stable && pre && kiln_detokenize(tok, ids, (size_t)n, skip_special, &all, &la) == KILN_OK) {
        const char *want = all + lp;
        size_t lw = la - lp;
        bool any = false;
        for (int k = 0; k < ns; k++) any |= stop_find(want, lw, stops[k]) >= 0;
        if (!any) {
            STOP_REQUIRE(!hit);
            STOP_REQUIRE(got.len == lw && !memcmp(g, want, lw));
        } else {
            /* cut exactly where a stop string starts; with no stop string in
             * the output, the cut is never late. (Stops completing in the
             * same piece of text may cut at the earlier start; one that only
             * completes when the last bytes are flushed is cut too, without
             * a hit: generation had ended anyway.) */
            STOP_REQUIRE(got.len <= lw && !memcmp(g, want, got.len));
            bool at_stop = false;
            for (int k = 0; k < ns; k++) {
                size_t l = strlen(stops[k]);
                if (got.len + l <= lw && !memcmp(want + got.len, stops[k], l)) at_stop = true;
            }
            STOP_REQUIRE(at_stop);
        }
    }
    kiln_clear_error();
    kiln_free(all);
    kiln_free(pre);
    api_buf_free(&got);
out:
    for (int k = 0; k < ns; k++) free(stops[k]);
    return 0;
}
