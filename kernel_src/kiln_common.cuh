// kiln_common.cuh -- device helpers shared by every kiln kernel: number types
// (bf16, fp16, fp8 as plain storage structs with PTX conversions), 16-byte
// vector access, warp/block reductions, Philox-4x32-10. Compiled by NVRTC
// with no CUDA include directory, so nothing here includes a system header.
// Specialization defines name these types directly (-DACT=bf16).
// Thread-safety: device code, no globals.
// (An include guard, not #pragma once: tests/emu's kiln_common.cuh defines KILN_COMMON_CUH too, so a kernel
// header of kernel_src that includes this one gets the emulation's when it is compiled there.)
#ifndef KILN_COMMON_CUH
#define KILN_COMMON_CUH
#include "kiln_types.cuh"

#define KILN_INF __int_as_float(0x7f800000)
#define KILN_NAN __int_as_float(0x7fffffff)
#define KILN_DEV __device__ __forceinline__

// ------------------------------------------ programmatic dependent launch
// On sm_90+ the host launches kiln's kernels with programmatic stream
// serialization (runtime/cuda/kernels.c), so a kernel may start while its
// predecessor in the stream is still running. Every kernel calls pdl_wait()
// before it reads anything an earlier kernel wrote (or writes anything an
// earlier kernel reads); work that touches only weights may come before it.
// pdl_launch() lets the next kernel start launching (it too will wait).
// Both are no-ops before sm_90 and when launched normally.
// PDL_EARLY=1 (a define every kernel takes; the GPU executor asks for it in
// small decode batches): pdl_wait() first signals launch_dependents, so the
// next kernel launches as soon as this one's blocks are all running and
// issues its weight loads under this kernel's wait and work. Safe for the
// same reason as the late signal: every kernel still waits for its
// predecessor to complete before touching its output, and a kernel that has
// completed had waited for its own, so the chain stays ordered.
#ifndef PDL_EARLY
#define PDL_EARLY 0
#endif
KILN_DEV void pdl_launch() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
// the wait alone, never the early signal whatever PDL_EARLY says (kiln_step_feed: see kernel_src/embed.cu)
KILN_DEV void pdl_wait_only() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
KILN_DEV void pdl_wait() {
#if PDL_EARLY
    pdl_launch();
#endif
    pdl_wait_only();
}

#if __CUDA_ARCH__ >= 900
// Thread-block clusters (sm_90): this block's rank in its cluster, and the
// shared-window address `a` of this block mapped into block `rank`'s shared
// memory (for ld / st.shared::cluster)
KILN_DEV u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
KILN_DEV u32 cluster_map(u32 a, u32 rank) {
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
// every thread of the cluster: release this block's shared-memory writes, acquire the others'
KILN_DEV void cluster_barrier() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// a float at a cluster_map'ed address (volatile: stays between the cluster barriers around it)
KILN_DEV float ld_cluster_f32(u32 a) {
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(a));
    return v;
}
#endif
// the global nanosecond timer and this block's SM (profiling records)
KILN_DEV u64 global_timer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
KILN_DEV u32 sm_id() {
    u32 s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}
// orders the compiler's memory accesses around it (asm statements without a memory clobber, such as ldsm_x4,
// are not ordered against plain loads and stores otherwise)
KILN_DEV void compiler_fence() { asm volatile("" ::: "memory"); }
// L2 prefetch of the 128-byte line holding p (weights a kernel will read
// after pdl_wait()).
KILN_DEV void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// ------------------------------------------------------------ conversions
// The rotary pair (x0, x1) -> (x0 c - x1 s, x1 c + x0 s) with every product and sum an explicit
// round-to-nearest operation: left to the compiler, which multiply a subtraction absorbs into a fused
// multiply-add differs from one kernel to the next (kiln_rope_kv_write_dec and kiln_attn_decode_rope's
// rotations gave other bits in a few elements, s89), so kernels that must agree use this.
// One output of it: xo c - xp s (first: the pair's first element, xo = x0, xp = x1) or xo c + xp s (xo = x1,
// xp = x0), for kernels that hold one element and its partner (gemm_sk.cu's ROPE epilogue).
KILN_DEV float rope_rot_one(float xo, float xp, float c, float s, bool first) {
    const float ps = __fmul_rn(xp, s);
    return __fmaf_rn(xo, c, first ? -ps : ps);
}
KILN_DEV void rope_rot(float x0, float x1, float c, float s, float &y0, float &y1) {
    y0 = rope_rot_one(x0, x1, c, s, true);
    y1 = rope_rot_one(x1, x0, c, s, false);
}
KILN_DEV float to_f32(float v) { return v; }
KILN_DEV float to_f32(bf16 v) { return __uint_as_float((u32)v.x << 16); }
KILN_DEV float to_f32(fp16 v) {
    float f;
    asm("{ .reg .f16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(v.x));
    return f;
}

template <class T> KILN_DEV T from_f32(float f);
template <> KILN_DEV float from_f32<float>(float f) { return f; }
template <> KILN_DEV bf16 from_f32<bf16>(float f) {
    bf16 r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.x) : "f"(f));
    return r;
}
template <> KILN_DEV fp16 from_f32<fp16>(float f) {
    fp16 r;
    asm("{ .reg .f16 h; cvt.rn.f16.f32 h, %1; mov.b16 %0, h; }" : "=h"(r.x) : "f"(f));
    return r;
}

