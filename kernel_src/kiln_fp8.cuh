// kiln_fp8.cuh -- fp8 (e4m3, e5m2) conversions in software (kiln_common.cuh's; sm_89+ converts f32 -> fp8 with
// cvt.rn.satfinite there instead, the same bits). asm-free: the CPU emulation of tests/emu includes it as it is,
// after its from_f32 declaration.
#pragma once

// f32 -> fp8, round to nearest even, saturating to the largest finite value,
// NaN stays NaN (sign | 0x7f): the same function as kiln_f32_to_fp8_* on the
// host (runtime/base/dtype.c), written with integer steps so every arch
// agrees bit for bit.
KILN_DEV u8 f32_to_fp8(float f, int mbits, int bias, float maxv) {
    u32 u = __float_as_uint(f);
    u32 sign = (u >> 24) & 0x80u;
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u8)(sign | 0x7fu);
    float a = fabsf(f);
    if (a == 0.0f) return (u8)sign;
    int e = (int)((u >> 23) & 0xffu) - 127;
    int emin = 1 - bias;
    if (e < emin) e = emin;
    float q = ldexpf(a, mbits - e);
    float r = rintf(q);
    float v = ldexpf(r, e - mbits);
    if (!(v <= maxv)) v = maxv;
    u32 vu = __float_as_uint(v);
    int ve = (int)((vu >> 23) & 0xffu) - 127;
    u32 bits;
    if (ve < emin) bits = (u32)ldexpf(v, mbits - emin);
    else bits = ((u32)(ve + bias) << mbits) | ((vu >> (23 - mbits)) & ((1u << mbits) - 1u));
    return (u8)(sign | bits);
}

KILN_DEV float to_f32(fp8_e5m2 v) {
    u32 s = (u32)(v.x & 0x80u) << 24, e = (v.x >> 2) & 0x1fu, m = v.x & 3u;
    if (e == 31) return __uint_as_float(s | 0x7f800000u | (m << 21));
    if (e == 0) { float r = ldexpf((float)m, -16); return s ? -r : r; }
    return __uint_as_float(s | ((e + 112u) << 23) | (m << 21));
}
KILN_DEV float to_f32(fp8_e4m3 v) {
    u32 e = (v.x >> 3) & 0xfu, m = v.x & 7u;
    float r;
    if (e == 15 && m == 7) r = KILN_NAN;
    else if (e == 0) r = ldexpf((float)m, -9);
    else r = ldexpf((float)(8 | m), (int)e - 10);
    return (v.x & 0x80u) ? -r : r;
}
