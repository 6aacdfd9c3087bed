/*
 * api_decode.c -- request bodies to validated requests: the JSON pre-scan
 * (nesting depth, numbers too large to represent), Jansson parsing with the
 * error position, and the field-by-field checks of the completions, chat,
 * tokenize and detokenize requests. Every rejection is an api_error naming
 * the parameter and, for ranges, the range.
 * Ownership: api_request / api_tokenize_req own their strings and arrays.
 * Thread-safety: pure functions.
 */
#include "api.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ errors */

bool api_fail(api_error *e, int status, const char *param, const char *code, const char *fmt, ...) {
    e->status = status;
    e->type = status >= 500 ? "server_error" : "invalid_request_error";
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return false;
}

char *api_error_json(const api_error *e) {
    json_t *o = json_object(), *in = json_object();
    if (!o || !in) {
        json_decref(o);
        json_decref(in);
        return NULL;
    }
    /* messages may quote user bytes: keep them valid UTF-8 */
    api_buf msg = {0};
    api_utf8 u = {0};
    api_utf8_feed(&u, e->message, strlen(e->message), true, &msg);
    json_object_set_new(in, "message", msg.data ? json_stringn(msg.data, msg.len) : json_string(""));
    api_buf_free(&msg);
    json_object_set_new(in, "type", json_string(e->type ? e->type : "invalid_request_error"));
    json_object_set_new(in, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(in, "code", e->code ? json_string(e->code) : json_null());
    json_object_set_new(o, "error", in);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* ------------------------------------------------------------- pre-scan */

/* Length of the JSON number literal at s[0..n), 0 if none. *is_int: no
 * fraction or exponent. */
static size_t number_extent(const char *s, size_t n, bool *is_int) {
    size_t i = 0;
    *is_int = true;
    if (i < n && s[i] == '-') i++;
    size_t d0 = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == d0) return 0;
    if (i < n && s[i] == '.') {
        *is_int = false;
        i++;
        size_t f0 = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == f0) return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        *is_int = false;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t e0 = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == e0) return 0;
    }
    return i;
}

/* True when Jansson would reject the literal as too large ("too big
 * integer" / "real number overflow"). */
static bool number_overflows(const char *s, size_t n, bool is_int) {
    char small[64];
    char *tmp = n < sizeof small ? small : malloc(n + 1);
    if (!tmp) return false;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    char *end = NULL;
    bool over = false;
    errno = 0;
    if (is_int) {
        (void)strtoll(tmp, &end, 10);
        over = errno == ERANGE;
    } else {
        double v = strtod(tmp, &end);
        over = errno == ERANGE && isinf(v);
    }
    if (end != tmp + n) over = false;
    if (tmp != small) free(tmp);
    return over;
}

json_t *api_parse_body(const char *body, size_t len, api_error *err) {
    char *buf = malloc(len + 1);
    if (!buf) {
        api_fail(err, 500, NULL, NULL, "out of memory reading a %zu-byte body", len);
        return NULL;
    }
    if (len) memcpy(buf, body, len);
    buf[len] = 0;
    size_t depth = 0;
    for (size_t i = 0; i < len;) {
        char c = buf[i];
        if (c == '"') {
            for (i++; i < len && buf[i] != '"'; i++)
                if (buf[i] == '\\') i++;
            i++;
            continue;
        }
        if (c == '{' || c == '[') {
            if (++depth > API_MAX_DEPTH) {
                free(buf);
                api_fail(err, 400, NULL, "invalid_json",
                         "Invalid JSON: nesting deeper than %d levels at byte %zu", API_MAX_DEPTH, i);
                return NULL;
            }
        } else if (c == '}' || c == ']') {
            if (depth) depth--;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            bool is_int;
            size_t n = number_extent(buf + i, len - i, &is_int);
            if (n == 0) {
                i++;
                continue;
            }
            if (number_overflows(buf + i, n, is_int)) {
                /* a literal that overflows is at least 5 bytes ("1e309"),
                 * 19 for an integer: the sentinel fits in its place */
                const char *rep = buf[i] == '-' ? "-1e308" : "1e308";
                size_t rl = strlen(rep);
                if (rl <= n) {
                    memcpy(buf + i, rep, rl);
                    memset(buf + i + rl, ' ', n - rl);
                }
            }
            i += n;
            continue;
        }
        i++;
    }
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_DECODE_ANY, &je);
    free(buf);
    if (!root) {
        api_fail(err, 400, NULL, "invalid_json", "Invalid JSON at line %d, column %d (byte %d): %s", je.line,
                 je.column, je.position, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        static const char *names[] = {"an object", "an array", "a string", "an integer", "a number", "true",
                                      "false", "null"};
        api_fail(err, 400, NULL, "invalid_json", "The request body must be a JSON object, not %s",
                 names[json_typeof(root)]);
        json_decref(root);
        return NULL;
    }
    return root;
}

