// label: model
/* test_models.c -- the CPU engine against Hugging Face transformers on the
 * tiny random models of tests/data (goldens made by
 * scripts/make_test_models.py): first-step logits within 1e-4 relative
 * error (max |diff| / max |golden|), greedy continuations of 48 tokens equal
 * up to the first step whose reference top-2 margin is under 1e-3; batching
 * invariance (one at a time, together, staggered arrivals, and a KV pool so
 * small that preemption must happen); the KV pool is all free afterwards. */
#include "kt_golden.h"

#define MARGIN_MIN 1e-3

static kiln_status make_engine(const char *model, int num_kv_blocks, int max_num_seqs, kiln_engine **e) {
    /* llama-dynamic's goldens run past its max_position_embeddings (64): that
     * is what dynamic NTK scaling is for */
    int max_len = !strcmp(model, "llama-dynamic") ? 256 : 0;
    char dir[512];
    kiln_engine_params p;
    kt_engine_params(&p, kt_model_dir(dir, sizeof dir, model), "cpu");
    p.n_threads = 2;
    p.num_kv_blocks = num_kv_blocks;
    p.max_num_seqs = max_num_seqs;
    p.block_size = 4; /* small blocks: sequences cross many block boundaries */
    p.max_model_len = max_len;
    return kiln_engine_create(&p, e);
}

/* Number of leading steps that must match: up to and including the first
 * step whose reference margin is below MARGIN_MIN (after it, any token is
 * acceptable since bf16-level noise may flip the choice). */
static int steps_to_compare(const kt_golden *c) {
    for (int k = 0; k < KT_N_GREEDY; k++)
        if (c->margins[k] < MARGIN_MIN) return k; /* that step may flip: compare before it */
    return KT_N_GREEDY;
}

static void check_first_logits(kiln_engine *e, const kt_golden *c, const char *model, int ci) {
    /* one prefill through the executor, exactly as the engine runs it */
    float l[KT_VOCAB];
    KT_OK(kt_prefill_logits(e, c->prompt, c->n_prompt, l));
    double rel = kt_rel_max(l, c->logits, KT_VOCAB);
    KT_CHECKF(rel < 1e-4, "%s case %d: first-step logits relative error %.3g", model, ci, rel);
}

static void check_greedy(const char *model, const kt_golden *c, const kiln_result *res, int ci, const char *how) {
    int n = steps_to_compare(c);
    KT_CHECKF(res->n_ids == KT_N_GREEDY, "%s case %d (%s): %d tokens", model, ci, how, res->n_ids);
    for (int k = 0; k < n && k < res->n_ids; k++) {
        if (res->ids[k] != c->greedy[k]) {
            KT_CHECKF(false, "%s case %d (%s): step %d token %d, reference %d (margin %.3g)", model, ci, how, k,
                      res->ids[k], c->greedy[k], c->margins[k]);
            break;
        }
    }
}

static void run_model(const char *model) {
    static kt_golden g[8];
    int n = kt_load_golden(model, g, 8);
    KT_REQUIRE(n > 0);
    kiln_engine *e = NULL;
    KT_OK(make_engine(model, 0, 8, &e));
    for (int i = 0; i < n; i++) check_first_logits(e, &g[i], model, i);
    kiln_request reqs[16];
    kiln_result res[16];
    /* all together */
    kt_greedy_requests(reqs, g, n);
    KT_OK(kiln_engine_generate(e, reqs, n, res));
    for (int i = 0; i < n; i++) {
        check_greedy(model, &g[i], &res[i], i, "batched");
        kiln_result_free(&res[i]);
    }
    /* one at a time */
    for (int i = 0; i < n; i++) {
        KT_OK(kiln_engine_generate(e, &reqs[i], 1, &res[i]));
        check_greedy(model, &g[i], &res[i], i, "alone");
        kiln_result_free(&res[i]);
    }
    kiln_stats s;
    kiln_engine_get_stats(e, &s);
    KT_CHECK(s.num_free_kv_blocks == s.num_kv_blocks && s.num_running == 0 && s.num_waiting == 0);
    kiln_engine_destroy(e);
}

