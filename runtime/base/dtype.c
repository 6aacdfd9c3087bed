/*
 * dtype.c -- element types: sizes, names, and exact conversions between
 * f32 and f16 / bf16 / FP8 (E4M3, E5M2). These are the reference conversions
 * the GPU kernels are tested against bit for bit.
 * Thread-safety: pure functions.
 */
#include "kiln_base.h"

#include <math.h>
#include <strings.h>

static const struct {
    const char *name;
    size_t size;
} dtype_info[KILN_DTYPE_COUNT] = {
    [KILN_DTYPE_INVALID] = {"invalid", 0}, [KILN_DTYPE_F32] = {"fp32", 4},
    [KILN_DTYPE_F16] = {"fp16", 2},        [KILN_DTYPE_BF16] = {"bf16", 2},
    [KILN_DTYPE_FP8_E4M3] = {"fp8_e4m3", 1}, [KILN_DTYPE_FP8_E5M2] = {"fp8_e5m2", 1},
    [KILN_DTYPE_I32] = {"int32", 4},       [KILN_DTYPE_I64] = {"int64", 8},
    [KILN_DTYPE_I8] = {"int8", 1},         [KILN_DTYPE_U8] = {"uint8", 1},
    [KILN_DTYPE_F64] = {"fp64", 8},        [KILN_DTYPE_BOOL] = {"bool", 1},
    [KILN_DTYPE_I16] = {"int16", 2},
};

size_t kiln_dtype_size(kiln_dtype t) { return (t > 0 && t < KILN_DTYPE_COUNT) ? dtype_info[t].size : 0; }
const char *kiln_dtype_name(kiln_dtype t) {
    return (t > 0 && t < KILN_DTYPE_COUNT) ? dtype_info[t].name : "invalid";
}

kiln_dtype kiln_dtype_from_name(const char *s) {
    if (!s) return KILN_DTYPE_INVALID;
    static const struct { const char *n; kiln_dtype t; } names[] = {
        {"fp32", KILN_DTYPE_F32}, {"float32", KILN_DTYPE_F32}, {"float", KILN_DTYPE_F32},
        {"f32", KILN_DTYPE_F32}, {"fp16", KILN_DTYPE_F16}, {"float16", KILN_DTYPE_F16},
        {"half", KILN_DTYPE_F16}, {"f16", KILN_DTYPE_F16}, {"bf16", KILN_DTYPE_BF16},
        {"bfloat16", KILN_DTYPE_BF16}, {"fp8_e4m3", KILN_DTYPE_FP8_E4M3},
        {"float8_e4m3fn", KILN_DTYPE_FP8_E4M3}, {"fp8_e5m2", KILN_DTYPE_FP8_E5M2},
        {"float8_e5m2", KILN_DTYPE_FP8_E5M2}, {"int32", KILN_DTYPE_I32}, {"int64", KILN_DTYPE_I64},
    };
    for (size_t i = 0; i < KILN_ARRAY_LEN(names); i++)
        if (!strcasecmp(s, names[i].n)) return names[i].t;
    return KILN_DTYPE_INVALID;
}

kiln_dtype kiln_dtype_from_safetensors(const char *s) {
    static const struct { const char *n; kiln_dtype t; } names[] = {
        {"F32", KILN_DTYPE_F32},  {"F16", KILN_DTYPE_F16},       {"BF16", KILN_DTYPE_BF16},
        {"F8_E4M3", KILN_DTYPE_FP8_E4M3}, {"F8_E5M2", KILN_DTYPE_FP8_E5M2}, {"I32", KILN_DTYPE_I32},
        {"I64", KILN_DTYPE_I64},  {"I8", KILN_DTYPE_I8},         {"U8", KILN_DTYPE_U8},
        {"F64", KILN_DTYPE_F64},  {"BOOL", KILN_DTYPE_BOOL},     {"I16", KILN_DTYPE_I16},
    };
    for (size_t i = 0; i < KILN_ARRAY_LEN(names); i++)
        if (!strcmp(s, names[i].n)) return names[i].t;
    return KILN_DTYPE_INVALID;
}

float kiln_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (mant == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { mant <<= 1; e++; } while (!(mant & 0x400u));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (mant << 13);
    } else {
        u = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t kiln_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) { /* below the smallest normal 2^-14: subnormal or zero */
        if (a < 0x33000000u) return (uint16_t)sign; /* < 2^-25: rounds to 0 */
        uint32_t mant = (a & 0x7fffffu) | 0x800000u;
        int shift = 113 - (int)(a >> 23) + 13; /* 126 - e + ... */
        uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;
    return (uint16_t)(sign | (r >> 13));
}

