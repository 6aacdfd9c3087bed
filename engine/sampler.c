/*
 * sampler.c -- CPU reference sampling (semantics in sampler.h).
 * Thread-safety: pure functions over caller buffers.
 */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

void kiln_sampler_apply_penalties(float *logits, int V, const int32_t *prompt, int n_prompt,
                                  const int32_t *output, int n_output, float repetition, float presence,
                                  float frequency, int32_t *scratch) {
    /* scratch[V] must be all zero on entry; it is all zero again on return.
     * Low 28 bits: output count; bit 28: repetition applied; bit 29:
     * presence/frequency applied. */
    enum { REP = 1 << 28, PF = 1 << 29, COUNT = (1 << 28) - 1 };
    bool rep = repetition != 1.0f && repetition > 0, pf = presence != 0.0f || frequency != 0.0f;
    if (!rep && !pf) return;
    for (int i = 0; i < n_output; i++)
        if (output[i] >= 0 && output[i] < V && (scratch[output[i]] & COUNT) < COUNT) scratch[output[i]]++;
    if (rep) {
        for (int pass = 0; pass < 2; pass++) {
            const int32_t *ids = pass ? output : prompt;
            int n = pass ? n_output : n_prompt;
            for (int i = 0; i < n; i++) {
                int32_t t = ids[i];
                if (t < 0 || t >= V || (scratch[t] & REP)) continue;
                scratch[t] |= REP;
                logits[t] = logits[t] > 0 ? logits[t] / repetition : logits[t] * repetition;
            }
        }
    }
    if (pf) {
        for (int i = 0; i < n_output; i++) {
            int32_t t = output[i];
            if (t < 0 || t >= V || (scratch[t] & PF)) continue;
            scratch[t] |= PF;
            logits[t] -= frequency * (float)(scratch[t] & COUNT) + presence;
        }
    }
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] >= 0 && prompt[i] < V) scratch[prompt[i]] = 0;
    for (int i = 0; i < n_output; i++)
        if (output[i] >= 0 && output[i] < V) scratch[output[i]] = 0;
}

float kiln_sampler_uniform(uint64_t seed, uint64_t step) {
    uint32_t r[4];
    kiln_philox4x32(seed, step, 0, r);
    return kiln_u32_to_unit(r[0]);
}

size_t kiln_sampler_work_bytes(int V) { return (size_t)V * (2 * sizeof(float) + sizeof(int32_t)); }

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* k-th largest (1-based) of v[n] by quickselect on a scratch copy. */
static float kth_largest(float *v, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] > pivot) i++;
            while (v[j] < pivot) j--;
            if (i <= j) {
                float t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return v[want];
    }
    return v[want];
}

/* probs[V] = softmax(logits / T); returns the keep threshold (p >= thresh
 * is kept) from top-k, top-p and min-p, all on the unfiltered probs. */
static float filtered_probs(const float *logits, int V, const kiln_sample_row *p, int32_t best, float *probs,
                            float *scratch) {
    float inv_t = 1.0f / p->temperature, mx = logits[best] * inv_t;
    double sum = 0;
    for (int i = 0; i < V; i++) {
        probs[i] = expf(logits[i] * inv_t - mx);
        sum += probs[i];
    }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < V; i++) probs[i] *= inv;
    float thresh = 0.0f;
    if (p->top_k > 0 && p->top_k < V) {
        memcpy(scratch, probs, sizeof(float) * (size_t)V);
        float t = kth_largest(scratch, V, p->top_k);
        if (t > thresh) thresh = t;
    }
    if (p->top_p > 0.0f && p->top_p < 1.0f) {
        memcpy(scratch, probs, sizeof(float) * (size_t)V);
        qsort(scratch, (size_t)V, sizeof(float), cmp_desc);
        double cum = 0;
        float t = scratch[V - 1];
        for (int i = 0; i < V; i++) {
            cum += scratch[i];
            if (cum >= p->top_p) {
                t = scratch[i];
                break;
            }
        }
        if (t > thresh) thresh = t;
    }
    if (p->min_p > 0.0f) {
        float t = p->min_p * probs[best];
        if (t > thresh) thresh = t;
    }
    return thresh;
}

static int32_t argmax(const float *logits, int V) {
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Inverse CDF over the kept tokens (minus `exclude`) in vocabulary order. */
static int32_t pick(const float *probs, int V, float thresh, int32_t exclude, float u, int32_t fallback) {
    double total = 0;
    for (int i = 0; i < V; i++)
        if (probs[i] >= thresh && i != exclude) total += probs[i];
    double target = (double)u * total, cum = 0;
    int32_t last = fallback;
    for (int i = 0; i < V; i++) {
        if (probs[i] < thresh || i == exclude) continue;
        cum += probs[i];
        last = i;
        if (cum > target) return i;
    }
    return last;
}

int32_t kiln_sampler_sample(float *logits, int V, const kiln_sample_row *p, void *work) {
    int32_t best = argmax(logits, V);
    if (p->temperature <= 0.0f || !isfinite(logits[best])) return best;
    float *probs = work, *scratch = probs + V;
    float thresh = filtered_probs(logits, V, p, best, probs, scratch);
    return pick(probs, V, thresh, -1, kiln_sampler_uniform(p->seed, p->step), best);
}

int32_t kiln_sampler_verify(float *logits, int V, const kiln_sample_row *p, int32_t draft, bool *accepted,
                            void *work) {
    int32_t best = argmax(logits, V);
    if (p->temperature <= 0.0f || !isfinite(logits[best])) {
        *accepted = best == draft;
        return best;
    }
    float *probs = work, *scratch = probs + V;
    float thresh = filtered_probs(logits, V, p, best, probs, scratch);
    double kept = 0;
    for (int i = 0; i < V; i++)
        if (probs[i] >= thresh) kept += probs[i];
    double pd = (draft >= 0 && draft < V && probs[draft] >= thresh) ? probs[draft] / kept : 0.0;
    uint32_t r[4];
    kiln_philox4x32(p->seed, p->step, 1, r);
    if ((double)kiln_u32_to_unit(r[0]) < pd) {
        *accepted = true;
        return draft;
    }
    *accepted = false;
    return pick(probs, V, thresh, draft, kiln_sampler_uniform(p->seed, p->step), best);
}

float kiln_sampler_logprobs(const float *logits, int V, int32_t id, int n_top, kiln_logprob *top) {
    float mx = -INFINITY;
    for (int i = 0; i < V; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - mx);
    float lse = mx + (float)log(sum);
    for (int k = 0; k < n_top; k++) {
        top[k].id = -1;
        top[k].logprob = -INFINITY;
    }
    for (int i = 0; i < V && n_top > 0; i++) {
        float lp = logits[i] - lse;
        if (lp <= top[n_top - 1].logprob && top[n_top - 1].id >= 0) continue;
        int k = n_top - 1;
        while (k > 0 && (top[k - 1].id < 0 || lp > top[k - 1].logprob)) {
            top[k] = top[k - 1];
            k--;
        }
        top[k].id = i;
        top[k].logprob = lp;
    }
    return (id >= 0 && id < V) ? logits[id] - lse : -INFINITY;
}
