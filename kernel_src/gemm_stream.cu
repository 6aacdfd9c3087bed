// gemm_stream.cu -- out[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) for decode-sized M (2..64) on tensor
// cores, stream-K: a persistent grid whose every block streams the same number of W bytes.
//
// Why: at M <= 32 a projection is a read of W, and what keeps it from the copy rate is the shape of the
// work, not the multiply: cuBLASLt's tiles and kernel_src/gemm_sk.cu's clusters (which must fit a GPC)
// leave SMs with one block more than others or none, so the grid's last wave is partly empty (gemm_sk at
// M = 32: 106-124 of 132 SMs busy, 2 or 3 blocks each; bench_kernels gemm_sk_prof, 2026-11-30). Here:
//
// - The work is U = tiles x chunks units (a tile: BN = WARPS * RT * 16 rows of W; a chunk: 64 k), in
//   tile-major order; block c of the G blocks (as many as are resident at once: the host's choice) takes
//   units [c U / G, (c + 1) U / G): every block the same bytes, to within one 16 KiB unit.
// - A block's units are one stream through a ring of STAGES stages, W[BN][64] then x[M][64] (16-byte
//   segment s of row r at s ^ (r & 7)), copied with cp.async, across tile boundaries without a break;
//   the first STAGES - 1 stages of W are issued before griddepcontrol.wait (W needs no predecessor).
//   The multiply is gemm_sk's: ldmatrix + mma.sync m16n8k16, fp32 accumulation, warp w rows 16 (w RT + r).
// - At a tile's last chunk, or the block's last unit, the accumulators are flushed: a tile wholly inside
//   the block's range is stored (+ bias); a tile shared by blocks cf..cl (the ranges that meet it) has
//   each block's part parked in ws (fp32, the block's slot 0 for the tile its range starts in, 1 for the
//   one it ends in), then the block counts itself on counters[tile] (acquire-release at GPU scope); the
//   block that arrives last sums the parts in block order cf..cl -- the same order whoever arrives last,
//   so the bits do not depend on timing -- adds the bias, stores, and zeroes the counter for the next
//   launch. A block's first tile is usually finished by the block before it, at that block's end.
//
// Semantics: engine/ops_cpu.h kiln_cpu_gemm. K % 8 == 0, x and W 16-byte aligned; W rows >= N and k >= K
// read as zero; x rows >= M are not copied (whatever the ring holds there reaches only output rows that
// are not stored). out has row stride ldo. ws: 2 G ACCN THREADS floats; counters: ceil(N / BN) ints, zero.
// Grid: G blocks (G <= U) of WARPS * 32 threads, dynamic shared memory STAGES * STAGE_BYTES
// (engine/cuda/ops_gpu.c stream_gemm).
#include "gemm_tc_common.cuh"

#ifndef MAXM
#define MAXM 32
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef RT
#define RT 2
#endif
#ifndef STAGES
#define STAGES 4
#endif
#define THREADS (WARPS * 32)
#define NT (MAXM / 8)
#define BN (WARPS * RT * 16)
#define WBYTES (BN * 128)               // W part of a stage
#define STAGE_BYTES ((BN + MAXM) * 128) // W then x
#define ACCN (RT * NT * 4)              // accumulators a thread
#define NTP (NT > 1 ? NT / 2 : 1)       // B fragment loads a k16 step
#define KG (MAXM * RT >= 128 ? 2 : 4)   // k16 steps whose fragments are held at once

static_assert(MAXM == 8 || MAXM == 16 || MAXM == 32 || MAXM == 64, "MAXM: 8, 16, 32 or 64");
static_assert(WARPS == 4 || WARPS == 8, "WARPS: 4 or 8");
static_assert(RT == 1 || RT == 2 || RT == 4, "RT: 1, 2 or 4");
static_assert(STAGES >= 2 && STAGES <= 8, "STAGES: 2..8");
static_assert((BN * 8) % THREADS == 0, "W copies divide among the threads");

