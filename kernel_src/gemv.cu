// gemv.cu -- out[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) for small M (decode
// steps of a few sequences), where the GEMM is a stream over W: each warp
// owns ROWS rows of W and walks them with 16-byte loads, ROWS * UNROLL of
// them in flight per lane, reusing each W vector for the M rows of x (x
// stays in L1/L2). fp32 accumulation; the warp reduces and lane 0 writes
// (OUT: act or fp32).
// Semantics: engine/ops_cpu.h kiln_cpu_gemm. K % (16 / sizeof(ACT)) == 0.
// Specialization: MAXM (rows of x this build handles: 1, 2, 4 or 8; M <=
// MAXM), ROWS (W rows per warp), UNROLL (16-byte loads per row in flight).
// Grid: ceil(N / (ROWS * WARPS)) blocks of WARPS * 32 threads (host:
// engine/cuda/ops_gpu.c kiln_gpu_gemm).
// GLU=1 (with ROWS 2, OUT = ACT): the gate/up projection with the SiLU-and-mul
// that follows it as its epilogue (kiln_gpu_gemm_silu): W is [N = 2I, K]
// (gate rows, then up rows), warp j takes rows j and I + j, and
// out[m, j] = silu(g) * u, where g and u are the two dot products (+ bias)
// rounded to ACT as the plain GEMV would store them and the product is
// act.cu's (the same bits as the two kernels). Grid: ceil(I / WARPS) blocks.
// KSPLIT (1, 2 or 4): KSPLIT consecutive warps of a block share output j (GLU)
// or their ROWS rows (plain), each taking its share of the K vectors (whole 128-byte sectors; lane-
// strided within it) of both rows; after a block barrier the first warp of
// the group adds the others' warp sums in warp order, then the bias, and
// writes as above (fp32 summation order differs from KSPLIT 1, so the bits
// can). Grid: ceil(I / (WARPS / KSPLIT)) blocks, KSPLIT * I warps (plain:
// ceil(N / (ROWS * WARPS / KSPLIT)) blocks).
// The batch-1 residual add + RMSNorm between two GEMVs, without a kernel of
// its own (engine/cuda/ops_gpu.c kiln_gpu_gemv_add_ss / kiln_gpu_norm_in), as
// rmsnorm(h) * w . W = r * ((h * w) . W) with r = 1 / rms(h), a scalar:
// NOUT=1 (the plain GEMV, MAXM 1, OUT = ACT; the o or down projection):
//   residual[n] += the output rounded to ACT as the GEMV stores it (the sum
//   rounded to ACT, as add_rmsnorm stores the residual: h), out[n] = h * nw[n]
//   rounded to ACT (nw: the norm's weight), and block b writes ss_out[b], the
//   sum of squares of its rows' h (its groups in warp order, rows in order).
// NIN=1 (MAXM 1; the plain, GLU and ROPE GEMVs after it): x is that h * nw;
//   each warp sums the npart partials (16-byte vectors lane-strided, then
//   across the warp: every warp the same bits; part 16-byte aligned) after its
//   products, r = rsqrt(ss / K + eps), and every dot product is multiplied by
//   r before the bias and the epilogue. One rounding of the normalised row
//   (h * nw) where the norm kernel has the same one after h * r: other bits
//   than the two kernels, no less precise.
#include "kiln_common.cuh"
#include "norm_fold.cuh" // nout_put: NOUT's store

