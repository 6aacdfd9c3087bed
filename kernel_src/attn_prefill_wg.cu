// attn_prefill_wg.cu -- the prefill attention of attn_prefill.cu (same
// semantics, arguments and grid shape) on Hopper's warpgroup MMA (wgmma,
// sm_90a), warp-specialized as FlashAttention-3: kiln_attn_prefill_wg2,
// registry "attn_prefill_wg2", selected on sm_90 by $KILN_PREFILL_KERNEL=wg2
// and by default for long contexts (engine/cuda/ops_gpu.c prefill_wg2). The
// file's first kernel, kiln_attn_prefill_wg (the same computation without
// warp specialization: 256 threads, each copying and computing), was
// removed; this one measured faster at every shape (bench/RESULTS.md).
// Semantics: engine/ops_cpu.h kiln_cpu_attention: sequence s owns query rows
// [qstart[s], qstart[s+1]), ctx_len[s] includes them; query i of s sits at
// position ctx_len[s] - q_len + i and attends to cached positions p with
// p <= pos and (window <= 0 or p > pos - window).
//
// Served: 16-bit caches, HEAD_DIM 64 or 128, compiled for sm_90a (the JIT
// compiles this file for sm_90a where it is asked for sm_90: registry.c
// kiln_jit_unit_arch). Any other specialization or arch compiles a body that
// traps; the host never launches it there.
//
// A block computes BM = 128 rows = TT tokens x GROUP heads of one KV head
// (row r: head qh0 + r / TT, token tok0 + r % TT, TT = 128 / GROUP) over KV
// tiles of BN = 128 tokens, with 384 threads in three roles (branches of one
// if/else, so setmaxnreg applies: 168 registers a thread at launch = 24 x
// 128 + 240 x 256):
//   warpgroup 0, producer (setmaxnreg.dec 24): copies K_i and V_i of KV
//     tile i into stage i % 3 with cp.async (a paged cache: 16-byte chunks
//     through the block table; no TMA), in the order K_0, K_1, V_0, K_2,
//     V_1, .. (the consumers read K_j with V_{j-1}), each once that stage's
//     K / V is empty (empty_k[s] / empty_v[s]), and signals it with
//     cp.async.mbarrier.arrive.noinc on full_k[s] / full_v[s] (count 128:
//     one arrival a producer thread, made when all its earlier copies have
//     landed).
//   warpgroups 1, 2, consumers (setmaxnreg.inc 240): query rows 0..63 /
//     64..127, warp i of a consumer its rows 16i .. 16i + 15 (the wgmma
//     accumulator layout). Each loads its own Q rows (cp.async, wait,
//     fence.proxy.async, a 128-thread named barrier 3 / 4), computes S_0 and
//     its softmax, then per KV tile j >= 1:
//       S_j = Q K_j^T          wgmma m64n128k16, Q and K from shared memory
//                              (descriptors)
//       O += P_{j-1} V_{j-1}   wgmma m64n{HEAD_DIM}k16, P from registers (the
//                              S accumulators rounded to 16 bits are already
//                              the A fragment layout), V from shared memory
//     It waits full_k (tile j) and full_v (tile j - 1) with
//     mbarrier.try_wait.parity, fence.proxy.async.shared::cta (the copies
//     were generic-proxy writes; wgmma reads through the async proxy),
//     issues S_j, rescales O to tile j - 1's max under S_j's MMAs, issues
//     the PV product (both asynchronous); wgmma.wait_group 1 (S_j done),
//     lane 0 of each warp arrives on empty_k[stage of j] (count 8 = the
//     consumer warps); runs tile j's mask and online softmax while the PV
//     product still runs; wait_group 0, lane 0 arrives on empty_v[stage of
//     j - 1]. A last PV product adds the last tile. An arrival follows the
//     completion of every wgmma of that warp that read the buffer, so the
//     producer never overwrites what a wgmma still reads (the WAR hazard).
//   Online softmax as attn_prefill.cu: exp2 with scale * log2(e) folded into
//     one FMA, the running max exact, masks only on tiles that cross a
//     warp's diagonal or window edge.
//   Parities: use u of a stage (u = tile / 3) completes phase u of its
//     barriers; consumers wait full with parity u & 1, the producer waits
//     empty with parity (u & 1) ^ 1 (u = 0: the phase before init counts as
//     completed, so the first pass does not wait).
//   Ping-pong (W2_PINGPONG): the consumers take turns issuing their MMAs
//     (bar.sync 1 + w, 256 before, bar.arrive 2 - w, 256 after; consumer 0
//     first), so one's softmax runs under the other's MMAs. Both take
//     n_tiles + 1 turns an item, and the turns run on across the items of a
//     persistent block (consumer 0 starts the next item under consumer 1's
//     last P V and store); consumer 1 skips its very last hand-over so that
//     every named barrier generation completes.
// Shared memory (1024-aligned): Q and 3 stages of (K, V) tiles, every tile
// K-major in 128-byte swizzle atoms (wgmma's SWIZZLE_128B canonical layout):
// a tile of R rows and C 16-byte chunks (8 elements) is [C / 8 atoms][R
// rows][8 chunks], chunk c of row r stored at position (c % 8) ^ (r % 8) of
// its 128-byte row:
//   Q [BM rows][HEAD_DIM]          row = query row, chunk = 8 dims
//   K stage [BN tokens][HEAD_DIM]  row = token, chunk = 8 dims
//   V stage [HEAD_DIM dims][BN]    row = dim, chunk = 8 tokens (the cache's
//                                  value layout is already token-contiguous)
// Tokens >= ctx_len are zero in K and V; query rows past the sequence are
// zero in Q (computed, never stored).
//   q [T, q_stride] (head h at h * HEAD_DIM), out [T, nq * HEAD_DIM]
// Grid (ceil(max_q_len / TT), n_seqs, nq / GROUP), 384 threads, dynamic smem
// W2_SMEM = 1024 + (128 + 3 * 2 * 128) * HEAD_DIM * 2 bytes (ops_gpu.c
// prefill_wg2_smem: 230400 at head dim 128) plus 96 bytes of static
// mbarriers: one block an SM. Blocks past their sequence's queries exit; the
// grid's x is walked in reverse so the longest (latest) query tiles start
// first.
#include "attn_common.cuh"

