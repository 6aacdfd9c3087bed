// skring_micro.cu -- where does a small-M GEMM lose against a pure read of
// its weights? stride_micro.cu (s124) showed that a read-only kernel
// streaming W through gemm_sk's own stage shape (128 rows x 64 k, 128-byte
// runs, a 4-slot cp.async ring, 256 blocks of 8 stages) reaches 87.6% of copy
// as a programmatic dependent on the o projection -- the read bound -- where
// gemm_sk / gemm_sk_tma reach 62-70% at M = 8..32. This probe builds the GEMM
// up from that stream, one part at a time, so the cost of each shows:
//   MODE 0  the W stream alone (the consumer XORs its words)
//   MODE 1  + x's stage (MAXM rows x 64 k) loaded beside W's
//   MODE 2  + ldmatrix and mma.sync m16n8k16 (gemm_sk's tiling: W rows as
//           the MMA's M side, x rows as its N side); each block stores its
//           fp32 partial (no reduction)
//   MODE 3  + the split-K reduction over a thread-block cluster through
//           distributed shared memory, bf16 out (the whole GEMM; checked
//           against an fp32 reference)
//   MODE 5  MODE 2 without the partials' stores (the MMAs' cost alone)
//   MODE 6  the split-K reduction pushed to the cluster's first block: each
//           other block stores its accumulators into rank 0's shared memory
//           with st.async (completing bytes on rank 0's mbarrier) and exits;
//           rank 0 waits, sums in rank order, stores bf16
//   MODE 7  MODE 5 launched as clusters (the cost of the cluster launch)
//   MODE 8  skring_kw (below): the K split inside the block too, warp groups on alternate chunks of
//           one ring, summed in shared memory, then a cluster of KSPL (MODE 9: its loop alone)
//   MODE 4  the split-K reduction instead through fp32 partials in global
//           memory, summed in K-range order by the last block of the tile
//           to arrive (an atomic counter a tile; deterministic)
//   MODE 10 the split-K reduction through global memory without a cluster
//           and without a serial tail: each block stores its fp32
//           accumulators (thread-major, float4 runs), the tile's KSPL blocks
//           meet at a counter in global memory (a software barrier: the host
//           runs it only where the whole grid is resident at once), then
//           block q sums the q-th 1 / KSPL of the tile's elements over the K
//           ranges in order (deterministic) and stores them in bf16
// out[M, N] = x[M, K] W[N, K]^T, bf16 in, fp32 accumulate. A block owns BN
// rows and one of KSPL K ranges; WARPS warps, each RT = BN / (16 WARPS)
// 16-row tiles. Launched plain and as a programmatic dependent (W's first
// S - 1 stages before griddepcontrol.wait, x after it).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o skring_micro bench/skring_micro.cu
#include <stdint.h>
#include "micro_common.cuh"


constexpr int MAXM = 32, NT = MAXM / 8;

// The split-K sum of a cluster (1, KSPL, 1), gemm_sk's: every block has parked its threads' ACCN accumulators at
// red + ((slot * ACCN + gi) * 32 + lane) * 4 in its shared memory (and the cluster synchronised since); this
// block (rank me) sums entries gi = me, me + KSPL, .. over the blocks in rank order -- every load issued before the
// sums -- and stores each in bf16 at out[m N + n], (m, n) = at(gi), m < M
template <int ACCN, int KSPL, class F>
__device__ __forceinline__ void cluster_sum_store(u32 red, int slot, int lane, u16 *out, int M, int N, F at) {
    const u32 me = cluster_rank();
    constexpr int PER = (ACCN + KSPL - 1) / KSPL;
    float v[PER][KSPL];
#pragma unroll
    for (int o = 0; o < PER; o++) {
        const int gi = (int)me + o * KSPL;
#pragma unroll
        for (int q = 0; q < KSPL; q++)
            v[o][q] = gi < ACCN ? cluster_ld(cluster_map(red, (u32)q) + (u32)((slot * ACCN + gi) * 32 + lane) * 4) : 0.0f;
    }
#pragma unroll
    for (int o = 0; o < PER; o++) {
        const int gi = (int)me + o * KSPL;
        if (gi >= ACCN) break;
        int m, n;
        at(gi, m, n);
        if (m >= M) continue;
        float sum = 0.0f;
#pragma unroll
        for (int q = 0; q < KSPL; q++) sum += v[o][q];
        out[(size_t)m * N + n] = f2bf(sum);
    }
}

