/*
 * sampler.h -- token selection from one row of logits (CPU reference; the
 * GPU sampling kernel implements the same semantics).
 *
 * Semantics, in order:
 *  1. penalties (kiln_sampler_apply_penalties): repetition penalty over
 *     prompt + output tokens (HF: logit > 0 ? logit / p : logit * p);
 *     presence and frequency penalties over output tokens only (OpenAI:
 *     logit -= presence * (count > 0) + frequency * count).
 *  2. banned tokens (no_repeat_ngram, min_tokens' EOS/stop ids): -inf.
 *  3. temperature == 0: greedy argmax (lowest index wins ties).
 *  4. else probs = softmax(logits / temperature) (fp32, max subtracted).
 *  5. keep set: p >= kth largest prob (top_k > 0), p >= t_p where t_p is the
 *     smallest prob in the minimal prefix of probs sorted descending whose
 *     sum reaches top_p (top_p < 1), p >= min_p * max_p (min_p > 0). All
 *     three thresholds are on the same (unfiltered) probs; ties at a
 *     threshold are kept.
 *  6. u = uniform [0,1) from Philox(key = seed, counter = (step, 0)), word 0
 *     (kiln_u32_to_unit); the chosen token is the first index i, in
 *     vocabulary order over the kept set, where cumsum(p_kept)[i] > u * sum.
 *     If rounding leaves none, the last kept index.
 * Logprobs reported are log_softmax of the logits after step 2 (before
 * temperature), like vLLM's processed logprobs.
 *
 * Thread-safety: pure functions over caller buffers.
 */
#ifndef KILN_SAMPLER_H
#define KILN_SAMPLER_H

#include "kiln_base.h"

typedef struct kiln_sample_row {
    float temperature;
    float top_p;
    int top_k;
    float min_p;
    uint64_t seed;
    uint64_t step; /* index of the token being generated (0 for the first) */
} kiln_sample_row;

void kiln_sampler_apply_penalties(float *logits, int V, const int32_t *prompt, int n_prompt,
                                  const int32_t *output, int n_output, float repetition, float presence,
                                  float frequency, int32_t *scratch /* [V], zero on entry and exit */);

/* Pick a token from logits[V] (modified in place as scratch). work must
 * hold 2 * V floats + V int32 (kiln_sampler_work_bytes). */
int32_t kiln_sampler_sample(float *logits, int V, const kiln_sample_row *p, void *work);
size_t kiln_sampler_work_bytes(int V);

/* Speculative verification of a proposed token (a point-mass proposal, as
 * the n-gram and greedy draft drafters make): greedy accepts iff draft is
 * the argmax; sampling accepts with probability p(draft) under the filtered
 * distribution of step 5 (uniform from Philox(seed, (step, 1))), else
 * samples from that distribution with draft removed and renormalised. The
 * emitted token is distributed exactly as kiln_sampler_sample's. Returns
 * the token to emit; *accepted tells whether it is the draft. */
int32_t kiln_sampler_verify(float *logits, int V, const kiln_sample_row *p, int32_t draft, bool *accepted,
                            void *work);

/* log_softmax(logits)[id] and the top-n (id, logprob) pairs, descending. */
float kiln_sampler_logprobs(const float *logits, int V, int32_t id, int n_top, kiln_logprob *top);

/* Uniform in [0,1) for (seed, step): Philox word 0. */
float kiln_sampler_uniform(uint64_t seed, uint64_t step);

#endif
