// sample_argmax.cu -- greedy sampling with each row split over a thread-block
// cluster (engine/cuda/ops_gpu.h kiln_gpu_sample_greedy). For every row of
// fp32 logits [n_rows, V]: the token kiln_sample (sample.cu) picks at
// temperature <= 0 -- the argmax, the lowest index among equal maxima, NaNs
// never chosen, token 0 when no value compares -- and, when out_logprobs is
// given, log_softmax(logits)[token] at temperature 1 (within fp32 rounding of
// kiln_sample's: the sum of exp is ordered differently).
//
// Block r of a row's cluster of CL reads the r-th chunk of the row's 4-float
// groups (16-byte loads where every row is 16-byte aligned, scalar loads
// else) once, RG groups a thread in flight, and keeps per thread the max m,
// its lowest index and s = sum exp(l - m) (rescaled once a tile when m
// grows); the block reduces its threads' records in a fixed tree and stores
// its record into block 0's shared memory (st.shared::cluster); after the
// cluster barrier block 0 merges the CL records in rank order: the token,
// lse = log(sum_r s_r * exp(m_r - max)) and the logprob l[token] - max - lse.
// Deterministic (fixed chunks, fixed reduction order).
//
// CL > 1 needs sm_90 (the host launches kiln_sample before it); CL = 1 is one
// block a row on any GPU. Grid (CL, n_rows), clusters (CL, 1, 1), NT threads.
#include "kiln_common.cuh"

#ifndef CL
#define CL 8
#endif
static_assert(CL == 1 || CL == 2 || CL == 4 || CL == 8, "CL: 1, 2, 4 or 8 (a portable cluster)");

#define NT 1024
#define RG 4 // 4-float groups a thread loads at once (V up to CL * NT * 4 * RG in one tile)

#if CL > 1 && __CUDA_ARCH__ >= 900
#define SA_CLUSTER __cluster_dims__(CL, 1, 1)
#define SA_RUN 1
#elif CL > 1
#define SA_CLUSTER
#define SA_RUN 0 // the host never launches a cluster before sm_90
#else
#define SA_CLUSTER
#define SA_RUN 1
#endif

struct sa_rec {
    float m, s; // max and sum exp(l - m) over a set
    int i;      // the lowest index of m (0x7fffffff: none compared)
};

// (a) absorbs (b): kiln_sample's argmax order, the sums rescaled to the larger max
KILN_DEV void sa_merge(sa_rec &a, const sa_rec &b) {
    if (b.m > a.m || (b.m == a.m && b.i < a.i)) a.i = b.i;
    if (b.m > a.m) {
        a.s = a.s * expf(a.m - b.m) + b.s;
        a.m = b.m;
    } else if (b.m == a.m) {
        a.s += b.s;
    } else {
        a.s += b.s * expf(b.m - a.m);
    }
}

// Logits 4 g .. 4 g + 3 of a row (vec: the row 16-byte aligned and V % 4 == 0, one load); NaN past V and
// for g >= g_end (NaNs never win: the comparisons above skip them)
KILN_DEV float4 sa_load4(const float *l, int g, int g_end, int V, bool vec) {
    if (g >= g_end) return make_float4(KILN_NAN, KILN_NAN, KILN_NAN, KILN_NAN);
    if (vec) return reinterpret_cast<const float4 *>(l)[g];
    const int e = g * 4;
    return make_float4(l[e], e + 1 < V ? l[e + 1] : KILN_NAN, e + 2 < V ? l[e + 2] : KILN_NAN,
                       e + 3 < V ? l[e + 3] : KILN_NAN);
}
// the empty record (what sa_merge absorbs without change)
KILN_DEV sa_rec sa_none() {
    sa_rec r;
    r.m = -KILN_INF, r.s = 0.0f, r.i = 0x7fffffff;
    return r;
}
// (m, i) takes the logits of group v (indices e .. e + 3) in order: a larger one, or an equal one at a lower index
KILN_DEV void sa_max4(float &m, int &i, const float4 &v, int e) {
    const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
        if (x[j] > m || (x[j] == m && e + j < i)) m = x[j], i = e + j;
}
// s += exp(x - mm) over group v's logits in order: padding (past V) is NaN: skipped; -inf adds 0 (also when mm is -inf)
KILN_DEV void sa_expsum4(float &s, const float4 &v, int e, int V, float mm) {
    const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
        if (e + j < V && x[j] != -KILN_INF) s += expf(x[j] - mm);
}
// a row's result from its merged record: the token (0 when no logit compared: a row of NaN) and its logprob
KILN_DEV void sa_put(int *out_tokens, float *out_logprobs, const float *l, int row, int V, const sa_rec &r) {
    const int token = r.i < V ? r.i : 0;
    out_tokens[row] = token;
    if (out_logprobs) out_logprobs[row] = l[token] - r.m - logf(r.s);
}
KILN_DEV sa_rec sa_shfl(const sa_rec &r, int o) {
    sa_rec t;
    t.m = __shfl_xor_sync(0xffffffffu, r.m, o);
    t.s = __shfl_xor_sync(0xffffffffu, r.s, o);
    t.i = __shfl_xor_sync(0xffffffffu, r.i, o);
    return t;
}

