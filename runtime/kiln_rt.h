/*
 * kiln_rt.h -- the runtime façade: everything above runtime/ talks to the GPU
 * through this header, which has no CUDA types in it.
 *
 *  - libraries: the driver (libcuda.so.1), NVRTC, cuBLASLt and NCCL are
 *    loaded with dlopen on first use; a missing one is KILN_ERR_UNAVAILABLE
 *    naming the library. CUDA / NVRTC / cuBLASLt / NCCL error codes are
 *    converted at the boundary (KILN_ERR_DEVICE, message names the call and
 *    the error name).
 *  - devices: primary context per ordinal, streams, events, device memory
 *    (plain allocations and pools reserved once and sub-allocated), pinned
 *    host memory, CUDA graph capture / replay, module load and kernel launch.
 *  - JIT: the kernel registry (the .cu files of kernel_src/), NVRTC compilation for an
 *    exact arch with specialization defines, in parallel, with a disk cache
 *    ($KILN_CACHE_DIR, default ~/.cache/kiln/jit); KILN_KERNEL_DIR reads
 *    sources from disk instead of the copies embedded in libkiln.
 *  - cuBLASLt GEMM (bf16/fp16 in, fp32 accumulate, optional bias epilogue),
 *    algorithm cached per shape bucket.
 *  - NCCL communicators (all-reduce, all-gather), and a one-shot all-reduce
 *    over peer memory for small messages between the GPUs of one process.
 *
 * Ownership: *_create / *_open return owned objects freed by the matching
 * *_destroy / *_close; functions named *_get return borrowed pointers owned
 * by their parent object.
 * Thread-safety: library loading is thread-safe (once). A device may be used
 * from several threads (each thread makes it current first; every call here
 * does so itself). Streams, events, graphs and pools are not internally
 * locked: one owner thread each. kiln_rt_kernels is internally locked.
 */
#ifndef KILN_RT_H
#define KILN_RT_H

#include "kiln_base.h"

/* A device address (CUdeviceptr). 0 is the null pointer. */
typedef uint64_t kiln_devptr;

typedef struct kiln_rt_device kiln_rt_device;
typedef struct kiln_rt_stream kiln_rt_stream;
typedef struct kiln_rt_event kiln_rt_event;
typedef struct kiln_rt_graph kiln_rt_graph;
typedef struct kiln_rt_module kiln_rt_module;
typedef struct kiln_rt_func kiln_rt_func;
typedef struct kiln_rt_mempool kiln_rt_mempool;

/* ------------------------------------------------------------- libraries */

/* True when this build has the CUDA backend (false: every call below
 * returns KILN_ERR_UNAVAILABLE). */
bool kiln_rt_built_with_cuda(void);
/* Load libcuda.so.1 and cuInit. Idempotent. */
kiln_status kiln_rt_init(void);
/* Load NVRTC (libnvrtc.so.13 / libnvrtc.so; $KILN_NVRTC_LIB overrides). */
kiln_status kiln_rt_load_nvrtc(void);
/* Load cuBLASLt (libcublasLt.so.13; $KILN_CUBLASLT_LIB overrides). */
kiln_status kiln_rt_load_cublaslt(void);
/* Load NCCL (libnccl.so.2; $KILN_NCCL_LIB overrides). */
kiln_status kiln_rt_load_nccl(void);
/* Driver version as an int (13000 for 13.0); needs kiln_rt_init. */
kiln_status kiln_rt_driver_version(int *version);

/* --------------------------------------------------------------- devices */

typedef struct kiln_rt_device_info {
    char name[256];
    int ordinal;
    int cc_major, cc_minor;
    char arch[16];            /* "sm_90" */
    int n_sms;
    int l2_bytes;
    int smem_per_block_optin; /* max dynamic+static shared memory a block may opt into */
    int smem_per_sm;
    int max_threads_per_sm;
    int regs_per_sm;
    bool unified_addressing;  /* kernels read pinned host memory at its host address */
    size_t total_mem;
} kiln_rt_device_info;

kiln_status kiln_rt_device_count(int *n);
/* Retain the primary context of device `ordinal` and make it current. */
kiln_status kiln_rt_device_open(int ordinal, kiln_rt_device **out);
void kiln_rt_device_close(kiln_rt_device *d);
const kiln_rt_device_info *kiln_rt_device_get_info(const kiln_rt_device *d);
/* Make d's context current on the calling thread. */
kiln_status kiln_rt_device_make_current(kiln_rt_device *d);
kiln_status kiln_rt_device_sync(kiln_rt_device *d);
kiln_status kiln_rt_mem_info(kiln_rt_device *d, size_t *free_bytes, size_t *total_bytes);

/* ---------------------------------------------------------------- memory */

kiln_status kiln_rt_malloc(kiln_rt_device *d, size_t bytes, kiln_devptr *out);
void kiln_rt_free(kiln_rt_device *d, kiln_devptr p);
/* Page-locked host memory (for async copies). */
kiln_status kiln_rt_host_alloc(kiln_rt_device *d, size_t bytes, void **out);
void kiln_rt_host_free(kiln_rt_device *d, void *p);
/* Device/pinned allocations and pool sub-allocations made so far, process
 * wide (tests check that steps allocate nothing). */
uint64_t kiln_rt_alloc_count(void);
/* Copies and fills. s == NULL: synchronous -- every stream's earlier work on the
 * current context has finished before, and the copy or fill has landed after. */
kiln_status kiln_rt_memcpy_htod(kiln_devptr dst, const void *src, size_t bytes, kiln_rt_stream *s);
kiln_status kiln_rt_memcpy_dtoh(void *dst, kiln_devptr src, size_t bytes, kiln_rt_stream *s);
kiln_status kiln_rt_memcpy_dtod(kiln_devptr dst, kiln_devptr src, size_t bytes, kiln_rt_stream *s);
kiln_status kiln_rt_memset8(kiln_devptr dst, uint8_t value, size_t bytes, kiln_rt_stream *s);
kiln_status kiln_rt_memset32(kiln_devptr dst, uint32_t value, size_t n_words, kiln_rt_stream *s);

/* A device memory pool: one allocation reserved at creation, then bump
 * sub-allocation. Reset to a mark frees everything allocated after it.
 * Pools: weights, KV cache, activations, workspace. */
kiln_status kiln_rt_pool_create(kiln_rt_device *d, const char *name, size_t bytes, kiln_rt_mempool **out);
void kiln_rt_pool_destroy(kiln_rt_mempool *p);
/* align: power of two (0 means 256). Fails with KILN_ERR_OUT_OF_MEMORY
 * naming the pool when it is full. */
kiln_status kiln_rt_pool_alloc(kiln_rt_mempool *p, size_t bytes, size_t align, kiln_devptr *out);
size_t kiln_rt_pool_mark(const kiln_rt_mempool *p);
void kiln_rt_pool_reset(kiln_rt_mempool *p, size_t mark);
size_t kiln_rt_pool_capacity(const kiln_rt_mempool *p);
size_t kiln_rt_pool_high_water(const kiln_rt_mempool *p);
kiln_devptr kiln_rt_pool_base(const kiln_rt_mempool *p);

/* ------------------------------------------------------ streams, events */

kiln_status kiln_rt_stream_create(kiln_rt_device *d, kiln_rt_stream **out);
void kiln_rt_stream_destroy(kiln_rt_stream *s);
kiln_status kiln_rt_stream_sync(kiln_rt_stream *s);
kiln_status kiln_rt_stream_wait_event(kiln_rt_stream *s, kiln_rt_event *e);
kiln_rt_device *kiln_rt_stream_device(kiln_rt_stream *s);

