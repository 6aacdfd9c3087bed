// label: model
/* test_spec.c -- speculative decoding on the CPU: greedy output is
 * token-for-token identical to non-speculative output for the n-gram and
 * draft-model drafters, in batches mixing speculating and ordinary
 * requests, under preemption, and when speculation is toggled mid-run; a
 * drafter that always agrees (the target as its own draft) is accepted
 * every time, emitting k + 1 tokens per verification, also with random
 * (load format dummy) weights; the step-timing stats count prefill, plain
 * decode and verification forwards and the drafting time. */
#include "kiln.h"
#include "kt_engine.h"

#include <stdio.h>
#include <stdlib.h>

#define MODEL KT_MODEL("llama3-gqa")
#define NREQ 6
#define NTOK 40

static kiln_engine *make(const char *method, const char *draft, int k, int kv_blocks) {
    kiln_engine_params p;
    kt_engine_params(&p, MODEL, "cpu");
    p.n_threads = 2;
    p.block_size = 4;
    p.num_kv_blocks = kv_blocks;
    p.speculative_method = method;
    p.speculative_model = draft;
    p.num_speculative_tokens = k;
    return kt_engine_create(&p, "llama3-gqa, speculative method %s", method ? method : "none");
}

/* Prompts that repeat themselves, so the n-gram drafter finds matches. */
static int32_t prompts[NREQ][32];
static int plen[NREQ];

static void make_prompts(void) {
    for (int i = 0; i < NREQ; i++) {
        plen[i] = 8 + 4 * i;
        for (int j = 0; j < plen[i]; j++) prompts[i][j] = 10 + (int32_t)((j % (3 + i)) * 37 + i * 11) % 500;
    }
}

static void requests(kiln_request *r, bool mixed) {
    for (int i = 0; i < NREQ; i++) {
        kt_greedy_request(&r[i], prompts[i], plen[i], NTOK);
        if (mixed && i % 2) r[i].num_speculative_tokens = 0; /* ordinary request in the same batch */
    }
}

static void reference(kiln_result *ref) {
    kiln_engine *e = make(NULL, NULL, 4, 0);
    kiln_request r[NREQ];
    requests(r, false);
    kiln_engine_generate(e, r, NREQ, ref);
    kiln_engine_destroy(e);
}

static void same(const kiln_result *a, const kiln_result *b, const char *what) {
    for (int i = 0; i < NREQ; i++) {
        KT_CHECKF(a[i].n_ids == b[i].n_ids && !memcmp(a[i].ids, b[i].ids, sizeof(int32_t) * (size_t)a[i].n_ids),
                  "%s: request %d differs from non-speculative output", what, i);
    }
}

static void free_results(kiln_result *r) {
    for (int i = 0; i < NREQ; i++) kiln_result_free(&r[i]);
}

KT_TEST(test_ngram_identical) {
    make_prompts();
    kiln_result ref[NREQ], got[NREQ];
    reference(ref);
    for (int mixed = 0; mixed < 2; mixed++) {
        kiln_engine *e = make("ngram", NULL, 4, 0);
        KT_REQUIRE(e);
        kiln_request r[NREQ];
        requests(r, mixed);
        KT_OK(kiln_engine_generate(e, r, NREQ, got));
        same(ref, got, mixed ? "ngram, mixed batch" : "ngram");
        kiln_stats s;
        kiln_engine_get_stats(e, &s);
        KT_CHECKF(s.spec_draft_tokens_total > 0, "the n-gram drafter proposed nothing");
        KT_CHECK(s.num_free_kv_blocks == s.num_kv_blocks);
        fprintf(stderr, "  ngram%s: drafted %llu, accepted %llu, steps %llu\n", mixed ? " mixed" : "",
                (unsigned long long)s.spec_draft_tokens_total, (unsigned long long)s.spec_accepted_tokens_total,
                (unsigned long long)s.steps_total);
        free_results(got);
        kiln_engine_destroy(e);
    }
    free_results(ref);
}

KT_TEST(test_draft_model_identical) {
    make_prompts();
    kiln_result ref[NREQ], got[NREQ];
    reference(ref);
    /* a different model as drafter (same vocabulary size) */
    kiln_engine *e = make("draft", KT_MODEL("llama-tied"), 3, 0);
    KT_REQUIRE(e);
    kiln_request r[NREQ];
    requests(r, true);
    KT_OK(kiln_engine_generate(e, r, NREQ, got));
    same(ref, got, "draft model, mixed batch");
    kiln_stats s;
    kiln_engine_get_stats(e, &s);
    KT_CHECK(s.spec_draft_tokens_total > 0 && s.num_free_kv_blocks == s.num_kv_blocks);
    free_results(got);
    kiln_engine_destroy(e);
    /* the target as its own drafter: every draft accepted, k + 1 per step */
    e = make("draft", MODEL, 4, 0);
    KT_REQUIRE(e);
    kiln_request one[NREQ];
    requests(one, false);
    one[0].sampling.max_tokens = 41; /* 1 from prefill + 8 verification steps of 5 */
    kiln_result res;
    KT_OK(kiln_engine_generate(e, &one[0], 1, &res));
    kiln_engine_get_stats(e, &s);
    KT_CHECK(res.n_ids == 41 && !memcmp(res.ids, ref[0].ids, sizeof(int32_t) * (size_t)ref[0].n_ids));
    KT_CHECKF(s.spec_accepted_tokens_total == s.spec_draft_tokens_total && s.spec_draft_tokens_total == 32,
              "drafted %llu accepted %llu", (unsigned long long)s.spec_draft_tokens_total,
              (unsigned long long)s.spec_accepted_tokens_total);
    KT_CHECKF(s.steps_total == 9, "%llu steps (1 prefill + 8 verifications of 5 tokens)",
              (unsigned long long)s.steps_total);
    kiln_result_free(&res);
    kiln_engine_destroy(e);
    free_results(ref);
}

