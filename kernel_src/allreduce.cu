// allreduce.cu -- one-shot sum all-reduce over peer memory, for the
// tensor-parallel ranks of one process on the GPUs of one host (set up by
// runtime/cuda/p2p.c; NCCL serves what does not fit).
//
//   kiln_all_reduce: io[n] = sum over ranks r = 0 .. n_ranks-1 of rank r's
//   io[n] (ACT = bf16 | fp16 | fp32), fp32 accumulation in rank order, so
//   every rank gets the same bits.
//   kiln_all_reduce_add_rmsnorm: the same all-reduce of io [rows, dim], one
//   block a row, followed in the same kernel by kiln_add_rmsnorm
//   (rmsnorm.cu) of its result: residual += io; out = rmsnorm(residual) * w
//   (the all-reduced io rounded to ACT as the plain kernel stores it, the
//   residual rounded to ACT before the norm, as kiln_add_rmsnorm does; the
//   sum of squares in this kernel's order). One launch and one barrier
//   instead of two kernels (decode: rows <= AR_MAX_BLOCKS; the host falls
//   back to the pair otherwise).
//
// Every rank owns one allocation, readable by the others (peer access), at
// base_r (the kernel gets all of them, b0 .. b7, 0 past n_ranks):
//   [0, 4)        epoch: calls completed so far (own rank only)
//   [4, 8)        done: blocks of the current call past their copy-in
//   [128, 2176)   flags [AR_MAX_BLOCKS][AR_MAX_RANKS] u32: flags[b][s] is
//                 written by rank s's block b (st.release.sys) with the epoch
//                 of the call whose data it has copied in
//   [4096, +2*buf_bytes) data [2][buf_bytes]: the rank's input, call e in
//                 half e & 1
// One call, block b of every rank (same grid on every rank, same partition
// of the 16-byte vectors over blocks and threads):
//   1. e = epoch + 1; the last block to get past its copy-in sets epoch = e;
//   2. copy its vectors of io into its own data half e & 1;
//   3. signal: thread t < n_ranks stores e into rank t's flags[b][rank];
//   4. wait: thread t < n_ranks spins (ld.acquire.sys) until its own
//      flags[b][t] >= e (a peer may already be one call ahead);
//   5. sum its vectors over every rank's half e & 1, write them to io.
// Why one barrier suffices: a rank writes half e & 1 in call e only after
// its call e - 1 completed, which needed every peer's blocks to have
// signalled call e - 1, i.e. to be past their pdl_wait, so every peer's
// call e - 2, the last reader of that half, had completed (kiln's kernels
// all pdl_wait first, so a kernel running means every earlier kernel of its
// stream has completed). The epoch lives in device memory and is
// advanced by the kernel, so captured CUDA graphs replay it correctly.
// All CTAs of a call must be resident together with the peers' (the host
// keeps the grid <= AR_MAX_BLOCKS and the SM count); a wait that exceeds
// timeout_ns (a peer never came: a failed rank, mismatched collectives)
// prints the block, peer and epoch and traps instead of hanging.
// Thread-safety: device code; one call at a time per rank (one stream).
#include "kiln_common.cuh"

typedef ACT act_t;
typedef vec16<act_t> V;

#include "allreduce_common.cuh"

