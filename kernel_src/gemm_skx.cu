// gemm_skx.cu -- out[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) on tensor cores
// for decode-sized M (1..32), with x stationary in registers and W streamed
// through warp-private shared-memory rings (engine/cuda/ops_gpu.c skx_gemm;
// the design measured in bench/skx_micro.cu).
//
// Why: gemm_sk keeps x's stage beside W's in its ring (fewer W bytes in
// flight an SM than the ~160 KiB a full-rate stream needs), makes every stage
// a barrier of the whole block, and splits K over clusters of 3-4 blocks whose
// launch alone costs 8-22 points of the copy rate (bench/skring_micro.cu).
// Here:
//
// - A block owns BN = 16 RT rows of W and one of CL K ranges (gridDim.y = CL,
//   one cluster (1, CL, 1); CL <= 2 keeps a cluster on a TPC's pair of SMs).
//   Its WARPS warps split the range: warp w owns the KW columns from
//   k_w = blockIdx.y K / CL + w KW (K = CL WARPS KW, checked by the host).
// - Warp w holds x[0, MAXM) x [its KW columns] in registers for the whole
//   kernel: the B fragments of every k16 step (MAXM / 8 n-tiles), loaded
//   after griddepcontrol.wait in rounds of 64 columns through a staging
//   buffer in the warp's own shared-memory area (ld.global.cg: x was written
//   by the kernel before) and ldmatrix; the rounds of a ring stage's columns
//   are loaded before its MMAs, the next stage's issued before them.
// - Warp w streams W[BN rows, its KW columns] through its own ring of SLOTS slots
//   of 16 rows x SK columns (SK * 2-byte rows, 16-byte chunk c of row r at
//   c ^ (r & 7): the 8 rows an ldmatrix reads hit distinct banks), cp.async,
//   waited for by the warp alone (cp.async.wait_group + __syncwarp): no block
//   barrier in the loop. The first SLOTS - 1 stages are issued before
//   griddepcontrol.wait (programmatic dependent launch: W is not written by
//   any kernel). Stage i is row tile i / KSS, columns (i % KSS) SK .. of the
//   warp's range (KSS = KW / SK).
// - For each k16 step: one ldmatrix.x4 of W (A: 16 rows) and MAXM / 8
//   mma.sync m16n8k16 with fp32 accumulation (W rows as the MMA's M side, x
//   rows as its N side). Row tile r's accumulators (MAXM / 8 x 4 a thread)
//   are parked in the warp's area (past x's staging, done by then) when the
//   tile is done.
// - The warps' sums meet once, at the end, in shared memory, in warp order;
//   with CL > 1 every block stores its sums in its own shared memory, the
//   cluster synchronises, and block r sums the entries e with e / 32 = r mod
//   CL over the CL blocks in rank order (ld.shared::cluster), adds the bias
//   and stores; a second cluster barrier keeps the shared memory alive until
//   read. Deterministic: fixed columns a warp, fixed summation orders.
//   CL > 1 needs sm_90 (the host launches CL = 1 only elsewhere).
//
// - NOUT=1 (one row, OUT = ACT; the batch-1 o / down projection with the residual add + RMSNorm folded,
//   as kernel_src/gemv.cu's NOUT): h = residual[n] + the output rounded to ACT, rounded to ACT, is stored
//   into residual[n], out[n] = h * nw[n] rounded to ACT, and block b (gridDim.y b + y: CL b + rank) writes
//   ss_out[b], the sum of squares of the h it stored (a thread's in entry order, the warps' in warp order).
//
// Semantics: engine/ops_cpu.h kiln_cpu_gemm. M <= MAXM; K = CL * WARPS * KW;
// N % (16 RT) == 0; x, W 16-byte aligned. OUT: the output (and bias) type,
// act or fp32; out has row stride ldo. Grid (N / (16 RT), CL) blocks of
// WARPS * 32 threads, dynamic shared memory SKX_SMEM (host: WARPS * (SLOTS * 32 SK
// + SKX_AREA) bytes, engine/cuda/ops_gpu.c skx_gemm).
#include "gemm_tc_common.cuh"
#include "norm_fold.cuh" // nout_put: NOUT's store

#ifndef MAXM
#define MAXM 32
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef KW
#define KW 256
#endif
#ifndef SK
#define SK 128
#endif
#ifndef SLOTS
#define SLOTS 5
#endif
#ifndef RT
#define RT 4
#endif
#ifndef CL
#define CL 1
#endif
#ifndef NOUT
#define NOUT 0
#endif

