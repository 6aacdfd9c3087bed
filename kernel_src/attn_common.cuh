// attn_common.cuh -- tensor-core building blocks shared by the paged
// attention kernels: mma.sync m16n8k16 (bf16/fp16 in, fp32 accumulate),
// ldmatrix, and cp.async loaders of 16-token K and V tiles out of the paged
// cache into shared memory.
//
// Specialization defines: ACT (bf16 | fp16: activations), KV (the cache: ACT,
// fp8_e4m3 or fp8_e5m2; ACT when absent), HEAD_DIM (multiple of 8; of 16 for
// FP8), BLOCK_SIZE (KV block size, multiple of 8; of 16 for FP8), GROUP
// (query heads per KV head processed together).
//
// 16-bit cache layout (x = 8 elements of 16 bytes):
//   key   [num_blocks, nkv, HEAD_DIM / 8, BLOCK_SIZE, 8]
//   value [num_blocks, nkv, HEAD_DIM, BLOCK_SIZE]
// Shared-memory tiles of 16 tokens:
//   K tile: [HD16 / 8 chunk columns][16 tokens] of 16-byte chunks (8 dims of
//           one token), i.e. exactly an ldmatrix row per chunk; dims beyond
//           HEAD_DIM up to HD16 (next multiple of 16) are zero.
//   V tile: [HEAD_DIM rows][2 chunks] (chunk = 8 tokens of one dim), the two
//           chunks of a row swapped when (row / 4) is odd so the eight rows an
//           ldmatrix reads hit distinct banks.
//
// FP8 caches (x = 16 elements of 16 bytes; stored = fp8(value / scale)):
//   key   [num_blocks, nkv, HEAD_DIM / 16, BLOCK_SIZE, 16]
//   value [num_blocks, nkv, HEAD_DIM, BLOCK_SIZE]
// The tiles keep the cache's bytes (half the shared memory of 16-bit ones):
//   K tile: [HEAD_DIM / 16 chunk columns][16 tokens] chunks (16 dims of one
//           token); token j sits at position j ^ ((j & 8) >> 2) so that the
//           tokens a fragment load reads fall in distinct banks.
//   V tile: [HEAD_DIM rows] of one chunk (16 tokens of one dim).
// The MMAs run in fp16 on the raw FP8 values (exact in fp16), read with one
// 32-bit shared load per lane and fragment: lane (g, t) takes bytes 4t..4t+3
// of a chunk, so the k index of each m16n8k16 step is permuted -- dims (keys)
// or tokens (values) 4t, 4t+1 play k = 2t, 2t+1 and 4t+2, 4t+3 play k = 2t+8,
// 2t+9 -- and Q and P follow the same permutation: Q columns are loaded to
// match, and S's n index maps token 4t + 2 * (n-tile) + {0, 1} to the
// accumulator slots P is packed from. The K scale multiplies the fp32 scores,
// the V scale the output; Q is rounded to fp16 (exact for bf16 values within
// fp16's range, clamped at +-65504). FP8 -> fp16: E5M2 is the top byte of an
// fp16 (a byte permute); E4M3 uses cvt.rn.f16x2.e4m3x2 on sm_89+, and on
// sm_80 a bit shift that yields value * 2^-8 (folded into the scales; a NaN
// code reads as +-480 there).
#pragma once
#include "kiln_common.cuh"

typedef ACT act_t;
#ifndef KV
#define KV ACT
#endif
typedef KV kv_t;

#define KILN_CAT_(a, b) a##b
#define KILN_CAT(a, b) KILN_CAT_(a, b)
#define KV_KIND_bf16 1
#define KV_KIND_fp16 2
#define KV_KIND_fp8_e5m2 3
#define KV_KIND_fp8_e4m3 4
#define KV_KIND KILN_CAT(KV_KIND_, KV)
#define ACT_KIND KILN_CAT(KV_KIND_, ACT)
#define KV_FP8 (KV_KIND >= 3)
#if !KV_FP8 && KV_KIND != ACT_KIND
#error "a 16-bit KV cache must be in the activation dtype (KV == ACT)"
#endif

#define HD HEAD_DIM
#define HD16 ((HEAD_DIM + 15) / 16 * 16)
#define LOG2E 1.4426950408889634f