// Steps 3, 1 (end) and 4 of a call for this block, after its copy-in and a
// __syncthreads: signal every rank, advance the epoch (the call's last block),
// wait for every rank's block of the same index; ends with __syncthreads.
KILN_DEV void ar_meet(char *self, u32 *ctl, u32 e, int rank, int n_ranks, char *b0, char *b1, char *b2, char *b3,
                      char *b4, char *b5, char *b6, char *b7, i64 timeout_ns) {
    // 3. signal
    if (threadIdx.x < n_ranks) {
        char *peer = pick(threadIdx.x, b0, b1, b2, b3, b4, b5, b6, b7);
        st_release_sys(reinterpret_cast<u32 *>(peer + AR_FLAGS_OFF) + blockIdx.x * AR_MAX_RANKS + rank, e);
    }
    // 1. (end) every thread of this block has used the epoch it read (past
    // the caller's barrier); the last block of the call to get here advances it
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&ctl[1], 1u) == gridDim.x - 1) {
            ctl[1] = 0;
            ctl[0] = e;
        }
    }
    // 4. wait
    if (threadIdx.x < n_ranks) {
        const int t = threadIdx.x;
        const u32 *f = reinterpret_cast<const u32 *>(self + AR_FLAGS_OFF) + blockIdx.x * AR_MAX_RANKS + t;
        u64 t0 = 0;
        while ((int)(ld_acquire_sys(f) - e) < 0) {
            const u64 now = global_ns();
            if (!t0) {
                t0 = now;
            } else if ((i64)(now - t0) > timeout_ns) {
                struct { int rank, block; long long ms; int peer; u32 epoch; } a = {
                    rank, (int)blockIdx.x, timeout_ns / 1000000, t, e};
                vprintf("kiln all-reduce: rank %d block %d waited %lld ms for rank %d at call %u; "
                        "the ranks are not running the same collectives (a rank failed?): trap\n",
                        reinterpret_cast<const char *>(&a));
                __trap();
            }
        }
    }
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(512)
kiln_all_reduce(act_t *io, i64 n, char *b0, char *b1, char *b2, char *b3, char *b4, char *b5, char *b6, char *b7,
                int rank, int n_ranks, i64 buf_bytes, i64 timeout_ns) {
    pdl_wait();
    char *self = pick(rank, b0, b1, b2, b3, b4, b5, b6, b7);
    u32 *ctl = reinterpret_cast<u32 *>(self);
    // 1. this call's epoch (the previous call, a completed kernel, wrote it)
    const u32 e = ld_volatile(ctl) + 1u;
    const i64 half = AR_DATA_OFF + (i64)(e & 1u) * buf_bytes;
    const i64 nfull = n / V::N, nvec = (n + V::N - 1) / V::N;
    const int rem = (int)(n - nfull * V::N);
    const i64 stride = (i64)gridDim.x * blockDim.x;
    const i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;

    // 2. copy in (whole vectors; the partial last one element by element)
    act_t *mine = reinterpret_cast<act_t *>(self + half);
    for (i64 v = first; v < nvec; v += stride) {
        if (v < nfull) {
            st16(mine + v * V::N, ld16(io + v * V::N));
        } else {
            for (int j = 0; j < rem; j++) mine[v * V::N + j] = io[v * V::N + j];
        }
    }
    __syncthreads();

    ar_meet(self, ctl, e, rank, n_ranks, b0, b1, b2, b3, b4, b5, b6, b7, timeout_ns);
    pdl_launch();

    // 5. sum in rank order (fp32), one rounding
    for (i64 v = first; v < nvec; v += stride) {
        if (v < nfull) {
            float acc[V::N];
#pragma unroll
            for (int j = 0; j < V::N; j++) acc[j] = 0.0f;
#pragma unroll
            for (int r = 0; r < AR_MAX_RANKS; r++) {
                if (r >= n_ranks) break;
                V x;
                x.v = ld16(pick(r, b0, b1, b2, b3, b4, b5, b6, b7) + half + v * 16);
#pragma unroll
                for (int j = 0; j < V::N; j++) acc[j] += x.get(j);
            }
            V o;
#pragma unroll
            for (int j = 0; j < V::N; j++) o.set(j, acc[j]);
            st16(io + v * V::N, o.v);
        } else {
            for (int j = 0; j < rem; j++) {
                float acc = 0.0f;
                for (int r = 0; r < n_ranks; r++)
                    acc += to_f32(reinterpret_cast<const act_t *>(pick(r, b0, b1, b2, b3, b4, b5, b6, b7) + half)[v * V::N + j]);
                io[v * V::N + j] = from_f32<act_t>(acc);
            }
        }
    }
}