/* -------------------------------------------------------- field helpers */

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Absent and null fields keep their defaults. */
static const json_t *field(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

static bool get_bool(const json_t *o, const char *key, bool *out, api_error *err) {
    const json_t *v = field(o, key);
    if (!v) return true;
    if (!json_is_boolean(v)) return api_fail(err, 400, key, NULL, "'%s' must be a boolean, got %s", key, type_name(v));
    *out = json_is_true(v);
    return true;
}

static bool get_number(const json_t *o, const char *key, double *out, bool *set, api_error *err) {
    const json_t *v = field(o, key);
    if (set) *set = v != NULL;
    if (!v) return true;
    if (!json_is_number(v)) return api_fail(err, 400, key, NULL, "'%s' must be a number, got %s", key, type_name(v));
    *out = json_number_value(v);
    return true;
}

/* An integer, or a number with no fractional part (10.0). */
static bool get_integral(const json_t *o, const char *key, double *out, bool *set, api_error *err) {
    const json_t *v = field(o, key);
    if (set) *set = v != NULL;
    if (!v) return true;
    if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
        return true;
    }
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v))) {
        *out = json_real_value(v);
        return true;
    }
    return api_fail(err, 400, key, NULL, "'%s' must be an integer, got %s%s", key, type_name(v),
                    json_is_real(v) ? " with a fractional part" : "");
}

static bool get_int_range(const json_t *o, const char *key, int lo, int hi, int *out, bool *set, api_error *err) {
    double d = 0;
    bool s = false;
    if (!get_integral(o, key, &d, &s, err)) return false;
    if (set) *set = s;
    if (!s) return true;
    if (d < lo || d > hi) return api_fail(err, 400, key, NULL, "'%s' must be in [%d, %d], got %.15g", key, lo, hi, d);
    *out = (int)d;
    return true;
}

static bool get_float_range(const json_t *o, const char *key, double lo, double hi, bool lo_open, float *out,
                            api_error *err) {
    double d = 0;
    bool s = false;
    if (!get_number(o, key, &d, &s, err)) return false;
    if (!s) return true;
    if (!(lo_open ? d > lo : d >= lo) || !(d <= hi))
        return api_fail(err, 400, key, NULL, "'%s' must be in %c%g, %g], got %g", key, lo_open ? '(' : '[', lo, hi,
                        d);
    *out = (float)d;
    return true;
}

static bool get_string(const json_t *o, const char *key, char **out, api_error *err) {
    const json_t *v = field(o, key);
    if (!v) return true;
    if (!json_is_string(v)) return api_fail(err, 400, key, NULL, "'%s' must be a string, got %s", key, type_name(v));
    *out = strdup(json_string_value(v));
    if (!*out) return api_fail(err, 500, NULL, NULL, "out of memory");
    return true;
}

static bool oom(api_error *err) { return api_fail(err, 500, NULL, NULL, "out of memory decoding the request"); }

