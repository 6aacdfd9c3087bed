// gemm_tc_v1.cu -- the first tensor-core GEMM (kept to compare; the engine
// runs kernel_src/gemm_tc.cu unless $KILN_TCGEMM_KERNEL=v1):
// out[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) on tensor cores
// for decode-sized M (2..64): a stream over W, with the operands swapped so
// that W rows are the MMA's M dimension (mma.sync m16n8k16, fp32
// accumulation) and x rows its N dimension (MAXM / 8 n8 tiles).
//
// No shared memory on the way in: every lane loads its A fragments straight
// from global memory into registers with 16-byte loads. The k order inside
// each 32-element piece is permuted so that one 16-byte load of a W row
// (8 consecutive k) is that lane's share of two k16 MMAs, and the same
// permutation applied to x makes one 16-byte load of an x row its B
// fragments: lane (g = lane / 4, t = lane % 4) holds physical k
// [8t, 8t + 8) of the piece, MMA q (0, 1) of the piece takes its k
// 8t + 4q + {0, 1} as the fragment's k {2t, 2t + 1} and 8t + 4q + {2, 3} as
// k {2t + 8, 2t + 9}, for A and B alike (a sum over k does not care about
// its order). The four lanes of a row read 64 contiguous bytes per load.
//
// Tiling: a block of WN x WK warps (WN * WK = 8). A warp owns RT tiles of 16
// W rows (the block BN = WN * RT * 16 rows) and walks K in chunks of 64
// (two pieces; per lane 4 * RT 16-byte W loads a chunk), STAGES chunks of W
// in flight in registers; the WK warps of a column share the block's chunks
// round robin and are summed through shared memory in warp order. x stays in
// L1/L2 (every warp of the block reads the same x). Split-K over blocks:
// gridDim.y = S slices of cps chunks; with S > 1 each block writes its fp32
// partial to part[S, M, N] and kiln_gemm_tc_reduce sums the slices in order
// (deterministic) and adds the bias.
//
// Semantics: engine/ops_cpu.h kiln_cpu_gemm. K % 8 == 0, x and W 16-byte
// aligned; rows M..MAXM of x are treated as zero, W rows >= N as zero, the
// K tail of a chunk as zero. OUT: the output (and bias) type, act or fp32;
// out has row stride ldo.
// Grid: (ceil(N / BN), S) blocks of 256 threads; the reduction is
// kiln_gemm_tc_reduce (kernel_src/gemm_tc_common.cuh), (ceil(N / 256), M)
// blocks of 256 (host: engine/cuda/ops_gpu.c kiln_gpu_gemm).
// Measured on the H200: x re-read from L1/L2 by every warp makes it slow at
// M >= 16 (23-45% of copy at M = 32).
#include "gemm_tc_common.cuh"

#ifndef MAXM
#define MAXM 32
#endif
#ifndef WK
#define WK 1
#endif
#ifndef RT
#define RT 1
#endif
#ifndef STAGES
#define STAGES 4
#endif
#define WARPS 8
#define WN (WARPS / WK)
#define NT (MAXM / 8)
#define BN (WN * RT * 16)
#define CHUNK 64

static_assert(MAXM % 8 == 0 && MAXM >= 8 && MAXM <= 64, "MAXM: 8, 16, 32 or 64");
static_assert(WARPS % WK == 0, "WK divides the 8 warps");
static_assert((WK - 1) * WN * RT * NT * 4 * 32 * 4 <= 48 * 1024, "reduction scratch over 48 KiB");

