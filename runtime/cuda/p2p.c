/*
 * p2p.c -- the one-shot all-reduce over peer memory (kiln_rt.h, "one-shot
 * all-reduce"): per rank one device buffer laid out as kernel_src/allreduce.cu
 * describes (control words, flags, two data halves), peer access between the
 * ranks' GPUs, and the launch of kiln_all_reduce.
 *
 * The ranks live in one process, so a peer's buffer is addressed by its
 * device pointer (unified addressing) once peer access to its context is
 * enabled; a handle carries the pid, the GPU ordinal and that pointer.
 *
 * Two exchanges (allreduce.cu): pull (signal the peers, wait for their
 * signals, read their copies) and push (store into the peers' buffers, poll
 * this rank's own; one crossing of the link instead of two). $KILN_AR_PUSH=0 / 1
 * picks one for a create that leaves it to the environment (default
 * KILN_RT_P2P_PUSH_DEFAULT).
 *
 * Ownership: kiln_rt_p2p_create returns owned; the buffer is freed at
 * destroy. Peer access stays enabled (other objects may rely on it).
 * Thread-safety: one thread per object.
 */
#include "rt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* kernel_src/allreduce.cu's layout and limits */
#define AR_MAX_BLOCKS 64
#define AR_DATA_OFF 4096
#define AR_THREADS 512
#define AR_GRID_MAX 32                     /* blocks per call (<= AR_MAX_BLOCKS and the SM count) */
#define AR_TIMEOUT_NS 10000000000LL        /* 10 s: a peer that never comes traps */
#define P2P_MAGIC 0x6b703270u              /* "p2pk" */
#define AR_PUSH_EMPTY 0x80008000u          /* an empty push slot's words */

_Static_assert(KILN_RT_P2P_MAX_RANKS == 8, "kernel_src/allreduce.cu takes 8 buffer pointers");

typedef struct p2p_handle {
    uint32_t magic;
    int32_t pid;
    int32_t ordinal;
    int32_t n_ranks;
    int32_t rank;
    int32_t n_sms;
    int32_t push;
    uint64_t base;
    uint64_t max_bytes;
} p2p_handle;
_Static_assert(sizeof(p2p_handle) <= KILN_RT_P2P_HANDLE_BYTES, "p2p handle size");

struct kiln_rt_p2p {
    kiln_rt_device *dev;
    int n_ranks, rank;
    size_t max_bytes;                    /* per data half, multiple of 256 */
    size_t limit;                        /* largest message served (<= max_bytes) */
    kiln_devptr base;                    /* [AR_DATA_OFF + 2 * max_bytes] */
    kiln_devptr peers[KILN_RT_P2P_MAX_RANKS]; /* every rank's base (0 past n_ranks) */
    int grid_cap;                        /* blocks per call: the same on every rank */
    bool ready;
    bool push;                           /* the push exchange (a third region of 3 * n_ranks slots) */
    kiln_rt_func *fn[3];                 /* bf16, fp16, fp32 */
    kiln_rt_func *fn_norm[3];            /* all-reduce + add + rmsnorm, same types */
    kiln_rt_func *fn_gather[3];          /* the push all-gather (push only), same types */
};

static int dt_index(kiln_dtype dt) {
    switch (dt) {
    case KILN_DTYPE_BF16: return 0;
    case KILN_DTYPE_F16: return 1;
    case KILN_DTYPE_F32: return 2;
    default: return -1;
    }
}