#if defined(AR) && AR // kiln_gemv_ar_norm's fixed shape (below)
#define OUT ACT
#define MAXM 1
#define GLU 0
#endif
#if defined(ROPE) && ROPE // kiln_gemv_rope's fixed shape (below)
#define OUT ACT
#define MAXM 1
#ifndef RR
#define RR 2
#endif
#define ROWS RR
#define GLU 0
#endif
typedef ACT act_t;
typedef OUT out_t;
#ifndef MAXM
#define MAXM 8
#endif
#ifndef ROWS
#define ROWS 2
#endif
#ifndef UNROLL
#define UNROLL 4
#endif
#define WARPS 8
#ifndef GLU
#define GLU 0
#endif
#ifndef KSPLIT
#define KSPLIT 1
#endif
static_assert(!GLU || ROWS == 2, "GLU: a gate row and an up row a warp");
static_assert(KSPLIT == 1 || KSPLIT == 2 || KSPLIT == 4, "KSPLIT: 1, 2 or 4");
#ifndef ROPE
#define ROPE 0
#endif
#ifndef AR
#define AR 0
#endif
#ifndef NIN
#define NIN 0
#endif
#ifndef NOUT
#define NOUT 0
#endif
static_assert(!NIN || MAXM == 1, "NIN: batch 1");
static_assert(!NOUT || (MAXM == 1 && !GLU && !ROPE && !AR), "NOUT: the plain batch-1 GEMV");

// NIN's scale (above): the producer's partial sums of squares, their count, epsilon
struct NormIn {
    const float *part;
    int npart;
    float eps;
};
// this warp's 1 / rms of the residual row of K elements from the npart
// partials: 16 a lane in flight at a time (four 16-byte loads where whole),
// summed in a fixed order
__device__ __forceinline__ float nin_rrms(const NormIn &ni, int K, int lane) {
    float s = 0.0f;
    for (int i0 = 0; i0 < ni.npart; i0 += 32 * 16) {
        float4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int i = i0 + (u * 32 + lane) * 4;
            if (i + 3 < ni.npart) v[u] = *reinterpret_cast<const float4 *>(ni.part + i);
            else {
                v[u].x = i < ni.npart ? ni.part[i] : 0.0f;
                v[u].y = i + 1 < ni.npart ? ni.part[i + 1] : 0.0f;
                v[u].z = i + 2 < ni.npart ? ni.part[i + 2] : 0.0f;
                v[u].w = 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < 4; u++) s += ((v[u].x + v[u].y) + v[u].z) + v[u].w;
    }
    return rsqrtf(warp_sum(s) / (float)K + ni.eps);
}

// This warp's K vectors [ib, ie) when KSPLIT warps share a row (pair): warp %
// KSPLIT's share of whole 128-byte sectors; a warp not live takes none
__device__ __forceinline__ void ksplit_range(int K, int warp, bool live, int &ib, int &ie) {
    const int nv = K / vec16<act_t>::N, nvs = (nv + 8 * KSPLIT - 1) / (8 * KSPLIT) * 8; // vectors per row, per warp
    ib = min(nv, warp % KSPLIT * nvs), ie = live ? min(nv, ib + nvs) : ib;
}

// Batch 1: each warp's sums of its ROWS rows' lane partials into part[warp][r]
// (lane 0), then a block barrier (every thread of the block comes here)
__device__ __forceinline__ void park_warp_sums(const float (&acc)[ROWS][MAXM], float (&part)[WARPS][ROWS], int warp,
                                               int lane) {
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const float v = warp_sum(acc[r][0]);
        if (lane == 0) part[warp][r] = v;
    }
    __syncthreads();
}

