/*
 * exec.h -- the executor: runs the layer program once for a whole batch on
 * one backend (CPU here, CUDA in engine/cuda). The engine talks to every
 * backend through this vtable.
 *
 * Ownership: kiln_exec_*_create returns an owned executor (destroy via
 * kiln_exec_destroy); it borrows the model files, which must outlive it.
 * Thread-safety: one thread drives an executor.
 */
#ifndef KILN_EXEC_H
#define KILN_EXEC_H

#include "loader.h"
#include "ops_cpu.h"
#include "sampler.h"

/* One step's batch: sequences packed into one token array, no padding. */
typedef struct kiln_batch {
    int n_tokens;               /* T                                            */
    int n_seqs;                 /* S                                            */
    int n_out;                  /* rows that need logits                        */
    const int32_t *tokens;      /* [T]                                          */
    const int32_t *positions;   /* [T]                                          */
    const int32_t *qstart;      /* [S + 1] token offsets of each sequence       */
    const int32_t *ctx_len;     /* [S] tokens in cache after this step          */
    const int32_t *block_tables;/* [S, max_blocks]                              */
    int max_blocks;
    const int32_t *slots;       /* [T] cache slot of each token                  */
    const int32_t *out_rows;    /* [n_out] token rows whose logits are wanted    */
    int max_q_len, max_ctx_len;
    /* cross attention into the verifier's cache (GliDe drafters only) */
    const int32_t *cross_tables;/* [S, max_blocks] the verifier's block tables   */
    const int32_t *cross_ctx;   /* [S] tokens in the verifier's cache            */
} kiln_batch;

typedef struct kiln_exec_config {
    int max_tokens;          /* token rows per step (activation plan)          */
    int max_out;             /* logits rows per step                           */
    int max_seqs;
    int block_size;
    int max_blocks_per_seq;
    int num_kv_blocks;       /* > 0: exactly this many; 0: from kv_cache_bytes  */
    size_t kv_cache_bytes;   /* CPU pool budget                                 */
    double gpu_memory_utilization;
    kiln_dtype kv_dtype;     /* INVALID: backend default (f32 CPU, bf16 GPU)    */
    float k_scale, v_scale;  /* FP8 scales of every layer until set_kv_scales (0: 1) */
    int n_threads;
    int device_id;
    bool enforce_eager;
    uint64_t seed;           /* dummy weights                                   */
    kiln_dtype dtype;        /* INVALID: the checkpoint's                       */
    struct kiln_comm *comm;  /* tensor-parallel member (NULL: a single rank)    */
    /* GPU KV sizing when a drafter shares the device and the block ids:
     * bytes it will allocate later, and its cache bytes per block */
    size_t reserve_bytes;
    size_t extra_kv_bytes_per_block;
    /* > 1: speculative verification steps have this many query tokens per
     * sequence (k + 1); the GPU captures graphs for those shapes too */
    int verify_q;
} kiln_exec_config;

typedef struct kiln_exec kiln_exec;

/* How to choose the token of one output row on the device (sampler.h
 * semantics): parameters, penalties and the token history they apply to,
 * and banned ids (min_tokens, no_repeat_ngram). Pointers are borrowed for
 * the call. */
typedef struct kiln_sample_req {
    kiln_sample_row p;
    float repetition, presence, frequency;
    const int32_t *prompt;  /* repetition penalty context                    */
    int n_prompt;
    const int32_t *output;  /* generated so far (penalties)                  */
    int n_output;
    const int32_t *banned;
    int n_banned;
} kiln_sample_req;

typedef struct kiln_exec_vt {
    /* Run the program; *logits receives host [n_out, vocab] fp32, valid until
     * the next call (logits NULL: nothing comes back; tensor-parallel ranks
     * other than 0). */
    kiln_status (*forward)(kiln_exec *x, const kiln_batch *b, const float **logits);
    /* Optional (NULL when the backend has none): run the program and sample
     * each output row on the device; tokens[n_out] and logprobs[n_out] (the
     * chosen token's log-softmax of the processed logits) come back. */
    kiln_status (*forward_sample)(kiln_exec *x, const kiln_batch *b, const kiln_sample_req *rows, int32_t *tokens,
                                  float *logprobs);
    void (*destroy)(kiln_exec *x);
    /* The cache of one layer (backend pointers: host on the CPU, device
     * addresses on the GPU) and its layout, for a drafter's cross attention. */
    void (*kv_layer)(kiln_exec *x, int layer, const void **k, const void **v, const kiln_kv_layout **l);
    /* FP8 KV cache scales (optional; NULL when the backend has none). Heads
     * are numbered over the whole model (kiln_kv_global_head), so the same
     * arrays serve every tensor-parallel rank.
     * kv_calibrate(x, n_tokens > 0): until kv_calibrate(x, 0), forwards
     * write and read a temporary cache in the activation dtype (f32 on the
     * CPU) holding blocks [0, ceil(n_tokens / block_size)) instead of the
     * pool, and record the largest |k| and |v| written per layer and head;
     * kv_calibrate(x, 0) returns to the pool (its contents are then
     * undefined). kv_amax: max-merge the recorded values into
     * amax [n_kv_layers, 2, n_global_heads] (keys, then values).
     * set_kv_scales: scales [n_kv_layers, 2, n_global_heads] (> 0; stored =
     * fp8(value / scale)); takes effect from the next forward. */
    kiln_status (*kv_calibrate)(kiln_exec *x, int n_tokens);
    void (*kv_amax)(kiln_exec *x, float *amax);
    kiln_status (*set_kv_scales)(kiln_exec *x, const float *scales);
    /* Pipelined decode (optional, NULL when the backend has none).
     * launch_sample starts what forward_sample does without waiting for it;
     * collect_sample waits for the oldest launched step and copies out its
     * n_out tokens and logprobs. At most two steps are outstanding. With
     * feed != NULL the batch has one token per sequence and an outstanding
     * step, and sequence i's input token is the token that step chose for
     * its output row feed[i] (b->tokens is ignored): the host launches step
     * N + 1 before it has step N's tokens. Rows with penalties or bans only
     * while nothing is outstanding. forward / forward_sample need nothing
     * outstanding. collect_sample's tokens / logprobs may be NULL. */
    kiln_status (*launch_sample)(kiln_exec *x, const kiln_batch *b, const kiln_sample_req *rows, const int32_t *feed);
    kiln_status (*collect_sample)(kiln_exec *x, int32_t *tokens, float *logprobs);
    /* a launched step runs while the host goes on (the GPU): the engine
     * pipelines decode steps by default only then */
    bool overlaps;
} kiln_exec_vt;

