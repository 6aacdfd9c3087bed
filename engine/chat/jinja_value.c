/*
 * jinja_value.c -- template values with Python semantics: truthiness,
 * equality and ordering, str() and repr() (lists print like Python lists,
 * floats with the shortest round-trip repr), json.dumps as transformers'
 * tojson filter calls it, attribute/item access as Jinja's sandbox does it,
 * and conversion of JSON input (messages, tools, extra variables).
 * Ownership: values live in the render arena (or borrow from the JSON input
 * and the template AST, which outlive the render). Thread-safety: per-render
 * state only.
 */
#include "chat.h"

#include "tokenizer.h" /* UTF-8 helpers */

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

kiln_status kiln_jerr(kiln_jctx *c, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return KILN_FAIL(KILN_ERR_TEMPLATE, "chat template %s line %d: %s", c->name, c->line, msg);
}

static kiln_status oom(void) { return KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory"); }

kiln_status kiln_jv_str_copy(kiln_jctx *c, const char *s, size_t n, kiln_jv *out) {
    if (n > KILN_CHAT_MAX_OUTPUT) return KILN_FAIL(KILN_ERR_LIMIT, "chat template: string of %zu bytes is too long", n);
    char *p = kiln_ja_alloc(c->a, n + 1);
    if (!p) return oom();
    if (n) memcpy(p, s, n);
    p[n] = 0;
    *out = kiln_jv_strv(p, n);
    return KILN_OK;
}

kiln_status kiln_jv_list_new(kiln_jctx *c, size_t n, kiln_jv *out) {
    kiln_jlist *l = kiln_ja_alloc(c->a, sizeof *l);
    if (!l) return oom();
    l->n = n;
    l->items = NULL;
    l->err = NULL;
    if (n) {
        if (n > SIZE_MAX / sizeof(kiln_jv)) return oom();
        l->items = kiln_ja_alloc(c->a, n * sizeof(kiln_jv));
        if (!l->items) return oom();
        memset(l->items, 0, n * sizeof(kiln_jv));
    }
    *out = kiln_jv_none();
    out->type = KILN_JV_LIST;
    out->u.l = l;
    return KILN_OK;
}

kiln_status kiln_jv_dict_new(kiln_jctx *c, size_t cap, kiln_jv *out) {
    kiln_jdict *d = kiln_ja_alloc(c->a, sizeof *d);
    if (!d) return oom();
    memset(d, 0, sizeof *d);
    if (cap) {
        d->keys = kiln_ja_alloc(c->a, cap * sizeof(kiln_jv));
        d->vals = kiln_ja_alloc(c->a, cap * sizeof(kiln_jv));
        if (!d->keys || !d->vals) return oom();
        d->cap = cap;
    }
    *out = kiln_jv_none();
    out->type = KILN_JV_DICT;
    out->u.d = d;
    return KILN_OK;
}

kiln_jv *kiln_jv_dict_get(const kiln_jdict *d, kiln_jv key) {
    for (size_t i = 0; i < d->n; i++)
        if (kiln_jv_eq(&d->keys[i], &key)) return &d->vals[i];
    return NULL;
}

kiln_jv *kiln_jv_dict_get_str(const kiln_jdict *d, const char *s, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].type == KILN_JV_STR && d->keys[i].n == n && !memcmp(d->keys[i].u.s, s, n)) return &d->vals[i];
    return NULL;
}

