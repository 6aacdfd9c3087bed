// skx_micro.cu -- a small-M GEMM with x stationary in registers and W streamed through warp-private rings.
//
// What skring_micro.cu (s125-s135) left: gemm_sk's kind of kernel loses against the pure stream of W where
// (a) x's stage shares the ring's shared memory, so fewer W bytes are in flight an SM than the ~160 KiB the stream
// needs (stride_micro.cu: 97.5% of copy with 6 x 16 KiB slots, 87% with 4), (b) every stage is a barrier of the
// whole block, and (c) the K split goes through clusters of 4-8 blocks, whose launch alone costs 8-22 points.
// Here a block owns BN rows of W and one of KSPL K ranges (KSPL <= 2 keeps the cluster a TPC's pair; 4 is tried
// too), and its WARPS warps split that range: warp w holds x[0, 8 NT) x [its KW columns] in registers for the
// whole kernel (loaded once through shared memory with ldmatrix, in rounds of 64 columns, the later rounds
// during the first stages) and streams W[BN rows, its KW columns] through its own ring of S slots of 16 rows x SK
// columns (cp.async, waited for by the warp alone: no block barrier in the loop). So all of shared memory but a
// small per-warp area is W in flight. The warps' sums meet once, at the end, in shared memory (in warp order);
// with KSPL > 1 the cluster then sums its K ranges through DSMEM (in rank order), bf16 out. Deterministic.
//   ACCR 1: every row tile's accumulators stay in registers until the end (RT NT 4 a thread);
//   ACCR 0: each row tile's are parked in the warp's area when the tile is done (NT 4 registers).
//   MODE 10: the W stream alone (ldmatrix of each stage, XORed; no x, no MMAs, nothing summed)
//   MODE 9:  + x in registers and the MMAs (the loop alone; nothing stored)
//   MODE 8:  the whole GEMM (checked against the fp32 reference)
// out[M, N] = x[M, K] W[N, K]^T, bf16 in, fp32 accumulate; M <= 8 NT (NT 1: M = 1..8, a tensor-core GEMV at M = 1). Every launch a programmatic dependent of
// the one before: the first S - 1 stages of W before griddepcontrol.wait, x after it.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o skx_micro bench/skx_micro.cu
#include <stdint.h>
#include "micro_common.cuh"

// bytes of shared memory a warp: its ring, then its area (x's staging -- R rounds of 8 NT rows x 64 columns -- and
// with ACCR 0 the parked accumulators; with ACCR 1 and KSPL > 1 the areas of all warps hold the block's sums)
template <int BN, int KW, int SK, int S, int NT, int ACCR> struct SkxShape {
    static constexpr int RT = BN / 16, SLOT = 16 * SK * 2, WRING = S * SLOT, R = SK / 64, ACCN = RT * NT * 4;
    static constexpr int STAGE_X = R * NT * 1024, PARK = ACCR ? 0 : ACCN * 32 * 4;
    static constexpr int AREA = STAGE_X > PARK ? STAGE_X : PARK, WARP_BYTES = WRING + AREA;
};

