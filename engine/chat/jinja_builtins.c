/*
 * jinja_builtins.c -- what chat templates call: Jinja's builtin filters and
 * tests (the ones templates use), Python string/dict/list methods without
 * side effects, loop.cycle, and the globals transformers provides (range,
 * namespace, dict, raise_exception, strftime_now) plus its tojson filter
 * (json.dumps with ensure_ascii=False). Unknown names are errors naming
 * them. Mutating methods (append, update, ...) are refused as Jinja's
 * immutable sandbox refuses them.
 * Ownership: results in the render arena. Thread-safety: per-render state;
 * the case-mapping locale is created per render.
 */
#define _GNU_SOURCE /* memmem, locale_t functions */
#include "chat.h"

#include "tokenizer.h" /* UTF-8 helpers */

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <wctype.h>

#define MAX_RANGE 100000 /* Jinja's sandbox limit for range() */

enum { FN_RANGE = 1, FN_NAMESPACE, FN_DICT, FN_RAISE, FN_STRFTIME };

static bool eqs(const char *s, size_t n, const char *lit) { return strlen(lit) == n && !memcmp(s, lit, n); }

static kiln_status oom(void) { return KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory"); }

static bool is_num_like(const kiln_jv *v) {
    return v->type == KILN_JV_INT || v->type == KILN_JV_FLOAT || v->type == KILN_JV_BOOL;
}

bool kiln_jglobal(const char *name, size_t n, kiln_jv *out) {
    static const struct {
        const char *name;
        int id;
    } g[] = {{"range", FN_RANGE}, {"namespace", FN_NAMESPACE}, {"dict", FN_DICT}, {"raise_exception", FN_RAISE},
             {"strftime_now", FN_STRFTIME}};
    for (size_t i = 0; i < KILN_ARRAY_LEN(g); i++)
        if (eqs(name, n, g[i].name)) {
            *out = kiln_jv_none();
            out->type = KILN_JV_FUNC;
            out->u.fn = g[i].id;
            return true;
        }
    return false;
}

/* ------------------------------------------------------------ arguments */

static const kiln_jv *arg(const kiln_jargs *a, int pos, const char *kw) {
    if (pos >= 0 && pos < a->n_args) return &a->args[pos];
    if (kw)
        for (int k = 0; k < a->n_kw; k++)
            if (eqs(a->kw_names[k], a->kw_lens[k], kw)) return &a->kw_vals[k];
    return NULL;
}

/* Refuse extra positional arguments and unknown keywords. kws: NULL-ended. */
static kiln_status check_args(kiln_jctx *c, const kiln_jargs *a, int max_pos, const char *const *kws,
                              const char *what, const char *name, size_t n) {
    if (max_pos >= 0 && a->n_args > max_pos)
        return kiln_jerr(c, "%s '%.*s' takes at most %d argument(s), got %d", what, (int)n, name, max_pos, a->n_args);
    for (int k = 0; k < a->n_kw; k++) {
        bool ok = false;
        for (int i = 0; kws && kws[i]; i++)
            if (eqs(a->kw_names[k], a->kw_lens[k], kws[i])) ok = true;
        if (!ok)
            return kiln_jerr(c, "%s '%.*s' got an unexpected keyword argument '%.*s'", what, (int)n, name,
                             (int)a->kw_lens[k], a->kw_names[k]);
    }
    return KILN_OK;
}

static bool truthy_arg(const kiln_jv *v, bool def) { return v ? kiln_jv_truthy(v) : def; }

static kiln_status int_arg(kiln_jctx *c, const kiln_jv *v, int64_t def, const char *what, int64_t *out) {
    *out = def;
    if (!v || v->type == KILN_JV_NONE) {
        *out = def;
        return KILN_OK;
    }
    if (v->type == KILN_JV_INT) *out = v->u.i;
    else if (v->type == KILN_JV_BOOL) *out = v->u.b;
    else return kiln_jerr(c, "%s must be an integer, not %s", what, kiln_jv_type_name(v));
    return KILN_OK;
}

/* A string view of v: strings as they are, undefined as "", others str(). */
static kiln_status sv(kiln_jctx *c, const kiln_jv *v, const char **s, size_t *n) {
    kiln_jv t;
    if (v->type == KILN_JV_STR) {
        *s = v->u.s;
        *n = v->n;
        return KILN_OK;
    }
    if (v->type == KILN_JV_UNDEF) {
        *s = "";
        *n = 0;
        return KILN_OK;
    }
    kiln_status st = kiln_jv_as_str(c, v, &t);
    if (st) return st;
    *s = t.u.s;
    *n = t.n;
    return KILN_OK;
}

static kiln_status buf_value(kiln_jctx *c, kiln_buf *b, kiln_jv *out) {
    kiln_status st = kiln_jv_str_copy(c, b->data ? b->data : "", b->len, out);
    kiln_buf_free(b);
    return st;
}

/* ----------------------------------------------------------- Unicode case */

static locale_t get_locale(kiln_jctx *c) {
    if (!c->locale_tried) {
        c->locale_tried = true;
        locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
        if (!l) l = newlocale(LC_CTYPE_MASK, "en_US.UTF-8", (locale_t)0);
        c->locale = l;
    }
    return (locale_t)c->locale;
}

void kiln_jctx_fini(kiln_jctx *c) {
    if (c->locale) freelocale((locale_t)c->locale);
    c->locale = NULL;
}

static uint32_t u_upper(kiln_jctx *c, uint32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    locale_t l = get_locale(c);
    return l ? (uint32_t)towupper_l((wint_t)cp, l) : cp;
}
static uint32_t u_lower(kiln_jctx *c, uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    locale_t l = get_locale(c);
    return l ? (uint32_t)towlower_l((wint_t)cp, l) : cp;
}
static bool u_cased(kiln_jctx *c, uint32_t cp) { return u_upper(c, cp) != cp || u_lower(c, cp) != cp; }
static bool u_isupper(kiln_jctx *c, uint32_t cp) { return u_lower(c, cp) != cp; }
static bool u_islower(kiln_jctx *c, uint32_t cp) { return u_upper(c, cp) != cp; }
static bool u_isalpha(kiln_jctx *c, uint32_t cp) {
    if (cp < 0x80) return (cp | 32) >= 'a' && (cp | 32) <= 'z';
    locale_t l = get_locale(c);
    return l ? iswalpha_l((wint_t)cp, l) != 0 : false;
}
static bool u_isdigit(uint32_t cp) { return cp >= '0' && cp <= '9'; }
/* Python str.isspace */
static bool u_isspace(uint32_t cp) {
    return cp == ' ' || (cp >= '\t' && cp <= '\r') || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

static size_t next_cp(const char *s, size_t n, size_t i, uint32_t *cp) {
    size_t l = kiln_utf8_seq_len((const unsigned char *)s + i, n - i);
    if (!l) {
        *cp = (unsigned char)s[i];
        return 1;
    }
    kiln_utf8_decode((const unsigned char *)s + i, cp);
    return l;
}

static kiln_status put_cp(kiln_buf *b, uint32_t cp) {
    char t[4];
    return kiln_buf_append(b, t, kiln_utf8_encode(cp, t));
}

enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE, CASE_SWAP, CASE_JTITLE };

static bool jtitle_sep(uint32_t cp) { return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || u_isspace(cp); }

static kiln_status map_case(kiln_jctx *c, const char *s, size_t n, int mode, kiln_jv *out) {
    kiln_status st = KILN_OK;
    kiln_buf b = {0};
    bool prev_cased = false, first = true, at_word = true;
    for (size_t i = 0; i < n && !st;) {
        uint32_t cp, r;
        i += next_cp(s, n, i, &cp);
        switch (mode) {
        case CASE_UPPER: r = u_upper(c, cp); break;
        case CASE_LOWER: r = u_lower(c, cp); break;
        case CASE_TITLE:
            r = prev_cased ? u_lower(c, cp) : u_upper(c, cp);
            prev_cased = u_cased(c, cp);
            break;
        case CASE_CAPITALIZE: r = first ? u_upper(c, cp) : u_lower(c, cp); break;
        case CASE_SWAP: r = u_isupper(c, cp) ? u_lower(c, cp) : u_upper(c, cp); break;
        default: /* Jinja's title filter: word starts after - ( { [ < or whitespace */
            if (jtitle_sep(cp)) {
                r = cp;
                at_word = true;
            } else {
                r = at_word ? u_upper(c, cp) : u_lower(c, cp);
                at_word = false;
            }
        }
        first = false;
        if (r == 0xDF && cp == 0xDF && (mode == CASE_UPPER || (mode != CASE_LOWER && r == u_upper(c, cp))))
            st = kiln_buf_puts(&b, mode == CASE_UPPER ? "SS" : "Ss");
        else
            st = put_cp(&b, r);
    }
    if (st) {
        kiln_buf_free(&b);
        return st;
    }
    return buf_value(c, &b, out);
}

/* ------------------------------------------------------- string helpers */

static bool in_chars(uint32_t cp, const char *chars, size_t nc) {
    if (!chars) return u_isspace(cp);
    for (size_t i = 0; i < nc;) {
        uint32_t x;
        i += next_cp(chars, nc, i, &x);
        if (x == cp) return true;
    }
    return false;
}

static void strip_range(const char *s, size_t n, const char *chars, size_t nc, bool left, bool right, size_t *a,
                        size_t *b) {
    size_t i = 0, j = n;
    if (left)
        while (i < j) {
            uint32_t cp;
            size_t l = next_cp(s, n, i, &cp);
            if (!in_chars(cp, chars, nc)) break;
            i += l;
        }
    if (right)
        while (j > i) {
            size_t k = j - 1;
            while (k > i && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
            uint32_t cp;
            next_cp(s, n, k, &cp);
            if (!in_chars(cp, chars, nc)) break;
            j = k;
        }
    *a = i;
    *b = j;
}

static kiln_status do_strip(kiln_jctx *c, const char *s, size_t n, const kiln_jv *chars, bool l, bool r, kiln_jv *out) {
    const char *cs = NULL;
    size_t cn = 0;
    if (chars && chars->type != KILN_JV_NONE && chars->type != KILN_JV_UNDEF) {
        if (chars->type != KILN_JV_STR) return kiln_jerr(c, "strip arg must be None or str");
        cs = chars->u.s;
        cn = chars->n;
    }
    size_t a, b;
    strip_range(s, n, cs, cn, l, r, &a, &b);
    *out = kiln_jv_strv(s + a, b - a);
    return KILN_OK;
}

static size_t cp_index(const char *s, size_t byte_off) { return kiln_jstr_len(s, byte_off); }

static size_t byte_of_cp(const char *s, size_t n, int64_t idx) {
    size_t len = kiln_jstr_len(s, n);
    if (idx < 0) idx += (int64_t)len;
    if (idx < 0) idx = 0;
    if ((uint64_t)idx >= len) return n;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if ((int64_t)k == idx) return i;
            k++;
        }
    return n;
}

static kiln_status list_of_strs(kiln_jctx *c, kiln_vec *parts, const char *base, kiln_jv *out) {
    kiln_status st = kiln_jv_list_new(c, parts->len / 2, out);
    for (size_t i = 0; !st && i < parts->len / 2; i++) {
        size_t a = KILN_VEC_AT(parts, size_t, 2 * i), b = KILN_VEC_AT(parts, size_t, 2 * i + 1);
        out->u.l->items[i] = kiln_jv_strv(base + a, b - a);
    }
    kiln_vec_free(parts);
    return st;
}

static kiln_status push2(kiln_vec *v, size_t a, size_t b) {
    kiln_status st = kiln_vec_push(v, &a);
    return st ? st : kiln_vec_push(v, &b);
}

static kiln_status do_split(kiln_jctx *c, const char *s, size_t n, const kiln_jv *sepv, int64_t maxsplit, bool right,
                            kiln_jv *out) {
    kiln_status st = KILN_OK;
    kiln_vec parts = KILN_VEC_INIT(size_t);
    if (sepv && sepv->type != KILN_JV_NONE) {
        if (sepv->type != KILN_JV_STR) return kiln_jerr(c, "must be str or None, not %s", kiln_jv_type_name(sepv));
        if (!sepv->n) return kiln_jerr(c, "empty separator");
        const char *sep = sepv->u.s;
        size_t sl = sepv->n;
        if (!right) {
            size_t start = 0;
            int64_t k = 0;
            for (size_t i = 0; i + sl <= n && (maxsplit < 0 || k < maxsplit);) {
                if (!memcmp(s + i, sep, sl)) {
                    if ((st = push2(&parts, start, i))) goto fail;
                    i += sl;
                    start = i;
                    k++;
                } else {
                    i++;
                }
            }
            if ((st = push2(&parts, start, n))) goto fail;
        } else {
            /* collect from the right, then reverse */
            kiln_vec rev = KILN_VEC_INIT(size_t);
            size_t end = n;
            int64_t k = 0;
            for (size_t i = n; i >= sl && (maxsplit < 0 || k < maxsplit);) {
                if (!memcmp(s + i - sl, sep, sl)) {
                    if ((st = push2(&rev, i, end))) {
                        kiln_vec_free(&rev);
                        goto fail;
                    }
                    i -= sl;
                    end = i;
                    k++;
                } else {
                    i--;
                }
            }
            st = push2(&rev, 0, end);
            for (size_t i = rev.len / 2; !st && i > 0; i--)
                st = push2(&parts, KILN_VEC_AT(&rev, size_t, 2 * (i - 1)), KILN_VEC_AT(&rev, size_t, 2 * (i - 1) + 1));
            kiln_vec_free(&rev);
            if (st) goto fail;
        }
        return list_of_strs(c, &parts, s, out);
    }
    /* whitespace runs */
    if (!right || maxsplit < 0) {
        size_t i = 0;
        int64_t k = 0;
        while (i < n) {
            uint32_t cp;
            while (i < n) {
                size_t l = next_cp(s, n, i, &cp);
                if (!u_isspace(cp)) break;
                i += l;
            }
            if (i >= n) break;
            if (maxsplit >= 0 && k >= maxsplit) {
                size_t a, b;
                strip_range(s + i, n - i, NULL, 0, false, true, &a, &b);
                if ((st = push2(&parts, i, i + b))) goto fail;
                break;
            }
            size_t start = i;
            while (i < n) {
                size_t l = next_cp(s, n, i, &cp);
                if (u_isspace(cp)) break;
                i += l;
            }
            if ((st = push2(&parts, start, i))) goto fail;
            k++;
        }
        return list_of_strs(c, &parts, s, out);
    }
    {
        /* rsplit(None, maxsplit) */
        kiln_vec rev = KILN_VEC_INIT(size_t);
        size_t j = n;
        int64_t k = 0;
        for (;;) {
            while (j > 0) {
                size_t q = j - 1;
                while (q > 0 && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
                uint32_t cp;
                next_cp(s, n, q, &cp);
                if (!u_isspace(cp)) break;
                j = q;
            }
            if (!j) break;
            if (k >= maxsplit) {
                size_t a, b;
                strip_range(s, j, NULL, 0, true, false, &a, &b);
                st = push2(&rev, a, j);
                break;
            }
            size_t end = j;
            while (j > 0) {
                size_t q = j - 1;
                while (q > 0 && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
                uint32_t cp;
                next_cp(s, n, q, &cp);
                if (u_isspace(cp)) break;
                j = q;
            }
            if ((st = push2(&rev, j, end))) break;
            k++;
        }
        for (size_t i = rev.len / 2; !st && i > 0; i--)
            st = push2(&parts, KILN_VEC_AT(&rev, size_t, 2 * (i - 1)), KILN_VEC_AT(&rev, size_t, 2 * (i - 1) + 1));
        kiln_vec_free(&rev);
        if (st) goto fail;
        return list_of_strs(c, &parts, s, out);
    }
fail:
    kiln_vec_free(&parts);
    return st;
}

static bool is_line_break(uint32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
           cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

static kiln_status do_splitlines(kiln_jctx *c, const char *s, size_t n, bool keepends, kiln_jv *out) {
    kiln_status st = KILN_OK;
    kiln_vec parts = KILN_VEC_INIT(size_t);
    size_t i = 0, start = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = next_cp(s, n, i, &cp);
        if (is_line_break(cp)) {
            size_t end = i, nxt = i + l;
            if (cp == '\r' && nxt < n && s[nxt] == '\n') nxt++;
            if ((st = push2(&parts, start, keepends ? nxt : end))) break;
            start = i = nxt;
        } else {
            i += l;
        }
    }
    if (!st && start < n) st = push2(&parts, start, n);
    if (st) {
        kiln_vec_free(&parts);
        return st;
    }
    return list_of_strs(c, &parts, s, out);
}

static kiln_status do_replace(kiln_jctx *c, const char *s, size_t n, const kiln_jv *oldv, const kiln_jv *newv,
                              int64_t count, kiln_jv *out) {
    if (!oldv || !newv || oldv->type != KILN_JV_STR || newv->type != KILN_JV_STR)
        return kiln_jerr(c, "replace() arguments must be strings");
    kiln_buf b = {0};
    kiln_status st = KILN_OK;
    const char *o = oldv->u.s, *w = newv->u.s;
    size_t ol = oldv->n, wl = newv->n;
    int64_t k = 0;
    size_t i = 0, run = 0;
    if (!ol) { /* insert between characters */
        for (i = 0; i <= n && !st; ) {
            if (count < 0 || k < count) {
                st = kiln_buf_append(&b, w, wl);
                k++;
            }
            if (i == n) break;
            uint32_t cp;
            size_t l = next_cp(s, n, i, &cp);
            if (!st) st = kiln_buf_append(&b, s + i, l);
            i += l;
            if (b.len > KILN_CHAT_MAX_OUTPUT) st = KILN_FAIL(KILN_ERR_LIMIT, "chat template: replace() result too long");
        }
        if (st) {
            kiln_buf_free(&b);
            return st;
        }
        return buf_value(c, &b, out);
    }
    while (i + ol <= n && (count < 0 || k < count)) {
        const char *f = memmem(s + i, n - i, o, ol);
        if (!f) break;
        size_t p = (size_t)(f - s);
        if ((st = kiln_buf_append(&b, s + run, p - run)) || (st = kiln_buf_append(&b, w, wl))) break;
        i = run = p + ol;
        k++;
        if (b.len > KILN_CHAT_MAX_OUTPUT) {
            st = KILN_FAIL(KILN_ERR_LIMIT, "chat template: replace() result too long");
            break;
        }
    }
    if (!st) st = kiln_buf_append(&b, s + run, n - run);
    if (st) {
        kiln_buf_free(&b);
        return st;
    }
    return buf_value(c, &b, out);
}

static bool prefix_match(const char *s, size_t n, const kiln_jv *p, bool suffix) {
    if (p->type != KILN_JV_STR || p->n > n) return false;
    return !memcmp(suffix ? s + n - p->n : s, p->u.s, p->n);
}

static kiln_status starts_ends(kiln_jctx *c, const char *s, size_t n, const kiln_jargs *a, bool suffix, kiln_jv *out) {
    const kiln_jv *p = arg(a, 0, NULL);
    if (!p) return kiln_jerr(c, "%s() takes at least 1 argument", suffix ? "endswith" : "startswith");
    int64_t st0, en;
    kiln_status st;
    if ((st = int_arg(c, arg(a, 1, NULL), 0, "start", &st0)) || (st = int_arg(c, arg(a, 2, NULL), INT64_MAX, "end", &en)))
        return st;
    size_t b0 = st0 ? byte_of_cp(s, n, st0) : 0, b1 = en == INT64_MAX ? n : byte_of_cp(s, n, en);
    if (b1 < b0) b1 = b0;
    s += b0;
    n = b1 - b0;
    bool r = false;
    if (p->type == KILN_JV_LIST) {
        for (size_t i = 0; i < p->u.l->n && !r; i++) {
            if (p->u.l->items[i].type != KILN_JV_STR) return kiln_jerr(c, "tuple for %s must only contain str", suffix ? "endswith" : "startswith");
            r = prefix_match(s, n, &p->u.l->items[i], suffix);
        }
    } else if (p->type == KILN_JV_STR) {
        r = prefix_match(s, n, p, suffix);
    } else {
        return kiln_jerr(c, "%s first arg must be str or a tuple of str, not %s", suffix ? "endswith" : "startswith",
                         kiln_jv_type_name(p));
    }
    *out = kiln_jv_bool(r);
    return KILN_OK;
}

/* str.format: {} {0} {name} with !r/!s and a simple format spec */
static kiln_status apply_spec(kiln_jctx *c, const kiln_jv *v, const char *spec, size_t sl, kiln_buf *b) {
    kiln_status st;
    if (!sl) return kiln_jv_to_str(c, v, b);
    /* [[fill]align][sign][width][.precision][type] */
    size_t i = 0;
    uint32_t fill = ' ';
    char align = 0;
    if (sl >= 2 && strchr("<>^=", spec[1])) {
        fill = (unsigned char)spec[0];
        align = spec[1];
        i = 2;
    } else if (strchr("<>^=", spec[0])) {
        align = spec[0];
        i = 1;
    }
    char sign = 0;
    if (i < sl && strchr("+- ", spec[i])) sign = spec[i++];
    if (i < sl && spec[i] == '0' && !align) {
        fill = '0';
        align = '=';
        i++;
    }
    int width = 0, prec = -1;
    while (i < sl && spec[i] >= '0' && spec[i] <= '9') width = width * 10 + (spec[i++] - '0');
    if (i < sl && spec[i] == '.') {
        prec = 0;
        i++;
        while (i < sl && spec[i] >= '0' && spec[i] <= '9') prec = prec * 10 + (spec[i++] - '0');
    }
    char type = i < sl ? spec[i++] : 0;
    if (i != sl || width > 10000 || prec > 100) return kiln_jerr(c, "unsupported format specifier '%.*s'", (int)sl, spec);
    kiln_buf t = {0};
    char tmp[512], fmt[32];
    if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G' || type == '%') {
        if (v->type != KILN_JV_INT && v->type != KILN_JV_FLOAT && v->type != KILN_JV_BOOL)
            return kiln_jerr(c, "unknown format code '%c' for object of type '%s'", type, kiln_jv_type_name(v));
        double x = v->type == KILN_JV_FLOAT ? v->u.f : v->type == KILN_JV_INT ? (double)v->u.i : v->u.b;
        if (type == '%') x *= 100;
        snprintf(fmt, sizeof fmt, "%%%s.%d%c", sign == '+' ? "+" : sign == ' ' ? " " : "", prec < 0 ? 6 : prec,
                 type == '%' ? 'f' : type);
        snprintf(tmp, sizeof tmp, fmt, x);
        st = kiln_buf_puts(&t, tmp);
        if (!st && type == '%') st = kiln_buf_puts(&t, "%");
        if (!align) align = '>';
    } else if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b') {
        if (v->type != KILN_JV_INT && v->type != KILN_JV_BOOL)
            return kiln_jerr(c, "unknown format code '%c' for object of type '%s'", type, kiln_jv_type_name(v));
        long long x = v->type == KILN_JV_INT ? v->u.i : v->u.b;
        if (type == 'b') {
            char bits[80];
            int k = 0;
            unsigned long long u = x < 0 ? (unsigned long long)-x : (unsigned long long)x;
            do bits[k++] = (char)('0' + (u & 1)); while (u >>= 1);
            st = x < 0 ? kiln_buf_puts(&t, "-") : KILN_OK;
            while (!st && k) st = kiln_buf_append(&t, &bits[--k], 1);
        } else {
            snprintf(fmt, sizeof fmt, "%%%sll%c", sign == '+' ? "+" : sign == ' ' ? " " : "", type);
            snprintf(tmp, sizeof tmp, fmt, x);
            st = kiln_buf_puts(&t, tmp);
        }
        if (!align) align = '>';
    } else if (type == 's' || type == 0) {
        if (type == 0 && (v->type == KILN_JV_INT || v->type == KILN_JV_FLOAT) && !align) align = '>';
        st = kiln_jv_to_str(c, v, &t);
        if (!st && prec >= 0 && v->type == KILN_JV_STR) t.len = byte_of_cp(t.data, t.len, prec) < t.len ? byte_of_cp(t.data, t.len, prec) : t.len;
        if (!align) align = '<';
    } else {
        return kiln_jerr(c, "unsupported format type '%c'", type);
    }
    if (st) {
        kiln_buf_free(&t);
        return st;
    }
    size_t len = kiln_jstr_len(t.data ? t.data : "", t.len), pad = (size_t)width > len ? (size_t)width - len : 0;
    size_t left = align == '<' ? 0 : align == '^' ? pad / 2 : pad, right = pad - left;
    if (align == '=' && t.len && (t.data[0] == '-' || t.data[0] == '+')) {
        st = kiln_buf_append(b, t.data, 1);
        memmove(t.data, t.data + 1, --t.len);
    }
    for (size_t k = 0; !st && k < left; k++) st = put_cp(b, fill);
    if (!st) st = kiln_buf_append(b, t.data ? t.data : "", t.len);
    for (size_t k = 0; !st && k < right; k++) st = put_cp(b, fill);
    kiln_buf_free(&t);
    return st;
}

static kiln_status do_format(kiln_jctx *c, const char *s, size_t n, const kiln_jargs *a, kiln_jv *out) {
    kiln_status st = KILN_OK;
    kiln_buf b = {0};
    int auto_idx = 0;
    for (size_t i = 0; i < n && !st;) {
        char ch = s[i];
        if (ch == '{' && i + 1 < n && s[i + 1] == '{') {
            st = kiln_buf_append(&b, "{", 1);
            i += 2;
            continue;
        }
        if (ch == '}' && i + 1 < n && s[i + 1] == '}') {
            st = kiln_buf_append(&b, "}", 1);
            i += 2;
            continue;
        }
        if (ch == '}') {
            st = kiln_jerr(c, "single '}' encountered in format string");
            break;
        }
        if (ch != '{') {
            st = kiln_buf_append(&b, s + i, 1);
            i++;
            continue;
        }
        const char *e = memchr(s + i, '}', n - i);
        if (!e) {
            st = kiln_jerr(c, "single '{' encountered in format string");
            break;
        }
        const char *f = s + i + 1;
        size_t fl = (size_t)(e - f);
        const char *spec = memchr(f, ':', fl), *conv = memchr(f, '!', fl);
        if (spec && conv && conv > spec) conv = NULL;
        size_t name_len = conv ? (size_t)(conv - f) : spec ? (size_t)(spec - f) : fl;
        const kiln_jv *v = NULL;
        if (!name_len) {
            v = arg(a, auto_idx++, NULL);
        } else if (f[0] >= '0' && f[0] <= '9') {
            v = arg(a, atoi(f), NULL);
        } else {
            for (int k = 0; k < a->n_kw && !v; k++)
                if (a->kw_lens[k] == name_len && !memcmp(a->kw_names[k], f, name_len)) v = &a->kw_vals[k];
            if (!v) {
                st = kiln_jerr(c, "format(): no keyword argument '%.*s'", (int)name_len, f);
                break;
            }
        }
        if (!v) {
            st = kiln_jerr(c, "format(): replacement index out of range");
            break;
        }
        kiln_jv val = *v;
        if (conv && conv + 1 < e && conv[1] == 'r') {
            kiln_buf r = {0};
            st = kiln_jv_repr(c, v, &r);
            if (!st) st = buf_value(c, &r, &val);
            else kiln_buf_free(&r);
            if (st) break;
        }
        st = apply_spec(c, &val, spec ? spec + 1 : "", spec ? (size_t)(e - spec - 1) : 0, &b);
        i = (size_t)(e - s) + 1;
    }
    if (st) {
        kiln_buf_free(&b);
        return st;
    }
    return buf_value(c, &b, out);
}

kiln_status kiln_jpercent_format(kiln_jctx *c, const kiln_jv *fmtv, const kiln_jv *args, kiln_jv *out) {
    kiln_status st = KILN_OK;
    kiln_buf b = {0};
    const kiln_jv *vals = args;
    size_t nv = 1, used = 0;
    if (args->type == KILN_JV_LIST && (args->flags & KILN_JV_TUPLE)) {
        vals = args->u.l->items;
        nv = args->u.l->n;
    }
    /* like CPython, a dict or list argument is taken as a mapping: no
     * "not all arguments converted" error */
    bool mapping = args->type == KILN_JV_DICT || (args->type == KILN_JV_LIST && !(args->flags & KILN_JV_TUPLE));
    const char *s = fmtv->u.s;
    size_t n = fmtv->n;
    for (size_t i = 0; i < n && !st;) {
        if (s[i] != '%') {
            st = kiln_buf_append(&b, s + i, 1);
            i++;
            continue;
        }
        i++;
        if (i < n && s[i] == '%') {
            st = kiln_buf_append(&b, "%", 1);
            i++;
            continue;
        }
        const kiln_jv *v = NULL;
        if (i < n && s[i] == '(') {
            const char *e = memchr(s + i, ')', n - i);
            if (!e || args->type != KILN_JV_DICT) {
                st = kiln_jerr(c, "format requires a mapping");
                break;
            }
            v = kiln_jv_dict_get_str(args->u.d, s + i + 1, (size_t)(e - s - i - 1));
            if (!v) {
                st = kiln_jerr(c, "format key '%.*s' not found", (int)(e - s - i - 1), s + i + 1);
                break;
            }
            i = (size_t)(e - s) + 1;
        }
        char spec[32] = "%";
        size_t sp = 1;
        while (i < n && strchr("-+ #0", s[i]) && sp < 8) spec[sp++] = s[i++];
        while (i < n && s[i] >= '0' && s[i] <= '9' && sp < 16) spec[sp++] = s[i++];
        if (i < n && s[i] == '.') {
            spec[sp++] = s[i++];
            while (i < n && s[i] >= '0' && s[i] <= '9' && sp < 24) spec[sp++] = s[i++];
        }
        if (i >= n) {
            st = kiln_jerr(c, "incomplete format");
            break;
        }
        char conv = s[i++];
        if (!v) {
            if (mapping || used >= nv) {
                st = kiln_jerr(c, "not enough arguments for format string");
                break;
            }
            v = &vals[used++];
        }
        char tmp[512];
        if (conv == 's' || conv == 'r') {
            kiln_buf t = {0};
            st = conv == 's' ? kiln_jv_to_str(c, v, &t) : kiln_jv_repr(c, v, &t);
            if (!st) {
                spec[sp++] = 's';
                spec[sp] = 0;
                if (sp == 2) st = kiln_buf_append(&b, t.data ? t.data : "", t.len);
                else {
                    char *x = kiln_strndup(t.data ? t.data : "", KILN_MIN(t.len, 400));
                    snprintf(tmp, sizeof tmp, spec, x ? x : "");
                    free(x);
                    st = kiln_buf_puts(&b, tmp);
                }
            }
            kiln_buf_free(&t);
        } else if (strchr("dioxXc", conv)) {
            if (v->type != KILN_JV_INT && v->type != KILN_JV_BOOL && v->type != KILN_JV_FLOAT) {
                st = kiln_jerr(c, "%%%c format: a real number is required, not %s", conv, kiln_jv_type_name(v));
                break;
            }
            long long x = v->type == KILN_JV_INT ? v->u.i : v->type == KILN_JV_BOOL ? v->u.b : (long long)v->u.f;
            if (conv == 'c') {
                st = put_cp(&b, (uint32_t)x);
            } else {
                spec[sp++] = 'l';
                spec[sp++] = 'l';
                spec[sp++] = conv == 'i' ? 'd' : conv;
                spec[sp] = 0;
                snprintf(tmp, sizeof tmp, spec, x);
                st = kiln_buf_puts(&b, tmp);
            }
        } else if (strchr("eEfFgG", conv)) {
            if (v->type != KILN_JV_INT && v->type != KILN_JV_BOOL && v->type != KILN_JV_FLOAT) {
                st = kiln_jerr(c, "must be real number, not %s", kiln_jv_type_name(v));
                break;
            }
            double x = v->type == KILN_JV_FLOAT ? v->u.f : v->type == KILN_JV_INT ? (double)v->u.i : v->u.b;
            spec[sp++] = conv;
            spec[sp] = 0;
            snprintf(tmp, sizeof tmp, spec, x);
            st = kiln_buf_puts(&b, tmp);
        } else {
            st = kiln_jerr(c, "unsupported format character '%c'", conv);
        }
    }
    if (!st && !mapping && used < nv) st = kiln_jerr(c, "not all arguments converted during string formatting");
    if (st) {
        kiln_buf_free(&b);
        return st;
    }
    return buf_value(c, &b, out);
}

/* ----------------------------------------------------------- attributes */

/* Jinja's make_attrgetter: "a.b.0" resolved with getitem per part. */
static kiln_status attr_path(kiln_jctx *c, const kiln_jv *item, const kiln_jv *attr, kiln_jv *out) {
    if (attr->type == KILN_JV_INT) return kiln_jv_getitem(c, item, attr, out);
    if (attr->type != KILN_JV_STR) return kiln_jerr(c, "attribute must be a string");
    kiln_jv cur = *item;
    const char *s = attr->u.s;
    size_t n = attr->n, i = 0;
    while (i <= n) {
        const char *dot = memchr(s + i, '.', n - i);
        size_t e = dot ? (size_t)(dot - s) : n;
        kiln_jv key = kiln_jv_strv(s + i, e - i);
        bool digits = e > i;
        for (size_t k = i; k < e; k++) digits = digits && s[k] >= '0' && s[k] <= '9';
        if (digits) key = kiln_jv_int(strtoll(s + i, NULL, 10));
        kiln_status st = kiln_jv_getitem(c, &cur, &key, &cur);
        if (st) return st;
        if (!dot) break;
        i = e + 1;
    }
    *out = cur;
    return KILN_OK;
}

/* ------------------------------------------------------------- sorting */

typedef struct sort_ctx {
    kiln_jctx *c;
    bool case_sensitive;
    kiln_status st;
} sort_ctx;

static kiln_status key_of(kiln_jctx *c, const kiln_jv *v, bool case_sensitive, kiln_jv *out) {
    if (!case_sensitive && v->type == KILN_JV_STR) return map_case(c, v->u.s, v->n, CASE_LOWER, out);
    *out = *v;
    return KILN_OK;
}

static kiln_status merge_sort(kiln_jctx *c, kiln_jv *keys, size_t *idx, size_t n, bool reverse) {
    if (n < 2) return KILN_OK;
    size_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    kiln_status st = KILN_OK;
    for (size_t w = 1; w < n && !st; w *= 2) {
        for (size_t lo = 0; lo < n && !st; lo += 2 * w) {
            size_t mid = KILN_MIN(lo + w, n), hi = KILN_MIN(lo + 2 * w, n), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int r;
                if ((st = kiln_jv_cmp(c, &keys[idx[j]], &keys[idx[i]], "<", &r))) break;
                if (reverse) r = -r;
                tmp[k++] = r < 0 ? idx[j++] : idx[i++];
            }
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
            if (!st) memcpy(idx + lo, tmp + lo, (hi - lo) * sizeof *idx);
        }
    }
    free(tmp);
    return st;
}

