/*
 * exec_gpu.c -- the CUDA executor: the same layer program as the CPU one,
 * run with the kernels of ops_gpu.h.
 *
 *  - weights: uploaded once into the weights pool in the activation dtype
 *    (bf16/fp16), fused and sliced as the plan says, through double-buffered
 *    pinned staging copies that overlap reading the memory-mapped shards; a
 *    progress line on stderr. Load format "dummy": random weights.
 *  - activations: every slot planned once for the worst-case step.
 *  - KV cache: sized from free memory after weights and activations
 *    (gpu_memory_utilization), plus one scratch block for padded rows; in the
 *    activation dtype or FP8 (E4M3 / E5M2, twice the blocks), with FP8
 *    scales per layer and KV head in device memory (so captured graphs see
 *    set_kv_scales). FP8 calibration runs eagerly on an activation-dtype
 *    view of the pool's own memory (half the blocks) and reads each layer's
 *    k and v back to the host for their maxima.
 *  - decode steps (one query token per sequence) replay CUDA graphs
 *    captured at start-up for batch-size buckets; other steps run eagerly.
 *  - sampling on the device: only token ids and logprobs come back.
 *
 * Ownership: owns every device buffer, stream, graph and the kernel set;
 * borrows the model files. Thread-safety: one thread drives it.
 */
#include "exec.h"

#include "comm.h"
#include "ops_gpu.h"
#include "profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_BUCKETS 40
#define STAGE_BYTES ((size_t)64 << 20)

/* The step's upload: one pinned block mirrored on the device, copied in one
 * piece up to `copy` (the regions the program reads). The sampling
 * parameters and fed rows come first. Every layout uses the same device
 * block (d_meta): the eager steps one sized for the plan, each decode and
 * verification graph one sized for its bucket (captured with its own
 * offsets), so a graph step uploads a few KB. */
typedef struct meta_off {
    size_t sparams, feed; /* [O] kiln_gpu_sample_params, [O] int32 rows of the previous step's tokens */
    size_t tokens, pos, slots, qstart, ctx, tables, out, cross_tables, cross_ctx, dyn, gidx;
    size_t xq, xctx, xtables, xpos; /* cross attention (GliDe): its sub-batch */
    size_t total, copy;
} meta_off;

typedef struct exec_gpu {
    kiln_exec base;
    const kiln_model_files *mf;
    const kiln_program *p;
    kiln_exec_config cfg;
    kiln_rt_device *dev;
    const kiln_rt_device_info *info;
    kiln_gpu *g;
    kiln_rt_stream *st;
    kiln_rt_mempool *wpool, *apool, *kvpool;
    kiln_dtype act;
    kiln_devptr *w;
    kiln_devptr *slot;
    kiln_dtype *slot_dt;
    kiln_devptr *kc, *vc;
    kiln_kv_layout layout;    /* the pool (block size, dtype); no scales       */
    kiln_kv_layout *layouts;  /* [n_kv_layers] with the layer's device scales  */
    kiln_devptr d_scales;     /* [n_kv_layers, 2, n_kv_heads] f32 (FP8)        */
    /* calibration (kv_calibrate) */
    bool calib;
    kiln_kv_layout clayout;   /* activation-dtype view of the pool             */
    float *amax;              /* [n_kv_layers, 2, n_kv_heads]                   */
    void *calib_rows;         /* [calib_tokens, widest slot] host copy of qkv   */
    int calib_tokens;
    kiln_gpu_rope_params rope;
    bool dynamic_rope;
    int max_blocks, max_ctx;
    int dummy_block;
    /* step metadata: one pinned host block mirrored on the device (meta_off) */
    meta_off mo;              /* the layout of the step being built or run     */
    meta_off mo_full;         /* eager steps: the plan's worst case            */
    meta_off mo_dec[MAX_BUCKETS], mo_ver[MAX_BUCKETS]; /* graph buckets       */
    char *h_meta;
    kiln_devptr d_meta;
    /* sampling */
    kiln_devptr d_res, d_hist, d_hoff; /* d_res: a step's [n] int32 tokens then [n] f32 logprobs */
    int32_t *h_hist, *h_hoff; /* prompt ids | output ids | banned ids, offsets */
    size_t hist_cap;
    float *h_logits;
    /* pipelined decode (launch_sample / collect_sample): the pinned staging
     * that a launched step's queued copies still read or write (the
     * metadata block with the sampling parameters and fed rows; the token
     * ids and logprobs) comes in two sets; h_meta points at the current
     * set's metadata (pack_meta, H()) */
    char *h_meta_buf[2];
    int32_t *h_res_buf[2];      /* [n] tokens then [n] f32 logprobs (d_res)     */
    kiln_rt_event *done_ev[2];  /* a set's step has copied its tokens back     */
    /* the copy back on its own stream ($KILN_COPY_STREAM, default KILN_COPY_STREAM_DEFAULT):
     * the next step starts when the sampling ends, not when its tokens have reached the
     * host; then each set has its own device results (d_res is the latest launch's) */
    kiln_rt_stream *cp_st;
    kiln_rt_event *sampled_ev[2];
    kiln_devptr d_res_buf[2];
    /* the metadata block read from pinned memory by a kernel that also gathers the fed tokens
     * (kiln_gpu_step_feed) instead of a host-to-device copy and a gather ($KILN_STEP_FEED,
     * blocks of at most KILN_STEP_FEED_MAX_BYTES) */
    bool step_feed;
    int cur_buf;                /* the set of the latest launch                */
    int n_pend, pend_buf[2], pend_n[2]; /* outstanding steps, oldest first     */
    /* cross attention: sequences decoding one token this step */
    int n_xseq, max_xctx, xoffset;
    /* CUDA graphs for decode buckets */
    int n_buckets;
    int bucket[MAX_BUCKETS];
    kiln_rt_graph *graph[MAX_BUCKETS];
    /* verification steps (verify_q tokens in every sequence, every position
     * an output row): graphs for the same batch buckets */
    int verify_q, n_vbuckets;
    kiln_rt_graph *vgraph[MAX_BUCKETS];
    double capture_s;
    bool capturing;
    /* tensor parallelism */
    kiln_rt_comm *nccl;
    kiln_rt_p2p *p2p; /* one-shot all-reduce over peer memory, or NULL (NCCL) */
    bool fuse_ar_norm; /* all-reduce + add + rmsnorm in one kernel ($KILN_FUSE_AR_NORM=0: off) */
    int decode_partition; /* $KILN_DECODE_PARTITION: decode attention's split-K partition (0: by shape) */
    int pdl_early_max;    /* decode steps of at most this many sequences run the PDL_EARLY kernels ($KILN_PDL_EARLY_MAX_SEQS) */
    bool p2p_gather; /* the logits all-gather over the push exchange where it fits ($KILN_P2P_GATHER=0: NCCL) */
    /* profiling mode: an event before every op and after the last */
    kiln_profile prof;
    kiln_rt_event **ev;
    kiln_devptr gather_tmp; /* [tp, max_out, vocab_local] f32 */
    /* a batch-1 residual add + RMSNorm folded into the GEMVs around it (norm_folds): the GEMV before it
     * adds into the residual, writes h * w into the norm's output and its partials into ss_part; the next
     * GEMM op scales its products by nin's 1 / rms */
    kiln_devptr ss_part; /* [KILN_GPU_NORM_MAX_PARTS] f32 */
    bool nin_next;
    kiln_gpu_norm_in nin;
    /* $KILN_SKGEMM_PROF_OP=k with $KILN_SKGEMM_PROF_OUT=path (a measurement aid): the k-th GEMM op of every forward
     * (1-based; Llama: 4 a layer, qkv o gate/up down) launches with gemm_sk's timing records into skprof_buf (also
     * inside captured graphs: every replay rewrites them), written to path when the executor is destroyed */
    int skprof_op, skprof_nb; /* (skprof_nb: the blocks of the last launch that wrote records) */
    kiln_devptr skprof_buf;
    char *skprof_out;
} exec_gpu;
#define SKPROF_BLOCKS 2048

#define D(x, off, T) ((x)->d_meta + (x)->mo.off)
#define H(x, off, T) ((T *)((x)->h_meta + (x)->mo.off))

/* ---------------------------------------------------------------- helpers */

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* The layout of the metadata for steps of up to T tokens, S sequences and
 * O output rows; `copy` ends at the last region the program reads: tokens
 * .. out rows, then the dynamic-rope lengths, the logits gather rows
 * (tensor parallel), the cross-attention regions (drafters). */
static void plan_meta(const exec_gpu *x, meta_off *m, size_t T, size_t S, size_t O) {
    size_t B = (size_t)x->max_blocks, o = 0;
    m->sparams = o, o += align256(O * sizeof(kiln_gpu_sample_params));
    m->feed = o, o += align256(O * 4);
    m->tokens = o, o += align256(T * 4);
    m->pos = o, o += align256(T * 4);
    m->slots = o, o += align256(T * 4);
    m->qstart = o, o += align256((S + 1) * 4);
    m->ctx = o, o += align256(S * 4);
    m->tables = o, o += align256(S * B * 4);
    m->out = o, o += align256(O * 4);
    m->cross_tables = o, o += align256(S * B * 4);
    m->cross_ctx = o, o += align256(S * 4);
    m->dyn = o, o += align256(T * 4);
    m->gidx = o, o += align256(O * (size_t)KILN_MAX(1, x->p->tp_size) * 4);
    m->xq = o, o += align256((S + 1) * 4);
    m->xctx = o, o += align256(S * 4);
    m->xtables = o, o += align256(S * B * 4);
    m->xpos = o, o += align256(T * 4);
    m->total = o;
    m->copy = m->cross_tables;
    if (x->dynamic_rope) m->copy = m->gidx;
    if (x->p->tp_size > 1) m->copy = m->xq;
    for (int i = 0; i < x->p->n_ops; i++)
        if (x->p->ops[i].kind == KILN_OP_CROSS_ATTENTION) m->copy = m->total;
}

/* Make m the layout of the next step (the device block stays d_meta). */
static void use_meta(exec_gpu *x, const meta_off *m) {
    x->mo = *m;
    if (x->dynamic_rope) x->rope.dyn_seq_len = x->d_meta + m->dyn;
}

/* Pack a batch into the pinned metadata block, padded to n_pad sequences
 * of one token each (decode graphs); padding rows write the scratch block. */
/* n_pad > b->n_seqs: pad to n_pad sequences of q_pad tokens each (a graph
 * bucket), on the scratch block, every padded token an output row. */
