// label: unit
/*
 * test_tokenizer.c -- tokenizers against the golden encodings in
 * ../shared/fixtures (Llama 3 tokenizer.json and tiktoken tokenizer.model,
 * Llama 2 SentencePiece tokenizer.model), decoding back to the text, the
 * two Llama 3 formats agreeing on generated text, small hand-built
 * tokenizer.json files (byte-level with only byte tokens, SentencePiece-style
 * with byte fallback: expected ids produced by Hugging Face tokenizers
 * 0.23.3), tokenizer_config.json, NFC, BOS rules, and clear errors for bad
 * files and inputs.
 */
#include "kiln.h"
#include "kt.h"
#include "tokenizer.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TOKDIR KT_FIXTURES "/tokenizers"

static bool have_fixtures(void) { return kiln_path_exists(TOKDIR "/llama3/tokenizer.json"); }

static json_t *load_golden(const char *path) {
    json_error_t e;
    json_t *g = json_load_file(path, JSON_ALLOW_NUL, &e);
    if (!g) fprintf(stderr, "  cannot read %s: %s\n", path, e.text);
    return g;
}

static bool ids_equal(const int32_t *ids, size_t n, json_t *want) {
    if (n != json_array_size(want)) return false;
    for (size_t k = 0; k < n; k++)
        if (ids[k] != json_integer_value(json_array_get(want, k))) return false;
    return true;
}

/* Every golden case encodes to its ids and the ids decode to the text. */
static void check_golden(const char *tok_path, const char *golden, bool parse_special) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    kiln_tokenizer *t = NULL;
    KT_OK(kiln_tokenizer_load(tok_path, &t));
    json_t *g = load_golden(golden);
    KT_REQUIRE(g != NULL);
    json_t *cases = json_object_get(g, "cases");
    KT_CHECK(json_array_size(cases) > 100);
    size_t i;
    json_t *c;
    int bad = 0;
    json_array_foreach(cases, i, c) {
        json_t *text = json_object_get(c, "text"), *want = json_object_get(c, "ids");
        kiln_encode_options o = {false, parse_special};
        int32_t *ids = NULL;
        size_t n = 0;
        KT_OK(kiln_tokenize(t, json_string_value(text), json_string_length(text), &o, &ids, &n));
        if (!ids_equal(ids, n, want)) {
            if (bad++ < 3) fprintf(stderr, "  case %zu (%.40s): encoding differs\n", i, json_string_value(text));
            KT_CHECK(false);
        }
        char *dec = NULL;
        size_t dl = 0;
        KT_OK(kiln_detokenize(t, ids, n, false, &dec, &dl));
        KT_CHECKF(dl == json_string_length(text) && !memcmp(dec, json_string_value(text), dl),
                  "case %zu decodes to \"%s\"", i, dec);
        kiln_free(dec);
        kiln_free(ids);
    }
    json_decref(g);
    kiln_tokenizer_destroy(t);
}

KT_TEST(llama3_json_golden) { check_golden(TOKDIR "/llama3/tokenizer.json", TOKDIR "/llama3/golden.json", true); }
KT_TEST(llama3_json_golden_plain) {
    check_golden(TOKDIR "/llama3/tokenizer.json", TOKDIR "/llama3/golden_no_special.json", false);
}
KT_TEST(llama3_tiktoken_golden) { check_golden(TOKDIR "/llama3/tokenizer.model", TOKDIR "/llama3/golden.json", true); }
KT_TEST(llama3_tiktoken_golden_plain) {
    check_golden(TOKDIR "/llama3/tokenizer.model", TOKDIR "/llama3/golden_no_special.json", false);
}
KT_TEST(llama2_sentencepiece_golden) { check_golden(TOKDIR "/llama2/tokenizer.model", TOKDIR "/llama2/golden.json", true); }

/* The two Llama 3 files must agree on any text, including odd Unicode,
 * long runs and invalid UTF-8. */