/* Sort items (a list) by key (attribute / case folding). */
static kiln_status sorted(kiln_jctx *c, kiln_jlist *items, const kiln_jv *attr, bool case_sensitive, bool reverse,
                          size_t **order_out) {
    kiln_status st = KILN_OK;
    size_t n = items->n;
    *order_out = NULL;
    kiln_jv *keys = kiln_ja_alloc(c->a, (n ? n : 1) * sizeof *keys);
    size_t *order = kiln_ja_alloc(c->a, (n ? n : 1) * sizeof *order);
    if (!keys || !order) return oom();
    for (size_t i = 0; i < n && !st; i++) {
        order[i] = i;
        kiln_jv k = items->items[i];
        if (attr && attr->type != KILN_JV_NONE) st = attr_path(c, &items->items[i], attr, &k);
        if (!st) st = key_of(c, &k, case_sensitive, &keys[i]);
    }
    if (!st) st = merge_sort(c, keys, order, n, reverse);
    *order_out = order;
    return st;
}

/* A generator over in (map, select, ...): Jinja's are lazy, so a
 * non-iterable input is an error only once the generator is consumed. */
static kiln_status gen_source(kiln_jctx *c, const kiln_jv *in, kiln_jlist **items, kiln_jv *broken, bool *is_broken,
                              bool falsy_is_empty) {
    *is_broken = false;
    if (falsy_is_empty && !kiln_jv_truthy(in)) { /* map/select: "if value: for item in value: ..." */
        kiln_jv e;
        kiln_status st = kiln_jv_list_new(c, 0, &e);
        if (st) return st;
        *items = e.u.l;
        return KILN_OK;
    }
    if (in->type == KILN_JV_LIST && (in->flags & KILN_JV_GEN) && in->u.l->err) { /* still lazy */
        kiln_status st = kiln_jv_list_new(c, 0, broken);
        if (st) return st;
        broken->flags = KILN_JV_GEN;
        broken->u.l->err = in->u.l->err;
        *is_broken = true;
        return KILN_OK;
    }
    switch (in->type) {
    case KILN_JV_UNDEF:
    case KILN_JV_LIST:
    case KILN_JV_DICT:
    case KILN_JV_NS:
    case KILN_JV_STR: return kiln_jv_iter(c, in, items);
    default: {
        kiln_status st = kiln_jv_list_new(c, 0, broken);
        if (st) return st;
        broken->flags = KILN_JV_GEN;
        char *msg = kiln_ja_alloc(c->a, 96);
        if (!msg) return oom();
        snprintf(msg, 96, "'%s' object is not iterable", kiln_jv_type_name(in));
        broken->u.l->err = msg;
        *is_broken = true;
        return KILN_OK;
    }
    }
}

