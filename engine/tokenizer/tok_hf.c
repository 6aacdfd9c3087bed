/*
 * tok_hf.c -- load a Hugging Face tokenizer.json with a BPE model into a
 * kiln_tokenizer: byte-level (GPT-2, Llama 3, Qwen2: Split regex + ByteLevel)
 * and SentencePiece-style (Llama 2, Mistral: Prepend/Replace normalizers or
 * Metaspace, byte_fallback), merges as "a b" or ["a", "b"], ignore_merges,
 * added tokens, and BOS/EOS from the TemplateProcessing post-processor.
 * Anything the encoder would get wrong (another model type, an unknown
 * normalizer or pre-tokenizer) is refused with an error naming it.
 * Ownership: the returned tokenizer is owned by the caller. Thread-safety:
 * no shared state.
 */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>

#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

typedef struct hf_ctx {
    kiln_tj j;
    const char *path;
    kiln_tokenizer *t;
    bool saw_bytelevel_pre, saw_bytelevel_dec;
    kiln_buf tmp;
} hf_ctx;

static bool tj_type_is(const kiln_tj *j, int32_t node, const char *type) {
    return kiln_tj_str_eq(j, kiln_tj_get(j, node, "type"), type);
}

static const char *type_name(hf_ctx *c, int32_t node) {
    size_t l;
    const char *s = kiln_tj_get_str(&c->j, node, "type", &l);
    return s ? s : "(no type)";
}

/* A JSON string node into a NUL-terminated copy in c->tmp. */
static const char *tmp_str(hf_ctx *c, int32_t node) {
    size_t l;
    const char *s = kiln_tj_str(&c->j, node, &l);
    c->tmp.len = 0;
    if (kiln_buf_append(&c->tmp, s, l)) return NULL;
    return c->tmp.data;
}

static kiln_status regex_escape(const char *s, size_t n, kiln_buf *out) {
    kiln_status st = KILN_OK;
    for (size_t i = 0; i < n && !st; i++) {
        if (strchr("\\^$.|?*+()[]{}", s[i])) st = kiln_buf_append(out, "\\", 1);
        if (!st) st = kiln_buf_append(out, s + i, 1);
    }
    if (!st && !out->data) st = kiln_buf_reserve(out, 1);
    return st;
}

/* ------------------------------------------------------------- normalizer */

static kiln_status load_normalizer(hf_ctx *c, int32_t node, bool *prepend, bool *replace) {
    kiln_tj *j = &c->j;
    kiln_tokenizer *t = c->t;
    if (node < 0 || kiln_tj_type_of(j, node) == KILN_TJ_NULL) return KILN_OK;
    if (tj_type_is(j, node, "Sequence")) {
        int32_t arr = kiln_tj_get(j, node, "normalizers");
        for (int32_t x = kiln_tj_first(j, arr); x >= 0; x = kiln_tj_next(j, x)) {
            kiln_status st = load_normalizer(c, x, prepend, replace);
            if (st) return st;
        }
        return KILN_OK;
    }
    if (tj_type_is(j, node, "Prepend")) {
        size_t l;
        const char *p = kiln_tj_get_str(j, node, "prepend", &l);
        if (!p || l != 3 || memcmp(p, "\xE2\x96\x81", 3))
            return KILN_FAIL(KILN_ERR_UNSUPPORTED, "%s: Prepend normalizer with a prepend other than \"▁\"",
                             c->path);
        *prepend = true;
        return KILN_OK;
    }
    if (tj_type_is(j, node, "Replace")) {
        int32_t pat = kiln_tj_get(j, node, "pattern");
        size_t pl, cl;
        const char *p = kiln_tj_get_str(j, pat, "String", &pl);
        const char *con = kiln_tj_get_str(j, node, "content", &cl);
        if (!p || pl != 1 || p[0] != ' ' || !con || cl != 3 || memcmp(con, "\xE2\x96\x81", 3))
            return KILN_FAIL(KILN_ERR_UNSUPPORTED,
                             "%s: only the Replace(\" \" -> \"▁\") normalizer is supported", c->path);
        *replace = true;
        return KILN_OK;
    }
    if (tj_type_is(j, node, "NFC")) {
        t->nfc = true;
        return KILN_OK;
    }
    return KILN_FAIL(KILN_ERR_UNSUPPORTED, "%s: normalizer type \"%s\" is not supported", c->path,
                     type_name(c, node));
}