/* timing: false gives a lighter event for synchronisation only. */
kiln_status kiln_rt_event_create(kiln_rt_device *d, bool timing, kiln_rt_event **out);
void kiln_rt_event_destroy(kiln_rt_event *e);
kiln_status kiln_rt_event_record(kiln_rt_event *e, kiln_rt_stream *s);
kiln_status kiln_rt_event_sync(kiln_rt_event *e);
kiln_status kiln_rt_event_elapsed_ms(kiln_rt_event *start, kiln_rt_event *end, float *ms);

/* ------------------------------------------------------------ CUDA graphs */

/* Capture every launch issued on s (by this thread) until graph_end, which
 * instantiates the captured graph. */
kiln_status kiln_rt_graph_begin(kiln_rt_stream *s);
kiln_status kiln_rt_graph_end(kiln_rt_stream *s, kiln_rt_graph **out);
kiln_status kiln_rt_graph_launch(kiln_rt_graph *g, kiln_rt_stream *s);
void kiln_rt_graph_destroy(kiln_rt_graph *g);

/* ------------------------------------------------ modules and launching */

typedef struct kiln_rt_dim3 {
    unsigned x, y, z;
} kiln_rt_dim3;

typedef struct kiln_rt_func_attrs {
    int regs;         /* registers per thread          */
    int local_bytes;  /* local memory (stack/spill)     */
    int static_smem;  /* static shared memory, bytes    */
    int max_threads;  /* max threads per block          */
} kiln_rt_func_attrs;

kiln_status kiln_rt_module_load(kiln_rt_device *d, const void *cubin, size_t len, kiln_rt_module **out);
void kiln_rt_module_unload(kiln_rt_module *m);
/* Entry point by name; returned pointer is owned by the module. */
kiln_status kiln_rt_module_get(kiln_rt_module *m, const char *entry, kiln_rt_func **out);
const char *kiln_rt_func_name(const kiln_rt_func *f);
kiln_status kiln_rt_func_get_attrs(kiln_rt_func *f, kiln_rt_func_attrs *a);
/* Programmatic dependent launch (sm_90+): f is launched so that it may start
 * while the previous kernel of the stream finishes; f must execute
 * griddepcontrol.wait (pdl_wait() in kernel_src/kiln_common.cuh) before it
 * reads anything an earlier kernel wrote. kiln's own kernels all do; policy
 * kernels are launched without it. */
void kiln_rt_func_set_pdl(kiln_rt_func *f, bool on);
/* Launch f; args[i] points at the i-th kernel argument. Dynamic shared
 * memory above 48 KiB is opted into automatically. */
kiln_status kiln_rt_launch(kiln_rt_func *f, kiln_rt_dim3 grid, kiln_rt_dim3 block, unsigned smem_bytes,
                           kiln_rt_stream *s, void **args);
/* The most clusters of f (compiled with its cluster shape) the device runs
 * at once with this block and dynamic shared memory (the driver's
 * occupancy calculator: SMs grouped by GPC); grid must be a multiple of the
 * cluster shape. Opts f into smem_bytes above 48 KiB as a launch would. */
kiln_status kiln_rt_func_max_clusters(kiln_rt_func *f, kiln_rt_dim3 grid, kiln_rt_dim3 block, unsigned smem_bytes,
                                      int *out);
/* A 2-D tensor map (the driver's CUtensorMap, 128 bytes) for TMA loads of a
 * row-major [rows, cols] matrix of 16-bit elements (bf16 / fp16) at `base`,
 * rows `ld` elements apart, in boxes of box_cols x box_rows with the 128-byte
 * swizzle (box_cols * 2 == 128); elements outside the matrix read as zeros.
 * base 16-byte aligned, ld * 2 a multiple of 16. */
typedef struct kiln_rt_tmap {
    _Alignas(64) uint64_t v[16];
} kiln_rt_tmap;
kiln_status kiln_rt_tmap_2d(kiln_rt_tmap *out, kiln_devptr base, kiln_dtype dt, int64_t rows, int64_t cols, int64_t ld,
                            int box_rows, int box_cols);
/* Check for an asynchronous device fault (sticky errors make the device
 * unusable; the engine must go to its fatal state). */
kiln_status kiln_rt_check_device(kiln_rt_device *d);

/* ------------------------------------------------------ JIT and registry */

/* One specialization parameter of a registry kernel: a define name and the
 * values it may take ("bf16|fp16", "*" for any positive integer). */
typedef struct kiln_jit_param {
    const char *name;
    const char *values;
    const char *dflt; /* NULL: a spec must give it; else it may be left out (the kernel's own default) */
} kiln_jit_param;

#define KILN_JIT_MAX_PARAMS 10

/* One registry entry: a kernel entry point in a .cu file. */
typedef struct kiln_jit_kernel_def {
    const char *name;      /* registry name, "rmsnorm"                      */
    const char *file;      /* "kernel_src/rmsnorm.cu"                        */
    const char *entry;     /* extern "C" entry point, "kiln_rmsnorm"         */
    const char *signature; /* argument kinds, "ptr,ptr,ptr,i32,i32,f32"       */
    kiln_jit_param params[KILN_JIT_MAX_PARAMS];
    /* Specializations compiled by `kiln kernels` without --model and by the
     * CI test: ';'-separated define sets ("ACT=bf16;ACT=fp16"). */
    const char *examples;
} kiln_jit_kernel_def;

/* The small-M GEMV (kernel_src/gemv.cu): used for M <= MAX_M, in the
 * tiling ROWS x UNROLL; engine/cuda/ops_gpu.c launches it, the model kernel
 * set warms it. Measured on the H200 (bench/RESULTS.md): at M = 1 rows 1 x
 * unroll 4 beats cuBLASLt on the Llama-3-8B projections (qkv 76 vs 67% of
 * copy, o 67 vs 52%, gate_up 97 vs 93%, down 83 vs 83%); at M >= 4 it is
 * 2-4x slower than cuBLASLt, so it stays at M = 1. */
#define KILN_GEMV_MAX_M_DEFAULT 1
/* Greedy sampling steps (every row temperature <= 0, no penalties or bans)
 * split each row over a thread-block cluster of this many blocks
 * (kernel_src/sample_argmax.cu, sm_90; 1|2|4|8, $KILN_SAMPLE_CLUSTER; 0: the
 * general one-block-a-row kiln_sample), or (KILN_SAMPLE_CLUSTER_SPLIT) into
 * chunks of 4096 logits, a 256-thread block each, the last block of a row
 * merging (kiln_sample_argmax_split, any GPU). KILN_SAMPLE_CLUSTER_AUTO: the
 * split kernel at every row count (H200, bench_kernels sample, 2026-12-01:
 * 1 / 32 / 64 / 256 rows of 128,256 logits 6.5 / 12.2 / 18.5 / 58.3 us against
 * 7.5 (cluster of 8) / 16.9 (cluster of 4) / 25.3 / 86.3 (kiln_sample), the
 * earlier automatic choices; engine/cuda/ops_gpu.c kiln_gpu_sample_cluster). */
#define KILN_SAMPLE_CLUSTER_AUTO 16
#define KILN_SAMPLE_CLUSTER_SPLIT 32
#define KILN_SAMPLE_CLUSTER_DEFAULT KILN_SAMPLE_CLUSTER_AUTO
#define KILN_GEMV_ROWS_DEFAULT 1
#define KILN_GEMV_UNROLL_DEFAULT 4
/* Warps per W row group splitting K (1|2, $KILN_GEMV_KSPLIT): 2 doubles the
 * warps of the small decode GEMVs (tensor-parallel half shapes). */