KT_TEST(llama3_formats_agree) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    kiln_tokenizer *a = NULL, *b = NULL;
    KT_OK(kiln_tokenizer_load(TOKDIR "/llama3/tokenizer.json", &a));
    KT_OK(kiln_tokenizer_load(TOKDIR "/llama3/tokenizer.model", &b));
    static const char *const pieces[] = {"Hello", " world", "\n\n", "  ", "\t", "123456", "中文", "😀", "é", "e\xcc\x81",
                                         "'s", "'LL", "<|eot_id|>", "<|", "!!!", "\r\n", " \xc2\xa0", "\xc2\x85",
                                         "\xe3\x80\x80", "a", "ſ", "\xff", "\xe4\xbd", "x²", "—", "\x00"};
    uint64_t rng = 42;
    for (int iter = 0; iter < 300; iter++) {
        char text[512];
        size_t len = 0;
        int k = 1 + (int)(rng % 40);
        for (int j = 0; j < k; j++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            const char *p = pieces[(rng >> 33) % KILN_ARRAY_LEN(pieces)];
            size_t l = p[0] ? strlen(p) : 1;
            if (len + l >= sizeof text) break;
            memcpy(text + len, p, l);
            len += l;
        }
        for (int ps = 0; ps < 2; ps++) {
            kiln_encode_options o = {ps == 0, ps == 1};
            int32_t *x = NULL, *y = NULL;
            size_t nx = 0, ny = 0;
            KT_OK(kiln_tokenize(a, text, len, &o, &x, &nx));
            KT_OK(kiln_tokenize(b, text, len, &o, &y, &ny));
            KT_CHECKF(nx == ny && !memcmp(x, y, nx * sizeof *x), "iteration %d: formats disagree", iter);
            kiln_free(x);
            kiln_free(y);
        }
    }
    kiln_tokenizer_destroy(a);
    kiln_tokenizer_destroy(b);
}

KT_TEST(llama3_special_tokens) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    static const char *const files[] = {TOKDIR "/llama3/tokenizer.json", TOKDIR "/llama3/tokenizer.model"};
    for (int f = 0; f < 2; f++) {
        kiln_tokenizer *t = NULL;
        KT_OK(kiln_tokenizer_load(files[f], &t));
        KT_CHECK(kiln_tokenizer_vocab_size(t) == 128256);
        KT_CHECK(kiln_tokenizer_bos_id(t) == 128000);
        KT_CHECK(kiln_tokenizer_eos_id(t) == 128001);
        KT_CHECK(kiln_tokenizer_token_id(t, "<|eot_id|>") == 128009);
        KT_CHECK(kiln_tokenizer_token_id(t, "<|start_header_id|>") == 128006);
        KT_CHECK(kiln_tokenizer_token_id(t, "<|reserved_special_token_250|>") == 128255);
        KT_CHECK(kiln_tokenizer_token_id(t, "Ġworld") == 1917);
        KT_CHECK(!strcmp(kiln_tokenizer_token_text(t, 1917), "Ġworld"));
        KT_CHECK(kiln_tokenizer_token_text(t, -1) == NULL && kiln_tokenizer_token_text(t, 128256) == NULL);
        /* BOS added once, never doubled */
        kiln_encode_options o = {true, true};
        int32_t *ids;
        size_t n;
        KT_OK(kiln_tokenize(t, "Hello", 5, &o, &ids, &n));
        KT_CHECK(n == 2 && ids[0] == 128000 && ids[1] == 9906);
        kiln_free(ids);
        KT_OK(kiln_tokenize(t, "<|begin_of_text|>Hello", 22, &o, &ids, &n));
        KT_CHECK(n == 2 && ids[0] == 128000 && ids[1] == 9906);
        kiln_free(ids);
        KT_OK(kiln_tokenize(t, "", 0, &o, &ids, &n));
        KT_CHECK(n == 1 && ids[0] == 128000);
        kiln_free(ids);
        /* skip_special */
        int32_t seq[] = {128000, 9906, 128009};
        char *s;
        size_t l;
        KT_OK(kiln_detokenize(t, seq, 3, true, &s, &l));
        KT_CHECK(!strcmp(s, "Hello") && l == 5);
        kiln_free(s);
        KT_OK(kiln_detokenize(t, seq, 3, false, &s, &l));
        KT_CHECK(!strcmp(s, "<|begin_of_text|>Hello<|eot_id|>"));
        kiln_free(s);
        /* a lone byte of a multi-byte character decodes to U+FFFD */
        int32_t half[] = {9906, 239};
        KT_OK(kiln_detokenize(t, half, 2, false, &s, &l));
        KT_CHECK(!strcmp(s, "Hello\xEF\xBF\xBD"));
        kiln_free(s);
        int32_t bad[] = {5, 128256};
        KT_ERR(kiln_detokenize(t, bad, 2, false, &s, &l), KILN_ERR_INVALID_ARGUMENT, "outside the vocabulary");
        kiln_tokenizer_destroy(t);
    }
}

