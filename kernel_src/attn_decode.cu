// attn_decode.cu -- paged decode attention (one query token per sequence),
// GQA-aware, with an optional split-K (flash-decoding) pass and its reduction.
// Semantics: engine/ops_cpu.h kiln_cpu_attention restricted to q_len == 1:
// sequence s has its query at row qstart[s] and ctx_len[s] cached tokens
// (its own included); it attends to positions [lo, ctx_len - 1], lo =
// ctx_len - window when window > 0, else 0.
//
// One block handles GROUP query heads that share a KV head (the 16 rows of an
// m16n8k16 tensor-core tile; rows >= GROUP are padding), one sequence, and
// one partition of its context (blockIdx.z; partition_size tokens, a multiple
// of 64; 0 means the whole context). Each KV tile is read once for the whole
// group. Its 4 warps each stream their own 16-token tiles through a private
// 3-stage cp.async pipeline and keep their own online-softmax state; the
// warps are merged through shared memory at the end.
//   q    [T, q_stride] (head h at h * HEAD_DIM)     out [T, nq * HEAD_DIM]
//   block_tables [n_seqs, max_blocks]
//   part_o [n_seqs, nq, n_parts, HEAD_DIM] f32, part_ml [n_seqs, nq, n_parts, 2]
//   (split mode: unnormalized output, running max (log2 domain) and sum)
//   kv_scales [2, nkv] f32 (FP8 caches: this layer's key then value scales
//   per KV head; NULL: 1)
// Grid (nq / GROUP, n_seqs, n_parts), 128 threads, dynamic smem
// max(4 warps * STAGES * TILE_BYTES, the merge's (4 * 16 * 2 + 4 * 16 * HD) * 4)
// (STAGES 3 for 16-bit caches, 5 for FP8 ones: the same bytes in flight).
#include "attn_common.cuh"

#define NW 4
#if KV_FP8
#define STAGES 5
// FP8 caches: two 16-token tiles per step (one softmax update, interleaved
// QK MMAs) for head dims >= 64 (ptxas spills the pair loop at head dim 16);
// -DDECODE_PAIR=0 restores one tile per step. Either way the host gives
// STAGES tiles of shared memory per warp.
#ifndef DECODE_PAIR
#define DECODE_PAIR (HEAD_DIM >= 64)
#endif
#else
#define STAGES 3
#endif

// Scale the scores of tile t (token of sc[k] = t*16 + sc_tok(k, tig)), mask
// those outside [lo, pos] (tiles wholly inside, all but the first and last,
// need no mask) and fold them into the running row maxima.
__device__ __forceinline__ void mask_scale(float sc[8], int t, int tig, int lo, int pos, float sl2, float mx[2]) {
    if (t * 16 >= lo && t * 16 + 15 <= pos) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            sc[k] *= sl2;
            mx[(k >> 1) & 1] = fmaxf(mx[(k >> 1) & 1], sc[k]);
        }
    } else {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int j = t * 16 + sc_tok(k, tig);
            float v = (j >= lo && j <= pos) ? sc[k] * sl2 : -KILN_INF;
            sc[k] = v;
            mx[(k >> 1) & 1] = fmaxf(mx[(k >> 1) & 1], v);
        }
    }
}