static void pack_meta(exec_gpu *x, const kiln_batch *b, int n_pad, int q_pad) {
    int32_t *tok = H(x, tokens, int32_t), *pos = H(x, pos, int32_t), *sl = H(x, slots, int32_t);
    int32_t *qs = H(x, qstart, int32_t), *ctx = H(x, ctx, int32_t), *tab = H(x, tables, int32_t);
    int32_t *out = H(x, out, int32_t);
    memcpy(tok, b->tokens, sizeof(int32_t) * (size_t)b->n_tokens);
    memcpy(pos, b->positions, sizeof(int32_t) * (size_t)b->n_tokens);
    memcpy(sl, b->slots, sizeof(int32_t) * (size_t)b->n_tokens);
    memcpy(qs, b->qstart, sizeof(int32_t) * (size_t)(b->n_seqs + 1));
    memcpy(ctx, b->ctx_len, sizeof(int32_t) * (size_t)b->n_seqs);
    for (int s = 0; s < b->n_seqs; s++)
        memcpy(tab + (size_t)s * (size_t)x->max_blocks, b->block_tables + (size_t)s * (size_t)b->max_blocks,
               sizeof(int32_t) * (size_t)KILN_MIN(b->max_blocks, x->max_blocks));
    memcpy(out, b->out_rows, sizeof(int32_t) * (size_t)b->n_out);
    x->n_xseq = 0;
    x->max_xctx = 0;
    if (b->cross_tables) {
        /* the sub-batch that cross-attends: single-token sequences; their
         * query row, the verifier's context and block table */
        int32_t *xq = H(x, xq, int32_t), *xc = H(x, xctx, int32_t), *xt = H(x, xtables, int32_t);
        int32_t *xp = H(x, xpos, int32_t);
        for (int s = 0; s < b->n_seqs; s++) {
            for (int t = b->qstart[s]; t < b->qstart[s + 1]; t++) xp[t] = b->positions[t] + x->xoffset;
            if (b->qstart[s + 1] - b->qstart[s] != 1 || b->cross_ctx[s] <= 0) continue;
            int k = x->n_xseq++;
            xq[k] = b->qstart[s];
            xc[k] = b->cross_ctx[s];
            x->max_xctx = KILN_MAX(x->max_xctx, b->cross_ctx[s]);
            memcpy(xt + (size_t)k * (size_t)x->max_blocks, b->cross_tables + (size_t)s * (size_t)b->max_blocks,
                   sizeof(int32_t) * (size_t)KILN_MIN(b->max_blocks, x->max_blocks));
        }
    }
    if (x->dynamic_rope) {
        int32_t *dyn = H(x, dyn, int32_t);
        for (int s = 0; s < b->n_seqs; s++)
            for (int t = b->qstart[s]; t < b->qstart[s + 1]; t++) dyn[t] = b->ctx_len[s];
    }
    /* logits all-gather: rank-major rows -> row-major vocabulary */
    int R = x->p->tp_size, n_out = n_pad > b->n_seqs ? b->n_out + (n_pad - b->n_seqs) * q_pad : b->n_out;
    if (R > 1) {
        int32_t *gi = H(x, gidx, int32_t);
        for (int i = 0; i < n_out; i++)
            for (int r = 0; r < R; r++) gi[i * R + r] = r * n_out + i;
    }
    /* padding for graph buckets: sequences of q_pad tokens on the scratch block */
    const int bs = x->layout.block_size;
    for (int s = b->n_seqs; s < n_pad; s++) {
        int t0 = b->n_tokens + (s - b->n_seqs) * q_pad;
        for (int j = 0; j < q_pad; j++) {
            int t = t0 + j;
            tok[t] = 0;
            pos[t] = j;
            sl[t] = x->dummy_block * bs + j % bs;
            out[b->n_out + (s - b->n_seqs) * q_pad + j] = t;
            if (x->dynamic_rope) H(x, dyn, int32_t)[t] = q_pad;
        }
        qs[s + 1] = t0 + q_pad;
        ctx[s] = q_pad;
        for (int k = 0; k < KILN_DIV_UP(q_pad, bs) && k < x->max_blocks; k++)
            tab[(size_t)s * (size_t)x->max_blocks + (size_t)k] = x->dummy_block;
    }
}

static int64_t rows_of(const kiln_program *p, int slot, int T, int n_out) {
    return p->slots[slot].per_out ? n_out : T;
}

static const kiln_kv_layout *kv_layout(const exec_gpu *x, int layer) {
    return x->calib ? &x->clayout : &x->layouts[layer];
}

/* Calibration: the largest |k| and |v| of the T rows just written (qkv slot
 * after rope, [T, row_stride] act), per KV head. */
static kiln_status calib_record(exec_gpu *x, const kiln_op *o, kiln_devptr qkv, int64_t row_stride, int T) {
    kiln_status st = KILN_OK;
    size_t es = kiln_dtype_size(x->act);
    KILN_CHECK(T <= x->calib_tokens, KILN_ERR_INTERNAL, "calibration step of %d tokens (planned %d)", T,
               x->calib_tokens);
    KILN_TRY(kiln_rt_memcpy_dtoh(x->calib_rows, qkv, (size_t)T * (size_t)row_stride * es, x->st));
    KILN_TRY(kiln_rt_stream_sync(x->st));
    int nkv = x->p->n_kv_heads, hd = o->head_dim;
    float *ak = x->amax + (size_t)o->kv_layer * 2 * (size_t)nkv, *av = ak + nkv;
    float row[1024];
    const int64_t k0 = (int64_t)o->n_heads * hd, v0 = k0 + (int64_t)nkv * hd;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nkv; h++)
            for (int w = 0; w < 2; w++) {
                const char *src = (const char *)x->calib_rows + ((size_t)t * (size_t)row_stride +
                                                                 (size_t)((w ? v0 : k0) + (int64_t)h * hd)) * es;
                kiln_to_f32(row, src, x->act, (size_t)hd);
                float *m = w ? &av[h] : &ak[h];
                for (int d = 0; d < hd; d++) {
                    float a = fabsf(row[d]);
                    if (a > *m || a != a) *m = a;
                }
            }
fail:
    return st;
}

/* Is op i an all-reduce whose result the next op, a residual add + RMSNorm
 * of the same shape and dtype, reads, and can the one-shot kernel do both? */
static bool ar_norm_follows(const exec_gpu *x, int i, int T, int n_out) {
    const kiln_program *p = x->p;
    const kiln_op *o = &p->ops[i], *nx = i + 1 < p->n_ops ? &p->ops[i + 1] : NULL;
    if (!x->fuse_ar_norm || !nx || nx->kind != KILN_OP_ADD_RMSNORM || nx->src != o->src || nx->src2 < 0 ||
        nx->dst < 0 || nx->w < 0)
        return false;
    const int64_t sw = p->slots[o->src].width, rows = rows_of(p, o->src, T, n_out);
    const kiln_dtype dt = x->slot_dt[o->src];
    return p->slots[nx->dst].width == sw && p->slots[nx->src2].width == sw && rows_of(p, nx->src2, T, n_out) == rows &&
           x->slot_dt[nx->src2] == dt && x->slot_dt[nx->dst] == dt &&
           kiln_rt_p2p_fits_norm(x->p2p, x->slot[o->src], x->slot[nx->src2], x->slot[nx->dst], x->w[nx->w], (int)rows,
                                 (int)sw, dt);
}

/* Is op i a GEMM (M = rows, no bias) whose output the next op all-reduces,
 * that all-reduce one kiln_all_reduce_push_add_rmsnorm would fuse with the
 * add + RMSNorm after it, and can kiln_gpu_gemm_ar_norm do all three? */
static bool gemv_ar_follows(const exec_gpu *x, int i, int64_t rows, int T, int n_out) {
    const kiln_program *p = x->p;
    const kiln_op *o = &p->ops[i], *nx = i + 1 < p->n_ops ? &p->ops[i + 1] : NULL;
    if (!nx || nx->kind != KILN_OP_ALL_REDUCE || nx->src != o->dst || o->dst_col != 0 || o->w < 0 || o->bias >= 0 ||
        x->slot_dt[o->dst] != x->act || !ar_norm_follows(x, i + 1, T, n_out))
        return false;
    const kiln_weight_desc *W = &p->weights[o->w];
    return p->slots[o->dst].width == W->rows && kiln_gpu_gemm_ar_norm_ok(x->g, x->p2p, x->act, rows, W->rows, W->cols);
}

/* Is op i the qkv GEMM (M = rows) whose output the next op, a rope + KV
 * write of it, reads first, and can kiln_gpu_gemm_rope_kv_m do both? */
static bool rope_follows(const exec_gpu *x, int i, int64_t rows) {
    const kiln_program *p = x->p;
    const kiln_op *o = &p->ops[i], *nx = i + 1 < p->n_ops ? &p->ops[i + 1] : NULL;
    if (!nx || nx->kind != KILN_OP_ROPE_KV_WRITE || nx->src != o->dst || o->dst_col != 0 || o->w < 0 || x->calib ||
        x->slot_dt[o->dst] != x->act)
        return false;
    const kiln_weight_desc *W = &p->weights[o->w];
    const kiln_kv_layout *l = kv_layout(x, nx->kv_layer);
    return p->slots[o->dst].width == W->rows && nx->n_kv_heads == l->n_kv_heads &&
           kiln_gpu_gemm_rope_kv_ok(x->g, x->act, rows, W->rows, W->cols, nx->n_heads, &x->rope, l);
}

/* Is op i a GEMM (M = rows) whose whole output only the next op, a
 * SiLU-and-mul, reads, and can kiln_gpu_gemm_silu do both? */
static bool silu_follows(const exec_gpu *x, int i, int64_t rows) {
    const kiln_program *p = x->p;
    const kiln_op *o = &p->ops[i], *nx = i + 1 < p->n_ops ? &p->ops[i + 1] : NULL;
    if (!nx || nx->kind != KILN_OP_SILU_MUL || nx->src != o->dst || o->dst_col != 0 || o->w < 0 || nx->dst < 0 ||
        nx->dst == o->dst || x->slot_dt[o->dst] != x->act || x->slot_dt[nx->dst] != x->act)
        return false;
    const kiln_weight_desc *W = &p->weights[o->w];
    if (p->slots[o->dst].width != W->rows || p->slots[nx->dst].width * 2 != W->rows ||
        !kiln_gpu_gemm_silu_ok(x->g, x->act, rows, W->rows, W->cols))
        return false;
    for (int k = i + 2; k < p->n_ops; k++) { /* read again before it is rewritten? */
        const kiln_op *q = &p->ops[k];
        if (q->src == o->dst || q->src2 == o->dst) return false;
        if (q->dst == o->dst) break;
    }
    return true;
}

/* The decode / prefill attention launch of op o (KILN_OP_ATTENTION) over S sequences. */
static kiln_gpu_attn attn_of(exec_gpu *x, const kiln_op *o, int S, int max_q, int max_ctx) {
    const kiln_program *p = x->p;
    kiln_gpu_attn a = {
        .out = x->slot[o->dst], .q = x->slot[o->src], .q_stride = p->slots[o->src].width, .kcache = x->kc[o->kv_layer],
        .vcache = x->vc[o->kv_layer], .l = kv_layout(x, o->kv_layer), .nq = o->n_heads, .qstart = D(x, qstart, int32_t),
        .ctx_len = D(x, ctx, int32_t), .block_tables = D(x, tables, int32_t), .n_seqs = S, .max_blocks = x->max_blocks,
        .scale = o->scale, .window = o->window, .max_q_len = max_q, .max_ctx_len = max_ctx,
        .force_partition = max_q <= 1 ? x->decode_partition : 0,
    };
    return a;
}

/* Is op i a decode step's rope + KV write whose q the next op, the attention over the same layer, reads
 * (kiln_gpu_attention does both: kiln_gpu_attn.rope)? Not while profiling ops one by one or calibrating
 * FP8 scales (those read the rotated keys). */
static bool attn_rope_follows(const exec_gpu *x, int i, int T, int S, int max_q) {
    const kiln_program *p = x->p;
    const kiln_op *o = &p->ops[i], *nx = i + 1 < p->n_ops ? &p->ops[i + 1] : NULL;
    return nx && nx->kind == KILN_OP_ATTENTION && max_q <= 1 && T == S && !x->prof.on && !x->calib &&
           nx->src == o->src && nx->kv_layer == o->kv_layer && nx->n_heads == o->n_heads && nx->dst != o->src;
}

/* Is slot `sl` read by an op after op i before an op rewrites it? */
static bool read_after(const kiln_program *p, int i, int sl) {
    for (int k = i + 1; k < p->n_ops; k++) {
        const kiln_op *q = &p->ops[k];
        if (q->src == sl || q->src2 == sl) return true;
        if (q->dst == sl) return false;
    }
    return false;
}

/* Is op i a batch-1 GEMM followed by a residual add + RMSNorm of its output and a GEMM of the norm's
 * output that the GEMVs can do without the norm kernel (ops_gpu.h kiln_gpu_gemv_add_ss: op i adds into
 * the residual, op i + 2 normalises as it loads), neither output read elsewhere? *n_part: op i's
 * partials. Not while profiling ops one by one or calibrating. */