template <int BN, int WARPS, int KW, int SK, int S, int KSPL, int NT, int ACCR, int MODE>
__global__ void __launch_bounds__(WARPS * 32, 1) skx(u16 *__restrict__ out, float *__restrict__ part,
                                                     const u16 *__restrict__ x, const u16 *__restrict__ w, int M,
                                                     int N, int K) {
    using Sh = SkxShape<BN, KW, SK, S, NT, ACCR>;
    constexpr int THREADS = WARPS * 32, RT = Sh::RT, KSS = KW / SK, NST = RT * KSS, SLOT = Sh::SLOT, R = Sh::R;
    constexpr int CPR = SK / 8, KK = SK / 16, ACCN = Sh::ACCN, AREA = Sh::AREA, RING_ALL = WARPS * Sh::WRING;
    static_assert(BN % 16 == 0 && SK % 64 == 0 && KW % SK == 0 && (NT == 1 || NT == 2 || NT == 4), "tiling");
    static_assert(!ACCR || S * SLOT >= ACCN * 32 * 4, "ACCR: the warps' sums fit the ring");
    static_assert(KSPL == 1 || (ACCR ? WARPS * AREA : RING_ALL) >= ACCN * 32 * 4, "the block's sums fit");
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n_blk = blockIdx.x * BN, k_w = blockIdx.y * (K / KSPL) + warp * KW;
    const u32 sbase = (u32)__cvta_generic_to_shared(smem);
    const u32 ring = sbase + warp * Sh::WRING;
    const u32 area = sbase + RING_ALL + warp * AREA;
    unsigned char *area_p = smem + RING_ALL + warp * AREA;
    const u16 *wb = w + (size_t)n_blk * K + k_w;
    auto load = [&](int i) { // stage i = (row tile i / KSS, columns (i % KSS) SK ..) into slot i % S
        const int rt = i / KSS, ks = i % KSS;
        const u32 dst = ring + (u32)((i % S) * SLOT);
        const u16 *src = wb + (size_t)(rt * 16) * K + ks * SK;
#pragma unroll
        for (int q = 0; q < 16 * CPR / 32; q++) {
            const int idx = lane + 32 * q, row = idx / CPR, c = idx % CPR;
            cp16(dst + row * (SK * 2) + ((c ^ (row & 7)) << 4), src + (size_t)row * K + c * 8);
        }
    };
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < NST) load(s);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");

    // x of this warp's columns: xb[kx][j] = the B fragment (b0, b1) of k16 step kx (= 4 q + kk of round q) and
    // n-tile j, by ldmatrix.x4: two n-tiles of one step (NT >= 2) or one n-tile of two steps (NT 1)
    u32 xb[MODE == 10 ? 1 : KW / 16][NT][2];
    const int b_q = lane >> 3, b_seg = b_q & 1;
    auto x_ldg = [&](int q, uint4 (&v)[2 * NT]) {
#pragma unroll
        for (int e = 0; e < 2 * NT; e++) {
            const int idx = lane + 32 * e, row = idx >> 3, seg = idx & 7;
            v[e] = row < M ? *reinterpret_cast<const uint4 *>(x + (size_t)row * K + k_w + 64 * q + seg * 8)
                           : make_uint4(0, 0, 0, 0);
        }
    };
    auto x_sts_ldsm = [&](int q, int buf, const uint4 (&v)[2 * NT]) {
        unsigned char *st = area_p + buf * NT * 1024;
#pragma unroll
        for (int e = 0; e < 2 * NT; e++) {
            const int idx = lane + 32 * e, row = idx >> 3, seg = idx & 7;
            *reinterpret_cast<uint4 *>(st + row * 128 + ((seg ^ (row & 7)) << 4)) = v[e];
        }
        asm volatile("" ::: "memory"); // the stores before the ldmatrix (an asm the compiler would not order)
        __syncwarp();
        const u32 sa = area + (u32)(buf * NT * 1024);
        if (MODE != 10) {
            if (NT == 1) {
#pragma unroll
                for (int kk = 0; kk < 4; kk += 2) {
                    const int row = lane & 7, seg = 2 * kk + b_q, kx = MODE == 10 ? 0 : 4 * q + kk;
                    ldsm_x4(xb[kx][0][0], xb[kx][0][1], xb[kx + 1][0][0], xb[kx + 1][0][1],
                            sa + row * 128 + ((seg ^ (row & 7)) << 4));
                }
            } else {
#pragma unroll
                for (int kk = 0; kk < 4; kk++)
#pragma unroll
                    for (int jp = 0; jp < (NT + 1) / 2; jp++) {
                        const int row = 8 * (2 * jp + (b_q >> 1)) + (lane & 7), seg = 2 * kk + b_seg;
                        const int kx = MODE == 10 ? 0 : 4 * q + kk, j0 = NT == 1 ? 0 : 2 * jp, j1 = NT == 1 ? 0 : 2 * jp + 1;
                        ldsm_x4(xb[kx][j0][0], xb[kx][j0][1], xb[kx][j1][0], xb[kx][j1][1],
                                sa + row * 128 + ((seg ^ (row & 7)) << 4));
                    }
            }
        }
        asm volatile("" ::: "memory"); // the reads before the next round's stores
        __syncwarp();
    };

    float acc[ACCR ? RT : 1][NT][4];
    unsigned xs = 0;
    const int a_row = lane & 15, a_seg = lane >> 4;
    // stage i (columns ks of its row tile) multiplied into acc[a]
    auto stage = [&](int i, int ks, float (&c)[NT][4]) {
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
        __syncwarp();
        if (i + S - 1 < NST) load(i + S - 1);
        asm volatile("cp.async.commit_group;" ::: "memory");
        const u32 ws = ring + (u32)((i % S) * SLOT);
#pragma unroll
        for (int kk = 0; kk < KK; kk++) {
            u32 a0, a1, a2, a3;
            const int seg = 2 * kk + a_seg;
            ldsm_x4(a0, a1, a2, a3, ws + a_row * (SK * 2) + ((seg ^ (a_row & 7)) << 4));
            if (MODE == 10) xs ^= a0 ^ a1 ^ a2 ^ a3;
            else
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const u32(&b)[2] = xb[MODE == 10 ? 0 : ks * KK + kk][j];
                mma_bf16(c[j], a0, a1, a2, a3, b[0], b[1]);
            }
        }
    };
    auto zero = [&](float (&c)[NT][4]) {
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) c[j][e] = 0.0f;
    };
    // ACCR 0: row tile rt's accumulators parked in the warp's area at ((rt NT + j) 4 + e) 32 + lane
    auto park = [&](int rt, const float (&c)[NT][4]) {
        float *pk = reinterpret_cast<float *>(area_p);
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) pk[((rt * NT + j) * 4 + e) * 32 + lane] = c[j][e];
    };

    // row tile 0, with x's rounds: those of columns ks before its stage, the next ks's loads issued before it
    zero(acc[0]);
    {
        uint4 xv[R][2 * NT];
        if (MODE != 10)
#pragma unroll
            for (int r = 0; r < R; r++) x_ldg(r, xv[r]);
#pragma unroll
        for (int ks = 0; ks < KSS; ks++) {
            if (MODE != 10) {
#pragma unroll
                for (int r = 0; r < R; r++) x_sts_ldsm(ks * R + r, r, xv[r]);
                if (ks + 1 < KSS)
#pragma unroll
                    for (int r = 0; r < R; r++) x_ldg((ks + 1) * R + r, xv[r]);
            }
            stage(ks, ks, acc[0]);
        }
    }
    if (!ACCR && MODE == 8) park(0, acc[0]);
    if (ACCR) {
#pragma unroll
        for (int rt = 1; rt < RT; rt++) {
            zero(acc[ACCR ? rt : 0]);
#pragma unroll
            for (int ks = 0; ks < KSS; ks++) stage(rt * KSS + ks, ks, acc[ACCR ? rt : 0]);
        }
    } else {
        for (int rt = 1; rt < RT; rt++) {
            if (MODE == 8) zero(acc[0]); // (MODE 9 sums on: every tile's products stay live)
#pragma unroll
            for (int ks = 0; ks < KSS; ks++) stage(rt * KSS + ks, ks, acc[0]);
            if (MODE == 8) park(rt, acc[0]);
        }
    }
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (MODE == 10) {
        xs += __shfl_xor_sync(0xffffffffu, xs, 16);
        if (lane == 0) part[(blockIdx.y * gridDim.x + blockIdx.x) * WARPS + warp] = (float)xs;
        return;
    }
    if (MODE == 9) {
        keep_live<(ACCR ? RT : 1) * NT * 4>(&acc[0][0][0], part + tid);
        return;
    }

    // MODE 8: the warps' sums in warp order, then the cluster's in rank order
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    // entry (gi, l) of warp v's accumulators: gi = (rt NT + j) 4 + e of lane l
    float *red = ACCR ? reinterpret_cast<float *>(smem) : reinterpret_cast<float *>(smem + RING_ALL);
    constexpr int RSTRIDE = ACCR ? ACCN * 32 : AREA / 4; // floats between two warps' entries
    if (ACCR) {
#pragma unroll
        for (int rt = 0; rt < (ACCR ? RT : 1); rt++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) red[warp * RSTRIDE + ((rt * NT + j) * 4 + e) * 32 + lane] = acc[rt][j][e];
        __syncthreads();
    }
    constexpr int PER = (ACCN * 32 + THREADS - 1) / THREADS, ENT = ACCN * 32;
    float sum[PER];
