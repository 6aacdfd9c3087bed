// emu_rope.h -- what the rope + KV-write emulation tests (test_emu_rope.cc: kernel_src/rope_kv.cu,
// test_emu_rope_wide.cc: rope_kv_wide.cu) share: one case's inputs and its check. A case is a batch of
// sequences packed as the scheduler packs them (sequence s: ctx0 tokens already cached, n_new tokens in
// this launch at positions ctx0 .. ctx0 + n_new - 1, slots through a block table over shuffled cache
// blocks), some tokens skipped (slot -1: a sequence's token that is not cached, a padded batch's rows),
// a qkv row [q heads | k heads | v heads | pad] per token, rows of guard before and after; caches
// [num_blocks, nkv, hd / x, bs, x] and [num_blocks, nkv, hd, bs] (x = 16 bytes of KV) with spare blocks
// and a guard tail, poisoned with 0xff bytes (a NaN in every cache dtype); NaN frequencies past inv_freq's
// rot / 2, slots past the T tokens' in a spare block (a read past either shows in the check). The check
// (engine/ops_cpu.h kiln_cpu_rope / kiln_cpu_kv_write semantics):
//   - rotated q and k (dims < rot of heads [0, nq + nkv)) against a double reference: the angle
//     (float)pos * inv_freq in float as the kernels compute it (inv_freq: the host's table, or the
//     dynamic-NTK one recomputed like kiln_rope_dynamic_inv_freq), cos / sin of it in double times
//     mscale, x0 c - x1 s and x1 c + x0 s in double. Tolerance: the kernels' fp32 math (cos / sin,
//     two products, one sum: a few fp32 roundings, bounded by 2^-20 (|x0| + |x1|) mscale) then one
//     rounding to ACT (half an ACT ulp at the result): |got - ref| <= ulp_ACT / 2 + 2^-20 (|x0| + |x1|)
//     mscale. `exact` (kernels through kiln_common.cuh rope_rot: every product and sum an explicit
//     round-to-nearest fp32 operation): also bit for bit against the same float operations
//     (sincosf, c * mscale, fma(x0, c, -(x1 s)), fma(x1, c, x0 s), one rounding to ACT).
//   - everything else of the rows (q / k dims past rot, v, the pad) and the guard rows: the input's bits.
//   - caches: every cell of a token with slot >= 0 holds KV(k / scale) (FP8; 16-bit: KV(k)) of the k the
//     kernel left in qkv (fused: the rotated k rounded to ACT, which the kernels cache) or of the input
//     k (plain write), and KV(v / scale) of the input v: bit for bit (FP8 through an fp8 rounding written
//     here: the nearest finite code, ties to the even code, saturating); every other cell and the guard
//     tail still 0xff.
// After the kernel source (act_t, kv_t, INTERLEAVED).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

template <class T> static const char *rope_dt_name() {
    return std::is_same<T, float>::value      ? "fp32"
           : std::is_same<T, bf16>::value     ? "bf16"
           : std::is_same<T, fp16>::value     ? "fp16"
           : std::is_same<T, fp8_e4m3>::value ? "fp8_e4m3"
                                              : "fp8_e5m2";
}

// half-ulp bounds: the spacing of ACT's values around |v| (subnormals: the smallest)
static double rope_ulp_act(double v) {
    const int mant = sizeof(act_t) == 4 ? 23 : std::is_same<act_t, fp16>::value ? 10 : 7;
    const int emin = sizeof(act_t) == 4 ? -126 : std::is_same<act_t, fp16>::value ? -14 : -126;
    int e = v > 0 ? (int)std::floor(std::log2(v)) : emin;
    if (e < emin) e = emin;
    return std::ldexp(1.0, e - mant);
}

