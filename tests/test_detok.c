// label: unit
/*
 * test_detok.c -- the streaming detokenizer: for every golden case (and
 * random id sequences), feeding ids one at a time emits exactly the text of
 * decoding them at once, never a broken UTF-8 sequence; prompt prefixes give
 * the right leading-space and UTF-8 continuation behavior; stop strings
 * spanning token boundaries end the stream with the stop string excluded.
 */
#define _GNU_SOURCE /* memmem */
#include "kiln.h"
#include "kt.h"
#include "tokenizer.h"

#include <jansson.h>
#include <stdlib.h>

#define TOKDIR KT_FIXTURES "/tokenizers"
#define S(x) ((x) ? (x) : "(null)")

static bool have_fixtures(void) { return kiln_path_exists(TOKDIR "/llama3/tokenizer.json"); }

static char *decode(const kiln_tokenizer *t, const int32_t *ids, size_t n, bool skip, size_t *len) {
    char *s = NULL;
    if (kiln_detokenize(t, ids, n, skip, &s, len)) return NULL;
    return s;
}

/* Stream ids[0..n) after prefix; returns everything emitted (owned). */
static size_t got_len; /* length of the last stream() result (texts may hold NUL bytes) */

static char *stream(const kiln_tokenizer *t, const int32_t *prefix, size_t np, const int32_t *ids, size_t n,
                    bool skip, const char *const *stops, int n_stops, bool *stopped, size_t *stop_at) {
    kiln_detok *d = NULL;
    if (kiln_detok_create(t, prefix, np, skip, stops, n_stops, &d)) return NULL;
    kiln_buf all = {0}, chunk = {0};
    *stopped = false;
    *stop_at = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        chunk.len = 0;
        bool hit = false;
        if (kiln_detok_push(d, ids[i], &chunk, &hit)) {
            fprintf(stderr, "  push failed: %s\n", kiln_last_error());
            break;
        }
        KT_CHECKF(kiln_utf8_valid(chunk.data ? chunk.data : "", chunk.len), "broken UTF-8 emitted at id %zu", i);
        if (*stopped) KT_CHECKF(chunk.len == 0, "text emitted after the stop string");
        if (hit) {
            KT_CHECK(!*stopped);
            *stopped = true;
            *stop_at = i;
        }
        kiln_buf_append(&all, chunk.data ? chunk.data : "", chunk.len);
    }
    chunk.len = 0;
    kiln_detok_finish(d, &chunk);
    KT_CHECK(kiln_utf8_valid(chunk.data ? chunk.data : "", chunk.len));
    if (*stopped) KT_CHECK(chunk.len == 0);
    kiln_buf_append(&all, chunk.data ? chunk.data : "", chunk.len);
    if (!*stopped && kiln_detok_stopped(d)) { /* completed by the text flushed at the end */
        *stopped = true;
        *stop_at = n;
    }
    KT_CHECK(kiln_detok_stopped(d) == *stopped);
    kiln_detok_destroy(d);
    kiln_buf_free(&chunk);
    got_len = all.len;
    return kiln_buf_steal(&all);
}