kiln_status kiln_jv_dict_set(kiln_jctx *c, kiln_jdict *d, kiln_jv key, kiln_jv val) {
    kiln_jv *v = kiln_jv_dict_get(d, key);
    if (v) {
        *v = val;
        return KILN_OK;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        kiln_jv *k = kiln_ja_alloc(c->a, cap * sizeof *k), *vv = kiln_ja_alloc(c->a, cap * sizeof *vv);
        if (!k || !vv) return oom();
        if (d->n) {
            memcpy(k, d->keys, d->n * sizeof *k);
            memcpy(vv, d->vals, d->n * sizeof *vv);
        }
        d->keys = k;
        d->vals = vv;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
    return KILN_OK;
}

/* ------------------------------------------------------------ semantics */

bool kiln_jv_truthy(const kiln_jv *v) {
    switch (v->type) {
    case KILN_JV_UNDEF:
    case KILN_JV_NONE: return false;
    case KILN_JV_BOOL: return v->u.b;
    case KILN_JV_INT: return v->u.i != 0;
    case KILN_JV_FLOAT: return v->u.f != 0.0;
    case KILN_JV_STR: return v->n != 0;
    case KILN_JV_LIST: return (v->flags & KILN_JV_GEN) || v->u.l->n != 0;
    case KILN_JV_DICT: return v->u.d->n != 0;
    default: return true;
    }
}

static bool is_num(const kiln_jv *v) {
    return v->type == KILN_JV_BOOL || v->type == KILN_JV_INT || v->type == KILN_JV_FLOAT;
}
static double num_f(const kiln_jv *v) {
    return v->type == KILN_JV_FLOAT ? v->u.f : v->type == KILN_JV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t num_i(const kiln_jv *v) { return v->type == KILN_JV_INT ? v->u.i : (int64_t)v->u.b; }

bool kiln_jv_eq(const kiln_jv *a, const kiln_jv *b) {
    if (is_num(a) && is_num(b)) {
        if (a->type == KILN_JV_FLOAT || b->type == KILN_JV_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a->type != b->type) return false;
    switch (a->type) {
    case KILN_JV_UNDEF:
    case KILN_JV_NONE: return true;
    case KILN_JV_STR: return a->n == b->n && !memcmp(a->u.s, b->u.s, a->n);
    case KILN_JV_LIST:
        if ((a->flags | b->flags) & KILN_JV_GEN) return a->u.l == b->u.l;
        if ((a->flags & KILN_JV_TUPLE) != (b->flags & KILN_JV_TUPLE) || a->u.l->n != b->u.l->n) return false;
        for (size_t i = 0; i < a->u.l->n; i++)
            if (!kiln_jv_eq(&a->u.l->items[i], &b->u.l->items[i])) return false;
        return true;
    case KILN_JV_DICT:
        if (a->u.d->n != b->u.d->n) return false;
        for (size_t i = 0; i < a->u.d->n; i++) {
            kiln_jv *v = kiln_jv_dict_get(b->u.d, a->u.d->keys[i]);
            if (!v || !kiln_jv_eq(&a->u.d->vals[i], v)) return false;
        }
        return true;
    case KILN_JV_NS: return a->u.d == b->u.d;
    case KILN_JV_FUNC: return a->u.fn == b->u.fn;
    case KILN_JV_MACRO: return a->u.macro == b->u.macro;
    default: return memcmp(&a->u, &b->u, sizeof a->u) == 0;
    }
}

const char *kiln_jv_type_name(const kiln_jv *v) {
    switch (v->type) {
    case KILN_JV_UNDEF: return "Undefined";
    case KILN_JV_NONE: return "NoneType";
    case KILN_JV_BOOL: return "bool";
    case KILN_JV_INT: return "int";
    case KILN_JV_FLOAT: return "float";
    case KILN_JV_STR: return "str";
    case KILN_JV_LIST:
        return (v->flags & KILN_JV_GEN)     ? "generator"
               : (v->flags & KILN_JV_TUPLE) ? "tuple"
               : (v->flags & KILN_JV_ITEMS) ? "dict_items"
                                            : "list";
    case KILN_JV_DICT: return "dict";
    case KILN_JV_NS: return "Namespace";
    case KILN_JV_FUNC: return "function";
    case KILN_JV_MACRO: return "Macro";
    case KILN_JV_LOOP: return "LoopContext";
    case KILN_JV_METHOD: return "builtin_function_or_method";
    }
    return "object";
}

kiln_status kiln_jv_cmp(kiln_jctx *c, const kiln_jv *a, const kiln_jv *b, const char *op, int *res) {
    if (is_num(a) && is_num(b)) {
        if (a->type == KILN_JV_FLOAT || b->type == KILN_JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            *res = (x > y) - (x < y);
        } else {
            int64_t x = num_i(a), y = num_i(b);
            *res = (x > y) - (x < y);
        }
        return KILN_OK;
    }
    if (a->type == KILN_JV_STR && b->type == KILN_JV_STR) {
        int r = memcmp(a->u.s, b->u.s, KILN_MIN(a->n, b->n));
        *res = r ? (r > 0 ? 1 : -1) : (a->n > b->n) - (a->n < b->n);
        return KILN_OK;
    }
    if (a->type == KILN_JV_LIST && b->type == KILN_JV_LIST && !((a->flags | b->flags) & KILN_JV_GEN) &&
        (a->flags & KILN_JV_TUPLE) == (b->flags & KILN_JV_TUPLE)) {
        size_t n = KILN_MIN(a->u.l->n, b->u.l->n);
        for (size_t i = 0; i < n; i++) {
            if (kiln_jv_eq(&a->u.l->items[i], &b->u.l->items[i])) continue;
            return kiln_jv_cmp(c, &a->u.l->items[i], &b->u.l->items[i], op, res);
        }
        *res = (a->u.l->n > b->u.l->n) - (a->u.l->n < b->u.l->n);
        return KILN_OK;
    }
    if (a->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, a);
    if (b->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, b);
    return kiln_jerr(c, "'%s' not supported between instances of '%s' and '%s'", op, kiln_jv_type_name(a),
                     kiln_jv_type_name(b));
}

kiln_status kiln_jv_undef_err(kiln_jctx *c, const kiln_jv *v) {
    if (v->flags & KILN_JV_UNDEF_HINT) return kiln_jerr(c, "%.*s", (int)v->n, v->u.s ? v->u.s : "");
    if (v->flags & KILN_JV_UNDEF_ATTR)
        return kiln_jerr(c, "'dict object' has no attribute '%.*s'", (int)v->n, v->u.s ? v->u.s : "");
    if (v->u.s) return kiln_jerr(c, "'%.*s' is undefined", (int)v->n, v->u.s);
    return kiln_jerr(c, "an undefined value was used");
}

size_t kiln_jstr_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* ------------------------------------------------------------ str / repr */

void kiln_jfloat_repr(double f, char *out, size_t cap) {
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        snprintf(out, cap, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    /* buf: [-]d[.ddd]e[+-]XX */
    bool neg = buf[0] == '-';
    const char *p = buf + neg;
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char res[64];
    int w = 0;
    if (neg) res[w++] = '-';
    if (exp >= -4 && exp < 16) {
        int decpt = exp + 1;
        if (decpt <= 0) {
            w += snprintf(res + w, sizeof res - (size_t)w, "0.");
            for (int i = 0; i < -decpt; i++) res[w++] = '0';
            w += snprintf(res + w, sizeof res - (size_t)w, "%s", digits);
        } else if (decpt >= nd) {
            w += snprintf(res + w, sizeof res - (size_t)w, "%s", digits);
            for (int i = nd; i < decpt; i++) res[w++] = '0';
            w += snprintf(res + w, sizeof res - (size_t)w, ".0");
        } else {
            w += snprintf(res + w, sizeof res - (size_t)w, "%.*s.%s", decpt, digits, digits + decpt);
        }
    } else {
        res[w++] = digits[0];
        if (nd > 1) w += snprintf(res + w, sizeof res - (size_t)w, ".%s", digits + 1);
        w += snprintf(res + w, sizeof res - (size_t)w, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    res[w] = 0;
    snprintf(out, cap, "%s", res);
}

/* Python's str.isprintable for one code point (approximation: controls,
 * separators other than space, format characters and private use). */
static bool py_printable(uint32_t cp) {
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
        (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB))
        return false;
    if ((cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xF0000 || (cp >= 0xE0000 && cp <= 0xE0FFF)) return false;
    if (cp == 0x061C || cp == 0x180E || (cp >= 0x0600 && cp <= 0x0605) || cp == 0x06DD || cp == 0x070F) return false;
    return true;
}

static kiln_status str_repr(const char *s, size_t n, kiln_buf *b) {
    kiln_status st;
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    if ((st = kiln_buf_append(b, &q, 1))) return st;
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        char tmp[16];
        if (ch < 0x80) {
            if (ch == (unsigned char)q || ch == '\\') snprintf(tmp, sizeof tmp, "\\%c", ch);
            else if (ch == '\n') snprintf(tmp, sizeof tmp, "\\n");
            else if (ch == '\r') snprintf(tmp, sizeof tmp, "\\r");
            else if (ch == '\t') snprintf(tmp, sizeof tmp, "\\t");
            else if (ch < 0x20 || ch == 0x7F) snprintf(tmp, sizeof tmp, "\\x%02x", ch);
            else tmp[0] = (char)ch, tmp[1] = 0;
            if ((st = kiln_buf_puts(b, tmp))) return st;
            i++;
            continue;
        }
        size_t l = kiln_utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!l) l = 1;
        uint32_t cp = 0xFFFD;
        if (l > 1) kiln_utf8_decode((const unsigned char *)s + i, &cp);
        if (py_printable(cp)) {
            if ((st = kiln_buf_append(b, s + i, l))) return st;
        } else {
            if (cp <= 0xFF) snprintf(tmp, sizeof tmp, "\\x%02x", cp);
            else if (cp <= 0xFFFF) snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            else snprintf(tmp, sizeof tmp, "\\U%08x", cp);
            if ((st = kiln_buf_puts(b, tmp))) return st;
        }
        i += l;
    }
    return kiln_buf_append(b, &q, 1);
}

static kiln_status to_text(kiln_jctx *c, const kiln_jv *v, kiln_buf *b, bool repr, int depth) {
    kiln_status st = KILN_OK;
    char tmp[64];
    if (depth > KILN_CHAT_MAX_DEPTH) return kiln_jerr(c, "value nested too deeply to print");
    switch (v->type) {
    case KILN_JV_UNDEF: return repr ? kiln_buf_puts(b, "Undefined") : KILN_OK;
    case KILN_JV_NONE: return kiln_buf_puts(b, "None");
    case KILN_JV_BOOL: return kiln_buf_puts(b, v->u.b ? "True" : "False");
    case KILN_JV_INT: return kiln_buf_printf(b, "%lld", (long long)v->u.i);
    case KILN_JV_FLOAT: kiln_jfloat_repr(v->u.f, tmp, sizeof tmp); return kiln_buf_puts(b, tmp);
    case KILN_JV_STR: return repr ? str_repr(v->u.s, v->n, b) : kiln_buf_append(b, v->u.s, v->n);
    case KILN_JV_LIST: {
        if (v->flags & KILN_JV_GEN) return kiln_buf_puts(b, "<generator object>");
        bool tuple = v->flags & KILN_JV_TUPLE, items = v->flags & KILN_JV_ITEMS;
        if (items && (st = kiln_buf_puts(b, "dict_items("))) return st;
        if ((st = kiln_buf_puts(b, tuple ? "(" : "["))) return st;
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i && (st = kiln_buf_puts(b, ", "))) return st;
            if ((st = to_text(c, &v->u.l->items[i], b, true, depth + 1))) return st;
        }
        if (tuple && v->u.l->n == 1 && (st = kiln_buf_puts(b, ","))) return st;
        if ((st = kiln_buf_puts(b, tuple ? ")" : "]"))) return st;
        return items ? kiln_buf_puts(b, ")") : KILN_OK;
    }
    case KILN_JV_DICT:
    case KILN_JV_NS: {
        if (v->type == KILN_JV_NS && (st = kiln_buf_puts(b, "<Namespace "))) return st;
        if ((st = kiln_buf_puts(b, "{"))) return st;
        for (size_t i = 0; i < v->u.d->n; i++) {
            if (i && (st = kiln_buf_puts(b, ", "))) return st;
            if ((st = to_text(c, &v->u.d->keys[i], b, true, depth + 1))) return st;
            if ((st = kiln_buf_puts(b, ": "))) return st;
            if ((st = to_text(c, &v->u.d->vals[i], b, true, depth + 1))) return st;
        }
        if ((st = kiln_buf_puts(b, "}"))) return st;
        return v->type == KILN_JV_NS ? kiln_buf_puts(b, ">") : KILN_OK;
    }
    case KILN_JV_FUNC: return kiln_buf_puts(b, "<function>");
    case KILN_JV_MACRO:
        return kiln_buf_printf(b, "<Macro '%.*s'>", (int)v->u.macro->node->sn, v->u.macro->node->s);
    case KILN_JV_LOOP:
        return kiln_buf_printf(b, "<LoopContext %zu/%zu>", v->u.loop->index0 + 1, v->u.loop->items->n);
    case KILN_JV_METHOD: return kiln_buf_printf(b, "<built-in method %.*s>", (int)v->u.m->name_len, v->u.m->name);
    }
    return KILN_OK;
}

kiln_status kiln_jv_to_str(kiln_jctx *c, const kiln_jv *v, kiln_buf *b) { return to_text(c, v, b, false, 0); }
kiln_status kiln_jv_repr(kiln_jctx *c, const kiln_jv *v, kiln_buf *b) { return to_text(c, v, b, true, 0); }

kiln_status kiln_jv_as_str(kiln_jctx *c, const kiln_jv *v, kiln_jv *out) {
    if (v->type == KILN_JV_STR) {
        *out = *v;
        return KILN_OK;
    }
    kiln_buf b = {0};
    kiln_status st = kiln_jv_to_str(c, v, &b);
    if (!st) st = kiln_jv_str_copy(c, b.data ? b.data : "", b.len, out);
    kiln_buf_free(&b);
    return st;
}

/* ----------------------------------------------------------------- JSON */

static kiln_status json_str(const char *s, size_t n, kiln_buf *b, bool ensure_ascii) {
    kiln_status st;
    if ((st = kiln_buf_append(b, "\"", 1))) return st;
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        size_t l = 1;
        if (ch == '"') esc = "\\\"";
        else if (ch == '\\') esc = "\\\\";
        else if (ch == '\n') esc = "\\n";
        else if (ch == '\r') esc = "\\r";
        else if (ch == '\t') esc = "\\t";
        else if (ch == '\b') esc = "\\b";
        else if (ch == '\f') esc = "\\f";
        else if (ch < 0x20) snprintf(tmp, sizeof tmp, "\\u%04x", ch), esc = tmp;
        else if (ch >= 0x80 && ensure_ascii) {
            l = kiln_utf8_seq_len((const unsigned char *)s + i, n - i);
            uint32_t cp = 0xFFFD;
            if (l) kiln_utf8_decode((const unsigned char *)s + i, &cp);
            else l = 1;
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            }
            esc = tmp;
        }
        if (esc) {
            if ((st = kiln_buf_append(b, s + run, i - run)) || (st = kiln_buf_puts(b, esc))) return st;
            i += l;
            run = i;
        } else {
            i++;
        }
    }
    if ((st = kiln_buf_append(b, s + run, n - run))) return st;
    return kiln_buf_append(b, "\"", 1);
}

