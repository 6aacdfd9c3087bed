// test_emu_sampler.cc -- kernel_src/sample.cu (the general sampler: penalties, temperature, top-k, top-p,
// min-p, per-request Philox seeds) under the CPU emulation of tests/emu/cuda_emu.h, against kiln's CPU
// sampler (engine/sampler.c, through sampler_ref.c): the semantics both implement (sampler.h).
// - kiln_sample_penalties: the logits bit for bit as kiln_sampler_apply_penalties then the banned ids at -inf
//   leave them (repetition over prompt + output ids, presence / frequency over output ids, duplicates and ids
//   out of range), the count scratch back at 0, rows without penalties untouched.
// - kiln_sample: greedy rows (temperature 0, and rows whose max is not finite) the CPU's argmax exactly (the
//   lowest index among equal maxima, within a thread's elements and across threads); sampled rows the CPU's
//   token, except where a double-precision model of the semantics puts the choice within 1e-5 of the kept
//   mass from a boundary (the kernel sums in 2^-32 fixed point, the CPU in double over fp32 probabilities):
//   at most one such row a case; logprobs log_softmax(l)[token] within fp32 rounding; the same tokens with
//   the grid's blocks in another order; nothing written past the rows. Rows of 1000 (fewer than two a
//   thread), 1003 and 5000 logits. Mutations that fail it: the repetition penalty multiplied, either argmax
//   tie-break reversed, the top-k count or the kept mass with a strict threshold, the uniform from the
//   verification's counter. Exit 0 when every case passes.
#include "kiln_common.cuh"
#include SAMPLE_EMU_SRC
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

extern "C" {
void emu_ref_penalties(float *logits, int V, const int32_t *prompt, int n_prompt, const int32_t *output, int n_output,
                       float repetition, float presence, float frequency, int32_t *scratch);
int32_t emu_ref_sample(const float *logits, int V, float temperature, float top_p, int top_k, float min_p,
                       uint64_t seed, uint64_t step);
void emu_ref_philox(uint64_t key, uint64_t hi, uint64_t lo, uint32_t out[4]);
}

struct PenArgs {
    float *logits;
    int V;
    const sample_params *prm;
    const int *pids, *poff, *oids, *ooff, *bids, *boff;
    int *counts;
};
static void body_pen(void *p) {
    PenArgs *a = static_cast<PenArgs *>(p);
    kiln_sample_penalties(a->logits, a->V, a->prm, a->pids, a->poff, a->oids, a->ooff, a->bids, a->boff, a->counts);
}
struct SampleArgs {
    int *tokens;
    float *logprobs;
    const float *logits;
    int V;
    const sample_params *prm;
    float *ws;
};
static void body_sample(void *p) {
    SampleArgs *a = static_cast<SampleArgs *>(p);
    kiln_sample(a->tokens, a->logprobs, a->logits, a->V, a->prm, a->ws);
}

// how close the semantics' choice is to a boundary, as a fraction of the kept mass (test_gpu_ops.c ref_sample)
static double margin_of(const float *l, int V, const sample_params &p) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[best]) best = i;
    if (p.temperature <= 0 || !std::isfinite(l[best])) return INFINITY;
    const float inv_t = 1.0f / p.temperature, mx = l[best] * inv_t;
    std::vector<double> e(V), srt;
    double Z = 0;
    for (int i = 0; i < V; i++) Z += e[i] = expf(l[i] * inv_t - mx);
    srt = e;
    std::sort(srt.begin(), srt.end(), [](double a, double b) { return a > b; });
    double t = 0;
    if (p.top_k > 0 && p.top_k < V) t = std::max(t, srt[p.top_k - 1]);
    if (p.top_p > 0 && p.top_p < 1) {
        double acc = 0;
        for (int i = 0; i < V; i++)
            if ((acc += srt[i]) >= p.top_p * Z) {
                t = std::max(t, srt[i]);
                break;
            }
    }
    if (p.min_p > 0) t = std::max(t, (double)p.min_p);
    double kept = 0;
    for (int i = 0; i < V; i++)
        if (e[i] >= t) kept += e[i];
    uint32_t r[4];
    emu_ref_philox(p.seed, p.step, 0, r);
    const double target = (double)((r[0] >> 8) * (1.0f / 16777216.0f)) * kept;
    double acc = 0;
    for (int i = 0; i < V; i++)
        if (e[i] >= t && (acc += e[i]) > target) return std::min(acc - target, target - (acc - e[i])) / kept;
    return 0;
}

