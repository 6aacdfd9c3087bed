// label: model
/* test_glide.c -- the GliDe drafter: its forward (prefill without, decode
 * with cross attention into the verifier's last-layer cache) matches the
 * PyTorch reference of scripts/make_glide_reference.py; and GliDe
 * speculation inside the engine leaves greedy output unchanged. */
#include "engine_internal.h"
#include "kt_engine.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double rel_err(const float *got, json_t *ref, int n) {
    double md = 0, mr = 0;
    for (int i = 0; i < n; i++) {
        double r = json_number_value(json_array_get(ref, (size_t)i));
        md = fmax(md, fabs(got[i] - r));
        mr = fmax(mr, fabs(r));
    }
    return md / mr;
}

KT_TEST(test_glide_forward_matches_reference) {
    json_error_t jerr;
    json_t *g = json_load_file(KT_DATA "/golden/glide-tiny.json", 0, &jerr);
    KT_REQUIRE(g);
    json_t *jp = json_object_get(g, "prompt");
    int n = (int)json_array_size(jp);
    int32_t prompt[64];
    for (int i = 0; i < n; i++) prompt[i] = (int32_t)json_integer_value(json_array_get(jp, (size_t)i));
    int32_t next = (int32_t)json_integer_value(json_object_get(g, "next"));
    int spec_k = (int)json_integer_value(json_object_get(g, "n_spec_tokens"));

    kiln_engine_params p;
    kiln_engine_default_params(&p);
    p.model = KT_MODEL("llama3-gqa");
    kiln_model_files tf, df;
    KT_OK(kiln_model_files_open(&p, "cpu", 0, &tf));
    p.model = KT_MODEL("glide-tiny");
    KT_OK(kiln_model_files_open_drafter(&p, "cpu", &tf.cfg, spec_k, &df));
    kiln_exec_config xc = {.max_tokens = 64, .max_out = 4, .max_seqs = 4, .block_size = 4, .max_blocks_per_seq = 32,
                           .num_kv_blocks = 64, .n_threads = 2, .seed = 1};
    kiln_exec *tx = NULL, *dx = NULL;
    KT_OK(kiln_exec_cpu_create(&tf, &xc, &tx));
    KT_OK(kiln_exec_cpu_create(&df, &xc, &dx));
    dx->cross = tx;
    kiln_kv_manager m;
    KT_OK(kiln_kv_manager_init(&m, 64, 4, 32));
    kiln_kv_table tt, dt;
    KT_OK(kiln_kv_table_init(&m, &tt));
    KT_OK(kiln_kv_table_init(&m, &dt));
    KT_REQUIRE(kiln_kv_grow(&m, &tt, n) && kiln_kv_grow(&m, &dt, n + 1));
    int32_t pos[64], slots[64], dslots[64], tables[32] = {0}, dtables[32] = {0};
    for (int i = 0; i < n; i++) {
        pos[i] = i;
        slots[i] = kiln_kv_slot(&m, &tt, i);
        dslots[i] = kiln_kv_slot(&m, &dt, i);
    }
    memcpy(tables, tt.blocks, sizeof(int32_t) * (size_t)tt.n_blocks);
    memcpy(dtables, dt.blocks, sizeof(int32_t) * (size_t)dt.n_blocks);
    int32_t qstart[2] = {0, n}, ctx[1] = {n}, out[1] = {n - 1}, cross_ctx[1] = {n};
    /* the verifier's prefill fills its cache */
    kiln_batch b = {.n_tokens = n, .n_seqs = 1, .n_out = 1, .tokens = prompt, .positions = pos, .qstart = qstart,
                    .ctx_len = ctx, .block_tables = tables, .max_blocks = 32, .slots = slots, .out_rows = out,
                    .max_q_len = n, .max_ctx_len = n};
    const float *logits;
    KT_OK(tx->vt->forward(tx, &b, &logits));
    /* drafter prefill: several query tokens, no cross attention */
    b.slots = dslots;
    b.block_tables = dtables;
    b.cross_tables = tables;
    b.cross_ctx = cross_ctx;
    KT_OK(dx->vt->forward(dx, &b, &logits));
    double e1 = rel_err(logits, json_object_get(g, "prefill_logits"), 512);
    KT_CHECKF(e1 < 1e-4, "prefill logits relative error %.3g", e1);
    /* drafter decode: one token at position n glimpses the verifier */
    int32_t p1[1] = {n}, s1[1] = {kiln_kv_slot(&m, &dt, n)}, q1[2] = {0, 1}, c1[1] = {n + 1}, o1[1] = {0};
    kiln_batch d = {.n_tokens = 1, .n_seqs = 1, .n_out = 1, .tokens = &next, .positions = p1, .qstart = q1,
                    .ctx_len = c1, .block_tables = dtables, .max_blocks = 32, .slots = s1, .out_rows = o1,
                    .max_q_len = 1, .max_ctx_len = n + 1, .cross_tables = tables, .cross_ctx = cross_ctx};
    KT_OK(dx->vt->forward(dx, &d, &logits));
    double e2 = rel_err(logits, json_object_get(g, "decode_logits"), 512);
    KT_CHECKF(e2 < 1e-4, "decode logits relative error %.3g", e2);
    /* and the cross attention matters: without the verifier's cache it differs */
    cross_ctx[0] = 1;
    KT_OK(dx->vt->forward(dx, &d, &logits));
    KT_CHECK(rel_err(logits, json_object_get(g, "decode_logits"), 512) > 1e-3);
    kiln_kv_table_fini(&m, &tt);
    kiln_kv_table_fini(&m, &dt);
    kiln_kv_manager_fini(&m);
    kiln_exec_destroy(dx);
    kiln_exec_destroy(tx);
    kiln_model_files_close(&df);
    kiln_model_files_close(&tf);
    json_decref(g);
}

