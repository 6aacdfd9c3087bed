// allreduce_common.cuh -- the device side of the one-shot collectives over
// peer memory shared by kernel_src/allreduce.cu and the GEMV fused with the
// push all-reduce (gemv.cu AR=1): the buffer layout and limits, the memory
// operations at system scope, the timeout clock, the rank's buffer by index,
// the push exchange's Lamport slots (allreduce.cu, "push mode", says how
// they work) and the fused kernels' add + RMSNorm tail. The including file
// defines act_t and V (vec16<act_t>) after kiln_common.cuh.
#pragma once

#define AR_MAX_RANKS 8
#define AR_MAX_BLOCKS 64
#define AR_FLAGS_OFF 128
#define AR_DATA_OFF 4096

extern "C" __device__ int vprintf(const char *, const char *);

KILN_DEV void st_release_sys(u32 *p, u32 v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
KILN_DEV u32 ld_acquire_sys(const u32 *p) {
    u32 v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
KILN_DEV u32 ld_volatile(const u32 *p) {
    u32 v;
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
KILN_DEV u64 global_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

KILN_DEV char *pick(int i, char *b0, char *b1, char *b2, char *b3, char *b4, char *b5, char *b6, char *b7) {
    switch (i) {
    case 0: return b0;
    case 1: return b1;
    case 2: return b2;
    case 3: return b3;
    case 4: return b4;
    case 5: return b5;
    case 6: return b6;
    default: return b7;
    }
}

#define LP_EMPTY 0x80008000u
#define AR_PUSH_OFF(buf_bytes) (AR_DATA_OFF + 2 * (buf_bytes))

KILN_DEV uint4 ld16_volatile(const void *p) {
    uint4 r;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p) : "memory");
    return r;
}
KILN_DEV void st16_volatile(void *p, uint4 v) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}
KILN_DEV u32 lp_clean_word(u32 w) {
    if (sizeof(act_t) == 2) {
        if ((w & 0xffffu) == 0x8000u) w &= 0xffff0000u;
        if ((w >> 16) == 0x8000u) w &= 0x0000ffffu;
        return w;
    }
    return w == LP_EMPTY ? 0x80000000u : w;
}
KILN_DEV uint4 lp_clean(uint4 v) {
    return make_uint4(lp_clean_word(v.x), lp_clean_word(v.y), lp_clean_word(v.z), lp_clean_word(v.w));
}
KILN_DEV bool lp_word_empty(u32 w) {
    if (sizeof(act_t) == 2) return (w & 0xffffu) == 0x8000u || (w >> 16) == 0x8000u;
    return w == LP_EMPTY;
}
KILN_DEV bool lp_empty(uint4 v) {
    return lp_word_empty(v.x) || lp_word_empty(v.y) || lp_word_empty(v.z) || lp_word_empty(v.w);
}
// The slot of `sender` in rank `base`'s buffer.
KILN_DEV char *lp_slot(char *base, u32 slot, int sender, int n_ranks, i64 buf_bytes) {
    return base + AR_PUSH_OFF(buf_bytes) + ((i64)slot * n_ranks + sender) * buf_bytes;
}
// Wait until the 16 bytes at p are all there; the timeout traps (a peer that
// never comes).
KILN_DEV uint4 lp_receive(const char *p, int rank, int sender, u32 e, i64 timeout_ns) {
    uint4 x = ld16_volatile(p);
    if (!lp_empty(x)) return x;
    const u64 t0 = global_ns();
    for (;;) {
        x = ld16_volatile(p);
        if (!lp_empty(x)) return x;
        if ((i64)(global_ns() - t0) > timeout_ns) {
            struct { int rank, block; long long ms; int peer; u32 epoch; } a = {
                rank, (int)blockIdx.x, timeout_ns / 1000000, sender, e};
            vprintf("kiln all-reduce: rank %d block %d waited %lld ms for rank %d at call %u; "
                    "the ranks are not running the same collectives (a rank failed?): trap\n",
                    reinterpret_cast<const char *>(&a));
            __trap();
        }
    }
}
// Empty the bytes call e - 1 left in slot (e + 2) % 3 of this rank's buffer
// (every sender's part; this call's threads share them), then count this
// block done: the call's last block records the bytes it wrote into slot
// e % 3 and advances the epoch. After every thread read the epoch.
KILN_DEV void lp_empty_and_advance(char *self, u32 *ctl, u32 e, int rank, int n_ranks, i64 buf_bytes,
                                   u32 bytes_now) {
    const u32 old = (e + 2u) % 3u, old_bytes = ld_volatile(ctl + 2 + old);
    const i64 stride = (i64)gridDim.x * blockDim.x, first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const uint4 E = make_uint4(LP_EMPTY, LP_EMPTY, LP_EMPTY, LP_EMPTY);
    for (int q = 0; q < n_ranks; q++) {
        if (q == rank) continue;
        char *s = lp_slot(self, old, q, n_ranks, buf_bytes);
        for (i64 c = first; c < (i64)(old_bytes / 16u); c += stride) st16(s + c * 16, E);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&ctl[1], 1u) == gridDim.x - 1) {
            ctl[1] = 0;
            ctl[2 + e % 3u] = bytes_now;
            ctl[0] = e;
        }
    }
}