#include "kiln_fp8.cuh" // f32_to_fp8, to_f32(fp8)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(KILN_FP8_SOFT)
// sm_89+: the hardware conversion (cvt.rn.satfinite: round to nearest even,
// out-of-range values and infinities to the largest finite value, as above),
// a NaN keeping its sign as above (the instruction's NaN is 0x7f). The same
// bits as f32_to_fp8 for every input (test_gpu_ops test_fp8_cast checks the
// codes, midpoints, specials and random values against the host's).
// b -> the low byte of the pair.
#define KILN_CVT_FP8(T, INSN)                                                                   \
    template <> KILN_DEV T from_f32<T>(float f) {                                           \
        T r;                                                                                \
        if (f != f) {                                                                       \
            r.x = (u8)(((__float_as_uint(f) >> 24) & 0x80u) | 0x7fu);                       \
            return r;                                                                       \
        }                                                                                   \
        unsigned short h;                                                                   \
        asm("cvt.rn.satfinite." INSN "x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(f));  \
        r.x = (u8)(h & 0xffu);                                                              \
        return r;                                                                           \
    }
KILN_CVT_FP8(fp8_e5m2, "e5m2")
KILN_CVT_FP8(fp8_e4m3, "e4m3")
#undef KILN_CVT_FP8
#else
template <> KILN_DEV fp8_e5m2 from_f32<fp8_e5m2>(float f) { fp8_e5m2 r; r.x = f32_to_fp8(f, 2, 15, 57344.0f); return r; }
template <> KILN_DEV fp8_e4m3 from_f32<fp8_e4m3>(float f) { fp8_e4m3 r; r.x = f32_to_fp8(f, 3, 7, 448.0f); return r; }
#endif

// two floats -> packed pair (lo = a, hi = b)
template <class T> KILN_DEV u32 pack2(float a, float b);
template <> KILN_DEV u32 pack2<bf16>(float a, float b) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
    return r;
}
template <> KILN_DEV u32 pack2<fp16>(float a, float b) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
    return r;
}
template <class T> KILN_DEV void unpack2(u32 v, float &a, float &b);
template <> KILN_DEV void unpack2<bf16>(u32 v, float &a, float &b) {
    a = __uint_as_float(v << 16);
    b = __uint_as_float(v & 0xffff0000u);
}
template <> KILN_DEV void unpack2<fp16>(u32 v, float &a, float &b) {
    fp16 x, y;
    x.x = (u16)(v & 0xffffu);
    y.x = (u16)(v >> 16);
    a = to_f32(x);
    b = to_f32(y);
}

// ------------------------------------------------------ 16-byte vectors
// A vector of N elements of T stored in 16 bytes (N = 16 / sizeof(T)).
template <class T> struct vec16 {
    static constexpr int N = 16 / sizeof(T);
    uint4 v;
    KILN_DEV float get(int i) const {
        const T *p = reinterpret_cast<const T *>(&v);
        return to_f32(p[i]);
    }
    KILN_DEV void set(int i, float f) {
        T *p = reinterpret_cast<T *>(&v);
        p[i] = from_f32<T>(f);
    }
};

