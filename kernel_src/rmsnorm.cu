// rmsnorm.cu -- RMSNorm and fused residual-add + RMSNorm.
// Semantics: engine/ops_cpu.h kiln_cpu_rmsnorm / kiln_cpu_add_rmsnorm, with
// activations in ACT (bf16 | fp16 | fp32), weights in W, fp32 math.
//   out [rows, dim] = x * rsqrt(mean(x^2) + eps) * w          (kiln_rmsnorm)
//   residual [rows, dim] += x; out = rmsnorm(residual) * w     (kiln_add_rmsnorm;
//   the norm is taken over the residual as stored, rounded to ACT)
// dim must be a multiple of 16 / sizeof(ACT). out may alias x. Grid: see
// rmsnorm_any (host: kiln_gpu_rmsnorm).
#include "kiln_common.cuh"

typedef ACT act_t;
typedef W w_t;

// Three shapes (host: kiln_gpu_rmsnorm picks blockDim and the grid):
//   nv <= 32 * MAXW vectors: a warp per row, blockDim.x / 32 rows per block;
//   nv <= MAXB * blockDim.x: a block per row, MAXB vectors per thread (rows
//     of up to 4096 bf16 take 128 threads: small blocks with few registers,
//     many rows in flight per SM, and a block's resources free as soon as
//     its row is done);
//   longer rows: a block per row in two passes over global memory (sum of
//     squares, then the scaled output; the second pass re-reads what this
//     same thread read or wrote in the first).
// x and the residual of a row are loaded before anything is stored; the
// weights before the wait on the previous kernel (shared by every row:
// L1/L2 hits).
#define MAXW 4
#define MAXB 4

#include "rmsnorm_row.cuh"


// Blocks of up to 1024 threads (a row of up to 4096 vectors, MAXB a thread):
// the bound keeps the fused kernel at 64 registers (72 without it, which
// cannot launch 1024 threads).
extern "C" __global__ void __launch_bounds__(1024)
    kiln_rmsnorm(act_t *out, const act_t *x, const w_t *w, int rows, int dim, float eps) {
    // rmsnorm_any waits on the previous kernel (after loading the weights)
    rmsnorm_any<false>(out, nullptr, x, w, rows, dim, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
    kiln_add_rmsnorm(act_t *out, act_t *residual, const act_t *x, const w_t *w, int rows, int dim, float eps) {
    // rmsnorm_any waits on the previous kernel (after loading the weights)
    rmsnorm_any<true>(out, residual, x, w, rows, dim, eps);
}
