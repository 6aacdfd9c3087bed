// attn_decode.cu -- paged decode attention (one query token per sequence),
// GQA-aware, with an optional split-K (flash-decoding) pass and its reduction.
// Semantics: engine/ops_cpu.h kiln_cpu_attention restricted to q_len == 1:
// sequence s has its query at row qstart[s] and ctx_len[s] cached tokens
// (its own included); it attends to positions [lo, ctx_len - 1], lo =
// ctx_len - window when window > 0, else 0.
//
// One block handles GROUP query heads that share a KV head, one sequence, and
// one partition of its context (blockIdx.z; partition_size tokens, a multiple
// of 64; 0 means the whole context; negative (16-bit caches only): each
// sequence's context cut into n_parts parts of whole 64-token multiples, at
// least 64 (part_size below), so that a decode step captured in a graph for
// the longest context still splits the short contexts it replays on). Each KV tile is read once for the whole
// group. Its nw (4, or 2) warps each stream their own 16-token tiles through a private
// cp.async pipeline and keep their own online-softmax state; the warps are
// merged through shared memory at the end. 16-bit caches: a warp's first
// tiles whose tokens all precede the step's own position are issued before
// griddepcontrol.wait (earlier steps wrote them; the previous kernel writes
// only the query and position ctx_len - 1), so the KV stream starts while
// that kernel drains.
//   q    [T, q_stride] (head h at h * HEAD_DIM)     out [T, nq * HEAD_DIM]
//   block_tables [n_seqs, max_blocks]
//   part_o [n_seqs, nq, n_parts, HEAD_DIM] f32, part_ml [n_seqs, nq, n_parts, 2]
//   (split mode: unnormalized output, running max (log2 domain) and sum)
//   kv_scales [2, nkv] f32 (FP8 caches: this layer's key then value scales
//   per KV head; NULL: 1)
//   counters [n_seqs, nq / GROUP] int, all zero (split mode, optional): the
//   last partition block of a (sequence, KV group) to finish combines the
//   partitions itself (as kiln_attn_reduce would) and zeroes its counter
//   again, so no reduction kernel follows; NULL: kiln_attn_reduce does it.
// Grid (nq / GROUP, n_seqs, n_parts), nw * 32 threads (nw = 4, or 2), dynamic smem
// max(nw warps * stages * TILE_BYTES, the merge's (nw * 16 * 2 + nw * 16 * HD) * 4).
// 16-bit caches: the 16 rows of an m16n8k16 tile are the group's query heads
// (rows >= GROUP are padding), 3 stages. FP8 caches: the roles are swapped
// (attn_common.cuh qk_tiles_t: rows are tokens / head dims, the 8 columns
// query heads), two tiles per step, and the stage count is the launch's
// choice: dynamic smem / (4 warps * TILE_BYTES), 4 to 8 (the host picks it;
// engine/cuda/ops_gpu.c decode_fp8_plan).
#include "attn_common.cuh"

#define NW 4 // warps of a block at most; the launch's blockDim.x / 32 (nw below): 4, or 2 ($KILN_DECODE_WARPS=2, 16-bit caches)
#if !KV_FP8
#define STAGES 3
#endif

// The partition of a sequence of ctx tokens (see above; the reduction uses the same).
__device__ __forceinline__ int part_size(int ctx, int partition_size, int n_parts) {
    if (partition_size >= 0) return partition_size;
    return max(64, ((ctx + n_parts - 1) / n_parts + 63) / 64 * 64);
}
// The partitions holding tokens of a sequence of ctx tokens in split mode (the others return at once).
__device__ __forceinline__ int live_parts(int ctx, int partition_size, int n_parts) {
    const int psz = part_size(ctx, partition_size, n_parts);
    return min(n_parts, (ctx + psz - 1) / psz);
}

#if !KV_FP8
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
#else
// The FP8 pipeline: 4 to 8 tile slots per warp, from the launch's dynamic
// shared memory.
#define ST_MIN 4
#define ST_MAX 8
// cp.async.wait_group n for a run-time n in [ST_MIN - 2, ST_MAX - 2]
KILN_DEV void cp_async_wait_n(int n) {
    switch (n) {
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    default: cp_async_wait<6>(); break;
    }
}
// Scale the S^T scores of tile t (token of s[n][k] = t*16 + j0 + (k >> 1) * 2,
// head column k & 1 of n-tile n), mask those outside [lo, pos] (tiles wholly
// inside need no mask) and fold them into the running column maxima.
KILN_DEV void mask_scale_t(float (*s)[4], int t, int j0, int lo, int pos, float sl2, float (*mx)[2]) {
    if (t * 16 >= lo && t * 16 + 15 <= pos) {
#pragma unroll
        for (int n = 0; n < DNT; n++)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                s[n][k] *= sl2;
                mx[n][k & 1] = fmaxf(mx[n][k & 1], s[n][k]);
            }
    } else {
#pragma unroll
        for (int n = 0; n < DNT; n++)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                int j = t * 16 + j0 + (k >> 1) * 2;
                float v = (j >= lo && j <= pos) ? s[n][k] * sl2 : -KILN_INF;
                s[n][k] = v;
                mx[n][k & 1] = fmaxf(mx[n][k & 1], v);
            }
    }
}
#endif

// Loads of the parts: plain (CG false: the reduction kernel; a previous launch
// wrote them) or bypassing L1 (ld.global.cg, CG true: the fused path, other
// blocks of this launch wrote them)
template <bool CG> __device__ __forceinline__ float ld_part(const float *p) { return CG ? ld_cg_f32(p) : *p; }
template <bool CG> __device__ __forceinline__ float4 ld_part4(const float *p) {
    return CG ? ld_cg_f4(p) : *(const float4 *)p;
}