typedef struct json_opts {
    bool ensure_ascii, sort_keys;
    int indent;
    const char *item_sep, *key_sep;
} json_opts;

static kiln_status json_nl(kiln_buf *b, const json_opts *o, int level) {
    kiln_status st = kiln_buf_append(b, "\n", 1);
    for (int i = 0; !st && i < level * o->indent; i++) st = kiln_buf_append(b, " ", 1);
    return st;
}

static kiln_status json_key(kiln_jctx *c, const kiln_jv *k, kiln_buf *b, const json_opts *o) {
    char tmp[64];
    switch (k->type) {
    case KILN_JV_STR: return json_str(k->u.s, k->n, b, o->ensure_ascii);
    case KILN_JV_INT: return kiln_buf_printf(b, "\"%lld\"", (long long)k->u.i);
    case KILN_JV_BOOL: return kiln_buf_puts(b, k->u.b ? "\"true\"" : "\"false\"");
    case KILN_JV_NONE: return kiln_buf_puts(b, "\"null\"");
    case KILN_JV_FLOAT: kiln_jfloat_repr(k->u.f, tmp, sizeof tmp); return kiln_buf_printf(b, "\"%s\"", tmp);
    default:
        return kiln_jerr(c, "keys must be str, int, float, bool or None, not %s", kiln_jv_type_name(k));
    }
}

