// stride_micro.cu -- does the shape of a small-M GEMM's weight stages limit
// how fast they stream? gemm_sk / gemm_sk_tma read W [N, K] (bf16, row-major)
// as stages of BN = 128 rows x 64 k: 128 runs of 128 contiguous bytes, 8 KiB
// apart (o), and reach 62-70% of copy at M = 8..32 where a pure read of the
// same bytes reaches 86% (read_micro.cu). Here a read-only kernel streams W
// through the same kind of ring (cp.async, S slots of 16 KiB, 256 threads,
// the consumer only XORs its words) with stages of BN rows x C columns
// (BN C = 8192: runs of 2 C bytes), and with W pre-tiled so every stage is
// one contiguous 16 KiB run; each block takes 8 stages (one K range of BN
// rows). Plain and as a programmatic dependent (the first S - 1 stages
// issued before griddepcontrol.wait). % of the copy ceiling on W's bytes.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o stride_micro bench/stride_micro.cu
#include <stdint.h>
#include "micro_common.cuh"



// BN rows x C columns a stage (C = 0: pre-tiled, 8192 contiguous elements a stage)
template <int BN, int C, int S, bool PDL>
__global__ void __launch_bounds__(256) stream_ring(const u16 *__restrict__ w, int N, int K, unsigned *out) {
    extern __shared__ uint4 sm[];
    constexpr int NST = 8, PER = 1024 / 256; // stages a block; 16-byte vectors a thread a stage
    constexpr int CC = C > 0 ? C : 64;        // (C = 0: unused)
    const int tid = threadIdx.x;
    const u32 sbase = (u32)__cvta_generic_to_shared(sm);
    int n0 = 0, k0 = 0;
    if (C > 0) {
        const int kr = NST * CC, ks = K / kr; // K ranges
        n0 = (blockIdx.x / ks) * BN, k0 = (blockIdx.x % ks) * kr;
    }
    auto issue = [&](int st) {
        if (st < NST) {
            const u32 dst = sbase + (st % S) * 16384;
#pragma unroll
            for (int q = 0; q < PER; q++) {
                const int e = tid + q * 256;
                const u16 *src;
                if (C > 0) {
                    const int r = e / (CC / 8), c = e % (CC / 8);
                    src = w + (size_t)(n0 + r) * K + k0 + st * CC + c * 8;
                } else {
                    src = w + ((size_t)(blockIdx.x * NST + st) * 1024 + e) * 8;
                }
                cp16(dst + e * 16, src);
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    for (int s = 0; s < S - 1; s++) issue(s);
    if (PDL) asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
    unsigned acc = 0;
    for (int st = 0; st < NST; st++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
        __syncthreads();
        issue(st + S - 1);
        const uint4 *src = sm + (st % S) * 1024;
#pragma unroll
        for (int q = 0; q < PER; q++) {
            const uint4 v = src[tid + q * 256];
            acc += v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    acc += __shfl_xor_sync(0xffffffffu, acc, 16);
    if (tid == 0) out[blockIdx.x] = acc;
}

typedef void (*kfn)(const u16 *, int, int, unsigned *);
struct Ctx {
    u16 *w[4];
    int N, K, grid;
    unsigned *out;
    unsigned smem;
    kfn f;
    bool pdl;
};
static void launch(Ctx *c, int s) {
    launch_k(c->f, (unsigned)c->grid, 256u, c->smem, c->pdl, (const u16 *)c->w[s], c->N, c->K, c->out);
}

int main() {
    const double ceil_bw = copy_ceiling();
    const struct { const char *n; int N, K; } shapes[] = {{"o", 4096, 4096}, {"qkv", 6144, 4096}, {"down", 4096, 14336}};
    struct Var { const char *name; kfn f, fp; int s; };
#define V(BN, C, S, NAME) {NAME, stream_ring<BN, C, S, false>, stream_ring<BN, C, S, true>, S}
    const Var vs[] = {
        V(128, 64, 4, "128 rows x 128 B, 4 slots"), V(64, 128, 4, "64 rows x 256 B, 4 slots"),
        V(32, 256, 4, "32 rows x 512 B, 4 slots"),  V(16, 512, 4, "16 rows x 1 KiB, 4 slots"),
        V(128, 0, 4, "tiled 16 KiB, 4 slots"),
        V(128, 64, 6, "128 rows x 128 B, 6 slots"), V(32, 256, 6, "32 rows x 512 B, 6 slots"),
        V(128, 0, 6, "tiled 16 KiB, 6 slots"),      V(128, 64, 3, "128 rows x 128 B, 3 slots"),
        V(32, 256, 3, "32 rows x 512 B, 3 slots"),  V(128, 0, 3, "tiled 16 KiB, 3 slots"),
    };
    for (auto &sh : shapes) {
        Ctx c = {};
        c.N = sh.N, c.K = sh.K;
        const size_t bytes = (size_t)sh.N * sh.K * 2;
        for (int s = 0; s < 4; s++) {
            CK(cudaMalloc(&c.w[s], bytes));
            CK(cudaMemset(c.w[s], s + 1, bytes));
        }
        c.grid = (int)(bytes / (8 * 16384));
        CK(cudaMalloc(&c.out, 4 * (size_t)c.grid));
        for (auto &v : vs) {
            c.smem = 16384u * v.s;
            for (int pdl = 0; pdl < 2; pdl++) {
                c.f = pdl ? v.fp : v.f;
                c.pdl = pdl;
                CK(cudaFuncSetAttribute(c.f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem));
                const float t = time_launches(launch, &c, 4);
                printf("%-5s %-28s %-4s grid %4d %7.2f us %6.1f%% of copy\n", sh.n, v.name, pdl ? "PDL" : "", c.grid, t,
                       bytes / (t * 1e-6) / ceil_bw * 100);
            }
        }
        for (int s = 0; s < 4; s++) CK(cudaFree(c.w[s]));
        CK(cudaFree(c.out));
    }
    return 0;
}