static bool norm_folds(const exec_gpu *x, int i, int64_t rows, int T, int n_out, int *n_part) {
    const kiln_program *p = x->p;
    if (x->prof.on || x->calib || rows != 1 || i + 2 >= p->n_ops) return false;
    const kiln_op *o = &p->ops[i], *nx = &p->ops[i + 1], *c = &p->ops[i + 2];
    if (o->kind != KILN_OP_GEMM || o->dst_col != 0 || o->w < 0 || o->dst < 0 || x->slot_dt[o->dst] != x->act ||
        nx->kind != KILN_OP_ADD_RMSNORM || nx->src != o->dst || nx->src2 < 0 || nx->dst < 0 || nx->w < 0 ||
        nx->src2 == o->dst || nx->dst == nx->src2 || c->kind != KILN_OP_GEMM || c->src != nx->dst || c->w < 0)
        return false;
    const kiln_weight_desc *W = &p->weights[o->w], *CW = &p->weights[c->w];
    const int64_t H = W->rows;
    if (p->slots[o->dst].width != H || p->slots[nx->src2].width != H || p->slots[nx->dst].width != H ||
        CW->cols != H || x->slot_dt[nx->src2] != x->act || x->slot_dt[nx->dst] != x->act ||
        rows_of(p, nx->src2, T, n_out) != 1 || rows_of(p, c->src, T, n_out) != 1 ||
        !kiln_gpu_gemv_add_ss_ok(x->g, x->act, 1, H, W->cols, n_part) || read_after(p, i + 1, o->dst) ||
        read_after(p, i + 2, nx->dst))
        return false;
    /* the consumer's launch: the one run_ops' GEMM case takes for op i + 2 */
    kiln_gpu_nin_kind kind = KILN_GPU_NIN_PLAIN;
    if (rope_follows(x, i + 2, 1)) kind = KILN_GPU_NIN_ROPE;
    else if (silu_follows(x, i + 2, 1)) kind = KILN_GPU_NIN_SILU;
    else if (c->dst_col != 0 || x->slot_dt[c->dst] != x->act || gemv_ar_follows(x, i + 2, 1, T, n_out)) return false;
    return kiln_gpu_nin_ok(x->g, kind, x->act, 1, CW->rows, CW->cols);
}

/* Run every op of the program for T tokens in S sequences with n_out
 * output rows (metadata already on the device). */
static kiln_status run_ops(exec_gpu *x, int T, int S, int n_out, int max_q, int max_ctx) {
    kiln_status st = KILN_OK;
    const kiln_program *p = x->p;
    kiln_gpu *g = x->g;
    kiln_rt_stream *s = x->st;
    size_t es = kiln_dtype_size(x->act);
    /* small decode steps: the early-trigger kernels (KILN_PDL_EARLY_MAX_SEQS_DEFAULT) */
    kiln_rt_kernels_set_pdl_early(kiln_gpu_kernels(g), max_q <= 1 && T == S && S <= x->pdl_early_max);
    x->nin_next = false;
    int n_gemm = 0; /* GEMM ops so far ($KILN_SKGEMM_PROF_OP) */
    for (int i = 0; i < p->n_ops; i++) {
        const kiln_op *o = &p->ops[i];
        const bool skprof = x->skprof_buf && o->kind == KILN_OP_GEMM && ++n_gemm == x->skprof_op;
        if (skprof) kiln_gpu_set_skgemm_profile(g, x->skprof_buf, SKPROF_BLOCKS);
        if (x->prof.on && !x->capturing) KILN_TRY(kiln_rt_event_record(x->ev[i], s));
        kiln_devptr Dp = o->dst >= 0 ? x->slot[o->dst] : 0;
        kiln_devptr Sp = o->src >= 0 ? x->slot[o->src] : 0;
        kiln_devptr S2 = o->src2 >= 0 ? x->slot[o->src2] : 0;
        kiln_devptr Wp = o->w >= 0 ? x->w[o->w] : 0;
        const kiln_weight_desc *W = o->w >= 0 ? &p->weights[o->w] : NULL;
        int64_t dw = o->dst >= 0 ? p->slots[o->dst].width : 0;
        int64_t sw = o->src >= 0 ? p->slots[o->src].width : 0;
        int64_t rows = o->src >= 0 ? rows_of(p, o->src, T, n_out) : (o->dst >= 0 ? rows_of(p, o->dst, T, n_out) : 0);
        switch (o->kind) {
        case KILN_OP_EMBED:
            KILN_TRY(kiln_gpu_embed(g, s, Dp, x->act, D(x, tokens, int32_t), T, Wp, x->act, W->rows, (int)W->cols,
                                    p->vocab_start));
            break;
        case KILN_OP_RMSNORM:
            KILN_TRY(kiln_gpu_rmsnorm(g, s, Dp, Sp, Wp, x->act, x->act, (int)rows, (int)dw, o->eps));
            break;
        case KILN_OP_ADD_RMSNORM:
            KILN_TRY(kiln_gpu_add_rmsnorm(g, s, Dp, S2, Sp, Wp, x->act, x->act, (int)rows, (int)dw, o->eps));
            break;
        case KILN_OP_ADD: KILN_TRY(kiln_gpu_add(g, s, Dp, Sp, S2, x->act, rows * dw)); break;
        case KILN_OP_GEMM: {
            kiln_devptr bias = o->bias >= 0 ? x->w[o->bias] : 0;
            /* the GEMM after a folded norm (below): x is h * w, its products scaled by 1 / rms */
            const kiln_gpu_norm_in *ni = x->nin_next ? &x->nin : NULL;
            x->nin_next = false;
            int n_part = 0;
            if (!ni && norm_folds(x, i, rows, T, n_out, &n_part)) {
                /* this GEMV adds into the residual and writes h * w into the norm's output; the GEMM after the
                 * norm scales by 1 / rms */
                const kiln_op *nx = &p->ops[i + 1];
                KILN_TRY(kiln_gpu_gemv_add_ss(g, s, x->slot[nx->src2], x->ss_part, x->slot[nx->dst], x->w[nx->w], Sp,
                                              Wp, x->act, bias, W->rows, W->cols));
                x->nin = (kiln_gpu_norm_in){.part = x->ss_part, .n_part = n_part, .eps = nx->eps};
                x->nin_next = true;
                i++;
                break;
            }
            /* (with ni: norm_folds chose the launch below -- rope, SiLU or the plain GEMV) */
            if (!x->prof.on && gemv_ar_follows(x, i, rows, T, n_out)) {
                /* the GEMV with the all-reduce + add + RMSNorm as its epilogue (both ops after it done) */
                const kiln_op *nn = &p->ops[i + 2];
                KILN_TRY(kiln_gpu_gemm_ar_norm(g, s, x->p2p, Dp, Sp, Wp, x->act, W->rows, W->cols, x->slot[nn->src2],
                                               x->w[nn->w], x->slot[nn->dst], nn->eps));
                i += 2;
                break;
            }
            if (!x->prof.on && rope_follows(x, i, rows)) {
                /* the qkv GEMV (M = 1) or gemm_sk (M <= 32) with rope + KV write as its epilogue, row m at
                 * pos[m] into slots[m] (the rope op after it is done) */
                const kiln_op *nx = &p->ops[i + 1];
                KILN_TRY(kiln_gpu_gemm_rope_kv_nin(g, s, Dp, Sp, Wp, x->act, bias, rows, W->rows, W->cols, nx->n_heads,
                                                   D(x, pos, int32_t), &x->rope, x->kc[nx->kv_layer],
                                                   x->vc[nx->kv_layer], kv_layout(x, nx->kv_layer),
                                                   D(x, slots, int32_t), ni));
                i++;
                break;
            }
            if (!x->prof.on && silu_follows(x, i, rows)) {
                /* the gate/up GEMV with the SiLU-and-mul as its epilogue, into
                 * the SiLU's output; the GEMM's own output is never read */
                const kiln_op *nx = &p->ops[i + 1];
                KILN_TRY(kiln_gpu_gemm_silu_nin(g, s, x->slot[nx->dst], p->slots[nx->dst].width, Sp, Wp, x->act, bias,
                                                rows, W->rows, W->cols, ni));
                i++;
                break;
            }
            kiln_devptr dst = Dp + (kiln_devptr)((size_t)o->dst_col * kiln_dtype_size(x->slot_dt[o->dst]));
            if (ni) KILN_TRY(kiln_gpu_gemm_nin(g, s, dst, dw, Sp, Wp, x->act, bias, W->rows, W->cols, ni));
            else KILN_TRY(kiln_gpu_gemm(g, s, dst, dw, x->slot_dt[o->dst], Sp, Wp, x->act, bias, rows, W->rows, W->cols));
            break;
        }
        case KILN_OP_ROPE:
            KILN_TRY(kiln_gpu_rope(g, s, Sp, x->act, sw, D(x, pos, int32_t), T, o->n_heads, o->n_kv_heads, &x->rope));
            break;
        case KILN_OP_KV_WRITE: {
            kiln_devptr k = Sp + (kiln_devptr)((size_t)o->n_heads * (size_t)o->head_dim * es);
            kiln_devptr v = k + (kiln_devptr)((size_t)o->n_kv_heads * (size_t)o->head_dim * es);
            KILN_TRY(kiln_gpu_kv_write(g, s, x->kc[o->kv_layer], x->vc[o->kv_layer], kv_layout(x, o->kv_layer), k, v,
                                       x->act, sw, D(x, slots, int32_t), T));
            if (x->calib) KILN_TRY(calib_record(x, o, Sp, sw, T));
            break;
        }
        case KILN_OP_ROPE_KV_WRITE:
            if (attn_rope_follows(x, i, T, S, max_q)) {
                /* a decode step: the rope + KV write and the attention after it in one call (fused into the
                 * decode kernel where it can: ops_gpu.h kiln_gpu_attn.rope) */
                kiln_gpu_attn a = attn_of(x, &p->ops[i + 1], S, max_q, max_ctx);
                a.rope = &x->rope, a.rope_pos = D(x, pos, int32_t), a.rope_slots = D(x, slots, int32_t);
                KILN_TRY(kiln_gpu_attention(g, s, x->act, &a));
                i++;
                break;
            }
            KILN_TRY(kiln_gpu_rope_kv_write(g, s, Sp, x->act, sw, D(x, pos, int32_t), T, o->n_heads, &x->rope,
                                            x->kc[o->kv_layer], x->vc[o->kv_layer], kv_layout(x, o->kv_layer),
                                            D(x, slots, int32_t)));
            if (x->calib) KILN_TRY(calib_record(x, o, Sp, sw, T));
            break;
        case KILN_OP_ATTENTION: {
            kiln_gpu_attn a = attn_of(x, o, S, max_q, max_ctx);
            KILN_TRY(kiln_gpu_attention(g, s, x->act, &a));
            break;
        }
        case KILN_OP_SILU_MUL: KILN_TRY(kiln_gpu_silu_mul(g, s, Dp, Sp, x->act, (int)rows, (int)dw)); break;
        case KILN_OP_GELU_MUL: KILN_TRY(kiln_gpu_gelu_mul(g, s, Dp, Sp, x->act, (int)rows, (int)dw)); break;
        case KILN_OP_GATHER_LAST:
            KILN_TRY(kiln_gpu_gather_rows(g, s, Dp, Sp, x->slot_dt[o->src], D(x, out, int32_t), n_out, (int)dw));
            break;
        case KILN_OP_CROSS_ATTENTION: {
            /* zeros for sequences with several query tokens; rope the queries
             * at position + offset; decode attention over the verifier's
             * cache for the single-token ones */
            KILN_CHECK(x->base.cross, KILN_ERR_INTERNAL, "cross_attention without a verifier");
            KILN_TRY(kiln_rt_memset8(Dp, 0, (size_t)(rows * dw) * es, s));
            kiln_gpu_rope_params rp = x->rope;
            rp.head_dim = o->head_dim;
            KILN_TRY(kiln_gpu_rope(g, s, Sp, x->act, sw, D(x, xpos, int32_t), T, o->n_heads, 0, &rp));
            if (x->n_xseq > 0) {
                const void *kc, *vc;
                const kiln_kv_layout *xl;
                x->base.cross->vt->kv_layer(x->base.cross, o->kv_layer, &kc, &vc, &xl);
                kiln_gpu_attn a = {
                    .out = Dp, .q = Sp, .q_stride = sw, .kcache = (kiln_devptr)(uintptr_t)kc,
                    .vcache = (kiln_devptr)(uintptr_t)vc, .l = xl, .nq = o->n_heads, .qstart = D(x, xq, int32_t),
                    .ctx_len = D(x, xctx, int32_t), .block_tables = D(x, xtables, int32_t), .n_seqs = x->n_xseq,
                    .max_blocks = x->max_blocks, .scale = o->scale, .window = 0, .max_q_len = 1,
                    .max_ctx_len = x->max_xctx, .force_partition = 0,
                };
                KILN_TRY(kiln_gpu_attention(g, s, x->act, &a));
            }
            break;
        }
        case KILN_OP_ALL_REDUCE: {
            /* small messages (decode): the one-shot kernel over peer memory;
             * the choice depends only on the size, so every rank makes it alike */
            size_t n = (size_t)(rows * sw);
            /* followed by the residual add + RMSNorm of its result: one fused
             * kernel (not in profiling mode, which times each op) */
            if (!x->prof.on && ar_norm_follows(x, i, T, n_out)) {
                const kiln_op *nx = &p->ops[i + 1];
                KILN_TRY(kiln_rt_p2p_all_reduce_add_rmsnorm(x->p2p, Sp, x->slot[nx->src2], x->slot[nx->dst], x->w[nx->w],
                                                            (int)rows, (int)sw, nx->eps, x->slot_dt[o->src], s));
                i++; /* the add + rmsnorm is done */
                break;
            }
            if (kiln_rt_p2p_fits(x->p2p, Sp, n, x->slot_dt[o->src]))
                KILN_TRY(kiln_rt_p2p_all_reduce_sum(x->p2p, Sp, n, x->slot_dt[o->src], s));
            else
                KILN_TRY(kiln_rt_all_reduce_sum(x->nccl, Sp, n, x->slot_dt[o->src], s));
            break;
        }
        case KILN_OP_ALL_GATHER: {
            /* the push all-gather writes [rows, R * sw] directly; NCCL gathers rank-major
             * [R, rows, sw] and a row gather makes it [rows, R * sw] */
            int R = p->tp_size;
            if (x->p2p_gather && kiln_rt_p2p_fits_gather(x->p2p, Sp, Dp, (size_t)rows, (size_t)sw, x->slot_dt[o->src])) {
                KILN_TRY(kiln_rt_p2p_all_gather(x->p2p, Sp, Dp, (size_t)rows, (size_t)sw, x->slot_dt[o->src], s));
                break;
            }
            KILN_TRY(kiln_rt_all_gather(x->nccl, Sp, x->gather_tmp, (size_t)(rows * sw), x->slot_dt[o->src], s));
            KILN_TRY(kiln_gpu_gather_rows(g, s, Dp, x->gather_tmp, x->slot_dt[o->src], D(x, gidx, int32_t),
                                          (int)rows * R, (int)sw));
            break;
        }
        default:
            KILN_CHECK(false, KILN_ERR_UNSUPPORTED, "op '%s' has no GPU variant yet", kiln_op_kind_name(o->kind));
        }
        if (skprof) { /* the blocks of the launch that wrote records (0: not through gemm_sk) */
            const int nb = kiln_gpu_set_skgemm_profile(g, 0, 0);
            if (nb > 0) x->skprof_nb = nb;
        }
    }
    if (x->prof.on && !x->capturing) {
        KILN_TRY(kiln_rt_event_record(x->ev[p->n_ops], s));
        KILN_TRY(kiln_rt_event_sync(x->ev[p->n_ops]));
        for (int i = 0; i < p->n_ops; i++) {
            float ms = 0;
            KILN_TRY(kiln_rt_event_elapsed_ms(x->ev[i], x->ev[i + 1], &ms));
            kiln_profile_add(&x->prof, p, i, ms, max_q == 1 && T == S);
        }
        kiln_profile_step(&x->prof, max_q == 1 && T == S);
    }
fail:
    kiln_rt_kernels_set_pdl_early(kiln_gpu_kernels(g), false);
    return st;
}