KT_TEST(test_spec_preemption_and_toggle) {
    make_prompts();
    kiln_result ref[NREQ], got[NREQ];
    reference(ref);
    /* 40 blocks x 4 tokens: the longest request needs 28 + 40 tokens; all six
     * need far more */
    kiln_engine *e = make("draft", KT_MODEL("llama2-mha"), 4, 40);
    KT_REQUIRE(e);
    kiln_request r[NREQ];
    requests(r, false);
    KT_OK(kiln_engine_generate(e, r, NREQ, got));
    same(ref, got, "draft model under preemption");
    kiln_stats s;
    kiln_engine_get_stats(e, &s);
    KT_CHECKF(s.num_preemptions_total > 0, "no preemption");
    KT_CHECK(s.num_free_kv_blocks == s.num_kv_blocks);
    free_results(got);
    kiln_engine_destroy(e);
    /* toggle speculation off and on while requests run */
    e = make("ngram", NULL, 3, 0);
    KT_REQUIRE(e);
    requests(r, false);
    typedef struct { int32_t ids[NTOK]; int n; } acc_t;
    static acc_t acc[NREQ];
    memset(acc, 0, sizeof acc);
    uint64_t ids[NREQ];
    for (int i = 0; i < NREQ; i++) KT_OK(kiln_engine_add_request(e, &r[i], &ids[i]));
    int left = 1, step = 0;
    while (left) {
        if (step == 3) KT_OK(kiln_engine_set_speculation(e, false));
        if (step == 7) KT_OK(kiln_engine_set_speculation(e, true));
        KT_OK(kiln_engine_step(e, &left));
        step++;
        KT_REQUIRE(step < 1000);
    }
    kiln_engine_get_stats(e, &s);
    KT_CHECK(s.num_free_kv_blocks == s.num_kv_blocks && s.spec_draft_tokens_total > 0);
    kiln_engine_destroy(e);
    /* an engine without speculation refuses the toggle */
    e = make(NULL, NULL, 4, 0);
    KT_ERR(kiln_engine_set_speculation(e, true), KILN_ERR_UNSUPPORTED, "without speculative decoding");
    kiln_engine_destroy(e);
    free_results(ref);
}

/* The per-kind step counters add up to steps_total; seconds are >= 0 and
 * zero where no step of that kind ran. */
static void check_step_stats(const kiln_stats *s, const char *what) {
    KT_CHECKF(s->prefill_steps_total + s->decode_steps_total + s->verify_steps_total == s->steps_total,
              "%s: %llu prefill + %llu decode + %llu verify != %llu steps", what,
              (unsigned long long)s->prefill_steps_total, (unsigned long long)s->decode_steps_total,
              (unsigned long long)s->verify_steps_total, (unsigned long long)s->steps_total);
    KT_CHECKF(s->prefill_forward_seconds_total >= 0 && s->decode_forward_seconds_total >= 0 &&
                  s->verify_forward_seconds_total >= 0 && s->draft_seconds_total >= 0,
              "%s: negative time", what);
    KT_CHECKF(s->prefill_steps_total || s->prefill_forward_seconds_total == 0, "%s: prefill time without steps", what);
    KT_CHECKF(s->decode_steps_total || s->decode_forward_seconds_total == 0, "%s: decode time without steps", what);
    KT_CHECKF(s->verify_steps_total || s->verify_forward_seconds_total == 0, "%s: verify time without steps", what);
    KT_CHECKF(s->draft_calls_total || s->draft_seconds_total == 0, "%s: drafting time without calls", what);
    fprintf(stderr, "  %s: prefill %llu (%.3f ms), decode %llu (%.3f ms), verify %llu (%.3f ms), draft %llu (%.3f ms)\n",
            what, (unsigned long long)s->prefill_steps_total, s->prefill_forward_seconds_total * 1e3,
            (unsigned long long)s->decode_steps_total, s->decode_forward_seconds_total * 1e3,
            (unsigned long long)s->verify_steps_total, s->verify_forward_seconds_total * 1e3,
            (unsigned long long)s->draft_calls_total, s->draft_seconds_total * 1e3);
}