/* ---------------------------------------------------------------- tests */

static kiln_status test_impl(kiln_jctx *c, const char *name, size_t n, const kiln_jv *v, const kiln_jargs *a, bool *r) {
    kiln_status st;
    const kiln_jv *x = arg(a, 0, NULL);
#define T(nm) eqs(name, n, nm)
    {
        static const char *const one_arg[] = {"divisibleby", "sameas", "eq", "equalto", "==", "ne", "!=", "lt",
                                              "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=",
                                              "in", NULL};
        int max = 0;
        for (int i = 0; one_arg[i]; i++)
            if (T(one_arg[i])) max = 1;
        if (a->n_args + a->n_kw > max)
            return kiln_jerr(c, "test_%.*s() takes %d positional argument%s but %d were given", (int)n, name, max + 1,
                             max ? "s" : "", a->n_args + a->n_kw + 1);
    }
    if (T("defined")) *r = v->type != KILN_JV_UNDEF;
    else if (T("undefined")) *r = v->type == KILN_JV_UNDEF;
    else if (T("none")) *r = v->type == KILN_JV_NONE;
    else if (T("boolean")) *r = v->type == KILN_JV_BOOL;
    else if (T("false")) *r = v->type == KILN_JV_BOOL && !v->u.b;
    else if (T("true")) *r = v->type == KILN_JV_BOOL && v->u.b;
    else if (T("integer")) *r = v->type == KILN_JV_INT;
    else if (T("float")) *r = v->type == KILN_JV_FLOAT;
    else if (T("number")) *r = v->type == KILN_JV_INT || v->type == KILN_JV_FLOAT || v->type == KILN_JV_BOOL;
    else if (T("string")) *r = v->type == KILN_JV_STR;
    else if (T("mapping")) *r = v->type == KILN_JV_DICT;
    else if (T("iterable")) *r = v->type == KILN_JV_LIST || v->type == KILN_JV_DICT || v->type == KILN_JV_STR || v->type == KILN_JV_UNDEF || v->type == KILN_JV_NS;
    else if (T("sequence"))
        *r = (v->type == KILN_JV_LIST && !(v->flags & KILN_JV_GEN)) || v->type == KILN_JV_DICT ||
             v->type == KILN_JV_STR || v->type == KILN_JV_UNDEF;
    else if (T("callable"))
        *r = v->type == KILN_JV_FUNC || v->type == KILN_JV_MACRO || v->type == KILN_JV_METHOD || v->type == KILN_JV_UNDEF;
    else if (T("escaped")) *r = false;
    else if (T("odd") || T("even") || T("divisibleby")) {
        /* value % 2 == 1, value % 2 == 0, value % num == 0: Python's % */
        if (T("divisibleby") && !x) return kiln_jerr(c, "test_divisibleby() missing 1 required positional argument: 'num'");
        kiln_jv two = kiln_jv_int(2), m, want = kiln_jv_int(T("odd") ? 1 : 0);
        if ((st = kiln_jbinop(c, KILN_JOP_MOD, v, T("divisibleby") ? x : &two, &m))) return st;
        *r = kiln_jv_eq(&m, &want);
    } else if (T("sameas")) {
        if (!x) return kiln_jerr(c, "the 'sameas' test needs an argument");
        *r = v->type == x->type && (v->type == KILN_JV_NONE || v->type == KILN_JV_UNDEF ||
                                    (v->type == KILN_JV_BOOL && v->u.b == x->u.b) || kiln_jv_eq(v, x));
    } else if (T("eq") || T("equalto") || T("==") || T("ne") || T("!=")) {
        if (!x) return kiln_jerr(c, "the '%.*s' test needs an argument", (int)n, name);
        *r = kiln_jv_eq(v, x) != (T("ne") || T("!="));
    } else if (T("lt") || T("lessthan") || T("<") || T("le") || T("<=") || T("gt") || T("greaterthan") || T(">") ||
               T("ge") || T(">=")) {
        if (!x) return kiln_jerr(c, "the '%.*s' test needs an argument", (int)n, name);
        int cmp;
        if ((st = kiln_jv_cmp(c, v, x, "<", &cmp))) return st;
        if (T("lt") || T("lessthan") || T("<")) *r = cmp < 0;
        else if (T("le") || T("<=")) *r = cmp <= 0;
        else if (T("gt") || T("greaterthan") || T(">")) *r = cmp > 0;
        else *r = cmp >= 0;
    } else if (T("in")) {
        if (!x) return kiln_jerr(c, "the 'in' test needs an argument");
        if (x->type == KILN_JV_STR) {
            if (v->type != KILN_JV_STR) return kiln_jerr(c, "'in <string>' requires string as left operand");
            *r = !v->n || memmem(x->u.s, x->n, v->u.s, v->n);
        } else if (x->type == KILN_JV_DICT || x->type == KILN_JV_NS) {
            *r = kiln_jv_dict_get(x->u.d, *v) != NULL;
        } else {
            kiln_jlist *l;
            if ((st = kiln_jv_iter(c, x, &l))) return st;
            *r = false;
            for (size_t i = 0; i < l->n && !*r; i++) *r = kiln_jv_eq(&l->items[i], v);
        }
    } else if (T("lower") || T("upper")) { /* str.islower / str.isupper */
        const char *s;
        size_t sl;
        if ((st = sv(c, v, &s, &sl))) return st;
        bool any = false, ok = true;
        for (size_t i = 0; i < sl && ok;) {
            uint32_t cp;
            i += next_cp(s, sl, i, &cp);
            if (T("lower") ? u_isupper(c, cp) : u_islower(c, cp)) ok = false;
            if (T("lower") ? u_islower(c, cp) : u_isupper(c, cp)) any = true;
        }
        *r = ok && any;
    } else if (T("filter") || T("test")) {
        return kiln_jerr(c, "the '%.*s' test is not supported", (int)n, name);
    } else {
        return kiln_jerr(c, "no test named '%.*s'", (int)n, name);
    }
#undef T
    return KILN_OK;
}

