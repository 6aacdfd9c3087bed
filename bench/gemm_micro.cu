// gemm_micro.cu -- a probe: how close does a tensor-core GEMM for decode
// sizes (M <= 32 rows of x, out = x W^T) get to the read-only bound of
// read_micro.cu when W goes straight from global memory into mma.sync
// fragments (no shared-memory ring) and its first loads are issued before
// the programmatic-dependent-launch wait?
//
// The fragments: a lane (g = lane / 4, t = lane % 4) loads 16 bytes of W
// row g and of row g + 8 at k = k0 + 8t .. 8t + 7, and 16 bytes of x row g
// (a token) at the same k. Two m16n8k16 MMAs take elements {0,1 | 2,3} and
// {4,5 | 6,7} of each: a permutation of k that A (W) and B (x) share, so the
// products are those of W . x over the 32 k of the step. A block: 16 W
// rows, NW warps splitting K, the warps' partial sums added in shared
// memory in warp order (no split across blocks: every block reads all of x
// from L2). Checked against a plain fp32 kernel.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o gemm_micro bench/gemm_micro.cu
#include <stdint.h>
#include "micro_common.cuh"


__device__ __forceinline__ uint4 ldg_stream(const void *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ void mma16816(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// out [M, N] (bf16) = x [M, K] . W [N, K]^T; MT token tiles of 8 (M <= 8 MT), NW warps, U k-steps of 32 in flight
template <int MT, int NW, int U, bool PDL, bool XR = false>
__global__ void __launch_bounds__(NW * 32) gemm_rt(u16 *out, const u16 *x, const u16 *w, int M, int N, int K) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 16;
    const int steps = K / 32, per = steps / NW, s0 = warp * per; // this warp's k-steps [s0, s0 + per)
    const u16 *wa_p = w + (size_t)(n0 + g) * K + 8 * t, *wb_p = w + (size_t)(n0 + g + 8) * K + 8 * t;
    uint4 wa[U], wb[U];
#pragma unroll
    for (int u = 0; u < U; u++)
        if (u < per) wa[u] = ldg_stream(wa_p + (size_t)(s0 + u) * 32), wb[u] = ldg_stream(wb_p + (size_t)(s0 + u) * 32);
    if (PDL) asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
    float acc[MT][4];
#pragma unroll
    for (int j = 0; j < MT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    const u16 *xp[MT];
    bool xl[MT];
#pragma unroll
    for (int j = 0; j < MT; j++) xl[j] = 8 * j + g < M, xp[j] = x + (size_t)(xl[j] ? 8 * j + g : 0) * K + 8 * t;
    // XR: x in a ring of U steps too (its loads as far ahead as W's)
    uint4 xr[XR ? U : 1][MT];
    if (XR) {
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int j = 0; j < MT; j++)
                xr[XR ? u : 0][j] = xl[j] && u < per ? *(const uint4 *)(xp[j] + (size_t)(s0 + u) * 32) : make_uint4(0, 0, 0, 0);
    }
    for (int s = 0; s < per; s += U) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (s + u >= per) break;
            const int k = (s0 + s + u) * 32;
            uint4 xv[MT];
#pragma unroll
            for (int j = 0; j < MT; j++) {
                if (XR) {
                    xv[j] = xr[XR ? u : 0][j];
                    if (s + u + U < per)
                        xr[XR ? u : 0][j] = xl[j] ? *(const uint4 *)(xp[j] + k + U * 32) : make_uint4(0, 0, 0, 0);
                } else {
                    xv[j] = xl[j] ? *(const uint4 *)(xp[j] + k) : make_uint4(0, 0, 0, 0);
                }
            }
            const uint4 a = wa[u], b = wb[u];
            if (s + u + U < per) wa[u] = ldg_stream(wa_p + (size_t)k + U * 32), wb[u] = ldg_stream(wb_p + (size_t)k + U * 32);
#pragma unroll
            for (int j = 0; j < MT; j++) {
                mma16816(acc[j], a.x, b.x, a.y, b.y, xv[j].x, xv[j].y);
                mma16816(acc[j], a.z, b.z, a.w, b.w, xv[j].z, xv[j].w);
            }
        }
    }
    // the warps' partial tiles: [NW][16 rows][8 MT tokens], added in warp order
    __shared__ float part[NW][16][8 * MT + 1];