// The key tiles [kt_first, kt_end) of bn tokens that a prefill block of
// query tokens tok0 .. tok0 + min(tt, q_len - tok0) - 1 of its sequence
// attends to (pos0: the position of query token 0): causal, and with
// window > 0 nothing at or before pos - window. Every prefill kernel's range.
__device__ __forceinline__ void prefill_kv_tiles(int pos0, int tok0, int q_len, int tt, int bn, int window,
                                                 int &kt_first, int &kt_end) {
    const int pos_lo = pos0 + tok0, pos_hi = pos0 + min(tt, q_len - tok0) - 1 + tok0;
    const int kv_lo = window > 0 ? max(0, pos_lo - window + 1) : 0;
    kt_first = kv_lo / bn, kt_end = pos_hi / bn + 1;
}

#if (HEAD_DIM % 8) != 0
#error "HEAD_DIM must be a multiple of 8"
#endif
#if (BLOCK_SIZE % 8) != 0
#error "BLOCK_SIZE must be a multiple of 8"
#endif

#if KV_FP8
#if (HEAD_DIM % 16) != 0 || (BLOCK_SIZE % 16) != 0
#error "FP8 KV caches need HEAD_DIM and BLOCK_SIZE multiples of 16"
#endif
#define K_TILE_BYTES (HD * 16)         // 16 tokens x HD bytes
#define V_TILE_BYTES (HD * 16)
typedef fp16 mma_t;                    // MMAs on the raw FP8 values
#else
#define KCH (HD16 / 8)                 // key chunk columns in a tile
#define K_TILE_BYTES (KCH * 16 * 16)   // 16 tokens
#define V_TILE_BYTES (HD * 2 * 16)     // 16 tokens
typedef act_t mma_t;
#endif
#define TILE_BYTES (K_TILE_BYTES + V_TILE_BYTES)

KILN_DEV void mma16816(float c[4], const u32 a[4], u32 b0, u32 b1) { mma_op<mma_t>::run(c, a, b0, b1); }


#if !KV_FP8
// Byte offset of V chunk (row d, half h) inside a V tile.
KILN_DEV int v_chunk_off(int d, int h) { return (d * 2 + (h ^ ((d >> 2) & 1))) * 16; }

// Issue this lane's cp.async copies of a 16-token K+V tile whose first token
// is `tok0` (n_lanes threads share the tile; n_lanes % 16 == 0). Tokens >=
// n_valid (and dims >= HEAD_DIM) are zero-filled. Each lane always handles
// the same token of K (lane % 16) and the same half of V (lane % 2), so it
// looks its block up once per tile.
KILN_DEV void load_tile(char *smem_tile, const act_t *__restrict__ kc, const act_t *__restrict__ vc,
                        const int *__restrict__ bt, int nkv, int kvh, int tok0, int n_valid, int lane, int n_lanes) {
    char *sk = smem_tile, *sv = smem_tile + K_TILE_BYTES;
    {
        const int j = lane & 15;
        const bool ok = j < n_valid;
        const act_t *base = kc;
        if (ok) {
            int tok = tok0 + j, b = bt[tok / BLOCK_SIZE], o = tok % BLOCK_SIZE;
            base = kc + (((size_t)b * nkv + kvh) * (HD / 8) * BLOCK_SIZE + o) * 8;
        }
        for (int col = lane >> 4; col < KCH; col += n_lanes >> 4) {
            bool in = ok && col < HD / 8;
            cp_async16(sk + (col * 16 + j) * 16, in ? base + (size_t)col * BLOCK_SIZE * 8 : kc, in ? 16 : 0);
        }
    }
    {
        const int h = lane & 1;
        const int nv = n_valid - h * 8; // valid tokens in this lane's chunks
        const act_t *base = vc;
        int bytes = 0;
        if (nv > 0) {
            int tok = tok0 + h * 8, b = bt[tok / BLOCK_SIZE], o = tok % BLOCK_SIZE;
            base = vc + ((size_t)b * nkv + kvh) * HD * BLOCK_SIZE + o;
            bytes = nv >= 8 ? 16 : nv * 2;
        }
        for (int d = lane >> 1; d < HD; d += n_lanes >> 1)
            cp_async16(sv + v_chunk_off(d, h), bytes ? base + (size_t)d * BLOCK_SIZE : vc, bytes);
    }
}

