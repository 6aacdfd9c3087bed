/*
 * engine_create.c -- building and tearing down an engine: parameters,
 * model files and program, the executor for the chosen device, the KV
 * block manager sized from what the executor reserved, the tokenizer and
 * chat template, and every per-step buffer (nothing is allocated per step).
 * Ownership: the engine owns everything it creates here.
 * Thread-safety: create/destroy are not concurrent with anything else.
 */
#include "engine_internal.h"
#include "comm.h"
#include "kiln_rt.h"

#include <pthread.h>

#include <stdio.h>
#include <stdlib.h>

static const char *dup_param(kiln_engine *e, int slot, const char *s) {
    if (!s) return NULL;
    e->str_copies[slot] = kiln_strdup(s);
    return e->str_copies[slot];
}

static bool has_file(const char *dir, const char *name) {
    if (!dir) return false;
    char *p = kiln_path_join(dir, name);
    bool r = p && kiln_path_exists(p);
    free(p);
    return r;
}

/* --------------------------------------------------- tensor-parallel ranks */

typedef struct rank_job {
    const kiln_engine_params *p;
    const char *dev;
    int rank;
    kiln_model_files *mf;  /* opened here for ranks > 0 */
    bool open_files;
    kiln_exec_config xc;
    kiln_comm *comm;
    kiln_exec *exec;
    kiln_status st;
    char err[2048];
} rank_job;

static void *rank_create(void *arg) {
    rank_job *j = arg;
    kiln_status st = KILN_OK;
    if (j->open_files) {
        st = kiln_model_files_open(j->p, j->dev, j->rank, j->mf);
        if (st) goto fail;
    }
    j->xc.comm = j->comm;
    j->xc.device_id = j->p->device_id + j->rank;
    st = !strcmp(j->dev, "cuda") ? kiln_exec_gpu_create(j->mf, &j->xc, &j->exec)
                                 : kiln_exec_cpu_create(j->mf, &j->xc, &j->exec);
fail:
    j->st = st;
    if (st) {
        snprintf(j->err, sizeof j->err, "%s", kiln_last_error());
        if (j->comm) kiln_comm_abort(j->comm); /* ranks waiting on this one stop too */
    }
    return NULL;
}

/* Build every rank's executor in parallel (GPU ranks initialise NCCL
 * together); any failure stops them all with that rank's error. */
static kiln_status create_ranks(kiln_engine *e, const char *dev, const kiln_exec_config *xc) {
    kiln_status st = KILN_OK;
    int n = e->params.tensor_parallel_size;
    rank_job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    kiln_exec **ex = calloc((size_t)n, sizeof *ex);
    e->tp_mf = calloc((size_t)n, sizeof *e->tp_mf);
    KILN_CHECK(jobs && th && ex && e->tp_mf, KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    KILN_TRY(kiln_comm_group_create(n, &e->comm));
    for (int r = 0; r < n; r++) {
        jobs[r] = (rank_job){.p = &e->params, .dev = dev, .rank = r, .mf = r ? &e->tp_mf[r] : &e->mf,
                             .open_files = r > 0, .xc = *xc, .comm = kiln_comm_group_member(e->comm, r)};
        if (pthread_create(&th[r], NULL, rank_create, &jobs[r]) != 0) {
            jobs[r].st = KILN_ERR_UNAVAILABLE;
            snprintf(jobs[r].err, sizeof jobs[r].err, "cannot start a thread");
            kiln_comm_abort(jobs[r].comm);
            th[r] = 0;
        }
    }
    for (int r = 0; r < n; r++)
        if (th[r]) pthread_join(th[r], NULL);
    int bad = -1;
    for (int r = 0; r < n && bad < 0; r++)
        if (jobs[r].st && jobs[r].st != KILN_ERR_CANCELLED) bad = r;
    for (int r = 0; r < n && bad < 0; r++)
        if (jobs[r].st) bad = r;
    if (bad >= 0) {
        for (int r = 0; r < n; r++) kiln_exec_destroy(jobs[r].exec);
        st = KILN_FAIL(jobs[bad].st, "tensor-parallel rank %d of %d failed, every rank stopped: %s", bad, n,
                       jobs[bad].err);
        goto fail;
    }
    for (int r = 0; r < n; r++) ex[r] = jobs[r].exec;
    KILN_TRY(kiln_exec_tp_create(ex, n, e->comm, &e->exec));
fail:
    free(jobs);
    free(th);
    free(ex);
    return st;
}

static kiln_status parse_kv_dtype(const char *s, kiln_dtype *out) {
    if (!s || !strcmp(s, "auto")) {
        *out = KILN_DTYPE_INVALID;
        return KILN_OK;
    }
    if (!strcmp(s, "fp8_e5m2")) *out = KILN_DTYPE_FP8_E5M2;
    else if (!strcmp(s, "fp8_e4m3") || !strcmp(s, "fp8")) *out = KILN_DTYPE_FP8_E4M3;
    else if (!strcmp(s, "bf16") || !strcmp(s, "fp16") || !strcmp(s, "fp32")) *out = kiln_dtype_from_name(s);
    else
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT,
                         "unknown kv cache dtype \"%s\" (auto, fp8_e4m3, fp8_e5m2, fp8, bf16, fp16, fp32)", s);
    return KILN_OK;
}

