/*
 * tok_tiktoken.c -- load Meta's tiktoken tokenizer.model (Llama 3's
 * original/ folder): lines of "<base64 token bytes> <rank>", the Llama 3
 * pre-tokenizer pattern, and the 256 special tokens numbered after the
 * ranks exactly as Meta's tokenizer.py names them (<|begin_of_text|> ...
 * <|eot_id|>, <|reserved_special_token_N|>), unless tokenizer_config.json's
 * added_tokens_decoder renames them (Llama 3.1+). Merging follows tiktoken:
 * any two adjacent parts whose concatenation is a token merge, lowest rank
 * first; a whole pre-token that is a token is taken as is.
 * Ownership: the returned tokenizer is owned by the caller. Thread-safety:
 * no shared state.
 */
#include "tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#define LLAMA3_PATTERN                                                                                         \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
    "\\s+(?!\\S)|\\s+"
#define N_SPECIAL 256

static int b64val(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decode base64 s[0..n) into out; false when malformed. */
static bool b64_decode(const char *s, size_t n, kiln_buf *out) {
    uint32_t acc = 0;
    int bits = 0;
    size_t i = 0;
    for (; i < n && s[i] != '='; i++) {
        int v = b64val((unsigned char)s[i]);
        if (v < 0) return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char c = (char)((acc >> bits) & 0xff);
            if (kiln_buf_append(out, &c, 1)) return false;
        }
    }
    for (; i < n; i++)
        if (s[i] != '=') return false;
    return true;
}

bool kiln_tok_is_tiktoken(const char *data, size_t len) {
    /* the first line must be "<base64> <digits>" */
    size_t i = 0;
    int lines = 0;
    while (i < len && lines < 1) {
        size_t a = i;
        while (i < len && b64val((unsigned char)data[i]) >= 0) i++;
        while (i < len && data[i] == '=') i++;
        if (i == a || i >= len || data[i] != ' ') return false;
        i++;
        size_t d = i;
        while (i < len && data[i] >= '0' && data[i] <= '9') i++;
        if (i == d) return false;
        if (i < len && data[i] == '\r') i++;
        if (i < len && data[i] != '\n') return false;
        i++;
        lines++;
    }
    return lines > 0;
}

/* raw bytes -> rank, for finding the parts of each token */
typedef struct rawmap {
    uint32_t *slots; /* rank + 1 */
    uint32_t mask;
    const char *blob;
    const uint32_t *off; /* [n + 1] */
} rawmap;

static int32_t raw_get(const rawmap *m, const char *s, size_t n) {
    for (uint32_t i = (uint32_t)kiln_hash64(s, n, 7) & m->mask;; i = (i + 1) & m->mask) {
        uint32_t v = m->slots[i];
        if (!v) return -1;
        uint32_t r = v - 1;
        if (m->off[r + 1] - m->off[r] == n && !memcmp(m->blob + m->off[r], s, n)) return (int32_t)r;
    }
}