// Chunk-strided variant of load_tile (chunk c = lane + k * n_lanes), used by
// the decode kernel: issue cp.async for a 16-token K+V tile
// whose first token is `tok0`; tokens >= n_valid (and dims >= HEAD_DIM) are
// zero-filled. Chunks: K: KCH * 16, then V: HD * 2.
KILN_DEV void load_tile_chunks(char *smem_tile, const act_t *__restrict__ kc, const act_t *__restrict__ vc,
                        const int *__restrict__ bt, int nkv, int kvh, int tok0, int n_valid, int lane, int n_lanes) {
    char *sk = smem_tile, *sv = smem_tile + K_TILE_BYTES;
    for (int c = lane; c < KCH * 16; c += n_lanes) {
        int col = c >> 4, j = c & 15;
        int tok = tok0 + j;
        bool ok = j < n_valid && col < HD / 8;
        const act_t *src = kc;
        if (ok) {
            int b = bt[tok / BLOCK_SIZE], o = tok % BLOCK_SIZE;
            src = kc + ((((size_t)b * nkv + kvh) * (HD / 8) + col) * BLOCK_SIZE + o) * 8;
        }
        cp_async16(sk + c * 16, src, ok ? 16 : 0);
    }
    for (int c = lane; c < HD * 2; c += n_lanes) {
        int d = c >> 1, h = c & 1;
        int tok = tok0 + h * 8;
        int nv = n_valid - h * 8; // valid tokens in this chunk
        const act_t *src = vc;
        int bytes = 0;
        if (nv > 0) {
            int b = bt[tok / BLOCK_SIZE], o = tok % BLOCK_SIZE;
            src = vc + (((size_t)b * nkv + kvh) * HD + d) * BLOCK_SIZE + o;
            bytes = nv >= 8 ? 16 : nv * 2;
        }
        cp_async16(sv + v_chunk_off(d, h), src, bytes);
    }
}

// The decode kernels' tile loads (one warp a tile): a whole tile (16 tokens inside the context) of a
// head dim that is a multiple of 16 and a block size that is a multiple of 16 lies in one cache block
// (tiles start at multiples of 16), so its K part is HD / 8 runs of 16 chunks (one 4 KiB run at block
// size 16) and its V part HD runs of two: one block-table read and 16 cp.async a lane at fixed strides
// (load_tile_chunks' per-chunk lookups and address arithmetic made the issue of a tile several times
// its multiply); other tiles through load_tile_chunks. Same bytes, same places.
KILN_DEV void load_tile_dec(char *smem_tile, const act_t *__restrict__ kc, const act_t *__restrict__ vc,
                            const int *__restrict__ bt, int nkv, int kvh, int tok0, int n_valid, int lane) {
#if HD % 16 == 0 && BLOCK_SIZE % 16 == 0
    if (n_valid >= 16) {
        const int b = bt[tok0 / BLOCK_SIZE], o0 = tok0 % BLOCK_SIZE;
        const size_t bh = (size_t)b * nkv + kvh;
        // K chunk c = lane + 32 i: col c >> 4 = (lane >> 4) + 2 i, token lane & 15
        const act_t *ks = kc + (bh * (HD / 8) * BLOCK_SIZE + o0 + (lane >> 4) * BLOCK_SIZE + (lane & 15)) * 8;
        const u32 kd = smem_addr(smem_tile) + lane * 16;
#pragma unroll
        for (int i = 0; i < HD / 16; i++) cp_async16_u32(kd + i * 512, ks + (size_t)i * 2 * BLOCK_SIZE * 8, 16);
        // V chunk c = lane + 32 i: row d = (lane >> 1) + 16 i, half h = lane & 1 (v_chunk_off's swizzle bit
        // (d >> 2) & 1 is (lane >> 3) & 1 for every i)
        const int h = lane & 1;
        const act_t *vs = vc + bh * HD * BLOCK_SIZE + o0 + (size_t)(lane >> 1) * BLOCK_SIZE + h * 8;
        const u32 vd = smem_addr(smem_tile) + K_TILE_BYTES + ((lane >> 1) * 2 + (h ^ ((lane >> 3) & 1))) * 16;
#pragma unroll
        for (int i = 0; i < HD / 16; i++) cp_async16_u32(vd + i * 512, vs + (size_t)i * 16 * BLOCK_SIZE, 16);
        return;
    }
#endif
    load_tile_chunks(smem_tile, kc, vc, bt, nkv, kvh, tok0, n_valid, lane, 32);
}