/* A token-id array: integers in [0, vocab). */
static bool get_ids(const json_t *arr, const char *param, int vocab, int32_t **out, int *n_out, api_error *err) {
    size_t n = json_array_size(arr);
    int32_t *ids = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!ids) return oom(err);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v)) {
            free(ids);
            return api_fail(err, 400, param, NULL, "'%s' item %zu must be an integer token id, got %s", param, i,
                            type_name(v));
        }
        json_int_t x = json_integer_value(v);
        if (x < 0 || x > INT32_MAX || (vocab > 0 && x >= vocab)) {
            free(ids);
            if (vocab > 0)
                return api_fail(err, 400, param, NULL,
                                "'%s' item %zu: token id %lld is outside the vocabulary [0, %d)", param, i,
                                (long long)x, vocab);
            return api_fail(err, 400, param, NULL, "'%s' item %zu: token id %lld is negative or too large", param,
                            i, (long long)x);
        }
        ids[i] = (int32_t)x;
    }
    *out = ids;
    *n_out = (int)n;
    return true;
}

/* ---------------------------------------------------------- messages */

/* Normalize chat messages: content as one string; other keys kept. Returns
 * owned JSON text. */
static bool decode_messages(const json_t *root, char **out, api_error *err) {
    const json_t *msgs = json_object_get(root, "messages");
    if (!msgs || json_is_null(msgs)) return api_fail(err, 400, "messages", NULL, "The request has no 'messages'");
    if (!json_is_array(msgs))
        return api_fail(err, 400, "messages", NULL, "'messages' must be an array, got %s", type_name(msgs));
    if (json_array_size(msgs) == 0) return api_fail(err, 400, "messages", NULL, "'messages' must not be empty");
    json_t *norm = json_array();
    if (!norm) return oom(err);
    char param[64];
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) {
            json_decref(norm);
            return api_fail(err, 400, param, NULL, "'%s' must be an object, got %s", param, type_name(m));
        }
        const json_t *role = json_object_get(m, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role) {
            json_decref(norm);
            return api_fail(err, 400, param, NULL, "'%s' is missing", param);
        }
        if (!json_is_string(role) || json_string_length(role) == 0) {
            json_decref(norm);
            return api_fail(err, 400, param, NULL, "'%s' must be a non-empty string, got %s", param,
                            json_is_string(role) ? "an empty string" : type_name(role));
        }
        json_t *nm = json_deep_copy(m);
        if (!nm) {
            json_decref(norm);
            return oom(err);
        }
        const json_t *content = json_object_get(m, "content");
        snprintf(param, sizeof param, "messages[%zu].content", i);
        if (content && json_is_array(content)) {
            api_buf text = {0};
            size_t k;
            const json_t *part;
            json_array_foreach(content, k, part) {
                const json_t *type = json_is_object(part) ? json_object_get(part, "type") : NULL;
                const json_t *t = json_is_object(part) ? json_object_get(part, "text") : NULL;
                if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
                    !json_is_string(t)) {
                    api_buf_free(&text);
                    json_decref(nm);
                    json_decref(norm);
                    if (json_is_object(part) && json_is_string(type) && strcmp(json_string_value(type), "text"))
                        return api_fail(err, 400, param, NULL,
                                        "'%s' part %zu has type '%.64s'; only text parts are supported", param, k,
                                        json_string_value(type));
                    return api_fail(err, 400, param, NULL,
                                    "'%s' part %zu must be an object {\"type\": \"text\", \"text\": string}", param,
                                    k);
                }
                if (k) api_buf_puts(&text, "\n");
                api_buf_put(&text, json_string_value(t), json_string_length(t));
            }
            json_t *s = json_stringn(text.data ? text.data : "", text.len);
            api_buf_free(&text);
            if (!s || text.oom) {
                json_decref(s);
                json_decref(nm);
                json_decref(norm);
                return oom(err);
            }
            json_object_set_new(nm, "content", s);
        } else if (content && !json_is_string(content) && !json_is_null(content)) {
            json_decref(nm);
            json_decref(norm);
            return api_fail(err, 400, param, NULL, "'%s' must be a string, an array of text parts or null, got %s",
                            param, type_name(content));
        }
        json_array_append_new(norm, nm);
    }
    *out = json_dumps(norm, JSON_COMPACT);
    json_decref(norm);
    return *out ? true : oom(err);
}