static int cmp_key_idx(const kiln_jdict *d, size_t x, size_t y) {
    const kiln_jv *a = &d->keys[x], *b = &d->keys[y];
    if (a->type != KILN_JV_STR || b->type != KILN_JV_STR) return 0;
    int r = memcmp(a->u.s, b->u.s, KILN_MIN(a->n, b->n));
    return r ? r : (a->n > b->n) - (a->n < b->n);
}

static kiln_status to_json(kiln_jctx *c, const kiln_jv *v, kiln_buf *b, const json_opts *o, int level) {
    kiln_status st = KILN_OK;
    char tmp[64];
    if (level > KILN_CHAT_MAX_DEPTH) return kiln_jerr(c, "value nested too deeply for tojson");
    switch (v->type) {
    case KILN_JV_NONE: return kiln_buf_puts(b, "null");
    case KILN_JV_BOOL: return kiln_buf_puts(b, v->u.b ? "true" : "false");
    case KILN_JV_INT: return kiln_buf_printf(b, "%lld", (long long)v->u.i);
    case KILN_JV_FLOAT:
        if (isnan(v->u.f)) return kiln_buf_puts(b, "NaN");
        if (isinf(v->u.f)) return kiln_buf_puts(b, v->u.f < 0 ? "-Infinity" : "Infinity");
        kiln_jfloat_repr(v->u.f, tmp, sizeof tmp);
        return kiln_buf_puts(b, tmp);
    case KILN_JV_STR: return json_str(v->u.s, v->n, b, o->ensure_ascii);
    case KILN_JV_LIST: {
        const kiln_jlist *l = v->u.l;
        if (v->flags & KILN_JV_GEN) return kiln_jerr(c, "Object of type generator is not JSON serializable");
        if (!l->n) return kiln_buf_puts(b, "[]");
        if ((st = kiln_buf_puts(b, "["))) return st;
        for (size_t i = 0; i < l->n; i++) {
            if (i && (st = kiln_buf_puts(b, o->item_sep))) return st;
            if (o->indent >= 0 && (st = json_nl(b, o, level + 1))) return st;
            if ((st = to_json(c, &l->items[i], b, o, level + 1))) return st;
        }
        if (o->indent >= 0 && (st = json_nl(b, o, level))) return st;
        return kiln_buf_puts(b, "]");
    }
    case KILN_JV_DICT: {
        const kiln_jdict *d = v->u.d;
        if (!d->n) return kiln_buf_puts(b, "{}");
        size_t *order = malloc(d->n * sizeof *order);
        if (!order) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (o->sort_keys) /* insertion sort: stable, dicts are small */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && cmp_key_idx(d, order[j - 1], order[j]) > 0; j--) {
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        st = kiln_buf_puts(b, "{");
        for (size_t k = 0; !st && k < d->n; k++) {
            size_t i = order[k];
            if (k) st = kiln_buf_puts(b, o->item_sep);
            if (!st && o->indent >= 0) st = json_nl(b, o, level + 1);
            if (!st) st = json_key(c, &d->keys[i], b, o);
            if (!st) st = kiln_buf_puts(b, o->key_sep);
            if (!st) st = to_json(c, &d->vals[i], b, o, level + 1);
        }
        free(order);
        if (!st && o->indent >= 0) st = json_nl(b, o, level);
        if (!st) st = kiln_buf_puts(b, "}");
        return st;
    }
    default: return kiln_jerr(c, "Object of type %s is not JSON serializable", kiln_jv_type_name(v));
    }
}