/* The preconditions of kiln_exec_vt.launch_sample, for the backends:
 * n_pend steps outstanding before this launch. */
static inline kiln_status kiln_exec_launch_check(int n_pend, const kiln_batch *b, const int32_t *feed) {
    if (n_pend >= 2) return KILN_FAIL(KILN_ERR_INTERNAL, "two sampled steps are already outstanding");
    if (feed && !(n_pend == 1 && b->n_tokens == b->n_seqs && b->n_out == b->n_seqs))
        return KILN_FAIL(KILN_ERR_INTERNAL, "fed tokens need an outstanding step and one token per sequence");
    return KILN_OK;
}

struct kiln_exec {
    const kiln_exec_vt *vt;
    const char *device;      /* "cpu" / "cuda"                                   */
    int num_kv_blocks;       /* chosen pool size                                 */
    size_t kv_bytes_per_block;
    kiln_dtype kv_dtype;
    kiln_dtype act_dtype;
    size_t weight_bytes;
    uint64_t n_forward;
    kiln_exec *cross;        /* the verifier whose cache cross_attention reads */
};

kiln_status kiln_exec_cpu_create(const kiln_model_files *mf, const kiln_exec_config *cfg, kiln_exec **out);
/* The CUDA executor (engine/cuda/exec_gpu.c; KILN_ERR_UNAVAILABLE in builds
 * without the CUDA backend). */
kiln_status kiln_exec_gpu_create(const kiln_model_files *mf, const kiln_exec_config *cfg, kiln_exec **out);
static inline void kiln_exec_destroy(kiln_exec *x) {
    if (x) x->vt->destroy(x);
}

/* Tensor parallelism as one executor: ranks[0] runs on the calling thread,
 * every other rank on its own worker thread; each step runs the same batch
 * on every rank (their programs' collectives meet in the comm group) and
 * rank 0's outputs come back. Takes ownership of the ranks. */
struct kiln_comm_group;
kiln_status kiln_exec_tp_create(kiln_exec **ranks, int n, struct kiln_comm_group *group, kiln_exec **out);

/* KV heads of the whole model (every rank's cache together), and the
 * whole-model id of this rank's KV head h (the policies' rule,
 * kiln.lua local_kv_heads: split when there are at least as many heads as
 * ranks, else each rank keeps head rank * n / tp). */
static inline int kiln_kv_n_global_heads(const kiln_model_files *mf) {
    return mf->program->tp_size > 1 ? mf->cfg.num_kv_heads : mf->program->n_kv_heads;
}
static inline int kiln_kv_global_head(const kiln_program *p, int n_global, int h) {
    if (p->tp_size <= 1) return h;
    return n_global >= p->tp_size ? p->tp_rank * p->n_kv_heads + h : p->tp_rank * n_global / p->tp_size;
}

/* Fold one rank's calibration maxima local[layer][k|v][its kv heads] into
 * whole-model maxima global[layer][k|v][global heads] (max, NaN wins). */
static inline void kiln_kv_merge_amax(const kiln_model_files *mf, const float *local, float *global) {
    const kiln_program *p = mf->program;
    int G = kiln_kv_n_global_heads(mf), nkv = p->n_kv_heads;
    for (int l = 0; l < p->n_kv_layers; l++)
        for (int w = 0; w < 2; w++)
            for (int h = 0; h < nkv; h++) {
                float a = local[((size_t)l * 2 + (size_t)w) * (size_t)nkv + (size_t)h];
                float *o = &global[((size_t)l * 2 + (size_t)w) * (size_t)G + (size_t)kiln_kv_global_head(p, G, h)];
                if (a > *o || a != a) *o = a;
            }
}

/* Bytes of KV cache per block for a program (all layers, K and V). */
size_t kiln_kv_bytes_per_block(const kiln_program *p, int block_size, kiln_dtype kv_dtype);

#endif
