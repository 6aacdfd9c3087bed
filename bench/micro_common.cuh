// micro_common.cuh -- what the stand-alone kernel probes (kv_write_micro.cu,
// read_micro.cu, gemm_micro.cu, gemv_micro.cu, stride_micro.cu,
// skring_micro.cu, skx_micro.cu) share: error checks, a launch as a
// programmatic dependent (PDL), the timing of back-to-back launches (CUDA
// events around 20 calls over rotating input sets, median of 15, 3 warm-up
// calls), the copy ceiling they are measured against, the relative error of a
// bf16 result against an fp32 reference, bf16 <-> fp32 in device code, a
// 16-byte cp.async, ldmatrix / mma.sync and cluster helpers, the fp32
// reference GEMM and the random bf16 weights and activations the GEMM probes
// draw.
#pragma once
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include <algorithm>
#include <string.h>
#include <math.h>

typedef unsigned short u16;
typedef unsigned int u32;

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

// a launch on the default stream of grid x block threads with smem dynamic bytes, as a programmatic dependent
// of the launch before it when pdl, in clusters (1, cluster_y, 1) when cluster_y > 0 (use it where it stands:
// cfg points at its own attributes)
struct LaunchCfg {
    cudaLaunchAttribute at[2];
    cudaLaunchConfig_t cfg;
    LaunchCfg(dim3 grid, unsigned block, unsigned smem, bool pdl, int cluster_y) : at{}, cfg{} {
        int na = 0;
        if (pdl) {
            at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[na].val.programmaticStreamSerializationAllowed = 1;
            na++;
        }
        if (cluster_y > 0) {
            at[na].id = cudaLaunchAttributeClusterDimension;
            at[na].val.clusterDim.x = 1, at[na].val.clusterDim.y = (unsigned)cluster_y, at[na].val.clusterDim.z = 1;
            na++;
        }
        cfg.gridDim = grid;
        cfg.blockDim = dim3(block);
        cfg.dynamicSmemBytes = smem;
        cfg.stream = 0;
        cfg.attrs = at;
        cfg.numAttrs = (unsigned)na;
    }
    LaunchCfg(const LaunchCfg &) = delete;
};

// f<<<grid, block, smem>>>(args...) on the default stream, as a
// programmatic dependent of the launch before it when pdl
template <class... P, class... A>
static void launch_k(void (*f)(P...), unsigned grid, unsigned block, unsigned smem, bool pdl, A... args) {
    LaunchCfg l(dim3(grid), block, smem, pdl, 0);
    CK(cudaLaunchKernelEx(&l.cfg, f, args...));
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

__device__ __forceinline__ float bf2f(u32 v16) { return __uint_as_float(v16 << 16); }
__device__ __forceinline__ u16 f2bf(float f) { // round to nearest even
    u32 u = __float_as_uint(f);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}
// 16 bytes global -> shared, asynchronously (cp.async.cg)
__device__ __forceinline__ void cp16(u32 dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

// ldmatrix x4 (four 8 x 8 b16 matrices from shared memory), mma.sync m16n8k16 bf16 -> fp32 (d += a b), and a
// thread-block cluster's rank, the address of shared memory in another rank, a load from it, and a full
// cluster barrier (release / acquire)
__device__ __forceinline__ void ldsm_x4(u32 &a, u32 &b, u32 &c, u32 &d, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ u32 cluster_map(u32 a, u32 rank) {
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
__device__ __forceinline__ float cluster_ld(u32 a) {
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// keeps the computation of N accumulators (a thread's, in registers) without storing them: a store to *sink only
// if one is exactly 12345, which never happens
template <int N> __device__ __forceinline__ void keep_live(const float *a, float *sink) {
#pragma unroll
    for (int i = 0; i < N; i++)
        if (a[i] == 12345.0f) *sink = a[i];
}

// out[M, N] = x[M, K] . W[N, K]^T in fp32 from bf16 inputs; grid (ceil(N / 256), M) of 256 threads
__global__ void gemm_ref(float *out, const u16 *x, const u16 *w, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
    if (n >= N) return;
    float s = 0.0f;
    for (int k = 0; k < K; k++) s += bf2f(x[(size_t)m * K + k]) * bf2f(w[(size_t)n * K + k]);
    out[(size_t)m * N + n] = s;
}

// n random bf16 weights (|w| around 2^-7) drawn from seed, on the device
static u16 *rand_weights(size_t n, unsigned seed) {
    std::vector<u16> h(n);
    srand(seed);
    for (size_t i = 0; i < n; i++) h[i] = (u16)(0x3c00 + (rand() & 0x3ff) - 0x200 + ((rand() & 1) << 15));
    u16 *d;
    CK(cudaMalloc(&d, n * 2));
    CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
    return d;
}
// n random bf16 activations (|x| around 0.5..1), on the device
static u16 *rand_acts(size_t n) {
    std::vector<u16> h(n);
    for (auto &v : h) v = (u16)(0x3f00 + (rand() & 0xff) + ((rand() & 1) << 15));
    u16 *d;
    CK(cudaMalloc(&d, n * 2));
    CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
    return d;
}

// One GEMM shape's inputs for the probes: W [N, K] in 4 copies drawn from seeds seed .. seed + 3 (timed launches
// rotate over them), x [xrows, K] and out [xrows, N], bf16. ref(M): the fp32 reference x[:M] . W[0]^T, on the host;
// rel_err(M, ref, launch): the relative error against it of the first M rows launch() writes over a poisoned out.
struct GemmInputs {
    int N, K, xrows;
    u16 *w[4], *x, *out;
    GemmInputs(int n, int k, int rows, unsigned seed) : N(n), K(k), xrows(rows) {
        for (int s = 0; s < 4; s++) w[s] = rand_weights((size_t)N * K, seed + s);
        x = rand_acts((size_t)xrows * K);
        CK(cudaMalloc(&out, (size_t)xrows * N * 2));
    }
    ~GemmInputs() {
        for (int s = 0; s < 4; s++) CK(cudaFree(w[s]));
        CK(cudaFree(x));
        CK(cudaFree(out));
    }
    GemmInputs(const GemmInputs &) = delete;
    std::vector<float> ref(int M) const {
        float *d;
        CK(cudaMalloc(&d, (size_t)M * N * 4));
        gemm_ref<<<dim3((N + 255) / 256, M), 256>>>(d, x, w[0], M, N, K);
        std::vector<float> h((size_t)M * N);
        CK(cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaFree(d));
        return h;
    }
    template <class L> double rel_err(int M, const std::vector<float> &r, L launch) const {
        std::vector<u16> h((size_t)M * N);
        CK(cudaMemset(out, 0xff, (size_t)xrows * N * 2));
        launch();
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(h.data(), out, h.size() * 2, cudaMemcpyDeviceToHost));
        return rel_err_bf16(h.data(), r.data(), h.size());
    }
};
