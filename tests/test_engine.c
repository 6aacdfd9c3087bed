// label: model
/* test_engine.c -- the public engine API on a tiny model: request
 * validation, cancellation (queued and running, and from the callback),
 * stop token ids, max_tokens until the context limit, seeded sampling,
 * requests added from another thread while stepping, and the KV pool
 * returning to all-free. */
#include "kiln.h"
#include "kiln_base.h"
#include "kt_engine.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the tiny GQA model on the CPU, without its tokenizer */
static void tiny_params(kiln_engine_params *p) { kt_engine_params(p, KT_MODEL("llama3-gqa"), "cpu"); }

static kiln_engine *make(int max_model_len) {
    kiln_engine_params p;
    tiny_params(&p);
    p.n_threads = 2;
    p.max_model_len = max_model_len;
    p.block_size = 8;
    return kt_engine_create(&p, "llama3-gqa");
}

static const int32_t prompt[] = {5, 17, 99, 200, 301, 7, 42};

static kiln_request req(int max_tokens) {
    kiln_request r;
    kt_greedy_request(&r, prompt, 7, max_tokens);
    return r;
}

static void expect_all_free(kiln_engine *e) {
    kiln_stats s;
    kiln_engine_get_stats(e, &s);
    KT_CHECKF(s.num_free_kv_blocks == s.num_kv_blocks, "%d of %d blocks free", s.num_free_kv_blocks, s.num_kv_blocks);
    KT_CHECK(s.num_running == 0 && s.num_waiting == 0);
}

KT_TEST(test_bad_requests) {
    kiln_engine *e = make(64);
    KT_REQUIRE(e);
    uint64_t id;
    kiln_request r = req(4);
    r.n_prompt_ids = 0;
    KT_ERR(kiln_engine_add_request(e, &r, &id), KILN_ERR_INVALID_ARGUMENT, "the prompt is empty");
    int32_t bad[2] = {3, 512};
    r = req(4);
    r.prompt_ids = bad;
    r.n_prompt_ids = 2;
    KT_ERR(kiln_engine_add_request(e, &r, &id), KILN_ERR_INVALID_ARGUMENT, "(id 512) is outside the vocabulary");
    r = req(60);
    KT_ERR(kiln_engine_add_request(e, &r, &id), KILN_ERR_LIMIT, "maximum context length is 64 tokens");
    r = req(4);
    r.prompt_ids = NULL;
    r.prompt = "hello";
    KT_ERR(kiln_engine_add_request(e, &r, &id), KILN_ERR_INVALID_ARGUMENT, "has no tokenizer");
    r = req(4);
    r.sampling.temperature = -1;
    KT_ERR(kiln_engine_add_request(e, &r, &id), KILN_ERR_INVALID_ARGUMENT, "temperature must be in [0, 100]");
    r = req(4);
    r.sampling.top_p = 0;
    KT_ERR(kiln_engine_add_request(e, &r, &id), KILN_ERR_INVALID_ARGUMENT, "top_p must be in (0, 1]");
    r = req(4);
    r.sampling.presence_penalty = 3;
    KT_ERR(kiln_engine_add_request(e, &r, &id), KILN_ERR_INVALID_ARGUMENT, "presence_penalty");
    r = req(4);
    int32_t stops[1] = {100000};
    r.sampling.stop_token_ids = stops;
    r.sampling.n_stop_token_ids = 1;
    KT_ERR(kiln_engine_add_request(e, &r, &id), KILN_ERR_INVALID_ARGUMENT, "stop_token_ids[0]");
    KT_ERR(kiln_engine_cancel(e, 999), KILN_ERR_NOT_FOUND, "no request with id 999");
    expect_all_free(e);
    kiln_engine_destroy(e);
}

typedef struct events {
    int tokens;
    kiln_finish_reason finish;
    int finals;
    int cancel_after; /* >0: return 1 after this many tokens */
    int32_t ids[64];  /* the first 64 tokens */
} events;

