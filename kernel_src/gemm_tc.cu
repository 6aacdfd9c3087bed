// gemm_tc.cu -- out[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) on tensor cores
// for decode-sized M (2..64): a stream over W, with the operands swapped so
// that W rows are the MMA's M dimension (mma.sync m16n8k16, fp32
// accumulation) and x rows its N dimension (MAXM / 8 n8 tiles).
//
// W: every lane loads its A fragments straight from global memory into
// registers with 16-byte loads (read once, no L1 allocation), STAGES chunks
// of 64 k in flight per warp. The k order inside each 32-element piece is
// permuted so that one 16-byte load of a W row (8 consecutive k) is that
// lane's share of two k16 MMAs: lane (g = lane / 4, t = lane % 4) holds
// physical k [8t, 8t + 8) of the piece, MMA q (0, 1) of the piece takes its
// k 8t + 4q + {0, 1} as the fragment's k {2t, 2t + 1} and 8t + 4q + {2, 3}
// as k {2t + 8, 2t + 9}, for A and B alike (a sum over k does not care about
// its order). The four lanes of a row read 64 contiguous bytes per load.
//
// x: staged once per block in shared memory (it is the same for every warp
// of the block), with cp.async, STAGES steps ahead like W: a ring of
// STAGES + 1 slots, each the block's x rows [0, M) for the WK chunks of one
// step, [WK][MAXM][64 k] (128 bytes a row), one __syncthreads a step. The
// B fragments of the permuted k order are one 16-byte LDS per lane (row g,
// bytes [16t, 16t + 16) of the piece); the 16-byte segments of odd rows
// are stored with their 64-byte halves swapped (segment s at s ^ 4) so that
// each quarter warp (rows g, g + 1) hits all 32 banks once. Each x fragment
// feeds 2 * RT MMAs (the warp's RT tiles of 16 W rows).
//
// Per warp and step (16 W rows x 64 k per tile, M = 32, NT = 4): 4 * RT
// 16-byte W loads, 2 * NT = 8 16-byte LDS for x (shared by the RT tiles),
// 4 * NT * RT MMAs, (M * WK * 8) / (32 * WARPS) cp.async per lane.
//
// Tiling: a block of WARPS (4 or 8) warps, WN x WK (WN = WARPS / WK). A
// warp owns RT tiles of 16 W rows (the block BN = WN * RT * 16 rows); the
// WK warps of a column take the chunks of each step round robin and are
// summed through shared memory in warp order. Split-K over blocks: gridDim.y
// = S slices of cps chunks; with S > 1 each block writes its fp32 partial
// to part[S, M, N] and kiln_gemm_tc_reduce (kernel_src/gemm_tc_common.cuh)
// sums the slices in order (deterministic) and adds the bias.
//
// Semantics: engine/ops_cpu.h kiln_cpu_gemm. K % 8 == 0, x and W 16-byte
// aligned; x rows M..MAXM only reach outputs that are not written, W rows
// >= N are zero, the K tail of a chunk is zero in W and x. OUT: the output
// (and bias) type, act or fp32; out has row stride ldo.
// Grid: (ceil(N / BN), S) blocks of WARPS * 32 threads; reduce:
// (ceil(N / 256), M) blocks of 256 (host: engine/cuda/ops_gpu.c
// kiln_gpu_gemm).
#include "gemm_tc_common.cuh"

#ifndef MAXM
#define MAXM 32
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef WK
#define WK 1
#endif
#ifndef RT
#define RT 2
#endif
#ifndef STAGES
#define STAGES 2
#endif
#define THREADS (WARPS * 32)
#define WN (WARPS / WK)
#define NT (MAXM / 8)
#define BN (WN * RT * 16)
#define CHUNK 64
#define ROWB (CHUNK * 2)              // bytes of one x row of a chunk
#define SLOTB (WK * MAXM * ROWB)      // bytes of one step of x
#define XSLOTS (STAGES + 1)
#define XBYTES (XSLOTS * SLOTB)
#define RBYTES ((WK - 1) * WN * RT * NT * 4 * 32 * 4) // the WK reduction, after the loop
#define SMEM_BYTES (XBYTES > RBYTES ? XBYTES : RBYTES)

static_assert(MAXM % 8 == 0 && MAXM >= 8 && MAXM <= 64, "MAXM: 8, 16, 32 or 64");
static_assert(WARPS == 4 || WARPS == 8, "WARPS: 4 or 8");
static_assert(WARPS % WK == 0, "WK divides the warps");
static_assert(STAGES >= 1 && STAGES <= 4, "STAGES: 1..4");
static_assert(SMEM_BYTES <= 48 * 1024, "shared memory over 48 KiB");

