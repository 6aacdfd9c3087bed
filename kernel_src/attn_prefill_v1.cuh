// attn_prefill_v1.cuh -- the first prefill kernel (kiln_attn_prefill_v1,
// registry "attn_prefill_v1"), kept for A/B timing and for what the second
// (attn_prefill.cu) does not serve: FP8 caches and head dims above 128.
// Paged attention for packed variable-length query
// sequences (prefill, chunked prefill, several query tokens per sequence),
// causal, optional sliding window, GQA; K and V are read from the paged
// cache, so a prompt can continue cached context. Tensor cores (mma.sync
// m16n8k16, fp32 accumulate), FlashAttention-2 style online softmax.
// Semantics: engine/ops_cpu.h kiln_cpu_attention: sequence s owns query rows
// [qstart[s], qstart[s+1]), ctx_len[s] includes them; query i of s sits at
// position ctx_len[s] - q_len + i and attends to cached positions p with
// p <= pos and (window <= 0 or p > pos - window).
//
// A block computes 64 rows = V1_TT tokens x GROUP heads of one KV head (row r:
// head qh0 + r / V1_TT, token tile_tok0 + r % V1_TT, V1_TT = 64 / GROUP); each of its
// 4 warps owns 16 rows. KV is streamed in tiles of 64 tokens (4 x 16-token
// sub-tiles, the layout of attn_common.cuh) through a 2-stage cp.async
// pipeline shared by the block.
//   q [T, q_stride] (head h at h * HEAD_DIM), out [T, nq * HEAD_DIM]
//   kv_scales [2, nkv] f32 (FP8 caches: key then value scales per KV head;
//   NULL: 1)
// Grid (ceil(max_q_len / V1_TT), n_seqs, nq / GROUP), 128 threads, dynamic smem
// 2 * 4 * TILE_BYTES. Blocks past their sequence's queries exit; the grid's
// x is walked in reverse so the longest (latest) query tiles start first.
#pragma once
#include "attn_common.cuh"

#define V1_BM 64
#define V1_TT (V1_BM / GROUP)
#define V1_NSUB 4 /* 16-token sub-tiles per KV tile */

// KV tile kt (V1_NSUB sub-tiles of 16 tokens) into pipeline stage `stage`.
__device__ __forceinline__ void v1_load_kv(char *smem, const kv_t *__restrict__ kc, const kv_t *__restrict__ vc,
                                        const int *__restrict__ bt, int nkv, int kvh, int ctx, int kt, int stage) {
    char *dst = smem + (size_t)stage * V1_NSUB * TILE_BYTES;
#pragma unroll
    for (int sub = 0; sub < V1_NSUB; sub++) {
        int t0 = (kt * V1_NSUB + sub) * 16;
        int nv = min(16, ctx - t0);
        if (nv > 0) load_tile_chunks(dst + sub * TILE_BYTES, kc, vc, bt, nkv, kvh, t0, nv, threadIdx.x, 128);
    }
}

extern "C" __global__ void __launch_bounds__(128)
kiln_attn_prefill_v1(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride, const kv_t *__restrict__ kc,
                  const kv_t *__restrict__ vc, const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                  const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv, float scale,
                  int window, const float *__restrict__ kv_scales) {
    pdl_wait();
    pdl_launch();
    extern __shared__ float4 smem4[];
    char *smem = (char *)smem4;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tig = lane & 3;
    const int s = blockIdx.y, qh0 = blockIdx.z * GROUP;
    const int ratio = nq / nkv, kvh = qh0 / ratio;
    const int q0 = qstart[s], q_len = qstart[s + 1] - q0;
    const int tile = (int)(gridDim.x - 1 - blockIdx.x);
    const int tok0 = tile * V1_TT;
    if (tok0 >= q_len) return;
    const int ctx = ctx_len[s];
    const int pos0 = ctx - q_len; // position of query token 0
    int kt_first, kt_end;
    prefill_kv_tiles(pos0, tok0, q_len, V1_TT, 16 * V1_NSUB, window, kt_first, kt_end);
    const int *bt = block_tables + (size_t)s * max_blocks;

    // this thread's two rows (r0 = 16 * warp + g, r1 = r0 + 8)
    int rtok[2], rhead[2], rpos[2];
    bool rvalid[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int row = warp * 16 + g + r * 8;
        rhead[r] = qh0 + row / V1_TT;
        rtok[r] = tok0 + row % V1_TT;
        rvalid[r] = rtok[r] < q_len;
        rpos[r] = pos0 + rtok[r];
    }
    u32 qa[HD16 / 16][4];
#pragma unroll
    for (int kk = 0; kk < HD16 / 16; kk++) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int r = i & 1, col = q_col(kk, tig, i);
            u32 v = 0;
            if (rvalid[r] && col < HD)
                v = load_q2(q + (size_t)(q0 + rtok[r]) * q_stride + (size_t)rhead[r] * HD + col);
            qa[kk][i] = v;
        }
    }
    const float sl2 = scale * LOG2E * kv_k_scale(kv_scales, nkv, kvh);
    float o[HD / 8][4];
