// rmsnorm.cu -- RMSNorm and fused residual-add + RMSNorm, one warp or one
// block per row. Semantics: engine/ops_cpu.h kiln_cpu_rmsnorm /
// kiln_cpu_add_rmsnorm, with activations in ACT (bf16 | fp16 | fp32), the
// residual stream in RES (= ACT, or fp32 under bf16 / fp16 activations),
// weights in W, fp32 math.
//   out [rows, dim] (ACT) = x * rsqrt(mean(x^2) + eps) * w, x in RES  (kiln_rmsnorm)
//   residual [rows, dim] (RES) += x (ACT); out (ACT) = rmsnorm(residual) * w
//                                                            (kiln_add_rmsnorm;
//   the norm is taken over the residual as stored, rounded to RES)
// RES defaults to ACT. A row is walked in units of U = 16 / sizeof(ACT)
// elements: one 16-byte vector of ACT and NR = sizeof(RES) / sizeof(ACT)
// 16-byte vectors of RES. dim must be a multiple of U and at most
// MAXV * U * blockDim.x. out may alias x when RES = ACT. Grid: see
// rmsnorm_any (host: kiln_gpu_rmsnorm, which mirrors its thresholds).
#include "kiln_common.cuh"

#ifndef RES
#define RES ACT
#endif
typedef ACT act_t;
typedef RES res_t;
typedef W w_t;
static_assert(sizeof(res_t) % sizeof(act_t) == 0, "RES must be ACT or a wider type (fp32)");

// units per thread in the one-block-per-row path
#define MAXV 8

// Rows of at most 32 * MAXW units (MAXW / NR with a wider RES, so the
// registers held per lane stay the same): one warp per row (blockDim.x / 32
// rows per block), every load of the row in flight before the warp
// reduction. Longer rows: one block per row.
#define MAXW 16

// U elements of RES in NR 16-byte vectors
struct resv {
    static constexpr int NR = sizeof(res_t) / sizeof(act_t);
    static constexpr int RN = 16 / sizeof(res_t); // elements per 16-byte vector
    uint4 v[NR];
    KILN_DEV float get(int j) const { return to_f32(reinterpret_cast<const res_t *>(&v[j / RN])[j % RN]); }
    KILN_DEV void set(int j, float f) { reinterpret_cast<res_t *>(&v[j / RN])[j % RN] = from_f32<res_t>(f); }
    KILN_DEV void load(const res_t *p) {
#pragma unroll
        for (int r = 0; r < NR; r++) v[r] = ld16(p + r * RN);
    }
    KILN_DEV void store(res_t *p) const {
#pragma unroll
        for (int r = 0; r < NR; r++) st16(p + r * RN, v[r]);
    }
};

// ADD: residual += xa, norm over the residual; else norm over xr.
template <bool ADD, int MAXK>
__device__ __forceinline__ void rmsnorm_row(act_t *__restrict__ out, res_t *__restrict__ residual,
                                            const res_t *__restrict__ xr, const act_t *__restrict__ xa,
                                            const w_t *__restrict__ w, int row, int dim, float eps, int lane,
                                            int n_lanes, bool block) {
    __shared__ float scratch[32];
    typedef vec16<act_t> V;
    const int nv = dim / V::N;
    const size_t base = (size_t)row * dim;
    // ADD: v[k].v[0] holds the unit of x (ACT) until the residual replaces it
    resv v[MAXK];
#pragma unroll
    for (int k = 0; k < MAXK; k++) {
        int i = lane + k * n_lanes;
        if (i < nv) {
            if (ADD) v[k].v[0] = ld16(xa + base + (size_t)i * V::N);
            else v[k].load(xr + base + (size_t)i * V::N);
        }
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXK; k++) {
        int i = lane + k * n_lanes;
        if (i < nv) {
            if (ADD) {
                V a;
                a.v = v[k].v[0];
                resv r;
                r.load(residual + base + (size_t)i * V::N);
#pragma unroll
                for (int j = 0; j < V::N; j++) r.set(j, r.get(j) + a.get(j));
                r.store(residual + base + (size_t)i * V::N);
                v[k] = r;
            }
#pragma unroll
            for (int j = 0; j < V::N; j++) {
                float f = v[k].get(j);
                ss += f * f;
            }
        }
    }
    ss = block ? block_sum(ss, scratch) : warp_sum(ss);
    float r = rsqrtf(ss / (float)dim + eps);
#pragma unroll
    for (int k = 0; k < MAXK; k++) {
        int i = lane + k * n_lanes;
        if (i < nv) {
            V wv, o;
            if (sizeof(w_t) == sizeof(act_t)) wv.v = ld16(w + (size_t)i * V::N);
#pragma unroll
            for (int j = 0; j < V::N; j++)
                o.set(j, v[k].get(j) * r * (sizeof(w_t) == sizeof(act_t) ? to_f32(((const w_t *)&wv.v)[j])
                                                                          : to_f32(w[i * V::N + j])));
            st16(out + base + (size_t)i * V::N, o.v);
        }
    }
}

template <bool ADD>
__device__ __forceinline__ void rmsnorm_any(act_t *out, res_t *residual, const res_t *xr, const act_t *xa,
                                            const w_t *w, int rows, int dim, float eps) {
    constexpr int MAXWR = MAXW / resv::NR;
    const int nv = dim / vec16<act_t>::N;
    if (nv <= 32 * MAXWR) {
        int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
        if (row >= rows) return; // whole warps exit; no block barrier in this path
        rmsnorm_row<ADD, MAXWR>(out, residual, xr, xa, w, row, dim, eps, threadIdx.x & 31, 32, false);
    } else {
        rmsnorm_row<ADD, MAXV>(out, residual, xr, xa, w, blockIdx.x, dim, eps, threadIdx.x, blockDim.x, true);
    }
}

extern "C" __global__ void kiln_rmsnorm(act_t *out, const res_t *x, const w_t *w, int rows, int dim, float eps) {
    rmsnorm_any<false>(out, nullptr, x, nullptr, w, rows, dim, eps);
}

extern "C" __global__ void kiln_add_rmsnorm(act_t *out, res_t *residual, const act_t *x, const w_t *w, int rows,
                                            int dim, float eps) {
    rmsnorm_any<true>(out, residual, nullptr, x, w, rows, dim, eps);
}