// The dot products of this warp's W rows (row r: n0 + r * nrow_step; rows
// past N read as zeros) with the M rows of x over the vectors [ib, ie) of K,
// lane-strided, into acc (per lane; the caller reduces across the warp).
// W is not written by earlier kernels: the first loads of this warp's rows
// are issued before waiting for the kernel that writes x (programmatic
// dependent launch). (Prefetching the rest of the rows into L2 here as
// well made the batch-1 step 19% slower on the H200.)
// after_wait(): called right after the wait (loads of what earlier kernels
// wrote that the epilogue needs).
template <class F>
__device__ __forceinline__ void gemv_rows(float (&acc)[ROWS][MAXM], const act_t *__restrict__ x,
                                          const act_t *__restrict__ w, int M, int N, int K, int n0, int nrow_step,
                                          int ib, int ie, int lane, F &&after_wait) {
    typedef vec16<act_t> V;
#pragma unroll
    for (int r = 0; r < ROWS; r++)
#pragma unroll
        for (int m = 0; m < MAXM; m++) acc[r][m] = 0.0f;
    V wv[ROWS][UNROLL];
    auto load_w = [&](int i0) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                int i = i0 + u * 32;
                const int n = n0 + r * nrow_step;
                if (i < ie && n < N) wv[r][u].v = ld16_stream(w + (size_t)n * K + (size_t)i * V::N);
                else wv[r][u].v = make_uint4(0, 0, 0, 0);
            }
    };
    load_w(ib + lane);
    pdl_wait();
    pdl_launch();
    after_wait();
    for (int i0 = ib + lane; i0 < ie; i0 += 32 * UNROLL) {
        if (i0 != ib + lane) load_w(i0);
#pragma unroll
        for (int m = 0; m < MAXM; m++) {
            if (MAXM > 1 && m >= M) break;
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                int i = i0 + u * 32;
                if (i >= ie) break;
                V xv;
                xv.v = ld16(x + (size_t)m * K + (size_t)i * V::N);
#pragma unroll
                for (int r = 0; r < ROWS; r++)
#pragma unroll
                    for (int j = 0; j < V::N; j++) acc[r][m] += wv[r][u].get(j) * xv.get(j);
            }
        }
    }
}

#if !ROPE && !AR
// (NOUT: 4 blocks an SM, as the plain GEMV's 62 registers allow -- at 66 the
// 512 blocks of a 4096-row projection took two waves)
extern "C" __global__ void __launch_bounds__(WARPS * 32, NOUT ? 4 : 2)
kiln_gemv(out_t *__restrict__ out, i64 ldo, const act_t *__restrict__ x, const act_t *__restrict__ w,
          const out_t *__restrict__ bias, int M, int N, int K, act_t *__restrict__ residual,
          float *__restrict__ ss_out, const act_t *__restrict__ nw, const float *__restrict__ ss_in, int npart,
          float eps) {
    typedef vec16<act_t> V;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // W row of this warp's row r: consecutive rows, or (GLU) gate row n0 and up row n0 + N / 2
    // (with KSPLIT 2, the two warps of a pair share them)
    const int n0 = (blockIdx.x * (WARPS / KSPLIT) + warp / KSPLIT) * (GLU ? 1 : ROWS), nrow_step = GLU ? N / 2 : 1;
    const NormIn ni = {ss_in, npart, eps};
#if KSPLIT == 1 && NOUT
    const bool live = n0 < N; // every thread reaches NOUT's block barrier
    const int ib = 0, ie = live ? K / V::N : 0;
#elif KSPLIT == 1
    if (n0 >= (GLU ? N / 2 : N)) return; // whole warps; no block barrier below
    const int nv = K / V::N; // vectors per row
    const int ib = 0, ie = nv; // this warp's vectors [ib, ie)
#else
    // every thread reaches the block barrier of the epilogue: a warp past the
    // end (the whole group is) takes no vectors
    const bool live = n0 < (GLU ? N / 2 : N);
    int ib, ie;
    ksplit_range(K, warp, live, ib, ie);
#endif
    float acc[ROWS][MAXM];
#if NOUT
    // the residual and norm weight of this group's rows (its first warp's lane 0), loaded after the wait
    float res[ROWS], nwr[ROWS];
    gemv_rows(acc, x, w, M, N, K, n0, nrow_step, ib, ie, lane, [&] {
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const bool mine = lane == 0 && warp % KSPLIT == 0 && n0 + r < N;
            res[r] = mine ? to_f32(residual[n0 + r]) : 0.0f, nwr[r] = mine ? to_f32(nw[n0 + r]) : 0.0f;
        }
    });
    (void)ni;