#pragma unroll
    for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m[2] = {-KILN_INF, -KILN_INF}, l[2] = {0.0f, 0.0f};
    const u32 smem_base = smem_addr(smem);
    // the whole warp's rows are masked beyond this position / before that one
    int wpos_hi = -1, wpos_lo = 0x7fffffff;
    {
        int a = max(rvalid[0] ? rpos[0] : -1, rvalid[1] ? rpos[1] : -1);
        int b = min(rvalid[0] ? rpos[0] : 0x7fffffff, rvalid[1] ? rpos[1] : 0x7fffffff);
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            a = max(a, __shfl_xor_sync(0xffffffffu, a, off));
            b = min(b, __shfl_xor_sync(0xffffffffu, b, off));
        }
        wpos_hi = a;
        wpos_lo = b;
    }

    v1_load_kv(smem, kc, vc, bt, nkv, kvh, ctx, kt_first, 0);
    cp_async_commit();
    for (int kt = kt_first; kt < kt_end; kt++) {
        const int stage = (kt - kt_first) & 1;
        if (kt + 1 < kt_end) v1_load_kv(smem, kc, vc, bt, nkv, kvh, ctx, kt + 1, stage ^ 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
#pragma unroll 1
        for (int sub = 0; sub < V1_NSUB; sub++) {
            const int t0 = (kt * V1_NSUB + sub) * 16;
            // skip sub-tiles this warp cannot see (all causal-masked, past ctx, or before the window)
            bool skip = t0 > wpos_hi || t0 >= ctx || (window > 0 && t0 + 15 <= wpos_lo - window);
            if (skip) continue;
            const u32 tsm = smem_base + (u32)((stage * V1_NSUB + sub) * TILE_BYTES);
            float sc[8];
#pragma unroll
            for (int k = 0; k < 8; k++) sc[k] = 0.0f;
            qk_tile(sc, qa, tsm, lane);
            float mx[2] = {m[0], m[1]};
#pragma unroll
            for (int k = 0; k < 8; k++) {
                int r = (k >> 1) & 1;
                int j = t0 + sc_tok(k, tig);
                bool ok = j <= rpos[r] && (window <= 0 || j > rpos[r] - window);
                float v = ok ? sc[k] * sl2 : -KILN_INF;
                sc[k] = v;
                mx[r] = fmaxf(mx[r], v);
            }
            quad_row_max(mx);
            float alpha[2], rs[2];
            tile_probs<false>(sc, m, mx, alpha, rs);
            online_rescale<false>(o, m, l, mx, alpha, rs);
            pv_probs(o, sc, tsm + K_TILE_BYTES, lane);
        }
        __syncthreads();
    }
    cp_async_wait<0>();
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        if (!rvalid[r]) continue;
        float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#if KV_FP8
        inv *= kv_v_scale(kv_scales, nkv, kvh);
#endif
        act_t *orow = out + (size_t)(q0 + rtok[r]) * nq * HD + (size_t)rhead[r] * HD;
#pragma unroll
        for (int nt = 0; nt < HD / 8; nt++)
            *(u32 *)(orow + nt * 8 + tig * 2) = pack2<act_t>(o[nt][r * 2] * inv, o[nt][r * 2 + 1] * inv);
    }
}
