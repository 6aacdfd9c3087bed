// test_emu_tc.cc -- kernel_src/gemm_tc.cu (the tensor-core small-M GEMM, W in registers: kiln_gemm_tc) and its
// split-K reduction (kiln_gemm_tc_reduce, kernel_src/gemm_tc_common.cuh: transformed on its own, as the emulation's
// gemm_tc_common.cuh shim replaces that header) under the CPU emulation of tests/emu/cuda_emu.h, one specialization
// a build (ACT OUT MAXM WARPS WK RT STAGES on the command line). Launched as engine/cuda/ops_gpu.c tc_gemm sizes
// them for the compiled tiling (its knobs set to it) on a 132-SM GPU: ceil(N / BN) x split blocks of WARPS * 32
// threads, split from the knob (1: none; 0: automatic, as many blocks as the SMs hold, at most nchunks / (2 WK)
// slices; 2) with cps chunks a slice and no empty slice, the L2 prefetch count from the default 16 MiB budget; the
// reduction on (ceil(N / 256), M) blocks of 256. Shapes: a ragged N (two and a half column blocks and 3 rows) with
// K = 64 (6 WK + 1) - 40 (the last chunk partial, three slices where the split is automatic, the last slice
// shorter than the others) at each split, and N = BN / 2 + 5 with K = 72 (two chunks, the second 8 wide; at WK 4
// warps along K without a chunk). emu_gemm.h's cases at each: M 1, 2, MAXM / 2 + 1, MAXM - 1, MAXM (the host sends M >= 2;
// the kernel serves any M <= MAXM), a bias on every other, a row stride ldo > N on two. Against a double reference
// on the same 16-bit inputs: |out - ref| <= sum|x_k w_k| * K * 1.2e-7 (any order of fp32 sums of K terms and the
// bias, per slice and across them) + |ref| * (2^-8 bf16, 2^-11 fp16, 1e-7 fp32: one rounding to OUT) + 1e-6.
// Outputs poisoned (NaN): nothing written outside out[M, N] (the stride's gap, the row after M); with a split the
// GEMM itself leaves out alone and writes exactly part[split, M, N] (poisoned too: an entry it leaves makes a NaN
// output), without one it leaves part alone; x (its M rows), W (N rows) and the bias end at an inaccessible page
// (emu::Guarded: a read past them faults). Mutations of the transformed sources this test fails
// (build/tests/emu/gemm_tc_emu.cu, gemm_tc_reduce_emu.cuh): load_w's `k + 8 * t < K` as `k < K` or its row mask
// `wok` dropped (a read past W faults), load_x's `k < K` as `true` (a read past x faults), its odd rows' swizzle
// `(row & 1) << 2` dropped, its `n_cp = M * WK * 8` a row short, the B fragments' `64 * (g & 1)` dropped, `nchunks`
// rounded down (the K tail dropped), `n_steps` one short, the refill of W registers one chunk early, the x ring's
// `fill` wrap at XSLOTS - 2 (shared memory overrun) or `slot`'s, cp_async_wait<STAGES> for <STAGES - 1> (x read
// before it lands), the loop's __syncthreads dropped, the WK reduction's add dropped, its `if (wk > 0) return;`
// dropped, its store at red[0] for red[wk - 1], the epilogue's `m >= M` as `m > M` or `n >= N` dropped (writes past
// the outputs), its row `8 j + 2 t + e` without `e`, part's `blockIdx.y * M + m` as `m`, part written with the bias,
// `split = gridDim.y > 1` as `> 2`; the reduction's `s < S` as `s < S - 1`, `n >= N` as `n > N`, its bias dropped,
// `ldo` as N. Harmless, and surviving: `c_hi` not clamped to nchunks (the chunks past K are masked to zero), the
// n-tile cut-off `8 j >= M` as `8 j > M` (rows past M reach no output), the bias test `!split && bias` as `bias` (the
// split's partials never add it).
#include "gemm_tc_common.cuh"
#include GEMM_TC_EMU_SRC
#include GEMM_TC_REDUCE_EMU_SRC
#include "emu_gemm.h"

struct Args {
    out_t *out;
    i64 ldo;
    float *part;
    const act_t *x, *w;
    const out_t *bias;
    int M, N, K, cps, pf, split;
};
static void body_gemm(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_gemm_tc(a->out, a->ldo, a->part, a->x, a->w, a->bias, a->M, a->N, a->K, a->cps, a->pf);
}
static void body_reduce(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_gemm_tc_reduce(a->out, a->ldo, a->part, a->bias, a->M, a->N, a->split);
}