KT_TEST(invalid_utf8_is_replaced) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    static const char *const files[] = {TOKDIR "/llama3/tokenizer.json", TOKDIR "/llama2/tokenizer.model"};
    for (int f = 0; f < 2; f++) {
        kiln_tokenizer *t = NULL;
        KT_OK(kiln_tokenizer_load(files[f], &t));
        int32_t *a, *b;
        size_t na, nb;
        kiln_encode_options o = {false, false};
        /* \xff, a truncated 3-byte sequence and a surrogate: one U+FFFD per maximal subpart */
        const char bad[] = "a\xff b\xe4\xbd c\xed\xa0\x80";
        const char fixed[] = "a\xEF\xBF\xBD b\xEF\xBF\xBD c\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD";
        KT_OK(kiln_tokenize(t, bad, sizeof bad - 1, &o, &a, &na));
        KT_OK(kiln_tokenize(t, fixed, sizeof fixed - 1, &o, &b, &nb));
        KT_CHECK(na == nb && !memcmp(a, b, na * sizeof *a));
        char *s;
        size_t l;
        KT_OK(kiln_detokenize(t, a, na, false, &s, &l));
        KT_CHECK(l == sizeof fixed - 1 && !memcmp(s, fixed, l));
        kiln_free(s);
        kiln_free(a);
        kiln_free(b);
        kiln_tokenizer_destroy(t);
    }
}

KT_TEST(llama2_specials_and_bos) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    kiln_tokenizer *t = NULL;
    KT_OK(kiln_tokenizer_load(TOKDIR "/llama2/tokenizer.model", &t));
    KT_CHECK(kiln_tokenizer_vocab_size(t) == 32000);
    KT_CHECK(kiln_tokenizer_bos_id(t) == 1 && kiln_tokenizer_eos_id(t) == 2);
    kiln_encode_options o = {true, true};
    int32_t *ids;
    size_t n;
    KT_OK(kiln_tokenize(t, "Hello", 5, &o, &ids, &n));
    KT_CHECK(n == 2 && ids[0] == 1 && ids[1] == 15043);
    kiln_free(ids);
    KT_OK(kiln_tokenize(t, "<s>Hello</s>", 12, &o, &ids, &n));
    KT_CHECK(n == 3 && ids[0] == 1 && ids[1] == 15043 && ids[2] == 2);
    kiln_free(ids);
    o.parse_special = false;
    KT_OK(kiln_tokenize(t, "<s>", 3, &o, &ids, &n));
    KT_CHECK(n > 2 && ids[0] == 1 && ids[1] != 1);
    kiln_free(ids);
    /* decoding: the leading space of the first piece goes, inner ones stay */
    int32_t seq[] = {1, 15043, 3186};
    char *s;
    size_t l;
    KT_OK(kiln_detokenize(t, seq, 3, true, &s, &l));
    KT_CHECK(!strcmp(s, "Hello world"));
    kiln_free(s);
    KT_OK(kiln_detokenize(t, seq, 3, false, &s, &l));
    KT_CHECK(!strcmp(s, "<s> Hello world"));
    kiln_free(s);
    KT_CHECK(!strcmp(kiln_tokenizer_token_text(t, 13), "<0x0A>"));
    kiln_tokenizer_destroy(t);
}

