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
//   kiln_rope_kv_write both: rotate q and k in place, then write the rotated k
//                      and v = qkv[:, (nq + nkv) * hd ...] into the cache
// Cache layout (x = 16 / sizeof(KV)):
//   key   [num_blocks, nkv, head_dim / x, block_size, x]
//   value [num_blocks, nkv, head_dim, block_size]
// Grid: ceil(T / tt) blocks of tt tokens (tt <= 16); every block handles all
// heads of its tokens so cos/sin are computed once per (token, frequency).
// Dynamic shared memory: rope: tt * rot_dim / 2 * 8 bytes; kv: the V staging
// of one group of heads (VT_STRIDE, VT_BUDGET below).
// kiln_kv_write may also split heads over gridDim.y (== nkv).
#include "kiln_common.cuh"

typedef ACT act_t;
typedef vec16<act_t> AV;
#define RU 4 /* rope: tokens per thread in flight */

#include "rope_args.cuh"

template <bool ILV>
__device__ __forceinline__ void rope_body(act_t *qkv, i64 row_stride, int t0, int ntok, const rope_args &a, float2 *cs) {
    const int half = a.rot / 2;
    for (int e = threadIdx.x; e < ntok * half; e += blockDim.x) {
        int j = e / half, i = e - j * half, t = t0 + j;
        float inv = a.inv_freq[i];
        if (a.dyn_seq_len && a.dyn_seq_len[t] > a.dyn_max) {
            double f = (double)a.dyn_factor;
            double b = (double)a.dyn_base * pow((f * a.dyn_seq_len[t] / a.dyn_max) - (f - 1), (double)a.rot / (a.rot - 2));
            float ex = (float)(2 * i) / (float)a.rot;
            inv = 1.0f / powf((float)b, ex);
        }
        float ang = (float)a.pos[t] * inv, s, c;
        sincosf(ang, &s, &c);
        cs[e] = make_float2(c * a.mscale, s * a.mscale);
    }
    // cos / sin come from the positions and frequencies (the host's and the
    // model's): computed while the previous kernel drains; qkv is its output
    pdl_wait();
    pdl_launch();
    __syncthreads();
    // Each thread keeps one vector position v of a head (so its cos/sin
    // column is fixed) and walks heads hs, hs + hstride, .. and the block's
    // tokens, RU tokens at a time with all their loads issued before any
    // store (no index division inside the loops).
    const int nh = a.nq + a.nkv;
    const int vpr = ILV ? a.rot / AV::N : half / AV::N; // vectors per head this thread set covers
    const int hstride = blockDim.x / vpr, v = threadIdx.x % vpr, hs = threadIdx.x / vpr;
    // (threads past hstride * vpr idle; no early return: the fused kernel
    // synchronizes after this)
    for (int h = hs < hstride ? hs : nh; h < nh; h += hstride) {
        for (int j0 = 0; j0 < ntok; j0 += RU) {
            act_t *p[RU];
            AV lo[RU], hi[RU];
#pragma unroll
            for (int u = 0; u < RU; u++) {
                p[u] = qkv + (size_t)(t0 + j0 + u) * row_stride + (size_t)h * a.hd + v * AV::N;
                if (j0 + u < ntok) {
                    lo[u].v = ld16(p[u]);
                    if (!ILV) hi[u].v = ld16(p[u] + half);
                }
            }
#pragma unroll
            for (int u = 0; u < RU; u++) {
                if (j0 + u >= ntok) continue;
                if (!ILV) {
                    const float2 *c = cs + (j0 + u) * half + v * AV::N;
#pragma unroll
                    for (int k = 0; k < AV::N; k++) {
                        float2 q = c[k], y;
                        rope_rot(lo[u].get(k), hi[u].get(k), q.x, q.y, y.x, y.y);
                        lo[u].set(k, y.x);
                        hi[u].set(k, y.y);
                    }
                    st16(p[u], lo[u].v);
                    st16(p[u] + half, hi[u].v);
                } else {
                    const float2 *c = cs + (j0 + u) * half + v * AV::N / 2;
#pragma unroll
                    for (int k = 0; k < AV::N; k += 2) {
                        float2 q = c[k / 2], y;
                        rope_rot(lo[u].get(k), lo[u].get(k + 1), q.x, q.y, y.x, y.y);
                        lo[u].set(k, y.x);
                        lo[u].set(k + 1, y.y);
                    }
                    st16(p[u], lo[u].v);
                }
            }
        }
    }
}

