/* test_base.c -- errors, buffers, dtype conversions, hashing, thread pool. */
#include "kiln_base.h"
#include "kt.h"

KT_TEST(test_error_record) {
    kiln_clear_error();
    KT_CHECK(kiln_last_error_code() == KILN_OK);
    kiln_status s = KILN_FAIL(KILN_ERR_FORMAT, "bad field %s", "x");
    KT_CHECK(s == KILN_ERR_FORMAT);
    KT_CHECK(!strcmp(kiln_last_error(), "bad field x"));
    KT_CHECK(strstr(kiln_last_error_origin(), "test_base.c:") != NULL);
    kiln_error_context("loading %s", "m");
    KT_CHECK(!strcmp(kiln_last_error(), "loading m: bad field x"));
    KT_CHECK(!strcmp(kiln_status_name(KILN_ERR_FORMAT), "KILN_ERR_FORMAT"));
    KT_CHECK(!strcmp(kiln_status_name((kiln_status)999), "KILN_ERR_UNKNOWN"));
}

KT_TEST(test_buf) {
    kiln_buf b = {0};
    for (int i = 0; i < 1000; i++) KT_OK(kiln_buf_printf(&b, "%d,", i));
    KT_CHECK(b.len == strlen(b.data));
    KT_CHECK(!strncmp(b.data, "0,1,2,", 6));
    char *s = kiln_buf_steal(&b);
    KT_CHECK(b.data == NULL && s != NULL);
    free(s);
}

KT_TEST(test_bf16_f16) {
    /* bf16: exhaustive round trip of every finite value */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kiln_bf16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        KT_REQUIRE(kiln_f32_to_bf16(f) == h);
    }
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kiln_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        KT_REQUIRE(kiln_f32_to_f16(f) == h);
    }
    /* rounding: ties to even */
    KT_CHECK(kiln_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80); /* tie, even stays */
    KT_CHECK(kiln_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82);
    KT_CHECK(kiln_f32_to_f16(65520.0f) == 0x7c00);
    KT_CHECK(kiln_f32_to_f16(65519.0f) == 0x7bff);
    KT_CHECK(kiln_f32_to_f16(5.960464477539063e-08f) == 0x0001);
    KT_CHECK(kiln_f32_to_f16(2.98023223876953125e-08f) == 0x0000); /* tie to even: 0 */
}

KT_TEST(test_fp8) {
    /* every representable value round-trips; max values and saturation */
    for (int v = 0; v < 256; v++) {
        float f = kiln_fp8_e4m3_to_f32((uint8_t)v);
        if (!isnan(f)) KT_REQUIRE(kiln_f32_to_fp8_e4m3(f) == (uint8_t)v);
        float g = kiln_fp8_e5m2_to_f32((uint8_t)v);
        if (!isnan(g) && !isinf(g)) KT_REQUIRE(kiln_f32_to_fp8_e5m2(g) == (uint8_t)v);
    }
    KT_CHECK(kiln_fp8_e4m3_to_f32(0x7e) == 448.0f);
    KT_CHECK(isnan(kiln_fp8_e4m3_to_f32(0x7f)));
    KT_CHECK(kiln_fp8_e5m2_to_f32(0x7b) == 57344.0f);
    KT_CHECK(isinf(kiln_fp8_e5m2_to_f32(0x7c)));
    KT_CHECK(kiln_f32_to_fp8_e4m3(1e6f) == 0x7e);
    KT_CHECK(kiln_f32_to_fp8_e4m3(-1e6f) == 0xfe);
    KT_CHECK(kiln_f32_to_fp8_e4m3(INFINITY) == 0x7e);
    KT_CHECK(kiln_f32_to_fp8_e5m2(INFINITY) == 0x7b);
    KT_CHECK(kiln_fp8_e4m3_to_f32(0x01) == ldexpf(1, -9)); /* smallest subnormal */
    /* ties to even between 1.0 (0x38) and 1.125 (0x39): 1.0625 -> 1.0 */
    KT_CHECK(kiln_f32_to_fp8_e4m3(1.0625f) == 0x38);
    KT_CHECK(kiln_f32_to_fp8_e4m3(1.1875f) == 0x3a);
    /* values below half the smallest subnormal round to (signed) zero */
    KT_CHECK(kiln_f32_to_fp8_e4m3(1e-30f) == 0x00 && kiln_f32_to_fp8_e4m3(-1e-4f) == 0x80);
    KT_CHECK(kiln_f32_to_fp8_e5m2(1e-30f) == 0x00 && kiln_f32_to_fp8_e5m2(-1e-7f) == 0x80);
}

static void square(void *ctx, int64_t i) { ((int64_t *)ctx)[i] = i * i; }

KT_TEST(test_pool) {
    kiln_pool *p = NULL;
    KT_OK(kiln_pool_create(4, &p));
    int64_t v[1000];
    for (int rep = 0; rep < 50; rep++) {
        memset(v, 0, sizeof v);
        kiln_pool_for(p, 1000, square, v);
        for (int i = 0; i < 1000; i++) KT_REQUIRE(v[i] == (int64_t)i * i);
    }
    kiln_pool_destroy(p);
}

KT_TEST(test_hash_philox) {
    KT_CHECK(kiln_hash64("abc", 3, 0) == kiln_hash64("abc", 3, 0));
    KT_CHECK(kiln_hash64("abc", 3, 0) != kiln_hash64("abd", 3, 0));
    KT_CHECK(kiln_hash64("", 0, 0) == 0xEF46DB3751D8E999ULL); /* xxh64 reference */
    uint32_t o[4];
    /* Philox4x32-10 known-answer test (Random123 kat_vectors): zeros */
    kiln_philox4x32(0, 0, 0, o);
    KT_CHECK(o[0] == 0x6627e8d5u && o[1] == 0xe169c58du && o[2] == 0xbc57ac4cu && o[3] == 0x9b00dbd8u);
}

KT_MAIN(KT_CASE(test_error_record), KT_CASE(test_buf), KT_CASE(test_bf16_f16), KT_CASE(test_fp8),
        KT_CASE(test_pool), KT_CASE(test_hash_philox))