extern "C" __global__ void __launch_bounds__(NW * 32)
kiln_attn_decode(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride, const kv_t *__restrict__ kc,
                 const kv_t *__restrict__ vc, const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                 const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv, float scale,
                 int window, int partition_size, int n_parts, float *__restrict__ part_o, float *__restrict__ part_ml,
                 const float *__restrict__ kv_scales) {
    pdl_wait();
    pdl_launch();
    extern __shared__ float4 smem4[];
    char *smem = (char *)smem4;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tig = lane & 3;
    const int qh0 = blockIdx.x * GROUP, s = blockIdx.y, part = blockIdx.z;
    const int ratio = nq / nkv, kvh = qh0 / ratio;
    const int ctx = ctx_len[s];
    const int pos = ctx - 1;
    const int lo = window > 0 ? max(0, pos - window + 1) : 0;
    int beg = 0, end = ctx;
    if (partition_size > 0) {
        beg = part * partition_size;
        end = min(ctx, beg + partition_size);
        if (beg >= ctx) return; // this partition is past the context: the reduction ignores it
    }
    const int t_first = max(beg, lo) / 16, t_end = (end + 15) / 16; // 16-token tiles [t_first, t_end)
    const int *bt = block_tables + (size_t)s * max_blocks;
    const int tok_row = qstart[s];

    // Q fragments: row g -> head qh0 + g (valid when g < GROUP), row g + 8 -> qh0 + g + 8
    u32 qa[HD16 / 16][4];
    {
        const act_t *qrow = q + (size_t)tok_row * q_stride;
#pragma unroll
        for (int kk = 0; kk < HD16 / 16; kk++) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int row = g + (i & 1) * 8, col = q_col(kk, tig, i);
                u32 v = 0;
                if (row < GROUP && col < HD) v = load_q2(qrow + (size_t)(qh0 + row) * HD + col);
                qa[kk][i] = v;
            }
        }
    }
    const float sl2 = scale * LOG2E * kv_k_scale(kv_scales, nkv, kvh);
    float o[HD / 8][4];
#pragma unroll
    for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m[2] = {-KILN_INF, -KILN_INF}, l[2] = {0.0f, 0.0f};

    char *wsm = smem + (size_t)warp * STAGES * TILE_BYTES;
    const u32 wsm_addr = smem_addr(wsm);
    // this warp's tiles: t_first + warp + k * NW
    int n_mine = 0;
    if (t_first + warp < t_end) n_mine = (t_end - 1 - (t_first + warp)) / NW + 1;
#if KV_FP8
    // whole tiles (16 tokens inside the context) go through the loader with
    // precomputed lane offsets; each tile's block-table entry is read one
    // iteration before its copies are issued, so the copies never wait on it
    fp8_tile_loader ld;
    ld.init(lane);
    const size_t blk_bytes = (size_t)nkv * HD * BLOCK_SIZE, head_bytes = (size_t)kvh * HD * BLOCK_SIZE;
    auto issue = [&](int idx, int b) {
        const int t = t_first + warp + idx * NW, tok0 = t * 16;
        const u32 st = wsm_addr + (idx % STAGES) * TILE_BYTES;
        if (tok0 + 16 <= ctx)
            ld.load(st, (const u8 *)kc, (const u8 *)vc, (size_t)b * blk_bytes + head_bytes, tok0 % BLOCK_SIZE, lane);
        else
            load_tile_chunks(wsm + (idx % STAGES) * TILE_BYTES, kc, vc, bt, nkv, kvh, tok0, ctx - tok0, lane, 32);
    };
    auto bt_of = [&](int idx) { return idx < n_mine ? bt[(t_first + warp + idx * NW) * 16 / BLOCK_SIZE] : 0; };
#if DECODE_PAIR
    // two tiles per step (i, i + 1), copies issued STAGES - 2 tiles ahead:
    // step i issues tiles i + 3, i + 4 into the slots step i - 2 freed