template <int BN, int WARPS, int S, int KSPL, int MODE, bool PDL, int ROT>
__global__ void __launch_bounds__(WARPS * 32) skring(u16 *__restrict__ out, float *__restrict__ part,
                                                     const u16 *__restrict__ x, const u16 *__restrict__ w, int M, int N,
                                                     int K, int *__restrict__ cnt) {
    constexpr int THREADS = WARPS * 32, RT = BN / (16 * WARPS), WB = BN * 128, STB = WB + MAXM * 128;
    static_assert(RT >= 1 && BN % (16 * WARPS) == 0, "tiling");
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n_blk = blockIdx.x * BN, kr = K / KSPL, k_lo = blockIdx.y * kr, nst = kr / 64;
    const u32 sbase = (u32)__cvta_generic_to_shared(smem);
    // ROT: block x walks its chunks from chunk (7 x) mod nst on, so the N tiles
    // of one K range do not read the same x chunk at the same time
    const int rot = ROT ? (blockIdx.x * 7) % nst : 0;
    constexpr int ACC_T = RT * NT * 4;                       // accumulators a thread
    constexpr u32 RECV = S * STB;                            // MODE 6: rank 0's receive buffers past the ring
    constexpr u32 RECV_Q = THREADS * ACC_T * 4;              // bytes of one block's accumulators
    constexpr u32 MBAR = RECV + (KSPL - 1) * RECV_Q;         // its mbarrier
    if (MODE == 6) {
        if (blockIdx.y == 0 && tid == 0) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sbase + MBAR) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
            asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" ::"r"(sbase + MBAR),
                         "r"((KSPL - 1) * RECV_Q) : "memory");
        }
        asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); // waited for before any push
    }
    auto chunk = [&](int i) { return k_lo + (i + rot < nst ? i + rot : i + rot - nst) * 64; };
    auto load_w = [&](int i, int slot) {
        const int k0 = chunk(i);
        const u32 dst = sbase + slot * STB;
#pragma unroll
        for (int q = 0; q < BN * 8 / THREADS; q++) {
            const int idx = tid + q * THREADS, row = idx >> 3, seg = idx & 7;
            cp16(dst + row * 128 + ((seg ^ (row & 7)) << 4), w + (size_t)(n_blk + row) * K + k0 + seg * 8);
        }
    };
    auto load_x = [&](int i, int slot) {
        if (MODE < 1) return;
        const int k0 = chunk(i);
        const u32 dst = sbase + slot * STB + WB;
        for (int idx = tid; idx < M * 8; idx += THREADS) {
            const int row = idx >> 3, seg = idx & 7;
            cp16(dst + row * 128 + ((seg ^ (row & 7)) << 4), x + (size_t)row * K + k0 + seg * 8);
        }
    };