#define ARN_MAXV 4

// The fused kernels' row after the rank sum of one vector (acc): the sum
// rounded to ACT (the all-reduce's output) stored to io[at], added to the
// residual (rounded, stored back, kept in r), its squares added to ss.
KILN_DEV void arn_store_sum(const float *acc, act_t *io, act_t *residual, size_t at, V &r, float &ss) {
    V s, res;
#pragma unroll
    for (int j = 0; j < V::N; j++) s.set(j, acc[j]);
    st16(io + at, s.v);
    res.v = ld16(residual + at);
#pragma unroll
    for (int j = 0; j < V::N; j++) r.set(j, res.get(j) + s.get(j));
    st16(residual + at, r.v);
#pragma unroll
    for (int j = 0; j < V::N; j++) {
        const float f = r.get(j);
        ss += f * f;
    }
}
// ... then the norm of the row: out = r * rsqrt(mean square + eps) * w over
// this thread's vectors (ss reduced over the block first).
KILN_DEV void arn_norm_out(const V *r, float ss, float *scratch, act_t *out, const act_t *w, size_t base, int nv,
                           int dim, float eps) {
    ss = block_sum(ss, scratch);
    const float rr = rsqrtf(ss / (float)dim + eps);
#pragma unroll
    for (int k = 0; k < ARN_MAXV; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < nv) {
            V wv, o;
            wv.v = ld16(w + (size_t)i * V::N);
#pragma unroll
            for (int j = 0; j < V::N; j++) o.set(j, r[k].get(j) * rr * wv.get(j));
            st16(out + base + (size_t)i * V::N, o.v);
        }
    }
}

// A fused kernel's row: for each of this thread's vectors i, sum_ranks(acc,
// i) adds every rank's vector i to acc (zeros) in rank order; the sum is
// stored as above, then the row normalised into out.
template <class SumRanks>
KILN_DEV void arn_row(act_t *io, act_t *residual, act_t *out, const act_t *w, size_t base, int nv, int dim, float eps,
                      float *scratch, SumRanks sum_ranks) {
    V r[ARN_MAXV];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < ARN_MAXV; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < nv) {
            float acc[V::N];
#pragma unroll
            for (int j = 0; j < V::N; j++) acc[j] = 0.0f;
            sum_ranks(acc, i);
            arn_store_sum(acc, io, residual, base + (size_t)i * V::N, r[k], ss);
        }
    }
    arn_norm_out(r, ss, scratch, out, w, base, nv, dim, eps);
}