// The block whose range holds unit u (the last with start <= u; every range is non-empty as G <= U).
KILN_DEV int st_owner(long long u, long long U, int G) { return (int)(((u + 1) * G + U - 1) / U - 1); }
KILN_DEV long long st_start(int c, long long U, int G) { return (long long)c * U / G; }
// a part another block parked (through L2: this SM's L1 may hold the lines from an earlier launch)
KILN_DEV float ld_cg(const float *p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
kiln_gemm_stream(out_t *__restrict__ out, i64 ldo, const act_t *__restrict__ x, const act_t *__restrict__ w,
                 const out_t *__restrict__ bias, int M, int N, int K, float *__restrict__ ws,
                 int *__restrict__ counters) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nch = (K + 63) >> 6, ntiles = (N + BN - 1) / BN, G = (int)gridDim.x, c = (int)blockIdx.x;
    const long long U = (long long)ntiles * nch, u0 = st_start(c, U, G), u1 = st_start(c + 1, U, G);
    const int nst = (int)(u1 - u0);
    const u32 sbase = smem_addr(smem);

    // the units as (tile, chunk) cursors stepped one unit at a time (no division in the loop): the next
    // to load, and the one being multiplied
    const int tile0 = (int)(u0 / nch), chunk0 = (int)(u0 - (long long)tile0 * nch);
    int l_tile = tile0, l_chunk = chunk0;
    auto l_step = [&]() {
        if (++l_chunk == nch) l_chunk = 0, l_tile++;
    };
    // this thread's W segments of unit (tile, chunk): idx = tid + THREADS * q, row idx / 8, segment idx % 8
    auto load_w = [&](int slot) {
        const int n_blk = l_tile * BN, k0 = l_chunk * 64;
        const u32 dst = sbase + slot * STAGE_BYTES;
#pragma unroll
        for (int q = 0; q < BN * 8 / THREADS; q++) {
            const int idx = tid + q * THREADS, seg = idx & 7, row = idx >> 3;
            const int n = n_blk + row, k = k0 + seg * 8;
            const bool ok = n < N && k < K;
            cp_async16_u32(dst + row * 128 + ((seg ^ (row & 7)) << 4), ok ? w + (size_t)n * K + k : w, ok ? 16 : 0);
        }
    };
    auto load_x = [&](int slot) {
        const int k0 = l_chunk * 64;
        const u32 dst = sbase + slot * STAGE_BYTES + WBYTES;
        for (int idx = tid; idx < M * 8; idx += THREADS) {
            const int row = idx >> 3, seg = idx & 7, k = k0 + seg * 8;
            const bool ok = k < K;
            cp_async16_u32(dst + row * 128 + ((seg ^ (row & 7)) << 4), ok ? x + (size_t)row * K + k : x, ok ? 16 : 0);
        }
    };

    // W of the first STAGES - 1 stages before the wait (they join group 0)
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++)
        if (s < nst) load_w(s), l_step();
    pdl_wait();
    l_tile = tile0, l_chunk = chunk0;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nst) load_x(s), l_step();
        cp_async_commit();
    }

    float acc[RT][NT][4];
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[r][j][e] = 0.0f;
    // ldmatrix lane addresses inside a stage (as gemm_sk)
    const int a_row0 = warp * RT * 16 + (lane & 15), a_seg = lane >> 4;
    const int b_q = lane >> 3, b_seg = b_q & 1;
    // acc[r][j][e] is out[m = 8j + 2t + (e & 1)][n = n_blk + 16 (warp RT + r) + g + 8 (e >> 1)]
    const int g = lane >> 2, t = lane & 3;
    auto store = [&](int n_blk, const float(&v)[RT][NT][4]) {
#pragma unroll
        for (int r = 0; r < RT; r++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int m = 8 * j + 2 * t + (e & 1), n = n_blk + 16 * (warp * RT + r) + g + 8 * (e >> 1);
                    if (m < M && n < N) {
                        float y = v[r][j][e];
                        if (bias) y += to_f32(bias[n]);
                        out[(size_t)m * ldo + n] = from_f32<out_t>(y);
                    }
                }
    };

    int slot = 0, fill = STAGES - 1, c_tile = tile0, c_chunk = chunk0;
    for (int i = 0; i < nst; i++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads(); // stage i landed for everyone; slot `fill` (stage i - 1) is free
        if (i + STAGES - 1 < nst) {
            load_w(fill);
            load_x(fill);
            l_step();
        }
        cp_async_commit();
        fill = fill == STAGES - 1 ? 0 : fill + 1;

        const u32 ws_s = sbase + slot * STAGE_BYTES, xs = ws_s + WBYTES;
#pragma unroll
        for (int k0 = 0; k0 < 4; k0 += KG) {
            u32 a[KG][RT][4], b[KG][NTP][4];
#pragma unroll
            for (int q = 0; q < KG; q++)
#pragma unroll
                for (int r = 0; r < RT; r++) {
                    const int row = a_row0 + r * 16, seg = 2 * (k0 + q) + a_seg;
                    ldsm_x4(a[q][r][0], a[q][r][1], a[q][r][2], a[q][r][3], ws_s + row * 128 + ((seg ^ (row & 7)) << 4));
                }
#pragma unroll
            for (int q = 0; q < KG; q++) {
#if NT == 1
                const int row = lane & 7, seg = 2 * (k0 + q) + b_seg;
                ldsm_x2(b[q][0][0], b[q][0][1], xs + row * 128 + ((seg ^ (row & 7)) << 4));
#else
#pragma unroll
                for (int jp = 0; jp < NTP; jp++) {
                    if (16 * jp >= M) break; // block-uniform: no rows in these n tiles
                    const int row = 8 * (2 * jp + (b_q >> 1)) + (lane & 7), seg = 2 * (k0 + q) + b_seg;
                    ldsm_x4(b[q][jp][0], b[q][jp][1], b[q][jp][2], b[q][jp][3], xs + row * 128 + ((seg ^ (row & 7)) << 4));
                }
#endif
            }
#pragma unroll
            for (int q = 0; q < KG; q++)
#pragma unroll
                for (int jp = 0; jp < NTP; jp++) {
                    if (16 * jp >= M) break;
#pragma unroll
                    for (int r = 0; r < RT; r++) {
                        mma_act(acc[r][2 * jp], a[q][r][0], a[q][r][1], a[q][r][2], a[q][r][3], b[q][jp][0], b[q][jp][1]);
#if NT > 1
                        if (16 * jp + 8 < M)
                            mma_act(acc[r][2 * jp + 1], a[q][r][0], a[q][r][1], a[q][r][2], a[q][r][3], b[q][jp][2],
                                    b[q][jp][3]);
#endif
                    }
                }
        }
        slot = slot == STAGES - 1 ? 0 : slot + 1;

        // the unit just multiplied ends its tile or this block's range: flush
        const int tile = c_tile;
        if (++c_chunk == nch) c_chunk = 0, c_tile++;
        if (c_chunk != 0 && i != nst - 1) continue;
        const long long t0 = (long long)tile * nch, t1 = t0 + nch;
        if (t0 >= u0 && t1 <= u1) {
            store(tile * BN, acc);
        } else {
            // park this block's part: slot 0 for the tile its range starts in, 1 for the one it ends in
            const int cf = st_owner(t0, U, G), cl = st_owner(t1 - 1, U, G);
            const int which = tile == tile0 ? 0 : 1;
            float *part = ws + (size_t)(2 * c + which) * ACCN * THREADS + tid;
#pragma unroll
            for (int r = 0; r < RT; r++)
#pragma unroll
                for (int j = 0; j < NT; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) part[(size_t)((r * NT + j) * 4 + e) * THREADS] = acc[r][j][e];
            __syncthreads(); // the block's part is stored
            int last = 0;
            if (tid == 0) {
                // release: this block's part (ordered before by the barrier); acquire in the last block:
                // the other blocks' parts before its loads (through the barrier below)
                int prev, *cnt = counters + tile;
                asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(prev) : "l"(cnt) : "memory");
                last = prev == cl - cf;
                if (last) *cnt = 0; // every part has counted: ready for the next launch
            }
            if (__syncthreads_or(last)) {
                float sum[RT][NT][4];
#pragma unroll
                for (int r = 0; r < RT; r++)
#pragma unroll
                    for (int j = 0; j < NT; j++)
#pragma unroll
                        for (int e = 0; e < 4; e++) sum[r][j][e] = 0.0f;
                for (int cc = cf; cc <= cl; cc++) { // block order: the same sums whoever arrives last
                    const int wh = tile == (int)(st_start(cc, U, G) / nch) ? 0 : 1;
                    const float *p = ws + (size_t)(2 * cc + wh) * ACCN * THREADS + tid;
#pragma unroll
                    for (int r = 0; r < RT; r++)
#pragma unroll
                        for (int j = 0; j < NT; j++)
#pragma unroll
                            for (int e = 0; e < 4; e++) sum[r][j][e] += ld_cg(p + (size_t)((r * NT + j) * 4 + e) * THREADS);
                }
                store(tile * BN, sum);
            }
        }
#pragma unroll
        for (int r = 0; r < RT; r++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[r][j][e] = 0.0f;
    }
    pdl_launch();
}
