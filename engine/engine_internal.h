/*
 * engine_internal.h -- the engine's private state, shared by engine.c
 * (scheduler, sampling, events), engine_create.c (construction) and
 * metrics.c. Not part of the public API.
 * Thread-safety: fields under "locked by mu" are shared with client
 * threads; everything else belongs to the stepping thread.
 */
#ifndef KILN_ENGINE_INTERNAL_H
#define KILN_ENGINE_INTERNAL_H

#include "exec.h"
#include "kv.h"
#include "sampler.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#define KILN_MAX_STOP_STRINGS 16
#define KILN_MAX_STOP_LEN 256
#define KILN_MAX_PENDING_CANCELS 4096

/* ------------------------------------------------------------ metrics */

#define KILN_HIST_BUCKETS 24
typedef struct kiln_hist {
    const double *bounds; /* upper bounds, ascending, n buckets */
    int n;
    uint64_t counts[KILN_HIST_BUCKETS + 1]; /* last: +Inf */
    double sum;
    uint64_t count;
} kiln_hist;

typedef struct kiln_metrics {
    kiln_hist ttft, itl, e2e;
} kiln_metrics;

void kiln_metrics_init(kiln_metrics *m);
void kiln_metrics_observe_ttft(kiln_metrics *m, double s);
void kiln_metrics_observe_itl(kiln_metrics *m, double s);
void kiln_metrics_observe_e2e(kiln_metrics *m, double s);

/* ------------------------------------------------------- text stream */

/* Incremental detokenization of one request's output with stop strings.
 * Without a tokenizer every call is a no-op producing no text. */
struct kiln_detok;
typedef struct kiln_text_stream {
    struct kiln_detok *d;
    kiln_buf out;
} kiln_text_stream;

kiln_status kiln_text_stream_init(kiln_text_stream *t, const kiln_tokenizer *tok, const int32_t *prompt, int n_prompt,
                                  bool skip_special, const char *const *stops, int n_stops);
/* New text for token id (borrowed until the next call); *stop_hit when a
 * stop string completed (the text excludes it). */
void kiln_text_stream_push(kiln_text_stream *t, int32_t id, const char **text, size_t *len, bool *stop_hit);
void kiln_text_stream_finish(kiln_text_stream *t, const char **text, size_t *len);
void kiln_text_stream_free(kiln_text_stream *t);

/* ------------------------------------------------------------ requests */

/* A batch under construction (the draft model's; the main one is inline
 * in kiln_engine for historical reasons). */
typedef struct kiln_batch_buf {
    int32_t *tokens, *pos, *slots, *qstart, *ctx, *tables, *out;
    int32_t *cross_tables, *cross_ctx; /* the verifier's, for GliDe drafters */
    int ntok, nseq, nout, max_q, max_ctx, max_blocks;
} kiln_batch_buf;

typedef enum { KILN_REQ_WAITING = 0, KILN_REQ_RUNNING, KILN_REQ_DONE } kiln_req_state;

typedef enum { KILN_SPEC_NONE = 0, KILN_SPEC_NGRAM, KILN_SPEC_DRAFT, KILN_SPEC_GLIDE, KILN_SPEC_COUNT } kiln_spec_method;
/* --speculative-method names, by kiln_spec_method (engine.c) */
extern const char *const kiln_spec_method_names[KILN_SPEC_COUNT];

typedef struct kiln_req {
    uint64_t id;
    uint64_t seq_no;        /* arrival order into the scheduler (youngest = largest) */
    int32_t *tokens;        /* [cap] prompt then generated                     */
    int n_tokens, cap, n_prompt;
    int n_computed;         /* tokens whose K/V are in the cache               */
    int max_new;
    kiln_kv_table kv;
    kiln_kv_table dkv;      /* draft model's cache (speculative decoding)      */
    int d_computed;         /* tokens whose draft K/V are in the draft cache   */
    int spec_k;             /* -1: engine default, 0: off                      */
    kiln_sampling_params sp; /* pointers cleared; copies below                 */
    int32_t *stop_ids;
    int n_stop_ids;
    char **stops;
    int n_stops;
    uint64_t seed;
    kiln_stream_fn cb;
    void *user;
    kiln_req_state state;
    bool in_running;
    bool cancel;
    int preempted;
    kiln_finish_reason finish;
    double t_arrival, t_first, t_last;
    kiln_text_stream text;
    struct kiln_req *next;
} kiln_req;

struct kiln_engine {
    kiln_engine_params params;  /* strings point into owned copies below       */
    char *str_copies[16];
    kiln_model_files mf;
    kiln_exec *exec;
    float *kv_scales;        /* FP8 E4M3: [n_kv_layers, 2, n_global_heads] in use */
    char kv_scales_src[96];  /* where they came from (kiln_model_info)        */
    kiln_model_files *tp_mf;  /* [tp] files of ranks > 0 (index 0 unused)     */
    struct kiln_comm_group *comm;
    kiln_tokenizer *tok;
    kiln_chat_template *tmpl;
    kiln_kv_manager kv;
    int vocab_size;
    int logits_stride;
    int max_model_len;
    int max_num_seqs;
    int max_batched_tokens;
    int max_tokens_plan;
    int max_queued;
    double prefill_ratio;
    uint64_t seed;
    int32_t eos[KILN_MAX_EOS];
    int n_eos;