#define KILN_GEMV_KSPLIT_DEFAULT 1
/* engine/cuda/ops_gpu.c gemv_tiling: 3 = by weight shape (H200 x2, 2026-11-30: -b 1
 * step 4.353 vs 4.644 ms at TP 1, 2.771 vs 2.949 at TP 2); 0 = the knobs above
 * for every shape */
#define KILN_GEMV_RULE_DEFAULT 3
/* Rule 3's tilings {rows, unroll, K split}: N <= 4096, N >= 16384, the rest
 * (gemv_tiling picks; kiln_jit_model_specs compiles all three) */
#define KILN_GEMV_RULE3_TILINGS {{2, 4, 2}, {1, 4, 2}, {1, 2, 2}}
/* The batch-1 gate/up GEMV with the SiLU-and-mul as its epilogue
 * (kernel_src/gemv.cu GLU=1, rows 2; $KILN_GEMV_SILU=0 turns it off). Its
 * tiling: UNROLL 16-byte loads per row in flight (2|4|8,
 * $KILN_GEMV_SILU_UNROLL) and KSPLIT warps per output splitting K (1|2,
 * $KILN_GEMV_SILU_KSPLIT; 1 has half the warps of the plain GEMV). Measured
 * on the H200 (2026-11-30, M = 1, K = 4096): KSPLIT 2 UNROLL 2 at 100.0% /
 * 93.0% of copy at I = 14336 / 7168 against GEMV + silu_mul's 89.3% / 79.9%;
 * a decode step at -b 1 4.675 vs 4.814 ms (TP 1), 2.944 vs 2.988 (TP 2). */
#define KILN_GEMV_SILU_DEFAULT 1
/* The batch-1 qkv GEMV with rope and the KV-cache write as its epilogue
 * (kernel_src/gemv.cu ROPE=1, rows d and d + hd / 2 a warp group;
 * $KILN_GEMV_ROPE=0 off); its tiling. Measured on the H200 (2026-11-30,
 * remote.sh s18, -b 1): TP 1 4.303 vs 4.388 ms a step, TP 2 (with the AR
 * epilogue) 3.028 vs 3.072 ms. */
#define KILN_GEMV_ROPE_DEFAULT 1
/* The row-parallel batch-1 GEMV with the push all-reduce + add + RMSNorm as
 * its epilogue (kernel_src/gemv.cu AR=1; $KILN_GEMV_AR=1 on): off, it is
 * slower. Measured on 2 H200s (2026-11-30, remote.sh s18, TP 2 -b 1, twice):
 * 3.072 ms a step against 2.771 / 2.768 for the GEMV + the fused push
 * all-reduce kernel (its results are right: test_gpu_tp). */
#define KILN_GEMV_AR_DEFAULT 0
/* The batch-1 residual add + RMSNorm between two GEMVs folded into them
 * (kernel_src/gemv.cu NOUT / NIN: the o or down GEMV adds into the residual
 * and writes h * w and its blocks' sums of squares, the GEMV after the norm
 * scales its dot products by 1 / rms; engine/cuda/exec_gpu.c;
 * H200 -b 1 256.7 against 252.0 tok/s, remote.sh s111; $KILN_GEMV_NORM=0 off, 1 before
 * the SiLU (gate/up) and rope (qkv) GEMVs, 2 also before a plain GEMV (the
 * LM head)). */
#define KILN_GEMV_NORM_DEFAULT 1
/* its tiling ($KILN_GEMV_ROPE_UNROLL 2|4|8, $KILN_GEMV_ROPE_KSPLIT 1|2|4). KSPLIT
 * by default: 1 where N / 16 blocks give every SM two, else 2 (engine/cuda/
 * ops_gpu.c; H200 -b 1, 2026-11-30, remote.sh s33: UNROLL x KSPLIT 2 x 1 246.1,
 * 4 x 1 244.6, 8 x 1 233.3, 2 x 2 242.2, 4 x 2 241.0, 8 x 2 238.4 tok/s).
 * The model kernel set compiles both. */
#define KILN_GEMV_ROPE_UNROLL 2
/* its rows a warp ($KILN_GEMV_ROPE_ROWS): 1, a row a warp group, the pair's rows meeting in shared memory
 * (as the plain GEMV's best qkv tiling streams W), or 2, both rows of a rotation pair in one warp. H200,
 * 2026-11-30, remote.sh s39, -b 1 -s 128 -o 512: rows 1 (unroll 2, K split 1 by the grid) 246.8 / 246.9
 * tok/s against 245.8 / 245.8 / 245.9 with 2; rows 1 with K split 2 245.1 / 245.2, unroll 4 238.9, K split
 * 4 243.8; TP 2 -b 1 (K split 2) 388.0 against 387.4 */
#define KILN_GEMV_ROPE_ROWS 1
#define KILN_GEMV_SILU_UNROLL_DEFAULT 2
#define KILN_GEMV_SILU_KSPLIT_DEFAULT 2

/* The tensor-core small-M GEMM (kernel_src/gemm_tc.cu): used for
 * 2 <= M <= MAX_M (above the GEMV's M), in buckets MAXM 8/16/32/64, with
 * blocks of WARPS warps, WARPS_K of them splitting K (0: picked by N so that
 * split-K needs at most 2 slices where shared memory allows), TILES 16-row W
 * tiles per warp and STAGES 64-wide K chunks of W (and of x, in shared
 * memory) in flight; the defaults are the most per warp that compile
 * without spills at 128 registers (`kiln kernels --arch sm_90`).
 * engine/cuda/ops_gpu.c launches it, the model kernel set warms it.
 * Off by default: measured on the H200 (bench/RESULTS.md) it is slower than
 * cuBLASLt from M = 16 on (qkv at M = 32: 48-54% of copy against 66%) and
 * level at M = 8; its first version (x re-read from L1/L2 by every warp, now
 * removed) took -b 32 decode from 4,872 to 2,794 tok/s. */
#define KILN_TCGEMM_MAX_M_DEFAULT 0
#define KILN_TCGEMM_WARPS_DEFAULT 8
#define KILN_TCGEMM_WARPS_K_DEFAULT 0
#define KILN_TCGEMM_TILES_DEFAULT(maxm) ((maxm) >= 64 ? 1 : 2)
#define KILN_TCGEMM_STAGES_DEFAULT(maxm) ((maxm) >= 64 ? 3 : 2)
/* L2 prefetch budget before the wait on the previous kernel, in MiB over the
 * grid's resident blocks */
#define KILN_TCGEMM_PREFETCH_MB_DEFAULT 16

/* The cluster split-K tensor-core GEMM (kernel_src/gemm_sk.cu) for decode-sized M:
 * W streamed through a shared-memory cp.async ring (STAGES 64-wide K chunks in
 * flight a block), BN = WARPS x TILES x 16 W rows a block, split-K over a
 * thread-block cluster reduced in distributed shared memory (sm_90; no split
 * before). On by default for 2 <= M <= 16 on weights of at most 64 MiB
 * (KILN_SKGEMM_MAX_WEIGHT_MB): there it beats cuBLASLt, whose kernels carry
 * ~6 us of fixed cost (bench_kernels gemm_sk, H200, 2026-11-30: qkv 67.8 /
 * 66.3% of copy at M = 8 / 16 against 66.8 / 62.2, o 64.8 / 64.0 against 56.5 /
 * 56.0); on the larger gate_up / down weights and from M = 32 on it is
 * slower (M = 32: qkv 59% against 66%; bench/RESULTS.md). */
