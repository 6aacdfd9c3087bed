/*
 * rt_device.c -- devices (primary contexts), memory and pools, pinned host
 * memory, streams, events, CUDA graphs, modules and kernel launch, over the
 * driver API loaded by rt_lib.c.
 *
 * Ownership: see kiln_rt.h (create/destroy pairs; module_get borrows).
 * Thread-safety: every entry makes the object's context current on the
 * calling thread; objects themselves are not locked.
 */
#include "rt_internal.h"

#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>

static kiln_status make_current(kiln_rt_device *d) {
    kiln_status st = KILN_OK;
    CUcontext cur = NULL;
    KILN_CHECK_CU(kiln_cu.cuCtxGetCurrent(&cur));
    if (cur != d->ctx) KILN_CHECK_CU(kiln_cu.cuCtxSetCurrent(d->ctx));
fail:
    return st;
}

kiln_status kiln_rt_device_make_current(kiln_rt_device *d) { return make_current(d); }

kiln_status kiln_rt_device_count(int *n) {
    kiln_status st = KILN_OK;
    KILN_TRY(kiln_rt_init());
    KILN_CHECK_CU(kiln_cu.cuDeviceGetCount(n));
fail:
    return st;
}

static int attr(CUdevice dev, CUdevice_attribute a) {
    int v = 0;
    if (kiln_cu.cuDeviceGetAttribute(&v, a, dev) != CUDA_SUCCESS) v = 0;
    return v;
}