#else
    (void)residual, (void)ss_out, (void)nw;
    gemv_rows(acc, x, w, M, N, K, n0, nrow_step, ib, ie, lane, [] {});
#if NIN
    const float rr = nin_rrms(ni, K, lane); // NIN: the dot products' scale
#else
    const float rr = 1.0f;
    (void)ni;
#endif
#endif
#if GLU
#if KSPLIT > 1
    // the group's warp sums: each warp's in shared memory, the first warp adds them in warp order
    __shared__ float part[WARPS][2][MAXM];
#pragma unroll
    for (int m = 0; m < MAXM; m++) {
        if (MAXM > 1 && m >= M) break;
        const float g = warp_sum(acc[0][m]), u = warp_sum(acc[1][m]);
        if (lane == 0) part[warp][0][m] = g, part[warp][1][m] = u;
    }
    __syncthreads();
    if (warp % KSPLIT || !live) return;
#endif
#pragma unroll
    for (int m = 0; m < MAXM; m++) {
        if (MAXM > 1 && m >= M) break;
#if KSPLIT > 1
        float g = part[warp][0][m], u = part[warp][1][m];
#pragma unroll
        for (int k = 1; k < KSPLIT; k++) g += part[warp + k][0][m], u += part[warp + k][1][m];
#else
        float g = warp_sum(acc[0][m]), u = warp_sum(acc[1][m]);
#endif
        if (lane == 0) {
            if (NIN) g *= rr, u *= rr;
            if (bias) g += to_f32(bias[n0]), u += to_f32(bias[n0 + nrow_step]);
            const float gf = to_f32(from_f32<act_t>(g)), uf = to_f32(from_f32<act_t>(u));
            out[(size_t)m * ldo + n0] = from_f32<out_t>(gf / (1.0f + expf(-gf)) * uf);
        }
    }
#elif NOUT
    // the group's sums (KSPLIT > 1: in warp order through shared memory), rounded as the GEMV stores them,
    // added to the residual; the block's sum of squares of the new residual values
    float vs[ROWS];
#if KSPLIT > 1
    __shared__ float part[WARPS][ROWS];
    park_warp_sums(acc, part, warp, lane);
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        vs[r] = part[warp - warp % KSPLIT][r];
#pragma unroll
        for (int k = 1; k < KSPLIT; k++) vs[r] += part[warp - warp % KSPLIT + k][r];
    }
#else
#pragma unroll
    for (int r = 0; r < ROWS; r++) vs[r] = warp_sum(acc[r][0]);
#endif
    float ss = 0.0f;
    if (lane == 0 && warp % KSPLIT == 0 && live) {
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const int n = n0 + r;
            float v = vs[r];
            if (n < N) {
                if (bias) v += to_f32(bias[n]);
                ss += nout_put(residual, out, n, v, res[r], nwr[r]);
            }
        }
    }
    __shared__ float bss[WARPS];
    if (lane == 0) bss[warp] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
#pragma unroll
        for (int k = 0; k < WARPS; k++) t += bss[k];
        ss_out[blockIdx.x] = t;
    }
#else
#if KSPLIT > 1
    // as above: the group's warp sums through shared memory, added in warp order
    __shared__ float part[WARPS][ROWS][MAXM];
#pragma unroll
    for (int r = 0; r < ROWS; r++)
#pragma unroll
        for (int m = 0; m < MAXM; m++) {
            if (MAXM > 1 && m >= M) break;
            const float v = warp_sum(acc[r][m]);
            if (lane == 0) part[warp][r][m] = v;
        }
    __syncthreads();
    if (warp % KSPLIT || !live) return;
