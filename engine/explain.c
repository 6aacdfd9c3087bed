/*
 * explain.c -- kiln_explain: describe a model without loading weights: the
 * parsed config, the checkpoint's tensor table, the policy's plan and the
 * layer program. Uses the same loading path as kiln_engine_create.
 * Ownership: returns an owned string. Thread-safety: no shared state.
 */
#include "loader.h"

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
        for (int d = 0; d < t->ndim; d++)
            o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
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
    kiln_model_files mf = {0};
    KILN_TRY(kiln_model_files_open(params, "cpu", 0, &mf));
    KILN_TRY(kiln_buf_printf(&b, "model: %s\n", mf.dir ? mf.dir : params->model));
    KILN_TRY(kiln_model_config_describe(&mf.cfg, &b));
    if (mf.have_checkpoint)
        KILN_TRY(describe_tensors(&mf.ck, &b));
    else
        KILN_TRY(kiln_buf_puts(&b, "checkpoint: none (load format dummy: random weights)\n"));
    KILN_TRY(kiln_program_describe(mf.program, &b));
    *out = kiln_buf_steal(&b);
fail:
    kiln_buf_free(&b);
    kiln_model_files_close(&mf);
    return st;
}