/* Generic small-float decode: e exponent bits, m mantissa bits, bias. */
static float fp8_decode(uint8_t v, int ebits, int mbits, int bias, bool ieee) {
    int sign = v >> 7;
    int exp = (v >> mbits) & ((1 << ebits) - 1);
    int mant = v & ((1 << mbits) - 1);
    float r;
    if (ieee && exp == (1 << ebits) - 1) {
        r = mant ? NAN : INFINITY;
    } else if (!ieee && exp == (1 << ebits) - 1 && mant == (1 << mbits) - 1) {
        r = NAN;
    } else if (exp == 0) {
        r = ldexpf((float)mant, 1 - bias - mbits);
    } else {
        r = ldexpf((float)((1 << mbits) | mant), exp - bias - mbits);
    }
    return sign ? -r : r;
}

static uint8_t fp8_encode(float f, int ebits, int mbits, int bias, float maxv, uint8_t nan_bits) {
    uint8_t sign = signbit(f) ? 0x80 : 0;
    if (isnan(f)) return (uint8_t)(sign | nan_bits);
    float a = fabsf(f);
    if (a == 0.0f) return sign;
    int emin = 1 - bias;
    int e;
    frexpf(a, &e);
    e -= 1; /* a = 1.x * 2^e */
    if (e < emin) e = emin;
    float q = ldexpf(a, mbits - e);  /* exact: scaling by a power of two */
    float r = nearbyintf(q);         /* round to nearest, ties to even */
    float v = ldexpf(r, e - mbits);
    if (v == 0.0f) return sign;      /* below half the smallest subnormal */
    if (!(v <= maxv)) v = maxv;      /* saturate (also catches inf) */
    /* encode v exactly */
    frexpf(v, &e);
    e -= 1;
    uint32_t bits;
    if (e < emin) {
        bits = (uint32_t)ldexpf(v, mbits - emin); /* subnormal mantissa */
    } else {
        uint32_t mant = (uint32_t)ldexpf(v, mbits - e) - (1u << mbits);
        bits = ((uint32_t)(e + bias) << mbits) | mant;
    }
    (void)ebits;
    return (uint8_t)(sign | bits);
}

float kiln_fp8_e4m3_to_f32(uint8_t v) { return fp8_decode(v, 4, 3, 7, false); }
float kiln_fp8_e5m2_to_f32(uint8_t v) { return fp8_decode(v, 5, 2, 15, true); }
uint8_t kiln_f32_to_fp8_e4m3(float f) { return fp8_encode(f, 4, 3, 7, 448.0f, 0x7f); }
uint8_t kiln_f32_to_fp8_e5m2(float f) { return fp8_encode(f, 5, 2, 15, 57344.0f, 0x7f); }

/* src may be misaligned (a checkpoint's data section need not start at an
 * even offset): 16-bit elements are read through memcpy. */
void kiln_to_f32(float *dst, const void *src, kiln_dtype t, size_t n) {
    const unsigned char *b = src;
    switch (t) {
    case KILN_DTYPE_F32: memcpy(dst, src, n * 4); break;
    case KILN_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, b + 2 * i, 2);
            dst[i] = kiln_bf16_to_f32(v);
        }
        break;
    case KILN_DTYPE_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, b + 2 * i, 2);
            dst[i] = kiln_f16_to_f32(v);
        }
        break;
    case KILN_DTYPE_FP8_E4M3: {
        const uint8_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = kiln_fp8_e4m3_to_f32(s[i]);
        break;
    }
    case KILN_DTYPE_FP8_E5M2: {
        const uint8_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = kiln_fp8_e5m2_to_f32(s[i]);
        break;
    }
    default:
        for (size_t i = 0; i < n; i++) dst[i] = NAN;
    }
}

void kiln_from_f32(void *dst, kiln_dtype t, const float *src, size_t n) {
    switch (t) {
    case KILN_DTYPE_F32: memcpy(dst, src, n * 4); break;
    case KILN_DTYPE_BF16: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = kiln_f32_to_bf16(src[i]);
        break;
    }
    case KILN_DTYPE_F16: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = kiln_f32_to_f16(src[i]);
        break;
    }
    case KILN_DTYPE_FP8_E4M3: {
        uint8_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = kiln_f32_to_fp8_e4m3(src[i]);
        break;
    }
    case KILN_DTYPE_FP8_E5M2: {
        uint8_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = kiln_f32_to_fp8_e5m2(src[i]);
        break;
    }
    default: break;
    }
}
