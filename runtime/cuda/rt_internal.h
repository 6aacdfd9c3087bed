/*
 * rt_internal.h -- private to runtime/cuda: the dlopen'ed function tables of
 * the driver, NVRTC, cuBLASLt and NCCL, and the KILN_CHECK_CU family that
 * converts their error codes at the boundary.
 *
 * The tables are filled once (pthread_once) by kiln_rt_init /
 * kiln_rt_load_*; after that they are read-only (the only mutable globals of
 * the runtime). Thread-safety: read-only after load.
 */
#ifndef KILN_RT_INTERNAL_H
#define KILN_RT_INTERNAL_H

#include "kiln_rt.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda.h>
#include <nvrtc.h>
#include <cublasLt.h>
#include <nccl.h>
#pragma GCC diagnostic pop

/* X(name): the name is macro-expanded by cuda.h to its versioned symbol
 * (cuMemAlloc -> cuMemAlloc_v2); the table member keeps the plain name. */
#define KILN_CU_FUNCS(X)                                                                  \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                  \
    X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)          \
    X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)           \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuMemGetInfo)              \
    X(cuMemAlloc) X(cuMemFree) X(cuMemHostAlloc) X(cuMemFreeHost)                          \
    X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD)                                         \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync)                          \
    X(cuMemsetD8) X(cuMemsetD32) X(cuMemsetD8Async) X(cuMemsetD32Async)                    \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamWaitEvent)      \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize)              \
    X(cuEventElapsedTime) X(cuStreamBeginCapture) X(cuStreamEndCapture)                    \
    X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)         \
    X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute)     \
    X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuStreamIsCapturing)     \
    X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) X(cuOccupancyMaxActiveClusters)     \
    X(cuTensorMapEncodeTiled)

#define KILN_NVRTC_FUNCS(X)                                                               \
    X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)    \
    X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog)                 \
    X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)

#define KILN_CUBLASLT_FUNCS(X)                                                            \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtMatmul)           \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                           \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                   \
    X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulAlgoCheck)   \
    X(cublasLtMatmulAlgoConfigGetAttribute)

#define KILN_NCCL_FUNCS(X)                                                                \
    X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy)            \
    X(ncclAllReduce) X(ncclAllGather) X(ncclGetErrorString)

#define KILN__FN_MEMBER(name) __typeof__(name) *name;
typedef struct kiln_cu_table { KILN_CU_FUNCS(KILN__FN_MEMBER) } kiln_cu_table;
typedef struct kiln_nvrtc_table { KILN_NVRTC_FUNCS(KILN__FN_MEMBER) } kiln_nvrtc_table;
typedef struct kiln_cublaslt_table { KILN_CUBLASLT_FUNCS(KILN__FN_MEMBER) } kiln_cublaslt_table;
typedef struct kiln_nccl_table { KILN_NCCL_FUNCS(KILN__FN_MEMBER) } kiln_nccl_table;

extern kiln_cu_table kiln_cu;
extern kiln_nvrtc_table kiln_nvrtc;
extern kiln_cublaslt_table kiln_lt;
extern kiln_nccl_table kiln_nc;

/* Members are named after the macro-expanded symbol only through the
 * typedef; call through these: */
#define KCU(fn) (kiln_cu.fn)

/* Error conversion. Each records "CALL failed: ERROR_NAME (description)"
 * with KILN_ERR_DEVICE (KILN_ERR_OUT_OF_MEMORY for out-of-memory) and jumps
 * to fail; they need `kiln_status st` and a `fail:` label. */
kiln_status kiln__cu_fail(CUresult r, const char *call, const char *file, int line);
kiln_status kiln__nvrtc_fail(nvrtcResult r, const char *call, const char *file, int line);
kiln_status kiln__lt_fail(cublasStatus_t r, const char *call, const char *file, int line);
kiln_status kiln__nccl_fail(ncclResult_t r, const char *call, const char *file, int line);

#define KILN_CHECK_CU(call)                                                                \
    do {                                                                                   \
        CUresult kiln__r = (call);                                                         \
        if (kiln__r != CUDA_SUCCESS) {                                                     \
            st = kiln__cu_fail(kiln__r, #call, __FILE__, __LINE__);                        \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)
#define KILN_CHECK_NVRTC(call)                                                             \
    do {                                                                                   \
        nvrtcResult kiln__r = (call);                                                      \
        if (kiln__r != NVRTC_SUCCESS) {                                                    \
            st = kiln__nvrtc_fail(kiln__r, #call, __FILE__, __LINE__);                     \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)
#define KILN_CHECK_LT(call)                                                                \
    do {                                                                                   \
        cublasStatus_t kiln__r = (call);                                                   \
        if (kiln__r != CUBLAS_STATUS_SUCCESS) {                                            \
            st = kiln__lt_fail(kiln__r, #call, __FILE__, __LINE__);                        \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)
#define KILN_CHECK_NCCL(call)                                                              \
    do {                                                                                   \
        ncclResult_t kiln__r = (call);                                                     \
        if (kiln__r != ncclSuccess) {                                                      \
            st = kiln__nccl_fail(kiln__r, #call, __FILE__, __LINE__);                      \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

/* Object layouts shared between the runtime's files. */
struct kiln_rt_device {
    CUdevice dev;
    CUcontext ctx;
    kiln_rt_device_info info;
};
struct kiln_rt_stream {
    kiln_rt_device *dev;
    CUstream s;
};
struct kiln_rt_func {
    CUfunction f;
    char name[96];
    int smem_optin;  /* dynamic smem limit set so far */
    int static_smem; /* static shared memory of the kernel */
    bool pdl;        /* launch with programmatic stream serialization */
    bool have_attrs; /* attrs read (they are fixed once the module is loaded) */
    kiln_rt_func_attrs attrs;
};

static inline CUstream kiln__stream(kiln_rt_stream *s) { return s ? s->s : NULL; }

#endif /* KILN_RT_INTERNAL_H */