#pragma unroll
    for (int s = 0; s < S - 1; s++)
        if (s < nst) load_w(s, s);
    if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < nst) load_x(s, s);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    float acc[RT][NT][4];
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[r][j][e] = 0.0f;
    unsigned xs_acc = 0;
    const int a_row0 = warp * RT * 16 + (lane & 15), a_seg = lane >> 4;
    const int b_q = lane >> 3, b_seg = b_q & 1;
    for (int i = 0; i < nst; i++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
        __syncthreads();
        const int slot = i % S;
        if (i + S - 1 < nst) {
            load_w(i + S - 1, (i + S - 1) % S);
            load_x(i + S - 1, (i + S - 1) % S);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        const u32 ws = sbase + slot * STB, xsa = ws + WB;
        if (MODE < 2) {
            const uint4 *src = reinterpret_cast<const uint4 *>(smem + slot * STB);
            for (int e = tid; e < STB / 16; e += THREADS) {
                const uint4 v = src[e];
                xs_acc += v.x ^ v.y ^ v.z ^ v.w;
            }
        } else {
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                u32 a[RT][4], b[NT / 2][4];
#pragma unroll
                for (int r = 0; r < RT; r++) {
                    const int row = a_row0 + r * 16, seg = 2 * kk + a_seg;
                    ldsm_x4(a[r][0], a[r][1], a[r][2], a[r][3], ws + row * 128 + ((seg ^ (row & 7)) << 4));
                }
#pragma unroll
                for (int jp = 0; jp < NT / 2; jp++) {
                    const int row = 8 * (2 * jp + (b_q >> 1)) + (lane & 7), seg = 2 * kk + b_seg;
                    ldsm_x4(b[jp][0], b[jp][1], b[jp][2], b[jp][3], xsa + row * 128 + ((seg ^ (row & 7)) << 4));
                }
#pragma unroll
                for (int jp = 0; jp < NT / 2; jp++)
#pragma unroll
                    for (int r = 0; r < RT; r++) {
                        mma_bf16(acc[r][2 * jp], a[r][0], a[r][1], a[r][2], a[r][3], b[jp][0], b[jp][1]);
                        mma_bf16(acc[r][2 * jp + 1], a[r][0], a[r][1], a[r][2], a[r][3], b[jp][2], b[jp][3]);
                    }
            }
        }
    }
    if (PDL) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    // accumulator i = (r NT + j) 4 + e of thread ot: its x row m, its W row nl past the block's first
    auto acc_at = [&](int ot, int i, int &m, int &nl) {
        const int ow = ot >> 5, og = (ot & 31) >> 2, o4 = ot & 3, r = i / (NT * 4), j = (i / 4) % NT, e = i % 4;
        m = 8 * j + 2 * o4 + (e & 1), nl = 16 * (ow * RT + r) + og + 8 * (e >> 1);
    };
    // f(accumulator index, its x row m, its W row past the block's first) for each of this thread's
    auto each_acc = [&](auto f) {
#pragma unroll
        for (int i = 0; i < ACC_T; i++) {
            int m, nl;
            acc_at(tid, i, m, nl);
            f(i, m, nl);
        }
    };
    if (MODE < 2) {
        xs_acc += __shfl_xor_sync(0xffffffffu, xs_acc, 16);
        if (tid == 0) part[blockIdx.y * gridDim.x + blockIdx.x] = (float)xs_acc;
        return;
    }
    if (MODE == 10) {
        constexpr int E = THREADS * ACC_T, PER = E / (KSPL * THREADS);
        static_assert(E % (KSPL * THREADS) == 0, "mode 10: a block's slice of the tile");
        const float *a = &acc[0][0][0];
        float *pt = part + ((size_t)blockIdx.x * KSPL + blockIdx.y) * E + tid * ACC_T;
#pragma unroll
        for (int i = 0; i < ACC_T; i += 4)
            __stcg(reinterpret_cast<float4 *>(pt + i), make_float4(a[i], a[i + 1], a[i + 2], a[i + 3]));
        __threadfence();
        __syncthreads();
        if (tid == 0) {
            int *c = cnt + blockIdx.x;
            const int target = (atomicAdd(c, 1) / KSPL + 1) * KSPL; // this launch's KSPL arrivals
            int v;
            do asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
            while (v < target);
        }
        __syncthreads();
        const float *p0 = part + (size_t)blockIdx.x * KSPL * E;
        float v[PER][KSPL];
#pragma unroll
        for (int r = 0; r < PER; r++)
#pragma unroll
            for (int q = 0; q < KSPL; q++) v[r][q] = __ldcg(p0 + (size_t)q * E + blockIdx.y * (E / KSPL) + r * THREADS + tid);
#pragma unroll
        for (int r = 0; r < PER; r++) {
            float sum = 0.0f;
#pragma unroll
            for (int q = 0; q < KSPL; q++) sum += v[r][q];
            const int f = blockIdx.y * (E / KSPL) + r * THREADS + tid;
            int m, nl;
            acc_at(f / ACC_T, f % ACC_T, m, nl);
            if (m < M) out[(size_t)m * N + n_blk + nl] = f2bf(sum);
        }
        return;
    }
    if (MODE == 4 || (MODE == 2 && KSPL == 1)) {
        // partial tile [tile][K range][M][BN] (KSPL 1: the output, bf16)
        float *pt = part + ((size_t)blockIdx.x * KSPL + blockIdx.y) * M * BN;
        const float *a = &acc[0][0][0];
        each_acc([&](int i, int m, int nl) {
            if (m >= M) return;
            if (KSPL == 1) out[(size_t)m * N + n_blk + nl] = f2bf(a[i]);
            else pt[m * BN + nl] = a[i];
        });
        if (KSPL == 1) return;
        __shared__ int last;
        __threadfence();
        __syncthreads();
        if (tid == 0) last = atomicAdd(cnt + blockIdx.x, 1) == KSPL - 1;
        __syncthreads();
        if (!last) return;
        __threadfence();
        const float *p0 = part + (size_t)blockIdx.x * KSPL * M * BN;
        for (int idx = tid; idx < M * BN; idx += THREADS) {
            float sum = 0.0f;
#pragma unroll
            for (int q = 0; q < KSPL; q++) sum += __ldcg(p0 + (size_t)q * M * BN + idx);
            out[(size_t)(idx / BN) * N + n_blk + idx % BN] = f2bf(sum);
        }
        if (tid == 0) cnt[blockIdx.x] = 0;
        return;
    }
    if (MODE == 6) {
        asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); // rank 0's mbarrier is initialised
        const float *a = &acc[0][0][0];
        if (blockIdx.y > 0) { // push: thread tid's accumulators, contiguous
            const u32 dst = cluster_map(sbase + RECV + (blockIdx.y - 1) * RECV_Q + tid * ACC_T * 4, 0u);
            const u32 mb = cluster_map(sbase + MBAR, 0u);
#pragma unroll
            for (int i = 0; i < ACC_T; i += 4)
                asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                                 dst + i * 4),
                             "f"(a[i]), "f"(a[i + 1]), "f"(a[i + 2]), "f"(a[i + 3]), "r"(mb)
                             : "memory");
            return;
        }
        asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0; @!p bra W; }" ::"r"(sbase + MBAR)
                     : "memory");
        float sum[ACC_T];
