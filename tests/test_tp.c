// label: model
/* test_tp.c -- tensor parallelism on the CPU backend (ranks on threads, a
 * shared-memory communicator): the policies' shard rules (column, row,
 * vocabulary, kv heads split or replicated, pre-fused tensors) at TP 2, 4
 * and 8 give the same first-step logits as transformers and the same greedy
 * tokens as TP 1; a rank that fails stops every rank with one clear error.
 * The host byte all-gather (device handles at set-up) and its abort. */
#include "comm.h"
#include "kt_golden.h"

#include <pthread.h>
#include <unistd.h>

static kiln_engine *make(const char *model, int tp, const char *policy) {
    char dir[512];
    kiln_engine_params p;
    kt_engine_params(&p, kt_model_dir(dir, sizeof dir, model), "cpu");
    p.tensor_parallel_size = tp;
    p.n_threads = 1;
    p.block_size = 8;
    p.num_kv_blocks = 256;
    p.policy_file = policy;
    return kt_engine_create(&p, "%s tp=%d", model, tp);
}

static void check_model(const char *model, int tp) {
    static kt_golden g[8];
    int n = kt_load_golden(model, g, 8);
    KT_REQUIRE(n > 0);
    kiln_engine *e = make(model, tp, NULL);
    KT_REQUIRE(e);
    /* first-step logits through the tensor-parallel executor (rank 0 returns
     * the gathered vocabulary) */
    for (int i = 0; i < n; i++) {
        float l[KT_VOCAB];
        KT_OK(kt_prefill_logits(e, g[i].prompt, g[i].n_prompt, l));
        double rel = kt_rel_max(l, g[i].logits, KT_VOCAB);
        KT_CHECKF(rel < 1e-4, "%s tp=%d case %d: logits relative error %.3g", model, tp, i, rel);
    }
    /* greedy continuations, batched */
    kiln_request r[8];
    kiln_result res[8];
    kt_greedy_requests(r, g, n);
    KT_OK(kiln_engine_generate(e, r, n, res));
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < KT_N_GREEDY && k < res[i].n_ids; k++) {
            if (g[i].margins[k] < 1e-3) break;
            if (res[i].ids[k] != g[i].greedy[k]) {
                KT_CHECKF(false, "%s tp=%d case %d: step %d differs", model, tp, i, k);
                break;
            }
        }
        kiln_result_free(&res[i]);
    }
    kiln_stats s;
    kiln_engine_get_stats(e, &s);
    KT_CHECK(s.num_free_kv_blocks == s.num_kv_blocks);
    kiln_engine_destroy(e);
}

KT_TEST(test_tp2_llama3) { check_model("llama3-gqa", 2); }
KT_TEST(test_tp4_llama3_replicated_kv) { check_model("llama3-gqa", 4); } /* 2 kv heads over 4 ranks */
KT_TEST(test_tp4_llama2_mha) { check_model("llama2-mha", 4); }
KT_TEST(test_tp2_qwen2_bias) { check_model("qwen2-bias", 2); }
KT_TEST(test_tp2_phi3_prefused) { check_model("phi3", 2); }
KT_TEST(test_tp2_mistral) { check_model("mistral-swa", 2); }
KT_TEST(test_tp8_hd128) { check_model("llama3-hd128", 8); } /* 2 kv heads over 8 ranks */

KT_TEST(test_tp_rank_failure) {
    /* a policy that fails on rank 1 only: every rank stops, one clear error */
    char path[512];
    snprintf(path, sizeof path, "%s/kt_tp_fail_%d.lua", KT_BINARY_DIR, (int)getpid());
    const char *src = "local K = require('kiln')\nreturn function(facts)\n"
                      "  if facts.tp.rank == 1 then error('rank 1 ran out of memory') end\n"
                      "  return K.decoder(facts, {name = 'x', names = K.llama_names()}):finish()\nend\n";
    kiln_write_file_atomic(path, src, strlen(src));
    kiln_engine *e = NULL;
    kiln_engine_params p;
    kt_engine_params(&p, KT_MODEL("llama3-gqa"), "cpu");
    p.tensor_parallel_size = 2;
    p.num_kv_blocks = 64;
    p.policy_file = path;
    KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_POLICY, "tensor-parallel rank 1 of 2 failed, every rank stopped");
    KT_CHECK(strstr(kiln_last_error(), "rank 1 ran out of memory") != NULL);
    unlink(path);
    /* a size that does not divide the heads */
    p.policy_file = NULL;
    p.tensor_parallel_size = 3;
    KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_POLICY, "not divisible by the tensor-parallel size 3");
}

typedef struct gather_arg {
    kiln_comm *c;
    pthread_barrier_t *bar;
    kiln_status st[3];
    uint8_t recv[3][8 * 40];
} gather_arg;

static void *gather_rank(void *p) {
    gather_arg *a = p;
    int r = kiln_comm_rank(a->c), n = kiln_comm_size(a->c);
    for (int round = 0; round < 3; round++) {
        uint8_t send[40];
        for (int i = 0; i < 40; i++) send[i] = (uint8_t)(r * 40 + i + round);
        if (round == 2) { /* the last rank fails before the third (once all left the second) */
            pthread_barrier_wait(a->bar);
            if (r == n - 1) kiln_comm_abort(a->c);
            pthread_barrier_wait(a->bar);
        }
        a->st[round] = kiln_comm_all_gather(a->c, send, a->recv[round], 40);
    }
    return NULL;
}

KT_TEST(test_comm_all_gather) {
    for (int n = 1; n <= 8; n *= 2) {
        kiln_comm_group *g = NULL;
        KT_OK(kiln_comm_group_create(n, &g));
        gather_arg a[8];
        pthread_t th[8];
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)n);
        for (int r = 0; r < n; r++) {
            memset(&a[r], 0, sizeof a[r]);
            a[r].c = kiln_comm_group_member(g, r);
            a[r].bar = &bar;
            pthread_create(&th[r], NULL, gather_rank, &a[r]);
        }
        for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
        pthread_barrier_destroy(&bar);
        for (int r = 0; r < n; r++) {
            for (int round = 0; round < 2; round++) {
                KT_CHECK(a[r].st[round] == KILN_OK);
                for (int q = 0; q < n; q++)
                    for (int i = 0; i < 40; i++)
                        KT_CHECK(a[r].recv[round][q * 40 + i] == (uint8_t)(q * 40 + i + round));
            }
            if (n > 1) KT_CHECK(a[r].st[2] == KILN_ERR_CANCELLED);
        }
        kiln_comm_group_destroy(g);
    }
}

KT_MAIN(KT_CASE(test_comm_all_gather), KT_CASE(test_tp2_llama3), KT_CASE(test_tp4_llama3_replicated_kv), KT_CASE(test_tp4_llama2_mha),
        KT_CASE(test_tp2_qwen2_bias), KT_CASE(test_tp2_phi3_prefused), KT_CASE(test_tp2_mistral),
        KT_CASE(test_tp8_hd128), KT_CASE(test_tp_rank_failure))
