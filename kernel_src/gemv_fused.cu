// gemv_fused.cu -- the small-M GEMV of gemv.cu with the op that produces its
// input fused in front (a prologue), for decode steps: one launch instead of
// two. The GEMM reads x = the prologue's output, which every block computes
// for itself into shared memory (norms: the whole rows, as the sum of squares
// needs them; silu/gelu: chunk by chunk as its warps walk K, the gate math
// overlapping the step's W loads):
//   kiln_gemv_rmsnorm:     x = rmsnorm(src) * nw                 (src [M, K])
//   kiln_gemv_add_rmsnorm: residual += src; x = rmsnorm(residual) * nw
//   kiln_gemv_silu_mul:    x = silu(src[:, :K]) * src[:, K:]     (src [M, 2K])
//   kiln_gemv_gelu_mul:    x = gelu_tanh(src[:, :K]) * src[:, K:]
// then out[M, N] (row stride ldo) = x @ W[N, K]^T (+ bias[N]).
// The prologue op's own outputs are written as well, so the pair keeps the
// unfused semantics for any later reader: dst [M, K] = x, and (add_rmsnorm)
// the updated residual. The residual is read by every block and updated in
// place, so it (and dst, which may alias src or the residual) is written by
// the last block to finish reading them (at the start, once its rows are in
// shared memory), found with an atomic counter in device memory (counter[0])
// that this block resets to 0 for the next launch (CUDA graph replays); with
// programmatic dependent launch the next kernel's pdl_wait() waits for this
// whole grid, the last block's writes included. silu/gelu: dst is written by
// block 0 as it computes x (it aliases nothing read here).
//
// Bit-identical to the unfused pair (tests/test_gpu_ops.c test_gemv_fused):
//  - the GEMV is gemv.cu's loop with x read from shared memory: each lane
//    owns the same 16-byte vectors of K in the same order, the same fp32
//    FMAs, the same warp reduction and rounding;
//  - the rounding of x is the unfused kernel's: rmsnorm.cu rounds
//    residual + src to ACT, sums the squares in fp32 in its thread order and
//    stores (v * rr) * w rounded to ACT; act.cu stores gate(g) * u rounded
//    to ACT. The sum of squares here follows rmsnorm.cu's reduction order
//    exactly (norm_threads below mirrors the block shape that
//    engine/cuda/ops_gpu.c norm() launches it with: change them together).
// Semantics: engine/ops_cpu.h kiln_cpu_rmsnorm / kiln_cpu_add_rmsnorm /
// kiln_cpu_silu_mul / kiln_cpu_gelu_mul then kiln_cpu_gemm.
// Specialization: ACT (bf16 | fp16), OUT (ACT or fp32), MAXM (1, 2, 4, 8),
// ROWS, UNROLL as gemv.cu. K % (16 / sizeof(ACT)) == 0; norm weights in ACT.
// Grid: blocks of WARPS * 32 threads; silu/gelu: ceil(N / (ROWS * WARPS)),
// each warp ROWS rows of W; norms: at most the blocks the GPU holds at once
// (each pays the prologue once), each warp taking further ROWS-row groups
// from counter[1] after its first (reset by the last block to finish,
// counted in counter[2]). Dynamic shared memory: norms M * K * sizeof(ACT)
// bytes, silu/gelu 2 * M * CHUNK * 16 (host: engine/cuda/ops_gpu.c
// kiln_gpu_gemm_fused). counter: 3 u32 in device memory, 0 before the first
// launch (norms only).
#include "kiln_common.cuh"

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
// blocks an SM must hold: gemv.cu's default tiling (MAXM 1, ROWS x UNROLL
// 1 x 4) fits 48 registers, 5 blocks (40 warps) an SM; the same here keeps
// its loads in flight (4 blocks at the 53 the compiler would pick)
#if MAXM == 1 && ROWS * UNROLL <= 4
#define MIN_BLOCKS 5
#else
#define MIN_BLOCKS 2
#endif
#define CHUNK (32 * UNROLL) // 16-byte vectors of a row per main-loop step (gemv.cu's stride)

