// gemm_sk.cu -- out[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) on tensor cores
// for decode-sized M (2..64), streaming W through a shared-memory pipeline,
// with split-K over a thread-block cluster reduced through distributed
// shared memory (no fp32 partials in global memory, no second kernel).
//
// Why: at M <= 32 a projection is a read of W (33-235 MB for Llama-3-8B)
// and cuBLASLt's kernels carry ~6 us of fixed cost each (bench_kernels gemm,
// 2026-11-30: qkv 61%, o 54% of copy at M = 32); kernel_src/gemm_tc.cu keeps W
// in registers and needs a reduction kernel for its split-K. Here:
//
// - A block owns BN = WARPS * RT * 16 rows of W and one K slice of CPS
//   64-wide chunks; gridDim.y = CL slices form one cluster (1, CL, 1).
// - Every stage is W[BN rows][64 k] and x[M rows][64 k] (128 bytes a row;
//   16-byte segment s of row r stored at s ^ (r & 7), so the 8 rows an
//   ldmatrix reads hit distinct banks), copied with cp.async by all threads;
//   STAGES stages in flight. W needs no predecessor: the first STAGES - 1
//   stages of W are issued before griddepcontrol.wait (programmatic
//   dependent launch), x after it.
// - Warp w owns RT 16-row tiles (rows 16 (w RT + r) ..); for each k16 step
//   its A fragments are one ldmatrix.x4 per tile, x's B fragments one
//   ldmatrix.x4 per two 8-row n tiles, shared by its RT tiles (the fragments
//   of KG k16 steps are loaded before their MMAs: one ldmatrix latency a
//   group, MMAs back to back); mma.sync
//   m16n8k16 with fp32 accumulation (W rows as the MMA's M side, x rows as
//   its N side).
// - CL > 1: every block parks its accumulators in its own shared memory, the
//   cluster synchronises, and block r of the cluster sums element e (of each
//   thread's RT x NT x 4) for e % CL == r over the CL blocks in slice order
//   (ld.shared::cluster, every load issued before the sums; deterministic),
//   adds the bias and stores; a second
//   cluster barrier keeps every block's shared memory alive until read.
//   Needs sm_90; the host launches CL = 1 only on older GPUs.
//
// GLU=1: the gate/up projection with the SiLU-and-mul as its epilogue
// (kiln_gpu_gemm_silu): W is [N = 2I, K], gate rows then up rows; a block
// owns BN / 2 row pairs p (gate row p, up row I + p), warp w's tile 0 the gate
// rows of its 16 pairs and tile 1 the up rows, so a thread holds g and u of
// the same outputs; out[m, p] = silu(g) * u with g and u (+ bias) rounded to
// ACT first, the bits of the plain GEMM then act.cu's silu_mul at the same
// split. The split-K reduction hands out (g, u) pairs.
// ROPE=1: kiln_gemm_sk_rope, the qkv projection of a decode step of M
// sequences with the rotary embedding and the KV-cache write as its epilogue
// (kiln_gpu_gemm_rope_kv_m), what gemv.cu's kiln_gemv_rope does at M = 1:
// W's N = (nq + 2 nkv) * HD rows are the q heads, then k, then v, and a block
// owns exactly one head (BN == HD). Every output is the GEMM's (+ bias)
// rounded to ACT as the plain GEMM stores it; the q and k heads are rotated
// (rotate-half over the whole head) at position pos[m] of row m with cos /
// sin from the precise sincosf of (float)pos[m] * inv_freq[d] times mscale,
// fp32 math, rounded to ACT, and stored back into out; the rotated k and the
// v heads also go into the 16-bit caches of ACT at slots[m] (< 0: row not
// written; key [blocks, nkv, HD / x, bs, x], value [blocks, nkv, HD, bs],
// x = 16 / sizeof(ACT), as rope_kv.cu). The pair (d, d + HD / 2) a rotation
// mixes is held by warps w and w + WARPS / 2 at the same lane and fragment
// index (row 16 (w RT + r) + g + 8 (e >> 1) + HD / 2 is warp w + WARPS / 2's),
// and after the split-K reduction by the same cluster block (it hands out
// the same element indices in every warp): each thread parks its rounded
// values in its own block's shared memory (past the part the cluster reads),
// a block barrier, and each reads its partner's and writes its own output.
// Semantics: engine/ops_cpu.h kiln_cpu_gemm. K % 8 == 0, x and W 16-byte
// aligned; W rows >= N and k >= K read as zero; x rows M..MAXM are not
// copied (whatever the ring holds there reaches only output columns that are
// not stored). OUT: output (and bias) type, act or fp32; out has row stride
// ldo; prof: NULL, or a timing record a block (SK_PROF_N u64, below).
// Grid: (ceil(N / BN), CL) blocks of WARPS * 32 threads (GLU: ceil(I / (BN /
// 2))), dynamic shared memory SMEM_BYTES (host: engine/cuda/ops_gpu.c sk_gemm).
//
// SK_WG=1 (kernel_src/gemm_sk_wg.cu, compiled for sm_90a; $KILN_SKGEMM_WG):
// the same ring, tiling, epilogues and results' layout, multiplied by
// Hopper's warpgroup MMA instead of ldmatrix + mma.sync: one warpgroup
// (WARPS 4), for each stage and tile r one wgmma.mma_async m64nMAXMk16 per
// k16 step with W (A, 64 rows) and x (B, MAXM rows) read straight from the
// swizzled ring through SWIZZLE_128B descriptors, so no fragment passes
// through registers. wgmma gives warp w of the warpgroup rows 16 w .. 16 w +
// 15 of each 64-row tile, so W row 16 (w RT + r) + i (the row mma.sync's
// warp w holds in tile r) is stored at ring row 64 r + 16 w + i: a thread's
// accumulators then mean what they mean above and every epilogue is shared.
// Each thread's cp.async writes pass fence.proxy.async before the stage's
// barrier (wgmma reads through the async proxy); a stage's MMAs are waited
// for (wgmma.wait_group 0) before the next barrier frees its slot. The ring
// starts on a 1024-byte boundary (the swizzle atom): the host asks SMEM_BYTES
// + 1024. On any other target the kernel traps (the host never launches it).
#if defined(ROPE) && ROPE // kiln_gemm_sk_rope's fixed shape (above): one head a block
#define GLU 0
#define RT (HD / (16 * WARPS))
#endif
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
#ifndef CL
#define CL 1
#endif
#ifndef GLU
#define GLU 0
#endif
#ifndef ROPE
#define ROPE 0
#endif
#ifndef SK_WG
#define SK_WG 0
#endif
#ifndef SK_TMA
#define SK_TMA 0
#endif
#if SK_WG && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SK_WGMMA 1 // the warpgroup MMA path (sm_90a)
#else
#define SK_WGMMA 0
#endif
#define THREADS (WARPS * 32 + (SK_TMA ? 32 : 0)) // SK_TMA: + the producer warp
#define NT (MAXM / 8)
#define BN (WARPS * RT * 16)
#define WBYTES (BN * 128)               // W part of a stage
#define STAGE_BYTES ((BN + MAXM) * 128) // W then x
#define PIPE_BYTES (STAGES * STAGE_BYTES)
#define ACCN (RT * NT * 4) // accumulators a thread
#define NTP (NT > 1 ? NT / 2 : 1) // B fragment loads a k16 step (x4: two n tiles; x2 when NT == 1)
#define KG (MAXM * RT >= 128 ? 2 : 4) // k16 steps whose fragments are held at once (registers)
#define RED_BYTES (WARPS * ACCN * 32 * 4)
#define SMEM_BYTES (PIPE_BYTES > RED_BYTES ? PIPE_BYTES : RED_BYTES)
// SK_TMA: the ring's mbarriers (full[STAGES], empty[STAGES]) past SMEM_BYTES; the host asks SMEM_BYTES + 1024 +
// SK_BAR_BYTES (runtime/kiln_rt.h KILN_SKGEMM_TMA_SLACK)
#define SK_BAR_BYTES 256
// the W row (past the block's first) of warp w's tile r: mma.sync's tiling;
// SK_TMA's ring holds 64-row boxes of W, tile r rows 64 r .. 64 r + 63, and
// wgmma gives warp w rows 16 w .. 16 w + 15 of each
#if SK_TMA
#define SK_NROW(w, r) (64 * (r) + 16 * (w))
#else
#define SK_NROW(w, r) (16 * ((w) * RT + (r)))
#endif

