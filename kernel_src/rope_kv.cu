// rope_kv.cu -- rotary embedding, paged KV-cache write, and the two fused.
// Semantics: engine/ops_cpu.h kiln_cpu_rope / kiln_cpu_kv_write (fp32 math;
// cos/sin from precise sincosf of (float)pos * inv_freq, times mscale;
// dynamic NTK recomputes inv_freq per token like kiln_rope_dynamic_inv_freq).
//
//   kiln_rope          qkv [T, row_stride]: q heads [0, nq) and k heads
//                      [nq, nq + nkv) rotated in place (ACT, INTERLEAVED)
//   kiln_kv_write      k, v rows [T, row_stride] -> caches at slots[t]
//                      (slot < 0: skipped), KV = bf16 | fp16 | fp8_e5m2 | fp8_e4m3
//                      (fp8 stores fp8(value / scale); scale = kv_scales[h]
//                      for keys and kv_scales[nkv + h] for values of KV head
//                      h, or k_scale / v_scale when kv_scales is NULL)
//   kiln_rope_kv_write both: rotate q and k in place, write the rotated k and
//                      v = qkv[:, (nq + nkv) * hd ...] into the cache
// Cache layout (x = 16 / sizeof(KV)):
//   key   [num_blocks, nkv, head_dim / x, block_size, x]
//   value [num_blocks, nkv, head_dim, block_size]
//
// Every thread does one independent piece of work (no shared memory, no
// barrier); a launch is a row of blocks of up to three kinds, in this order
// (the host, engine/cuda/ops_gpu.c, sizes each kind; a block is one kind):
//   rope rows   thread = (token t, 16-byte column v of the rotated part of a
//               head, head slot s of hs): it rotates heads s, s + hs, ...
//               (RI at a time, all their loads issued before any store or
//               sincosf) with the cos/sin of its column's frequencies,
//               computed once for all its heads; in the fused kernel the
//               rotated k heads also go to the key cache from registers.
//   key rows    (kv_write; in the fused kernel the unrotated key dims
//               [rot_dim, head_dim)) thread = (token, 16-byte column, head
//               slot of hs): heads s, s + hs, ... KI at a time.
//   value rows  thread = (16-token group, KV head, 16-byte column c, half):
//               loads 8 tokens x 16 bytes, transposes them in registers and,
//               when the 8 slots are one run starting at a multiple of 8
//               (block_size a multiple of 8), stores each of its dims as one
//               8-slot vector (16 bytes, FP8 8): the two halves of a 16-token
//               group are neighbouring lanes, so a warp writes whole 32-byte
//               sectors; other slots element by element.
// Thread indices are flat over a kind (g = block-in-kind * blockDim.x +
// threadIdx.x); threads past the end return at once.
#include "kiln_common.cuh"

typedef ACT act_t;
typedef vec16<act_t> AV;
#define RI 4 /* rope rows: heads per thread in flight */
#define KI 4 /* key rows: heads per thread in flight */
// Blocks of RKV_THREADS (engine/cuda/ops_gpu.c launches that many). The rope
// kernels are held to 96 registers, 5 blocks (20 warps) an SM, with 128 bytes
// of loads in flight per thread of the rope rows (the fused one takes 111
// unbounded; 80 spill); the fused one with an FP8 cache to 128 (4 blocks: it
// spills at 96).
#define RKV_THREADS 128
#define RKV_BOUNDS __launch_bounds__(RKV_THREADS, 5)
#define RKV_FUSED_BOUNDS __launch_bounds__(RKV_THREADS, sizeof(kv_t) == 1 ? 4 : 5)

template <class A, class B> struct same_type { static constexpr bool value = false; };
template <class A> struct same_type<A, A> { static constexpr bool value = true; };

struct rope_args {
    const int *pos;
    int nq, nkv, hd, rot;
    const float *inv_freq;
    float mscale;
    const int *dyn_seq_len;
    int dyn_max;
    float dyn_base, dyn_factor;
};

// No cache (kiln_rope): rope_rows writes no keys.
struct no_kv {
    KILN_DEV void locate(int, int &b, int &o) const { b = -1, o = 0; }
    KILN_DEV size_t key_at(int, int, int) const { return 0; }
    KILN_DEV void key(size_t, int, const uint4 &) const {}
};

