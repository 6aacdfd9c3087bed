/*
 * ops_cpu.h -- the CPU variant of every op kind, in plain C with fp32
 * compute over bf16 / fp16 / fp32 weights. These are the reference every CUDA
 * kernel is tested against: keep them simple and obviously right.
 *
 * Shapes are written outermost first. Activations are fp32, row-major, with
 * an explicit row stride (in elements) where an op reads a slice of a wider
 * row (q, k and v inside a fused qkv row).
 *
 * Paged KV cache layout (shared with the CUDA kernels), x = 16 / elem_size:
 *   key   [num_blocks, n_kv_heads, head_dim / x, block_size, x]
 *   value [num_blocks, n_kv_heads, head_dim, block_size]
 * A token's cache slot is block_id * block_size + offset_in_block.
 *
 * Ownership: callers own every buffer. Thread-safety: functions are pure
 * except for writes to their outputs; the pool argument (may be NULL) is used
 * for parallel loops.
 */
#ifndef KILN_OPS_CPU_H
#define KILN_OPS_CPU_H

#include "kiln_base.h"

/* out[T, H] = W[ids[t] - vocab_start] for ids in [vocab_start, vocab_start +
 * V_local), else 0 (vocabulary-parallel shards sum to the full embedding). */
void kiln_cpu_embed(float *out, const int32_t *ids, int64_t T, const void *w, kiln_dtype wdt, int64_t V_local,
                    int64_t H, int64_t vocab_start);

/* out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * w. out may alias x. */
void kiln_cpu_rmsnorm(float *out, const float *x, const void *w, kiln_dtype wdt, int64_t rows, int64_t dim,
                      float eps);

/* residual[r] += x[r]; out[r] = rmsnorm(residual[r]) * w. */
void kiln_cpu_add_rmsnorm(float *out, float *residual, const float *x, const void *w, kiln_dtype wdt,
                          int64_t rows, int64_t dim, float eps);

/* out[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]); out rows have stride ldo (>= N).
 * bias may be NULL. */
void kiln_cpu_gemm(kiln_pool *pool, float *out, int64_t ldo, const float *x, const void *w, kiln_dtype wdt,
                   const void *bias, kiln_dtype bdt, int64_t M, int64_t N, int64_t K);

/* out = a + b, elementwise over n. */
void kiln_cpu_add(float *out, const float *a, const float *b, int64_t n);
/* out = x * s. */
void kiln_cpu_scale(float *out, const float *x, float s, int64_t n);

/* out[T, I] = silu(x[:, 0:I]) * x[:, I:2I]. */
void kiln_cpu_silu_mul(float *out, const float *x, int64_t T, int64_t I);
/* out[T, I] = gelu_tanh(x[:, 0:I]) * x[:, I:2I]. */
void kiln_cpu_gelu_mul(float *out, const float *x, int64_t T, int64_t I);

/* out[n, dim] = x[rows[i], :]. */
void kiln_cpu_gather_rows(float *out, const float *x, const int32_t *rows, int64_t n, int64_t dim);

/* ----------------------------------------------------------------- rope */

typedef struct kiln_rope_params {
    int head_dim;
    int rot_dim;            /* rotated dims (head_dim * partial_rotary_factor) */
    bool interleaved;       /* GPT-J pairs (2i, 2i+1); else rotate-half (HF)   */
    const float *inv_freq;  /* [rot_dim / 2]                                   */
    float mscale;           /* multiplies cos and sin (1 unless yarn)          */
    /* dynamic NTK: when dyn_seq_len is non-NULL and dyn_seq_len[t] > dyn_max,
     * token t uses inv_freq recomputed with the scaled base. */
    const int32_t *dyn_seq_len;
    int dyn_max;
    double dyn_base, dyn_factor;
} kiln_rope_params;

/* Rotate q heads [0, nq) and k heads [nq, nq + nkv) of each qkv row in
 * place; pos[T] gives each token's position. */
void kiln_cpu_rope(float *qkv, int64_t row_stride, const int32_t *pos, int64_t T, int nq, int nkv,
                   const kiln_rope_params *rp);

/* inv_freq[rot_dim / 2] for a rope config (HF semantics, fp32 like torch);
 * *mscale receives the cos/sin multiplier. Types: default, linear, dynamic
 * (base frequencies here; scaling happens per token), llama3. */