KT_TEST(test_glide_speculation_greedy_identical) {
    int32_t prompt[20];
    for (int i = 0; i < 20; i++) prompt[i] = 7 + (i * 29) % 400;
    kiln_engine_params p;
    kt_engine_params(&p, KT_MODEL("llama3-gqa"), "cpu");
    p.block_size = 4;
    kiln_request r[3];
    for (int i = 0; i < 3; i++) kt_greedy_request(&r[i], prompt + i, 12 + 3 * i, 30);
    kiln_engine *e = NULL;
    KT_OK(kiln_engine_create(&p, &e));
    kiln_result ref[3], got[3];
    KT_OK(kiln_engine_generate(e, r, 3, ref));
    kiln_engine_destroy(e);
    p.speculative_method = "glide";
    p.speculative_model = KT_MODEL("glide-tiny");
    p.num_speculative_tokens = 3;
    KT_OK(kiln_engine_create(&p, &e));
    KT_OK(kiln_engine_generate(e, r, 3, got));
    kiln_stats s;
    kiln_engine_get_stats(e, &s);
    KT_CHECK(s.spec_draft_tokens_total > 0 && s.num_free_kv_blocks == s.num_kv_blocks);
    for (int i = 0; i < 3; i++) {
        KT_CHECKF(got[i].n_ids == ref[i].n_ids && !memcmp(got[i].ids, ref[i].ids, sizeof(int32_t) * 30),
                  "request %d differs with GliDe speculation", i);
        kiln_result_free(&got[i]);
        kiln_result_free(&ref[i]);
    }
    kiln_engine_destroy(e);
    /* a GliDe model needs the glide method, and a plain model is no GliDe */
    p.speculative_method = "draft";
    KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_INVALID_ARGUMENT, "is a GliDe drafter");
    p.speculative_method = "glide";
    p.speculative_model = KT_MODEL("llama-tied");
    KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_INVALID_ARGUMENT, "is not a GliDe drafter");
    /* alone, a GliDe checkpoint is not a model */
    p.model = KT_MODEL("glide-tiny");
    p.speculative_method = NULL;
    KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_POLICY, "GliDe models are drafters");
}

KT_MAIN(KT_CASE(test_glide_forward_matches_reference), KT_CASE(test_glide_speculation_greedy_identical))