kiln_status kiln_rt_p2p_create(kiln_rt_device *d, kiln_rt_kernels *kernels, int n_ranks, int rank, size_t max_bytes,
                               int push, kiln_rt_p2p **out) {
    kiln_status st = KILN_OK;
    kiln_rt_p2p *p = NULL;
    KILN_CHECK(n_ranks >= 1 && n_ranks <= KILN_RT_P2P_MAX_RANKS && rank >= 0 && rank < n_ranks,
               KILN_ERR_UNSUPPORTED, "the one-shot all-reduce takes 1 to %d ranks (rank %d of %d)",
               KILN_RT_P2P_MAX_RANKS, rank, n_ranks);
    p = calloc(1, sizeof *p);
    KILN_CHECK_ALLOC(p);
    p->dev = d;
    p->n_ranks = n_ranks;
    p->rank = rank;
    if (push < 0) {
        const char *env = getenv("KILN_AR_PUSH");
        push = env && *env ? atoi(env) != 0 : KILN_RT_P2P_PUSH_DEFAULT;
    }
    p->push = push != 0;
    p->max_bytes = ((max_bytes ? max_bytes : KILN_RT_P2P_MAX_BYTES_DEFAULT) + 255) & ~(size_t)255;
    /* each rank reads n_ranks - 1 peers' copies: past 2 ranks NCCL's ring
     * wins sooner (vLLM switches at 256-512 KB for 4-8 GPUs) */
    p->limit = n_ranks <= 2 ? p->max_bytes : KILN_MAX((size_t)4096, p->max_bytes * 2 / (size_t)n_ranks);
    static const char *const defs[3] = {"ACT=bf16", "ACT=fp16", "ACT=fp32"};
    const char *plain = p->push ? "all_reduce_push" : "all_reduce",
               *norm = p->push ? "all_reduce_push_norm" : "all_reduce_norm";
    kiln_jit_spec specs[9];
    for (int i = 0; i < 3; i++) specs[i] = (kiln_jit_spec){plain, defs[i]};
    for (int i = 0; i < 3; i++) specs[3 + i] = (kiln_jit_spec){norm, defs[i]};
    for (int i = 0; i < 3; i++) specs[6 + i] = (kiln_jit_spec){"all_gather_push", defs[i]};
    KILN_TRY(kiln_rt_kernels_prepare(kernels, specs, p->push ? 9 : 6));
    for (int i = 0; i < 3; i++) KILN_TRY(kiln_rt_kernels_get(kernels, plain, defs[i], &p->fn[i]));
    for (int i = 0; i < 3; i++) KILN_TRY(kiln_rt_kernels_get(kernels, norm, defs[i], &p->fn_norm[i]));
    for (int i = 0; p->push && i < 3; i++)
        KILN_TRY(kiln_rt_kernels_get(kernels, "all_gather_push", defs[i], &p->fn_gather[i]));
    KILN_TRY(kiln_rt_device_make_current(d));
    const size_t push_bytes = p->push ? 3 * (size_t)n_ranks * p->max_bytes : 0;
    KILN_TRY(kiln_rt_malloc(d, AR_DATA_OFF + 2 * p->max_bytes + push_bytes, &p->base));
    /* epoch, done count, slot sizes and flags start at zero, and the push
     * slots empty, before any peer learns the address */
    KILN_TRY(kiln_rt_memset8(p->base, 0, AR_DATA_OFF, NULL));
    if (push_bytes)
        KILN_TRY(kiln_rt_memset32(p->base + AR_DATA_OFF + 2 * p->max_bytes, AR_PUSH_EMPTY, push_bytes / 4, NULL));
    KILN_TRY(kiln_rt_device_sync(d));
    *out = p;
    return KILN_OK;
fail:
    kiln_rt_p2p_destroy(p);
    return st;
}

void kiln_rt_p2p_destroy(kiln_rt_p2p *p) {
    if (!p) return;
    if (p->base) kiln_rt_free(p->dev, p->base);
    free(p);
}

void kiln_rt_p2p_handle(const kiln_rt_p2p *p, uint8_t out[KILN_RT_P2P_HANDLE_BYTES]) {
    p2p_handle h = {P2P_MAGIC, (int32_t)getpid(), p->dev->info.ordinal, p->n_ranks, p->rank, p->dev->info.n_sms,
                    p->push, p->base, p->max_bytes};
    memset(out, 0, KILN_RT_P2P_HANDLE_BYTES);
    memcpy(out, &h, sizeof h);
}