static_assert(MAXM == 8 || MAXM == 16 || MAXM == 32 || MAXM == 64, "MAXM: 8, 16, 32 or 64");
static_assert(WARPS == 4 || WARPS == 8, "WARPS: 4 or 8");
static_assert(RT == 1 || RT == 2 || RT == 4, "RT: 1, 2 or 4");
static_assert(STAGES >= 2 && STAGES <= (SK_TMA ? 16 : 8), "STAGES: 2..8 (SK_TMA: 2..16)");
static_assert(CL >= 1 && CL <= 8, "CL: 1..8 (a portable cluster)");
static_assert(SK_TMA || (BN * 8) % THREADS == 0, "W copies divide among the threads");
static_assert(!GLU || RT == 2, "GLU: a warp's tile 0 is 16 gate rows, its tile 1 the matching up rows");
static_assert(!SK_WG || WARPS == 4, "SK_WG: one warpgroup a block");
static_assert(!SK_TMA || (SK_WG && !ROPE && 2 * STAGES * 8 <= SK_BAR_BYTES), "SK_TMA: the wgmma kernel, no ROPE, STAGES <= 16");
#if ROPE
typedef KV kv_t;
static_assert(sizeof(kv_t) == sizeof(act_t) && sizeof(out_t) == sizeof(act_t), "ROPE: act out, a cache of act");
static_assert(BN == HD && MAXM <= 32, "ROPE: a block is one head; the pair (d, d + HD / 2) in warps w, w + WARPS / 2");
static_assert(2 * RED_BYTES <= SMEM_BYTES, "ROPE: the pair exchange past the split-K reduction's buffer");
#define KV_X (16 / (int)sizeof(kv_t))
#endif