kiln_status kiln_tok_load_tiktoken(const char *data, size_t len, const char *path, const void *config_json,
                                   kiln_tokenizer **out) {
    kiln_status st = KILN_OK;
    kiln_tokenizer *t = NULL;
    kiln_tok_builder b = {0};
    kiln_buf raw = {0}, conv = {0}, byrank = {0};
    uint32_t *off = NULL, *slots = NULL;
    kiln_vec ranks = KILN_VEC_INIT(int64_t); /* per line: rank; raw bytes in order */
    kiln_vec ends = KILN_VEC_INIT(uint32_t);
    int64_t max_rank = -1;
    size_t i = 0, line = 0;
    while (i < len) {
        line++;
        size_t a = i;
        while (i < len && data[i] != ' ' && data[i] != '\n') i++;
        if (i == a && i < len && data[i] == '\n') { /* blank line */
            i++;
            continue;
        }
        KILN_CHECK(i < len && data[i] == ' ' && i > a, KILN_ERR_FORMAT, "%s: line %zu is not \"<base64> <rank>\"",
                   path, line);
        size_t before = raw.len;
        KILN_CHECK(b64_decode(data + a, i - a, &raw) && raw.len > before, KILN_ERR_FORMAT,
                   "%s: line %zu: invalid base64 token", path, line);
        i++;
        int64_t r = 0;
        size_t d = i;
        while (i < len && data[i] >= '0' && data[i] <= '9' && r < (1 << 28)) r = r * 10 + (data[i++] - '0');
        KILN_CHECK(i > d && r < (1 << 28), KILN_ERR_FORMAT, "%s: line %zu: invalid rank", path, line);
        if (i < len && data[i] == '\r') i++;
        KILN_CHECK(i >= len || data[i] == '\n', KILN_ERR_FORMAT, "%s: line %zu: trailing characters", path, line);
        i++;
        KILN_TRY(kiln_vec_push(&ranks, &r));
        uint32_t e = (uint32_t)raw.len;
        KILN_TRY(kiln_vec_push(&ends, &e));
        if (r > max_rank) max_rank = r;
    }
    KILN_CHECK(ranks.len > 0, KILN_ERR_FORMAT, "%s: no tokens", path);
    KILN_CHECK((uint64_t)max_rank < (uint64_t)ranks.len * 2 + 1024, KILN_ERR_FORMAT,
               "%s: ranks are too sparse (largest %lld for %zu tokens)", path, (long long)max_rank, ranks.len);
    int32_t n_base = (int32_t)max_rank + 1;
    KILN_TRY(kiln_tok_new(KILN_TOK_FORMAT_TIKTOKEN, path, n_base + N_SPECIAL, &t));
    t->byte_level = true;
    t->ignore_merges = true;
    /* per-rank raw bytes */
    off = calloc((size_t)n_base + 1, sizeof *off);
    KILN_CHECK_ALLOC(off);
    {
        /* order raw bytes by rank (ranks are usually already in order) */
        uint32_t *start = malloc((size_t)n_base * sizeof *start), *lenr = calloc((size_t)n_base, sizeof *lenr);
        if (!start || !lenr) {
            free(start);
            free(lenr);
            KILN_CHECK_ALLOC(NULL);
        }
        memset(start, 0xff, (size_t)n_base * sizeof *start);
        for (size_t k = 0; k < ranks.len; k++) {
            int64_t r = KILN_VEC_AT(&ranks, int64_t, k);
            uint32_t s0 = k ? KILN_VEC_AT(&ends, uint32_t, k - 1) : 0, s1 = KILN_VEC_AT(&ends, uint32_t, k);
            if (start[r] != UINT32_MAX) {
                free(start);
                free(lenr);
                KILN_CHECK(0, KILN_ERR_FORMAT, "%s: rank %lld appears twice", path, (long long)r);
            }
            start[r] = s0;
            lenr[r] = s1 - s0;
        }
        for (int32_t r = 0; r < n_base; r++) {
            off[r] = (uint32_t)byrank.len;
            if (start[r] != UINT32_MAX && (st = kiln_buf_append(&byrank, raw.data + start[r], lenr[r]))) break;
        }
        off[n_base] = (uint32_t)byrank.len;
        for (int32_t r = 0; r < n_base && !st; r++) {
            if (start[r] == UINT32_MAX) continue;
            conv.len = 0;
            if ((st = kiln_buf_reserve(&conv, lenr[r] * 2 + 1))) break;
            for (uint32_t k = 0; k < lenr[r]; k++)
                conv.len += kiln_utf8_encode(t->byte_cp[(uint8_t)raw.data[start[r] + k]], conv.data + conv.len);
            st = kiln_tok_set_token(t, &b, r, conv.data, conv.len, 0);
        }
        free(start);
        free(lenr);
        if (st) goto fail;
    }
    kiln_buf_free(&raw);
    raw = byrank;
    byrank = (kiln_buf){0};
    /* special tokens */
    {
        const json_t *cfg = config_json;
        json_t *dec = cfg ? json_object_get(cfg, "added_tokens_decoder") : NULL;
        for (int k = 0; k < N_SPECIAL; k++) {
            char name[64];
            static const char *const first[10] = {"<|begin_of_text|>", "<|end_of_text|>",
                                                  "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
                                                  "<|reserved_special_token_2|>", "<|reserved_special_token_3|>",
                                                  "<|start_header_id|>", "<|end_header_id|>",
                                                  "<|reserved_special_token_4|>", "<|eot_id|>"};
            if (k < 10)
                snprintf(name, sizeof name, "%s", first[k]);
            else
                snprintf(name, sizeof name, "<|reserved_special_token_%d|>", k - 5);
            const char *nm = name;
            char key[32];
            snprintf(key, sizeof key, "%d", n_base + k);
            json_t *ent = dec ? json_object_get(dec, key) : NULL;
            json_t *content = ent ? json_object_get(ent, "content") : NULL;
            if (json_is_string(content) && json_string_length(content) > 0) nm = json_string_value(content);
            KILN_TRY(kiln_tok_set_token(t, &b, n_base + k, nm, strlen(nm), 0));
        }
    }
    KILN_TRY(kiln_tok_finish_vocab(t, &b));
    for (int k = 0; k < N_SPECIAL; k++) {
        kiln_tok_added a = {n_base + k, true, false, false, false, false};
        KILN_TRY(kiln_tok_add_added(t, &a));
    }
    /* merges: every split of a token into two tokens, at the token's rank */
    {
        size_t cap = 16;
        while (cap < (size_t)n_base * 2) cap *= 2;
        slots = calloc(cap, sizeof *slots);
        KILN_CHECK_ALLOC(slots);
        rawmap m = {slots, (uint32_t)(cap - 1), raw.data, off};
        for (int32_t r = 0; r < n_base; r++) {
            uint32_t n = off[r + 1] - off[r];
            if (!n) continue;
            uint32_t k = (uint32_t)kiln_hash64(raw.data + off[r], n, 7) & m.mask;
            while (slots[k]) k = (k + 1) & m.mask;
            slots[k] = (uint32_t)r + 1;
        }
        KILN_TRY(kiln_tok_merges_init(t, (size_t)n_base * 3));
        for (int32_t r = 0; r < n_base; r++) {
            uint32_t n = off[r + 1] - off[r];
            const char *s = raw.data + off[r];
            for (uint32_t k = 1; k < n; k++) {
                int32_t x = raw_get(&m, s, k);
                if (x < 0) continue;
                int32_t y = raw_get(&m, s + k, n - k);
                if (y < 0) continue;
                KILN_TRY(kiln_tok_merges_add(t, x, y, r, r));
            }
        }
    }
    KILN_TRY(kiln_tok_add_regex_stage(t, LLAMA3_PATTERN, false, false));
    t->bos_id = kiln_tok_id(t, "<|begin_of_text|>", 17);
    t->eos_id = kiln_tok_id(t, "<|end_of_text|>", 15);
    if (t->bos_id < 0) t->bos_id = n_base;
    if (t->eos_id < 0) t->eos_id = n_base + 1;
    t->add_bos = true;
    KILN_TRY(kiln_tok_finalize(t));
    *out = t;
    t = NULL;
fail:
    kiln_tokenizer_destroy(t);
    kiln_buf_free(&b.text);
    free(b.off);
    kiln_buf_free(&raw);
    kiln_buf_free(&conv);
    kiln_buf_free(&byrank);
    kiln_vec_free(&ranks);
    kiln_vec_free(&ends);
    free(off);
    free(slots);
    return st;
}
