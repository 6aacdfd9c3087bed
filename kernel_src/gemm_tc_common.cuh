// gemm_tc_common.cuh -- pieces of the tensor-core small-M GEMM
// (kernel_src/gemm_tc.cu) kept apart from its main loop: the act/out types, the
// m16n8k16 MMA with fp32 accumulation, and the deterministic split-K
// reduction kernel. Device code only; thread-safety: no globals.
#pragma once
#include "kiln_common.cuh"
#include "gemm_types.cuh"

// d += a (16 x 16: W rows x k) * b (16 x 8: k x x rows), fp32 accumulation
KILN_DEV void mma_act(float d[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
#if __CUDA_ARCH__ >= 800
    if (mma_kind<act_t>::f16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// out[m, n] = sum over s in order of part[s, m, n] (+ bias[n]).
// Grid: (ceil(N / 256), M) blocks of 256 threads.
extern "C" __global__ void __launch_bounds__(256)
kiln_gemm_tc_reduce(out_t *__restrict__ out, i64 ldo, const float *__restrict__ part, const out_t *__restrict__ bias,
                    int M, int N, int S) {
    pdl_wait();
    pdl_launch();
    const int n = blockIdx.x * 256 + threadIdx.x, m = blockIdx.y;
    if (n >= N) return;
    float v = 0.0f;
    for (int s = 0; s < S; s++) v += part[((size_t)s * M + m) * N + n];
    if (bias) v += to_f32(bias[n]);
    out[(size_t)m * ldo + n] = from_f32<out_t>(v);
}