#define NT (MAXM / 8)
#define THREADS (WARPS * 32)
#define KSS (KW / SK)            // ring stages a row tile
#define NST (RT * KSS)           // ring stages a warp
#define SLOT (16 * SK * 2)       // bytes of a ring slot
#define WRING (SLOTS * SLOT)     // a warp's ring
#define RING_ALL (WARPS * WRING) // all warps' rings (the area of warp 0 follows)
#define XR (SK / 64)             // x rounds (64 columns each) a ring stage
#define ACCN (RT * NT * 4)       // accumulators a thread
#define ENT (ACCN * 32)          // a warp's accumulator entries
#define STAGE_X (XR * NT * 1024) // a warp's x staging: XR buffers of MAXM rows x 64 columns
#define PARK (ENT * 4)
#define SKX_AREA (STAGE_X > PARK ? STAGE_X : PARK)
#define SKX_SMEM (WARPS * (WRING + SKX_AREA))

static_assert(MAXM == 8 || MAXM == 16 || MAXM == 32, "MAXM: 8, 16 or 32");
static_assert(WARPS == 4 || WARPS == 8, "WARPS: 4 or 8");
static_assert(SK == 64 || SK == 128, "SK: 64 or 128");
static_assert(KW % SK == 0, "KW: a multiple of SK");
static_assert(KW / 16 * NT * 2 <= 128, "x's fragments: at most 128 registers a thread");
static_assert(SLOTS >= 2 && SLOTS <= 16, "SLOTS: 2..16");
static_assert(RT >= 1 && RT <= 8, "RT: 1..8");
static_assert(CL == 1 || CL == 2 || CL == 4, "CL: 1, 2 or 4");
static_assert(CL == 1 || RING_ALL >= ENT * 4, "the block's sums fit the drained rings");
static_assert(SKX_SMEM <= 227 * 1024, "shared memory");
static_assert(!NOUT || (MAXM == 8 && sizeof(out_t) == sizeof(act_t)), "NOUT: MAXM 8, OUT = ACT");
static_assert(!NOUT || RING_ALL >= ENT * 4 + WARPS * 4, "NOUT's warp sums beside the block's sums");

#if CL > 1 && __CUDA_ARCH__ >= 900
#define SKX_CLUSTER __cluster_dims__(1, CL, 1)
#define SKX_RUN 1
#elif CL > 1
#define SKX_CLUSTER
#define SKX_RUN 0 // the host never launches a cluster before sm_90
#else
#define SKX_CLUSTER
#define SKX_RUN 1
#endif

// out[m, n] of accumulator entry p = gi * 32 + lane, gi = (r NT + j) 4 + e of warp-tile r, n-tile j, element e
KILN_DEV void skx_at(int p, int n_blk, int &m, int &n) {
    const int gi = p >> 5, l = p & 31, r = gi / (NT * 4), j = (gi >> 2) % NT, e = gi & 3;
    m = 8 * j + 2 * (l & 3) + (e & 1), n = n_blk + 16 * r + (l >> 2) + 8 * (e >> 1);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) SKX_CLUSTER