#pragma unroll
    for (int st = 0; st < STAGES - 2; st++) {
        if (st < n_mine) issue(st, bt_of(st));
        cp_async_commit();
    }
    int b_n0 = bt_of(STAGES - 2), b_n1 = bt_of(STAGES - 1);
    for (int i = 0; i < n_mine; i += 2) {
        {
            const int nx = i + STAGES - 2;
            if (nx < n_mine) issue(nx, b_n0);
            cp_async_commit();
            if (nx + 1 < n_mine) issue(nx + 1, b_n1);
            cp_async_commit();
            b_n0 = bt_of(nx + 2);
            b_n1 = bt_of(nx + 3);
        }
        cp_async_wait<STAGES - 2>();
        __syncwarp();
        const bool has_b = i + 1 < n_mine;
        const int ta = t_first + warp + i * NW, tb = ta + NW;
        const u32 tile_a = wsm_addr + (i % STAGES) * TILE_BYTES, tile_b = wsm_addr + ((i + 1) % STAGES) * TILE_BYTES;
        float sa[8], sb[8];
#pragma unroll
        for (int k = 0; k < 8; k++) sa[k] = sb[k] = 0.0f;
        if (has_b) qk_tile2(sa, sb, qa, tile_a, tile_b, lane);
        else qk_tile(sa, qa, tile_a, lane);
        float mx[2] = {m[0], m[1]};
        mask_scale(sa, ta, tig, lo, pos, sl2, mx);
        if (has_b) mask_scale(sb, tb, tig, lo, pos, sl2, mx);
        else {
#pragma unroll
            for (int k = 0; k < 8; k++) sb[k] = -KILN_INF;
        }
        quad_row_max(mx);
        float alpha[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
        for (int r = 0; r < 2; r++) alpha[r] = mx[r] == -KILN_INF ? 1.0f : fast_exp2(m[r] - mx[r]);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int r = (k >> 1) & 1;
            float pa_ = mx[r] == -KILN_INF ? 0.0f : fast_exp2(sa[k] - mx[r]);
            float pb_ = mx[r] == -KILN_INF ? 0.0f : fast_exp2(sb[k] - mx[r]);
            sa[k] = pa_;
            sb[k] = pb_;
            rs[r] += pa_ + pb_;
        }
        online_rescale(o, m, l, mx, alpha, rs);
        pv_probs(o, sa, tile_a + K_TILE_BYTES, lane);
        if (has_b) pv_probs(o, sb, tile_b + K_TILE_BYTES, lane);
        __syncwarp();
    }
#else
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
        if (st < n_mine) issue(st, bt_of(st));
        cp_async_commit();
    }
    int b_next = bt_of(STAGES - 1);
#endif
#else
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
        if (st < n_mine) {
            int t = t_first + warp + st * NW;
            load_tile_chunks(wsm + st * TILE_BYTES, kc, vc, bt, nkv, kvh, t * 16, min(16, ctx - t * 16), lane, 32);
        }
        cp_async_commit();
    }
#endif
#if !(KV_FP8 && DECODE_PAIR)
    for (int i = 0; i < n_mine; i++) {
        {
            int nx = i + STAGES - 1;
#if KV_FP8
            if (nx < n_mine) issue(nx, b_next);
            b_next = bt_of(nx + 1);
#else
            if (nx < n_mine) {
                int t = t_first + warp + nx * NW;
                load_tile_chunks(wsm + (nx % STAGES) * TILE_BYTES, kc, vc, bt, nkv, kvh, t * 16, min(16, ctx - t * 16), lane,
                          32);
            }
#endif
            cp_async_commit();
        }
        cp_async_wait<STAGES - 1>();
        __syncwarp();
        const int t = t_first + warp + i * NW;
        const u32 tile = wsm_addr + (i % STAGES) * TILE_BYTES;
        float sc[8];
#pragma unroll
        for (int k = 0; k < 8; k++) sc[k] = 0.0f;
        qk_tile(sc, qa, tile, lane);
        float mx[2] = {m[0], m[1]};
        mask_scale(sc, t, tig, lo, pos, sl2, mx);
        quad_row_max(mx);
        float alpha[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
        for (int r = 0; r < 2; r++) alpha[r] = mx[r] == -KILN_INF ? 1.0f : fast_exp2(m[r] - mx[r]);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int r = (k >> 1) & 1;
            float p = mx[r] == -KILN_INF ? 0.0f : fast_exp2(sc[k] - mx[r]);
            sc[k] = p;
            rs[r] += p;
        }
        // the output is rescaled only when some row's maximum moved (after the
        // first tiles it rarely does)
        online_rescale(o, m, l, mx, alpha, rs);
        pv_probs(o, sc, tile + K_TILE_BYTES, lane);
        __syncwarp();
    }
