// test_emu_prefill.cc -- kernel_src/attn_prefill.cu (the paged prefill attention on mma.sync: kiln_attn_prefill,
// and the first kernel kiln_attn_prefill_v1 of attn_prefill_v1.cuh) under the CPU emulation of tests/emu/cuda_emu.h,
// one specialization a build (ACT, KV, HEAD_DIM, BLOCK_SIZE, GROUP). Causal attention over packed variable-length
// query sequences (rows [qstart[s], qstart[s + 1]), no padding) whose keys and values come from the paged cache:
// prompts of 1 .. 130 tokens that end mid-tile and mid-block, fresh and continuing cached context of up to 600
// tokens (query i of a sequence with c cached tokens at position c + i), block tables over shuffled blocks, GQA (the
// query heads a KV head serves in one or several GROUPs), sliding windows (37, 100), FP8 caches with per-KV-head key
// and value scales; each form the host launches for the specialization
// (engine/cuda/ops_gpu.c kiln_gpu_attention): kiln_attn_prefill where it serves (16-bit caches, HEAD_DIM <= 128:
// P2_OK) and kiln_attn_prefill_v1 (FP8 caches, larger head dims, $KILN_PREFILL_KERNEL=v1). Every cache cell no
// sequence owns (the slots past a context in its last block, unused blocks) and the qkv rows' key and value
// columns hold NaN, and unused block-table entries garbage, so a read of any of them shows; the output is NaN
// before the launch. Against a double-precision softmax(q k^T scale) v on the same 16-bit (FP8: decoded and
// scaled) values: every output element within the roundings the kernel makes (below); the rows before and after
// the output untouched, q and the caches unchanged. Exit 0 when every case passes.
#include "kiln_common.cuh"
#include ATTN_PREFILL_EMU_SRC
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
    int window;
    const float *kv_scales; // FP8 caches: [2, nkv] (keys', then values'); NULL otherwise
};
[[maybe_unused]] static void body_v2(void *p) { // (P2_OK = 0: the kernel is empty, not launched)
    Args *a = static_cast<Args *>(p);
    kiln_attn_prefill(a->out, a->q, a->q_stride, a->kc, a->vc, a->qstart, a->ctx_len, a->bt, a->max_blocks, a->n_seqs,
                      a->nq, a->nkv, a->scale, a->window, a->kv_scales);
}
static void body_v1(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_attn_prefill_v1(a->out, a->q, a->q_stride, a->kc, a->vc, a->qstart, a->ctx_len, a->bt, a->max_blocks,
                         a->n_seqs, a->nq, a->nkv, a->scale, a->window, a->kv_scales);
}

// runtime/cuda/registry.c kiln_jit_attn_group: the GROUP the host compiles for nq / nkv query heads a KV head
static int host_group(int ratio) {
    for (int g = 16; g > 1; g /= 2)
        if (ratio % g == 0) return g;
    return 1;
}

