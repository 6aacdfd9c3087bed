// test_emu_gemv_norm.cc -- kernel_src/gemv.cu's batch-1 residual add + RMSNorm folds (kiln_gemv NOUT / NIN; the
// default path of -b 1 decode steps) under the CPU emulation of tests/emu/cuda_emu.h, one specialization a
// build. NOUT = 1 (the o / down GEMV): residual[n] += the output rounded to act (h: within two roundings and the
// fp32 sum's error of the reference), out[n] = h * nw[n] rounded, bit for bit from the h it wrote, and block b's
// ss_out[b] the sum of its rows' h^2 (fp32, within its rounding); rows past N untouched. NIN = 1 (the GEMVs
// after it): every dot product scaled by r = 1 / sqrt(sum(part) / K + eps) before the bias (plain) or before
// the SiLU-and-mul's roundings (GLU), each output within its tolerance and all of them together within 2e-3
// (GLU: 6e-3, its g and u rounded first) of r's scale (sum got * want / sum want^2). Ragged N, bias on and off. Exit 0 when every case passes.
#include GEMV_EMU_SRC
#include "gemm_types.cuh"
#include "emu_gemm.h"

struct Args {
    out_t *out;
    const act_t *x, *w;
    const out_t *bias;
    int N, K;
    act_t *residual;
    float *ss_out;
    const act_t *nw;
    const float *part;
    int npart;
    float eps;
};
static void body(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_gemv(a->out, a->N, a->x, a->w, a->bias, 1, a->N, a->K, a->residual, a->ss_out, a->nw, a->part, a->npart, a->eps);
}

int main() {
    const int per_block = GLU ? WARPS / KSPLIT : ROWS * WARPS / KSPLIT, blocks = 3;
    const int NO = (blocks - 1) * per_block + per_block / 2 + 1, N = GLU ? 2 * NO : NO;
    const int K = vec16<act_t>::N * (32 * UNROLL * 2 * KSPLIT + 24);
    const EmuGemmInputs in(1, N, K, 0.06f, 99);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u01(0.5f, 1.5f);
    std::vector<act_t> res0(NO + 1), nw(NO);
    for (auto &r : res0) r = from_f32<act_t>(2.0f * u01(rng) - 2.0f);
    for (auto &v : nw) v = from_f32<act_t>(u01(rng));
    std::vector<float> part(37);
    double psum = 0;
    for (auto &p : part) p = 40.0f * u01(rng), psum += p;
    const float eps = 1e-5f;
    const double r = NIN ? 1.0 / sqrt(psum / K + eps) : 1.0;
    const double half_ulp = mma_kind<act_t>::f16 ? 1.0 / 2048 : 1.0 / 256;
    int failures = 0;
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        std::vector<out_t> out(NO + 3);
        for (auto &o : out) memset(&o, 0xff, sizeof o);
        std::vector<act_t> res = res0;
        std::vector<float> ss(blocks + 1, -1.0f);
        Args a{out.data(), in.x.data(), in.w.data(), with_bias ? in.bias.data() : nullptr, N, K, res.data(), ss.data(),
               nw.data(), part.data(), (int)part.size(), eps};
        emu::launch(emu_dim3{(unsigned)blocks, 1, 1}, WARPS * 32, 0, 0, body, &a);
        int bad = 0;
        double dot_gw = 0, dot_ww = 0; // sum got * want, sum want^2: a systematic scale (r) shows in their ratio
        auto check = [&](bool ok, const char *what, int n, double got, double want) {
            if (!ok && bad++ < 5) fprintf(stderr, "  bias %d: %s[%d] = %.9g, expected %.9g\n", with_bias, what, n, got, want);
        };
        for (int n = 0; n < NO; n++) {
            double mg, mu;
            const double g = r * in.dot(0, n, K, false, mg) + (with_bias ? to_f32(in.bias[n]) : 0.0);
            const double eg = r * mg * K * 1.2e-7 + fabs(g) * 1e-6;
            if (NOUT) { // h = act(res + act(v)): two roundings
                const double want = to_f32(res0[n]) + g, h = to_f32(res[n]);
                const double tol = eg + half_ulp * (fabs(g) + fabs(want) + half_ulp * fabs(g)) + 1e-6;
                check(fabs(h - want) <= tol, "residual", n, h, want);
                const float o = to_f32(out[n]), o_want = to_f32(from_f32<out_t>((float)h * to_f32(nw[n])));
                check(o == o_want, "out (h * nw)", n, o, o_want);
            } else if (!GLU) {
                const double got = to_f32(out[n]);
                check(fabs(got - g) <= eg + fabs(g) * half_ulp + 1e-6, "out", n, got, g);
                dot_gw += got * g, dot_ww += g * g;
            } else {
                const double u = r * in.dot(0, NO + n, K, false, mu) + (with_bias ? to_f32(in.bias[NO + n]) : 0.0);
                const double eu = r * mu * K * 1.2e-7 + fabs(u) * 1e-6;
                const double sg = 1.0 / (1.0 + exp(-g)), silu = g * sg, dsilu = sg * (1.0 + g * (1.0 - sg));
                const double want = silu * u, got = to_f32(out[n]);
                const double tol = fabs(dsilu * u) * (eg + fabs(g) * half_ulp) + fabs(silu) * (eu + fabs(u) * half_ulp) +
                                   fabs(want) * half_ulp + 1e-6;
                check(fabs(got - want) <= tol, "out (silu)", n, got, want);
                dot_gw += got * want, dot_ww += want * want;
            }
        }
        for (int n = NO; n < NO + 3; n++) check(std::isnan((double)to_f32(out[n])), "out past N", n, to_f32(out[n]), NAN);
        if (NOUT) {
            check(to_f32(res[NO]) == to_f32(res0[NO]), "residual past N", NO, to_f32(res[NO]), to_f32(res0[NO]));
            for (int b = 0; b < blocks; b++) {
                double want = 0;
                for (int n = b * per_block; n < (b + 1) * per_block && n < NO; n++) want += (double)to_f32(res[n]) * to_f32(res[n]);
                check(fabs(ss[b] - want) <= want * 1e-5 + 1e-6, "ss_out", b, ss[b], want);
            }
            check(ss[blocks] == -1.0f, "ss_out past the grid", blocks, ss[blocks], -1.0);
        }
        if (NIN) { // the roundings average out; a scale error of r does not (1% shows as 1e-2 plain, 2e-2 GLU)
            const double scale = dot_gw / dot_ww;
            check(fabs(scale - 1.0) <= (GLU ? 6e-3 : 2e-3), "output scale against r * reference", 0, scale, 1.0);
        }
        const bool ok = bad == 0;
        failures += !ok;
        printf("%s gemv MAXM=%d ROWS=%d UNROLL=%d GLU=%d KSPLIT=%d NOUT=%d NIN=%d act %s: N %d K %d bias %d: %d wrong\n",
               ok ? "ok  " : "FAIL", MAXM, ROWS, UNROLL, GLU, KSPLIT, NOUT, NIN, mma_kind<act_t>::f16 ? "fp16" : "bf16", N, K,
               with_bias, bad);
    }
    printf("%d of 2 cases passed\n", 2 - failures);
    return failures ? 1 : 0;
}
