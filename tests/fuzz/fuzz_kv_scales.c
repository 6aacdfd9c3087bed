/*
 * fuzz_kv_scales.c -- libFuzzer target: arbitrary bytes as the FP8 KV cache
 * scales file of --kv-scales FILE.json, parsed by kiln_kv_scales_parse_json
 * (the text up to the first NUL byte, as kiln_read_file hands it over) for a
 * few model shapes (KV layers x global KV heads: 1 x 1, 2 x 1, 3 x 2, 4 x 8).
 * Accepted formats (engine/kv_scales.c): {"k_scale": x | [per layer] |
 * [[per head] per layer], "v_scale": ...} and vLLM's quantization-param file
 * {"kv_cache": {"scaling_factor": {rank: {layer: x}}}}. Parsing must fail
 * with a clear error (a message, never KILN_ERR_INTERNAL) or fill every one
 * of the n_layers * 2 * n_heads scales (an exactly sized heap array, so ASan
 * sees a write past it) with a positive, finite, normal float: the
 * executors divide by them. Built by scripts/fuzz.sh (KILN_FUZZ_MAIN);
 * replayed by tests/test_model_files_fuzz_regress.c.
 */
#include "kiln.h"
#include "engine_internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int kiln_fuzz_kvs_shapes[][2] = {{1, 1}, {2, 1}, {3, 2}, {4, 8}};

int kiln_fuzz_kv_scales_one(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    if (size) memcpy(text, data, size);
    text[size] = 0;
    for (size_t i = 0; i < sizeof kiln_fuzz_kvs_shapes / sizeof kiln_fuzz_kvs_shapes[0]; i++) {
        int L = kiln_fuzz_kvs_shapes[i][0], G = kiln_fuzz_kvs_shapes[i][1];
        size_t n = (size_t)L * 2 * (size_t)G;
        float *s = malloc(sizeof(float) * n);
        if (!s) break;
        for (size_t k = 0; k < n; k++) s[k] = NAN; /* a scale left unset shows */
        kiln_clear_error();
        kiln_status st = kiln_kv_scales_parse_json(text, "fuzz/kv_scales.json", L, G, s);
        if (st == KILN_OK) {
            for (size_t k = 0; k < n; k++)
                if (!(s[k] >= FLT_MIN && s[k] < INFINITY)) {
                    fprintf(stderr, "fuzz_kv_scales: accepted, but scale %zu of %d layers x %d heads is %g\n", k, L,
                            G, (double)s[k]);
                    abort();
                }
        } else {
            const char *msg = kiln_last_error();
            if (st == KILN_ERR_INTERNAL || !msg || !*msg) {
                fprintf(stderr, "fuzz_kv_scales: %s without a clear message: %s\n", kiln_status_name(st),
                        msg ? msg : "(null)");
                abort();
            }
        }
        free(s);
    }
    free(text);
    return 0;
}

#ifdef KILN_FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return kiln_fuzz_kv_scales_one(data, size); }
#endif
