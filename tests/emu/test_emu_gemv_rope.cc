// test_emu_gemv_rope.cc -- kernel_src/gemv.cu's kiln_gemv_rope (the qkv GEMV of a batch-1 decode step with the
// rotary embedding and the KV-cache write as its epilogue) under the CPU emulation of tests/emu/cuda_emu.h, one
// specialization a build (ACT UNROLL KSPLIT ROPE=1 RR HD KV on the command line). As test_emu_sk_rope.cc: small
// integer inputs (x and W in -3..3, the bias in -8..8), so each dot product is an integer the fp32 sums hold
// exactly in any order, and the outputs are checked bit for bit -- v heads the sum (+ bias) rounded to act; q and
// k heads rotated from those rounded values with kiln_common.cuh rope_rot's roundings (cos / sin =
// sincosf((float)pos * inv_freq[d]) * mscale), rounded to act; the rotated k and the v in the caches at the slot
// (a slot of -1: nothing), every other cache byte and the output past N still poison. GQA (4 q / 2 kv heads, then
// Llama-3-8B's 32 / 8 at eight more positions), a K of vectors past whole unrolled steps, a bias and mscale on
// some cases. Fails when the rotation is left to the compiler's contraction (plain x0 c - x1 s: after the rounding
// to act only 1-2 of the ~50,000 rotated values a build differ, so two of the four builds fail), the pair's rows
// swapped, or the key cache written unrotated.
#include GEMV_EMU_SRC
#include <cstdio>
#include <random>
#include <vector>

struct Args {
    act_t *out;
    const act_t *x, *w, *bias;
    int N, K, nq, nkv;
    const int *pos;
    const float *inv;
    float mscale;
    kv_t *kc, *vc;
    const int *slots;
    int bs;
};
static void body(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_gemv_rope(a->out, a->x, a->w, a->bias, a->N, a->K, a->nq, a->nkv, a->pos, a->inv, a->mscale, a->kc, a->vc,
                   a->slots, a->bs, nullptr, 0, 0.0f);
}

template <class T> static bool bits_eq(const T &a, const T &b) { return memcmp(&a, &b, sizeof a) == 0; }

static int run_case(int nq, int nkv, int slot, bool with_bias, float mscale, int pos0, unsigned seed) {
    const int half = HD / 2, N = (nq + 2 * nkv) * HD;
    const int K = vec16<act_t>::N * (32 * UNROLL * KSPLIT + 24), bs = 16, nb = 4, X = 16 / (int)sizeof(kv_t);
    std::mt19937 rng(seed);
    auto ri = [&](int lo, int hi) { return lo + (int)(rng() % (u32)(hi - lo + 1)); };
    std::vector<int> xi(K), wi((size_t)N * K), bi(N);
    std::vector<act_t> x(K), w(wi.size()), bias(N);
    for (int i = 0; i < K; i++) xi[i] = ri(-3, 3), x[i] = from_f32<act_t>((float)xi[i]);
    for (size_t i = 0; i < wi.size(); i++) wi[i] = ri(-3, 3), w[i] = from_f32<act_t>((float)wi[i]);
    for (int n = 0; n < N; n++) bi[n] = ri(-8, 8), bias[n] = from_f32<act_t>((float)bi[n]);
    std::vector<float> inv(half);
    for (int i = 0; i < half; i++) inv[i] = 1.0f / powf(500000.0f, (float)(2 * i) / (float)HD);
    const int pos[1] = {pos0}, slots[1] = {slot};
    const size_t ccount = (size_t)nb * nkv * HD * bs;
    std::vector<act_t> out((size_t)N + 16);
    std::vector<kv_t> kc(ccount), vc(ccount);
    for (auto &o : out) memset(&o, 0xff, sizeof o);
    for (auto &c : kc) memset(&c, 0xff, sizeof c);
    for (auto &c : vc) memset(&c, 0xff, sizeof c);
    Args a{out.data(), x.data(), w.data(), with_bias ? bias.data() : nullptr, N, K, nq, nkv, pos, inv.data(), mscale,
           kc.data(), vc.data(), slots, bs};
    const int per_block = RR == 2 ? WARPS / KSPLIT : WARPS / KSPLIT / 2; // row pairs a block (ops_gpu.c)
    emu::launch(emu_dim3{(unsigned)((N / 2 + per_block - 1) / per_block), 1, 1}, 256, 0, 0, body, &a);

    std::vector<float> s(N);
    for (int n = 0; n < N; n++) {
        long long acc = with_bias ? bi[n] : 0;
        for (int k = 0; k < K; k++) acc += (long long)xi[k] * wi[(size_t)n * K + k];
        s[n] = to_f32(from_f32<act_t>((float)acc));
    }
    std::vector<act_t> want_out(out.size());
    std::vector<kv_t> want_k(ccount), want_v(ccount);
    for (auto &o : want_out) memset(&o, 0xff, sizeof o);
    for (auto &c : want_k) memset(&c, 0xff, sizeof c);
    for (auto &c : want_v) memset(&c, 0xff, sizeof c);
    for (int n = 0; n < N; n++) {
        const int h = n / HD, d = n % HD, i = d % half;
        float y = s[n];
        if (h < nq + nkv) {
            const bool first = d < half;
            const float xo = y, xp = s[h * HD + (first ? d + half : d - half)];
            float sn, cs;
            sincosf((float)pos0 * inv[i], &sn, &cs);
            const float c = cs * mscale, sv = sn * mscale;
            volatile float p = xp * sv; // (one rounding, as __fmul_rn)
            y = to_f32(from_f32<act_t>(std::fma(xo, c, first ? -p : (float)p)));
        }
        want_out[n] = from_f32<act_t>(y);
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
            if (bad < 4) fprintf(stderr, "  out[%zu] = %.8g, expected %.8g\n", i, to_f32(out[i]), to_f32(want_out[i]));
            bad++;
        }
    for (size_t i = 0; i < ccount; i++) badk += !bits_eq(kc[i], want_k[i]), badv += !bits_eq(vc[i], want_v[i]);
    const bool ok = !bad && !badk && !badv;
    printf("%s gemv_rope UNROLL=%d KSPLIT=%d RR=%d HD=%d act %s: %d q / %d kv heads, K %d, slot %d, pos %d, bias %d, "
           "mscale %g: %d outputs, %d key / %d value cells not the expected bits\n",
           ok ? "ok  " : "FAIL", UNROLL, KSPLIT, RR, HD, std::is_same<act_t, fp16>::value ? "fp16" : "bf16", nq, nkv, K,
           slot, pos0, with_bias, mscale, bad, badk, badv);
    return !ok;
}

int main() {
    int failures = 0;
    failures += run_case(4, 2, 37, true, 1.0f, 130, 1);
    failures += run_case(4, 2, -1, false, 1.0f, 7, 2); // not cached
    failures += run_case(4, 2, 63, false, 1.25f, 8190, 3);
    failures += run_case(4, 2, 0, true, 1.0f, 0, 4);
    // Llama-3-8B's heads at more positions: enough rotated values that a rounding left to contraction shows
    for (int c = 0; c < 8; c++) failures += run_case(32, 8, 5 + 7 * c, c % 2 == 0, c == 3 ? 1.25f : 1.0f, 97 + 1013 * c, 10 + c);
    return failures ? 1 : 0;
}