kiln_status kiln_rt_p2p_set_peers(kiln_rt_p2p *p, const uint8_t *handles) {
    kiln_status st = KILN_OK;
    kiln_devptr peers[KILN_RT_P2P_MAX_RANKS] = {0};
    int ord[KILN_RT_P2P_MAX_RANKS], cap = KILN_MIN(AR_GRID_MAX, AR_MAX_BLOCKS);
    p->ready = false;
    KILN_TRY(kiln_rt_device_make_current(p->dev));
    for (int r = 0; r < p->n_ranks; r++) {
        p2p_handle h;
        memcpy(&h, handles + (size_t)r * KILN_RT_P2P_HANDLE_BYTES, sizeof h);
        KILN_CHECK(h.magic == P2P_MAGIC && h.rank == r && h.n_ranks == p->n_ranks && h.max_bytes == p->max_bytes,
                   KILN_ERR_INVALID_ARGUMENT, "handle %d is not a peer buffer of this group", r);
        KILN_CHECK(h.push == (int32_t)p->push, KILN_ERR_INVALID_ARGUMENT,
                   "rank %d uses the %s exchange, rank %d the %s one ($KILN_AR_PUSH differs)", r,
                   h.push ? "push" : "pull", p->rank, p->push ? "push" : "pull");
        KILN_CHECK(h.pid == (int32_t)getpid(), KILN_ERR_UNSUPPORTED,
                   "rank %d is in another process (the one-shot all-reduce serves ranks of one process)", r);
        for (int q = 0; q < r; q++)
            KILN_CHECK(ord[q] != h.ordinal, KILN_ERR_UNSUPPORTED, "ranks %d and %d share GPU %d", q, r, h.ordinal);
        ord[r] = h.ordinal;
        peers[r] = (kiln_devptr)h.base;
        /* block b of every rank meets block b of the others: equal grids
         * (the smallest GPU's SM count bounds them, all CTAs co-resident) */
        cap = KILN_MIN(cap, KILN_MAX(1, h.n_sms));
        if (h.ordinal == p->dev->info.ordinal) continue;
        CUdevice pd;
        int can = 0;
        KILN_CHECK_CU(kiln_cu.cuDeviceGet(&pd, h.ordinal));
        KILN_CHECK_CU(kiln_cu.cuDeviceCanAccessPeer(&can, p->dev->dev, pd));
        KILN_CHECK(can, KILN_ERR_UNSUPPORTED, "GPU %d cannot access the memory of GPU %d (no peer-to-peer path)",
                   p->dev->info.ordinal, h.ordinal);
        CUcontext pctx = NULL;
        KILN_CHECK_CU(kiln_cu.cuDevicePrimaryCtxRetain(&pctx, pd));
        CUresult rr = kiln_cu.cuCtxEnablePeerAccess(pctx, 0);
        kiln_cu.cuDevicePrimaryCtxRelease(pd);
        if (rr != CUDA_SUCCESS && rr != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
            st = kiln__cu_fail(rr, "cuCtxEnablePeerAccess", __FILE__, __LINE__);
            kiln_error_context("peer access from GPU %d to GPU %d", p->dev->info.ordinal, h.ordinal);
            goto fail;
        }
    }
    KILN_CHECK(peers[p->rank] == p->base, KILN_ERR_INVALID_ARGUMENT, "handle %d is not this rank's buffer", p->rank);
    memcpy(p->peers, peers, sizeof peers);
    p->grid_cap = cap;
    p->ready = true;
fail:
    return st;
}

size_t kiln_rt_p2p_max_bytes(const kiln_rt_p2p *p) { return p ? p->limit : 0; }

bool kiln_rt_p2p_fits(const kiln_rt_p2p *p, kiln_devptr buf, size_t n, kiln_dtype dt) {
    return p && p->ready && n > 0 && dt_index(dt) >= 0 && n * kiln_dtype_size(dt) <= p->limit && buf % 16 == 0;
}

kiln_status kiln_rt_p2p_all_reduce_sum(kiln_rt_p2p *p, kiln_devptr buf, size_t n, kiln_dtype dt, kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    KILN_CHECK(kiln_rt_p2p_fits(p, buf, n, dt), KILN_ERR_INTERNAL,
               "one-shot all-reduce of %zu %s at %#llx: not set up, too large (max %zu bytes) or misaligned", n,
               kiln_dtype_name(dt), (unsigned long long)buf, p ? p->limit : 0);
    {
        int64_t vn = 16 / (int64_t)kiln_dtype_size(dt), nvec = ((int64_t)n + vn - 1) / vn;
        int64_t threads = KILN_MIN((int64_t)AR_THREADS, (nvec + 31) / 32 * 32);
        int64_t blocks = KILN_MIN((nvec + threads - 1) / threads, (int64_t)p->grid_cap);
        kiln_devptr io = buf;
        int64_t n64 = (int64_t)n, half = (int64_t)p->max_bytes, timeout = AR_TIMEOUT_NS;
        int32_t rank = p->rank, nr = p->n_ranks;
        kiln_devptr *b = p->peers;
        void *args[] = {&io, &n64, &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &rank, &nr, &half, &timeout};
        KILN_TRY(kiln_rt_launch(p->fn[dt_index(dt)], (kiln_rt_dim3){(unsigned)blocks, 1, 1},
                                (kiln_rt_dim3){(unsigned)threads, 1, 1}, 0, s, args));
    }
fail:
    return st;
}

/* kernel_src/allreduce.cu kiln_all_reduce_add_rmsnorm: a block a row of at
 * most ARN_MAXV vectors a thread */
#define ARN_MAXV 4