/* Long inputs stay fast (no quadratic merging) and round-trip. */
KT_TEST(long_inputs) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    static const char *const files[] = {TOKDIR "/llama3/tokenizer.json", TOKDIR "/llama2/tokenizer.model"};
    size_t n = 200000;
    char *text = malloc(n + 1);
    KT_REQUIRE(text != NULL);
    for (int kind = 0; kind < 3; kind++) {
        for (size_t i = 0; i < n; i++)
            text[i] = kind == 0 ? 'a' : kind == 1 ? (char)('a' + (i * 7 + i / 3) % 26) : (i % 5 == 4 ? ' ' : 'x');
        for (int f = 0; f < 2; f++) {
            kiln_tokenizer *t = NULL;
            KT_OK(kiln_tokenizer_load(files[f], &t));
            double t0 = kiln_now_sec();
            int32_t *ids;
            size_t m;
            KT_OK(kiln_tokenize(t, text, n, NULL, &ids, &m));
            double dt = kiln_now_sec() - t0;
            KT_CHECKF(dt < 5.0, "%zu bytes took %.2f s", n, dt);
            char *s;
            size_t l;
            kiln_encode_options o = {false, true};
            kiln_free(ids);
            KT_OK(kiln_tokenize(t, text, n, &o, &ids, &m));
            KT_OK(kiln_detokenize(t, ids, m, false, &s, &l));
            KT_CHECK(l == n && !memcmp(s, text, n));
            kiln_free(s);
            kiln_free(ids);
            kiln_tokenizer_destroy(t);
        }
    }
    free(text);
}

/* ------------------------------------------------- hand-built tokenizers */

static char tmpdir[256];

static const char *make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/tok_test_XXXXXX", KT_BINARY_DIR);
    if (!mkdtemp(tmpdir)) snprintf(tmpdir, sizeof tmpdir, "/tmp/tok_test_%d", (int)getpid());
    kiln_mkdirs(tmpdir);
    return tmpdir;
}

static void write_file(const char *dir, const char *name, const char *text) {
    char *p = kiln_path_join(dir, name);
    kiln_write_file_atomic(p, text, strlen(text));
    free(p);
}

static void remove_dir(const char *dir) {
    static const char *const names[] = {"tokenizer.json", "tokenizer_config.json", "tokenizer.model", NULL};
    for (int i = 0; names[i]; i++) {
        char *p = kiln_path_join(dir, names[i]);
        unlink(p);
        free(p);
    }
    rmdir(dir);
}

/* The demo model's tokenizer: 256 byte tokens in GPT-2 form, no merges,
 * two special added tokens. */
static char *byte_level_json(const char *extra_normalizer) {
    kiln_buf b = {0};
    kiln_buf_puts(&b, "{\"version\":\"1.0\",\"added_tokens\":[");
    kiln_buf_puts(&b, "{\"id\":256,\"content\":\"<|begin_of_text|>\",\"special\":true,\"normalized\":false},");
    kiln_buf_puts(&b, "{\"id\":257,\"content\":\"<|end_of_text|>\",\"special\":true,\"normalized\":false}],");
    kiln_buf_printf(&b, "\"normalizer\":%s,", extra_normalizer ? extra_normalizer : "null");
    kiln_buf_puts(&b, "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},");
    kiln_buf_puts(&b, "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},");
    kiln_buf_puts(&b, "\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int i = 0; i < 256; i++) {
        char u[8];
        size_t l = kiln_utf8_encode(kiln_tok_byte_to_cp((uint8_t)i), u);
        u[l] = 0;
        if (i == '"' || i == '\\') kiln_buf_printf(&b, "%s\"\\%s\":%d", i ? "," : "", u, i);
        else kiln_buf_printf(&b, "%s\"%s\":%d", i ? "," : "", u, i);
    }
    kiln_buf_puts(&b, "},\"merges\":[]}}");
    return kiln_buf_steal(&b);
}

