// test_emu_gemv.cc -- kernel_src/gemv.cu's kiln_gemv (the small-M GEMV: the batch-1 projections) under the CPU
// emulation of tests/emu/cuda_emu.h, one specialization a build (ACT OUT MAXM ROWS UNROLL GLU KSPLIT on the
// command line), emu_gemm.h's cases on a ragged N (the last block part full) and a K of vectors that do not
// fill the last unrolled step: the plain GEMV against a double reference within the fp32 sum's and the
// output's rounding; GLU = 1 (W = [gate rows; up rows]) silu(g) * u with g and u rounded to act first, within
// the rounding of g and u propagated. (The norm-fold forms NOUT / NIN and the rope / all-reduce kernels are
// not covered here.) Exit 0 when every case passes.
#include GEMV_EMU_SRC
#include "gemm_types.cuh"
#include "emu_gemm.h"

struct Args {
    out_t *out;
    i64 ldo;
    const act_t *x, *w;
    const out_t *bias;
    int M, N, K;
};
static void body(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_gemv(a->out, a->ldo, a->x, a->w, a->bias, a->M, a->N, a->K, nullptr, nullptr, nullptr, nullptr, 0, 0.0f);
}

int main() {
    const int per_block = GLU ? WARPS / KSPLIT : ROWS * WARPS / KSPLIT; // outputs a block
    const int NO = 2 * per_block + per_block / 2 + 1, N = GLU ? 2 * NO : NO;
    const int K = vec16<act_t>::N * (32 * UNROLL * 2 * KSPLIT + 40); // (vectors: past whole unrolled steps)
    const EmuGemmInputs in(MAXM, N, K, 0.06f, 777);
    const double ulp_act = mma_kind<act_t>::f16 ? 1.0 / 1024 : 1.0 / 128, ulp_out = sizeof(out_t) == 4 ? 1e-6 : ulp_act;
    char what[128];
    snprintf(what, sizeof what, "gemv MAXM=%d ROWS=%d UNROLL=%d GLU=%d KSPLIT=%d N %d K %d", MAXM, ROWS, UNROLL, GLU, KSPLIT, N, K);
    const int failures = emu_gemm_cases(
        what, MAXM, NO,
        [&](int M, bool with_bias, int ldo, out_t *out) {
            Args a{out, ldo, in.x.data(), in.w.data(), with_bias ? in.bias.data() : nullptr, M, N, K};
            emu::launch(emu_dim3{(unsigned)((NO + per_block - 1) / per_block), 1, 1}, WARPS * 32, 0, 0, body, &a);
        },
        [&](int m, int n, bool with_bias, double &tol) {
            double mg, mu;
            const double g = in.dot(m, n, K, with_bias, mg);
            if (!GLU) {
                tol = mg * K * 1.2e-7 + fabs(g) * ulp_out + 1e-6;
                return g;
            }
            const double u = in.dot(m, NO + n, K, with_bias, mu);
            const double sg = 1.0 / (1.0 + exp(-g)), silu = g * sg, dsilu = sg * (1.0 + g * (1.0 - sg));
            const double eg = fabs(g) * ulp_act + mg * K * 1.2e-7, eu = fabs(u) * ulp_act + mu * K * 1.2e-7;
            tol = fabs(dsilu * u) * eg + fabs(silu) * eu + fabs(silu * u) * (ulp_out + 1e-6) + 1e-6;
            return silu * u;
        });
    return failures ? 1 : 0;
}