// FP8 rounding written from the formats' definitions: the values of the positive finite codes (e4m3:
// 0x00 .. 0x7e, 0x7f NaN; e5m2: 0x00 .. 0x7b, 0x7c inf), |f| to the nearest (ties: the even code, so a
// zero mantissa bit), past the largest to the largest (satfinite), the sign kept
template <class K> struct Fp8Ref {
    static constexpr bool e4m3 = std::is_same<K, fp8_e4m3>::value;
    std::vector<double> val; // val[c], c = 0 .. the largest finite code
    Fp8Ref() {
        const int top = e4m3 ? 0x7e : 0x7b;
        for (int c = 0; c <= top; c++) {
            const int mb = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, e = c >> mb, m = c & ((1 << mb) - 1);
            val.push_back(e ? std::ldexp(1.0 + std::ldexp((double)m, -mb), e - bias)
                            : std::ldexp((double)m, 1 - bias - mb));
        }
    }
    u8 operator()(float f) const {
        const u8 sign = std::signbit(f) ? 0x80 : 0;
        const double a = std::fabs((double)f);
        size_t c = (size_t)(std::lower_bound(val.begin(), val.end(), a) - val.begin());
        if (c == val.size()) return (u8)(sign | (c - 1));
        if (c > 0) {
            const double dl = a - val[c - 1], dh = val[c] - a;
            if (dl < dh || (dl == dh && ((c - 1) & 1) == 0)) c--;
        }
        return (u8)(sign | c);
    }
};

// the stored KV element of an activation x (fp8: of x / scale, in float)
static kv_t rope_kv_of(float x, float scale) {
    if constexpr (sizeof(kv_t) == 1) {
        static const Fp8Ref<kv_t> r;
        return kv_t{r(x / scale)};
    } else {
        return from_f32<kv_t>(x);
    }
}

struct RopeSeq {
    int ctx0, n_new; // tokens cached before, tokens of this launch
};

// one case: the shape, the rope settings, the batch
struct RopeSpec {
    int nq, nkv, hd, rot, bs;
    int row_pad;        // elements past the heads in a row (a multiple of a 16-byte vector)
    bool llama3;        // inv_freq: Llama-3.1's scaling (theta 500000, factor 8, 1 / 4, 8192), else theta 10000
    float mscale;       // cos / sin factor
    bool dyn;           // dynamic NTK: tokens of sequences longer than dyn_max (36) recompute inv_freq
    bool head_scales;   // FP8: per-head scales kv_scales[2 nkv], else k_scale / v_scale
    std::vector<RopeSeq> seqs;
    std::vector<int> skip; // token indices whose slot is -1
    int n_pad;          // padding rows at the end (pos 0, slot -1)
};

struct RopeCase {
    RopeSpec sp;
    int T = 0, num_blocks = 0, dyn_max = 36;
    float dyn_base = 0, dyn_factor = 2.0f, k_scale = 1, v_scale = 1;
    i64 row_stride = 0;
    std::vector<int> pos, slots, dyn_len;
    std::vector<float> inv_freq, scales;
    std::vector<act_t> qkv0, qkv; // [guard row, T rows, guard row]
    std::vector<kv_t> kc, vc;     // [num_blocks * nkv * hd * bs + guard]
    static constexpr size_t CACHE_GUARD = 64;

