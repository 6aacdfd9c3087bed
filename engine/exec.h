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
    float k_scale, v_scale;  /* FP8 E4M3 scales                                 */
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
     * the next call. */
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
} kiln_exec_vt;

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

/* Bytes of KV cache per block for a program (all layers, K and V). */
size_t kiln_kv_bytes_per_block(const kiln_program *p, int block_size, kiln_dtype kv_dtype);

#endif