#if CL > 1 && __CUDA_ARCH__ >= 900
#define SK_CLUSTER __cluster_dims__(1, CL, 1)
#else
#define SK_CLUSTER
#endif

#define SK_PROF_N 10 // u64 a block in the profiling buffer (engine/cuda/ops_gpu.h KILN_SKGEMM_PROF_N)

#if SK_WGMMA || SK_TMA
#include "wgmma.cuh" // (SK_TMA off sm_90a: tmap_t for the signature; the kernel traps there)
#endif
#if SK_WGMMA
// d (m64 x MAXM, f32, a warpgroup's fragment) += A B^T, A (64 W rows x k16)
// and B (MAXM x rows x k16) K-major in shared memory (descriptors da, db)
#define SKW_DEF(NN, NR, IA, IB, IP)                                                                                \
    KILN_DEV void skw_mma_n##NN(float(&d)[NR], u64 da, u64 db) {                                                   \
        if (mma_kind<act_t>::f16)                                                                                  \
            asm volatile("{ .reg .pred p; setp.ne.b32 p, %" IP ", 0;\n"                                            \
                         "wgmma.mma_async.sync.aligned.m64n" #NN "k16.f32.f16.f16 {" WG_R##NR "}, %" IA ", %" IB  \
                         ", p, 1, 1, 0, 0; }\n"                                                                    \
                         : WG_D##NR(d)                                                                            \
                         : "l"(da), "l"(db), "n"(1));                                                              \
        else                                                                                                       \
            asm volatile("{ .reg .pred p; setp.ne.b32 p, %" IP ", 0;\n"                                            \
                         "wgmma.mma_async.sync.aligned.m64n" #NN "k16.f32.bf16.bf16 {" WG_R##NR "}, %" IA ", %"   \
                         IB ", p, 1, 1, 0, 0; }\n"                                                                 \
                         : WG_D##NR(d)                                                                            \
                         : "l"(da), "l"(db), "n"(1));                                                              \
    }
