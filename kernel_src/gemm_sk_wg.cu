// gemm_sk_wg.cu -- kernel_src/gemm_sk.cu multiplied by Hopper's warpgroup
// MMA (SK_WG=1: kiln_gemm_sk and, with ROPE=1, kiln_gemm_sk_rope, the same
// arguments, grid, epilogues and results; one warpgroup a block, WARPS 4;
// dynamic shared memory SMEM_BYTES + 1024). Its own file so that the JIT
// compiles it for sm_90a (runtime/cuda/registry.c kiln_jit_unit_arch); on
// other targets the kernels trap and the host (engine/cuda/ops_gpu.c
// sk_gemm, $KILN_SKGEMM_WG) never launches them there.
#define SK_WG 1
#include "gemm_sk.cu"