// The warp of each row r = row0, row0 + step, .. < rows combines the np partitions of query head qh0 + r
// (part rows base0 + r * n_parts ..) into out[tok_row, qh0 + r, :]: its lanes take the partitions' maxima
// and sums 32 at a time (warp reductions), then 4 output dimensions each, the partitions' rows read 8 at a
// time (16-byte loads issued together, then the sums), so a handful of L2 round trips instead of one per
// partition and element. HD is a multiple of 8. (The row loop stays in here: with it in the caller the
// FP8 decode kernels spilled.)
#define CMB_BATCH 8
template <bool CG>
__device__ __forceinline__ void combine_rows(act_t *__restrict__ out, const float *__restrict__ part_o,
                                             const float *__restrict__ part_ml, int tok_row, int nq, int qh0,
                                             size_t base0, int n_parts, int np, int row0, int rows, int step) {
    const int lane = threadIdx.x & 31;
    for (int row = row0; row < rows; row += step) {
        const size_t base = base0 + (size_t)row * n_parts;
        float M = -KILN_INF;
        for (int p = lane; p < np; p += 32) M = fmaxf(M, ld_part<CG>(part_ml + (base + p) * 2));
        M = warp_max(M);
        float L = 0.0f;
        for (int p = lane; p < np; p += 32) {
            const float pm = ld_part<CG>(part_ml + (base + p) * 2);
            L += pm == -KILN_INF ? 0.0f : ld_part<CG>(part_ml + (base + p) * 2 + 1) * exp2f(pm - M);
        }
        L = warp_sum(L);
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
        act_t *o = out + (size_t)tok_row * nq * HD + (size_t)(qh0 + row) * HD;
        for (int d = lane * 4; d < HD; d += 128) {
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            for (int p0 = 0; p0 < np; p0 += CMB_BATCH) {
                float4 v[CMB_BATCH];
                float f[CMB_BATCH];
#pragma unroll
                for (int j = 0; j < CMB_BATCH; j++)
                    if (p0 + j < np) {
                        f[j] = ld_part<CG>(part_ml + (base + p0 + j) * 2);
                        v[j] = ld_part4<CG>(part_o + (base + p0 + j) * HD + d);
                    }
#pragma unroll
                for (int j = 0; j < CMB_BATCH; j++)
                    if (p0 + j < np) {
                        const float w = f[j] == -KILN_INF ? 0.0f : exp2f(f[j] - M);
                        a0 += v[j].x * w, a1 += v[j].y * w, a2 += v[j].z * w, a3 += v[j].w * w;
                    }
            }
            o[d] = from_f32<act_t>(a0 * inv), o[d + 1] = from_f32<act_t>(a1 * inv);
            o[d + 2] = from_f32<act_t>(a2 * inv), o[d + 3] = from_f32<act_t>(a3 * inv);
        }
    }
}

// The kernels' body. RP (kiln_attn_decode_rope; 16-bit caches of act_t, HD a multiple of 32): the query
// and the step's own key arrive unrotated -- the rope + KV write of the step (kernel_src/rope_kv.cu
// kiln_rope_kv_write_dec) done here instead of by a kernel in front: rotate-half over all HD dims, cos / sin
// of rpos[token] * inv_freq[i] (times mscale) computed before the wait into a table past the launch's
// dynamic shared memory (HD * 4 bytes the host adds), the block whose partition holds position pos writes
// the rotated key and the value at slots[token] (< 0: none), fenced to GPU scope (the tile loads read L2),
// before any warp loads the tile holding it, and every block rotates its query fragments in registers (the
// pair (d, d + HD / 2) sits in the same lane: q_col(kk + HD / 32) = q_col(kk) + HD / 2). Products and
// roundings as kiln_rope_kv_write_dec's (kiln_common.cuh rope_rot), so the attention reads the same bits.
// The qkv rows keep their unrotated q and k (nothing else reads them).
// The fused rope kernels' shared pieces (kiln_attn_decode_rope, kiln_attn_decode_pw_rope): the cache
// address of the step's key (x = 8) or value (x = 1) at `slot` for KV head kvh (key [blocks, nkv, HD / 8,
// BLOCK_SIZE, 8], value [blocks, nkv, HD, BLOCK_SIZE]); the rotated pair (y0, y1) of dims (i, i + HD / 2)
// stored at the key's; two query fragments (dims col, col + 1 in lo, the same + HD / 2 in hi) rotated by
// (c0, s0), (c1, s1) and rounded to act_t
template <typename KV_T> KILN_DEV KV_T *step_at(const KV_T *c, int slot, int nkv, int kvh, int x) {
    const int b = slot / BLOCK_SIZE, o = slot - b * BLOCK_SIZE;
    return const_cast<KV_T *>(c) + ((size_t)b * nkv + kvh) * HD * BLOCK_SIZE + o * x;
}
template <typename KV_T> KILN_DEV void put_step_key(KV_T *kd, int i, float y0, float y1) {
    const int j = i + HD / 2;
    kd[(size_t)(i / 8) * BLOCK_SIZE * 8 + i % 8] = from_f32<KV_T>(y0);
    kd[(size_t)(j / 8) * BLOCK_SIZE * 8 + j % 8] = from_f32<KV_T>(y1);
}
KILN_DEV void rope_frag(u32 &lo, u32 &hi, float c0, float s0, float c1, float s1) {
    float a0, a1, b0, b1, y0, y1, z0, z1;
    unpack2<act_t>(lo, a0, a1);
    unpack2<act_t>(hi, b0, b1);
    rope_rot(a0, b0, c0, s0, y0, z0);
    rope_rot(a1, b1, c1, s1, y1, z1);
    lo = pack2<act_t>(y0, y1);
    hi = pack2<act_t>(z0, z1);
}