/* ... up to 64 rows since the twenty-eighth session: at 33..64 rows the o, qkv, down and gate/up + SiLU projections
 * through gemm_sk_tma too (MAXM 64: o / down in 64-row tiles x 2, 14 stages; qkv 128-row x 2, 9). H200, 2026-12-02
 * (bench/RESULTS.md, alternating, kiln bench tok/s): s155 -b 64 10809.3 / 10807.3 against 10741.5 / 10732.4 at 32,
 * -b 48 8633.3 against 8437.8, -b 40 7382.8 against 7216.8; s156 -b 64 10604.4 / 10615.5 against 10396.7 / 10421.3
 * (and 10523.0 / 10496.7 with o and qkv left to cuBLASLt, whose bench rows at M = 64 read them faster: o 61.5% of
 * copy against 57.8%, qkv 68.6 against 64.8 -- in the engine gemm_sk_tma's W loads before its wait win) */
#define KILN_SKGEMM_MAX_M_DEFAULT 64
/* ... where gemm_sk_tma does not take them (GPUs before sm_90, $KILN_SKGEMM_TMA=0): the mma.sync gemm_sk's measured
 * limits, 32 rows (H200, 2026-12-01, s71: -b 64's o projection through it 10,127 tok/s against 10,334 on cuBLASLt)
 * and at 17..32 rows weights of at most 40 MiB (the o projection) */
#define KILN_SKGEMM_MAX_M_MMA_DEFAULT 32
#define KILN_SKGEMM_MAX_WEIGHT_MB_M32_MMA_DEFAULT 40
#define KILN_SKGEMM_MAX_WEIGHT_MB_DEFAULT 64
/* ... and for 16 < M <= 32 only on weights of at most this many MiB
 * ($KILN_SKGEMM_MAX_WEIGHT_MB_M32): the 32 MiB o projection of Llama-3-8B at
 * M = 32 (kiln bench -b 32, H200, 2026-11-30: 5928 tok/s against 5823-5815
 * with cuBLASLt, same call); since the twenty-seventh session's gemm_sk_tma tiling (kiln_skgemm_tma_tiles) also the
 * 48 MiB qkv (H200, 2026-12-02, s149, alternating: -b 32 6373.8 / 6253.2 tok/s against 6254.2 / 6236.4 with qkv on
 * cuBLASLt, -b 24 4966.1 against 4900.2), and since the twenty-eighth session the 112 MiB down projection (64-row
 * tiles x 2 K halves, 16 stages: no cuBLASLt split-K reduce kernel, no run-to-run autotune choice; H200, 2026-12-02,
 * s152, alternating: -b 32 6426.3 / 6431.9 / 6443.5 tok/s against 6369.4 / 6369.5 / 6351.8, -b 24 5023.6 against
 * 4955.7). Not a cap under KILN_SKGEMM_MAX_WEIGHT_MB: at 17..64 rows this limit alone applies */
#define KILN_SKGEMM_MAX_WEIGHT_MB_M32_DEFAULT 120
/* whether gemm_sk takes a GEMM of M rows (or a MAXM bucket) on bytes of weights: at most max_mb MiB at 2..16 rows,
 * max_mb32 at 17..64 where not 0; a limit <= 0 or max_mb < 0: none (max_mb < 0 lifts both: the tests' any weight) */
static inline int kiln_skgemm_weight_ok(int M, int64_t bytes, int max_mb, int max_mb32) {
    if (max_mb < 0) return 1;
    const int lim = M > 16 && max_mb32 != 0 ? max_mb32 : max_mb;
    return lim <= 0 || bytes <= ((int64_t)lim << 20);
}
#define KILN_SKGEMM_SILU_DEFAULT 0 /* the gate/up GEMM with SiLU through gemm_sk: not yet measured */
/* the qkv GEMM with rope + KV write through gemm_sk (ROPE=1) for 2 <= M <= this
 * many rows (at most 32; $KILN_SKGEMM_ROPE=N, 1 meaning 32, 0 never; engine/cuda/ops_gpu.c
 * kiln_gpu_gemm_rope_kv_m). kiln bench, H200 x2 node, 2026-11-30, same call: -b 8 1712 / 1713 tok/s
 * against 1677 / 1677 with cuBLASLt + kiln_rope_kv_write_dec, -b 16 3341 against 3288, -b 32 5998 /
 * 6011 against 6009 / 5978 (no gain at 32 rows: left to cuBLASLt) */
#define KILN_SKGEMM_ROPE_DEFAULT 16
#define KILN_SKGEMM_WARPS_DEFAULT 4
/* gemm_sk on the warpgroup MMA (kernel_src/gemm_sk_wg.cu, sm_90; $KILN_SKGEMM_WG): off. H200, 2026-12-01
 * (bench/RESULTS.md): faster alone at M = 32 (bench_kernels gemm_sk_quick: qkv 63.9% of copy against 56.7% for
 * gemm_sk and 64.6% for cuBLASLt, 69.3% with 4 stages; o 59.3 against 57.9%), but no faster in the engine
 * (kiln bench -b 32: 5952 / 6062 tok/s against 6039 / 6035; tuned per row count 5873 / 5885 against 6022 / 5960) */
#define KILN_SKGEMM_WG_DEFAULT 0
/* gemm_sk's plain and SiLU-and-mul epilogues through gemm_sk_tma (kernel_src/gemm_sk_tma.cu: the wgmma kernel
 * fed by TMA, a producer warp and mbarriers) from this MAXM bucket on, sm_90 ($KILN_SKGEMM_TMA; 0 never, 1 means
 * 32), in _STAGES (plain) and _GLU_STAGES stages. H200, 2026-12-01 (bench/RESULTS.md, twentieth session):
 * bench_kernels gemm_sk_quick at M = 32, % of copy: o 63.6 (8 stages) against 57.9 for gemm_sk and 41.1 for
 * cuBLASLt; gate/up with the SiLU epilogue (4 stages) 84.8 against 82.5 for cuBLASLt + silu_mul. kiln bench
 * (s95, alternating, tok/s): -b 32 6143 / 6214 / 6151 against 5971 / 6009 / 5941 (+3.2%), -b 24 4860 / 4704,
 * -b 20 4104 / 3923; the o projection alone through it neutral (s94), qkv through it slower */
#define KILN_SKGEMM_TMA_DEFAULT 1
/* The defaults of KILN_SKGEMM_MAX_M and KILN_SKGEMM_MAX_WEIGHT_MB_M32 on a GPU of compute capability major.minor, with
 * $KILN_SKGEMM_TMA's first bucket tma (0: never; 1 read as 32) and $KILN_SKGEMM_WG wg: the limits measured with
 * gemm_sk_tma where it takes the 17..32-row bucket (sm_90), else the mma.sync kernel's (_MMA_DEFAULT) */
static inline void kiln_skgemm_default_limits(int cc_major, int cc_minor, int tma, int wg, int *max_m, int *max_mb32) {
    const int t = cc_major == 9 && cc_minor == 0 && ((tma > 0 && tma <= 32) || wg == 2);
    *max_m = t ? KILN_SKGEMM_MAX_M_DEFAULT : KILN_SKGEMM_MAX_M_MMA_DEFAULT;
    *max_mb32 = t ? KILN_SKGEMM_MAX_WEIGHT_MB_M32_DEFAULT : KILN_SKGEMM_MAX_WEIGHT_MB_M32_MMA_DEFAULT;
}
/* ... its plain GEMMs (at -b 17..32 the o projection) in 64-row tiles (kiln_skgemm_tma_tiles below), 16 stages of 12 KiB (one block an SM,
 * 192 KiB in flight) and a K split of at most 2 (_MAX_SPLIT, clusters of 2: o 64 tiles x 2 = 128 blocks). H200,
 * 2026-12-02 (bench/RESULTS.md, twenty-seventh session): bench_kernels gemm_sk_quick o at M = 32 67.0% of copy
 * (11.8 us) against 59.7-63.2% in 128-row tiles, 8 stages and 3 slices (12 stages 66.1%, 8 stages 61.5%); kiln bench
 * (alternating, tok/s) -b 32 6318.7 / 6332.3 against 6253.8 / 6257.3, -b 24 4950.8 against 4857.9 */
