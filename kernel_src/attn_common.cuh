// attn_common.cuh -- tensor-core building blocks shared by the paged
// attention kernels: mma.sync m16n8k16 (bf16/fp16 in, fp32 accumulate),
// ldmatrix, and cp.async loaders of 16-token K and V tiles out of the paged
// cache into shared memory.
//
// Specialization defines: ACT (bf16 | fp16: activations and KV cache),
// HEAD_DIM (multiple of 8), BLOCK_SIZE (KV block size, multiple of 8),
// GROUP (query heads per KV head processed together).
//
// Cache layout (x = 8 elements of 16 bytes):
//   key   [num_blocks, nkv, HEAD_DIM / 8, BLOCK_SIZE, 8]
//   value [num_blocks, nkv, HEAD_DIM, BLOCK_SIZE]
// Shared-memory tiles of 16 tokens:
//   K tile: [HD16 / 8 chunk columns][16 tokens] of 16-byte chunks (8 dims of
//           one token), i.e. exactly an ldmatrix row per chunk; dims beyond
//           HEAD_DIM up to HD16 (next multiple of 16) are zero.
//   V tile: [HEAD_DIM rows][2 chunks] (chunk = 8 tokens of one dim), the two
//           chunks of a row swapped when (row / 4) is odd so the eight rows an
//           ldmatrix reads hit distinct banks.
#pragma once
#include "kiln_common.cuh"

typedef ACT act_t;

#define HD HEAD_DIM
#define HD16 ((HEAD_DIM + 15) / 16 * 16)
#define KCH (HD16 / 8)                 // key chunk columns in a tile
#define K_TILE_BYTES (KCH * 16 * 16)   // 16 tokens
#define V_TILE_BYTES (HD * 2 * 16)     // 16 tokens
#define TILE_BYTES (K_TILE_BYTES + V_TILE_BYTES)
#define LOG2E 1.4426950408889634f

#if (HEAD_DIM % 8) != 0
#error "HEAD_DIM must be a multiple of 8"
#endif
#if (BLOCK_SIZE % 8) != 0
#error "BLOCK_SIZE must be a multiple of 8"
#endif

template <class T> struct mma_op;
template <> struct mma_op<bf16> {
    static KILN_DEV void run(float c[4], const u32 a[4], u32 b0, u32 b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct mma_op<fp16> {
    static KILN_DEV void run(float c[4], const u32 a[4], u32 b0, u32 b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
KILN_DEV void mma16816(float c[4], const u32 a[4], u32 b0, u32 b1) { mma_op<act_t>::run(c, a, b0, b1); }

KILN_DEV void ldsm_x4(u32 &r0, u32 &r1, u32 &r2, u32 &r3, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
KILN_DEV void ldsm_x2(u32 &r0, u32 &r1, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(addr));
}

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