    /* scheduler (stepping thread) */
    kiln_req *waiting_head, *waiting_tail;
    int n_waiting;
    kiln_req **running;
    int n_running;
    uint64_t arrivals;

    /* speculative decoding */
    kiln_spec_method spec_method;
    atomic_bool spec_on;
    int spec_k, ngram_min, ngram_max;
    kiln_model_files draft_mf;
    kiln_exec *draft_exec;
    kiln_batch_buf draft_b;  /* the draft model's batch                       */
    int32_t *b_draft;        /* [S, spec_k] proposals of this step            */
    int32_t *b_ndraft;       /* [S]                                           */
    int *draft_idx;          /* [S] scratch                                   */

    /* batch buffers, planned once */
    int32_t *b_tokens, *b_pos, *b_slots, *b_qstart, *b_ctx, *b_tables, *b_out, *b_outstart;
    kiln_req **b_reqs;
    int b_ntok, b_nseq, b_nout, b_max_q, b_max_ctx;
    float *logits_tmp;
    /* device sampling */
    bool host_sampling;      /* force host sampling (tests, KILN_HOST_SAMPLING) */
    kiln_sample_req *srows;  /* [max_out]                                      */
    int32_t *dev_tokens;     /* [max_out]                                      */
    float *dev_lps;          /* [max_out]                                      */
    int32_t *ban_buf;        /* [ban_cap]                                      */
    int ban_cap;
    void *sample_work;
    int32_t *pen_scratch;
    kiln_logprob top_tmp[20];
    /* pipelined decode (engine.c, "pipelined decode"): the launched step
     * not yet collected */
    bool pipe_on;            /* the executor overlaps (or KILN_OVERLAP=1)        */
    int pipe_n;              /* its rows; 0: none outstanding                    */
    kiln_req **pipe_reqs;    /* [S] each row's request; NULL once it has left    */
    kiln_req **pipe_next;    /* [S] the rows of the step launched behind it      */
    int32_t *pipe_feed;      /* [S] row of the outstanding step feeding each row */

    /* locked by mu */
    pthread_mutex_t mu;
    kiln_req *incoming_head, *incoming_tail;
    int n_incoming;
    int n_waiting_shadow, n_running_shadow;
    uint64_t next_id;
    uint64_t cancel_ids[KILN_MAX_PENDING_CANCELS];
    int n_cancel;
    kiln_stats stats;
    kiln_metrics metrics;

    atomic_bool fatal;
    char fatal_msg[1024];
};

void kiln_engine_abort_all(kiln_engine *e);

/* kv_scales.c: the FP8 E4M3 KV cache's scales, chosen and handed to the
 * executor once it exists (user option > plan > checkpoint > calibration). */
kiln_status kiln_engine_setup_kv_scales(kiln_engine *e);
/* Run n tokens (one sequence, slots 0..n-1) through x with a calibration
 * cache and max-merge the largest |k| / |v| per layer and head into amax
 * [n_kv_layers, 2, n_global_heads]. */
kiln_status kiln_kv_calibrate(kiln_exec *x, const int32_t *tokens, int n, int max_blocks, int block_size, float *amax);
/* The calibration token ids (owned, kiln_free): the built-in text, or
 * fixed pseudo-random ids without a tokenizer; at most 512, within the
 * context, one step and half the pool. */
kiln_status kiln_kv_calib_tokens(kiln_engine *e, int32_t **ids, int *n);
/* Scales from the JSON text of a --kv-scales file into s [n_layers, 2,
 * n_heads]; what names the source in errors. */
kiln_status kiln_kv_scales_parse_json(const char *text, const char *what, int n_layers, int n_heads, float *s);
/* FP8 E4M3 scale for a calibrated |x| maximum: amax lands at
 * 448 / KILN_KV_CALIB_HEADROOM (1 when amax is 0). */
#define KILN_KV_CALIB_HEADROOM 2.0f
float kiln_kv_scale_for_amax(float amax);

/* spec.c: drafters */
int kiln_spec_ngram_propose(const int32_t *tokens, int n, int k, int nmin, int nmax, int32_t *out);
/* Greedy proposals from the draft model for seqs[i] (k[i] tokens each,
 * into drafts[i * stride ...]); their draft tables must hold n_tokens +
 * k[i] - 1 tokens. */
kiln_status kiln_spec_draft_propose(kiln_engine *e, kiln_req **seqs, const int32_t *k, int n, int32_t *drafts,
                                    int stride);
kiln_status kiln_batch_buf_init(kiln_batch_buf *b, int max_tokens, int max_seqs, int max_blocks);
void kiln_batch_buf_free(kiln_batch_buf *b);

/* eval.c: numerics checks (tests, bench/fp8_accuracy). One sequence straight
 * through the executor, outside the scheduler: prefill prompt[np], then
 * `steps` single-token decode steps appending feed[k] (NULL: the argmax).
 * logits [(steps + 1), vocab_size]; chosen [steps] the appended tokens.
 * progress: a "step k/steps" line per step (NULL: silent). */
kiln_status kiln_eval_sequence(kiln_engine *e, const int32_t *prompt, int np, const int32_t *feed, int steps,
                               float *logits, int32_t *chosen, FILE *progress);
/* ||got - ref|| / ||ref|| in double; a non-finite element of got makes it infinite. */
double kiln_logits_rel_l2(const float *got, const float *ref, int n);
/* KL(softmax(ref) || softmax(got)) in double. */
double kiln_logits_kl(const float *ref, const float *got, int V);

#endif