#define KILN_SKGEMM_TMA_MAX_SPLIT 2
#define KILN_SKGEMM_TMA_STAGES_DEFAULT 16
/* ... the 16-row tiles a warp (64-row boxes a block) of those plain GEMMs: 1 where the 64-row tiles split in 2 fill
 * at most the SMs (o: 128 blocks), else 2 (qkv 6144 x 4096: 48 tiles x 2, 11 stages of 20 KiB; s148 71.7% of copy
 * at M = 32 against 67.0% for cuBLASLt and 57.0% in 64-row tiles) */
static inline int kiln_skgemm_tma_tiles(int n_sms, int N) { return 2 * ((N + 63) / 64) <= n_sms ? 1 : 2; }
#define KILN_SKGEMM_TMA_GLU_STAGES_DEFAULT 4
#define KILN_SKGEMM_TILES_DEFAULT(maxm) 2
#define KILN_SKGEMM_STAGES_DEFAULT(maxm) ((maxm) >= 32 ? 3 : 4)
/* the shared memory past the ring that gemm_sk_wg asks (the ring on a 1024-byte swizzle atom) and gemm_sk_tma
 * (that, and its mbarriers: kernel_src/gemm_sk.cu SK_BAR_BYTES) -- kiln_skgemm_plan's `slack` */
#define KILN_SKGEMM_WG_SLACK 1024
#define KILN_SKGEMM_TMA_SLACK (1024 + 256)
/* gemm_sk's launch shape for an N x K weight at MAXM bucket maxm: stages (the
 * asked ones, lowered until a block's ring and `slack` more bytes fit
 * smem_optin), split (the cluster's K slices, 1..8: split_knob when > 0, else
 * as many as make about one wave of at most 2 blocks an SM; 1 before sm_90; at
 * least 2 chunks a slice, no empty slice), chunks a slice and the block's
 * dynamic shared memory, slack included (KILN_SKGEMM_WG_SLACK / _TMA_SLACK;
 * 0 for gemm_sk). Shared by engine/cuda/ops_gpu.c and kiln_jit_model_specs. */
typedef struct kiln_skgemm_shape { int stages, split, cps, smem, tiles; } kiln_skgemm_shape;
static inline kiln_skgemm_shape kiln_skgemm_plan(int n_sms, int smem_per_sm, int smem_optin, int cc_major, int N,
                                                 int K, int maxm, int warps, int rt, int stages, int split_knob,
                                                 int slack) {
    kiln_skgemm_shape p;
    const int bn = warps * rt * 16, nchunks = (K + 63) / 64;
    while (stages > 2 && stages * (bn + maxm) * 128 + slack > smem_optin) stages--;
    const int pipe = stages * (bn + maxm) * 128, red = warps * rt * (maxm / 8) * 4 * 32 * 4;
    p.stages = stages;
    p.smem = (pipe > red ? pipe : red) + slack;
    p.tiles = (N + bn - 1) / bn;
    int split = split_knob;
    if (split <= 0) {
        int per_sm = smem_per_sm / (p.smem + 1024); /* 1 KiB a block reserved */
        per_sm = per_sm < 1 ? 1 : per_sm > 2 ? 2 : per_sm;
        split = n_sms * per_sm / p.tiles;
    }
    if (cc_major < 9) split = 1;
    if (split > 8) split = 8;
    if (split > nchunks / 2) split = nchunks / 2;
    if (split < 1) split = 1;
    p.cps = (nchunks + split - 1) / split;
    p.split = (nchunks + p.cps - 1) / p.cps;
    return p;
}
/* ... with the automatic split (split_knob <= 0) at most max_split: gemm_sk_tma's plain GEMMs take
 * KILN_SKGEMM_TMA_MAX_SPLIT (engine/cuda/ops_gpu.c sk_gemm, and the model's warm set in runtime/cuda/registry.c) */
static inline kiln_skgemm_shape kiln_skgemm_plan_capped(int n_sms, int smem_per_sm, int smem_optin, int cc_major, int N,
                                                        int K, int maxm, int warps, int rt, int stages, int split_knob,
                                                        int slack, int max_split) {
    const kiln_skgemm_shape p =
        kiln_skgemm_plan(n_sms, smem_per_sm, smem_optin, cc_major, N, K, maxm, warps, rt, stages, split_knob, slack);
    return split_knob <= 0 && p.split > max_split ? kiln_skgemm_plan(n_sms, smem_per_sm, smem_optin, cc_major, N, K,
                                                                     maxm, warps, rt, stages, max_split, slack)
                                                  : p;
}

/* gemm_skx (kernel_src/gemm_skx.cu; engine/cuda/ops_gpu.c skx_gemm) for 2 <= M <= this many rows, before
 * gemm_sk ($KILN_SKX_MAX_M, at most 32; 0 never): x stationary in registers, W through warp-private cp.async
 * rings, one sum of the warps at the end, clusters of 1 or 2 blocks (the design of bench/skx_micro.cu). H200,
 * 2026-12-01 (bench/RESULTS.md): bench_kernels gemm_rows at 8 / 16 rows o 76.2 / 74.6% of copy against 64.1 /
 * 63.2% for the default path, qkv 84.3 / 77.5 against 67.6 / 68.2, down at 8 rows 97.5 against 83.9; at 32 rows
 * slower (o 57.4 against 62.5: the MMAs with x in registers and the cluster's sum); kiln bench with it up to 16
 * rows: -b 4 916.9 against 890.3 tok/s, -b 8 1768.3 against 1724.8, -b 16 3392 / 3387 against 3368 / 3364 */
#define KILN_SKX_MAX_M_DEFAULT 16
/* ... and its one-row form (MAXM 8) in place of the batch-1 GEMV ($KILN_SKX_M1): plain GEMMs of one row, and the o /
 * down projections adding into the residual with the next norm folded (NOUT) where kiln_skx_plan serves them. H200,
 * 2026-12-01 (bench/RESULTS.md): bench_kernels at M = 1 qkv 86.0% of copy against the GEMV's 80.0, o 76.9 against
 * 73.5, down 96.6 against 88.6; kiln bench -b 1 259.5 / 259.5 / 259.4 tok/s against 256.6 / 256.6 / 256.6 */
#define KILN_SKX_M1_DEFAULT 1
/* gemm_skx's launch shape for an N x K weight at M rows (kiln_skx_plan): ok, the MAXM bucket (8|16|32), warps,
 * columns a warp (kw), a ring slot's columns (sk: 64|128), slots a warp (s), 16-row tiles a block (rt), K split
 * over a cluster (cl: 1|2|4; 1 before sm_90), the block's dynamic shared memory and the row tiles (gridDim.x). */
typedef struct kiln_skx_shape { int ok, maxm, warps, kw, sk, s, rt, cl, smem, tiles; } kiln_skx_shape;
/* Clusters of at most 2 (a TPC's pair): with 4 only ~30 of the 32 clusters of a 128-block grid are resident at
 * once (the H200, 2026-12-01: down at 16 rows 60.7% of copy against 84.3% for the default path). Served (ok)
 * where K splits into cl * 8 warps of kw columns (a multiple of 64, x's fragments at most 128
 * registers a thread: kw <= 1024 / (maxm / 8)) with the smallest such cl, N into tiles of 16 rt rows (rt <= 8,
 * the smallest that makes tiles * cl <= n_sms: one wave of one block an SM), and at least 3 slots a warp fit
 * smem_optin beside each warp's area (x's staging, then its parked accumulators). */
