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

static void body(void *p) {
    EmuGemmArgs *a = static_cast<EmuGemmArgs *>(p);
    kiln_gemv(a->out, a->ldo, a->x, a->w, a->bias, a->M, a->N, a->K, nullptr, nullptr, nullptr, nullptr, 0, 0.0f);
}

int main() {
    const int per_block = GLU ? WARPS / KSPLIT : ROWS * WARPS / KSPLIT; // outputs a block
    const int NO = 2 * per_block + per_block / 2 + 1, N = GLU ? 2 * NO : NO;
    const int K = vec16<act_t>::N * (32 * UNROLL * 2 * KSPLIT + 40); // (vectors: past whole unrolled steps)
    const EmuGemmInputs in(MAXM, N, K, 0.06f, 777);
    char what[128];
    snprintf(what, sizeof what, "gemv MAXM=%d ROWS=%d UNROLL=%d GLU=%d KSPLIT=%d N %d K %d", MAXM, ROWS, UNROLL, GLU, KSPLIT, N, K);
    const int failures = emu_gemm_cases(
        what, MAXM, NO,
        [&](int M, bool with_bias, int ldo, out_t *out) {
            EmuGemmArgs a{out, ldo, in.x.data(), in.w.data(), with_bias ? in.bias.data() : nullptr, M, N, K};
            emu::launch(emu_dim3{(unsigned)((NO + per_block - 1) / per_block), 1, 1}, WARPS * 32, 0, 0, body, &a);
        },
        [&](int m, int n, bool with_bias, double &tol) { return in.expect(GLU, m, n, NO, K, with_bias, tol); });
    return failures ? 1 : 0;
}