KILN_DEV uint4 ld16(const void *p) { return *reinterpret_cast<const uint4 *>(p); }
KILN_DEV uint4 ld16_nc(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
KILN_DEV uint4 ld16_stream(const void *p) { // read once: evict first
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
KILN_DEV void st16(void *p, uint4 v) { *reinterpret_cast<uint4 *>(p) = v; }
// 16 bytes cached in L2 only (data another kernel wrote: no stale L1 line)
KILN_DEV uint4 ld16_cg(const void *p) {
    uint4 v;
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
// one 16-byte (8-byte) global store instruction: what st16 of a value put
// together from separate words may not compile to (NVVM can split it into
// four 4-byte stores, which cost a store transaction each)
KILN_DEV void st16_g(void *p, uint4 v) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}
KILN_DEV void st8_g(void *p, u32 x, u32 y) { asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(x), "r"(y)); }

// ------------------------------------------------------------- reductions
#include "kiln_reduce.cuh" // warp_sum, warp_max, block_sum, block_max

// ------------------------------------------------ the attention kernels' instructions
// (kernel_src/attn_common.cuh, attn_decode.cu, attn_prefill.cu; tests/emu's kiln_common.cuh emulates them)
template <class T> struct mma_op; // mma.sync m16n8k16, row.col, fp32 accumulation: c += a b
#define KILN_MMA_OP(T, PTX_T)                                                                                      \
    template <> struct mma_op<T> {                                                                                 \
        static KILN_DEV void run(float c[4], const u32 a[4], u32 b0, u32 b1) {                                     \
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX_T "." PTX_T ".f32 {%0,%1,%2,%3}, "         \
                         "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                                  \
                         : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                          \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                          \
        }                                                                                                          \
    };
KILN_MMA_OP(bf16, "bf16")
KILN_MMA_OP(fp16, "f16")
// 2^x for the softmax (ex2.approx.ftz: MUFU.EX2 without exp2f's range
// fix-up for results below 2^-126, which a probability never needs).
KILN_DEV float fast_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
// 1 / x (rcp.approx.ftz: no slow-path call, e.g. in an epilogue)
KILN_DEV float fast_rcp(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
// threadIdx.x and a global int, read afresh (volatile: not CSE'd with earlier reads, so what an epilogue
// derives from them need not stay live through a loop)
KILN_DEV int tid_x_fresh() {
    int r;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(r));
    return r;
}
KILN_DEV int ldg_nc_fresh(const int *p) {
    int r;
    asm volatile("ld.global.nc.b32 %0, [%1];" : "=r"(r) : "l"(p));
    return r;
}
KILN_DEV u32 prmt(u32 a, u32 b, u32 sel) {
    u32 r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}
// two E4M3 values (byte i = element i) -> f16x2 (exact), sm_89+
KILN_DEV u32 cvt_f16x2_e4m3x2(unsigned short v) {
    u32 r;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(v));
    return r;
}
KILN_DEV u32 lds32(u32 addr) {
    u32 r;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(r) : "r"(addr));
    return r;
}
// 8x8 b16 transpose across the warp: lane (g, t) holding (row g, cols 2t,
// 2t+1) of M gets (row g, cols 2t, 2t+1) of M^T, i.e. M[2t][g], M[2t+1][g].
KILN_DEV u32 movtrans(u32 a) {
    u32 d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
    return d;
}
KILN_DEV u32 dynamic_smem_bytes() {
    u32 r;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}
// loads that bypass L1 (another block of the launch wrote the data), and an acquire-release count at GPU scope
KILN_DEV float ld_cg_f32(const float *p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}
KILN_DEV float4 ld_cg_f4(const float *p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
KILN_DEV int atom_inc_acq_rel_gpu(int *p) { // *p += 1, the value before
    int prev;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(prev) : "l"(p) : "memory");
    return prev;
}

#include "kiln_philox.cuh" // philox4x32, u32_to_unit (asm-free: tests/emu runs it)

// --------------------------------------------------------- async copies
KILN_DEV u32 smem_addr(const void *p) { return (u32)__cvta_generic_to_shared(p); }
// 16-byte global -> shared copy, the shared address as a 32-bit
// shared-window offset: a chunk known to be in bounds, or src_bytes of it
// (0 fills zeros).
KILN_DEV void cp_async16_u32(u32 saddr, const void *gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(saddr), "l"(gmem));
}
KILN_DEV void cp_async16_u32(u32 saddr, const void *gmem, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(saddr), "l"(gmem), "r"(src_bytes));
}
// The same to a generic shared pointer.
KILN_DEV void cp_async16(void *smem, const void *gmem, int src_bytes) { cp_async16_u32(smem_addr(smem), gmem, src_bytes); }
KILN_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> KILN_DEV void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

// ldmatrix of four / two 8x8 b16 matrices from shared memory (addr: this
// lane's row, a 32-bit shared-window offset)
KILN_DEV void ldsm_x4(u32 &r0, u32 &r1, u32 &r2, u32 &r3, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
KILN_DEV void ldsm_x2(u32 &r0, u32 &r1, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(addr));
}

#endif // KILN_COMMON_CUH
