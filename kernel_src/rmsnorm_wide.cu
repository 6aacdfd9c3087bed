// rmsnorm_wide.cu -- RMSNorm and fused residual-add + RMSNorm for many rows
// (prefill): the variant of rmsnorm.cu that engine/cuda/ops_gpu.c launches
// from $KILN_ELEM_WIDE_MIN rows up (default 256); fewer rows (decode) take
// rmsnorm.cu. Semantics as rmsnorm.cu (engine/ops_cpu.h kiln_cpu_rmsnorm /
// kiln_cpu_add_rmsnorm, activations in ACT (bf16 | fp16 | fp32), weights in
// W, fp32 math):
//   out [rows, dim] = x * rsqrt(mean(x^2) + eps) * w          (kiln_rmsnorm_wide)
//   residual [rows, dim] += x; out = rmsnorm(residual) * w     (kiln_add_rmsnorm_wide;
//   the norm is taken over the residual as stored, rounded to ACT)
// dim must be a multiple of 16 / sizeof(ACT). out may alias x. Grid: see
// the shapes below (host: kiln_gpu_rmsnorm). Measured on the H200 at 4096
// rows of 4096 bf16: 84.6-88% of copy bandwidth (rmsnorm.cu 77.9%); its
// latency at decode sizes was not measured (branch elem2).
#include "kiln_common.cuh"

typedef ACT act_t;
typedef W w_t;

// Three shapes (host: kiln_gpu_rmsnorm picks blockDim and the grid):
//   nv <= 32 * MAXW vectors: a warp per row, blockDim.x / 32 rows per block;
//   nv <= MAXB * blockDim.x: a block per row, MAXB vectors per thread (rows
//     of up to 4096 bf16 take 128 threads: small blocks with few registers,
//     many rows in flight per SM, and a block's resources free as soon as
//     its row is done; one row a block measured best on the H200: 88% of
//     copy at 4096 x 4096 against 80% with two);
//   longer rows: a block per row in two passes over global memory (sum of
//     squares, then the scaled output; the second pass re-reads what this
//     same thread read or wrote in the first).
// x and the residual of a row are loaded before anything is stored. The
// weights are read after the reduction by kiln_add_rmsnorm_wide (shared by every
// row: L1/L2 hits) and into registers before pdl_wait() by kiln_rmsnorm_wide's
// one-pass shapes (no predecessor writes them; off the critical path).
// Blocks have at most RMS_THREADS threads (the host's limit; the kernels'
// __launch_bounds__).
#define MAXW 4
#define MAXB 4
#define RMS_THREADS 512

#include "rmsnorm_row.cuh"

// kiln_rmsnorm_wide, one pass: one row of a warp (block false) or a block; waits
// on the predecessor itself, after loading its weights.
template <int MAXK>
__device__ __forceinline__ void norm_row(act_t *__restrict__ out, const act_t *__restrict__ x,
                                         const w_t *__restrict__ w, int row, int dim, float eps, int lane,
                                         int n_lanes, bool block) {
    __shared__ float scratch[32];
    typedef vec16<act_t> V;
    constexpr bool WV = sizeof(w_t) == sizeof(act_t); // weights as 16-byte vectors too
    const int nv = dim / V::N;
    const size_t base = (size_t)row * dim;
    uint4 wv[MAXK];
    weights_then_wait<MAXK>(wv, w, nv, lane, n_lanes);
    V v[MAXK];
#pragma unroll
    for (int k = 0; k < MAXK; k++) {
        int i = lane + k * n_lanes;
        if (i < nv) v[k].v = ld16(x + base + (size_t)i * V::N);
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXK; k++)
        if (lane + k * n_lanes < nv) {
#pragma unroll
            for (int j = 0; j < V::N; j++) {
                float f = v[k].get(j);
                ss += f * f;
            }
        }
    ss = block ? block_sum(ss, scratch) : warp_sum(ss);
    const float rr = rsqrtf(ss / (float)dim + eps);
#pragma unroll
    for (int k = 0; k < MAXK; k++) {
        int i = lane + k * n_lanes;
        if (i < nv) {
            V o;
            const w_t *we = (const w_t *)&wv[k];
#pragma unroll
            for (int j = 0; j < V::N; j++)
                o.set(j, v[k].get(j) * rr * (WV ? to_f32(we[j]) : to_f32(w[i * V::N + j])));
            st16(out + base + (size_t)i * V::N, o.v);
        }
    }
}


extern "C" __global__ void __launch_bounds__(RMS_THREADS)
    kiln_rmsnorm_wide(act_t *out, const act_t *x, const w_t *w, int rows, int dim, float eps) {
    const int nv = dim / vec16<act_t>::N;
    if (nv <= 32 * MAXW) {
        int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
        if (row >= rows) return; // whole warps exit; no block barrier in this path
        norm_row<MAXW>(out, x, w, row, dim, eps, threadIdx.x & 31, 32, false);
    } else if (nv <= MAXB * (int)blockDim.x) {
        norm_row<MAXB>(out, x, w, blockIdx.x, dim, eps, threadIdx.x, blockDim.x, true);
    } else {
        pdl_wait();
        pdl_launch();
        rmsnorm_row_2pass<false>(out, nullptr, x, w, blockIdx.x, dim, eps);
    }
}

extern "C" __global__ void __launch_bounds__(RMS_THREADS)
    kiln_add_rmsnorm_wide(act_t *out, act_t *residual, const act_t *x, const w_t *w, int rows, int dim, float eps) {
    rmsnorm_any<true>(out, residual, x, w, rows, dim, eps);
}