template <bool RP>
KILN_DEV void attn_decode_body(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride,
                               const kv_t *__restrict__ kc, const kv_t *__restrict__ vc,
                               const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                               const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv,
                               float scale, int window, int partition_size, int n_parts, float *__restrict__ part_o,
                               float *__restrict__ part_ml, const float *__restrict__ kv_scales,
                               int *__restrict__ counters, const int *__restrict__ rpos,
                               const float *__restrict__ inv_freq, float mscale, const int *__restrict__ slots) {
    const int nw = (int)(blockDim.x >> 5); // warps of this block (NW at most)
#if KV_FP8
    pdl_wait();
    pdl_launch();
#endif
    extern __shared__ __align__(128) float4 smem4[]; // 128: the swizzled tiles
    char *smem = (char *)smem4;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tig = lane & 3;
    const int qh0 = blockIdx.x * GROUP, s = blockIdx.y, part = blockIdx.z;
    const int ratio = nq / nkv, kvh = qh0 / ratio;
#if KV_FP8
    // The block-table entries of the first tiles this warp issues before its
    // loop (from the partition's first tile, as when no window cuts it), read
    // alongside ctx_len instead of after it. Indices are clamped into the
    // sequence's row; entries past its context are never used.
    const int *bt = block_tables + (size_t)s * max_blocks;
    // (FP8 caches always get a fixed partition_size >= 0 from the host: this runs before ctx is known)
    const int t_part = partition_size > 0 ? part * partition_size / 16 : 0;
    int bpre[ST_MAX - 2];
#pragma unroll
    for (int k = 0; k < ST_MAX - 2; k++)
        bpre[k] = max_blocks > 0 ? bt[min((t_part + warp + k * nw) * 16 / BLOCK_SIZE, max_blocks - 1)] : 0;
#endif
    const int ctx = ctx_len[s];
    const int pos = ctx - 1;
    const int lo = window > 0 ? max(0, pos - window + 1) : 0;
#if KV_FP8
    const int psz = partition_size; // fixed for FP8 caches (the host's decode_fp8_plan)
#else
    const int psz = part_size(ctx, partition_size, n_parts);
#endif
    int beg = 0, end = ctx;
    if (psz > 0) {
        beg = part * psz;
        end = min(ctx, beg + psz);
        if (beg >= ctx) return; // this partition is past the context: the reduction ignores it
    }
    const int t_first = max(beg, lo) / 16, t_end = (end + 15) / 16; // 16-token tiles [t_first, t_end)
#if !KV_FP8
    const int *bt = block_tables + (size_t)s * max_blocks;
#endif
    const int tok_row = qstart[s];

#if KV_FP8
    const float sl2 = scale * LOG2E * kv_k_scale(kv_scales, nkv, kvh);
    // this warp's tiles: t_first + warp + k * nw
    int n_mine = 0;
    if (t_first + warp < t_end) n_mine = (t_end - 1 - (t_first + warp)) / nw + 1;
    const int j0 = 2 * g - (g & 1);
    // Q^T fragments (qk_tiles_t): head n*8 + g (valid when < GROUP), dims kk*16 + 4t + 2i, +1
    u32 qb[HD / 16][DNT][2];
    {
        const act_t *qrow = q + (size_t)tok_row * q_stride;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
            for (int n = 0; n < DNT; n++)
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const int h = n * 8 + g;
                    qb[kk][n][i] = h < GROUP ? load_q2(qrow + (size_t)(qh0 + h) * HD + kk * 16 + tig * 4 + i * 2) : 0u;
                }
    }
    float o[HD / 16][DNT][4];
#pragma unroll
    for (int dt = 0; dt < HD / 16; dt++)
#pragma unroll
        for (int n = 0; n < DNT; n++) o[dt][n][0] = o[dt][n][1] = o[dt][n][2] = o[dt][n][3] = 0.0f;
    float m[DNT][2], l[DNT][2]; // per head column n*8 + 2t + c
#pragma unroll
    for (int n = 0; n < DNT; n++) m[n][0] = m[n][1] = -KILN_INF, l[n][0] = l[n][1] = 0.0f;

    // ST tile slots per warp; tile idx of this warp lives in slot idx % ST
    int ST = (int)(dynamic_smem_bytes() / (nw * TILE_BYTES));
    ST = ST < ST_MIN ? ST_MIN : ST > ST_MAX ? ST_MAX : ST;
    const u32 ring = (u32)(ST * TILE_BYTES);
    char *wsm = smem + (size_t)warp * ring;
    const u32 wsm_addr = smem_addr(wsm);
    auto next_slot = [&](u32 off) { return off + TILE_BYTES == ring ? 0u : off + TILE_BYTES; };
    auto bt_of = [&](int idx) { return idx < n_mine ? bt[(t_first + warp + idx * nw) * 16 / BLOCK_SIZE] : 0; };
    if (t_first != t_part) { // a window moved the first tile: the prefetched entries are not this warp's
#pragma unroll
        for (int k = 0; k < ST_MAX - 2; k++) bpre[k] = bt_of(k);
    }
    int b_n0 = bt_of(ST - 2), b_n1 = bt_of(ST - 1); // the entries of the loop's first two tiles
    // whole tiles (16 tokens inside the context) go through the loader with
    // precomputed lane offsets; each tile's block-table entry is read one
    // step before its copies are issued, so the copies never wait on it
    fp8_tile_loader ld;
    ld.init(lane);
    const size_t blk_bytes = (size_t)nkv * HD * BLOCK_SIZE, head_bytes = (size_t)kvh * HD * BLOCK_SIZE;
    auto issue = [&](int idx, u32 off, int b) {
        const int tok0 = (t_first + warp + idx * nw) * 16;
        if (tok0 + 16 <= ctx)
            ld.load(wsm_addr + off, (const u8 *)kc, (const u8 *)vc, (size_t)b * blk_bytes + head_bytes, tok0 % BLOCK_SIZE,
                    lane);
        else
            load_tile_chunks(wsm + off, kc, vc, bt, nkv, kvh, tok0, ctx - tok0, lane, 32);
    };
    // two tiles per step (i, i + 1), copies issued ST - 2 tiles ahead: step i
    // issues tiles i + ST - 2, i + ST - 1 into the slots step i - 2 freed
    u32 iss = 0; // slot of the next tile to issue