KT_TEST(test_step_stats) {
    make_prompts();
    kiln_request one[NREQ];
    kiln_result res;
    kiln_stats s;
    /* no speculation: one prefill, then plain decode steps only */
    kiln_engine *e = make(NULL, NULL, 4, 0);
    KT_REQUIRE(e);
    requests(one, false);
    one[0].sampling.max_tokens = 41;
    KT_OK(kiln_engine_generate(e, &one[0], 1, &res));
    kiln_result_free(&res);
    kiln_engine_get_stats(e, &s);
    check_step_stats(&s, "plain");
    KT_CHECK(s.prefill_steps_total == 1 && s.decode_steps_total == 40 && s.verify_steps_total == 0);
    KT_CHECK(s.prefill_forward_seconds_total > 0 && s.decode_forward_seconds_total > 0);
    KT_CHECK(s.draft_calls_total == 0 && s.draft_seconds_total == 0);
    kiln_engine_destroy(e);

    /* the target drafting for itself: verification steps only, each drafted */
    e = make("draft", MODEL, 4, 0);
    KT_REQUIRE(e);
    KT_OK(kiln_engine_generate(e, &one[0], 1, &res));
    kiln_result_free(&res);
    kiln_engine_get_stats(e, &s);
    check_step_stats(&s, "self-draft");
    KT_CHECK(s.prefill_steps_total == 1 && s.decode_steps_total == 0 && s.verify_steps_total == 8);
    KT_CHECK(s.verify_forward_seconds_total > 0 && s.draft_calls_total == 8 && s.draft_seconds_total > 0);
    /* speculation off at run time: plain steps again, no drafting */
    KT_OK(kiln_engine_set_speculation(e, false));
    KT_OK(kiln_engine_generate(e, &one[0], 1, &res));
    kiln_result_free(&res);
    kiln_engine_get_stats(e, &s);
    check_step_stats(&s, "self-draft, speculation off");
    KT_CHECK(s.prefill_steps_total == 2 && s.decode_steps_total == 40 && s.verify_steps_total == 8);
    KT_CHECK(s.draft_calls_total == 8);
    kiln_engine_destroy(e);

    /* n-gram: a batch of six; every step is plain or verification, drafting
     * is timed in the steps that speculate */
    e = make("ngram", NULL, 4, 0);
    KT_REQUIRE(e);
    kiln_request r[NREQ];
    kiln_result got[NREQ];
    requests(r, false);
    KT_OK(kiln_engine_generate(e, r, NREQ, got));
    free_results(got);
    kiln_engine_get_stats(e, &s);
    check_step_stats(&s, "ngram");
    KT_CHECK(s.prefill_steps_total >= 1 && s.verify_steps_total > 0 && s.draft_calls_total >= s.verify_steps_total);
    kiln_engine_destroy(e);
}

/* Random (load format dummy) weights: the drafter inherits the load format,
 * and its weights are the same function of tensor name and seed, so the
 * model drafting for itself is always accepted. */
KT_TEST(test_self_draft_dummy) {
    make_prompts();
    kiln_engine_params p;
    kt_engine_params(&p, MODEL, "cpu");
    p.n_threads = 2;
    p.load_format = "dummy";
    p.speculative_method = "draft";
    p.speculative_model = MODEL;
    p.num_speculative_tokens = 4;
    kiln_engine *e = NULL;
    KT_OK(kiln_engine_create(&p, &e));
    KT_REQUIRE(e);
    kiln_request one[NREQ];
    requests(one, false);
    one[0].sampling.max_tokens = 41;
    kiln_result res;
    KT_OK(kiln_engine_generate(e, &one[0], 1, &res));
    KT_CHECK(res.n_ids == 41);
    kiln_result_free(&res);
    kiln_stats s;
    kiln_engine_get_stats(e, &s);
    check_step_stats(&s, "dummy self-draft");
    KT_CHECKF(s.spec_draft_tokens_total == 32 && s.spec_accepted_tokens_total == 32,
              "dummy self-draft: drafted %llu accepted %llu", (unsigned long long)s.spec_draft_tokens_total,
              (unsigned long long)s.spec_accepted_tokens_total);
    KT_CHECK(s.verify_steps_total == 8 && s.decode_steps_total == 0);
    kiln_engine_destroy(e);
}

KT_TEST(test_spec_errors) {
    kiln_engine_params p;
    kt_engine_params(&p, MODEL, "cpu");
    kiln_engine *e = NULL;
    p.speculative_method = "draft";
    KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_INVALID_ARGUMENT, "needs a speculative model");
    p.speculative_method = "magic";
    KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_INVALID_ARGUMENT, "unknown speculative method");
    p.speculative_method = "ngram";
    p.num_speculative_tokens = 0;
    KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_INVALID_ARGUMENT, "num_speculative_tokens must be in [1, 16]");
    p.speculative_method = "draft";
    p.num_speculative_tokens = 4;
    p.speculative_model = "/nonexistent";
    KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_NOT_FOUND, "speculative model /nonexistent");
}

KT_MAIN(KT_CASE(test_ngram_identical), KT_CASE(test_draft_model_identical), KT_CASE(test_spec_preemption_and_toggle),
        KT_CASE(test_step_stats), KT_CASE(test_self_draft_dummy), KT_CASE(test_spec_errors))
