// test_emu_skx.cc -- kernel_src/gemm_skx.cu under the CPU emulation of tests/emu/cuda_emu.h, one
// specialization a build (its defines on the command line, as the JIT gives them): out[M, N] = x W^T (+ bias)
// against a double-precision reference on the same 16-bit inputs, every output within the output type's
// rounding of the fp32 sum, no write outside out[M, N] (emu_gemm.h's cases); N three row tiles, K = CL *
// WARPS * KW. What it checks that a GPU run would only show as wrong numbers: the fragment and swizzle
// indexing, the rings' waits (a copy lands only when its group is waited for), the warps' and the cluster's
// sums; with NOUT, the batch-1 residual add and norm fold (nout_case). Exit 0 when every case passes.
#include "gemm_tc_common.cuh"
#include GEMM_SKX_EMU_SRC
#include "emu_gemm.h"

struct Args : EmuGemmArgs {
    act_t *residual = nullptr;
    float *ss = nullptr;
    const act_t *nw = nullptr;
};
static void body(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_gemm_skx(a->out, a->ldo, a->x, a->w, a->bias, a->M, a->N, a->K, a->residual, a->ss, a->nw);
}

#if NOUT
// NOUT (one row): h = residual + the output, each rounded to act, within the fp32 sum's error and those
// roundings; out = h * nw rounded, bit for bit from the h stored; the blocks' sums of squares add up to the
// sum of h^2 over the row, each written; nothing stored past N or in other rows
static int nout_case(const EmuGemmInputs &in, int N, int K, bool with_bias) {
    std::mt19937 rng(99);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    std::vector<act_t> res0(N), res(N + 8), nw(N);
    for (int n = 0; n < N; n++) res0[n] = from_f32<act_t>(u(rng)), nw[n] = from_f32<act_t>(0.5f + 0.25f * u(rng));
    for (int n = 0; n < N + 8; n++) res[n] = n < N ? res0[n] : from_f32<act_t>(7.0f);
    const int blocks = N / (16 * RT) * CL;
    std::vector<out_t> out((size_t)2 * N);
    for (auto &o : out) memset(&o, 0xff, sizeof o);
    std::vector<float> ss(blocks + 4, NAN);
    Args a{{out.data(), N, in.x.data(), in.w.data(), with_bias ? in.bias.data() : nullptr, 1, N, K}};
    a.residual = res.data(), a.ss = ss.data(), a.nw = nw.data();
    emu::launch(emu_dim3{(unsigned)(N / (16 * RT)), (unsigned)CL, 1}, WARPS * 32, SKX_SMEM, CL > 1 ? CL : 0, body, &a);
    const double ulp = mma_kind<act_t>::f16 ? 1.0 / 2048 : 1.0 / 256;
    int bad = 0;
    double ssum = 0.0;
    for (int n = 0; n < N; n++) {
        double mag;
        const double v = in.dot(0, n, K, with_bias, mag), r0 = to_f32(res0[n]), h = to_f32(res[n]);
        const double tol = mag * K * 1.2e-7 + fabs(v) * ulp + fabs(r0 + v) * ulp + 1e-6;
        const bool ok = fabs(h - (r0 + v)) <= tol && to_f32(out[n]) == to_f32(from_f32<out_t>((float)h * to_f32(nw[n])));
        if (!ok && bad++ < 5)
            fprintf(stderr, "  n %d: h %g (reference %g, tolerance %.3g), out %g\n", n, h, r0 + v, tol, to_f32(out[n]));
        ssum += h * h;
    }
    int stray = 0;
    for (int n = N; n < 2 * N; n++) stray += !std::isnan(to_f32(out[n]));
    for (int n = N; n < N + 8; n++) stray += to_f32(res[n]) != 7.0f;
    double tot = 0.0;
    for (int b = 0; b < blocks; b++) bad += !(ss[b] >= 0.0f), tot += ss[b]; // (written: a block may store no row-0 output)
    for (int b = blocks; b < blocks + 4; b++) stray += !std::isnan(ss[b]);
    if (!(fabs(tot - ssum) <= 1e-5 * ssum)) bad++, fprintf(stderr, "  sums of squares %g, reference %g\n", tot, ssum);
    const bool ok = !bad && !stray;
    printf("%s gemm_skx NOUT act %s: N %d K %d bias %d: %d wrong, %d stray writes\n", ok ? "ok  " : "FAIL",
           mma_kind<act_t>::f16 ? "fp16" : "bf16", N, K, with_bias, bad, stray);
    return !ok;
}
#endif

int main() {
    const int N = 3 * 16 * RT, K = CL * WARPS * KW;
    const EmuGemmInputs in(MAXM, N, K, 0.05f, 1234);
#if NOUT
    return nout_case(in, N, K, false) + nout_case(in, N, K, true) ? 1 : 0;
#endif
    char what[160];
    snprintf(what, sizeof what, "gemm_skx MAXM=%d WARPS=%d KW=%d SK=%d SLOTS=%d RT=%d CL=%d K %d", MAXM, WARPS, KW, SK,
             SLOTS, RT, CL, K);
    const int failures = emu_gemm_cases(
        what, MAXM, N,
        [&](int M, bool with_bias, int ldo, out_t *out) {
            Args a{{out, ldo, in.x.data(), in.w.data(), with_bias ? in.bias.data() : nullptr, M, N, K}};
            emu::launch(emu_dim3{(unsigned)(N / (16 * RT)), (unsigned)CL, 1}, WARPS * 32, SKX_SMEM, CL > 1 ? CL : 0, body, &a);
        },
        [&](int m, int n, bool with_bias, double &tol) { return in.expect(false, m, n, 0, K, with_bias, tol); });
    return failures ? 1 : 0;
}