#pragma unroll
    for (int k = 0; k < ST_MAX - 2; k++) {
        if (k < ST - 2) {
            if (k < n_mine) issue(k, iss, bpre[k]);
            cp_async_commit();
            iss = next_slot(iss);
        }
    }
    u32 use = 0; // slot of tile i
    for (int i = 0; i < n_mine; i += 2) {
        {
            const int nx = i + ST - 2;
            if (nx < n_mine) issue(nx, iss, b_n0);
            cp_async_commit();
            iss = next_slot(iss);
            if (nx + 1 < n_mine) issue(nx + 1, iss, b_n1);
            cp_async_commit();
            iss = next_slot(iss);
            b_n0 = bt_of(nx + 2);
            b_n1 = bt_of(nx + 3);
        }
        cp_async_wait_n(ST - 2); // tiles i and i + 1 have landed
        __syncwarp();
        const bool has_b = i + 1 < n_mine;
        const int ta = t_first + warp + i * nw;
        u32 kt[2];
        kt[0] = wsm_addr + use;
        use = next_slot(use);
        kt[1] = wsm_addr + use;
        use = next_slot(use);
        float sc[2][DNT][4];
        if (has_b) qk_tiles_t<2>(sc, qb, kt, lane);
        else qk_tiles_t<1>(sc, qb, kt, lane);
        float mx[DNT][2];
#pragma unroll
        for (int n = 0; n < DNT; n++) mx[n][0] = m[n][0], mx[n][1] = m[n][1];
        mask_scale_t(sc[0], ta, j0, lo, pos, sl2, mx);
        if (has_b) mask_scale_t(sc[1], ta + nw, j0, lo, pos, sl2, mx);
        // column maxima over the 8 lanes of a column (all g)
#pragma unroll
        for (int n = 0; n < DNT; n++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                mx[n][c] = fmaxf(mx[n][c], __shfl_xor_sync(0xffffffffu, mx[n][c], 4));
                mx[n][c] = fmaxf(mx[n][c], __shfl_xor_sync(0xffffffffu, mx[n][c], 8));
                mx[n][c] = fmaxf(mx[n][c], __shfl_xor_sync(0xffffffffu, mx[n][c], 16));
            }
        float alpha[DNT][2], rs[DNT][2];
        bool moved = false;
#pragma unroll
        for (int n = 0; n < DNT; n++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                alpha[n][c] = mx[n][c] == -KILN_INF ? 1.0f : fast_exp2(m[n][c] - mx[n][c]);
                moved |= alpha[n][c] != 1.0f;
                rs[n][c] = 0.0f;
            }
        // the output is rescaled only when some column's maximum moved
        if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
            for (int dt = 0; dt < HD / 16; dt++)
#pragma unroll
                for (int n = 0; n < DNT; n++)
#pragma unroll
                    for (int k = 0; k < 4; k++) o[dt][n][k] *= alpha[n][k & 1];
        }
        // per tile: probabilities, P^T fragments (fp16, transposed), O^T += V^T P^T
#pragma unroll
        for (int u = 0; u < 2; u++) {
            if (u == 1 && !has_b) break;
            u32 pb[1][DNT][2];
#pragma unroll
            for (int n = 0; n < DNT; n++) {
                float p[4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const float mk = mx[n][k & 1];
                    p[k] = mk == -KILN_INF ? 0.0f : fast_exp2(sc[u][n][k] - mk);
                    rs[n][k & 1] += p[k];
                }
                pb[0][n][0] = movtrans(pack2<fp16>(p[0], p[1]));
                pb[0][n][1] = movtrans(pack2<fp16>(p[2], p[3]));
            }
            const u32 vt = kt[u] + K_TILE_BYTES;
            pv_tiles_t<1>(o, pb, &vt, lane);
        }
#pragma unroll
        for (int n = 0; n < DNT; n++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                l[n][c] = l[n][c] * alpha[n][c] + rs[n][c];
                m[n][c] = mx[n][c];
            }
        __syncwarp();
    }
    cp_async_wait<0>();
    // full column sums across the 8 lanes of a column
#pragma unroll
    for (int n = 0; n < DNT; n++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            l[n][c] += __shfl_xor_sync(0xffffffffu, l[n][c], 4);
            l[n][c] += __shfl_xor_sync(0xffffffffu, l[n][c], 8);
            l[n][c] += __shfl_xor_sync(0xffffffffu, l[n][c], 16);
        }
#else
    const float sl2 = scale * LOG2E * kv_k_scale(kv_scales, nkv, kvh);
    float o[HD / 8][4];
#pragma unroll
    for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m[2] = {-KILN_INF, -KILN_INF}, l[2] = {0.0f, 0.0f};

    char *wsm = smem + (size_t)warp * STAGES * TILE_BYTES;
    const u32 wsm_addr = smem_addr(wsm);
    // this warp's tiles: t_first + warp + k * nw
    int n_mine = 0;
    if (t_first + warp < t_end) n_mine = (t_end - 1 - (t_first + warp)) / nw + 1;
    // The first tiles go out before the wait on the previous kernel when all
    // their tokens precede the step's own (pos): earlier steps wrote those
    // (and the host the sequence's metadata: ctx_len, qstart, block_tables),
    // while the previous kernel (the rope + KV write) writes position pos
    // and the query. So the KV stream overlaps that kernel's tail.
    int st = 0;
    for (; st < STAGES - 1 && st < n_mine; st++) {
        const int t = t_first + warp + st * nw;
        if (t * 16 + 16 > pos) break; // holds pos (the last tile): after the wait
        load_tile_dec(wsm + st * TILE_BYTES, kc, vc, bt, nkv, kvh, t * 16, 16, lane);
        cp_async_commit();
    }
#if HD % 32 == 0
    // RP: the cos / sin table (HD / 2 pairs) past everything else in the dynamic shared memory
    float2 *rcs = reinterpret_cast<float2 *>(smem + dynamic_smem_bytes() - HD * 4);
    if (RP) {
        const float p = (float)rpos[tok_row];
        for (int i = threadIdx.x; i < HD / 2; i += blockDim.x) {
            float sn, cn;
            sincosf(p * inv_freq[i], &sn, &cn);
            rcs[i] = make_float2(cn * mscale, sn * mscale);
        }
    }
#endif
    pdl_wait();
    pdl_launch();
#if HD % 32 == 0
    if (RP) {
        const int slot = slots[tok_row];
        if (pos >= beg && pos < end && slot >= 0) { // this partition holds pos: its key and value into the cache
            const act_t *kr = q + (size_t)tok_row * q_stride + (size_t)(nq + kvh) * HD, *vr = kr + (size_t)nkv * HD;
            kv_t *kd = step_at(kc, slot, nkv, kvh, 8), *vd = step_at(vc, slot, nkv, kvh, 1);
            for (int i = threadIdx.x; i < HD / 2; i += blockDim.x) {
                float y0, y1;
                rope_rot(to_f32(kr[i]), to_f32(kr[i + HD / 2]), rcs[i].x, rcs[i].y, y0, y1);
                put_step_key(kd, i, y0, y1);
            }
            for (int d = threadIdx.x; d < HD; d += blockDim.x) vd[(size_t)d * BLOCK_SIZE] = vr[d];
            // the tile loads (cp.async.cg) read L2: the stores must be there, not only ordered within the
            // block by the barrier (without this fence, s88's test_attention_decode_rope read the old key /
            // value of the step's slot where a split put the step's tile among a warp's first loads)
            __threadfence();
        }
        __syncthreads(); // the step's key and value (and the table) before any load of their tile
    }
