/* sampler_ref.c -- the CPU sampler (engine/sampler.c) for tests/emu/test_emu_sampler.cc, behind plain C
 * types (kiln's headers are C11, the emulation tests C++). */
#include "sampler.h"

#include <stdlib.h>

void emu_ref_penalties(float *logits, int V, const int32_t *prompt, int n_prompt, const int32_t *output, int n_output,
                       float repetition, float presence, float frequency, int32_t *scratch) {
    kiln_sampler_apply_penalties(logits, V, prompt, n_prompt, output, n_output, repetition, presence, frequency,
                                 scratch);
}

int32_t emu_ref_sample(const float *logits, int V, float temperature, float top_p, int top_k, float min_p,
                       uint64_t seed, uint64_t step) {
    kiln_sample_row row = {temperature, top_p, top_k, min_p, seed, step};
    float *l = malloc(sizeof(float) * (size_t)V);
    void *work = malloc(kiln_sampler_work_bytes(V));
    int32_t t = -1;
    if (l && work) {
        memcpy(l, logits, sizeof(float) * (size_t)V);
        t = kiln_sampler_sample(l, V, &row, work);
    }
    free(l), free(work);
    return t;
}

void emu_ref_philox(uint64_t key, uint64_t hi, uint64_t lo, uint32_t out[4]) { kiln_philox4x32(key, hi, lo, out); }