#define PRO_RMSNORM 1
#define PRO_ADD_RMSNORM 2
#define PRO_SILU_MUL 3
#define PRO_GELU_MUL 4

typedef vec16<act_t> V;

// act.cu's gate (same expression, so the same instructions and roundings)
template <int KIND>
__device__ __forceinline__ float gate(float g) {
    if (KIND == 0) return g / (1.0f + expf(-g));
    const float k = 0.7978845608028654f;
    return 0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g)));
}

// Threads over one row in rmsnorm.cu for nv vectors, as ops_gpu.c norm()
// launches it: a warp per row (lane owns vectors lane + 32k, k < MAXW = 4),
// a block per row (thread owns t + T k, k < MAXB = 4), or the two-pass
// block of 1024 (t + 1024 k for every k). In every case thread t sums the
// squares of its vectors in that order and the partials meet through
// warp_sum, then (block shapes) a warp_sum of the warps' sums padded with
// zeros -- which is the identity for the warp shape's single sum.
KILN_DEV int norm_threads(int nv) {
    if (nv <= 32 * 4) return 32;
    if (nv <= 4 * 1024) return min(1024, ((nv + 3) / 4 + 31) / 32 * 32);
    return 1024;
}

// residual + src rounded to ACT (add_rmsnorm), or src, as rmsnorm.cu holds it
template <int PRO>
KILN_DEV V norm_in(const act_t *src, const act_t *residual, size_t off) { // src may alias dst
    V v;
    v.v = ld16(src + off);
    if (PRO == PRO_ADD_RMSNORM) {
        V r;
        r.v = ld16(residual + off);
#pragma unroll
        for (int j = 0; j < V::N; j++) r.set(j, r.get(j) + v.get(j));
        v = r;
    }
    return v;
}

// (v * rr) * w rounded to ACT, as rmsnorm.cu stores it
KILN_DEV V norm_out(V v, float rr, const act_t *__restrict__ nw, int i) {
    V w, o;
    w.v = ld16(nw + (size_t)i * V::N);
#pragma unroll
    for (int j = 0; j < V::N; j++) o.set(j, v.get(j) * rr * w.get(j));
    return o;
}