KT_TEST(test_llama3_gqa) { run_model("llama3-gqa"); }
KT_TEST(test_llama3_sharded) {
    /* same weights as llama3-gqa, three shards */
    static kt_golden g[8];
    int n = kt_load_golden("llama3-gqa", g, 8);
    KT_REQUIRE(n > 0);
    kiln_engine *e = NULL;
    KT_OK(make_engine("llama3-sharded", 0, 8, &e));
    for (int i = 0; i < n; i++) check_first_logits(e, &g[i], "llama3-sharded", i);
    kiln_engine_destroy(e);
}
KT_TEST(test_llama2_mha) { run_model("llama2-mha"); }
KT_TEST(test_llama_linear) { run_model("llama-linear"); }
KT_TEST(test_llama_dynamic) { run_model("llama-dynamic"); }
KT_TEST(test_llama_tied) { run_model("llama-tied"); }
KT_TEST(test_qwen2_bias) { run_model("qwen2-bias"); }
KT_TEST(test_mistral_swa) { run_model("mistral-swa"); }
KT_TEST(test_phi3) { run_model("phi3"); }
KT_TEST(test_llama3_hd128) { run_model("llama3-hd128"); }

/* ------------------------------------------------------- batching invariance */

typedef struct collect {
    int32_t ids[KT_N_GREEDY + 4];
    int n;
    bool done;
} collect;

static int collect_cb(void *u, const kiln_stream_event *ev) {
    collect *c = u;
    if (ev->token >= 0 && c->n < KT_N_GREEDY + 4) c->ids[c->n++] = ev->token;
    if (ev->finish != KILN_FINISH_NONE) c->done = true;
    return 0;
}

KT_TEST(test_staggered_and_preemption) {
    static kt_golden g[8];
    int n = kt_load_golden("llama3-gqa", g, 8);
    KT_REQUIRE(n > 0 && n <= 8);
    kiln_request reqs[8];
    kt_greedy_requests(reqs, g, n);
    /* reference: all at once */
    kiln_engine *e = NULL;
    KT_OK(make_engine("llama3-gqa", 0, 8, &e));
    kiln_result ref[8];
    KT_OK(kiln_engine_generate(e, reqs, n, ref));
    /* staggered arrivals: a new request every 3 steps, in reverse order */
    collect col[8];
    memset(col, 0, sizeof col);
    int added = 0, steps = 0, left = 1;
    while (added < n || left > 0) {
        if (steps % 3 == 0 && added < n) {
            int i = n - 1 - added;
            kiln_request r = reqs[i];
            r.on_event = collect_cb;
            r.user = &col[i];
            KT_OK(kiln_engine_add_request(e, &r, NULL));
            added++;
        }
        KT_OK(kiln_engine_step(e, &left));
        KT_REQUIRE(++steps < 10000);
    }
    for (int i = 0; i < n; i++) {
        KT_CHECK(col[i].done && col[i].n == ref[i].n_ids);
        KT_CHECKF(!memcmp(col[i].ids, ref[i].ids, sizeof(int32_t) * (size_t)ref[i].n_ids),
                  "case %d differs when arrivals are staggered", i);
    }
    kiln_engine_destroy(e);
    /* preemption: 45 blocks x 4 tokens hold the longest request (161 tokens)
     * but not all five (431 tokens) */
    KT_OK(make_engine("llama3-gqa", 45, 8, &e));
    kiln_result pre[8];
    KT_OK(kiln_engine_generate(e, reqs, n, pre));
    kiln_stats s;
    kiln_engine_get_stats(e, &s);
    KT_CHECKF(s.num_preemptions_total > 0, "no preemption happened");
    KT_CHECK(s.num_free_kv_blocks == s.num_kv_blocks && s.num_running == 0);
    for (int i = 0; i < n; i++) {
        KT_CHECK(pre[i].n_ids == ref[i].n_ids && pre[i].n_ids == KT_N_GREEDY);
        KT_CHECKF(!memcmp(pre[i].ids, ref[i].ids, sizeof(int32_t) * (size_t)ref[i].n_ids),
                  "case %d differs after preemption", i);
        kiln_result_free(&pre[i]);
        kiln_result_free(&ref[i]);
    }
    kiln_engine_destroy(e);
}

KT_MAIN(KT_CASE(test_llama3_gqa), KT_CASE(test_llama3_sharded), KT_CASE(test_llama2_mha), KT_CASE(test_llama_linear),
        KT_CASE(test_llama_dynamic), KT_CASE(test_llama_tied), KT_CASE(test_qwen2_bias), KT_CASE(test_mistral_swa),
        KT_CASE(test_phi3), KT_CASE(test_llama3_hd128), KT_CASE(test_staggered_and_preemption))
