// rmsnorm.cu -- RMSNorm and fused residual-add + RMSNorm, one block per row.
// Semantics: engine/ops_cpu.h kiln_cpu_rmsnorm / kiln_cpu_add_rmsnorm, with
// activations in ACT (bf16 | fp16 | fp32), weights in W, fp32 math.
//   out [rows, dim] = x * rsqrt(mean(x^2) + eps) * w          (kiln_rmsnorm)
//   residual [rows, dim] += x; out = rmsnorm(residual) * w     (kiln_add_rmsnorm;
//   the norm is taken over the residual as stored, rounded to ACT)
// dim must be a multiple of 16 / sizeof(ACT) and at most MAXV * 16 / sizeof(ACT)
// * blockDim.x. out may alias x.
#include "kiln_common.cuh"

typedef ACT act_t;
typedef W w_t;
#define MAXV 8

template <bool ADD>
__device__ __forceinline__ void rmsnorm_row(act_t *__restrict__ out, act_t *__restrict__ residual,
                                            const act_t *__restrict__ x, const w_t *__restrict__ w, int row,
                                            int dim, float eps) {
    __shared__ float scratch[32];
    typedef vec16<act_t> V;
    const int nv = dim / V::N;
    const size_t base = (size_t)row * dim;
    V v[MAXV];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXV; k++) {
        int i = threadIdx.x + k * blockDim.x;
        if (i < nv) {
            v[k].v = ld16(x + base + (size_t)i * V::N);
            if (ADD) {
                V r;
                r.v = ld16(residual + base + (size_t)i * V::N);
#pragma unroll
                for (int j = 0; j < V::N; j++) r.set(j, r.get(j) + v[k].get(j));
                st16(residual + base + (size_t)i * V::N, r.v);
                v[k] = r;
            }
#pragma unroll
            for (int j = 0; j < V::N; j++) {
                float f = v[k].get(j);
                ss += f * f;
            }
        }
    }
    ss = block_sum(ss, scratch);
    float r = rsqrtf(ss / (float)dim + eps);
#pragma unroll
    for (int k = 0; k < MAXV; k++) {
        int i = threadIdx.x + k * blockDim.x;
        if (i < nv) {
            V o;
#pragma unroll
            for (int j = 0; j < V::N; j++) o.set(j, v[k].get(j) * r * to_f32(w[i * V::N + j]));
            st16(out + base + (size_t)i * V::N, o.v);
        }
    }
}

extern "C" __global__ void kiln_rmsnorm(act_t *out, const act_t *x, const w_t *w, int rows, int dim, float eps) {
    rmsnorm_row<false>(out, nullptr, x, w, blockIdx.x, dim, eps);
}

extern "C" __global__ void kiln_add_rmsnorm(act_t *out, act_t *residual, const act_t *x, const w_t *w, int rows,
                                            int dim, float eps) {
    rmsnorm_row<true>(out, residual, x, w, blockIdx.x, dim, eps);
}