// The fused all-reduce + residual add + RMSNorm (see the top). Grid: rows
// blocks (<= AR_MAX_BLOCKS, the same on every rank), blockDim a multiple of
// 32 with dim / V::N <= ARN_MAXV * blockDim.x.
extern "C" __global__ void __launch_bounds__(512)
kiln_all_reduce_add_rmsnorm(act_t *io, act_t *residual, act_t *out, const act_t *w, int rows, int dim, float eps,
                            char *b0, char *b1, char *b2, char *b3, char *b4, char *b5, char *b6, char *b7, int rank,
                            int n_ranks, i64 buf_bytes, i64 timeout_ns) {
    __shared__ float scratch[32];
    pdl_wait();
    char *self = pick(rank, b0, b1, b2, b3, b4, b5, b6, b7);
    u32 *ctl = reinterpret_cast<u32 *>(self);
    const u32 e = ld_volatile(ctl) + 1u;
    const i64 half = AR_DATA_OFF + (i64)(e & 1u) * buf_bytes;
    const int nv = dim / V::N, row = blockIdx.x;
    const size_t base = (size_t)row * dim;

    // copy in this rank's row
    act_t *mine = reinterpret_cast<act_t *>(self + half) + base;
#pragma unroll
    for (int k = 0; k < ARN_MAXV; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < nv) st16(mine + (size_t)i * V::N, ld16(io + base + (size_t)i * V::N));
    }
    __syncthreads();
    ar_meet(self, ctl, e, rank, n_ranks, b0, b1, b2, b3, b4, b5, b6, b7, timeout_ns);
    pdl_launch();

    arn_row(io, residual, out, w, base, nv, dim, eps, scratch, [&](float *acc, int i) {
#pragma unroll
        for (int q = 0; q < AR_MAX_RANKS; q++) {
            if (q >= n_ranks) break;
            V x;
            x.v = ld16(pick(q, b0, b1, b2, b3, b4, b5, b6, b7) + half + (base + (size_t)i * V::N) * sizeof(act_t));
#pragma unroll
            for (int j = 0; j < V::N; j++) acc[j] += x.get(j);
        }
    });
}