SKW_DEF(8, 4, "4", "5", "6")
SKW_DEF(16, 8, "8", "9", "10")
SKW_DEF(32, 16, "16", "17", "18")
SKW_DEF(64, 32, "32", "33", "34")
#if MAXM == 8
#define SKW_MMA skw_mma_n8
#elif MAXM == 16
#define SKW_MMA skw_mma_n16
#elif MAXM == 32
#define SKW_MMA skw_mma_n32
#else
#define SKW_MMA skw_mma_n64
#endif
// one ring stage's MMAs: tile r's W rows at ring rows 64 r .. (8-row groups
// 1024 bytes apart), x at xs; k16 step kk 32 bytes on; fenced, then committed
// as one wgmma group (the caller waits for it)
KILN_DEV void skw_stage(float (&accw)[RT][NT * 4], u32 ws, u32 xs) {
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int r = 0; r < RT; r++) SKW_MMA(accw[r], wg_desc(ws + (u32)(r * 64 * 128 + kk * 32)), wg_desc(xs + (u32)(kk * 32)));
    wg_commit();
}
#endif

// GLU's output: g and u (+ bias) rounded to act as the plain GEMM stores
// them, then act.cu's silu_mul (the same bits as the two kernels)
KILN_DEV out_t sk_glu(float g, float u, const out_t *bias, int p, int I) {
    if (bias) g += to_f32(bias[p]), u += to_f32(bias[I + p]);
    const float gf = to_f32(from_f32<act_t>(g)), uf = to_f32(from_f32<act_t>(u));
    return from_f32<out_t>(gf / (1.0f + expf(-gf)) * uf);
}

// Each accumulator of this thread (one CL = 1 block's outputs): tile r, n tile
// j, element e, with its x row m (the output row) and W row n (the column)
// (ROPE's epilogue; the plain one keeps its loops: the same indices, its measured code)
template <typename F> KILN_DEV void sk_each_acc(int warp, int g, int t, int n_blk, F f) {
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                f(r, j, e, 8 * j + 2 * t + (e & 1), n_blk + 16 * (warp * RT + r) + g + 8 * (e >> 1));
}

#if ROPE
// ROPE's output of out[m, n]: xo its GEMM value (+ bias) rounded to act, xp
// the partner's (n -+ HD / 2); rotated as gemv.cu's kiln_gemv_rope rotates
// (y0 = x0 c - x1 s, y1 = x1 c + x0 s, kiln_common.cuh rope_rot's roundings) for a q or k head, stored, and k / v
// into the caches at slots[m]
KILN_DEV void sk_rope_put(out_t *out, i64 ldo, int m, int n, float xo, float xp, int nq, int nkv,
                          const int *__restrict__ pos, const float *__restrict__ inv_freq, float mscale,
                          kv_t *__restrict__ kc, kv_t *__restrict__ vc, const int *__restrict__ slots, int bs) {
    const int half = HD / 2, h = n / HD, d = n - h * HD;
    float y = xo;
    if (h < nq + nkv) { // a q or k head: rotate
        float sn, cs;
        sincosf((float)pos[m] * inv_freq[d < half ? d : d - half], &sn, &cs);
        const float c = cs * mscale, s = sn * mscale;
        y = to_f32(from_f32<act_t>(rope_rot_one(xo, xp, c, s, d < half)));
    }
    out[(size_t)m * ldo + n] = from_f32<out_t>(y);
    const int slot = slots[m];
    if (h < nq || slot < 0) return;
    const int b = slot / bs, o = slot - b * bs;
    if (h < nq + nkv) { // key [blocks, nkv, HD / x, bs, x]
        const size_t kb = ((size_t)b * nkv + (h - nq)) * (HD / KV_X);
        kc[((kb + d / KV_X) * bs + o) * KV_X + d % KV_X] = from_f32<kv_t>(y);
    } else { // value [blocks, nkv, HD, bs]
        vc[(((size_t)b * nkv + (h - nq - nkv)) * HD + d) * bs + o] = from_f32<kv_t>(y);
    }
}
#endif