kiln_status kiln_jv_to_json(kiln_jctx *c, const kiln_jv *v, kiln_buf *b, bool ensure_ascii, int indent,
                            const char *item_sep, const char *key_sep, bool sort_keys) {
    json_opts o = {ensure_ascii, sort_keys, indent, item_sep ? item_sep : (indent >= 0 ? "," : ", "),
                   key_sep ? key_sep : ": "};
    return to_json(c, v, b, &o, 0);
}

/* ----------------------------------------------------------- JSON input */

static kiln_status from_json(kiln_jarena *a, json_t *j, bool drop_null_keys, int depth, kiln_jv *out) {
    kiln_jctx c = {0};
    c.a = a;
    c.name = "input";
    if (depth > 100) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "chat template input nested too deeply");
    switch (json_typeof(j)) {
    case JSON_NULL: *out = kiln_jv_none(); return KILN_OK;
    case JSON_TRUE: *out = kiln_jv_bool(true); return KILN_OK;
    case JSON_FALSE: *out = kiln_jv_bool(false); return KILN_OK;
    case JSON_INTEGER: *out = kiln_jv_int(json_integer_value(j)); return KILN_OK;
    case JSON_REAL: *out = kiln_jv_float(json_real_value(j)); return KILN_OK;
    case JSON_STRING: *out = kiln_jv_strv(json_string_value(j), json_string_length(j)); return KILN_OK;
    case JSON_ARRAY: {
        kiln_status st = kiln_jv_list_new(&c, json_array_size(j), out);
        for (size_t i = 0; !st && i < json_array_size(j); i++)
            st = from_json(a, json_array_get(j, i), drop_null_keys, depth + 1, &out->u.l->items[i]);
        return st;
    }
    case JSON_OBJECT: {
        kiln_status st = kiln_jv_dict_new(&c, json_object_size(j), out);
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            if (st) break;
            if (drop_null_keys && json_is_null(v)) continue;
            kiln_jv val;
            st = from_json(a, v, false, depth + 1, &val);
            if (!st) st = kiln_jv_dict_set(&c, out->u.d, kiln_jv_strv(k, strlen(k)), val);
        }
        return st;
    }
    }
    return KILN_FAIL(KILN_ERR_INTERNAL, "unknown JSON type");
}

