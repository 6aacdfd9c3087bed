/*
 * text_stream.c -- the engine's per-request text stream: an adapter over
 * the tokenizer's streaming detokenizer (engine/tokenizer.h), or nothing
 * when the model has no tokenizer.
 * Ownership: owns its detokenizer and output buffer.
 * Thread-safety: one request, one thread.
 */
#include "engine_internal.h"
#include "tokenizer.h"

kiln_status kiln_text_stream_init(kiln_text_stream *t, const kiln_tokenizer *tok, const int32_t *prompt, int n_prompt,
                                  bool skip_special, const char *const *stops, int n_stops) {
    memset(t, 0, sizeof *t);
    if (!tok) return KILN_OK;
    return kiln_detok_create(tok, prompt, n_prompt > 0 ? (size_t)n_prompt : 0, skip_special, stops, n_stops, &t->d);
}

void kiln_text_stream_push(kiln_text_stream *t, int32_t id, const char **text, size_t *len, bool *stop_hit) {
    *text = NULL;
    *len = 0;
    *stop_hit = false;
    if (!t->d) return;
    t->out.len = 0;
    if (kiln_detok_push(t->d, id, &t->out, stop_hit) != KILN_OK) {
        KILN_WARN("detokenizer: %s", kiln_last_error());
        return;
    }
    *text = t->out.data;
    *len = t->out.len;
}

void kiln_text_stream_finish(kiln_text_stream *t, const char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    if (!t->d) return;
    t->out.len = 0;
    if (kiln_detok_finish(t->d, &t->out) != KILN_OK) {
        KILN_WARN("detokenizer: %s", kiln_last_error());
        return;
    }
    *text = t->out.data;
    *len = t->out.len;
}

void kiln_text_stream_free(kiln_text_stream *t) {
    kiln_detok_destroy(t->d);
    t->d = NULL;
    kiln_buf_free(&t->out);
}