#else
    if (RP) __trap(); // the host launches RP only with HD % 32 == 0
#endif
    for (; st < STAGES - 1; st++) {
        if (st < n_mine) {
            int t = t_first + warp + st * nw;
            load_tile_dec(wsm + st * TILE_BYTES, kc, vc, bt, nkv, kvh, t * 16, min(16, ctx - t * 16), lane);
        }
        cp_async_commit();
    }
    // Q fragments (the previous kernel's output: after the wait): row g ->
    // head qh0 + g (valid when g < GROUP), row g + 8 -> qh0 + g + 8
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
#if HD % 32 == 0
    if (RP) { // rotate: (a, b) = dims (col, col + HD / 2) -> (a c - b s, b c + a s), rounded to act_t
#pragma unroll
        for (int kk = 0; kk < HD / 32; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int col = q_col(kk, tig, i);
                rope_frag(qa[kk][i], qa[kk + HD / 32][i], rcs[col].x, rcs[col].y, rcs[col + 1].x, rcs[col + 1].y);
            }
    }
#endif
    for (int i = 0; i < n_mine; i++) {
        {
            int nx = i + STAGES - 1;
            if (nx < n_mine) {
                int t = t_first + warp + nx * nw;
                load_tile_dec(wsm + (nx % STAGES) * TILE_BYTES, kc, vc, bt, nkv, kvh, t * 16, min(16, ctx - t * 16), lane);
            }
            cp_async_commit();
        }
        cp_async_wait<STAGES - 1>();
        __syncwarp();
        const int t = t_first + warp + i * nw;
        const u32 tile = wsm_addr + (i % STAGES) * TILE_BYTES;
        float sc[8];
#pragma unroll
        for (int k = 0; k < 8; k++) sc[k] = 0.0f;
        qk_tile(sc, qa, tile, lane);
        float mx[2] = {m[0], m[1]};
        mask_scale(sc, t, tig, lo, pos, sl2, mx);
        quad_row_max(mx);
        float alpha[2], rs[2];
        tile_probs<true>(sc, m, mx, alpha, rs);
        // the output is rescaled only when some row's maximum moved (after the
        // first tiles it rarely does)
        online_rescale(o, m, l, mx, alpha, rs);
        pv_probs(o, sc, tile + K_TILE_BYTES, lane);
        __syncwarp();
    }
    cp_async_wait<0>();
    // full row sums across the 4 lanes of a row
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
#endif
    __syncthreads(); // pipelines drained: reuse shared memory for the merge
    // merge the warps: rows < GROUP only (GROUP <= 16)
    float *sm_m = (float *)smem;                 // [nw][16]
    float *sm_l = sm_m + nw * 16;                // [nw][16]
    float *sm_o = sm_l + nw * 16;                // [nw][16][HD]
#if KV_FP8
#pragma unroll
    for (int n = 0; n < DNT; n++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const int h = n * 8 + tig * 2 + c;
            if (h < GROUP) {
                if (g == 0) {
                    sm_m[warp * 16 + h] = m[n][c];
                    sm_l[warp * 16 + h] = l[n][c];
                }
#pragma unroll
                for (int dt = 0; dt < HD / 16; dt++) {
                    sm_o[(warp * 16 + h) * HD + dt * 16 + g] = o[dt][n][c];
                    sm_o[(warp * 16 + h) * HD + dt * 16 + g + 8] = o[dt][n][c + 2];
                }
            }
        }
#else
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
#endif
    __syncthreads();
#if KV_FP8
    const float vs = kv_v_scale(kv_scales, nkv, kvh);