kiln_status kiln_jtest(kiln_jctx *c, const char *name, size_t n, const kiln_jv *in, const kiln_jargs *a, bool *out) {
    return test_impl(c, name, n, in, a, out);
}

/* -------------------------------------------------------------- filters */

static kiln_status seq_filter(kiln_jctx *c, const kiln_jv *in, const kiln_jargs *a, bool select, bool by_attr,
                              kiln_jv *out) {
    kiln_status st;
    kiln_jlist *items;
    bool broken;
    if ((st = gen_source(c, in, &items, out, &broken, true)) || broken) return st;
    const kiln_jv *attr = NULL;
    int first_test = 0;
    if (by_attr) {
        attr = arg(a, 0, NULL);
        if (!attr) return kiln_jerr(c, "%s needs an attribute name", select ? "selectattr" : "rejectattr");
        first_test = 1;
    }
    const kiln_jv *test = arg(a, first_test, NULL);
    if (test && test->type != KILN_JV_STR) return kiln_jerr(c, "a test name must be a string");
    int n_targs = a->n_args > first_test + 1 ? a->n_args - first_test - 1 : 0;
    kiln_jargs targs = {n_targs ? a->args + first_test + 1 : NULL, n_targs, a->kw_names, a->kw_lens, a->kw_vals, a->n_kw};
    if ((st = kiln_jv_list_new(c, items->n, out))) return st;
    size_t k = 0;
    for (size_t i = 0; i < items->n; i++) {
        kiln_jv v = items->items[i];
        if (attr && (st = attr_path(c, &items->items[i], attr, &v))) return st;
        bool r;
        if (test) {
            if ((st = test_impl(c, test->u.s, test->n, &v, &targs, &r))) return st;
        } else {
            r = kiln_jv_truthy(&v);
        }
        if (r == select) out->u.l->items[k++] = items->items[i];
    }
    out->u.l->n = k;
    out->flags = KILN_JV_GEN;
    return KILN_OK;
}

