// sample.cu -- token sampling on the GPU for a batch of rows of fp32 logits.
// Semantics: engine/sampler.h (the CPU reference), one block per row:
//   kiln_sample_penalties: repetition penalty over prompt + output tokens
//     (logit > 0 ? logit / p : logit * p), then presence and frequency over
//     output tokens (logit -= presence * (count > 0) + frequency * count),
//     then banned ids -> -inf; in place. counts [n_rows, V] int32 must be
//     zero on entry and is left zero.
//   kiln_sample: temperature <= 0 or a non-finite max: argmax (lowest index
//     on ties). Else e = expf(l * (1/T) - max(l) * (1/T)) (so the max has
//     e = 1 and p = e / Z) like engine/sampler.c;
//     keep e >= max(t_k, t_p, min_p): t_k the k-th largest e (top_k > 0),
//     t_p the largest e-value t with sum(e >= t) >= top_p * Z (0 < top_p < 1);
//     u = Philox(seed, counter (hi = step, lo = 0)) word 0 as [0,1); the
//     token is the first index, in vocabulary order, whose cumulative kept
//     mass exceeds u * (kept mass). Masses are summed in 2^-32 fixed point
//     so the choice is deterministic. ws [n_rows, V] f32 holds e.
//     logprobs[row] (optional) = log_softmax(logits)[token] at temperature 1.
// Grid (n_rows), 1024 threads.
#include "kiln_common.cuh"

struct sample_params { // engine/cuda/ops_gpu.h kiln_gpu_sample_params
    float temperature, top_p, min_p, repetition, presence, frequency;
    int top_k, pad;
    u64 seed, step;
};

#define NT 1024

__device__ __forceinline__ u64 to_fix(float e) { return (u64)__float2ull_rn(e * 4294967296.0f); }

__device__ u64 block_sum_u64(u64 v, u64 *scratch) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (lane == 0) scratch[w] = v;
    __syncthreads();
    v = lane < (NT / 32) ? scratch[lane] : 0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void __launch_bounds__(NT)
kiln_sample_penalties(float *logits, int V, const sample_params *params, const int *prompt_ids, const int *prompt_off,
                      const int *out_ids, const int *out_off, const int *banned_ids, const int *banned_off,
                      int *counts) {
    pdl_wait();
    pdl_launch();
    const int row = blockIdx.x;
    const sample_params p = params[row];
    float *l = logits + (size_t)row * V;
    int *cnt = counts + (size_t)row * V;
    const bool use_rep = p.repetition != 1.0f && p.repetition > 0.0f;
    const bool pen = use_rep || p.presence != 0.0f || p.frequency != 0.0f;
    if (pen) {
        int p0 = prompt_ids ? prompt_off[row] : 0, p1 = prompt_ids ? prompt_off[row + 1] : 0;
        int o0 = out_ids ? out_off[row] : 0, o1 = out_ids ? out_off[row + 1] : 0;
        for (int i = p0 + threadIdx.x; i < p1; i += NT) {
            int id = prompt_ids[i];
            if (id >= 0 && id < V) atomicOr(&cnt[id], 1 << 30);
        }
        for (int i = o0 + threadIdx.x; i < o1; i += NT) {
            int id = out_ids[i];
            if (id >= 0 && id < V) atomicAdd(&cnt[id], 1);
        }
        __syncthreads();
        // one thread per distinct id claims it (and clears the count)
        int n_all = (p1 - p0) + (o1 - o0);
        for (int i = threadIdx.x; i < n_all; i += NT) {
            int id = i < p1 - p0 ? prompt_ids[p0 + i] : out_ids[o0 + i - (p1 - p0)];
            if (id < 0 || id >= V) continue;
            int c = atomicExch(&cnt[id], 0);
            if (!c) continue;
            float x = l[id];
            if (use_rep) x = x > 0.0f ? x / p.repetition : x * p.repetition;
            int n = c & 0xffffff;
            // no contraction: the same roundings as the host reference
            x = __fsub_rn(x, __fadd_rn(__fmul_rn(p.presence, n > 0 ? 1.0f : 0.0f), __fmul_rn(p.frequency, (float)n)));
            l[id] = x;
        }
        __syncthreads();
    }
    if (banned_ids) {
        for (int i = banned_off[row] + threadIdx.x; i < banned_off[row + 1]; i += NT) {
            int id = banned_ids[i];
            if (id >= 0 && id < V) l[id] = -KILN_INF;
        }
    }
}

