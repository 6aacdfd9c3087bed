/*
 * chat_template.c -- the public chat-template API: find a model's template
 * (chat_template.jinja, written by newer transformers; else the
 * chat_template key of tokenizer_config.json, a string or a list of
 * {name, template} from which "default" is used; else chat_template.json),
 * its default variables (bos_token, eos_token, unk_token, pad_token from
 * tokenizer_config.json), and rendering with the variables transformers'
 * apply_chat_template passes: messages (with null-valued keys dropped, as
 * transformers does), tools=None, documents=None, add_generation_prompt,
 * then every extra variable, overriding the defaults.
 * Ownership: templates own their source, AST and defaults; render output is
 * returned owned. Thread-safety: templates are immutable after loading, so
 * renders may run concurrently.
 */
#include "chat.h"

#include <jansson.h>
#include <libgen.h>
#include <stdlib.h>

void kiln_chat_template_destroy(kiln_chat_template *t) {
    if (!t) return;
    kiln_ja_free(&t->ast_arena);
    free(t->name);
    free(t->source);
    json_decref((json_t *)t->defaults);
    free(t);
}

kiln_status kiln_chat_template_from_string(const char *source, const char *name, kiln_chat_template **out) {
    kiln_status st = KILN_OK;
    kiln_chat_template *t = NULL;
    KILN_CHECK(source && out, KILN_ERR_INVALID_ARGUMENT, "kiln_chat_template_from_string: NULL argument");
    t = calloc(1, sizeof *t);
    KILN_CHECK_ALLOC(t);
    t->name = kiln_strdup(name && *name ? name : "(string)");
    t->source = kiln_strdup(source);
    t->defaults = json_object();
    KILN_CHECK_ALLOC(t->name);
    KILN_CHECK_ALLOC(t->source);
    KILN_CHECK_ALLOC(t->defaults);
    KILN_TRY(kiln_jinja_parse(t->source, strlen(t->source), t->name, &t->ast_arena, &t->root));
    *out = t;
    return KILN_OK;
fail:
    kiln_chat_template_destroy(t);
    return st;
}

static json_t *load_json(const char *path, kiln_status *st) {
    json_error_t je;
    json_t *j = json_load_file(path, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &je);
    if (!j) *st = KILN_FAIL(KILN_ERR_FORMAT, "%s: invalid JSON at line %d: %s", path, je.line, je.text);
    return j;
}

/* The template text in a tokenizer_config.json / chat_template.json
 * object: a string, or a list of {name, template} ("default" wins). */
static kiln_status template_of(json_t *cfg, const char *path, const char **out) {
    *out = NULL;
    json_t *ct = json_object_get(cfg, "chat_template");
    if (!ct || json_is_null(ct)) return KILN_OK;
    if (json_is_string(ct)) {
        *out = json_string_value(ct);
        return KILN_OK;
    }
    if (json_is_array(ct)) {
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            json_t *nm = json_object_get(e, "name"), *tp = json_object_get(e, "template");
            if (json_is_string(nm) && !strcmp(json_string_value(nm), "default") && json_is_string(tp)) {
                *out = json_string_value(tp);
                return KILN_OK;
            }
        }
        return KILN_FAIL(KILN_ERR_NOT_FOUND, "%s: chat_template lists named templates but none is named \"default\"",
                         path);
    }
    return KILN_FAIL(KILN_ERR_FORMAT, "%s: chat_template must be a string or a list of {name, template}", path);
}

/* bos_token etc. from a tokenizer_config.json object into defaults. */
static void token_defaults(json_t *cfg, json_t *defaults) {
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    for (size_t i = 0; i < KILN_ARRAY_LEN(keys); i++) {
        json_t *v = json_object_get(cfg, keys[i]);
        if (json_is_object(v)) v = json_object_get(v, "content");
        if (json_is_string(v)) json_object_set(defaults, keys[i], v);
    }
}

kiln_status kiln_chat_template_use_model_tokens(kiln_chat_template *t, const char *model_dir) {
    kiln_status st = KILN_OK;
    char *p = kiln_path_join(model_dir, "tokenizer_config.json");
    json_t *cfg = NULL;
    KILN_CHECK_ALLOC(p);
    KILN_CHECK(kiln_path_exists(p), KILN_ERR_NOT_FOUND, "no tokenizer_config.json in %s", model_dir);
    cfg = load_json(p, &st);
    if (!cfg) goto fail;
    json_object_clear((json_t *)t->defaults);
    token_defaults(cfg, (json_t *)t->defaults);
fail:
    json_decref(cfg);
    free(p);
    return st;
}

