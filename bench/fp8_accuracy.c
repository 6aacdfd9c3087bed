/*
 * fp8_accuracy.c -- FP8 KV cache accuracy on one model: a reference engine
 * (--ref-kv, default the activation dtype) prefills a prompt of pseudo-random
 * ids and decodes --steps greedy tokens; then an engine per FP8 format
 * (E4M3 with scales from --kv-scales, default calibration; E5M2; and bf16
 * unless the reference is bf16: the model's gain for a 7-bit rounding) is
 * teacher-forced on that sequence. Prints the first-step logits relative
 * error (L2) and the mean KL divergence of the next-token distributions over
 * the decode steps, as tests/test_fp8_kv.c does for the tiny models, and one
 * JSON line. Engines are built one at a time (an 8B model fits once).
 *
 *   fp8_accuracy --model llama3-8b --load-format dummy --device cpu --prompt 48 --steps 16
 *   fp8_accuracy --model /models/Meta-Llama-3-8B --device cuda --steps 256
 */
#include "engine_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct opts {
    const char *model, *load_format, *device, *ref_kv, *kv_scales;
    int prompt, steps, threads;
} opts;

static kiln_engine *make(const opts *o, const char *kv, const char *scales) {
    kiln_engine_params p;
    kiln_engine_default_params(&p);
    p.model = o->model;
    p.load_format = o->load_format;
    p.device = o->device;
    p.tokenizer = "none";
    p.max_num_seqs = 1;
    p.max_num_batched_tokens = KILN_MAX(o->prompt, 64);
    p.max_model_len = o->prompt + o->steps + 8; /* calibration runs within it (at most 512 tokens) */
    p.n_threads = o->threads;
    p.kv_cache_dtype = kv;
    p.kv_scales = scales;
    p.kv_cache_bytes = (size_t)1 << 30;
    kiln_engine *e = NULL;
    if (kiln_engine_create(&p, &e) != KILN_OK) {
        fprintf(stderr, "fp8_accuracy: %s KV: %s\n", kv, kiln_last_error());
        return NULL;
    }
    return e;
}

/* one sequence with a progress line; 1 (and the error) on failure */
static int eval(kiln_engine *e, const int32_t *prompt, int np, const int32_t *feed, int steps, float *logits,
                int32_t *chosen) {
    if (kiln_eval_sequence(e, prompt, np, feed, steps, logits, chosen, stderr) == KILN_OK) return 0;
    fprintf(stderr, "fp8_accuracy: %s\n", kiln_last_error());
    return 1;
}

int main(int argc, char **argv) {
    opts o = {NULL, "auto", "auto", "auto", NULL, 48, 16, 0};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--model")) o.model = v;
        else if (!strcmp(k, "--load-format")) o.load_format = v;
        else if (!strcmp(k, "--device")) o.device = v;
        else if (!strcmp(k, "--ref-kv")) o.ref_kv = v;
        else if (!strcmp(k, "--kv-scales")) o.kv_scales = v;
        else if (!strcmp(k, "--prompt")) o.prompt = atoi(v);
        else if (!strcmp(k, "--steps")) o.steps = atoi(v);
        else if (!strcmp(k, "--threads")) o.threads = atoi(v);
        else {
            fprintf(stderr, "fp8_accuracy: unknown option %s\n", k);
            return 2;
        }
    }
    if (!o.model || o.prompt < 1 || o.steps < 1) {
        fprintf(stderr, "usage: fp8_accuracy --model M [--load-format dummy] [--device cpu|cuda] [--prompt N] "
                        "[--steps N] [--ref-kv auto|fp32|bf16] [--kv-scales MODE|FILE] [--threads N]\n");
        return 2;
    }
    kiln_engine *e = make(&o, o.ref_kv, NULL);
    if (!e) return 1;
    int V = e->vocab_size;
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)o.prompt), *greedy = malloc(sizeof(int32_t) * (size_t)o.steps),
            *fed = malloc(sizeof(int32_t) * (size_t)o.steps);
    for (int i = 0; i < o.prompt; i++) {
        uint32_t r[4];
        kiln_philox4x32(7, 3, (uint64_t)i, r);
        prompt[i] = (int32_t)(V > 2000 ? 1000 + r[0] % (uint32_t)(V - 2000) : 3 + r[0] % (uint32_t)(V - 6));
    }
    size_t per = (size_t)V * (size_t)(o.steps + 1);
    float *ref = malloc(sizeof(float) * per), *got = malloc(sizeof(float) * per);
    double t0 = kiln_now_sec();
    if (eval(e, prompt, o.prompt, NULL, o.steps, ref, greedy)) return 1;
    kiln_model_info mi;
    kiln_engine_model_info(e, &mi);
    fprintf(stderr, "reference (%s KV on %s) in %.1f s\n", mi.kv_cache_dtype, mi.device, kiln_now_sec() - t0);
    char ref_kv[16];
    snprintf(ref_kv, sizeof ref_kv, "%s", mi.kv_cache_dtype);
    kiln_engine_destroy(e);
    const char *kvs[3] = {"fp8_e4m3", "fp8_e5m2", "bf16"};
    double rel[3] = {0}, kl[3] = {0};
    char src[3][96];
    int nv = strcmp(ref_kv, "bf16") ? 3 : 2;
    for (int v = 0; v < nv; v++) {
        t0 = kiln_now_sec();
        e = make(&o, kvs[v], v ? NULL : o.kv_scales);
        if (!e) return 1;
        kiln_engine_model_info(e, &mi);
        snprintf(src[v], sizeof src[v], "%s", mi.kv_cache_scales);
        if (eval(e, prompt, o.prompt, greedy, o.steps, got, fed)) return 1;
        rel[v] = kiln_logits_rel_l2(got, ref, V);
        kl[v] = 0;
        for (int k = 1; k <= o.steps; k++) kl[v] += kiln_logits_kl(ref + (size_t)k * V, got + (size_t)k * V, V) / o.steps;
        fprintf(stderr, "%s (scales: %s) in %.1f s\n", kvs[v], src[v], kiln_now_sec() - t0);
        kiln_engine_destroy(e);
    }
    printf("%s on %s, prompt %d, %d teacher-forced decode steps, against the %s cache:\n", o.model, mi.device, o.prompt,
           o.steps, ref_kv);
    printf("  %-10s first-step logits rel. error %.3e, mean KL %.3e\n", "fp8_e4m3", rel[0], kl[0]);
    printf("  %-10s first-step logits rel. error %.3e, mean KL %.3e\n", "fp8_e5m2", rel[1], kl[1]);
    if (nv == 3) printf("  %-10s first-step logits rel. error %.3e, mean KL %.3e\n", "bf16", rel[2], kl[2]);
    printf("{\"model\":\"%s\",\"device\":\"%s\",\"ref_kv\":\"%s\",\"prompt\":%d,\"steps\":%d,\"e4m3_rel\":%.4e,"
           "\"e4m3_kl\":%.4e,\"e5m2_rel\":%.4e,\"e5m2_kl\":%.4e,\"bf16_rel\":%.4e,\"bf16_kl\":%.4e,"
           "\"e4m3_scales\":\"%s\"}\n",
           o.model, mi.device, ref_kv, o.prompt, o.steps, rel[0], kl[0], rel[1], kl[1], rel[2], kl[2], src[0]);
    free(prompt), free(greedy), free(fed), free(ref), free(got);
    return 0;
}
