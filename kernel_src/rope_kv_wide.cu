// rope_kv_wide.cu -- rotary embedding, paged KV-cache write, and the two
// fused, for many tokens (prefill): the variant of rope_kv.cu that
// engine/cuda/ops_gpu.c launches from $KILN_ELEM_WIDE_MIN tokens up (default
// 256); fewer tokens (decode) take rope_kv.cu. Measured on the H200 at 4096
// tokens (32 q / 8 KV heads of 128, bf16): rope 80.3%, rope + KV write
// 75.4% of copy bandwidth (rope_kv.cu 62.9 / 53.1%); its latency at decode
// sizes was not measured (branch elem2).
// Semantics (those of rope_kv.cu): engine/ops_cpu.h kiln_cpu_rope /
// kiln_cpu_kv_write (fp32 math; cos/sin from precise sincosf of (float)pos *
// inv_freq, times mscale; dynamic NTK recomputes inv_freq per token like
// kiln_rope_dynamic_inv_freq).
//
//   kiln_rope_wide     qkv [T, row_stride]: q heads [0, nq) and k heads
//                      [nq, nq + nkv) rotated in place (ACT, INTERLEAVED)
//   kiln_kv_write_wide k, v rows [T, row_stride] -> caches at slots[t]
//                      (slot < 0: skipped), KV = bf16 | fp16 | fp8_e5m2 | fp8_e4m3
//                      (fp8 stores fp8(value / scale); scale = kv_scales[h]
//                      for keys and kv_scales[nkv + h] for values of KV head
//                      h, or k_scale / v_scale when kv_scales is NULL)
//   kiln_rope_kv_write_wide
//                      both: rotate q and k in place, write the rotated k and
//                      v = qkv[:, (nq + nkv) * hd ...] into the cache
//   kiln_kv_write_tile, kiln_rope_kv_write_tile
//                      the same two with the KV part in tiles (see "KV
//                      tiles" below; the engine's default, $KILN_KV_TILE)
// Cache layout (x = 16 / sizeof(KV)):
//   key   [num_blocks, nkv, head_dim / x, block_size, x]
//   value [num_blocks, nkv, head_dim, block_size]
//
// A launch is a row of RKV_THREADS-thread blocks of up to two kinds, in
// this order (engine/cuda/ops_gpu.c sizes each kind; a block is one kind):
//   rope rows   (no shared memory, no barrier) thread = (token t, 16-byte
//               column v of the rotated part of a head, head slot s of hs):
//               rotates heads s, s + hs, ... of [0, nh) (RI at a time, all
//               their loads issued before any store) with the cos/sin of
//               its column's frequencies, computed once for all its heads;
//               with 8 (16) columns a head and hs * columns a multiple of
//               32, the 4 (2) lanes of a warp that hold one column split its
//               sincosf calls and exchange the results by shuffles (precise
//               sincosf dominated the instruction count). kiln_rope_wide:
//               every q and k head; kiln_rope_kv_write_wide: the q heads.
//   KV blocks   one block = (16 consecutive tokens, hg KV heads): phase 1
//               reads the k and v rows as 16-byte vectors along the rows
//               (the fused kernel rotates k, cos/sin once per (token, unit)
//               for the hg heads, and writes it back to qkv) into shared
//               memory; after one barrier, phase 2 writes the cache in its
//               own order: key cells tokens fastest, and values 8 slots a
//               16-byte vector (FP8 8) when each 8-token half is one run of
//               slots starting at a multiple of 8, so a warp's stores are
//               contiguous (whole 4 KiB (block, head) runs at head dim 128,
//               block size 16, contiguous slots); other slots (a jump, -1,
//               a run across cache blocks, the end of the tokens) one value
//               element a thread, tokens fastest. kiln_kv_write_wide is KV
//               blocks only.
// Thread indices are flat inside a kind; threads past the end return at once.
#include "kiln_common.cuh"

typedef ACT act_t;
typedef vec16<act_t> AV;
#define RKV_THREADS 128
#define RI 4 /* rope rows: heads per thread in flight */
#define KH 4 /* KV blocks: at most this many KV heads */
#define RKV_BOUNDS __launch_bounds__(RKV_THREADS)

template <class A, class B> struct same_type { static constexpr bool value = false; };
template <class A> struct same_type<A, A> { static constexpr bool value = true; };

#include "rope_args.cuh"

// Dynamic NTK base of token t (0: the plain inv_freq), and the cos / sin
// (times mscale) of frequency i at position pos.
KILN_DEV double token_base(const rope_args &a, int t) {
    const int dyn = a.dyn_seq_len ? a.dyn_seq_len[t] : 0;
    if (!a.dyn_seq_len || dyn <= a.dyn_max) return 0;
    double f = (double)a.dyn_factor;
    return (double)a.dyn_base * pow((f * dyn / a.dyn_max) - (f - 1), (double)a.rot / (a.rot - 2));
}
KILN_DEV void cos_sin(const rope_args &a, double base, float pos, int i, float &c, float &s) {
    float inv = a.inv_freq[i];
    if (base != 0) {
        float ex = (float)(2 * i) / (float)a.rot;
        inv = 1.0f / powf((float)base, ex);
    }
    float sv, cv;
    sincosf(pos * inv, &sv, &cv);
    c = cv * a.mscale;
    s = sv * a.mscale;
}

// ------------------------------------------------------------ rope rows

