// test_emu_skx.cc -- kernel_src/gemm_skx.cu under the CPU emulation of tests/emu/cuda_emu.h, one
// specialization a build (its defines on the command line, as the JIT gives them): out[M, N] = x W^T (+ bias)
// against a double-precision reference on the same 16-bit inputs, every output within the output type's
// rounding of the fp32 sum, no write outside out[M, N] (emu_gemm.h's cases); N three row tiles, K = CL *
// WARPS * KW. What it checks that a GPU run would only show as wrong numbers: the fragment and swizzle
// indexing, the rings' waits (a copy lands only when its group is waited for), the warps' and the cluster's
// sums; with EMU_MH = 2, the row halves (gridDim.z: rows MAXM z ..). Exit 0 when every case passes.
#include "gemm_tc_common.cuh"
#include GEMM_SKX_EMU_SRC
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
    kiln_gemm_skx(a->out, a->ldo, a->x, a->w, a->bias, a->M, a->N, a->K);
}

#ifndef EMU_MH
#define EMU_MH 1 // row halves (gridDim.z): MAXM rows each
#endif

int main() {
    const int N = 3 * 16 * RT, K = CL * WARPS * KW, rows = MAXM * EMU_MH;
    const EmuGemmInputs in(rows, N, K, 0.05f, 1234);
    char what[160];
    snprintf(what, sizeof what, "gemm_skx MAXM=%d WARPS=%d KW=%d SK=%d SLOTS=%d RT=%d CL=%d K %d, %d row halves", MAXM, WARPS,
             KW, SK, SLOTS, RT, CL, K, EMU_MH);
    const int failures = emu_gemm_cases(
        what, rows, N,
        [&](int M, bool with_bias, int ldo, out_t *out) {
            Args a{out, ldo, in.x.data(), in.w.data(), with_bias ? in.bias.data() : nullptr, M, N, K};
            emu::launch(emu_dim3{(unsigned)(N / (16 * RT)), (unsigned)CL, (unsigned)EMU_MH}, WARPS * 32, SKX_SMEM, CL > 1 ? CL : 0, body, &a);
        },
        [&](int m, int n, bool with_bias, double &tol) { return in.expect(false, m, n, 0, K, with_bias, tol); });
    return failures ? 1 : 0;
}