kiln_status kiln_chat_template_load(const char *path, kiln_chat_template **out) {
    kiln_status st = KILN_OK;
    char *p = NULL, *src = NULL, *dir = NULL, *name = NULL;
    json_t *cfg = NULL, *ctj = NULL;
    const char *text = NULL;
    KILN_CHECK(path && out, KILN_ERR_INVALID_ARGUMENT, "kiln_chat_template_load: NULL argument");
    if (kiln_path_is_dir(path)) {
        dir = kiln_strdup(path);
        p = kiln_path_join(path, "tokenizer_config.json");
        KILN_CHECK_ALLOC(p);
        if (kiln_path_exists(p) && !(cfg = load_json(p, &st))) goto fail;
        free(p);
        p = kiln_path_join(path, "chat_template.jinja");
        KILN_CHECK_ALLOC(p);
        if (kiln_path_exists(p)) {
            KILN_TRY(kiln_read_file(p, &src, NULL));
            text = src;
            name = kiln_strdup(p);
        } else if (cfg) {
            free(p);
            p = kiln_path_join(path, "tokenizer_config.json");
            KILN_CHECK_ALLOC(p);
            KILN_TRY(template_of(cfg, p, &text));
            if (text) name = kiln_strdup(p);
        }
        if (!text) {
            free(p);
            p = kiln_path_join(path, "chat_template.json");
            KILN_CHECK_ALLOC(p);
            if (kiln_path_exists(p)) {
                if (!(ctj = load_json(p, &st))) goto fail;
                KILN_TRY(template_of(ctj, p, &text));
                if (text) name = kiln_strdup(p);
            }
        }
        KILN_CHECK(text != NULL, KILN_ERR_NOT_FOUND,
                   "no chat template in %s (looked for chat_template.jinja, the chat_template key of "
                   "tokenizer_config.json and chat_template.json)",
                   path);
    } else {
        KILN_CHECK(kiln_path_exists(path), KILN_ERR_NOT_FOUND, "chat template file %s does not exist", path);
        name = kiln_strdup(path);
        KILN_CHECK_ALLOC(name);
        if (kiln_str_ends_with(path, ".json")) {
            if (!(ctj = load_json(path, &st))) goto fail;
            KILN_TRY(template_of(ctj, path, &text));
            KILN_CHECK(text != NULL, KILN_ERR_NOT_FOUND, "%s has no chat_template", path);
            cfg = json_incref(ctj);
        } else {
            KILN_TRY(kiln_read_file(path, &src, NULL));
            text = src;
        }
        char *tmp = kiln_strdup(path);
        KILN_CHECK_ALLOC(tmp);
        dir = kiln_strdup(dirname(tmp));
        free(tmp);
        if (!cfg) { /* a template beside a tokenizer_config.json takes its tokens */
            free(p);
            p = kiln_path_join(dir, "tokenizer_config.json");
            KILN_CHECK_ALLOC(p);
            if (kiln_path_exists(p)) {
                kiln_status ignored = KILN_OK;
                cfg = load_json(p, &ignored);
                if (!cfg) kiln_clear_error();
            }
        }
    }
    KILN_CHECK_ALLOC(name);
    KILN_TRY(kiln_chat_template_from_string(text, name, out));
    if (cfg) token_defaults(cfg, (json_t *)(*out)->defaults);
fail:
    free(p);
    free(src);
    free(dir);
    free(name);
    json_decref(cfg);
    json_decref(ctj);
    return st;
}

static kiln_status add_var(kiln_vec *vars, const char *name, kiln_jv v) {
    kiln_jvar x = {name, (uint32_t)strlen(name), v};
    return kiln_vec_push(vars, &x);
}

kiln_status kiln_chat_render(const kiln_chat_template *t, const char *messages_json, bool add_generation_prompt,
                             const char *extra_json, char **out) {
    kiln_status st = KILN_OK;
    json_t *msgs = NULL, *extra = NULL;
    kiln_jarena arena = {NULL, 0, KILN_CHAT_MAX_ARENA};
    kiln_vec vars = KILN_VEC_INIT(kiln_jvar);
    kiln_buf buf = {0};
    json_error_t je;
    KILN_CHECK(t && out, KILN_ERR_INVALID_ARGUMENT, "kiln_chat_render: NULL argument");
    msgs = json_loads(messages_json ? messages_json : "[]", JSON_ALLOW_NUL, &je);
    KILN_CHECK(msgs, KILN_ERR_INVALID_ARGUMENT, "messages are not valid JSON (line %d): %s", je.line, je.text);
    KILN_CHECK(json_is_array(msgs), KILN_ERR_INVALID_ARGUMENT, "messages must be a JSON array");
    if (extra_json && *extra_json) {
        extra = json_loads(extra_json, JSON_ALLOW_NUL, &je);
        KILN_CHECK(extra, KILN_ERR_INVALID_ARGUMENT, "extra template variables are not valid JSON (line %d): %s",
                   je.line, je.text);
        KILN_CHECK(json_is_object(extra), KILN_ERR_INVALID_ARGUMENT, "extra template variables must be a JSON object");
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)t->defaults, k, v) {
        kiln_jv x;
        KILN_TRY(kiln_jv_from_json(&arena, v, false, &x));
        KILN_TRY(add_var(&vars, k, x));
    }
    KILN_TRY(add_var(&vars, "tools", kiln_jv_none()));
    KILN_TRY(add_var(&vars, "documents", kiln_jv_none()));
    if (extra)
        json_object_foreach(extra, k, v) {
            if (!strcmp(k, "messages") || !strcmp(k, "add_generation_prompt")) continue;
            kiln_jv x;
            KILN_TRY(kiln_jv_from_json(&arena, v, false, &x));
            KILN_TRY(add_var(&vars, k, x));
        }
    {
        kiln_jv m;
        KILN_TRY(kiln_jv_from_json(&arena, msgs, true, &m));
        KILN_TRY(add_var(&vars, "messages", m));
        KILN_TRY(add_var(&vars, "add_generation_prompt", kiln_jv_bool(add_generation_prompt)));
    }
    KILN_TRY(kiln_jinja_render(t->root, t->name, vars.data, (int)vars.len, &arena, &buf));
    *out = kiln_buf_steal(&buf);
    KILN_CHECK_ALLOC(*out);
fail:
    kiln_buf_free(&buf);
    kiln_vec_free(&vars);
    kiln_ja_free(&arena);
    json_decref(msgs);
    json_decref(extra);
    return st;
}