// Rope rows of heads [0, nh): thread g < T * hs * vpr (see the top of the
// file). The loads of a round of RI heads go out before any cos / sin is
// computed. G > 1: the G lanes of a warp that hold the same column of the
// same token (hs * vpr a multiple of 32, vpr * G == 32) compute NF / G of
// its frequencies each and exchange them by shuffles.
template <bool ILV, int G>
KILN_DEV void rope_rows_g(act_t *qkv, i64 row_stride, int T, const rope_args &a, int nh, int hs, int g) {
    constexpr int N = AV::N, NF = ILV ? N / 2 : N; // elements per vector, frequencies per column
    const int half = a.rot / 2;
    const int vpr = ILV ? a.rot / N : half / N; // columns per head
    const int P = hs * vpr;                     // threads per token
    const int t = g / P;
    if (t >= T) return; // G > 1: whole warps
    const int p = g - t * P, s = p / vpr, v = p - s * vpr;
    act_t *row = qkv + (size_t)t * row_stride + (size_t)v * N;
    const float pos = (float)a.pos[t];
    const double base = token_base(a, t);
    float cs[NF], sn[NF];
    // rounds of RI heads (one when hs comes from the host's head_slots); the
    // same count for every lane, as G > 1 shuffles in the first
    for (int r0 = 0; r0 < nh; r0 += RI * hs) {
        const int h0 = r0 + s;
        AV lo[RI], hi[RI];
#pragma unroll
        for (int u = 0; u < RI; u++) {
            const int h = h0 + u * hs;
            if (h < nh) {
                const act_t *e = row + (size_t)h * a.hd;
                lo[u].v = ld16(e);
                if (!ILV) hi[u].v = ld16(e + half);
            }
        }
        if (G > 1 && r0 == 0) { // this lane's share: frequencies i * G + gs of the column
            const int gs = ((int)threadIdx.x & 31) / vpr;
            float mc[NF / G], ms[NF / G];
#pragma unroll
            for (int i = 0; i < NF / G; i++) cos_sin(a, base, pos, v * NF + i * G + gs, mc[i], ms[i]);
#pragma unroll
            for (int k = 0; k < NF; k++) {
                cs[k] = __shfl_sync(0xffffffffu, mc[k / G], v + (k % G) * vpr);
                sn[k] = __shfl_sync(0xffffffffu, ms[k / G], v + (k % G) * vpr);
            }
        }
        // one frequency at a time: (G == 1: its cos / sin, then) the
        // elements it rotates in every head of the round
#pragma unroll
        for (int k = 0; k < NF; k++) {
            float c, sk;
            if (G > 1) c = cs[k], sk = sn[k];
            else cos_sin(a, base, pos, v * NF + k, c, sk);
#pragma unroll
            for (int u = 0; u < RI; u++) {
                if (h0 + u * hs >= nh) continue;
                float y0, y1; // (rope_rot: the decode kernels' roundings)
                if (ILV) {
                    rope_rot(lo[u].get(2 * k), lo[u].get(2 * k + 1), c, sk, y0, y1);
                    lo[u].set(2 * k, y0);
                    lo[u].set(2 * k + 1, y1);
                } else {
                    rope_rot(lo[u].get(k), hi[u].get(k), c, sk, y0, y1);
                    lo[u].set(k, y0);
                    hi[u].set(k, y1);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < RI; u++) {
            const int h = h0 + u * hs;
            if (h >= nh) continue;
            act_t *e = row + (size_t)h * a.hd;
            st16(e, lo[u].v);
            if (!ILV) st16(e + half, hi[u].v);
        }
    }
}

// G = 4 when 8 columns a head (hd 128 in 16-bit rotate-half), 2 when 16,
// with hs * vpr a multiple of 32 (the host rounds hs up for that); else 1.
template <bool ILV>
KILN_DEV void rope_rows(act_t *qkv, i64 row_stride, int T, const rope_args &a, int nh, int hs, int g) {
    constexpr int N = AV::N, NF = ILV ? N / 2 : N;
    const int vpr = ILV ? a.rot / N : a.rot / 2 / N, P = hs * vpr;
    if (P % 32 == 0 && vpr == 8 && NF % 4 == 0) rope_rows_g<ILV, 4>(qkv, row_stride, T, a, nh, hs, g);
    else if (P % 32 == 0 && vpr == 16 && NF % 2 == 0) rope_rows_g<ILV, 2>(qkv, row_stride, T, a, nh, hs, g);
    else rope_rows_g<ILV, 1>(qkv, row_stride, T, a, nh, hs, g);
}

#ifdef KV
typedef KV kv_t;
#define KV_X (16 / (int)sizeof(kv_t))

KILN_DEV float kv_in(float v, float scale) { return sizeof(kv_t) == 1 ? v / scale : v; }
KILN_DEV float head_scale(const float *s, float dflt, int i) { return s ? s[i] : dflt; }

struct kv_args {
    kv_t *kc, *vc;
    const int *slots;
    int nkv, hd, bs;
    float ks, vs;
    const float *scales;
};

// Key units per head (see the top of the file): rotated units first (none
// without rope), then the unrotated columns in twos.
KILN_DEV int key_units(bool rope, bool ilv, int hd, int rot) {
    const int N = AV::N, nr = rope ? rot / N : 0;
    return (ilv ? (nr + 1) / 2 : nr / 2) + (hd / N - nr + 1) / 2;
}

// Shared memory of a KV block: 16 slots, then for each of its hg heads 16
// key rows of KPITCH bytes and 16 value rows of VPITCH bytes (the host's
// kv_block_smem computes the same size). KPITCH keeps rows 16-byte aligned
// and moves consecutive rows 4 banks on (the key cells are read as 16-byte
// vectors, 16 rows at a time); VPITCH moves rows 1 bank on so the 8 values
// a thread reads down one column, 8 rows apart for the two halves of a
// warp, fall in different banks.
KILN_DEV int kpitch(int hd) { return hd * (int)sizeof(act_t) + 16; }
KILN_DEV int vpitch(int hd) { return hd * (int)sizeof(act_t) + 4; }

// KV block kb of ceil(T / 16) * ceil(nkv / hg) (head group fastest): tokens
// [t0, t0 + 16) and KV heads [h0, h0 + hg). Phase 1 reads k and v rows
// (16-byte vectors along the rows), rotates k (ROPE: written back to qkv)
// and keeps both in shared memory; phase 2 writes the cache in its own
// order: key cells tokens fastest, values 8 slots a vector when each
// 8-token half is one run of slots starting at a multiple of 8, else one
// element a thread, tokens fastest.
template <bool ROPE, bool ILV>
KILN_DEV void kv_block(act_t *k, const act_t *v, i64 row_stride, int T, int kb, int hg, const rope_args &a,
                       const kv_args &kv) {
    extern __shared__ float4 smem4[];
    constexpr int N = AV::N;
    const int hd = kv.hd, nvh = hd / N, KP = kpitch(hd), VP = vpitch(hd);
    const int ngr = (kv.nkv + hg - 1) / hg, chunk = kb / ngr, h0 = (kb - chunk * ngr) * hg;
    const int nh = min(hg, kv.nkv - h0), t0 = chunk * 16, ntok = min(16, T - t0);
    const int tid = (int)threadIdx.x;
    int *sslot = (int *)smem4;
    char *sk = (char *)smem4 + 64, *sv = sk + (size_t)hg * 16 * KP;
    if (tid < 16) sslot[tid] = tid < ntok ? kv.slots[t0 + tid] : -1;

    // phase 1, keys: thread = (unit u, token j), all nh heads of the group
    const int rot = ROPE ? a.rot : 0, nr = rot / N;
    const int U = key_units(ROPE, ILV, hd, rot), UR = ROPE ? (ILV ? (nr + 1) / 2 : nr / 2) : 0;
    for (int p = tid; p < U * 16; p += RKV_THREADS) {
        const int j = p / U, u = p - j * U;
        if (j >= ntok) break;
        const int t = t0 + j;
        const bool rotu = u < UR;
        int c0, c1; // the unit's columns (c1 < 0: none)
        if (rotu) {
            c0 = ILV ? 2 * u : u;
            c1 = ILV ? (2 * u + 1 < nr ? 2 * u + 1 : -1) : u + nr / 2;
        } else {
            c0 = nr + 2 * (u - UR);
            c1 = c0 + 1 < nvh ? c0 + 1 : -1;
        }
        // rotated units: cos / sin of frequencies u * N .. u * N + N - 1
        // first (precise sincosf with its slow path: computed while no
        // loaded data is live); rotate-half pairs element q of c0 with
        // element q of c1 (frequency q), interleaved (2q, 2q + 1) of c0
        // (frequency q) and of c1 (N / 2 + q)
        float cs[N], sn[N];
        if (ROPE && rotu) {
            const float pos = (float)a.pos[t];
            const double base = token_base(a, t);
#pragma unroll
            for (int q = 0; q < N; q++)
                if (!ILV || q < N / 2 || c1 >= 0) cos_sin(a, base, pos, u * N + q, cs[q], sn[q]);
        }
        act_t *row = k + (size_t)t * row_stride;
        AV x0[KH], x1[KH];
#pragma unroll
        for (int h = 0; h < KH; h++) {
            if (h < nh) {
                const act_t *e = row + (size_t)(h0 + h) * hd;
                x0[h].v = ld16(e + c0 * N);
                if (c1 >= 0) x1[h].v = ld16(e + c1 * N);
            }
        }
#pragma unroll
        for (int h = 0; h < KH; h++) {
            if (h >= nh) continue;
            if (ROPE && rotu) {
                if (ILV) {
#pragma unroll
                    for (int q = 0; q < N / 2; q++) {
                        float y0, y1; // (rope_rot: the decode kernels' roundings)
                        rope_rot(x0[h].get(2 * q), x0[h].get(2 * q + 1), cs[q], sn[q], y0, y1);
                        x0[h].set(2 * q, y0);
                        x0[h].set(2 * q + 1, y1);
                        if (c1 >= 0) {
                            const int f = N / 2 + q;
                            rope_rot(x1[h].get(2 * q), x1[h].get(2 * q + 1), cs[f], sn[f], y0, y1);
                            x1[h].set(2 * q, y0);
                            x1[h].set(2 * q + 1, y1);
                        }
                    }
                } else {
#pragma unroll
                    for (int q = 0; q < N; q++) {
                        float y0, y1;
                        rope_rot(x0[h].get(q), x1[h].get(q), cs[q], sn[q], y0, y1);
                        x0[h].set(q, y0);
                        x1[h].set(q, y1);
                    }
                }
                act_t *e = row + (size_t)(h0 + h) * hd;
                st16(e + c0 * N, x0[h].v);
                if (c1 >= 0) st16(e + c1 * N, x1[h].v);
            }
            char *r = sk + (size_t)(h * 16 + j) * KP;
            *(uint4 *)(r + c0 * 16) = x0[h].v;
            if (c1 >= 0) *(uint4 *)(r + c1 * 16) = x1[h].v;
        }
    }
    // phase 1, values: thread = (column c, token j, head), VI vectors in
    // flight, stored to shared memory as 4-byte words (VPITCH rows are
    // 4-byte aligned)
    {
        constexpr int VI = 8;
        const int nv = nvh * ntok * nh;
        for (int e0 = tid; e0 < nv; e0 += VI * RKV_THREADS) {
            uint4 x[VI];
            int at[VI];
#pragma unroll
            for (int i = 0; i < VI; i++) {
                const int e = e0 + i * RKV_THREADS;
                at[i] = -1;
                if (e < nv) {
                    const int r = e / nvh, c = e - r * nvh, h = r / ntok, j = r - h * ntok;
                    x[i] = ld16(v + (size_t)(t0 + j) * row_stride + (size_t)(h0 + h) * hd + c * N);
                    at[i] = (h * 16 + j) * VP + c * 16;
                }
            }
#pragma unroll
            for (int i = 0; i < VI; i++) {
                if (at[i] < 0) continue;
                u32 *d = (u32 *)(sv + at[i]);
                d[0] = x[i].x, d[1] = x[i].y, d[2] = x[i].z, d[3] = x[i].w;
            }
        }
    }
    __syncthreads();

    // phase 2, keys: cell (token j fastest, x-chunk g, head): KV_X elements
    const int G = hd / KV_X, bs = kv.bs;
    const size_t bstride = (size_t)kv.nkv * hd * bs; // one cache block
    for (int e = tid; e < 16 * G * nh; e += RKV_THREADS) {
        const int j = e & 15, r = e >> 4, h = r / G, g = r - h * G;
        const int slot = sslot[j];
        if (slot < 0) continue; // also past the tokens
        const int b = slot / bs, o = slot - b * bs;
        const char *src = sk + (size_t)(h * 16 + j) * KP + g * KV_X * (int)sizeof(act_t);
        const float sc = head_scale(kv.scales, kv.ks, h0 + h);
        kv_t *dst = kv.kc + b * bstride + (((size_t)(h0 + h) * G + g) * bs + o) * KV_X;
        if (same_type<act_t, kv_t>::value) {
            st16(dst, *(const uint4 *)src);
        } else {
            union { uint4 u; kv_t e[KV_X]; } out;
#pragma unroll
            for (int c = 0; c < KV_X / N; c++) {
                AV a;
                a.v = *(const uint4 *)(src + c * 16);
#pragma unroll
                for (int q = 0; q < N; q++) out.e[c * N + q] = from_f32<kv_t>(kv_in(a.get(q), sc));
            }
            st16(dst, out.u);
        }
    }
    // phase 2, values
    bool runs = ntok == 16 && (bs & 7) == 0;
#pragma unroll
    for (int gi = 0; gi < 2; gi++) {
        const int s0 = sslot[gi * 8];
        runs = runs && s0 >= 0 && (s0 & 7) == 0;
#pragma unroll
        for (int q = 1; q < 8; q++) runs = runs && sslot[gi * 8 + q] == s0 + q;
    }
    if (runs) { // (8-token half fastest, dim, head): 8 slots a vector (16 bytes, FP8 8)
        for (int e = tid; e < 2 * hd * nh; e += RKV_THREADS) {
            const int gi = e & 1, r = e >> 1, h = r / hd, d = r - h * hd;
            const int slot = sslot[gi * 8], b = slot / bs, o = slot - b * bs;
            const float sc = head_scale(kv.scales, kv.vs, kv.nkv + h0 + h);
            const act_t *src = (const act_t *)(sv + (size_t)(h * 16 + gi * 8) * VP) + d;
            union { uint4 u; kv_t e[16 / sizeof(kv_t)]; } pk;
#pragma unroll
            for (int q = 0; q < 8; q++) pk.e[q] = from_f32<kv_t>(kv_in(to_f32(*(const act_t *)((const char *)src + q * VP)), sc));
            kv_t *dst = kv.vc + b * bstride + ((size_t)(h0 + h) * hd + d) * bs + o;
            if (sizeof(kv_t) == 2) st16_g(dst, pk.u);
            else st8_g(dst, pk.u.x, pk.u.y);
        }
    } else { // (token fastest, dim, head): one element
        for (int e = tid; e < 16 * hd * nh; e += RKV_THREADS) {
            const int j = e & 15, r = e >> 4, h = r / hd, d = r - h * hd;
            const int slot = sslot[j];
            if (slot < 0) continue;
            const int b = slot / bs, o = slot - b * bs;
            const float sc = head_scale(kv.scales, kv.vs, kv.nkv + h0 + h);
            const act_t x = *(const act_t *)(sv + (size_t)(h * 16 + j) * VP + d * (int)sizeof(act_t));
            kv.vc[b * bstride + ((size_t)(h0 + h) * hd + d) * bs + o] = from_f32<kv_t>(kv_in(to_f32(x), sc));
        }
    }
}

// KV blocks of hg heads (the host's kv_heads_per_block; dynamic shared
// memory: its kv_block_smem)
extern "C" __global__ void RKV_BOUNDS kiln_kv_write_wide(kv_t *kc, kv_t *vc, const act_t *k, const act_t *v,
                                                         i64 row_stride, const int *slots, int T, int nkv,
                                                         int head_dim, int block_size, float k_scale, float v_scale,
                                                         int hg, const float *kv_scales) {
    pdl_wait();
    pdl_launch();
    const kv_args kv = {kc, vc, slots, nkv, head_dim, block_size, k_scale, v_scale, kv_scales};
    const rope_args a = {};
    kv_block<false, false>((act_t *)k, v, row_stride, T, (int)blockIdx.x, hg, a, kv);
}

// ------------------------------------------------------------ KV tiles

// The tile variant of the KV blocks (kiln_kv_write_tile, the KV part of
// kiln_rope_kv_write_tile; engine/cuda/ops_gpu.c launches it instead of the
// KV blocks unless $KILN_KV_TILE=0). One warp = one tile: the 16 tokens
// [t0, t0 + 16) of the launch and one KV head h. A block = TILE_WARPS
// tiles: one chunk of 16 tokens and TILE_WARPS consecutive heads (warps past
// the last head idle). The warps of a block share no data and never wait on
// each other, except in the fused kernel: one barrier after the block's cos /
// sin table (computed while the warps' loads are in flight). A warp:
//   1. issues every load of its tile before it stores anything: values (and
//      in the fused kernel keys) as 16-byte vectors along the rows into its
//      shared memory; the plain kernel loads its key cells into registers
//      (16 lanes = the 16 tokens of one cell column, so 32 bytes of a row per
//      pair of lanes) and stores them straight away
//   2. (fused) rotates k in shared memory with the block's table and writes
//      the rotated columns back to qkv (16-byte vectors along the rows)
//   3. key cells (KV_X elements, 16 bytes): tokens fastest, any slots
//   4. values: each run of 8 tokens with consecutive slots starting at a
//      multiple of 8 (anywhere in the 16 tokens: at most two) as one 8-slot
//      vector per dim (16 bytes, FP8 8), the other tokens (slot < 0: skipped)
//      one element a lane, tokens fastest
// Shared memory: (fused) the table, 16 x rot / 2 float2; then per warp
// tile_warp_bytes: 16 slots, a 16-entry token list, 16 value rows of VPITCH
// and (fused) 16 key rows of KPITCH (the host's kv_tile_smem: the same sum).
#define TILE_WARPS 4 /* tiles a block (RKV_THREADS threads) */
#define TV 8         /* value vectors (fused: and key vectors) a lane in flight */
#define TILE_BOUNDS __launch_bounds__(RKV_THREADS, 4) /* 4 blocks an SM: 128 registers */

KILN_DEV int tile_warp_bytes(bool rope, int hd) { return 128 + 16 * vpitch(hd) + (rope ? 16 * kpitch(hd) : 0); }

// KC activation vectors -> one key cell of KV_X elements
template <int KC> KILN_DEV uint4 key_cell(const uint4 (&y)[KC], float sc) {
    if (same_type<act_t, kv_t>::value) return y[0];
    constexpr int N = AV::N;
    union { uint4 u; kv_t el[KV_X]; } out;
#pragma unroll
    for (int c = 0; c < KC; c++) {
        AV av;
        av.v = y[c];
#pragma unroll
        for (int q = 0; q < N; q++) out.el[c * N + q] = from_f32<kv_t>(kv_in(av.get(q), sc));
    }
    return out.u;
}

// Loads of items [e0, e0 + 32 * TL) step 32 of a tile (value vectors [0, nv),
// then keys [nv, ni)): row j, column c; tokens whose slot is < 0 load no
// value. at: the item's byte offset in the warp's rows (from sv), or -1.
template <int TL>
KILN_DEV void tile_issue(uint4 (&x)[TL], int (&at)[TL], int e0, int nv, int ni, int nvh, const act_t *k,
                         const act_t *v, i64 row_stride, int t0, int h, int hd, const int *sslot, int VP, int KP) {
    constexpr int N = AV::N;
#pragma unroll
    for (int i = 0; i < TL; i++) {
        const int e = e0 + i * 32;
        at[i] = -1;
        if (e < ni) {
            const bool key = e >= nv;
            const int f = key ? e - nv : e, j = f / nvh, c = f - j * nvh;
            if (key || sslot[j] >= 0) {
                x[i] = ld16((key ? k : v) + (size_t)(t0 + j) * row_stride + (size_t)h * hd + c * N);
                at[i] = key ? 16 * VP + j * KP + c * 16 : j * VP + c * 16;
            }
        }
    }
}
// ... and into shared memory: key rows are 16-byte aligned (KPITCH), value
// rows 4-byte aligned (VPITCH)
template <int TL> KILN_DEV void tile_stage(const uint4 (&x)[TL], const int (&at)[TL], int nvb, char *sv) {
#pragma unroll
    for (int i = 0; i < TL; i++) {
        if (at[i] < 0) continue;
        if (at[i] >= nvb) {
            *(uint4 *)(sv + at[i]) = x[i];
        } else {
            u32 *d = (u32 *)(sv + at[i]);
            d[0] = x[i].x, d[1] = x[i].y, d[2] = x[i].z, d[3] = x[i].w;
        }
    }
}

// Tile block kb (ceil(T / 16) chunks x ceil(nkv / TILE_WARPS) head groups,
// head group fastest). ROPE: k rotated (written back to qkv) before its cells
// are written.
template <bool ROPE, bool ILV>
KILN_DEV void kv_tile(act_t *k, const act_t *v, i64 row_stride, int T, int kb, const rope_args &a,
                      const kv_args &kv) {
    extern __shared__ float4 smem4[];
    constexpr int N = AV::N, KC = KV_X / N;
    constexpr int TL = ROPE ? 2 * TV : TV; // loads a lane in flight per round
    const int hd = kv.hd, nvh = hd / N, VP = vpitch(hd), KP = kpitch(hd), G = hd / KV_X, bs = kv.bs;
    const int lane = (int)threadIdx.x & 31, w = (int)threadIdx.x >> 5;
    const int ngr = (kv.nkv + TILE_WARPS - 1) / TILE_WARPS, chunk = kb / ngr;
    const int h = (kb - chunk * ngr) * TILE_WARPS + w;
    const int t0 = chunk * 16, ntok = min(16, T - t0);
    const bool active = h < kv.nkv; // the same for the whole warp
    const int half = ROPE ? a.rot / 2 : 1; // (1: no table)
    float2 *cs = (float2 *)smem4; // fused: [16][half]
    char *ws = (char *)smem4 + (ROPE ? 16 * half * 8 : 0) + (size_t)w * tile_warp_bytes(ROPE, hd);
    int *sslot = (int *)ws, *ulist = sslot + 16;
    char *sv = ws + 128, *sk = sv + 16 * VP;
    const size_t bstride = (size_t)kv.nkv * hd * bs; // one cache block
    if (!ROPE && !active) return;

    int s = -1; // lane j < 16: the slot of token t0 + j (-1: none)
    if (active && lane < ntok) s = kv.slots[t0 + lane];
    if (lane < 16) sslot[lane] = s;
    __syncwarp();

    if (ROPE) {
        // 0. (fused) the block's cos / sin table first: nothing live across
        // the calls of sincosf's slow path (loads in flight there spilled)
        for (int e = (int)threadIdx.x; e < ntok * half; e += (int)blockDim.x) {
            const int j = e / half, i = e - j * half, t = t0 + j;
            float c, sn;
            cos_sin(a, token_base(a, t), (float)a.pos[t], i, c, sn);
            cs[e] = make_float2(c, sn);
        }
        __syncthreads();
        if (!active) return;
    }
    // 1. loads: the first round of values (fused: and keys) in flight ...
    const int nv = ntok * nvh, ni = ROPE ? 2 * nv : nv;
    uint4 x[TL];
    int at[TL];
    tile_issue<TL>(x, at, lane, nv, ni, nvh, k, v, row_stride, t0, h, hd, sslot, VP, KP);
    if (!ROPE) {
        // ... while the key cells go straight from registers to the cache
        constexpr int TK = TV / KC; // cells a lane in flight (KC <= 4)
        const float sc = head_scale(kv.scales, kv.ks, h);
        for (int e0 = lane; e0 < 16 * G; e0 += 32 * TK) {
            uint4 y[TK][KC];
            int sl[TK];
#pragma unroll
            for (int i = 0; i < TK; i++) {
                const int e = e0 + i * 32, j = e & 15, g = e >> 4;
                sl[i] = e < 16 * G ? sslot[j] : -1;
                if (sl[i] >= 0) {
                    const act_t *src = k + (size_t)(t0 + j) * row_stride + (size_t)h * hd + g * KV_X;
#pragma unroll
                    for (int c = 0; c < KC; c++) y[i][c] = ld16(src + c * N);
                }
            }
#pragma unroll
            for (int i = 0; i < TK; i++) {
                if (sl[i] < 0) continue;
                const int g = (e0 + i * 32) >> 4, b = sl[i] / bs, o = sl[i] - b * bs;
                st16_g(kv.kc + b * bstride + (((size_t)h * G + g) * bs + o) * KV_X, key_cell<KC>(y[i], sc));
            }
        }
    }
    tile_stage<TL>(x, at, 16 * VP, sv);
    for (int e0 = lane + 32 * TL; e0 < ni; e0 += 32 * TL) { // more rounds (head dims past 128 in 16 bits)
        tile_issue<TL>(x, at, e0, nv, ni, nvh, k, v, row_stride, t0, h, hd, sslot, VP, KP);
        tile_stage<TL>(x, at, 16 * VP, sv);
    }
    __syncwarp();

    if (ROPE) {
        // 2. rotate k in shared memory: (token j, frequency i) pairs
        // (rotate-half: elements i and i + half; interleaved: 2i and 2i + 1)
        for (int e = lane; e < ntok * half; e += 32) {
            const int j = e / half, i = e - j * half;
            const float2 q = cs[e];
            act_t *row = (act_t *)(sk + j * KP);
            const int i0 = ILV ? 2 * i : i, i1 = ILV ? 2 * i + 1 : i + half;
            float y0, y1; // (rope_rot: the decode kernels' roundings)
            rope_rot(to_f32(row[i0]), to_f32(row[i1]), q.x, q.y, y0, y1);
            row[i0] = from_f32<act_t>(y0);
            row[i1] = from_f32<act_t>(y1);
        }
        __syncwarp();
        // the rotated columns back to qkv
        const int nr = max(a.rot / N, 1); // (rot >= N: check_rope)
        for (int e = lane; e < ntok * nr; e += 32) {
            const int j = e / nr, c = e - j * nr;
            st16(k + (size_t)(t0 + j) * row_stride + (size_t)h * hd + c * N, *(const uint4 *)(sk + j * KP + c * 16));
        }
        // 3. key cells from the rows, tokens fastest
        const float sc = head_scale(kv.scales, kv.ks, h);
        for (int e = lane; e < 16 * G; e += 32) {
            const int j = e & 15, g = e >> 4, slot = sslot[j];
            if (slot < 0) continue; // also past the tokens
            uint4 y[KC];
#pragma unroll
            for (int c = 0; c < KC; c++) y[c] = *(const uint4 *)(sk + j * KP + (g * KC + c) * 16);
            const int b = slot / bs, o = slot - b * bs;
            st16_g(kv.kc + b * bstride + (((size_t)h * G + g) * bs + o) * KV_X, key_cell<KC>(y, sc));
        }
    }

    // 4. values: leaders of 8-slot runs (lanes 0..8), the tokens they cover,
    // the rest listed in ulist
    const float sc = head_scale(kv.scales, kv.vs, kv.nkv + h);
    bool lead = (bs & 7) == 0 && lane <= 8 && s >= 0 && (s & 7) == 0;
#pragma unroll
    for (int q = 1; q < 8; q++) {
        const int sq = __shfl_sync(0xffffffffu, s, (lane + q) & 31);
        lead = lead && sq == s + q;
    }
    const unsigned leadm = __ballot_sync(0xffffffffu, lead), validm = __ballot_sync(0xffffffffu, s >= 0);
    unsigned covm = 0;
#pragma unroll
    for (int q = 0; q < 8; q++) covm |= leadm << q;
    const unsigned uncm = validm & ~covm & 0xffffu;
    if (lane < 16 && ((uncm >> lane) & 1u)) ulist[__popc(uncm & ((1u << lane) - 1u))] = lane;
    __syncwarp();
    const int nl = __popc(leadm), l0 = __ffs(leadm) - 1, l1 = __ffs(leadm & (leadm - 1u)) - 1;
    for (int e = lane; e < nl * hd; e += 32) { // (run fastest, dim): 8 slots a vector
        const int li = nl == 2 ? (e & 1) : 0, d = nl == 2 ? e >> 1 : e, jl = li ? l1 : l0;
        const int slot = sslot[jl], b = slot / bs, o = slot - b * bs;
        const char *src = sv + jl * VP + d * (int)sizeof(act_t);
        union { uint4 u; kv_t el[16 / sizeof(kv_t)]; } pk;
#pragma unroll
        for (int q = 0; q < 8; q++) pk.el[q] = from_f32<kv_t>(kv_in(to_f32(*(const act_t *)(src + q * VP)), sc));
        kv_t *dst = kv.vc + b * bstride + ((size_t)h * hd + d) * bs + o;
        if (sizeof(kv_t) == 2) st16_g(dst, pk.u);
        else st8_g(dst, pk.u.x, pk.u.y);
    }
    const int nu = __popc(uncm);
    for (int e = lane; e < nu * hd; e += 32) { // (listed token fastest, dim): one element
        const int d = e / nu, j = ulist[e - d * nu], slot = sslot[j], b = slot / bs, o = slot - b * bs;
        const act_t xv = *(const act_t *)(sv + j * VP + d * (int)sizeof(act_t));
        kv.vc[b * bstride + ((size_t)h * hd + d) * bs + o] = from_f32<kv_t>(kv_in(to_f32(xv), sc));
    }
}

// Tile blocks (see above; dynamic shared memory: the host's kv_tile_smem)
extern "C" __global__ void TILE_BOUNDS kiln_kv_write_tile(kv_t *kc, kv_t *vc, const act_t *k, const act_t *v,
                                                         i64 row_stride, const int *slots, int T, int nkv,
                                                         int head_dim, int block_size, float k_scale, float v_scale,
                                                         const float *kv_scales) {
    pdl_wait();
    pdl_launch();
    const kv_args kv = {kc, vc, slots, nkv, head_dim, block_size, k_scale, v_scale, kv_scales};
    const rope_args a = {};
    kv_tile<false, false>((act_t *)k, v, row_stride, T, (int)blockIdx.x, a, kv);
}

// ------------------------------------------------------------ KV pipe

// kiln_kv_write_pipe ($KILN_KV_TILE=2, the default: the plain KV write into a 16-bit
// cache from 16-bit rows, head_dim a power of two in [32, 256]; the host
// checks): a unit = the 16 tokens of a chunk and HU = 256 / head_dim
// consecutive KV heads (16 KiB of rows); block b takes units [b * n / G,
// (b + 1) * n / G) through PIPE_NS stages of shared memory filled by
// cp.async (the rows of unit i + PIPE_NS - 1 in flight while unit i is
// stored: no registers hold loads, so a block keeps ~48 KiB of reads in
// flight and stores at the same time). A stage: per head 16 key rows,
// then 16 value rows, of head_dim elements, their 16-byte chunks swizzled
// -- key row r chunk c at c ^ (r & (NC - 1)) (a quarter warp's 16-byte
// reads of one chunk column, rows r .. r + 7, fall in 8 different bank
// groups), value row r chunk c at c ^ ((r >> 3) << 1) (the two 8-token
// halves' 2-byte reads of 16 dims fall in different banks) -- then the
// 16 slots of each stage and the unit's first slot when its 16 tokens
// fill 16 consecutive slots from a multiple of 16 ("whole"; else -1).
// Stores: key cells (token fastest, chunk, head) and values (half fastest,
// dim, head) as one 8-slot vector per dim; a whole unit's addresses come
// from its first slot (per-store slot arithmetic cost ~12 points of copy
// bandwidth at 4096 x 32 heads), other units' per token (< 0: skipped),
// their values 8 slots a vector where a half's 8 tokens have consecutive
// slots from a multiple of 8, else one element a token. The design came
// from bench/kv_write_micro.cu (RESULTS: twenty-third session).
#define PIPE_THREADS 256
#define PIPE_NS 4
#define PIPE_STAGE 16384
#define PIPE_BOUNDS __launch_bounds__(PIPE_THREADS, 3)

// A stage's key cell (h, o, g) as the cache stores it: row o of head h's
// keys, chunk g (swizzled), converted to kv_t
KILN_DEV uint4 pipe_key_cell(const unsigned char *st, int RB, int NC, int h, int o, int g) {
    uint4 x = *(const uint4 *)(st + (h * 32 + o) * RB + ((g ^ (o & (NC - 1))) << 4));
    if (!same_type<act_t, kv_t>::value) {
        AV a;
        a.v = x;
        union { uint4 u; kv_t e[8]; } cv;
#pragma unroll
        for (int q = 0; q < 8; q++) cv.e[q] = from_f32<kv_t>(a.get(q));
        x = cv.u;
    }
    return x;
}
// A stage's value element of head h, dim d, token row r (swizzled chunk)
KILN_DEV const act_t *pipe_value(const unsigned char *st, int RB, int h, int d, int r) {
    return (const act_t *)(st + ((h * 2 + 1) * 16 + r) * RB + (((d >> 3) ^ ((r >> 3) << 1)) << 4) + (d & 7) * 2);
}
// the 8 values of head h, dim d, rows 8 gi .. 8 gi + 7 as one 8-slot vector
KILN_DEV uint4 pipe_value_run(const unsigned char *st, int RB, int h, int d, int gi) {
    const act_t *base = pipe_value(st, RB, h, d, gi * 8);
    union { uint4 u; kv_t e[8]; } pk;
#pragma unroll
    for (int q = 0; q < 8; q++) {
        const act_t x = *(const act_t *)((const unsigned char *)base + q * RB);
        if (same_type<act_t, kv_t>::value) pk.e[q] = *(const kv_t *)&x;
        else pk.e[q] = from_f32<kv_t>(to_f32(x));
    }
    return pk.u;
}

extern "C" __global__ void PIPE_BOUNDS kiln_kv_write_pipe(kv_t *kc, kv_t *vc, const act_t *k, const act_t *v,
                                                         i64 row_stride, const int *slots, int T, int nkv,
                                                         int head_dim, int block_size) {
    if constexpr (sizeof(act_t) != 2 || sizeof(kv_t) != 2) { // (the file's other specs; never launched)
        __trap();
        return;
    }
    extern __shared__ float4 smem4[];
    unsigned char *sm = (unsigned char *)smem4;
    int *ssl = (int *)(sm + PIPE_NS * PIPE_STAGE); // [PIPE_NS][16] slots
    int *sfast = ssl + PIPE_NS * 16;                // [PIPE_NS]: the unit's first slot when whole, else -1
    const int hd = head_dim, NC = hd / 8, lnc = __ffs(NC) - 1, lhd = __ffs(hd) - 1, RB = hd * 2;
    const int HU = 256 / hd, bs = block_size;
    const int ngr = (nkv + HU - 1) / HU, nunits = ((T + 15) / 16) * ngr;
    const int u0 = (int)((i64)blockIdx.x * nunits / gridDim.x);
    const int n = (int)((i64)(blockIdx.x + 1) * nunits / gridDim.x) - u0;
    const int tid = (int)threadIdx.x;
    const size_t bstride = (size_t)nkv * hd * bs; // one cache block
    pdl_wait();
    pdl_launch();
    for (int i = 0; i < PIPE_NS - 1 + n; i++) {
        // issue unit i into stage i % PIPE_NS (its previous unit's stores
        // ended at the barrier that closed iteration i - PIPE_NS + 1)
        if (i < n) {
            const int u = u0 + i, chunk = u / ngr, h0 = (u - chunk * ngr) * HU, nh = min(HU, nkv - h0);
            const int t0 = chunk * 16, ntok = min(16, T - t0);
            unsigned char *st = sm + (i % PIPE_NS) * PIPE_STAGE;
            if (tid < 32) { // the slots; "whole": 16 consecutive slots from a multiple of 16 in one cache block
                const int sl = tid < ntok ? slots[t0 + tid] : -1, s0 = __shfl_sync(0xffffffffu, sl, 0);
                const bool whole = __all_sync(0xffffffffu, tid >= 16 || sl == s0 + tid) && s0 >= 0 &&
                                   (s0 & 15) == 0 && (bs & 15) == 0;
                if (tid < 16) ssl[(i % PIPE_NS) * 16 + tid] = sl;
                if (tid == 0) sfast[i % PIPE_NS] = whole ? s0 : -1;
            }
            for (int e = tid; e < nh * 32 * NC; e += PIPE_THREADS) {
                const int c = e & (NC - 1), r = (e >> lnc) & 15, kv = (e >> (lnc + 4)) & 1, h = e >> (lnc + 5);
                if (r >= ntok) continue;
                const act_t *src = (kv ? v : k) + (size_t)(t0 + r) * row_stride + (size_t)(h0 + h) * hd + c * 8;
                const int pos = kv ? c ^ ((r >> 3) << 1) : c ^ (r & (NC - 1));
                cp_async16_u32(smem_addr(st + ((h * 2 + kv) * 16 + r) * RB + (pos << 4)), src);
            }
        }
        cp_async_commit(); // one group an iteration, empty ones included
        const int j = i - (PIPE_NS - 1); // the unit stored this iteration
        if (j < 0) continue;
        cp_async_wait<PIPE_NS - 1>();
        __syncthreads();
        const int u = u0 + j, chunk = u / ngr, h0 = (u - chunk * ngr) * HU, nh = min(HU, nkv - h0);
        const unsigned char *st = sm + (j % PIPE_NS) * PIPE_STAGE;
        const int *sl = ssl + (j % PIPE_NS) * 16, s0 = sfast[j % PIPE_NS];
        if (s0 >= 0) { // the whole unit in one cache block: addresses from its first slot
            const int b = s0 / bs, off0 = s0 - b * bs;
            kv_t *kb = kc + b * bstride + (size_t)h0 * NC * bs * 8 + off0 * 8;
            kv_t *vb = vc + b * bstride + (size_t)h0 * hd * bs + off0;
            for (int e = tid; e < nh * 16 * NC; e += PIPE_THREADS) { // key cells: (token o fastest, chunk g, head h)
                const int o = e & 15, g = (e >> 4) & (NC - 1), h = e >> (lnc + 4);
                st16_g(kb + ((size_t)(h * NC + g) * bs + o) * 8, pipe_key_cell(st, RB, NC, h, o, g));
            }
            for (int e = tid; e < nh * 2 * hd; e += PIPE_THREADS) { // values: (half gi fastest, dim d, head h)
                const int gi = e & 1, d = (e >> 1) & (hd - 1), h = e >> (lhd + 1);
                st16_g(vb + (size_t)(h * hd + d) * bs + gi * 8, pipe_value_run(st, RB, h, d, gi));
            }
        } else { // any slots (< 0: skipped): key cells per token; values 8 slots a vector where a half is a run
            for (int e = tid; e < nh * 16 * NC; e += PIPE_THREADS) {
                const int o = e & 15, g = (e >> 4) & (NC - 1), h = e >> (lnc + 4);
                const int slot = sl[o];
                if (slot < 0) continue;
                const int b = slot / bs, off = slot - b * bs;
                st16_g(kc + b * bstride + (((size_t)(h0 + h) * NC + g) * bs + off) * 8, pipe_key_cell(st, RB, NC, h, o, g));
            }
            bool run[2];
#pragma unroll
            for (int gi = 0; gi < 2; gi++) {
                const int r0 = sl[gi * 8];
                bool r = (bs & 7) == 0 && r0 >= 0 && (r0 & 7) == 0;
#pragma unroll
                for (int q = 1; q < 8; q++) r = r && sl[gi * 8 + q] == r0 + q;
                run[gi] = r;
            }
            for (int e = tid; e < nh * 2 * hd; e += PIPE_THREADS) {
                const int gi = e & 1, d = (e >> 1) & (hd - 1), h = e >> (lhd + 1);
                if (run[gi]) {
                    const int slot = sl[gi * 8], b = slot / bs, off = slot - b * bs;
                    st16_g(vc + b * bstride + ((size_t)(h0 + h) * hd + d) * bs + off, pipe_value_run(st, RB, h, d, gi));
                } else {
                    const unsigned char *base = (const unsigned char *)pipe_value(st, RB, h, d, gi * 8);
#pragma unroll
                    for (int q = 0; q < 8; q++) {
                        const int slot = sl[gi * 8 + q];
                        if (slot < 0) continue;
                        const int b = slot / bs, off = slot - b * bs;
                        vc[b * bstride + ((size_t)(h0 + h) * hd + d) * bs + off] =
                            from_f32<kv_t>(to_f32(*(const act_t *)(base + q * RB)));
                    }
                }
            }
        }
        __syncthreads();
    }
}
#endif

#ifdef INTERLEAVED
// hs: head slots of the rope rows (grid: ceil(T * hs * vpr / RKV_THREADS) blocks)
extern "C" __global__ void RKV_BOUNDS kiln_rope_wide(act_t *qkv, i64 row_stride, const int *pos, int T, int nq,
                                                     int nkv, int head_dim, int rot_dim, const float *inv_freq,
                                                     float mscale, const int *dyn_seq_len, int dyn_max, float dyn_base,
                                                     float dyn_factor, int hs) {
    pdl_wait();
    pdl_launch();
    const rope_args a = {pos, nq, nkv, head_dim, rot_dim, inv_freq, mscale, dyn_seq_len, dyn_max, dyn_base, dyn_factor};
    rope_rows<INTERLEAVED != 0>(qkv, row_stride, T, a, nq + nkv, hs, (int)(blockIdx.x * blockDim.x + threadIdx.x));
}

#ifdef KV
// Blocks [0, nb_rope): rope rows of the q heads (hs head slots); the rest:
// KV blocks of hg heads (rotate k in place, write k and v to the cache; the
// dynamic shared memory is theirs). The kinds touch disjoint elements, so
// they need no ordering.
extern "C" __global__ void RKV_BOUNDS
    kiln_rope_kv_write_wide(act_t *qkv, i64 row_stride, const int *pos, int T, int nq, int nkv, int head_dim,
                            int rot_dim, const float *inv_freq, float mscale, const int *dyn_seq_len, int dyn_max,
                            float dyn_base, float dyn_factor, kv_t *kc, kv_t *vc, const int *slots, int block_size,
                            float k_scale, float v_scale, int hs, const float *kv_scales, int nb_rope, int hg) {
    pdl_wait();
    pdl_launch();
    const rope_args a = {pos, nq, nkv, head_dim, rot_dim, inv_freq, mscale, dyn_seq_len, dyn_max, dyn_base, dyn_factor};
    const kv_args kv = {kc, vc, slots, nkv, head_dim, block_size, k_scale, v_scale, kv_scales};
    // (the KV blocks last: spread over the grid they measured slower, 40.0
    // against 37.4 us at 4096 tokens on the H200)
    const int b = (int)blockIdx.x;
    if (b < nb_rope) {
        rope_rows<INTERLEAVED != 0>(qkv, row_stride, T, a, nq, hs, b * RKV_THREADS + (int)threadIdx.x);
    } else {
        kv_block<true, INTERLEAVED != 0>(qkv + (size_t)nq * head_dim, qkv + (size_t)(nq + nkv) * head_dim, row_stride,
                                         T, b - nb_rope, hg, a, kv);
    }
}

// Blocks [0, nb_rope): rope rows of the q heads (hs head slots); the rest:
// tile blocks (rotate k in place, write k and v to the cache; the dynamic
// shared memory is theirs: kv_tile_smem).
extern "C" __global__ void TILE_BOUNDS
    kiln_rope_kv_write_tile(act_t *qkv, i64 row_stride, const int *pos, int T, int nq, int nkv, int head_dim,
                            int rot_dim, const float *inv_freq, float mscale, const int *dyn_seq_len, int dyn_max,
                            float dyn_base, float dyn_factor, kv_t *kc, kv_t *vc, const int *slots, int block_size,
                            float k_scale, float v_scale, int hs, const float *kv_scales, int nb_rope) {
    pdl_wait();
    pdl_launch();
    const rope_args a = {pos, nq, nkv, head_dim, rot_dim, inv_freq, mscale, dyn_seq_len, dyn_max, dyn_base, dyn_factor};
    const kv_args kv = {kc, vc, slots, nkv, head_dim, block_size, k_scale, v_scale, kv_scales};
    const int b = (int)blockIdx.x;
    if (b < nb_rope) {
        rope_rows<INTERLEAVED != 0>(qkv, row_stride, T, a, nq, hs, b * RKV_THREADS + (int)threadIdx.x);
    } else {
        kv_tile<true, INTERLEAVED != 0>(qkv + (size_t)nq * head_dim, qkv + (size_t)(nq + nkv) * head_dim, row_stride,
                                        T, b - nb_rope, a, kv);
    }
}
#endif
#endif