/* chat_template_kwargs (an object) plus tools, as template variables. */
static bool decode_template_extra(const json_t *root, char **out, api_error *err) {
    const json_t *kw = field(root, "chat_template_kwargs");
    const json_t *tools = field(root, "tools");
    if (kw && !json_is_object(kw))
        return api_fail(err, 400, "chat_template_kwargs", NULL, "'chat_template_kwargs' must be an object, got %s",
                        type_name(kw));
    if (tools && !json_is_array(tools))
        return api_fail(err, 400, "tools", NULL, "'tools' must be an array, got %s", type_name(tools));
    if (!kw && !tools) return true;
    json_t *x = kw ? json_deep_copy(kw) : json_object();
    if (!x) return oom(err);
    if (tools) json_object_set(x, "tools", (json_t *)tools);
    *out = json_dumps(x, JSON_COMPACT);
    json_decref(x);
    return *out ? true : oom(err);
}

/* ------------------------------------------------------------- prompts */

static bool decode_prompt(const json_t *root, const api_limits *lim, api_request *r, api_error *err) {
    const json_t *p = json_object_get(root, "prompt");
    static const char *shape =
        "'prompt' must be a string, a list of strings, a list of token ids or a list of token-id lists";
    if (!p || json_is_null(p)) return api_fail(err, 400, "prompt", NULL, "The request has no 'prompt'");
    if (json_is_string(p)) {
        if (json_string_length(p) == 0) return api_fail(err, 400, "prompt", NULL, "'prompt' is empty");
        r->prompts = calloc(1, sizeof *r->prompts);
        if (!r->prompts) return oom(err);
        r->n_prompts = 1;
        r->prompts[0].text_len = json_string_length(p);
        r->prompts[0].text = malloc(r->prompts[0].text_len + 1);
        if (!r->prompts[0].text) return oom(err);
        memcpy(r->prompts[0].text, json_string_value(p), r->prompts[0].text_len + 1);
        return true;
    }
    if (!json_is_array(p)) return api_fail(err, 400, "prompt", NULL, "%s, got %s", shape, type_name(p));
    size_t n = json_array_size(p);
    if (n == 0) return api_fail(err, 400, "prompt", NULL, "'prompt' is an empty list");
    const json_t *first = json_array_get(p, 0);
    if (json_is_integer(first)) { /* one prompt of token ids */
        r->prompts = calloc(1, sizeof *r->prompts);
        if (!r->prompts) return oom(err);
        r->n_prompts = 1;
        return get_ids(p, "prompt", lim->vocab_size, &r->prompts[0].ids, &r->prompts[0].n_ids, err);
    }
    if (n > API_MAX_PROMPTS)
        return api_fail(err, 400, "prompt", NULL, "'prompt' holds %zu prompts; at most %d are allowed", n,
                        API_MAX_PROMPTS);
    r->prompts = calloc(n, sizeof *r->prompts);
    if (!r->prompts) return oom(err);
    r->n_prompts = (int)n;
    bool strings = json_is_string(first);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(p, i);
        char param[48];
        snprintf(param, sizeof param, "prompt[%zu]", i);
        if (strings ? !json_is_string(v) : !json_is_array(v))
            return api_fail(err, 400, "prompt", NULL, "%s; item %zu is %s", shape, i, type_name(v));
        if (strings) {
            if (json_string_length(v) == 0) return api_fail(err, 400, "prompt", NULL, "'%s' is empty", param);
            r->prompts[i].text_len = json_string_length(v);
            r->prompts[i].text = malloc(r->prompts[i].text_len + 1);
            if (!r->prompts[i].text) return oom(err);
            memcpy(r->prompts[i].text, json_string_value(v), r->prompts[i].text_len + 1);
        } else {
            if (json_array_size(v) == 0) return api_fail(err, 400, "prompt", NULL, "'%s' is an empty list", param);
            if (!get_ids(v, "prompt", lim->vocab_size, &r->prompts[i].ids, &r->prompts[i].n_ids, err)) return false;
        }
    }
    return true;
}