// The block's record (NW warps; warp_rec: NW slots): a fixed tree over
// lanes, then over the warps' records in warp 0 (its lanes past NW take the
// empty record); the result in warp 0's lanes.
template <int NW> KILN_DEV sa_rec sa_block(sa_rec me, sa_rec *warp_rec) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sa_merge(me, sa_shfl(me, o));
    if (lane == 0) warp_rec[w] = me;
    __syncthreads();
    if (w == 0) {
        if (NW == 32 || lane < NW) { // (a branch, not a select: the code measured in the eighteenth session)
            me = warp_rec[lane];
        } else {
            me = sa_none();
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) sa_merge(me, sa_shfl(me, o));
    }
    return me;
}

#if CL > 1 && __CUDA_ARCH__ >= 900
KILN_DEV void sa_st_f32(u32 a, float v) { asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(a), "f"(v) : "memory"); }
KILN_DEV void sa_st_s32(u32 a, int v) { asm volatile("st.shared::cluster.s32 [%0], %1;" ::"r"(a), "r"(v) : "memory"); }
#endif

extern "C" __global__ void __launch_bounds__(NT) SA_CLUSTER
kiln_sample_argmax(int *out_tokens, float *out_logprobs, const float *logits, int V) {
#if SA_RUN
#if CL > 1
    // every block of the cluster has started before any stores into block 0
    // (the wait comes just before the store)
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    const u32 rank = cluster_rank();
#else
    const u32 rank = 0;
#endif
    __shared__ sa_rec warp_rec[NT / 32];
    __shared__ sa_rec cl_rec[CL];
    pdl_wait();
    pdl_launch();
    const int row = blockIdx.y;
    const float *l = logits + (size_t)row * V;
    const bool want_lp = out_logprobs != nullptr;
    // every row 16-byte aligned: the base and the row stride
    const bool vec = ((u64)logits & 15) == 0 && (V & 3) == 0;
    const int G = (V + 3) >> 2, per = (G + CL - 1) / CL;
    const int c0 = (int)rank * per, c1 = min(G, c0 + per);

    sa_rec me = sa_none();
    for (int t0 = c0; t0 < c1; t0 += NT * RG) {
        float4 v[RG];
#pragma unroll
        for (int k = 0; k < RG; k++) v[k] = sa_load4(l, t0 + k * NT + (int)threadIdx.x, c1, V, vec);
        // the tile's max and its lowest index (this thread sees indices in increasing order)
        float tm = -KILN_INF;
        int ti = 0x7fffffff;
#pragma unroll
        for (int k = 0; k < RG; k++) sa_max4(tm, ti, v[k], (t0 + k * NT + (int)threadIdx.x) * 4);
        if (tm > me.m || (tm == me.m && ti < me.i)) me.i = ti;
        if (want_lp) {
            if (tm > me.m) me.s *= expf(me.m - tm), me.m = tm;
            // groups past the chunk skipped
            float s = 0.0f;
#pragma unroll
            for (int k = 0; k < RG; k++)
                if (t0 + k * NT + (int)threadIdx.x < c1) sa_expsum4(s, v[k], (t0 + k * NT + (int)threadIdx.x) * 4, V, me.m);
            me.s += s;
        } else if (tm > me.m) {
            me.m = tm;
        }
    }
    // the block's record
    me = sa_block<NT / 32>(me, warp_rec);
#if CL > 1
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
    if (threadIdx.x == 0) {
        const u32 a = cluster_map(smem_addr(&cl_rec[rank]), 0);
        sa_st_f32(a, me.m);
        sa_st_f32(a + 4, me.s);
        sa_st_s32(a + 8, me.i);
    }
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
    if (threadIdx.x == 0) cl_rec[0] = me;
    __syncthreads();
#endif
    if (rank == 0 && threadIdx.x == 0) {
        sa_rec r = cl_rec[0];
#pragma unroll
        for (int q = 1; q < CL; q++) sa_merge(r, cl_rec[q]);
        sa_put(out_tokens, out_logprobs, l, row, V, r);
    }
#else
    __trap(); // a cluster needs sm_90 (the host launches kiln_sample before it)
#endif
}