// S[16 rows][16 tokens] += Q (A fragments qa[HD16/16][4]) x K tile^T.
// s[0..3]: tokens 0-7, s[4..7]: tokens 8-15 (C fragment layout).
KILN_DEV void qk_tile(float s[8], const u32 (*qa)[4], u32 sk_addr, int lane) {
    // ldmatrix x4: m0 = (col 2kk, tok 0-7), m1 = (col 2kk+1, tok 0-7),
    //              m2 = (col 2kk, tok 8-15), m3 = (col 2kk+1, tok 8-15)
    int mi = lane >> 3, r = lane & 7;
    u32 base = sk_addr + (((mi & 1) * 16 + (mi >> 1) * 8 + r) * 16);
#pragma unroll
    for (int kk = 0; kk < HD16 / 16; kk++) {
        u32 b0, b1, b2, b3;
        ldsm_x4(b0, b1, b2, b3, base + kk * 2 * 16 * 16);
        mma16816(s, qa[kk], b0, b1);
        mma16816(s + 4, qa[kk], b2, b3);
    }
}

// O[16 rows][HD] += P (A fragment pa, 16 tokens) x V tile.
KILN_DEV void pv_tile(float (*o)[4], const u32 pa[4], u32 sv_addr, int lane) {
    // ldmatrix x4 for n-tiles nt, nt+1: m0 = (dims 8nt.., tok 0-7), m1 = (dims 8nt.., tok 8-15),
    //                                   m2 = (dims 8nt+8.., tok 0-7), m3 = (dims 8nt+8.., tok 8-15)
    int mi = lane >> 3, r = lane & 7;
#pragma unroll
    for (int nt = 0; nt + 1 < HD / 8; nt += 2) {
        int d = nt * 8 + (mi >> 1) * 8 + r;
        u32 b0, b1, b2, b3;
        ldsm_x4(b0, b1, b2, b3, sv_addr + v_chunk_off(d, mi & 1));
        mma16816(o[nt], pa, b0, b1);
        mma16816(o[nt + 1], pa, b2, b3);
    }
    if ((HD / 8) & 1) {
        const int nt = HD / 8 - 1;
        int d = nt * 8 + r;
        u32 b0, b1;
        ldsm_x2(b0, b1, sv_addr + v_chunk_off(d, (mi & 1)));
        mma16816(o[nt], pa, b0, b1);
    }
}

// Column of Q fragment register i (0..3) in k-step kk for lane column tig.
KILN_DEV int q_col(int kk, int tig, int i) { return kk * 16 + tig * 2 + (i >> 1) * 8; }
// Token (within the 16-token tile) of score slot k of lane column tig.
KILN_DEV int sc_tok(int k, int tig) { return (k >> 2) * 8 + tig * 2 + (k & 1); }
// Two Q elements as an MMA operand.
KILN_DEV u32 load_q2(const act_t *p) { return *(const u32 *)p; }
// Score (K) and output (V) scales: none for 16-bit caches.
KILN_DEV float kv_k_scale(const float *s, int nkv, int kvh) { return 1.0f; }
KILN_DEV float kv_v_scale(const float *s, int nkv, int kvh) { return 1.0f; }

#else // KV_FP8 ------------------------------------------------------------------

KILN_DEV int q_col(int kk, int tig, int i) { return kk * 16 + tig * 4 + (i >> 1) * 2; }
KILN_DEV int sc_tok(int k, int tig) { return tig * 4 + (k >> 2) * 2 + (k & 1); }
KILN_DEV u32 load_q2(const act_t *p) {
    float a, b;
    unpack2<act_t>(*(const u32 *)p, a, b);
    a = fminf(fmaxf(a, -65504.0f), 65504.0f);
    b = fminf(fmaxf(b, -65504.0f), 65504.0f);
    return pack2<fp16>(a, b);
}

// E4M3 values come out of fp8x4_to_f16 times KV_FOLD^-1.
#if KV_KIND == 4 && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 890)
#define KV_FOLD 256.0f
#else
#define KV_FOLD 1.0f
#endif
KILN_DEV float kv_k_scale(const float *s, int nkv, int kvh) { return (s ? s[kvh] : 1.0f) * KV_FOLD; }
KILN_DEV float kv_v_scale(const float *s, int nkv, int kvh) { return (s ? s[nkv + kvh] : 1.0f) * KV_FOLD; }

