// emu_gemm.h -- what the GEMM kernels' emulation tests (test_emu_*.cc) share: 16-bit inputs drawn at random
// (x in [-1, 1], W in [-wmax, wmax], a bias in out_t) with their double values, the cases' row counts (1, 2,
// MAXM / 2 + 1, MAXM - 1, MAXM, within 1 .. MAXM; a bias on every other, a row stride of width + 5 on the middle
// two; a case repeated exactly is skipped), poisoned
// outputs, and the check of one case against a reference: every output within its tolerance, nothing
// written outside out[M, width]. After gemm_tc_common.cuh (act_t, out_t).
#pragma once
#include <cmath>
#include <random>
#include <vector>

// a GEMM launch's arguments (out[M, N] with row stride ldo = x[M, K] W[N, K]^T + bias), the tests' bodies unpack
struct EmuGemmArgs {
    out_t *out;
    i64 ldo;
    const act_t *x, *w;
    const out_t *bias;
    int M, N, K;
};

struct EmuGemmInputs {
    std::vector<act_t> x, w;
    std::vector<double> xf, wf;
    std::vector<out_t> bias;
    EmuGemmInputs(int maxm, int N, int K, float wmax, unsigned seed) : x((size_t)maxm * K), w((size_t)N * K), xf(x.size()), wf(w.size()), bias(N) {
        std::mt19937 rng(seed);
        std::uniform_real_distribution<float> ux(-1.0f, 1.0f), uw(-wmax, wmax);
        for (size_t i = 0; i < x.size(); i++) x[i] = from_f32<act_t>(ux(rng)), xf[i] = to_f32(x[i]);
        for (size_t i = 0; i < w.size(); i++) w[i] = from_f32<act_t>(uw(rng)), wf[i] = to_f32(w[i]);
        for (int n = 0; n < N; n++) bias[n] = from_f32<out_t>(0.5f * ux(rng));
    }
    // x[m] . W[n] (+ bias[n]) in double, and mag = the sum of the magnitudes of its terms
    double dot(int m, int n, int K, bool with_bias, double &mag) const {
        double s = with_bias ? (double)to_f32(bias[n]) : 0.0;
        mag = fabs(s);
        for (int k = 0; k < K; k++) {
            const double p = xf[(size_t)m * K + k] * wf[(size_t)n * K + k];
            s += p, mag += fabs(p);
        }
        return s;
    }
    // the expected out[m, n] of a GEMM (glu false: x[m] . W[n] (+ bias), within its fp32 sum's error and one
    // rounding to out) or of a gate/up GEMM with the SiLU-and-mul epilogue (W = [gate rows; up rows], up row n
    // at n + up: silu(g) * u with g and u rounded to act first, those roundings propagated), and its tolerance
    double expect(bool glu, int m, int n, int up, int K, bool with_bias, double &tol) const {
        // one rounding to act is at most half an ulp: 2^-8 (bf16) or 2^-11 (fp16) of the value
        const double ulp_act = mma_kind<act_t>::f16 ? 1.0 / 2048 : 1.0 / 256, ulp_out = sizeof(out_t) == 4 ? 1e-7 : ulp_act;
        double mg, mu;
        const double g = dot(m, n, K, with_bias, mg);
        if (!glu) {
            tol = mg * K * 1.2e-7 + fabs(g) * ulp_out + 1e-6;
            return g;
        }
        const double u = dot(m, n + up, K, with_bias, mu);
        const double sg = 1.0 / (1.0 + exp(-g)), silu = g * sg, dsilu = sg * (1.0 + g * (1.0 - sg));
        const double eg = fabs(g) * ulp_act + mg * K * 1.2e-7, eu = fabs(u) * ulp_act + mu * K * 1.2e-7;
        tol = fabs(dsilu * u) * eg + fabs(silu) * eu + fabs(silu * u) * (ulp_out + 1e-6) + 1e-6;
        return silu * u;
    }
};

// the cases: for each distinct M, run(M, with_bias, ldo, out) with out poisoned (NaN in every output type) and
// (M + 1) x ldo, then every out[m, n] (m < M, n < width) checked against ref(m, n, with_bias, tol) and the
// rest still poison; one line a case; returns the failed cases
template <class Run, class Ref> int emu_gemm_cases(const char *what, int maxm, int width, Run run, Ref ref) {
    const int Ms[] = {1, 2, maxm / 2 + 1, maxm - 1, maxm};
    int failures = 0, cases = 0, seen[5][3];
    for (int mi = 0; mi < 5; mi++) {
        const int M = Ms[mi] < 1 ? 1 : Ms[mi] > maxm ? maxm : Ms[mi];
        const bool with_bias = mi % 2 == 0;
        const int ldo = mi == 2 || mi == 3 ? width + 5 : width;
        bool dup = false;
        for (int j = 0; j < mi; j++) dup |= seen[j][0] == M && seen[j][1] == with_bias && seen[j][2] == ldo;
        seen[mi][0] = M, seen[mi][1] = with_bias, seen[mi][2] = ldo;
        if (dup) continue;
        std::vector<out_t> out((size_t)(M + 1) * ldo);
        for (auto &o : out) memset(&o, 0xff, sizeof o);
        run(M, with_bias, ldo, out.data());
        int bad = 0, stray = 0;
        for (int m = 0; m <= M; m++)
            for (int n = 0; n < ldo; n++) {
                const double got = to_f32(out[(size_t)m * ldo + n]);
                if (m == M || n >= width) {
                    stray += !std::isnan(got);
                    continue;
                }
                double tol;
                const double r = ref(m, n, with_bias, tol);
                if (!(fabs(got - r) <= tol)) {
                    if (bad < 5) fprintf(stderr, "  M %d: out[%d, %d] = %g, reference %g (tolerance %.3g)\n", M, m, n, got, r, tol);
                    bad++;
                }
            }
        cases++;
        const bool ok = bad == 0 && stray == 0;
        failures += !ok;
        printf("%s %s act %s out %s: M %d width %d bias %d ldo %d: %d wrong, %d stray writes\n", ok ? "ok  " : "FAIL", what,
               mma_kind<act_t>::f16 ? "fp16" : "bf16", sizeof(out_t) == 4 ? "fp32" : "16-bit", M, width, with_bias, ldo, bad,
               stray);
    }
    printf("%d of %d cases passed\n", cases - failures, cases);
    return failures;
}