static inline kiln_skx_shape kiln_skx_plan(int n_sms, int smem_optin, int cc_major, int M, int64_t N, int64_t K) {
    kiln_skx_shape p = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    if (M < 1 || M > 32 || N < 16 || K < 64 || n_sms < 1 || N > (1 << 30) || K > (1 << 30)) return p;
    p.maxm = M <= 8 ? 8 : M <= 16 ? 16 : 32;
    p.warps = 8;
    const int nt = p.maxm / 8, kw_max = 1024 / nt;
    for (int cl = 1; cl <= (cc_major >= 9 ? 2 : 1) && !p.cl; cl *= 2) {
        if (K % (cl * p.warps)) continue;
        const int kw = (int)(K / (cl * p.warps));
        if (kw <= kw_max && kw % 64 == 0) p.cl = cl, p.kw = kw;
    }
    if (!p.cl) return p;
    p.sk = p.kw % 128 == 0 ? 128 : 64;
    int rt = (int)((N * p.cl + 16LL * n_sms - 1) / (16LL * n_sms));
    if (rt < 1) rt = 1;
    while (rt <= 8 && N % (16 * rt)) rt++;
    if (rt > 8) return p;
    p.rt = rt;
    p.tiles = (int)(N / (16 * rt));
    if (p.tiles * p.cl > n_sms) return p;
    const int slot = 16 * p.sk * 2, stage_x = p.sk / 64 * nt * 1024, park = rt * nt * 4 * 32 * 4;
    const int area = stage_x > park ? stage_x : park;
    int s = (smem_optin / p.warps - area) / slot;
    if (s > 16) s = 16;
    if (s < 3) return p;
    p.s = s;
    p.smem = p.warps * (s * slot + area);
    p.ok = 1;
    return p;
}

/* The registry (static). */
const kiln_jit_kernel_def *kiln_jit_registry(int *n);
const kiln_jit_kernel_def *kiln_jit_find(const char *name);
/* The target a unit of `file` is compiled for when `arch` is asked for:
 * "sm_90a" for the registry files that need sm_90's arch-specific
 * instructions (wgmma) on sm_90, else arch itself. */
const char *kiln_jit_unit_arch(const char *file, const char *arch);
/* Check defines ("A=1 B=bf16") against def's params: every param set,
 * every value allowed, nothing unknown. */
kiln_status kiln_jit_check_defines(const kiln_jit_kernel_def *def, const char *defines);
/* Argument kinds of a signature string. */
/* tmap: a 128-byte CUtensorMap passed by value (a __grid_constant__ parameter) */
typedef enum kiln_jit_arg {
    KILN_JIT_ARG_PTR,
    KILN_JIT_ARG_I32,
    KILN_JIT_ARG_I64,
    KILN_JIT_ARG_F32,
    KILN_JIT_ARG_TMAP
} kiln_jit_arg;
kiln_status kiln_jit_signature_parse(const char *sig, kiln_jit_arg *kinds, int max, int *n);

typedef struct kiln_jit_options {
    const char *arch;       /* "sm_90" (required)                               */
    const char *cache_dir;  /* NULL: $KILN_CACHE_DIR or ~/.cache/kiln/jit        */
    const char *kernel_dir; /* NULL: $KILN_KERNEL_DIR, else embedded sources     */
    bool no_cache;          /* neither read nor write the disk cache           */
    int n_threads;          /* parallel compiles (0: number of CPUs)           */
} kiln_jit_options;

/* Resource usage of one entry point, from the ptxas report. */
typedef struct kiln_jit_func_info {
    char entry[96];
    int regs, smem, stack, spill_stores, spill_loads;
} kiln_jit_func_info;

/* One compilation unit: a source file (or a policy's source string) with a
 * set of defines. Fill the request fields; kiln_jit_compile fills the
 * result fields. */
typedef struct kiln_jit_unit {
    /* request (borrowed) */
    const char *file;    /* "kernel_src/x.cu", or a display name when source != NULL */
    const char *source;  /* NULL: read file from kernel_dir or the embedded copy */
    const char *defines; /* "HEAD_DIM=128 ACT=bf16" (space separated NAME=VALUE) */
    /* result (owned; kiln_jit_unit_clear frees) */
    void *cubin;
    size_t cubin_len;
    uint64_t key;        /* cache key                                       */
    bool cache_hit;
    double compile_ms;   /* wall time of this unit (compile or cache read)  */
    kiln_jit_func_info *funcs;
    int n_funcs;
    kiln_status status;
    char *error;         /* message when status != KILN_OK                   */
} kiln_jit_unit;

/* Compile units in parallel (cache first). Returns KILN_OK only when every
 * unit compiled; otherwise the first failure's status, with its message
 * (file, line, NVRTC log) as the last error. Every unit's status is set. */
kiln_status kiln_jit_compile(kiln_jit_unit *units, int n, const kiln_jit_options *opt);
void kiln_jit_unit_clear(kiln_jit_unit *u);
/* Compile a source string (a policy-provided kernel) the same way. */
kiln_status kiln_jit_compile_source(const char *name, const char *source, const char *defines,
                                    const kiln_jit_options *opt, kiln_jit_unit *out);
kiln_status kiln_jit_nvrtc_version(int *major, int *minor);
/* The cache directory opt resolves to (owned, free()). */
char *kiln_jit_cache_dir(const kiln_jit_options *opt);

typedef struct kiln_jit_spec {
    const char *name;    /* registry name (or one added with add_source) */
    const char *defines;
} kiln_jit_spec;

/* The specializations a model needs (for `kiln kernels --model` and
 * kiln_gpu_prepare). */
typedef struct kiln_jit_model {
    kiln_dtype act;      /* BF16 or F16 activations (and attention KV)        */
    kiln_dtype kv;       /* KV cache dtype: act, FP8_E5M2 or FP8_E4M3          */
    int head_dim, n_heads, n_kv_heads, block_size;
    bool gelu;           /* gelu_tanh MLP instead of SiLU                     */
    bool interleaved;    /* GPT-J style rotary pairs                          */
    bool kv_calib;       /* FP8: also the activation-dtype cache kernels that
                            start-up calibration runs (kv write, prefill)     */
    bool pdl_early;      /* also every spec's PDL_EARLY=1 copy (what small decode
                            steps run where programmatic dependent launch does:
                            kiln_rt_kernels_set_pdl_early)                    */
    int hidden, intermediate; /* the projections' sizes (0: unknown): the gemm_sk_tma
                            specs of the o, qkv, gate/up and down projections */
} kiln_jit_model;
/* a model set is ~70 today (Llama-3-8B with a bf16 or FP8 cache; twice that with the pdl_early copies: test_jit
 * test_model_specs_fit counts them; `kiln kernels --model` lists them) */
#define KILN_JIT_MAX_SPECS 256
typedef struct kiln_jit_spec_list {
    kiln_jit_spec specs[KILN_JIT_MAX_SPECS];
    char defines[KILN_JIT_MAX_SPECS][128];
    int n;
    int dropped; /* specs asked for past the capacity, not listed: a warm set, so they compile on first use */
    int cap;     /* the capacity this listing used (kiln_jit_model_specs_cap sets it) */
} kiln_jit_spec_list;
kiln_status kiln_jit_model_specs(const kiln_jit_model *m, kiln_jit_spec_list *out);
/* ... listing at most cap specs (1..KILN_JIT_MAX_SPECS; others: KILN_JIT_MAX_SPECS), the rest counted in dropped */
kiln_status kiln_jit_model_specs_cap(const kiln_jit_model *m, kiln_jit_spec_list *out, int cap);
/* Query heads handled together per KV head by the attention kernels: the
 * largest of 16, 8, 4, 2, 1 dividing n_heads / n_kv_heads. */
