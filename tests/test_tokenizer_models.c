// label: unit
/*
 * test_tokenizer_models.c -- the tokenizers of the tiny test models in
 * tests/data/models (made by scripts/make_test_models.py with Hugging Face
 * tokenizers 0.23): the golden prompts, greedy texts and chat renderings of
 * tests/data/golden/<model>.text.json (encode, decode, stream, chat template), and
 * encode/decode cases for the Mistral (Metaspace), Qwen2 (NFC, byte-level)
 * and Phi-3 (added tokens) tokenizers whose expected values were produced by
 * tokenizers 0.23.3 (Tokenizer.from_file(...).encode / .decode).
 */
#include "kiln.h"
#include "kt.h"
#include "tokenizer.h"

#include <jansson.h>
#include <stdlib.h>

static const struct { const char *model, *text; int n; int32_t ids[64]; } enc_cases[] = {
    {"mistral-swa", "  two", 4, {329, 330, 324, 316}},
    {"mistral-swa", "</s>[INST] hi [/INST]", 17, {2, 94, 290, 294, 298, 299, 96, 387, 310, 329, 94, 270, 290, 294, 298, 299, 96}},
    {"mistral-swa", "<|im_start|>user\nHi<|im_end|>", 26, {329, 281, 328, 310, 314, 98, 320, 321, 366, 321, 328, 283, 385, 338, 13, 289, 310, 281, 328, 310, 314, 98, 306, 340, 328, 283}},
    {"mistral-swa", "<|user|>\nq<|end|>\n<|assistant|>", 26, {329, 281, 328, 385, 338, 328, 283, 13, 318, 281, 328, 306, 340, 328, 283, 13, 281, 328, 377, 320, 392, 321, 372, 321, 328, 283}},
    {"mistral-swa", "Caf\xc3""\xa9"" na\xc3""\xaf""ve \xe4""\xb8""\xad""\xe6""\x96""\x87"" \xf0""\x9f""\x98""\x80""", 23, {329, 286, 302, 307, 198, 172, 379, 302, 198, 178, 437, 329, 231, 187, 176, 233, 153, 138, 329, 243, 162, 155, 131}},
    {"mistral-swa", "e\xcc""\x81"" vs \xc3""\xa9""", 9, {329, 306, 207, 132, 467, 320, 329, 198, 172}},
    {"mistral-swa", "tabs\tand\nnewlines\r\n", 16, {330, 302, 303, 320, 12, 302, 340, 13, 315, 306, 324, 313, 345, 341, 16, 13}},
    {"mistral-swa", "123456 7.5", 11, {329, 272, 273, 274, 275, 276, 277, 329, 58, 269, 276}},
    {"qwen2-bias", "  two", 3, {220, 256, 499}},
    {"qwen2-bias", "</s>[INST] hi [/INST]", 20, {27, 14, 82, 29, 58, 40, 45, 50, 51, 60, 311, 72, 220, 58, 14, 40, 45, 50, 51, 60}},
    {"qwen2-bias", "<|im_start|>user\nHi<|im_end|>", 7, {510, 309, 264, 198, 39, 72, 511}},
    {"qwen2-bias", "<|user|>\nq<|end|>\n<|assistant|>", 25, {27, 91, 309, 264, 91, 29, 198, 80, 27, 91, 270, 67, 91, 29, 198, 27, 91, 303, 82, 318, 83, 299, 83, 91, 29}},
    {"qwen2-bias", "Caf\xc3""\xa9"" na\xc3""\xaf""ve \xe4""\xb8""\xad""\xe6""\x96""\x87"" \xf0""\x9f""\x98""\x80""", 22, {34, 64, 69, 127, 102, 305, 64, 127, 107, 326, 220, 160, 116, 255, 162, 244, 229, 220, 172, 253, 246, 222}},
    {"qwen2-bias", "e\xcc""\x81"" vs \xc3""\xa9""", 7, {127, 102, 425, 82, 220, 127, 102}},
    {"qwen2-bias", "tabs\tand\nnewlines\r\n", 15, {83, 64, 65, 82, 197, 464, 198, 77, 68, 86, 75, 260, 266, 201, 198}},
    {"qwen2-bias", "123456 7.5", 10, {16, 17, 18, 19, 20, 21, 220, 22, 13, 20}},
    {"phi3", "  two", 5, {329, 329, 330, 324, 316}},
    {"phi3", "</s>[INST] hi [/INST]", 18, {2, 329, 94, 290, 294, 298, 299, 96, 387, 310, 329, 94, 270, 290, 294, 298, 299, 96}},
    {"phi3", "<|im_start|>user\nHi<|im_end|>", 26, {329, 281, 328, 310, 314, 98, 320, 321, 366, 321, 328, 283, 385, 338, 13, 289, 310, 281, 328, 310, 314, 98, 306, 340, 328, 283}},
    {"phi3", "<|user|>\nq<|end|>\n<|assistant|>", 8, {511, 329, 13, 318, 510, 329, 13, 508}},
    {"phi3", "Caf\xc3""\xa9"" na\xc3""\xaf""ve \xe4""\xb8""\xad""\xe6""\x96""\x87"" \xf0""\x9f""\x98""\x80""", 23, {329, 286, 302, 307, 198, 172, 379, 302, 198, 178, 437, 329, 231, 187, 176, 233, 153, 138, 329, 243, 162, 155, 131}},
    {"phi3", "e\xcc""\x81"" vs \xc3""\xa9""", 9, {329, 306, 207, 132, 467, 320, 329, 198, 172}},
    {"phi3", "tabs\tand\nnewlines\r\n", 16, {330, 302, 303, 320, 12, 302, 340, 13, 315, 306, 324, 313, 345, 341, 16, 13}},
    {"phi3", "123456 7.5", 11, {329, 272, 273, 274, 275, 276, 277, 329, 58, 269, 276}},
};
static const struct { const char *model; int n; int32_t ids[16]; const char *text, *text_skip; } dec_cases[] = {
    {"mistral-swa", 9, {476, 462, 194, 189, 487, 190, 96, 457, 310}, "rowul\xef""\xbf""\xbd""\xef""\xbf""\xbd"" from\xef""\xbf""\xbd""\xef""\xbf""\xbd""mali", "rowul\xef""\xbf""\xbd""\xef""\xbf""\xbd"" from\xef""\xbf""\xbd""\xef""\xbf""\xbd""mali"},
    {"mistral-swa", 4, {2, 463, 64, 194}, "</s>ut\xef""\xbf""\xbd""\xef""\xbf""\xbd""", "ut\xef""\xbf""\xbd""\xef""\xbf""\xbd"""},
    {"mistral-swa", 14, {475, 334, 451, 200, 239, 301, 511, 4, 87, 468, 284, 416, 85, 260}, "too i engine\xef""\xbf""\xbd""\xef""\xbf""\xbd""Where\x01""T ro?ickR\"", "too i engine\xef""\xbf""\xbd""\xef""\xbf""\xbd""Where\x01""T ro?ickR\""},
    {"mistral-swa", 7, {235, 2, 2, 68, 218, 2, 40}, "\xef""\xbf""\xbd""</s></s>\xef""\xbf""\xbd""\xef""\xbf""\xbd""</s>%", "\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd"""},
    {"mistral-swa", 14, {276, 344, 89, 318, 340, 15, 419, 120, 137, 252, 103, 11, 61, 476}, "5atVqnd\x0c""un\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""row", "5atVqnd\x0c""un\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""row"},
    {"mistral-swa", 14, {93, 100, 429, 218, 1, 110, 403, 2, 1, 303, 49, 1, 235, 2}, "Zaack\xef""\xbf""\xbd""<s>kt.</s><s>b.<s>\xef""\xbf""\xbd""</s>", "Zaack\xef""\xbf""\xbd""\xef""\xbf""\xbd""t.b\xef""\xbf""\xbd""\xef""\xbf""\xbd"""},
    {"qwen2-bias", 4, {157, 318, 233, 255}, "\xef""\xbf""\xbd""is\xef""\xbf""\xbd""\xef""\xbf""\xbd""", "\xef""\xbf""\xbd""is\xef""\xbf""\xbd""\xef""\xbf""\xbd"""},
    {"qwen2-bias", 13, {84, 397, 431, 1, 1, 1, 38, 233, 111, 1, 231, 26, 191}, "uatererat\"\"\"G\xef""\xbf""\xbd""\xef""\xbf""\xbd""\"\xef""\xbf""\xbd"";\x03""", "uatererat\"\"\"G\xef""\xbf""\xbd""\xef""\xbf""\xbd""\"\xef""\xbf""\xbd"";\x03"""},
    {"qwen2-bias", 3, {370, 141, 461}, " do\xef""\xbf""\xbd""):", " do\xef""\xbf""\xbd""):"},
    {"qwen2-bias", 7, {143, 1, 34, 1, 326, 1, 1}, "\xef""\xbf""\xbd""\"C\"ve\"\"", "\xef""\xbf""\xbd""\"C\"ve\"\""},
    {"qwen2-bias", 7, {86, 484, 79, 427, 30, 511, 14}, "wientp ro?<|im_end|>/", "wientp ro?/"},
    {"qwen2-bias", 11, {391, 73, 2, 2, 451, 30, 14, 2, 1, 76, 2}, " whj## temperat?/#\"m#", " whj## temperat?/#\"m#"},
    {"phi3", 9, {247, 334, 414, 256, 203, 441, 205, 219, 393}, "\xef""\xbf""\xbd"" iex\xef""\xbf""\xbd""\xef""\xbf""\xbd"" turn\xef""\xbf""\xbd""\xef""\xbf""\xbd""ken", "\xef""\xbf""\xbd"" iex\xef""\xbf""\xbd""\xef""\xbf""\xbd"" turn\xef""\xbf""\xbd""\xef""\xbf""\xbd""ken"},
    {"phi3", 5, {110, 1, 1, 2, 143}, "k<s><s></s>\xef""\xbf""\xbd""", "\xef""\xbf""\xbd""\xef""\xbf""\xbd"""},
    {"phi3", 15, {423, 391, 505, 322, 463, 328, 76, 32, 284, 42, 287, 362, 316, 19, 139}, "qu fi 3uut|I\x1d""?'E ino\xef""\xbf""\xbd""\xef""\xbf""\xbd""", "qu fi 3uut|I\x1d""?'E ino\xef""\xbf""\xbd""\xef""\xbf""\xbd"""},
    {"phi3", 8, {465, 124, 2, 111, 2, 262, 21, 1}, "umby</s>l</s>'\x12""<s>", "umbyl'\x12"""},
    {"phi3", 10, {163, 402, 229, 89, 420, 397, 133, 461, 464, 201}, "\xef""\xbf""\xbd""od\xef""\xbf""\xbd""\xef""\xbf""\xbd"" Ws.\xef""\xbf""\xbd""riure\xef""\xbf""\xbd""", "\xef""\xbf""\xbd""od\xef""\xbf""\xbd""\xef""\xbf""\xbd"" Ws.\xef""\xbf""\xbd""riure\xef""\xbf""\xbd"""},
    {"phi3", 12, {1, 170, 66, 248, 1, 16, 1, 2, 29, 20, 2, 2}, "<s>\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""<s>\r<s></s>\x1a""\x11""</s></s>", "\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd"""},
};