template <int PRO>
__device__ __forceinline__ void gemv_fused(out_t *__restrict__ out, i64 ldo, const act_t *__restrict__ w,
                                           const out_t *__restrict__ bias, int M, int N, int K,
                                           const act_t *src, act_t *dst, act_t *residual,
                                           const act_t *__restrict__ nw, float eps, unsigned *counter) {
    // norm: [M][nv] x (the normalized rows); glu: [2][M][CHUNK] x of the
    // current and the next main-loop step
    extern __shared__ uint4 xsm[];
    __shared__ float part[MAXM][32]; // norm: sums of squares of rmsnorm.cu's warps
    __shared__ float rrs[MAXM];      // norm: rsqrt(mean square + eps) per row
    __shared__ int is_last;
    constexpr bool NORM = PRO == PRO_RMSNORM || PRO == PRO_ADD_RMSNORM;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // this warp's first ROWS rows of W, as in gemv.cu (norms: more follow)
    int n0 = (blockIdx.x * WARPS + warp) * ROWS;
    const int nv = K / V::N; // vectors per row
    // W is not written by earlier kernels: this warp's first loads are issued
    // before waiting for the kernel that writes src (as in gemv.cu), and the
    // norm weights are fetched into L2
    V wv[ROWS][UNROLL];
    auto load_w = [&](int i0) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                int i = i0 + u * 32;
                if (i < nv && n0 + r < N) wv[r][u].v = ld16_stream(w + (size_t)(n0 + r) * K + (size_t)i * V::N);
                else wv[r][u].v = make_uint4(0, 0, 0, 0);
            }
    };
    load_w(lane);
    if (NORM)
        for (int i = threadIdx.x * 128; i < K * (int)sizeof(act_t); i += WARPS * 32 * 128)
            prefetch_l2((const char *)nw + i);
    pdl_wait();
    pdl_launch();

    if (NORM) {
        // the rows as rmsnorm.cu holds them (residual + src rounded to ACT)
#pragma unroll 2
        for (int idx = threadIdx.x; idx < M * nv; idx += WARPS * 32) {
            const int m = idx / nv, i = idx - m * nv;
            xsm[idx] = norm_in<PRO>(src, residual, (size_t)m * K + (size_t)i * V::N).v;
        }
        __syncthreads();
        // this block has read src and the residual: the last block to get
        // here writes the residual and dst (below), after every block's reads
        if (threadIdx.x == 0) {
            __threadfence();
            is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
            if (is_last) {
                atomicExch(counter, 0u); // ready for the next launch
                __threadfence();
            }
        }
        // sums of squares in rmsnorm.cu's order: its thread t of row m is
        // lane `lane` of virtual warp vw here (T / 32 of them per row)
        const int T = norm_threads(nv), nvw = T / 32;
        for (int vw = warp; vw < M * nvw; vw += WARPS) {
            const int m = vw / nvw, t = (vw - m * nvw) * 32 + lane;
            float ss = 0.0f;
            for (int i = t; i < nv; i += T) {
                V v;
                v.v = xsm[m * nv + i];
#pragma unroll
                for (int j = 0; j < V::N; j++) {
                    float f = v.get(j);
                    ss += f * f;
                }
            }
            ss = warp_sum(ss);
            if (lane == 0) part[m][vw - m * nvw] = ss;
        }
        __syncthreads();
        if (warp < M) { // M <= MAXM <= WARPS
            float ss = warp_sum(lane < nvw ? part[warp][lane] : 0.0f);
            if (lane == 0) rrs[warp] = rsqrtf(ss / (float)K + eps);
        }
        if (PRO == PRO_ADD_RMSNORM && is_last)
            for (int idx = threadIdx.x; idx < M * nv; idx += WARPS * 32)
                st16(residual + (size_t)(idx / nv) * K + (size_t)(idx % nv) * V::N, xsm[idx]);
        __syncthreads();
#pragma unroll 2
        for (int idx = threadIdx.x; idx < M * nv; idx += WARPS * 32) {
            const int m = idx / nv, i = idx - m * nv;
            V v;
            v.v = xsm[idx];
            xsm[idx] = norm_out(v, rrs[m], nw, i).v;
        }
        __syncthreads();
        if (is_last) // after the residual: dst may alias it (or src)
            for (int idx = threadIdx.x; idx < M * nv; idx += WARPS * 32)
                st16(dst + (size_t)(idx / nv) * K + (size_t)(idx % nv) * V::N, xsm[idx]);
    }

    // Rows of W. silu / gelu: this warp's first ROWS (the grid covers N).
    // Norms: the grid is what the GPU holds at once (the prologue is paid
    // once a block), and after its first rows each warp takes the next ROWS
    // from counter[1] until none are left;
    // no barriers in this loop then. The next rows are taken, and their
    // first W loads issued, while this warp still works on the current ones.
    // Which warp computes a row changes nothing in its result.
    const int total_warps = gridDim.x * WARPS;
    for (;;) {
        const bool active = n0 < N; // silu / gelu: inactive warps still compute x and meet at the barriers
        int next = N;
        if (NORM && active) {
            int g = 0;
            if (lane == 0) g = total_warps + (int)atomicAdd(counter + 1, 1u);
            g = __shfl_sync(0xffffffffu, g, 0);
            next = g < (N + ROWS - 1) / ROWS ? g * ROWS : N;
        }
        float acc[ROWS][MAXM];
#pragma unroll
        for (int r = 0; r < ROWS; r++)
#pragma unroll
            for (int m = 0; m < MAXM; m++) acc[r][m] = 0.0f;
        // step c consumes vectors [c * CHUNK, (c + 1) * CHUNK) of each row
        // (lane + 32 u of them in this lane, as gemv.cu's i0 + 32 u). silu /
        // gelu: the block computes them into ring slot c & 1 while this
        // step's W loads are in flight; one barrier a step (slot c & 1 was
        // last read in step c - 2, which every thread finished before the
        // barrier of step c - 1).
        const int n_steps = (nv + CHUNK - 1) / CHUNK;
        for (int c = 0; c < n_steps; c++) {
            const int i0 = lane + c * CHUNK;
            if (c) load_w(i0);
            const uint4 *xs = xsm + c * CHUNK; // norm: row m at xs + m * nv
            int ld_x = nv;
            if (!NORM) {
                uint4 *ring = xsm + (size_t)(c & 1) * M * CHUNK;
                for (int idx = threadIdx.x; idx < M * CHUNK; idx += WARPS * 32) {
                    const int m = idx / CHUNK, i = c * CHUNK + (idx - m * CHUNK);
                    if (i >= nv) continue;
                    const act_t *row = src + (size_t)m * 2 * K;
                    V g, u, o;
                    g.v = ld16(row + (size_t)i * V::N);
                    u.v = ld16(row + K + (size_t)i * V::N);
#pragma unroll
                    for (int j = 0; j < V::N; j++) o.set(j, gate<PRO - PRO_SILU_MUL>(g.get(j)) * u.get(j));
                    if (blockIdx.x == 0) st16(dst + (size_t)m * K + (size_t)i * V::N, o.v);
                    ring[idx] = o.v;
                }
                __syncthreads();
                xs = ring;
                ld_x = CHUNK;
            }
            if (active) {
#pragma unroll
                for (int m = 0; m < MAXM; m++) {
                    if (MAXM > 1 && m >= M) break;
#pragma unroll
                    for (int u = 0; u < UNROLL; u++) {
                        int i = i0 + u * 32;
                        if (i >= nv) break;
                        V xv;
                        xv.v = xs[m * ld_x + lane + u * 32];
#pragma unroll
                        for (int r = 0; r < ROWS; r++)
#pragma unroll
                            for (int j = 0; j < V::N; j++) acc[r][m] += wv[r][u].get(j) * xv.get(j);
                    }
                }
            }
        }
        const int cur = n0;
        if (next < N) { // the next rows' first loads before this reduction
            n0 = next;
            load_w(lane);
        }
        if (active) {
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                int n = cur + r;
#pragma unroll
                for (int m = 0; m < MAXM; m++) {
                    if (MAXM > 1 && m >= M) break;
                    float v = warp_sum(acc[r][m]);
                    if (lane == 0 && n < N) {
                        if (bias) v += to_f32(bias[n]);
                        out[(size_t)m * ldo + n] = from_f32<out_t>(v);
                    }
                }
            }
        }
        if (next >= N) break;
    }

    if (NORM) {
        // every warp of this block took its last rows: the last block to get
        // here resets the row counter for the next launch
        __syncthreads();
        if (threadIdx.x == 0 && atomicAdd(counter + 2, 1u) == gridDim.x - 1) {
            atomicExch(counter + 1, 0u);
            atomicExch(counter + 2, 0u);
        }
    }
}

#define FUSED_ARGS                                                                                              \
    out_t *out, i64 ldo, const act_t *w, const out_t *bias, int M, int N, int K, const act_t *src, act_t *dst, \
        act_t *residual, const act_t *nw, float eps, unsigned *counter
#define FUSED_PASS out, ldo, w, bias, M, N, K, src, dst, residual, nw, eps, counter

extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS) kiln_gemv_rmsnorm(FUSED_ARGS) {
    gemv_fused<PRO_RMSNORM>(FUSED_PASS);
}
extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS) kiln_gemv_add_rmsnorm(FUSED_ARGS) {
    gemv_fused<PRO_ADD_RMSNORM>(FUSED_PASS);
}
extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS) kiln_gemv_silu_mul(FUSED_ARGS) {
    gemv_fused<PRO_SILU_MUL>(FUSED_PASS);
}
extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS) kiln_gemv_gelu_mul(FUSED_ARGS) {
    gemv_fused<PRO_GELU_MUL>(FUSED_PASS);
}
