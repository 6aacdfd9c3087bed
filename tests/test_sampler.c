// label: unit
/* test_sampler.c -- sampling semantics: greedy, thresholds, penalties,
 * reproducible seeds, and a chi-square test that sampled frequencies follow
 * the target distribution. */
#include "sampler.h"
#include "kt.h"

#include <math.h>
#include <stdlib.h>

KT_TEST(test_greedy_and_ties) {
    float l[5] = {1, 3, 3, 2, -1};
    kiln_sample_row p = {0.0f, 1.0f, 0, 0.0f, 1, 0};
    char work[256];
    KT_CHECK(kiln_sampler_sample(l, 5, &p, work) == 1); /* lowest index of the tie */
}

/* sample many times and count */
static void histogram(const float *logits, int V, kiln_sample_row p, int n, int *counts) {
    float *row = malloc(sizeof(float) * (size_t)V);
    void *work = malloc(kiln_sampler_work_bytes(V));
    for (int i = 0; i < V; i++) counts[i] = 0;
    for (int s = 0; s < n; s++) {
        memcpy(row, logits, sizeof(float) * (size_t)V);
        p.step = (uint64_t)s;
        counts[kiln_sampler_sample(row, V, &p, work)]++;
    }
    free(row);
    free(work);
}

KT_TEST(test_distribution_chi_square) {
    enum { V = 8, N = 40000 };
    float logits[V] = {0.5f, 1.5f, -0.3f, 2.0f, 0.0f, 1.0f, -1.0f, 0.7f};
    kiln_sample_row p = {0.8f, 1.0f, 0, 0.0f, 12345, 0};
    int counts[V];
    histogram(logits, V, p, N, counts);
    double mx = -1e9, z = 0, probs[V];
    for (int i = 0; i < V; i++) mx = fmax(mx, logits[i] / 0.8);
    for (int i = 0; i < V; i++) z += exp(logits[i] / 0.8 - mx);
    double chi = 0;
    for (int i = 0; i < V; i++) {
        probs[i] = exp(logits[i] / 0.8 - mx) / z;
        double e = probs[i] * N;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    /* 7 degrees of freedom: p = 0.001 critical value 24.32 */
    KT_CHECKF(chi < 24.32, "chi-square %.2f", chi);
}

KT_TEST(test_top_k_top_p_min_p) {
    enum { V = 6, N = 20000 };
    float logits[V] = {3.0f, 2.5f, 2.0f, 0.0f, -1.0f, -2.0f};
    int counts[V];
    kiln_sample_row p = {1.0f, 1.0f, 2, 0.0f, 7, 0};
    histogram(logits, V, p, N, counts);
    KT_CHECK(counts[0] > 0 && counts[1] > 0 && counts[2] == 0 && counts[3] == 0);
    /* probs ~ .488 .296 .180 .024 .009 .003: top_p 0.75 keeps the first two (.784 >= .75) */
    p = (kiln_sample_row){1.0f, 0.75f, 0, 0.0f, 7, 0};
    histogram(logits, V, p, N, counts);
    KT_CHECK(counts[0] > 0 && counts[1] > 0 && counts[2] == 0);
    /* min_p 0.3: keep p >= 0.3 * 0.488 */
    p = (kiln_sample_row){1.0f, 1.0f, 0, 0.3f, 7, 0};
    histogram(logits, V, p, N, counts);
    KT_CHECK(counts[0] > 0 && counts[1] > 0 && counts[2] > 0 && counts[3] == 0);
    /* same seed and step: same token */
    float a[V], b[V];
    char work[1024];
    memcpy(a, logits, sizeof a);
    memcpy(b, logits, sizeof b);
    p = (kiln_sample_row){1.0f, 1.0f, 0, 0.0f, 99, 3};
    KT_CHECK(kiln_sampler_sample(a, V, &p, work) == kiln_sampler_sample(b, V, &p, work));
}

KT_TEST(test_penalties) {
    float l[6] = {1.0f, -1.0f, 2.0f, 0.5f, 0.0f, 3.0f};
    int32_t prompt[2] = {0, 1}, out[4] = {2, 2, 3, 0};
    int32_t scratch[6] = {0};
    kiln_sampler_apply_penalties(l, 6, prompt, 2, out, 4, 2.0f, 0.5f, 0.25f, scratch);
    /* token 0: rep (1/2=0.5) then presence .5 + freq .25 -> -0.25 */
    KT_CHECK(fabsf(l[0] - (-0.25f)) < 1e-6f);
    KT_CHECK(fabsf(l[1] - (-2.0f)) < 1e-6f);            /* prompt only: rep */
    KT_CHECK(fabsf(l[2] - (1.0f - 0.5f - 0.5f)) < 1e-6f); /* rep, presence, 2 x freq */
    KT_CHECK(fabsf(l[3] - (0.25f - 0.5f - 0.25f)) < 1e-6f);
    KT_CHECK(l[4] == 0.0f && l[5] == 3.0f);
    for (int i = 0; i < 6; i++) KT_CHECK(scratch[i] == 0);
}

KT_TEST(test_logprobs) {
    float l[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    kiln_logprob top[2];
    float lp = kiln_sampler_logprobs(l, 4, 2, 2, top);
    double z = log(exp(0.0) + exp(1.0) + exp(2.0) + exp(3.0));
    KT_CHECK(fabs(lp - (2.0 - z)) < 1e-5);
    KT_CHECK(top[0].id == 3 && top[1].id == 2 && fabs(top[0].logprob - (3.0 - z)) < 1e-5);
}

/* Speculative verification with a point-mass proposal must leave the
 * sampled distribution exactly the target's, whatever the draft. */
KT_TEST(test_verify_preserves_distribution) {
    enum { V = 6, N = 60000 };
    float logits[V] = {1.2f, 0.4f, -0.5f, 2.0f, 0.0f, -2.0f};
    int drafts[4] = {3, 1, 5, 2};
    for (int top_k = 0; top_k <= 4; top_k += 4) {
        kiln_sample_row p = {1.0f, 1.0f, top_k, 0.0f, 2024, 0};
        /* target: the plain sampler's histogram is the reference
         * distribution; compute it analytically */
        double mx = 2.0, z = 0, probs[V];
        for (int i = 0; i < V; i++) z += exp(logits[i] - mx);
        for (int i = 0; i < V; i++) probs[i] = exp(logits[i] - mx) / z;
        if (top_k == 4) { /* drop the two smallest (-2.0 and -0.5) */
            double kept = 0;
            for (int i = 0; i < V; i++) if (i == 2 || i == 5) probs[i] = 0; else kept += probs[i];
            for (int i = 0; i < V; i++) probs[i] /= kept;
        }
        for (int d = 0; d < 4; d++) {
            int counts[V] = {0}, acc = 0;
            float row[V];
            char work[1024];
            for (int s = 0; s < N; s++) {
                memcpy(row, logits, sizeof row);
                p.step = (uint64_t)s;
                bool ok;
                int32_t t = kiln_sampler_verify(row, V, &p, drafts[d], &ok, work);
                counts[t]++;
                acc += ok;
                if (ok && t != drafts[d]) KT_CHECK(false);
            }
            double chi = 0;
            int dof = -1;
            for (int i = 0; i < V; i++) {
                if (probs[i] == 0) {
                    KT_CHECKF(counts[i] == 0, "filtered token %d sampled", i);
                    continue;
                }
                double e = probs[i] * N;
                chi += (counts[i] - e) * (counts[i] - e) / e;
                dof++;
            }
            /* p = 0.001 critical values: 5 dof 20.52, 3 dof 16.27 */
            KT_CHECKF(chi < (dof == 5 ? 20.52 : 16.27), "top_k %d draft %d: chi-square %.2f (%d dof)", top_k,
                      drafts[d], chi, dof);
            /* acceptance rate is the draft's target probability */
            KT_CHECKF(fabs((double)acc / N - probs[drafts[d]]) < 0.01, "acceptance %.4f vs p %.4f",
                      (double)acc / N, probs[drafts[d]]);
        }
    }
    /* greedy: accept iff the draft is the argmax */
    float row[V];
    memcpy(row, logits, sizeof row);
    kiln_sample_row g = {0.0f, 1.0f, 0, 0.0f, 1, 0};
    bool ok;
    char work[1024];
    KT_CHECK(kiln_sampler_verify(row, V, &g, 3, &ok, work) == 3 && ok);
    KT_CHECK(kiln_sampler_verify(row, V, &g, 0, &ok, work) == 3 && !ok);
}

KT_MAIN(KT_CASE(test_verify_preserves_distribution), KT_CASE(test_greedy_and_ties), KT_CASE(test_distribution_chi_square), KT_CASE(test_top_k_top_p_min_p),
        KT_CASE(test_penalties), KT_CASE(test_logprobs))