// Four FP8 values (byte i = element i) -> f16x2 {0, 1} and {2, 3}.
KILN_DEV void fp8x4_to_f16(u32 w, u32 &lo, u32 &hi) {
#if KV_KIND == 3 // E5M2: the high byte of an fp16
    lo = prmt(w, 0u, 0x1404u);
    hi = prmt(w, 0u, 0x3424u);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    lo = cvt_f16x2_e4m3x2((unsigned short)(w & 0xffffu));
    hi = cvt_f16x2_e4m3x2((unsigned short)(w >> 16));
#else // E4M3 as fp16 bits: sign | (exp, mantissa) >> 1 of the high byte = value * 2^-8
    u32 m = w & 0x7f7f7f7fu;
    lo = (prmt(w, 0u, 0x1404u) & 0x80008000u) | (prmt(m, 0u, 0x1404u) >> 1);
    hi = (prmt(w, 0u, 0x3424u) & 0x80008000u) | (prmt(m, 0u, 0x3424u) >> 1);
#endif
}


// Position (in chunks) of token j's chunk within a K tile column.
KILN_DEV int k_pos(int j) { return j ^ ((j & 8) >> 2); }

// cp.async of a 16-token FP8 K+V tile whose first token is `tok0` (a
// multiple of 16, so the tile lies in one block); tokens >= n_valid are
// zero-filled. Chunks c = lane + k * n_lanes: K: (HD / 16) * 16, then V: HD.
KILN_DEV void load_tile_chunks(char *smem_tile, const kv_t *__restrict__ kc, const kv_t *__restrict__ vc,
                               const int *__restrict__ bt, int nkv, int kvh, int tok0, int n_valid, int lane,
                               int n_lanes) {
    const u8 *k8 = (const u8 *)kc, *v8 = (const u8 *)vc;
    char *sk = smem_tile, *sv = smem_tile + K_TILE_BYTES;
    const int b = bt[tok0 / BLOCK_SIZE], o = tok0 % BLOCK_SIZE;
    const size_t head = (size_t)b * nkv + kvh;
    for (int c = lane; c < (HD / 16) * 16; c += n_lanes) {
        int col = c >> 4, j = c & 15;
        bool ok = j < n_valid;
        cp_async16(sk + (col * 16 + k_pos(j)) * 16, ok ? k8 + ((head * (HD / 16) + col) * BLOCK_SIZE + o + j) * 16 : k8,
                   ok ? 16 : 0);
    }
    const int vb = n_valid >= 16 ? 16 : n_valid;
    for (int d = lane; d < HD; d += n_lanes)
        cp_async16(sv + d * 16, vb > 0 ? v8 + (head * HD + d) * BLOCK_SIZE + o : v8, vb);
}

// The FP8 loader of a whole tile (16 valid tokens) with the per-lane offsets
// worked out once: this lane copies K chunks c = lane + 32 k (column c / 16,
// token c % 16) and V rows d = lane + 32 k of the tile at (block b, slot o).
struct fp8_tile_loader {
    u32 k_soff, v_soff; // this lane's first K / V chunk inside a tile (bytes)
    u32 k_goff, v_goff; // and in the cache, from the tile's first byte
    KILN_DEV void init(int lane) {
        const int j = lane & 15, col = lane >> 4;
        k_soff = (u32)((col * 16 + k_pos(j)) * 16);
        k_goff = (u32)((col * BLOCK_SIZE + j) * 16);
        v_soff = (u32)(lane * 16);
        v_goff = (u32)(lane * BLOCK_SIZE);
    }
    // head_off: offset of (block b, head kvh) = (b * nkv + kvh) * HD * BLOCK_SIZE
    // (the same for K and V); o: the tile's first slot in the block.
    KILN_DEV void load(u32 stile, const u8 *__restrict__ k8, const u8 *__restrict__ v8, size_t head_off, int o,
                       int lane) const {
        const u8 *kp = k8 + head_off + (size_t)o * 16 + k_goff, *vp = v8 + head_off + o + v_goff;
#pragma unroll
        for (int k = 0; k < (HD + 31) / 32; k++) {
            if (HD % 32 == 0 || lane + 32 * k < HD) {
                cp_async16_u32(stile + k_soff + k * 512, kp + (size_t)k * 2 * BLOCK_SIZE * 16);
                cp_async16_u32(stile + K_TILE_BYTES + v_soff + k * 512, vp + (size_t)k * 32 * BLOCK_SIZE);
            }
        }
    }
};