KT_TEST(byte_level_minimal) {
    const char *dir = make_tmpdir();
    char *json = byte_level_json(NULL);
    write_file(dir, "tokenizer.json", json);
    free(json);
    kiln_tokenizer *t = NULL;
    KT_OK(kiln_tokenizer_load(dir, &t));
    KT_CHECK(kiln_tokenizer_vocab_size(t) == 258);
    KT_CHECK(kiln_tokenizer_bos_id(t) == 256 && kiln_tokenizer_eos_id(t) == 257);
    kiln_encode_options o = {true, true};
    int32_t *ids;
    size_t n;
    KT_OK(kiln_tokenize(t, "Hi é!<|end_of_text|>", 21, &o, &ids, &n));
    int32_t want[] = {256, 'H', 'i', ' ', 0xC3, 0xA9, '!', 257};
    KT_CHECK(n == 8 && !memcmp(ids, want, sizeof want));
    char *s;
    size_t l;
    KT_OK(kiln_detokenize(t, ids, n, true, &s, &l));
    KT_CHECK(!strcmp(s, "Hi é!"));
    kiln_free(s);
    kiln_free(ids);
    /* every byte value round-trips */
    int32_t all[256];
    for (int i = 0; i < 256; i++) all[i] = i;
    KT_OK(kiln_detokenize(t, all, 128, false, &s, &l));
    KT_CHECK(l == 128);
    for (int i = 0; i < 128; i++) KT_CHECK((unsigned char)s[i] == i);
    kiln_free(s);
    KT_CHECK(kiln_tokenizer_token_id(t, "Ġ") == ' ');
    kiln_tokenizer_destroy(t);
    /* tokenizer_config.json: no BOS */
    write_file(dir, "tokenizer_config.json", "{\"add_bos_token\": false, \"eos_token\": \"<|begin_of_text|>\", \"model_max_length\": 1000000000000000019884624838656}");
    KT_OK(kiln_tokenizer_load(dir, &t));
    KT_OK(kiln_tokenize(t, "A", 1, &o, &ids, &n));
    KT_CHECK(n == 1 && ids[0] == 'A');
    KT_CHECK(kiln_tokenizer_eos_id(t) == 256);
    kiln_free(ids);
    kiln_tokenizer_destroy(t);
    remove_dir(dir);
}

KT_TEST(nfc_normalizer) {
    const char *dir = make_tmpdir();
    char *json = byte_level_json("{\"type\":\"NFC\"}");
    write_file(dir, "tokenizer.json", json);
    free(json);
    kiln_tokenizer *t = NULL;
    KT_OK(kiln_tokenizer_load(dir, &t));
    int32_t *a, *b;
    size_t na, nb;
    kiln_encode_options o = {false, false};
    KT_OK(kiln_tokenize(t, "Cafe\xcc\x81 \xea\xb0\x80", 10, &o, &a, &na)); /* e + U+0301, Hangul */
    KT_OK(kiln_tokenize(t, "Caf\xc3\xa9 \xea\xb0\x80", 9, &o, &b, &nb));
    KT_CHECK(na == nb && !memcmp(a, b, na * sizeof *a));
    kiln_free(a);
    kiln_free(b);
    kiln_tokenizer_destroy(t);
    remove_dir(dir);
}

/* SentencePiece-style tokenizer.json (Prepend/Replace normalizers, byte
 * fallback, Strip decoder). Expected ids from Hugging Face tokenizers. */
static char *sp_json(bool array_merges) {
    kiln_buf b = {0};
    kiln_buf_puts(&b, "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},"
                      "{\"id\":1,\"content\":\"<s>\",\"special\":true},{\"id\":2,\"content\":\"</s>\",\"special\":true}],"
                      "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"▁\"},"
                      "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"▁\"}]},\"pre_tokenizer\":null,"
                      "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\","
                      "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":"
                      "\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
                      "{\"type\":\"Replace\",\"pattern\":{\"String\":\"▁\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},"
                      "{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},"
                      "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true,"
                      "\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2");
    for (int i = 0; i < 256; i++) kiln_buf_printf(&b, ",\"<0x%02X>\":%d", i, 3 + i);
    static const char *const toks[] = {"▁", "a", "b", "c", "▁a", "ab", "▁ab", "bc", "▁▁", "h", "é"};
    for (int i = 0; i < 11; i++) kiln_buf_printf(&b, ",\"%s\":%d", toks[i], 259 + i);
    if (array_merges)
        kiln_buf_puts(&b, "},\"merges\":[[\"▁\",\"a\"],[\"a\",\"b\"],[\"▁a\",\"b\"],[\"b\",\"c\"],[\"▁\",\"▁\"]]}}");
    else
        kiln_buf_puts(&b, "},\"merges\":[\"▁ a\",\"a b\",\"▁a b\",\"b c\",\"▁ ▁\"]}}");
    return kiln_buf_steal(&b);
}