/* Which graph serves a decode batch of n sequences, or -1. */
static int bucket_for(const exec_gpu *x, int n) {
    for (int i = 0; i < x->n_buckets; i++)
        if (x->bucket[i] >= n) return i;
    return -1;
}

static bool is_decode(const kiln_batch *b) {
    return b->max_q_len == 1 && b->n_tokens == b->n_seqs && b->n_out == b->n_seqs && !b->cross_tables;
}

/* A verification step of q tokens in every sequence, every position an
 * output row in order. */
static bool is_verify(const kiln_batch *b, int q) {
    if (q < 2 || b->max_q_len != q || b->n_tokens != b->n_seqs * q || b->n_out != b->n_tokens || b->cross_tables)
        return false;
    for (int i = 0; i < b->n_out; i++)
        if (b->out_rows[i] != i) return false;
    return true;
}

/* Run the program for a batch; logits stay on the device. One upload: the
 * metadata, the fed rows (feed: input token of sequence i = the previous
 * step's token of row feed[i], still in d_res) and, with rows, the sampling
 * parameters of the output rows. */
static kiln_status gpu_run(exec_gpu *x, const kiln_batch *b, const int32_t *feed, const kiln_sample_req *rows) {
    kiln_status st = KILN_OK;
    KILN_CHECK(b->n_tokens >= 1 && b->n_tokens <= x->cfg.max_tokens && b->n_out <= x->cfg.max_out &&
                   b->n_seqs <= x->cfg.max_seqs && b->max_ctx_len <= x->max_ctx,
               KILN_ERR_INTERNAL, "batch of %d tokens / %d outputs / %d seqs / ctx %d exceeds the plan", b->n_tokens,
               b->n_out, b->n_seqs, b->max_ctx_len);
    /* the stepping thread may not be the one that created the executor */
    KILN_TRY(kiln_rt_device_make_current(x->dev));
    int bi = (is_decode(b) && x->n_buckets && !x->calib) ? bucket_for(x, b->n_seqs) : -1;
    int vi = (bi < 0 && x->n_vbuckets && !x->calib && is_verify(b, x->verify_q)) ? bucket_for(x, b->n_seqs) : -1;
    if (vi >= x->n_vbuckets) vi = -1;
    use_meta(x, bi >= 0 ? &x->mo_dec[bi] : vi >= 0 ? &x->mo_ver[vi] : &x->mo_full);
    pack_meta(x, b, bi >= 0 ? x->bucket[bi] : vi >= 0 ? x->bucket[vi] : b->n_seqs, vi >= 0 ? x->verify_q : 1);
    if (feed) memcpy(H(x, feed, int32_t), feed, sizeof(int32_t) * (size_t)b->n_seqs);
    if (rows) {
        kiln_gpu_sample_params *sp = H(x, sparams, kiln_gpu_sample_params);
        for (int i = 0; i < b->n_out; i++) {
            const kiln_sample_req *q = &rows[i];
            sp[i] = (kiln_gpu_sample_params){q->p.temperature, q->p.top_p, q->p.min_p, q->repetition,
                                             q->presence,      q->frequency, q->p.top_k, 0, q->p.seed, q->p.step};
        }
    }
    if (x->step_feed && x->mo.copy <= KILN_STEP_FEED_MAX_BYTES) {
        KILN_TRY(kiln_gpu_step_feed(x->g, x->st, x->d_meta, x->h_meta, x->mo.copy, x->mo.tokens, x->mo.feed,
                                    feed ? b->n_seqs : 0, x->d_res));
    } else {
        KILN_TRY(kiln_rt_memcpy_htod(x->d_meta, x->h_meta, x->mo.copy, x->st));
        if (feed)
            KILN_TRY(kiln_gpu_gather_rows(x->g, x->st, D(x, tokens, int32_t), x->d_res, KILN_DTYPE_F32,
                                          D(x, feed, int32_t), b->n_seqs, 1));
    }
    if (bi >= 0)
        KILN_TRY(kiln_rt_graph_launch(x->graph[bi], x->st));
    else if (vi >= 0)
        KILN_TRY(kiln_rt_graph_launch(x->vgraph[vi], x->st));
    else
        KILN_TRY(run_ops(x, b->n_tokens, b->n_seqs, b->n_out, b->max_q_len, b->max_ctx_len));
    x->base.n_forward++;
fail:
    return st;
}

static kiln_status gpu_forward(kiln_exec *base, const kiln_batch *b, const float **logits) {
    exec_gpu *x = (exec_gpu *)base;
    kiln_status st = KILN_OK;
    KILN_CHECK(x->n_pend == 0, KILN_ERR_INTERNAL, "forward with a sampled step outstanding");
    KILN_TRY(gpu_run(x, b, NULL, NULL));
    size_t V = (size_t)x->p->slots[x->p->logits_slot].width;
    /* logits NULL: the outputs stay on the device (tensor-parallel ranks > 0) */
    if (logits) KILN_TRY(kiln_rt_memcpy_dtoh(x->h_logits, x->slot[x->p->logits_slot], (size_t)b->n_out * V * 4, x->st));
    KILN_TRY(kiln_rt_stream_sync(x->st));
    if (logits) *logits = x->h_logits;
fail:
    return st;
}

/* Launch a sampled step (kiln_exec_vt.launch_sample): the forward, the
 * sampling and the copy of its tokens back are queued; collect_sample waits.
 * It takes the staging set the outstanding step (if any) does not use. */
