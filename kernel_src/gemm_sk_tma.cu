// gemm_sk_tma.cu -- kernel_src/gemm_sk.cu's warpgroup-MMA kernel (SK_WG=1)
// fed by Hopper's tensor memory accelerator (SK_TMA=1: kiln_gemm_sk, the
// plain and SiLU-and-mul epilogues, not ROPE): a producer warp's lane 0 copies
// W's 64-row boxes and x's MAXM-row box of each stage with
// cp.async.bulk.tensor through mbarriers, the warpgroup multiplies; no block
// barrier in the K loop. Arguments: gemm_sk's, then the tensor maps of W
// ([N, K], box 64 x 64) and x ([M, K], box 64 x MAXM), 128-byte swizzle
// (engine/cuda/ops_gpu.c sk_gemm, $KILN_SKGEMM_WG=2). (WARPS + 1) * 32
// threads a block, dynamic shared memory SMEM_BYTES + 1024 + 128. Compiled
// for sm_90a; on any other target the kernel traps (never launched there).
#define SK_WG 1
#define SK_TMA 1
#include "gemm_sk.cu"