#pragma unroll
        for (int i = 0; i < ACC_T; i++) sum[i] = a[i];
#pragma unroll
        for (int q = 0; q < KSPL - 1; q++) {
            const float4 *src = reinterpret_cast<const float4 *>(smem + RECV + q * RECV_Q + tid * ACC_T * 4);
#pragma unroll
            for (int i = 0; i < ACC_T; i += 4) {
                const float4 v = src[i / 4];
                sum[i] += v.x, sum[i + 1] += v.y, sum[i + 2] += v.z, sum[i + 3] += v.w;
            }
        }
        each_acc([&](int i, int m, int nl) {
            if (m < M) out[(size_t)m * N + n_blk + nl] = f2bf(sum[i]);
        });
        return;
    }
    if (MODE == 5 || MODE == 7) {
        keep_live<RT * NT * 4>(&acc[0][0][0], part + tid);
        return;
    }
    if (MODE == 2) { // each block's fp32 partial [KSPL][M][N]
        const float *a = &acc[0][0][0];
        each_acc([&](int i, int m, int nl) {
            if (m < M) part[((size_t)blockIdx.y * M + m) * N + n_blk + nl] = a[i];
        });
        return;
    }
    // MODE 3: the cluster (1, KSPL, 1) sums its K ranges through distributed shared memory
    constexpr int ACCN = RT * NT * 4;
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    float *red = reinterpret_cast<float *>(smem); // [WARPS][ACCN][32]
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) red[(warp * ACCN + (r * NT + j) * 4 + e) * 32 + lane] = acc[r][j][e];
    cluster_sync_all();
    cluster_sum_store<ACCN, KSPL>(sbase, warp, lane, out, M, N, [&](int gi, int &m, int &n) {
        acc_at(tid, gi, m, n);
        n += n_blk;
    });
    cluster_sync_all();
}