/* ---------------------------------------------------------- pre-tokenizer */

static kiln_status add_stage(hf_ctx *c, kiln_tok_stage_kind kind, kiln_tok_stage **out) {
    kiln_tokenizer *t = c->t;
    if (t->n_stages >= KILN_TOK_MAX_STAGES)
        return KILN_FAIL(KILN_ERR_UNSUPPORTED, "%s: too many pre-tokenizer stages", c->path);
    kiln_tok_stage *s = &t->stages[t->n_stages++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    *out = s;
    return KILN_OK;
}

static kiln_status load_pre(hf_ctx *c, int32_t node) {
    kiln_status st = KILN_OK;
    kiln_tj *j = &c->j;
    kiln_tokenizer *t = c->t;
    kiln_buf pat = {0};
    kiln_tok_stage *sg = NULL;
    if (node < 0 || kiln_tj_type_of(j, node) == KILN_TJ_NULL) return KILN_OK;
    if (tj_type_is(j, node, "Sequence")) {
        int32_t arr = kiln_tj_get(j, node, "pretokenizers");
        for (int32_t x = kiln_tj_first(j, arr); x >= 0; x = kiln_tj_next(j, x)) KILN_TRY(load_pre(c, x));
    } else if (tj_type_is(j, node, "Split")) {
        int32_t p = kiln_tj_get(j, node, "pattern");
        size_t l;
        const char *re = kiln_tj_get_str(j, p, "Regex", &l);
        const char *lit = kiln_tj_get_str(j, p, "String", &l);
        if (re) {
            KILN_TRY(kiln_buf_append(&pat, re, l));
        } else {
            KILN_CHECK(lit != NULL, KILN_ERR_FORMAT, "%s: Split pre-tokenizer without a pattern", c->path);
            KILN_TRY(regex_escape(lit, l, &pat));
        }
        size_t bl;
        const char *beh = kiln_tj_get_str(j, node, "behavior", &bl);
        bool removed = false;
        if (beh && bl == 7 && !memcmp(beh, "Removed", 7))
            removed = true;
        else
            KILN_CHECK(beh && bl == 8 && !memcmp(beh, "Isolated", 8), KILN_ERR_UNSUPPORTED,
                       "%s: Split behavior \"%.*s\" is not supported (Isolated, Removed are)", c->path,
                       (int)(beh ? bl : 4), beh ? beh : "none");
        KILN_TRY(kiln_tok_add_regex_stage(t, pat.data, removed, kiln_tj_get_bool(j, node, "invert", false)));
    } else if (tj_type_is(j, node, "ByteLevel")) {
        c->saw_bytelevel_pre = true;
        t->byte_level = true;
        if (kiln_tj_get_bool(j, node, "add_prefix_space", false))
            KILN_TRY(add_stage(c, KILN_TOK_STAGE_BYTELEVEL_PREFIX, &sg));
        if (kiln_tj_get_bool(j, node, "use_regex", true)) KILN_TRY(kiln_tok_add_regex_stage(t, GPT2_PATTERN, false, false));
    } else if (tj_type_is(j, node, "Metaspace")) {
        size_t l;
        const char *rep = kiln_tj_get_str(j, node, "replacement", &l);
        KILN_CHECK(rep && l == 3 && !memcmp(rep, "\xE2\x96\x81", 3), KILN_ERR_UNSUPPORTED,
                   "%s: Metaspace with a replacement other than \"▁\"", c->path);
        KILN_TRY(add_stage(c, KILN_TOK_STAGE_METASPACE, &sg));
        sg->ms_split = kiln_tj_get_bool(j, node, "split", true);
        const char *sch = kiln_tj_get_str(j, node, "prepend_scheme", &l);
        if (sch)
            sg->ms_prepend = (l == 5 && !memcmp(sch, "first", 5)) ? 2 : (l == 5 && !memcmp(sch, "never", 5)) ? 0 : 1;
        else
            sg->ms_prepend = kiln_tj_get_bool(j, node, "add_prefix_space", true) ? 1 : 0;
    } else if (tj_type_is(j, node, "Digits")) {
        KILN_TRY(kiln_tok_add_regex_stage(t, kiln_tj_get_bool(j, node, "individual_digits", false) ? "\\p{N}" : "\\p{N}+",
                                          false, false));
    } else {
        KILN_CHECK(0, KILN_ERR_UNSUPPORTED, "%s: pre-tokenizer type \"%s\" is not supported", c->path,
                   type_name(c, node));
    }
fail:
    kiln_buf_free(&pat);
    return st;
}

/* ----------------------------------------------------------------- decoder */

static kiln_status load_decoder(hf_ctx *c, int32_t node) {
    kiln_tj *j = &c->j;
    kiln_tokenizer *t = c->t;
    if (node < 0 || kiln_tj_type_of(j, node) == KILN_TJ_NULL) return KILN_OK;
    if (tj_type_is(j, node, "Sequence")) {
        int32_t arr = kiln_tj_get(j, node, "decoders");
        for (int32_t x = kiln_tj_first(j, arr); x >= 0; x = kiln_tj_next(j, x)) {
            kiln_status st = load_decoder(c, x);
            if (st) return st;
        }
        return KILN_OK;
    }
    if (tj_type_is(j, node, "ByteLevel")) {
        c->saw_bytelevel_dec = true;
        return KILN_OK;
    }
    if (tj_type_is(j, node, "ByteFallback")) {
        t->byte_runs = true;
        return KILN_OK;
    }
    if (tj_type_is(j, node, "Replace") || tj_type_is(j, node, "Fuse"))
        return KILN_OK; /* ▁ -> ' ' is how non-byte-level tokens decode */
    if (tj_type_is(j, node, "Strip")) {
        double start = kiln_tj_num(j, kiln_tj_get(j, node, "start"));
        double stop = kiln_tj_num(j, kiln_tj_get(j, node, "stop"));
        size_t l;
        const char *con = kiln_tj_get_str(j, node, "content", &l);
        if (!con || l != 1 || con[0] != ' ' || start > 1 || stop != 0)
            return KILN_FAIL(KILN_ERR_UNSUPPORTED, "%s: only Strip(\" \", start<=1, stop=0) decoders are supported",
                             c->path);
        if (start == 1) t->strip_leading_space = true;
        return KILN_OK;
    }
    if (tj_type_is(j, node, "Metaspace")) {
        size_t l;
        const char *sch = kiln_tj_get_str(j, node, "prepend_scheme", &l);
        bool prep = sch ? !(l == 5 && !memcmp(sch, "never", 5)) : kiln_tj_get_bool(j, node, "add_prefix_space", true);
        if (prep) t->strip_leading_space = true;
        return KILN_OK;
    }
    return KILN_FAIL(KILN_ERR_UNSUPPORTED, "%s: decoder type \"%s\" is not supported", c->path, type_name(c, node));
}

/* ----------------------------------------------------------- post-processor */

static int32_t special_id(hf_ctx *c, int32_t tp, int32_t item) {
    /* item: {"SpecialToken": {"id": "<s>", ...}}; resolve through
     * tp.special_tokens[id].ids[0] or the vocabulary */
    kiln_tj *j = &c->j;
    int32_t sp = kiln_tj_get(j, item, "SpecialToken");
    size_t l;
    const char *name = kiln_tj_get_str(j, sp, "id", &l);
    if (!name) return -1;
    char key[256];
    if (l >= sizeof key) return -1;
    memcpy(key, name, l);
    key[l] = 0;
    int32_t ent = kiln_tj_get(j, kiln_tj_get(j, tp, "special_tokens"), key);
    int32_t ids = kiln_tj_get(j, ent, "ids");
    int32_t first = kiln_tj_first(j, ids);
    if (first >= 0 && kiln_tj_type_of(j, first) == KILN_TJ_NUM) return (int32_t)kiln_tj_num(j, first);
    return kiln_tokenizer_token_id(c->t, key);
}

static void load_post(hf_ctx *c, int32_t node, int32_t *bos, int32_t *eos) {
    kiln_tj *j = &c->j;
    if (node < 0 || kiln_tj_type_of(j, node) == KILN_TJ_NULL) return;
    if (tj_type_is(j, node, "Sequence")) {
        int32_t arr = kiln_tj_get(j, node, "processors");
        for (int32_t x = kiln_tj_first(j, arr); x >= 0; x = kiln_tj_next(j, x)) load_post(c, x, bos, eos);
        return;
    }
    if (tj_type_is(j, node, "TemplateProcessing")) {
        bool seen_seq = false;
        int32_t single = kiln_tj_get(j, node, "single");
        for (int32_t x = kiln_tj_first(j, single); x >= 0; x = kiln_tj_next(j, x)) {
            if (kiln_tj_get(j, x, "Sequence") >= 0) {
                seen_seq = true;
                continue;
            }
            int32_t id = special_id(c, node, x);
            if (id < 0) continue;
            if (!seen_seq && *bos < 0) *bos = id;
            if (seen_seq && *eos < 0) *eos = id;
        }
        return;
    }
    if (tj_type_is(j, node, "RobertaProcessing") || tj_type_is(j, node, "BertProcessing")) {
        int32_t cls = kiln_tj_get(j, node, "cls"), sep = kiln_tj_get(j, node, "sep");
        int32_t a = kiln_tj_first(j, cls), b = kiln_tj_first(j, sep);
        if (a >= 0 && kiln_tj_next(j, a) >= 0) *bos = (int32_t)kiln_tj_num(j, kiln_tj_next(j, a));
        if (b >= 0 && kiln_tj_next(j, b) >= 0) *eos = (int32_t)kiln_tj_num(j, kiln_tj_next(j, b));
        return;
    }
    /* ByteLevel and others add no tokens */
}

/* ------------------------------------------------------------------ loader */

static bool parse_id(const kiln_tj *j, int32_t node, int64_t *id) {
    if (kiln_tj_type_of(j, node) != KILN_TJ_NUM) return false;
    /* fast path: plain decimal digits */
    const char *p = j->buf + j->nodes[node].off;
    uint32_t n = j->nodes[node].len;
    int64_t v = 0;
    uint32_t i = 0;
    for (; i < n && i < 10 && p[i] >= '0' && p[i] <= '9'; i++) v = v * 10 + (p[i] - '0');
    if (i == n && n > 0 && n <= 10) {
        if (v >= (1 << 28)) return false;
        *id = v;
        return true;
    }
    double d = kiln_tj_num(j, node);
    if (d < 0 || d >= (1 << 28) || d != (double)(int64_t)d) return false;
    *id = (int64_t)d;
    return true;
}

static int32_t find_name(kiln_tokenizer *t, const char *const *names) {
    for (int i = 0; names[i]; i++) {
        int32_t id = kiln_tokenizer_token_id(t, names[i]);
        if (id >= 0) return id;
    }
    return -1;
}

kiln_status kiln_tok_load_hf_json(char *data, size_t len, const char *path, kiln_tokenizer **out) {
    kiln_status st = KILN_OK;
    hf_ctx c;
    memset(&c, 0, sizeof c);
    c.path = path;
    kiln_tok_builder b = {0};
    KILN_TRY(kiln_tj_parse(&c.j, data, len, path));
    kiln_tj *j = &c.j;
    int32_t root = 0;
    KILN_CHECK(kiln_tj_type_of(j, root) == KILN_TJ_OBJ, KILN_ERR_FORMAT, "%s: not a JSON object", path);
    int32_t model = kiln_tj_get(j, root, "model");
    KILN_CHECK(kiln_tj_type_of(j, model) == KILN_TJ_OBJ, KILN_ERR_FORMAT, "%s: no \"model\" object", path);
    int32_t mtype = kiln_tj_get(j, model, "type");
    if (mtype >= 0 && !kiln_tj_str_eq(j, mtype, "BPE")) {
        size_t l = 0;
        const char *s = kiln_tj_type_of(j, mtype) == KILN_TJ_STR ? kiln_tj_str(j, mtype, &l) : "?";
        KILN_CHECK(0, KILN_ERR_UNSUPPORTED, "%s: tokenizer model type \"%.*s\" is not supported (only BPE)", path,
                   (int)l, s);
    }
    int32_t vocab = kiln_tj_get(j, model, "vocab"), merges = kiln_tj_get(j, model, "merges");
    int32_t added = kiln_tj_get(j, root, "added_tokens");
    KILN_CHECK(kiln_tj_type_of(j, vocab) == KILN_TJ_OBJ, KILN_ERR_FORMAT, "%s: model.vocab is not an object", path);
    KILN_CHECK(merges < 0 || kiln_tj_type_of(j, merges) == KILN_TJ_ARR, KILN_ERR_FORMAT,
               "%s: model.merges is not an array", path);
    {
        size_t l;
        KILN_CHECK(!kiln_tj_get_str(j, model, "continuing_subword_prefix", &l) &&
                       !kiln_tj_get_str(j, model, "end_of_word_suffix", &l),
                   KILN_ERR_UNSUPPORTED, "%s: BPE continuing_subword_prefix / end_of_word_suffix are not supported",
                   path);
    }
    /* vocabulary size: the largest id + 1 */
    int64_t max_id = -1, id;
    for (int32_t x = kiln_tj_first(j, vocab); x >= 0; x = kiln_tj_next(j, x)) {
        KILN_CHECK(parse_id(j, x, &id), KILN_ERR_FORMAT, "%s: model.vocab entry \"%.*s\" has no valid id", path,
                   (int)KILN_MIN(j->nodes[x].key_len, 64), j->buf + j->nodes[x].key_off);
        if (id > max_id) max_id = id;
    }
    for (int32_t x = kiln_tj_first(j, added); x >= 0; x = kiln_tj_next(j, x)) {
        KILN_CHECK(parse_id(j, kiln_tj_get(j, x, "id"), &id), KILN_ERR_FORMAT,
                   "%s: added_tokens entry without a valid id", path);
        KILN_CHECK(kiln_tj_type_of(j, kiln_tj_get(j, x, "content")) == KILN_TJ_STR, KILN_ERR_FORMAT,
                   "%s: added token %lld has no content", path, (long long)id);
        if (id > max_id) max_id = id;
    }
    KILN_CHECK(max_id >= 0, KILN_ERR_FORMAT, "%s: empty vocabulary", path);
    {
        uint64_t count = j->nodes[vocab].count + (added >= 0 ? j->nodes[added].count : 0);
        KILN_CHECK((uint64_t)max_id < count * 2 + 1024, KILN_ERR_FORMAT,
                   "%s: token ids are too sparse (largest %lld for %llu tokens)", path, (long long)max_id,
                   (unsigned long long)count);
    }
    KILN_TRY(kiln_tok_new(KILN_TOK_FORMAT_HF_JSON, path, (int32_t)max_id + 1, &c.t));
    kiln_tokenizer *t = c.t;
    for (int32_t x = kiln_tj_first(j, vocab); x >= 0; x = kiln_tj_next(j, x)) {
        parse_id(j, x, &id);
        KILN_TRY(kiln_tok_set_token(t, &b, (int32_t)id, j->buf + j->nodes[x].key_off, j->nodes[x].key_len, 0));
    }
    for (int32_t x = kiln_tj_first(j, added); x >= 0; x = kiln_tj_next(j, x)) {
        parse_id(j, kiln_tj_get(j, x, "id"), &id);
        size_t l;
        const char *s = kiln_tj_get_str(j, x, "content", &l);
        KILN_CHECK(l > 0, KILN_ERR_FORMAT, "%s: added token %lld has empty content", path, (long long)id);
        KILN_TRY(kiln_tok_set_token(t, &b, (int32_t)id, s, l, 0));
    }
    KILN_TRY(kiln_tok_finish_vocab(t, &b));
    for (int32_t x = kiln_tj_first(j, added); x >= 0; x = kiln_tj_next(j, x)) {
        parse_id(j, kiln_tj_get(j, x, "id"), &id);
        kiln_tok_added a = {(int32_t)id, kiln_tj_get_bool(j, x, "special", false), kiln_tj_get_bool(j, x, "lstrip", false),
                            kiln_tj_get_bool(j, x, "rstrip", false), kiln_tj_get_bool(j, x, "single_word", false),
                            kiln_tj_get_bool(j, x, "normalized", false)};
        KILN_TRY(kiln_tok_add_added(t, &a));
    }
    /* model options */
    t->byte_fallback = kiln_tj_get_bool(j, model, "byte_fallback", false);
    t->ignore_merges = kiln_tj_get_bool(j, model, "ignore_merges", false);
    t->fuse_unk = kiln_tj_get_bool(j, model, "fuse_unk", false);
    {
        size_t l;
        const char *unk = kiln_tj_get_str(j, model, "unk_token", &l);
        if (unk) {
            int32_t u = kiln_tj_get(j, model, "unk_token");
            t->unk_id = kiln_tokenizer_token_id(t, tmp_str(&c, u));
        }
    }
    /* merges: rank = position; "a b" or ["a", "b"] */
    if (merges >= 0) {
        KILN_TRY(kiln_tok_merges_init(t, j->nodes[merges].count));
        int32_t rank = 0;
        size_t skipped = 0;
        kiln_buf cat = {0};
        for (int32_t x = kiln_tj_first(j, merges); x >= 0; x = kiln_tj_next(j, x), rank++) {
            const char *a, *bb;
            size_t al, bl;
            if (kiln_tj_type_of(j, x) == KILN_TJ_STR) {
                size_t l;
                const char *s = kiln_tj_str(j, x, &l);
                const char *sp = memchr(s, ' ', l);
                if (!sp || memchr(sp + 1, ' ', l - (size_t)(sp + 1 - s))) {
                    kiln_buf_free(&cat);
                    KILN_CHECK(0, KILN_ERR_FORMAT, "%s: merge %d \"%.*s\" is not two tokens separated by a space",
                               path, (int)rank, (int)KILN_MIN(l, 64), s);
                }
                a = s;
                al = (size_t)(sp - s);
                bb = sp + 1;
                bl = l - al - 1;
            } else if (kiln_tj_type_of(j, x) == KILN_TJ_ARR && j->nodes[x].count == 2 &&
                       kiln_tj_type_of(j, x + 1) == KILN_TJ_STR &&
                       kiln_tj_type_of(j, kiln_tj_next(j, x + 1)) == KILN_TJ_STR) {
                a = kiln_tj_str(j, x + 1, &al);
                bb = kiln_tj_str(j, kiln_tj_next(j, x + 1), &bl);
            } else {
                kiln_buf_free(&cat);
                KILN_CHECK(0, KILN_ERR_FORMAT, "%s: merge %d is neither \"a b\" nor [\"a\", \"b\"]", path, (int)rank);
            }
            cat.len = 0;
            if ((st = kiln_buf_append(&cat, a, al)) || (st = kiln_buf_append(&cat, bb, bl))) {
                kiln_buf_free(&cat);
                goto fail;
            }
            int32_t ia = kiln_tok_id(t, a, al), ib = kiln_tok_id(t, bb, bl);
            int32_t im = kiln_tok_id(t, cat.data, cat.len);
            if (ia < 0 || ib < 0 || im < 0) {
                skipped++;
                continue;
            }
            if ((st = kiln_tok_merges_add(t, ia, ib, rank, im))) {
                kiln_buf_free(&cat);
                goto fail;
            }
        }
        kiln_buf_free(&cat);
        if (skipped) KILN_WARN("%s: %zu merges name tokens missing from the vocabulary; ignored", path, skipped);
    }
    /* pipeline */
    bool prepend = false, replace = false;
    KILN_TRY(load_normalizer(&c, kiln_tj_get(j, root, "normalizer"), &prepend, &replace));
    if (replace) {
        t->spm_normalize = true;
        t->spm_prepend = prepend ? 1 : 0;
    } else {
        KILN_CHECK(!prepend, KILN_ERR_UNSUPPORTED, "%s: a Prepend normalizer without Replace(\" \", \"▁\")", path);
    }
    KILN_TRY(load_pre(&c, kiln_tj_get(j, root, "pre_tokenizer")));
    KILN_TRY(load_decoder(&c, kiln_tj_get(j, root, "decoder")));
    if (c.saw_bytelevel_dec && !t->byte_level) {
        /* ByteLevel decoder without the ByteLevel pre-tokenizer (some Qwen
         * and GPT-NeoX files): the vocabulary is still byte-level */
        t->byte_level = true;
    }
    KILN_CHECK(!(t->byte_level && t->spm_normalize), KILN_ERR_UNSUPPORTED,
               "%s: byte-level BPE combined with a ▁ normalizer is not supported", path);
    /* BOS / EOS: post-processor, else well-known names */
    int32_t bos = -1, eos = -1;
    load_post(&c, kiln_tj_get(j, root, "post_processor"), &bos, &eos);
    t->add_bos = bos >= 0;
    t->add_eos = eos >= 0;
    if (bos < 0) {
        static const char *const names[] = {"<|begin_of_text|>", "<s>", "<bos>", NULL};
        bos = find_name(t, names);
        /* Llama-family convention: BOS is added when the model has one */
        t->add_bos = bos >= 0;
    }
    if (eos < 0) {
        static const char *const names[] = {"<|end_of_text|>", "</s>", "<|endoftext|>", "<eos>", NULL};
        eos = find_name(t, names);
    }
    t->bos_id = bos;
    t->eos_id = eos;
    KILN_TRY(kiln_tok_finalize(t));
    *out = t;
    c.t = NULL;
fail:
    kiln_tokenizer_destroy(c.t);
    kiln_tj_free(&c.j);
    kiln_buf_free(&c.tmp);
    kiln_buf_free(&b.text);
    free(b.off);
    return st;
}