kiln_status kiln_jv_from_json(kiln_jarena *a, const void *json, bool drop_null_keys, kiln_jv *out) {
    return from_json(a, (json_t *)json, drop_null_keys, 0, out);
}

/* ------------------------------------------------------- iteration, access */

kiln_status kiln_jv_iter(kiln_jctx *c, const kiln_jv *v, kiln_jlist **out) {
    kiln_status st;
    kiln_jv tmp = {0};
    switch (v->type) {
    case KILN_JV_UNDEF:
        if ((st = kiln_jv_list_new(c, 0, &tmp))) return st;
        *out = tmp.u.l;
        return KILN_OK;
    case KILN_JV_LIST:
        if (v->flags & KILN_JV_GEN) { /* a generator runs once */
            if (v->u.l->err) { /* a deferred error keeps its own "chat template ... line" prefix */
                if (!strncmp(v->u.l->err, "chat template ", 14)) return KILN_FAIL(KILN_ERR_TEMPLATE, "%s", v->u.l->err);
                return kiln_jerr(c, "%s", v->u.l->err);
            }
            kiln_jlist *l = kiln_ja_alloc(c->a, sizeof *l);
            if (!l) return oom();
            *l = *v->u.l;
            v->u.l->n = 0;
            *out = l;
            return KILN_OK;
        }
        *out = v->u.l;
        return KILN_OK;
    case KILN_JV_DICT:
    case KILN_JV_NS:
        if ((st = kiln_jv_list_new(c, v->u.d->n, &tmp))) return st;
        for (size_t i = 0; i < v->u.d->n; i++) tmp.u.l->items[i] = v->u.d->keys[i];
        *out = tmp.u.l;
        return KILN_OK;
    case KILN_JV_STR: {
        size_t n = kiln_jstr_len(v->u.s, v->n);
        if ((st = kiln_jv_list_new(c, n, &tmp))) return st;
        size_t k = 0;
        for (size_t i = 0; i < v->n;) {
            size_t l = 1;
            while (i + l < v->n && ((unsigned char)v->u.s[i + l] & 0xC0) == 0x80) l++;
            tmp.u.l->items[k++] = kiln_jv_strv(v->u.s + i, l);
            i += l;
        }
        *out = tmp.u.l;
        return KILN_OK;
    }
    default: return kiln_jerr(c, "'%s' object is not iterable", kiln_jv_type_name(v));
    }
}