static kiln_status jlength(kiln_jctx *c, const kiln_jv *v, int64_t *n) {
    *n = 0;
    switch (v->type) {
    case KILN_JV_UNDEF: *n = 0; return KILN_OK;
    case KILN_JV_STR: *n = (int64_t)kiln_jstr_len(v->u.s, v->n); return KILN_OK;
    case KILN_JV_LIST:
        if (v->flags & KILN_JV_GEN) return kiln_jerr(c, "object of type 'generator' has no len()");
        *n = (int64_t)v->u.l->n;
        return KILN_OK;
    case KILN_JV_DICT:
    case KILN_JV_NS: *n = (int64_t)v->u.d->n; return KILN_OK;
    default: return kiln_jerr(c, "object of type '%s' has no len()", kiln_jv_type_name(v));
    }
}

static kiln_status to_int(kiln_jctx *c, const kiln_jv *v, const kiln_jv *def, int base, kiln_jv *out) {
    (void)c;
    if (v->type == KILN_JV_INT) *out = *v;
    else if (v->type == KILN_JV_BOOL) *out = kiln_jv_int(v->u.b);
    else if (v->type == KILN_JV_FLOAT && isfinite(v->u.f) && fabs(v->u.f) < 9.2e18) *out = kiln_jv_int((int64_t)v->u.f);
    else if (v->type == KILN_JV_STR) {
        char buf[128];
        size_t a, b;
        strip_range(v->u.s, v->n, NULL, 0, true, true, &a, &b);
        size_t w = 0;
        for (size_t i = a; i < b && w + 1 < sizeof buf; i++)
            if (v->u.s[i] != '_') buf[w++] = v->u.s[i];
        buf[w] = 0;
        char *end;
        errno = 0;
        long long x = strtoll(buf, &end, base);
        if (w && !*end && !errno) {
            *out = kiln_jv_int(x);
        } else {
            double d = strtod(buf, &end);
            if (w && !*end && isfinite(d) && fabs(d) < 9.2e18) *out = kiln_jv_int((int64_t)d);
            else *out = def ? *def : kiln_jv_int(0);
        }
    } else {
        *out = def ? *def : kiln_jv_int(0);
    }
    return KILN_OK;
}

static kiln_status to_float(kiln_jctx *c, const kiln_jv *v, const kiln_jv *def, kiln_jv *out) {
    (void)c;
    if (v->type == KILN_JV_FLOAT) *out = *v;
    else if (v->type == KILN_JV_INT) *out = kiln_jv_float((double)v->u.i);
    else if (v->type == KILN_JV_BOOL) *out = kiln_jv_float(v->u.b);
    else if (v->type == KILN_JV_STR) {
        char buf[128];
        size_t a, b;
        strip_range(v->u.s, v->n, NULL, 0, true, true, &a, &b);
        size_t w = KILN_MIN(b - a, sizeof buf - 1);
        memcpy(buf, v->u.s + a, w);
        buf[w] = 0;
        char *end;
        double d = strtod(buf, &end);
        *out = (w && !*end) ? kiln_jv_float(d) : def ? *def : kiln_jv_float(0);
    } else {
        *out = def ? *def : kiln_jv_float(0);
    }
    return KILN_OK;
}

static kiln_status html_escape(kiln_jctx *c, const char *s, size_t n, kiln_jv *out) {
    kiln_buf b = {0};
    kiln_status st = KILN_OK;
    for (size_t i = 0; i < n && !st; i++) {
        switch (s[i]) {
        case '&': st = kiln_buf_puts(&b, "&amp;"); break;
        case '<': st = kiln_buf_puts(&b, "&lt;"); break;
        case '>': st = kiln_buf_puts(&b, "&gt;"); break;
        case '"': st = kiln_buf_puts(&b, "&#34;"); break;
        case '\'': st = kiln_buf_puts(&b, "&#39;"); break;
        default: st = kiln_buf_append(&b, s + i, 1);
        }
    }
    if (st) {
        kiln_buf_free(&b);
        return st;
    }
    return buf_value(c, &b, out);
}

static kiln_status do_indent(kiln_jctx *c, const char *s, size_t n, const kiln_jargs *a, kiln_jv *out) {
    kiln_status st;
    const kiln_jv *w = arg(a, 0, "width");
    const char *ind = "    ";
    size_t il = 4;
    char spaces[256];
    if (w && w->type == KILN_JV_STR) {
        ind = w->u.s;
        il = w->n;
    } else if (w) {
        int64_t k;
        if ((st = int_arg(c, w, 4, "indent width", &k))) return st;
        if (k < 0) k = 0;
        if (k > 255) k = 255;
        memset(spaces, ' ', (size_t)k);
        ind = spaces;
        il = (size_t)k;
    }
    bool first = truthy_arg(arg(a, 1, "first"), false), blank = truthy_arg(arg(a, 2, "blank"), false);
    /* s + "\n", then splitlines */
    kiln_buf b = {0};
    kiln_jv src, lines;
    char *p = kiln_ja_alloc(c->a, n + 2);
    if (!p) return oom();
    memcpy(p, s, n);
    p[n] = '\n';
    p[n + 1] = 0;
    src = kiln_jv_strv(p, n + 1);
    if ((st = do_splitlines(c, src.u.s, src.n, false, &lines))) return st;
    kiln_jlist *l = lines.u.l;
    if (first) st = kiln_buf_append(&b, ind, il);
    for (size_t i = 0; i < l->n && !st; i++) {
        const kiln_jv *x = &l->items[i];
        if (i) {
            st = kiln_buf_append(&b, "\n", 1);
            if (!st && (blank || x->n)) st = kiln_buf_append(&b, ind, il);
        }
        if (!st) st = kiln_buf_append(&b, x->u.s, x->n);
    }
    if (st) {
        kiln_buf_free(&b);
        return st;
    }
    return buf_value(c, &b, out);
}

static kiln_status join(kiln_jctx *c, const kiln_jv *in, const char *sep, size_t sl, const kiln_jv *attr, bool strict,
                        kiln_jv *out) {
    kiln_status st;
    kiln_jlist *items;
    if ((st = kiln_jv_iter(c, in, &items))) return st;
    kiln_buf b = {0};
    for (size_t i = 0; i < items->n; i++) {
        kiln_jv v = items->items[i];
        if (attr && (st = attr_path(c, &items->items[i], attr, &v))) break;
        if (strict && v.type != KILN_JV_STR) {
            st = kiln_jerr(c, "sequence item %zu: expected str instance, %s found", i, kiln_jv_type_name(&v));
            break;
        }
        if (i && (st = kiln_buf_append(&b, sep, sl))) break;
        if ((st = kiln_jv_to_str(c, &v, &b))) break;
        if (b.len > KILN_CHAT_MAX_OUTPUT) {
            st = KILN_FAIL(KILN_ERR_LIMIT, "chat template: join() result too long");
            break;
        }
    }
    if (st) {
        kiln_buf_free(&b);
        return st;
    }
    return buf_value(c, &b, out);
}

static kiln_status items_of(kiln_jctx *c, const kiln_jv *in, kiln_jv *out) {
    kiln_status st;
    if (in->type == KILN_JV_UNDEF) return kiln_jv_list_new(c, 0, out);
    if (in->type != KILN_JV_DICT && in->type != KILN_JV_NS) return kiln_jerr(c, "Can only get item pairs from a mapping.");
    const kiln_jdict *d = in->u.d;
    if ((st = kiln_jv_list_new(c, d->n, out))) return st;
    for (size_t i = 0; i < d->n; i++) {
        kiln_jv t;
        if ((st = kiln_jv_list_new(c, 2, &t))) return st;
        t.flags = KILN_JV_TUPLE;
        t.u.l->items[0] = d->keys[i];
        t.u.l->items[1] = d->vals[i];
        out->u.l->items[i] = t;
    }
    return KILN_OK;
}

/* Python's str.center: the odd padding character goes left when the
 * width is odd (CPython: left = pad / 2 + (pad & width & 1)). */
static kiln_status py_center(kiln_jctx *c, const char *s, size_t n, int64_t width, uint32_t fill, kiln_jv *out) {
    kiln_status st = KILN_OK;
    int64_t len = (int64_t)kiln_jstr_len(s, n);
    if (width > 100000) width = 100000;
    if (width <= len) {
        *out = kiln_jv_strv(s, n);
        return KILN_OK;
    }
    int64_t pad = width - len, left = pad / 2 + (pad & width & 1), right = pad - left;
    kiln_buf b = {0};
    for (int64_t i = 0; i < left && !st; i++) st = put_cp(&b, fill);
    if (!st) st = kiln_buf_append(&b, s, n);
    for (int64_t i = 0; i < right && !st; i++) st = put_cp(&b, fill);
    if (st) {
        kiln_buf_free(&b);
        return st;
    }
    return buf_value(c, &b, out);
}