#endif
    cp_async_wait<0>();
    // full row sums across the 4 lanes of a row
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
    __syncthreads(); // pipelines drained: reuse shared memory for the merge
    // merge the warps: rows < GROUP only (GROUP <= 16)
    float *sm_m = (float *)smem;                 // [NW][16]
    float *sm_l = sm_m + NW * 16;                // [NW][16]
    float *sm_o = sm_l + NW * 16;                // [NW][16][HD]
    if (tig == 0) {
        sm_m[warp * 16 + g] = m[0];
        sm_m[warp * 16 + g + 8] = m[1];
        sm_l[warp * 16 + g] = l[0];
        sm_l[warp * 16 + g + 8] = l[1];
    }
#pragma unroll
    for (int nt = 0; nt < HD / 8; nt++) {
        int c = nt * 8 + tig * 2;
        sm_o[(warp * 16 + g) * HD + c] = o[nt][0];
        sm_o[(warp * 16 + g) * HD + c + 1] = o[nt][1];
        sm_o[(warp * 16 + g + 8) * HD + c] = o[nt][2];
        sm_o[(warp * 16 + g + 8) * HD + c + 1] = o[nt][3];
    }
    __syncthreads();
#if KV_FP8
    const float vs = kv_v_scale(kv_scales, nkv, kvh);
#endif
    for (int e = threadIdx.x; e < GROUP * HD; e += blockDim.x) {
        int row = e / HD, d = e - row * HD;
        float M = -KILN_INF;
#pragma unroll
        for (int w = 0; w < NW; w++) M = fmaxf(M, sm_m[w * 16 + row]);
        float L = 0.0f, acc = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; w++) {
            float wm = sm_m[w * 16 + row];
            float f = wm == -KILN_INF ? 0.0f : exp2f(wm - M);
            L += sm_l[w * 16 + row] * f;
            acc += sm_o[(w * 16 + row) * HD + d] * f;
        }
#if KV_FP8
        acc *= vs;
#endif
        int qh = qh0 + row;
        if (partition_size > 0) {
            size_t idx = ((size_t)s * nq + qh) * n_parts + part;
            part_o[idx * HD + d] = acc;
            if (d == 0) {
                part_ml[idx * 2] = M;
                part_ml[idx * 2 + 1] = L;
            }
        } else {
            out[(size_t)tok_row * nq * HD + (size_t)qh * HD + d] = from_f32<act_t>(L > 0.0f ? acc / L : 0.0f);
        }
    }
}

// Combine the partitions of each (sequence, head): grid (nq, n_seqs), HD threads.
extern "C" __global__ void kiln_attn_reduce(act_t *__restrict__ out, const float *__restrict__ part_o,
                                            const float *__restrict__ part_ml, const int *__restrict__ qstart,
                                            const int *__restrict__ ctx_len, int nq, int n_parts, int partition_size) {
    pdl_wait();
    pdl_launch();
    const int qh = blockIdx.x, s = blockIdx.y;
    const int np = min(n_parts, (ctx_len[s] + partition_size - 1) / partition_size);
    const size_t base = ((size_t)s * nq + qh) * n_parts;
    float M = -KILN_INF;
    for (int p = 0; p < np; p++) M = fmaxf(M, part_ml[(base + p) * 2]);
    for (int d = threadIdx.x; d < HD; d += blockDim.x) {
        float L = 0.0f, acc = 0.0f;
        for (int p = 0; p < np; p++) {
            float pm = part_ml[(base + p) * 2];
            float f = pm == -KILN_INF ? 0.0f : exp2f(pm - M);
            L += part_ml[(base + p) * 2 + 1] * f;
            acc += part_o[(base + p) * HD + d] * f;
        }
        out[(size_t)qstart[s] * nq * HD + (size_t)qh * HD + d] = from_f32<act_t>(L > 0.0f ? acc / L : 0.0f);
    }
}