int main() {
    // heads: nq / nkv whose host GROUP is this build's -- Llama-3's 4 (GROUP 4: 8 / 2), MHA (GROUP 1: 3 / 3), 6
    // (GROUP 2: three groups on one KV head), 16 (GROUP 16: an m16 tile of kiln_attn_prefill spans two heads)
    const int ratio = GROUP == 2 ? 6 : GROUP, nkv = GROUP == 1 ? 3 : GROUP == 4 ? 2 : 1, nq = nkv * ratio;
    if (host_group(ratio) != GROUP) return fprintf(stderr, "test setup: GROUP %d is not the host's for %d\n", GROUP, ratio), 1;
    const int hd = HEAD_DIM, bs = BLOCK_SIZE;
    const bool fp8 = sizeof(kv_t) == 1;
    const int kx = 16 / (int)sizeof(kv_t); // key chunk: kx dims of one token
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);

    // batches: query lengths and cached tokens before them (0: a fresh prompt)
    struct Batch { const char *name; std::vector<int> q_len, cached; };
    const Batch batches[] = {
        {"fresh prompts", {1, 17, 64, 100, 130}, {0, 0, 0, 0, 0}},
        {"continued prompts", {130, 1, 17, 100, 64, 5}, {21, 333, 16, 48, 7, 0}},
        {"long contexts", {70, 129, 2}, {450, 257, 600}},
    };
    struct Case { int batch, window; };
    const Case cases[] = {{0, 0}, {1, 0}, {1, 37}, {2, 0}, {2, 100}};
    // the forms: kiln_attn_prefill where it serves (engine/cuda/ops_gpu.c prefill_v2), kiln_attn_prefill_v1
    const int n_forms = P2_OK ? 2 : 1;

    // FP8 caches: stored = fp8(value / scale) (values u * 8 / 8 again), per-KV-head key and value scales
    std::vector<float> kv_scales(2 * nkv);
    for (int i = 0; i < 2 * nkv; i++) kv_scales[i] = fp8 ? 0.125f * (1.0f + 0.25f * (float)i) : 1.0f;
    const float kv_amp = fp8 ? 8.0f : 1.0f, q_amp = 4.0f; // (scores of std ~ 4/3: a peaked softmax)
    // the roundings the kernel makes: P (fp32) to 16 bits before P V (act_t; fp16 for FP8 caches), relative error
    // <= u_p <= u_act a term, so <= u_act sum p |v| / sum p on an output; the output to act_t (<= u_act |out|);
    // the fp32 scores, ex2.approx (2 ulp), the sums, rcp.approx: ~1e-6 relative. The tolerance: twice the first
    // two with ulp = 2 u_act, plus 1e-5.
    const double ulp = std::is_same<act_t, fp16>::value ? 1.0 / 2048 : 1.0 / 256;
#if KV_FP8
    const char *cache = KV_KIND == 3 ? " (E5M2 cache)" : KV_FOLD != 1.0f ? " (E4M3 cache, sm_80's conversion)" : " (E4M3 cache)";
#else
    const char *cache = "";