#endif
    // a split's live partitions (those with tokens; ctx reloaded rather than kept in registers through the
    // loop): a sequence whose context fits its first partition has no other, so that block writes the
    // output itself, as the one-pass kernel does -- the combination of a single part gives the same bits
    // -- and neither the counters nor kiln_attn_reduce touch it (a decode graph's split is planned for
    // the model's longest context: at -b 32 the second of two 4096-token partitions is always empty)
    // (a predicate through the merge loop, np after it: an int live across the loop spilled in the FP8 kernels)
    const bool direct = partition_size == 0 || ctx_len[s] <= part_size(ctx_len[s], partition_size, n_parts);
    for (int e = threadIdx.x; e < GROUP * HD; e += blockDim.x) {
        int row = e / HD, d = e - row * HD;
        float M = -KILN_INF;
#pragma unroll
        for (int w = 0; w < nw; w++) M = fmaxf(M, sm_m[w * 16 + row]);
        float L = 0.0f, acc = 0.0f;
#pragma unroll
        for (int w = 0; w < nw; w++) {
            float wm = sm_m[w * 16 + row];
            float f = wm == -KILN_INF ? 0.0f : exp2f(wm - M);
            L += sm_l[w * 16 + row] * f;
            acc += sm_o[(w * 16 + row) * HD + d] * f;
        }
#if KV_FP8
        acc *= vs;
#endif
        int qh = qh0 + row;
        if (!direct) { // split: this partition's unnormalized part
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
    if (direct || !counters) return;
    // split with counters: the last of the live partitions to get here combines them
    // (the vote is a barrier's, no __shared__ flag: a 16-byte one in front of the dynamic tiles, before
    // smem4 was declared 128-byte aligned, made the kernel 15-20% slower even where no counters are passed)
    const int np = live_parts(ctx_len[s], partition_size, n_parts); // (> 1 here)
    __syncthreads(); // this block's parts are stored
    int last = 0;
    if (threadIdx.x == 0) {
        // one acquire-release count at GPU scope instead of __threadfence() (fence.sc) on both sides: its
        // release publishes this block's parts (ordered before it by the barrier above), its acquire in
        // the last block orders the other blocks' parts before that block's loads (through the barrier
        // below); the seventh and tenth sessions' versions with the SC fences lost to the reduce launch
        int *c = counters + (size_t)s * gridDim.x + blockIdx.x;
        const int prev = atom_inc_acq_rel_gpu(c);
        last = prev == np - 1;
        if (last) *c = 0; // every live partition has counted: ready for the next launch
    }
    if (!__syncthreads_or(last)) return;
    // the fused split's combination in the last partition block: warp w the group's heads w, w + nw, ..
    combine_rows<true>(out, part_o, part_ml, tok_row, nq, qh0, ((size_t)s * nq + qh0) * n_parts, n_parts, np,
                       (int)(threadIdx.x >> 5), GROUP, nw);
}

extern "C" __global__ void __launch_bounds__(NW * 32)
kiln_attn_decode(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride, const kv_t *__restrict__ kc,
                 const kv_t *__restrict__ vc, const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                 const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv, float scale,
                 int window, int partition_size, int n_parts, float *__restrict__ part_o, float *__restrict__ part_ml,
                 const float *__restrict__ kv_scales, int *__restrict__ counters) {
    attn_decode_body<false>(out, q, q_stride, kc, vc, qstart, ctx_len, block_tables, max_blocks, n_seqs, nq, nkv, scale,
                            window, partition_size, n_parts, part_o, part_ml, kv_scales, counters, nullptr, nullptr,
                            1.0f, nullptr);
}

// kiln_attn_decode_rope: the same with the step's rope + KV write (RP above; the launch's dynamic shared
// memory HD * 4 bytes larger). 16-bit caches only: an FP8 specialization traps.
extern "C" __global__ void __launch_bounds__(NW * 32)
kiln_attn_decode_rope(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride, kv_t *kc, kv_t *vc,
                      const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                      const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv, float scale,
                      int window, int partition_size, int n_parts, float *__restrict__ part_o,
                      float *__restrict__ part_ml, int *__restrict__ counters, const int *__restrict__ pos,
                      const float *__restrict__ inv_freq, float mscale, const int *__restrict__ slots) {
#if KV_FP8
    __trap();
#else
    attn_decode_body<true>(out, q, q_stride, kc, vc, qstart, ctx_len, block_tables, max_blocks, n_seqs, nq, nkv, scale,
                           window, partition_size, n_parts, part_o, part_ml, nullptr, counters, pos, inv_freq, mscale,
                           slots);
#endif
}

// kiln_attn_decode_pw -- the persistent-warp form for many short sequences (16-bit caches; the host's
// choice, engine/cuda/ops_gpu.c): a work item is one (sequence, KV group) and a warp owns whole items,
// wg, wg + TW, .. (wg the warp's index in the grid, TW the grid's warps; at most 32 items a warp), so no
// merge between warps and no partitions. Its tiles, item after item, are one stream through the warp's
// ring of ST slots (the launch's dynamic shared memory / (warps * PW_SLOT), 2 to 6): the next item's
// first tiles are in flight while the current item's last ones are multiplied, where kiln_attn_decode's
// blocks each start and drain their own short pipeline. A slot is a K + V tile and, after them, the
// group's query rows of an item whose first tile it holds (copied with that tile; the first item's
// query is read from global memory when its first tile went out before griddepcontrol.wait). Each tile
// is processed as kiln_attn_decode's warps process theirs (qk_tile, mask_scale, tile_probs,
// online_rescale, pv_probs); an item's output is o / l as the one-pass kernel writes it (a sequence
// with no tokens in its window: 0). Grid (blocks), nw * 32 threads.
#define PW_QBYTES (GROUP * HD * (int)sizeof(act_t))
#define PW_SLOT ((TILE_BYTES + PW_QBYTES + 127) / 128 * 128)
KILN_DEV void cp_async_wait_rt(int n) { // cp.async.wait_group n, n in [0, 5] at run time
    switch (n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    default: cp_async_wait<5>(); break;
    }
}
// The body of kiln_attn_decode_pw and, RP, kiln_attn_decode_pw_rope: the step's rope + KV write as in
// kiln_attn_decode_rope (the host: GROUP == nq / nkv, so an item is a whole KV head and only its warp reads
// the step's key and value back). After the wait each warp writes the rotated key and the value of each of
// its items at the item's slot (a lane 2 frequencies of the pair, cos / sin from the precise sincosf),
// fences them to GPU scope, then issues its tiles; each item's query fragments are rotated as they are
// loaded, the lane's cos / sin fetched from the lanes that computed them for the item (register
// kk / 2 of lane (kk % 2) 16 + the fragment's column mod 16). rope_rot: the bits of kiln_rope_kv_write_dec.
#if !KV_FP8
template <bool RP>
KILN_DEV void attn_decode_pw_body(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride,
                                  const kv_t *__restrict__ kc, const kv_t *__restrict__ vc,
                                  const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                                  const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv,
                                  float scale, int window, const int *__restrict__ rpos,
                                  const float *__restrict__ inv_freq, float mscale, const int *__restrict__ slots) {
    extern __shared__ __align__(128) float4 smem4[];
    char *smem = (char *)smem4;
    const int nw = (int)(blockDim.x >> 5), warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tig = lane & 3;
    const int ngrp = nq / GROUP, ratio = nq / nkv, n_items = n_seqs * ngrp;
    const int TW = (int)gridDim.x * nw, wg = (int)blockIdx.x * nw + warp;
    const int my_items = wg < n_items ? min(32, (n_items - 1 - wg) / TW + 1) : 0;
    int ST = (int)(dynamic_smem_bytes() / (u32)(nw * PW_SLOT));
    ST = ST < 2 ? 2 : ST > 6 ? 6 : ST;
    char *wsm = smem + (size_t)warp * ST * PW_SLOT;
    const u32 wsm_addr = smem_addr(wsm);
    const float sl2 = scale * LOG2E;
    // lane k holds item k's context and query row (host metadata: readable before the wait)
    int m_ctx = 0, m_row = 0;
    if (lane < my_items) {
        const int sk = (wg + lane * TW) / ngrp;
        m_ctx = ctx_len[sk];
        m_row = qstart[sk];
    }
    // item k's tiles [t_first, t_end)
    auto tiles_of = [&](int k, int &tf, int &te) {
        const int c = __shfl_sync(0xffffffffu, m_ctx, k);
        const int lo = window > 0 ? max(0, c - window) : 0;
        tf = lo / 16;
        te = (c + 15) / 16;
        if (c <= 0) tf = te = 0;
    };
    // the issue cursor: item ik, its next tile it (< ite); ik == my_items: done
    int ik = 0, it = 0, ite = 0, itf = 0;
    auto enter = [&](int k) { // the first item from k on that has tiles
        for (ik = k; ik < my_items; ik++) {
            tiles_of(ik, itf, ite);
            if (ite > itf) break;
        }
        it = itf;
    };
    enter(0);
    u32 iss = 0; // slot offset of the next tile to issue
    auto issue = [&](bool after_wait) {
        if (ik < my_items) {
            const int item = wg + ik * TW, sk = item / ngrp, qh0 = (item - sk * ngrp) * GROUP, kvh = qh0 / ratio;
            const int c = __shfl_sync(0xffffffffu, m_ctx, ik);
            load_tile_dec(wsm + iss, kc, vc, block_tables + (size_t)sk * max_blocks, nkv, kvh, it * 16,
                          min(16, c - it * 16), lane);
            if (it == itf && after_wait) { // the item's query rows ride with its first tile
                const act_t *qs = q + (size_t)__shfl_sync(0xffffffffu, m_row, ik) * q_stride + (size_t)qh0 * HD;
                for (int ch = lane; ch < PW_QBYTES / 16; ch += 32) cp_async16(wsm + iss + TILE_BYTES + ch * 16, qs + ch * 8, 16);
            }
            if (++it == ite) enter(ik + 1);
        }
        cp_async_commit();
        iss = iss + PW_SLOT == (u32)(ST * PW_SLOT) ? 0u : iss + PW_SLOT;
    };
    // before the wait: the first item's first tiles whose tokens all precede its own position (earlier
    // steps wrote them; the previous kernel writes the query and position ctx - 1, which is in the item's
    // last tile, so these never finish the item); that item's query is read from global memory
    int pre = 0, pre_item = -1;
    if (ik < my_items) {
        const int c = __shfl_sync(0xffffffffu, m_ctx, ik);
        while (pre < ST - 1 && it * 16 + 16 <= c - 1) issue(false), pre++;
        if (pre) pre_item = ik;
    }
    pdl_wait();
    pdl_launch();
#if HD % 64 == 0
    if (RP) { // each item's step key (rotated) and value into the cache, before any tile of the item is issued
        bool wrote = false;
        for (int k = 0; k < my_items; k++) {
            const int row = __shfl_sync(0xffffffffu, m_row, k), slot = slots[row];
            if (slot < 0) continue;
            const int item = wg + k * TW, sk = item / ngrp, kvh = (item - sk * ngrp) * GROUP / ratio;
            const float p = (float)rpos[row];
            const act_t *kr = q + (size_t)row * q_stride + (size_t)(nq + kvh) * HD, *vr = kr + (size_t)nkv * HD;
            kv_t *kd = step_at(kc, slot, nkv, kvh, 8), *vd = step_at(vc, slot, nkv, kvh, 1);
#pragma unroll
            for (int r = 0; r < HD / 64; r++) {
                const int i = lane + 32 * r;
                float sn, cn, y0, y1;
                sincosf(p * inv_freq[i], &sn, &cn);
                rope_rot(to_f32(kr[i]), to_f32(kr[i + HD / 2]), cn * mscale, sn * mscale, y0, y1);
                put_step_key(kd, i, y0, y1);
            }
#pragma unroll
            for (int r = 0; r < HD / 32; r++) vd[(size_t)(lane + 32 * r) * BLOCK_SIZE] = vr[lane + 32 * r];
            wrote = true;
        }
        if (wrote) __threadfence(); // the tile loads (cp.async.cg) read L2
        __syncwarp();
    }
#endif
    for (int k = pre; k < ST - 1; k++) issue(true);

    // the compute cursor: item ck, tile ct of [ctf, cte)
    int ck = 0, ct = 0, ctf = 0, cte = 0;
    for (; ck < my_items; ck++) {
        tiles_of(ck, ctf, cte);
        if (cte > ctf) break;
    }
    ct = ctf;
    u32 use = 0;
    u32 qa[HD16 / 16][4];
    float o[HD / 8][4];
    float m[2], l[2];
    int c_ctx = 0, c_row = 0, c_qh0 = 0;
    while (ck < my_items) {
        issue(true);
        cp_async_wait_rt(ST - 1);
        __syncwarp();
        const u32 tile = wsm_addr + use;
        if (ct == ctf) { // a new item: its query fragments, fresh state
            const int item = wg + ck * TW, sk = item / ngrp;
            c_qh0 = (item - sk * ngrp) * GROUP;
            c_ctx = __shfl_sync(0xffffffffu, m_ctx, ck);
            c_row = __shfl_sync(0xffffffffu, m_row, ck);
            const act_t *qsrc = ck == pre_item ? q + (size_t)c_row * q_stride + (size_t)c_qh0 * HD
                                               : (const act_t *)(wsm + use + TILE_BYTES);
#pragma unroll
            for (int kk = 0; kk < HD16 / 16; kk++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int row = g + (i & 1) * 8, col = q_col(kk, tig, i);
                    qa[kk][i] = row < GROUP && col < HD ? load_q2(qsrc + row * HD + col) : 0u;
                }
#if HD % 64 == 0
            if (RP) { // rotate: lane l's cos / sin of frequencies l, l + 32, ..; the fragment's from lane col % 32
                float2 rc[HD / 64];
                const float p = (float)rpos[c_row];
#pragma unroll
                for (int r = 0; r < HD / 64; r++) {
                    float sn, cn;
                    sincosf(p * inv_freq[lane + 32 * r], &sn, &cn);
                    rc[r] = make_float2(cn * mscale, sn * mscale);
                }
#pragma unroll
                for (int kk = 0; kk < HD / 32; kk++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const int src = q_col(kk, tig, i) % 32; // q_col(kk, ..) / 32 == kk / 2
                        const float c0 = __shfl_sync(0xffffffffu, rc[kk / 2].x, src),
                                    s0 = __shfl_sync(0xffffffffu, rc[kk / 2].y, src),
                                    c1 = __shfl_sync(0xffffffffu, rc[kk / 2].x, src + 1),
                                    s1 = __shfl_sync(0xffffffffu, rc[kk / 2].y, src + 1);
                        rope_frag(qa[kk][i], qa[kk + HD / 32][i], c0, s0, c1, s1);
                    }
            }
#endif
#pragma unroll
            for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
            m[0] = m[1] = -KILN_INF;
            l[0] = l[1] = 0.0f;
        }
        const int pos = c_ctx - 1, lo = window > 0 ? max(0, pos - window + 1) : 0;
        // the tile step as kiln_attn_decode's loop writes it (inline in both kernels: as one shared
        // __forceinline__ function, kiln_attn_decode compiled to different code than was measured)
        float sc[8];
#pragma unroll
        for (int k = 0; k < 8; k++) sc[k] = 0.0f;
        qk_tile(sc, qa, tile, lane);
        float mx[2] = {m[0], m[1]};
        mask_scale(sc, ct, tig, lo, pos, sl2, mx);
        quad_row_max(mx);
        float alpha[2], rs[2];
        tile_probs<true>(sc, m, mx, alpha, rs);
        online_rescale(o, m, l, mx, alpha, rs);
        pv_probs(o, sc, tile + K_TILE_BYTES, lane);
        __syncwarp();
        use = use + PW_SLOT == (u32)(ST * PW_SLOT) ? 0u : use + PW_SLOT;
        if (++ct == cte) { // the item's output: o / l, rows g and g + 8 of the group
            float L[2] = {l[0], l[1]};
#pragma unroll
            for (int r = 0; r < 2; r++) {
                L[r] += __shfl_xor_sync(0xffffffffu, L[r], 1);
                L[r] += __shfl_xor_sync(0xffffffffu, L[r], 2);
            }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = g + r * 8;
                if (row >= GROUP) continue;
                act_t *dst = out + (size_t)c_row * nq * HD + (size_t)(c_qh0 + row) * HD;
#pragma unroll
                for (int nt = 0; nt < HD / 8; nt++) {
                    const int c = nt * 8 + tig * 2;
                    dst[c] = from_f32<act_t>(L[r] > 0.0f ? o[nt][2 * r] / L[r] : 0.0f);
                    dst[c + 1] = from_f32<act_t>(L[r] > 0.0f ? o[nt][2 * r + 1] / L[r] : 0.0f);
                }
            }
            for (ck++; ck < my_items; ck++) {
                tiles_of(ck, ctf, cte);
                if (cte > ctf) break;
            }
            ct = ctf;
        }
    }
    cp_async_wait<0>();
    // items with no token in their window: 0 (as kiln_attn_decode's merge writes them)
    for (int k = 0; k < my_items; k++) {
        int tf, te;
        tiles_of(k, tf, te);
        if (te > tf) continue;
        const int item = wg + k * TW, sk = item / ngrp, qh0 = (item - sk * ngrp) * GROUP;
        act_t *dst = out + (size_t)__shfl_sync(0xffffffffu, m_row, k) * nq * HD + (size_t)qh0 * HD;
        for (int e = lane; e < GROUP * HD; e += 32) dst[e] = from_f32<act_t>(0.0f);
    }
}
#endif

