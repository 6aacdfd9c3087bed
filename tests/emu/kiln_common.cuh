// kiln_common.cuh (emulation) -- what kernel_src/kiln_common.cuh gives a kernel, on the CPU through
// cuda_emu.h: the number types with the device's conversions (round to nearest even), 16-byte vectors,
// shared-window addresses, cp.async, ldmatrix, clusters, programmatic dependent launch (no-ops). Only what
// the kernels tested under emulation use (tests/emu/test_emu_*.cc); a kernel that needs more fails to
// compile here, not silently.
#pragma once
#define KILN_COMMON_CUH // kernel_src/kiln_common.cuh's guard: a kernel header including it gets this one
#include "cuda_emu.h"
#include <cmath>

#define KILN_DEV inline
#define KILN_INF INFINITY
#define KILN_NAN NAN


KILN_DEV float __uint_as_float(u32 u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
KILN_DEV u32 __float_as_uint(float f) {
    u32 u;
    memcpy(&u, &f, 4);
    return u;
}
KILN_DEV float emu_half_to_float(u16 h) {
    const u32 s = (u32)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) return __uint_as_float(s | 0x7f800000u | (m << 13));
    if (e) return __uint_as_float(s | ((e + 112) << 23) | (m << 13));
    const float v = (float)m * (1.0f / 16777216.0f); // subnormal: m 2^-24
    return s ? -v : v;
}
KILN_DEV u16 emu_float_to_half(float f) { // round to nearest even
    const u32 u = __float_as_uint(f), s = (u >> 16) & 0x8000u;
    const float a = fabsf(f);
    if (std::isnan(f)) return (u16)(s | 0x7e00u);
    if (a >= 65520.0f) return (u16)(s | 0x7c00u);
    if (a < 6.103515625e-05f) { // subnormal or zero: units of 2^-24
        const float q = a * 16777216.0f;
        float r = nearbyintf(q); // FE_TONEAREST: ties to even
        return (u16)(s | (u32)r);
    }
    u32 e = ((__float_as_uint(a) >> 23) & 255) - 112, m = __float_as_uint(a) & 0x7fffffu;
    u32 h = (e << 10) | (m >> 13);
    const u32 rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++;
    return (u16)(s | h);
}
KILN_DEV float to_f32(float v) { return v; }
KILN_DEV float to_f32(bf16 v) { return __uint_as_float((u32)v.x << 16); }
KILN_DEV float to_f32(fp16 v) { return emu_half_to_float(v.x); }
template <class T> KILN_DEV T from_f32(float f);
template <> inline float from_f32<float>(float f) { return f; }
template <> inline bf16 from_f32<bf16>(float f) {
    u32 u = __float_as_uint(f);
    bf16 r;
    if (std::isnan(f)) r.x = (u16)((u >> 16) | 0x40u);
    else r.x = (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return r;
}
template <> inline fp16 from_f32<fp16>(float f) {
    fp16 r;
    r.x = emu_float_to_half(f);
    return r;
}

// CUDA's integer / float min and max overloads
KILN_DEV int min(int a, int b) { return a < b ? a : b; }
KILN_DEV int max(int a, int b) { return a > b ? a : b; }
KILN_DEV unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
KILN_DEV unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
KILN_DEV float min(float a, float b) { return fminf(a, b); }
KILN_DEV float max(float a, float b) { return fmaxf(a, b); }

struct float4 {
    float x, y, z, w;
};
struct float2 {
    float x, y;
};
KILN_DEV float2 make_float2(float x, float y) { return float2{x, y}; }
KILN_DEV float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
KILN_DEV float rsqrtf(float v) { return 1.0f / sqrtf(v); }
// global-memory atomics and fences: a thread runs alone until it reaches a barrier or the warp's rendezvous,
// so an add is atomic and every store is seen by the threads that run after it
KILN_DEV int atomicAdd(int *p, int v) {
    const int o = *p;
    *p = o + v;
    return o;
}
KILN_DEV void __threadfence() {}
// (64-bit values: two 32-bit shuffles, as the GPU's __shfl_*_sync overloads for them do)
template <class T> KILN_DEV T emu_shfl(T v, int src) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "32- and 64-bit shuffles");
    u32 u[2] = {0, 0};
    memcpy(u, &v, sizeof(T));
    u[0] = emu::shfl(u[0], src);
    if (sizeof(T) == 8) u[1] = emu::shfl(u[1], src);
    memcpy(&v, u, sizeof(T));
    return v;
}
template <class T> KILN_DEV T __shfl_xor_sync(unsigned mask, T v, int o) { return emu_shfl(v, emu::cur->lane ^ o); }
template <class T> KILN_DEV T __shfl_sync(unsigned mask, T v, int src) { return emu_shfl(v, src & 31); }
// lane L gets lane L - d's value, its own where L < d
template <class T> KILN_DEV T __shfl_up_sync(unsigned mask, T v, int d) { return emu_shfl(v, emu::cur->lane - d); }
#include "kiln_reduce.cuh" // kernel_src's: warp_sum, warp_max, block_sum, block_max