// MODE 8 (skring_kw): the K split inside the block as well. KW warp groups of GW warps (16 W rows a warp,
// BN = 16 GW rows a block) share one ring whose stage is KW 64-wide chunks; group g multiplies chunk g of
// each stage. After the loop the groups' sums meet in shared memory (group 0 adds the others in order),
// then, with KSPL > 1, the cluster (1, KSPL, 1) sums its K ranges as gemm_sk does (DSMEM reads between
// cluster barriers); bf16 out. MODE 9: the same without anything stored (the loop alone, no cluster).
template <int GW, int KW, int S, int KSPL, int MODE, bool PDL>
__global__ void __launch_bounds__(GW * KW * 32) skring_kw(u16 *__restrict__ out, float *__restrict__ part,
                                                         const u16 *__restrict__ x, const u16 *__restrict__ w, int M,
                                                         int N, int K, int *__restrict__ cnt) {
    constexpr int THREADS = GW * KW * 32, BN = 16 * GW, WB = BN * 128, STB = WB + MAXM * 128, SSB = KW * STB;
    constexpr int ACCN = NT * 4;
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, grp = warp / GW, wg = warp % GW;
    const int n_blk = blockIdx.x * BN, kr = K / KSPL, k_lo = blockIdx.y * kr, nst = kr / (64 * KW);
    const u32 sbase = (u32)__cvta_generic_to_shared(smem);
    auto load = [&](int i, int slot, bool wpart) { // super-stage i: KW chunks into slot's KW sub-slots
#pragma unroll
        for (int kk = 0; kk < KW; kk++) {
            const int k0 = k_lo + (i * KW + kk) * 64;
            const u32 dst = sbase + slot * SSB + kk * STB;
            if (wpart) {
#pragma unroll
                for (int q = 0; q < (BN * 8 + THREADS - 1) / THREADS; q++) {
                    const int idx = tid + q * THREADS, row = idx >> 3, seg = idx & 7;
                    if (idx < BN * 8)
                        cp16(dst + row * 128 + ((seg ^ (row & 7)) << 4), w + (size_t)(n_blk + row) * K + k0 + seg * 8);
                }
            } else {
                for (int idx = tid; idx < M * 8; idx += THREADS) {
                    const int row = idx >> 3, seg = idx & 7;
                    cp16(dst + WB + row * 128 + ((seg ^ (row & 7)) << 4), x + (size_t)row * K + k0 + seg * 8);
                }
            }
        }
    };
#pragma unroll
    for (int s = 0; s < S - 1; s++)
        if (s < nst) load(s, s, true);
    if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < nst) load(s, s, false);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[j][e] = 0.0f;
    const int a_row = wg * 16 + (lane & 15), a_seg = lane >> 4, b_q = lane >> 3, b_seg = b_q & 1;
    for (int i = 0; i < nst; i++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
        __syncthreads();
        if (i + S - 1 < nst) {
            load(i + S - 1, (i + S - 1) % S, true);
            load(i + S - 1, (i + S - 1) % S, false);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        const u32 ws = sbase + (i % S) * SSB + grp * STB, xsa = ws + WB;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            u32 a[4], b[NT / 2][4];
            {
                const int seg = 2 * kk + a_seg;
                ldsm_x4(a[0], a[1], a[2], a[3], ws + a_row * 128 + ((seg ^ (a_row & 7)) << 4));
            }
#pragma unroll
            for (int jp = 0; jp < NT / 2; jp++) {
                const int row = 8 * (2 * jp + (b_q >> 1)) + (lane & 7), seg = 2 * kk + b_seg;
                ldsm_x4(b[jp][0], b[jp][1], b[jp][2], b[jp][3], xsa + row * 128 + ((seg ^ (row & 7)) << 4));
            }
#pragma unroll
            for (int jp = 0; jp < NT / 2; jp++) {
                mma_bf16(acc[2 * jp], a[0], a[1], a[2], a[3], b[jp][0], b[jp][1]);
                mma_bf16(acc[2 * jp + 1], a[0], a[1], a[2], a[3], b[jp][2], b[jp][3]);
            }
        }
    }
    if (PDL) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (MODE == 9) {
        keep_live<NT * 4>(&acc[0][0], part + tid);
        return;
    }
    // the groups' sums: groups 1.. park theirs, group 0 adds them in group order
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    float *red = reinterpret_cast<float *>(smem); // [KW - 1][GW][ACCN][32], then group 0's [GW][ACCN][32]
    if (grp > 0)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) red[(((grp - 1) * GW + wg) * ACCN + j * 4 + e) * 32 + lane] = acc[j][e];
    __syncthreads();
    float *own = red + (KW - 1) * GW * ACCN * 32;
    if (grp == 0) {
#pragma unroll
        for (int q = 1; q < KW; q++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[j][e] += red[(((q - 1) * GW + wg) * ACCN + j * 4 + e) * 32 + lane];
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) own[(wg * ACCN + j * 4 + e) * 32 + lane] = acc[j][e];
    }
    const int g = lane >> 2, t = lane & 3;
    if (KSPL == 1) {
        if (grp == 0)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int m = 8 * j + 2 * t + (e & 1), n = n_blk + 16 * wg + g + 8 * (e >> 1);
                    if (m < M) out[(size_t)m * N + n] = f2bf(acc[j][e]);
                }
        return;
    }
    cluster_sync_all();
    if (grp == 0) // rank r of the cluster sums entries r, r + KSPL, .. of group 0's accumulators over the K ranges
        cluster_sum_store<ACCN, KSPL>(sbase + (u32)((KW - 1) * GW * ACCN * 32 * 4), wg, lane, out, M, N,
                                      [&](int gi, int &m, int &n) {
                                          const int j = gi / 4, e = gi % 4;
                                          m = 8 * j + 2 * t + (e & 1), n = n_blk + 16 * wg + g + 8 * (e >> 1);
                                      });
    cluster_sync_all();
}