int kiln_jit_attn_group(int n_heads, int n_kv_heads);

/* Per-device kernel set: compiled (through the JIT and its cache) and loaded
 * on first use or ahead of time with prepare. Internally locked. */
typedef struct kiln_rt_kernels kiln_rt_kernels;

/* opt may be NULL (arch from the device, env for dirs). */
kiln_status kiln_rt_kernels_create(kiln_rt_device *d, const kiln_jit_options *opt, kiln_rt_kernels **out);
void kiln_rt_kernels_destroy(kiln_rt_kernels *k);
/* Compile and load a set of specializations in parallel. */
kiln_status kiln_rt_kernels_prepare(kiln_rt_kernels *k, const kiln_jit_spec *specs, int n);
/* The entry point of `name` specialized by `defines` (borrowed). */
kiln_status kiln_rt_kernels_get(kiln_rt_kernels *k, const char *name, const char *defines, kiln_rt_func **out);
/* True when get/prepare has loaded `name` (tests: every registry kernel
 * must be exercised). */
bool kiln_rt_kernels_was_used(kiln_rt_kernels *k, const char *name);
/* Early trigger (sm_90+, with programmatic dependent launch): while on, get
 * hands out kiln's kernels specialized with PDL_EARLY=1, whose pdl_wait()
 * signals griddepcontrol.launch_dependents before waiting
 * (kernel_src/kiln_common.cuh), so the next kernel (a GEMV's first weight
 * loads) starts under this one's wait and work. Off by default; the GPU
 * executor turns it on for small decode batches (KILN_PDL_EARLY_MAX_SEQS).
 * Returns the previous setting. */
bool kiln_rt_kernels_set_pdl_early(kiln_rt_kernels *k, bool on);
/* Whether k launches kiln's kernels with programmatic dependent launch
 * (sm_90+, $KILN_PDL not 0): where PDL_EARLY means anything. */
bool kiln_rt_kernels_pdl(const kiln_rt_kernels *k);
/* The GPU executor's early-trigger batches: decode steps of at most this
 * many sequences ($KILN_PDL_EARLY_MAX_SEQS; 0 never), tensor parallel too.
 * H200, 2026-11-30, kiln bench -s 128 (bench/RESULTS.md, twelfth session):
 * remote.sh s41, -b 1 248.8 / 248.8 tok/s against 247.0 / 247.0 off, -b 8
 * 1,736 / 1,734 against 1,719 / 1,720, -b 16 with it 3,327 against 3,353
 * (so 8); s43, TP 2 -b 1 407.5 / 407.0 against 390.3 / 390.0; s40 (every
 * kernel early through KILN_KERNEL_DIR) -b 32 and -b 64 no gain. */
#define KILN_PDL_EARLY_MAX_SEQS_DEFAULT 8
/* the GPU executor copies a sampled step's tokens back to the host on a stream of
 * their own, so the next step need not wait for the copy ($KILN_COPY_STREAM=0|1;
 * engine/cuda/exec_gpu.c) ... */
#define KILN_COPY_STREAM_DEFAULT 1
/* ... and reads a step's metadata block (up to this many bytes) from pinned
 * memory in a kernel that also gathers the fed tokens, instead of a
 * host-to-device copy and a gather kernel ($KILN_STEP_FEED=0|1). Together
 * (H200, 2026-12-01, bench/RESULTS.md, eighteenth session): the GPU's idle time
 * between two decode graphs 29.6-37 -> 10.9 us at -b 1 and 40 -> 18.7 us at
 * -b 32 (CUPTI traces); kiln bench -b 1 250.8 / 250.7 -> 251.7 / 251.8 tok/s */
#define KILN_STEP_FEED_DEFAULT 1
#define KILN_STEP_FEED_MAX_BYTES (256 << 10)
/* Register a policy-provided kernel: CUDA source text with its entry point
 * and signature. When name is a registry name, it replaces that variant
 * (same defines and signature apply). */
kiln_status kiln_rt_kernels_add_source(kiln_rt_kernels *k, const char *name, const char *source,
                                       const char *entry, const char *signature);

/* ---------------------------------------------------------------- cuBLASLt */

typedef struct kiln_rt_blas kiln_rt_blas;

/* workspace: device memory the GEMMs may use (from the workspace pool). */
kiln_status kiln_rt_blas_create(kiln_rt_device *d, kiln_devptr workspace, size_t workspace_bytes,
                                kiln_rt_blas **out);
void kiln_rt_blas_destroy(kiln_rt_blas *b);
/* The decode batch-size ladder (vLLM-like): 1, 2, 4, 8, then multiples of 8
 * to 32, of 16 to 128, of 32 beyond; the next size after b. The engine
 * captures a decode graph at each size (engine/cuda/exec_gpu.c). */
static inline int kiln_rt_batch_ladder_next(int b) {
    return b < 4 ? b * 2 : b < 32 ? b + 8 - (b % 8) : b < 128 ? b + 16 : b + 32;
}
/* The M of the cuBLASLt algorithm bucket M falls in: with fine buckets
 * ($KILN_GEMM_BUCKETS=1, the default) and M <= 256 the smallest ladder size
 * >= max(M, 8), so every decode graph's GEMMs are timed at its own M; else
 * M rounded up to a power of two, at least 8. */
static inline int64_t kiln_rt_gemm_bucket_m(int64_t M, bool fine) {
    int64_t b = 8;
    if (fine && M <= 256) {
        while (b < M) b = kiln_rt_batch_ladder_next((int)b);
        return b;
    }
    while (b < M) b *= 2;
    return b;
}
#define KILN_GEMM_BUCKETS_DEFAULT 1 /* 2026-12-01: -b 128 +3%, -b 256 +1-2%, -b 64 / 32 equal */
#define KILN_GEMM_REDUCE_PENALTY_US_DEFAULT 3.0 /* see runtime/cuda/blas.c */
/* the autotune's timing passes over a shape's candidates ($KILN_GEMM_AUTOTUNE_PASSES, 1..4; each candidate's time its
 * best pass). 1 (one pass, as always) until a second is measured: H200, 2026-12-02 (s151), one pass picked the down
 * projection's split-6 candidate at 32 rows in one start of four (38.7 us against 36.5-36.8 for the others' pick) */
#define KILN_GEMM_AUTOTUNE_PASSES_DEFAULT 1
/* out[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]), all row-major; out rows have
 * stride ldo (>= N; 0 means N).
 * x and W: in_dt (BF16 or F16); out: out_dt (BF16, F16 or F32); bias:
 * out_dt, or 0. fp32 accumulation. The algorithm is chosen once per shape
 * bucket (N, K, dtypes, bias, M rounded up to a power of two) and cached. */
kiln_status kiln_rt_gemm(kiln_rt_blas *b, kiln_rt_stream *s, kiln_devptr out, int64_t ldo, kiln_dtype out_dt,
                         kiln_devptr x, kiln_devptr w, kiln_dtype in_dt, kiln_devptr bias, int64_t M, int64_t N,
                         int64_t K);
/* Number of distinct algorithm choices made so far (for tests). */
int kiln_rt_blas_n_algos(const kiln_rt_blas *b);

/* -------------------------------------------------------------------- NCCL */

typedef struct kiln_rt_comm kiln_rt_comm;
#define KILN_RT_NCCL_ID_BYTES 128

