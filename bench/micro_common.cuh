// micro_common.cuh -- what the stand-alone kernel probes (kv_write_micro.cu,
// read_micro.cu, gemm_micro.cu, gemv_micro.cu) share: error checks, a launch
// as a programmatic dependent (PDL), the timing of back-to-back launches
// (CUDA events around 20 calls over rotating input sets, median of 15, 3
// warm-up calls), the copy ceiling they are measured against, and the
// relative error of a bf16 result against an fp32 reference.
#pragma once
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include <algorithm>
#include <string.h>
#include <math.h>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

// f<<<grid, block, smem>>>(args...) on the default stream, as a
// programmatic dependent of the launch before it when pdl
template <class... P, class... A>
static void launch_k(void (*f)(P...), unsigned grid, unsigned block, unsigned smem, bool pdl, A... args) {
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = 0;
    cfg.attrs = &at;
    cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, f, args...));
}

// median microseconds per call of launch(ctx, set): batches of 20 calls, sets rotating
template <class C> static float time_launches(void (*launch)(C *, int), C *ctx, int sets) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) launch(ctx, i % sets);
    CK(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int b = 0; b < 15; b++) {
        CK(cudaEventRecord(e0));
        for (int i = 0; i < 20; i++) launch(ctx, (b * 20 + i) % sets);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float m;
        CK(cudaEventElapsedTime(&m, e0, e1));
        ms.push_back(m / 20);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1e3f;
}

// The ceiling: bytes moved (read + write) a second by cudaMemcpy of 1 GiB
// device to device, timed as above; printed as the probe's first line.
struct memcpy_ctx {
    void *src, *dst;
    size_t bytes;
};
static void launch_memcpy_ctx(memcpy_ctx *c, int) {
    CK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, 0));
}
static double copy_ceiling() {
    memcpy_ctx c = {nullptr, nullptr, (size_t)1 << 30};
    CK(cudaMalloc(&c.src, c.bytes));
    CK(cudaMalloc(&c.dst, c.bytes));
    const double bw = 2.0 * c.bytes / (time_launches(launch_memcpy_ctx, &c, 1) * 1e-6);
    CK(cudaFree(c.src));
    CK(cudaFree(c.dst));
    printf("ceiling: cudaMemcpy 2 x 1 GiB %.0f GB/s\n", bw / 1e9);
    return bw;
}

// || got - ref || / || ref || over n values, got in bf16 (raw bits)
static double rel_err_bf16(const unsigned short *got, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned u = (unsigned)got[i] << 16;
        float g;
        memcpy(&g, &u, 4);
        num += (g - ref[i]) * (double)(g - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / den);
}