#if !KV_FP8 && (HD == 64 || HD == 128) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_OK 1
#else
#define WG_OK 0
#endif

#if WG_OK
#include "wgmma.cuh"
#define WG_BM 128
#define WG_BN 128
#define WG_TT (WG_BM / GROUP)
#define WG_Q_BYTES (WG_BM * HD * 2)
#define WG_K_BYTES (WG_BN * HD * 2)
#define WG_V_BYTES (HD * WG_BN * 2)
#if ACT_KIND == 1
#define WG_AB ".bf16.bf16"
#else
#define WG_AB ".f16.f16"
#endif

// Byte offset of 16-byte chunk c of row r in a swizzled tile of R rows.
KILN_DEV u32 wg_sw(int R, int r, int c) { return (u32)((((c >> 3) * R + r) << 7) + (((c & 7) ^ (r & 7)) << 4)); }

// keep a register's reads and writes on this side of the asm next to it (an
// accumulator or A fragment of an asynchronous MMA)
KILN_DEV void wg_keep(float &x) { asm volatile("" : "+f"(x)::"memory"); }
KILN_DEV void wg_keep(u32 &x) { asm volatile("" : "+r"(x)::"memory"); }
template <int N> KILN_DEV void wg_keep(float (&x)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) wg_keep(x[i]);
}
template <int N> KILN_DEV void wg_keep(u32 (&x)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int k = 0; k < 4; k++) wg_keep(x[i][k]);
}


// D (m64 x N, f32) = / += A B; S = Q K^T: A and B from shared memory.
KILN_DEV void wg_mma_ss_n128(float (&d)[64], u64 da, u64 db, int accumulate) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32" WG_AB " {"
                 WG_R64
                 "}, %64, %65, p, 1, 1, 0, 0; }\n"
                 : WG_D64(d)
                 : "l"(da), "l"(db), "r"(accumulate));
}
KILN_DEV void wg_mma_rs_n128(float (&d)[64], const u32 (&a)[4], u64 db) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32" WG_AB " {"
                 WG_R64
                 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0; }\n"
                 : WG_D64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
KILN_DEV void wg_mma_rs_n64(float (&d)[32], const u32 (&a)[4], u64 db) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32" WG_AB " {"
                 WG_R32
                 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0; }\n"
                 : WG_D32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

KILN_DEV void wg_mma_ss_n64(float (&d)[32], u64 da, u64 db, int accumulate) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32" WG_AB " {"
                 WG_R32
                 "}, %32, %33, p, 1, 1, 0, 0; }\n"
                 : WG_D32(d)
                 : "l"(da), "l"(db), "r"(accumulate));
}

// S = Q K^T of one warpgroup (sq: its first Q row, sk: the K stage) over the
// tile's first NK keys (128, or 64 on a causal tile whose later half every
// row of the block masks)
template <int NK> KILN_DEV void wg_qk(float (&s)[NK / 2], u32 sq, u32 sk) {
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        const u64 da = wg_desc(sq + (u32)((kk >> 2) * WG_BM * 128 + (kk & 3) * 32)),
                  db = wg_desc(sk + (u32)((kk >> 2) * WG_BN * 128 + (kk & 3) * 32));
        if constexpr (NK == WG_BN) wg_mma_ss_n128(s, da, db, kk > 0);
        else wg_mma_ss_n64(s, da, db, kk > 0);
    }
}