static bool name_is(const char *s, size_t n, const char *lit) { return strlen(lit) == n && !memcmp(s, lit, n); }

static kiln_status method(kiln_jctx *c, const kiln_jv *self, const char *name, size_t n, kiln_jv *out) {
    kiln_jmethod *m = kiln_ja_alloc(c->a, sizeof *m);
    if (!m) return oom();
    m->self = *self;
    m->name = name;
    m->name_len = (uint32_t)n;
    *out = kiln_jv_none();
    out->type = KILN_JV_METHOD;
    out->u.m = m;
    return KILN_OK;
}

static const char *const str_methods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines",
                                          "startswith", "endswith", "upper", "lower", "title", "capitalize",
                                          "replace", "find", "rfind", "count", "join", "format", "isdigit",
                                          "isalpha", "isalnum", "isspace", "isupper", "islower", "removeprefix",
                                          "removesuffix", "index", "rindex", "casefold", "swapcase", "center",
                                          "ljust", "rjust", "zfill", "isnumeric", "isdecimal", "istitle",
                                          "partition", "rpartition", NULL};
static const char *const dict_methods[] = {"items", "keys", "values", "get", NULL};
static const char *const list_methods[] = {"index", "count", NULL};
static const char *const unsafe_methods[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort",
                                             "reverse", "update", "setdefault", "popitem", "add", "discard",
                                             NULL};

static bool in_list(const char *const *l, const char *s, size_t n) {
    for (int i = 0; l[i]; i++)
        if (name_is(s, n, l[i])) return true;
    return false;
}

