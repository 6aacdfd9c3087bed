// label: unit
/* test_checkpoint_align.c -- a safetensors file whose header length leaves
 * the data section at an odd offset (the format does not require the
 * padding writers usually add): the CPU backend must not read its weights
 * through misaligned pointers (the sanitizer pass, -fsanitize=alignment,
 * runs this) and must generate exactly what the aligned file does. */
#include "kiln.h"
#include "kiln_base.h"
#include "kt_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SRC KT_MODEL("llama3-gqa")

static void copy_file(const char *dir, const char *name) {
    char *from = kiln_path_join(SRC, name), *to = kiln_path_join(dir, name), *buf = NULL;
    size_t n = 0;
    KT_OK(kiln_read_file(from, &buf, &n));
    KT_OK(kiln_write_file_atomic(to, buf, n));
    free(buf), free(from), free(to);
}

static int32_t *greedy(const char *dir, int *n_out) {
    kiln_engine_params p;
    kt_engine_params(&p, dir, "cpu");
    p.n_threads = 2;
    p.max_model_len = 64;
    kiln_engine *e = NULL;
    if (kiln_engine_create(&p, &e) != KILN_OK) {
        KT_CHECKF(false, "%s: %s", dir, kiln_last_error());
        return NULL;
    }
    static const int32_t prompt[] = {5, 17, 99, 200, 301, 7, 42};
    kiln_request r;
    kt_greedy_request(&r, prompt, 7, 12);
    kiln_result res = {0};
    if (kiln_engine_generate(e, &r, 1, &res) != KILN_OK) {
        KT_CHECKF(false, "%s: %s", dir, kiln_last_error());
        kiln_engine_destroy(e);
        return NULL;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(res.n_ids > 0 ? res.n_ids : 1));
    memcpy(ids, res.ids, sizeof(int32_t) * (size_t)res.n_ids);
    *n_out = res.n_ids;
    kiln_result_free(&res);
    kiln_engine_destroy(e);
    return ids;
}

KT_TEST(test_odd_data_offset) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/kt_align_%d", KT_BINARY_DIR, (int)getpid());
    KT_OK(kiln_mkdirs(dir));
    copy_file(dir, "config.json");
    copy_file(dir, "generation_config.json");
    /* the same header padded with spaces so that the data begins at an offset of 1 mod 8 */
    char *src = kiln_path_join(SRC, "model.safetensors"), *buf = NULL;
    size_t n = 0;
    KT_OK(kiln_read_file(src, &buf, &n));
    KT_REQUIRE(buf && n >= 8);
    uint64_t hl = 0;
    memcpy(&hl, buf, 8);
    KT_REQUIRE(hl <= n - 8);
    uint64_t pad = (8 + 1 - (8 + hl) % 8) % 8, nhl = hl + pad;
    KT_REQUIRE((8 + nhl) % 8 == 1);
    char *out = malloc(n + pad);
    memcpy(out, &nhl, 8);
    memcpy(out + 8, buf + 8, hl);
    memset(out + 8 + hl, ' ', pad);
    memcpy(out + 8 + nhl, buf + 8 + hl, n - 8 - hl);
    char *dst = kiln_path_join(dir, "model.safetensors");
    KT_OK(kiln_write_file_atomic(dst, out, n + pad));
    int na = 0, nb = 0;
    int32_t *a = greedy(SRC, &na), *b = greedy(dir, &nb);
    KT_REQUIRE(a && b);
    KT_CHECKF(na == 12 && nb == 12, "%d and %d tokens", na, nb);
    KT_CHECKF(na == nb && !memcmp(a, b, sizeof(int32_t) * (size_t)na), "the odd-offset copy generates other tokens");
    unlink(dst);
    char *c1 = kiln_path_join(dir, "config.json"), *c2 = kiln_path_join(dir, "generation_config.json");
    unlink(c1), unlink(c2), rmdir(dir);
    free(a), free(b), free(buf), free(out), free(src), free(dst), free(c1), free(c2);
}

KT_MAIN(KT_CASE(test_odd_data_offset))