// O += P V (sv: the V stage) over the tile's first NK keys
template <int NK> KILN_DEV void wg_pv(float (&o)[HD / 2], const u32 (&p)[WG_BN / 16][4], u32 sv) {
#pragma unroll
    for (int kk = 0; kk < NK / 16; kk++) {
        const u64 db = wg_desc(sv + (u32)((kk >> 2) * HD * 128 + (kk & 3) * 32));
#if HD == 128
        wg_mma_rs_n128(o, p[kk], db);
#else
        wg_mma_rs_n64(o, p[kk], db);
#endif
    }
}

// Mask and online softmax of one tile (keys t0 ..) in place of the running
// m, l: the probabilities into pe (f32, S's layout), alpha = 2^(m_old -
// m_new) for O. S slot 4nb + 2h + e is row h (g, g + 8), key t0 + 8nb + 2tig
// + e; rp: the rows' positions. Runs while the PV product is in flight, so it
// writes no register a wgmma reads (with such a write ptxas serializes every
// wgmma of the kernel, C7513): S is fresh each tile and P is packed later.
template <bool MASK, int NK>
KILN_DEV void wg_row_max(const float (&s)[NK / 2], float (&mx)[2], const int (&hi)[2], const int (&lo)[2]) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        mx[h] = -KILN_INF;
#pragma unroll
        for (int nb = 0; nb < NK / 8; nb++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int k = nb * 8 + e;
                mx[h] = fmaxf(mx[h], MASK && (k > hi[h] || k <= lo[h]) ? -KILN_INF : s[4 * nb + 2 * h + e]);
            }
    }
}
template <bool MASK, int NK>
KILN_DEV void wg_exp(const float (&s)[NK / 2], float (&pe)[NK / 2], float (&rs)[2], const float (&mu)[2],
                     const int (&hi)[2], const int (&lo)[2], float sl2) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        rs[h] = 0.0f;
#pragma unroll
        for (int nb = 0; nb < NK / 8; nb++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int k = nb * 8 + e;
                const float v =
                    MASK && (k > hi[h] || k <= lo[h]) ? 0.0f : fast_exp2(fmaf(s[4 * nb + 2 * h + e], sl2, -mu[h]));
                pe[4 * nb + 2 * h + e] = v;
                rs[h] += v;
            }
    }
}
template <int NK>
KILN_DEV void wg_softmax(const float (&s)[NK / 2], float (&pe)[NK / 2], float (&m)[2], float (&l)[2],
                         float (&alpha)[2], const int (&rp)[2], int t0, int tig, int wlo, int whi, int window,
                         float sl2) {
    // key t0 + 8nb + 2tig + e is visible iff lo < 8nb + e <= hi; masks only
    // where a row of this warp needs one (a warp-uniform branch; the
    // shuffles stay outside it)
    const bool mask = t0 + NK - 1 > wlo || (window > 0 && t0 <= whi - window);
    int hi[2], lo[2];
    float mx[2], mu[2], rs[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        hi[h] = rp[h] - t0 - tig * 2;
        lo[h] = window > 0 ? hi[h] - window : -0x7fffffff;
    }
    if (mask) wg_row_max<true, NK>(s, mx, hi, lo);
    else wg_row_max<false, NK>(s, mx, hi, lo);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        const float mc = mx[h] * sl2, mnew = mc > m[h] ? mc : m[h];
        mu[h] = mnew == -KILN_INF ? 0.0f : mnew; // no key seen yet: p = alpha = 0
        alpha[h] = fast_exp2(m[h] - mu[h]);
        m[h] = mnew;
    }
    if (mask) wg_exp<true, NK>(s, pe, rs, mu, hi, lo, sl2);
    else wg_exp<false, NK>(s, pe, rs, mu, hi, lo, sl2);
#pragma unroll
    for (int h = 0; h < 2; h++) l[h] = l[h] * alpha[h] + rs[h];
}

// The probabilities as PV's A fragments: k-step kk (keys 16kk ..), register
// i = slots 8kk + 2i, 8kk + 2i + 1 (rows g / g + 8, keys 2tig (+8)).
template <int NK> KILN_DEV void wg_pack_p(u32 (&p)[WG_BN / 16][4], const float (&pe)[NK / 2]) {
#pragma unroll
    for (int kk = 0; kk < NK / 16; kk++)
#pragma unroll
        for (int i = 0; i < 4; i++) p[kk][i] = pack2<act_t>(pe[8 * kk + 2 * i], pe[8 * kk + 2 * i + 1]);
}

