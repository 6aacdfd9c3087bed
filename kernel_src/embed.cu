// embed.cu -- embedding gather, row gathers and dtype casts.
//   kiln_embed:       out [T, H] (ACT) = W[ids[t] - vocab_start] (W dtype) for
//                     ids in [vocab_start, vocab_start + V_local), else 0
//                     (vocabulary-parallel shards sum to the full embedding).
//   kiln_gather_rows: out [n, dim] = x[rows[i], :]               (ACT elements)
//   kiln_gather_last: out [n_seqs, dim] = x[qstart[s + 1] - 1, :] (logits of the
//                     last position of each packed sequence)
//   kiln_cast:        dst [n] (DST) = src [n] (SRC); SRC/DST may be FP8 (E4M3,
//                     E5M2: the conversions of the KV cache write and read)
// Semantics: engine/ops_cpu.h kiln_cpu_embed / kiln_cpu_gather_rows.
#include "kiln_common.cuh"

#ifdef ACT
typedef ACT act_t;
#endif

#if defined(ACT) && defined(W)
typedef W w_t;
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
    for (int i = threadIdx.x; i < H; i += blockDim.x) o[i] = from_f32<act_t>(in ? to_f32(src[i]) : 0.0f);
}
#endif

#ifdef ACT
// one block per output row; 16-byte copies when the row allows it
__device__ __forceinline__ void copy_row(act_t *__restrict__ dst, const act_t *__restrict__ src, int dim) {
    size_t bytes = (size_t)dim * sizeof(act_t);
    if ((bytes & 15) == 0 && (((size_t)dst | (size_t)src) & 15) == 0) {
        int n = (int)(bytes / 16);
        for (int i = threadIdx.x; i < n; i += blockDim.x) st16((char *)dst + 16 * (size_t)i, ld16((const char *)src + 16 * (size_t)i));
    } else {
        for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
    }
}

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
    copy_row(out + (size_t)s * dim, x + (size_t)(qstart[s + 1] - 1) * dim, dim);
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
