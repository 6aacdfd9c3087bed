// test_emu_sample.cc -- kernel_src/sample_argmax.cu (greedy sampling) under the CPU emulation of
// tests/emu/cuda_emu.h: kiln_sample_argmax_split, the engine's default (a 256-thread block a 4096-logit
// chunk, the block that arrives last on the row's counter merging the chunks' records), and
// kiln_sample_argmax with CL = 1 (one 1024-thread block a row). Against a double-precision reference on the
// same fp32 logits: the token is the argmax with the lowest index among equal maxima, NaNs never chosen,
// token 0 for a row with nothing comparable; the logprob log_softmax(l)[token] within fp32 rounding (NaN
// when a logit is, as the CPU sampler's). Rows:
// Llama-3's and Llama-2's vocabularies, a V not a multiple of 4 (scalar loads), ties across chunks, a max in
// the last partial chunk, -inf entries, a row all NaN, a row all -inf but one. The split kernel runs with its
// blocks in grid order, reversed and in two shuffles (the last to arrive differs): the same bits each time,
// and every counter back at 0. Exit 0 when every case passes.
#include "kiln_common.cuh"
#include SAMPLE_ARGMAX_EMU_SRC
#include <cmath>
#include <random>
#include <vector>

struct Args {
    int *tokens;
    float *logprobs;
    const float *logits;
    int V;
    sa_rec *part;
    int *counters;
};
static void body_split(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_sample_argmax_split(a->tokens, a->logprobs, a->logits, a->V, a->part, a->counters);
}
static void body_block(void *p) {
    Args *a = static_cast<Args *>(p);
    kiln_sample_argmax(a->tokens, a->logprobs, a->logits, a->V);
}

// row r of a case: V logits, the kind of row
static void fill(std::vector<float> &l, int V, int kind, std::mt19937 &rng) {
    std::normal_distribution<float> n(0.0f, 3.0f);
    for (int i = 0; i < V; i++) l[i] = n(rng);
    switch (kind) {
    case 1: // a tie of the max: three equal maxima in different chunks, the lowest index must win
        l[V - 3] = l[V / 2 + 5] = l[4097] = 50.0f;
        break;
    case 2: // the max in the last (partial) chunk, -inf entries
        for (int i = 0; i < V; i += 7) l[i] = -INFINITY;
        l[V - 1] = 40.0f;
        break;
    case 3: // all NaN: token 0
        for (int i = 0; i < V; i++) l[i] = NAN;
        break;
    case 4: // all -inf but one, and NaNs
        for (int i = 0; i < V; i++) l[i] = i % 5 ? -INFINITY : NAN;
        l[V / 3] = -2.0f;
        break;
    default: break;
    }
}

int main() {
    const int Vs[] = {128256, 32000, 4097 * 3 + 2};
    int failures = 0;
    for (int V : Vs) {
        const int rows = 5, chunks = (V + 4095) / 4096;
        std::mt19937 rng(7 + V);
        std::vector<float> logits((size_t)rows * V + 4);
        std::vector<float> row(V);
        for (int r = 0; r < rows; r++) {
            fill(row, V, r, rng);
            std::copy(row.begin(), row.end(), logits.begin() + (size_t)r * V);
        }
        // the reference
        std::vector<int> etok(rows);
        std::vector<double> elp(rows);
        for (int r = 0; r < rows; r++) {
            const float *l = logits.data() + (size_t)r * V;
            int t = -1;
            for (int i = 0; i < V; i++)
                if (!std::isnan(l[i]) && (t < 0 || l[i] > l[t])) t = i;
            etok[r] = t < 0 ? 0 : t;
            // (log_softmax: NaN when any logit is, as kiln_sampler_logprobs and torch give)
            double m = -INFINITY, s = 0.0;
            bool nan = false;
            for (int i = 0; i < V; i++)
                if (std::isnan(l[i])) nan = true;
                else m = std::max(m, (double)l[i]);
            for (int i = 0; i < V; i++)
                if (!std::isnan(l[i]) && l[i] != -INFINITY) s += exp((double)l[i] - m);
            elp[r] = nan ? NAN : (double)l[etok[r]] - m - log(s);
        }
        std::vector<int> tok0;
        std::vector<float> lp0;
        for (int form = 0; form < 5; form++) { // split in 4 block orders, then one block a row
            std::vector<int> tok(rows + 1, -7), cnt(rows + 1, 0);
            std::vector<float> lp(rows + 1, 1234.5f);
            std::vector<sa_rec> part((size_t)rows * chunks);
            Args a{tok.data(), lp.data(), logits.data(), V, part.data(), cnt.data()};
            const unsigned long long orders[] = {0, 1, 12345, 987654321};
            if (form < 4) {
                emu::block_order = orders[form];
                emu::launch(emu_dim3{(unsigned)chunks, (unsigned)rows, 1}, 256, 0, 0, body_split, &a);
                emu::block_order = 0;
            } else {
                emu::launch(emu_dim3{1, (unsigned)rows, 1}, 1024, 0, 0, body_block, &a);
            }
            int bad = 0;
            for (int r = 0; r < rows; r++) {
                const double tol = 1e-5 * (1.0 + fabs(elp[r]));
                const bool ok = tok[r] == etok[r] && (std::isnan(elp[r]) ? std::isnan(lp[r]) : fabs(lp[r] - elp[r]) <= tol);
                if (!ok && bad++ < 5)
                    fprintf(stderr, "  V %d row %d: token %d logprob %.9g, reference %d %.9g\n", V, r, tok[r], lp[r], etok[r],
                            elp[r]);
            }
            int stray = tok[rows] != -7 || lp[rows] != 1234.5f;
            for (int r = 0; r <= rows; r++) stray += cnt[r] != 0; // counters back at 0
            if (form == 0) tok0 = tok, lp0 = lp;
            else if (form < 4)
                for (int r = 0; r < rows; r++)
                    bad += tok[r] != tok0[r] || memcmp(&lp[r], &lp0[r], 4) != 0; // bit for bit in any order
            const bool ok = !bad && !stray;
            failures += !ok;
            printf("%s sample_argmax %s V %d: %d wrong, %d stray\n", ok ? "ok  " : "FAIL",
                   form < 4 ? (form == 0 ? "split, grid order" : form == 1 ? "split, reversed" : "split, shuffled") : "one block a row",
                   V, bad, stray);
        }
    }
    return failures ? 1 : 0;
}