KILN_DEV void wg_rescale(float (&o)[HD / 2], const float (&alpha)[2]) {
#pragma unroll
    for (int nb = 0; nb < HD / 8; nb++) {
        o[4 * nb] *= alpha[0];
        o[4 * nb + 1] *= alpha[0];
        o[4 * nb + 2] *= alpha[1];
        o[4 * nb + 3] *= alpha[1];
    }
}

// ---- warp specialization: stages, registers, barriers (see the header) ----
#define W2_NS 3                                   /* K+V stages (one 128-token tile each) */
#define W2_STAGE (WG_K_BYTES + WG_V_BYTES)
#define W2_SMEM (1024 + WG_Q_BYTES + W2_NS * W2_STAGE) /* 1024: alignment slack */
#define W2_PRODUCER_REGS 24                       /* 24 * 128 + 2 * 240 * 128 = 168 * 384 */
#define W2_CONSUMER_REGS 240
#ifndef W2_PINGPONG
#define W2_PINGPONG 1 /* consumer warpgroups take turns issuing their MMAs (named barriers 1, 2) */
#endif

// mbarriers: wgmma.cuh (mb_init, mb_arrive, mb_wait)
// the barrier's pending count drops by one once every cp.async this thread
// issued before completes (the count at init includes this arrival)
KILN_DEV void mb_arrive_cp_async(u32 bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// named barriers (0 is __syncthreads): n threads, warp-aligned
KILN_DEV void nb_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
KILN_DEV void nb_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
template <int N> KILN_DEV void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N> KILN_DEV void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }

// The producer warpgroup's copies of KV tile t0 .. t0 + BN - 1 (pt: 0..127).
// K: token pt, every chunk (a warp writes 32 rows of one chunk column: 8
// distinct positions an 8-row group, no bank conflicts). V: token group
// pt % 16, dims pt / 16 + 8i.
KILN_DEV void w2_load_k(u32 sk, const act_t *__restrict__ kc, const int *__restrict__ bt, int nkv, int kvh, int ctx,
                        int t0, int pt) {
    const int tok = t0 + pt;
    const bool ok = tok < ctx;
    const act_t *base = kc;
    if (ok) base = kc + (((size_t)bt[tok / BLOCK_SIZE] * nkv + kvh) * (HD / 8) * BLOCK_SIZE + tok % BLOCK_SIZE) * 8;
#pragma unroll 4 // (full unrolling spills at 24 registers)
    for (int c = 0; c < HD / 8; c++)
        cp_async16_u32(sk + wg_sw(WG_BN, pt, c),
                       ok ? (const void *)(base + (size_t)c * BLOCK_SIZE * 8) : (const void *)kc, ok ? 16 : 0);
}
KILN_DEV void w2_load_v(u32 sv, const act_t *__restrict__ vc, const int *__restrict__ bt, int nkv, int kvh, int ctx,
                        int t0, int pt) {
    const int tg = pt & 15, d0 = pt >> 4, tok = t0 + tg * 8, nv = ctx - tok;
    const int bytes = nv >= 8 ? 16 : nv > 0 ? nv * 2 : 0;
    const act_t *base = vc;
    if (bytes)
        base = vc + ((size_t)bt[tok / BLOCK_SIZE] * nkv + kvh) * HD * BLOCK_SIZE + tok % BLOCK_SIZE +
               (size_t)d0 * BLOCK_SIZE;
#pragma unroll 4 // (full unrolling spills at 24 registers)
    for (int i = 0; i < HD / 8; i++)
        cp_async16_u32(sv + wg_sw(HD, d0 + 8 * i, tg),
                       bytes ? (const void *)(base + (size_t)i * 8 * BLOCK_SIZE) : (const void *)vc, bytes);
}
#endif

