/*
 * explain.c -- kiln_explain: describe a model without loading weights.
 * Ownership: returns an owned string. Thread-safety: no shared state.
 */
#include "model.h"

#include <stdio.h>

#include <stdlib.h>

static kiln_status describe_tensors(const kiln_checkpoint *ck, kiln_buf *b) {
    kiln_status st = KILN_OK;
    KILN_TRY(kiln_buf_printf(b, "checkpoint: %d tensors in %d file%s, %.2f MB\n", ck->n_tensors, ck->n_shards,
                             ck->n_shards == 1 ? "" : "s", (double)ck->total_bytes / 1e6));
    for (int i = 0; i < ck->n_tensors; i++) {
        const kiln_tensor_info *t = &ck->tensors[i];
        char shape[128];
        size_t o = 0;
        o += (size_t)snprintf(shape + o, sizeof shape - o, "[");
        for (int d = 0; d < t->ndim; d++) o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        snprintf(shape + o, sizeof shape - o, "]");
        const char *file = strrchr(ck->shards[t->file].path, '/');
        KILN_TRY(kiln_buf_printf(b, "  %-56s %-5s %-18s %s\n", t->name, t->st_dtype, shape,
                                 file ? file + 1 : ck->shards[t->file].path));
    }
fail:
    return st;
}

kiln_status kiln_explain(const kiln_engine_params *params, char **out) {
    kiln_status st = KILN_OK;
    kiln_buf b = {0};
    char *dir = NULL;
    kiln_model_config cfg = {0};
    kiln_checkpoint ck = {0};
    KILN_CHECK(params && params->model, KILN_ERR_INVALID_ARGUMENT, "no model given");
    KILN_TRY(kiln_model_resolve(params->model, &dir));
    KILN_TRY(kiln_model_config_load(dir, &cfg));
    KILN_CHECK(kiln_architecture_supported(cfg.architecture), KILN_ERR_UNSUPPORTED,
               "%s/config.json: architecture \"%s\" is not supported (supported: %s)", dir, cfg.architecture,
               kiln_supported_architectures());
    KILN_TRY(kiln_checkpoint_open(dir, &ck));
    KILN_TRY(kiln_buf_printf(&b, "model: %s\n", dir));
    KILN_TRY(kiln_model_config_describe(&cfg, &b));
    KILN_TRY(describe_tensors(&ck, &b));
    *out = kiln_buf_steal(&b);
fail:
    kiln_buf_free(&b);
    kiln_checkpoint_close(&ck);
    kiln_model_config_free(&cfg);
    free(dir);
    return st;
}