bool kiln_rt_p2p_fits_norm(const kiln_rt_p2p *p, kiln_devptr io, kiln_devptr residual, kiln_devptr out, kiln_devptr w,
                           int rows, int dim, kiln_dtype dt) {
    if (!kiln_rt_p2p_fits(p, io, (size_t)rows * (size_t)dim, dt) || rows < 1 || rows > p->grid_cap) return false;
    int vn = (int)(16 / kiln_dtype_size(dt));
    return dim % vn == 0 && dim / vn <= ARN_MAXV * AR_THREADS && (residual | out | w) % 16 == 0;
}

kiln_status kiln_rt_p2p_all_reduce_add_rmsnorm(kiln_rt_p2p *p, kiln_devptr io, kiln_devptr residual, kiln_devptr out,
                                               kiln_devptr w, int rows, int dim, float eps, kiln_dtype dt,
                                               kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    KILN_CHECK(kiln_rt_p2p_fits_norm(p, io, residual, out, w, rows, dim, dt), KILN_ERR_INTERNAL,
               "one-shot all-reduce + rmsnorm of %d x %d %s: not set up, too large or misaligned", rows, dim,
               kiln_dtype_name(dt));
    {
        int vn = (int)(16 / kiln_dtype_size(dt)), nv = dim / vn;
        /* a vector a thread where the row allows (every load in flight at once) */
        int threads = KILN_MIN(AR_THREADS, (nv + 31) / 32 * 32);
        int64_t half = (int64_t)p->max_bytes, timeout = AR_TIMEOUT_NS;
        int32_t rank = p->rank, nr = p->n_ranks, r32 = rows, d32 = dim;
        kiln_devptr *b = p->peers;
        void *args[] = {&io, &residual, &out, &w, &r32, &d32, &eps, &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6],
                        &b[7], &rank, &nr, &half, &timeout};
        KILN_TRY(kiln_rt_launch(p->fn_norm[dt_index(dt)], (kiln_rt_dim3){(unsigned)rows, 1, 1},
                                (kiln_rt_dim3){(unsigned)threads, 1, 1}, 0, s, args));
    }
fail:
    return st;
}

bool kiln_rt_p2p_push_args(const kiln_rt_p2p *p, kiln_devptr bufs[KILN_RT_P2P_MAX_RANKS], int *rank, int *n_ranks,
                           int64_t *slot_bytes, int64_t *timeout_ns, size_t *max_msg) {
    if (!p || !p->ready || !p->push) return false;
    memcpy(bufs, p->peers, sizeof p->peers);
    *rank = p->rank, *n_ranks = p->n_ranks, *slot_bytes = (int64_t)p->max_bytes, *timeout_ns = AR_TIMEOUT_NS;
    *max_msg = p->limit;
    return true;
}

bool kiln_rt_p2p_fits_gather(const kiln_rt_p2p *p, kiln_devptr send, kiln_devptr out, size_t rows, size_t width,
                             kiln_dtype dt) {
    if (!p || !p->push || !kiln_rt_p2p_fits(p, send, rows * width, dt) || rows < 1 || out % 16) return false;
    return (width * kiln_dtype_size(dt)) % 16 == 0;
}

kiln_status kiln_rt_p2p_all_gather(kiln_rt_p2p *p, kiln_devptr send, kiln_devptr out, size_t rows, size_t width,
                                   kiln_dtype dt, kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    KILN_CHECK(kiln_rt_p2p_fits_gather(p, send, out, rows, width, dt), KILN_ERR_INTERNAL,
               "one-shot all-gather of %zu x %zu %s: not the push exchange, too large (max %zu bytes) or misaligned",
               rows, width, kiln_dtype_name(dt), p ? p->limit : 0);
    {
        int64_t nvec = (int64_t)(rows * width * kiln_dtype_size(dt) / 16);
        int64_t threads = KILN_MIN((int64_t)AR_THREADS, (nvec + 31) / 32 * 32);
        int64_t blocks = KILN_MIN((nvec + threads - 1) / threads, (int64_t)p->grid_cap);
        int64_t r64 = (int64_t)rows, w64 = (int64_t)width, half = (int64_t)p->max_bytes, timeout = AR_TIMEOUT_NS;
        int32_t rank = p->rank, nr = p->n_ranks;
        kiln_devptr *b = p->peers;
        void *args[] = {&send, &out, &r64, &w64, &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &rank, &nr,
                        &half, &timeout};
        KILN_TRY(kiln_rt_launch(p->fn_gather[dt_index(dt)], (kiln_rt_dim3){(unsigned)blocks, 1, 1},
                                (kiln_rt_dim3){(unsigned)threads, 1, 1}, 0, s, args));
    }
fail:
    return st;
}