// The kernel (see the header). 384 threads: warpgroup 0 copies, warpgroups 1
// and 2 compute query rows 0..63 and 64..127. PERSIST (kiln_attn_prefill_wg2p):
// gridDim.x blocks (one an SM) walk the work items (query tile, sequence,
// head group) of the grid kiln_attn_prefill_wg2 would launch, gx x n_seqs x
// nq / GROUP, item b, b + gridDim.x, .. in the order of the longest query
// tiles first (item i: tile gx - 1 - i / (n_seqs nz) from the end); the
// stages, their barriers' phases and the consumers' turns carry from one
// item to the next, so the producer copies the next item's first K / V tiles
// while the consumers finish the current one, and each consumer warpgroup
// loads its next Q rows once its last Q K^T has completed (under the last
// P V product and the output store). Otherwise one item: the block's own.
#if WG_OK
// the first non-empty item at or after it (stride gridDim.x), -1 if none:
// tile tok0, sequence s, head group z
KILN_DEV int w2_item(int it, int total, int per_x, int nz, int gx, const int *__restrict__ qstart, int &tok0, int &s,
                     int &z) {
    for (; it < total; it += gridDim.x) {
        const int xr = it / per_x, r = it - xr * per_x;
        s = r / nz, z = r - s * nz, tok0 = (gx - 1 - xr) * WG_TT;
        if (tok0 < qstart[s + 1] - qstart[s]) return it;
    }
    return -1;
}
// this consumer warpgroup's Q rows 64cw .. 64cw + 63 of the item -> shared
// memory: row 64cw + ct % 64, chunks ct / 64 + 2i (rows past the sequence:
// zero); committed, not waited for
KILN_DEV void w2_load_q(u32 sq, const act_t *__restrict__ q, i64 q_stride, int q0, int q_len, int qh0, int tok0, int cw,
                        int ct) {
    const int row = 64 * cw + (ct & 63), c0 = ct >> 6, head = qh0 + row / WG_TT, tok = tok0 + row % WG_TT;
    const bool ok = tok < q_len;
    const act_t *src = q + (size_t)(q0 + (ok ? tok : 0)) * q_stride + (size_t)head * HD;
#pragma unroll
    for (int i = 0; i < HD / 16; i++)
        cp_async16_u32(sq + wg_sw(WG_BM, row, c0 + 2 * i), ok ? (const void *)(src + (c0 + 2 * i) * 8) : (const void *)q,
                       ok ? 16 : 0);
    cp_async_commit();
}

// an item's sequence geometry: its query rows, context, the position of
// query token 0 and the KV tiles its query tile tok0 reads
struct w2_geo {
    int q0, q_len, ctx, pos0, kt_first, kt_end, n_tiles;
};
KILN_DEV w2_geo w2_geometry(const int *__restrict__ qstart, const int *__restrict__ ctx_len, int s, int tok0, int window) {
    w2_geo e;
    e.q0 = qstart[s], e.q_len = qstart[s + 1] - e.q0, e.ctx = ctx_len[s], e.pos0 = e.ctx - e.q_len;
    prefill_kv_tiles(e.pos0, tok0, e.q_len, WG_TT, WG_BN, window, e.kt_first, e.kt_end);
    e.n_tiles = e.kt_end - e.kt_first;
    return e;
}
#endif

