/*
 * tok_json.c -- a small, fast, in-place JSON DOM used to read tokenizer.json
 * files (megabytes of vocabulary and merges) quickly. Strings are unescaped
 * inside the caller's buffer; nodes live in one array in document order.
 * Ownership: kiln_tj owns its node array, borrows the text buffer.
 * Thread-safety: a parsed kiln_tj is read-only; parsing uses no globals.
 */
#include "tokenizer.h"

#include <stdlib.h>

#define TJ_MAX_DEPTH 256

typedef struct tj_parser {
    kiln_tj *j;
    char *base, *p, *end;
    const char *what;
    int depth;
} tj_parser;

static kiln_status tj_err(tj_parser *s, const char *msg) {
    return KILN_FAIL(KILN_ERR_FORMAT, "%s: invalid JSON at byte %zu: %s", s->what, (size_t)(s->p - s->base),
                     msg);
}

static void tj_ws(tj_parser *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

static kiln_status tj_new(tj_parser *s, int32_t *idx) {
    kiln_tj *j = s->j;
    if (j->n == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 4096;
        if (cap > INT32_MAX) return KILN_FAIL(KILN_ERR_LIMIT, "%s: too many JSON values", s->what);
        kiln_tj_node *n = realloc(j->nodes, cap * sizeof *n);
        if (!n) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (JSON of %s)", s->what);
        j->nodes = n;
        j->cap = cap;
    }
    *idx = (int32_t)j->n;
    kiln_tj_node *nd = &j->nodes[j->n++];
    memset(nd, 0, sizeof *nd);
    nd->next = -1;
    return KILN_OK;
}

static int tj_hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool tj_u4(const char *p, const char *end, uint32_t *v) {
    if (end - p < 4) return false;
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        int h = tj_hex(p[i]);
        if (h < 0) return false;
        x = x * 16 + (uint32_t)h;
    }
    *v = x;
    return true;
}

/* s->p at the opening quote. Unescapes in place; returns offset/length. */
static kiln_status tj_string(tj_parser *s, uint32_t *off, uint32_t *len) {
    char *r = ++s->p, *w = r;
    *off = (uint32_t)(r - s->base);
    for (;;) {
        /* fast scan of plain bytes */
        char *q = r;
        while (q < s->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
        if (w != r) memmove(w, r, (size_t)(q - r));
        w += q - r;
        r = q;
        if (r >= s->end) {
            s->p = r;
            return tj_err(s, "unterminated string");
        }
        if (*r == '"') break;
        if ((unsigned char)*r < 0x20) {
            s->p = r;
            return tj_err(s, "control character in string");
        }
        /* escape */
        r++;
        if (r >= s->end) {
            s->p = r;
            return tj_err(s, "unterminated escape");
        }
        char c = *r++;
        switch (c) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '/': *w++ = '/'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (!tj_u4(r, s->end, &cp)) {
                s->p = r;
                return tj_err(s, "bad \\u escape");
            }
            r += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (s->end - r >= 6 && r[0] == '\\' && r[1] == 'u' && tj_u4(r + 2, s->end, &lo) && lo >= 0xDC00 &&
                    lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    r += 6;
                } else {
                    cp = 0xFFFD; /* lone surrogate */
                }
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                cp = 0xFFFD;
            }
            w += kiln_utf8_encode(cp, w);
            break;
        }
        default: s->p = r - 1; return tj_err(s, "bad escape");
        }
    }
    *len = (uint32_t)(w - (s->base + *off));
    s->p = r + 1;
    return KILN_OK;
}