extern "C" __global__ void __launch_bounds__(WARPS * 32, 2)
kiln_gemm_tc_v1(out_t *__restrict__ out, i64 ldo, float *__restrict__ part, const act_t *__restrict__ x,
             const act_t *__restrict__ w, const out_t *__restrict__ bias, int M, int N, int K, int cps, int pf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wn = warp % WN, wk = warp / WN;
    const int n0 = blockIdx.x * BN + wn * RT * 16; // first W row of this warp
    const int nchunks = (K + CHUNK - 1) / CHUNK;
    const int c_lo = blockIdx.y * cps, c_hi = min(nchunks, c_lo + cps);
    // this warp's chunks: c_lo + wk + i * WK, i < n_my
    const int n_my = c_hi - c_lo > wk ? (c_hi - c_lo - wk + WK - 1) / WK : 0;
    const int c_first = c_lo + wk;

    // the lane's W rows (tile i, half h: row n0 + 16 i + 8 h + g), at its k
    // offset 8t; rows past N are not read
    const act_t *wrow[RT][2];
    bool wok[RT][2];
#pragma unroll
    for (int i = 0; i < RT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int n = n0 + 16 * i + 8 * h + g;
            wok[i][h] = n < N;
            wrow[i][h] = w + (size_t)(wok[i][h] ? n : 0) * K + 8 * t;
        }
    uint4 wr[STAGES][RT][2][2]; // [stage][tile][half][piece]
    auto load_w = [&](uint4 (&r)[RT][2][2], int c) {
#pragma unroll
        for (int p = 0; p < 2; p++) {
            int k = c * CHUNK + 32 * p; // + 8t: in range iff k + 8t < K (K % 8 == 0)
#pragma unroll
            for (int i = 0; i < RT; i++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    r[i][h][p] = wok[i][h] && k + 8 * t < K ? ld16_stream(wrow[i][h] + k) : make_uint4(0, 0, 0, 0);
        }
    };

    // W is not written by earlier kernels: the first STAGES chunks go to
    // registers and the next pf are prefetched into L2 before waiting for
    // the kernel that writes x (programmatic dependent launch)
#pragma unroll
    for (int s = 0; s < STAGES; s++)
        if (s < n_my) load_w(wr[s], c_first + s * WK);
    if (lane < RT * 16) {
        int n = n0 + (lane >> 4) * 16 + (lane & 15);
        if (n < N)
            for (int i = STAGES; i < n_my && i < STAGES + pf; i++)
                prefetch_l2(w + (size_t)n * K + (size_t)(c_first + i * WK) * CHUNK);
    }
    pdl_wait();
    pdl_launch();

    float acc[RT][NT][4];
#pragma unroll
    for (int i = 0; i < RT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
    // the lane's x rows (n tile j: row 8 j + g) at k offset 8t
    const act_t *xrow = x + (size_t)g * K + 8 * t;

    for (int i0 = 0; i0 < n_my; i0 += STAGES) {
#pragma unroll
        for (int s = 0; s < STAGES; s++) {
            const int i = i0 + s;
            if (i >= n_my) break;
            const int c = c_first + i * WK;
#pragma unroll
            for (int p = 0; p < 2; p++) {
                const int k = c * CHUNK + 32 * p;
                uint4 xv[NT];
#pragma unroll
                for (int j = 0; j < NT; j++)
                    xv[j] = 8 * j + g < M && k + 8 * t < K ? ld16(xrow + (size_t)(8 * j) * K + k) : make_uint4(0, 0, 0, 0);
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    if (NT > 1 && 8 * j >= M) break; // n tiles of absent rows: nothing to add
#pragma unroll
                    for (int r = 0; r < RT; r++) {
                        const uint4 lo = wr[s][r][0][p], hi = wr[s][r][1][p];
                        mma_act(acc[r][j], lo.x, hi.x, lo.y, hi.y, xv[j].x, xv[j].y);
                        mma_act(acc[r][j], lo.z, hi.z, lo.w, hi.w, xv[j].z, xv[j].w);
                    }
                }
            }
            if (i + STAGES < n_my) load_w(wr[s], c + STAGES * WK);
        }
    }

#if WK > 1
    // the WK warps of a column: warps wk > 0 park their sums, warp 0 adds
    // them in warp order
    __shared__ float red[WK - 1][WN][RT * NT * 4][32];
    if (wk > 0) {
#pragma unroll
        for (int i = 0; i < RT; i++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) red[wk - 1][wn][(i * NT + j) * 4 + e][lane] = acc[i][j][e];
    }
    __syncthreads();
    if (wk > 0) return;
#pragma unroll 1
    for (int q = 0; q < WK - 1; q++)
#pragma unroll
        for (int i = 0; i < RT; i++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[i][j][e] += red[q][wn][(i * NT + j) * 4 + e][lane];
#endif

    // acc[i][j][2h + e] is out[m = 8j + 2t + e][n = n0 + 16i + 8h + g]
    const bool split = gridDim.y > 1;
#pragma unroll
    for (int i = 0; i < RT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int n = n0 + 16 * i + 8 * h + g;
            if (n >= N) continue;
            const float b = !split && bias ? to_f32(bias[n]) : 0.0f;
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int m = 8 * j + 2 * t + e;
                    if (m >= M) continue;
                    const float v = acc[i][j][2 * h + e];
                    if (split) part[((size_t)blockIdx.y * M + m) * N + n] = v;
                    else out[(size_t)m * ldo + n] = from_f32<out_t>(v + b);
                }
        }
}