// fp8: kernel_src's software conversions (f32_to_fp8, to_f32), from_f32 through them (the GPU's cvt.satfinite
// gives the same bits), and cvt.rn.f16x2.e4m3x2 (exact)
#include "kiln_fp8.cuh"
template <> inline fp8_e5m2 from_f32<fp8_e5m2>(float f) { return fp8_e5m2{f32_to_fp8(f, 2, 15, 57344.0f)}; }
template <> inline fp8_e4m3 from_f32<fp8_e4m3>(float f) { return fp8_e4m3{f32_to_fp8(f, 3, 7, 448.0f)}; }
KILN_DEV u32 cvt_f16x2_e4m3x2(unsigned short v) {
    const fp16 a = from_f32<fp16>(to_f32(fp8_e4m3{(u8)(v & 0xffu)})), b = from_f32<fp16>(to_f32(fp8_e4m3{(u8)(v >> 8)}));
    return (u32)a.x | (u32)b.x << 16;
}

// the attention kernels' instructions (kernel_src/kiln_common.cuh's section of that name)
template <class T> struct mma_op {
    static KILN_DEV void run(float c[4], const u32 a[4], u32 b0, u32 b1) {
        const u32 b[2] = {b0, b1};
        emu::mma(c, a, b, [](u16 h) { return to_f32(T{h}); });
    }
};
KILN_DEV float fast_exp2(float x) { return exp2f(x); }
// rcp.approx.ftz.f32 (at most 1 ulp off 1 / x on the GPU; here the correctly rounded quotient), subnormal inputs
// and results flushed to zero
KILN_DEV float fast_rcp(float x) {
    const float r = 1.0f / (std::fabs(x) < 1.17549435e-38f ? std::copysign(0.0f, x) : x);
    return std::fabs(r) < 1.17549435e-38f ? std::copysign(0.0f, r) : r;
}
KILN_DEV int tid_x_fresh() { return (int)emu::cur->tidx.x; }
KILN_DEV int ldg_nc_fresh(const int *p) { return *p; }
KILN_DEV u32 prmt(u32 a, u32 b, u32 sel) { // prmt.b32 (default mode): byte i of the result is byte sel[i] of {b, a}
    const u64 x = (u64)b << 32 | a;
    u32 r = 0;
    for (int i = 0; i < 4; i++) {
        const u32 sl = (sel >> (4 * i)) & 15, byte = (u32)(x >> (8 * (sl & 7))) & 0xffu;
        r |= (sl & 8 ? (byte & 0x80u ? 0xffu : 0u) : byte) << (8 * i);
    }
    return r;
}
KILN_DEV u32 lds32(u32 addr) {
    u32 v;
    memcpy(&v, emu::sptr(addr, 4), 4);
    return v;
}
KILN_DEV u32 movtrans(u32 a) { return emu::movtrans(a); }
KILN_DEV u32 dynamic_smem_bytes() { return (u32)emu::cur->blk->smem.size(); }
KILN_DEV float ld_cg_f32(const float *p) { return *p; }
KILN_DEV float4 ld_cg_f4(const float *p) { return *reinterpret_cast<const float4 *>(p); }
KILN_DEV int atom_inc_acq_rel_gpu(int *p) { return (*p)++; }

// two 16-bit values in a 32-bit register (cvt.rn.{bf16,f16}x2.f32: a in the low half), and back
template <class T> KILN_DEV u32 pack2(float a, float b) {
    const T x = from_f32<T>(a), y = from_f32<T>(b);
    return (u32)x.x | (u32)y.x << 16;
}
template <class T> KILN_DEV void unpack2(u32 v, float &a, float &b) {
    T x, y;
    x.x = (u16)(v & 0xffffu), y.x = (u16)(v >> 16);
    a = to_f32(x), b = to_f32(y);
}
// __fmaf_rn / __fmul_rn: one rounding each, never contracted (kiln_common.cuh rope_rot)
KILN_DEV float __fmul_rn(float a, float b) {
    volatile float r = a * b;
    return r;
}
KILN_DEV float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
KILN_DEV float rope_rot_one(float xo, float xp, float c, float s, bool first) {
    const float ps = __fmul_rn(xp, s);
    return __fmaf_rn(xo, c, first ? -ps : ps);
}
KILN_DEV void rope_rot(float x0, float x1, float c, float s, float &y0, float &y1) {
    y0 = rope_rot_one(x0, x1, c, s, true);
    y1 = rope_rot_one(x1, x0, c, s, false);
}

// A vector of N elements of T stored in 16 bytes (N = 16 / sizeof(T)).
template <class T> struct vec16 {
    static constexpr int N = 16 / sizeof(T);
    uint4 v;
    float get(int i) const {
        T e;
        memcpy(&e, reinterpret_cast<const unsigned char *>(&v) + i * sizeof(T), sizeof(T));
        return to_f32(e);
    }
    void set(int i, float f) {
        const T e = from_f32<T>(f);
        memcpy(reinterpret_cast<unsigned char *>(&v) + i * sizeof(T), &e, sizeof(T));
    }
};