template <bool PERSIST>
KILN_DEV void w2_main(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride, const kv_t *__restrict__ kc,
                      const kv_t *__restrict__ vc, const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                      const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv, float scale,
                      int window, int gx) {
#if WG_OK
    pdl_wait();
    pdl_launch();
    extern __shared__ float4 smem4[];
    // mbarriers: full_k[s], full_v[s] (128 producer arrivals as its copies
    // land), empty_k[s], empty_v[s] (8 consumer warps, their MMAs reading
    // stage s's K / V done)
    __shared__ __align__(8) u64 bars[4 * W2_NS];
    const u32 sq = (smem_addr(smem4) + 1023u) & ~1023u, st0 = sq + WG_Q_BYTES, bar0 = smem_addr(bars);
#define W2_FULL_K(s) (bar0 + 8u * (u32)(s))
#define W2_FULL_V(s) (bar0 + 8u * (u32)(W2_NS + (s)))
#define W2_EMPTY_K(s) (bar0 + 8u * (u32)(2 * W2_NS + (s)))
#define W2_EMPTY_V(s) (bar0 + 8u * (u32)(3 * W2_NS + (s)))
#define W2_SK(s) (st0 + (u32)(s) * W2_STAGE)
#define W2_SV(s) (st0 + (u32)(s) * W2_STAGE + WG_K_BYTES)
    const int tid = threadIdx.x, wg = tid >> 7;
    const int ratio = nq / nkv;
    // the work items (PERSIST) or the block's own
    const int nz = nq / GROUP, per_x = n_seqs * nz, total = PERSIST ? gx * per_x : 1;
    int it = 0, tok0, s, z;
    if (PERSIST) {
        it = w2_item((int)blockIdx.x, total, per_x, nz, gx, qstart, tok0, s, z);
        if (it < 0) return; // block-uniform, before any barrier
    } else {
        s = blockIdx.y, z = blockIdx.z;
        tok0 = (int)(gridDim.x - 1 - blockIdx.x) * WG_TT;
        if (tok0 >= qstart[s + 1] - qstart[s]) return; // block-uniform, before any barrier
    }
    if (tid == 0) {
#pragma unroll
        for (int i = 0; i < W2_NS; i++) {
            mb_init(W2_FULL_K(i), 128);
            mb_init(W2_FULL_V(i), 128);
            mb_init(W2_EMPTY_K(i), 8);
            mb_init(W2_EMPTY_V(i), 8);
        }
    }
    __syncthreads(); // the barriers' init is visible to every thread

    if (wg == 0) {
        // ---- producer: K_i and V_i into stage i % NS once the consumers
        // freed that stage's K / V; in the order K_0, K_1, V_0, K_2, V_1, ..
        // (consumers read K_j with V_{j-1})
        setmaxnreg_dec<W2_PRODUCER_REGS>();
        int st = 0, sp = 0;   // stages of K_i and V_{i-1}
        u32 ph = 0, php = 0;  // parities of their current use
#pragma unroll 1
        for (;;) {
            const w2_geo e = w2_geometry(qstart, ctx_len, s, tok0, window);
            const int kvh = z * GROUP / ratio, ctx = e.ctx, kt_first = e.kt_first, n_tiles = e.n_tiles;
            const int *bt = block_tables + (size_t)s * max_blocks;
#pragma unroll 1
            for (int i = 0; i <= n_tiles; i++) {
                if (i < n_tiles) {
                    mb_wait(W2_EMPTY_K(st), ph ^ 1u); // first pass: the (virtual) phase before init, done
                    w2_load_k(W2_SK(st), kc, bt, nkv, kvh, ctx, (kt_first + i) * WG_BN, tid);
                    mb_arrive_cp_async(W2_FULL_K(st));
                    if (++st == W2_NS) st = 0, ph ^= 1u;
                }
                if (i > 0) {
                    mb_wait(W2_EMPTY_V(sp), php ^ 1u);
                    w2_load_v(W2_SV(sp), vc, bt, nkv, kvh, ctx, (kt_first + i - 1) * WG_BN, tid);
                    mb_arrive_cp_async(W2_FULL_V(sp));
                    if (++sp == W2_NS) sp = 0, php ^= 1u;
                }
            }
            if (!PERSIST) break;
            it = w2_item(it + (int)gridDim.x, total, per_x, nz, gx, qstart, tok0, s, z);
            if (it < 0) break;
        }
        asm volatile("cp.async.wait_all;" ::: "memory"); // leave nothing in flight behind
    } else {
        // ---- consumers
        setmaxnreg_inc<W2_CONSUMER_REGS>();
        const int cw = wg - 1, ct = tid - 128 * wg; // consumer warpgroup 0 / 1, thread in it
        const int warp = ct >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
        const float sl2 = scale * LOG2E;
        const u32 sqw = sq + (u32)(cw * 64 * 128); // this warpgroup's Q rows (8 row groups of 1024 bytes)
        // K and V stages and their parities: tile 0 of the first item in stage 0
        int ks = 0, vs = 0;
        u32 kph = 0, vph = 0;
        w2_load_q(sq, q, q_stride, qstart[s], qstart[s + 1] - qstart[s], z * GROUP, tok0, cw, ct);
#if W2_PINGPONG
        if (cw == 1) nb_arrive(1, 256); // consumer 0's first turn (see W2_PASS)
#endif
#pragma unroll 1
        for (;;) {
            const w2_geo e = w2_geometry(qstart, ctx_len, s, tok0, window);
            const int qh0 = z * GROUP, q0 = e.q0, q_len = e.q_len, pos0 = e.pos0;
            const int kt_first = e.kt_first, kt_end = e.kt_end, n_tiles = e.n_tiles;
            cp_async_wait<0>(); // this thread's Q rows (w2_load_q)
            wg_fence_proxy();   // this thread's Q writes -> the warpgroup's wgmma reads
            nb_sync(3 + cw, 128);
            // this thread's rows 64cw + 16warp + 8h + g; rows past the sequence
            // take its last position (computed, never stored)
            int rp[2], wlo, whi;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = 64 * cw + warp * 16 + h * 8 + g;
                rp[h] = pos0 + min(tok0 + row % WG_TT, q_len - 1);
            }
            wlo = min(rp[0], rp[1]);
            whi = max(rp[0], rp[1]);
#pragma unroll
            for (int off = 4; off < 32; off <<= 1) { // lanes of one quad share rows
                wlo = min(wlo, __shfl_xor_sync(0xffffffffu, wlo, off));
                whi = max(whi, __shfl_xor_sync(0xffffffffu, whi, off));
            }

            float o[HD / 2], m[2] = {-KILN_INF, -KILN_INF}, l[2] = {0.0f, 0.0f}, alpha[2];
            u32 p[WG_BN / 16][4];
#pragma unroll
            for (int i = 0; i < HD / 2; i++) o[i] = 0.0f;
#if W2_PINGPONG
            // turns: warpgroup cw issues its MMAs after bar.sync 1 + cw and then
            // hands the turn over with bar.arrive 2 - cw (256 = both warpgroups).
            // Consumer 0 goes first; both take n_tiles + 1 turns an item. The
            // turns run on from one item to the next (consumer 1 gave consumer 0
            // its first turn before the first item): consumer 1's last hand-over
            // of an item is consumer 0's first turn of the next, so consumer 0
            // issues the next item's first Q K^T while consumer 1 still stores
            // (the tensor cores do not wait for both epilogues). After the last
            // item consumer 1 skips it, so every barrier generation completes.
#define W2_TURN() nb_sync(1 + cw, 256)
#define W2_PASS(last) \
    if (!(last) || cw == 0 || nit >= 0) nb_arrive(2 - cw, 256)
#else
#define W2_TURN()
#define W2_PASS(last)
#endif

            // a causal item whose rows all precede its last KV tile's later 64 keys takes that tile's S and P V
            // over its first 64 keys only (NK 64; separate code, so every wgmma sequence writes whole fragments)
            const bool half = pos0 + min(tok0 + WG_TT, q_len) - 1 < (kt_end - 1) * WG_BN + WG_BN / 2;
            int nit = -1, ntok0 = 0, ns = 0, nzz = 0; // the next item (PERSIST; found before the last P V)
            // tile 0 over its first NKV keys: S, softmax, P (alpha = 0 rescales
            // the zero O at iteration 1); the barrier arrival follows this warp's
            // reads of K_0
#define W2_TILE0(NKV)                                                                                  \
    {                                                                                                  \
        constexpr int NK = (NKV);                                                                      \
        mb_wait(W2_FULL_K(ks), kph);                                                                           \
        wg_fence_proxy();                                                                                      \
        float sc[NK / 2], pe[NK / 2];                                                                          \
        W2_TURN();                                                                                             \
        wg_fence();                                                                                            \
        wg_qk<NK>(sc, sqw, W2_SK(ks));                                                                         \
        wg_commit();                                                                                           \
        W2_PASS(false);                                                                                        \
        wg_wait<0>();                                                                                          \
        wg_keep(sc);                                                                                           \
        if (lane == 0) mb_arrive(W2_EMPTY_K(ks));                                                              \
        if (++ks == W2_NS) ks = 0, kph ^= 1u;                                                                  \
        wg_softmax<NK>(sc, pe, m, l, alpha, rp, kt_first * WG_BN, tig, wlo, whi, window, sl2);                 \
        wg_pack_p<NK>(p, pe);                                                                                  \
    }
            // tile j >= 1 over its first NKV keys: K_j and V_{j-1} landed
            // (fence.proxy.async: cp.async writes -> wgmma reads), S_j issued,
            // O rescaled to tile j - 1's max under it, then O += P_{j-1}
            // V_{j-1} (always whole); wait_group 1: S_j done, K_j's stage
            // freed; tile j's softmax under the P V product; wait_group 0: V_{j-1}'s
            // stage freed (S is fresh each tile: see wg_softmax)
#define W2_TILE(NKV)                                                                                   \
    {                                                                                                  \
        constexpr int NK = (NKV);                                                                      \
        mb_wait(W2_FULL_K(ks), kph);                                                                           \
        mb_wait(W2_FULL_V(vs), vph);                                                                           \
        wg_fence_proxy();                                                                                      \
        float sc[NK / 2], pe[NK / 2];                                                                          \
        W2_TURN();                                                                                             \
        wg_fence();                                                                                            \
        wg_qk<NK>(sc, sqw, W2_SK(ks));                                                                         \
        wg_commit();                                                                                           \
        wg_rescale(o, alpha);                                                                                  \
        wg_keep(o);                                                                                            \
        wg_fence();                                                                                            \
        wg_pv<WG_BN>(o, p, W2_SV(vs));                                                                         \
        wg_commit();                                                                                           \
        W2_PASS(false);                                                                                        \
        wg_wait<1>();                                                                                          \
        wg_keep(sc);                                                                                           \
        if (lane == 0) mb_arrive(W2_EMPTY_K(ks));                                                              \
        wg_softmax<NK>(sc, pe, m, l, alpha, rp, (kt_first + j) * WG_BN, tig, wlo, whi, window, sl2);           \
        wg_wait<0>();                                                                                          \
        wg_keep(o);                                                                                            \
        wg_keep(p);                                                                                            \
        if (lane == 0) mb_arrive(W2_EMPTY_V(vs));                                                              \
        wg_pack_p<NK>(p, pe);                                                                                  \
        if (++ks == W2_NS) ks = 0, kph ^= 1u;                                                                  \
        if (++vs == W2_NS) vs = 0, vph ^= 1u;                                                                  \
    }
            // the last tile's O += P V over its first NKV keys
#define W2_LAST_PV(NKV)                                                                                \
    {                                                                                                  \
        constexpr int NK = (NKV);                                                                      \
        mb_wait(W2_FULL_V(vs), vph);                                                                           \
        wg_fence_proxy();                                                                                      \
        W2_TURN();                                                                                             \
        wg_rescale(o, alpha);                                                                                  \
        wg_keep(o);                                                                                            \
        wg_fence();                                                                                            \
        wg_pv<NK>(o, p, W2_SV(vs));                                                                            \
        wg_commit();                                                                                           \
        W2_PASS(true);                                                                                         \
        wg_wait<0>();                                                                                          \
        wg_keep(o);                                                                                            \
    }
            if (half && n_tiles == 1) W2_TILE0(WG_BN / 2)
            else W2_TILE0(WG_BN)
#pragma unroll 1
            for (int j = 1; j < n_tiles; j++) {
                if (half && j == n_tiles - 1) W2_TILE(WG_BN / 2)
                else W2_TILE(WG_BN)
            }
            // every Q K^T of the item has completed: the next item's Q rows
            // load under the last P V product and the store
            if (PERSIST) {
                nit = w2_item(it + (int)gridDim.x, total, per_x, nz, gx, qstart, ntok0, ns, nzz);
                if (nit >= 0) w2_load_q(sq, q, q_stride, qstart[ns], qstart[ns + 1] - qstart[ns], nzz * GROUP, ntok0, cw, ct);
            }
            if (half) W2_LAST_PV(WG_BN / 2)
            else W2_LAST_PV(WG_BN)
#undef W2_TILE0
#undef W2_TILE
#undef W2_LAST_PV
            if (PERSIST) { // the producer reuses the stage
                if (lane == 0) mb_arrive(W2_EMPTY_V(vs));
                if (++vs == W2_NS) vs = 0, vph ^= 1u;
            }
#undef W2_TURN
#undef W2_PASS

#pragma unroll
            for (int h = 0; h < 2; h++) {
                float sum = l[h];
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                const int row = 64 * cw + warp * 16 + h * 8 + g;
                const int head = qh0 + row / WG_TT, tok = tok0 + row % WG_TT;
                float inv = fast_rcp(sum); // 1 / sum (approximate reciprocal, as attn_prefill.cu)
                if (!(sum > 0.0f)) inv = 0.0f;
                act_t *orow = out + (size_t)(q0 + (tok < q_len ? tok : 0)) * nq * HD + (size_t)head * HD;
                // 16-byte stores: the quad's four lanes transpose their packed pairs of 4 blocks of 8
                // columns (two rounds of shuffles, lanes tig ^ 1 then tig ^ 2: slot j of lane tig ends as
                // lane j's pair of block nb + tig), so lane tig stores block nb + tig whole and the quad
                // 64 bytes of the row (the shuffles outside the row's branch: every lane takes part)
#pragma unroll
                for (int nb = 0; nb < HD / 8; nb += 4) {
                    u32 v[4];
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        v[j] = pack2<act_t>(o[4 * (nb + j) + 2 * h] * inv, o[4 * (nb + j) + 2 * h + 1] * inv);
#pragma unroll
                    for (int b = 1; b <= 2; b <<= 1)
#pragma unroll
                        for (int j0 = 0; j0 < 4; j0++) {
                            if (j0 & b) continue; // pairs (j0, j0 ^ b): keep the slot whose bit b is tig's
                            const bool hi = tig & b;
                            const u32 r = __shfl_xor_sync(0xffffffffu, hi ? v[j0] : v[j0 ^ b], b);
                            if (hi) v[j0] = r;
                            else v[j0 ^ b] = r;
                        }
                    if (tok < q_len) *(uint4 *)(orow + (nb + tig) * 8) = make_uint4(v[0], v[1], v[2], v[3]);
                }
            }
            if (nit < 0) break;
            it = nit, tok0 = ntok0, s = ns, z = nzz;
        }
    }
