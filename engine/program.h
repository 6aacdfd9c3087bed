/*
 * program.h -- the layer program: a flat, validated, immutable array of ops
 * over activation slots and weight ids, built from a Lua policy's plan. One
 * program serves every batch shape; the executor runs it with one loop.
 *
 * Ownership: kiln_program_build returns an owned program; free it with
 * kiln_program_free. Thread-safety: immutable after build (shared freely).
 */
#ifndef KILN_PROGRAM_H
#define KILN_PROGRAM_H

#include "kiln_base.h"
#include "model.h"

typedef enum kiln_op_kind {
    KILN_OP_EMBED,         /* dst[T,H] = W[ids]                                  */
    KILN_OP_RMSNORM,       /* dst = rmsnorm(src) * W                             */
    KILN_OP_ADD_RMSNORM,   /* src2 (residual) += src; dst = rmsnorm(src2) * W    */
    KILN_OP_ADD,           /* dst = src + src2                                   */
    KILN_OP_SCALE,         /* dst = src * scale                                  */
    KILN_OP_GEMM,          /* dst[:, col:col+N] = src @ W^T (+ bias)             */
    KILN_OP_ROPE,          /* rotate q and k heads of the qkv slot in place      */
    KILN_OP_KV_WRITE,      /* k, v of the qkv slot -> paged cache of kv_layer    */
    KILN_OP_ROPE_KV_WRITE, /* rope on q (in place) and k, then the cache write   */
    KILN_OP_ATTENTION,     /* dst = paged attention(q of qkv slot, kv_layer)     */
    KILN_OP_SILU_MUL,      /* dst[T,I] = silu(src[:, :I]) * src[:, I:]           */
    KILN_OP_GELU_MUL,      /* dst[T,I] = gelu_tanh(src[:, :I]) * src[:, I:]      */
    KILN_OP_GATHER_LAST,   /* dst[n_out, W] = src[out_rows]                      */
    KILN_OP_ALL_REDUCE,    /* sum slot src across tensor-parallel ranks          */
    KILN_OP_ALL_GATHER,    /* dst[n_out, tp*W] = concat of src[n_out, W] by rank */
    KILN_OP_CROSS_ATTENTION, /* dst = attention(rope(q of src) at pos + offset,
                              * the verifier's KV cache layer kv_layer) for
                              * tokens of single-token sequences, else 0 (GliDe) */
    KILN_OP_COUNT
} kiln_op_kind;

const char *kiln_op_kind_name(kiln_op_kind k);

/* Variants each op kind may request ("auto" lets the backend choose). The
 * CPU backend runs its reference variant for every choice; the GPU backend
 * maps them to kernels ("custom:NAME" selects a policy-provided kernel). */
const char *const *kiln_op_variants(kiln_op_kind k); /* NULL-terminated */

typedef enum kiln_shard_kind {
    KILN_SHARD_REPLICATED,
    KILN_SHARD_COLUMN,   /* split dim 0 (output features)                      */
    KILN_SHARD_ROW,      /* split dim 1 (input features)                       */
    KILN_SHARD_VOCAB,    /* split dim 0 of embedding / LM head                 */
    KILN_SHARD_KV_HEADS, /* split dim 0 by heads; replicated below tp heads    */
} kiln_shard_kind;
const char *kiln_shard_name(kiln_shard_kind s);

typedef struct kiln_weight_part {
    char *tensor;          /* checkpoint tensor name                            */
    int ndim;              /* 1 or 2                                            */
    int64_t shape[2];      /* full tensor shape (validated)                      */
    int64_t row0, nrows;   /* dim-0 range taken from the tensor                  */
    kiln_shard_kind shard;
    int64_t unit;          /* split granularity (head_dim for heads)             */
    /* this rank's slice, computed at build: rows [r_lo, r_lo + r_n) of the
     * tensor, columns [c_lo, c_lo + c_n) */
    int64_t r_lo, r_n, c_lo, c_n;
} kiln_weight_part;

#define KILN_MAX_PARTS 4