kiln_gemm_skx(out_t *__restrict__ out, i64 ldo, const act_t *__restrict__ x, const act_t *__restrict__ w,
              const out_t *__restrict__ bias, int M, int N, int K, act_t *__restrict__ residual,
              float *__restrict__ ss_out, const act_t *__restrict__ nw) {
#if !SKX_RUN
    __trap();
#else
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n_blk = blockIdx.x * (16 * RT), k_w = blockIdx.y * (K / CL) + warp * KW;
    const u32 sbase = smem_addr(smem);
    const u32 ring = sbase + (u32)(warp * WRING);
    unsigned char *const area_p = smem + RING_ALL + warp * SKX_AREA;
    const u32 area = smem_addr(area_p);
    const act_t *const wb = w + (size_t)n_blk * K + k_w;

    // stage i (row tile i / KSS, columns (i % KSS) SK ..) into slot i % SLOTS
    auto load = [&](int i) {
        const int rt = i / KSS, ks = i - rt * KSS;
        const u32 dst = ring + (u32)((i % SLOTS) * SLOT);
        const act_t *src = wb + (size_t)(rt * 16) * K + ks * SK;
#pragma unroll
        for (int q = 0; q < 16 * (SK / 8) / 32; q++) {
            const int idx = lane + 32 * q, row = idx / (SK / 8), c = idx % (SK / 8);
            cp_async16_u32(dst + (u32)(row * (SK * 2) + ((c ^ (row & 7)) << 4)), src + (size_t)row * K + c * 8);
        }
    };
#pragma unroll
    for (int s = 0; s < SLOTS - 1; s++) {
        if (s < NST) load(s);
        cp_async_commit();
    }
    pdl_wait();

    constexpr int PER = (ENT + THREADS - 1) / THREADS; // accumulator entries a thread sums at the end
#if CL > 1
    const u32 me = cluster_rank();
#else
    const u32 me = 0;
#endif
    // the entries p = tid + THREADS q this block stores: p < ENT, p / 32 = its rank mod CL
    auto stores = [&](int q) { return tid + THREADS * q < ENT && (u32)(((tid + THREADS * q) >> 5) % CL) == me; };
#if NOUT
    // NOUT: the residual and norm weight of the outputs this thread stores (row 0), loaded after the wait
    float res[PER], nwr[PER];
#pragma unroll
    for (int q = 0; q < PER; q++) {
        int m, n;
        skx_at(tid + THREADS * q, n_blk, m, n);
        const bool mine = stores(q) && m == 0;
        res[q] = mine ? to_f32(residual[n]) : 0.0f, nwr[q] = mine ? to_f32(nw[n]) : 0.0f;
    }
#else
    (void)residual, (void)ss_out, (void)nw;
#endif

    // x: xb[kx][j] = the B fragment (b0, b1) of k16 step kx of the warp's columns and n-tile j
    u32 xb[KW / 16][NT][2];
    const int b_q = lane >> 3;
    auto x_ldg = [&](int q, uint4 (&v)[2 * NT]) { // round q: columns 64 q .. of rows < M
#pragma unroll
        for (int e = 0; e < 2 * NT; e++) {
            const int idx = lane + 32 * e, row = idx >> 3, seg = idx & 7;
            v[e] = row < M ? ld16_cg(x + (size_t)row * K + k_w + 64 * q + seg * 8) : make_uint4(0, 0, 0, 0);
        }
    };
    auto x_frag = [&](int q, int buf, const uint4 (&v)[2 * NT]) { // round q through staging buffer buf
        unsigned char *st = area_p + buf * NT * 1024;
#pragma unroll
        for (int e = 0; e < 2 * NT; e++) {
            const int idx = lane + 32 * e, row = idx >> 3, seg = idx & 7;
            st16(st + row * 128 + ((seg ^ (row & 7)) << 4), v[e]);
        }
        compiler_fence(); // the stores before the warp's ldmatrix
        __syncwarp();
        const u32 sa = area + (u32)(buf * NT * 1024);
#if NT == 1
#pragma unroll
        for (int kk = 0; kk < 4; kk += 2) { // one n-tile of two k16 steps
            const int row = lane & 7, seg = 2 * kk + b_q, kx = 4 * q + kk;
            ldsm_x4(xb[kx][0][0], xb[kx][0][1], xb[kx + 1][0][0], xb[kx + 1][0][1],
                    sa + (u32)(row * 128 + ((seg ^ (row & 7)) << 4)));
        }
#else
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
#pragma unroll
            for (int jp = 0; jp < NT / 2; jp++) { // two n-tiles of one k16 step
                const int row = 8 * (2 * jp + (b_q >> 1)) + (lane & 7), seg = 2 * kk + (b_q & 1), kx = 4 * q + kk;
                ldsm_x4(xb[kx][2 * jp][0], xb[kx][2 * jp][1], xb[kx][2 * jp + 1][0], xb[kx][2 * jp + 1][1],
                        sa + (u32)(row * 128 + ((seg ^ (row & 7)) << 4)));
            }
#endif
        compiler_fence(); // the reads before the next round's stores
        __syncwarp();
    };

    float acc[NT][4];
    const int a_row = lane & 15, a_seg = lane >> 4;
    auto stage = [&](int i, int ks, float (&c)[NT][4]) { // stage i (columns ks of its row tile) into c
        cp_async_wait<SLOTS - 2>();
        __syncwarp();
        if (i + SLOTS - 1 < NST) load(i + SLOTS - 1);
        cp_async_commit();
        const u32 ws = ring + (u32)((i % SLOTS) * SLOT);
#pragma unroll
        for (int kk = 0; kk < SK / 16; kk++) {
            u32 a0, a1, a2, a3;
            const int seg = 2 * kk + a_seg;
            ldsm_x4(a0, a1, a2, a3, ws + (u32)(a_row * (SK * 2) + ((seg ^ (a_row & 7)) << 4)));
#pragma unroll
            for (int j = 0; j < NT; j++) mma_act(c[j], a0, a1, a2, a3, xb[ks * (SK / 16) + kk][j][0], xb[ks * (SK / 16) + kk][j][1]);
        }
    };
    auto zero = [&](float (&c)[NT][4]) {
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) c[j][e] = 0.0f;
    };
    auto park = [&](int rt, const float (&c)[NT][4]) { // row tile rt's entries into the warp's area
        float *pk = reinterpret_cast<float *>(area_p);
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) pk[((rt * NT + j) * 4 + e) * 32 + lane] = c[j][e];
    };

    // row tile 0, with x's rounds: a stage's before its MMAs, the next stage's loads issued before them
    zero(acc);
    {
        uint4 xv[XR][2 * NT];
#pragma unroll
        for (int r = 0; r < XR; r++) x_ldg(r, xv[r]);
#pragma unroll
        for (int ks = 0; ks < KSS; ks++) {
#pragma unroll
            for (int r = 0; r < XR; r++) x_frag(ks * XR + r, r, xv[r]);
            if (ks + 1 < KSS)
#pragma unroll
                for (int r = 0; r < XR; r++) x_ldg((ks + 1) * XR + r, xv[r]);
            stage(ks, ks, acc);
        }
    }
    park(0, acc); // (x's staging, its last use above, shares the area)
    for (int rt = 1; rt < RT; rt++) {
        zero(acc);
#pragma unroll
        for (int ks = 0; ks < KSS; ks++) stage(rt * KSS + ks, ks, acc);
        park(rt, acc);
    }
    pdl_launch();

    // the warps' sums, in warp order
    cp_async_wait<0>();
    __syncthreads();
    const float *const red = reinterpret_cast<const float *>(smem + RING_ALL); // the parked entries
    constexpr int RSTRIDE = SKX_AREA / 4;
    float sum[PER];