extern "C" __global__ void __launch_bounds__(THREADS) SK_CLUSTER
#if ROPE
kiln_gemm_sk_rope
#else
kiln_gemm_sk
#endif
(out_t *__restrict__ out, i64 ldo, const act_t *__restrict__ x, const act_t *__restrict__ w,
             const out_t *__restrict__ bias, int M, int N, int K, int cps, u64 *__restrict__ prof
#if ROPE
             , int nq, int nkv, const int *__restrict__ pos, const float *__restrict__ inv_freq, float mscale,
             kv_t *__restrict__ kc, kv_t *__restrict__ vc, const int *__restrict__ slots, int bs
#endif
#if SK_TMA
             , const __grid_constant__ tmap_t wmap, const __grid_constant__ tmap_t xmap
#endif
             ) {
#if SK_WG && !SK_WGMMA
    __trap(); // wgmma needs sm_90a: the host launches SK_WG only there
#else
#if SK_WG
    extern __shared__ __align__(128) unsigned char smem_dyn[];
    unsigned char *const smem = smem_dyn + ((0u - smem_addr(smem_dyn)) & 1023u); // the ring on a swizzle atom
#else
    extern __shared__ __align__(128) unsigned char smem[];
#endif
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n_blk = blockIdx.x * (GLU ? BN / 2 : BN); // first W row (GLU: first row pair) of the block
    const int nchunks = (K + 63) >> 6;
    const int c_lo = blockIdx.y * cps, c_hi = min(nchunks, c_lo + cps);
    const int nst = max(0, c_hi - c_lo);
    const u32 sbase = smem_addr(smem);
    // profiling (prof != NULL: bench_kernels gemm_sk_prof): thread 0 of each
    // block records SK_PROF_N u64 at prof[block * SK_PROF_N]: globaltimer at
    // entry and exit, clock64 at entry, after the wait on the previous
    // kernel, once the first stage landed, at the loop's end and after the
    // split-K reduction, then the SM id, the stage count and the cluster rank
    u64 *pr = prof && tid == 0 ? prof + ((size_t)blockIdx.y * gridDim.x + blockIdx.x) * SK_PROF_N : nullptr;
    if (pr) pr[0] = global_timer(), pr[2] = clock64();

#if SK_TMA
    // The ring through TMA (SK_TMA): the last warp's lane 0 produces, the
    // warpgroup consumes. Stage i: RT 64-row boxes of W (GLU: the gate rows of
    // the block's 64 pairs, then their up rows) and one MAXM-row box of x (rows
    // >= M read as zeros), 128-byte swizzled as the cp.async ring above, in
    // slot i % STAGES; full[slot] completes when its bytes landed, empty[slot]
    // once the 4 consumer warps' MMAs of it completed (each warp keeps one
    // stage's MMAs in flight and frees the stage before it).
    const u32 bar_full = sbase + SMEM_BYTES, bar_empty = bar_full + STAGES * 8;
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) mb_init(bar_full + 8 * s, 1), mb_init(bar_empty + 8 * s, WARPS);
        mb_init_fence();
    }
    __syncthreads();
    float acc[RT][NT][4];
    float accw[RT][NT * 4]; // tile r's wgmma fragment: accw[r][4 j + e] is acc[r][j][e]
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int e = 0; e < NT * 4; e++) accw[r][e] = 0.0f;
    if (warp == WARPS) {
        if (lane == 0) {
            tmap_prefetch(wmap);
            tmap_prefetch(xmap);
            auto put_w = [&](int i, int slot) {
                const u32 dst = sbase + slot * STAGE_BYTES, bar = bar_full + 8 * slot;
                const int k0 = (c_lo + i) * 64;
#pragma unroll
                for (int r = 0; r < RT; r++)
                    tma_load_2d(dst + r * 64 * 128, wmap, k0, GLU ? r * (N / 2) + n_blk : n_blk + 64 * r, bar);
            };
            auto put_x = [&](int i, int slot) {
                tma_load_2d(sbase + slot * STAGE_BYTES + WBYTES, xmap, (c_lo + i) * 64, 0, bar_full + 8 * slot);
            };
            const int pre = min(nst, STAGES);
            for (int s = 0; s < pre; s++) { // W needs no predecessor
                mb_arrive_tx(bar_full + 8 * s, STAGE_BYTES);
                put_w(s, s);
            }
            pdl_wait();
            for (int s = 0; s < pre; s++) put_x(s, s);
            for (int i = STAGES; i < nst; i++) {
                const int slot = i % STAGES;
                mb_wait(bar_empty + 8 * slot, (u32)((i / STAGES - 1) & 1));
                mb_arrive_tx(bar_full + 8 * slot, STAGE_BYTES);
                put_w(i, slot);
                put_x(i, slot);
            }
        }
        __syncwarp();
    } else {
        pdl_wait(); // (the producer's wait orders x; this one the consumers' stores)
        if (pr) pr[3] = clock64();
        for (int i = 0; i < nst; i++) {
            const int slot = i % STAGES;
            mb_wait(bar_full + 8 * slot, (u32)((i / STAGES) & 1));
            if (pr && i == 0) pr[4] = clock64();
            skw_stage(accw, sbase + slot * STAGE_BYTES, sbase + slot * STAGE_BYTES + WBYTES);
            wg_wait<1>(); // stage i - 1's MMAs completed: its slot is free
            if (i > 0) {
                __syncwarp();
                if (lane == 0) mb_arrive(bar_empty + 8 * ((i + STAGES - 1) % STAGES));
            }
        }
        wg_wait<0>();
    }
