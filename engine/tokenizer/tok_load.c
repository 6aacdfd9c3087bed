/*
 * tok_load.c -- the public tokenizer API: format detection (a file, or a
 * model directory: tokenizer.json, else tokenizer.model -- tiktoken or
 * SentencePiece by content -- else original/tokenizer.model), the
 * tokenizer_config.json settings (add_bos_token, add_eos_token, bos_token,
 * eos_token), and kiln_tokenize / kiln_detokenize and the vocabulary
 * queries.
 * Ownership: as documented in kiln.h. Thread-safety: loading touches no
 * shared state; a loaded tokenizer may be used from any thread.
 */
#include "tokenizer.h"

#include <jansson.h>
#include <libgen.h>
#include <stdlib.h>

/* "<s>" or {"content": "<s>", ...}; NULL when absent, "" when null. */
static const char *token_string(json_t *v) {
    if (!v) return NULL;
    if (json_is_null(v)) return "";
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v)) {
        json_t *c = json_object_get(v, "content");
        if (json_is_string(c)) return json_string_value(c);
    }
    return NULL;
}

kiln_status kiln_tok_apply_config(kiln_tokenizer *t, const void *config_json) {
    json_t *cfg = (json_t *)config_json;
    if (!json_is_object(cfg)) return KILN_OK;
    const char *bos = token_string(json_object_get(cfg, "bos_token"));
    const char *eos = token_string(json_object_get(cfg, "eos_token"));
    if (bos) {
        int32_t id = *bos ? kiln_tokenizer_token_id(t, bos) : -1;
        if (id >= 0 || !*bos) t->bos_id = id;
        else KILN_WARN("%s: bos_token \"%s\" of tokenizer_config.json is not in the vocabulary", t->source, bos);
    }
    if (eos) {
        int32_t id = *eos ? kiln_tokenizer_token_id(t, eos) : -1;
        if (id >= 0 || !*eos) t->eos_id = id;
        else KILN_WARN("%s: eos_token \"%s\" of tokenizer_config.json is not in the vocabulary", t->source, eos);
    }
    json_t *ab = json_object_get(cfg, "add_bos_token"), *ae = json_object_get(cfg, "add_eos_token");
    if (json_is_boolean(ab)) t->add_bos = json_is_true(ab);
    if (json_is_boolean(ae)) t->add_eos = json_is_true(ae);
    return KILN_OK;
}

static kiln_status load_config(const char *dir, json_t **out) {
    *out = NULL;
    char *p = kiln_path_join(dir, "tokenizer_config.json");
    if (!p) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    if (!kiln_path_exists(p)) {
        free(p);
        return KILN_OK;
    }
    json_error_t je;
    json_t *j = json_load_file(p, JSON_DECODE_INT_AS_REAL, &je);
    if (!j) {
        kiln_status st = KILN_FAIL(KILN_ERR_FORMAT, "%s: invalid JSON at line %d: %s", p, je.line, je.text);
        free(p);
        return st;
    }
    free(p);
    *out = j;
    return KILN_OK;
}

static kiln_status load_file(const char *path, json_t *cfg, kiln_tokenizer **out) {
    kiln_status st = KILN_OK;
    char *data = NULL;
    size_t len = 0;
    KILN_TRY(kiln_read_file(path, &data, &len));
    size_t i = 0;
    while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t')) i++;
    if (i < len && data[i] == '{') {
        KILN_TRY(kiln_tok_load_hf_json(data, len, path, out));
    } else if (kiln_tok_is_tiktoken(data, len)) {
        KILN_TRY(kiln_tok_load_tiktoken(data, len, path, cfg, out));
    } else {
        KILN_CHECK(len > 0, KILN_ERR_FORMAT, "%s: empty tokenizer file", path);
        st = kiln_tok_load_spm(data, len, path, out);
        if (st == KILN_ERR_FORMAT)
            kiln_error_context("%s is neither tokenizer.json, a tiktoken BPE file nor a SentencePiece model", path);
        if (st) goto fail;
    }
fail:
    free(data);
    return st;
}

