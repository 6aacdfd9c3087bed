// test_emu_sk_rope.cc -- kernel_src/gemm_sk.cu's ROPE epilogue (kiln_gemm_sk_rope: the qkv projection of a decode
// step of M sequences with the rotary embedding and the KV-cache write, mma.sync path) under the CPU emulation of
// tests/emu/cuda_emu.h, one specialization a build (ACT MAXM WARPS STAGES CL ROPE=1 HD KV on the command line).
// The inputs are small integers (x and W in -3..3, the bias in -8..8), so every GEMM sum is an integer the fp32
// accumulation holds exactly whatever its order (|sum| < 2^24) and the kernel's outputs are checked bit for bit:
//   - v heads: the sum (+ bias) rounded to act; q and k heads: rotated (rotate-half over the head, the pair d,
//     d +- HD / 2) from those rounded values with kiln_common.cuh rope_rot's roundings (fma(x0, c, -(x1 s)),
//     fma(x1, c, x0 s), each product rounded) and cos / sin = sincosf((float)pos[m] * inv_freq[i]) * mscale, then
//     rounded to act;
//   - the caches ([blocks, nkv, HD / x, bs, x] and [blocks, nkv, HD, bs], x = 16 bytes of KV): at slots[m] the
//     rotated k and the v of row m (slot -1: nothing); every other byte, and the output's rows >= M and columns
//     >= N within its row stride, still poison.
// Ragged K (the last 64-wide chunk partial; CL slices of 3 chunks), rows 1, 2, MAXM / 2 + 1, MAXM, GQA (4 q / 2 kv
// heads), a bias and mscale on some cases. Fails when the epilogue's rotation is left to the compiler's
// contraction as it was (plain x0 c - x1 s: the emulator rounds each product and the sum), its partner taken from
// the wrong warp (`pw` as `warp`), the second half's sign flipped, a k head cached unrotated, or a slot of -1
// written (a store before the caches: the process aborts).
#include "gemm_tc_common.cuh"
#include GEMM_SK_EMU_SRC
#include <cstdio>
#include <random>
#include <vector>

struct Args {
    act_t *out;
    i64 ldo;
    const act_t *x, *w, *bias;
    int M, N, K, cps, nq, nkv;
    const int *pos;
    const float *inv;
    float mscale;
    kv_t *kc, *vc;
    const int *slots;
    int bs;
};
static void body(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_gemm_sk_rope(a->out, a->ldo, a->x, a->w, a->bias, a->M, a->N, a->K, a->cps, nullptr, a->nq, a->nkv, a->pos,
                      a->inv, a->mscale, a->kc, a->vc, a->slots, a->bs);
}

template <class T> static bool bits_eq(const T &a, const T &b) { return memcmp(&a, &b, sizeof a) == 0; }

static int run_case(int M, bool with_bias, float mscale, unsigned seed) {
    const int nq = 4, nkv = 2, half = HD / 2, N = (nq + 2 * nkv) * HD, ldo = N + 5;
    const int K = 64 * 3 * CL - 40, nchunks = (K + 63) / 64, cps = (nchunks + CL - 1) / CL;
    const int bs = 16, nb = 6, X = 16 / (int)sizeof(kv_t);
    std::mt19937 rng(seed);
    auto ri = [&](int lo, int hi) { return lo + (int)(rng() % (u32)(hi - lo + 1)); };
    std::vector<int> xi((size_t)MAXM * K), wi((size_t)N * K), bi(N);
    std::vector<act_t> x(xi.size()), w(wi.size()), bias(N);
    for (size_t i = 0; i < xi.size(); i++) xi[i] = ri(-3, 3), x[i] = from_f32<act_t>((float)xi[i]);
    for (size_t i = 0; i < wi.size(); i++) wi[i] = ri(-3, 3), w[i] = from_f32<act_t>((float)wi[i]);
    for (int n = 0; n < N; n++) bi[n] = ri(-8, 8), bias[n] = from_f32<act_t>((float)bi[n]);
    std::vector<float> inv(half);
    for (int i = 0; i < half; i++) inv[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)HD);
    std::vector<int> pos(M), slots(M);
    std::vector<int> perm(nb * bs);
    for (int i = 0; i < nb * bs; i++) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int m = 0; m < M; m++) pos[m] = ri(0, 8191), slots[m] = m == 1 ? -1 : perm[m]; // row 1: not cached
    const size_t ccount = (size_t)nb * nkv * HD * bs;
    std::vector<act_t> out((size_t)(M + 1) * ldo);
    std::vector<kv_t> kc(ccount), vc(ccount);
    for (auto &o : out) memset(&o, 0xff, sizeof o);
    for (auto &c : kc) memset(&c, 0xff, sizeof c);
    for (auto &c : vc) memset(&c, 0xff, sizeof c);
    Args a{out.data(), ldo, x.data(), w.data(), with_bias ? bias.data() : nullptr, M, N, K, cps, nq, nkv,
           pos.data(), inv.data(), mscale, kc.data(), vc.data(), slots.data(), bs};
    emu::launch(emu_dim3{(unsigned)(N / HD), (unsigned)CL, 1}, THREADS, SMEM_BYTES, CL > 1 ? CL : 0, body, &a);

    // the expected values: the exact integer sums rounded to act, rotated with rope_rot's roundings
    std::vector<float> s((size_t)M * N);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            long long acc = with_bias ? bi[n] : 0;
            for (int k = 0; k < K; k++) acc += (long long)xi[(size_t)m * K + k] * wi[(size_t)n * K + k];
            s[(size_t)m * N + n] = to_f32(from_f32<act_t>((float)acc));
        }
    std::vector<act_t> want_out((size_t)(M + 1) * ldo);
    std::vector<kv_t> want_k(ccount), want_v(ccount);
    for (auto &o : want_out) memset(&o, 0xff, sizeof o);
    for (auto &c : want_k) memset(&c, 0xff, sizeof c);
    for (auto &c : want_v) memset(&c, 0xff, sizeof c);
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
    int bad = 0, badk = 0, badv = 0;
    for (size_t i = 0; i < out.size(); i++)
        if (!bits_eq(out[i], want_out[i])) {
            if (bad < 4)
                fprintf(stderr, "  out[%zu, %zu] = %.8g, expected %.8g\n", i / ldo, i % ldo, to_f32(out[i]),
                        to_f32(want_out[i]));
            bad++;
        }
    for (size_t i = 0; i < ccount; i++) badk += !bits_eq(kc[i], want_k[i]), badv += !bits_eq(vc[i], want_v[i]);
    const bool ok = !bad && !badk && !badv;
    printf("%s gemm_sk_rope MAXM=%d WARPS=%d STAGES=%d CL=%d HD=%d act %s: M %d, K %d, bias %d, mscale %g: %d outputs, "
           "%d key / %d value cells not the expected bits\n",
           ok ? "ok  " : "FAIL", MAXM, WARPS, STAGES, CL, HD, mma_kind<act_t>::f16 ? "fp16" : "bf16", M, K, with_bias,
           mscale, bad, badk, badv);
    return !ok;
}

int main() {
    int failures = 0;
    const int Ms[] = {1, 2, MAXM / 2 + 1, MAXM};
    for (int mi = 0; mi < 4; mi++)
        failures += run_case(Ms[mi], mi % 2 == 0, mi == 2 ? 1.25f : 1.0f, 100 + mi);
    return failures ? 1 : 0;
}