static void golden_stream(const char *tok_path, const char *golden) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    kiln_tokenizer *t = NULL;
    KT_OK(kiln_tokenizer_load(tok_path, &t));
    json_error_t e;
    json_t *g = json_load_file(golden, JSON_ALLOW_NUL, &e);
    KT_REQUIRE(g != NULL);
    size_t i;
    json_t *c;
    uint64_t rng = 7;
    json_array_foreach(json_object_get(g, "cases"), i, c) {
        json_t *ja = json_object_get(c, "ids");
        size_t n = json_array_size(ja);
        int32_t *ids = malloc((n + 1) * sizeof *ids);
        for (size_t k = 0; k < n; k++) ids[k] = (int32_t)json_integer_value(json_array_get(ja, k));
        for (int skip = 0; skip < 2; skip++) {
            size_t fl;
            char *full = decode(t, ids, n, skip, &fl);
            bool stopped;
            size_t at;
            char *got = stream(t, NULL, 0, ids, n, skip, NULL, 0, &stopped, &at);
            KT_CHECKF(got && got_len == fl && !memcmp(got, full, fl), "case %zu skip %d: stream \"%s\" != decode \"%s\"", i, skip, S(got), S(full));
            free(got);
            /* with a prompt prefix: the emitted text continues decode(prefix) */
            if (n >= 2) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                size_t p = 1 + (size_t)((rng >> 33) % (n - 1));
                /* a prompt encoded from text never ends inside a run of byte
                 * tokens, so do not split one */
                while (p > 1 && (t->flags[ids[p - 1]] & KILN_TOKF_BYTE) && (t->flags[ids[p]] & KILN_TOKF_BYTE)) p--;
                size_t pl;
                char *pre = decode(t, ids, p, skip, &pl);
                while (pl >= 3 && (pl > fl || memcmp(full, pre, pl) != 0) && !memcmp(pre + pl - 3, "\xEF\xBF\xBD", 3)) pl -= 3;
                KT_CHECKF(pl <= fl && !memcmp(full, pre, pl), "case %zu: decode(prefix) is not a prefix", i);
                got = stream(t, ids, p, ids + p, n - p, skip, NULL, 0, &stopped, &at);
                KT_CHECKF(got && got_len == fl - pl && !memcmp(got, full + pl, fl - pl), "case %zu prefix %zu: got \"%s\" want \"%s\"", i, p, S(got), full + pl);
                free(got);
                kiln_free(pre);
            }
            /* a stop string taken from the text, possibly spanning tokens */
            if (fl >= 2 && skip) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                size_t a = (size_t)((rng >> 33) % fl), len = 1 + (size_t)((rng >> 13) % 12);
                while (a > 0 && ((unsigned char)full[a] & 0xC0) == 0x80) a--;
                size_t b = KILN_MIN(fl, a + len);
                while (b < fl && ((unsigned char)full[b] & 0xC0) == 0x80) b++;
                char stop[64];
                if (b - a < sizeof stop && b > a && !memchr(full + a, 0, b - a)) {
                    memcpy(stop, full + a, b - a);
                    stop[b - a] = 0;
                    const char *stops[] = {"\x01never-there", stop};
                    got = stream(t, NULL, 0, ids, n, skip, stops, 2, &stopped, &at);
                    const char *first = memmem(full, fl, stop, b - a);
                    KT_CHECK(stopped && first);
                    KT_CHECKF(got && first && got_len == (size_t)(first - full) && !memcmp(got, full, got_len),
                              "case %zu stop \"%s\": got \"%s\"", i, stop, S(got));
                    /* the stop is reported at the first id whose text completes it */
                    if (stopped && first && at < n) {
                        size_t ql;
                        char *upto = decode(t, ids, at + 1, skip, &ql);
                        KT_CHECK(memmem(upto, ql, stop, b - a) != NULL);
                        kiln_free(upto);
                        /* not earlier, except that a run of byte tokens is
                         * only decoded once the next token closes it */
                        if (at > 0 && !(t->flags[ids[at - 1]] & KILN_TOKF_BYTE)) {
                            upto = decode(t, ids, at, skip, &ql);
                            KT_CHECK(memmem(upto, ql, stop, b - a) == NULL);
                            kiln_free(upto);
                        }
                    }
                    free(got);
                }
            }
            kiln_free(full);
        }
        free(ids);
    }
    json_decref(g);
    kiln_tokenizer_destroy(t);
}

KT_TEST(stream_llama3_golden) { golden_stream(TOKDIR "/llama3/tokenizer.json", TOKDIR "/llama3/golden.json"); }
KT_TEST(stream_llama3_tiktoken_golden) { golden_stream(TOKDIR "/llama3/tokenizer.model", TOKDIR "/llama3/golden.json"); }
KT_TEST(stream_llama2_golden) { golden_stream(TOKDIR "/llama2/tokenizer.model", TOKDIR "/llama2/golden.json"); }

/* Random ids (byte tokens, pieces of characters, specials) stream exactly
 * like decoding at once. */