static kiln_status gpu_launch_sample(kiln_exec *base, const kiln_batch *b, const kiln_sample_req *rows,
                                     const int32_t *feed) {
    exec_gpu *x = (exec_gpu *)base;
    kiln_status st = KILN_OK;
    KILN_TRY(kiln_exec_launch_check(x->n_pend, b, feed));
    int n = b->n_out, V = x->p->slots[x->p->logits_slot].width;
    /* token histories for penalties and bans, CSR: [prompt | output | banned] x rows */
    size_t need = 0;
    bool any = false, greedy = true;
    for (int i = 0; i < n; i++) {
        need += (size_t)rows[i].n_prompt + (size_t)rows[i].n_output + (size_t)rows[i].n_banned;
        any |= rows[i].n_prompt || rows[i].n_output || rows[i].n_banned || rows[i].repetition != 1.0f ||
               rows[i].presence != 0.0f || rows[i].frequency != 0.0f;
        greedy &= !(rows[i].p.temperature > 0.0f);
    }
    /* the histories have one staging buffer: only without an outstanding step */
    KILN_CHECK(!any || x->n_pend == 0, KILN_ERR_INTERNAL, "penalties or bans with a sampled step outstanding");
    KILN_CHECK(need <= x->hist_cap, KILN_ERR_LIMIT, "sampling history of %zu tokens exceeds the buffer (%zu)", need,
               x->hist_cap);
    const int kb = x->cur_buf ^ 1;
    x->cur_buf = kb;
    x->h_meta = x->h_meta_buf[kb];
    KILN_TRY(gpu_run(x, b, feed, rows));
    kiln_devptr logits = x->slot[x->p->logits_slot], sparams = D(x, sparams, kiln_gpu_sample_params);
    if (any) {
        size_t k = 0;
        int32_t *off = x->h_hoff; /* [3][n + 1] */
        for (int part = 0; part < 3; part++) {
            for (int i = 0; i < n; i++) {
                const int32_t *ids = part == 0 ? rows[i].prompt : part == 1 ? rows[i].output : rows[i].banned;
                int m = part == 0 ? rows[i].n_prompt : part == 1 ? rows[i].n_output : rows[i].n_banned;
                off[part * (n + 1) + i] = (int32_t)k;
                if (m) memcpy(x->h_hist + k, ids, sizeof(int32_t) * (size_t)m);
                k += (size_t)m;
            }
            off[part * (n + 1) + n] = (int32_t)k;
        }
        KILN_TRY(kiln_rt_memcpy_htod(x->d_hoff, off, sizeof(int32_t) * (size_t)(3 * (n + 1)), x->st));
        if (k) KILN_TRY(kiln_rt_memcpy_htod(x->d_hist, x->h_hist, sizeof(int32_t) * k, x->st));
        kiln_devptr o0 = x->d_hoff, o1 = o0 + (kiln_devptr)(4 * (n + 1)), o2 = o1 + (kiln_devptr)(4 * (n + 1));
        KILN_TRY(kiln_gpu_sample_penalties(x->g, x->st, logits, n, V, sparams, x->d_hist, o0, x->d_hist, o1,
                                           x->d_hist, o2));
    }
    /* tokens then logprobs, adjacent: one copy back. With the copy stream, this set's
     * results (the gather above read the previous set's) once its last copy back is done */
    if (x->cp_st) {
        x->d_res = x->d_res_buf[kb];
        KILN_TRY(kiln_rt_stream_wait_event(x->st, x->done_ev[kb]));
    }
    kiln_devptr d_lp = x->d_res + (kiln_devptr)(4 * (size_t)n);
    if (greedy && !any)
        KILN_TRY(kiln_gpu_sample_greedy(x->g, x->st, x->d_res, d_lp, logits, n, V, sparams));
    else
        KILN_TRY(kiln_gpu_sample(x->g, x->st, x->d_res, d_lp, logits, n, V, sparams));
    kiln_rt_stream *cs = x->st;
    if (x->cp_st) {
        cs = x->cp_st;
        KILN_TRY(kiln_rt_event_record(x->sampled_ev[kb], x->st));
        KILN_TRY(kiln_rt_stream_wait_event(cs, x->sampled_ev[kb]));
    }
    KILN_TRY(kiln_rt_memcpy_dtoh(x->h_res_buf[kb], x->d_res, 8 * (size_t)n, cs));
    KILN_TRY(kiln_rt_event_record(x->done_ev[kb], cs));
    x->pend_buf[x->n_pend] = kb;
    x->pend_n[x->n_pend] = n;
    x->n_pend++;
fail:
    if (st && kiln_rt_check_device(x->dev) != KILN_OK) kiln_error_context("the GPU faulted");
    return st;
}

/* Wait for the oldest outstanding sampled step; its tokens and logprobs. */
static kiln_status gpu_collect_sample(kiln_exec *base, int32_t *tokens, float *logprobs) {
    exec_gpu *x = (exec_gpu *)base;
    kiln_status st = KILN_OK;
    KILN_CHECK(x->n_pend > 0, KILN_ERR_INTERNAL, "no sampled step is outstanding");
    const int k = x->pend_buf[0], n = x->pend_n[0];
    x->n_pend--;
    x->pend_buf[0] = x->pend_buf[1];
    x->pend_n[0] = x->pend_n[1];
    KILN_TRY(kiln_rt_event_sync(x->done_ev[k]));
    if (tokens) memcpy(tokens, x->h_res_buf[k], sizeof(int32_t) * (size_t)n);
    if (logprobs) memcpy(logprobs, x->h_res_buf[k] + n, sizeof(float) * (size_t)n);
fail:
    if (st && kiln_rt_check_device(x->dev) != KILN_OK) kiln_error_context("the GPU faulted");
    return st;
}

static kiln_status gpu_forward_sample(kiln_exec *base, const kiln_batch *b, const kiln_sample_req *rows,
                                      int32_t *tokens, float *logprobs) {
    exec_gpu *x = (exec_gpu *)base;
    kiln_status st = KILN_OK;
    KILN_CHECK(x->n_pend == 0, KILN_ERR_INTERNAL, "forward_sample with a sampled step outstanding");
    KILN_TRY(gpu_launch_sample(base, b, rows, NULL));
    KILN_TRY(gpu_collect_sample(base, tokens, logprobs));
fail:
    return st;
}

static void gpu_kv_layer(kiln_exec *base, int layer, const void **k, const void **v, const kiln_kv_layout **l) {
    exec_gpu *x = (exec_gpu *)base;
    *k = (const void *)(uintptr_t)x->kc[layer];
    *v = (const void *)(uintptr_t)x->vc[layer];
    *l = &x->layouts[layer];
}

/* ------------------------------------------------------------ FP8 scales */

static kiln_status gpu_kv_calibrate(kiln_exec *base, int n_tokens) {
    exec_gpu *x = (exec_gpu *)base;
    kiln_status st = KILN_OK;
    const kiln_program *p = x->p;
    free(x->calib_rows);
    x->calib_rows = NULL;
    x->calib = false;
    if (n_tokens <= 0) return KILN_OK;
    /* the pool's bytes seen as an activation-dtype cache */
    int nb = (int)((size_t)x->layout.num_blocks * kiln_dtype_size(x->layout.dtype) / kiln_dtype_size(x->act));
    int need = KILN_DIV_UP(n_tokens, x->layout.block_size);
    KILN_CHECK(need <= nb, KILN_ERR_LIMIT, "calibrating %d tokens needs %d blocks; the pool holds %d in %s", n_tokens,
               need, nb, kiln_dtype_name(x->act));
    KILN_CHECK(n_tokens <= x->cfg.max_tokens, KILN_ERR_LIMIT, "calibration of %d tokens exceeds the step plan (%d)",
               n_tokens, x->cfg.max_tokens);
    kiln_kv_layout_init(&x->clayout, nb, x->layout.block_size, p->n_kv_heads, p->head_dim, x->act);
    int64_t wmax = 0;
    for (int i = 0; i < p->n_slots; i++) wmax = KILN_MAX(wmax, p->slots[i].width);
    x->calib_rows = malloc((size_t)n_tokens * (size_t)wmax * kiln_dtype_size(x->act));
    KILN_CHECK_ALLOC(x->calib_rows);
    KILN_CHECK(p->head_dim <= 1024, KILN_ERR_UNSUPPORTED, "head_dim %d", p->head_dim);
    memset(x->amax, 0, sizeof(float) * (size_t)p->n_kv_layers * 2 * (size_t)p->n_kv_heads);
    x->calib_tokens = n_tokens;
    x->calib = true;
fail:
    return st;
}

static void gpu_kv_amax(kiln_exec *base, float *amax) {
    exec_gpu *x = (exec_gpu *)base;
    kiln_kv_merge_amax(x->mf, x->amax, amax);
}

static kiln_status gpu_set_kv_scales(kiln_exec *base, const float *scales) {
    exec_gpu *x = (exec_gpu *)base;
    kiln_status st = KILN_OK;
    const kiln_program *p = x->p;
    int G = kiln_kv_n_global_heads(x->mf), nkv = p->n_kv_heads;
    size_t n = (size_t)p->n_kv_layers * 2 * (size_t)nkv;
    float *h = malloc(sizeof(float) * n);
    KILN_CHECK_ALLOC(h);
    KILN_CHECK(x->d_scales, KILN_ERR_UNSUPPORTED, "the %s KV cache takes no scales", kiln_dtype_name(x->layout.dtype));
    for (int l = 0; l < p->n_kv_layers; l++)
        for (int w = 0; w < 2; w++)
            for (int k = 0; k < nkv; k++) {
                float v = scales[((size_t)l * 2 + (size_t)w) * (size_t)G + (size_t)kiln_kv_global_head(p, G, k)];
                KILN_CHECK(v > 0 && v < INFINITY, KILN_ERR_INVALID_ARGUMENT,
                           "KV cache layer %d: %s scale %g of head %d is not a positive finite number", l,
                           w ? "value" : "key", (double)v, k);
                h[((size_t)l * 2 + (size_t)w) * (size_t)nkv + (size_t)k] = v;
            }
    KILN_TRY(kiln_rt_memcpy_htod(x->d_scales, h, sizeof(float) * n, x->st));
    KILN_TRY(kiln_rt_stream_sync(x->st));
    for (int l = 0; l < p->n_kv_layers; l++) {
        x->layouts[l].k_scale = h[(size_t)l * 2 * (size_t)nkv];
        x->layouts[l].v_scale = h[((size_t)l * 2 + 1) * (size_t)nkv];
    }
fail:
    free(h);
    return st;
}

/* $KILN_SKGEMM_PROF_OUT: the records of the profiled GEMM op (the last launch that ran it: a header of 2 u64, the
 * block count and KILN_SKGEMM_PROF_N, then the records; bench/sk_prof_summary.py reads them) */
static void skprof_write(exec_gpu *x) {
    if (!x->skprof_buf || !x->skprof_out) return;
    if (x->skprof_nb <= 0) {
        KILN_WARN("KILN_SKGEMM_PROF_OP=%d: that GEMM op never ran through gemm_sk; no records written", x->skprof_op);
        return;
    }
    const size_t n = (size_t)x->skprof_nb * KILN_SKGEMM_PROF_N;
    uint64_t *h = malloc(8 * (n + 2));
    FILE *f = h ? fopen(x->skprof_out, "wb") : NULL;
    if (f) {
        h[0] = (uint64_t)x->skprof_nb, h[1] = KILN_SKGEMM_PROF_N;
        if (kiln_rt_stream_sync(x->st) == KILN_OK && kiln_rt_memcpy_dtoh(h + 2, x->skprof_buf, 8 * n, NULL) == KILN_OK &&
            fwrite(h, 8, n + 2, f) == n + 2)
            KILN_INFO("gemm_sk timing records of GEMM op %d (%d blocks) written to %s", x->skprof_op, x->skprof_nb,
                      x->skprof_out);
        else KILN_WARN("could not write gemm_sk timing records to %s", x->skprof_out);
        fclose(f);
    } else KILN_WARN("could not write gemm_sk timing records to %s", x->skprof_out);
    free(h);
}

static void gpu_destroy(kiln_exec *base) {
    exec_gpu *x = (exec_gpu *)base;
    if (!x) return;
    kiln_profile_report(&x->prof, "cuda");
    kiln_profile_free(&x->prof);
    if (x->dev) kiln_rt_device_make_current(x->dev);
    skprof_write(x);
    if (x->skprof_buf) kiln_rt_free(x->dev, x->skprof_buf);
    free(x->skprof_out);
    if (x->st) kiln_rt_stream_sync(x->st); /* an uncollected step still copies into pinned memory */
    if (x->cp_st) kiln_rt_stream_sync(x->cp_st);
    if (x->ev)
        for (int i = 0; i <= x->p->n_ops; i++)
            if (x->ev[i]) kiln_rt_event_destroy(x->ev[i]);
    free(x->ev);
    for (int i = 0; i < x->n_buckets; i++) kiln_rt_graph_destroy(x->graph[i]);
    for (int i = 0; i < x->n_vbuckets; i++) kiln_rt_graph_destroy(x->vgraph[i]);
    kiln_rt_p2p_destroy(x->p2p);
    if (x->nccl) kiln_rt_comm_destroy(x->nccl);
    kiln_gpu_destroy(x->g);
    if (x->st) kiln_rt_stream_destroy(x->st);
    if (x->cp_st) kiln_rt_stream_destroy(x->cp_st);
    kiln_rt_pool_destroy(x->wpool);
    kiln_rt_pool_destroy(x->apool);
    kiln_rt_pool_destroy(x->kvpool);
    for (int k = 0; k < 2; k++) {
        if (x->done_ev[k]) kiln_rt_event_destroy(x->done_ev[k]);
        if (x->sampled_ev[k]) kiln_rt_event_destroy(x->sampled_ev[k]);
        if (x->h_meta_buf[k]) kiln_rt_host_free(x->dev, x->h_meta_buf[k]);
        if (x->h_res_buf[k]) kiln_rt_host_free(x->dev, x->h_res_buf[k]);
    }
    if (x->h_logits) kiln_rt_host_free(x->dev, x->h_logits);
    if (x->h_hist) kiln_rt_host_free(x->dev, x->h_hist);
    if (x->h_hoff) kiln_rt_host_free(x->dev, x->h_hoff);
    free(x->w);
    free(x->slot);
    free(x->slot_dt);
    free(x->kc);
    free(x->vc);
    free(x->layouts);
    free(x->amax);
    free(x->calib_rows);
    if (x->dev) kiln_rt_device_close(x->dev);
    free(x);
}