#ifdef KV
typedef KV kv_t;
#define KV_X (16 / (int)sizeof(kv_t))

__device__ __forceinline__ float kv_in(float v, float scale) { return sizeof(kv_t) == 1 ? v / scale : v; }
__device__ __forceinline__ float head_scale(const float *s, float dflt, int i) { return s ? s[i] : dflt; }

// V staging in shared memory: [heads of a group][head_dim][VT_STRIDE] ACT
// elements (tokens innermost; an even stride of 18 keeps 8-token runs 4-byte
// aligned and spreads a warp's column writes over the banks). A group is as
// many heads as fit in VT_BUDGET bytes (at least one; 40 KiB holds the 8 KV
// heads of head dim 128 in bf16 at once); the host sizes the dynamic shared
// memory with the same rule (kv_smem in engine/cuda/ops_gpu.c).
#define VT_STRIDE 18
#define VT_BUDGET 40960
#define KU 4 /* key chunks per thread in flight */
#define VU 4 /* value vectors per thread in flight */

// K and V of tokens [t0, t0 + ntok) (ntok <= 16) and heads [h0, h1) into the
// cache. k and v point at head 0 of token 0; rows of row_stride elements.
// Every thread issues up to KU (VU) loads before it stores anything.
__device__ __forceinline__ void kv_body(kv_t *kc, kv_t *vc, const act_t *k, const act_t *v, i64 row_stride,
                                        const int *slots, int t0, int ntok, int nkv, int h0, int h1, int hd, int bs,
                                        float ks, float vs, const float *scales, act_t *vt) {
    const int G = hd / KV_X; // key chunks per head
    const int nh = h1 - h0;
    constexpr int KC = KV_X / AV::N; // activation vectors per key chunk
    // groups of 8 tokens whose slots are one aligned run get one vector store per dim
    __shared__ int run8[2];
    if (threadIdx.x < 2) {
        int g0 = threadIdx.x * 8, ok = g0 + 8 <= ntok;
        int s0 = ok ? slots[t0 + g0] : -1;
        ok = ok && s0 >= 0 && (s0 & 7) == 0;
        for (int q = 1; q < 8 && ok; q++) ok = slots[t0 + g0 + q] == s0 + q;
        run8[threadIdx.x] = ok;
    }
    // keys: 16-byte chunks, tokens fastest (consecutive slots -> consecutive chunks)
    const int nk = ntok * nh * G;
    for (int e0 = threadIdx.x; e0 < nk; e0 += KU * blockDim.x) {
        AV x[KU][KC];
        size_t dst[KU];
        int h[KU];
        bool ok[KU];
#pragma unroll
        for (int u = 0; u < KU; u++) {
            int e = e0 + u * blockDim.x;
            ok[u] = e < nk;
            if (ok[u]) {
                int j = e % ntok, r = e / ntok, hl = r / G, g = r - hl * G;
                int t = t0 + j, slot = slots[t];
                h[u] = h0 + hl;
                const act_t *src = k + (size_t)t * row_stride + (size_t)h[u] * hd + g * KV_X;
#pragma unroll
                for (int c = 0; c < KC; c++) x[u][c].v = ld16(src + c * AV::N);
                int b = slot / bs, o = slot - b * bs;
                dst[u] = ((((size_t)b * nkv + h[u]) * G + g) * bs + o) * KV_X;
                ok[u] = slot >= 0;
            }
        }
#pragma unroll
        for (int u = 0; u < KU; u++) {
            if (!ok[u]) continue;
            const float ksh = head_scale(scales, ks, h[u]);
            union { uint4 v; kv_t e[KV_X]; } out;
#pragma unroll
            for (int c = 0; c < KC; c++)
#pragma unroll
                for (int q = 0; q < AV::N; q++) out.e[c * AV::N + q] = from_f32<kv_t>(kv_in(x[u][c].get(q), ksh));
            st16(kc + dst[u], out.v);
        }
    }
    // values: stage a group of heads as [head][dim][token] through shared
    // memory, then write runs of tokens
    const int vph = hd / AV::N;
    const int ng = (ntok + 7) / 8;
    const int hg = max(1, VT_BUDGET / (hd * VT_STRIDE * (int)sizeof(act_t)));
    for (int g0 = h0; g0 < h1; g0 += hg) {
        const int gn = min(hg, h1 - g0);
        const int nv = ntok * gn * vph;
        for (int e0 = threadIdx.x; e0 < nv; e0 += VU * blockDim.x) {
            AV x[VU];
            int at[VU];
#pragma unroll
            for (int u = 0; u < VU; u++) {
                int e = e0 + u * blockDim.x;
                at[u] = -1;
                if (e < nv) {
                    int j = e % ntok, r = e / ntok; // r = head-in-group * vph + vector
                    int hl = r / vph, c = r - hl * vph;
                    x[u].v = ld16(v + (size_t)(t0 + j) * row_stride + (size_t)(g0 + hl) * hd + c * AV::N);
                    at[u] = (hl * hd + c * AV::N) * VT_STRIDE + j;
                }
            }
#pragma unroll
            for (int u = 0; u < VU; u++) {
                if (at[u] < 0) continue;
                const act_t *xe = (const act_t *)&x[u].v;
#pragma unroll
                for (int q = 0; q < AV::N; q++) vt[at[u] + q * VT_STRIDE] = xe[q];
            }
        }
        __syncthreads();
        for (int e = threadIdx.x; e < ng * gn * hd; e += blockDim.x) {
            int gi = e % ng, rd = e / ng, hl = rd / hd, d = rd - hl * hd, j0 = gi * 8, h = g0 + hl;
            const act_t *src = vt + rd * VT_STRIDE + j0;
            const float vsh = head_scale(scales, vs, nkv + h);
            if (run8[gi]) {
                int slot = slots[t0 + j0], b = slot / bs, o = slot - b * bs;
                union { uint4 v; kv_t e[8]; } pk;
#pragma unroll
                for (int q = 0; q < 8; q++) pk.e[q] = from_f32<kv_t>(kv_in(to_f32(src[q]), vsh));
                kv_t *dst = vc + (((size_t)b * nkv + h) * hd + d) * bs + o;
                if (sizeof(kv_t) == 2) st16_g(dst, pk.v);
                else st8_g(dst, pk.v.x, pk.v.y);
            } else {
                for (int q = 0; q < 8 && j0 + q < ntok; q++) {
                    int slot = slots[t0 + j0 + q];
                    if (slot < 0) continue;
                    int b = slot / bs, o = slot - b * bs;
                    vc[(((size_t)b * nkv + h) * hd + d) * bs + o] = from_f32<kv_t>(kv_in(to_f32(src[q]), vsh));
                }
            }
        }
        __syncthreads();
    }
}