#else
    // this thread's W segments: idx = tid + THREADS * i, ring row idx / 8,
    // segment idx % 8; row: the block's W row it holds (SK_WG: ring row 64 r
    // + 16 w + i holds row 16 (w RT + r) + i, see above)
    auto load_w = [&](int i, int slot) {
        const int k0 = (c_lo + i) * 64;
        const u32 dst = sbase + slot * STAGE_BYTES;
#pragma unroll
        for (int q = 0; q < BN * 8 / THREADS; q++) {
            const int idx = tid + q * THREADS, seg = idx & 7;
#if SK_WG
            const int ring = idx >> 3, row = 16 * (((ring >> 4) & 3) * RT + (ring >> 6)) + (ring & 15);
#else
            const int row = idx >> 3, ring = row;
#endif
#if GLU
            // smem row (warp w, tile r, i) = 32 w + 16 r + i: pair n_blk + 16 w + i, gate or up
            const int pair = n_blk + 16 * (row >> 5) + (row & 15), n = ((row >> 4) & 1) * (N / 2) + pair;
            const bool ok = pair < N / 2 && k0 + seg * 8 < K;
            const int k = k0 + seg * 8;
#else
            const int n = n_blk + row, k = k0 + seg * 8;
            const bool ok = n < N && k < K;
#endif
            cp_async16_u32(dst + ring * 128 + ((seg ^ (ring & 7)) << 4), ok ? w + (size_t)n * K + k : w, ok ? 16 : 0);
        }
    };
    auto load_x = [&](int i, int slot) {
        const int k0 = (c_lo + i) * 64;
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
        if (s < nst) load_w(s, s);
    pdl_wait();
    if (pr) pr[3] = clock64();
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nst) load_x(s, s);
        cp_async_commit();
    }

    float acc[RT][NT][4];
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[r][j][e] = 0.0f;

    // ldmatrix lane addresses inside a stage (before the slot and k16 offsets):
    // A: tile row lane % 16, segment 2 kk + lane / 16; B (x4, n tiles 2jp and
    // 2jp + 1): row 8 (2jp + q / 2) + lane % 8, segment 2 kk + q % 2 (q = lane / 8)
#if !SK_WG
    const int a_row0 = warp * RT * 16 + (lane & 15), a_seg = lane >> 4;
    const int b_q = lane >> 3, b_seg = b_q & 1;
#endif