static kiln_tokenizer *load_model_tok(const char *model) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", KT_DATA, model);
    kiln_tokenizer *t = NULL;
    if (kiln_tokenizer_load(path, &t)) fprintf(stderr, "  %s: %s\n", path, kiln_last_error());
    return t;
}

static bool same_ids(const int32_t *a, size_t n, json_t *want) {
    if (n != json_array_size(want)) return false;
    for (size_t k = 0; k < n; k++)
        if (a[k] != json_integer_value(json_array_get(want, k))) return false;
    return true;
}

static void text_golden(const char *model) {
    char path[512];
    snprintf(path, sizeof path, "%s/golden/%s.text.json", KT_DATA, model);
    json_t *g = json_load_file(path, JSON_ALLOW_NUL, NULL);
    KT_REQUIRE(g != NULL);
    kiln_tokenizer *t = load_model_tok(model);
    KT_REQUIRE(t != NULL);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(g, "cases"), i, c) {
        json_t *text = json_object_get(c, "text");
        int32_t *ids;
        size_t n;
        kiln_encode_options o = {true, true};
        KT_OK(kiln_tokenize(t, json_string_value(text), json_string_length(text), &o, &ids, &n));
        KT_CHECKF(same_ids(ids, n, json_object_get(c, "prompt")), "%s case %zu: prompt ids differ", model, i);
        kiln_free(ids);
        /* greedy ids decode (and stream) to greedy_text */
        json_t *gr = json_object_get(c, "greedy");
        size_t m = json_array_size(gr);
        int32_t *gids = malloc(m * sizeof *gids);
        for (size_t k = 0; k < m; k++) gids[k] = (int32_t)json_integer_value(json_array_get(gr, k));
        const char *want = json_string_value(json_object_get(c, "greedy_text"));
        size_t wl = json_string_length(json_object_get(c, "greedy_text"));
        char *s;
        size_t l;
        KT_OK(kiln_detokenize(t, gids, m, false, &s, &l));
        KT_CHECKF(l == wl && !memcmp(s, want, l), "%s case %zu: greedy_text differs: %s", model, i, s);
        kiln_free(s);
        kiln_detok *d;
        KT_OK(kiln_detok_create(t, NULL, 0, false, NULL, 0, &d));
        kiln_buf out = {0};
        for (size_t k = 0; k < m; k++) KT_OK(kiln_detok_push(d, gids[k], &out, NULL));
        KT_OK(kiln_detok_finish(d, &out));
        KT_CHECKF(out.len == wl && !memcmp(out.data, want, wl), "%s case %zu: streamed text differs", model, i);
        kiln_buf_free(&out);
        kiln_detok_destroy(d);
        free(gids);
    }
    /* the model's chat template and the ids of its rendering */
    json_t *chat = json_object_get(g, "chat");
    snprintf(path, sizeof path, "%s/models/%s", KT_DATA, model);
    kiln_chat_template *ct = NULL;
    KT_OK(kiln_chat_template_load(path, &ct));
    char *msgs = json_dumps(json_object_get(chat, "messages"), JSON_COMPACT), *out = NULL;
    KT_OK(kiln_chat_render(ct, msgs, json_is_true(json_object_get(chat, "add_generation_prompt")), NULL, &out));
    KT_CHECKF(!strcmp(out, json_string_value(json_object_get(chat, "text"))), "%s: chat text differs: %s", model, out);
    int32_t *ids;
    size_t n;
    kiln_encode_options o = {false, true};
    KT_OK(kiln_tokenize(t, out, strlen(out), &o, &ids, &n));
    KT_CHECKF(same_ids(ids, n, json_object_get(chat, "ids")), "%s: chat ids differ", model);
    kiln_free(ids);
    kiln_free(out);
    free(msgs);
    kiln_chat_template_destroy(ct);
    kiln_tokenizer_destroy(t);
    json_decref(g);
}

