/*
 * opts.c -- option parsing shared by every subcommand: --name VALUE or
 * --name=VALUE, strict number parsing, generated --help.
 */
#include "cli.h"
#include "kiln_base.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const cli_opt *find_opt(cli_opt *const *tables, const char *name, size_t len) {
    for (int t = 0; tables[t]; t++)
        for (const cli_opt *o = tables[t]; o->name; o++)
            if (strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
    return NULL;
}

static void print_help(const char *cmd, const char *summary, cli_opt *const *tables) {
    printf("usage: kiln %s [options]\n\n%s\n\noptions:\n", cmd, summary);
    for (int t = 0; tables[t]; t++)
        for (const cli_opt *o = tables[t]; o->name; o++) {
            char left[64];
            snprintf(left, sizeof left, "%s%s%s%s", o->name[1] ? "--" : "-", o->name, o->type == CLI_FLAG ? "" : " ",
                     o->type == CLI_FLAG ? "" : (o->metavar ? o->metavar : "X"));
            printf("  %-30s %s\n", left, o->help ? o->help : "");
        }
    printf("  %-30s %s\n", "--help", "show this help");
}

static int set_value(const char *cmd, const cli_opt *o, const char *v) {
    char *end = NULL;
    errno = 0;
    switch (o->type) {
    case CLI_INT: {
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < INT_MIN || x > INT_MAX) goto bad_int;
        *(int *)o->ptr = (int)x;
        return 0;
    }
    case CLI_U64: {
        if (*v == '-') goto bad_int;
        unsigned long long x = strtoull(v, &end, 10);
        if (!*v || *end || errno) goto bad_int;
        *(uint64_t *)o->ptr = (uint64_t)x;
        return 0;
    }
    case CLI_SIZE: {
        double x = strtod(v, &end);
        double mul = 1;
        if (end && (*end == 'k' || *end == 'K')) mul = 1024.0, end++;
        else if (end && (*end == 'm' || *end == 'M')) mul = 1024.0 * 1024, end++;
        else if (end && (*end == 'g' || *end == 'G')) mul = 1024.0 * 1024 * 1024, end++;
        if (end && (*end == 'b' || *end == 'B' || *end == 'i')) end++;
        if (end && (*end == 'b' || *end == 'B')) end++;
        if (!*v || *end || errno || !(x >= 0) || x * mul > 1e15) {
            fprintf(stderr, "kiln %s: invalid value '%s' for --%s: expected a size like 512M or 4G\n", cmd, v, o->name);
            return 2;
        }
        *(size_t *)o->ptr = (size_t)(x * mul);
        return 0;
    }
    case CLI_FLOAT:
    case CLI_DOUBLE: {
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x)) {
            fprintf(stderr, "kiln %s: invalid value '%s' for --%s: expected a number\n", cmd, v, o->name);
            return 2;
        }
        if (o->type == CLI_FLOAT) *(float *)o->ptr = (float)x;
        else *(double *)o->ptr = x;
        return 0;
    }
    case CLI_STR: *(const char **)o->ptr = v; return 0;
    default: return 2;
    }
bad_int:
    fprintf(stderr, "kiln %s: invalid value '%s' for --%s: expected an integer\n", cmd, v, o->name);
    return 2;
}

int cli_parse(int argc, char **argv, const char *cmd, const char *summary, cli_opt *const *tables,
              const char **pos, int max_pos, int *n_pos) {
    int np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_help(cmd, summary, tables);
            return 3;
        }
        if (!strcmp(a, "--")) {
            for (i++; i < argc; i++) {
                if (np >= max_pos) goto too_many;
                pos[np++] = argv[i];
            }
            break;
        }
        bool short_opt = a[0] == '-' && a[1] && a[1] != '-' && a[2] == 0 && !(a[1] >= '0' && a[1] <= '9');
        if ((a[0] == '-' && a[1] == '-') || short_opt) {
            const char *name = a + (short_opt ? 1 : 2), *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            const cli_opt *o = find_opt(tables, name, len);
            if (!o) {
                fprintf(stderr, "kiln %s: unknown option --%.*s (see kiln %s --help)\n", cmd, (int)len, name, cmd);
                return 2;
            }
            if (o->type == CLI_FLAG) {
                if (eq) {
                    fprintf(stderr, "kiln %s: option --%s takes no value\n", cmd, o->name);
                    return 2;
                }
                *(bool *)o->ptr = true;
                continue;
            }
            const char *v = eq ? eq + 1 : NULL;
            if (!v) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "kiln %s: option --%s needs a value (%s)\n", cmd, o->name,
                            o->metavar ? o->metavar : "X");
                    return 2;
                }
                v = argv[++i];
            }
            int r = set_value(cmd, o, v);
            if (r) return r;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kiln %s: unknown option %s (see kiln %s --help)\n", cmd, a, cmd);
            return 2;
        }
        if (np >= max_pos) goto too_many;
        pos[np++] = a;
    }
    if (n_pos) *n_pos = np;
    return 0;
too_many:
    fprintf(stderr, "kiln %s: too many arguments (see kiln %s --help)\n", cmd, cmd);
    return 2;
}

int cli_fail(const char *cmd) {
    fprintf(stderr, "kiln %s: error: %s\n", cmd, kiln_last_error());
    return 1;
}

