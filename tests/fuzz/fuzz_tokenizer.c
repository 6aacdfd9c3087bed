/*
 * fuzz_tokenizer.c -- libFuzzer target: encode arbitrary bytes with the Llama 3
 * (byte-level, tokenizer.json) and Llama 2 (SentencePiece) tokenizers and check
 * the invariants: decode(encode(text)) == text with invalid UTF-8 replaced,
 * and the streaming detokenizer (with stop strings) agrees with decoding at
 * once for the same ids and for ids taken from the input bytes.
 * Built by scripts/fuzz.sh (KILN_FUZZ_MAIN); replayed by
 * tests/test_tokenizer_fuzz_regress.c.
 * Fixtures: $KILN_FUZZ_FIXTURES or <source>/../shared/fixtures.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "kiln.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>

#ifndef KILN_FUZZ_SOURCE_DIR
#define KILN_FUZZ_SOURCE_DIR "."
#endif

static kiln_tokenizer *fuzz_toks[2];
static int fuzz_toks_loaded;

static int fuzz_load_tokenizers(void) {
    if (fuzz_toks_loaded) return fuzz_toks[0] != NULL;
    fuzz_toks_loaded = 1;
    const char *fix = getenv("KILN_FUZZ_FIXTURES");
    char path[1024];
    static const char *const rel[2] = {"tokenizers/llama3/tokenizer.json", "tokenizers/llama2/tokenizer.model"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", fix ? fix : KILN_FUZZ_SOURCE_DIR "/../shared/fixtures", rel[i]);
        if (kiln_tokenizer_load(path, &fuzz_toks[i])) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", kiln_last_error());
            return 0;
        }
    }
    return 1;
}

#define FUZZ_CHECK(c)                                                                                      \
    do {                                                                                                   \
        if (!(c)) {                                                                                        \
            fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
            __builtin_trap();                                                                              \
        }                                                                                                  \
    } while (0)

/* stream ids and compare with decoding at once */
static void fuzz_stream_check(const kiln_tokenizer *t, const int32_t *ids, size_t n, bool skip) {
    char *full = NULL;
    size_t fl = 0;
    FUZZ_CHECK(kiln_detokenize(t, ids, n, skip, &full, &fl) == KILN_OK);
    kiln_detok *d = NULL;
    FUZZ_CHECK(kiln_detok_create(t, NULL, 0, skip, NULL, 0, &d) == KILN_OK);
    kiln_buf out = {0};
    for (size_t i = 0; i < n; i++) {
        size_t before = out.len;
        FUZZ_CHECK(kiln_detok_push(d, ids[i], &out, NULL) == KILN_OK);
        FUZZ_CHECK(kiln_utf8_valid(out.data ? out.data + before : "", out.len - before));
    }
    FUZZ_CHECK(kiln_detok_finish(d, &out) == KILN_OK);
    FUZZ_CHECK(out.len == fl && !memcmp(out.data, full, fl));
    kiln_detok_destroy(d);
    /* with a stop string taken from the middle of the text */
    if (fl > 4) {
        size_t a = fl / 3, b = a + 3;
        while (a > 0 && ((unsigned char)full[a] & 0xC0) == 0x80) a--;
        while (b < fl && ((unsigned char)full[b] & 0xC0) == 0x80) b++;
        char stop[64];
        if (b - a < sizeof stop && !memchr(full + a, 0, b - a)) {
            memcpy(stop, full + a, b - a);
            stop[b - a] = 0;
            const char *stops[1] = {stop};
            FUZZ_CHECK(kiln_detok_create(t, NULL, 0, skip, stops, 1, &d) == KILN_OK);
            out.len = 0;
            for (size_t i = 0; i < n; i++) FUZZ_CHECK(kiln_detok_push(d, ids[i], &out, NULL) == KILN_OK);
            FUZZ_CHECK(kiln_detok_finish(d, &out) == KILN_OK);
            const char *first = memmem(full, fl, stop, b - a);
            FUZZ_CHECK(first && kiln_detok_stopped(d));
            FUZZ_CHECK(out.len == (size_t)(first - full) && !memcmp(out.data ? out.data : "", full, out.len));
            kiln_detok_destroy(d);
        }
    }
    kiln_buf_free(&out);
    kiln_free(full);
}

int kiln_fuzz_tokenizer_one(const uint8_t *data, size_t size) {
    if (!fuzz_load_tokenizers() || size < 1) return 0;
    uint8_t mode = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    const kiln_tokenizer *t = fuzz_toks[mode & 1];
    kiln_encode_options o = {(mode & 2) != 0, (mode & 4) != 0};
    int32_t *ids = NULL;
    size_t n = 0;
    FUZZ_CHECK(kiln_tokenize(t, text, len, &o, &ids, &n) == KILN_OK);
    /* the text round-trips (after U+FFFD replacement) unless specials were
     * added or parsed (their text is kept only when not skipped) */
    char *dec = NULL;
    size_t dl = 0;
    FUZZ_CHECK(kiln_detokenize(t, ids, n, false, &dec, &dl) == KILN_OK);
    /* SentencePiece is lossy for a typed U+2581 and for text after a parsed
     * special token (each segment gets its own ▁ prefix, as in HF legacy) */
    bool lossy = (mode & 1) && ((mode & 4) || memmem(text, len, "\xE2\x96\x81", 3));
    if (!(mode & 2) && !lossy) {
        kiln_buf fixed = {0};
        kiln_utf8_repair(&fixed, text, len, true, NULL);
        FUZZ_CHECK(dl == fixed.len && !memcmp(dec, fixed.data ? fixed.data : "", dl));
        kiln_buf_free(&fixed);
    }
    kiln_free(dec);
    fuzz_stream_check(t, ids, n, (mode & 8) != 0);
    kiln_free(ids);
    /* the input bytes as ids (byte tokens, split characters, specials) */
    size_t m = len / 2;
    int32_t *raw = malloc((m ? m : 1) * sizeof *raw);
    int32_t v = kiln_tokenizer_vocab_size(t);
    for (size_t i = 0; i < m; i++) {
        uint32_t x = (uint32_t)(uint8_t)text[2 * i] | (uint32_t)(uint8_t)text[2 * i + 1] << 8;
        raw[i] = (x & 0x8000) ? (int32_t)((x & 0x7fff) % (uint32_t)v) : (int32_t)(x % 300);
    }
    fuzz_stream_check(t, raw, m, (mode & 16) != 0);
    free(raw);
    return 0;
}

#ifdef KILN_FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return kiln_fuzz_tokenizer_one(data, size); }
#endif