// S[16 rows][16 tokens] += Q (A fragments, fp16, permuted columns) x K tile^T.
// s[0..3]: tokens 4t, 4t+1; s[4..7]: tokens 4t+2, 4t+3 (sc_tok).
KILN_DEV void qk_tile(float s[8], const u32 (*qa)[4], u32 sk_addr, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const int j0 = 2 * g - (g & 1); // n-tile 0 token of this lane's column; n-tile 1: j0 + 2
    const u32 a0 = sk_addr + k_pos(j0) * 16 + t * 4, a1 = sk_addr + k_pos(j0 + 2) * 16 + t * 4;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        u32 b0, b1, b2, b3;
        fp8x4_to_f16(lds32(a0 + kk * 256), b0, b1);
        fp8x4_to_f16(lds32(a1 + kk * 256), b2, b3);
        mma16816(s, qa[kk], b0, b1);
        mma16816(s + 4, qa[kk], b2, b3);
    }
}

// Decode with the MMA roles swapped (FP8 caches): S^T = K Q^T and O^T =
// V^T P^T, so the 16 rows of an m16n8k16 are 16 tokens (QK) or 16 head dims
// (PV) and its 8 columns are query heads (DNT n-tiles for GROUP heads): half
// the MMAs of padding GROUP <= 8 heads to 16 rows, and half the accumulators.
// The k index is permuted as above. Fragments of lane (g, t), j0 = 2g - (g & 1):
//   K (A):   rows g, g + 8 = tokens j0, j0 + 2 of the tile; k = dims 4t..4t+3
//            (a0 = lo, a2 = hi of the lane's 4 bytes of token j0; a1, a3 of j0 + 2)
//   Q^T (B): qb[kk][n] = head n*8 + g, dims kk*16 + 4t, +1 ([0]) and +2, +3 ([1])
//   S^T (C): s[n][0..1] = token j0, heads n*8 + 2t, +1; s[n][2..3] = token j0 + 2
//   P^T (B): movmatrix.trans of the fp16-packed S^T halves gives lane (g, t)
//            head n*8 + g at tokens 4t, 4t+1 ([0]) and 4t+2, 4t+3 ([1])
//   V^T (A): rows g, g + 8 = dims dt*16 + g, + 8; k = tokens 4t..4t+3
//   O^T (C): o[dt][n][0..1] = dim dt*16 + g, heads n*8 + 2t, +1; [2..3]: dim + 8
#define DNT ((GROUP + 7) / 8)


// S^T of NT_ tiles (K tiles at ka[u]): s[u][n][4] = (K tile u) Q^T; with one
// n-tile, two accumulator chains per tile (even and odd k-steps).
template <int NT_>
KILN_DEV void qk_tiles_t(float (*s)[DNT][4], const u32 (*qb)[DNT][2], const u32 *ka, int lane) {
    constexpr bool SPLIT = DNT == 1 && HD / 16 > 1;
    const int g = lane >> 2, t = lane & 3;
    const int j0 = 2 * g - (g & 1);
    const u32 o0 = k_pos(j0) * 16 + t * 4, o1 = k_pos(j0 + 2) * 16 + t * 4;
    float odd[NT_][DNT][4];
#pragma unroll
    for (int u = 0; u < NT_; u++)
#pragma unroll
        for (int n = 0; n < DNT; n++)
#pragma unroll
            for (int k = 0; k < 4; k++) s[u][n][k] = odd[u][n][k] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
        for (int u = 0; u < NT_; u++) {
            u32 a[4];
            fp8x4_to_f16(lds32(ka[u] + o0 + kk * 256), a[0], a[2]);
            fp8x4_to_f16(lds32(ka[u] + o1 + kk * 256), a[1], a[3]);
#pragma unroll
            for (int n = 0; n < DNT; n++)
                mma16816((SPLIT && (kk & 1)) ? odd[u][n] : s[u][n], a, qb[kk][n][0], qb[kk][n][1]);
        }
    if (SPLIT) {
#pragma unroll
        for (int u = 0; u < NT_; u++)
#pragma unroll
            for (int n = 0; n < DNT; n++)
#pragma unroll
                for (int k = 0; k < 4; k++) s[u][n][k] += odd[u][n][k];
    }
}