extern "C" __global__ void __launch_bounds__(NT)
kiln_sample(int *out_tokens, float *out_logprobs, const float *logits, int V, const sample_params *params, float *ws) {
    pdl_wait();
    pdl_launch();
    __shared__ float fs[32];
    __shared__ int is[32];
    __shared__ u64 us[32];
    const int row = blockIdx.x;
    const sample_params p = params[row];
    const float *l = logits + (size_t)row * V;
    float *e = ws + (size_t)row * V;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;

    // pass 1: max and argmax (lowest index among equals)
    float best = -KILN_INF;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < V; i += NT) {
        float x = l[i];
        if (x > best || (x == best && i < bi)) { best = x; bi = i; }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ob = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ob > best || (ob == best && oi < bi)) { best = ob; bi = oi; }
    }
    if (lane == 0) { fs[w] = best; is[w] = bi; }
    __syncthreads();
    best = fs[lane];
    bi = is[lane];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ob = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ob > best || (ob == best && oi < bi)) { best = ob; bi = oi; }
    }
    const float lmax = best;
    int token = bi < V ? bi : 0;
    __syncthreads();

    float lse = 0.0f;
    if (out_logprobs) {
        float s1 = 0.0f;
        for (int i = threadIdx.x; i < V; i += NT) s1 += expf(l[i] - lmax);
        lse = logf(block_sum(s1, fs));
    }

    if (p.temperature > 0.0f && isfinite(lmax)) {
        const float inv_t = 1.0f / p.temperature, mx = lmax * inv_t;
        // pass 2: e = exp(l/T - max/T) into ws; Z in fixed point
        u64 zf = 0;
        for (int i = threadIdx.x; i < V; i += NT) {
            float x = expf(__fsub_rn(__fmul_rn(l[i], inv_t), mx));
            e[i] = x;
            zf += to_fix(x);
        }
        zf = block_sum_u64(zf, us);
        // thresholds by bisection over the bit patterns of e in [0, 1]
        const bool use_k = p.top_k > 0 && p.top_k < V, use_p = p.top_p > 0.0f && p.top_p < 1.0f;
        u32 klo = 0, khi = 0x3f800001u, plo = 0, phi = 0x3f800001u;
        const u64 ptarget = (u64)((double)p.top_p * (double)zf);
        while ((use_k && khi - klo > 1) || (use_p && phi - plo > 1)) {
            u32 km = klo + (khi - klo) / 2, pm = plo + (phi - plo) / 2;
            float kt = __uint_as_float(km), pt = __uint_as_float(pm);
            int c = 0;
            u64 f = 0;
            for (int i = threadIdx.x; i < V; i += NT) {
                float x = e[i];
                c += x >= kt;
                f += x >= pt ? to_fix(x) : 0;
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
            __syncthreads();
            if (lane == 0) is[w] = c;
            __syncthreads();
            c = 0;
#pragma unroll
            for (int k = 0; k < NT / 32; k++) c += is[k];
            f = block_sum_u64(f, us);
            if (use_k && khi - klo > 1) { if (c >= p.top_k) klo = km; else khi = km; }
            if (use_p && phi - plo > 1) { if (f >= ptarget) plo = pm; else phi = pm; }
        }
        float t = 0.0f;
        if (use_k) t = fmaxf(t, __uint_as_float(klo));
        if (use_p) t = fmaxf(t, __uint_as_float(plo));
        if (p.min_p > 0.0f) t = fmaxf(t, p.min_p);
        // kept mass, then the first index (vocabulary order) past u * mass:
        // each thread owns one contiguous chunk
        const int chunk = (V + NT - 1) / NT;
        const int c0 = threadIdx.x * chunk, c1 = min(V, c0 + chunk);
        u64 mine = 0;
        for (int i = c0; i < c1; i++) { float x = e[i]; mine += x >= t ? to_fix(x) : 0; }
        // inclusive scan of chunk sums
        u64 incl = mine;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            u64 y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        __syncthreads();
        if (lane == 31) us[w] = incl;
        __syncthreads();
        u64 before = 0, total = 0;
        for (int k = 0; k < NT / 32; k++) {
            if (k < w) before += us[k];
            total += us[k];
        }
        incl += before;
        const u64 excl = incl - mine;
        u32 r4[4];
        philox4x32(p.seed, p.step, 0, r4);
        const float u = u32_to_unit(r4[0]);
        const u64 target = (u64)((double)u * (double)total);
        __shared__ int chosen;
        if (threadIdx.x == 0) chosen = 0x7fffffff;
        __syncthreads();
        if (excl <= target && target < incl) {
            u64 acc = excl;
            for (int i = c0; i < c1; i++) {
                float x = e[i];
                if (x >= t) {
                    acc += to_fix(x);
                    if (acc > target) { atomicMin(&chosen, i); break; }
                }
            }
        }
        __syncthreads();
        if (chosen != 0x7fffffff) token = chosen;
        else { // rounding left none: the last kept index
            __shared__ int lk;
            if (threadIdx.x == 0) lk = -1;
            __syncthreads();
            for (int i = threadIdx.x; i < V; i += NT)
                if (e[i] >= t) atomicMax(&lk, i);
            __syncthreads();
            if (lk >= 0) token = lk;
        }
    }
    if (threadIdx.x == 0) {
        out_tokens[row] = token;
        if (out_logprobs) out_logprobs[row] = l[token] - lmax - lse;
    }
}