static const kiln_exec_vt gpu_vt = {gpu_forward,      gpu_forward_sample, gpu_destroy,        gpu_kv_layer,
                                    gpu_kv_calibrate, gpu_kv_amax,        gpu_set_kv_scales,  gpu_launch_sample,
                                    gpu_collect_sample, true};

/* ---------------------------------------------------------- weight upload */

typedef struct stager {
    exec_gpu *x;
    char *buf[2];
    kiln_rt_event *ev[2];
    int cur;
    size_t used;
    kiln_devptr dst; /* device address the current buffer goes to */
    size_t done, total;
    double t0, last_print;
    bool tty;
} stager;

static kiln_status stage_flush(stager *s) {
    kiln_status st = KILN_OK;
    if (!s->used) return KILN_OK;
    KILN_TRY(kiln_rt_memcpy_htod(s->dst, s->buf[s->cur], s->used, s->x->st));
    KILN_TRY(kiln_rt_event_record(s->ev[s->cur], s->x->st));
    s->done += s->used;
    s->dst += s->used;
    s->used = 0;
    s->cur ^= 1;
    KILN_TRY(kiln_rt_event_sync(s->ev[s->cur])); /* the other buffer's copy is done: reuse it */
    double now = kiln_now_sec();
    if (s->tty && now - s->last_print > 0.25) {
        double el = now - s->t0, rate = el > 0 ? s->done / el : 0;
        fprintf(stderr, "\rkiln: loading weights %.2f / %.2f GB  %.2f GB/s  ETA %.0f s   ", s->done / 1e9,
                s->total / 1e9, rate / 1e9, rate > 0 ? (s->total - s->done) / rate : 0.0);
        s->last_print = now;
    }
fail:
    return st;
}

/* Append n bytes at the current device position (contiguous stream of
 * writes into one weight). */
static kiln_status stage_bytes(stager *s, const void *src, size_t n) {
    kiln_status st = KILN_OK;
    const char *p = src;
    while (n) {
        size_t take = KILN_MIN(n, STAGE_BYTES - s->used);
        memcpy(s->buf[s->cur] + s->used, p, take);
        s->used += take;
        p += take;
        n -= take;
        if (s->used == STAGE_BYTES) KILN_TRY(stage_flush(s));
    }
fail:
    return st;
}

/* Convert n elements of src (dt) to the activation dtype into the stage. */
static kiln_status stage_convert(stager *s, const void *src, kiln_dtype dt, size_t n) {
    kiln_status st = KILN_OK;
    kiln_dtype act = s->x->act;
    if (dt == act) return stage_bytes(s, src, n * kiln_dtype_size(dt));
    float tmp[4096];
    uint16_t out[4096];
    const char *p = src;
    while (n) {
        size_t take = KILN_MIN(n, (size_t)4096);
        kiln_to_f32(tmp, p, dt, take);
        kiln_from_f32(out, act, tmp, take);
        KILN_TRY(stage_bytes(s, out, take * 2));
        p += take * kiln_dtype_size(dt);
        n -= take;
    }
fail:
    return st;
}

static kiln_status upload_weights(exec_gpu *x) {
    kiln_status st = KILN_OK;
    const kiln_program *p = x->p;
    stager s = {.x = x, .tty = isatty(2), .t0 = kiln_now_sec()};
    uint16_t *rnd = NULL;
    size_t es = kiln_dtype_size(x->act);
    for (int i = 0; i < p->n_weights; i++) s.total += (size_t)(p->weights[i].rows * p->weights[i].cols) * es;
    KILN_TRY(kiln_rt_pool_create(x->dev, "weights", s.total + (size_t)p->n_weights * 256 + 4096, &x->wpool));
    for (int b = 0; b < 2; b++) {
        KILN_TRY(kiln_rt_host_alloc(x->dev, STAGE_BYTES, (void **)&s.buf[b]));
        KILN_TRY(kiln_rt_event_create(x->dev, false, &s.ev[b]));
        KILN_TRY(kiln_rt_event_record(s.ev[b], x->st));
    }
    /* dummy weights: one random block reused with rotating offsets */
    size_t rnd_n = (size_t)1 << 22;
    if (x->mf->dummy) {
        rnd = malloc(rnd_n * 2);
        KILN_CHECK_ALLOC(rnd);
        for (size_t k = 0; k < rnd_n; k += 4) {
            uint32_t r[4];
            kiln_philox4x32(x->cfg.seed, 7, k, r);
            for (int j = 0; j < 4 && k + (size_t)j < rnd_n; j++) {
                /* approximately N(0, 0.02): sum of 4 uniforms, centred */
                float u = (float)((r[j] & 0xff) + ((r[j] >> 8) & 0xff) + ((r[j] >> 16) & 0xff) + (r[j] >> 24)) /
                              255.0f - 2.0f;
                float v = u * 0.0346f;
                rnd[k + (size_t)j] = x->act == KILN_DTYPE_BF16 ? kiln_f32_to_bf16(v) : kiln_f32_to_f16(v);
            }
        }
    }
    for (int i = 0; i < p->n_weights; i++) {
        const kiln_weight_desc *d = &p->weights[i];
        size_t bytes = (size_t)(d->rows * d->cols) * es;
        KILN_TRY(stage_flush(&s));
        KILN_TRY(kiln_rt_pool_alloc(x->wpool, bytes, 256, &x->w[i]));
        s.dst = x->w[i];
        if (x->mf->dummy) {
            /* element (row, col) of a tensor is a function of its name and
             * position only, so every tensor-parallel layout sees the same
             * full tensor */
            for (int j = 0; j < d->n_parts; j++) {
                const kiln_weight_part *q = &d->parts[j];
                if (q->ndim == 1) {
                    uint16_t one = x->act == KILN_DTYPE_BF16 ? kiln_f32_to_bf16(1.0f) : kiln_f32_to_f16(1.0f);
                    for (int64_t k = 0; k < q->r_n; k++) KILN_TRY(stage_bytes(&s, &one, 2));
                    continue;
                }
                size_t h = (size_t)(kiln_hash64(q->tensor, strlen(q->tensor), 0) % rnd_n);
                for (int64_t r = 0; r < q->r_n; r++) {
                    size_t off = (h + (size_t)((q->r_lo + r) * q->shape[1] + q->c_lo)) % rnd_n, n = (size_t)q->c_n;
                    while (n) {
                        size_t take = KILN_MIN(n, rnd_n - off);
                        KILN_TRY(stage_bytes(&s, rnd + off, take * 2));
                        n -= take;
                        off = 0;
                    }
                }
            }
            continue;
        }
        for (int j = 0; j < d->n_parts; j++) {
            const kiln_weight_part *q = &d->parts[j];
            const kiln_tensor_info *t = kiln_checkpoint_find(&x->mf->ck, q->tensor);
            KILN_CHECK_INTERNAL(t);
            int64_t tcols = q->ndim == 2 ? t->shape[1] : 1;
            size_t tes = kiln_dtype_size(t->dtype);
            if (q->c_lo == 0 && q->c_n == tcols) { /* whole rows: one contiguous range */
                const char *src = (const char *)t->data + (size_t)(q->r_lo * tcols) * tes;
                KILN_TRY(stage_convert(&s, src, t->dtype, (size_t)(q->r_n * tcols)));
            } else {
                for (int64_t r = 0; r < q->r_n; r++) {
                    const char *src = (const char *)t->data + (size_t)((q->r_lo + r) * tcols + q->c_lo) * tes;
                    KILN_TRY(stage_convert(&s, src, t->dtype, (size_t)q->c_n));
                }
            }
        }
    }
    KILN_TRY(stage_flush(&s));
    KILN_TRY(kiln_rt_stream_sync(x->st));
    {
        double el = kiln_now_sec() - s.t0;
        if (s.tty) fprintf(stderr, "\r%80s\r", "");
        KILN_INFO("loaded %.2f GB of weights in %.2f s (%.2f GB/s)%s", s.total / 1e9, el,
                  el > 0 ? s.total / el / 1e9 : 0.0, x->mf->dummy ? " [dummy: random weights]" : "");
    }
    x->base.weight_bytes = s.total;
fail:
    free(rnd);
    for (int b = 0; b < 2; b++) {
        if (s.ev[b]) kiln_rt_event_destroy(s.ev[b]);
        if (s.buf[b]) kiln_rt_host_free(x->dev, s.buf[b]);
    }
    return st;
}

/* ------------------------------------------------------------- creation */

/* Capture the program for a padded batch of B sequences of Q tokens each
 * (every position an output row when Q > 1), on the metadata layout m
 * (planned here for the bucket). */
static kiln_status capture_one(exec_gpu *x, const kiln_batch *empty, int B, int Q, meta_off *m, kiln_rt_graph **out) {
    kiln_status st = KILN_OK;
    plan_meta(x, m, (size_t)B * (size_t)Q, (size_t)B, (size_t)B * (size_t)Q);
    KILN_CHECK(m->total <= x->mo_full.total, KILN_ERR_INTERNAL, "graph bucket %d x %d: metadata of %zu bytes (plan %zu)",
               B, Q, m->total, x->mo_full.total);
    use_meta(x, m);
    pack_meta(x, empty, B, Q);
    KILN_TRY(kiln_rt_memcpy_htod(x->d_meta, x->h_meta, x->mo.copy, x->st));
    KILN_TRY(run_ops(x, B * Q, B, B * Q, Q, x->max_ctx)); /* warm-up: algorithm choice outside capture */
    KILN_TRY(kiln_rt_stream_sync(x->st));
    KILN_TRY(kiln_rt_graph_begin(x->st));
    x->capturing = true;
    st = run_ops(x, B * Q, B, B * Q, Q, x->max_ctx);
    x->capturing = false;
    kiln_rt_graph *gr = NULL;
    kiln_status st2 = kiln_rt_graph_end(x->st, &gr);
    KILN_TRY(st);
    KILN_TRY(st2);
    *out = gr;
fail:
    use_meta(x, &x->mo_full);
    return st;
}

static kiln_status capture_graphs(exec_gpu *x) {
    kiln_status st = KILN_OK;
    double t0 = kiln_now_sec();
    int S = x->cfg.max_seqs;
    /* the batch-size ladder (kiln_rt_batch_ladder_next: 1, 2, 4, then
     * multiples of 8 up to 32, of 16 up to 128, of 32 beyond), which the
     * cuBLASLt autotuner's buckets follow up to 256 */
    int n = 0;
    for (int b = 1; b <= S && n < MAX_BUCKETS; ) {
        x->bucket[n++] = b;
        b = kiln_rt_batch_ladder_next(b);
        if (b > S && x->bucket[n - 1] < S && n < MAX_BUCKETS) x->bucket[n++] = S;
    }
    /* a fake decode batch on the scratch block sizes every launch */
    kiln_batch b = {0};
    int32_t zero[1] = {0}, q[2] = {0, 0};
    b.n_tokens = b.n_seqs = b.n_out = 0;
    b.tokens = b.positions = b.slots = b.ctx_len = b.block_tables = b.out_rows = zero;
    b.qstart = q;
    b.max_blocks = x->max_blocks;
    for (int i = 0; i < n; i++) {
        int B = x->bucket[i];
        kiln_rt_graph *gr = NULL;
        KILN_TRY(capture_one(x, &b, B, 1, &x->mo_dec[i], &gr));
        x->graph[i] = gr;
        x->n_buckets = i + 1;
    }
    /* verification shapes: the same buckets while B * q tokens fit the plan */
    const int Q = x->verify_q;
    for (int i = 0; Q > 1 && i < n && x->bucket[i] * Q <= x->cfg.max_tokens && x->bucket[i] * Q <= x->cfg.max_out;
         i++) {
        kiln_rt_graph *gr = NULL;
        KILN_TRY(capture_one(x, &b, x->bucket[i], Q, &x->mo_ver[i], &gr));
        x->vgraph[i] = gr;
        x->n_vbuckets = i + 1;
    }
    KILN_TRY(kiln_rt_stream_sync(x->st));
    x->capture_s = kiln_now_sec() - t0;
    KILN_INFO("captured %d CUDA graphs for decode batches of 1..%d%s in %.2f s", x->n_buckets + x->n_vbuckets,
              x->n_buckets ? x->bucket[x->n_buckets - 1] : 0,
              x->n_vbuckets ? " and verification batches" : "", x->capture_s);
fail:
    return st;
}