static bool decode_stop(const json_t *root, api_request *r, api_error *err) {
    const json_t *s = field(root, "stop");
    if (!s) return true;
    size_t n = 1;
    if (json_is_array(s)) n = json_array_size(s);
    else if (!json_is_string(s))
        return api_fail(err, 400, "stop", NULL, "'stop' must be a string or a list of strings, got %s", type_name(s));
    if (n > API_MAX_STOP)
        return api_fail(err, 400, "stop", NULL, "'stop' has %zu strings; at most %d are allowed", n, API_MAX_STOP);
    if (n == 0) return true;
    r->stop = calloc(n, sizeof(char *));
    if (!r->stop) return oom(err);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_is_array(s) ? json_array_get(s, i) : s;
        if (!json_is_string(v))
            return api_fail(err, 400, "stop", NULL, "'stop' item %zu must be a string, got %s", i, type_name(v));
        size_t l = json_string_length(v);
        if (l == 0) return api_fail(err, 400, "stop", NULL, "'stop' item %zu is empty", i);
        if (l > API_MAX_STOP_LEN)
            return api_fail(err, 400, "stop", NULL, "'stop' item %zu is %zu bytes long; the limit is %d bytes", i, l,
                            API_MAX_STOP_LEN);
        r->stop[i] = strdup(json_string_value(v));
        if (!r->stop[i]) return oom(err);
        r->n_stop++;
    }
    return true;
}

static bool reject_unsupported(const json_t *root, const api_request *r, api_error *err) {
    const json_t *v;
    if ((v = field(root, "suffix")) && !(json_is_string(v) && json_string_length(v) == 0))
        return api_fail(err, 400, "suffix", NULL, "'suffix' is not supported");
    if ((v = field(root, "best_of"))) {
        if (!json_is_integer(v) || json_integer_value(v) != r->n)
            return api_fail(err, 400, "best_of", NULL, "'best_of' is not supported (only best_of = n)");
    }
    if ((v = field(root, "logit_bias"))) {
        if (!json_is_object(v))
            return api_fail(err, 400, "logit_bias", NULL, "'logit_bias' must be an object, got %s", type_name(v));
        if (json_object_size(v))
            return api_fail(err, 400, "logit_bias", NULL, "'logit_bias' is not supported");
    }
    if ((v = field(root, "response_format"))) {
        const json_t *t = json_is_object(v) ? json_object_get(v, "type") : NULL;
        if (!json_is_string(t) || strcmp(json_string_value(t), "text"))
            return api_fail(err, 400, "response_format", NULL,
                            "'response_format' must be {\"type\": \"text\"}; structured output is not supported");
    }
    return true;
}

/* ------------------------------------------------------------- request */