int cli_parse_ids(const char *s, int32_t **ids, int *n) {
    int cap = 16, k = 0;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)cap);
    if (!v) return 1;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '[' || *p == ']' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX) {
            free(v);
            return 1;
        }
        if (k == cap) {
            cap *= 2;
            int32_t *nv = realloc(v, sizeof(int32_t) * (size_t)cap);
            if (!nv) {
                free(v);
                return 1;
            }
            v = nv;
        }
        v[k++] = (int32_t)x;
        p = end;
    }
    *ids = v;
    *n = k;
    return 0;
}

cli_opt *cli_engine_opts(kiln_engine_params *p) {
    static cli_opt o[32];
    cli_opt t[] = {
        {"model", CLI_STR, &p->model, "DIR", "model directory, org/name in the HF cache, or a built-in config name"},
        {"tokenizer", CLI_STR, &p->tokenizer, "PATH", "tokenizer file or directory (default: the model's)"},
        {"device", CLI_STR, &p->device, "auto|cpu|cuda", "where to run (default auto: cuda when a GPU is present)"},
        {"device-id", CLI_INT, &p->device_id, "N", "CUDA device ordinal"},
        {"policy", CLI_STR, &p->policy_file, "FILE.lua", "override the model family's Lua policy"},
        {"policy-options", CLI_STR, &p->policy_options, "JSON", "options object passed to the policy"},
        {"dtype", CLI_STR, &p->dtype, "auto|bf16|fp16|fp32", "weight/activation dtype"},
        {"kv-cache-dtype", CLI_STR, &p->kv_cache_dtype, "auto|fp8_e4m3|fp8_e5m2|bf16|fp16|fp32",
         "KV cache dtype (auto: the policy's, else the activations')"},
        {"kv-scales", CLI_STR, &p->kv_scales, "auto|calibrate|checkpoint|none|FILE.json",
         "FP8 E4M3 KV scales (auto: checkpoint k_scale/v_scale, else calibrated at start-up)"},
        {"load-format", CLI_STR, &p->load_format, "auto|dummy", "dummy: random weights from the config alone"},
        {"tp", CLI_INT, &p->tensor_parallel_size, "N", "tensor-parallel size"},
        {"max-num-seqs", CLI_INT, &p->max_num_seqs, "N", "max running sequences"},
        {"max-num-batched-tokens", CLI_INT, &p->max_num_batched_tokens, "N", "max tokens per step"},
        {"max-model-len", CLI_INT, &p->max_model_len, "N", "context length limit (default: the config's)"},
        {"block-size", CLI_INT, &p->block_size, "N", "KV cache block size in tokens"},
        {"kv-cache-size", CLI_SIZE, &p->kv_cache_bytes, "BYTES", "KV pool size (CPU default 256M)"},
        {"num-kv-blocks", CLI_INT, &p->num_kv_blocks, "N", "force the KV pool size in blocks"},
        {"gpu-memory-utilization", CLI_DOUBLE, &p->gpu_memory_utilization, "F", "fraction of GPU memory to use"},
        {"prefill-ratio", CLI_DOUBLE, &p->prefill_ratio, "F", "prefill when waiting >= F * running"},
        {"threads", CLI_INT, &p->n_threads, "N", "CPU threads (default: all cores)"},
        {"enforce-eager", CLI_FLAG, &p->enforce_eager, NULL, "disable CUDA graphs"},
        {"speculative-method", CLI_STR, &p->speculative_method, "draft|glide|ngram", "speculative decoding"},
        {"speculative-model", CLI_STR, &p->speculative_model, "DIR", "draft / GliDe model"},
        {"num-speculative-tokens", CLI_INT, &p->num_speculative_tokens, "K", "tokens drafted per step"},
        CLI_OPT_END,
    };
    memcpy(o, t, sizeof t);
    return o;
}

cli_opt *cli_sampling_opts(kiln_sampling_params *p) {
    static cli_opt o[24];
    cli_opt t[] = {
        {"max-tokens", CLI_INT, &p->max_tokens, "N", "tokens to generate per prompt (negative: until the context limit)"},
        {"min-tokens", CLI_INT, &p->min_tokens, "N", "suppress EOS before N tokens"},
        {"temperature", CLI_FLOAT, &p->temperature, "T", "0 = greedy"},
        {"top-p", CLI_FLOAT, &p->top_p, "P", "nucleus sampling"},
        {"top-k", CLI_INT, &p->top_k, "K", "top-k sampling (0 = off)"},
        {"min-p", CLI_FLOAT, &p->min_p, "P", "min-p sampling"},
        {"repetition-penalty", CLI_FLOAT, &p->repetition_penalty, "F", "repetition penalty (1 = off)"},
        {"presence-penalty", CLI_FLOAT, &p->presence_penalty, "F", "presence penalty"},
        {"frequency-penalty", CLI_FLOAT, &p->frequency_penalty, "F", "frequency penalty"},
        {"no-repeat-ngram-size", CLI_INT, &p->no_repeat_ngram_size, "N", "forbid repeating n-grams"},
        {"ignore-eos", CLI_FLAG, &p->ignore_eos, NULL, "do not stop at EOS"},
        {"seed", CLI_U64, &p->seed, "N", "sampling seed (reproducible output)"},
        {"logprobs", CLI_INT, &p->logprobs, "N", "report top-N logprobs"},
        CLI_OPT_END,
    };
    memcpy(o, t, sizeof t);
    return o;
}
