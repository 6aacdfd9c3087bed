// test_emu_norm.cc -- kernel_src/rmsnorm.cu (RMSNorm and the residual add + RMSNorm, the norm kernel of every
// layer) under the CPU emulation of tests/emu/cuda_emu.h, one specialization a build (ACT, W). Its three row
// shapes at the launch shapes engine/cuda/ops_gpu.c norm() picks: a warp a row (dim 512, 256 threads, 8 rows a
// block, a partial last block), a block a row (dim 4096 at 128 threads, 4 vectors a thread), and two passes
// over the row (dim 4096 at 64 threads: more vectors than a block holds). Against the CPU's semantics
// (engine/ops_cpu.h kiln_cpu_add_rmsnorm): the residual x + r rounded to ACT bit for bit, the norm over the
// residual as stored, out = h * rsqrt(mean(h^2) + eps) * w within one rounding to ACT; out aliasing x; rows past
// `rows` untouched. Exit 0 when every case passes.
// WIDE (test_emu_norm_wide.cc): the same cases through kernel_src/rmsnorm_wide.cu, the prefill-sized rows' kernels
// (kiln_rmsnorm_wide, kiln_add_rmsnorm_wide: the same arguments and row shapes; its blocks of at most 512 threads)
#include "kiln_common.cuh"
#ifdef WIDE
#include RMSNORM_WIDE_EMU_SRC
#define KILN_NORM kiln_rmsnorm_wide
#define KILN_ADD_NORM kiln_add_rmsnorm_wide
#else
#include RMSNORM_EMU_SRC
#define KILN_NORM kiln_rmsnorm
#define KILN_ADD_NORM kiln_add_rmsnorm
#endif
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

struct Args {
    act_t *out, *residual;
    const act_t *x;
    const w_t *w;
    int rows, dim;
    float eps;
};
static void body_norm(void *p) {
    Args *a = static_cast<Args *>(p);
    KILN_NORM(a->out, a->x, a->w, a->rows, a->dim, a->eps);
}
static void body_add(void *p) {
    Args *a = static_cast<Args *>(p);
    KILN_ADD_NORM(a->out, a->residual, a->x, a->w, a->rows, a->dim, a->eps);
}

template <class T> static const char *name() { return sizeof(T) == 4 ? "fp32" : std::is_same<T, fp16>::value ? "fp16" : "bf16"; }

// one case: rows x dim at `threads` a block (a warp a row: ceil(rows / (threads / 32)) blocks, else a block a row)
static int run_case(bool add, bool alias, int rows, int dim, int threads) {
    std::mt19937 rng(rows * 131 + dim + threads + add * 7 + alias);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    const size_t n = (size_t)rows * dim, pad = (size_t)dim; // one row past the end, poisoned
    std::vector<act_t> x(n + pad), res(n + pad), out(n + pad);
    std::vector<w_t> w(dim);
    std::vector<float> xf(n), rf(n);
    for (size_t i = 0; i < n + pad; i++) {
        x[i] = from_f32<act_t>(u(rng)), res[i] = from_f32<act_t>(u(rng)), out[i] = from_f32<act_t>(NAN);
        if (i < n) xf[i] = to_f32(x[i]), rf[i] = to_f32(res[i]);
    }
    for (int i = 0; i < dim; i++) w[i] = from_f32<w_t>(0.5f + 0.5f * u(rng));
    const std::vector<act_t> res0 = res;
    act_t *o = alias ? x.data() : out.data();
    Args a{o, res.data(), x.data(), w.data(), rows, dim, 1e-5f};
    const int nv = dim / vec16<act_t>::N;
    const unsigned grid = nv <= 32 * MAXW ? (unsigned)((rows + threads / 32 - 1) / (threads / 32)) : (unsigned)rows;
    emu::launch(emu_dim3{grid, 1, 1}, threads, 0, 0, add ? body_add : body_norm, &a);
    const double ulp = sizeof(act_t) == 4 ? 1e-7 : std::is_same<act_t, fp16>::value ? 1.0 / 2048 : 1.0 / 256;
    int bad = 0, stray = 0;
    for (int r = 0; r < rows; r++) {
        std::vector<double> h(dim);
        double ss = 0.0;
        for (int i = 0; i < dim; i++) {
            const size_t k = (size_t)r * dim + i;
            if (add) {
                const act_t e = from_f32<act_t>(rf[k] + xf[k]); // the residual as stored
                bad += memcmp(&res[k], &e, sizeof e) != 0;
                h[i] = to_f32(e);
            } else {
                h[i] = xf[k];
            }
            ss += h[i] * h[i];
        }
        const double rr = 1.0 / sqrt(ss / dim + 1e-5);
        for (int i = 0; i < dim; i++) {
            const double e = h[i] * rr * to_f32(w[i]), got = to_f32(o[(size_t)r * dim + i]);
            if (!(fabs(got - e) <= fabs(e) * (ulp + 1e-5) + 1e-6)) {
                if (bad < 5) fprintf(stderr, "  row %d [%d]: %g, reference %g\n", r, i, got, e);
                bad++;
            }
        }
    }
    for (size_t i = n; i < n + pad; i++) {
        stray += !std::isnan(to_f32(out[i])) || memcmp(&res[i], &res0[i], sizeof(act_t)) != 0;
        if (alias) stray -= !std::isnan(to_f32(out[i])); // (out is x there: not poisoned)
    }
    const bool ok = !bad && !stray;
#ifdef WIDE
    const char *kn = add ? "add_rmsnorm_wide" : "rmsnorm_wide";
#else
    const char *kn = add ? "add_rmsnorm" : "rmsnorm";
#endif
    printf("%s %s act %s w %s: rows %d dim %d, %d threads%s: %d wrong, %d stray\n", ok ? "ok  " : "FAIL", kn,
           name<act_t>(), name<w_t>(), rows, dim, threads, alias ? " (out = x)" : "", bad, stray);
    return !ok;
}

int main() {
    const int e = vec16<act_t>::N; // dims in vectors of the act type: a warp a row, a block a row, two passes
    int failures = 0;
    for (int add = 0; add < 2; add++) {
        failures += run_case(add, false, 11, 64 * e, 256);  // a warp a row, a partial block
        failures += run_case(add, add, 3, 512 * e, 128);    // a block a row (4 vectors a thread)
        failures += run_case(add, false, 2, 512 * e, 64);   // two passes
        failures += run_case(add, !add, 5, 96 * e, 256);    // a warp a row, 3 vectors a lane
    }
    return failures ? 1 : 0;
}
