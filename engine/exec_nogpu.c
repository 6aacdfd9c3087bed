/*
 * exec_nogpu.c -- kiln_exec_gpu_create in builds without the CUDA backend.
 */
#include "exec.h"

#ifndef KILN_HAVE_CUDA
kiln_status kiln_exec_gpu_create(const kiln_model_files *mf, const kiln_exec_config *cfg, kiln_exec **out) {
    (void)mf, (void)cfg, (void)out;
    return KILN_FAIL(KILN_ERR_UNAVAILABLE, "this kiln was built without the CUDA backend (no CUDA headers at build time)");
}
#else
typedef int kiln_exec_nogpu_unused;
#endif
