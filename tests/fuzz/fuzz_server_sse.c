/*
 * fuzz_server_sse.c -- libFuzzer target for the streaming output path:
 * the input is a sequence of engine events (choice, text bytes -- possibly
 * cut inside UTF-8 sequences or invalid --, logprobs with token names of
 * arbitrary bytes, final flags). They go through the per-choice UTF-8 carry,
 * the chunk builder and SSE framing exactly as the server streams them.
 * Checks: every block is "data: <JSON>\n\n" (or [DONE]), every string is
 * valid UTF-8, and each choice's streamed text equals repairing all of its
 * bytes at once (chunk boundaries change nothing); logprob entries match
 * the tokens sent.
 */
#include "../../server/api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

#define SSE_REQUIRE(c)                                                                            \
    do {                                                                                          \
        if (!(c)) {                                                                               \
            fprintf(stderr, "fuzz_server_sse: invariant failed: %s (line %d)\n", #c, __LINE__);    \
            abort();                                                                              \
        }                                                                                         \
    } while (0)

#define SSE_CHOICES 4

typedef struct sse_names {
    const uint8_t *data;
    size_t size;
} sse_names;

/* token names: bytes of the input picked by id (may be invalid UTF-8) */
static char *sse_name(void *user, int32_t id, size_t *len) {
    sse_names *n = user;
    if (id % 7 == 6) return NULL; /* no name: "<id>" */
    size_t off = n->size ? (size_t)id % n->size : 0, l = (size_t)(id % 5);
    if (off + l > n->size) l = n->size - off;
    char *s = malloc(l + 1);
    if (!s) return NULL;
    if (l) memcpy(s, n->data + off, l);
    s[l] = 0;
    *len = l;
    return s;
}

int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    api_kind kind = (data[0] & 1) ? API_CHAT : API_COMPLETION;
    api_resp_info ri = {kind, "cmpl-fuzz", 1, "m\"o\\del", (data[0] & 2) != 0};
    sse_names names = {data, size};
    api_token_namer namer = {sse_name, &names};
    api_utf8 carry[SSE_CHOICES];
    api_buf raw[SSE_CHOICES];
    bool done[SSE_CHOICES];
    int n_tokens[SSE_CHOICES];
    memset(carry, 0, sizeof carry);
    memset(raw, 0, sizeof raw);
    memset(done, 0, sizeof done);
    memset(n_tokens, 0, sizeof n_tokens);
    api_buf out = {0};
    size_t i = 1;
    while (i + 2 <= size) {
        int ch = data[i] & 3;
        bool final = (data[i] & 4) != 0, has_tok = (data[i] & 8) != 0;
        size_t len = data[i + 1];
        i += 2;
        if (len > size - i) len = size - i;
        const char *text = (const char *)data + i;
        i += len;
        if (done[ch]) continue;
        api_buf_put(&raw[ch], text, len);
        api_buf delta = {0};
        api_utf8_feed(&carry[ch], text, len, final, &delta);
        json_t *lp = NULL;
        if (has_tok) {
            kiln_logprob top[5];
            int n_top = (int)(len % 6);
            for (int k = 0; k < n_top; k++) top[k] = (kiln_logprob){(int32_t)(k * 31 + len), -(float)k};
            api_token t = {(int32_t)len, (len & 1) ? -1.5f : -INFINITY, top, n_top > 5 ? 5 : n_top};
            api_logprobs acc;
            api_logprobs_init(&acc, kind);
            api_logprobs_add(&acc, kind, &t, raw[ch].len, &namer);
            lp = api_logprobs_take(&acc, kind);
            api_logprobs_free(&acc);
            n_tokens[ch]++;
        }
        json_t *chunk = api_chunk(&ri, ch, delta.data, delta.len, false, lp,
                                  final ? KILN_FINISH_STOP : KILN_FINISH_NONE);
        api_sse_json(&out, chunk);
        json_decref(chunk);
        api_buf_free(&delta);
        if (final) done[ch] = true;
    }
    for (int ch = 0; ch < SSE_CHOICES; ch++) {
        if (done[ch]) continue;
        api_buf delta = {0};
        api_utf8_feed(&carry[ch], "", 0, true, &delta);
        json_t *chunk = api_chunk(&ri, ch, delta.data, delta.len, false, NULL, KILN_FINISH_LENGTH);
        api_sse_json(&out, chunk);
        json_decref(chunk);
        api_buf_free(&delta);
    }
    json_t *u = api_usage_chunk(&ri, 3, 4);
    api_sse_json(&out, u);
    json_decref(u);
    api_sse_done(&out);
    SSE_REQUIRE(!out.oom);

    /* parse the stream back */
    api_buf got[SSE_CHOICES];
    memset(got, 0, sizeof got);
    int finishes[SSE_CHOICES] = {0}, toks[SSE_CHOICES] = {0};
    bool saw_done = false;
    const char *p = out.data, *end = out.data + out.len;
    while (p < end) {
        const char *sep = strstr(p, "\n\n");
        SSE_REQUIRE(sep != NULL);
        SSE_REQUIRE(!strncmp(p, "data: ", 6));
        SSE_REQUIRE(memchr(p, '\n', (size_t)(sep - p)) == NULL);
        SSE_REQUIRE(!saw_done);
        if (sep - p == 12 && !strncmp(p + 6, "[DONE]", 6)) {
            saw_done = true;
        } else {
            json_error_t je;
            json_t *o = json_loadb(p + 6, (size_t)(sep - p - 6), JSON_ALLOW_NUL, &je);
            SSE_REQUIRE(o != NULL);
            SSE_REQUIRE(!strcmp(json_string_value(json_object_get(o, "model")), "m\"o\\del"));
            json_t *choices = json_object_get(o, "choices");
            SSE_REQUIRE(json_is_array(choices));
            size_t k;
            json_t *c;
            json_array_foreach(choices, k, c) {
                int idx = (int)json_integer_value(json_object_get(c, "index"));
                SSE_REQUIRE(idx >= 0 && idx < SSE_CHOICES);
                json_t *t = kind == API_CHAT ? json_object_get(json_object_get(c, "delta"), "content")
                                             : json_object_get(c, "text");
                if (t) api_buf_put(&got[idx], json_string_value(t), json_string_length(t));
                else SSE_REQUIRE(kind == API_CHAT);
                if (json_is_string(json_object_get(c, "finish_reason"))) finishes[idx]++;
                json_t *lp = json_object_get(c, "logprobs");
                if (json_is_object(lp)) {
                    json_t *arr = kind == API_CHAT ? json_object_get(lp, "content") : json_object_get(lp, "tokens");
                    SSE_REQUIRE(json_array_size(arr) == 1);
                    toks[idx]++;
                }
            }
            json_decref(o);
        }
        p = sep + 2;
    }
    SSE_REQUIRE(saw_done);
    for (int ch = 0; ch < SSE_CHOICES; ch++) {
        api_buf want = {0};
        api_utf8 u1 = {0};
        api_utf8_feed(&u1, raw[ch].data ? raw[ch].data : "", raw[ch].len, true, &want);
        SSE_REQUIRE(want.len == got[ch].len && (want.len == 0 || !memcmp(want.data, got[ch].data, want.len)));
        SSE_REQUIRE(finishes[ch] == 1);
        SSE_REQUIRE(toks[ch] == n_tokens[ch]);
        api_buf_free(&want);
        api_buf_free(&got[ch]);
        api_buf_free(&raw[ch]);
    }
    api_buf_free(&out);
    return 0;
}
