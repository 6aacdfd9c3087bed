// embed.cu -- embedding gather, row gathers and dtype casts.
//   kiln_embed:       out [T, H] (ACT) = W[ids[t] - vocab_start] (W dtype) for
//                     ids in [vocab_start, vocab_start + V_local), else 0
//                     (vocabulary-parallel shards sum to the full embedding).
//   kiln_gather_rows: out [n, dim] = x[rows[i], :]               (ACT elements)
//   kiln_gather_last: out [n_seqs, dim] = x[qstart[s + 1] - 1, :] (logits of the
//                     last position of each packed sequence; zeros for an
//                     empty one)
//   kiln_cast:        dst [n] (DST) = src [n] (SRC); SRC/DST may be FP8 (E4M3,
//                     E5M2: the conversions of the KV cache write and read)
//   kiln_step_feed:   a step's metadata block read from pinned host memory
//                     into the device (engine/cuda/exec_gpu.c), with the fed
//                     tokens gathered from the previous step's sampled ids
// Semantics: engine/ops_cpu.h kiln_cpu_embed / kiln_cpu_gather_rows.
#include "kiln_common.cuh"

#ifdef ACT
typedef ACT act_t;

#define COPY_V 4 // 16-byte pieces a thread loads before it stores any
// A block's row copy: dst[0, dim) = src[0, dim), or zeros when src is null;
// in 16-byte pieces, COPY_V a thread in flight, where the row allows it (a
// loop of one load after another's store waits out each load: ~8 us for a
// 4096-wide bf16 row, H200 trace, 2026-12-02), else element by element.
__device__ __forceinline__ void copy_row(act_t *__restrict__ dst, const act_t *__restrict__ src, int dim) {
    const size_t bytes = (size_t)dim * sizeof(act_t);
    if ((bytes & 15) == 0 && (((size_t)dst | (size_t)src) & 15) == 0) {
        const int n = (int)(bytes / 16);
        for (int i0 = threadIdx.x; i0 < n; i0 += COPY_V * blockDim.x) {
            uint4 v[COPY_V];
#pragma unroll
            for (int k = 0; k < COPY_V; k++) {
                const int i = i0 + k * blockDim.x;
                v[k] = make_uint4(0, 0, 0, 0);
                if (src && i < n) v[k] = ld16((const char *)src + 16 * (size_t)i);
            }
#pragma unroll
            for (int k = 0; k < COPY_V; k++) {
                const int i = i0 + k * blockDim.x;
                if (i < n) st16((char *)dst + 16 * (size_t)i, v[k]);
            }
        }
    } else {
        for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src ? src[i] : from_f32<act_t>(0.0f);
    }
}
#endif

#if defined(ACT) && defined(W)
typedef W w_t;
template <class A, class B> struct emb_same { static constexpr bool v = false; };
template <class A> struct emb_same<A, A> { static constexpr bool v = true; };

// A block a row: W = ACT rows copied as they are (copy_row), else element by
// element through fp32.
extern "C" __global__ void kiln_embed(act_t *out, const int *ids, int T, const w_t *w, i64 V_local, int H,
                                      i64 vocab_start) {
    pdl_wait();
    pdl_launch();
    int t = blockIdx.x;
    if (t >= T) return;
    i64 r = (i64)ids[t] - vocab_start;
    act_t *o = out + (size_t)t * H;
    bool in = r >= 0 && r < V_local;
    const w_t *src = w + (size_t)(in ? r : 0) * H;
    if (emb_same<act_t, w_t>::v)
        copy_row(o, in ? reinterpret_cast<const act_t *>(src) : nullptr, H);
    else
        for (int i = threadIdx.x; i < H; i += blockDim.x) o[i] = from_f32<act_t>(in ? to_f32(src[i]) : 0.0f);
}
#endif

#ifdef ACT
extern "C" __global__ void kiln_gather_rows(act_t *out, const act_t *x, const int *rows, int n, int dim) {
    pdl_wait();
    pdl_launch();
    int i = blockIdx.x;
    if (i >= n) return;
    copy_row(out + (size_t)i * dim, x + (size_t)rows[i] * dim, dim);
}

extern "C" __global__ void kiln_gather_last(act_t *out, const act_t *x, const int *qstart, int n_seqs, int dim) {
    pdl_wait();
    pdl_launch();
    int s = blockIdx.x;
    if (s >= n_seqs) return;
    const int e = qstart[s + 1];
    act_t *o = out + (size_t)s * dim;
    // an empty sequence has no last position: its row is zeros (not its neighbour's row)
    copy_row(o, e > qstart[s] ? x + (size_t)(e - 1) * dim : nullptr, dim);
}
#endif

#if defined(SRC) && defined(DST)
typedef SRC src_t;
typedef DST dst_t;
extern "C" __global__ void kiln_cast(dst_t *dst, const src_t *src, i64 n) {
    pdl_wait();
    pdl_launch();
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = from_f32<dst_t>(to_f32(src[i]));
}
#endif

// kiln_step_feed(dmeta, hmeta, n, tok_off, feed_off, n_feed, res): bytes [0, n)
// of the block at hmeta -- pinned host memory, which kernels read through the
// same address under unified addressing -- into dmeta, in 16-byte units (n,
// tok_off and feed_off multiples of 16), except the first n_feed 4-byte words
// at tok_off: tokens[i] = res[feed[i]], feed being the n_feed words at
// feed_off of the host block. One kernel in place of a host-to-device copy and
// a gather: no copy engine between the sampling and the next step. Each
// thread's first unit is read from the host before the wait on the kernel
// before (the host wrote the block before the launch); the device block is
// written after it (the previous step's graph reads it, the sampling writes
// res). It never signals its dependents early: kiln's kernels may read the
// metadata before their own wait (a decode step's positions and block tables:
// rope's cos / sin, attention's first KV tiles), as they may after a copy, so
// the next kernel launches only once every block here has stored and fenced.
extern "C" __global__ void kiln_step_feed(char *dmeta, const char *hmeta, i64 n, i64 tok_off, i64 feed_off,
                                          int n_feed, const int *res) {
    const i64 units = n >> 4, stride = (i64)gridDim.x * blockDim.x;
    const i64 tok_end = tok_off + (((i64)n_feed * 4 + 15) & ~(i64)15);
    i64 u = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    uint4 first = make_uint4(0, 0, 0, 0);
    if (u < units) first = ld16(hmeta + 16 * u);
    pdl_wait_only(); // not pdl_wait(): never the early signal of PDL_EARLY
    for (; u < units; u += stride) {
        const i64 o = 16 * u;
        uint4 v = o == 16 * ((i64)blockIdx.x * blockDim.x + threadIdx.x) ? first : ld16(hmeta + o);
        if (o >= tok_off && o < tok_end) { // fed tokens, else the host's words
            u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const i64 k = (o - tok_off) / 4 + j;
                if (k < n_feed) w[j] = (u32)res[reinterpret_cast<const int *>(hmeta + feed_off)[k]];
            }
            v = make_uint4(w[0], w[1], w[2], w[3]);
        }
        st16(dmeta + o, v);
    }
    __threadfence();
}
