/*
 * loader.h -- everything kiln_engine_create and kiln_explain need before any
 * weight is read: the resolved model directory, the parsed config, the
 * memory-mapped checkpoint (unless load format "dummy"), and the validated
 * layer program for one tensor-parallel rank.
 * Ownership: kiln_model_files owns all of it; close with
 * kiln_model_files_close. Thread-safety: immutable once open.
 */
#ifndef KILN_LOADER_H
#define KILN_LOADER_H

#include "model.h"
#include "program.h"

typedef struct kiln_model_files {
    char *dir;               /* resolved model directory, NULL for a built-in config */
    kiln_model_config cfg;
    kiln_checkpoint ck;
    bool have_checkpoint;
    bool dummy;              /* load format "dummy": random weights           */
    kiln_program *program;
} kiln_model_files;

kiln_status kiln_model_files_open(const kiln_engine_params *p, const char *device_kind, int tp_rank,
                                  kiln_model_files *out);
/* The same for a drafter: its policy also sees the model it drafts for. */
kiln_status kiln_model_files_open_drafter(const kiln_engine_params *p, const char *device_kind,
                                          const kiln_model_config *target, int spec_k, kiln_model_files *out);
void kiln_model_files_close(kiln_model_files *mf);

#endif