extern "C" __global__ void kiln_kv_write(kv_t *kc, kv_t *vc, const act_t *k, const act_t *v, i64 row_stride,
                                         const int *slots, int T, int nkv, int head_dim, int block_size, float k_scale,
                                         float v_scale, int tt, const float *kv_scales) {
    pdl_wait();
    pdl_launch();
    extern __shared__ float4 smem4[];
    int t0 = blockIdx.x * tt, ntok = min(tt, T - t0);
    if (ntok <= 0) return;
    // one head per block row of the grid (gridDim.y == nkv) or all heads (gridDim.y == 1)
    int h0 = gridDim.y == 1 ? 0 : blockIdx.y, h1 = gridDim.y == 1 ? nkv : blockIdx.y + 1;
    kv_body(kc, vc, k, v, row_stride, slots, t0, ntok, nkv, h0, h1, head_dim, block_size, k_scale, v_scale, kv_scales,
            (act_t *)smem4);
}
#endif

#if defined(KV) && defined(INTERLEAVED)
// kiln_rope_kv_write_dec: the fused rope + KV write for decode-sized steps
// (the host: at most $KILN_ROPE_DEC_MAX tokens): a block per token, a thread
// per item of it -- a q or k head's pair of vectors (v, v + rot / 2N) when
// rotating halves, one vector when interleaved, a k vector past rot_dim, a v
// vector -- with nothing but its own loads, math and stores: cos / sin from
// the position (before the wait on the previous kernel: the host's and the
// model's inputs), rotated q and k stored back, k (rounded to ACT, as the
// fused kernel re-reads it) and v straight into the cache. No barrier, no
// shared memory: one load round trip where kiln_rope_kv_write takes several.
// Same semantics (and cos / sin / products as rope_body); the host launches
// blockDim.x >= the items of a token ((nq + nkv) * (rotated + passed
// vectors) + nkv * head_dim / N).
template <int NB> struct kv_pack { kv_t e[NB]; };
__device__ __forceinline__ void kv_store(kv_t *dst, const kv_pack<AV::N> &p) {
    constexpr int bytes = AV::N * (int)sizeof(kv_t);
    if (bytes == 16) *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(&p);
    else if (bytes == 8) *reinterpret_cast<uint2 *>(dst) = *reinterpret_cast<const uint2 *>(&p);
    else if (bytes == 4) *reinterpret_cast<unsigned *>(dst) = *reinterpret_cast<const unsigned *>(&p);
    else
#pragma unroll
        for (int q = 0; q < AV::N; q++) dst[q] = p.e[q];
}