typedef struct kiln_weight_desc {
    char *id;
    kiln_shard_kind shard;
    int n_parts;
    kiln_weight_part parts[KILN_MAX_PARTS];
    int ndim;
    int64_t rows, cols;     /* this rank's fused shape (cols = 1 for 1-D)       */
    char *where;            /* policy file:line                                  */
} kiln_weight_desc;

typedef struct kiln_slot_desc {
    char *name;
    int64_t width;          /* elements per row                                  */
    bool per_out;           /* rows are output positions, not tokens            */
} kiln_slot_desc;

typedef struct kiln_op {
    kiln_op_kind kind;
    int variant;            /* index into kiln_op_variants(kind), or -1: custom */
    int custom;             /* index into program kernels, or -1                */
    int layer;              /* decoder layer for listings, -1 outside           */
    int dst, src, src2;     /* slot ids (-1: none)                              */
    int w, bias;            /* weight ids (-1: none)                            */
    int64_t dst_col;        /* GEMM: first output column in dst                 */
    int kv_layer;
    int n_heads, n_kv_heads, head_dim;
    float eps, scale;
    int window;
    int pos_offset;         /* cross_attention: query rope position offset    */
    char *where;
} kiln_op;

typedef struct kiln_custom_kernel {
    char *name, *source, *entry;
    kiln_op_kind replaces;
    char *where;
} kiln_custom_kernel;

typedef struct kiln_program {
    char *policy_name;
    char *policy_file;
    kiln_op *ops;
    int n_ops;
    kiln_slot_desc *slots;
    int n_slots;
    kiln_weight_desc *weights;
    int n_weights;
    kiln_custom_kernel *kernels;
    int n_kernels;
    /* KV cache */
    int n_kv_layers, n_kv_heads, head_dim;
    char kv_cache_dtype[16]; /* as the plan asked: auto, fp8_e5m2, fp8_e4m3   */
    /* FP8 E4M3 scales as the plan asked: a mode (auto, calibrate,
     * checkpoint, none), or "values": kv_k_scales / kv_v_scales hold
     * n_kv_scales (= n_kv_layers) numbers, one per KV layer */
    char kv_scales[16];
    float *kv_k_scales, *kv_v_scales;
    int n_kv_scales;
    /* rope */
    kiln_rope_config rope;
    int rot_dim;
    bool rope_interleaved;
    /* vocabulary */
    int vocab_size, vocab_local, vocab_start;
    int logits_slot;         /* [n_out, vocab_size] after any gather           */
    int hidden_size;
    int tp_rank, tp_size;
    /* cross attention into a verifier's cache (GliDe): its kv heads and
     * head dim, as the plan declares them (0: none) */
    int cross_kv_heads, cross_head_dim;
} kiln_program;

typedef struct kiln_policy_facts {
    const kiln_model_config *cfg;
    const char *device_kind; /* "cpu" or "cuda" */
    const char *device_name;
    int sm;                  /* compute capability * 10 (0 on CPU)            */
    size_t device_memory;
    int tp_rank, tp_size;
    const char *options_json; /* NULL or a JSON object                        */
    const char *dtype;
    const char *kv_cache_dtype;
    /* when building a drafter: the model it drafts for (NULL otherwise) */
    const kiln_model_config *target_cfg;
    int spec_k;
} kiln_policy_facts;

/* Run the policy (policy_file, or the built-in one for the architecture,
 * looked up in policy_dir / $KILN_POLICY_DIR / the embedded policies) and
 * build the program. Errors name the policy file and line. */
kiln_status kiln_program_build(const kiln_policy_facts *facts, const char *policy_file, const char *policy_dir,
                               kiln_program **out);
void kiln_program_free(kiln_program *p);

/* Check every weight part against the checkpoint (presence, shape, dtype). */
kiln_status kiln_program_check_checkpoint(const kiln_program *p, const kiln_checkpoint *ck);

/* The plan and the program listing (the `kiln explain` golden). */
kiln_status kiln_program_describe(const kiln_program *p, kiln_buf *out);

/* Architectures the policy index knows (sorted, comma-separated) and the
 * policy module for one. Both read policies/index.lua. */
kiln_status kiln_policy_architectures(const char *policy_dir, char **list);
kiln_status kiln_policy_for_architecture(const char *policy_dir, const char *arch, char **module);

#endif /* KILN_PROGRAM_H */