#endif
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        int n = n0 + r;
#pragma unroll
        for (int m = 0; m < MAXM; m++) {
            if (MAXM > 1 && m >= M) break;
#if KSPLIT > 1
            float v = part[warp][r][m];
#pragma unroll
            for (int k = 1; k < KSPLIT; k++) v += part[warp + k][r][m];
#else
            float v = warp_sum(acc[r][m]);
#endif
            if (lane == 0 && n < N) {
                if (NIN) v *= rr;
                if (bias) v += to_f32(bias[n]);
                out[(size_t)m * ldo + n] = from_f32<out_t>(v);
            }
        }
    }
#endif
}
#endif // !ROPE && !AR

#if ROPE
// ROPE=1: kiln_gemv_rope, the qkv GEMV of a batch-1 decode step with the
// rotary embedding (rotate-half over the whole head, no dynamic NTK) and the
// KV-cache write (a 16-bit cache of ACT) as its epilogue
// (kiln_gpu_gemm_rope_kv): one kernel instead of the GEMV and
// kiln_rope_kv_write. out [N = (nq + 2 nkv) * HD] = x [K] @ W^T (+ bias), the
// q and k heads rotated at position pos[0] as rope_kv.cu rotates them (the
// dot products rounded to ACT as the GEMV stores them, cos / sin from the
// precise sincosf of (float)pos * inv_freq[d] times mscale, fp32 math,
// rounded to ACT); the rotated k and the v heads also into the caches at
// slots[0] (< 0: not written; layouts as rope_kv.cu). The rows d and d + HD / 2
// of one head (the pair a rotation mixes) meet in one thread:
//   RR 2: a group of KSPLIT warps takes both rows of a pair (ROWS 2), so they
//         meet in its lane 0. Grid: ceil(N / 2 / (WARPS / KSPLIT)).
//   RR 1: a group of KSPLIT warps takes one row (ROWS 1, as the plain GEMV's
//         best qkv tiling streams W); the block's WARPS / KSPLIT groups take
//         NPB = WARPS / KSPLIT / 2 pairs, the first NPB groups their rows d, the
//         others their rows d + HD / 2, and the warp sums meet in shared
//         memory (summed in warp order, as with RR 2). Grid: ceil(N / 2 / NPB).
static_assert((ROWS == RR) && (RR == 1 || RR == 2) && !GLU && MAXM == 1, "ROPE: RR rows a warp, batch 1");
typedef KV kv_t;
static_assert(sizeof(kv_t) == sizeof(act_t), "ROPE: a cache of the activation type");
#define KV_X (16 / (int)sizeof(kv_t))
static_assert(HD % (2 * KV_X) == 0, "ROPE: HD");