typedef void (*kfn)(u16 *, float *, const u16 *, const u16 *, int, int, int, int *);
struct Ctx {
    u16 *w[4], *x, *out;
    float *part;
    int *cnt;
    int M, N, K, bn, kspl, threads, cluster;
    unsigned smem;
    kfn f;
    bool pdl;
};
static void launch(Ctx *c, int s) {
    LaunchCfg l(dim3(c->N / c->bn, c->kspl), c->threads, c->smem, c->pdl, c->cluster ? c->kspl : 0);
    CK(cudaLaunchKernelEx(&l.cfg, c->f, c->out, c->part, (const u16 *)c->x, (const u16 *)c->w[s], c->M, c->N, c->K, c->cnt));
}

struct Var {
    const char *name;
    kfn f, fp;
    int bn, warps, s, kspl, mode, kw; // kw: skring_kw's warp groups (0: skring)
};
#define V(BN, W, S, KS, MODE) VR(BN, W, S, KS, MODE, 0)
#define VR(BN, W, S, KS, MODE, ROT)                                                                                  \
    {#BN " rows " #W " warps " #S " slots split " #KS " rot " #ROT " mode " #MODE, skring<BN, W, S, KS, MODE, false, ROT>, \
     skring<BN, W, S, KS, MODE, true, ROT>, BN, W, S, KS, MODE}
// all four modes of one tiling
#define V4(BN, W, S, KS) V(BN, W, S, KS, 0), V(BN, W, S, KS, 1), V(BN, W, S, KS, 2), V(BN, W, S, KS, 3)

