/*
 * kt_engine.h -- shared by the tests that run an engine on the tiny models
 * of tests/data/models (scripts/make_test_models.py): their directories,
 * engine parameters without a tokenizer (prompts are token ids), creating an
 * engine that says why it failed, and a greedy request.
 */
#ifndef KT_ENGINE_H
#define KT_ENGINE_H

#include "kiln.h"
#include "kt.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

/* The directory of a tiny model named by a literal: KT_MODEL("llama3-gqa"). */
#define KT_MODEL(name) KT_DATA "/models/" name

/* The directory of a tiny model named at run time, written into buf. */
static inline const char *kt_model_dir(char *buf, size_t size, const char *model) {
    snprintf(buf, size, "%s/models/%s", KT_DATA, model);
    return buf;
}

/* The default parameters with model (a directory) on device, without the
 * model's tokenizer. */
static inline void kt_engine_params(kiln_engine_params *p, const char *model, const char *device) {
    kiln_engine_default_params(p);
    p->model = model;
    p->device = device;
    p->tokenizer = "none";
}

/* kiln_engine_create; on failure NULL, after printing "  create WHAT: the
 * error" (WHAT from the printf-style format). */
__attribute__((format(printf, 2, 3))) static inline kiln_engine *kt_engine_create(const kiln_engine_params *p,
                                                                                    const char *what, ...) {
    kiln_engine *e = NULL;
    if (kiln_engine_create(p, &e) != KILN_OK) {
        va_list ap;
        va_start(ap, what);
        fprintf(stderr, "  create ");
        vfprintf(stderr, what, ap);
        fprintf(stderr, ": %s\n", kiln_last_error());
        va_end(ap);
    }
    return e;
}

/* A greedy request for n prompt ids: no sampling, max_tokens tokens, EOS
 * ignored. */
static inline void kt_greedy_request(kiln_request *r, const int32_t *ids, int n, int max_tokens) {
    kiln_request_default(r);
    r->prompt_ids = ids;
    r->n_prompt_ids = n;
    r->sampling.temperature = 0;
    r->sampling.max_tokens = max_tokens;
    r->sampling.ignore_eos = true;
}

#endif