#pragma unroll
    for (int q = 0; q < PER; q++) {
        const int p = tid + THREADS * q;
        float s = 0.0f;
        if (p >= ENT) break;
#pragma unroll
        for (int v = 0; v < WARPS; v++) s += red[v * RSTRIDE + p];
        sum[q] = s;
    }
    auto at = [&](int p, int &m, int &n) {
        const int gi = p >> 5, l = p & 31, rt = gi / (NT * 4), j = (gi >> 2) % NT, e = gi & 3;
        m = 8 * j + 2 * (l & 3) + (e & 1), n = n_blk + 16 * rt + (l >> 2) + 8 * (e >> 1);
    };
    if (KSPL == 1) {
#pragma unroll
        for (int q = 0; q < PER; q++) {
            int m, n;
            if (tid + THREADS * q >= ENT) break;
            at(tid + THREADS * q, m, n);
            if (m < M) out[(size_t)m * N + n] = f2bf(sum[q]);
        }
        return;
    }
    // the block's sums where the other ranks can read them, then rank r stores the entries p with p / 32 = r mod KSPL
    const u32 bsum = ACCR ? sbase + RING_ALL : sbase;
    float *bsum_p = reinterpret_cast<float *>(smem + (ACCR ? RING_ALL : 0));
    // (ACCR 0: bsum overlays the rings, drained above; ACCR 1: the areas, whose x staging ended in row tile 0)