#endif
    int failures = 0;

    for (const Case &c : cases) {
        const Batch &bch = batches[c.batch];
        const int n_seqs = (int)bch.q_len.size();
        std::vector<int> qstart(n_seqs + 1, 0), ctx(n_seqs);
        int max_q = 0, max_blocks = 0, used = 0;
        for (int s = 0; s < n_seqs; s++) {
            qstart[s + 1] = qstart[s] + bch.q_len[s];
            ctx[s] = bch.cached[s] + bch.q_len[s];
            max_q = std::max(max_q, bch.q_len[s]);
            max_blocks = std::max(max_blocks, (ctx[s] + bs - 1) / bs);
            used += (ctx[s] + bs - 1) / bs;
        }
        max_blocks += 1; // (a column of garbage in every table)
        const int T = qstart[n_seqs], n_blocks = used + 3;
        // the cache: key [blocks, nkv, hd / kx, bs, kx], value [blocks, nkv, hd, bs]; NaN where no sequence's
        // context lies
        std::vector<int> perm(n_blocks);
        for (int i = 0; i < n_blocks; i++) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), rng);
        std::vector<int> bt((size_t)n_seqs * max_blocks, 0x7fffffff);
        for (int s = 0, k = 0; s < n_seqs; s++)
            for (int b = 0; b < (ctx[s] + bs - 1) / bs; b++) bt[(size_t)s * max_blocks + b] = perm[k++];
        std::vector<kv_t> kc((size_t)n_blocks * nkv * hd * bs, from_f32<kv_t>(NAN)), vc(kc.size(), from_f32<kv_t>(NAN));
        auto kidx = [&](int s, int kvh, int t, int d) {
            const size_t b = (size_t)bt[(size_t)s * max_blocks + t / bs];
            return ((b * nkv + kvh) * (hd / kx) + d / kx) * bs * kx + (size_t)(t % bs) * kx + d % kx;
        };
        auto vidx = [&](int s, int kvh, int t, int d) {
            const size_t b = (size_t)bt[(size_t)s * max_blocks + t / bs];
            return ((b * nkv + kvh) * hd + d) * bs + (size_t)(t % bs);
        };
        for (int s = 0; s < n_seqs; s++)
            for (int kvh = 0; kvh < nkv; kvh++)
                for (int t = 0; t < ctx[s]; t++)
                    for (int d = 0; d < hd; d++) {
                        kc[kidx(s, kvh, t, d)] = from_f32<kv_t>(u(rng) * kv_amp);
                        vc[vidx(s, kvh, t, d)] = from_f32<kv_t>(u(rng) * kv_amp);
                    }
        // q: a qkv row [T, (nq + 2 nkv) hd], the key and value columns NaN
        const i64 q_stride = (i64)(nq + 2 * nkv) * hd;
        std::vector<act_t> q((size_t)T * q_stride);
        for (int t = 0; t < T; t++)
            for (int e = 0; e < q_stride; e++)
                q[(size_t)t * q_stride + e] = from_f32<act_t>(e < nq * hd ? u(rng) * q_amp : NAN);
        const float scale = 1.0f / sqrtf((float)hd);

        // the reference: out[t][h][d] and sum p |v| / sum p, for the tolerance (on the cache decoded once: key and
        // value [nkv][ctx][hd] of each sequence, scaled)
        std::vector<double> ref((size_t)T * nq * hd), mag(ref.size());
        for (int s = 0; s < n_seqs; s++) {
            std::vector<double> kd((size_t)nkv * ctx[s] * hd), vd(kd.size());
            for (int kvh = 0; kvh < nkv; kvh++)
                for (int j = 0; j < ctx[s]; j++)
                    for (int d = 0; d < hd; d++) {
                        const size_t e = ((size_t)kvh * ctx[s] + j) * hd + d;
                        kd[e] = (double)to_f32(kc[kidx(s, kvh, j, d)]) * (fp8 ? kv_scales[kvh] : 1.0f);
                        vd[e] = (double)to_f32(vc[vidx(s, kvh, j, d)]) * (fp8 ? kv_scales[nkv + kvh] : 1.0f);
                    }
            for (int i = 0; i < bch.q_len[s]; i++) {
                const int t = qstart[s] + i, pos = bch.cached[s] + i, lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
                for (int h = 0; h < nq; h++) {
                    const double *kh = &kd[(size_t)(h / ratio) * ctx[s] * hd], *vh = &vd[(size_t)(h / ratio) * ctx[s] * hd];
                    std::vector<double> qd(hd), p(pos + 1, 0.0), a(hd, 0.0), m(hd, 0.0);
                    for (int d = 0; d < hd; d++) qd[d] = to_f32(q[(size_t)t * q_stride + (size_t)h * hd + d]);
                    double mx = -INFINITY, sum = 0.0;
                    for (int j = lo; j <= pos; j++) {
                        double dot = 0.0;
                        for (int d = 0; d < hd; d++) dot += qd[d] * kh[(size_t)j * hd + d];
                        p[j] = dot * scale, mx = std::max(mx, p[j]);
                    }
                    for (int j = lo; j <= pos; j++) p[j] = exp(p[j] - mx), sum += p[j];
                    for (int j = lo; j <= pos; j++)
                        for (int d = 0; d < hd; d++) {
                            const double v = vh[(size_t)j * hd + d];
                            a[d] += p[j] * v, m[d] += p[j] * fabs(v);
                        }
                    for (int d = 0; d < hd; d++)
                        ref[((size_t)t * nq + h) * hd + d] = a[d] / sum, mag[((size_t)t * nq + h) * hd + d] = m[d] / sum;
                }
            }
        }

        for (int form = 0; form < n_forms; form++) {
            const bool v1 = form == n_forms - 1;
            // the output with G guard rows before and after it
            const int G = 2;
            const size_t row = (size_t)nq * hd;
            std::vector<act_t> buf((size_t)(T + 2 * G) * row, from_f32<act_t>(NAN));
            const std::vector<act_t> q0 = q;
            const std::vector<kv_t> kc0 = kc, vc0 = vc;
            Args a{buf.data() + G * row, q.data(), q_stride, kc.data(), vc.data(), qstart.data(), ctx.data(), bt.data(),
                   max_blocks, n_seqs, nq, nkv, scale, c.window, fp8 ? kv_scales.data() : nullptr};
            if (!v1) {
#if P2_OK
                // engine/cuda/ops_gpu.c kiln_gpu_attention, prefill_v2: tt = 128 / GROUP (P2_BM / GROUP), grid
                // (ceil(max_q_len / tt), n_seqs, nq / GROUP), 128 threads, prefill_smem(hd)
                const int tt = 128 / GROUP, kch = (hd + 15) / 16 * 2;
                const unsigned smem = (unsigned)(kch * 16 * (128 + 2 * 64) + 2 * hd * 128);
                if (smem != (unsigned)(P2_Q_BYTES + 2 * P2_STAGE_BYTES) || tt != P2_TT)
                    return fprintf(stderr, "test setup: the host's kiln_attn_prefill sizes are not the kernel's\n"), 1;
                emu::launch(emu_dim3{(unsigned)((max_q + tt - 1) / tt), (unsigned)n_seqs, (unsigned)(nq / GROUP)}, 128,
                            smem, 0, body_v2, &a);
#endif
            } else {
                // ... the v1 branch: tt = 64 / GROUP (V1_BM / GROUP), the same grid, 128 threads, 2 * 4 *
                // tile_bytes(hd, kv8) (2 stages of 4 16-token tiles)
                const int tt = 64 / GROUP;
                const unsigned smem = (unsigned)(2 * 4 * (fp8 ? hd * 32 : ((hd + 15) / 16 * 2) * 256 + hd * 32));
                if (smem != (unsigned)(2 * V1_NSUB * TILE_BYTES) || tt != V1_TT)
                    return fprintf(stderr, "test setup: the host's kiln_attn_prefill_v1 sizes are not the kernel's\n"), 1;
                emu::launch(emu_dim3{(unsigned)((max_q + tt - 1) / tt), (unsigned)n_seqs, (unsigned)(nq / GROUP)}, 128,
                            smem, 0, body_v1, &a);
            }
            int bad = 0, stray = 0;
            double worst = 0.0; // the largest error / tolerance
            for (int s = 0; s < n_seqs; s++)
                for (int i = 0; i < bch.q_len[s]; i++)
                    for (int h = 0; h < nq; h++)
                        for (int d = 0; d < hd; d++) {
                            const size_t k = ((size_t)(qstart[s] + i) * nq + h) * hd + d;
                            const double got = to_f32(buf[G * row + k]), tol = fabs(ref[k]) * ulp + mag[k] * ulp + 1e-5;
                            worst = std::max(worst, fabs(got - ref[k]) / tol);
                            if (!(fabs(got - ref[k]) <= tol)) {
                                if (bad < 5)
                                    fprintf(stderr, "  %s: seq %d (%d cached + %d) token %d head %d dim %d: %.6g, reference %.6g (tol %.3g)\n",
                                            v1 ? "v1" : "v2", s, bch.cached[s], bch.q_len[s], i, h, d, got, ref[k], tol);
                                bad++;
                            }
                        }
            for (size_t e = 0; e < G * row; e++) // the guard rows untouched
                stray += !std::isnan(to_f32(buf[e])) + !std::isnan(to_f32(buf[(G + T) * row + e]));
            stray += (memcmp(q.data(), q0.data(), q.size() * sizeof(act_t)) != 0) +
                     (memcmp(kc.data(), kc0.data(), kc.size() * sizeof(kv_t)) != 0) +
                     (memcmp(vc.data(), vc0.data(), vc.size() * sizeof(kv_t)) != 0);
            const bool ok = !bad && !stray;
            failures += !ok;
            printf("%s %s HD %d GROUP %d (nq %d, nkv %d) BS %d %s%s: %s, window %d: %d wrong (error / tolerance <= %.2f), %d stray\n", ok ? "ok  " : "FAIL",
                   v1 ? "kiln_attn_prefill_v1" : "kiln_attn_prefill", hd, GROUP, nq, nkv, bs,
                   std::is_same<act_t, fp16>::value ? "fp16" : "bf16",
                   cache, bch.name, c.window, bad, worst, stray);
        }
    }
    return failures ? 1 : 0;
}