static int on_event(void *u, const kiln_stream_event *ev) {
    events *x = u;
    if (ev->token >= 0 && x->tokens < 64) x->ids[x->tokens] = ev->token;
    if (ev->token >= 0) x->tokens++;
    if (ev->finish != KILN_FINISH_NONE) {
        x->finish = ev->finish;
        x->finals++;
    }
    return x->cancel_after > 0 && x->tokens >= x->cancel_after;
}

/* Engine parameters out of range: a clear error naming the parameter, no
 * engine, nothing leaked (the sanitizer pass checks that). */
KT_TEST(test_bad_engine_params) {
    static const struct {
        int field;
        double v;
        const char *want;
    } cases[] = {
        {0, 0, "block_size must be in [1, 1024]"},
        {0, 4096, "block_size must be in [1, 1024]"},
        {1, 0, "max_num_seqs must be in [1, 65536]"},
        {2, 0, "max_num_batched_tokens must be >= 1"},
        {3, -1, "max_model_len must be >= 0"},
        {4, 0, "tensor_parallel_size must be >= 1"},
        {5, -0.5, "prefill_ratio must be >= 0"},
        {5, NAN, "prefill_ratio must be >= 0"},
        {6, 7, "gpu_memory_utilization must be in (0, 1]"},
        {6, -0.1, "gpu_memory_utilization must be in (0, 1]"},
        {6, NAN, "gpu_memory_utilization must be in (0, 1]"},
        {7, -3, "num_kv_blocks must be >= 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiln_engine_params p;
        tiny_params(&p);
        const double v = cases[i].v;
        switch (cases[i].field) {
        case 0: p.block_size = (int)v; break;
        case 1: p.max_num_seqs = (int)v; break;
        case 2: p.max_num_batched_tokens = (int)v; break;
        case 3: p.max_model_len = (int)v; break;
        case 4: p.tensor_parallel_size = (int)v; break;
        case 5: p.prefill_ratio = v; break;
        case 6: p.gpu_memory_utilization = v; break;
        default: p.num_kv_blocks = (int)v; break;
        }
        kiln_engine *e = NULL;
        KT_ERR(kiln_engine_create(&p, &e), KILN_ERR_INVALID_ARGUMENT, cases[i].want);
        KT_CHECKF(e == NULL, "case %zu: an engine despite the error", i);
    }
    /* names of things that do not exist */
    static const struct {
        const char *dtype, *kv, *load, *want;
    } names[] = {
        {"int4", NULL, NULL, "unknown dtype \"int4\""},
        {NULL, "int3", NULL, "unknown kv cache dtype \"int3\""},
        {NULL, NULL, "gguf", "unknown load format \"gguf\""},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        kiln_engine_params p;
        tiny_params(&p);
        if (names[i].dtype) p.dtype = names[i].dtype;
        if (names[i].kv) p.kv_cache_dtype = names[i].kv;
        if (names[i].load) p.load_format = names[i].load;
        kiln_engine *e = NULL;
        kiln_status st = kiln_engine_create(&p, &e);
        KT_CHECKF(st != KILN_OK && e == NULL, "case %zu: created", i);
        KT_CHECKF(strstr(kiln_last_error(), names[i].want), "case %zu: error \"%s\", want \"%s\"", i,
                  kiln_last_error(), names[i].want);
    }
}

KT_TEST(test_cancel) {
    kiln_engine *e = make(256);
    KT_REQUIRE(e);
    events ev[4] = {{0}};
    uint64_t ids[4];
    for (int i = 0; i < 4; i++) {
        kiln_request r = req(100);
        r.on_event = on_event;
        r.user = &ev[i];
        if (i == 3) ev[i].cancel_after = 5;
        KT_OK(kiln_engine_add_request(e, &r, &ids[i]));
    }
    KT_OK(kiln_engine_cancel(e, ids[0])); /* still queued */
    int left = 0;
    for (int s = 0; s < 4; s++) KT_OK(kiln_engine_step(e, &left));
    KT_OK(kiln_engine_cancel(e, ids[1])); /* running */
    while (left > 0) KT_OK(kiln_engine_step(e, &left));
    KT_CHECK(ev[0].finish == KILN_FINISH_ABORT && ev[0].tokens == 0 && ev[0].finals == 1);
    KT_CHECK(ev[1].finish == KILN_FINISH_ABORT && ev[1].tokens > 0 && ev[1].tokens < 100 && ev[1].finals == 1);
    KT_CHECK(ev[2].finish == KILN_FINISH_LENGTH && ev[2].tokens == 100 && ev[2].finals == 1);
    KT_CHECK(ev[3].finish == KILN_FINISH_ABORT && ev[3].tokens == 5 && ev[3].finals == 1);
    kiln_stats s;
    kiln_engine_get_stats(e, &s);
    KT_CHECK(s.requests_finished[KILN_FINISH_ABORT] == 3 && s.requests_finished[KILN_FINISH_LENGTH] == 1);
    expect_all_free(e);
    /* destroying with requests in flight aborts them */
    events late = {0};
    kiln_request r = req(50);
    r.on_event = on_event;
    r.user = &late;
    KT_OK(kiln_engine_add_request(e, &r, NULL));
    KT_OK(kiln_engine_step(e, NULL));
    kiln_engine_destroy(e);
    KT_CHECK(late.finish == KILN_FINISH_ABORT && late.finals == 1);
}

KT_TEST(test_stop_ids_and_length) {
    kiln_engine *e = make(40);
    KT_REQUIRE(e);
    kiln_result ref;
    kiln_request r = req(20);
    KT_OK(kiln_engine_generate(e, &r, 1, &ref));
    KT_REQUIRE(ref.n_ids == 20 && ref.finish == KILN_FINISH_LENGTH);
    /* stop at the first occurrence of the 6th token */
    int32_t stop = ref.ids[5];
    int first = 0;
    while (ref.ids[first] != stop) first++;
    r.sampling.stop_token_ids = &stop;
    r.sampling.n_stop_token_ids = 1;
    kiln_result s;
    KT_OK(kiln_engine_generate(e, &r, 1, &s));
    KT_CHECK(s.finish == KILN_FINISH_STOP && s.n_ids == first + 1 && s.ids[first] == stop);
    kiln_result_free(&s);
    /* min_tokens suppresses the stop id before it */
    r.sampling.min_tokens = first + 1;
    KT_OK(kiln_engine_generate(e, &r, 1, &s));
    KT_CHECK(s.n_ids > first + 1);
    for (int k = 0; k <= first && k < s.n_ids; k++) KT_CHECK(s.ids[k] != stop);
    kiln_result_free(&s);
    /* max_tokens < 0: until the context is full (40 - 7 prompt) */
    r = req(-1);
    KT_OK(kiln_engine_generate(e, &r, 1, &s));
    KT_CHECK(s.n_ids == 33 && s.finish == KILN_FINISH_LENGTH);
    kiln_result_free(&s);
    kiln_result_free(&ref);
    expect_all_free(e);
    kiln_engine_destroy(e);
}

KT_TEST(test_seeded_sampling) {
    kiln_engine *e = make(128);
    KT_REQUIRE(e);
    kiln_request r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = req(24);
        r[i].sampling.temperature = 1.0f;
        r[i].sampling.top_p = 0.95f;
        r[i].sampling.has_seed = true;
        r[i].sampling.seed = i == 2 ? 7 : 1234;
    }
    kiln_result a[3], b;
    KT_OK(kiln_engine_generate(e, r, 3, a));
    KT_CHECK(a[0].n_ids == 24 && !memcmp(a[0].ids, a[1].ids, sizeof(int32_t) * 24)); /* same seed, same batch */
    KT_CHECK(memcmp(a[0].ids, a[2].ids, sizeof(int32_t) * 24) != 0);                 /* other seed */
    KT_OK(kiln_engine_generate(e, &r[0], 1, &b));                                    /* alone, later */
    KT_CHECK(b.n_ids == 24 && !memcmp(a[0].ids, b.ids, sizeof(int32_t) * 24));
    for (int i = 0; i < 3; i++) kiln_result_free(&a[i]);
    kiln_result_free(&b);
    /* no_repeat_ngram_size 2: no bigram repeats */
    kiln_request q = req(30);
    q.sampling.no_repeat_ngram_size = 2;
    KT_OK(kiln_engine_generate(e, &q, 1, &b));
    int32_t all[64];
    memcpy(all, prompt, sizeof prompt);
    memcpy(all + 7, b.ids, sizeof(int32_t) * (size_t)b.n_ids);
    int n = 7 + b.n_ids;
    for (int i = 0; i + 1 < n; i++)
        for (int j = i + 1; j + 1 < n; j++) KT_CHECK(!(all[i] == all[j] && all[i + 1] == all[j + 1]));
    kiln_result_free(&b);
    expect_all_free(e);
    kiln_engine_destroy(e);
}