// 128 registers a thread: 16 warps an SM (2 blocks of 8 or 4 of 4)
extern "C" __global__ void __launch_bounds__(THREADS, 16 / WARPS)
kiln_gemm_tc(out_t *__restrict__ out, i64 ldo, float *__restrict__ part, const act_t *__restrict__ x,
             const act_t *__restrict__ w, const out_t *__restrict__ bias, int M, int N, int K, int cps, int pf) {
    __shared__ __align__(16) unsigned char smem[SMEM_BYTES];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wn = warp % WN, wk = warp / WN;
    const int n0 = blockIdx.x * BN + wn * RT * 16; // first W row of this warp
    const int nchunks = (K + CHUNK - 1) / CHUNK;
    const int c_lo = blockIdx.y * cps, c_hi = min(nchunks, c_lo + cps);
    // step i: chunks c_lo + i * WK + [0, WK), this warp's c_lo + i * WK + wk
    const int n_steps = (c_hi - c_lo + WK - 1) / WK;
    const int c_first = c_lo + wk;

    // the lane's W rows (tile i, half h: row n0 + 16 i + 8 h + g, 8 (2i + h)
    // rows after its first), at its k offset 8t; rows past N are not read
    const act_t *wrow = w + (size_t)min(n0 + g, N - 1) * K + 8 * t;
    const size_t rs8 = (size_t)8 * K;
    u32 wok = 0; // bit 2i + h: that row is < N
#pragma unroll
    for (int i = 0; i < 2 * RT; i++) wok |= (n0 + 8 * i + g < N ? 1u : 0u) << i;
    uint4 wr[STAGES][RT][2][2]; // [stage][tile][half][piece]
    auto load_w = [&](uint4 (&r)[RT][2][2], int c) {
#pragma unroll
        for (int p = 0; p < 2; p++) {
            int k = c * CHUNK + 32 * p; // + 8t: in range iff k + 8t < K (K % 8 == 0)
#pragma unroll
            for (int i = 0; i < RT; i++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    r[i][h][p] = (wok >> (2 * i + h) & 1) && k + 8 * t < K ? ld16_stream(wrow + (2 * i + h) * rs8 + k)
                                                                           : make_uint4(0, 0, 0, 0);
        }
    };

    // W is not written by earlier kernels: the first STAGES chunks go to
    // registers and the next pf are prefetched into L2 before waiting for
    // the kernel that writes x (programmatic dependent launch)
#pragma unroll
    for (int s = 0; s < STAGES; s++)
        if (c_first + s * WK < c_hi) load_w(wr[s], c_first + s * WK);
    if (lane < RT * 16) {
        int n = n0 + (lane >> 4) * 16 + (lane & 15);
        if (n < N)
            for (int i = STAGES; i < n_steps && i < STAGES + pf; i++)
                if (c_first + i * WK < c_hi) prefetch_l2(w + (size_t)n * K + (size_t)(c_first + i * WK) * CHUNK);
    }
    pdl_wait();
    pdl_launch();

    // x of step i into slot: rows [0, M), 16-byte segments, zero past K
    auto load_x = [&](int i, int slot) {
        const int c0 = c_lo + i * WK;
        unsigned char *base = smem + slot * SLOTB;
        const int n_cp = M * WK * 8;
        for (int idx = threadIdx.x; idx < n_cp; idx += THREADS) {
            const int seg = idx & 7, sub = (idx >> 3) % WK, row = idx / (8 * WK);
            const int k = (c0 + sub) * CHUNK + seg * 8;
            const bool ok = k < K;
            cp_async16(base + (sub * MAXM + row) * ROWB + ((seg ^ ((row & 1) << 2)) << 4),
                       ok ? x + (size_t)row * K + k : x, ok ? 16 : 0);
        }
    };
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
        if (s < n_steps) load_x(s, s);
        cp_async_commit();
    }

    float acc[RT][NT][4];
#pragma unroll
    for (int i = 0; i < RT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
    // the lane's B fragments of piece p: row 8j + g of its warp's chunk, the
    // logical segment 4p + t stored at (4p + t) ^ 4 (g & 1)
    const int xo = wk * MAXM * ROWB + g * ROWB + 16 * t + 64 * (g & 1); // piece p: xo ^ 64 p
    int slot = 0, fill = STAGES;

    for (int i0 = 0; i0 < n_steps; i0 += STAGES) {
#pragma unroll
        for (int s = 0; s < STAGES; s++) {
            const int i = i0 + s;
            if (i >= n_steps) break; // block-uniform
            cp_async_wait<STAGES - 1>(); // this thread's copies of step i
            __syncthreads();             // everyone's; and slot `fill` (step i - 1) is free
            if (i + STAGES < n_steps) load_x(i + STAGES, fill);
            cp_async_commit();
            fill = fill == XSLOTS - 1 ? 0 : fill + 1;
            const int c = c_first + i * WK;
            if (c < c_hi) {
                const unsigned char *xs = smem + slot * SLOTB;
#pragma unroll
                for (int p = 0; p < 2; p++) {
                    const int xp = xo ^ (64 * p);
#pragma unroll
                    for (int j = 0; j < NT; j++) {
                        if (NT > 1 && 8 * j >= M) break; // n tiles of absent rows: nothing to add
                        const uint4 xv = *reinterpret_cast<const uint4 *>(xs + xp + j * 8 * ROWB);
#pragma unroll
                        for (int r = 0; r < RT; r++) {
                            const uint4 lo = wr[s][r][0][p], hi = wr[s][r][1][p];
                            mma_act(acc[r][j], lo.x, hi.x, lo.y, hi.y, xv.x, xv.y);
                            mma_act(acc[r][j], lo.z, hi.z, lo.w, hi.w, xv.z, xv.w);
                        }
                    }
                }
                if (c + STAGES * WK < c_hi) load_w(wr[s], c + STAGES * WK);
            }
            slot = slot == XSLOTS - 1 ? 0 : slot + 1;
        }
    }

#if WK > 1
    // the WK warps of a column: warps wk > 0 park their sums, warp 0 adds
    // them in warp order (the x ring is free: its last copies were waited for)
    cp_async_wait<0>();
    __syncthreads();
    float(*red)[WN][RT * NT * 4][32] = reinterpret_cast<float(*)[WN][RT * NT * 4][32]>(smem);
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