extern "C" __global__ void kiln_rope_kv_write_dec(act_t *qkv, i64 row_stride, const int *pos, int T, int nq, int nkv,
                                                  int head_dim, int rot_dim, const float *inv_freq, float mscale,
                                                  const int *dyn_seq_len, int dyn_max, float dyn_base,
                                                  float dyn_factor, kv_t *kc, kv_t *vc, const int *slots,
                                                  int block_size, float k_scale, float v_scale,
                                                  const float *kv_scales) {
    constexpr bool ILV = INTERLEAVED != 0;
    constexpr int N = AV::N;
    const int t = blockIdx.x, hd = head_dim, half = rot_dim / 2;
    const int rp = ILV ? rot_dim / N : half / N, pp = (hd - rot_dim) / N, per = rp + pp;
    const int n_rk = (nq + nkv) * per, n_items = n_rk + nkv * (hd / N);
    int it = threadIdx.x;
    if (t >= T || it >= n_items) return;
    const int slot = slots[t];
    // this item: head h, and for rotated items the first frequency index f0
    // (NC = the frequencies it uses: N rotating halves, N / 2 interleaved)
    constexpr int NC = ILV ? N / 2 : N;
    int h = 0, r = 0;
    if (it < n_rk) h = it / per, r = it - h * per;
    const bool rot_item = it < n_rk && r < rp;
    float2 cs[NC];
    if (rot_item) {
        const int f0 = ILV ? r * (N / 2) : r * N;
        const float p = (float)pos[t];
        const bool dyn = dyn_seq_len && dyn_seq_len[t] > dyn_max;
        double b = 0.0;
        if (dyn) {
            double f = (double)dyn_factor;
            b = (double)dyn_base * pow((f * dyn_seq_len[t] / dyn_max) - (f - 1), (double)rot_dim / (rot_dim - 2));
        }
#pragma unroll
        for (int k = 0; k < NC; k++) {
            const int i = f0 + k;
            float inv = inv_freq[i];
            if (dyn) {
                float ex = (float)(2 * i) / (float)rot_dim;
                inv = 1.0f / powf((float)b, ex);
            }
            float ang = p * inv, sn, cn;
            sincosf(ang, &sn, &cn);
            cs[k] = make_float2(cn * mscale, sn * mscale);
        }
    }
    pdl_wait();
    pdl_launch();
    const int b = slot / block_size, o = slot - b * block_size;
    const int G = hd / KV_X; // key chunks of a head
    auto put_k = [&](int kh, int d0, const AV &x) { // N elements of key head kh from dim d0
        const float ksh = head_scale(kv_scales, k_scale, kh);
        kv_pack<N> pk;
#pragma unroll
        for (int q = 0; q < N; q++) pk.e[q] = from_f32<kv_t>(kv_in(x.get(q), ksh));
        kv_store(kc + ((((size_t)b * nkv + kh) * G + d0 / KV_X) * block_size + o) * KV_X + d0 % KV_X, pk);
    };
    act_t *row = qkv + (size_t)t * row_stride;
    if (it < n_rk) {
        act_t *hr = row + (size_t)h * hd;
        const bool is_k = h >= nq;
        if (rot_item) {
            if (!ILV) {
                AV lo, hi;
                lo.v = ld16(hr + r * N);
                hi.v = ld16(hr + half + r * N);
#pragma unroll
                for (int k = 0; k < N; k++) {
                    float y0, y1;
                    rope_rot(lo.get(k), hi.get(k), cs[k].x, cs[k].y, y0, y1);
                    lo.set(k, y0);
                    hi.set(k, y1);
                }
                st16(hr + r * N, lo.v);
                st16(hr + half + r * N, hi.v);
                if (is_k && slot >= 0) put_k(h - nq, r * N, lo), put_k(h - nq, half + r * N, hi);
            } else {
                AV x;
                x.v = ld16(hr + r * N);
#pragma unroll
                for (int k = 0; k < N; k += 2) {
                    float y0, y1;
                    rope_rot(x.get(k), x.get(k + 1), cs[k / 2].x, cs[k / 2].y, y0, y1);
                    x.set(k, y0);
                    x.set(k + 1, y1);
                }
                st16(hr + r * N, x.v);
                if (is_k && slot >= 0) put_k(h - nq, r * N, x);
            }
        } else if (is_k && slot >= 0) { // a key vector past rot_dim: as it is
            const int d0 = rot_dim + (r - rp) * N;
            AV x;
            x.v = ld16(hr + d0);
            put_k(h - nq, d0, x);
        }
    } else if (slot >= 0) { // a value vector
        const int e = it - n_rk, vh = e / (hd / N), d0 = (e - vh * (hd / N)) * N;
        AV x;
        x.v = ld16(row + (size_t)(nq + nkv + vh) * hd + d0);
        const float vsh = head_scale(kv_scales, v_scale, nkv + vh);
#pragma unroll
        for (int q = 0; q < N; q++)
            vc[(((size_t)b * nkv + vh) * hd + d0 + q) * block_size + o] = from_f32<kv_t>(kv_in(x.get(q), vsh));
    }
}
#endif

