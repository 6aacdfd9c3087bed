// test_emu_act.cc -- kernel_src/act.cu (the SiLU- and GELU-and-mul of the MLP, the residual add) under the CPU
// emulation of tests/emu/cuda_emu.h, one specialization a build (ACT). Grids smaller than the work (the
// grid-stride loops go round several times) and larger; against double references on the same inputs:
// silu(g) * u and gelu_tanh(g) * u within the math's fp32 error and one rounding to ACT, a + b within one
// rounding; nothing written past the outputs. Exit 0 when every case passes.
#include "kiln_common.cuh"
#include ACT_EMU_SRC
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

struct Args {
    act_t *out;
    const act_t *x, *b;
    int T, I;
    i64 n;
    int kind;
};
static void body(void *p) {
    Args *a = static_cast<Args *>(p);
    if (a->kind == 0) kiln_silu_mul(a->out, a->x, a->T, a->I);
    else if (a->kind == 1) kiln_gelu_mul(a->out, a->x, a->T, a->I);
    else kiln_add(a->out, a->x, a->b, a->n);
}

static int run_case(int kind, int T, int I, unsigned grid, int threads) {
    std::mt19937 rng(kind * 100 + T + I + grid);
    std::uniform_real_distribution<float> u(-6.0f, 6.0f);
    const size_t nin = kind == 2 ? (size_t)T * I : (size_t)T * 2 * I, nout = (size_t)T * I, pad = 37;
    std::vector<act_t> x(nin), b(nout), out(nout + pad);
    for (auto &v : x) v = from_f32<act_t>(u(rng));
    for (auto &v : b) v = from_f32<act_t>(u(rng));
    for (auto &v : out) v = from_f32<act_t>(NAN);
    Args a{out.data(), x.data(), b.data(), T, I, (i64)nout, kind};
    emu::launch(emu_dim3{grid, 1, 1}, threads, 0, 0, body, &a);
    const double ulp = sizeof(act_t) == 4 ? 1.2e-7 : std::is_same<act_t, fp16>::value ? 1.0 / 2048 : 1.0 / 256;
    int bad = 0, stray = 0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < I; i++) {
            double e;
            if (kind == 2) {
                e = (double)to_f32(x[(size_t)t * I + i]) + to_f32(b[(size_t)t * I + i]);
            } else {
                const double g = to_f32(x[(size_t)t * 2 * I + i]), v = to_f32(x[(size_t)t * 2 * I + I + i]);
                const double ga = kind == 0 ? g / (1.0 + exp(-g))
                                            : 0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
                e = ga * v;
            }
            const double got = to_f32(out[(size_t)t * I + i]);
            if (!(fabs(got - e) <= fabs(e) * (ulp + 4e-6) + 1e-6)) {
                if (bad < 5) fprintf(stderr, "  kind %d [%d, %d]: %g, reference %g\n", kind, t, i, got, e);
                bad++;
            }
        }
    for (size_t i = nout; i < nout + pad; i++) stray += !std::isnan(to_f32(out[i]));
    const bool ok = !bad && !stray;
    printf("%s %s act %s: T %d I %d, %u blocks of %d: %d wrong, %d stray\n", ok ? "ok  " : "FAIL",
           kind == 0 ? "silu_mul" : kind == 1 ? "gelu_mul" : "add", sizeof(act_t) == 4 ? "fp32" : std::is_same<act_t, fp16>::value ? "fp16" : "bf16",
           T, I, grid, threads, bad, stray);
    return !ok;
}

int main() {
    const int e = vec16<act_t>::N;
    int failures = 0;
    for (int kind = 0; kind < 2; kind++) {
        failures += run_case(kind, 5, 24 * e, 2, 32);  // 120 vectors on 64 threads: the loop goes round twice
        failures += run_case(kind, 3, 7 * e, 4, 64);   // more threads than vectors
    }
    failures += run_case(2, 7, 143, 3, 32); // the add: 1001 elements on 96 threads
    failures += run_case(2, 1, 5, 1, 64);
    return failures ? 1 : 0;
}