// 16-byte loads and stores (ld / st .v4.u32, or a uint4 dereference: a misaligned address faults on the GPU, here
// too)
KILN_DEV uint4 ld16(const void *p) {
    if ((uintptr_t)p & 15) emu::fail("ld16: address not 16-byte aligned");
    uint4 v;
    memcpy(&v, p, 16);
    return v;
}
KILN_DEV uint4 ld16_cg(const void *p) { return ld16(p); }
KILN_DEV uint4 ld16_nc(const void *p) { return ld16(p); }
KILN_DEV uint4 ld16_stream(const void *p) { return ld16(p); }
KILN_DEV void st16(void *p, uint4 v) {
    if ((uintptr_t)p & 15) emu::fail("st16: address not 16-byte aligned");
    memcpy(p, &v, 16);
}
// st.global.v4 / .v2 (a misaligned address faults on the GPU: here too)
KILN_DEV void st16_g(void *p, uint4 v) {
    if ((uintptr_t)p & 15) emu::fail("st16_g: address not 16-byte aligned");
    memcpy(p, &v, 16);
}
KILN_DEV void st8_g(void *p, u32 x, u32 y) {
    if ((uintptr_t)p & 7) emu::fail("st8_g: address not 8-byte aligned");
    const u32 v[2] = {x, y};
    memcpy(p, v, 8);
}
KILN_DEV int __popc(u32 v) { return __builtin_popcount(v); }
KILN_DEV int __ffs(int v) { return __builtin_ffs(v); }

KILN_DEV void pdl_wait() {}
KILN_DEV u64 global_timer() { return ++emu::ticks; }
KILN_DEV u32 sm_id() { return emu::cur->blk->idx.x % 132; }
KILN_DEV i64 clock64() { return (i64)++emu::ticks; }
KILN_DEV void pdl_launch() {}
KILN_DEV void pdl_wait_only() {}
KILN_DEV void prefetch_l2(const void *) {} // (an L2 hint: no effect on results)
KILN_DEV void compiler_fence() {}

KILN_DEV u32 smem_addr(const void *p) { return emu::saddr(p); }
KILN_DEV void cp_async16_u32(u32 saddr, const void *gmem) { emu::cp_async(saddr, gmem, 16); }
KILN_DEV void cp_async16_u32(u32 saddr, const void *gmem, int src_bytes) { emu::cp_async(saddr, gmem, src_bytes); }
KILN_DEV void cp_async16(void *smem, const void *gmem, int src_bytes) { cp_async16_u32(smem_addr(smem), gmem, src_bytes); }
KILN_DEV void cp_async_commit() { emu::cp_commit(); }
template <int N> KILN_DEV void cp_async_wait() { emu::cp_wait(N); }

KILN_DEV void ldsm_x4(u32 &r0, u32 &r1, u32 &r2, u32 &r3, u32 addr) {
    u32 r[4];
    emu::ldsm(r, 4, addr);
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
KILN_DEV void ldsm_x2(u32 &r0, u32 &r1, u32 addr) {
    u32 r[2];
    emu::ldsm(r, 2, addr);
    r0 = r[0], r1 = r[1];
}

KILN_DEV u32 cluster_rank() { return emu::cur->blk->rank; }
KILN_DEV u32 cluster_map(u32 a, u32 rank) { return (a & 0xffffffu) | 0x80000000u | (rank << 24); }
KILN_DEV void cluster_barrier() { emu::cluster_barrier(); }
KILN_DEV float ld_cluster_f32(u32 a) {
    float v;
    memcpy(&v, emu::sptr(a, 4), 4);
    return v;
}

// the sampling kernels (kernel_src/sample.cu): int atomics (see atomicAdd), correctly rounded fp32 operations
// never contracted, round-to-nearest-even conversion to u64, the high word of a 32-bit product, and
// kernel_src's Philox
KILN_DEV int atomicOr(int *p, int v) {
    const int o = *p;
    *p = o | v;
    return o;
}
KILN_DEV int atomicExch(int *p, int v) {
    const int o = *p;
    *p = v;
    return o;
}
KILN_DEV int atomicMin(int *p, int v) {
    const int o = *p;
    *p = o < v ? o : v;
    return o;
}
KILN_DEV int atomicMax(int *p, int v) {
    const int o = *p;
    *p = o > v ? o : v;
    return o;
}
KILN_DEV float __fadd_rn(float a, float b) {
    volatile float r = a + b;
    return r;
}
KILN_DEV float __fsub_rn(float a, float b) {
    volatile float r = a - b;
    return r;
}
KILN_DEV unsigned long long __float2ull_rn(float f) { return f > 0.0f ? (unsigned long long)nearbyint((double)f) : 0ull; }
KILN_DEV u32 __umulhi(u32 a, u32 b) { return (u32)(((u64)a * b) >> 32); }
using std::isfinite; // (CUDA's device isfinite is a global function)
#include "kiln_philox.cuh"