static int run_case(int V, int R, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::vector<float> logits((size_t)R * V + 8, 0.0f);
    std::vector<sample_params> prm(R);
    for (int r = 0; r < R; r++) {
        const float sc = 1.0f + (float)(r % 4);
        for (int i = 0; i < V; i++) logits[(size_t)r * V + i] = gauss(rng) * sc;
        sample_params &p = prm[r];
        memset(&p, 0, sizeof p);
        p.temperature = r % 6 == 0 ? 0.0f : 0.3f + 0.2f * (float)(r % 5);
        p.top_p = r % 3 == 0 ? 1.0f : 0.5f + 0.1f * (float)(r % 5);
        p.top_k = r % 4 == 1 ? 0 : 1 + (int)(rng() % 200);
        p.min_p = r % 5 == 2 ? 0.05f : 0.0f;
        p.repetition = r % 2 ? 1.3f : 1.0f;
        p.presence = r % 3 == 1 ? 0.5f : 0.0f;
        p.frequency = r % 3 == 2 ? 0.25f : 0.0f;
        p.seed = rng();
        p.step = (u64)r * 7;
    }
    // a greedy tie (the lower index wins); a sampled row whose every logit is -inf (not finite: argmax, token 0)
    logits[(size_t)6 * V + 77] = logits[(size_t)6 * V + 78] = 1e4f;
    for (int i = 0; i < V; i++) logits[(size_t)7 * V + i] = -INFINITY;
    if (V > 2200) // a greedy tie within one thread's elements (i, i + 1024, ..): the lowest index again
        logits[100] = logits[1124] = logits[2148] = 1e4f;
    // penalty ids: duplicates, one out of range a row; one banned id a row
    std::vector<int> poff(R + 1, 0), ooff(R + 1, 0), boff(R + 1, 0), pids, oids, bids;
    for (int r = 0; r < R; r++) {
        for (int k = 0; k < 12; k++) pids.push_back((int)(rng() % 50));
        pids.push_back(-3);
        for (int k = 0; k < 15; k++) oids.push_back((int)(rng() % 60));
        oids.push_back(V + 2);
        bids.push_back((int)(rng() % V));
        poff[r + 1] = (int)pids.size(), ooff[r + 1] = (int)oids.size(), boff[r + 1] = (int)bids.size();
    }
    // the reference penalties
    std::vector<float> ref(logits);
    std::vector<int32_t> scratch(V, 0);
    for (int r = 0; r < R; r++) {
        float *l = ref.data() + (size_t)r * V;
        emu_ref_penalties(l, V, pids.data() + poff[r], poff[r + 1] - poff[r], oids.data() + ooff[r],
                          ooff[r + 1] - ooff[r], prm[r].repetition, prm[r].presence, prm[r].frequency, scratch.data());
        for (int i = boff[r]; i < boff[r + 1]; i++) l[bids[i]] = -INFINITY;
    }
    std::vector<int> counts((size_t)R * V, 0);
    PenArgs pa{logits.data(), V, prm.data(), pids.data(), poff.data(), oids.data(), ooff.data(), bids.data(),
               boff.data(), counts.data()};
    emu::launch(emu_dim3{(unsigned)R, 1, 1}, 1024, 0, 0, body_pen, &pa);
    int pen_bad = 0, cnt_bad = 0;
    for (size_t i = 0; i < (size_t)R * V; i++) pen_bad += memcmp(&logits[i], &ref[i], 4) != 0;
    for (int c : counts) cnt_bad += c != 0;
    const bool pen_ok = !pen_bad && !cnt_bad;
    printf("%s sample_penalties V %d, %d rows: %d logits differ from the CPU's, %d counts left set\n",
           pen_ok ? "ok  " : "FAIL", V, R, pen_bad, cnt_bad);

    // sampling, on the CPU reference's penalised logits; twice, in two block orders
    std::vector<int> tok0;
    int failures = !pen_ok;
    for (int pass = 0; pass < 2; pass++) {
        std::vector<int> tok(R + 1, -7);
        std::vector<float> lp(R + 1, 1234.5f), ws((size_t)R * V + 8, NAN);
        SampleArgs sa{tok.data(), lp.data(), ref.data(), V, prm.data(), ws.data()};
        emu::block_order = pass ? 4242 : 0;
        emu::launch(emu_dim3{(unsigned)R, 1, 1}, 1024, 0, 0, body_sample, &sa);
        emu::block_order = 0;
        int bad = 0, near = 0;
        for (int r = 0; r < R; r++) {
            const float *l = ref.data() + (size_t)r * V;
            const int want = emu_ref_sample(l, V, prm[r].temperature, prm[r].top_p, prm[r].top_k, prm[r].min_p,
                                            prm[r].seed, prm[r].step);
            bool ok = tok[r] == want;
            if (!ok) {
                const double m = margin_of(l, V, prm[r]);
                const bool greedy = prm[r].temperature <= 0 || !std::isfinite(*std::max_element(l, l + V));
                ok = !greedy && m < 1e-5 && near++ == 0;
            }
            // log_softmax at temperature 1 (a row of -inf: NaN on both sides)
            double mx = -INFINITY, s = 0;
            for (int i = 0; i < V; i++) mx = std::max(mx, (double)l[i]);
            for (int i = 0; i < V; i++) s += std::isfinite(mx) ? exp((double)l[i] - mx) : 0.0;
            const int t = tok[r] >= 0 && tok[r] < V ? tok[r] : 0;
            const double elp = std::isfinite(mx) ? l[t] - mx - log(s) : NAN;
            const bool lp_ok = std::isnan(elp) ? std::isnan(lp[r]) : fabs(lp[r] - elp) <= 2e-6 * (1.0 + fabs(elp));
            if ((!ok || !lp_ok) && bad++ < 5)
                fprintf(stderr, "  V %d row %d (T %.2f k %d p %.2f min-p %.2f): token %d logprob %.8g, CPU %d, %.8g\n",
                        V, r, prm[r].temperature, prm[r].top_k, prm[r].top_p, prm[r].min_p, tok[r], lp[r], want, elp);
        }
        const int stray = tok[R] != -7 || lp[R] != 1234.5f;
        if (pass == 0) tok0 = tok;
        else bad += !std::equal(tok0.begin(), tok0.end(), tok.begin());
        const bool ok = !bad && !stray;
        failures += !ok;
        printf("%s sample V %d, %d rows%s: %d wrong, %d within 1e-5 of a boundary, %d stray\n", ok ? "ok  " : "FAIL", V,
               R, pass ? " (blocks shuffled)" : "", bad, near, stray);
    }
    return failures;
}

int main() {
    int failures = 0;
    failures += run_case(1000, 24, 11);
    failures += run_case(1003, 24, 12);
    failures += run_case(5000, 12, 13);
    return failures ? 1 : 0;
}