#pragma unroll
    for (int q = 0; q < PER; q++) {
        const int p = tid + THREADS * q;
        float s = 0.0f;
        if (p < ENT)
#pragma unroll
            for (int v = 0; v < WARPS; v++) s += red[v * RSTRIDE + p];
        sum[q] = s;
    }
#if CL > 1
    // the block's sums where the cluster reads them (over the drained rings), then block r stores the entries p
    // with p / 32 = r mod CL, summed over the cluster in rank order
    const u32 bsum = sbase;
    float *const bsum_p = reinterpret_cast<float *>(smem);
#pragma unroll
    for (int q = 0; q < PER; q++)
        if (tid + THREADS * q < ENT) bsum_p[tid + THREADS * q] = sum[q];
    cluster_barrier();
#pragma unroll
    for (int q = 0; q < PER; q++) {
        if (!stores(q)) continue;
        float v[CL];
#pragma unroll
        for (int r = 0; r < CL; r++)
            v[r] = ld_cluster_f32(cluster_map(bsum + (u32)(tid + THREADS * q) * 4, (u32)r));
        float s = 0.0f;
#pragma unroll
        for (int r = 0; r < CL; r++) s += v[r];
        sum[q] = s;
    }
#endif
    // the stores (NOUT: the residual, h * nw and the thread's sum of squares)
    float ss = 0.0f;
#pragma unroll
    for (int q = 0; q < PER; q++) {
        int m, n;
        if (!stores(q)) continue;
        skx_at(tid + THREADS * q, n_blk, m, n);
        if (m >= M) continue;
        float v = sum[q];
        if (bias) v += to_f32(bias[n]);
#if NOUT
        ss += nout_put(residual, out, n, v, res[q], nwr[q]);
#else
        out[(size_t)m * ldo + n] = from_f32<out_t>(v);
#endif
    }
#if NOUT
    // the block's sum of squares: the warps' (butterfly sums) in warp order, beside the block's sums
    float *const bss = reinterpret_cast<float *>(smem + ENT * 4);
    ss = warp_sum(ss);
    if (lane == 0) bss[warp] = ss;
    __syncthreads();
    if (tid == 0) {
        float t = 0.0f;
#pragma unroll
        for (int v = 0; v < WARPS; v++) t += bss[v];
        ss_out[blockIdx.x * CL + me] = t;
    }
#endif
#if CL > 1
    cluster_barrier();
#endif
#endif
}
