// test_emu_attn.cc -- kernel_src/attn_decode.cu (paged decode attention, 16-bit caches) under the CPU emulation
// of tests/emu/cuda_emu.h, one specialization a build (ACT = KV, HEAD_DIM, BLOCK_SIZE, GROUP). Sequences whose
// contexts start, end and stop mid-block (1 .. 333 tokens) in a cache whose blocks are shuffled, GQA (a KV head
// for nq / nkv query heads), as engine/cuda/ops_gpu.c launches it: one pass (4 and 2 warps); split into fixed
// 64-token partitions combined by the attention's last block (counters; its blocks run in grid order, reversed
// and shuffled: the same bits) or by kiln_attn_reduce; split into 3 parts a sequence (the adaptive form); a
// sliding window; the persistent-warp kernel (kiln_attn_decode_pw: 1 to 24 items a warp, the 32 it allows at
// most); the step's rope + KV write inside the attention (kiln_attn_decode_rope, _pw_rope). Against a
// double-precision softmax(q k^T scale) v on the same 16-bit values: every output
// within the roundings the kernel makes (the probabilities to 16 bits before P V, the output once); rows of
// other tokens untouched; the counters back at 0. Exit 0 when every case passes.
#include "kiln_common.cuh"
#include ATTN_DECODE_EMU_SRC
#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

struct Args {
    act_t *out;
    const act_t *q;
    i64 q_stride;
    const kv_t *kc, *vc;
    const int *qstart, *ctx_len, *bt;
    int max_blocks, n_seqs, nq, nkv;
    float scale;
    int window, psz, n_parts;
    float *part_o, *part_ml;
    int *counters;
    const float *kv_scales = nullptr; // FP8 caches: [2, nkv] (keys', then values')
};
static void body_attn(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_attn_decode(a->out, a->q, a->q_stride, a->kc, a->vc, a->qstart, a->ctx_len, a->bt, a->max_blocks, a->n_seqs,
                     a->nq, a->nkv, a->scale, a->window, a->psz, a->n_parts, a->part_o, a->part_ml, a->kv_scales, a->counters);
}
static void body_pw(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_attn_decode_pw(a->out, a->q, a->q_stride, a->kc, a->vc, a->qstart, a->ctx_len, a->bt, a->max_blocks, a->n_seqs,
                        a->nq, a->nkv, a->scale, a->window);
}
struct RopeArgs {
    Args a;
    const int *pos, *slots;
    const float *inv_freq;
    float mscale;
    kv_t *kc, *vc; // written: the step's key and value
};
[[maybe_unused]] static void body_rope(void *p) {
    RopeArgs *r = static_cast<RopeArgs *>(p);
    const Args *a = &r->a;
    kiln_attn_decode_rope(a->out, a->q, a->q_stride, r->kc, r->vc, a->qstart, a->ctx_len, a->bt, a->max_blocks,
                          a->n_seqs, a->nq, a->nkv, a->scale, a->window, a->psz, a->n_parts, a->part_o, a->part_ml,
                          a->counters, r->pos, r->inv_freq, r->mscale, r->slots);
}
[[maybe_unused]] static void body_pw_rope(void *p) {
    RopeArgs *r = static_cast<RopeArgs *>(p);
    const Args *a = &r->a;
    kiln_attn_decode_pw_rope(a->out, a->q, a->q_stride, r->kc, r->vc, a->qstart, a->ctx_len, a->bt, a->max_blocks,
                             a->n_seqs, a->nq, a->nkv, a->scale, a->window, r->pos, r->inv_freq, r->mscale, r->slots);
}
static void body_reduce(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_attn_reduce(a->out, a->part_o, a->part_ml, a->qstart, a->ctx_len, a->nq, a->n_parts, a->psz);
}