// ---------------------------------------------------------------- push mode
// kiln_all_reduce_push / kiln_all_reduce_push_add_rmsnorm: the same results
// (same sums in rank order, same roundings) with one crossing of the link
// instead of a signal and a remote read. Each rank STORES its data into
// every peer's buffer and the receiver polls its own memory until the data
// is there: no flags, no fence after the remote stores (a "Lamport" buffer,
// as in TensorRT-LLM's low-latency all-reduce). Layout, after the pull
// mode's data halves, at AR_PUSH_OFF = AR_DATA_OFF + 2 * buf_bytes:
//   slot s (0..2), sender q: [(s * n_ranks + q) * buf_bytes, + buf_bytes)
// and control words ctl[2 + s] (bytes written into slot s by its last call).
// Empty memory holds the 16-bit pattern 0x8000 (-0.0 in bf16 / fp16) in every
// half-word; a value is there when its element (16-bit types) or 32-bit
// word (fp32) is not the empty pattern. Senders store -0.0 as +0.0 (16-bit)
// and the fp32 word 0x80008000 (-4.6e-41, a denormal) as -0.0, so no value
// looks empty: a sum whose every input is -0.0 is +0.0 here.
// Call e uses slot e % 3 and empties slot (e + 2) % 3 (call e - 1's, read
// completely in call e - 1) in its own buffer, as many bytes as call e - 1
// wrote. Why three slots suffice: a peer writes slot (e + 2) % 3 again in
// call e + 2, after its call e + 1 completed, which needed this rank's call
// e + 1 data, stored after this rank's call e (and its emptying) completed.
// The epoch and the slot sizes advance in the kernel (the call's last
// block), so captured graphs replay correctly. The timeout traps as above.
extern "C" __global__ void __launch_bounds__(512)
kiln_all_reduce_push(act_t *io, i64 n, char *b0, char *b1, char *b2, char *b3, char *b4, char *b5, char *b6, char *b7,
                     int rank, int n_ranks, i64 buf_bytes, i64 timeout_ns) {
    pdl_wait();
    char *self = pick(rank, b0, b1, b2, b3, b4, b5, b6, b7);
    u32 *ctl = reinterpret_cast<u32 *>(self);
    const u32 e = ld_volatile(ctl) + 1u, slot = e % 3u;
    const i64 nfull = n / V::N, nvec = (n + V::N - 1) / V::N;
    const int rem = (int)(n - nfull * V::N);
    const i64 stride = (i64)gridDim.x * blockDim.x;
    const i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    // this rank's vector v, the partial last one padded with zeros, cleaned
    auto mine = [&](i64 v) {
        V x;
        if (v < nfull) {
            x.v = ld16(io + v * V::N);
        } else {
            x.v = make_uint4(0, 0, 0, 0);
            for (int j = 0; j < rem; j++) reinterpret_cast<act_t *>(&x.v)[j] = io[v * V::N + j];
        }
        x.v = lp_clean(x.v);
        return x;
    };
    // 1. store into every peer's slot
    for (i64 v = first; v < nvec; v += stride) {
        const V x = mine(v);
        for (int q = 0; q < n_ranks; q++)
            if (q != rank)
                st16_volatile(lp_slot(pick(q, b0, b1, b2, b3, b4, b5, b6, b7), slot, rank, n_ranks, buf_bytes) + v * 16,
                              x.v);
    }
    // 2. empty the previous call's slot, advance
    lp_empty_and_advance(self, ctl, e, rank, n_ranks, buf_bytes, (u32)(nvec * 16));
    pdl_launch();
    // 3. receive and sum in rank order (fp32), one rounding
    for (i64 v = first; v < nvec; v += stride) {
        float acc[V::N];
#pragma unroll
        for (int j = 0; j < V::N; j++) acc[j] = 0.0f;
        for (int q = 0; q < n_ranks; q++) {
            V x;
            if (q == rank) x = mine(v);
            else x.v = lp_receive(lp_slot(self, slot, q, n_ranks, buf_bytes) + v * 16, rank, q, e, timeout_ns);
#pragma unroll
            for (int j = 0; j < V::N; j++) acc[j] += x.get(j);
        }
        V o;
#pragma unroll
        for (int j = 0; j < V::N; j++) o.set(j, acc[j]);
        if (v < nfull) st16(io + v * V::N, o.v);
        else
            for (int j = 0; j < rem; j++) io[v * V::N + j] = reinterpret_cast<const act_t *>(&o.v)[j];
    }
}

// The push all-reduce + residual add + RMSNorm: kiln_all_reduce_add_rmsnorm's
// results (grid: rows blocks, a block a row) with the push exchange.
extern "C" __global__ void __launch_bounds__(512)
kiln_all_reduce_push_add_rmsnorm(act_t *io, act_t *residual, act_t *out, const act_t *w, int rows, int dim, float eps,
                                 char *b0, char *b1, char *b2, char *b3, char *b4, char *b5, char *b6, char *b7,
                                 int rank, int n_ranks, i64 buf_bytes, i64 timeout_ns) {
    __shared__ float scratch[32];
    pdl_wait();
    char *self = pick(rank, b0, b1, b2, b3, b4, b5, b6, b7);
    u32 *ctl = reinterpret_cast<u32 *>(self);
    const u32 e = ld_volatile(ctl) + 1u, slot = e % 3u;
    const int nv = dim / V::N, row = blockIdx.x;
    const size_t base = (size_t)row * dim;
#pragma unroll
    for (int k = 0; k < ARN_MAXV; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < nv) {
            const uint4 m = lp_clean(ld16(io + base + (size_t)i * V::N));
            for (int q = 0; q < n_ranks; q++)
                if (q != rank)
                    st16_volatile(lp_slot(pick(q, b0, b1, b2, b3, b4, b5, b6, b7), slot, rank, n_ranks, buf_bytes) +
                                      (base + (size_t)i * V::N) * sizeof(act_t),
                                  m);
        }
    }
    lp_empty_and_advance(self, ctl, e, rank, n_ranks, buf_bytes, (u32)((size_t)rows * dim * sizeof(act_t)));
    pdl_launch();
    // wait until every peer vector this thread sums is there (a loop of its
    // own: the timeout's printf call would make the sum below spill)
