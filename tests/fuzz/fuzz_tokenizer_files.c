/*
 * fuzz_tokenizer_files.c -- libFuzzer target: arbitrary bytes as a
 * tokenizer file (tokenizer.json, tiktoken, SentencePiece protobuf, chosen
 * by the first byte). Loading must fail cleanly or give a tokenizer that
 * encodes and decodes a few strings without crashing.
 * Built by scripts/fuzz.sh (KILN_FUZZ_MAIN); replayed by
 * tests/test_tokenizer_fuzz_regress.c.
 */
#include "kiln.h"
#include "tokenizer.h"

#include <stdlib.h>

int kiln_fuzz_tokenizer_files_one(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *buf = malloc(size); /* the loaders take NUL-terminated data */
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    kiln_tokenizer *t = NULL;
    kiln_status st;
    switch (data[0] % 3) {
    case 0: st = kiln_tok_load_hf_json(buf, size - 1, "fuzz.json", &t); break;
    case 1: st = kiln_tok_load_tiktoken(buf, size - 1, "fuzz.tiktoken", NULL, &t); break;
    default: st = kiln_tok_load_spm(buf, size - 1, "fuzz.model", &t); break;
    }
    if (st == KILN_OK) {
        static const char *const texts[] = {"Hello world", " a  b\n", "<|x|><s>", "\xe4\xb8\xad\xff", ""};
        for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
            int32_t *ids = NULL;
            size_t n = 0;
            kiln_encode_options o = {true, true};
            if (kiln_tokenize(t, texts[i], strlen(texts[i]), &o, &ids, &n) == KILN_OK) {
                char *s = NULL;
                size_t l;
                if (kiln_detokenize(t, ids, n, i & 1, &s, &l) == KILN_OK) kiln_free(s);
                kiln_free(ids);
            }
        }
        int32_t v = kiln_tokenizer_vocab_size(t);
        int32_t probe[4] = {0, v - 1, v / 2, 1 % v};
        char *s = NULL;
        size_t l;
        if (kiln_detokenize(t, probe, 4, false, &s, &l) == KILN_OK) kiln_free(s);
        kiln_tokenizer_destroy(t);
    }
    free(buf);
    return 0;
}

#ifdef KILN_FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return kiln_fuzz_tokenizer_files_one(data, size); }
#endif