KT_TEST(stream_random_ids) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    static const char *const files[] = {TOKDIR "/llama3/tokenizer.json", TOKDIR "/llama2/tokenizer.model"};
    uint64_t rng = 99;
    for (int f = 0; f < 2; f++) {
        kiln_tokenizer *t = NULL;
        KT_OK(kiln_tokenizer_load(files[f], &t));
        int32_t v = kiln_tokenizer_vocab_size(t);
        for (int iter = 0; iter < 400; iter++) {
            int32_t ids[24];
            size_t n = 1 + iter % 24;
            for (size_t k = 0; k < n; k++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                uint32_t r = (uint32_t)(rng >> 33);
                /* mostly byte-ish tokens, so characters get split and broken */
                ids[k] = (r & 3) == 0 ? (int32_t)(r % (uint32_t)v) : f == 0 ? (int32_t)(r % 256) : (int32_t)(3 + r % 256);
            }
            for (int skip = 0; skip < 2; skip++) {
                size_t fl;
                char *full = decode(t, ids, n, skip, &fl);
                bool stopped;
                size_t at;
                char *got = stream(t, NULL, 0, ids, n, skip, NULL, 0, &stopped, &at);
                KT_CHECKF(got && full && got_len == fl && !memcmp(got, full, fl), "iteration %d", iter);
                free(got);
                kiln_free(full);
            }
        }
        kiln_tokenizer_destroy(t);
    }
}

KT_TEST(stop_strings) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    kiln_tokenizer *t = NULL;
    KT_OK(kiln_tokenizer_load(TOKDIR "/llama3/tokenizer.json", &t));
    const char *text = "The answer is 42. END of story.";
    int32_t *ids;
    size_t n;
    kiln_encode_options o = {false, false};
    KT_OK(kiln_tokenize(t, text, strlen(text), &o, &ids, &n));
    bool stopped;
    size_t at;
    /* spans tokens; the earliest of several matches wins */
    const char *s1[] = {"story", "s 4", "END"};
    char *got = stream(t, NULL, 0, ids, n, true, s1, 3, &stopped, &at);
    KT_CHECK(stopped && !strcmp(got, "The answer i"));
    free(got);
    /* a held-back prefix of a stop string is released at the end */
    const char *s2[] = {"story!"};
    got = stream(t, NULL, 0, ids, n, true, s2, 1, &stopped, &at);
    KT_CHECK(!stopped && !strcmp(got, text));
    free(got);
    /* while a stop prefix is pending, it is not emitted */
    {
        kiln_detok *d;
        const char *s3[] = {"42. EN!"};
        KT_OK(kiln_detok_create(t, NULL, 0, true, s3, 1, &d));
        kiln_buf out = {0};
        for (size_t i = 0; i < n; i++) {
            bool hit;
            KT_OK(kiln_detok_push(d, ids[i], &out, &hit));
        }
        KT_CHECK(!strcmp(out.data, "The answer is 42. END of story."));
        kiln_buf_free(&out);
        kiln_detok_destroy(d);
    }
    /* empty stop strings are ignored; an out-of-range id is an error */
    {
        kiln_detok *d;
        const char *s4[] = {""};
        KT_OK(kiln_detok_create(t, NULL, 0, true, s4, 1, &d));
        kiln_buf out = {0};
        KT_ERR(kiln_detok_push(d, 1 << 30, &out, NULL), KILN_ERR_INVALID_ARGUMENT, "outside the vocabulary");
        KT_OK(kiln_detok_push(d, ids[0], &out, NULL));
        KT_CHECK(out.len > 0);
        kiln_buf_free(&out);
        kiln_detok_destroy(d);
    }
    /* a stop string at the very start emits nothing */
    const char *s5[] = {"The"};
    got = stream(t, NULL, 0, ids, n, true, s5, 1, &stopped, &at);
    KT_CHECK(stopped && at == 0 && !strcmp(got, ""));
    free(got);
    kiln_free(ids);
    kiln_tokenizer_destroy(t);
}