int main() {
    const int nkv = 2, nq = nkv * (GROUP >= 4 ? GROUP : 4), ratio = nq / nkv, hd = HEAD_DIM, bs = BLOCK_SIZE;
    const int ctxs[] = {1, 15, 16, 17, 100, 333};
    const int n_seqs = (int)(sizeof ctxs / sizeof ctxs[0]), T = n_seqs + 2; // two rows no sequence owns
    int max_ctx = 0, max_blocks = 0;
    for (int c : ctxs) max_ctx = std::max(max_ctx, c), max_blocks = std::max(max_blocks, (c + bs - 1) / bs);
    const int n_blocks = n_seqs * max_blocks + 3;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    // the cache: key [blocks, nkv, hd / 8, bs, 8], value [blocks, nkv, hd, bs]; block tables over shuffled blocks
    std::vector<kv_t> kc((size_t)n_blocks * nkv * hd * bs), vc(kc.size());
    // (FP8 caches: stored = fp8(value / scale), the values u * 8 / 8 again with per-head scales)
    const float kv_amp = sizeof(kv_t) == 1 ? 8.0f : 1.0f;
    std::vector<float> kv_scales(2 * nkv);
    for (int i = 0; i < 2 * nkv; i++) kv_scales[i] = sizeof(kv_t) == 1 ? 0.125f * (1.0f + 0.25f * (float)i) : 1.0f;
    for (auto &e : kc) e = from_f32<kv_t>(u(rng) * kv_amp);
    for (auto &e : vc) e = from_f32<kv_t>(u(rng) * kv_amp);
    std::vector<int> perm(n_blocks);
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int> bt((size_t)n_seqs * max_blocks, 0), ctx(ctxs, ctxs + n_seqs), qstart(n_seqs);
    for (int s = 0; s < n_seqs; s++) {
        qstart[s] = (s * 5 + 3) % T; // rows in another order than the sequences
        for (int b = 0; b < (ctx[s] + bs - 1) / bs; b++) bt[(size_t)s * max_blocks + b] = perm[s * max_blocks + b];
    }
    for (int s = 0; s < n_seqs; s++) // distinct rows
        for (int r = 0; r < s; r++)
            if (qstart[r] == qstart[s]) return fprintf(stderr, "test setup: rows collide\n"), 1;
    const i64 q_stride = (i64)(nq + 2 * nkv) * hd; // a qkv row
    std::vector<act_t> q((size_t)T * q_stride);
    for (auto &e : q) e = from_f32<act_t>(u(rng));
    const float scale = 1.0f / sqrtf((float)hd);
    const int kx = 16 / (int)sizeof(kv_t); // key chunk: kx dims of one token
    auto kv_at = [&](const std::vector<kv_t> &c, bool key, int s, int kvh, int t, int d) {
        const int b = bt[(size_t)s * max_blocks + t / bs], o = t % bs;
        const size_t base = ((size_t)b * nkv + kvh) * hd * bs;
        return (double)to_f32(key ? c[base + (size_t)(d / kx) * bs * kx + o * kx + d % kx] : c[base + (size_t)d * bs + o]) *
               (sizeof(kv_t) == 1 ? kv_scales[(key ? 0 : nkv) + kvh] : 1.0f);
    };
    // the reference for a window: out[s][h][d], and sum p |v| for the tolerance
    auto reference = [&](int window, std::vector<double> &ref, std::vector<double> &mag, const std::vector<act_t> &qv,
                         const std::vector<kv_t> &kcv, const std::vector<kv_t> &vcv) {
        ref.assign((size_t)n_seqs * nq * hd, 0.0), mag.assign(ref.size(), 0.0);
        for (int s = 0; s < n_seqs; s++)
            for (int h = 0; h < nq; h++) {
                const int kvh = h / ratio, pos = ctx[s] - 1, lo = window > 0 ? std::max(0, pos - window + 1) : 0;
                std::vector<double> p(ctx[s], 0.0);
                double mx = -INFINITY, sum = 0.0;
                for (int t = lo; t <= pos; t++) {
                    double d = 0.0;
                    for (int i = 0; i < hd; i++)
                        d += (double)to_f32(qv[(size_t)qstart[s] * q_stride + (size_t)h * hd + i]) * kv_at(kcv, true, s, kvh, t, i);
                    p[t] = d * scale, mx = std::max(mx, p[t]);
                }
                for (int t = lo; t <= pos; t++) p[t] = exp(p[t] - mx), sum += p[t];
                for (int i = 0; i < hd; i++) {
                    double a = 0.0, m = 0.0;
                    for (int t = lo; t <= pos; t++) {
                        const double v = kv_at(vcv, false, s, kvh, t, i);
                        a += p[t] * v, m += p[t] * fabs(v);
                    }
                    ref[((size_t)s * nq + h) * hd + i] = a / sum, mag[((size_t)s * nq + h) * hd + i] = m / sum;
                }
            }
    };
    const double ulp = std::is_same<act_t, fp16>::value ? 1.0 / 2048 : 1.0 / 256;
    // the outputs of every sequence's row against ref (within the kernel's roundings); the wrong ones counted
    auto check_out = [&](const char *name, const std::vector<act_t> &out, const std::vector<double> &ref,
                         const std::vector<double> &mag) {
        int bad = 0;
        for (int s = 0; s < n_seqs; s++)
            for (int h = 0; h < nq; h++)
                for (int i = 0; i < hd; i++) {
                    const size_t k = ((size_t)s * nq + h) * hd + i;
                    const double got = to_f32(out[(size_t)qstart[s] * nq * hd + (size_t)h * hd + i]);
                    const double tol = fabs(ref[k]) * ulp + mag[k] * ulp + 1e-5;
                    if (!(fabs(got - ref[k]) <= tol)) {
                        if (bad < 5)
                            fprintf(stderr, "  %s: seq %d (ctx %d) head %d dim %d: %.6g, reference %.6g (tol %.3g)\n", name, s,
                                    ctx[s], h, i, got, ref[k], tol);
                        bad++;
                    }
                }
        return bad;
    };
    // pw > 0: kiln_attn_decode_pw (persistent warps, the items -- sequence x KV group -- dealt to the grid's warps)
    // in pw blocks of nw warps
    struct Case { const char *name; int nw, psz, n_parts, window; bool counters; unsigned long long order; int pw; };
    const Case cases[] = {
        {"one pass", 4, 0, 1, 0, false, 0, 0},
        {"one pass, 2 warps", 2, 0, 1, 0, false, 0, 0},
        {"one pass, window 50", 4, 0, 1, 50, false, 0, 0},
        {"64-token partitions, combined by the last block", 4, 64, 0, 0, true, 0, 0},
        {"... blocks reversed", 4, 64, 0, 0, true, 1, 0},
        {"... blocks shuffled", 4, 64, 0, 0, true, 777, 0},
        {"64-token partitions, kiln_attn_reduce", 4, 64, 0, 0, false, 0, 0},
        {"3 parts a sequence, combined by the last block", 4, -1, 3, 0, true, 0, 0},
        {"64-token partitions, window 100, kiln_attn_reduce", 2, 64, 0, 100, false, 0, 0},
        {"persistent warps, 2 blocks of 4", 4, 0, 1, 0, false, 0, 2},
        {"persistent warps, 2 blocks of one warp (6 or 24 items a warp)", 1, 0, 1, 0, false, 0, 2},
        {"persistent warps, 3 blocks of 2, window 40, shuffled", 2, 0, 1, 40, false, 4242, 3},
    };
    int failures = 0;
    std::vector<act_t> first;
    for (const Case &c : cases) {
#if KV_FP8
        // FP8 caches: 4 warps, fixed partitions, neither the persistent-warp kernel nor the rope (the host's rule)
        if (c.nw != 4 || c.psz < 0 || c.pw) continue;
#endif
        const int n_parts = c.psz > 0 ? (max_ctx + c.psz - 1) / c.psz : c.n_parts;
        std::vector<double> ref, mag;
        reference(c.window, ref, mag, q, kc, vc);
        std::vector<act_t> out((size_t)T * nq * hd);
        for (auto &e : out) e = from_f32<act_t>(NAN);
        std::vector<float> part_o((size_t)n_seqs * nq * n_parts * hd, NAN), part_ml((size_t)n_seqs * nq * n_parts * 2, NAN);
        std::vector<int> counters((size_t)n_seqs * (nq / GROUP) + 1, 0);
#if KV_FP8
        const int stages = 6; // (the host's decode_fp8_plan picks 4 to 8)
#else
        const int stages = STAGES;
#endif
        const unsigned smem = c.pw ? (unsigned)(c.nw * 3 * PW_SLOT)
                                   : (unsigned)std::max(c.nw * stages * TILE_BYTES, (c.nw * 16 * 2 + c.nw * 16 * hd) * 4);
        Args a{out.data(), q.data(), q_stride, kc.data(), vc.data(), qstart.data(), ctx.data(), bt.data(), max_blocks,
               n_seqs, nq, nkv, scale, c.window, c.psz, n_parts, part_o.data(), part_ml.data(),
               c.counters ? counters.data() : nullptr};
        if (sizeof(kv_t) == 1) a.kv_scales = kv_scales.data();
        emu::block_order = c.order;
        if (c.pw) emu::launch(emu_dim3{(unsigned)c.pw, 1, 1}, 32 * c.nw, smem, 0, body_pw, &a);
        else emu::launch(emu_dim3{(unsigned)(nq / GROUP), (unsigned)n_seqs, (unsigned)n_parts}, 32 * c.nw, smem, 0, body_attn, &a);
        emu::block_order = 0;
        if (c.psz != 0 && !c.counters)
            emu::launch(emu_dim3{(unsigned)((nq + 3) / 4), (unsigned)n_seqs, 1}, 128, 0, 0, body_reduce, &a);
        int bad = check_out(c.name, out, ref, mag), stray = 0;
        for (int r = 0; r < T; r++) { // rows no sequence owns: untouched
            bool owned = false;
            for (int s = 0; s < n_seqs; s++) owned |= qstart[s] == r;
            if (!owned)
                for (int e = 0; e < nq * hd; e++) stray += !std::isnan(to_f32(out[(size_t)r * nq * hd + e]));
        }
        for (int x : counters) stray += x != 0;
        if (c.order && !c.pw) // the same bits whatever the order of the blocks
            bad += memcmp(first.data(), out.data(), out.size() * sizeof(act_t)) != 0;
        else if (c.counters && c.psz > 0)
            first = out;
        const bool ok = !bad && !stray;
        failures += !ok;
        printf("%s attn_decode HD %d GROUP %d %s%s: %s: %d wrong, %d stray\n", ok ? "ok  " : "FAIL", hd, GROUP,
               std::is_same<act_t, fp16>::value ? "fp16" : "bf16", sizeof(kv_t) == 1 ? " (FP8 cache)" : "", c.name, bad, stray);
    }
    // The step's rope + KV write inside the attention (kiln_attn_decode_rope, and kiln_attn_decode_pw_rope where a
    // KV group is a whole KV head): q and the step's key arrive unrotated in the qkv row; the cache's cell of
    // position ctx - 1 holds poison until the kernel writes the rotated key and the value there. Expected: the
    // cache with those cells as rope_rot of the row (cos / sin of pos * inv_freq times mscale, rounded to act:
    // bit for bit), every other cell unchanged; the output the attention of the rotated query over it.
#if !KV_FP8
    {
        std::vector<int> rpos(T, 0), slots(T, -1);
        std::vector<float> inv(hd / 2);
        for (int i = 0; i < hd / 2; i++) inv[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)hd);
        const float mscale = 1.125f;
        std::vector<kv_t> kc0 = kc, vc0 = vc, kce = kc, vce = vc;
        std::vector<act_t> qe = q;
        for (int s = 0; s < n_seqs; s++) {
            const int pos = ctx[s] - 1, row = qstart[s], b = bt[(size_t)s * max_blocks + pos / bs];
            rpos[row] = pos, slots[row] = b * bs + pos % bs;
            std::vector<float> cs(hd / 2), sn(hd / 2);
            for (int i = 0; i < hd / 2; i++) {
                float sv, cv;
                sincosf((float)pos * inv[i], &sv, &cv);
                cs[i] = cv * mscale, sn[i] = sv * mscale;
            }
            auto rot = [&](act_t *x) { // rotate-half of one head in place, rounded to act
                for (int i = 0; i < hd / 2; i++) {
                    float y0, y1;
                    rope_rot(to_f32(x[i]), to_f32(x[i + hd / 2]), cs[i], sn[i], y0, y1);
                    x[i] = from_f32<act_t>(y0), x[i + hd / 2] = from_f32<act_t>(y1);
                }
            };
            for (int h = 0; h < nq; h++) rot(&qe[(size_t)row * q_stride + (size_t)h * hd]);
            for (int kvh = 0; kvh < nkv; kvh++) {
                std::vector<act_t> k(&q[(size_t)row * q_stride + (size_t)(nq + kvh) * hd],
                                     &q[(size_t)row * q_stride + (size_t)(nq + kvh + 1) * hd]);
                rot(k.data());
                const act_t *v = &q[(size_t)row * q_stride + (size_t)(nq + nkv + kvh) * hd];
                const size_t base = ((size_t)b * nkv + kvh) * hd * bs;
                for (int d = 0; d < hd; d++) {
                    const size_t kcell = base + (size_t)(d / 8) * bs * 8 + (pos % bs) * 8 + d % 8, vcell = base + (size_t)d * bs + pos % bs;
                    kc0[kcell] = vc0[vcell] = from_f32<kv_t>(7.0f); // poison until the kernel writes it
                    kce[kcell] = k[d], vce[vcell] = v[d];
                }
            }
        }
        std::vector<double> ref, mag;
        reference(0, ref, mag, qe, kce, vce);
        struct RCase { const char *name; int nw, psz; bool pw; };
        const RCase rcases[] = {{"rope, one pass", 4, 0, false},
                                {"rope, 64-token partitions combined by the last block", 4, 64, false},
                                {"rope, persistent warps", 4, 0, true}};
        for (const RCase &c : rcases) {
            if (c.pw && (GROUP != ratio || hd % 64)) continue; // (the host launches it only there)
            const int n_parts = c.psz > 0 ? (max_ctx + c.psz - 1) / c.psz : 1;
            std::vector<kv_t> kcr = kc0, vcr = vc0;
            std::vector<act_t> out((size_t)T * nq * hd), q_before = q;
            for (auto &e : out) e = from_f32<act_t>(NAN);
            std::vector<float> part_o((size_t)n_seqs * nq * n_parts * hd, NAN), part_ml((size_t)n_seqs * nq * n_parts * 2, NAN);
            std::vector<int> counters((size_t)n_seqs * (nq / GROUP) + 1, 0);
            RopeArgs r{Args{out.data(), q.data(), q_stride, kcr.data(), vcr.data(), qstart.data(), ctx.data(), bt.data(),
                            max_blocks, n_seqs, nq, nkv, scale, 0, c.psz, n_parts, part_o.data(), part_ml.data(),
                            c.psz ? counters.data() : nullptr},
                       rpos.data(), slots.data(), inv.data(), mscale, kcr.data(), vcr.data()};
            if (c.pw)
                emu::launch(emu_dim3{2, 1, 1}, 32 * c.nw, (unsigned)(c.nw * 3 * PW_SLOT), 0, body_pw_rope, &r);
            else
                emu::launch(emu_dim3{(unsigned)(nq / GROUP), (unsigned)n_seqs, (unsigned)n_parts}, 32 * c.nw,
                            (unsigned)(std::max(c.nw * STAGES * TILE_BYTES, (c.nw * 16 * 2 + c.nw * 16 * hd) * 4) + hd * 4), 0,
                            body_rope, &r);
            int bad = check_out(c.name, out, ref, mag), stray = 0;
            const int cache_bad = (memcmp(kcr.data(), kce.data(), kce.size() * sizeof(kv_t)) != 0) +
                                  (memcmp(vcr.data(), vce.data(), vce.size() * sizeof(kv_t)) != 0);
            stray += memcmp(q.data(), q_before.data(), q.size() * sizeof(act_t)) != 0; // the qkv rows untouched
            for (int x : counters) stray += x != 0;
            const bool ok = !bad && !cache_bad && !stray;
            failures += !ok;
            printf("%s attn_decode HD %d GROUP %d %s: %s: %d wrong, cache %s, %d stray\n", ok ? "ok  " : "FAIL", hd, GROUP,
                   std::is_same<act_t, fp16>::value ? "fp16" : "bf16", c.name, bad, cache_bad ? "WRONG" : "as expected", stray);
        }
    }
#endif
    return failures ? 1 : 0;
}
