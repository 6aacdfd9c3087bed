/*
 * params.c -- defaults for the public parameter structs.
 * Thread-safety: pure functions.
 */
#include "kiln_base.h"

void kiln_engine_default_params(kiln_engine_params *p) {
    memset(p, 0, sizeof *p);
    p->device = "auto";
    p->dtype = "auto";
    p->kv_cache_dtype = "auto";
    p->load_format = "auto";
    p->tensor_parallel_size = 1;
    p->max_num_seqs = 256;
    p->max_num_batched_tokens = 8192;
    p->block_size = 16;
    p->gpu_memory_utilization = 0.9;
    p->prefill_ratio = 0.25;
    p->num_speculative_tokens = 4;
    p->ngram_min = 1;
    p->ngram_max = 4;
}

void kiln_sampling_default_params(kiln_sampling_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
    p->max_tokens = 16;
    p->skip_special_tokens = true;
}

void kiln_request_default(kiln_request *r) {
    memset(r, 0, sizeof *r);
    r->add_special = true;
    r->num_speculative_tokens = -1;
    kiln_sampling_default_params(&r->sampling);
}