kiln_status kiln_rt_device_open(int ordinal, kiln_rt_device **out) {
    kiln_status st = KILN_OK;
    kiln_rt_device *d = NULL;
    int n = 0;
    KILN_TRY(kiln_rt_device_count(&n));
    KILN_CHECK(ordinal >= 0 && ordinal < n, KILN_ERR_INVALID_ARGUMENT, "CUDA device %d does not exist (%d found)",
               ordinal, n);
    d = calloc(1, sizeof *d);
    KILN_CHECK_ALLOC(d);
    KILN_CHECK_CU(kiln_cu.cuDeviceGet(&d->dev, ordinal));
    KILN_CHECK_CU(kiln_cu.cuDevicePrimaryCtxRetain(&d->ctx, d->dev));
    KILN_CHECK_CU(kiln_cu.cuCtxSetCurrent(d->ctx));
    kiln_rt_device_info *i = &d->info;
    KILN_CHECK_CU(kiln_cu.cuDeviceGetName(i->name, (int)sizeof i->name, d->dev));
    i->ordinal = ordinal;
    i->cc_major = attr(d->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    i->cc_minor = attr(d->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    snprintf(i->arch, sizeof i->arch, "sm_%d%d", i->cc_major, i->cc_minor);
    i->n_sms = attr(d->dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    i->l2_bytes = attr(d->dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    i->smem_per_block_optin = attr(d->dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    i->smem_per_sm = attr(d->dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    i->max_threads_per_sm = attr(d->dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    i->regs_per_sm = attr(d->dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    i->unified_addressing = attr(d->dev, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) != 0;
    KILN_CHECK_CU(kiln_cu.cuDeviceTotalMem(&i->total_mem, d->dev));
    *out = d;
    return KILN_OK;
fail:
    if (d && d->ctx) kiln_cu.cuDevicePrimaryCtxRelease(d->dev);
    free(d);
    return st;
}

void kiln_rt_device_close(kiln_rt_device *d) {
    if (!d) return;
    kiln_cu.cuDevicePrimaryCtxRelease(d->dev);
    free(d);
}

const kiln_rt_device_info *kiln_rt_device_get_info(const kiln_rt_device *d) { return &d->info; }

kiln_status kiln_rt_device_sync(kiln_rt_device *d) {
    kiln_status st = KILN_OK;
    KILN_TRY(make_current(d));
    KILN_CHECK_CU(kiln_cu.cuCtxSynchronize());
fail:
    return st;
}

kiln_status kiln_rt_check_device(kiln_rt_device *d) { return kiln_rt_device_sync(d); }

kiln_status kiln_rt_mem_info(kiln_rt_device *d, size_t *free_bytes, size_t *total_bytes) {
    kiln_status st = KILN_OK;
    KILN_TRY(make_current(d));
    KILN_CHECK_CU(kiln_cu.cuMemGetInfo(free_bytes, total_bytes));
fail:
    return st;
}

/* ------------------------------------------------------------------ memory */

static _Atomic uint64_t g_alloc_count;
uint64_t kiln_rt_alloc_count(void) { return atomic_load(&g_alloc_count); }

kiln_status kiln_rt_malloc(kiln_rt_device *d, size_t bytes, kiln_devptr *out) {
    atomic_fetch_add(&g_alloc_count, 1);
    kiln_status st = KILN_OK;
    CUdeviceptr p = 0;
    KILN_TRY(make_current(d));
    KILN_CHECK_CU(kiln_cu.cuMemAlloc(&p, bytes ? bytes : 1));
    *out = (kiln_devptr)p;
fail:
    if (st) kiln_error_context("allocating %zu bytes on %s", bytes, d->info.name);
    return st;
}

void kiln_rt_free(kiln_rt_device *d, kiln_devptr p) {
    if (!p) return;
    if (make_current(d) == KILN_OK) kiln_cu.cuMemFree((CUdeviceptr)p);
}

kiln_status kiln_rt_host_alloc(kiln_rt_device *d, size_t bytes, void **out) {
    atomic_fetch_add(&g_alloc_count, 1);
    kiln_status st = KILN_OK;
    KILN_TRY(make_current(d));
    KILN_CHECK_CU(kiln_cu.cuMemHostAlloc(out, bytes ? bytes : 1, CU_MEMHOSTALLOC_PORTABLE));
fail:
    return st;
}

void kiln_rt_host_free(kiln_rt_device *d, void *p) {
    if (!p) return;
    if (make_current(d) == KILN_OK) kiln_cu.cuMemFreeHost(p);
}

/* s == NULL promises a synchronous copy or fill. The driver's null-stream
 * calls do not keep it: a copy from pageable memory may return before the
 * DMA lands, memsets of device memory are asynchronous, and the legacy null
 * stream is not ordered with kiln's non-blocking streams. So the whole
 * context is synchronised before and after (set-up and test paths only). */
static kiln_status null_stream_sync(void) {
    kiln_status st = KILN_OK;
    KILN_CHECK_CU(kiln_cu.cuCtxSynchronize());
fail:
    return st;
}

kiln_status kiln_rt_memcpy_htod(kiln_devptr dst, const void *src, size_t bytes, kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    if (!bytes) return KILN_OK;
    if (s) {
        KILN_TRY(make_current(s->dev));
        KILN_CHECK_CU(kiln_cu.cuMemcpyHtoDAsync((CUdeviceptr)dst, src, bytes, s->s));
    } else {
        KILN_TRY(null_stream_sync());
        KILN_CHECK_CU(kiln_cu.cuMemcpyHtoD((CUdeviceptr)dst, src, bytes));
        KILN_TRY(null_stream_sync());
    }
fail:
    return st;
}

kiln_status kiln_rt_memcpy_dtoh(void *dst, kiln_devptr src, size_t bytes, kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    if (!bytes) return KILN_OK;
    if (s) {
        KILN_TRY(make_current(s->dev));
        KILN_CHECK_CU(kiln_cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, bytes, s->s));
    } else {
        KILN_TRY(null_stream_sync());
        KILN_CHECK_CU(kiln_cu.cuMemcpyDtoH(dst, (CUdeviceptr)src, bytes));
        KILN_TRY(null_stream_sync());
    }
fail:
    return st;
}

kiln_status kiln_rt_memcpy_dtod(kiln_devptr dst, kiln_devptr src, size_t bytes, kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    if (!bytes) return KILN_OK;
    if (s) {
        KILN_TRY(make_current(s->dev));
        KILN_CHECK_CU(kiln_cu.cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, s->s));
    } else {
        KILN_TRY(null_stream_sync());
        KILN_CHECK_CU(kiln_cu.cuMemcpyDtoD((CUdeviceptr)dst, (CUdeviceptr)src, bytes));
        KILN_TRY(null_stream_sync());
    }
fail:
    return st;
}

kiln_status kiln_rt_memset8(kiln_devptr dst, uint8_t value, size_t bytes, kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    if (!bytes) return KILN_OK;
    if (s) {
        KILN_TRY(make_current(s->dev));
        KILN_CHECK_CU(kiln_cu.cuMemsetD8Async((CUdeviceptr)dst, value, bytes, s->s));
    } else {
        KILN_TRY(null_stream_sync());
        KILN_CHECK_CU(kiln_cu.cuMemsetD8((CUdeviceptr)dst, value, bytes));
        KILN_TRY(null_stream_sync());
    }
fail:
    return st;
}

kiln_status kiln_rt_memset32(kiln_devptr dst, uint32_t value, size_t n_words, kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    if (!n_words) return KILN_OK;
    if (s) {
        KILN_TRY(make_current(s->dev));
        KILN_CHECK_CU(kiln_cu.cuMemsetD32Async((CUdeviceptr)dst, value, n_words, s->s));
    } else {
        KILN_TRY(null_stream_sync());
        KILN_CHECK_CU(kiln_cu.cuMemsetD32((CUdeviceptr)dst, value, n_words));
        KILN_TRY(null_stream_sync());
    }
fail:
    return st;
}

/* ------------------------------------------------------------------- pools */

struct kiln_rt_mempool {
    kiln_rt_device *dev;
    char name[64];
    kiln_devptr base;
    size_t cap, used, high;
};

kiln_status kiln_rt_pool_create(kiln_rt_device *d, const char *name, size_t bytes, kiln_rt_mempool **out) {
    kiln_status st = KILN_OK;
    kiln_rt_mempool *p = calloc(1, sizeof *p);
    KILN_CHECK_ALLOC(p);
    p->dev = d;
    snprintf(p->name, sizeof p->name, "%s", name ? name : "pool");
    p->cap = bytes;
    KILN_TRY(kiln_rt_malloc(d, bytes, &p->base));
    *out = p;
    return KILN_OK;
fail:
    kiln_error_context("reserving the %s pool", name ? name : "device");
    free(p);
    return st;
}

void kiln_rt_pool_destroy(kiln_rt_mempool *p) {
    if (!p) return;
    kiln_rt_free(p->dev, p->base);
    free(p);
}

kiln_status kiln_rt_pool_alloc(kiln_rt_mempool *p, size_t bytes, size_t align, kiln_devptr *out) {
    atomic_fetch_add(&g_alloc_count, 1);
    if (!align) align = 256;
    if (align & (align - 1)) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "pool alignment %zu is not a power of two", align);
    size_t off = (p->used + align - 1) & ~(align - 1);
    if (off > p->cap || bytes > p->cap - off)
        return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "the %s pool is full: %zu bytes requested, %zu of %zu free", p->name,
                         bytes, p->cap - KILN_MIN(p->cap, off), p->cap);
    *out = p->base + off;
    p->used = off + bytes;
    if (p->used > p->high) p->high = p->used;
    return KILN_OK;
}

size_t kiln_rt_pool_mark(const kiln_rt_mempool *p) { return p->used; }
void kiln_rt_pool_reset(kiln_rt_mempool *p, size_t mark) {
    if (mark <= p->used) p->used = mark;
}
size_t kiln_rt_pool_capacity(const kiln_rt_mempool *p) { return p->cap; }
size_t kiln_rt_pool_high_water(const kiln_rt_mempool *p) { return p->high; }
kiln_devptr kiln_rt_pool_base(const kiln_rt_mempool *p) { return p->base; }

/* ---------------------------------------------------------- streams/events */

kiln_status kiln_rt_stream_create(kiln_rt_device *d, kiln_rt_stream **out) {
    kiln_status st = KILN_OK;
    kiln_rt_stream *s = calloc(1, sizeof *s);
    KILN_CHECK_ALLOC(s);
    s->dev = d;
    KILN_TRY(make_current(d));
    KILN_CHECK_CU(kiln_cu.cuStreamCreate(&s->s, CU_STREAM_NON_BLOCKING));
    *out = s;
    return KILN_OK;
fail:
    free(s);
    return st;
}

void kiln_rt_stream_destroy(kiln_rt_stream *s) {
    if (!s) return;
    if (make_current(s->dev) == KILN_OK) kiln_cu.cuStreamDestroy(s->s);
    free(s);
}

kiln_rt_device *kiln_rt_stream_device(kiln_rt_stream *s) { return s->dev; }

kiln_status kiln_rt_stream_sync(kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    KILN_TRY(make_current(s->dev));
    KILN_CHECK_CU(kiln_cu.cuStreamSynchronize(s->s));
fail:
    return st;
}

struct kiln_rt_event {
    kiln_rt_device *dev;
    CUevent e;
};

kiln_status kiln_rt_stream_wait_event(kiln_rt_stream *s, kiln_rt_event *e) {
    kiln_status st = KILN_OK;
    KILN_TRY(make_current(s->dev));
    KILN_CHECK_CU(kiln_cu.cuStreamWaitEvent(s->s, e->e, 0));
fail:
    return st;
}

kiln_status kiln_rt_event_create(kiln_rt_device *d, bool timing, kiln_rt_event **out) {
    kiln_status st = KILN_OK;
    kiln_rt_event *e = calloc(1, sizeof *e);
    KILN_CHECK_ALLOC(e);
    e->dev = d;
    KILN_TRY(make_current(d));
    KILN_CHECK_CU(kiln_cu.cuEventCreate(&e->e, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
    *out = e;
    return KILN_OK;
fail:
    free(e);
    return st;
}

void kiln_rt_event_destroy(kiln_rt_event *e) {
    if (!e) return;
    if (make_current(e->dev) == KILN_OK) kiln_cu.cuEventDestroy(e->e);
    free(e);
}

kiln_status kiln_rt_event_record(kiln_rt_event *e, kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    KILN_TRY(make_current(e->dev));
    KILN_CHECK_CU(kiln_cu.cuEventRecord(e->e, kiln__stream(s)));
fail:
    return st;
}

kiln_status kiln_rt_event_sync(kiln_rt_event *e) {
    kiln_status st = KILN_OK;
    KILN_CHECK_CU(kiln_cu.cuEventSynchronize(e->e));
fail:
    return st;
}

kiln_status kiln_rt_event_elapsed_ms(kiln_rt_event *start, kiln_rt_event *end, float *ms) {
    kiln_status st = KILN_OK;
    KILN_CHECK_CU(kiln_cu.cuEventElapsedTime(ms, start->e, end->e));
fail:
    return st;
}

/* ------------------------------------------------------------------- graphs */

struct kiln_rt_graph {
    kiln_rt_device *dev;
    CUgraph g;
    CUgraphExec exec;
};

kiln_status kiln_rt_graph_begin(kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    KILN_TRY(make_current(s->dev));
    KILN_CHECK_CU(kiln_cu.cuStreamBeginCapture(s->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
fail:
    return st;
}

kiln_status kiln_rt_graph_end(kiln_rt_stream *s, kiln_rt_graph **out) {
    kiln_status st = KILN_OK;
    kiln_rt_graph *g = calloc(1, sizeof *g);
    CUgraph cg = NULL;
    KILN_TRY(make_current(s->dev));
    KILN_CHECK_CU(kiln_cu.cuStreamEndCapture(s->s, &cg));
    KILN_CHECK_ALLOC(g);
    g->dev = s->dev;
    g->g = cg;
    cg = NULL;
    KILN_CHECK_CU(kiln_cu.cuGraphInstantiate(&g->exec, g->g, 0));
    *out = g;
    return KILN_OK;
fail:
    if (cg) kiln_cu.cuGraphDestroy(cg);
    if (g && g->g) kiln_cu.cuGraphDestroy(g->g);
    free(g);
    return st;
}

kiln_status kiln_rt_graph_launch(kiln_rt_graph *g, kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    KILN_TRY(make_current(s->dev));
    KILN_CHECK_CU(kiln_cu.cuGraphLaunch(g->exec, s->s));
fail:
    return st;
}

void kiln_rt_graph_destroy(kiln_rt_graph *g) {
    if (!g) return;
    if (make_current(g->dev) == KILN_OK) {
        if (g->exec) kiln_cu.cuGraphExecDestroy(g->exec);
        if (g->g) kiln_cu.cuGraphDestroy(g->g);
    }
    free(g);
}

/* ------------------------------------------------------------------ modules */

#define KILN_MODULE_MAX_FUNCS 32

struct kiln_rt_module {
    kiln_rt_device *dev;
    CUmodule m;
    kiln_rt_func funcs[KILN_MODULE_MAX_FUNCS];
    int n_funcs;
};

kiln_status kiln_rt_module_load(kiln_rt_device *d, const void *cubin, size_t len, kiln_rt_module **out) {
    kiln_status st = KILN_OK;
    (void)len;
    kiln_rt_module *m = calloc(1, sizeof *m);
    KILN_CHECK_ALLOC(m);
    m->dev = d;
    KILN_TRY(make_current(d));
    KILN_CHECK_CU(kiln_cu.cuModuleLoadData(&m->m, cubin));
    *out = m;
    return KILN_OK;
fail:
    free(m);
    return st;
}

void kiln_rt_module_unload(kiln_rt_module *m) {
    if (!m) return;
    if (make_current(m->dev) == KILN_OK) kiln_cu.cuModuleUnload(m->m);
    free(m);
}

kiln_status kiln_rt_module_get(kiln_rt_module *m, const char *entry, kiln_rt_func **out) {
    kiln_status st = KILN_OK;
    for (int i = 0; i < m->n_funcs; i++)
        if (!strcmp(m->funcs[i].name, entry)) {
            *out = &m->funcs[i];
            return KILN_OK;
        }
    KILN_CHECK(m->n_funcs < KILN_MODULE_MAX_FUNCS, KILN_ERR_LIMIT, "too many entry points in one module");
    KILN_CHECK(strlen(entry) < sizeof m->funcs[0].name, KILN_ERR_INVALID_ARGUMENT, "entry name too long: %s", entry);
    kiln_rt_func *f = &m->funcs[m->n_funcs];
    KILN_TRY(make_current(m->dev));
    {
        CUresult r = kiln_cu.cuModuleGetFunction(&f->f, m->m, entry);
        if (r == CUDA_ERROR_NOT_FOUND)
            return KILN_FAIL(KILN_ERR_NOT_FOUND, "kernel entry point %s is not in its module (missing extern \"C\"?)",
                             entry);
        KILN_CHECK_CU(r);
    }
    snprintf(f->name, sizeof f->name, "%s", entry);
    f->have_attrs = false;
    KILN_CHECK_CU(kiln_cu.cuFuncGetAttribute(&f->static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f->f));
    f->smem_optin = 48 * 1024 - f->static_smem; /* default: static + dynamic <= 48 KiB */
    m->n_funcs++;
    *out = f;
fail:
    return st;
}

const char *kiln_rt_func_name(const kiln_rt_func *f) { return f->name; }

void kiln_rt_func_set_pdl(kiln_rt_func *f, bool on) { f->pdl = on && kiln_cu.cuLaunchKernelEx; }

/* Read once per entry point and kept: launchers ask on every launch (the
 * FP8 decode attention sizes its pipeline from the register count). */
kiln_status kiln_rt_func_get_attrs(kiln_rt_func *f, kiln_rt_func_attrs *a) {
    kiln_status st = KILN_OK;
    if (!f->have_attrs) {
        kiln_rt_func_attrs t;
        KILN_CHECK_CU(kiln_cu.cuFuncGetAttribute(&t.regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f->f));
        KILN_CHECK_CU(kiln_cu.cuFuncGetAttribute(&t.local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f->f));
        KILN_CHECK_CU(kiln_cu.cuFuncGetAttribute(&t.static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f->f));
        KILN_CHECK_CU(kiln_cu.cuFuncGetAttribute(&t.max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f->f));
        f->attrs = t;
        f->have_attrs = true;
    }
    *a = f->attrs;
fail:
    return st;
}

/* Opt f into smem_bytes of dynamic shared memory when above what it has */
static kiln_status smem_opt_in(kiln_rt_func *f, unsigned smem_bytes) {
    kiln_status st = KILN_OK;
    if ((int)smem_bytes > f->smem_optin) {
        KILN_CHECK_CU(kiln_cu.cuFuncSetAttribute(f->f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem_bytes));
        f->smem_optin = (int)smem_bytes;
    }
fail:
    return st;
}

kiln_status kiln_rt_func_max_clusters(kiln_rt_func *f, kiln_rt_dim3 grid, kiln_rt_dim3 block, unsigned smem_bytes,
                                      int *out) {
    kiln_status st = KILN_OK;
    *out = 0;
    KILN_TRY(smem_opt_in(f, smem_bytes));
    CUlaunchConfig c = {.gridDimX = grid.x, .gridDimY = grid.y, .gridDimZ = grid.z, .blockDimX = block.x,
                        .blockDimY = block.y, .blockDimZ = block.z, .sharedMemBytes = smem_bytes};
    KILN_CHECK_CU(kiln_cu.cuOccupancyMaxActiveClusters(out, f->f, &c));
fail:
    if (st) kiln_error_context("occupancy of %s (block %u smem %u)", f->name, block.x, smem_bytes);
    return st;
}

kiln_status kiln_rt_tmap_2d(kiln_rt_tmap *out, kiln_devptr base, kiln_dtype dt, int64_t rows, int64_t cols, int64_t ld,
                            int box_rows, int box_cols) {
    kiln_status st = KILN_OK;
    _Static_assert(sizeof(CUtensorMap) == sizeof(kiln_rt_tmap), "kiln_rt_tmap is a CUtensorMap");
    memset(out, 0, sizeof *out);
    KILN_CHECK(dt == KILN_DTYPE_BF16 || dt == KILN_DTYPE_F16, KILN_ERR_INVALID_ARGUMENT,
               "tensor map: a 16-bit element type, not %s", kiln_dtype_name(dt));
    KILN_CHECK(rows > 0 && cols > 0 && ld >= cols && box_cols * 2 == 128 && box_rows >= 1 && box_rows <= 256 &&
                   base % 16 == 0 && (ld * 2) % 16 == 0,
               KILN_ERR_INVALID_ARGUMENT, "tensor map: [%lld, %lld] ld %lld box %d x %d at 0x%llx", (long long)rows,
               (long long)cols, (long long)ld, box_rows, box_cols, (unsigned long long)base);
    {
        const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)ld * 2};
        const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows}, estr[2] = {1, 1};
        KILN_CHECK_CU(kiln_cu.cuTensorMapEncodeTiled(
            (CUtensorMap *)out, dt == KILN_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            2, (void *)(uintptr_t)base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    }
fail:
    return st;
}

kiln_status kiln_rt_launch(kiln_rt_func *f, kiln_rt_dim3 grid, kiln_rt_dim3 block, unsigned smem_bytes,
                           kiln_rt_stream *s, void **args) {
    kiln_status st = KILN_OK;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return KILN_OK; /* nothing to do */
    KILN_TRY(smem_opt_in(f, smem_bytes));
    if (f->pdl) {
        CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig c = {.gridDimX = grid.x, .gridDimY = grid.y, .gridDimZ = grid.z, .blockDimX = block.x,
                            .blockDimY = block.y, .blockDimZ = block.z, .sharedMemBytes = smem_bytes,
                            .hStream = kiln__stream(s), .attrs = &attr, .numAttrs = 1};
        KILN_CHECK_CU(kiln_cu.cuLaunchKernelEx(&c, f->f, args, NULL));
    } else {
        KILN_CHECK_CU(kiln_cu.cuLaunchKernel(f->f, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem_bytes,
                                             kiln__stream(s), args, NULL));
    }
fail:
    if (st) kiln_error_context("launching %s (grid %u,%u,%u block %u,%u,%u smem %u)", f->name, grid.x, grid.y, grid.z,
                               block.x, block.y, block.z, smem_bytes);
    return st;
}