static kiln_status filter_impl(kiln_jctx *c, const char *name, size_t n, const kiln_jv *in, const kiln_jargs *a,
                               kiln_jv *out) {
    kiln_status st = KILN_OK;
    const char *s;
    size_t sl;
#define F(nm) eqs(name, n, nm)
#define ARGS(maxpos, ...)                                                                                          \
    do {                                                                                                           \
        static const char *const kw_[] = {__VA_ARGS__, NULL};                                                      \
        if ((st = check_args(c, a, maxpos, kw_, "filter", name, n))) return st;                                    \
    } while (0)
    if (F("default") || F("d")) {
        ARGS(2, "default_value", "boolean");
        const kiln_jv *dv = arg(a, 0, "default_value");
        bool boolean = truthy_arg(arg(a, 1, "boolean"), false);
        if (in->type == KILN_JV_UNDEF || (boolean && !kiln_jv_truthy(in))) *out = dv ? *dv : kiln_jv_strv("", 0);
        else *out = *in;
        return KILN_OK;
    }
    if (F("length") || F("count")) {
        ARGS(0, "");
        int64_t k;
        if ((st = jlength(c, in, &k))) return st;
        *out = kiln_jv_int(k);
        return KILN_OK;
    }
    if (F("tojson")) {
        ARGS(5, "ensure_ascii", "indent", "separators", "sort_keys");
        const kiln_jv *ea = arg(a, 0, "ensure_ascii"), *ind = arg(a, 1, "indent"), *sep = arg(a, 2, "separators"),
                      *sk = arg(a, 3, "sort_keys");
        int64_t indent = -1;
        if (ind && ind->type != KILN_JV_NONE) {
            if ((st = int_arg(c, ind, -1, "indent", &indent))) return st;
            if (indent < 0) indent = 0;
            if (indent > 64) indent = 64;
        }
        char isep[64] = "", ksep[64] = "";
        bool have_sep = false;
        if (sep && sep->type == KILN_JV_LIST && sep->u.l->n == 2 && sep->u.l->items[0].type == KILN_JV_STR &&
            sep->u.l->items[1].type == KILN_JV_STR) {
            snprintf(isep, sizeof isep, "%.*s", (int)sep->u.l->items[0].n, sep->u.l->items[0].u.s);
            snprintf(ksep, sizeof ksep, "%.*s", (int)sep->u.l->items[1].n, sep->u.l->items[1].u.s);
            have_sep = true;
        } else if (sep && sep->type != KILN_JV_NONE) {
            return kiln_jerr(c, "tojson separators must be a pair of strings");
        }
        kiln_buf b = {0};
        st = kiln_jv_to_json(c, in, &b, truthy_arg(ea, false), (int)indent, have_sep ? isep : NULL,
                             have_sep ? ksep : NULL, truthy_arg(sk, false));
        if (st) {
            kiln_buf_free(&b);
            return st;
        }
        return buf_value(c, &b, out);
    }
    if (F("trim")) {
        ARGS(1, "chars");
        if ((st = sv(c, in, &s, &sl))) return st;
        return do_strip(c, s, sl, arg(a, 0, "chars"), true, true, out);
    }
    if (F("upper") || F("lower") || F("capitalize") || F("title")) {
        ARGS(0, "");
        if ((st = sv(c, in, &s, &sl))) return st;
        return map_case(c, s, sl, F("upper") ? CASE_UPPER : F("lower") ? CASE_LOWER : F("capitalize") ? CASE_CAPITALIZE : CASE_JTITLE, out);
    }
    if (F("string")) {
        ARGS(0, "");
        if (in->type == KILN_JV_UNDEF) {
            *out = kiln_jv_strv("", 0);
            return KILN_OK;
        }
        return kiln_jv_as_str(c, in, out);
    }
    if (F("safe")) {
        *out = *in;
        return KILN_OK;
    }
    if (F("escape") || F("e") || F("forceescape")) {
        if ((st = sv(c, in, &s, &sl))) return st;
        return html_escape(c, s, sl, out);
    }
    if (F("join")) {
        ARGS(2, "d", "attribute");
        const kiln_jv *d = arg(a, 0, "d"), *attr = arg(a, 1, "attribute");
        const char *sep = "";
        size_t sepl = 0;
        if (d && (st = sv(c, d, &sep, &sepl))) return st;
        return join(c, in, sep, sepl, attr && attr->type != KILN_JV_NONE ? attr : NULL, false, out);
    }
    if (F("items")) {
        ARGS(0, "");
        if (in->type != KILN_JV_UNDEF && in->type != KILN_JV_DICT && in->type != KILN_JV_NS) {
            /* a generator: the error comes when it is consumed */
            if ((st = kiln_jv_list_new(c, 0, out))) return st;
            out->flags = KILN_JV_GEN;
            out->u.l->err = "Can only get item pairs from a mapping.";
            return KILN_OK;
        }
        if ((st = items_of(c, in, out))) return st;
        out->flags = KILN_JV_GEN;
        return KILN_OK;
    }
    if (F("list")) {
        ARGS(0, "");
        kiln_jlist *l;
        if ((st = kiln_jv_iter(c, in, &l))) return st;
        if ((st = kiln_jv_list_new(c, l->n, out))) return st;
        if (l->n) memcpy(out->u.l->items, l->items, l->n * sizeof(kiln_jv));
        return KILN_OK;
    }
    if (F("first") || F("last")) {
        ARGS(0, "");
        if (F("last") && in->type == KILN_JV_LIST && (in->flags & KILN_JV_GEN))
            return kiln_jerr(c, "'generator' object is not reversible");
        kiln_jlist *l;
        if ((st = kiln_jv_iter(c, in, &l))) return st;
        static const char first_msg[] = "No first item, sequence was empty.", last_msg[] = "No last item, sequence was empty.";
        *out = l->n ? l->items[F("first") ? 0 : l->n - 1]
                    : F("first") ? kiln_jv_undef(first_msg, sizeof first_msg - 1, KILN_JV_UNDEF_HINT)
                                 : kiln_jv_undef(last_msg, sizeof last_msg - 1, KILN_JV_UNDEF_HINT);
        return KILN_OK;
    }
    if (F("reverse")) {
        ARGS(0, "");
        if (in->type == KILN_JV_STR) {
            kiln_buf b = {0};
            for (size_t i = in->n; i > 0 && !st;) {
                size_t k = i - 1;
                while (k > 0 && ((unsigned char)in->u.s[k] & 0xC0) == 0x80) k--;
                st = kiln_buf_append(&b, in->u.s + k, i - k);
                i = k;
            }
            if (st) {
                kiln_buf_free(&b);
                return st;
            }
            return buf_value(c, &b, out);
        }
        kiln_jlist *l;
        if ((st = kiln_jv_iter(c, in, &l))) return st;
        if ((st = kiln_jv_list_new(c, l->n, out))) return st;
        for (size_t i = 0; i < l->n; i++) out->u.l->items[i] = l->items[l->n - 1 - i];
        out->flags = KILN_JV_GEN; /* reversed(): an iterator */
        return KILN_OK;
    }
    if (F("replace")) {
        ARGS(3, "old", "new", "count");
        if ((st = sv(c, in, &s, &sl))) return st;
        int64_t cnt;
        if ((st = int_arg(c, arg(a, 2, "count"), -1, "count", &cnt))) return st;
        return do_replace(c, s, sl, arg(a, 0, "old"), arg(a, 1, "new"), cnt, out);
    }
    if ((F("int") || F("float") || F("abs") || F("round")) && in->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, in);
    if (F("int")) {
        ARGS(2, "default", "base");
        int64_t base;
        if ((st = int_arg(c, arg(a, 1, "base"), 10, "base", &base))) return st;
        if (base != 0 && (base < 2 || base > 36)) return kiln_jerr(c, "int() base must be >= 2 and <= 36, or 0");
        return to_int(c, in, arg(a, 0, "default"), (int)base, out);
    }
    if (F("float")) {
        ARGS(1, "default");
        return to_float(c, in, arg(a, 0, "default"), out);
    }
    if (F("abs")) {
        ARGS(0, "");
        if (in->type == KILN_JV_INT) *out = kiln_jv_int(in->u.i < 0 ? -in->u.i : in->u.i);
        else if (in->type == KILN_JV_FLOAT) *out = kiln_jv_float(fabs(in->u.f));
        else if (in->type == KILN_JV_BOOL) *out = kiln_jv_int(in->u.b);
        else return kiln_jerr(c, "bad operand type for abs(): '%s'", kiln_jv_type_name(in));
        return KILN_OK;
    }
    if (F("round")) {
        ARGS(2, "precision", "method");
        int64_t prec;
        if ((st = int_arg(c, arg(a, 0, "precision"), 0, "precision", &prec))) return st;
        const kiln_jv *m = arg(a, 1, "method");
        const char *meth = "common";
        size_t ml = 6;
        if (m && (st = sv(c, m, &meth, &ml))) return st;
        if (in->type == KILN_JV_INT && eqs(meth, ml, "common")) {
            *out = *in;
            return KILN_OK;
        }
        if (!is_num_like(in)) return kiln_jerr(c, "round() needs a number, got %s", kiln_jv_type_name(in));
        double x = in->type == KILN_JV_FLOAT ? in->u.f : in->type == KILN_JV_INT ? (double)in->u.i : in->u.b;
        if (prec < 0 || prec > 30) return kiln_jerr(c, "round() precision %lld is not supported", (long long)prec);
        double scale = pow(10, (double)prec), r;
        if (eqs(meth, ml, "common")) {
            char buf[512];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x); /* correctly rounded, ties to even like Python */
            r = strtod(buf, NULL);
        } else if (eqs(meth, ml, "ceil")) {
            r = ceil(x * scale) / scale;
        } else if (eqs(meth, ml, "floor")) {
            r = floor(x * scale) / scale;
        } else {
            return kiln_jerr(c, "method must be common, ceil or floor");
        }
        *out = kiln_jv_float(r);
        return KILN_OK;
    }
    if (F("map")) {
        kiln_jlist *l;
        bool broken;
        if ((st = gen_source(c, in, &l, out, &broken, true)) || broken) return st;
        const kiln_jv *attr = arg(a, -1, "attribute"), *dflt = arg(a, -1, "default");
        if ((st = kiln_jv_list_new(c, l->n, out))) return st;
        out->flags = KILN_JV_GEN;
        if (attr) {
            for (size_t i = 0; i < l->n; i++) {
                if ((st = attr_path(c, &l->items[i], attr, &out->u.l->items[i]))) return st;
                if (dflt && out->u.l->items[i].type == KILN_JV_UNDEF) out->u.l->items[i] = *dflt;
            }
            return KILN_OK;
        }
        const kiln_jv *fname = arg(a, 0, NULL);
        if (!fname || fname->type != KILN_JV_STR) return kiln_jerr(c, "map needs a filter name or attribute=");
        kiln_jargs fa = {a->args + 1, a->n_args - 1, a->kw_names, a->kw_lens, a->kw_vals, a->n_kw};
        for (size_t i = 0; i < l->n; i++)
            if ((st = filter_impl(c, fname->u.s, fname->n, &l->items[i], &fa, &out->u.l->items[i]))) return st;
        return KILN_OK;
    }
    if (F("select") || F("reject")) return seq_filter(c, in, a, F("select"), false, out);
    if (F("selectattr") || F("rejectattr")) return seq_filter(c, in, a, F("selectattr"), true, out);
    if (F("sort") || F("unique") || F("min") || F("max") || F("dictsort")) {
        bool is_sort = F("sort"), is_dictsort = F("dictsort");
        const kiln_jv *rev = is_sort ? arg(a, 0, "reverse") : is_dictsort ? arg(a, 2, "reverse") : NULL;
        const kiln_jv *cs = arg(a, is_sort ? 1 : 0, "case_sensitive");
        const kiln_jv *attr = is_dictsort ? NULL : arg(a, is_sort ? 2 : 1, "attribute");
        if (is_sort) ARGS(3, "reverse", "case_sensitive", "attribute");
        else if (is_dictsort) ARGS(3, "case_sensitive", "by", "reverse");
        else ARGS(2, "case_sensitive", "attribute");
        kiln_jlist *l;
        kiln_jv pairs;
        if (F("unique")) { /* a generator: lazy about non-iterables */
            bool broken;
            if ((st = gen_source(c, in, &l, out, &broken, false)) || broken) return st;
        } else if (is_dictsort) {
            if (in->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, in);
            if ((st = items_of(c, in, &pairs))) return st;
            l = pairs.u.l;
            const kiln_jv *by = arg(a, 1, "by");
            kiln_jv idx = kiln_jv_int(0);
            if (by && by->type == KILN_JV_STR && eqs(by->u.s, by->n, "value")) idx = kiln_jv_int(1);
            attr = kiln_ja_alloc(c->a, sizeof *attr);
            if (!attr) return oom();
            *(kiln_jv *)attr = idx;
        } else if ((st = kiln_jv_iter(c, in, &l))) {
            return st;
        }
        size_t *order;
        if ((st = sorted(c, l, attr, truthy_arg(cs, false), truthy_arg(rev, false), &order))) return st;
        if (F("min") || F("max")) {
            *out = l->n ? l->items[order[F("min") ? 0 : l->n - 1]] : kiln_jv_undef(NULL, 0, 0);
            return KILN_OK;
        }
        if ((st = kiln_jv_list_new(c, l->n, out))) return st;
        if (F("unique")) {
            /* first occurrence of each key, in input order */
            size_t k = 0;
            for (size_t i = 0; i < l->n; i++) {
                kiln_jv ki = l->items[i], kk;
                if (attr && (st = attr_path(c, &l->items[i], attr, &ki))) return st;
                if ((st = key_of(c, &ki, truthy_arg(cs, false), &ki))) return st;
                bool dup = false;
                for (size_t j = 0; j < k && !dup; j++) {
                    kk = out->u.l->items[j];
                    if (attr && (st = attr_path(c, &out->u.l->items[j], attr, &kk))) return st;
                    if ((st = key_of(c, &kk, truthy_arg(cs, false), &kk))) return st;
                    dup = kiln_jv_eq(&kk, &ki);
                }
                if (!dup) out->u.l->items[k++] = l->items[i];
            }
            out->u.l->n = k;
            out->flags = KILN_JV_GEN;
            return KILN_OK;
        }
        for (size_t i = 0; i < l->n; i++) out->u.l->items[i] = l->items[order[i]];
        return KILN_OK;
    }
    if (F("sum")) {
        ARGS(2, "attribute", "start");
        kiln_jlist *l;
        if ((st = kiln_jv_iter(c, in, &l))) return st;
        const kiln_jv *attr = arg(a, 0, "attribute"), *start = arg(a, 1, "start");
        kiln_jv acc = start ? *start : kiln_jv_int(0);
        for (size_t i = 0; i < l->n; i++) {
            kiln_jv v = l->items[i];
            if (attr && attr->type != KILN_JV_NONE && (st = attr_path(c, &l->items[i], attr, &v))) return st;
            bool fl = acc.type == KILN_JV_FLOAT || v.type == KILN_JV_FLOAT;
            if (!is_num_like(&acc) || !is_num_like(&v))
                return kiln_jerr(c, "unsupported operand type(s) for +: '%s' and '%s'", kiln_jv_type_name(&acc),
                                 kiln_jv_type_name(&v));
            double x = acc.type == KILN_JV_FLOAT ? acc.u.f : acc.type == KILN_JV_INT ? (double)acc.u.i : acc.u.b;
            double y = v.type == KILN_JV_FLOAT ? v.u.f : v.type == KILN_JV_INT ? (double)v.u.i : v.u.b;
            if (fl) {
                acc = kiln_jv_float(x + y);
            } else {
                int64_t r, p = acc.type == KILN_JV_INT ? acc.u.i : acc.u.b, q = v.type == KILN_JV_INT ? v.u.i : v.u.b;
                if (__builtin_add_overflow(p, q, &r)) return kiln_jerr(c, "integer overflow");
                acc = kiln_jv_int(r);
            }
        }
        *out = acc;
        return KILN_OK;
    }
    if (F("attr")) {
        ARGS(1, "");
        const kiln_jv *nm = arg(a, 0, NULL);
        if (!nm || nm->type != KILN_JV_STR) return kiln_jerr(c, "attr needs an attribute name");
        return kiln_jv_getattr(c, in, nm->u.s, nm->n, out);
    }
    if (F("indent")) {
        ARGS(3, "width", "first", "blank");
        if (in->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, in);
        if (in->type != KILN_JV_STR) /* Jinja appends "\n" to the value itself */
            return kiln_jerr(c, "unsupported operand type(s) for +=: '%s' and 'str'", kiln_jv_type_name(in));
        return do_indent(c, in->u.s, in->n, a, out);
    }
    if (F("batch")) {
        ARGS(2, "linecount", "fill_with");
        int64_t k;
        if ((st = int_arg(c, arg(a, 0, "linecount"), 0, "linecount", &k))) return st;
        if (k <= 0) return kiln_jerr(c, "batch size must be positive");
        const kiln_jv *fill = arg(a, 1, "fill_with");
        kiln_jlist *l;
        bool broken;
        if ((st = gen_source(c, in, &l, out, &broken, false)) || broken) return st;
        size_t nb = (l->n + (size_t)k - 1) / (size_t)k;
        if ((st = kiln_jv_list_new(c, nb, out))) return st;
        out->flags = KILN_JV_GEN;
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * (size_t)k, cnt = KILN_MIN((size_t)k, l->n - lo);
            size_t m = (fill && fill->type != KILN_JV_NONE) ? (size_t)k : cnt;
            kiln_jv row;
            if ((st = kiln_jv_list_new(c, m, &row))) return st;
            for (size_t i = 0; i < m; i++) row.u.l->items[i] = i < cnt ? l->items[lo + i] : *fill;
            out->u.l->items[b] = row;
        }
        return KILN_OK;
    }
    if (F("center")) {
        ARGS(1, "width");
        if ((st = sv(c, in, &s, &sl))) return st;
        int64_t w;
        if ((st = int_arg(c, arg(a, 0, "width"), 80, "width", &w))) return st;
        return py_center(c, s, sl, w, ' ', out);
    }
    if (F("wordcount")) {
        ARGS(0, "");
        if ((st = sv(c, in, &s, &sl))) return st;
        int64_t k = 0;
        bool inw = false;
        for (size_t i = 0; i < sl;) {
            uint32_t cp;
            i += next_cp(s, sl, i, &cp);
            bool w = cp == '_' || u_isdigit(cp) || u_isalpha(c, cp) || (cp >= 0x80 && !u_isspace(cp) && cp != 0x3000);
            if (w && !inw) k++;
            inw = w;
        }
        *out = kiln_jv_int(k);
        return KILN_OK;
    }
    if (F("format")) {
        if ((st = sv(c, in, &s, &sl))) return st;
        kiln_jv fmt = kiln_jv_strv(s, sl), args;
        if (a->n_kw) {
            if ((st = kiln_jv_dict_new(c, (size_t)a->n_kw, &args))) return st;
            for (int k = 0; k < a->n_kw; k++)
                if ((st = kiln_jv_dict_set(c, args.u.d, kiln_jv_strv(a->kw_names[k], a->kw_lens[k]), a->kw_vals[k]))) return st;
        } else {
            if ((st = kiln_jv_list_new(c, (size_t)a->n_args, &args))) return st;
            args.flags = KILN_JV_TUPLE;
            for (int k = 0; k < a->n_args; k++) args.u.l->items[k] = a->args[k];
        }
        return kiln_jpercent_format(c, &fmt, &args, out);
    }
    static const char *const jinja_unsupported[] = {"slice", "groupby", "truncate", "wordwrap", "urlize",
                                                    "urlencode", "xmlattr", "filesizeformat", "pprint", "striptags",
                                                    "random", NULL};
    for (int i = 0; jinja_unsupported[i]; i++)
        if (F(jinja_unsupported[i])) return kiln_jerr(c, "the '%.*s' filter is not supported", (int)n, name);
