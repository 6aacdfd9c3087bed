/*
 * fuzz_config.c -- libFuzzer target: arbitrary bytes as a Hugging Face
 * config.json, parsed by kiln_model_config_parse (the text up to the first
 * NUL byte). When a NUL byte is followed by more data, that data is also
 * written as generation_config.json beside the config in a private temporary
 * directory and the pair is read by kiln_model_config_load. Parsing must fail
 * with a clear error (a message, never KILN_ERR_INTERNAL) or give a config
 * that satisfies the invariants the loader relies on (positive sizes, heads
 * that divide, widths that fit an int, a positive finite rope base, a rotary
 * fraction in (0, 1], llama3 frequency factors low < high, token ids that
 * are the file's own, not wrapped into an int), and describing it must work.
 * Built by scripts/fuzz.sh (KILN_FUZZ_MAIN); replayed by
 * tests/test_model_files_fuzz_regress.c.
 */
#include "kiln.h"
#include "model.h"
#include "fuzz_files.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char kiln_fuzz_cfg_dir[512];

static void kiln_fuzz_cfg_cleanup(void) {
    if (!kiln_fuzz_cfg_dir[0]) return;
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", kiln_fuzz_cfg_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/generation_config.json", kiln_fuzz_cfg_dir);
    unlink(path);
    rmdir(kiln_fuzz_cfg_dir);
    kiln_fuzz_cfg_dir[0] = 0;
}

static void kiln_fuzz_cfg_write(const char *name, const char *data, size_t size) {
    kiln_fuzz_write("fuzz_config", kiln_fuzz_cfg_dir, name, data, size);
}

static void kiln_fuzz_cfg_failed(kiln_status st) {
    const char *msg = kiln_last_error();
    if (st == KILN_ERR_INTERNAL || !msg || !*msg) {
        fprintf(stderr, "fuzz_config: %s without a clear message: %s\n", kiln_status_name(st), msg ? msg : "(null)");
        abort();
    }
}

static void kiln_fuzz_cfg_check(const kiln_model_config *c) {
    if (!c->architecture || !c->model_type || !c->hidden_act || !c->json) abort();
    if (c->hidden_size < 1 || c->intermediate_size < 1 || c->num_layers < 1 || c->num_heads < 1 ||
        c->num_kv_heads < 1 || c->head_dim < 1 || c->vocab_size < 1 || c->max_position_embeddings < 1)
        abort();
    if (c->num_heads % c->num_kv_heads) abort();
    if ((int64_t)(c->num_heads + 2 * (int64_t)c->num_kv_heads) * c->head_dim > INT_MAX) abort();
    if (!(c->rope.theta > 0) || !isfinite(c->rope.theta) || !(c->rope.factor > 0)) abort();
    if (!(c->rope.partial_rotary_factor > 0 && c->rope.partial_rotary_factor <= 1)) abort();
    if (!strcmp(c->rope.type, "llama3") &&
        !(c->rope.low_freq_factor > 0 && c->rope.high_freq_factor > c->rope.low_freq_factor))
        abort();
    if (!(c->rms_norm_eps >= 0) || c->sliding_window < 0) abort();
    /* head_dim may only differ from hidden_size / num_heads when the file says so */
    json_t *hd = json_object_get(c->json, "head_dim");
    if (c->hidden_size % c->num_heads && (!hd || json_is_null(hd))) abort();
    /* token ids are the file's own (no wrap-around), or -1 */
    if (c->bos_token_id < -1 || c->pad_token_id < -1) abort();
    json_t *bos = json_object_get(c->json, "bos_token_id");
    if (json_is_integer(bos) && json_integer_value(bos) >= 0 && json_integer_value(bos) != c->bos_token_id) abort();
    json_t *pad = json_object_get(c->json, "pad_token_id");
    if (json_is_integer(pad) && json_integer_value(pad) >= 0 && json_integer_value(pad) != c->pad_token_id) abort();
    if (c->n_eos < 0 || c->n_eos > KILN_MAX_EOS) abort();
    for (int i = 0; i < c->n_eos; i++) {
        bool listed = false;
        for (int g = 0; g < 2; g++) {
            json_t *e = json_object_get(g ? c->generation : c->json, "eos_token_id"), *x;
            size_t k;
            if (json_is_integer(e)) listed |= json_integer_value(e) == c->eos_token_ids[i];
            json_array_foreach(e, k, x) listed |= json_is_integer(x) && json_integer_value(x) == c->eos_token_ids[i];
        }
        if (!listed) abort();
    }
    kiln_buf b = {0};
    if (kiln_model_config_describe(c, &b) != KILN_OK) abort();
    kiln_buf_free(&b);
}

int kiln_fuzz_config_one(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    if (size) memcpy(text, data, size);
    text[size] = 0;
    kiln_model_config cfg;
    kiln_status st = kiln_model_config_parse(text, "fuzz/config.json", &cfg);
    if (st == KILN_OK) {
        kiln_fuzz_cfg_check(&cfg);
        kiln_model_config_free(&cfg);
    } else {
        kiln_fuzz_cfg_failed(st);
    }
    size_t n = strlen(text);
    if (n + 1 < size) { /* config NUL generation_config */
        if (!kiln_fuzz_cfg_dir[0]) {
            const char *tmp = getenv("TMPDIR");
            snprintf(kiln_fuzz_cfg_dir, sizeof kiln_fuzz_cfg_dir, "%s/kiln-fuzz-cfg-XXXXXX",
                     tmp && *tmp ? tmp : "/tmp");
            if (!mkdtemp(kiln_fuzz_cfg_dir)) {
                perror("fuzz_config: mkdtemp");
                abort();
            }
            atexit(kiln_fuzz_cfg_cleanup);
        }
        kiln_fuzz_cfg_write("config.json", text, n);
        kiln_fuzz_cfg_write("generation_config.json", text + n + 1, size - n - 1);
        st = kiln_model_config_load(kiln_fuzz_cfg_dir, &cfg);
        if (st == KILN_OK) {
            kiln_fuzz_cfg_check(&cfg);
            kiln_model_config_free(&cfg);
        } else {
            kiln_fuzz_cfg_failed(st);
        }
    }
    free(text);
    return 0;
}

#ifdef KILN_FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return kiln_fuzz_config_one(data, size); }
#endif
