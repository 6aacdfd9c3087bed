/*
 * kt_golden.h -- shared by the model tests: the transformers goldens of
 * tests/data/golden/<model>.json (scripts/make_test_models.py) and a
 * first-step forward through an engine's executor, run as the engine runs a
 * prefill.
 */
#ifndef KT_GOLDEN_H
#define KT_GOLDEN_H

#include "engine_internal.h"
#include "kt.h"
#include "kt_engine.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define KT_N_GREEDY 48
#define KT_MAX_PROMPT 128
#define KT_VOCAB 512

typedef struct kt_golden {
    int32_t prompt[KT_MAX_PROMPT];
    int n_prompt;
    float logits[KT_VOCAB];           /* first-step logits (fp32 from bf16 weights) */
    int32_t greedy[KT_N_GREEDY];      /* greedy continuation                       */
    double margins[KT_N_GREEDY];      /* top-1 minus top-2 logit at each step      */
} kt_golden;

/* Load up to max cases of golden/<model>.json; returns how many, or -1. */
static inline int kt_load_golden(const char *model, kt_golden *g, int max) {
    char path[512];
    snprintf(path, sizeof path, "%s/golden/%s.json", KT_DATA, model);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root) {
        fprintf(stderr, "  cannot load %s: %s\n", path, err.text);
        return -1;
    }
    json_t *cases = json_object_get(root, "cases");
    int n = (int)json_array_size(cases);
    if (n > max) n = max;
    for (int i = 0; i < n; i++) {
        json_t *c = json_array_get(cases, (size_t)i);
        json_t *p = json_object_get(c, "prompt"), *l = json_object_get(c, "first_logits");
        json_t *gr = json_object_get(c, "greedy"), *m = json_object_get(c, "margins");
        g[i].n_prompt = (int)json_array_size(p);
        if (g[i].n_prompt > KT_MAX_PROMPT || json_array_size(l) != KT_VOCAB) {
            json_decref(root);
            return -1;
        }
        for (int k = 0; k < g[i].n_prompt; k++) g[i].prompt[k] = (int32_t)json_integer_value(json_array_get(p, (size_t)k));
        for (int k = 0; k < KT_VOCAB; k++) g[i].logits[k] = (float)json_number_value(json_array_get(l, (size_t)k));
        for (int k = 0; k < KT_N_GREEDY; k++) {
            g[i].greedy[k] = (int32_t)json_integer_value(json_array_get(gr, (size_t)k));
            g[i].margins[k] = json_number_value(json_array_get(m, (size_t)k));
        }
    }
    json_decref(root);
    return n;
}

/* One prefill of the prompt through e's executor; out[KT_VOCAB] receives
 * the last position's logits (NaN when the forward fails). */
static inline kiln_status kt_prefill_logits(kiln_engine *e, const int32_t *prompt, int n, float *out) {
    kiln_kv_table t;
    for (int k = 0; k < KT_VOCAB; k++) out[k] = NAN;
    kiln_status st = kiln_kv_table_init(&e->kv, &t);
    if (st) return st;
    if (!kiln_kv_grow(&e->kv, &t, n)) {
        kiln_kv_table_fini(&e->kv, &t);
        return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "no KV blocks for the prompt");
    }
    int32_t pos[KT_MAX_PROMPT], slots[KT_MAX_PROMPT];
    int32_t *tables = calloc((size_t)e->kv.max_blocks_per_seq, sizeof(int32_t));
    for (int i = 0; i < n; i++) pos[i] = i, slots[i] = kiln_kv_slot(&e->kv, &t, i);
    memcpy(tables, t.blocks, sizeof(int32_t) * (size_t)t.n_blocks);
    int32_t qs[2] = {0, n}, ctx[1] = {n}, o[1] = {n - 1};
    kiln_batch b = {.n_tokens = n, .n_seqs = 1, .n_out = 1, .tokens = prompt, .positions = pos, .qstart = qs,
                    .ctx_len = ctx, .block_tables = tables, .max_blocks = e->kv.max_blocks_per_seq, .slots = slots,
                    .out_rows = o, .max_q_len = n, .max_ctx_len = n};
    const float *l = NULL;
    st = e->exec->vt->forward(e->exec, &b, &l);
    if (!st) memcpy(out, l, sizeof(float) * KT_VOCAB);
    kiln_kv_table_fini(&e->kv, &t);
    free(tables);
    return st;
}

/* Greedy requests for the golden prompts, as the goldens were made: no
 * sampling, KT_N_GREEDY tokens, EOS ignored. */
static inline void kt_greedy_requests(kiln_request *r, const kt_golden *g, int n) {
    for (int i = 0; i < n; i++) kt_greedy_request(&r[i], g[i].prompt, g[i].n_prompt, KT_N_GREEDY);
}

/* max |got - ref| / max |ref| (the CPU tests' strict measure) */
static inline double kt_rel_max(const float *got, const float *ref, int n) {
    double md = 0, mr = 0;
    for (int k = 0; k < n; k++) {
        md = isnan(got[k]) ? INFINITY : fmax(md, fabs((double)got[k] - ref[k]));
        mr = fmax(mr, fabs((double)ref[k]));
    }
    return md / mr;
}

#endif