kiln_status kiln_engine_create(const kiln_engine_params *params, kiln_engine **out) {
    kiln_status st = KILN_OK;
    kiln_engine *e = NULL;
    KILN_CHECK(params && out, KILN_ERR_INVALID_ARGUMENT, "null parameters");
    e = calloc(1, sizeof *e);
    KILN_CHECK_ALLOC(e);
    pthread_mutex_init(&e->mu, NULL);
    atomic_init(&e->fatal, false);
    kiln_metrics_init(&e->metrics);
    e->params = *params;
    kiln_engine_params *p = &e->params;
    p->model = dup_param(e, 0, params->model);
    p->tokenizer = dup_param(e, 1, params->tokenizer);
    p->device = dup_param(e, 2, params->device ? params->device : "auto");
    p->policy_file = dup_param(e, 3, params->policy_file);
    p->policy_dir = dup_param(e, 4, params->policy_dir);
    p->policy_options = dup_param(e, 5, params->policy_options);
    p->dtype = dup_param(e, 6, params->dtype ? params->dtype : "auto");
    p->kv_cache_dtype = dup_param(e, 7, params->kv_cache_dtype ? params->kv_cache_dtype : "auto");
    p->load_format = dup_param(e, 8, params->load_format ? params->load_format : "auto");
    p->speculative_method = dup_param(e, 9, params->speculative_method);
    p->speculative_model = dup_param(e, 10, params->speculative_model);
    p->kv_scales = dup_param(e, 11, params->kv_scales);

    KILN_CHECK(p->model, KILN_ERR_INVALID_ARGUMENT, "no model given");
    KILN_CHECK(p->block_size >= 1 && p->block_size <= 1024, KILN_ERR_INVALID_ARGUMENT,
               "block_size must be in [1, 1024], got %d", p->block_size);
    KILN_CHECK(p->max_num_seqs >= 1 && p->max_num_seqs <= 65536, KILN_ERR_INVALID_ARGUMENT,
               "max_num_seqs must be in [1, 65536], got %d", p->max_num_seqs);
    KILN_CHECK(p->max_num_batched_tokens >= 1, KILN_ERR_INVALID_ARGUMENT, "max_num_batched_tokens must be >= 1");
    KILN_CHECK(p->max_model_len >= 0, KILN_ERR_INVALID_ARGUMENT, "max_model_len must be >= 0");
    KILN_CHECK(p->tensor_parallel_size >= 1, KILN_ERR_INVALID_ARGUMENT, "tensor_parallel_size must be >= 1");
    KILN_CHECK(p->prefill_ratio >= 0, KILN_ERR_INVALID_ARGUMENT, "prefill_ratio must be >= 0");
    KILN_CHECK(p->gpu_memory_utilization >= 0 && p->gpu_memory_utilization <= 1, KILN_ERR_INVALID_ARGUMENT,
               "gpu_memory_utilization must be in (0, 1] (0: the default 0.9), got %g", p->gpu_memory_utilization);
    KILN_CHECK(p->num_kv_blocks >= 0, KILN_ERR_INVALID_ARGUMENT, "num_kv_blocks must be >= 0 (0: from memory), got %d",
               p->num_kv_blocks);
    const char *sm = p->speculative_method;
    int method = sm && *sm ? -1 : KILN_SPEC_NONE;
    for (int i = 0; i < KILN_SPEC_COUNT && method < 0; i++)
        if (!strcmp(sm, kiln_spec_method_names[i])) method = i;
    KILN_CHECK(method >= 0, KILN_ERR_INVALID_ARGUMENT, "unknown speculative method \"%s\" (none, draft, glide, ngram)",
               sm);
    e->spec_method = (kiln_spec_method)method;
    KILN_CHECK((e->spec_method != KILN_SPEC_DRAFT && e->spec_method != KILN_SPEC_GLIDE) || p->speculative_model,
               KILN_ERR_INVALID_ARGUMENT, "speculative method \"%s\" needs a speculative model (--speculative-model DIR)",
               sm);
    e->spec_k = e->spec_method == KILN_SPEC_NONE ? 0 : p->num_speculative_tokens;
    KILN_CHECK(e->spec_method == KILN_SPEC_NONE || (e->spec_k >= 1 && e->spec_k <= 16), KILN_ERR_INVALID_ARGUMENT,
               "num_speculative_tokens must be in [1, 16], got %d", p->num_speculative_tokens);
    e->ngram_min = p->ngram_min > 0 ? p->ngram_min : 1;
    e->ngram_max = p->ngram_max >= e->ngram_min ? p->ngram_max : KILN_MAX(4, e->ngram_min);
    atomic_init(&e->spec_on, e->spec_method != KILN_SPEC_NONE);

    const char *dev = p->device;
    KILN_CHECK(!strcmp(dev, "auto") || !strcmp(dev, "cpu") || !strcmp(dev, "cuda"), KILN_ERR_INVALID_ARGUMENT,
               "unknown device \"%s\" (auto, cpu, cuda)", dev);
    if (!strcmp(dev, "auto")) {
        int n = 0;
        dev = "cpu";
        if (kiln_rt_built_with_cuda() && kiln_rt_init() == KILN_OK && kiln_rt_device_count(&n) == KILN_OK && n > 0)
            dev = "cuda";
        kiln_clear_error();
    }
    bool gpu = !strcmp(dev, "cuda");
    kiln_dtype kvd = KILN_DTYPE_INVALID;
    KILN_TRY(parse_kv_dtype(p->kv_cache_dtype, &kvd));

    KILN_TRY(kiln_model_files_open(p, dev, 0, &e->mf));
    /* the user's --kv-cache-dtype wins; "auto" takes the policy's choice */
    if (kvd == KILN_DTYPE_INVALID) KILN_TRY(parse_kv_dtype(e->mf.program->kv_cache_dtype, &kvd));
    const kiln_model_config *cfg = &e->mf.cfg;
    e->vocab_size = cfg->vocab_size;
    e->logits_stride = e->mf.program->slots[e->mf.program->logits_slot].width;
    /* like vLLM: linear and dynamic rope scaling stretch the usable context */
    int derived = cfg->max_position_embeddings;
    if (!strcmp(cfg->rope.type, "linear") || !strcmp(cfg->rope.type, "dynamic"))
        derived = (int)KILN_MIN((double)derived * cfg->rope.factor, 1e8);
    e->max_model_len = p->max_model_len ? p->max_model_len : derived;
    if (e->max_model_len > derived)
        KILN_WARN("max_model_len %d exceeds the model's derived context length %d: quality past it is not assured",
                  e->max_model_len, derived);
    e->max_num_seqs = p->max_num_seqs;
    e->max_batched_tokens = p->max_num_batched_tokens;
    e->max_tokens_plan = KILN_MAX(p->max_num_batched_tokens, e->max_model_len);
    e->max_queued = 1 << 20;
    e->prefill_ratio = p->prefill_ratio;
    e->seed = p->seed;
    for (int i = 0; i < cfg->n_eos; i++) e->eos[e->n_eos++] = cfg->eos_token_ids[i];

    /* tokenizer and chat template */
    const char *tokpath = p->tokenizer;
    bool no_tok = tokpath && !strcmp(tokpath, "none");
    if (no_tok) tokpath = NULL;
    if (!tokpath && !no_tok && (has_file(e->mf.dir, "tokenizer.json") || has_file(e->mf.dir, "tokenizer.model")))
        tokpath = e->mf.dir;
    if (tokpath) {
        st = kiln_tokenizer_load(tokpath, &e->tok);
        if (st) {
            kiln_error_context("loading the tokenizer");
            goto fail;
        }
        if (e->n_eos == 0 && kiln_tokenizer_eos_id(e->tok) >= 0) e->eos[e->n_eos++] = kiln_tokenizer_eos_id(e->tok);
    }
    if (e->mf.dir) {
        if (kiln_chat_template_load(e->mf.dir, &e->tmpl) != KILN_OK) {
            if (kiln_last_error_code() != KILN_ERR_NOT_FOUND) KILN_WARN("chat template: %s", kiln_last_error());
            e->tmpl = NULL;
            kiln_clear_error();
        }
    }

    /* draft model (same tokenizer and vocabulary) */
    if (e->spec_method == KILN_SPEC_DRAFT || e->spec_method == KILN_SPEC_GLIDE) {
        kiln_engine_params dp = *p;
        dp.model = p->speculative_model;
        dp.policy_file = NULL;
        dp.policy_options = NULL;
        /* with random weights the drafter's are random too: the same
         * function of tensor name, position and seed, so a model drafting
         * for itself agrees with itself (a checkpoint drafter needs "auto") */
        dp.load_format = p->load_format && !strcmp(p->load_format, "dummy") ? "dummy" : "auto";
        dp.tensor_parallel_size = 1;
        st = kiln_model_files_open_drafter(&dp, dev, cfg, e->spec_k, &e->draft_mf);
        if (st) {
            kiln_error_context("speculative model %s", p->speculative_model);
            goto fail;
        }
        KILN_CHECK(e->draft_mf.cfg.vocab_size == cfg->vocab_size, KILN_ERR_INVALID_ARGUMENT,
                   "the speculative model's vocabulary (%d) differs from the model's (%d): they must share a "
                   "tokenizer",
                   e->draft_mf.cfg.vocab_size, cfg->vocab_size);
        bool cross = false;
        for (int i = 0; i < e->draft_mf.program->n_ops; i++)
            cross |= e->draft_mf.program->ops[i].kind == KILN_OP_CROSS_ATTENTION;
        KILN_CHECK(cross == (e->spec_method == KILN_SPEC_GLIDE), KILN_ERR_INVALID_ARGUMENT,
                   "speculative model %s %s a GliDe drafter: use --speculative-method %s", p->speculative_model,
                   cross ? "is" : "is not", cross ? "glide" : "draft");
    }

    /* executor */
    int max_blocks = KILN_DIV_UP(e->max_model_len + 1 + e->spec_k, p->block_size);
    int max_out = e->max_num_seqs * (1 + e->spec_k);
    kiln_exec_config xc = {
        .max_tokens = e->max_tokens_plan,
        .max_out = max_out,
        .max_seqs = e->max_num_seqs,
        .block_size = p->block_size,
        .max_blocks_per_seq = max_blocks,
        .num_kv_blocks = p->num_kv_blocks,
        .kv_cache_bytes = p->kv_cache_bytes,
        .gpu_memory_utilization = p->gpu_memory_utilization,
        .kv_dtype = kvd,
        .n_threads = p->n_threads,
        .device_id = p->device_id,
        .enforce_eager = p->enforce_eager,
        .seed = p->seed ? p->seed : 1234,
        .dtype = kiln_dtype_from_name(p->dtype),
        .verify_q = e->spec_k ? e->spec_k + 1 : 0,
    };
    KILN_CHECK(!p->dtype || !strcmp(p->dtype, "auto") || xc.dtype == KILN_DTYPE_BF16 || xc.dtype == KILN_DTYPE_F16 ||
                   xc.dtype == KILN_DTYPE_F32,
               KILN_ERR_INVALID_ARGUMENT, "unknown dtype \"%s\" (auto, bf16, fp16, fp32)", p->dtype);
    if (e->draft_mf.program && gpu && xc.num_kv_blocks <= 0) {
        /* the drafter shares the GPU and the block ids: leave room for its
         * weights and activations, and size blocks for both caches */
        const kiln_program *dp = e->draft_mf.program;
        size_t w = 0, a = 0;
        for (int i = 0; i < dp->n_weights; i++) w += (size_t)(dp->weights[i].rows * dp->weights[i].cols) * 2;
        for (int i = 0; i < dp->n_slots; i++) a += (size_t)dp->slots[i].width * (size_t)e->max_tokens_plan * 4;
        xc.reserve_bytes = w + a + ((size_t)256 << 20);
        xc.extra_kv_bytes_per_block = kiln_kv_bytes_per_block(dp, p->block_size, KILN_DTYPE_BF16);
    } else if (e->draft_mf.program && xc.num_kv_blocks <= 0) {
        /* one block manager for both caches: split the budget per block (the
         * drafter's cache stays in the default dtype, see below) */
        kiln_dtype d = kvd == KILN_DTYPE_INVALID ? KILN_DTYPE_F32 : kvd;
        size_t per = kiln_kv_bytes_per_block(e->mf.program, p->block_size, d) +
                     kiln_kv_bytes_per_block(e->draft_mf.program, p->block_size, KILN_DTYPE_F32);
        size_t budget = p->kv_cache_bytes ? p->kv_cache_bytes : (size_t)256 << 20;
        xc.num_kv_blocks = (int)KILN_MAX((size_t)1, budget / per);
    }
    if (p->tensor_parallel_size > 1) {
        KILN_CHECK(e->spec_method != KILN_SPEC_GLIDE, KILN_ERR_UNSUPPORTED,
                   "GliDe reads the verifier's whole cache: it does not run with tensor parallelism");
        KILN_TRY(create_ranks(e, dev, &xc));
    } else if (gpu) {
        KILN_TRY(kiln_exec_gpu_create(&e->mf, &xc, &e->exec));
    } else {
        KILN_TRY(kiln_exec_cpu_create(&e->mf, &xc, &e->exec));
    }
    if (e->draft_mf.program) {
        kiln_exec_config dc = xc;
        dc.kv_dtype = KILN_DTYPE_INVALID; /* small; FP8 scales would need their own calibration */
        dc.max_out = e->max_num_seqs;
        dc.num_kv_blocks = e->exec->num_kv_blocks;
        dc.comm = NULL;
        dc.reserve_bytes = dc.extra_kv_bytes_per_block = 0;
        dc.verify_q = 0;
        dc.enforce_eager = true; /* drafter steps mix prefill and decode shapes */
        if (gpu)
            KILN_TRY(kiln_exec_gpu_create(&e->draft_mf, &dc, &e->draft_exec));
        else
            KILN_TRY(kiln_exec_cpu_create(&e->draft_mf, &dc, &e->draft_exec));
        if (e->spec_method == KILN_SPEC_GLIDE) e->draft_exec->cross = e->exec;
        KILN_TRY(kiln_batch_buf_init(&e->draft_b, e->max_tokens_plan, e->max_num_seqs, max_blocks));
    }
    KILN_TRY(kiln_kv_manager_init(&e->kv, e->exec->num_kv_blocks, p->block_size, max_blocks));
    KILN_TRY(kiln_engine_setup_kv_scales(e));
    KILN_INFO("%s on %s: %d layers, vocab %d, max_model_len %d; KV cache %d blocks x %d tokens (%d tokens, %.1f MB, "
              "%s%s%s)%s%s",
              cfg->architecture, e->exec->device, cfg->num_layers, e->vocab_size, e->max_model_len,
              e->kv.num_blocks, e->kv.block_size, e->kv.num_blocks * e->kv.block_size,
              (double)e->exec->kv_bytes_per_block * e->kv.num_blocks / 1e6, kiln_dtype_name(e->exec->kv_dtype),
              e->kv_scales_src[0] ? ", scales: " : "", e->kv_scales_src,
              e->spec_method ? "; speculative decoding: " : "", e->spec_method ? p->speculative_method : "");

    /* per-step buffers */
    int T = e->max_tokens_plan, S = e->max_num_seqs;
    e->running = calloc((size_t)S, sizeof *e->running);
    e->b_tokens = malloc(sizeof(int32_t) * (size_t)T);
    e->b_pos = malloc(sizeof(int32_t) * (size_t)T);
    e->b_slots = malloc(sizeof(int32_t) * (size_t)T);
    e->b_qstart = malloc(sizeof(int32_t) * (size_t)(S + 1));
    e->b_ctx = malloc(sizeof(int32_t) * (size_t)S);
    e->b_out = malloc(sizeof(int32_t) * (size_t)max_out);
    e->b_outstart = malloc(sizeof(int32_t) * (size_t)(S + 1));
    e->b_ndraft = calloc((size_t)S, sizeof(int32_t));
    e->b_draft = calloc((size_t)S * (size_t)KILN_MAX(e->spec_k, 1), sizeof(int32_t));
    e->draft_idx = calloc((size_t)S, sizeof(int));
    e->srows = calloc((size_t)max_out, sizeof *e->srows);
    e->dev_tokens = calloc((size_t)max_out, sizeof(int32_t));
    e->dev_lps = calloc((size_t)max_out, sizeof(float));
    e->ban_cap = max_out * 64 + 4096;
    e->ban_buf = calloc((size_t)e->ban_cap, sizeof(int32_t));
    const char *hs = getenv("KILN_HOST_SAMPLING");
    e->host_sampling = hs && *hs && strcmp(hs, "0");
    e->b_tables = calloc((size_t)S * (size_t)max_blocks, sizeof(int32_t));
    e->b_reqs = calloc((size_t)S, sizeof *e->b_reqs);
    e->pipe_reqs = calloc((size_t)S, sizeof *e->pipe_reqs);
    e->pipe_next = calloc((size_t)S, sizeof *e->pipe_next);
    e->pipe_feed = calloc((size_t)S, sizeof *e->pipe_feed);
    {
        /* pipelined decode: by default where the executor overlaps (GPU);
         * KILN_OVERLAP=0 turns it off, =1 on (also on the CPU, for tests) */
        const char *ov = getenv("KILN_OVERLAP");
        bool has = e->exec->vt->launch_sample && e->exec->vt->collect_sample;
        e->pipe_on = has && (ov && *ov ? strcmp(ov, "0") != 0 : e->exec->vt->overlaps);
    }
    e->logits_tmp = malloc(sizeof(float) * (size_t)e->vocab_size);
    e->sample_work = malloc(kiln_sampler_work_bytes(e->vocab_size));
    e->pen_scratch = calloc((size_t)e->vocab_size, sizeof(int32_t));
    KILN_CHECK(e->running && e->b_tokens && e->b_pos && e->b_slots && e->b_qstart && e->b_ctx && e->b_out && e->b_outstart && e->b_ndraft && e->b_draft && e->draft_idx && e->srows && e->dev_tokens && e->dev_lps && e->ban_buf &&
                   e->b_tables && e->b_reqs && e->logits_tmp && e->sample_work && e->pen_scratch && e->pipe_reqs &&
                   e->pipe_next && e->pipe_feed,
               KILN_ERR_OUT_OF_MEMORY, "out of host memory for the step buffers");
    e->stats.num_kv_blocks = e->kv.num_blocks;
    e->stats.block_size = e->kv.block_size;
    e->stats.num_free_kv_blocks = e->kv.n_free;
    *out = e;
    return KILN_OK;
fail:
    kiln_engine_destroy(e);
    return st;
}