// Rope rows: thread g < T * hs * vpr (see the top of the file). KVA::locate
// gives the cache block and offset of token t (block < 0: no key write),
// KVA::key_at the key cache index of its dim d in key head 0 and KVA::key
// writes AV::N rotated elements of key head hk there. The loads of a round of
// RI heads go out before any cos / sin is computed; then one frequency at a
// time: its sincosf, and the elements it rotates in every head of the round
// (so few values are live beside the loaded vectors).
template <bool ILV, class KVA>
KILN_DEV void rope_rows(act_t *qkv, i64 row_stride, int T, const rope_args &a, int hs, int g, const KVA &kv) {
    constexpr int N = AV::N, NF = ILV ? N / 2 : N; // elements per vector, frequencies per column
    const int half = a.rot / 2;
    const int vpr = ILV ? a.rot / N : half / N; // columns per head
    const int P = hs * vpr;                     // threads per token
    const int t = g / P;
    if (t >= T) return;
    const int p = g - t * P, s = p / vpr, v = p - s * vpr, f0 = v * NF;
    const int nh = a.nq + a.nkv;
    act_t *row = qkv + (size_t)t * row_stride + (size_t)v * N;
    const float pos = (float)a.pos[t];
    float inv[NF];
#pragma unroll
    for (int k = 0; k < NF; k++) inv[k] = a.inv_freq[f0 + k];
    const int dyn = a.dyn_seq_len ? a.dyn_seq_len[t] : 0;
    int kb, ko;
    kv.locate(t, kb, ko);
    const size_t klo = kv.key_at(kb, ko, v * N), khi = ILV ? 0 : kv.key_at(kb, ko, v * N + half);
    for (int h0 = s; h0 < nh; h0 += RI * hs) {
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
        if (h0 == s && a.dyn_seq_len && dyn > a.dyn_max) { // dynamic NTK: this token's frequencies
            double f = (double)a.dyn_factor;
            double b = (double)a.dyn_base * pow((f * dyn / a.dyn_max) - (f - 1), (double)a.rot / (a.rot - 2));
#pragma unroll
            for (int k = 0; k < NF; k++) {
                float ex = (float)(2 * (f0 + k)) / (float)a.rot;
                inv[k] = 1.0f / powf((float)b, ex);
            }
        }
#pragma unroll
        for (int k = 0; k < NF; k++) {
            float sv, cv;
            sincosf(pos * inv[k], &sv, &cv);
            const float c = cv * a.mscale, sn = sv * a.mscale;
#pragma unroll
            for (int u = 0; u < RI; u++) {
                if (h0 + u * hs >= nh) continue;
                if (ILV) {
                    const float x0 = lo[u].get(2 * k), x1 = lo[u].get(2 * k + 1);
                    lo[u].set(2 * k, x0 * c - x1 * sn);
                    lo[u].set(2 * k + 1, x1 * c + x0 * sn);
                } else {
                    const float x0 = lo[u].get(k), x1 = hi[u].get(k);
                    lo[u].set(k, x0 * c - x1 * sn);
                    hi[u].set(k, x1 * c + x0 * sn);
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
            if (kb >= 0 && h >= a.nq) { // a k head: the rounded rotated values into the key cache
                kv.key(klo, h - a.nq, lo[u].v);
                if (!ILV) kv.key(khi, h - a.nq, hi[u].v);
            }
        }
    }
}

#ifdef KV
typedef KV kv_t;
#define KV_X (16 / (int)sizeof(kv_t))

KILN_DEV float kv_in(float v, float scale) { return sizeof(kv_t) == 1 ? v / scale : v; }
KILN_DEV float head_scale(const float *s, float dflt, int i) { return s ? s[i] : dflt; }

// AV::N activations (one vector) -> AV::N cache elements at p (16, 8 or 4
// bytes, p aligned to that)
KILN_DEV void put_kv(kv_t *p, const uint4 &x, float scale) {
    if (same_type<act_t, kv_t>::value) {
        st16(p, x);
    } else {
        union { uint4 u; kv_t e[16 / sizeof(kv_t)]; } o;
        AV a;
        a.v = x;
#pragma unroll
        for (int q = 0; q < AV::N; q++) o.e[q] = from_f32<kv_t>(kv_in(a.get(q), scale));
        constexpr int B = AV::N * (int)sizeof(kv_t);
        if (B == 16) st16(p, o.u);
        else if (B == 8) *(uint2 *)p = make_uint2(o.u.x, o.u.y);
        else *(u32 *)p = o.u.x;
    }
}

// 32-bit word i of a vector (i a constant once unrolled)
KILN_DEV u32 word(const uint4 &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// Element q of an activation vector as a cache element (a 16-bit cache of the
// activation dtype takes the bits as they are)
KILN_DEV kv_t to_kv(const uint4 &x, int q, float scale) {
    kv_t r;
    if (same_type<act_t, kv_t>::value && sizeof(kv_t) == 2) {
        r.x = (u16)(word(x, q >> 1) >> ((q & 1) * 16));
    } else {
        AV a;
        a.v = x;
        r = from_f32<kv_t>(kv_in(a.get(q), scale));
    }
    return r;
}

struct kv_args {
    kv_t *kc, *vc;
    const int *slots;
    int nkv, hd, bs;
    float ks, vs;
    const float *scales;
    KILN_DEV void locate(int t, int &b, int &o) const {
        const int slot = slots[t];
        b = slot < 0 ? -1 : slot / bs;
        o = slot < 0 ? 0 : slot - b * bs;
    }
    // key cache index of dim d of key head 0 of the token at (block b,
    // offset o); key head hk is hk * hd * bs elements on
    KILN_DEV size_t key_at(int b, int o, int d) const {
        return (((size_t)b * nkv * (size_t)(hd / KV_X) + (unsigned)d / KV_X) * bs + o) * KV_X + (unsigned)d % KV_X;
    }
    // AV::N elements of key head hk at key_at index i
    KILN_DEV void key(size_t i, int hk, const uint4 &x) const {
        put_kv(kc + i + (size_t)hk * hd * bs, x, head_scale(scales, ks, hk));
    }
};

// Key rows: thread g < T * hs * (head_dim / N - c0); columns [c0, head_dim / N)
// of the key heads at k.
KILN_DEV void key_rows(const act_t *k, i64 row_stride, int T, int c0, int hs, int g, const kv_args &kv) {
    const int vpr = kv.hd / AV::N - c0, P = hs * vpr;
    const int t = g / P;
    if (t >= T) return;
    const int p = g - t * P, s = p / vpr, d = (c0 + p - s * vpr) * AV::N;
    int kb, ko;
    kv.locate(t, kb, ko);
    if (kb < 0) return;
    const act_t *row = k + (size_t)t * row_stride + d;
    const size_t ki = kv.key_at(kb, ko, d);
    for (int h0 = s; h0 < kv.nkv; h0 += KI * hs) {
        uint4 x[KI];
#pragma unroll
        for (int u = 0; u < KI; u++)
            if (h0 + u * hs < kv.nkv) x[u] = ld16(row + (size_t)(h0 + u * hs) * kv.hd);
#pragma unroll
        for (int u = 0; u < KI; u++)
            if (h0 + u * hs < kv.nkv) kv.key(ki, h0 + u * hs, x[u]);
    }
}

// Value rows: thread g < ceil(T / 16) * nkv * (head_dim / N) * 2.
KILN_DEV void value_rows(const act_t *v, i64 row_stride, int T, int g, const kv_args &kv) {
    const int CV = kv.hd / AV::N;
    const int jh = g & 1;
    int r = g >> 1;
    const int c = r % CV;
    r /= CV;
    const int hk = r % kv.nkv, t0 = (r / kv.nkv) * 16 + jh * 8;
    if (t0 >= T) return;
    const int n = min(8, T - t0);
    const act_t *src = v + (size_t)t0 * row_stride + (size_t)hk * kv.hd + c * AV::N;
    uint4 x[8];
    int sl[8]; // -1 past T
#pragma unroll
    for (int u = 0; u < 8; u++) {
        sl[u] = -1;
        x[u] = make_uint4(0, 0, 0, 0);
        if (u < n) {
            x[u] = ld16(src + (size_t)u * row_stride);
            sl[u] = kv.slots[t0 + u];
        }
    }
    const float vsh = head_scale(kv.scales, kv.vs, kv.nkv + hk);
    // one aligned run of 8 slots inside one block (n < 8 leaves sl[7] == -1)
    bool run = (kv.bs & 7) == 0 && sl[0] >= 0 && (sl[0] & 7) == 0;
#pragma unroll
    for (int u = 1; u < 8; u++) run = run && sl[u] == sl[0] + u;
    // value cache index of dim c * N of token u (of the run: at[0])
    size_t at[8];
#pragma unroll
    for (int u = 0; u < 8; u++) {
        const int slot = max(sl[u], 0), b = slot / kv.bs, o = slot - b * kv.bs;
        at[u] = (((size_t)b * kv.nkv + hk) * kv.hd + c * AV::N) * kv.bs + o;
        if (run) break; // the run needs at[0] only
    }
#pragma unroll
    for (int q = 0; q < AV::N; q++) { // dim c * N + q of the 8 tokens, each converted once
        union { uint4 u; kv_t e[16 / sizeof(kv_t)]; } pk;
#pragma unroll
        for (int u = 0; u < 8; u++) pk.e[u] = to_kv(x[u], q, vsh);
        kv_t *dst = kv.vc + (size_t)q * kv.bs;
        if (run) { // 8 slots: 16 bytes (FP8 8), aligned as the run starts at a multiple of 8
            if (sizeof(kv_t) == 2) st16(dst + at[0], pk.u);
            else *(uint2 *)(dst + at[0]) = make_uint2(pk.u.x, pk.u.y);
        } else {
#pragma unroll
            for (int u = 0; u < 8; u++)
                if (sl[u] >= 0) dst[at[u]] = pk.e[u];
        }
    }
}

// Blocks [0, nb_key): key rows of every column (hs head slots); the rest:
// value rows.
extern "C" __global__ void __launch_bounds__(RKV_THREADS)
    kiln_kv_write(kv_t *kc, kv_t *vc, const act_t *k, const act_t *v, i64 row_stride, const int *slots, int T, int nkv,
                  int head_dim, int block_size, float k_scale, float v_scale, int hs, const float *kv_scales,
                  int nb_key) {
    pdl_wait();
    pdl_launch();
    const kv_args kv = {kc, vc, slots, nkv, head_dim, block_size, k_scale, v_scale, kv_scales};
    const int b = (int)blockIdx.x;
    if (b < nb_key) key_rows(k, row_stride, T, 0, hs, b * (int)blockDim.x + (int)threadIdx.x, kv);
    else value_rows(v, row_stride, T, (b - nb_key) * (int)blockDim.x + (int)threadIdx.x, kv);
}
#endif

#ifdef INTERLEAVED
// hs: head slots of the rope rows (grid: ceil(T * hs * vpr / blockDim.x) blocks)
extern "C" __global__ void RKV_BOUNDS kiln_rope(act_t *qkv, i64 row_stride, const int *pos, int T, int nq, int nkv,
                                                int head_dim, int rot_dim, const float *inv_freq, float mscale,
                                                const int *dyn_seq_len, int dyn_max, float dyn_base, float dyn_factor,
                                                int hs) {
    pdl_wait();
    pdl_launch();
    const rope_args a = {pos, nq, nkv, head_dim, rot_dim, inv_freq, mscale, dyn_seq_len, dyn_max, dyn_base, dyn_factor};
    rope_rows<INTERLEAVED != 0>(qkv, row_stride, T, a, hs, (int)(blockIdx.x * blockDim.x + threadIdx.x), no_kv());
}

#ifdef KV
// Blocks [0, nb_rope): rope rows (hs head slots); [nb_rope, nb_rope + nb_key):
// key rows of the unrotated dims [rot_dim, head_dim) (hs_key head slots; none
// when rot_dim == head_dim); the rest: value rows. The kinds touch disjoint
// elements, so they need no ordering.
extern "C" __global__ void RKV_FUSED_BOUNDS
    kiln_rope_kv_write(act_t *qkv, i64 row_stride, const int *pos, int T, int nq, int nkv, int head_dim, int rot_dim,
                       const float *inv_freq, float mscale, const int *dyn_seq_len, int dyn_max, float dyn_base,
                       float dyn_factor, kv_t *kc, kv_t *vc, const int *slots, int block_size, float k_scale,
                       float v_scale, int hs, const float *kv_scales, int nb_rope, int hs_key, int nb_key) {
    pdl_wait();
    pdl_launch();
    const rope_args a = {pos, nq, nkv, head_dim, rot_dim, inv_freq, mscale, dyn_seq_len, dyn_max, dyn_base, dyn_factor};
    const kv_args kv = {kc, vc, slots, nkv, head_dim, block_size, k_scale, v_scale, kv_scales};
    const int b = (int)blockIdx.x, tid = (int)threadIdx.x, nt = (int)blockDim.x;
    if (b < nb_rope) {
        rope_rows<INTERLEAVED != 0>(qkv, row_stride, T, a, hs, b * nt + tid, kv);
    } else if (b < nb_rope + nb_key) {
        key_rows(qkv + (size_t)nq * head_dim, row_stride, T, rot_dim / AV::N, hs_key, (b - nb_rope) * nt + tid, kv);
    } else {
        value_rows(qkv + (size_t)(nq + nkv) * head_dim, row_stride, T, (b - nb_rope - nb_key) * nt + tid, kv);
    }
}
#endif
#endif