// ------------------------------------------------------------------ split
// kiln_sample_argmax_split: the same token and logprob with each row split
// into chunks of SNT * SPT 4-float groups, a block of SNT threads a chunk
// (grid (chunks, n_rows), any GPU, no cluster): every thread loads its SPT
// groups at once, the block reduces its threads' records in a fixed tree and
// stores the chunk's record into part[row * chunks + chunk]; the block that
// arrives last on counters[row] (fence, then an atomic add: the partial
// records are visible to it) merges the row's records -- lane c the chunks
// c, c + 32, ... in order, then a fixed tree over lanes, so the result does
// not depend on the order of arrival -- writes the token and logprob and
// sets the counter back to 0 for the next launch. Many small blocks keep
// more of the logits in flight than a cluster of four 1024-thread blocks a
// row (engine/cuda/ops_gpu.c kiln_gpu_sample_greedy).
#define SNT 256
#define SPT 4

extern "C" __global__ void __launch_bounds__(SNT)
kiln_sample_argmax_split(int *out_tokens, float *out_logprobs, const float *logits, int V, sa_rec *part,
                         int *counters) {
    __shared__ sa_rec warp_rec[SNT / 32];
    __shared__ int last;
    pdl_wait();
    pdl_launch();
    const int row = blockIdx.y, chunk = blockIdx.x, chunks = gridDim.x;
    const float *l = logits + (size_t)row * V;
    const bool want_lp = out_logprobs != nullptr;
    const bool vec = ((u64)logits & 15) == 0 && (V & 3) == 0;
    const int G = (V + 3) >> 2, t0 = chunk * SNT * SPT;
    float4 v[SPT];
#pragma unroll
    for (int k = 0; k < SPT; k++) v[k] = sa_load4(l, t0 + k * SNT + (int)threadIdx.x, G, V, vec);
    // this thread's max and its lowest index (indices in increasing order), then sum exp(l - max)
    sa_rec me = sa_none();
#pragma unroll
    for (int k = 0; k < SPT; k++) sa_max4(me.m, me.i, v[k], (t0 + k * SNT + (int)threadIdx.x) * 4);
    if (want_lp) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < SPT; k++) sa_expsum4(s, v[k], (t0 + k * SNT + (int)threadIdx.x) * 4, V, me.m);
        me.s = s;
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    me = sa_block<SNT / 32>(me, warp_rec);
    if (w == 0) {
        if (lane == 0) {
            part[(size_t)row * chunks + chunk] = me;
            __threadfence();
            last = atomicAdd(&counters[row], 1) == chunks - 1;
        }
    }
    __syncthreads();
    if (!last || w != 0) return;
    __threadfence();
    sa_rec r = sa_none();
    for (int c = lane; c < chunks; c += 32) {
        const volatile sa_rec *p = part + (size_t)row * chunks + c;
        sa_rec q;
        q.m = p->m, q.s = p->s, q.i = p->i;
        sa_merge(r, q);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sa_merge(r, sa_shfl(r, o));
    if (lane == 0) {
        sa_put(out_tokens, out_logprobs, l, row, V, r);
        counters[row] = 0;
    }
}
