// emu_rope_epi.h -- what the rope-epilogue emulation tests share (test_emu_sk_rope.cc: gemm_sk's ROPE epilogue,
// test_emu_gemv_rope.cc: kiln_gemv_rope): a qkv projection's inputs as small integers (x and W in -3..3, the bias
// in -8..8: every dot product an integer the fp32 sums hold exactly in any order), inv_freq, poisoned outputs and
// caches, and the bit-for-bit check -- v heads the sum (+ bias) rounded to act; q and k heads (rotate-half over
// the head, the pair d, d +- HD / 2) rotated from those rounded values with kiln_common.cuh rope_rot's roundings
// (fma(x0, c, -(x1 s)), fma(x1, c, x0 s), each product rounded; cos / sin = sincosf((float)pos[m] * inv_freq[i])
// * mscale), rounded to act; the rotated k and the v of row m in the caches ([blocks, nkv, HD / x, bs, x] and
// [blocks, nkv, HD, bs], x = 16 bytes of KV) at slots[m] (-1: nothing); every other cache byte and the output's
// rows >= M and columns >= N within its row stride still poison. After the kernel source (act_t, kv_t, HD).
#pragma once
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

struct RopeEpiCase {
    int M, N, K, ldo, nq, nkv, bs = 16, nb;
    bool with_bias = false; // the launch's bias (on or none) and cos / sin factor
    float mscale = 1.0f;
    std::vector<int> xi, wi, bi, pos, slots;
    std::vector<act_t> x, w, bias, out;
    std::vector<float> inv;
    std::vector<kv_t> kc, vc;
    // x: rows rows_x >= M (the kernel's MAXM), W: (nq + 2 nkv) HD rows, nb cache blocks of 16 slots
    RopeEpiCase(int M_, int rows_x, int nq_, int nkv_, int K_, int ldo_extra, int nb_, float theta, unsigned seed)
        : M(M_), N((nq_ + 2 * nkv_) * HD), K(K_), ldo(N + ldo_extra), nq(nq_), nkv(nkv_), nb(nb_) {
        std::mt19937 rng(seed);
        auto ri = [&](int lo, int hi) { return lo + (int)(rng() % (unsigned)(hi - lo + 1)); };
        xi.resize((size_t)rows_x * K), wi.resize((size_t)N * K), bi.resize(N);
        x.resize(xi.size()), w.resize(wi.size()), bias.resize(N);
        for (size_t i = 0; i < xi.size(); i++) xi[i] = ri(-3, 3), x[i] = from_f32<act_t>((float)xi[i]);
        for (size_t i = 0; i < wi.size(); i++) wi[i] = ri(-3, 3), w[i] = from_f32<act_t>((float)wi[i]);
        for (int n = 0; n < N; n++) bi[n] = ri(-8, 8), bias[n] = from_f32<act_t>((float)bi[n]);
        inv.resize(HD / 2);
        for (int i = 0; i < HD / 2; i++) inv[i] = 1.0f / powf(theta, (float)(2 * i) / (float)HD);
        pos.assign(M, 0), slots.assign(M, -1);
        out.resize((size_t)(M + 1) * ldo), kc.resize(cells()), vc.resize(cells());
        poison(out), poison(kc), poison(vc);
    }
    size_t cells() const { return (size_t)nb * nkv * HD * bs; }
    template <class T> static void poison(std::vector<T> &v) {
        for (auto &e : v) memset(&e, 0xff, sizeof e);
    }
    template <class T> static bool bits_eq(const T &a, const T &b) { return memcmp(&a, &b, sizeof a) == 0; }
    // compares out / kc / vc with the expected bits; the counts of wrong outputs and key / value cells
    bool check(int &bad, int &badk, int &badv) const {
        const int half = HD / 2, X = 16 / (int)sizeof(kv_t);
        std::vector<float> s((size_t)M * N);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                long long acc = with_bias ? bi[n] : 0;
                for (int k = 0; k < K; k++) acc += (long long)xi[(size_t)m * K + k] * wi[(size_t)n * K + k];
                s[(size_t)m * N + n] = to_f32(from_f32<act_t>((float)acc));
            }
        std::vector<act_t> want_out(out.size());
        std::vector<kv_t> want_k(cells()), want_v(cells());
        poison(want_out), poison(want_k), poison(want_v);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                const int h = n / HD, d = n % HD, i = d % half;
                float y = s[(size_t)m * N + n];
                if (h < nq + nkv) {
                    const bool first = d < half;
                    const float xo = y, xp = s[(size_t)m * N + h * HD + (first ? d + half : d - half)];
                    float sn, cs;
                    sincosf((float)pos[m] * inv[i], &sn, &cs);
                    const float c = cs * mscale, sv = sn * mscale;
                    volatile float p = xp * sv; // (one rounding, as __fmul_rn)
                    y = to_f32(from_f32<act_t>(std::fma(xo, c, first ? -p : (float)p)));
                }
                want_out[(size_t)m * ldo + n] = from_f32<act_t>(y);
                const int slot = slots[m];
                if (h < nq || slot < 0) continue;
                const int b = slot / bs, o = slot % bs;
                if (h < nq + nkv)
                    want_k[((((size_t)b * nkv + (h - nq)) * (HD / X) + d / X) * bs + o) * X + d % X] = from_f32<kv_t>(y);
                else
                    want_v[(((size_t)b * nkv + (h - nq - nkv)) * HD + d) * bs + o] = from_f32<kv_t>(y);
            }
        bad = badk = badv = 0;
        for (size_t i = 0; i < out.size(); i++)
            if (!bits_eq(out[i], want_out[i])) {
                if (bad < 4)
                    fprintf(stderr, "  out[%zu, %zu] = %.8g, expected %.8g\n", i / ldo, i % ldo, to_f32(out[i]),
                            to_f32(want_out[i]));
                bad++;
            }
        for (size_t i = 0; i < cells(); i++) badk += !bits_eq(kc[i], want_k[i]), badv += !bits_eq(vc[i], want_v[i]);
        return !bad && !badk && !badv;
    }
};