/* SentencePiece: a prompt before the generated ids keeps their leading space;
 * a prompt ending inside a UTF-8 character is completed by the generation. */
KT_TEST(prefix_context) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    kiln_tokenizer *t = NULL;
    KT_OK(kiln_tokenizer_load(TOKDIR "/llama2/tokenizer.model", &t));
    int32_t prompt[] = {1, 15043};  /* <s> ▁Hello */
    int32_t gen[] = {3186, 29991};  /* ▁world ! */
    bool stopped;
    size_t at;
    char *got = stream(t, prompt, 2, gen, 2, true, NULL, 0, &stopped, &at);
    KT_CHECK(!strcmp(got, " world!"));
    free(got);
    got = stream(t, prompt, 1, gen, 2, true, NULL, 0, &stopped, &at); /* only BOS: nothing before */
    KT_CHECK(!strcmp(got, "world!"));
    free(got);
    /* 😀 = F0 9F 98 80 as byte tokens <0xF0>=243 ...; the prompt ends after two of them */
    int32_t p2[] = {15043, 243, 162};
    int32_t g2[] = {155, 131, 29991};
    got = stream(t, p2, 3, g2, 3, true, NULL, 0, &stopped, &at);
    KT_CHECK(!strcmp(got, "\xf0\x9f\x98\x80!"));
    free(got);
    kiln_tokenizer_destroy(t);
}

/* Stop strings over a two-letter alphabet (overlaps, repeats, borders),
 * one character per token: the output ends where the first stop string
 * completes (the longest one when several end at the same character). */
KT_TEST(stop_strings_random) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    kiln_tokenizer *t = NULL;
    KT_OK(kiln_tokenizer_load(TOKDIR "/llama3/tokenizer.json", &t));
    int32_t ida = kiln_tokenizer_token_id(t, "a"), idb = kiln_tokenizer_token_id(t, "b");
    KT_REQUIRE(ida >= 0 && idb >= 0);
    uint64_t rng = 5;
#define RND() (rng = rng * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(rng >> 33))
    for (int iter = 0; iter < 2000; iter++) {
        char text[40], stops_buf[3][8];
        const char *stops[3];
        int n = 1 + (int)(RND() % 39), ns = 1 + (int)(RND() % 3);
        int32_t ids[40];
        for (int i = 0; i < n; i++) {
            text[i] = (RND() & 1) ? 'a' : 'b';
            ids[i] = text[i] == 'a' ? ida : idb;
        }
        text[n] = 0;
        for (int k = 0; k < ns; k++) {
            int l = 1 + (int)(RND() % 6);
            for (int i = 0; i < l; i++) stops_buf[k][i] = (RND() % 3) ? 'a' : 'b';
            stops_buf[k][l] = 0;
            stops[k] = stops_buf[k];
        }
        /* expected: after the first character that completes a stop string */
        size_t want = (size_t)n;
        bool want_stop = false;
        for (int i = 0; i < n && !want_stop; i++) {
            char pre[41];
            memcpy(pre, text, (size_t)i + 1);
            pre[i + 1] = 0;
            for (int k = 0; k < ns; k++) {
                const char *f = strstr(pre, stops[k]);
                if (f && (size_t)(f - pre) < want) want = (size_t)(f - pre);
                if (f) want_stop = true;
            }
        }
        bool stopped;
        size_t at;
        char *got = stream(t, NULL, 0, ids, (size_t)n, true, stops, ns, &stopped, &at);
        KT_CHECKF(got && stopped == want_stop && got_len == want && !memcmp(got, text, want),
                  "text %s stops %s %s %s: got \"%s\"", text, stops[0], ns > 1 ? stops[1] : "", ns > 2 ? stops[2] : "",
                  S(got));
        free(got);
    }
#undef RND
    kiln_tokenizer_destroy(t);
}

KT_MAIN(KT_CASE(stream_llama3_golden), KT_CASE(stream_llama3_tiktoken_golden), KT_CASE(stream_llama2_golden),
        KT_CASE(stream_random_ids), KT_CASE(stop_strings), KT_CASE(stop_strings_random), KT_CASE(prefix_context))