bool api_decode_request(const json_t *root, api_kind kind, const api_limits *lim, api_request *r, api_error *err) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    r->repetition_penalty = 1.0f;
    r->add_generation_prompt = true;
    r->add_special_tokens = kind == API_COMPLETION;
    r->skip_special_tokens = true;
    r->max_tokens_param = "max_tokens";
    bool ok = false, set = false;
    double d = 0;
    const json_t *v;

    if (!get_string(root, "model", &r->model, err)) goto out;
    if (kind == API_COMPLETION) {
        if (!decode_prompt(root, lim, r, err)) goto out;
        if (!get_bool(root, "echo", &r->echo, err)) goto out;
    } else {
        if (!decode_messages(root, &r->messages_json, err)) goto out;
        if (!decode_template_extra(root, &r->template_extra_json, err)) goto out;
        if (!get_bool(root, "add_generation_prompt", &r->add_generation_prompt, err)) goto out;
    }
    if (!get_bool(root, "stream", &r->stream, err)) goto out;
    if ((v = field(root, "stream_options"))) {
        if (!json_is_object(v)) {
            api_fail(err, 400, "stream_options", NULL, "'stream_options' must be an object, got %s", type_name(v));
            goto out;
        }
        if (!r->stream) {
            api_fail(err, 400, "stream_options", NULL, "'stream_options' is only allowed when 'stream' is true");
            goto out;
        }
        const json_t *iu = field(v, "include_usage");
        if (iu && !json_is_boolean(iu)) {
            api_fail(err, 400, "stream_options.include_usage", NULL,
                     "'stream_options.include_usage' must be a boolean, got %s", type_name(iu));
            goto out;
        }
        r->include_usage = iu && json_is_true(iu);
    }
    if (!get_int_range(root, "n", 1, lim->max_n, &r->n, NULL, err)) goto out;

    /* max_tokens: an integer >= 1; may be huge (checked against the context later) */
    const char *mt_key = kind == API_CHAT && field(root, "max_completion_tokens") ? "max_completion_tokens"
                                                                                   : "max_tokens";
    if (!get_integral(root, mt_key, &d, &set, err)) goto out;
    if (set) {
        if (d < 1) {
            api_fail(err, 400, mt_key, NULL, "'%s' must be at least 1, got %.15g", mt_key, d);
            goto out;
        }
        r->max_tokens_set = true;
        r->max_tokens = d;
        r->max_tokens_param = mt_key;
    }
    if (!get_int_range(root, "min_tokens", 0, INT_MAX, &r->min_tokens, NULL, err)) goto out;
    if (r->max_tokens_set && r->min_tokens > r->max_tokens) {
        api_fail(err, 400, "min_tokens", NULL, "'min_tokens' (%d) must not exceed '%s' (%.15g)", r->min_tokens,
                 mt_key, r->max_tokens);
        goto out;
    }
    if (!get_float_range(root, "temperature", 0, 2, false, &r->temperature, err)) goto out;
    if (!get_float_range(root, "top_p", 0, 1, true, &r->top_p, err)) goto out;
    if (!get_float_range(root, "min_p", 0, 1, false, &r->min_p, err)) goto out;
    if (!get_float_range(root, "presence_penalty", -2, 2, false, &r->presence_penalty, err)) goto out;
    if (!get_float_range(root, "frequency_penalty", -2, 2, false, &r->frequency_penalty, err)) goto out;
    if (!get_float_range(root, "repetition_penalty", 0, 2, true, &r->repetition_penalty, err)) goto out;
    if (!get_int_range(root, "top_k", -1, INT_MAX, &r->top_k, NULL, err)) goto out;
    if (!decode_stop(root, r, err)) goto out;
    if ((v = field(root, "stop_token_ids"))) {
        if (!json_is_array(v)) {
            api_fail(err, 400, "stop_token_ids", NULL, "'stop_token_ids' must be a list of token ids, got %s",
                     type_name(v));
            goto out;
        }
        if (json_array_size(v) > API_MAX_STOP_IDS) {
            api_fail(err, 400, "stop_token_ids", NULL, "'stop_token_ids' has %zu ids; at most %d are allowed",
                     json_array_size(v), API_MAX_STOP_IDS);
            goto out;
        }
        if (!get_ids(v, "stop_token_ids", lim->vocab_size, &r->stop_token_ids, &r->n_stop_token_ids, err)) goto out;
    }
    if (!get_integral(root, "seed", &d, &r->has_seed, err)) goto out;
    if (r->has_seed) {
        if (d < -9223372036854775808.0 || d >= 18446744073709551616.0) {
            api_fail(err, 400, "seed", NULL, "'seed' must fit in 64 bits, got %.17g", d);
            goto out;
        }
        const json_t *sv = json_object_get(root, "seed");
        r->seed = json_is_integer(sv) ? (uint64_t)json_integer_value(sv)
                                      : (d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d);
    }
    if (!get_bool(root, "ignore_eos", &r->ignore_eos, err)) goto out;
    if (!get_bool(root, "skip_special_tokens", &r->skip_special_tokens, err)) goto out;
    if (!get_bool(root, "include_stop_str_in_output", &r->include_stop_str_in_output, err)) goto out;
    if (r->include_stop_str_in_output) {
        api_fail(err, 400, "include_stop_str_in_output", NULL,
                 "'include_stop_str_in_output' is not supported: stop strings are never output");
        goto out;
    }
    if (!get_bool(root, "add_special_tokens", &r->add_special_tokens, err)) goto out;
    if (kind == API_COMPLETION) {
        bool lp_set = false;
        if (!get_int_range(root, "logprobs", 0, API_MAX_LOGPROBS, &r->top_logprobs, &lp_set, err)) goto out;
        r->logprobs = lp_set;
    } else {
        if (!get_bool(root, "logprobs", &r->logprobs, err)) goto out;
        bool tl_set = false;
        if (!get_int_range(root, "top_logprobs", 0, API_MAX_LOGPROBS, &r->top_logprobs, &tl_set, err)) goto out;
        if (tl_set && r->top_logprobs > 0 && !r->logprobs) {
            api_fail(err, 400, "top_logprobs", NULL, "'top_logprobs' requires 'logprobs' to be true");
            goto out;
        }
    }
    if (kind == API_COMPLETION && r->echo && r->logprobs) {
        api_fail(err, 400, "echo", NULL, "'echo' together with 'logprobs' (prompt logprobs) is not supported");
        goto out;
    }
    if ((v = field(root, "user")) && !json_is_string(v)) {
        api_fail(err, 400, "user", NULL, "'user' must be a string, got %s", type_name(v));
        goto out;
    }
    if (!reject_unsupported(root, r, err)) goto out;
    ok = true;