extern "C" __global__ void __launch_bounds__(NW * 32)
kiln_attn_decode_pw(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride, const kv_t *__restrict__ kc,
                    const kv_t *__restrict__ vc, const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                    const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv, float scale,
                    int window) {
#if KV_FP8
    __trap(); // 16-bit caches only: the host never launches it for FP8
#else
    attn_decode_pw_body<false>(out, q, q_stride, kc, vc, qstart, ctx_len, block_tables, max_blocks, n_seqs, nq, nkv,
                               scale, window, nullptr, nullptr, 1.0f, nullptr);
#endif
}

// kiln_attn_decode_pw_rope: the same with the step's rope + KV write (16-bit caches of act_t, HD a multiple of
// 64, GROUP == nq / nkv; an FP8 specialization or another head dim traps)
extern "C" __global__ void __launch_bounds__(NW * 32)
kiln_attn_decode_pw_rope(act_t *__restrict__ out, const act_t *__restrict__ q, i64 q_stride, kv_t *kc, kv_t *vc,
                         const int *__restrict__ qstart, const int *__restrict__ ctx_len,
                         const int *__restrict__ block_tables, int max_blocks, int n_seqs, int nq, int nkv, float scale,
                         int window, const int *__restrict__ pos, const float *__restrict__ inv_freq, float mscale,
                         const int *__restrict__ slots) {
#if KV_FP8 || HD % 64 != 0
    __trap();
#else
    attn_decode_pw_body<true>(out, q, q_stride, kc, vc, qstart, ctx_len, block_tables, max_blocks, n_seqs, nq, nkv,
                              scale, window, pos, inv_freq, mscale, slots);
#endif
}

// Combine the partitions of each (sequence, head): grid (ceil(nq / warps), n_seqs), a warp a head
// (combine_rows). Sequences with one live partition are skipped: the attention kernel wrote their output.
extern "C" __global__ void kiln_attn_reduce(act_t *__restrict__ out, const float *__restrict__ part_o,
                                            const float *__restrict__ part_ml, const int *__restrict__ qstart,
                                            const int *__restrict__ ctx_len, int nq, int n_parts, int partition_size) {
    pdl_wait(); // before any exit: this grid completes after the attention grid, for the kernels behind it
    pdl_launch();
    const int qh = blockIdx.x * (int)(blockDim.x >> 5) + (int)(threadIdx.x >> 5), s = blockIdx.y;
    if (qh >= nq) return;
    const int np = live_parts(ctx_len[s], partition_size, n_parts);
    if (np <= 1) return;
    combine_rows<false>(out, part_o, part_ml, qstart[s], nq, qh, ((size_t)s * nq + qh) * n_parts, n_parts, np, 0, 1, 1);
}
