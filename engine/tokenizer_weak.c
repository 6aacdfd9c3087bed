/*
 * tokenizer_weak.c -- TEMPORARY weak definitions of the tokenizer API until
 * the tokenizer module (issue 4) is merged; the real definitions override
 * these. Delete this file at that merge.
 */
#include "kiln_base.h"

#define WEAK __attribute__((weak))

WEAK kiln_status kiln_tokenizer_load(const char *path, kiln_tokenizer **out) {
    (void)out;
    return KILN_FAIL(KILN_ERR_UNSUPPORTED, "tokenizers are not available in this build yet (%s)", path);
}
WEAK void kiln_tokenizer_destroy(kiln_tokenizer *tok) { (void)tok; }
WEAK kiln_status kiln_tokenize(const kiln_tokenizer *tok, const char *text, size_t len, const kiln_encode_options *o,
                               int32_t **ids, size_t *n) {
    (void)tok, (void)text, (void)len, (void)o, (void)ids, (void)n;
    return KILN_FAIL(KILN_ERR_UNSUPPORTED, "tokenizers are not available in this build yet");
}
WEAK int32_t kiln_tokenizer_eos_id(const kiln_tokenizer *tok) { (void)tok; return -1; }
WEAK kiln_status kiln_chat_template_load(const char *p, kiln_chat_template **out) {
    (void)p, (void)out;
    return KILN_FAIL(KILN_ERR_NOT_FOUND, "no chat template support yet");
}
WEAK void kiln_chat_template_destroy(kiln_chat_template *t) { (void)t; }
WEAK kiln_status kiln_detokenize(const kiln_tokenizer *tok, const int32_t *ids, size_t n_ids, bool skip_special,
                                 char **text, size_t *len) {
    (void)tok, (void)ids, (void)n_ids, (void)skip_special, (void)text, (void)len;
    return KILN_FAIL(KILN_ERR_UNSUPPORTED, "tokenizers are not available in this build yet");
}
WEAK int32_t kiln_tokenizer_vocab_size(const kiln_tokenizer *tok) { (void)tok; return 0; }
WEAK const char *kiln_tokenizer_token_text(const kiln_tokenizer *tok, int32_t id) { (void)tok, (void)id; return NULL; }
WEAK kiln_status kiln_chat_render(const kiln_chat_template *t, const char *messages_json, bool add_generation_prompt,
                                  const char *extra_json, char **out) {
    (void)t, (void)messages_json, (void)add_generation_prompt, (void)extra_json, (void)out;
    return KILN_FAIL(KILN_ERR_UNSUPPORTED, "chat templates are not available in this build yet");
}
