// gemv_micro.cu -- a probe for the batch-1 GEMV (out = W . x, W [N, K] bf16):
// W streamed through a warp-private shared-memory ring filled by cp.async
// (the KV pipeline's recipe: loads in flight without registers holding them,
// the first stages issued before the programmatic-dependent-launch wait),
// against read_micro.cu's bound for the same bytes. A warp owns RW rows;
// a stage is RW rows x KC columns; S stages. Checked against an fp32 kernel.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o gemv_micro bench/gemv_micro.cu
#include <stdint.h>
#include "micro_common.cuh"


__device__ __forceinline__ float dot8(uint4 a, uint4 b) {
    const u32 av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        s += bf2f(av[i] & 0xffffu) * bf2f(bv[i] & 0xffffu);
        s += bf2f(av[i] >> 16) * bf2f(bv[i] >> 16);
    }
    return s;
}

template <int RW, int KC, int S, bool PDL, bool ZF = false>
__global__ void __launch_bounds__(256) gemv_ring(u16 *out, const u16 *x, const u16 *w, int N, int K) {
    extern __shared__ uint4 sm[];
    constexpr int VPR = KC / 8, PER = RW * VPR; // 16-byte vectors a row, a stage
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n0 = (blockIdx.x * 8 + warp) * RW;
    if (n0 >= N) return; // whole warps; no block barrier below
    uint4 *ring = sm + warp * S * PER;
    const int nst = K / KC;
    auto issue = [&](int st) {
        if (st < nst) {
            uint4 *dst = ring + (st % S) * PER;
#pragma unroll
            for (int e = lane; e < PER; e += 32) {
                const int r = e / VPR, c = e % VPR;
                const u16 *src = w + (size_t)(n0 + r) * K + (size_t)st * KC + c * 8;
                if (ZF) // the zero-filling form (a source size operand, here always 16)
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((u32)__cvta_generic_to_shared(dst + e)),
                                 "l"(src), "r"(16) : "memory");
                else
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((u32)__cvta_generic_to_shared(dst + e)),
                                 "l"(src) : "memory");
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    for (int s = 0; s < S - 1; s++) issue(s);
    if (PDL) asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
    float acc[RW];
#pragma unroll
    for (int r = 0; r < RW; r++) acc[r] = 0.0f;
    for (int st = 0; st < nst; st++) {
        issue(st + S - 1); // into the slot read in the last iteration (a __syncwarp after it)
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 1) : "memory");
        __syncwarp();
        const uint4 *src = ring + (st % S) * PER;
#pragma unroll
        for (int c = lane; c < VPR; c += 32) {
            const uint4 xv = *(const uint4 *)(x + (size_t)st * KC + c * 8);
#pragma unroll
            for (int r = 0; r < RW; r++) acc[r] += dot8(src[r * VPR + c], xv);
        }
        __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < RW; r++) {
        float v = acc[r];
#pragma unroll
        for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) out[n0 + r] = f2bf(v);
    }
}