typedef struct adder {
    kiln_engine *e;
    events ev[16];
} adder;

static void *add_thread(void *u) {
    adder *a = u;
    for (int i = 0; i < 16; i++) {
        kiln_request r = req(10);
        r.on_event = on_event;
        r.user = &a->ev[i];
        kiln_engine_add_request(a->e, &r, NULL);
    }
    return NULL;
}

KT_TEST(test_threads) {
    adder a = {0};
    a.e = make(128);
    KT_REQUIRE(a.e);
    pthread_t th;
    pthread_create(&th, NULL, add_thread, &a);
    /* step until every request finished; the adder may be slow to start on a
     * busy machine, so bound the loop by time, not by steps */
    int done = 0;
    double t0 = kiln_now_sec();
    while (done < 16 && kiln_now_sec() - t0 < 60) {
        KT_OK(kiln_engine_step(a.e, NULL));
        done = 0;
        for (int i = 0; i < 16; i++) done += a.ev[i].finals;
    }
    pthread_join(th, NULL);
    while (kiln_engine_has_work(a.e)) KT_OK(kiln_engine_step(a.e, NULL));
    for (int i = 0; i < 16; i++) KT_CHECK(a.ev[i].finish == KILN_FINISH_LENGTH && a.ev[i].tokens == 10);
    expect_all_free(a.e);
    char *m = NULL;
    KT_OK(kiln_engine_metrics_prometheus(a.e, "tiny", &m));
    KT_CHECK(strstr(m, "vllm:generation_tokens_total{model_name=\"tiny\"} 160") != NULL);
    KT_CHECK(strstr(m, "vllm:request_success_total{finished_reason=\"length\",model_name=\"tiny\"} 16") != NULL);
    kiln_free(m);
    kiln_engine_destroy(a.e);
}