#pragma unroll
    for (int q = 0; q < PER; q++)
        if (tid + THREADS * q < ENT) bsum_p[tid + THREADS * q] = sum[q];
    cluster_sync_all();
    const u32 me = cluster_rank();
#pragma unroll
    for (int q = 0; q < PER; q++) {
        const int p = tid + THREADS * q;
        if (p >= ENT || (u32)((p >> 5) % KSPL) != me) continue;
        float v[KSPL];
#pragma unroll
        for (int r = 0; r < KSPL; r++) v[r] = cluster_ld(cluster_map(bsum + (u32)p * 4, (u32)r));
        float s = 0.0f;
#pragma unroll
        for (int r = 0; r < KSPL; r++) s += v[r];
        int m, n;
        at(p, m, n);
        if (m < M) out[(size_t)m * N + n] = f2bf(s);
    }
    cluster_sync_all();
}

typedef void (*kfn)(u16 *, float *, const u16 *, const u16 *, int, int, int);
struct Ctx {
    u16 *w[4], *x, *out;
    float *part;
    int M, N, K, bn, kspl, threads, cluster;
    unsigned smem;
    kfn f;
};
static void launch(Ctx *c, int s) {
    LaunchCfg l(dim3(c->N / c->bn, c->kspl), c->threads, c->smem, true, c->cluster ? c->kspl : 0);
    CK(cudaLaunchKernelEx(&l.cfg, c->f, c->out, c->part, (const u16 *)c->x, (const u16 *)c->w[s], c->M, c->N, c->K));
}

struct Var {
    const char *shape, *name;
    int M;
    kfn f;
    int bn, warps, kw, kspl, mode;
    unsigned smem;
};
#define SKX(SHAPE, M, BN, W, KW, SK, S, KS, NT, ACCR, MODE)                                                          \
    {SHAPE, #BN " rows " #W " warps x " #KW " cols, " #S " x " #SK "-col slots, split " #KS " nt " #NT " accr " #ACCR \
            " mode " #MODE,                                                                                          \
     M, skx<BN, W, KW, SK, S, KS, NT, ACCR, MODE>, BN, W, KW, KS, MODE,                                              \
     (unsigned)(W * SkxShape<BN, KW, SK, S, NT, ACCR>::WARP_BYTES)}
// the stream alone, the loop alone, the whole GEMM
#define SKX3(SHAPE, M, BN, W, KW, SK, S, KS, NT, ACCR)                                                                \
    SKX(SHAPE, M, BN, W, KW, SK, S, KS, NT, ACCR, 10), SKX(SHAPE, M, BN, W, KW, SK, S, KS, NT, ACCR, 9),             \
        SKX(SHAPE, M, BN, W, KW, SK, S, KS, NT, ACCR, 8)