// The block-wide ring (stride_micro.cu's stream, which reaches 97% of copy with 6 slots of 16 KiB): a block
// owns BR rows and all of K, a stage is BR rows x 8192 / BR columns (16 KiB), S slots, every thread
// copying 4 of the stage's 16-byte vectors; thread t multiplies 4 vectors of row t / (256 / BR) (its 256 / BR
// threads a row reduce by shuffles); the first S - 1 stages before the PDL wait.
template <int BR, int S, bool PDL>
__global__ void __launch_bounds__(256) gemv_block(u16 *out, const u16 *x, const u16 *w, int N, int K) {
    extern __shared__ uint4 sm[];
    constexpr int C = 8192 / BR, VPR = C / 8, TPR = 256 / BR; // columns a stage, vectors a row, threads a row
    static_assert(VPR == 4 * TPR, "4 vectors a thread a stage");
    const int tid = threadIdx.x, n0 = blockIdx.x * BR, nst = K / C;
    const u32 sbase = (u32)__cvta_generic_to_shared(sm);
    auto issue = [&](int st) {
        if (st < nst) {
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int e = tid + q * 256, r = e / VPR, c = e % VPR;
                cp16(sbase + (u32)(((st % S) * 1024 + e) * 16), w + (size_t)(n0 + r) * K + (size_t)st * C + c * 8);
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    for (int st = 0; st < S - 1; st++) issue(st);
    if (PDL) asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
    const int r = tid / TPR, v0 = tid % TPR;
    float acc = 0.0f;
    for (int st = 0; st < nst; st++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
        __syncthreads(); // stage st landed for all; the slot of stage st - 1 is free
        issue(st + S - 1);
        const uint4 *src = sm + (st % S) * 1024 + r * VPR;
        uint4 xv[4];
#pragma unroll
        for (int k = 0; k < 4; k++) xv[k] = *(const uint4 *)(x + (size_t)st * C + (v0 + k * TPR) * 8);
#pragma unroll
        for (int k = 0; k < 4; k++) acc += dot8(src[v0 + k * TPR], xv[k]);
    }
#pragma unroll
    for (int o = TPR / 2; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (v0 == 0) out[n0 + r] = f2bf(acc);
}

typedef void (*kfn)(u16 *, const u16 *, const u16 *, int, int);
struct Ctx {
    u16 *w[4], *x, *out;
    int N, K, rw, br;
    unsigned smem;
    kfn f;
    bool pdl;
};
static void launch(Ctx *c, int s) {
    launch_k(c->f, (unsigned)(c->br ? c->N / c->br : c->N / (8 * c->rw)), 256u, c->smem, c->pdl, c->out,
             (const u16 *)c->x, (const u16 *)c->w[s], c->N, c->K);
}

int main() {
    const double ceil_bw = copy_ceiling();
    const struct { const char *n; int N, K; } shapes[] = {{"o", 4096, 4096}, {"qkv", 6144, 4096}, {"down", 4096, 14336}};
    struct Var { const char *name; kfn f, fp; int rw, kc, s, br; }; // br: gemv_block's rows a block (0: gemv_ring)
    const Var vs[] = {
        {"rw2 kc256 s4", gemv_ring<2, 256, 4, false>, gemv_ring<2, 256, 4, true>, 2, 256, 4},
        {"rw2 kc256 s8", gemv_ring<2, 256, 8, false>, gemv_ring<2, 256, 8, true>, 2, 256, 8},
        {"rw1 kc512 s4", gemv_ring<1, 512, 4, false>, gemv_ring<1, 512, 4, true>, 1, 512, 4},
        {"rw1 kc256 s8", gemv_ring<1, 256, 8, false>, gemv_ring<1, 256, 8, true>, 1, 256, 8},
        {"rw2 kc512 s4", gemv_ring<2, 512, 4, false>, gemv_ring<2, 512, 4, true>, 2, 512, 4},
        {"rw4 kc256 s4", gemv_ring<4, 256, 4, false>, gemv_ring<4, 256, 4, true>, 4, 256, 4},
        // deeper rings (stride_micro.cu: ~160 KiB in flight an SM streams at 97% of copy)
        {"rw2 kc512 s6", gemv_ring<2, 512, 6, false>, gemv_ring<2, 512, 6, true>, 2, 512, 6},
        {"rw2 kc512 s8", gemv_ring<2, 512, 8, false>, gemv_ring<2, 512, 8, true>, 2, 512, 8},
        {"rw1 kc1024 s6", gemv_ring<1, 1024, 6, false>, gemv_ring<1, 1024, 6, true>, 1, 1024, 6},
        {"rw1 kc512 s8", gemv_ring<1, 512, 8, false>, gemv_ring<1, 512, 8, true>, 1, 512, 8},
        {"rw2 kc1024 s4", gemv_ring<2, 1024, 4, false>, gemv_ring<2, 1024, 4, true>, 2, 1024, 4},
        {"rw1 kc1024 s10", gemv_ring<1, 1024, 10, false>, gemv_ring<1, 1024, 10, true>, 1, 1024, 10},
        // cp.async's zero-filling form (a source-size operand) in the best tiling
        {"rw2 kc512 s4 zfill", gemv_ring<2, 512, 4, false, true>, gemv_ring<2, 512, 4, true, true>, 2, 512, 4},
        // the block-wide ring (gemv_block)
        {"block 16 rows s6", gemv_block<16, 6, false>, gemv_block<16, 6, true>, 0, 512, 6, 16},
        {"block 16 rows s4", gemv_block<16, 4, false>, gemv_block<16, 4, true>, 0, 512, 4, 16},
        {"block 16 rows s8", gemv_block<16, 8, false>, gemv_block<16, 8, true>, 0, 512, 8, 16},
        {"block 32 rows s6", gemv_block<32, 6, false>, gemv_block<32, 6, true>, 0, 256, 6, 32},
        {"block 32 rows s4", gemv_block<32, 4, false>, gemv_block<32, 4, true>, 0, 256, 4, 32},
        {"block 8 rows s6", gemv_block<8, 6, false>, gemv_block<8, 6, true>, 0, 1024, 6, 8},
    };
    for (auto &sh : shapes) {
        const GemmInputs in(sh.N, sh.K, 1, 3);
        const std::vector<float> ref = in.ref(1);
        const size_t wn = (size_t)sh.N * sh.K;
        Ctx c = {};
        c.N = sh.N, c.K = sh.K, c.x = in.x, c.out = in.out;
        for (int s = 0; s < 4; s++) c.w[s] = in.w[s];
        for (auto &v : vs) {
            c.rw = v.rw, c.br = v.br;
            c.smem = v.br ? (unsigned)(v.s * 16384) : (unsigned)(8 * v.s * v.rw * v.kc * 2);
            for (int pdl = 0; pdl < 2; pdl++) {
                c.f = pdl ? v.fp : v.f;
                c.pdl = pdl;
                CK(cudaFuncSetAttribute(c.f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem));
                const double rel = in.rel_err(1, ref, [&] { launch(&c, 0); });
                const float t = time_launches(launch, &c, 4);
                printf("%-5s %-14s %-4s grid %4d smem %6u %7.2f us %6.1f%% of copy  rel err %.1e %s\n", sh.n, v.name,
                       pdl ? "PDL" : "", v.br ? sh.N / v.br : sh.N / (8 * v.rw), c.smem, t, wn * 2 / (t * 1e-6) / ceil_bw * 100, rel,
                       rel < 1e-2 ? "ok" : "WRONG");
            }
        }
    }
    return 0;
}