// The epilogue of the pair (rows n0 = h * HD + d and n0 + HD / 2) whose dot products are g0, g1.
__device__ __forceinline__ void rope_pair_store(act_t *__restrict__ out, float g0, float g1, int h, int d,
                                                const act_t *__restrict__ bias, int nq, int nkv,
                                                const int *__restrict__ pos, const float *__restrict__ inv_freq,
                                                float mscale, kv_t *__restrict__ kc, kv_t *__restrict__ vc,
                                                const int *__restrict__ slots, int bs) {
    const int half = HD / 2, n0 = h * HD + d;
    if (bias) g0 += to_f32(bias[n0]), g1 += to_f32(bias[n0 + half]);
    float x0 = to_f32(from_f32<act_t>(g0)), x1 = to_f32(from_f32<act_t>(g1)); // as the GEMV stores them
    if (h < nq + nkv) { // a q or k head: rotate
        float sn, cs;
        sincosf((float)pos[0] * inv_freq[d], &sn, &cs);
        const float c = cs * mscale, s = sn * mscale;
        float y0, y1;
        rope_rot(x0, x1, c, s, y0, y1); // (the decode kernels' roundings)
        x0 = to_f32(from_f32<act_t>(y0)), x1 = to_f32(from_f32<act_t>(y1));
    }
    out[n0] = from_f32<act_t>(x0);
    out[n0 + half] = from_f32<act_t>(x1);
    const int slot = slots[0];
    if (h < nq || slot < 0) return;
    const int b = slot / bs, o = slot - b * bs;
    if (h < nq + nkv) { // key [blocks, nkv, HD / x, bs, x]
        const size_t kb = ((size_t)b * nkv + (h - nq)) * (HD / KV_X);
        kc[((kb + d / KV_X) * bs + o) * KV_X + d % KV_X] = from_f32<kv_t>(x0);
        kc[((kb + (d + half) / KV_X) * bs + o) * KV_X + (d + half) % KV_X] = from_f32<kv_t>(x1);
    } else { // value [blocks, nkv, HD, bs]
        const size_t vb = ((size_t)b * nkv + (h - nq - nkv)) * HD;
        vc[(vb + d) * bs + o] = from_f32<kv_t>(x0);
        vc[(vb + d + half) * bs + o] = from_f32<kv_t>(x1);
    }
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, 2)
kiln_gemv_rope(act_t *__restrict__ out, const act_t *__restrict__ x, const act_t *__restrict__ w,
               const act_t *__restrict__ bias, int N, int K, int nq, int nkv, const int *__restrict__ pos,
               const float *__restrict__ inv_freq, float mscale, kv_t *__restrict__ kc, kv_t *__restrict__ vc,
               const int *__restrict__ slots, int bs, const float *__restrict__ ss_in, int npart, float eps) {
    typedef vec16<act_t> V;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, half = HD / 2;
    const NormIn ni = {ss_in, npart, eps}; // NIN (above)
#if RR == 2
    const int j = blockIdx.x * (WARPS / KSPLIT) + warp / KSPLIT; // the row pair
    const int h = j / half, d = j - h * half, n0 = h * HD + d;   // rows n0 and n0 + half
    const bool live = j < N / 2;
#if KSPLIT == 1
    if (!live) return; // whole warps; no block barrier below
    const int ib = 0, ie = K / V::N;
#else
    int ib, ie;
    ksplit_range(K, warp, live, ib, ie);
#endif
    float acc[ROWS][MAXM];
    gemv_rows(acc, x, w, 1, live ? N : 0, K, n0, half, ib, ie, lane, [] {});
    const float rr = NIN ? nin_rrms(ni, K, lane) : 1.0f; // NIN: the dot products' scale
    float g0 = warp_sum(acc[0][0]), g1 = warp_sum(acc[1][0]);
#if KSPLIT > 1
    __shared__ float part[WARPS][2];
    if (lane == 0) part[warp][0] = g0, part[warp][1] = g1;
    __syncthreads();
    if (warp % KSPLIT || !live) return;
    g0 = part[warp][0], g1 = part[warp][1];
#pragma unroll
    for (int k = 1; k < KSPLIT; k++) g0 += part[warp + k][0], g1 += part[warp + k][1];
#endif
    if (lane) return;
    if (NIN) g0 *= rr, g1 *= rr;
    rope_pair_store(out, g0, g1, h, d, bias, nq, nkv, pos, inv_freq, mscale, kc, vc, slots, bs);
#else // RR 1
    constexpr int NPB = WARPS / KSPLIT / 2; // row pairs a block
    static_assert(NPB >= 1, "RR 1: WARPS / KSPLIT groups, two a pair");
    const int grp = warp / KSPLIT, q = grp % NPB;
    const int j = blockIdx.x * NPB + q; // this group's pair
    const int h = j / half, d = j - h * half, n = h * HD + d + (grp / NPB) * half;
    const bool live = j < N / 2;
    // every thread reaches the block barrier below: a group past the end takes no vectors
    int ib, ie;
    ksplit_range(K, warp, live, ib, ie);
    float acc[ROWS][MAXM];
    gemv_rows(acc, x, w, 1, live ? N : 0, K, n, 0, ib, ie, lane, [] {});
    const float rr = NIN ? nin_rrms(ni, K, lane) : 1.0f; // NIN: the dot products' scale
    const float gs = warp_sum(acc[0][0]);
    __shared__ float part[WARPS];
    if (lane == 0) part[warp] = gs;
    __syncthreads();
    if (threadIdx.x >= NPB) return;
    const int jj = blockIdx.x * NPB + threadIdx.x; // the pair thread threadIdx.x stores
    if (jj >= N / 2) return;
    float g0 = part[threadIdx.x * KSPLIT], g1 = part[(threadIdx.x + NPB) * KSPLIT];
#pragma unroll
    for (int k = 1; k < KSPLIT; k++) g0 += part[threadIdx.x * KSPLIT + k], g1 += part[(threadIdx.x + NPB) * KSPLIT + k];
    const int hh = jj / half;
    if (NIN) g0 *= rr, g1 *= rr;
    rope_pair_store(out, g0, g1, hh, jj - hh * half, bias, nq, nkv, pos, inv_freq, mscale, kc, vc, slots, bs);
#endif
}
#endif // ROPE