kiln_status kiln_tokenizer_load(const char *path, kiln_tokenizer **out) {
    kiln_status st = KILN_OK;
    char *file = NULL, *dir = NULL;
    json_t *cfg = NULL;
    kiln_tokenizer *t = NULL;
    if (!path || !out) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kiln_tokenizer_load: NULL argument");
    if (kiln_path_is_dir(path)) {
        static const char *const names[] = {"tokenizer.json", "tokenizer.model", "original/tokenizer.model"};
        for (size_t k = 0; k < KILN_ARRAY_LEN(names) && !file; k++) {
            char *p = kiln_path_join(path, names[k]);
            KILN_CHECK_ALLOC(p);
            if (kiln_path_exists(p))
                file = p;
            else
                free(p);
        }
        KILN_CHECK(file != NULL, KILN_ERR_NOT_FOUND,
                   "no tokenizer in %s (looked for tokenizer.json, tokenizer.model, original/tokenizer.model)", path);
        dir = kiln_strdup(path);
    } else {
        KILN_CHECK(kiln_path_exists(path), KILN_ERR_NOT_FOUND, "tokenizer file %s does not exist", path);
        file = kiln_strdup(path);
        char *tmp = kiln_strdup(path);
        KILN_CHECK_ALLOC(tmp);
        dir = kiln_strdup(dirname(tmp));
        free(tmp);
    }
    KILN_CHECK_ALLOC(file);
    KILN_CHECK_ALLOC(dir);
    KILN_TRY(load_config(dir, &cfg));
    KILN_TRY(load_file(file, cfg, &t));
    KILN_TRY(kiln_tok_apply_config(t, cfg));
    *out = t;
    t = NULL;
fail:
    kiln_tokenizer_destroy(t);
    json_decref(cfg);
    free(file);
    free(dir);
    return st;
}

kiln_status kiln_tokenize(const kiln_tokenizer *tok, const char *text, size_t len, const kiln_encode_options *opt,
                          int32_t **ids, size_t *n_ids) {
    if (!tok || !ids || !n_ids || (!text && len))
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kiln_tokenize: NULL argument");
    kiln_encode_options o = opt ? *opt : (kiln_encode_options){true, true};
    kiln_vec v = KILN_VEC_INIT(int32_t);
    kiln_status st = kiln_tok_encode(tok, text ? text : "", len, o.add_special, o.parse_special, &v);
    if (!st && !v.data) st = kiln_vec_resize(&v, 1), v.len = 0;
    if (st) {
        kiln_vec_free(&v);
        return st;
    }
    *ids = v.data;
    *n_ids = v.len;
    return KILN_OK;
}

kiln_status kiln_detokenize(const kiln_tokenizer *tok, const int32_t *ids, size_t n_ids, bool skip_special,
                            char **text, size_t *len) {
    if (!tok || !text || (!ids && n_ids)) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kiln_detokenize: NULL argument");
    kiln_buf out = {0};
    kiln_status st = kiln_tok_decode(tok, ids, n_ids, skip_special, &out);
    if (st) {
        kiln_buf_free(&out);
        return st;
    }
    if (len) *len = out.len;
    *text = kiln_buf_steal(&out);
    if (!*text) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    return KILN_OK;
}

int32_t kiln_tokenizer_vocab_size(const kiln_tokenizer *tok) { return tok ? tok->n_vocab : 0; }
int32_t kiln_tokenizer_bos_id(const kiln_tokenizer *tok) { return tok ? tok->bos_id : -1; }
int32_t kiln_tokenizer_eos_id(const kiln_tokenizer *tok) { return tok ? tok->eos_id : -1; }

const char *kiln_tokenizer_token_text(const kiln_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_vocab || (tok->flags[id] & KILN_TOKF_HOLE)) return NULL;
    return tok->text_blob + tok->text_off[id];
}

int32_t kiln_tokenizer_token_id(const kiln_tokenizer *tok, const char *text) {
    if (!tok || !text) return -1;
    return kiln_tok_id(tok, text, strlen(text));
}