#undef W2_FULL_K
#undef W2_FULL_V
#undef W2_EMPTY_K
#undef W2_EMPTY_V
#undef W2_SK
#undef W2_SV
#else
    asm volatile("trap;");
#endif
}

extern "C" __global__ void __launch_bounds__(384, 1)
kiln_attn_prefill_wg2(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride, const kv_t *__restrict__ kc,
                      const kv_t *__restrict__ vc, const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                      const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv, float scale,
                      int window, const float *__restrict__ kv_scales) {
    w2_main<false>(out, q, q_stride, kc, vc, qstart, ctx_len, block_tables, max_blocks, n_seqs, nq, nkv, scale, window, 0);
}

// The persistent form (above): gridDim.x blocks over the gx x n_seqs x nq /
// GROUP items kiln_attn_prefill_wg2's grid would be (gx = ceil(max_q_len / TT))
extern "C" __global__ void __launch_bounds__(384, 1)
kiln_attn_prefill_wg2p(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride, const kv_t *__restrict__ kc,
                       const kv_t *__restrict__ vc, const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                       const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv, float scale,
                       int window, const float *__restrict__ kv_scales, int gx) {
    w2_main<true>(out, q, q_stride, kc, vc, qstart, ctx_len, block_tables, max_blocks, n_seqs, nq, nkv, scale, window, gx);
}