static kiln_status tj_value(tj_parser *s, int32_t *out, uint32_t key_off, uint32_t key_len) {
    kiln_status st = KILN_OK;
    tj_ws(s);
    if (s->p >= s->end) return tj_err(s, "unexpected end of input");
    int32_t idx = -1;
    if ((st = tj_new(s, &idx))) return st;
    s->j->nodes[idx].key_off = key_off;
    s->j->nodes[idx].key_len = key_len;
    char c = *s->p;
    if (c == '"') {
        uint32_t off, len;
        if ((st = tj_string(s, &off, &len))) return st;
        kiln_tj_node *nd = &s->j->nodes[idx];
        nd->type = KILN_TJ_STR;
        nd->off = off;
        nd->len = len;
    } else if (c == '{' || c == '[') {
        bool obj = c == '{';
        if (++s->depth > TJ_MAX_DEPTH) return tj_err(s, "nesting too deep");
        s->j->nodes[idx].type = obj ? KILN_TJ_OBJ : KILN_TJ_ARR;
        s->p++;
        tj_ws(s);
        int32_t prev = -1;
        uint32_t count = 0;
        if (s->p < s->end && *s->p == (obj ? '}' : ']')) {
            s->p++;
        } else {
            for (;;) {
                uint32_t ko = 0, kl = 0;
                tj_ws(s);
                if (obj) {
                    if (s->p >= s->end || *s->p != '"') return tj_err(s, "expected a string key");
                    if ((st = tj_string(s, &ko, &kl))) return st;
                    tj_ws(s);
                    if (s->p >= s->end || *s->p != ':') return tj_err(s, "expected ':'");
                    s->p++;
                }
                int32_t child;
                if ((st = tj_value(s, &child, ko, kl))) return st;
                if (prev >= 0) s->j->nodes[prev].next = child;
                prev = child;
                count++;
                tj_ws(s);
                if (s->p < s->end && *s->p == ',') {
                    s->p++;
                    continue;
                }
                if (s->p < s->end && *s->p == (obj ? '}' : ']')) {
                    s->p++;
                    break;
                }
                return tj_err(s, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        }
        s->j->nodes[idx].count = count;
        s->depth--;
    } else if (c == 't' && s->end - s->p >= 4 && !memcmp(s->p, "true", 4)) {
        s->j->nodes[idx].type = KILN_TJ_TRUE;
        s->p += 4;
    } else if (c == 'f' && s->end - s->p >= 5 && !memcmp(s->p, "false", 5)) {
        s->j->nodes[idx].type = KILN_TJ_FALSE;
        s->p += 5;
    } else if (c == 'n' && s->end - s->p >= 4 && !memcmp(s->p, "null", 4)) {
        s->j->nodes[idx].type = KILN_TJ_NULL;
        s->p += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        char *q = s->p;
        if (*q == '-') q++;
        if (q >= s->end || *q < '0' || *q > '9') return tj_err(s, "bad number");
        while (q < s->end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' || *q == '+' ||
                              *q == '-'))
            q++;
        kiln_tj_node *nd = &s->j->nodes[idx];
        nd->type = KILN_TJ_NUM;
        nd->off = (uint32_t)(s->p - s->base);
        nd->len = (uint32_t)(q - s->p);
        s->p = q;
    } else {
        return tj_err(s, "unexpected character");
    }
    *out = idx;
    return KILN_OK;
}

kiln_status kiln_tj_parse(kiln_tj *j, char *buf, size_t len, const char *what) {
    memset(j, 0, sizeof *j);
    if (len >= UINT32_MAX) return KILN_FAIL(KILN_ERR_LIMIT, "%s: file too large (%zu bytes)", what, len);
    j->buf = buf;
    tj_parser s = {j, buf, buf, buf + len, what, 0};
    int32_t root;
    kiln_status st = tj_value(&s, &root, 0, 0);
    if (st) {
        kiln_tj_free(j);
        return st;
    }
    tj_ws(&s);
    if (s.p != s.end) {
        st = tj_err(&s, "trailing characters after the value");
        kiln_tj_free(j);
        return st;
    }
    return KILN_OK;
}

void kiln_tj_free(kiln_tj *j) {
    free(j->nodes);
    j->nodes = NULL;
    j->n = j->cap = 0;
}

int32_t kiln_tj_get(const kiln_tj *j, int32_t obj, const char *key) {
    if (obj < 0 || j->nodes[obj].type != KILN_TJ_OBJ) return -1;
    size_t kl = strlen(key);
    for (int32_t c = kiln_tj_first(j, obj); c >= 0; c = j->nodes[c].next)
        if (j->nodes[c].key_len == kl && !memcmp(j->buf + j->nodes[c].key_off, key, kl)) return c;
    return -1;
}

const char *kiln_tj_get_str(const kiln_tj *j, int32_t obj, const char *key, size_t *len) {
    int32_t c = kiln_tj_get(j, obj, key);
    if (c < 0 || j->nodes[c].type != KILN_TJ_STR) return NULL;
    return kiln_tj_str(j, c, len);
}

bool kiln_tj_get_bool(const kiln_tj *j, int32_t obj, const char *key, bool def) {
    int32_t c = kiln_tj_get(j, obj, key);
    if (c < 0) return def;
    if (j->nodes[c].type == KILN_TJ_TRUE) return true;
    if (j->nodes[c].type == KILN_TJ_FALSE) return false;
    return def;
}

double kiln_tj_num(const kiln_tj *j, int32_t node) {
    if (node < 0 || j->nodes[node].type != KILN_TJ_NUM) return 0;
    char tmp[64];
    size_t n = KILN_MIN(j->nodes[node].len, sizeof tmp - 1);
    memcpy(tmp, j->buf + j->nodes[node].off, n);
    tmp[n] = 0;
    return strtod(tmp, NULL);
}

bool kiln_tj_str_eq(const kiln_tj *j, int32_t node, const char *str) {
    if (node < 0 || j->nodes[node].type != KILN_TJ_STR) return false;
    size_t n = strlen(str);
    return j->nodes[node].len == n && !memcmp(j->buf + j->nodes[node].off, str, n);
}
