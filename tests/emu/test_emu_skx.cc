// test_emu_skx.cc -- kernel_src/gemm_skx.cu under the CPU emulation of tests/emu/cuda_emu.h, one
// specialization a build (its defines on the command line, as the JIT gives them): for M = 1, 2, MAXM / 2 + 1,
// MAXM - 1 and MAXM (a bias on every other, a row stride of N + 3 on two), out[M, N] = x W^T (+ bias) against
// a double-precision reference on the same 16-bit inputs, every output within the output type's rounding of
// the fp32 sum, no write outside out[M, N] (poisoned); N three row tiles, K = CL * WARPS * KW. What it checks that a GPU run would only show
// as wrong numbers: the fragment and swizzle indexing, the rings' waits (a copy lands only when its group
// is waited for), the warps' and the cluster's sums. Exit 0 when every case passes.
#include "gemm_tc_common.cuh"
#include GEMM_SKX_EMU_SRC
#include <cmath>
#include <random>
#include <vector>


struct Args {
    out_t *out;
    i64 ldo;
    const act_t *x, *w;
    const out_t *bias;
    int M, N, K;
};
static void body(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_gemm_skx(a->out, a->ldo, a->x, a->w, a->bias, a->M, a->N, a->K);
}

int main() {
    const int N = 3 * 16 * RT, K = CL * WARPS * KW; // three row tiles
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> ux(-1.0f, 1.0f), uw(-0.05f, 0.05f);
    std::vector<act_t> x((size_t)MAXM * K), w((size_t)N * K);
    std::vector<float> xf(x.size()), wf(w.size());
    for (size_t i = 0; i < x.size(); i++) x[i] = from_f32<act_t>(ux(rng)), xf[i] = to_f32(x[i]);
    for (size_t i = 0; i < w.size(); i++) w[i] = from_f32<act_t>(uw(rng)), wf[i] = to_f32(w[i]);
    std::vector<out_t> bias(N);
    for (int n = 0; n < N; n++) bias[n] = from_f32<out_t>(ux(rng));
    const int Ms[] = {1, 2, MAXM / 2 + 1, MAXM - 1, MAXM};
    int failures = 0, cases = 0;
    for (int mi = 0; mi < 5; mi++) {
        const int M = Ms[mi];
        if (mi && M <= Ms[mi - 1]) continue;
        const bool with_bias = mi % 2 == 0;
        const int ldo = mi == 2 || mi == 3 ? N + 3 : N;
        std::vector<out_t> out((size_t)(M + 1) * ldo);
        for (auto &o : out) memset(&o, 0xff, sizeof o); // NaN in every output type
        Args a{out.data(), ldo, x.data(), w.data(), with_bias ? bias.data() : nullptr, M, N, K};
        emu::launch(emu_dim3{(unsigned)(N / (16 * RT)), (unsigned)CL, 1}, WARPS * 32, SKX_SMEM, CL > 1 ? CL : 0, body, &a);
        int bad = 0, stray = 0;
        double worst = 0;
        for (int m = 0; m <= M; m++)
            for (int n = 0; n < ldo; n++) {
                const float got = to_f32(out[(size_t)m * ldo + n]);
                if (m == M || n >= N) {
                    stray += !std::isnan(got);
                    continue;
                }
                double ref = with_bias ? (double)to_f32(bias[n]) : 0.0, mag = fabs(ref);
                for (int k = 0; k < K; k++) {
                    const double p = (double)xf[(size_t)m * K + k] * wf[(size_t)n * K + k];
                    ref += p, mag += fabs(p);
                }
                // fp32 sums of K products (order: the MMA's, the warps', the cluster's) and one rounding to out
                const double tol = mag * K * 1.2e-7 + fabs(ref) * (sizeof(out_t) == 4 ? 1e-6 : 1.0 / 256) + 1e-6;
                const double err = fabs(got - ref);
                if (!(err <= tol)) {
                    if (bad < 5)
                        fprintf(stderr, "  M %d: out[%d, %d] = %g, reference %g (tolerance %.3g)\n", M, m, n, got, ref, tol);
                    bad++;
                }
                if (err / (tol > 0 ? tol : 1) > worst) worst = err / tol;
            }
        cases++;
        const bool ok = bad == 0 && stray == 0;
        failures += !ok;
        printf("%s gemm_skx MAXM=%d WARPS=%d KW=%d SK=%d SLOTS=%d RT=%d CL=%d act %s out %s: M %d N %d K %d bias %d ldo %d: "
               "%d wrong, %d stray writes, worst error %.2f of tolerance\n",
               ok ? "ok  " : "FAIL", MAXM, WARPS, KW, SK, SLOTS, RT, CL, sizeof(act_t) == 2 && mma_kind<act_t>::f16 ? "fp16" : "bf16",
               sizeof(out_t) == 4 ? "fp32" : "16-bit", M, N, K, with_bias, ldo, bad, stray, worst);
    }
    printf("%d of %d cases passed\n", cases - failures, cases);
    return failures ? 1 : 0;
}
