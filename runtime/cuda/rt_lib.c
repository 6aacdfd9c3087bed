/*
 * rt_lib.c -- dlopen of libcuda, NVRTC, cuBLASLt and NCCL, and conversion of
 * their error codes into kiln errors.
 *
 * Ownership: the libraries stay loaded for the life of the process.
 * Thread-safety: each library is loaded once under a mutex; the tables are
 * read-only afterwards.
 */
#include "rt_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

kiln_cu_table kiln_cu;
kiln_nvrtc_table kiln_nvrtc;
kiln_cublaslt_table kiln_lt;
kiln_nccl_table kiln_nc;

#define KILN__STR(x) #x
#define KILN__XSTR(x) KILN__STR(x)

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct lib_state {
    bool tried, ok;
    kiln_status st;
    char err[1024];
} lib_state;

static lib_state st_cuda, st_nvrtc, st_lt, st_nccl;

bool kiln_rt_built_with_cuda(void) { return true; }

/* Try env override then each candidate; on success returns the handle. */
static void *open_first(const char *env, const char *const *cands, char *err, size_t errlen) {
    const char *e = getenv(env);
    if (e && *e) {
        void *h = dlopen(e, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        snprintf(err, errlen, "%s=%s: %s", env, e, dlerror());
        return NULL;
    }
    const char *last = "";
    for (int i = 0; cands[i]; i++) {
        void *h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        last = dlerror();
        if (i == 0) snprintf(err, errlen, "%s", last ? last : "not found");
    }
    return NULL;
}

#define KILN__LOAD_SYM(name)                                                               \
    do {                                                                                   \
        *(void **)&tbl->name = dlsym(h, KILN__XSTR(name));                                 \
        if (!tbl->name) {                                                                  \
            snprintf(s->err, sizeof s->err, "%s lacks symbol %s (too old?)", libname,        \
                     KILN__XSTR(name));                                                    \
            goto missing;                                                                  \
        }                                                                                  \
    } while (0);

static kiln_status finish(lib_state *s) {
    if (s->ok) return KILN_OK;
    return KILN_FAIL(s->st, "%s", s->err);
}

static void load_cuda_locked(lib_state *s) {
    static const char *const cands[] = {"libcuda.so.1", "libcuda.so", "/usr/local/nvidia/lib64/libcuda.so.1",
                                        "/usr/lib/x86_64-linux-gnu/libcuda.so.1", NULL};
    const char *libname = "libcuda.so.1";
    char why[512] = "";
    void *h = open_first("KILN_CUDA_LIB", cands, why, sizeof why);
    s->st = KILN_ERR_UNAVAILABLE;
    if (!h) {
        snprintf(s->err, sizeof s->err, "the CUDA driver library libcuda.so.1 cannot be loaded (%s): no NVIDIA driver?",
                 why);
        return;
    }
    kiln_cu_table *tbl = &kiln_cu;
    KILN_CU_FUNCS(KILN__LOAD_SYM)
    {
        CUresult r = kiln_cu.cuInit(0);
        if (r != CUDA_SUCCESS) {
            const char *nm = "?";
            kiln_cu.cuGetErrorName(r, &nm);
            snprintf(s->err, sizeof s->err, "cuInit failed: %s (no usable GPU?)", nm);
            s->st = r == CUDA_ERROR_NO_DEVICE ? KILN_ERR_UNAVAILABLE : KILN_ERR_DEVICE;
            return;
        }
    }
    s->ok = true;
    return;
missing:
    return;
}

static void load_nvrtc_locked(lib_state *s) {
    static const char *const cands[] = {"libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
                                        "/usr/local/cuda/lib64/libnvrtc.so", "libnvrtc.so.12",
                                        "/usr/local/cuda/lib64/libnvrtc.so.12", NULL};
    const char *libname = "libnvrtc";
    char why[512] = "";
    void *h = open_first("KILN_NVRTC_LIB", cands, why, sizeof why);
    s->st = KILN_ERR_UNAVAILABLE;
    if (!h) {
        snprintf(s->err, sizeof s->err, "the NVRTC library libnvrtc.so.13 cannot be loaded (%s)", why);
        return;
    }
    kiln_nvrtc_table *tbl = &kiln_nvrtc;
    KILN_NVRTC_FUNCS(KILN__LOAD_SYM)
    s->ok = true;
    return;
missing:
    return;
}

static void load_lt_locked(lib_state *s) {
    static const char *const cands[] = {"libcublasLt.so.13", "libcublasLt.so", "/usr/local/cuda/lib64/libcublasLt.so.13",
                                        "/usr/local/cuda/lib64/libcublasLt.so", "libcublasLt.so.12", NULL};
    const char *libname = "libcublasLt";
    char why[512] = "";
    void *h = open_first("KILN_CUBLASLT_LIB", cands, why, sizeof why);
    s->st = KILN_ERR_UNAVAILABLE;
    if (!h) {
        snprintf(s->err, sizeof s->err, "the cuBLASLt library libcublasLt.so.13 cannot be loaded (%s)", why);
        return;
    }
    kiln_cublaslt_table *tbl = &kiln_lt;
    KILN_CUBLASLT_FUNCS(KILN__LOAD_SYM)
    s->ok = true;
    return;
missing:
    return;
}

static void load_nccl_locked(lib_state *s) {
    static const char *const cands[] = {"libnccl.so.2", "libnccl.so", "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                                        "/usr/local/cuda/lib64/libnccl.so.2", NULL};
    const char *libname = "libnccl.so.2";
    char why[512] = "";
    /* NVLink multicast stays off (shared hosts). */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    void *h = open_first("KILN_NCCL_LIB", cands, why, sizeof why);
    s->st = KILN_ERR_UNAVAILABLE;
    if (!h) {
        snprintf(s->err, sizeof s->err, "the NCCL library libnccl.so.2 cannot be loaded (%s)", why);
        return;
    }
    kiln_nccl_table *tbl = &kiln_nc;
    KILN_NCCL_FUNCS(KILN__LOAD_SYM)
    s->ok = true;
    return;
missing:
    return;
}

static kiln_status load(lib_state *s, void (*fn)(lib_state *)) {
    pthread_mutex_lock(&load_mu);
    if (!s->tried) {
        s->tried = true;
        fn(s);
    }
    pthread_mutex_unlock(&load_mu);
    return finish(s);
}

kiln_status kiln_rt_init(void) { return load(&st_cuda, load_cuda_locked); }
kiln_status kiln_rt_load_nvrtc(void) { return load(&st_nvrtc, load_nvrtc_locked); }
kiln_status kiln_rt_load_cublaslt(void) { return load(&st_lt, load_lt_locked); }
kiln_status kiln_rt_load_nccl(void) { return load(&st_nccl, load_nccl_locked); }

kiln_status kiln_rt_driver_version(int *version) {
    kiln_status st = KILN_OK;
    KILN_TRY(kiln_rt_init());
    KILN_CHECK_CU(kiln_cu.cuDriverGetVersion(version));
fail:
    return st;
}

/* ------------------------------------------------------- error conversion */

kiln_status kiln__cu_fail(CUresult r, const char *call, const char *file, int line) {
    const char *name = "CUDA_ERROR_UNKNOWN", *desc = "";
    if (kiln_cu.cuGetErrorName) kiln_cu.cuGetErrorName(r, &name);
    if (kiln_cu.cuGetErrorString) kiln_cu.cuGetErrorString(r, &desc);
    kiln_status code = r == CUDA_ERROR_OUT_OF_MEMORY ? KILN_ERR_OUT_OF_MEMORY : KILN_ERR_DEVICE;
    return kiln__set_error(code, file, line, "%s failed: %s (%s)", call, name, desc ? desc : "");
}

kiln_status kiln__nvrtc_fail(nvrtcResult r, const char *call, const char *file, int line) {
    const char *name = kiln_nvrtc.nvrtcGetErrorString ? kiln_nvrtc.nvrtcGetErrorString(r) : "NVRTC error";
    return kiln__set_error(KILN_ERR_DEVICE, file, line, "%s failed: %s", call, name);
}

static const char *lt_name(cublasStatus_t r) {
    switch (r) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

kiln_status kiln__lt_fail(cublasStatus_t r, const char *call, const char *file, int line) {
    return kiln__set_error(r == CUBLAS_STATUS_ALLOC_FAILED ? KILN_ERR_OUT_OF_MEMORY : KILN_ERR_DEVICE, file, line,
                           "%s failed: %s (%d)", call, lt_name(r), (int)r);
}

kiln_status kiln__nccl_fail(ncclResult_t r, const char *call, const char *file, int line) {
    const char *name = kiln_nc.ncclGetErrorString ? kiln_nc.ncclGetErrorString(r) : "NCCL error";
    return kiln__set_error(KILN_ERR_DEVICE, file, line, "%s failed: %s (%d)", call, name, (int)r);
}