#pragma unroll 1
    for (int k = 0; k < ARN_MAXV; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i >= nv) break;
        for (int q = 0; q < n_ranks; q++)
            if (q != rank)
                (void)lp_receive(lp_slot(self, slot, q, n_ranks, buf_bytes) + (base + (size_t)i * V::N) * sizeof(act_t),
                                 rank, q, e, timeout_ns);
    }
    arn_row(io, residual, out, w, base, nv, dim, eps, scratch, [&](float *acc, int i) {
        for (int q = 0; q < n_ranks; q++) {
            V x;
            if (q == rank) x.v = lp_clean(ld16(io + base + (size_t)i * V::N)); // this rank's, read again
            else x.v = ld16_volatile(lp_slot(self, slot, q, n_ranks, buf_bytes) + (base + (size_t)i * V::N) * sizeof(act_t));
#pragma unroll
            for (int j = 0; j < V::N; j++) acc[j] += x.get(j);
        }
    });
}

// The push all-gather (kiln_all_gather_push): out [rows, n_ranks * width] =
// every rank's send [rows, width] side by side in rank order (rank q's row r
// at out[r, q * width ..]), the layout the vocabulary-parallel LM head's
// logits need. The same exchange, slots, epoch and emptying as the push
// all-reduce (one collective sequence): each rank stores its send into
// every peer's slot, copies its own part into out, and copies each peer's
// part from its own slot when it is there. Values are cleaned as above
// (-0.0 -> +0.0 in 16-bit types; the fp32 word 0x80008000 -> -0.0), the same
// on every rank. width * sizeof(ACT) % 16 == 0 (vectors stay in a row).
extern "C" __global__ void __launch_bounds__(512)
kiln_all_gather_push(const act_t *send, act_t *out, i64 rows, i64 width, char *b0, char *b1, char *b2, char *b3,
                     char *b4, char *b5, char *b6, char *b7, int rank, int n_ranks, i64 buf_bytes, i64 timeout_ns) {
    pdl_wait();
    char *self = pick(rank, b0, b1, b2, b3, b4, b5, b6, b7);
    u32 *ctl = reinterpret_cast<u32 *>(self);
    const u32 e = ld_volatile(ctl) + 1u, slot = e % 3u;
    const i64 wv = width / V::N, nvec = rows * wv;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    const i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    // vector v of a sender's part: row v / wv, vector v % wv of it
    auto out_at = [&](i64 v, int q) { return out + ((v / wv) * n_ranks + q) * width + (v % wv) * V::N; };
    // 1. store into every peer's slot; this rank's part straight into out
    for (i64 v = first; v < nvec; v += stride) {
        const uint4 x = lp_clean(ld16(send + v * V::N));
        for (int q = 0; q < n_ranks; q++)
            if (q != rank)
                st16_volatile(lp_slot(pick(q, b0, b1, b2, b3, b4, b5, b6, b7), slot, rank, n_ranks, buf_bytes) + v * 16,
                              x);
        st16(out_at(v, rank), x);
    }
    // 2. empty the previous call's slot, advance
    lp_empty_and_advance(self, ctl, e, rank, n_ranks, buf_bytes, (u32)(nvec * 16));
    pdl_launch();
    // 3. the peers' parts, as they arrive
    for (int q = 0; q < n_ranks; q++) {
        if (q == rank) continue;
        const char *src = lp_slot(self, slot, q, n_ranks, buf_bytes);
        for (i64 v = first; v < nvec; v += stride) st16(out_at(v, q), lp_receive(src + v * 16, rank, q, e, timeout_ns));
    }
}