#pragma unroll
    for (int j = 0; j < MT; j++) {
        part[warp][g][8 * j + 2 * t] = acc[j][0];
        part[warp][g][8 * j + 2 * t + 1] = acc[j][1];
        part[warp][g + 8][8 * j + 2 * t] = acc[j][2];
        part[warp][g + 8][8 * j + 2 * t + 1] = acc[j][3];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < 16 * 8 * MT; e += NW * 32) {
        const int r = e & 15, m = e >> 4;
        if (m >= M) continue;
        float v = 0.0f;
#pragma unroll
        for (int q = 0; q < NW; q++) v += part[q][r][m];
        out[(size_t)m * N + n0 + r] = f2bf(v);
    }
}


typedef void (*kfn)(u16 *, const u16 *, const u16 *, int, int, int);
struct Ctx {
    u16 *w[4], *x, *out;
    int M, N, K, nt;
    kfn f;
    bool pdl;
};
static void launch(Ctx *c, int s) { launch_k(c->f, (unsigned)(c->N / 16), (unsigned)c->nt, 0u, c->pdl, c->out, (const u16 *)c->x, (const u16 *)c->w[s], c->M, c->N, c->K); }

struct Var {
    const char *name;
    kfn f, fp;
    int mt, nw;
};

int main() {
    const double ceil_bw = copy_ceiling();
    const struct { const char *n; int N, K; } shapes[] = {{"o", 4096, 4096}, {"qkv", 6144, 4096}, {"down", 4096, 14336}};
    const int Ms[] = {1, 8, 16, 32};
    for (auto &sh : shapes) {
        const GemmInputs in(sh.N, sh.K, 32, 7);
        const size_t wn = (size_t)sh.N * sh.K;
        Ctx c = {};
        c.N = sh.N, c.K = sh.K, c.x = in.x, c.out = in.out;
        for (int s = 0; s < 4; s++) c.w[s] = in.w[s];
        for (int M : Ms) {
            c.M = M;
            const std::vector<float> ref = in.ref(M);
            Var vs[] = {
                {"mt1 nw4 u4", gemm_rt<1, 4, 4, false>, gemm_rt<1, 4, 4, true>, 1, 4},
                {"mt1 nw4 u8", gemm_rt<1, 4, 8, false>, gemm_rt<1, 4, 8, true>, 1, 4},
                {"mt2 nw4 u4", gemm_rt<2, 4, 4, false>, gemm_rt<2, 4, 4, true>, 2, 4},
                {"mt4 nw4 u4", gemm_rt<4, 4, 4, false>, gemm_rt<4, 4, 4, true>, 4, 4},
                {"mt4 nw8 u4", gemm_rt<4, 8, 4, false>, gemm_rt<4, 8, 4, true>, 4, 8},
                {"mt4 nw4 u8", gemm_rt<4, 4, 8, false>, gemm_rt<4, 4, 8, true>, 4, 4},
                {"mt1 nw4 u4 xr", gemm_rt<1, 4, 4, false, true>, gemm_rt<1, 4, 4, true, true>, 1, 4},
                {"mt1 nw8 u8 xr", gemm_rt<1, 8, 8, false, true>, gemm_rt<1, 8, 8, true, true>, 1, 8},
                {"mt2 nw4 u4 xr", gemm_rt<2, 4, 4, false, true>, gemm_rt<2, 4, 4, true, true>, 2, 4},
                {"mt2 nw8 u4 xr", gemm_rt<2, 8, 4, false, true>, gemm_rt<2, 8, 4, true, true>, 2, 8},
                {"mt4 nw4 u4 xr", gemm_rt<4, 4, 4, false, true>, gemm_rt<4, 4, 4, true, true>, 4, 4},
                {"mt4 nw8 u4 xr", gemm_rt<4, 8, 4, false, true>, gemm_rt<4, 8, 4, true, true>, 4, 8},
            };
            for (auto &v : vs) {
                if (8 * v.mt < M || (M <= 8 && v.mt > 1) || (M == 16 && v.mt != 2) || (M == 32 && v.mt != 4)) continue;
                c.nt = v.nw * 32;
                for (int pdl = 0; pdl < 2; pdl++) {
                    c.f = pdl ? v.fp : v.f;
                    c.pdl = pdl;
                    const double rel = in.rel_err(M, ref, [&] { launch(&c, 0); });
                    float tt = time_launches(launch, &c, 4);
                    printf("%-5s M=%-2d %-12s %-4s %7.2f us %6.1f%% of copy  rel err %.1e %s\n", sh.n, M, v.name,
                           pdl ? "PDL" : "", tt, wn * 2 / (tt * 1e-6) / ceil_bw * 100, rel, rel < 1e-2 ? "ok" : "WRONG");
                }
            }
        }
    }
    return 0;
}
