/*
 * loader.c -- resolve the model argument, parse its config, open the
 * checkpoint and build + validate the policy's program against it.
 * Ownership/threading: see loader.h.
 */
#include "loader.h"

#include <stdio.h>
#include <stdlib.h>

static kiln_status open_files(const kiln_engine_params *p, const char *device_kind, int tp_rank,
                              const kiln_model_config *target, int spec_k, kiln_model_files *mf) {
    kiln_status st = KILN_OK;
    memset(mf, 0, sizeof *mf);
    KILN_CHECK(p && p->model && *p->model, KILN_ERR_INVALID_ARGUMENT, "no model given (--model DIR)");
    const char *lf = p->load_format ? p->load_format : "auto";
    KILN_CHECK(!strcmp(lf, "auto") || !strcmp(lf, "safetensors") || !strcmp(lf, "dummy"), KILN_ERR_INVALID_ARGUMENT,
               "unknown load format \"%s\" (auto, safetensors, dummy)", lf);
    mf->dummy = !strcmp(lf, "dummy");
    const char *builtin = kiln_builtin_config(p->model);
    if (builtin && !kiln_path_exists(p->model)) {
        KILN_CHECK(mf->dummy, KILN_ERR_INVALID_ARGUMENT,
                   "\"%s\" is a built-in config without weights: use --load-format dummy", p->model);
        KILN_TRY(kiln_model_config_parse(builtin, p->model, &mf->cfg));
    } else {
        st = kiln_model_resolve(p->model, &mf->dir);
        if (st) {
            if (!strchr(p->model, '/'))
                kiln_error_context("\"%s\" is neither a model directory nor a built-in config for --load-format "
                                   "dummy (%s)",
                                   p->model, kiln_builtin_config_names());
            goto fail;
        }
        KILN_TRY(kiln_model_config_load(mf->dir, &mf->cfg));
    }
    int tp = p->tensor_parallel_size > 0 ? p->tensor_parallel_size : 1;
    KILN_CHECK(tp_rank >= 0 && tp_rank < tp, KILN_ERR_INVALID_ARGUMENT, "tensor-parallel rank %d outside [0, %d)",
               tp_rank, tp);
    kiln_policy_facts facts = {
        .cfg = &mf->cfg,
        .device_kind = device_kind,
        .device_name = !strcmp(device_kind, "cpu") ? "cpu" : "cuda",
        .tp_rank = tp_rank,
        .tp_size = tp,
        .options_json = p->policy_options,
        .dtype = p->dtype ? p->dtype : "auto",
        .kv_cache_dtype = p->kv_cache_dtype ? p->kv_cache_dtype : "auto",
        .target_cfg = target,
        .spec_k = spec_k,
    };
    st = kiln_program_build(&facts, p->policy_file, p->policy_dir, &mf->program);
    if (st) {
        if (mf->dir && st == KILN_ERR_UNSUPPORTED) kiln_error_context("%s/config.json", mf->dir);
        goto fail;
    }
    if (!mf->dummy) {
        KILN_CHECK(mf->dir, KILN_ERR_INTERNAL, "no model directory");
        KILN_TRY(kiln_checkpoint_open(mf->dir, &mf->ck));
        mf->have_checkpoint = true;
        KILN_TRY(kiln_program_check_checkpoint(mf->program, &mf->ck));
    }
    return KILN_OK;
fail:
    kiln_model_files_close(mf);
    return st;
}

kiln_status kiln_model_files_open(const kiln_engine_params *p, const char *device_kind, int tp_rank,
                                  kiln_model_files *mf) {
    return open_files(p, device_kind, tp_rank, NULL, 0, mf);
}

kiln_status kiln_model_files_open_drafter(const kiln_engine_params *p, const char *device_kind,
                                          const kiln_model_config *target, int spec_k, kiln_model_files *mf) {
    return open_files(p, device_kind, 0, target, spec_k, mf);
}

void kiln_model_files_close(kiln_model_files *mf) {
    if (mf->have_checkpoint) kiln_checkpoint_close(&mf->ck);
    kiln_program_free(mf->program);
    kiln_model_config_free(&mf->cfg);
    free(mf->dir);
    memset(mf, 0, sizeof *mf);
}
