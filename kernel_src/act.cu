// act.cu -- elementwise activations on ACT (bf16 | fp16 | fp32), fp32 math.
// Semantics: engine/ops_cpu.h.
//   kiln_silu_mul: out [T, I] = silu(x[:, 0:I]) * x[:, I:2I]     (x [T, 2I])
//   kiln_gelu_mul: out [T, I] = gelu_tanh(x[:, 0:I]) * x[:, I:2I]
//   kiln_add:      out [n] = a + b
// I must be a multiple of 16 / sizeof(ACT); grid-stride loops.
#include "kiln_common.cuh"

typedef ACT act_t;
typedef vec16<act_t> V;

template <int KIND>
__device__ __forceinline__ float gate(float g) {
    if (KIND == 0) return g / (1.0f + expf(-g));
    const float k = 0.7978845608028654f;
    return 0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g)));
}

template <int KIND>
__device__ __forceinline__ void glu(act_t *__restrict__ out, const act_t *__restrict__ x, int T, int I) {
    const int vpr = I / V::N; // vectors per output row
    const i64 total = (i64)T * vpr;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        int t = (int)(idx / vpr), c = (int)(idx - (i64)t * vpr);
        const act_t *row = x + (size_t)t * 2 * I;
        V g, u, o;
        g.v = ld16_stream(row + (size_t)c * V::N);
        u.v = ld16_stream(row + I + (size_t)c * V::N);
#pragma unroll
        for (int j = 0; j < V::N; j++) o.set(j, gate<KIND>(g.get(j)) * u.get(j));
        st16(out + (size_t)t * I + (size_t)c * V::N, o.v);
    }
}

extern "C" __global__ void kiln_silu_mul(act_t *out, const act_t *x, int T, int I) {
    pdl_wait();
    pdl_launch();
    glu<0>(out, x, T, I);
}
extern "C" __global__ void kiln_gelu_mul(act_t *out, const act_t *x, int T, int I) {
    pdl_wait();
    pdl_launch();
    glu<1>(out, x, T, I);
}

extern "C" __global__ void kiln_add(act_t *out, const act_t *a, const act_t *b, i64 n) {
    pdl_wait();
    pdl_launch();
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = from_f32<act_t>(to_f32(a[i]) + to_f32(b[i]));
}
