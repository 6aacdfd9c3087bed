/*
 * fuzz_server_decode.c -- libFuzzer target: arbitrary bytes as the body of
 * a completions, chat, tokenize and detokenize request. The decoder must
 * never crash, must answer every rejection with a 400 (or 500 for memory)
 * error that names what is wrong and serializes to JSON, and every accepted
 * request must satisfy the documented limits.
 * Built by scripts/fuzz_server.sh; inputs under tests/fuzz/seeds and
 * tests/fuzz/regress are replayed by tests/test_server_fuzz.c.
 */
#include "../../server/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

#define DEC_REQUIRE(c)                                                                              \
    do {                                                                                            \
        if (!(c)) {                                                                                 \
            fprintf(stderr, "fuzz_server_decode: invariant failed: %s (line %d)\n", #c, __LINE__);   \
            abort();                                                                                \
        }                                                                                           \
    } while (0)

static void dec_check_error(const api_error *e) {
    DEC_REQUIRE(e->status == 400 || e->status == 404 || e->status == 500);
    DEC_REQUIRE(e->message[0] != 0);
    char *j = api_error_json(e);
    DEC_REQUIRE(j != NULL);
    json_error_t je;
    json_t *back = json_loads(j, 0, &je);
    DEC_REQUIRE(back != NULL);
    json_t *err = json_object_get(back, "error");
    DEC_REQUIRE(json_is_object(err) && json_is_string(json_object_get(err, "message")));
    DEC_REQUIRE(json_object_get(err, "param") && json_object_get(err, "code") && json_object_get(err, "type"));
    json_decref(back);
    free(j);
}

static void dec_check_request(const api_request *r, api_kind kind) {
    DEC_REQUIRE(r->n >= 1 && r->n <= 128);
    DEC_REQUIRE(r->temperature >= 0 && r->temperature <= 2);
    DEC_REQUIRE(r->top_p > 0 && r->top_p <= 1);
    DEC_REQUIRE(r->min_p >= 0 && r->min_p <= 1);
    DEC_REQUIRE(r->presence_penalty >= -2 && r->presence_penalty <= 2);
    DEC_REQUIRE(r->frequency_penalty >= -2 && r->frequency_penalty <= 2);
    DEC_REQUIRE(r->repetition_penalty > 0 && r->repetition_penalty <= 2);
    DEC_REQUIRE(r->top_k >= -1);
    DEC_REQUIRE(!r->max_tokens_set || r->max_tokens >= 1);
    DEC_REQUIRE(r->min_tokens >= 0);
    DEC_REQUIRE(r->top_logprobs >= 0 && r->top_logprobs <= API_MAX_LOGPROBS);
    DEC_REQUIRE(r->n_stop >= 0 && r->n_stop <= API_MAX_STOP);
    for (int i = 0; i < r->n_stop; i++) {
        size_t l = strlen(r->stop[i]);
        DEC_REQUIRE(l >= 1 && l <= API_MAX_STOP_LEN);
    }
    DEC_REQUIRE(r->n_stop_token_ids <= API_MAX_STOP_IDS);
    for (int i = 0; i < r->n_stop_token_ids; i++) DEC_REQUIRE(r->stop_token_ids[i] >= 0 && r->stop_token_ids[i] < 512);
    DEC_REQUIRE(!r->include_usage || r->stream);
    if (kind == API_COMPLETION) {
        DEC_REQUIRE(r->n_prompts >= 1 && r->n_prompts <= API_MAX_PROMPTS);
        for (int i = 0; i < r->n_prompts; i++) {
            const api_prompt *p = &r->prompts[i];
            DEC_REQUIRE((p->text != NULL) != (p->ids != NULL));
            if (p->text) DEC_REQUIRE(p->text_len >= 1 && strlen(p->text) == p->text_len);
            else {
                DEC_REQUIRE(p->n_ids >= 1);
                for (int k = 0; k < p->n_ids; k++) DEC_REQUIRE(p->ids[k] >= 0 && p->ids[k] < 512);
            }
        }
    } else {
        DEC_REQUIRE(r->messages_json != NULL);
        json_error_t je;
        json_t *m = json_loads(r->messages_json, 0, &je);
        DEC_REQUIRE(json_is_array(m) && json_array_size(m) >= 1);
        size_t i;
        json_t *v;
        json_array_foreach(m, i, v) {
            DEC_REQUIRE(json_is_string(json_object_get(v, "role")));
            json_t *c = json_object_get(v, "content");
            DEC_REQUIRE(!c || json_is_string(c) || json_is_null(c));
        }
        json_decref(m);
    }
}

int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    api_error err;
    memset(&err, 0, sizeof err);
    json_t *root = api_parse_body((const char *)data, size, &err);
    if (!root) {
        dec_check_error(&err);
        return 0;
    }
    api_limits lim = {128, 512};
    for (int k = 0; k < 2; k++) {
        api_request r;
        memset(&err, 0, sizeof err);
        if (api_decode_request(root, (api_kind)k, &lim, &r, &err)) {
            dec_check_request(&r, (api_kind)k);
            api_request_free(&r);
        } else {
            dec_check_error(&err);
            DEC_REQUIRE(r.prompts == NULL && r.stop == NULL && r.messages_json == NULL);
        }
    }
    api_tokenize_req tr;
    if (api_decode_tokenize(root, &tr, &err)) {
        DEC_REQUIRE((tr.prompt != NULL) != (tr.messages_json != NULL));
        api_tokenize_req_free(&tr);
    } else {
        dec_check_error(&err);
    }
    int32_t *ids = NULL;
    int n = 0;
    char *model = NULL;
    if (api_decode_detokenize(root, &ids, &n, &model, &err)) {
        for (int i = 0; i < n; i++) DEC_REQUIRE(ids[i] >= 0);
        free(ids);
        free(model);
    } else {
        dec_check_error(&err);
    }
    json_decref(root);
    return 0;
}