#ifdef INTERLEAVED
extern "C" __global__ void kiln_rope(act_t *qkv, i64 row_stride, const int *pos, int T, int nq, int nkv, int head_dim,
                                     int rot_dim, const float *inv_freq, float mscale, const int *dyn_seq_len,
                                     int dyn_max, float dyn_base, float dyn_factor, int tt) {
    // pdl_wait: in rope_body, after cos / sin
    extern __shared__ float4 smem4[];
    int t0 = blockIdx.x * tt, ntok = min(tt, T - t0);
    if (ntok <= 0) return;
    rope_args a = {pos, nq, nkv, head_dim, rot_dim, inv_freq, mscale, dyn_seq_len, dyn_max, dyn_base, dyn_factor};
    rope_body<INTERLEAVED != 0>(qkv, row_stride, t0, ntok, a, (float2 *)smem4);
}

#ifdef KV
extern "C" __global__ void kiln_rope_kv_write(act_t *qkv, i64 row_stride, const int *pos, int T, int nq, int nkv,
                                              int head_dim, int rot_dim, const float *inv_freq, float mscale,
                                              const int *dyn_seq_len, int dyn_max, float dyn_base, float dyn_factor,
                                              kv_t *kc, kv_t *vc, const int *slots, int block_size, float k_scale,
                                              float v_scale, int tt, const float *kv_scales) {
    // pdl_wait: in rope_body, after cos / sin
    extern __shared__ float4 smem4[];
    int t0 = blockIdx.x * tt, ntok = min(tt, T - t0);
    if (ntok <= 0) return;
    rope_args a = {pos, nq, nkv, head_dim, rot_dim, inv_freq, mscale, dyn_seq_len, dyn_max, dyn_base, dyn_factor};
    rope_body<INTERLEAVED != 0>(qkv, row_stride, t0, ntok, a, (float2 *)smem4);
    __syncthreads(); // rotated k is re-read below by other threads of this block
    const act_t *k = qkv + (size_t)nq * head_dim, *v = qkv + (size_t)(nq + nkv) * head_dim;
    kv_body(kc, vc, k, v, row_stride, slots, t0, ntok, nkv, 0, nkv, head_dim, block_size, k_scale, v_scale, kv_scales,
            (act_t *)smem4);
}
#endif
#endif