// engine/cuda/ops_gpu.c tc_gemm's grid, split-K and prefetch for this tiling (warps WARPS, wk WK, rt RT, stages
// STAGES as compiled), on 132 SMs with the default 64 MiB workspace and 16 MiB prefetch budget
struct Plan {
    int tiles, split, cps, pf;
};
static Plan tc_plan(int M, int N, int K, int split_knob) {
    const int n_sms = 132, slots = n_sms * (16 / WARPS), nchunks = (K + 63) / 64;
    const size_t ws_bytes = (size_t)64 << 20;
    Plan p;
    p.tiles = (N + BN - 1) / BN;
    int split = split_knob ? split_knob : std::max(1, slots / p.tiles);
    split = std::min(std::min(split, 1024), std::max(1, nchunks / (2 * WK)));
    split = (int)std::min((i64)split, (i64)(ws_bytes / ((size_t)M * (size_t)N * 4)));
    split = std::max(split, 1);
    p.cps = (nchunks + split - 1) / split;
    p.split = (nchunks + p.cps - 1) / p.cps;
    const i64 resident = std::min((i64)p.tiles * p.split, (i64)slots), step = resident * WK * BN * 128;
    p.pf = (int)std::min((i64)16 * (1 << 20) / step, (i64)nchunks);
    return p;
}

static int misuse = 0; // writes the split's GEMM made to out, or the unsplit one to part

static int run_shape(int N, int K, int split_knob, unsigned seed) {
    const EmuGemmInputs in(MAXM, N, K, 0.08f, seed);
    emu::Guarded<act_t> w((size_t)N * K);
    memcpy(w.data(), in.w.data(), sizeof(act_t) * (size_t)N * K);
    emu::Guarded<out_t> bias((size_t)N);
    memcpy(bias.data(), in.bias.data(), sizeof(out_t) * (size_t)N);
    const Plan p0 = tc_plan(2, N, K, split_knob);
    char what[192];
    snprintf(what, sizeof what, "gemm_tc MAXM=%d WARPS=%d WK=%d RT=%d STAGES=%d N %d K %d split knob %d: %d x %d blocks, %d chunks a slice",
             MAXM, WARPS, WK, RT, STAGES, N, K, split_knob, p0.tiles, p0.split, p0.cps);
    return emu_gemm_cases(
        what, MAXM, N,
        [&](int M, bool with_bias, int ldo, out_t *out) {
            const Plan p = tc_plan(M, N, K, split_knob);
            emu::Guarded<act_t> x((size_t)M * K); // x's M rows, nothing after them
            memcpy(x.data(), in.x.data(), sizeof(act_t) * (size_t)M * K);
            const size_t np = (size_t)p.split * M * N, pad = 64;
            std::vector<float> part(np + pad, NAN);
            Args a{out, ldo, part.data(), x.data(), w.data(), with_bias ? bias.data() : nullptr, M, N, K, p.cps, p.pf, p.split};
            emu::launch(emu_dim3{(unsigned)p.tiles, (unsigned)p.split, 1}, THREADS, SMEM_BYTES, 0, body_gemm, &a);
            int bad = 0;
            if (p.split > 1) {
                for (size_t i = 0; i < (size_t)(M + 1) * ldo; i++) bad += !std::isnan(to_f32(out[i]));
                for (size_t i = np; i < np + pad; i++) bad += !std::isnan(part[i]);
                emu::launch(emu_dim3{(unsigned)((N + 255) / 256), (unsigned)M, 1}, 256, 0, 0, body_reduce, &a);
            } else {
                for (size_t i = 0; i < np + pad; i++) bad += !std::isnan(part[i]);
            }
            if (bad) fprintf(stderr, "  M %d split %d: %d writes to %s\n", M, p.split, bad, p.split > 1 ? "out by the GEMM, or past part" : "part");
            misuse += bad != 0;
        },
        [&](int m, int n, bool with_bias, double &tol) { return in.expect(false, m, n, 0, K, with_bias, tol); });
}

int main() {
    const int NO = 2 * BN + BN / 2 + 3, K = 64 * (6 * WK + 1) - 40;
    int failures = 0;
    static const int splits[] = {1, 0, 2};
    for (int s : splits) failures += run_shape(NO, K, s, 4321 + s);
    failures += run_shape(BN / 2 + 5, 72, 0, 99);
    if (misuse) printf("FAIL %d cases with writes outside their buffers\n", misuse);
    return failures || misuse ? 1 : 0;
}
