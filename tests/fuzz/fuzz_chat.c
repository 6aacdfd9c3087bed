/*
 * fuzz_chat.c -- libFuzzer target: arbitrary bytes as a chat template
 * (and, after a NUL byte, as the messages JSON). Parsing and rendering must
 * return a status, never crash, hang past the sandbox limits or leak.
 * Built by scripts/fuzz.sh (KILN_FUZZ_MAIN); replayed by
 * tests/test_tokenizer_fuzz_regress.c.
 */
#include "kiln.h"

#include <stdlib.h>
#include <string.h>

int kiln_fuzz_chat_one(const uint8_t *data, size_t size) {
    char *src = malloc(size + 1);
    memcpy(src, data, size);
    src[size] = 0;
    const char *msgs = "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9\"},"
                       " {\"role\": \"assistant\", \"content\": \"Yo\", \"tool_calls\": [{\"function\": {\"name\": \"f\","
                       " \"arguments\": {\"x\": 1}}}]}, {\"role\": \"tool\", \"content\": \"42\"}]";
    size_t nul = strlen(src);
    if (nul + 1 < size) msgs = src + nul + 1; /* template NUL messages */
    kiln_chat_template *t = NULL;
    if (kiln_chat_template_from_string(src, "fuzz", &t) == KILN_OK) {
        char *out = NULL;
        for (int agp = 0; agp < 2; agp++) {
            if (kiln_chat_render(t, msgs, agp, "{\"bos_token\": \"<s>\", \"tools\": [{\"name\": \"f\"}], \"n\": 3}",
                                 &out) == KILN_OK)
                kiln_free(out);
            out = NULL;
        }
        kiln_chat_template_destroy(t);
    }
    free(src);
    return 0;
}

#ifdef KILN_FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return kiln_fuzz_chat_one(data, size); }
#endif
