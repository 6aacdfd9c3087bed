// rmsnorm_row.cuh -- the rows kernel_src/rmsnorm.cu and rmsnorm_wide.cu share
// (their semantics: engine/ops_cpu.h kiln_cpu_rmsnorm / kiln_cpu_add_rmsnorm):
//   rmsnorm_row: one pass, the row's MAXK vectors a lane (n_lanes lanes: a
//     warp, or a block when `block`), the weights (16-bit) loaded before the
//     wait on the previous kernel (griddepcontrol.wait, here), x (+ residual,
//     stored back when ADD) loaded before anything is stored, the sum of
//     squares reduced over the lanes;
//   rmsnorm_row_2pass: a block a row in two passes over global memory;
//   rmsnorm_any: a warp a row up to 32 * MAXW vectors, a block a row up to
//     MAXB vectors a thread, else two passes; waits on the previous kernel
//     itself (callers do not).
// The including file defines act_t, w_t, MAXW and MAXB before including this
// (after kiln_common.cuh).
#pragma once

// A lane's MAXK vectors of the row's 16-bit weights (w_t as wide as act_t),
// then the wait on the previous kernel: the weights are the model's, x (and
// in some programs the residual) the previous kernel's output.
template <int MAXK>
__device__ __forceinline__ void weights_then_wait(uint4 (&wv)[MAXK], const w_t *__restrict__ w, int nv, int lane,
                                                  int n_lanes) {
    if (sizeof(w_t) == sizeof(act_t)) {
#pragma unroll
        for (int k = 0; k < MAXK; k++)
            if (lane + k * n_lanes < nv) wv[k] = ld16(w + (size_t)(lane + k * n_lanes) * vec16<act_t>::N);
    }
    pdl_wait();
    pdl_launch();
}

template <bool ADD, int MAXK>
__device__ __forceinline__ void rmsnorm_row(act_t *__restrict__ out, act_t *__restrict__ residual,
                                            const act_t *__restrict__ x, const w_t *__restrict__ w, int row,
                                            int dim, float eps, int lane, int n_lanes, bool block) {
    __shared__ float scratch[32];
    typedef vec16<act_t> V;
    constexpr bool WV = sizeof(w_t) == sizeof(act_t); // weights as 16-byte vectors too
    const int nv = dim / V::N;
    const size_t base = (size_t)row * dim;
    uint4 wv[MAXK];
    weights_then_wait<MAXK>(wv, w, nv, lane, n_lanes);
    V v[MAXK], r[MAXK];
#pragma unroll
    for (int k = 0; k < MAXK; k++) {
        int i = lane + k * n_lanes;
        if (i < nv) {
            v[k].v = ld16(x + base + (size_t)i * V::N);
            if (ADD) r[k].v = ld16(residual + base + (size_t)i * V::N);
        }
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXK; k++) {
        int i = lane + k * n_lanes;
        if (i < nv) {
            if (ADD) {
#pragma unroll
                for (int j = 0; j < V::N; j++) r[k].set(j, r[k].get(j) + v[k].get(j));
                st16(residual + base + (size_t)i * V::N, r[k].v);
                v[k] = r[k];
            }
#pragma unroll
            for (int j = 0; j < V::N; j++) {
                float f = v[k].get(j);
                ss += f * f;
            }
        }
    }
    ss = block ? block_sum(ss, scratch) : warp_sum(ss);
    float rr = rsqrtf(ss / (float)dim + eps);
#pragma unroll
    for (int k = 0; k < MAXK; k++) {
        int i = lane + k * n_lanes;
        if (i < nv) {
            V o;
#pragma unroll
            for (int j = 0; j < V::N; j++)
                o.set(j, v[k].get(j) * rr * (WV ? to_f32(((const w_t *)&wv[k])[j]) : to_f32(w[i * V::N + j])));
            st16(out + base + (size_t)i * V::N, o.v);
        }
    }
}

template <bool ADD>
__device__ __forceinline__ void rmsnorm_row_2pass(act_t *__restrict__ out, act_t *__restrict__ residual,
                                                  const act_t *__restrict__ x, const w_t *__restrict__ w, int row,
                                                  int dim, float eps) {
    __shared__ float scratch[32];
    typedef vec16<act_t> V;
    const int nv = dim / V::N;
    const size_t base = (size_t)row * dim;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < nv; i += blockDim.x) {
        V v;
        v.v = ld16(x + base + (size_t)i * V::N);
        if (ADD) {
            V r;
            r.v = ld16(residual + base + (size_t)i * V::N);
#pragma unroll
            for (int j = 0; j < V::N; j++) r.set(j, r.get(j) + v.get(j));
            st16(residual + base + (size_t)i * V::N, r.v);
            v = r;
        }
#pragma unroll
        for (int j = 0; j < V::N; j++) {
            float f = v.get(j);
            ss += f * f;
        }
    }
    ss = block_sum(ss, scratch);
    float rr = rsqrtf(ss / (float)dim + eps);
    const act_t *src = ADD ? residual : x;
    for (int i = threadIdx.x; i < nv; i += blockDim.x) {
        V v, o;
        v.v = ld16(src + base + (size_t)i * V::N);
#pragma unroll
        for (int j = 0; j < V::N; j++) o.set(j, v.get(j) * rr * to_f32(w[i * V::N + j]));
        st16(out + base + (size_t)i * V::N, o.v);
    }
}

template <bool ADD>
__device__ __forceinline__ void rmsnorm_any(act_t *out, act_t *residual, const act_t *x, const w_t *w, int rows,
                                            int dim, float eps) {
    const int nv = dim / vec16<act_t>::N;
    if (nv <= 32 * MAXW) {
        int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
        if (row >= rows) return; // whole warps exit; no block barrier in this path
        rmsnorm_row<ADD, MAXW>(out, residual, x, w, row, dim, eps, threadIdx.x & 31, 32, false);
    } else if (nv <= MAXB * (int)blockDim.x) {
        rmsnorm_row<ADD, MAXB>(out, residual, x, w, blockIdx.x, dim, eps, threadIdx.x, blockDim.x, true);
    } else {
        pdl_wait();
        pdl_launch();
        rmsnorm_row_2pass<ADD>(out, residual, x, w, blockIdx.x, dim, eps);
    }
}