/* Text in, text out through the model's tokenizer: the transformers
 * goldens' prompt ids and greedy text; a stop string that spans tokens ends
 * the request with nothing of it in the output. */
KT_TEST(test_text_and_stop_strings) {
    const char *models[2] = {"llama3-gqa", "llama2-mha"};
    for (int m = 0; m < 2; m++) {
        char path[512], dir[512];
        snprintf(path, sizeof path, "%s/golden/%s.text.json", KT_DATA, models[m]);
        json_t *g = json_load_file(path, 0, NULL);
        KT_REQUIRE(g);
        kiln_engine_params p;
        kiln_engine_default_params(&p);
        p.model = kt_model_dir(dir, sizeof dir, models[m]);
        p.device = "cpu";
        kiln_engine *e = NULL;
        KT_OK(kiln_engine_create(&p, &e));
        KT_REQUIRE(kiln_engine_tokenizer(e));
        json_t *cases = json_object_get(g, "cases");
        for (size_t i = 0; i < json_array_size(cases); i++) {
            json_t *c = json_array_get(cases, i), *gr = json_object_get(c, "greedy"), *mg = json_object_get(c, "margins");
            kiln_request r;
            kiln_request_default(&r);
            r.prompt = json_string_value(json_object_get(c, "text"));
            r.sampling.temperature = 0;
            r.sampling.max_tokens = (int)json_array_size(gr);
            r.sampling.ignore_eos = true;
            r.sampling.skip_special_tokens = false;
            kiln_result res;
            KT_OK(kiln_engine_generate(e, &r, 1, &res));
            KT_CHECKF(res.n_prompt_tokens == (int)json_array_size(json_object_get(c, "prompt")),
                      "%s case %zu: %d prompt tokens", models[m], i, res.n_prompt_tokens);
            /* compare up to the first near tie of the reference */
            size_t upto = 0;
            while (upto < json_array_size(gr) && json_number_value(json_array_get(mg, upto)) >= 1e-3) upto++;
            bool same = res.n_ids == (int)json_array_size(gr);
            for (size_t k = 0; k < upto && same; k++) same = res.ids[k] == json_integer_value(json_array_get(gr, k));
            KT_CHECKF(same, "%s case %zu: greedy ids differ", models[m], i);
            const char *want = json_string_value(json_object_get(c, "greedy_text"));
            if (same && upto == json_array_size(gr))
                KT_CHECKF(res.text && !strcmp(res.text, want), "%s case %zu: text differs", models[m], i);
            /* a stop string taken from the middle of that text, spanning tokens */
            size_t wl = strlen(want);
            if (same && upto == json_array_size(gr) && wl > 20) {
                /* whole UTF-8 characters: a stop string starting inside one
                 * would cut a character the stream never emits in halves */
                size_t a0 = wl / 2, a1;
                while (a0 < wl && ((unsigned char)want[a0] & 0xC0) == 0x80) a0++;
                a1 = KILN_MIN(wl, a0 + 5);
                while (a1 < wl && ((unsigned char)want[a1] & 0xC0) == 0x80) a1++;
                char stop[16];
                memcpy(stop, want + a0, a1 - a0);
                stop[a1 - a0] = 0;
                const char *stops[1] = {stop};
                kiln_request rs = r;
                rs.sampling.stop = stops;
                rs.sampling.n_stop = 1;
                kiln_result sr;
                KT_OK(kiln_engine_generate(e, &rs, 1, &sr));
                const char *at = strstr(want, stop);
                KT_CHECK(sr.finish == KILN_FINISH_STOP && sr.text && at);
                if (sr.text && at) {
                    KT_CHECKF(strlen(sr.text) == (size_t)(at - want) && !strncmp(sr.text, want, (size_t)(at - want)),
                              "%s case %zu: text before the stop string differs", models[m], i);
                    KT_CHECK(strstr(sr.text, stop) == NULL);
                }
                kiln_result_free(&sr);
            }
            kiln_result_free(&res);
        }
        kiln_stats st;
        kiln_engine_get_stats(e, &st);
        KT_CHECK(st.num_free_kv_blocks == st.num_kv_blocks);
        kiln_engine_destroy(e);
        json_decref(g);
    }
}