struct kiln_rope_config;
kiln_status kiln_rope_inv_freq(const struct kiln_rope_config *rc, int rot_dim, float *inv_freq, float *mscale);
/* inv_freq for the dynamic-NTK base at sequence length seq_len. */
void kiln_rope_dynamic_inv_freq(double base, double factor, int max_pos, int rot_dim, int seq_len, float *inv_freq);

/* ------------------------------------------------------------- kv cache */

typedef struct kiln_kv_layout {
    int num_blocks;
    int block_size;
    int n_kv_heads;
    int head_dim;
    int x;                  /* 16 / kiln_dtype_size(dtype)                     */
    kiln_dtype dtype;       /* F32, BF16, F16, FP8_E4M3, FP8_E5M2              */
    float k_scale, v_scale; /* FP8: stored = fp8(value / scale)                */
} kiln_kv_layout;

/* Fill x from dtype; returns bytes of one layer's key (== value) cache. */
size_t kiln_kv_layout_init(kiln_kv_layout *l, int num_blocks, int block_size, int n_kv_heads, int head_dim,
                           kiln_dtype dtype);
/* Element offsets of (slot, head, dim) in the key and value caches. */
static inline int64_t kiln_kv_key_index(const kiln_kv_layout *l, int64_t slot, int h, int d) {
    int64_t b = slot / l->block_size, o = slot % l->block_size;
    return (((b * l->n_kv_heads + h) * (l->head_dim / l->x) + d / l->x) * l->block_size + o) * l->x + d % l->x;
}
static inline int64_t kiln_kv_value_index(const kiln_kv_layout *l, int64_t slot, int h, int d) {
    int64_t b = slot / l->block_size, o = slot % l->block_size;
    return ((b * l->n_kv_heads + h) * l->head_dim + d) * l->block_size + o;
}

/* Scatter k[t], v[t] (each [n_kv_heads * head_dim], rows of stride
 * row_stride) into the caches at slots[t]; slots < 0 are skipped. */
void kiln_cpu_kv_write(void *kcache, void *vcache, const kiln_kv_layout *l, const float *k, const float *v,
                       int64_t row_stride, const int32_t *slots, int64_t T);
/* Read one cached element back as f32. */
float kiln_cpu_kv_read(const void *cache, const kiln_kv_layout *l, int64_t index, float scale);

/* Paged attention over packed variable-length sequences (prefill, decode,
 * and several query tokens per sequence alike). Sequence s owns query rows
 * [qstart[s], qstart[s+1]); it has ctx_len[s] tokens in the cache *including*
 * its query tokens, so query i of s sits at position ctx_len[s] - q_len + i
 * and attends causally to cached positions <= its own (and > pos - window
 * when window > 0). GQA: q head h reads kv head h / (nq / n_kv_heads).
 *   q   [T, nq * head_dim] with row stride q_stride
 *   out [T, nq * head_dim] contiguous
 *   block_tables [n_seqs, max_blocks]                                   */
void kiln_cpu_attention(kiln_pool *pool, float *out, const float *q, int64_t q_stride, const void *kcache,
                        const void *vcache, const kiln_kv_layout *l, int nq, const int32_t *qstart,
                        const int32_t *ctx_len, int n_seqs, const int32_t *block_tables, int max_blocks,
                        float scale, int window);

/* GliDe cross attention (a drafter layer glimpsing the verifier's cache).
 * For each token t of a sequence with exactly one query token this step:
 * its query heads q[t] ([nq * head_dim], row stride q_stride) are rotated at
 * position pos[t] + pos_offset (rp, rotate-half or interleaved), then attend
 * to cached positions [0, cross_ctx[s]) of the verifier cache (GQA: head h
 * reads kv head h / (nq / n_kv_heads)); other tokens get 0.
 *   out [T, nq * head_dim] contiguous; cross_tables [n_seqs, max_blocks] */
void kiln_cpu_cross_attention(kiln_pool *pool, float *out, const float *q, int64_t q_stride, const int32_t *pos,
                              const kiln_rope_params *rp, int pos_offset, const void *kcache, const void *vcache,
                              const kiln_kv_layout *l, int nq, const int32_t *qstart, const int32_t *cross_ctx,
                              int n_seqs, const int32_t *cross_tables, int max_blocks, float scale);

#endif /* KILN_OPS_CPU_H */