/* The one-shot all-reduce over peer memory, set up on every rank together
 * (collective, after the kernels are ready): the ranks all-gather whether
 * each could allocate its buffer, then their handles, then whether each
 * could reach every peer; if any rank cannot, every rank keeps NCCL and rank
 * 0 logs why. $KILN_CUSTOM_ALLREDUCE=0 keeps NCCL. */
typedef struct p2p_msg {
    uint8_t ok;
    char why[447];
    uint8_t handle[KILN_RT_P2P_HANDLE_BYTES];
} p2p_msg;

static bool p2p_all_ok(exec_gpu *x, const p2p_msg *all) {
    for (int r = 0; r < x->p->tp_size; r++)
        if (!all[r].ok) {
            if (x->p->tp_rank == 0)
                KILN_WARN("all-reduce: NCCL only; the one-shot kernel over peer memory is off (rank %d: %s)", r,
                          all[r].why);
            kiln_rt_p2p_destroy(x->p2p);
            x->p2p = NULL;
            return false;
        }
    return true;
}

static kiln_status setup_p2p(exec_gpu *x, kiln_comm *comm) {
    kiln_status st = KILN_OK;
    const int R = x->p->tp_size, rank = x->p->tp_rank;
    const char *env = getenv("KILN_CUSTOM_ALLREDUCE");
    if (env && !strcmp(env, "0")) { /* the same environment on every rank */
        if (rank == 0) KILN_INFO("all-reduce: NCCL ($KILN_CUSTOM_ALLREDUCE=0)");
        return KILN_OK;
    }
    const char *fe = getenv("KILN_FUSE_AR_NORM"); /* the same environment on every rank */
    x->fuse_ar_norm = !(fe && !strcmp(fe, "0"));
    const char *ge = getenv("KILN_P2P_GATHER"); /* the same environment on every rank */
    x->p2p_gather = !(ge && !strcmp(ge, "0"));
    p2p_msg m = {0};
    p2p_msg *all = calloc((size_t)R, sizeof *all);
    uint8_t *handles = calloc((size_t)R, KILN_RT_P2P_HANDLE_BYTES);
    KILN_CHECK(all && handles, KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    m.ok = kiln_rt_p2p_create(x->dev, kiln_gpu_kernels(x->g), R, rank, 0, -1, &x->p2p) == KILN_OK;
    if (m.ok) kiln_rt_p2p_handle(x->p2p, m.handle);
    else snprintf(m.why, sizeof m.why, "%s", kiln_last_error());
    KILN_TRY(kiln_comm_all_gather(comm, &m, all, sizeof m));
    if (!p2p_all_ok(x, all)) goto fail; /* NCCL only (st is KILN_OK) */
    for (int r = 0; r < R; r++)
        memcpy(handles + (size_t)r * KILN_RT_P2P_HANDLE_BYTES, all[r].handle, KILN_RT_P2P_HANDLE_BYTES);
    m.ok = kiln_rt_p2p_set_peers(x->p2p, handles) == KILN_OK;
    if (!m.ok) snprintf(m.why, sizeof m.why, "%s", kiln_last_error());
    KILN_TRY(kiln_comm_all_gather(comm, &m, all, sizeof m));
    if (!p2p_all_ok(x, all)) goto fail; /* NCCL only */
    if (rank == 0)
        KILN_INFO("all-reduce: one-shot over peer memory up to %zu KB, NCCL above", kiln_rt_p2p_max_bytes(x->p2p) >> 10);
fail:
    free(all);
    free(handles);
    return st;
}

kiln_status kiln_exec_gpu_create(const kiln_model_files *mf, const kiln_exec_config *cfg, kiln_exec **out) {
    kiln_status st = KILN_OK;
    const kiln_program *p = mf->program;
    exec_gpu *x = calloc(1, sizeof *x);
    KILN_CHECK_ALLOC(x);
    x->base.vt = &gpu_vt;
    x->base.device = "cuda";
    x->mf = mf;
    x->p = p;
    x->cfg = *cfg;
    x->verify_q = cfg->verify_q;
    KILN_CHECK(p->tp_size == 1 || (cfg->comm && kiln_comm_size(cfg->comm) == p->tp_size),
               KILN_ERR_INTERNAL, "rank %d of %d has no communicator", p->tp_rank, p->tp_size);
    for (int i = 0; i < p->n_ops; i++) {
        const kiln_op *o = &p->ops[i];
        if (o->kind == KILN_OP_CROSS_ATTENTION) x->xoffset = o->pos_offset;
        KILN_CHECK(o->kind != KILN_OP_SCALE,
                   KILN_ERR_UNSUPPORTED, "%s: op '%s' has no GPU variant yet", o->where, kiln_op_kind_name(o->kind));
    }
    /* policy kernels replace the registry kernel of the op kind they name,
     * for every op of that kind (so all of them must ask for it) */
    for (int i = 0; i < p->n_ops; i++) {
        const kiln_op *o = &p->ops[i];
        for (int j = 0; j < p->n_ops; j++)
            KILN_CHECK(p->ops[j].kind != o->kind || p->ops[j].custom == o->custom, KILN_ERR_UNSUPPORTED,
                       "%s: on the GPU a policy kernel replaces every '%s' op; %s runs another variant",
                       o->where, kiln_op_kind_name(o->kind), p->ops[j].where);
    }
    KILN_TRY(kiln_rt_init());
    KILN_TRY(kiln_rt_device_open(cfg->device_id, &x->dev));
    x->info = kiln_rt_device_get_info(x->dev);
    KILN_TRY(kiln_rt_stream_create(x->dev, &x->st));
    {
        const char *v = getenv("KILN_COPY_STREAM");
        if (v && *v ? atoi(v) > 0 : KILN_COPY_STREAM_DEFAULT) KILN_TRY(kiln_rt_stream_create(x->dev, &x->cp_st));
        v = getenv("KILN_STEP_FEED");
        /* (the kernel reads the pinned block at its host address: unified addressing) */
        x->step_feed = (v && *v ? atoi(v) > 0 : KILN_STEP_FEED_DEFAULT) && x->info->unified_addressing;
    }
    if (p->tp_size > 1) {
        /* one NCCL communicator per rank, created together (NVLink multicast stays off) */
        setenv("NCCL_NVLS_ENABLE", "0", 1);
        uint8_t id[KILN_RT_NCCL_ID_BYTES];
        if (p->tp_rank == 0) KILN_TRY(kiln_rt_nccl_get_id(id));
        KILN_TRY(kiln_comm_broadcast(cfg->comm, id, sizeof id));
        KILN_TRY(kiln_rt_comm_create(x->dev, id, p->tp_size, p->tp_rank, &x->nccl));
    }
    x->act = cfg->dtype == KILN_DTYPE_F16 ? KILN_DTYPE_F16
             : cfg->dtype == KILN_DTYPE_BF16 ? KILN_DTYPE_BF16
             : mf->cfg.dtype == KILN_DTYPE_F16 ? KILN_DTYPE_F16 : KILN_DTYPE_BF16;
    kiln_dtype kvd = cfg->kv_dtype == KILN_DTYPE_INVALID ? x->act : cfg->kv_dtype;
    const bool kv8 = kvd == KILN_DTYPE_FP8_E4M3 || kvd == KILN_DTYPE_FP8_E5M2;
    KILN_CHECK(kvd == x->act || kv8, KILN_ERR_UNSUPPORTED,
               "a %s KV cache with %s activations: the GPU keeps it in the activation dtype or FP8",
               kiln_dtype_name(kvd), kiln_dtype_name(x->act));
    /* what the paged kernels need (kiln_gpu_kv_multiple), checked before any weight is read or a kernel runs */
    const int kvm = kiln_gpu_kv_multiple(kvd);
    KILN_CHECK(cfg->block_size % kvm == 0 && p->head_dim % kvm == 0, KILN_ERR_UNSUPPORTED,
               "the GPU's %s KV cache needs block_size and head_dim multiples of %d (got block_size %d, head_dim %d); "
               "the CPU backend takes any",
               kiln_dtype_name(kvd), kvm, cfg->block_size, p->head_dim);
    x->max_blocks = cfg->max_blocks_per_seq;
    x->max_ctx = x->max_blocks * cfg->block_size;

    /* kernels for this model, compiled (or read from the disk cache) in parallel */
    kiln_gpu_params gp = {.max_sample_rows = cfg->max_out, .vocab = p->slots[p->logits_slot].width};
    KILN_TRY(kiln_gpu_create(x->dev, &gp, &x->g));
    kiln_jit_model jm = {.act = x->act, .kv = kvd, .head_dim = p->head_dim, .n_heads = 0,
                         .n_kv_heads = p->n_kv_heads, .block_size = cfg->block_size, .interleaved = p->rope_interleaved,
                         .kv_calib = kvd == KILN_DTYPE_FP8_E4M3};
    for (int i = 0; i < p->n_ops; i++) {
        if (p->ops[i].kind == KILN_OP_ATTENTION) jm.n_heads = p->ops[i].n_heads;
        if (p->ops[i].kind == KILN_OP_GELU_MUL) jm.gelu = true;
        if (p->ops[i].kind == KILN_OP_SILU_MUL && p->ops[i].dst >= 0) jm.intermediate = (int)p->slots[p->ops[i].dst].width;
    }
    jm.hidden = jm.n_heads * p->head_dim;
    for (int i = 0; i < p->n_kernels; i++) {
        const kiln_custom_kernel *ck = &p->kernels[i];
        const char *reg = kiln_op_kind_name(ck->replaces); /* registry names follow the op kinds */
        KILN_CHECK(kiln_jit_find(reg), KILN_ERR_UNSUPPORTED, "%s: op '%s' has no GPU kernel a policy can replace",
                   ck->where, reg);
        st = kiln_rt_kernels_add_source(kiln_gpu_kernels(x->g), reg, ck->source, ck->entry, NULL);
        if (st) {
            kiln_error_context("policy kernel '%s' (%s)", ck->name, ck->where);
            goto fail;
        }
    }
    {
        const char *pe = getenv("KILN_PDL_EARLY_MAX_SEQS");
        x->pdl_early_max = pe && *pe ? atoi(pe) : KILN_PDL_EARLY_MAX_SEQS_DEFAULT;
    }
    double tj = kiln_now_sec();
    jm.pdl_early = x->pdl_early_max > 0 && kiln_rt_kernels_pdl(kiln_gpu_kernels(x->g));
    KILN_TRY(kiln_gpu_prepare(x->g, &jm));
    KILN_INFO("kernels ready in %.2f s", kiln_now_sec() - tj);
    if (p->tp_size > 1) KILN_TRY(setup_p2p(x, cfg->comm));

    x->w = calloc((size_t)p->n_weights, sizeof *x->w);
    x->slot = calloc((size_t)p->n_slots, sizeof *x->slot);
    x->slot_dt = calloc((size_t)p->n_slots, sizeof *x->slot_dt);
    x->kc = calloc((size_t)p->n_kv_layers, sizeof *x->kc);
    x->vc = calloc((size_t)p->n_kv_layers, sizeof *x->vc);
    x->layouts = calloc((size_t)p->n_kv_layers, sizeof *x->layouts);
    x->amax = calloc((size_t)p->n_kv_layers * 2 * (size_t)p->n_kv_heads, sizeof(float));
    KILN_CHECK(x->w && x->slot && x->slot_dt && x->kc && x->vc && x->layouts && x->amax, KILN_ERR_OUT_OF_MEMORY,
               "out of host memory");
    KILN_TRY(upload_weights(x));

    /* activations and step metadata, planned once */
    x->dynamic_rope = !strcmp(p->rope.type, "dynamic");
    plan_meta(x, &x->mo_full, (size_t)cfg->max_tokens, (size_t)cfg->max_seqs, (size_t)cfg->max_out);
    x->mo = x->mo_full;
    size_t act_bytes = x->mo.total + 4096;
    /* logits stay fp32 for sampling: the logits slot, and the per-rank slot
     * gathered into it under tensor parallelism */
    int logits_src = -1;
    for (int i = 0; i < p->n_ops; i++)
        if (p->ops[i].kind == KILN_OP_ALL_GATHER && p->ops[i].dst == p->logits_slot) logits_src = p->ops[i].src;
    for (int i = 0; i < p->n_slots; i++) {
        x->slot_dt[i] = (i == p->logits_slot || i == logits_src) ? KILN_DTYPE_F32 : x->act;
        int64_t rows = p->slots[i].per_out ? cfg->max_out : cfg->max_tokens;
        act_bytes += align256((size_t)(rows * p->slots[i].width) * kiln_dtype_size(x->slot_dt[i]));
    }
    x->hist_cap = (size_t)cfg->max_out * 8192 + 65536;
    if (p->tp_size > 1) act_bytes += align256(4 * (size_t)cfg->max_out * (size_t)p->vocab_size);
    act_bytes += 2 * align256(8 * (size_t)cfg->max_out) + align256(4 * x->hist_cap) + align256(4 * 3 * ((size_t)cfg->max_out + 1));
    act_bytes += align256(4 * (size_t)KILN_GPU_NORM_MAX_PARTS);
    KILN_TRY(kiln_rt_pool_create(x->dev, "activations", act_bytes, &x->apool));
    for (int i = 0; i < p->n_slots; i++) {
        int64_t rows = p->slots[i].per_out ? cfg->max_out : cfg->max_tokens;
        KILN_TRY(kiln_rt_pool_alloc(x->apool, (size_t)(rows * p->slots[i].width) * kiln_dtype_size(x->slot_dt[i]), 256,
                                    &x->slot[i]));
    }
    KILN_TRY(kiln_rt_pool_alloc(x->apool, x->mo.total, 256, &x->d_meta));
    for (int k = 0; k < (x->cp_st ? 2 : 1); k++)
        KILN_TRY(kiln_rt_pool_alloc(x->apool, 8 * (size_t)cfg->max_out, 256, &x->d_res_buf[k]));
    x->d_res = x->d_res_buf[0];
    KILN_TRY(kiln_rt_pool_alloc(x->apool, 4 * x->hist_cap, 256, &x->d_hist));
    KILN_TRY(kiln_rt_pool_alloc(x->apool, 4 * 3 * ((size_t)cfg->max_out + 1), 256, &x->d_hoff));
    KILN_TRY(kiln_rt_pool_alloc(x->apool, 4 * (size_t)KILN_GPU_NORM_MAX_PARTS, 256, &x->ss_part));
    {
        const char *po = getenv("KILN_SKGEMM_PROF_OP"), *pf = getenv("KILN_SKGEMM_PROF_OUT");
        x->skprof_op = po ? atoi(po) : 0;
        if (x->skprof_op > 0 && pf && *pf) { /* (a measurement aid: outside the pools, zeroed once) */
            const size_t bytes = 8 * (size_t)SKPROF_BLOCKS * KILN_SKGEMM_PROF_N;
            KILN_TRY(kiln_rt_malloc(x->dev, bytes, &x->skprof_buf));
            KILN_TRY(kiln_rt_memset8(x->skprof_buf, 0, bytes, NULL));
            x->skprof_out = strdup(pf);
            KILN_CHECK_ALLOC(x->skprof_out);
        }
    }
    if (p->tp_size > 1)
        KILN_TRY(kiln_rt_pool_alloc(x->apool, 4 * (size_t)cfg->max_out * (size_t)p->vocab_size, 256, &x->gather_tmp));
    for (int k = 0; k < 2; k++) {
        KILN_TRY(kiln_rt_host_alloc(x->dev, x->mo.total, (void **)&x->h_meta_buf[k]));
        memset(x->h_meta_buf[k], 0, x->mo.total);
        KILN_TRY(kiln_rt_host_alloc(x->dev, 8 * (size_t)cfg->max_out, (void **)&x->h_res_buf[k]));
        KILN_TRY(kiln_rt_event_create(x->dev, false, &x->done_ev[k]));
        if (x->cp_st) KILN_TRY(kiln_rt_event_create(x->dev, false, &x->sampled_ev[k]));
    }
    x->h_meta = x->h_meta_buf[0];
    size_t V = (size_t)p->slots[p->logits_slot].width;
    KILN_TRY(kiln_rt_host_alloc(x->dev, (size_t)cfg->max_out * V * 4, (void **)&x->h_logits));
    KILN_TRY(kiln_rt_host_alloc(x->dev, 4 * x->hist_cap, (void **)&x->h_hist));
    KILN_TRY(kiln_rt_host_alloc(x->dev, 4 * 3 * ((size_t)cfg->max_out + 1), (void **)&x->h_hoff));

    /* rope tables */
    {
        float inv[1024], mscale = 1.0f;
        KILN_CHECK(p->rot_dim / 2 <= 1024, KILN_ERR_UNSUPPORTED, "rot_dim %d too large", p->rot_dim);
        KILN_TRY(kiln_rope_inv_freq(&p->rope, p->rot_dim, inv, &mscale));
        kiln_devptr d_inv;
        KILN_TRY(kiln_rt_pool_alloc(x->wpool, 4 * 1024, 256, &d_inv));
        KILN_TRY(kiln_rt_memcpy_htod(d_inv, inv, sizeof(float) * (size_t)(p->rot_dim / 2), NULL));
        x->rope = (kiln_gpu_rope_params){
            .head_dim = p->head_dim, .rot_dim = p->rot_dim, .interleaved = p->rope_interleaved, .inv_freq = d_inv,
            .mscale = mscale, .dyn_seq_len = x->dynamic_rope ? x->d_meta + x->mo.dyn : 0,
            .dyn_max = p->rope.original_max_position > 0 ? p->rope.original_max_position
                                                         : mf->cfg.max_position_embeddings,
            .dyn_base = (float)p->rope.theta, .dyn_factor = (float)p->rope.factor};
    }

    /* KV cache from what is left */
    size_t per_block = kiln_kv_bytes_per_block(p, cfg->block_size, kvd);
    int nb = cfg->num_kv_blocks;
    if (nb <= 0) {
        size_t free_b = 0, total_b = 0;
        KILN_TRY(kiln_rt_mem_info(x->dev, &free_b, &total_b));
        double util = cfg->gpu_memory_utilization > 0 ? cfg->gpu_memory_utilization : 0.9;
        double used = (double)(total_b - free_b) + 512.0 * (1 << 20) + (double)cfg->reserve_bytes;
        double budget = util * (double)total_b - used; /* graphs, cuBLAS, fragmentation, a drafter */
        KILN_CHECK(budget > (double)per_block * 2, KILN_ERR_OUT_OF_MEMORY,
                   "no GPU memory left for the KV cache (%.2f GB used of %.2f GB, utilization %.2f)", used / 1e9,
                   total_b / 1e9, util);
        nb = (int)KILN_MIN(budget / (double)(per_block + cfg->extra_kv_bytes_per_block) - 1,
                           (double)INT32_MAX / cfg->block_size);
    }
    kiln_kv_layout_init(&x->layout, nb + 1, cfg->block_size, p->n_kv_heads, p->head_dim, kvd);
    x->dummy_block = nb; /* the extra block: padded graph rows write here */
    size_t layer_bytes = (size_t)(nb + 1) * (size_t)cfg->block_size * (size_t)p->n_kv_heads * (size_t)p->head_dim *
                         kiln_dtype_size(kvd);
    size_t scale_bytes = kv8 ? sizeof(float) * (size_t)p->n_kv_layers * 2 * (size_t)p->n_kv_heads : 0;
    KILN_TRY(kiln_rt_pool_create(x->dev, "kv cache", (layer_bytes + 256) * 2 * (size_t)p->n_kv_layers + scale_bytes + 256,
                                 &x->kvpool));
    for (int l = 0; l < p->n_kv_layers; l++) {
        KILN_TRY(kiln_rt_pool_alloc(x->kvpool, layer_bytes, 256, &x->kc[l]));
        KILN_TRY(kiln_rt_pool_alloc(x->kvpool, layer_bytes, 256, &x->vc[l]));
        x->layouts[l] = x->layout;
    }
    if (kv8) { /* scales live on the device from the start, so captured graphs read the current ones */
        KILN_TRY(kiln_rt_pool_alloc(x->kvpool, scale_bytes, 256, &x->d_scales));
        size_t per_layer = 2 * (size_t)p->n_kv_heads;
        float *h = malloc(scale_bytes);
        KILN_CHECK_ALLOC(h);
        for (size_t i = 0; i < (size_t)p->n_kv_layers * per_layer; i++)
            h[i] = (i % per_layer) < (size_t)p->n_kv_heads ? (cfg->k_scale > 0 ? cfg->k_scale : 1.0f)
                                                           : (cfg->v_scale > 0 ? cfg->v_scale : 1.0f);
        st = kiln_rt_memcpy_htod(x->d_scales, h, scale_bytes, NULL);
        for (int l = 0; l < p->n_kv_layers; l++) {
            x->layouts[l].head_scales = (const void *)(uintptr_t)(x->d_scales + (kiln_devptr)(l * per_layer * 4));
            x->layouts[l].k_scale = h[(size_t)l * per_layer];
            x->layouts[l].v_scale = h[(size_t)l * per_layer + (size_t)p->n_kv_heads];
        }
        free(h);
        KILN_TRY(st);
    }
    x->base.num_kv_blocks = nb;
    x->base.kv_bytes_per_block = per_block;
    x->base.kv_dtype = kvd;
    x->base.act_dtype = x->act;
    x->prof.on = kiln_profile_enabled();
    { /* decode attention split-K partition, tokens (0: by shape; a multiple of 64; < 0: never split) */
        const char *dp = getenv("KILN_DECODE_PARTITION");
        x->decode_partition = dp && *dp ? atoi(dp) : 0;
    }
    if (x->prof.on) { /* time every op: eager steps, an event per op */
        x->ev = calloc((size_t)p->n_ops + 1, sizeof *x->ev);
        KILN_CHECK_ALLOC(x->ev);
        for (int i = 0; i <= p->n_ops; i++) KILN_TRY(kiln_rt_event_create(x->dev, true, &x->ev[i]));
        KILN_INFO("profiling mode: per-op timing, CUDA graphs off");
    }
    /* the one-shot all-reduce waits for its peers inside the kernel (and
     * traps after ~10 s): the ranks start their first ones together, not
     * while a slower rank still loads its weights */
    if (x->p2p)
        KILN_CHECK(kiln_comm_barrier(cfg->comm), KILN_ERR_CANCELLED, "another tensor-parallel rank failed");
    if (!cfg->enforce_eager && !x->prof.on) KILN_TRY(capture_graphs(x));
    *out = &x->base;
    return KILN_OK;
fail:
    gpu_destroy(&x->base);
    return st;
}