    explicit RopeCase(const RopeSpec &s, unsigned seed) : sp(s) {
        std::mt19937 rng(seed);
        const int bs = sp.bs, half = sp.rot / 2;
        // inv_freq as kiln_rope_inv_freq computes it (torch's fp32: 1 / theta^(2i / rot); llama3's bands)
        const double theta = sp.llama3 ? 500000.0 : 10000.0;
        dyn_base = (float)theta;
        for (int i = 0; i < half; i++) {
            float e = (float)(2 * i) / (float)sp.rot, f = 1.0f / powf((float)theta, e);
            if (sp.llama3) {
                const double factor = 8, lo = 1, hi = 4, old_len = 8192, lo_wl = old_len / lo, hi_wl = old_len / hi;
                float wl = 2.0f * (float)M_PI / f;
                float scaled = wl > (float)lo_wl ? f / (float)factor : f;
                float smooth = ((float)old_len / wl - (float)lo) / (float)(hi - lo);
                float smoothed = (1.0f - smooth) * scaled / (float)factor + smooth * scaled;
                bool medium = !(wl < (float)hi_wl) && !(wl > (float)lo_wl);
                f = medium ? smoothed : scaled;
            }
            inv_freq.push_back(f);
        }
        for (int i = 0; i < 8; i++) inv_freq.push_back(NAN); // (guards: a frequency read past rot / 2 rotates to NaN)
        // block tables over a shuffle of the cache's blocks (two spare)
        int need = 0;
        for (const RopeSeq &q : sp.seqs) need += (q.ctx0 + q.n_new + bs - 1) / bs;
        num_blocks = need + 2;
        std::vector<int> perm(num_blocks);
        for (int i = 0; i < num_blocks; i++) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), rng);
        int nb = 0;
        for (const RopeSeq &q : sp.seqs) {
            std::vector<int> bt(perm.begin() + nb, perm.begin() + nb + (q.ctx0 + q.n_new + bs - 1) / bs);
            nb += (int)bt.size();
            for (int i = 0; i < q.n_new; i++) {
                const int p = q.ctx0 + i;
                pos.push_back(p), slots.push_back(bt[p / bs] * bs + p % bs), dyn_len.push_back(q.ctx0 + q.n_new);
            }
        }
        for (int i = 0; i < sp.n_pad; i++) pos.push_back(0), slots.push_back(-1), dyn_len.push_back(1);
        for (int t : sp.skip) slots[t] = -1;
        T = (int)pos.size();
        // (guards past slots[T - 1], pos[T - 1]: cells of a spare block, so a slot read past the tokens writes a
        // stray cell)
        for (int i = 0; i < 16; i++) slots.push_back(perm[nb] * bs + i % bs), pos.push_back(1000 + i), dyn_len.push_back(1 << 20);
        // rows: values in [-2, 2) (a few larger: FP8 saturation with the small scales below)
        row_stride = (i64)(sp.nq + 2 * sp.nkv) * sp.hd + sp.row_pad;
        std::uniform_real_distribution<float> u(-2.0f, 2.0f);
        qkv0.resize((size_t)(T + 2) * row_stride);
        for (auto &e : qkv0) e = from_f32<act_t>(u(rng));
        for (size_t i = 0; i < qkv0.size(); i += 97) qkv0[i] = from_f32<act_t>(u(rng) * 40.0f);
        for (int t = -1; t <= T; t++) // the pad and the guard rows: NaN
            for (i64 j = 0; j < row_stride; j++)
                if (t < 0 || t == T || j >= row_stride - sp.row_pad) qkv0[(size_t)(t + 1) * row_stride + j] = from_f32<act_t>(NAN);
        // FP8 scales: per head (keys, then values; one small enough to saturate E4M3) or one each
        const float hs[] = {0.25f, 0.75f, 3.0f, 0.125f, 1.0f / 128};
        for (int i = 0; i < 2 * sp.nkv; i++) scales.push_back(hs[i % 5]);
        if (sizeof(kv_t) == 1) k_scale = 0.5f, v_scale = 2.0f;
        kc.resize((size_t)num_blocks * sp.nkv * sp.hd * bs + CACHE_GUARD);
        vc.resize(kc.size());
        reset();
    }
    // the inputs again, the caches poisoned
    void reset() {
        qkv = qkv0;
        memset((void *)kc.data(), 0xff, kc.size() * sizeof(kv_t));
        memset((void *)vc.data(), 0xff, vc.size() * sizeof(kv_t));
    }
    act_t *rows() { return qkv.data() + row_stride; }
    act_t *k_rows() { return rows() + (size_t)sp.nq * sp.hd; }
    act_t *v_rows() { return rows() + (size_t)(sp.nq + sp.nkv) * sp.hd; }
    const float *kv_scales() const { return sizeof(kv_t) == 1 && sp.head_scales ? scales.data() : nullptr; }
    const int *dyn() const { return sp.dyn ? dyn_len.data() : nullptr; }
    float head_scale(bool value, int h) const {
        if (sizeof(kv_t) != 1) return 1.0f;
        return sp.head_scales ? scales[(value ? sp.nkv : 0) + h] : value ? v_scale : k_scale;
    }
    // token t's frequencies (dynamic NTK past dyn_max: kiln_rope_dynamic_inv_freq's)
    std::vector<float> freqs(int t) const {
        if (!sp.dyn || dyn_len[t] <= dyn_max) return inv_freq;
        const double f = dyn_factor, b = (double)dyn_base * pow((f * dyn_len[t] / dyn_max) - (f - 1), (double)sp.rot / (sp.rot - 2));
        std::vector<float> r(sp.rot / 2);
        for (int i = 0; i < sp.rot / 2; i++) r[i] = 1.0f / powf((float)b, (float)(2 * i) / (float)sp.rot);
        return r;
    }

    // the check of one launch (see the top of the file): rotated (q and k rotated in qkv), cached (the
    // caches written), exact (rope_rot's bits); prints one line, returns 1 on a failure
    int check(const char *what, bool rotated, bool cached, bool exact) const {
        const int nq = sp.nq, nkv = sp.nkv, hd = sp.hd, rot = sp.rot, half = rot / 2, bs = sp.bs;
        int bad = 0, inexact = 0, stray = 0, wrong = 0, stray_c = 0;
        auto bits_eq = [](const act_t &a, const act_t &b) { return memcmp(&a, &b, sizeof a) == 0; };
        // the rows and the guard rows
        for (int t = -1; t <= T; t++) {
            const act_t *in = qkv0.data() + (size_t)(t + 1) * row_stride, *out = qkv.data() + (size_t)(t + 1) * row_stride;
            std::vector<double> cs, sn;
            std::vector<float> csf, snf;
            if (t >= 0 && t < T && rotated) {
                const std::vector<float> inv = freqs(t);
                for (int i = 0; i < half; i++) {
                    const float ang = (float)pos[t] * inv[i];
                    cs.push_back(std::cos((double)ang) * sp.mscale), sn.push_back(std::sin((double)ang) * sp.mscale);
                    float s, c;
                    sincosf(ang, &s, &c);
                    csf.push_back(c * sp.mscale), snf.push_back(s * sp.mscale);
                }
            }
            for (i64 j = 0; j < row_stride; j++) {
                const int h = (int)(j / hd), d = (int)(j % hd);
                if (!(t >= 0 && t < T && rotated && h < nq + nkv && d < rot)) {
                    if (!bits_eq(in[j], out[j])) {
                        if (stray < 4) fprintf(stderr, "  %s: token %d element %lld changed (%g -> %g)\n", what, t, (long long)j, to_f32(in[j]), to_f32(out[j]));
                        stray++;
                    }
                    continue;
                }
                // the pair of d: interleaved (2i, 2i + 1), rotate-half (i, i + rot / 2)
                const int i = INTERLEAVED ? d / 2 : d % half, first = INTERLEAVED ? (d % 2 == 0) : d < half;
                const int da = INTERLEAVED ? 2 * i : i, db = INTERLEAVED ? 2 * i + 1 : i + half;
                const act_t *hr = in + (size_t)h * hd;
                const double x0 = to_f32(hr[da]), x1 = to_f32(hr[db]);
                const double ref = first ? x0 * cs[i] - x1 * sn[i] : x1 * cs[i] + x0 * sn[i];
                const double got = to_f32(out[j]), err = std::ldexp(std::fabs(x0) + std::fabs(x1), -20) * sp.mscale;
                const double tol = 0.5 * rope_ulp_act(std::max(std::fabs(got), std::fabs(ref)) + err) + err;
                if (!(std::fabs(got - ref) <= tol)) {
                    if (bad < 4) fprintf(stderr, "  %s: token %d head %d dim %d: %.8g, reference %.8g (tolerance %.3g)\n", what, t, h, d, got, ref, tol);
                    bad++;
                }
                if (exact) { // rope_rot: y0 = fma(x0, c, -(x1 s)), y1 = fma(x1, c, x0 s), each product rounded
                    const float a0 = (float)x0, a1 = (float)x1;
                    volatile float p = first ? a1 * snf[i] : a0 * snf[i];
                    const float y = first ? std::fma(a0, csf[i], -p) : std::fma(a1, csf[i], (float)p);
                    const act_t e = from_f32<act_t>(y);
                    if (!bits_eq(e, out[j])) {
                        if (inexact < 4) fprintf(stderr, "  %s: token %d head %d dim %d: %.8g, rope_rot's %.8g\n", what, t, h, d, got, to_f32(e));
                        inexact++;
                    }
                }
            }
        }
        // the caches
        if (cached) {
            const int x = 16 / (int)sizeof(kv_t);
            std::vector<kv_t> ek(kc.size()), ev(vc.size());
            memset((void *)ek.data(), 0xff, ek.size() * sizeof(kv_t));
            memset((void *)ev.data(), 0xff, ev.size() * sizeof(kv_t));
            std::vector<char> written(kc.size(), 0);
            for (int t = 0; t < T; t++) {
                if (slots[t] < 0) continue;
                const int b = slots[t] / bs, o = slots[t] % bs;
                // the k the kernel cached: the input, or (fused) the rotated k it left in qkv
                const act_t *kr = (rotated ? qkv.data() : qkv0.data()) + (size_t)(t + 1) * row_stride + (size_t)nq * hd;
                const act_t *vr = qkv0.data() + (size_t)(t + 1) * row_stride + (size_t)(nq + nkv) * hd;
                for (int h = 0; h < nkv; h++)
                    for (int d = 0; d < hd; d++) {
                        const size_t ki = ((((size_t)b * nkv + h) * (hd / x) + d / x) * bs + o) * x + d % x;
                        const size_t vi = (((size_t)b * nkv + h) * hd + d) * bs + o;
                        ek[ki] = rope_kv_of(to_f32(kr[(size_t)h * hd + d]), head_scale(false, h));
                        ev[vi] = rope_kv_of(to_f32(vr[(size_t)h * hd + d]), head_scale(true, h));
                        written[ki] |= 1, written[vi] |= 2;
                    }
            }
            for (size_t i = 0; i < kc.size(); i++)
                for (int c = 0; c < 2; c++) {
                    const kv_t &g = c ? vc[i] : kc[i], &e = c ? ev[i] : ek[i];
                    if (memcmp(&g, &e, sizeof g) == 0) continue;
                    if (written[i] & (1 << c)) {
                        if (wrong < 4) fprintf(stderr, "  %s: %s cache element %zu: %g, expected %g\n", what, c ? "value" : "key", i, (double)to_f32(g), (double)to_f32(e));
                        wrong++;
                    } else {
                        if (stray_c < 4) fprintf(stderr, "  %s: %s cache element %zu (not a cell of the launch) written\n", what, c ? "value" : "key", i);
                        stray_c++;
                    }
                }
        }
        const bool ok = !bad && !inexact && !stray && !wrong && !stray_c;
        char ex[48] = "", cc[64] = "";
        if (exact) snprintf(ex, sizeof ex, ", %d not rope_rot's bits", inexact);
        if (cached) snprintf(cc, sizeof cc, ", %d wrong / %d stray cache cells", wrong, stray_c);
        printf("%s %s act %s%s%s %s: T %d, %d q / %d kv heads of %d (rot %d), bs %d%s%s%s: %d wrong%s, %d stray in qkv%s\n",
               ok ? "ok  " : "FAIL", what, rope_dt_name<act_t>(), cached ? " kv " : "", cached ? rope_dt_name<kv_t>() : "",
               INTERLEAVED ? "interleaved" : "rotate-half", T, nq, nkv, hd, rot, bs, sp.llama3 ? ", llama3" : "",
               sp.dyn ? ", dynamic NTK" : "", sp.mscale != 1.0f ? ", mscale" : "", bad, ex, stray, cc);
        return !ok;
    }
};