/* Pipelined decode (KILN_OVERLAP=1: on the CPU backend a launch runs at once,
 * so only the engine's bookkeeping is under test): the same tokens, finish
 * reasons and streamed events as the synchronous path for requests that
 * finish by length at different steps, by a stop id, by a cancel from the
 * callback and from kiln_engine_cancel, with seeded sampling, min_tokens
 * (not launched blind until it passed), a repetition penalty (never blind),
 * and requests that arrive while steps are in flight; the pool ends all free. */
typedef struct pipe_run {
    kiln_result res[8];
    events ev[8];
    uint64_t pipelined, decode_steps;
} pipe_run;

static void run_pipe_workload(const char *overlap, pipe_run *out, int32_t stop) {
    setenv("KILN_OVERLAP", overlap, 1);
    kiln_engine *e = make(64);
    unsetenv("KILN_OVERLAP");
    KT_REQUIRE(e);
    kiln_request r[8];
    for (int i = 0; i < 8; i++) {
        r[i] = req(3 + 5 * i);
        r[i].on_event = on_event;
        r[i].user = &out->ev[i];
    }
    r[1].sampling.temperature = 0.9f, r[1].sampling.has_seed = true, r[1].sampling.seed = 99;
    r[2].sampling.stop_token_ids = &stop, r[2].sampling.n_stop_token_ids = 1;
    r[3].sampling.stop_token_ids = &stop, r[3].sampling.n_stop_token_ids = 1, r[3].sampling.min_tokens = 9;
    out->ev[4].cancel_after = 6;
    r[5].sampling.repetition_penalty = 1.3f;
    r[6].sampling.temperature = 0.7f, r[6].sampling.top_k = 20, r[6].sampling.has_seed = true, r[6].sampling.seed = 5;
    uint64_t ids[8];
    for (int i = 0; i < 5; i++) KT_OK(kiln_engine_add_request(e, &r[i], &ids[i]));
    int left = 0;
    for (int s = 0; s < 6; s++) KT_OK(kiln_engine_step(e, &left));
    for (int i = 5; i < 8; i++) KT_OK(kiln_engine_add_request(e, &r[i], &ids[i]));
    for (int s = 0; s < 4; s++) KT_OK(kiln_engine_step(e, &left));
    KT_OK(kiln_engine_cancel(e, ids[7]));
    do KT_OK(kiln_engine_step(e, &left)); while (left > 0);
    kiln_stats st;
    kiln_engine_get_stats(e, &st);
    out->pipelined = st.decode_pipelined_steps_total;
    out->decode_steps = st.decode_steps_total;
    expect_all_free(e);
    kiln_engine_destroy(e);
}

