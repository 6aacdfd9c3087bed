/*
 * cmd_bench.c -- `kiln bench`: the offline throughput benchmark
 * Colossal-Inference publishes (benchmark_llama3.py -m llama3-8b -b 32 -s 128
 * -o 256): a batch of random prompts of -s tokens generating -o tokens each
 * (EOS ignored, greedy), a warm-up run, then timed runs; prints output and
 * total tokens/s, time to first token, mean decode step and memory. With
 * --dataset synthetic --num-prompts N, a serving-like mix of lengths
 * submitted at once.
 */
#include "cli.h"
#include "kiln_base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct bench_req {
    double t_first, t_last;
    int n;
} bench_req;



static int bench_cb(void *user, const kiln_stream_event *ev) {
    bench_req *r = user;
    if (ev->token >= 0) {
        double t = kiln_now_sec();
        if (r->n == 0) r->t_first = t;
        r->t_last = t;
        r->n++;
    }
    return 0;
}

typedef struct bench_result {
    double seconds, out_tok_s, total_tok_s, ttft_mean_ms, ttft_p50_ms, step_ms;
    long out_tokens, in_tokens;
} bench_result;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static kiln_status run_once(kiln_engine *e, int n, int32_t **prompts, const int *plen, const int *olen,
                            bench_result *res) {
    kiln_status st = KILN_OK;
    bench_req *br = calloc((size_t)n, sizeof *br);
    kiln_request *rq = calloc((size_t)n, sizeof *rq);
    kiln_result *out = calloc((size_t)n, sizeof *out);
    double *ttft = calloc((size_t)n, sizeof(double));
    KILN_CHECK(br && rq && out && ttft, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < n; i++) {
        kiln_request_default(&rq[i]);
        rq[i].prompt_ids = prompts[i];
        rq[i].n_prompt_ids = plen[i];
        rq[i].sampling.temperature = 0;
        rq[i].sampling.max_tokens = olen[i];
        rq[i].sampling.ignore_eos = true;
        rq[i].on_event = bench_cb;
        rq[i].user = &br[i];
    }
    double t0 = kiln_now_sec();
    KILN_TRY(kiln_engine_generate(e, rq, n, out));
    double t1 = kiln_now_sec();
    memset(res, 0, sizeof *res);
    res->seconds = t1 - t0;
    double step_sum = 0;
    int step_n = 0;
    for (int i = 0; i < n; i++) {
        KILN_CHECK(out[i].error == KILN_OK, out[i].error, "request %d failed", i);
        res->out_tokens += out[i].n_ids;
        res->in_tokens += plen[i];
        ttft[i] = (br[i].t_first - t0) * 1e3;
        res->ttft_mean_ms += ttft[i] / n;
        if (br[i].n > 1) {
            step_sum += (br[i].t_last - br[i].t_first) / (br[i].n - 1);
            step_n++;
        }
        kiln_result_free(&out[i]);
    }
    qsort(ttft, (size_t)n, sizeof(double), cmp_d);
    res->ttft_p50_ms = ttft[n / 2];
    res->step_ms = step_n ? step_sum / step_n * 1e3 : 0;
    res->out_tok_s = res->out_tokens / res->seconds;
    res->total_tok_s = (res->out_tokens + res->in_tokens) / res->seconds;
fail:
    free(br);
    free(rq);
    free(out);
    free(ttft);
    return st;
}