#if SK_WG
    float accw[RT][NT * 4]; // tile r's wgmma fragment: accw[r][4 j + e] is acc[r][j][e]
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int e = 0; e < NT * 4; e++) accw[r][e] = 0.0f;
#endif
    int slot = 0, fill = STAGES - 1;
    for (int i = 0; i < nst; i++) {
        cp_async_wait<STAGES - 2>();
#if SK_WG
        wg_fence_proxy(); // this thread's cp.async writes -> the warpgroup's wgmma reads
#endif
        __syncthreads(); // stage i landed for everyone; slot `fill` (stage i - 1) is free
        if (pr && i == 0) pr[4] = clock64();
        if (i + STAGES - 1 < nst) {
            load_w(i + STAGES - 1, fill);
            load_x(i + STAGES - 1, fill);
        }
        cp_async_commit();
        fill = fill == STAGES - 1 ? 0 : fill + 1;

        const u32 ws = sbase + slot * STAGE_BYTES, xs = ws + WBYTES;
#if SK_WG
        skw_stage(accw, ws, xs);
        wg_wait<0>(); // before the next barrier frees this slot
#else
        // KG k16 steps at a time: every fragment first, then the MMAs (the
        // ldmatrix latency is paid once a group and the MMAs issue back to
        // back, consecutive ones on different accumulators)
#pragma unroll
        for (int k0 = 0; k0 < 4; k0 += KG) {
            u32 a[KG][RT][4], b[KG][NTP][4];
#pragma unroll
            for (int q = 0; q < KG; q++)
#pragma unroll
                for (int r = 0; r < RT; r++) {
                    const int row = a_row0 + r * 16, seg = 2 * (k0 + q) + a_seg;
                    ldsm_x4(a[q][r][0], a[q][r][1], a[q][r][2], a[q][r][3], ws + row * 128 + ((seg ^ (row & 7)) << 4));
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
                    ldsm_x4(b[q][jp][0], b[q][jp][1], b[q][jp][2], b[q][jp][3],
                               xs + row * 128 + ((seg ^ (row & 7)) << 4));
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
#endif
        slot = slot == STAGES - 1 ? 0 : slot + 1;
    }
#endif // SK_TMA
#if SK_TMA
    if (warp == WARPS) { // the producer: through the epilogue's block and cluster barriers, no accumulators
        pdl_launch();
#if CL > 1 && __CUDA_ARCH__ >= 900
        __syncthreads();
        cluster_barrier();
        cluster_barrier();
#endif
        return;
    }
#endif
#if SK_WG
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[r][j][e] = accw[r][4 * j + e];
#endif
    pdl_launch();
    if (pr) pr[5] = clock64();

    // acc[r][j][e] is out[m = 8j + 2t + (e & 1)][n = n_blk + 16 (warp RT + r) + g + 8 (e >> 1)]
    const int g = lane >> 2, t = lane & 3;
#if CL > 1
#if __CUDA_ARCH__ >= 900
    cp_async_wait<0>();
    __syncthreads(); // the ring is free (the last groups were empty)
    float *red = reinterpret_cast<float *>(smem); // [WARPS][ACCN][32]
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) red[(warp * ACCN + (r * NT + j) * 4 + e) * 32 + lane] = acc[r][j][e];
    cluster_barrier();
    const u32 me = cluster_rank();
    // all the remote loads first (CL per owned group), then the sums in slice
    // order; a group is one entry, or (GLU) the gate and up entries (r = 0, 1)
    // of the same outputs
#if GLU
    constexpr int NG = NT * 4, GE = 2;
#else
    constexpr int NG = ACCN, GE = 1;
#endif
    constexpr int PER = (NG + CL - 1) / CL;
    u32 rbase[CL];
#pragma unroll
    for (int q = 0; q < CL; q++) rbase[q] = cluster_map(sbase, (u32)q);
    float v[PER][GE][CL];
#pragma unroll
    for (int o = 0; o < PER; o++) {
        const int gi = (int)me + o * CL;
#pragma unroll
        for (int h = 0; h < GE; h++) {
            const u32 off = (u32)((warp * ACCN + h * NG + gi) * 32 + lane) * 4;
#pragma unroll
            for (int q = 0; q < CL; q++) v[o][h][q] = gi < NG ? ld_cluster_f32(rbase[q] + off) : 0.0f;
        }
    }
#if ROPE
    // the sums (+ bias) rounded to act, parked for the partner warp past red
    // (which the other blocks of the cluster may still read)
    float xs[PER];
    float *xch = reinterpret_cast<float *>(smem + RED_BYTES); // [WARPS][PER][32]
#pragma unroll
    for (int o = 0; o < PER; o++) {
        const int gi = (int)me + o * CL;
        xs[o] = 0.0f;
        if (gi >= NG) break;
        const int r = gi / (NT * 4), e = gi % 4;
        const int n = n_blk + 16 * (warp * RT + r) + g + 8 * (e >> 1);
        float sum = 0.0f;
#pragma unroll
        for (int q = 0; q < CL; q++) sum += v[o][0][q];
        if (bias && n < N) sum += to_f32(bias[n]);
        xs[o] = to_f32(from_f32<act_t>(sum));
        xch[(warp * PER + o) * 32 + lane] = xs[o];
    }
    __syncthreads();
    const int pw = (warp + WARPS / 2) % WARPS; // the partner warp: rows n +- HD / 2
#pragma unroll
    for (int o = 0; o < PER; o++) {
        const int gi = (int)me + o * CL;
        if (gi >= NG) break;
        const int r = gi / (NT * 4), j = (gi / 4) % NT, e = gi % 4;
        const int m = 8 * j + 2 * t + (e & 1), n = n_blk + SK_NROW(warp, r) + g + 8 * (e >> 1);
        if (m >= M || n >= N) continue;
        sk_rope_put(out, ldo, m, n, xs[o], xch[(pw * PER + o) * 32 + lane], nq, nkv, pos, inv_freq, mscale, kc, vc,
                    slots, bs);
    }
#else
#pragma unroll
    for (int o = 0; o < PER; o++) {
        const int gi = (int)me + o * CL;
        if (gi >= NG) break;
#if GLU
        const int j = gi / 4, e = gi % 4;
        const int m = 8 * j + 2 * t + (e & 1), p = n_blk + 16 * warp + g + 8 * (e >> 1);
        if (m >= M || p >= N / 2) continue;
        float gs = 0.0f, us = 0.0f;
#pragma unroll
        for (int q = 0; q < CL; q++) gs += v[o][0][q], us += v[o][1][q];
        out[(size_t)m * ldo + p] = sk_glu(gs, us, bias, p, N / 2);
#else
        const int r = gi / (NT * 4), j = (gi / 4) % NT, e = gi % 4;
        const int m = 8 * j + 2 * t + (e & 1), n = n_blk + SK_NROW(warp, r) + g + 8 * (e >> 1);
        if (m >= M || n >= N) continue;
        float sum = 0.0f;
#pragma unroll
        for (int q = 0; q < CL; q++) sum += v[o][0][q];
        if (bias) sum += to_f32(bias[n]);
        out[(size_t)m * ldo + n] = from_f32<out_t>(sum);
#endif
    }
#endif // ROPE
    if (pr) pr[6] = clock64();
    cluster_barrier(); // no block leaves while another may still read its shared memory
#else
    __trap(); // split-K clusters need sm_90 (the host never launches this)
#endif
#elif GLU
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int m = 8 * j + 2 * t + (e & 1), p = n_blk + 16 * warp + g + 8 * (e >> 1);
            if (m >= M || p >= N / 2) continue;
            out[(size_t)m * ldo + p] = sk_glu(acc[0][j][e], acc[1][j][e], bias, p, N / 2);
        }
    if (pr) pr[6] = clock64();