#undef F
#undef ARGS
    return kiln_jerr(c, "no filter named '%.*s'", (int)n, name);
}

kiln_status kiln_jfilter(kiln_jctx *c, const char *name, size_t n, const kiln_jv *in, const kiln_jargs *a, kiln_jv *out) {
    kiln_status st = filter_impl(c, name, n, in, a, out);
    /* map, select, reject, selectattr, rejectattr are generators in Jinja:
     * an error while producing their items only surfaces when consumed */
    if (st == KILN_ERR_TEMPLATE && (eqs(name, n, "map") || eqs(name, n, "select") || eqs(name, n, "reject") ||
                                    eqs(name, n, "selectattr") || eqs(name, n, "rejectattr"))) {
        size_t ml = strlen(kiln_last_error());
        char *msg = kiln_ja_alloc(c->a, ml + 1);
        kiln_jv g;
        if (!msg || kiln_jv_list_new(c, 0, &g)) return KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory");
        memcpy(msg, kiln_last_error(), ml + 1);
        g.flags = KILN_JV_GEN;
        g.u.l->err = msg;
        kiln_clear_error();
        *out = g;
        return KILN_OK;
    }
    return st;
}

/* -------------------------------------------------------------- methods */

static kiln_status str_method(kiln_jctx *c, const kiln_jmethod *m, const kiln_jargs *a, kiln_jv *out) {
    kiln_status st;
    const char *s = m->self.u.s, *name = m->name;
    size_t n = m->self.n, nl = m->name_len;
    const kiln_jv *x = arg(a, 0, NULL), *y = arg(a, 1, NULL);
#define M(nm) eqs(name, nl, nm)
    if (M("strip") || M("lstrip") || M("rstrip")) return do_strip(c, s, n, x, !M("rstrip"), !M("lstrip"), out);
    if (M("split") || M("rsplit")) {
        int64_t maxsplit;
        if ((st = int_arg(c, arg(a, 1, "maxsplit"), -1, "maxsplit", &maxsplit))) return st;
        return do_split(c, s, n, arg(a, 0, "sep"), maxsplit, M("rsplit"), out);
    }
    if (M("splitlines")) return do_splitlines(c, s, n, truthy_arg(arg(a, 0, "keepends"), false), out);
    if (M("startswith") || M("endswith")) return starts_ends(c, s, n, a, M("endswith"), out);
    if (M("upper")) return map_case(c, s, n, CASE_UPPER, out);
    if (M("lower") || M("casefold")) return map_case(c, s, n, CASE_LOWER, out);
    if (M("title")) return map_case(c, s, n, CASE_TITLE, out);
    if (M("capitalize")) return map_case(c, s, n, CASE_CAPITALIZE, out);
    if (M("swapcase")) return map_case(c, s, n, CASE_SWAP, out);
    if (M("replace")) {
        int64_t cnt;
        if ((st = int_arg(c, arg(a, 2, "count"), -1, "count", &cnt))) return st;
        return do_replace(c, s, n, x, y, cnt, out);
    }
    if (M("find") || M("rfind") || M("index") || M("rindex") || M("count")) {
        if (!x || x->type != KILN_JV_STR) return kiln_jerr(c, "%.*s() argument must be str", (int)nl, name);
        int64_t st0, en;
        if ((st = int_arg(c, arg(a, 1, NULL), 0, "start", &st0)) || (st = int_arg(c, arg(a, 2, NULL), INT64_MAX, "end", &en)))
            return st;
        size_t b0 = st0 ? byte_of_cp(s, n, st0) : 0, b1 = en == INT64_MAX ? n : byte_of_cp(s, n, en);
        if (b1 < b0) b1 = b0;
        if (M("count")) {
            int64_t k = 0;
            if (!x->n) k = (int64_t)kiln_jstr_len(s + b0, b1 - b0) + 1;
            else
                for (size_t i = b0; i + x->n <= b1;) {
                    const char *f = memmem(s + i, b1 - i, x->u.s, x->n);
                    if (!f) break;
                    k++;
                    i = (size_t)(f - s) + x->n;
                }
            *out = kiln_jv_int(k);
            return KILN_OK;
        }
        int64_t pos = -1;
        if (M("find") || M("index")) {
            const char *f = x->n ? memmem(s + b0, b1 - b0, x->u.s, x->n) : s + b0;
            if (f) pos = (int64_t)cp_index(s, (size_t)(f - s));
        } else {
            for (size_t i = b1 >= x->n ? b1 - x->n + 1 : 0; i-- > b0;)
                if (!memcmp(s + i, x->u.s, x->n)) {
                    pos = (int64_t)cp_index(s, i);
                    break;
                }
        }
        if (pos < 0 && (M("index") || M("rindex"))) return kiln_jerr(c, "substring not found");
        *out = kiln_jv_int(pos);
        return KILN_OK;
    }
    if (M("join")) {
        if (!x) return kiln_jerr(c, "join() takes exactly one argument");
        return join(c, x, s, n, NULL, true, out);
    }
    if (M("format")) return do_format(c, s, n, a, out);
    if (M("removeprefix") || M("removesuffix")) {
        if (!x || x->type != KILN_JV_STR) return kiln_jerr(c, "%.*s() argument must be str", (int)nl, name);
        bool suf = M("removesuffix");
        *out = prefix_match(s, n, x, suf) ? kiln_jv_strv(suf ? s : s + x->n, n - x->n) : m->self;
        return KILN_OK;
    }
    if (M("isdigit") || M("isnumeric") || M("isdecimal") || M("isalpha") || M("isalnum") || M("isspace") ||
        M("isupper") || M("islower") || M("istitle")) {
        bool r = n > 0, any_cased = false, prev_cased = false, title_ok = true;
        for (size_t i = 0; i < n && r;) {
            uint32_t cp;
            i += next_cp(s, n, i, &cp);
            if (M("isdigit") || M("isnumeric") || M("isdecimal")) r = u_isdigit(cp);
            else if (M("isalpha")) r = u_isalpha(c, cp);
            else if (M("isalnum")) r = u_isalpha(c, cp) || u_isdigit(cp);
            else if (M("isspace")) r = u_isspace(cp);
            else if (M("isupper")) {
                if (u_islower(c, cp)) r = false;
                if (u_isupper(c, cp)) any_cased = true;
            } else if (M("islower")) {
                if (u_isupper(c, cp)) r = false;
                if (u_islower(c, cp)) any_cased = true;
            } else {
                bool up = u_isupper(c, cp), lo = u_islower(c, cp);
                if (up && prev_cased) title_ok = false;
                if (lo && !prev_cased) title_ok = false;
                if (up || lo) any_cased = true;
                prev_cased = up || lo;
            }
        }
        if (M("isupper") || M("islower")) r = r && any_cased;
        if (M("istitle")) r = n > 0 && title_ok && any_cased;
        *out = kiln_jv_bool(r);
        return KILN_OK;
    }
    if (M("center")) {
        int64_t w;
        if ((st = int_arg(c, x, 0, "width", &w))) return st;
        uint32_t fill = ' ';
        if (y && y->type == KILN_JV_STR && y->n) next_cp(y->u.s, y->n, 0, &fill);
        return py_center(c, s, n, w, fill, out);
    }
    if (M("ljust") || M("rjust") || M("zfill")) {
        int64_t w;
        if ((st = int_arg(c, x, 0, "width", &w))) return st;
        char spec[64];
        uint32_t fill = ' ';
        if (y && y->type == KILN_JV_STR && y->n) next_cp(y->u.s, y->n, 0, &fill);
        if (M("zfill")) fill = '0';
        char fb[5] = {0};
        kiln_utf8_encode(fill, fb);
        snprintf(spec, sizeof spec, "%s%c%lld", fb, M("center") ? '^' : M("ljust") ? '<' : M("zfill") ? '=' : '>',
                 (long long)KILN_MIN(w, 10000));
        kiln_buf b = {0};
        kiln_jv self = m->self;
        if ((st = apply_spec(c, &self, spec, strlen(spec), &b))) {
            kiln_buf_free(&b);
            return st;
        }
        return buf_value(c, &b, out);
    }
    if (M("partition") || M("rpartition")) {
        if (!x || x->type != KILN_JV_STR || !x->n) return kiln_jerr(c, "%.*s() needs a non-empty separator", (int)nl, name);
        const char *f = NULL;
        if (M("partition")) f = memmem(s, n, x->u.s, x->n);
        else
            for (size_t i = n >= x->n ? n - x->n + 1 : 0; i-- > 0;)
                if (!memcmp(s + i, x->u.s, x->n)) {
                    f = s + i;
                    break;
                }
        if ((st = kiln_jv_list_new(c, 3, out))) return st;
        out->flags = KILN_JV_TUPLE;
        if (f) {
            out->u.l->items[0] = kiln_jv_strv(s, (size_t)(f - s));
            out->u.l->items[1] = *x;
            out->u.l->items[2] = kiln_jv_strv(f + x->n, n - (size_t)(f - s) - x->n);
        } else if (M("partition")) {
            out->u.l->items[0] = m->self;
            out->u.l->items[1] = out->u.l->items[2] = kiln_jv_strv("", 0);
        } else {
            out->u.l->items[0] = out->u.l->items[1] = kiln_jv_strv("", 0);
            out->u.l->items[2] = m->self;
        }
        return KILN_OK;
    }
#undef M
    return kiln_jerr(c, "str has no method '%.*s'", (int)nl, name);
}