int main() {
    const double ceil_bw = copy_ceiling();
    const struct { const char *n; int N, K; } shapes[] = {{"o", 4096, 4096}, {"qkv", 6144, 4096}, {"down", 4096, 14336}};
    const Var vs[] = {
        // M = 32: o in 64 row tiles x 2 K halves (128 blocks, clusters of 2), 8 warps x 256 columns (x: 128 registers)
        SKX3("o", 32, 64, 8, 256, 128, 5, 2, 4, 0),
        SKX3("o", 32, 64, 8, 256, 128, 5, 2, 4, 1),
        SKX3("o", 32, 64, 8, 256, 64, 9, 2, 4, 0),
        // o in 32 row tiles x 4 K quarters (clusters of 4), x 64 registers, 128 accumulators
        SKX3("o", 32, 128, 8, 128, 128, 5, 4, 4, 1),
        // qkv in 64 row tiles of 96 x 2 K halves
        SKX3("qkv", 32, 96, 8, 256, 128, 4, 2, 4, 0),
        // M = 16 and 8: no K split at all (128 blocks of 32 / 48 rows, 8 warps x 512 columns: x 128 registers)
        SKX3("o", 16, 32, 8, 512, 128, 6, 1, 2, 1),
        SKX3("qkv", 16, 48, 8, 512, 128, 6, 1, 2, 1),
        SKX3("o", 16, 32, 8, 512, 64, 11, 1, 2, 1),
        SKX("o", 8, 32, 8, 512, 128, 6, 1, 2, 1, 8),
        SKX("qkv", 8, 48, 8, 512, 128, 6, 1, 2, 1, 8),
        // down at M = 16: 32 row tiles of 128 x 4 K quarters (clusters of 4), 8 warps x 448 columns
        SKX3("down", 16, 128, 8, 448, 64, 9, 4, 2, 0),
        SKX("down", 8, 128, 8, 448, 64, 9, 4, 2, 0, 8),
        // M = 1: a tensor-core GEMV (one n-tile: x 64 registers at 512 columns a warp), no K split
        SKX3("o", 1, 32, 8, 512, 128, 6, 1, 1, 1),
        SKX3("o", 1, 32, 4, 1024, 128, 12, 1, 1, 1),
        SKX3("qkv", 1, 48, 8, 512, 128, 6, 1, 1, 1),
    };
    for (auto &sh : shapes) {
        const int Ms[] = {32, 16, 8, 1};
        for (int M : Ms) {
            bool any = false;
            for (auto &v : vs) any |= !strcmp(v.shape, sh.n) && v.M == M;
            if (!any) continue;
            const GemmInputs in(sh.N, sh.K, M, 3);
            const std::vector<float> ref = in.ref(M);
            const size_t wn = (size_t)sh.N * sh.K;
            Ctx c = {};
            c.M = M, c.N = sh.N, c.K = sh.K, c.x = in.x, c.out = in.out;
            for (int s = 0; s < 4; s++) c.w[s] = in.w[s];
            CK(cudaMalloc(&c.part, (size_t)M * sh.N * 4 + 4096 * 4));
            for (auto &v : vs) {
                if (strcmp(v.shape, sh.n) || v.M != M) continue;
                if (sh.K != v.kspl * v.warps * v.kw || sh.N % v.bn) {
                    printf("%-4s M %2d %s: does not tile %d x %d\n", sh.n, M, v.name, sh.N, sh.K);
                    continue;
                }
                c.bn = v.bn, c.kspl = v.kspl, c.threads = v.warps * 32, c.smem = v.smem, c.f = v.f;
                c.cluster = v.mode == 8 && v.kspl > 1;
                CK(cudaFuncSetAttribute(c.f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem));
                cudaFuncAttributes fa;
                CK(cudaFuncGetAttributes(&fa, c.f));
                int clusters = 0;
                if (c.cluster) {
                    LaunchCfg l(dim3(c.N / c.bn, c.kspl), c.threads, c.smem, false, c.kspl);
                    CK(cudaOccupancyMaxActiveClusters(&clusters, c.f, &l.cfg));
                }
                const char *chk = "";
                if (v.mode == 8) chk = in.rel_err(M, ref, [&] { launch(&c, 0); }) < 1e-2 ? "ok" : "WRONG";
                const float t = time_launches(launch, &c, 4);
                printf("%-4s M %2d %-70s grid %4d smem %6u regs %3d local %3d clusters %3d %7.2f us %6.1f%% %s\n", sh.n,
                       M, v.name, sh.N / v.bn * v.kspl, c.smem, fa.numRegs, (int)fa.localSizeBytes, clusters, t,
                       wn * 2 / (t * 1e-6) / ceil_bw * 100, chk);
            }
            CK(cudaFree(c.part));
        }
    }
    return 0;
}