int main(int argc, char **argv) {
    const int M = argc > 1 ? atoi(argv[1]) : 32;
    const double ceil_bw = copy_ceiling();
    const struct { const char *n; int N, K; } shapes[] = {{"o", 4096, 4096}, {"qkv", 6144, 4096}, {"down", 4096, 14336}};
#define V4C(BN, W, S, KS) V(BN, W, S, KS, 5), V(BN, W, S, KS, 7), V(BN, W, S, KS, 6), V(BN, W, S, KS, 3)
// skring_kw: GW warps a group (BN = 16 GW), KW groups, S slots of KW chunks, KSPL: mode 9 (loop alone) and 8
#define VKW(GW, KW, S, KS, MODE)                                                                                     \
    {"kw: " #GW " warps x " #KW " groups (" #GW "*16 rows) " #S " slots split " #KS " mode " #MODE,                 \
     skring_kw<GW, KW, S, KS, MODE, false>, skring_kw<GW, KW, S, KS, MODE, true>, 16 * GW, GW * KW, S, KS, MODE, KW}
#define VKW2(GW, KW, S, KS) VKW(GW, KW, S, KS, 9), VKW(GW, KW, S, KS, 8)
    const Var vs[] = {
        V(128, 8, 4, 8, 5), V(64, 4, 4, 4, 5), V(64, 4, 4, 4, 3),
        VKW2(4, 2, 4, 2), VKW2(4, 2, 6, 2), VKW2(4, 2, 3, 2), VKW2(4, 2, 4, 1), VKW2(2, 4, 4, 1), VKW2(2, 4, 4, 2),
        VKW2(4, 4, 3, 2), VKW2(8, 2, 3, 2), VKW2(4, 2, 4, 4),
    };
    // `skring_micro M sync`: mode 10 beside the MMAs alone (5) in tilings of 2 blocks an SM
    const Var vsync[] = {
        V(128, 8, 4, 8, 5), V(128, 8, 4, 8, 10), V(128, 8, 5, 8, 5), V(128, 8, 5, 8, 10),
        V(64, 4, 6, 4, 5), V(64, 4, 6, 4, 10), V(64, 4, 8, 4, 5), V(64, 4, 8, 4, 10),
        V(128, 8, 5, 4, 5), V(128, 8, 5, 4, 10), V(192, 12, 3, 8, 5), V(192, 12, 3, 8, 10), V(192, 12, 4, 8, 10),
        V(64, 4, 8, 2, 10), V(128, 8, 5, 2, 10),
    };
    const bool sync = argc > 2 && !strcmp(argv[2], "sync");
    const Var *vbeg = sync ? vsync : vs, *vend = sync ? vsync + sizeof vsync / sizeof *vsync : vs + sizeof vs / sizeof *vs;
    for (auto &sh : shapes) {
        if (sync && sh.K != 4096) continue;
        const GemmInputs in(sh.N, sh.K, M, 3);
        const std::vector<float> ref = in.ref(M);
        const size_t wn = (size_t)sh.N * sh.K;
        Ctx c = {};
        c.M = M, c.N = sh.N, c.K = sh.K, c.x = in.x, c.out = in.out;
        for (int s = 0; s < 4; s++) c.w[s] = in.w[s];
        CK(cudaMalloc(&c.part, (size_t)8 * MAXM * sh.N * 4));
        CK(cudaMalloc(&c.cnt, (size_t)sh.N * 4));
        CK(cudaMemset(c.cnt, 0, (size_t)sh.N * 4));
        for (const Var *vp = vbeg; vp != vend; vp++) {
            const Var &v = *vp;
            if ((sh.K / v.kspl) % (64 * (v.kw ? v.kw : 1)) || sh.N % v.bn) continue;
            if (v.s * (v.bn * 128 + MAXM * 128) + (v.mode == 6 ? (v.kspl - 1) * v.bn * MAXM * 4 + 8 : 0) > 227 * 1024) continue;
            c.bn = v.bn, c.kspl = v.kspl, c.threads = v.warps * 32;
            c.cluster = v.mode == 3 || v.mode == 6 || v.mode == 7 || (v.mode == 8 && v.kspl > 1);
            c.smem = (unsigned)(v.s * (v.bn * 128 + MAXM * 128) * (v.kw ? v.kw : 1));
            if (v.mode == 6) c.smem += (unsigned)((v.kspl - 1) * v.bn * MAXM * 4 + 8);
            for (int pdl = 1; pdl < 2; pdl++) { // (plain launches: pdl from 0)
                c.f = pdl ? v.fp : v.f;
                c.pdl = pdl;
                CK(cudaFuncSetAttribute(c.f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem));
                if (v.mode == 10) { // the tile barrier needs every block resident at once
                    int per = 0, sms = 0;
                    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, c.f, c.threads, c.smem));
                    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
                    if (per * sms < sh.N / v.bn * v.kspl) {
                        printf("%-4s M %2d %-40s skipped: grid %d > %d resident\n", sh.n, M, v.name, sh.N / v.bn * v.kspl, per * sms);
                        continue;
                    }
                }
                if (v.kspl > 8) CK(cudaFuncSetAttribute(c.f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
                const char *chk = "";
                if (v.mode == 3 || v.mode == 4 || v.mode == 6 || v.mode == 8 || v.mode == 10 || (v.mode == 2 && v.kspl == 1))
                    chk = in.rel_err(M, ref, [&] { launch(&c, 0); }) < 1e-2 ? "ok" : "WRONG";
                const float t = time_launches(launch, &c, 4);
                printf("%-4s M %2d %-40s %-3s grid %4d smem %6u %7.2f us %6.1f%% %s\n", sh.n, M, v.name, pdl ? "PDL" : "",
                       sh.N / v.bn * v.kspl, c.smem, t, wn * 2 / (t * 1e-6) / ceil_bw * 100, chk);
            }
        }
        CK(cudaFree(c.part));
        CK(cudaFree(c.cnt));
    }
    return 0;
}