kiln_status kiln_rt_nccl_get_id(uint8_t id[KILN_RT_NCCL_ID_BYTES]);
/* Collective: every rank calls it with the same id, on its own device. */
kiln_status kiln_rt_comm_create(kiln_rt_device *d, const uint8_t id[KILN_RT_NCCL_ID_BYTES], int n_ranks,
                                int rank, kiln_rt_comm **out);
void kiln_rt_comm_destroy(kiln_rt_comm *c);
/* In-place sum all-reduce of n elements of dt (F32, F16, BF16). */
kiln_status kiln_rt_all_reduce_sum(kiln_rt_comm *c, kiln_devptr buf, size_t n, kiln_dtype dt, kiln_rt_stream *s);
/* recv[n_ranks * n] = concat over ranks of send[n]. */
kiln_status kiln_rt_all_gather(kiln_rt_comm *c, kiln_devptr send, kiln_devptr recv, size_t n, kiln_dtype dt,
                               kiln_rt_stream *s);

/* ------------------------------------ one-shot all-reduce over peer memory */

/* The tensor-parallel ranks of one process, one GPU each, sum small
 * messages with one kernel (kernel_src/allreduce.cu) that reads the peers'
 * buffers directly over NVLink / PCIe peer access; NCCL serves the rest.
 * Setup, on every rank together:
 *   1. kiln_rt_p2p_create: this rank's buffer (flags zeroed, data halves);
 *   2. exchange kiln_rt_p2p_handle bytes between the ranks (the engine's
 *      host all-gather);
 *   3. kiln_rt_p2p_set_peers with every rank's handle: enables peer access
 *      to the peers' GPUs; KILN_ERR_UNSUPPORTED naming why when it cannot
 *      (no peer access, two ranks on one GPU, another process).
 * The ranks must agree on the outcome (every one uses it, or none): an
 * all-reduce waits inside the kernel for every peer's same call. A peer
 * that never comes (a failed rank) makes the kernel trap after about 10 s
 * with a message on stdout rather than hang.
 * Ownership: create returns owned (destroy; only after every rank's last
 * all-reduce has completed). Peer access stays enabled on the contexts.
 * Thread-safety: one thread per rank object; create/set_peers on the rank's
 * thread. */
typedef struct kiln_rt_p2p kiln_rt_p2p;
#define KILN_RT_P2P_HANDLE_BYTES 64
#define KILN_RT_P2P_MAX_RANKS 8
/* Largest message, bytes (256 KB is Llama-3-8B's hidden state at batch 32). */
#define KILN_RT_P2P_MAX_BYTES_DEFAULT ((size_t)1 << 20)

/* The exchange a create with push < 0 uses when $KILN_AR_PUSH is unset:
 * 1 push (each rank stores its data into the peers' buffers and polls its
 * own), 0 pull (signal, wait, read the peers' copies). */
#define KILN_RT_P2P_PUSH_DEFAULT 1

/* kernels: d's kernel set (the all_reduce specializations are compiled
 * here); max_bytes: the largest message (0: the default); push: 0 pull,
 * 1 push, < 0 $KILN_AR_PUSH or KILN_RT_P2P_PUSH_DEFAULT (every rank must
 * use the same: set_peers fails otherwise). */
kiln_status kiln_rt_p2p_create(kiln_rt_device *d, kiln_rt_kernels *kernels, int n_ranks, int rank, size_t max_bytes,
                               int push, kiln_rt_p2p **out);
void kiln_rt_p2p_destroy(kiln_rt_p2p *p);
/* This rank's handle for the others. */
void kiln_rt_p2p_handle(const kiln_rt_p2p *p, uint8_t out[KILN_RT_P2P_HANDLE_BYTES]);
/* handles: [n_ranks][KILN_RT_P2P_HANDLE_BYTES], rank order. */
kiln_status kiln_rt_p2p_set_peers(kiln_rt_p2p *p, const uint8_t *handles);
/* The largest message the kernel serves, bytes: max_bytes for 2 ranks, less
 * for more (each rank reads every peer's copy). */
size_t kiln_rt_p2p_max_bytes(const kiln_rt_p2p *p);
/* True when the one-shot kernel can sum n elements of dt at buf: peers set,
 * n * size <= kiln_rt_p2p_max_bytes, buf 16-byte aligned, dt F32, F16 or
 * BF16. Depends only on these, so ranks with equal arguments decide alike. */
bool kiln_rt_p2p_fits(const kiln_rt_p2p *p, kiln_devptr buf, size_t n, kiln_dtype dt);
/* In-place sum of n elements of dt across the ranks, on stream s (may be
 * captured into a CUDA graph and replayed); every rank calls it with the
 * same n and dt, in the same order as its other collectives. */
kiln_status kiln_rt_p2p_all_reduce_sum(kiln_rt_p2p *p, kiln_devptr buf, size_t n, kiln_dtype dt, kiln_rt_stream *s);
/* The all-reduce of io [rows, dim] fused with the residual add + RMSNorm
 * that follows it (kernel_src/allreduce.cu kiln_all_reduce_add_rmsnorm):
 * io = sum over ranks; residual += io; out = rmsnorm(residual) * w (w in
 * dt). fits_norm: rows within the grid every rank uses, rows of at most
 * 2,048 vectors, 16-byte aligned. Same collective as all_reduce_sum (the
 * ranks must call the same sequence). */
bool kiln_rt_p2p_fits_norm(const kiln_rt_p2p *p, kiln_devptr io, kiln_devptr residual, kiln_devptr out, kiln_devptr w,
                           int rows, int dim, kiln_dtype dt);
/* The push exchange's launch arguments for a kernel outside allreduce.cu
 * that takes part in it (engine/cuda/ops_gpu.c kiln_gpu_gemm_ar_norm, the
 * same collective sequence): every rank's buffer (0 past n_ranks), this
 * rank, the rank count, the bytes of a slot, the timeout in ns, the largest
 * message in bytes. False when the push exchange is not set up. */
bool kiln_rt_p2p_push_args(const kiln_rt_p2p *p, kiln_devptr bufs[KILN_RT_P2P_MAX_RANKS], int *rank, int *n_ranks,
                           int64_t *slot_bytes, int64_t *timeout_ns, size_t *max_msg);
/* The all-gather over the push exchange (kernel_src/allreduce.cu
 * kiln_all_gather_push): out [rows, n_ranks * width] = every rank's send
 * [rows, width] side by side in rank order (a vocabulary-parallel LM head's
 * logits). fits_gather: the push exchange, rows * width * size within
 * kiln_rt_p2p_max_bytes, width * size a multiple of 16, send / out 16-byte
 * aligned, dt F32 / F16 / BF16. A -0.0 arrives as +0.0 (16-bit types) and
 * the fp32 word 0x80008000 as -0.0, on every rank alike. Same collective
 * sequence as the all-reduces. */
bool kiln_rt_p2p_fits_gather(const kiln_rt_p2p *p, kiln_devptr send, kiln_devptr out, size_t rows, size_t width,
                             kiln_dtype dt);
kiln_status kiln_rt_p2p_all_gather(kiln_rt_p2p *p, kiln_devptr send, kiln_devptr out, size_t rows, size_t width,
                                   kiln_dtype dt, kiln_rt_stream *s);
kiln_status kiln_rt_p2p_all_reduce_add_rmsnorm(kiln_rt_p2p *p, kiln_devptr io, kiln_devptr residual, kiln_devptr out,
                                               kiln_devptr w, int rows, int dim, float eps, kiln_dtype dt,
                                               kiln_rt_stream *s);

#endif /* KILN_RT_H */