void kiln_engine_destroy(kiln_engine *e) {
    if (!e) return;
    if (e->running) kiln_engine_abort_all(e); /* requests exist only after a full create */
    kiln_exec_destroy(e->exec);
    free(e->kv_scales);
    kiln_kv_manager_fini(&e->kv);
    kiln_tokenizer_destroy(e->tok);
    kiln_chat_template_destroy(e->tmpl);
    kiln_model_files_close(&e->mf);
    if (e->tp_mf)
        for (int r = 1; r < e->params.tensor_parallel_size; r++) kiln_model_files_close(&e->tp_mf[r]);
    free(e->tp_mf);
    kiln_comm_group_destroy(e->comm);
    free(e->running);
    free(e->b_tokens);
    free(e->b_pos);
    free(e->b_slots);
    free(e->b_qstart);
    free(e->b_ctx);
    free(e->b_out);
    free(e->b_outstart);
    free(e->b_ndraft);
    free(e->b_draft);
    free(e->draft_idx);
    free(e->srows);
    free(e->dev_tokens);
    free(e->dev_lps);
    free(e->ban_buf);
    kiln_exec_destroy(e->draft_exec);
    kiln_batch_buf_free(&e->draft_b);
    kiln_model_files_close(&e->draft_mf);
    free(e->b_tables);
    free(e->b_reqs);
    free(e->pipe_reqs);
    free(e->pipe_next);
    free(e->pipe_feed);
    free(e->logits_tmp);
    free(e->sample_work);
    free(e->pen_scratch);
    for (size_t i = 0; i < KILN_ARRAY_LEN(e->str_copies); i++) free(e->str_copies[i]);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