KT_TEST(sentencepiece_style_json) {
    static const struct {
        const char *text;
        int32_t ids[8];
        int n;
    } cases[] = {
        {"ab", {265}, 1},
        {"abc", {265, 262}, 2},
        {" ab  c", {259, 265, 267, 262}, 4},
        {"ah\xc3\xa9", {263, 268, 269}, 3},
        {"a\xf0\x9f\x98\x80" "b", {263, 243, 162, 155, 131, 261}, 6},
        {"<s>ab</s>", {1, 265, 2}, 3},
        {"", {0}, 0},
        {"c b a", {259, 262, 259, 261, 263}, 5},
        {"abab ab", {265, 264, 265}, 3},
    };
    for (int form = 0; form < 2; form++) {
        const char *dir = make_tmpdir();
        char *json = sp_json(form == 1);
        write_file(dir, "tokenizer.json", json);
        free(json);
        kiln_tokenizer *t = NULL;
        KT_OK(kiln_tokenizer_load(dir, &t));
        KT_CHECK(kiln_tokenizer_bos_id(t) == 1);
        for (size_t i = 0; i < KILN_ARRAY_LEN(cases); i++) {
            kiln_encode_options o = {false, true};
            int32_t *ids;
            size_t n;
            KT_OK(kiln_tokenize(t, cases[i].text, strlen(cases[i].text), &o, &ids, &n));
            KT_CHECKF(n == (size_t)cases[i].n && !memcmp(ids, cases[i].ids, n * sizeof *ids), "case %zu", i);
            char *s;
            size_t l;
            KT_OK(kiln_detokenize(t, ids, n, false, &s, &l));
            KT_CHECKF(!strcmp(s, i == 5 ? "<s> ab</s>" : cases[i].text), "case %zu decodes to \"%s\"", i, s);
            kiln_free(s);
            kiln_free(ids);
            o.add_special = true;
            KT_OK(kiln_tokenize(t, cases[i].text, strlen(cases[i].text), &o, &ids, &n));
            KT_CHECK(n >= 1 && ids[0] == 1 && (n < 2 || ids[1] != 1));
            kiln_free(ids);
        }
        kiln_tokenizer_destroy(t);
        remove_dir(dir);
    }
}

KT_TEST(bad_files) {
    kiln_tokenizer *t = NULL;
    KT_ERR(kiln_tokenizer_load("/nonexistent/tokenizer.json", &t), KILN_ERR_NOT_FOUND, "does not exist");
    const char *dir = make_tmpdir();
    KT_ERR(kiln_tokenizer_load(dir, &t), KILN_ERR_NOT_FOUND, "no tokenizer in");
    write_file(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,");
    KT_ERR(kiln_tokenizer_load(dir, &t), KILN_ERR_FORMAT, "invalid JSON");
    write_file(dir, "tokenizer.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}");
    KT_ERR(kiln_tokenizer_load(dir, &t), KILN_ERR_UNSUPPORTED, "WordPiece");
    write_file(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                                      "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}}");
    KT_ERR(kiln_tokenizer_load(dir, &t), KILN_ERR_FORMAT, "regex does not compile");
    write_file(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -4}}}");
    KT_ERR(kiln_tokenizer_load(dir, &t), KILN_ERR_FORMAT, "no valid id");
    write_file(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\"]}}");
    KT_ERR(kiln_tokenizer_load(dir, &t), KILN_ERR_FORMAT, "two tokens");
    write_file(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"normalizer\": {\"type\": \"NFKD\"}}");
    KT_ERR(kiln_tokenizer_load(dir, &t), KILN_ERR_UNSUPPORTED, "NFKD");
    remove_dir(dir);
    dir = make_tmpdir();
    write_file(dir, "tokenizer.model", "QQ== 0\nQg== 1\n!!!! 2\n");
    KT_ERR(kiln_tokenizer_load(dir, &t), KILN_ERR_FORMAT, "line 3");
    write_file(dir, "tokenizer.model", "\x0a\x05\x0a\x01");
    KT_ERR(kiln_tokenizer_load(dir, &t), KILN_ERR_FORMAT, "SentencePiece");
    {
        static const char unigram[] = "\x0a\x08\x0a\x01" "a\x15\x00\x00\x00\x00";
        char *p = kiln_path_join(dir, "tokenizer.model");
        kiln_write_file_atomic(p, unigram, sizeof unigram - 1);
        free(p);
    }
    KT_ERR(kiln_tokenizer_load(dir, &t), KILN_ERR_UNSUPPORTED, "UNIGRAM");
    remove_dir(dir);
    KT_ERR(kiln_tokenize(NULL, "a", 1, NULL, NULL, NULL), KILN_ERR_INVALID_ARGUMENT, "NULL");
}

