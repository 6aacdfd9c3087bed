// test_emu_sk.cc -- kernel_src/gemm_sk.cu (the cluster split-K small-M GEMM, its mma.sync path: SK_WG = 0)
// under the CPU emulation of tests/emu/cuda_emu.h, one specialization a build (ACT OUT MAXM WARPS RT STAGES CL
// GLU on the command line), emu_gemm.h's cases on a ragged N (two and a half row blocks; GLU: of row pairs)
// and K (the last 64-wide chunk partial, CL slices of 3 chunks): the plain GEMM against a double reference on
// the same 16-bit inputs within the fp32 sum's and the output's rounding; GLU = 1 (kiln_gpu_gemm_silu: W =
// [gate rows; up rows]) silu(g) * u with g and u rounded to act first, within the rounding of g and u
// propagated. Exit 0 when every case passes.
#include "gemm_tc_common.cuh"
#include GEMM_SK_EMU_SRC
#include "emu_gemm.h"

struct Args : EmuGemmArgs {
    int cps;
};
static void body(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_gemm_sk(a->out, a->ldo, a->x, a->w, a->bias, a->M, a->N, a->K, a->cps, nullptr);
}

int main() {
    const int rows = GLU ? BN / 2 : BN;     // outputs a row block
    const int NO = 2 * rows + rows / 2 + 3; // output columns: ragged
    const int N = GLU ? 2 * NO : NO, K = 64 * 3 * CL - 40, nchunks = (K + 63) / 64, cps = (nchunks + CL - 1) / CL;
    const EmuGemmInputs in(MAXM, N, K, 0.08f, 4321);
    char what[128];
    snprintf(what, sizeof what, "gemm_sk MAXM=%d WARPS=%d RT=%d STAGES=%d CL=%d GLU=%d N %d K %d", MAXM, WARPS, RT, STAGES,
             CL, GLU, N, K);
    const int failures = emu_gemm_cases(
        what, MAXM, NO,
        [&](int M, bool with_bias, int ldo, out_t *out) {
            Args a{{out, ldo, in.x.data(), in.w.data(), with_bias ? in.bias.data() : nullptr, M, N, K}, cps};
            emu::launch(emu_dim3{(unsigned)((NO + rows - 1) / rows), (unsigned)CL, 1}, THREADS, SMEM_BYTES,
                        CL > 1 ? CL : 0, body, &a);
        },
        [&](int m, int n, bool with_bias, double &tol) { return in.expect(GLU, m, n, NO, K, with_bias, tol); });
    return failures ? 1 : 0;
}