out:
    if (!ok) api_request_free(r);
    return ok;
}

void api_request_free(api_request *r) {
    free(r->model);
    for (int i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    free(r->messages_json);
    free(r->template_extra_json);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->stop_token_ids);
    api_kind k = r->kind;
    memset(r, 0, sizeof *r);
    r->kind = k;
}

/* ------------------------------------------------- tokenize / detokenize */

bool api_decode_tokenize(const json_t *root, api_tokenize_req *r, api_error *err) {
    memset(r, 0, sizeof *r);
    r->add_generation_prompt = true;
    bool ok = false;
    if (!get_string(root, "model", &r->model, err)) goto out;
    const json_t *p = field(root, "prompt");
    if (p) {
        r->add_special_tokens = true;
        if (!json_is_string(p)) {
            api_fail(err, 400, "prompt", NULL, "'prompt' must be a string, got %s", type_name(p));
            goto out;
        }
        r->prompt_len = json_string_length(p);
        r->prompt = malloc(r->prompt_len + 1);
        if (!r->prompt) {
            oom(err);
            goto out;
        }
        memcpy(r->prompt, json_string_value(p), r->prompt_len + 1);
    } else if (field(root, "messages")) {
        if (!decode_messages(root, &r->messages_json, err)) goto out;
        if (!decode_template_extra(root, &r->template_extra_json, err)) goto out;
        if (!get_bool(root, "add_generation_prompt", &r->add_generation_prompt, err)) goto out;
    } else {
        api_fail(err, 400, "prompt", NULL, "The request needs 'prompt' (a string) or 'messages'");
        goto out;
    }
    if (!get_bool(root, "add_special_tokens", &r->add_special_tokens, err)) goto out;
    ok = true;
out:
    if (!ok) api_tokenize_req_free(r);
    return ok;
}

void api_tokenize_req_free(api_tokenize_req *r) {
    free(r->model);
    free(r->prompt);
    free(r->messages_json);
    free(r->template_extra_json);
    memset(r, 0, sizeof *r);
}

bool api_decode_detokenize(const json_t *root, int32_t **ids, int *n_ids, char **model, api_error *err) {
    *model = NULL;
    if (!get_string(root, "model", model, err)) return false;
    const json_t *t = json_object_get(root, "tokens");
    bool ok;
    if (!t || json_is_null(t)) ok = api_fail(err, 400, "tokens", NULL, "The request has no 'tokens'");
    else if (!json_is_array(t)) ok = api_fail(err, 400, "tokens", NULL, "'tokens' must be a list of token ids, got %s",
                                              type_name(t));
    else ok = get_ids(t, "tokens", 0, ids, n_ids, err);
    if (!ok) {
        free(*model);
        *model = NULL;
    }
    return ok;
}