int kiln_cmd_bench(int argc, char **argv) {
    kiln_engine_params p;
    kiln_engine_default_params(&p);
    int b = 32, s = 128, o = 256, warmup = 1, iters = 2, num_prompts = 0;
    uint64_t seed = 1;
    bool json = false, profile = false;
    const char *dataset = NULL;
    cli_opt own[] = {
        {"b", CLI_INT, &b, "N", "batch size (number of prompts)"},
        {"s", CLI_INT, &s, "N", "input length in tokens"},
        {"o", CLI_INT, &o, "N", "output length in tokens (EOS ignored)"},
        {"warmup", CLI_INT, &warmup, "N", "warm-up runs (default 1)"},
        {"iters", CLI_INT, &iters, "N", "timed runs (default 2; the best is reported)"},
        {"dataset", CLI_STR, &dataset, "synthetic", "serving-like mix of lengths"},
        {"num-prompts", CLI_INT, &num_prompts, "N", "prompts for --dataset synthetic"},
        {"seed", CLI_U64, &seed, "N", "prompt seed"},
        {"json", CLI_FLAG, &json, NULL, "print one JSON object"},
        {"profile", CLI_FLAG, &profile, NULL, "time every op (graphs off); table at exit (KILN_PROFILE=1)"},
        CLI_OPT_END,
    };
    cli_opt *tables[] = {own, cli_engine_opts(&p), NULL};
    int r = cli_parse(argc, argv, "bench",
                      "Offline throughput: -b prompts of -s tokens generate -o tokens each (greedy, EOS ignored).",
                      tables, NULL, 0, NULL);
    if (r) return r == 3 ? 0 : r;
    if (!p.model) {
        fprintf(stderr, "kiln bench: --model is required (a directory, or %s with --load-format dummy)\n",
                "llama3-8b, llama3-70b, llama2-7b");
        return 2;
    }
    if (b < 1 || s < 1 || o < 1 || iters < 1 || warmup < 0) {
        fprintf(stderr, "kiln bench: -b, -s, -o and --iters must be positive\n");
        return 2;
    }
    bool synth = dataset != NULL;
    if (synth && strcmp(dataset, "synthetic")) {
        fprintf(stderr, "kiln bench: unknown dataset '%s' (synthetic)\n", dataset);
        return 2;
    }
    int n = synth ? (num_prompts > 0 ? num_prompts : 256) : b;
    int32_t **prompts = calloc((size_t)n, sizeof *prompts);
    int *plen = calloc((size_t)n, sizeof(int)), *olen = calloc((size_t)n, sizeof(int));
    if (!prompts || !plen || !olen) return 1;
    int max_len = 0;
    for (int i = 0; i < n; i++) {
        uint32_t rr[4];
        kiln_philox4x32(seed, 1, (uint64_t)i, rr);
        plen[i] = synth ? s / 2 + (int)(rr[0] % (uint32_t)(s + 1)) : s;
        olen[i] = synth ? o / 2 + (int)(rr[1] % (uint32_t)(o + 1)) : o;
        if (plen[i] < 1) plen[i] = 1;
        if (olen[i] < 1) olen[i] = 1;
        max_len = KILN_MAX(max_len, plen[i] + olen[i]);
        prompts[i] = malloc(sizeof(int32_t) * (size_t)plen[i]);
        if (!prompts[i]) return 1;
    }
    if (profile) setenv("KILN_PROFILE", "1", 1);
    if (p.max_num_seqs == 256 && b > 256) p.max_num_seqs = b;
    if (!p.max_model_len) p.max_model_len = max_len + 8;
    kiln_engine *e = NULL;
    double tl = kiln_now_sec();
    if (kiln_engine_create(&p, &e) != KILN_OK) return cli_fail("bench");
    double load_s = kiln_now_sec() - tl;
    kiln_model_info info;
    kiln_engine_model_info(e, &info);
    int V = info.vocab_size;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < plen[i]; k++) {
            uint32_t rr[4];
            kiln_philox4x32(seed, 2 + (uint64_t)i, (uint64_t)k, rr);
            int lo = V > 2000 ? 1000 : 3, hi = V > 101000 ? 100000 : V;
            prompts[i][k] = lo + (int32_t)(rr[0] % (uint32_t)(hi - lo));
        }
    bench_result best = {0}, cur;
    int rc = 0;
    for (int it = 0; it < warmup + iters; it++) {
        if (run_once(e, n, prompts, plen, olen, &cur) != KILN_OK) {
            rc = cli_fail("bench");
            break;
        }
        if (it >= warmup && (best.seconds == 0 || cur.seconds < best.seconds)) best = cur;
    }
    kiln_stats stt;
    kiln_engine_get_stats(e, &stt);
    if (rc == 0) {
        double acc = stt.spec_draft_tokens_total ? (double)stt.spec_accepted_tokens_total / stt.spec_draft_tokens_total : 0;
        double per_step = stt.spec_steps_total ? 1.0 + (double)stt.spec_accepted_tokens_total / stt.spec_steps_total : 0;
        if (json) {
            printf("{\"model\":\"%s\",\"device\":\"%s\",\"batch\":%d,\"input\":%d,\"output\":%d,\"prompts\":%d,"
                   "\"seconds\":%.4f,\"output_tok_s\":%.1f,\"total_tok_s\":%.1f,\"ttft_ms\":%.2f,\"ttft_p50_ms\":%.2f,"
                   "\"decode_step_ms\":%.3f,\"load_s\":%.2f,\"kv_blocks\":%d,\"block_size\":%d,\"preemptions\":%llu,"
                   "\"spec_acceptance\":%.4f,\"spec_tokens_per_step\":%.3f}\n",
                   p.model, info.device, b, s, o, n, best.seconds, best.out_tok_s, best.total_tok_s, best.ttft_mean_ms,
                   best.ttft_p50_ms, best.step_ms, load_s, stt.num_kv_blocks, stt.block_size,
                   (unsigned long long)stt.num_preemptions_total, acc, per_step);
        } else {
            printf("model %s on %s (%s, kv %s), load %.2f s, KV pool %d blocks x %d tokens\n", p.model, info.device,
                   info.dtype, info.kv_cache_dtype, load_s, stt.num_kv_blocks, stt.block_size);
            if (synth)
                printf("synthetic: %d prompts, input %d..%d, output %d..%d\n", n, s / 2, s / 2 + s, o / 2, o / 2 + o);
            else
                printf("batch %d, input %d, output %d\n", b, s, o);
            printf("  time                %.3f s (best of %d)\n", best.seconds, iters);
            printf("  output tokens/s     %.1f\n", best.out_tok_s);
            printf("  total tokens/s      %.1f\n", best.total_tok_s);
            printf("  time to first token %.1f ms mean, %.1f ms p50\n", best.ttft_mean_ms, best.ttft_p50_ms);
            printf("  mean decode step    %.3f ms\n", best.step_ms);
            printf("  preemptions         %llu\n", (unsigned long long)stt.num_preemptions_total);
            if (stt.spec_draft_tokens_total)
                printf("  speculation         acceptance %.3f, %.2f tokens per verification\n", acc, per_step);
        }
    }
    kiln_engine_destroy(e);
    for (int i = 0; i < n; i++) free(prompts[i]);
    free(prompts);
    free(plen);
    free(olen);
    return rc;
}