// O^T += V^T P^T over NT_ tiles (V tiles at va[u], P^T fragments pb[u]).
template <int NT_>
KILN_DEV void pv_tiles_t(float (*o)[DNT][4], const u32 (*pb)[DNT][2], const u32 *va, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const u32 r0 = g * 16 + t * 4, r1 = (g + 8) * 16 + t * 4;
#pragma unroll
    for (int u = 0; u < NT_; u++)
#pragma unroll
        for (int dt = 0; dt < HD / 16; dt++) {
            u32 a[4];
            fp8x4_to_f16(lds32(va[u] + r0 + dt * 256), a[0], a[2]);
            fp8x4_to_f16(lds32(va[u] + r1 + dt * 256), a[1], a[3]);
#pragma unroll
            for (int n = 0; n < DNT; n++) mma16816(o[dt][n], a, pb[u][n][0], pb[u][n][1]);
        }
}

// O[16 rows][HD] += P (A fragment, fp16, tokens permuted like S) x V tile.
KILN_DEV void pv_tile(float (*o)[4], const u32 pa[4], u32 sv_addr, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const u32 a = sv_addr + g * 16 + t * 4;
#pragma unroll
    for (int nt = 0; nt < HD / 8; nt++) {
        u32 b0, b1;
        fp8x4_to_f16(lds32(a + nt * 8 * 16), b0, b1);
        mma16816(o[nt], pa, b0, b1);
    }
}
#endif

// Online softmax over one 16-token tile: the pieces the decode and prefill
// kernels share. A lane holds 8 scores of rows r = (k >> 1) & 1 (C fragment
// layout); the 4 lanes of a quad hold the same two rows.
// The quad's row maxima (mx: each lane's own, at least the running max).
KILN_DEV void quad_row_max(float mx[2]) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
}

// The tile's probabilities in place (sc: scaled log2 scores -> 2^(sc - mx),
// 0 in fully masked rows), their row sums rs and alpha = 2^(m - mx) (1 where
// the row is still fully masked). FAST: fast_exp2 (decode) or exp2f (the
// first prefill kernel).
template <bool FAST>
KILN_DEV void tile_probs(float sc[8], const float m[2], const float mx[2], float alpha[2], float rs[2]) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        alpha[r] = mx[r] == -KILN_INF ? 1.0f : (FAST ? fast_exp2(m[r] - mx[r]) : exp2f(m[r] - mx[r]));
        rs[r] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < 8; k++) {
        int r = (k >> 1) & 1;
        float p = mx[r] == -KILN_INF ? 0.0f : (FAST ? fast_exp2(sc[k] - mx[r]) : exp2f(sc[k] - mx[r]));
        sc[k] = p;
        rs[r] += p;
    }
}

// After the tile's probabilities (row sums rs, alpha = 2^(m - mx)): l = l *
// alpha + rs, m = mx, and O *= alpha -- with SKIP, skipped when no row
// maximum of the warp moved (alpha == 1 exactly, so multiplying would change
// nothing; the first prefill kernel does not skip: with the vote it spills).
template <bool SKIP = true>
KILN_DEV void online_rescale(float (*o)[4], float m[2], float l[2], const float mx[2], const float alpha[2],
                             const float rs[2]) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] = l[r] * alpha[r] + rs[r];
        m[r] = mx[r];
    }
    if (!SKIP || __any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
        for (int nt = 0; nt < HD / 8; nt++) {
            o[nt][0] *= alpha[0];
            o[nt][1] *= alpha[0];
            o[nt][2] *= alpha[1];
            o[nt][3] *= alpha[1];
        }
    }
}

// O += P V for the tile's 8 probabilities p (C layout, packed to the A fragment).
KILN_DEV void pv_probs(float (*o)[4], const float p[8], u32 sv_addr, int lane) {
    u32 pa[4] = {pack2<mma_t>(p[0], p[1]), pack2<mma_t>(p[2], p[3]), pack2<mma_t>(p[4], p[5]), pack2<mma_t>(p[6], p[7])};
    pv_tile(o, pa, sv_addr, lane);
}