#if AR
// AR=1: kiln_gemv_ar_norm, a row-parallel batch-1 GEMV (the o or down
// projection of a tensor-parallel rank) with the push all-reduce of its
// output and the residual add + RMSNorm after it as its epilogue: one kernel
// instead of the GEMV and kiln_all_reduce_push_add_rmsnorm, with the same
// results (this rank's outputs rounded to ACT as the GEMV stores them, summed
// over the ranks in rank order in fp32, rounded; residual += sum; nout =
// rmsnorm(residual) * nw). Every block computes its rows (ROWS a warp group,
// KSPLIT warps a group), stores them, cleaned, into io and into every peer's
// Lamport slot of this call (allreduce_common.cuh); the block that finishes
// last (a grid counter in ctl[1]) empties the previous call's slot, waits for
// the peers' rows, sums, adds, normalises the whole row and advances the
// epoch. N * sizeof(ACT) <= the slot's bytes; N / V::N <= ARN_MAXV * 256.
typedef vec16<act_t> V;
#include "allreduce_common.cuh"
static_assert(!GLU && MAXM == 1, "AR: batch 1");

extern "C" __global__ void __launch_bounds__(WARPS * 32, 2)
kiln_gemv_ar_norm(act_t *__restrict__ io, const act_t *__restrict__ x, const act_t *__restrict__ w, int N, int K,
                  act_t *__restrict__ residual, const act_t *__restrict__ nw, act_t *__restrict__ nout, float eps,
                  char *b0, char *b1, char *b2, char *b3, char *b4, char *b5, char *b6, char *b7, int rank, int n_ranks,
                  i64 buf_bytes, i64 timeout_ns) {
    __shared__ float scratch[32];
    __shared__ __align__(16) act_t rows_out[(WARPS / KSPLIT) * ROWS];
    __shared__ bool last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, BR = (WARPS / KSPLIT) * ROWS;
    const int nb0 = blockIdx.x * BR, n0 = nb0 + warp / KSPLIT * ROWS; // this block's and this group's first row
    const bool live = n0 < N;
#if KSPLIT == 1
    const int ib = 0, ie = live ? K / V::N : 0;
#else
    int ib, ie;
    ksplit_range(K, warp, live, ib, ie);
#endif
    float acc[ROWS][MAXM];
    gemv_rows(acc, x, w, 1, live ? N : 0, K, n0, 1, ib, ie, lane, [] {}); // waits for the predecessor (PDL)
    char *self = pick(rank, b0, b1, b2, b3, b4, b5, b6, b7);
    u32 *ctl = reinterpret_cast<u32 *>(self);
    const u32 e = ld_volatile(ctl) + 1u, slot = e % 3u;
    // the group's sums (in warp order), rounded as the GEMV stores them, cleaned
    __shared__ float part[WARPS][ROWS];
    park_warp_sums(acc, part, warp, lane);
    if (warp % KSPLIT == 0 && lane < ROWS) {
        float v = part[warp][lane];
#pragma unroll
        for (int k = 1; k < KSPLIT; k++) v += part[warp + k][lane];
        act_t a = from_f32<act_t>(v);
        unsigned short bits = *reinterpret_cast<unsigned short *>(&a);
        if (bits == 0x8000u) a = from_f32<act_t>(0.0f); // -0.0 is the empty pattern (allreduce_common.cuh)
        rows_out[warp / KSPLIT * ROWS + lane] = a;
    }
    __syncthreads();
    // this block's rows: into io and every peer's slot (16-byte vectors where the block's rows are whole
    // vectors, else element by element)
    const int nrows = min(BR, N - nb0);
    if (BR % V::N == 0 && nrows == BR) {
        for (int t = threadIdx.x; t < BR / V::N * n_ranks; t += blockDim.x) {
            const int vi = t % (BR / V::N), q = t / (BR / V::N);
            const uint4 val = reinterpret_cast<const uint4 *>(rows_out)[vi];
            if (q == rank) st16(io + nb0 + vi * V::N, val);
            else
                st16_volatile(lp_slot(pick(q, b0, b1, b2, b3, b4, b5, b6, b7), slot, rank, n_ranks, buf_bytes) +
                                  (size_t)(nb0 + vi * V::N) * sizeof(act_t),
                              val);
        }
    } else {
        for (int t = threadIdx.x; t < nrows * n_ranks; t += blockDim.x) {
            const int r = t % nrows, q = t / nrows;
            if (q == rank) io[nb0 + r] = rows_out[r];
            else
                *reinterpret_cast<volatile unsigned short *>(
                    lp_slot(pick(q, b0, b1, b2, b3, b4, b5, b6, b7), slot, rank, n_ranks, buf_bytes) +
                    (size_t)(nb0 + r) * sizeof(act_t)) = *reinterpret_cast<const unsigned short *>(&rows_out[r]);
        }
    }
    // the last block of the grid does the rest
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(&ctl[1], 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    {   // empty the previous call's slot (every sender's part) in this rank's buffer
        const u32 old = (e + 2u) % 3u, old_bytes = ld_volatile(ctl + 2 + old);
        const uint4 E = make_uint4(LP_EMPTY, LP_EMPTY, LP_EMPTY, LP_EMPTY);
        for (int q = 0; q < n_ranks; q++) {
            if (q == rank) continue;
            char *sl = lp_slot(self, old, q, n_ranks, buf_bytes);
            for (int c = threadIdx.x; c < (int)(old_bytes / 16u); c += blockDim.x) st16(sl + (size_t)c * 16, E);
        }
    }
    const int nvr = N / V::N;
    // wait for the peers' rows this thread sums (a loop of its own: see allreduce.cu)
#pragma unroll 1
    for (int k = 0; k < ARN_MAXV; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i >= nvr) break;
        for (int q = 0; q < n_ranks; q++)
            if (q != rank) (void)lp_receive(lp_slot(self, slot, q, n_ranks, buf_bytes) + (size_t)i * 16, rank, q, e, timeout_ns);
    }
    arn_row(io, residual, nout, nw, 0, nvr, N, eps, scratch, [&](float *a, int i) {
        for (int q = 0; q < n_ranks; q++) {
            V xq;
            xq.v = q == rank ? ld16_volatile(io + (size_t)i * V::N)
                             : ld16_volatile(lp_slot(self, slot, q, n_ranks, buf_bytes) + (size_t)i * 16);
#pragma unroll
            for (int j = 0; j < V::N; j++) a[j] += xq.get(j);
        }
    });
    __syncthreads();
    if (threadIdx.x == 0) {
        ctl[1] = 0;
        ctl[2 + slot] = (u32)(nvr * 16);
        ctl[0] = e;
    }
}
#endif // AR