kiln_status kiln_jv_getattr(kiln_jctx *c, const kiln_jv *obj, const char *name, size_t n, kiln_jv *out) {
    if (obj->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, obj);
    if (n && name[0] == '_') { /* the sandbox hides private attributes */
        *out = kiln_jv_undef(name, n, KILN_JV_UNDEF_ATTR);
        return KILN_OK;
    }
    switch (obj->type) {
    case KILN_JV_DICT: {
        if (in_list(dict_methods, name, n)) return method(c, obj, name, n, out);
        if (in_list(unsafe_methods, name, n))
            return kiln_jerr(c, "access to attribute '%.*s' of 'dict' object is unsafe", (int)n, name);
        kiln_jv *v = kiln_jv_dict_get_str(obj->u.d, name, n);
        *out = v ? *v : kiln_jv_undef(name, n, KILN_JV_UNDEF_ATTR);
        return KILN_OK;
    }
    case KILN_JV_NS: {
        kiln_jv *v = kiln_jv_dict_get_str(obj->u.d, name, n);
        *out = v ? *v : kiln_jv_undef(name, n, KILN_JV_UNDEF_ATTR);
        return KILN_OK;
    }
    case KILN_JV_STR:
        if (in_list(str_methods, name, n)) return method(c, obj, name, n, out);
        break;
    case KILN_JV_LIST:
        if (in_list(list_methods, name, n) && !(obj->flags & (KILN_JV_ITEMS | KILN_JV_GEN))) return method(c, obj, name, n, out);
        if (in_list(unsafe_methods, name, n))
            return kiln_jerr(c, "access to attribute '%.*s' of '%s' object is unsafe", (int)n, name,
                             kiln_jv_type_name(obj));
        break;
    case KILN_JV_LOOP: {
        const kiln_jloop *l = obj->u.loop;
        size_t i = l->index0, len = l->items->n;
        if (name_is(name, n, "index")) *out = kiln_jv_int((int64_t)i + 1);
        else if (name_is(name, n, "index0")) *out = kiln_jv_int((int64_t)i);
        else if (name_is(name, n, "revindex")) *out = kiln_jv_int((int64_t)(len - i));
        else if (name_is(name, n, "revindex0")) *out = kiln_jv_int((int64_t)(len - i - 1));
        else if (name_is(name, n, "first")) *out = kiln_jv_bool(i == 0);
        else if (name_is(name, n, "last")) *out = kiln_jv_bool(i + 1 == len);
        else if (name_is(name, n, "length")) *out = kiln_jv_int((int64_t)len);
        else if (name_is(name, n, "depth")) *out = kiln_jv_int(l->depth0 + 1);
        else if (name_is(name, n, "depth0")) *out = kiln_jv_int(l->depth0);
        else if (name_is(name, n, "previtem")) *out = i ? l->items->items[i - 1] : kiln_jv_undef("previtem", 8, KILN_JV_UNDEF_ATTR);
        else if (name_is(name, n, "nextitem")) *out = i + 1 < len ? l->items->items[i + 1] : kiln_jv_undef("nextitem", 8, KILN_JV_UNDEF_ATTR);
        else if (name_is(name, n, "cycle")) return method(c, obj, name, n, out);
        else *out = kiln_jv_undef(name, n, KILN_JV_UNDEF_ATTR);
        return KILN_OK;
    }
    default: break;
    }
    *out = kiln_jv_undef(name, n, KILN_JV_UNDEF_ATTR);
    return KILN_OK;
}

/* Python index normalization; false when out of range. */
static bool py_index(int64_t i, size_t len, size_t *out) {
    if (i < 0) i += (int64_t)len;
    if (i < 0 || (uint64_t)i >= len) return false;
    *out = (size_t)i;
    return true;
}

kiln_status kiln_jv_getitem(kiln_jctx *c, const kiln_jv *obj, const kiln_jv *key, kiln_jv *out) {
    if (obj->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, obj);
    bool int_key = key->type == KILN_JV_INT || key->type == KILN_JV_BOOL;
    switch (obj->type) {
    case KILN_JV_LIST:
        if (obj->flags & KILN_JV_GEN) break;
        if (int_key) {
            size_t i;
            if (py_index(num_i(key), obj->u.l->n, &i)) {
                *out = obj->u.l->items[i];
                return KILN_OK;
            }
            *out = kiln_jv_undef(NULL, 0, 0);
            return KILN_OK;
        }
        break;
    case KILN_JV_STR:
        if (int_key) {
            size_t len = kiln_jstr_len(obj->u.s, obj->n), i, k = 0;
            if (!py_index(num_i(key), len, &i)) {
                *out = kiln_jv_undef(NULL, 0, 0);
                return KILN_OK;
            }
            for (size_t p = 0; p < obj->n;) {
                size_t l = 1;
                while (p + l < obj->n && ((unsigned char)obj->u.s[p + l] & 0xC0) == 0x80) l++;
                if (k++ == i) {
                    *out = kiln_jv_strv(obj->u.s + p, l);
                    return KILN_OK;
                }
                p += l;
            }
        }
        break;
    case KILN_JV_DICT:
    case KILN_JV_NS: {
        kiln_jv *v = kiln_jv_dict_get(obj->u.d, *key);
        if (v) {
            *out = *v;
            return KILN_OK;
        }
        break;
    }
    default: break;
    }
    if (key->type == KILN_JV_STR) return kiln_jv_getattr(c, obj, key->u.s, key->n, out);
    *out = kiln_jv_undef(NULL, 0, 0);
    return KILN_OK;
}