KT_TEST(llama3_gqa_text) { text_golden("llama3-gqa"); }
KT_TEST(llama2_mha_text) { text_golden("llama2-mha"); }

KT_TEST(hf_encode_cases) {
    for (size_t i = 0; i < KILN_ARRAY_LEN(enc_cases); i++) {
        kiln_tokenizer *t = load_model_tok(enc_cases[i].model);
        KT_REQUIRE(t != NULL);
        int32_t *ids;
        size_t n;
        kiln_encode_options o = {false, true};
        KT_OK(kiln_tokenize(t, enc_cases[i].text, strlen(enc_cases[i].text), &o, &ids, &n));
        KT_CHECKF(n == (size_t)enc_cases[i].n && !memcmp(ids, enc_cases[i].ids, n * sizeof *ids), "case %zu (%s)", i,
                  enc_cases[i].model);
        kiln_free(ids);
        kiln_tokenizer_destroy(t);
    }
}

KT_TEST(hf_decode_cases) {
    for (size_t i = 0; i < KILN_ARRAY_LEN(dec_cases); i++) {
        kiln_tokenizer *t = load_model_tok(dec_cases[i].model);
        KT_REQUIRE(t != NULL);
        for (int skip = 0; skip < 2; skip++) {
            char *s;
            size_t l;
            KT_OK(kiln_detokenize(t, dec_cases[i].ids, (size_t)dec_cases[i].n, skip, &s, &l));
            const char *want = skip ? dec_cases[i].text_skip : dec_cases[i].text;
            KT_CHECKF(!strcmp(s, want), "case %zu (%s, skip %d): \"%s\" != \"%s\"", i, dec_cases[i].model, skip, s, want);
            kiln_free(s);
            /* streaming gives the same text */
            kiln_detok *d;
            KT_OK(kiln_detok_create(t, NULL, 0, skip, NULL, 0, &d));
            kiln_buf out = {0};
            for (int k = 0; k < dec_cases[i].n; k++) KT_OK(kiln_detok_push(d, dec_cases[i].ids[k], &out, NULL));
            KT_OK(kiln_detok_finish(d, &out));
            KT_CHECKF(!strcmp(out.data, want), "case %zu streamed", i);
            kiln_buf_free(&out);
            kiln_detok_destroy(d);
        }
        kiln_tokenizer_destroy(t);
    }
}

KT_MAIN(KT_CASE(llama3_gqa_text), KT_CASE(llama2_mha_text), KT_CASE(hf_encode_cases), KT_CASE(hf_decode_cases))