/* Files truncated anywhere are errors, never crashes. */
KT_TEST(truncated_fixture_files) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    static const char *const files[] = {TOKDIR "/llama2/tokenizer.model", TOKDIR "/llama3/tokenizer.model"};
    const char *dir = make_tmpdir();
    for (int f = 0; f < 2; f++) {
        char *data;
        size_t len;
        KT_OK(kiln_read_file(files[f], &data, &len));
        size_t cuts[] = {1, 7, 100, 1001, len / 2 + 3};
        for (size_t k = 0; k < KILN_ARRAY_LEN(cuts); k++) {
            char *p = kiln_path_join(dir, "tokenizer.model");
            kiln_write_file_atomic(p, data, cuts[k]);
            free(p);
            kiln_tokenizer *t = NULL;
            kiln_status st = kiln_tokenizer_load(dir, &t);
            if (st == KILN_OK) {
                /* a tiktoken file cut at a line boundary is still a valid file */
                int32_t *ids;
                size_t n;
                KT_OK(kiln_tokenize(t, "hello world", 11, NULL, &ids, &n));
                kiln_free(ids);
                kiln_tokenizer_destroy(t);
            } else {
                KT_CHECKF(st == KILN_ERR_FORMAT || st == KILN_ERR_UNSUPPORTED, "%s cut at %zu: %s", files[f],
                          cuts[k], kiln_last_error());
            }
        }
        free(data);
    }
    remove_dir(dir);
}

/* Many threads encoding with one tokenizer (shared regex, pre-token caches
 * taken with trylock) get the same ids as one thread. */
typedef struct enc_job {
    const kiln_tokenizer *t;
    const char *text;
    size_t len;
    const int32_t *want;
    size_t n_want;
    int bad;
} enc_job;

static void *encode_many(void *p) {
    enc_job *j = p;
    for (int r = 0; r < 6; r++) {
        int32_t *ids;
        size_t n;
        kiln_encode_options o = {false, true};
        if (kiln_tokenize(j->t, j->text, j->len, &o, &ids, &n) || n != j->n_want || memcmp(ids, j->want, n * sizeof *ids))
            j->bad++;
        kiln_free(ids);
    }
    return NULL;
}

KT_TEST(concurrent_encoding) {
    if (!have_fixtures()) KT_SKIP("fixtures not found at %s", TOKDIR);
    kiln_tokenizer *t = NULL;
    KT_OK(kiln_tokenizer_load(TOKDIR "/llama3/tokenizer.json", &t));
    json_t *g = load_golden(TOKDIR "/llama3/golden.json");
    KT_REQUIRE(g != NULL);
    kiln_buf text = {0};
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(g, "cases"), i, c) {
        kiln_buf_append(&text, json_string_value(json_object_get(c, "text")), json_string_length(json_object_get(c, "text")));
        kiln_buf_append(&text, "\n", 1);
    }
    int32_t *want;
    size_t n_want;
    kiln_encode_options o = {false, true};
    KT_OK(kiln_tokenize(t, text.data, text.len, &o, &want, &n_want));
    enum { NT = 6 };
    pthread_t th[NT];
    enc_job jobs[NT];
    for (int k = 0; k < NT; k++) {
        jobs[k] = (enc_job){t, text.data, text.len, want, n_want, 0};
        pthread_create(&th[k], NULL, encode_many, &jobs[k]);
    }
    for (int k = 0; k < NT; k++) {
        pthread_join(th[k], NULL);
        KT_CHECK(jobs[k].bad == 0);
    }
    kiln_free(want);
    kiln_buf_free(&text);
    json_decref(g);
    kiln_tokenizer_destroy(t);
}

KT_MAIN(KT_CASE(llama3_json_golden), KT_CASE(llama3_json_golden_plain), KT_CASE(llama3_tiktoken_golden),
        KT_CASE(llama3_tiktoken_golden_plain), KT_CASE(llama2_sentencepiece_golden), KT_CASE(llama3_formats_agree),
        KT_CASE(llama3_special_tokens), KT_CASE(invalid_utf8_is_replaced), KT_CASE(llama2_specials_and_bos),
        KT_CASE(long_inputs), KT_CASE(byte_level_minimal), KT_CASE(nfc_normalizer), KT_CASE(sentencepiece_style_json),
        KT_CASE(bad_files), KT_CASE(truncated_fixture_files), KT_CASE(concurrent_encoding))