#elif ROPE
    cp_async_wait<0>();
    __syncthreads(); // the ring is free (the last groups were empty): the pair exchange reuses it
    float *xch = reinterpret_cast<float *>(smem); // [WARPS][ACCN][32]
    sk_each_acc(warp, g, t, n_blk, [&](int r, int j, int e, int, int n) {
        const float b = bias && n < N ? to_f32(bias[n]) : 0.0f;
        acc[r][j][e] = to_f32(from_f32<act_t>(acc[r][j][e] + b)); // as the plain GEMM stores it
        xch[(warp * ACCN + (r * NT + j) * 4 + e) * 32 + lane] = acc[r][j][e];
    });
    __syncthreads();
    const int pw = (warp + WARPS / 2) % WARPS; // the partner warp: rows n +- HD / 2
    sk_each_acc(warp, g, t, n_blk, [&](int r, int j, int e, int m, int n) {
        if (m >= M || n >= N) return;
        sk_rope_put(out, ldo, m, n, acc[r][j][e], xch[(pw * ACCN + (r * NT + j) * 4 + e) * 32 + lane], nq, nkv, pos,
                    inv_freq, mscale, kc, vc, slots, bs);
    });
    if (pr) pr[6] = clock64();
#else
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int m = 8 * j + 2 * t + (e & 1), n = n_blk + SK_NROW(warp, r) + g + 8 * (e >> 1);
                if (m >= M || n >= N) continue;
                const float b = bias ? to_f32(bias[n]) : 0.0f;
                out[(size_t)m * ldo + n] = from_f32<out_t>(acc[r][j][e] + b);
            }
    if (pr) pr[6] = clock64();
#endif
    if (pr) {
        const u32 sm = sm_id();
        pr[1] = global_timer(), pr[7] = sm, pr[8] = (u64)nst, pr[9] = blockIdx.y;
    }
#endif // SK_WG && !SK_WGMMA
}