KT_TEST(test_pipelined_decode) {
    /* a stop id that greedy decoding meets after a few tokens */
    kiln_engine *e = make(64);
    KT_REQUIRE(e);
    kiln_result ref;
    kiln_request q = req(13);
    KT_OK(kiln_engine_generate(e, &q, 1, &ref));
    KT_REQUIRE(ref.n_ids == 13);
    int32_t stop = ref.ids[6];
    kiln_result_free(&ref);
    kiln_engine_destroy(e);
    static pipe_run a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    run_pipe_workload("0", &a, stop);
    run_pipe_workload("1", &b, stop);
    KT_CHECKF(a.pipelined == 0 && b.pipelined > 0, "pipelined steps: %llu off, %llu on", (unsigned long long)a.pipelined,
              (unsigned long long)b.pipelined);
    for (int i = 0; i < 8; i++) {
        /* request 7 is cancelled between steps: how far it got depends on the steps */
        int n = KILN_MIN(KILN_MIN(a.ev[i].tokens, b.ev[i].tokens), 64);
        KT_CHECKF((i == 7 || a.ev[i].tokens == b.ev[i].tokens) && a.ev[i].finish == b.ev[i].finish &&
                      a.ev[i].finals == 1 && b.ev[i].finals == 1 && !memcmp(a.ev[i].ids, b.ev[i].ids, sizeof(int32_t) * (size_t)n),
                  "request %d: %d tokens / finish %d off, %d / %d on", i, a.ev[i].tokens, (int)a.ev[i].finish,
                  b.ev[i].tokens, (int)b.ev[i].finish);
    }
    KT_CHECK(a.ev[0].finish == KILN_FINISH_LENGTH && a.ev[0].tokens == 3);
    KT_CHECK(a.ev[2].finish == KILN_FINISH_STOP && a.ev[3].tokens >= 9);
    KT_CHECK(a.ev[4].finish == KILN_FINISH_ABORT && a.ev[4].tokens == 6);
    KT_CHECK(a.ev[7].finish == KILN_FINISH_ABORT);
}

KT_MAIN(KT_CASE(test_pipelined_decode), KT_CASE(test_text_and_stop_strings), KT_CASE(test_bad_requests),
        KT_CASE(test_bad_engine_params), KT_CASE(test_cancel), KT_CASE(test_stop_ids_and_length),
        KT_CASE(test_seeded_sampling), KT_CASE(test_threads))