static kiln_status call_method(kiln_jctx *c, const kiln_jmethod *m, const kiln_jargs *a, kiln_jv *out) {
    kiln_status st;
    const kiln_jv *self = &m->self;
    const char *name = m->name;
    size_t nl = m->name_len;
    if (self->type == KILN_JV_STR) return str_method(c, m, a, out);
    if (self->type == KILN_JV_DICT) {
        if (eqs(name, nl, "items")) {
            if ((st = items_of(c, self, out))) return st;
            out->flags = KILN_JV_ITEMS;
            return KILN_OK;
        }
        if (eqs(name, nl, "keys") || eqs(name, nl, "values")) {
            const kiln_jdict *d = self->u.d;
            if ((st = kiln_jv_list_new(c, d->n, out))) return st;
            for (size_t i = 0; i < d->n; i++) out->u.l->items[i] = eqs(name, nl, "keys") ? d->keys[i] : d->vals[i];
            return KILN_OK;
        }
        if (eqs(name, nl, "get")) {
            const kiln_jv *k = arg(a, 0, NULL), *d = arg(a, 1, NULL);
            if (!k) return kiln_jerr(c, "get expected at least 1 argument, got 0");
            kiln_jv *v = kiln_jv_dict_get(self->u.d, *k);
            *out = v ? *v : d ? *d : kiln_jv_none();
            return KILN_OK;
        }
    }
    if (self->type == KILN_JV_LIST) {
        const kiln_jv *x = arg(a, 0, NULL);
        if (!x) return kiln_jerr(c, "%.*s() takes exactly one argument", (int)nl, name);
        int64_t k = 0, pos = -1;
        for (size_t i = 0; i < self->u.l->n; i++)
            if (kiln_jv_eq(&self->u.l->items[i], x)) {
                if (pos < 0) pos = (int64_t)i;
                k++;
            }
        if (eqs(name, nl, "count")) {
            *out = kiln_jv_int(k);
            return KILN_OK;
        }
        if (pos < 0) return kiln_jerr(c, "value is not in list");
        *out = kiln_jv_int(pos);
        return KILN_OK;
    }
    if (self->type == KILN_JV_LOOP && eqs(name, nl, "cycle")) {
        if (!a->n_args) return kiln_jerr(c, "no items for cycling given");
        *out = a->args[self->u.loop->index0 % (size_t)a->n_args];
        return KILN_OK;
    }
    return kiln_jerr(c, "'%s' object has no callable attribute '%.*s'", kiln_jv_type_name(self), (int)nl, name);
}

/* -------------------------------------------------------------- globals */

static kiln_status mapping_from(kiln_jctx *c, const kiln_jargs *a, const char *what, kiln_jv *out) {
    kiln_status st;
    if ((st = kiln_jv_dict_new(c, 8, out))) return st;
    if (a->n_args > 1) return kiln_jerr(c, "%s expected at most 1 positional argument, got %d", what, a->n_args);
    if (a->n_args == 1) {
        const kiln_jv *m = &a->args[0];
        if (m->type == KILN_JV_DICT || m->type == KILN_JV_NS) {
            for (size_t i = 0; i < m->u.d->n; i++)
                if ((st = kiln_jv_dict_set(c, out->u.d, m->u.d->keys[i], m->u.d->vals[i]))) return st;
        } else if (m->type == KILN_JV_LIST) {
            for (size_t i = 0; i < m->u.l->n; i++) {
                const kiln_jv *p = &m->u.l->items[i];
                if (p->type != KILN_JV_LIST || p->u.l->n != 2)
                    return kiln_jerr(c, "%s: sequence element #%zu is not a pair", what, i);
                if ((st = kiln_jv_dict_set(c, out->u.d, p->u.l->items[0], p->u.l->items[1]))) return st;
            }
        } else if (m->type != KILN_JV_UNDEF && m->type != KILN_JV_NONE) {
            return kiln_jerr(c, "%s: '%s' object is not a mapping", what, kiln_jv_type_name(m));
        }
    }
    for (int k = 0; k < a->n_kw; k++)
        if ((st = kiln_jv_dict_set(c, out->u.d, kiln_jv_strv(a->kw_names[k], a->kw_lens[k]), a->kw_vals[k]))) return st;
    return KILN_OK;
}

kiln_status kiln_jcall(kiln_jctx *c, const kiln_jv *fn, const kiln_jargs *a, kiln_jv *out) {
    kiln_status st;
    if (fn->type == KILN_JV_METHOD) return call_method(c, fn->u.m, a, out);
    if (fn->type != KILN_JV_FUNC) return kiln_jerr(c, "'%s' object is not callable", kiln_jv_type_name(fn));
    switch (fn->u.fn) {
    case FN_RANGE: {
        int64_t p[3] = {0, 0, 1};
        if (a->n_args < 1 || a->n_args > 3 || a->n_kw) return kiln_jerr(c, "range expected 1 to 3 integer arguments");
        for (int i = 0; i < a->n_args; i++)
            if ((st = int_arg(c, &a->args[i], 0, "range argument", &p[a->n_args == 1 ? 1 : i]))) return st;
        if (!p[2]) return kiln_jerr(c, "range() arg 3 must not be zero");
        int64_t cnt = 0;
        if (p[2] > 0 && p[1] > p[0]) cnt = (p[1] - p[0] + p[2] - 1) / p[2];
        if (p[2] < 0 && p[0] > p[1]) cnt = (p[0] - p[1] - p[2] - 1) / (-p[2]);
        if (cnt > MAX_RANGE)
            return kiln_jerr(c, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MAX_RANGE);
        if ((st = kiln_jv_list_new(c, (size_t)cnt, out))) return st;
        for (int64_t i = 0; i < cnt; i++) out->u.l->items[i] = kiln_jv_int(p[0] + i * p[2]);
        return KILN_OK;
    }
    case FN_NAMESPACE:
        if ((st = mapping_from(c, a, "namespace", out))) return st;
        for (size_t i = 0; i < out->u.d->n; i++)
            if (out->u.d->keys[i].type == KILN_JV_STR && out->u.d->keys[i].n && out->u.d->keys[i].u.s[0] == '_')
                return kiln_jerr(c, "cannot store underscore-prefixed attribute '%.*s' on a namespace",
                                 (int)out->u.d->keys[i].n, out->u.d->keys[i].u.s);
        out->type = KILN_JV_NS;
        return KILN_OK;
    case FN_DICT: return mapping_from(c, a, "dict", out);
    case FN_RAISE: {
        const kiln_jv *m = arg(a, 0, "message");
        kiln_buf b = {0};
        if (m) kiln_jv_to_str(c, m, &b);
        st = KILN_FAIL(KILN_ERR_TEMPLATE, "%s", b.data ? b.data : "");
        kiln_buf_free(&b);
        return st;
    }
    case FN_STRFTIME: {
        const kiln_jv *f = arg(a, 0, "format");
        if (!f || f->type != KILN_JV_STR) return kiln_jerr(c, "strftime_now needs a format string");
        char fmt[256], buf[512];
        snprintf(fmt, sizeof fmt, "%.*s", (int)f->n, f->u.s);
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        size_t l = strftime(buf, sizeof buf, fmt, &tmv);
        return kiln_jv_str_copy(c, buf, l, out);
    }
    }
    return kiln_jerr(c, "unknown function");
}
