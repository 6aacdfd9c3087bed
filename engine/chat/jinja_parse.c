/*
 * jinja_parse.c -- lexer and parser for the Jinja2 subset of chat templates.
 *
 * The lexer mirrors jinja2/lexer.py with trim_blocks and lstrip_blocks on
 * and keep_trailing_newline off: newlines are normalized to "\n" and one
 * trailing newline is dropped; "{%-"/"-%}" strip whitespace; "{%+"/"+%}"
 * disable lstrip/trim; lstrip removes the whitespace before a block or
 * comment tag when only whitespace precedes it on its line; trim removes the
 * newline right after a block or comment tag. Strings decode Python escapes.
 * The parser follows jinja2/parser.py's grammar and precedence. Errors name
 * the template and line.
 *
 * Ownership: tokens live in a temporary array; the AST and its strings are
 * allocated in the caller's arena. Thread-safety: no shared state.
 */
#include "chat.h"

#include "tokenizer.h" /* UTF-8 helpers */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ----------------------------------------------------------------- arena */

struct kiln_jchunk {
    kiln_jchunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *kiln_ja_alloc(kiln_jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    kiln_jchunk *c = a->head;
    if (!c || c->used + n > c->cap) {
        size_t cap = KILN_MAX(n, (size_t)64 * 1024);
        if (a->limit && a->total + cap > a->limit) return NULL;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
        a->total += cap;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

void kiln_ja_free(kiln_jarena *a) {
    kiln_jchunk *c = a->head;
    while (c) {
        kiln_jchunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->total = 0;
}

/* ----------------------------------------------------------------- lexer */

typedef enum tk_type {
    TK_EOF = 0, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END, TK_NAME, TK_STRING, TK_INT,
    TK_FLOAT, TK_OP,
} tk_type;

typedef struct tk {
    uint8_t type;
    int line;
    const char *s; /* DATA, NAME, STRING (decoded, in the arena), OP text */
    uint32_t n;
    int64_t i;
    double f;
} tk;

typedef struct lexer {
    const char *src; /* normalized source (arena) */
    size_t len, pos;
    int line;
    const char *name;
    kiln_jarena *arena;
    tk *toks;
    size_t n, cap;
} lexer;

static kiln_status lex_err(const char *name, int line, const char *fmt, ...) KILN_PRINTF(3, 4);
static kiln_status lex_err(const char *name, int line, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return KILN_FAIL(KILN_ERR_TEMPLATE, "chat template %s line %d: %s", name, line, msg);
}

static kiln_status push_tok(lexer *L, tk t) {
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        tk *n = realloc(L->toks, cap * sizeof *n);
        if (!n) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template tokens)");
        L->toks = n;
        L->cap = cap;
    }
    L->toks[L->n++] = t;
    return KILN_OK;
}

/* Python's str.isspace / regex \s: length of a whitespace char at s or 0. */
static size_t py_space_len(const char *s, size_t n) {
    unsigned char c = (unsigned char)s[0];
    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c < 0x80) return 0;
    size_t l = kiln_utf8_seq_len((const unsigned char *)s, n);
    if (!l) return 0;
    uint32_t cp;
    kiln_utf8_decode((const unsigned char *)s, &cp);
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
        cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return l;
    return 0;
}

/* Length of s[0..n) without trailing whitespace. */
static size_t rstrip_len(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t k = end - 1;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80 && end - k < 4) k--;
        if (!py_space_len(s + k, end - k)) break;
        end = k;
    }
    return end;
}

/* Skip whitespace from pos; returns the new position. */
static size_t skip_space(const char *s, size_t n, size_t pos) {
    size_t l;
    while (pos < n && (l = py_space_len(s + pos, n - pos))) pos += l;
    return pos;
}

static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

static char *arena_strndup(kiln_jarena *a, const char *s, size_t n) {
    char *p = kiln_ja_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* Decode a Python string literal body (unicode-escape). */
static kiln_status decode_string(lexer *L, const char *s, size_t n, tk *t) {
    char *o = kiln_ja_alloc(L->arena, n + 1);
    if (!o) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            o[w++] = s[i];
            continue;
        }
        char c = s[++i];
        uint32_t cp;
        int digits = 0;
        switch (c) {
        case '\n': break; /* line continuation */
        case '\\': o[w++] = '\\'; break;
        case '\'': o[w++] = '\''; break;
        case '"': o[w++] = '"'; break;
        case 'a': o[w++] = '\a'; break;
        case 'b': o[w++] = '\b'; break;
        case 'f': o[w++] = '\f'; break;
        case 'n': o[w++] = '\n'; break;
        case 'r': o[w++] = '\r'; break;
        case 't': o[w++] = '\t'; break;
        case 'v': o[w++] = '\v'; break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            if (c >= '0' && c <= '7') {
                cp = 0;
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') cp = cp * 8 + (uint32_t)(s[i++] - '0'), k++;
                i--;
                w += kiln_utf8_encode(cp, o + w);
            } else {
                o[w++] = '\\'; /* unknown escape: kept */
                o[w++] = c;
            }
        }
        if (digits) {
            cp = 0;
            for (int k = 0; k < digits; k++) {
                char h = (i + 1 + (size_t)k < n) ? s[i + 1 + k] : 0;
                int v = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (v < 0)
                    return lex_err(L->name, t->line, "truncated \\%c escape in a string", c);
                cp = cp * 16 + (uint32_t)v;
            }
            i += (size_t)digits;
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                return lex_err(L->name, t->line, "invalid code point escape \\%c in a string", c);
            w += kiln_utf8_encode(cp, o + w);
        }
    }
    o[w] = 0;
    t->s = o;
    t->n = (uint32_t)w;
    return KILN_OK;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

/* digits with optional single "_" separators: (\d+_)*\d+ ; returns end or start */
static size_t scan_digits(const char *s, size_t n, size_t p) {
    size_t q = p;
    if (q >= n || !is_digit(s[q])) return p;
    while (q < n && is_digit(s[q])) q++;
    while (q + 1 < n && s[q] == '_' && is_digit(s[q + 1])) {
        q++;
        while (q < n && is_digit(s[q])) q++;
    }
    return q;
}

static kiln_status lex_number(lexer *L, size_t *pos, bool *ok) {
    const char *s = L->src;
    size_t n = L->len, p = *pos;
    *ok = false;
    if (p > 0 && s[p - 1] == '.') { /* (?<!\.) for floats: still an integer */
    }
    size_t d = scan_digits(s, n, p);
    if (d == p) return KILN_OK;
    char buf[128];
    size_t bl = 0;
    tk t = {0};
    t.line = L->line;
    /* float: digits (. digits)? e[+-]digits | digits . digits */
    size_t q = d;
    bool is_float = false;
    if (!(p > 0 && s[p - 1] == '.')) {
        if (q < n && s[q] == '.' && q + 1 < n && is_digit(s[q + 1])) {
            q = scan_digits(s, n, q + 1);
            is_float = true;
        }
        if (q < n && (s[q] == 'e' || s[q] == 'E')) {
            size_t r = q + 1;
            if (r < n && (s[r] == '+' || s[r] == '-')) r++;
            size_t e = scan_digits(s, n, r);
            if (e > r) {
                q = e;
                is_float = true;
            } else if (is_float) {
                /* "1.5e" : the float ends before e */
            }
        }
    }
    if (is_float) {
        for (size_t i = p; i < q && bl + 1 < sizeof buf; i++)
            if (s[i] != '_') buf[bl++] = s[i];
        buf[bl] = 0;
        t.type = TK_FLOAT;
        t.f = strtod(buf, NULL);
        *pos = q;
        *ok = true;
        return push_tok(L, t);
    }
    /* integers: 0b / 0o / 0x prefixes, decimal, or zeros */
    int base = 10;
    size_t start = p;
    if (s[p] == '0' && p + 1 < n && (s[p + 1] == 'b' || s[p + 1] == 'o' || s[p + 1] == 'x' || s[p + 1] == 'B' ||
                                     s[p + 1] == 'O' || s[p + 1] == 'X')) {
        char k = (char)(s[p + 1] | 0x20);
        base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
        q = p + 2;
        size_t r = q;
        while (r < n && (s[r] == '_' || (base == 16 ? isxdigit((unsigned char)s[r]) : (s[r] >= '0' && s[r] < '0' + base))))
            r++;
        if (r == q) return lex_err(L->name, L->line, "invalid number literal");
        start = q;
        d = r;
    } else if (s[p] == '0') {
        /* 0(_?0)* */
        d = p + 1;
        while (d < n && (s[d] == '0' || (s[d] == '_' && d + 1 < n && s[d + 1] == '0'))) d++;
    }
    for (size_t i = start; i < d && bl + 1 < sizeof buf; i++)
        if (s[i] != '_') buf[bl++] = s[i];
    buf[bl] = 0;
    errno = 0;
    long long v = strtoll(buf, NULL, base);
    if (errno) return lex_err(L->name, L->line, "integer literal %s is too large", buf);
    t.type = TK_INT;
    t.i = v;
    *pos = d;
    *ok = true;
    return push_tok(L, t);
}

static const char *const ops2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char ops1[] = "+-/*%~[](){}><=.:|,;";

/* Tokens inside {{ }} or {% %} until the end tag. */
static kiln_status lex_tag(lexer *L, bool block) {
    kiln_status st;
    const char *s = L->src;
    size_t n = L->len;
    int depth = 0;
    for (;;) {
        size_t p = L->pos;
        if (p >= n) return lex_err(L->name, L->line, "unexpected end of template, expected '%s'", block ? "%}" : "}}");
        /* end of tag first */
        if (block) {
            if (s[p] == '+' && p + 2 < n + 0 && !memcmp(s + p, "+%}", 3)) {
                L->pos = p + 3;
                return push_tok(L, (tk){TK_BLOCK_END, L->line, NULL, 0, 0, 0});
            }
            if (s[p] == '-' && p + 3 <= n && !memcmp(s + p, "-%}", 3)) {
                size_t e = skip_space(s, n, p + 3);
                st = push_tok(L, (tk){TK_BLOCK_END, L->line, NULL, 0, 0, 0});
                L->line += count_nl(s + p, e - p);
                L->pos = e;
                return st;
            }
            if (p + 2 <= n && !memcmp(s + p, "%}", 2)) {
                size_t e = p + 2;
                if (e < n && s[e] == '\n') e++; /* trim_blocks */
                st = push_tok(L, (tk){TK_BLOCK_END, L->line, NULL, 0, 0, 0});
                L->line += count_nl(s + p, e - p);
                L->pos = e;
                return st;
            }
        } else {
            if (s[p] == '-' && p + 3 <= n && !memcmp(s + p, "-}}", 3)) {
                size_t e = skip_space(s, n, p + 3);
                st = push_tok(L, (tk){TK_VAR_END, L->line, NULL, 0, 0, 0});
                L->line += count_nl(s + p, e - p);
                L->pos = e;
                return st;
            }
            if (p + 2 <= n && !memcmp(s + p, "}}", 2) && depth == 0) {
                L->pos = p + 2;
                return push_tok(L, (tk){TK_VAR_END, L->line, NULL, 0, 0, 0});
            }
        }
        size_t l = py_space_len(s + p, n - p);
        if (l) {
            L->line += s[p] == '\n';
            L->pos = p + l;
            continue;
        }
        bool ok;
        if (is_digit(s[p])) {
            if ((st = lex_number(L, &L->pos, &ok))) return st;
            if (ok) continue;
        }
        if (is_name_start(s[p])) {
            size_t q = p;
            while (q < n && is_name_char(s[q])) q++;
            const char *nm = arena_strndup(L->arena, s + p, q - p);
            if (!nm) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
            if ((st = push_tok(L, (tk){TK_NAME, L->line, nm, (uint32_t)(q - p), 0, 0}))) return st;
            L->pos = q;
            continue;
        }
        if (s[p] == '\'' || s[p] == '"') {
            char quote = s[p];
            size_t q = p + 1;
            while (q < n && s[q] != quote) {
                if (s[q] == '\\' && q + 1 < n) q++;
                q++;
            }
            if (q >= n) return lex_err(L->name, L->line, "unterminated string");
            tk t = {TK_STRING, L->line, NULL, 0, 0, 0};
            if ((st = decode_string(L, s + p + 1, q - p - 1, &t))) return st;
            if ((st = push_tok(L, t))) return st;
            L->line += count_nl(s + p, q - p);
            L->pos = q + 1;
            continue;
        }
        bool matched = false;
        for (size_t k = 0; k < KILN_ARRAY_LEN(ops2); k++)
            if (p + 2 <= n && !memcmp(s + p, ops2[k], 2)) {
                if ((st = push_tok(L, (tk){TK_OP, L->line, ops2[k], 2, 0, 0}))) return st;
                L->pos = p + 2;
                matched = true;
                break;
            }
        if (matched) continue;
        const char *o = strchr(ops1, s[p]);
        if (o && *o) {
            if (*o == '(' || *o == '[' || *o == '{') depth++;
            if ((*o == ')' || *o == ']' || *o == '}') && depth > 0) depth--;
            if ((st = push_tok(L, (tk){TK_OP, L->line, o, 1, 0, 0}))) return st;
            L->pos = p + 1;
            continue;
        }
        if ((unsigned char)s[p] >= 0x80 || s[p] == '!' || s[p] == '#' || s[p] == '@' || s[p] == '$' || s[p] == '?' ||
            s[p] == '`' || s[p] == '&' || s[p] == '^' || s[p] == '\\' || s[p] < 0x20)
            return lex_err(L->name, L->line, "unexpected character '%c' (0x%02x) in a tag", s[p] >= 0x20 && (unsigned char)s[p] < 0x80 ? s[p] : '?', (unsigned char)s[p]);
        return lex_err(L->name, L->line, "unexpected character '%c' in a tag", s[p]);
    }
}

/* Is there "{%[-+]? *raw *[-]?%}" at p? Sets *end past it. */
static bool raw_begin(const char *s, size_t n, size_t p, size_t *inner, bool *strip_after) {
    size_t q = p + 2;
    if (q < n && (s[q] == '-' || s[q] == '+')) q++;
    q = skip_space(s, n, q);
    if (q + 3 > n || memcmp(s + q, "raw", 3) || (q + 3 < n && is_name_char(s[q + 3]))) return false;
    q = skip_space(s, n, q + 3);
    *strip_after = false;
    if (q + 3 <= n && !memcmp(s + q, "-%}", 3)) {
        *strip_after = true;
        *inner = q + 3;
        return true;
    }
    if (q + 2 <= n && !memcmp(s + q, "%}", 2)) {
        *inner = q + 2;
        return true;
    }
    return false;
}

static kiln_status lex(lexer *L) {
    kiln_status st;
    const char *s = L->src;
    size_t n = L->len;
    bool line_starting = true;
    while (L->pos < n) {
        size_t p = L->pos, t = p;
        int kind = 0; /* 1 var, 2 block, 3 comment */
        while (t + 1 < n) {
            if (s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#')) {
                kind = s[t + 1] == '{' ? 1 : s[t + 1] == '%' ? 2 : 3;
                break;
            }
            t++;
        }
        if (!kind) { /* trailing data */
            if ((st = push_tok(L, (tk){TK_DATA, L->line, s + p, (uint32_t)(n - p), 0, 0}))) return st;
            L->line += count_nl(s + p, n - p);
            L->pos = n;
            break;
        }
        char sign = (t + 2 < n && (s[t + 2] == '-' || s[t + 2] == '+')) ? s[t + 2] : 0;
        size_t text_len = t - p;
        int text_lines = count_nl(s + p, text_len);
        if (sign == '-') {
            text_len = rstrip_len(s + p, text_len);
        } else if (sign != '+' && kind != 1) {
            /* lstrip_blocks */
            size_t l_pos = 0;
            for (size_t i = text_len; i > 0; i--)
                if (s[p + i - 1] == '\n') {
                    l_pos = i;
                    break;
                }
            if ((l_pos > 0 || line_starting) && l_pos < text_len) {
                bool all_ws = true;
                for (size_t i = l_pos; i < text_len;) {
                    size_t l = py_space_len(s + p + i, text_len - i);
                    if (!l) {
                        all_ws = false;
                        break;
                    }
                    i += l;
                }
                if (all_ws) text_len = l_pos;
            }
        }
        if (text_len && (st = push_tok(L, (tk){TK_DATA, L->line, s + p, (uint32_t)text_len, 0, 0}))) return st;
        L->line += text_lines;
        size_t inner, after;
        bool strip_after;
        if (kind == 2 && raw_begin(s, n, t, &inner, &strip_after)) {
            /* raw block: text up to {% endraw %} */
            size_t q = strip_after ? skip_space(s, n, inner) : inner;
            L->line += count_nl(s + inner, q - inner);
            size_t r = q;
            for (;;) {
                const char *f = NULL;
                for (size_t i = r; i + 1 < n; i++)
                    if (s[i] == '{' && s[i + 1] == '%') {
                        f = s + i;
                        break;
                    }
                if (!f) return lex_err(L->name, L->line, "missing end of raw directive");
                size_t b = (size_t)(f - s), e = b + 2;
                char sg = (e < n && (s[e] == '-' || s[e] == '+')) ? s[e] : 0;
                if (sg) e++;
                e = skip_space(s, n, e);
                if (e + 6 <= n && !memcmp(s + e, "endraw", 6)) {
                    e = skip_space(s, n, e + 6);
                    size_t end;
                    if (e + 3 <= n && !memcmp(s + e, "-%}", 3)) end = skip_space(s, n, e + 3);
                    else if (e + 3 <= n && !memcmp(s + e, "+%}", 3)) end = e + 3;
                    else if (e + 2 <= n && !memcmp(s + e, "%}", 2)) end = (e + 2 < n && s[e + 2] == '\n') ? e + 3 : e + 2;
                    else return lex_err(L->name, L->line, "malformed endraw tag");
                    size_t dl = b - q;
                    if (sg == '-') dl = rstrip_len(s + q, dl);
                    if (dl && (st = push_tok(L, (tk){TK_DATA, L->line, s + q, (uint32_t)dl, 0, 0}))) return st;
                    L->line += count_nl(s + q, end - q);
                    L->pos = end;
                    line_starting = s[end - 1] == '\n';
                    break;
                }
                r = b + 2;
            }
            continue;
        }
        after = t + 2 + (sign ? 1 : 0);
        if (kind == 3) {
            const char *f = NULL;
            for (size_t i = after; i + 1 < n; i++)
                if (s[i] == '#' && s[i + 1] == '}') {
                    f = s + i;
                    break;
                }
            if (!f) return lex_err(L->name, L->line, "missing end of comment tag");
            size_t c = (size_t)(f - s), end = c + 2;
            if (c > after && s[c - 1] == '-')
                end = skip_space(s, n, end);
            else if (!(c > after && s[c - 1] == '+') && end < n && s[end] == '\n')
                end++;
            L->line += count_nl(s + after, end - after);
            L->pos = end;
            line_starting = s[end - 1] == '\n';
            continue;
        }
        if ((st = push_tok(L, (tk){(uint8_t)(kind == 1 ? TK_VAR_BEGIN : TK_BLOCK_BEGIN), L->line, NULL, 0, 0, 0})))
            return st;
        L->pos = after;
        if ((st = lex_tag(L, kind == 2))) return st;
        line_starting = L->pos > 0 && s[L->pos - 1] == '\n';
    }
    return push_tok(L, (tk){TK_EOF, L->line, NULL, 0, 0, 0});
}

/* ---------------------------------------------------------------- parser */

typedef struct parser {
    tk *t;
    size_t n, i;
    const char *name;
    kiln_jarena *a;
    int depth;
    int loop_depth; /* for-loop bodies around the cursor (reset by macros) */
} parser;

static kiln_status perr(parser *P, int line, const char *fmt, ...) KILN_PRINTF(3, 4);
static kiln_status perr(parser *P, int line, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return KILN_FAIL(KILN_ERR_TEMPLATE, "chat template %s line %d: %s", P->name, line, msg);
}

static inline tk *cur(parser *P) { return &P->t[P->i]; }
static inline tk *peek(parser *P, size_t k) { return &P->t[KILN_MIN(P->i + k, P->n - 1)]; }
static inline bool is_op(const tk *t, const char *op) {
    return t->type == TK_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static inline bool is_name(const tk *t, const char *nm) {
    return t->type == TK_NAME && t->n == strlen(nm) && !memcmp(t->s, nm, t->n);
}

static const char *tk_desc(const tk *t, char *buf, size_t cap) {
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_DATA: return "template data";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "'%}'";
    case TK_INT: return "integer";
    case TK_FLOAT: return "float";
    case TK_STRING: return "string";
    default: snprintf(buf, cap, "'%.*s'", (int)KILN_MIN(t->n, 40), t->s); return buf;
    }
}

static kiln_status expect_op(parser *P, const char *op) {
    if (!is_op(cur(P), op)) {
        char b[64];
        return perr(P, cur(P)->line, "expected '%s', got %s", op, tk_desc(cur(P), b, sizeof b));
    }
    P->i++;
    return KILN_OK;
}

static kiln_status expect(parser *P, tk_type type, const char *what) {
    if (cur(P)->type != type) {
        char b[64];
        return perr(P, cur(P)->line, "expected %s, got %s", what, tk_desc(cur(P), b, sizeof b));
    }
    P->i++;
    return KILN_OK;
}

static kiln_jnode *node(parser *P, int kind, int line) {
    kiln_jnode *n = kiln_ja_alloc(P->a, sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

#define NODE(var, kind, line)                                                                              \
    do {                                                                                                   \
        (var) = node(P, (kind), (line));                                                                   \
        if (!(var)) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");            \
    } while (0)

/* growable node lists built in a scratch array, then copied to the arena */
typedef struct nlist {
    kiln_jnode **v;
    const char **names;
    uint32_t *lens;
    int n, cap;
} nlist;

static kiln_status nl_push(nlist *l, kiln_jnode *x, const char *nm, uint32_t len) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        kiln_jnode **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (v) l->v = v;
        const char **nn = realloc(l->names, (size_t)cap * sizeof *nn);
        if (nn) l->names = nn;
        uint32_t *ln = realloc(l->lens, (size_t)cap * sizeof *ln);
        if (ln) l->lens = ln;
        if (!v || !nn || !ln) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
        l->cap = cap;
    }
    l->v[l->n] = x;
    l->names[l->n] = nm;
    l->lens[l->n] = len;
    l->n++;
    return KILN_OK;
}

static void nl_free(nlist *l) {
    free(l->v);
    free(l->names);
    free(l->lens);
    memset(l, 0, sizeof *l);
}

static kiln_status nl_nodes(parser *P, nlist *l, kiln_jnode ***out, int *n) {
    *n = l->n;
    *out = NULL;
    if (!l->n) return KILN_OK;
    *out = kiln_ja_alloc(P->a, (size_t)l->n * sizeof **out);
    if (!*out) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
    memcpy(*out, l->v, (size_t)l->n * sizeof **out);
    return KILN_OK;
}

static kiln_status nl_names(parser *P, nlist *l, const char ***names, uint32_t **lens, int *n) {
    *n = l->n;
    *names = NULL;
    *lens = NULL;
    if (!l->n) return KILN_OK;
    *names = kiln_ja_alloc(P->a, (size_t)l->n * sizeof **names);
    *lens = kiln_ja_alloc(P->a, (size_t)l->n * sizeof **lens);
    if (!*names || !*lens) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
    memcpy(*names, l->names, (size_t)l->n * sizeof **names);
    memcpy(*lens, l->lens, (size_t)l->n * sizeof **lens);
    return KILN_OK;
}

static kiln_status parse_expr(parser *P, bool with_cond, kiln_jnode **out);
static kiln_status parse_unary(parser *P, bool with_filter, kiln_jnode **out);
static kiln_status parse_primary(parser *P, kiln_jnode **out);
static kiln_status parse_postfix(parser *P, kiln_jnode *in, kiln_jnode **out);
static kiln_status parse_filter_chain(parser *P, kiln_jnode *in, kiln_jnode **out);
static kiln_status parse_or(parser *P, kiln_jnode **out);

/* "a, b, c" -> TUPLE when a comma follows; with_cond=false stops at if. */
static kiln_status parse_tuple(parser *P, bool with_cond, bool names_only, kiln_jnode **out) {
    kiln_status st = KILN_OK;
    nlist l = {0};
    int line = cur(P)->line;
    bool trailing = false;
    for (;;) {
        if (l.n) {
            if (!is_op(cur(P), ",")) break;
            P->i++;
            trailing = true;
            /* tuple may end with a comma */
            tk *c = cur(P);
            if (c->type == TK_BLOCK_END || c->type == TK_VAR_END || is_op(c, ")") || is_op(c, "=") ||
                is_name(c, "in") || is_name(c, "recursive") || is_name(c, "if"))
                break;
        }
        kiln_jnode *e;
        if (names_only) {
            if (cur(P)->type != TK_NAME) {
                char b[64];
                st = perr(P, cur(P)->line, "expected a name, got %s", tk_desc(cur(P), b, sizeof b));
                goto fail;
            }
            e = node(P, KILN_JN_NAME, cur(P)->line);
            KILN_CHECK_ALLOC(e);
            e->s = cur(P)->s;
            e->sn = cur(P)->n;
            P->i++;
        } else {
            KILN_TRY(parse_expr(P, with_cond, &e));
        }
        KILN_TRY(nl_push(&l, e, NULL, 0));
        trailing = false;
    }
    if (l.n == 1 && !trailing) {
        *out = l.v[0];
    } else {
        kiln_jnode *t = node(P, KILN_JN_TUPLE, line);
        KILN_CHECK_ALLOC(t);
        KILN_TRY(nl_nodes(P, &l, &t->items, &t->n_items));
        *out = t;
    }
fail:
    nl_free(&l);
    return st;
}

/* call arguments after '(': positional and name=value */
static kiln_status parse_args(parser *P, kiln_jnode *call) {
    kiln_status st = KILN_OK;
    nlist pos = {0}, kw = {0};
    KILN_TRY(expect_op(P, "("));
    while (!is_op(cur(P), ")")) {
        if (pos.n || kw.n) KILN_TRY(expect_op(P, ","));
        if (is_op(cur(P), ")")) break;
        if (is_op(cur(P), "*") || is_op(cur(P), "**")) {
            st = perr(P, cur(P)->line, "*args and **kwargs in calls are not supported");
            goto fail;
        }
        if (cur(P)->type == TK_NAME && is_op(peek(P, 1), "=")) {
            const char *nm = cur(P)->s;
            uint32_t nl = cur(P)->n;
            P->i += 2;
            kiln_jnode *v;
            KILN_TRY(parse_expr(P, true, &v));
            KILN_TRY(nl_push(&kw, v, nm, nl));
        } else {
            if (kw.n) {
                st = perr(P, cur(P)->line, "a positional argument follows a keyword argument");
                goto fail;
            }
            kiln_jnode *v;
            KILN_TRY(parse_expr(P, true, &v));
            KILN_TRY(nl_push(&pos, v, NULL, 0));
        }
    }
    P->i++;
    KILN_TRY(nl_nodes(P, &pos, &call->items, &call->n_items));
    KILN_TRY(nl_nodes(P, &kw, &call->items2, &call->n_items2));
    {
        int nn;
        KILN_TRY(nl_names(P, &kw, &call->names, &call->name_lens, &nn));
        call->n_names = nn;
    }
fail:
    nl_free(&pos);
    nl_free(&kw);
    return st;
}

static kiln_status parse_primary(parser *P, kiln_jnode **out) {
    kiln_status st = KILN_OK;
    tk *t = cur(P);
    kiln_jnode *n;
    if (++P->depth > KILN_CHAT_MAX_DEPTH) return perr(P, t->line, "expression nested too deeply");
    switch (t->type) {
    case TK_NAME:
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") || is_name(t, "False")) {
            NODE(n, KILN_JN_LIT, t->line);
            n->lit.type = KILN_JV_BOOL;
            n->lit.u.b = t->s[0] == 't' || t->s[0] == 'T';
        } else if (is_name(t, "none") || is_name(t, "None")) {
            NODE(n, KILN_JN_LIT, t->line);
            n->lit.type = KILN_JV_NONE;
        } else {
            NODE(n, KILN_JN_NAME, t->line);
            n->s = t->s;
            n->sn = t->n;
        }
        P->i++;
        break;
    case TK_STRING: {
        NODE(n, KILN_JN_LIT, t->line);
        size_t total = 0, k = 0;
        while (cur(P)[k].type == TK_STRING) total += cur(P)[k++].n;
        char *s = kiln_ja_alloc(P->a, total + 1);
        if (!s) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
        size_t w = 0;
        while (cur(P)->type == TK_STRING) {
            memcpy(s + w, cur(P)->s, cur(P)->n);
            w += cur(P)->n;
            P->i++;
        }
        s[w] = 0;
        n->lit.type = KILN_JV_STR;
        n->lit.u.s = s;
        n->lit.n = (uint32_t)w;
        break;
    }
    case TK_INT:
        NODE(n, KILN_JN_LIT, t->line);
        n->lit.type = KILN_JV_INT;
        n->lit.u.i = t->i;
        P->i++;
        break;
    case TK_FLOAT:
        NODE(n, KILN_JN_LIT, t->line);
        n->lit.type = KILN_JV_FLOAT;
        n->lit.u.f = t->f;
        P->i++;
        break;
    case TK_OP:
        if (is_op(t, "(")) {
            P->i++;
            if (is_op(cur(P), ")")) {
                P->i++;
                NODE(n, KILN_JN_TUPLE, t->line);
                break;
            }
            /* parenthesized expression or tuple */
            nlist l = {0};
            bool comma = false;
            for (;;) {
                kiln_jnode *e;
                if ((st = parse_expr(P, true, &e)) || (st = nl_push(&l, e, NULL, 0))) {
                    nl_free(&l);
                    return st;
                }
                if (is_op(cur(P), ",")) {
                    comma = true;
                    P->i++;
                    if (is_op(cur(P), ")")) break;
                    continue;
                }
                break;
            }
            if ((st = expect_op(P, ")"))) {
                nl_free(&l);
                return st;
            }
            if (!comma) {
                n = l.v[0];
            } else {
                n = node(P, KILN_JN_TUPLE, t->line);
                if (!n || (st = nl_nodes(P, &l, &n->items, &n->n_items))) {
                    nl_free(&l);
                    return n ? st : KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
                }
            }
            nl_free(&l);
            break;
        }
        if (is_op(t, "[")) {
            P->i++;
            nlist l = {0};
            while (!is_op(cur(P), "]")) {
                if (l.n && (st = expect_op(P, ","))) break;
                if (is_op(cur(P), "]")) break;
                kiln_jnode *e;
                if ((st = parse_expr(P, true, &e)) || (st = nl_push(&l, e, NULL, 0))) break;
            }
            if (!st) st = expect_op(P, "]");
            if (!st) {
                n = node(P, KILN_JN_LIST, t->line);
                if (!n) st = KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
                else st = nl_nodes(P, &l, &n->items, &n->n_items);
            }
            nl_free(&l);
            if (st) return st;
            break;
        }
        if (is_op(t, "{")) {
            P->i++;
            nlist k = {0}, v = {0};
            while (!is_op(cur(P), "}")) {
                if (k.n && (st = expect_op(P, ","))) break;
                if (is_op(cur(P), "}")) break;
                kiln_jnode *ke, *ve;
                if ((st = parse_expr(P, true, &ke)) || (st = expect_op(P, ":")) || (st = parse_expr(P, true, &ve)) ||
                    (st = nl_push(&k, ke, NULL, 0)) || (st = nl_push(&v, ve, NULL, 0)))
                    break;
            }
            if (!st) st = expect_op(P, "}");
            if (!st) {
                n = node(P, KILN_JN_DICT, t->line);
                if (!n) st = KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
                if (!st) st = nl_nodes(P, &k, &n->items, &n->n_items);
                if (!st) st = nl_nodes(P, &v, &n->items2, &n->n_items2);
            }
            nl_free(&k);
            nl_free(&v);
            if (st) return st;
            break;
        }
        /* fallthrough */
    default: {
        char b[64];
        return perr(P, t->line, "unexpected %s in an expression", tk_desc(t, b, sizeof b));
    }
    }
    P->depth--;
    *out = n;
    return KILN_OK;
}

/* obj[...]: an index, a slice a:b:c, or (as Jinja) a tuple of indexes
 * ("x[]" is x[()]). */
static kiln_status parse_subscript(parser *P, kiln_jnode *obj, kiln_jnode **out) {
    kiln_status st = KILN_OK;
    int line = cur(P)->line;
    P->i++; /* [ */
    nlist l = {0};
    kiln_jnode *parts[3] = {NULL, NULL, NULL};
    bool slice = false;
    while (!is_op(cur(P), "]")) {
        if (l.n || slice) {
            if (slice) {
                st = perr(P, cur(P)->line, "a slice cannot be part of a tuple subscript");
                goto fail;
            }
            KILN_TRY(expect_op(P, ","));
        }
        /* one subscribed item: expr, or [expr]:[expr][:[expr]] */
        kiln_jnode *e = NULL;
        if (!is_op(cur(P), ":")) KILN_TRY(parse_expr(P, true, &e));
        if (is_op(cur(P), ":")) {
            if (l.n) {
                st = perr(P, cur(P)->line, "a slice cannot be part of a tuple subscript");
                goto fail;
            }
            slice = true;
            parts[0] = e;
            P->i++;
            if (!is_op(cur(P), "]") && !is_op(cur(P), ":") && !is_op(cur(P), ","))
                KILN_TRY(parse_expr(P, true, &parts[1]));
            if (is_op(cur(P), ":")) {
                P->i++;
                if (!is_op(cur(P), "]") && !is_op(cur(P), ",")) KILN_TRY(parse_expr(P, true, &parts[2]));
            }
            continue;
        }
        KILN_TRY(nl_push(&l, e, NULL, 0));
    }
    P->i++;
    kiln_jnode *n;
    if (slice) {
        n = node(P, KILN_JN_SLICE, line);
        KILN_CHECK_ALLOC(n);
        n->a = obj;
        n->items = kiln_ja_alloc(P->a, 3 * sizeof *n->items);
        KILN_CHECK_ALLOC(n->items);
        memcpy(n->items, parts, sizeof parts);
        n->n_items = 3;
    } else {
        n = node(P, KILN_JN_ITEM, line);
        KILN_CHECK_ALLOC(n);
        n->a = obj;
        if (l.n == 1) {
            n->b = l.v[0];
        } else {
            n->b = node(P, KILN_JN_TUPLE, line);
            KILN_CHECK_ALLOC(n->b);
            KILN_TRY(nl_nodes(P, &l, &n->b->items, &n->b->n_items));
        }
    }
    *out = n;
fail:
    nl_free(&l);
    return st;
}

static kiln_status parse_postfix(parser *P, kiln_jnode *in, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *n = in;
    for (;;) {
        tk *t = cur(P);
        if (is_op(t, ".")) {
            tk *nx = peek(P, 1);
            kiln_jnode *x;
            if (nx->type == TK_NAME) {
                NODE(x, KILN_JN_ATTR, t->line);
                x->a = n;
                x->s = nx->s;
                x->sn = nx->n;
            } else if (nx->type == TK_INT) {
                NODE(x, KILN_JN_ITEM, t->line);
                x->a = n;
                NODE(x->b, KILN_JN_LIT, t->line);
                x->b->lit.type = KILN_JV_INT;
                x->b->lit.u.i = nx->i;
            } else {
                return perr(P, t->line, "expected a name after '.'");
            }
            P->i += 2;
            n = x;
        } else if (is_op(t, "[")) {
            if ((st = parse_subscript(P, n, &n))) return st;
        } else if (is_op(t, "(")) {
            kiln_jnode *c;
            NODE(c, KILN_JN_CALL, t->line);
            c->a = n;
            if ((st = parse_args(P, c))) return st;
            n = c;
        } else {
            break;
        }
    }
    *out = n;
    return KILN_OK;
}

/* "| name(args)" and "is [not] name args" after an operand */
static kiln_status parse_filter_chain(parser *P, kiln_jnode *in, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *n = in;
    for (;;) {
        tk *t = cur(P);
        if (is_op(t, "|")) {
            P->i++;
            if (cur(P)->type != TK_NAME) return perr(P, t->line, "expected a filter name after '|'");
            kiln_jnode *f;
            NODE(f, KILN_JN_FILTER, t->line);
            f->a = n;
            f->s = cur(P)->s;
            f->sn = cur(P)->n;
            P->i++;
            while (is_op(cur(P), ".") && peek(P, 1)->type == TK_NAME) { /* dotted filter names */
                size_t l = f->sn + 1 + peek(P, 1)->n;
                char *s = kiln_ja_alloc(P->a, l + 1);
                if (!s) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
                snprintf(s, l + 1, "%.*s.%.*s", (int)f->sn, f->s, (int)peek(P, 1)->n, peek(P, 1)->s);
                f->s = s;
                f->sn = (uint32_t)l;
                P->i += 2;
            }
            if (is_op(cur(P), "(") && (st = parse_args(P, f))) return st;
            n = f;
        } else if (is_name(t, "is")) {
            P->i++;
            kiln_jnode *x;
            NODE(x, KILN_JN_TEST, t->line);
            if (is_name(cur(P), "not")) {
                x->flag = 1;
                P->i++;
            }
            if (cur(P)->type != TK_NAME) return perr(P, t->line, "expected a test name after 'is'");
            x->a = n;
            x->s = cur(P)->s;
            x->sn = cur(P)->n;
            P->i++;
            while (is_op(cur(P), ".") && peek(P, 1)->type == TK_NAME) P->i += 2; /* dotted test names: rare */
            tk *c = cur(P);
            if (is_op(c, "(")) {
                if ((st = parse_args(P, x))) return st;
            } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT || c->type == TK_FLOAT ||
                        is_op(c, "[") || is_op(c, "{")) &&
                       !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
                if (is_name(c, "is")) return perr(P, c->line, "you cannot chain multiple tests with is");
                kiln_jnode *arg;
                if ((st = parse_primary(P, &arg)) || (st = parse_postfix(P, arg, &arg))) return st;
                x->items = kiln_ja_alloc(P->a, sizeof *x->items);
                if (!x->items) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
                x->items[0] = arg;
                x->n_items = 1;
            }
            n = x;
        } else if (is_op(t, "(")) {
            kiln_jnode *c;
            NODE(c, KILN_JN_CALL, t->line);
            c->a = n;
            if ((st = parse_args(P, c))) return st;
            n = c;
        } else {
            break;
        }
    }
    *out = n;
    return KILN_OK;
}

static kiln_status parse_unary(parser *P, bool with_filter, kiln_jnode **out) {
    kiln_status st;
    tk *t = cur(P);
    kiln_jnode *n;
    if (++P->depth > KILN_CHAT_MAX_DEPTH) return perr(P, t->line, "expression nested too deeply");
    if (is_op(t, "-") || is_op(t, "+")) {
        P->i++;
        kiln_jnode *x;
        if ((st = parse_unary(P, false, &x))) return st;
        NODE(n, t->s[0] == '-' ? KILN_JN_NEG : KILN_JN_POS, t->line);
        n->a = x;
    } else {
        if ((st = parse_primary(P, &n))) return st;
    }
    if ((st = parse_postfix(P, n, &n))) return st;
    if (with_filter && (st = parse_filter_chain(P, n, &n))) return st;
    P->depth--;
    *out = n;
    return KILN_OK;
}

static kiln_status binary(parser *P, int op, int line, kiln_jnode *a, kiln_jnode *b, kiln_jnode **out) {
    kiln_jnode *n;
    NODE(n, KILN_JN_BINARY, line);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    *out = n;
    return KILN_OK;
}

static kiln_status parse_pow(parser *P, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *a = NULL, *b = NULL;
    if ((st = parse_unary(P, true, &a))) return st;
    while (is_op(cur(P), "**")) {
        int line = cur(P)->line;
        P->i++;
        if ((st = parse_unary(P, true, &b)) || (st = binary(P, KILN_JOP_POW, line, a, b, &a))) return st;
    }
    *out = a;
    return KILN_OK;
}

static kiln_status parse_math2(parser *P, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *a, *b;
    if ((st = parse_pow(P, &a))) return st;
    for (;;) {
        tk *t = cur(P);
        int op = is_op(t, "*") ? KILN_JOP_MUL : is_op(t, "/") ? KILN_JOP_DIV : is_op(t, "//") ? KILN_JOP_FLOORDIV
                 : is_op(t, "%") ? KILN_JOP_MOD : 0;
        if (!op) break;
        P->i++;
        if ((st = parse_pow(P, &b)) || (st = binary(P, op, t->line, a, b, &a))) return st;
    }
    *out = a;
    return KILN_OK;
}

static kiln_status parse_concat(parser *P, kiln_jnode **out) {
    kiln_status st = KILN_OK;
    kiln_jnode *a;
    if ((st = parse_math2(P, &a))) return st;
    if (!is_op(cur(P), "~")) {
        *out = a;
        return KILN_OK;
    }
    nlist l = {0};
    int line = cur(P)->line;
    KILN_TRY(nl_push(&l, a, NULL, 0));
    while (is_op(cur(P), "~")) {
        P->i++;
        kiln_jnode *b;
        KILN_TRY(parse_math2(P, &b));
        KILN_TRY(nl_push(&l, b, NULL, 0));
    }
    kiln_jnode *n = node(P, KILN_JN_CONCAT, line);
    KILN_CHECK_ALLOC(n);
    KILN_TRY(nl_nodes(P, &l, &n->items, &n->n_items));
    *out = n;
fail:
    nl_free(&l);
    return st;
}

static kiln_status parse_math1(parser *P, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *a, *b;
    if ((st = parse_concat(P, &a))) return st;
    for (;;) {
        tk *t = cur(P);
        int op = is_op(t, "+") ? KILN_JOP_ADD : is_op(t, "-") ? KILN_JOP_SUB : 0;
        if (!op) break;
        P->i++;
        if ((st = parse_concat(P, &b)) || (st = binary(P, op, t->line, a, b, &a))) return st;
    }
    *out = a;
    return KILN_OK;
}

static kiln_status parse_compare(parser *P, kiln_jnode **out) {
    kiln_status st = KILN_OK;
    kiln_jnode *a;
    if ((st = parse_math1(P, &a))) return st;
    nlist l = {0};
    uint8_t ops[64];
    int line = cur(P)->line;
    for (;;) {
        tk *t = cur(P);
        int op = is_op(t, "==") ? KILN_JOP_EQ : is_op(t, "!=") ? KILN_JOP_NE : is_op(t, "<") ? KILN_JOP_LT
                 : is_op(t, "<=") ? KILN_JOP_LE : is_op(t, ">") ? KILN_JOP_GT : is_op(t, ">=") ? KILN_JOP_GE : 0;
        if (op) {
            P->i++;
        } else if (is_name(t, "in")) {
            op = KILN_JOP_IN;
            P->i++;
        } else if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
            op = KILN_JOP_NOTIN;
            P->i += 2;
        } else {
            break;
        }
        if (l.n >= (int)sizeof ops) {
            st = perr(P, t->line, "too many chained comparisons");
            goto fail;
        }
        ops[l.n] = (uint8_t)op;
        kiln_jnode *b;
        KILN_TRY(parse_math1(P, &b));
        KILN_TRY(nl_push(&l, b, NULL, 0));
    }
    if (!l.n) {
        *out = a;
    } else {
        kiln_jnode *n = node(P, KILN_JN_COMPARE, line);
        KILN_CHECK_ALLOC(n);
        n->a = a;
        KILN_TRY(nl_nodes(P, &l, &n->items, &n->n_items));
        n->ops = kiln_ja_alloc(P->a, (size_t)l.n);
        KILN_CHECK_ALLOC(n->ops);
        memcpy(n->ops, ops, (size_t)l.n);
        *out = n;
    }
fail:
    nl_free(&l);
    return st;
}

static kiln_status parse_not(parser *P, kiln_jnode **out) {
    kiln_status st;
    if (is_name(cur(P), "not")) {
        int line = cur(P)->line;
        P->i++;
        kiln_jnode *x, *n;
        if (++P->depth > KILN_CHAT_MAX_DEPTH) return perr(P, line, "expression nested too deeply");
        if ((st = parse_not(P, &x))) return st;
        P->depth--;
        NODE(n, KILN_JN_NOT, line);
        n->a = x;
        *out = n;
        return KILN_OK;
    }
    return parse_compare(P, out);
}

static kiln_status parse_and(parser *P, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *a, *b, *n;
    if ((st = parse_not(P, &a))) return st;
    while (is_name(cur(P), "and")) {
        int line = cur(P)->line;
        P->i++;
        if ((st = parse_not(P, &b))) return st;
        NODE(n, KILN_JN_AND, line);
        n->a = a;
        n->b = b;
        a = n;
    }
    *out = a;
    return KILN_OK;
}

static kiln_status parse_or(parser *P, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *a, *b, *n;
    if ((st = parse_and(P, &a))) return st;
    while (is_name(cur(P), "or")) {
        int line = cur(P)->line;
        P->i++;
        if ((st = parse_and(P, &b))) return st;
        NODE(n, KILN_JN_OR, line);
        n->a = a;
        n->b = b;
        a = n;
    }
    *out = a;
    return KILN_OK;
}

static kiln_status parse_expr(parser *P, bool with_cond, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *a;
    if (++P->depth > KILN_CHAT_MAX_DEPTH) return perr(P, cur(P)->line, "expression nested too deeply");
    if ((st = parse_or(P, &a))) return st;
    while (with_cond && is_name(cur(P), "if")) {
        int line = cur(P)->line;
        P->i++;
        kiln_jnode *cond, *els = NULL, *n;
        if ((st = parse_or(P, &cond))) return st;
        if (is_name(cur(P), "else")) {
            P->i++;
            if ((st = parse_expr(P, true, &els))) return st;
        }
        NODE(n, KILN_JN_COND, line);
        n->a = a;
        n->b = cond;
        n->c = els;
        a = n;
    }
    P->depth--;
    *out = a;
    return KILN_OK;
}

/* ------------------------------------------------------------ statements */

static kiln_status parse_body(parser *P, const char *const *end_tags, kiln_jnode **out, int *which);

static kiln_status block_end(parser *P) { return expect(P, TK_BLOCK_END, "'%}'"); }

static kiln_status parse_if(parser *P, int line, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *n;
    NODE(n, KILN_JN_IF, line);
    /* as Jinja: no "a if b else c" at the top of an if/elif condition */
    if ((st = parse_tuple(P, false, false, &n->a)) || (st = block_end(P))) return st;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    int which;
    if ((st = parse_body(P, ends, &n->b, &which))) return st;
    if (which == 0) { /* elif */
        int l2 = cur(P)->line;
        P->i++;
        if ((st = parse_if(P, l2, &n->c))) return st;
        *out = n;
        return KILN_OK;
    }
    if (which == 1) { /* else */
        P->i++;
        if ((st = block_end(P))) return st;
        static const char *const ends2[] = {"endif", NULL};
        if ((st = parse_body(P, ends2, &n->c, &which))) return st;
    }
    P->i++; /* endif */
    if ((st = block_end(P))) return st;
    *out = n;
    return KILN_OK;
}

static kiln_status target_names(parser *P, kiln_jnode *t, kiln_jnode *dst) {
    /* t: NAME or TUPLE of NAMEs */
    int n = t->kind == KILN_JN_TUPLE ? t->n_items : 1;
    dst->names = kiln_ja_alloc(P->a, (size_t)(n ? n : 1) * sizeof *dst->names);
    dst->name_lens = kiln_ja_alloc(P->a, (size_t)(n ? n : 1) * sizeof *dst->name_lens);
    if (!dst->names || !dst->name_lens) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
    for (int i = 0; i < n; i++) {
        kiln_jnode *x = t->kind == KILN_JN_TUPLE ? t->items[i] : t;
        if (x->kind != KILN_JN_NAME) return perr(P, t->line, "can only assign to names");
        dst->names[i] = x->s;
        dst->name_lens[i] = x->sn;
    }
    dst->n_names = n;
    if (!n) return perr(P, t->line, "empty assignment target");
    return KILN_OK;
}

static kiln_status parse_for(parser *P, int line, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *n, *target;
    NODE(n, KILN_JN_FOR, line);
    if ((st = parse_tuple(P, false, true, &target)) || (st = target_names(P, target, n))) return st;
    if (!is_name(cur(P), "in")) return perr(P, cur(P)->line, "expected 'in' in a for loop");
    P->i++;
    if ((st = parse_tuple(P, false, false, &n->a))) return st;
    if (is_name(cur(P), "if")) {
        P->i++;
        if ((st = parse_expr(P, true, &n->b))) return st;
    }
    if (is_name(cur(P), "recursive")) return perr(P, cur(P)->line, "recursive for loops are not supported");
    if ((st = block_end(P))) return st;
    static const char *const ends[] = {"else", "endfor", NULL};
    int which;
    P->loop_depth++;
    st = parse_body(P, ends, &n->c, &which);
    P->loop_depth--;
    if (st) return st;
    if (which == 0) {
        P->i++;
        if ((st = block_end(P))) return st;
        static const char *const ends2[] = {"endfor", NULL};
        if ((st = parse_body(P, ends2, &n->d, &which))) return st;
    }
    P->i++;
    if ((st = block_end(P))) return st;
    *out = n;
    return KILN_OK;
}

static kiln_status parse_filter_spec(parser *P, kiln_jnode **out) {
    /* "name(args) | name2 ..." with no operand */
    kiln_status st;
    kiln_jnode *head = NULL;
    for (bool first = true;; first = false) {
        if (!first) {
            if (!is_op(cur(P), "|")) break;
            P->i++;
        }
        if (cur(P)->type != TK_NAME) return perr(P, cur(P)->line, "expected a filter name");
        kiln_jnode *f;
        NODE(f, KILN_JN_FILTER, cur(P)->line);
        f->a = head;
        f->s = cur(P)->s;
        f->sn = cur(P)->n;
        P->i++;
        if (is_op(cur(P), "(") && (st = parse_args(P, f))) return st;
        head = f;
    }
    *out = head;
    return KILN_OK;
}

static kiln_status parse_set(parser *P, int line, kiln_jnode **out) {
    kiln_status st;
    kiln_jnode *n;
    /* set ns.attr = value */
    if (cur(P)->type == TK_NAME && is_op(peek(P, 1), ".") && peek(P, 2)->type == TK_NAME) {
        NODE(n, KILN_JN_SET_ATTR, line);
        n->s = cur(P)->s;
        n->sn = cur(P)->n;
        n->names = kiln_ja_alloc(P->a, sizeof *n->names);
        n->name_lens = kiln_ja_alloc(P->a, sizeof *n->name_lens);
        if (!n->names || !n->name_lens) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
        n->names[0] = peek(P, 2)->s;
        n->name_lens[0] = peek(P, 2)->n;
        n->n_names = 1;
        P->i += 3;
        if ((st = expect_op(P, "=")) || (st = parse_tuple(P, true, false, &n->a)) || (st = block_end(P))) return st;
        *out = n;
        return KILN_OK;
    }
    kiln_jnode *target;
    if ((st = parse_tuple(P, true, true, &target))) return st;
    if (is_op(cur(P), "=")) {
        NODE(n, KILN_JN_SET, line);
        if ((st = target_names(P, target, n))) return st;
        P->i++;
        if ((st = parse_tuple(P, true, false, &n->a)) || (st = block_end(P))) return st;
        *out = n;
        return KILN_OK;
    }
    /* block set: {% set x %}...{% endset %} or {% set x | filter %} */
    NODE(n, KILN_JN_SET_BLOCK, line);
    if ((st = target_names(P, target, n))) return st;
    if (n->n_names != 1) return perr(P, line, "a block set takes one name");
    if (is_op(cur(P), "|")) {
        P->i++;
        if ((st = parse_filter_spec(P, &n->b))) return st;
    }
    if ((st = block_end(P))) return st;
    static const char *const ends[] = {"endset", NULL};
    int which;
    if ((st = parse_body(P, ends, &n->c, &which))) return st;
    P->i++;
    if ((st = block_end(P))) return st;
    *out = n;
    return KILN_OK;
}

static kiln_status parse_macro(parser *P, int line, kiln_jnode **out) {
    kiln_status st = KILN_OK;
    kiln_jnode *n;
    NODE(n, KILN_JN_MACRO, line);
    if (cur(P)->type != TK_NAME) return perr(P, line, "expected a macro name");
    n->s = cur(P)->s;
    n->sn = cur(P)->n;
    P->i++;
    nlist l = {0};
    KILN_TRY(expect_op(P, "("));
    while (!is_op(cur(P), ")")) {
        if (l.n) KILN_TRY(expect_op(P, ","));
        if (cur(P)->type != TK_NAME) {
            st = perr(P, cur(P)->line, "expected a parameter name");
            goto fail;
        }
        const char *nm = cur(P)->s;
        uint32_t nl = cur(P)->n;
        P->i++;
        kiln_jnode *def = NULL;
        if (is_op(cur(P), "=")) {
            P->i++;
            KILN_TRY(parse_expr(P, true, &def));
        } else if (l.n && l.v[l.n - 1]) {
            st = perr(P, cur(P)->line, "non-default parameter follows a default parameter");
            goto fail;
        }
        KILN_TRY(nl_push(&l, def, nm, nl));
    }
    P->i++;
    KILN_TRY(block_end(P));
    KILN_TRY(nl_nodes(P, &l, &n->items, &n->n_items));
    {
        int nn;
        KILN_TRY(nl_names(P, &l, &n->names, &n->name_lens, &nn));
        n->n_names = nn;
    }
    {
        static const char *const ends[] = {"endmacro", NULL};
        int which, saved = P->loop_depth;
        P->loop_depth = 0;
        st = parse_body(P, ends, &n->c, &which);
        P->loop_depth = saved;
        if (st) goto fail;
        P->i++;
        if (cur(P)->type == TK_NAME) P->i++; /* {% endmacro name %} */
        KILN_TRY(block_end(P));
    }
    *out = n;
fail:
    nl_free(&l);
    return st;
}

static kiln_status parse_statement(parser *P, kiln_jnode **out) {
    kiln_status st;
    tk *t = cur(P);
    kiln_jnode *n;
    if (t->type == TK_DATA) {
        NODE(n, KILN_JN_TEXT, t->line);
        n->s = t->s;
        n->sn = t->n;
        P->i++;
        *out = n;
        return KILN_OK;
    }
    if (t->type == TK_VAR_BEGIN) {
        P->i++;
        NODE(n, KILN_JN_OUTPUT, t->line);
        if ((st = parse_tuple(P, true, false, &n->a)) || (st = expect(P, TK_VAR_END, "'}}'"))) return st;
        *out = n;
        return KILN_OK;
    }
    if (t->type != TK_BLOCK_BEGIN) {
        char b[64];
        return perr(P, t->line, "unexpected %s", tk_desc(t, b, sizeof b));
    }
    P->i++;
    tk *k = cur(P);
    if (k->type != TK_NAME) return perr(P, k->line, "expected a statement name after '{%%'");
    int line = k->line;
    P->i++;
    if (is_name(k, "if")) return parse_if(P, line, out);
    if (is_name(k, "for")) return parse_for(P, line, out);
    if (is_name(k, "set")) return parse_set(P, line, out);
    if (is_name(k, "macro")) return parse_macro(P, line, out);
    if (is_name(k, "break") || is_name(k, "continue")) {
        if (!P->loop_depth)
            return perr(P, line, is_name(k, "break") ? "'break' outside loop" : "'continue' not properly in loop");
        NODE(n, is_name(k, "break") ? KILN_JN_BREAK : KILN_JN_CONTINUE, line);
        if ((st = block_end(P))) return st;
        *out = n;
        return KILN_OK;
    }
    if (is_name(k, "filter")) {
        NODE(n, KILN_JN_FILTER_BLOCK, line);
        if ((st = parse_filter_spec(P, &n->b)) || (st = block_end(P))) return st;
        static const char *const ends[] = {"endfilter", NULL};
        int which;
        if ((st = parse_body(P, ends, &n->c, &which))) return st;
        P->i++;
        if ((st = block_end(P))) return st;
        *out = n;
        return KILN_OK;
    }
    if (is_name(k, "generation")) { /* transformers' AssistantTracker: renders its body */
        if ((st = block_end(P))) return st;
        static const char *const ends[] = {"endgeneration", NULL};
        int which;
        if ((st = parse_body(P, ends, out, &which))) return st;
        P->i++;
        return block_end(P);
    }
    static const char *const unsupported[] = {"extends", "include", "import", "from", "block", "call", "with",
                                              "autoescape", "do", "trans", NULL};
    for (int i = 0; unsupported[i]; i++)
        if (is_name(k, unsupported[i])) return perr(P, line, "the '%s' statement is not supported", unsupported[i]);
    return perr(P, line, "unknown statement '%.*s'", (int)KILN_MIN(k->n, 40), k->s);
}

/* Statements until {% end_tag %}; leaves the cursor on the end tag name;
 * *which = its index. end_tags NULL: until EOF. */
static kiln_status parse_body(parser *P, const char *const *end_tags, kiln_jnode **out, int *which) {
    kiln_status st = KILN_OK;
    nlist l = {0};
    int line = cur(P)->line;
    if (++P->depth > KILN_CHAT_MAX_DEPTH) return perr(P, line, "statements nested too deeply");
    for (;;) {
        tk *t = cur(P);
        if (t->type == TK_EOF) {
            if (end_tags) {
                char tags[128] = "";
                for (int i = 0; end_tags[i]; i++)
                    snprintf(tags + strlen(tags), sizeof tags - strlen(tags), "%s'%s'", i ? " or " : "", end_tags[i]);
                st = perr(P, t->line, "unexpected end of template; expected %s (block opened on line %d)", tags, line);
                goto fail;
            }
            break;
        }
        if (end_tags && t->type == TK_BLOCK_BEGIN) {
            tk *k = peek(P, 1);
            int found = -1;
            for (int i = 0; end_tags[i]; i++)
                if (is_name(k, end_tags[i])) found = i;
            if (found >= 0) {
                P->i++;
                *which = found;
                break;
            }
            static const char *const closers[] = {"endif", "endfor", "endmacro", "endset", "endfilter", "elif",
                                                  "else", "endgeneration", "endraw", NULL};
            for (int i = 0; closers[i]; i++)
                if (is_name(k, closers[i])) {
                    st = perr(P, k->line, "unexpected '%s'", closers[i]);
                    goto fail;
                }
        } else if (!end_tags && t->type == TK_BLOCK_BEGIN) {
            tk *k = peek(P, 1);
            static const char *const closers[] = {"endif", "endfor", "endmacro", "endset", "endfilter", "elif",
                                                  "else", "endgeneration", "endraw", NULL};
            for (int i = 0; closers[i]; i++)
                if (is_name(k, closers[i])) {
                    st = perr(P, k->line, "unexpected '%s'", closers[i]);
                    goto fail;
                }
        }
        kiln_jnode *s;
        KILN_TRY(parse_statement(P, &s));
        KILN_TRY(nl_push(&l, s, NULL, 0));
    }
    {
        kiln_jnode *b = node(P, KILN_JN_BODY, line);
        KILN_CHECK_ALLOC(b);
        KILN_TRY(nl_nodes(P, &l, &b->items, &b->n_items));
        *out = b;
    }
    P->depth--;
fail:
    nl_free(&l);
    return st;
}

kiln_status kiln_jinja_parse(const char *source, size_t len, const char *name, kiln_jarena *arena,
                             kiln_jnode **root) {
    kiln_status st = KILN_OK;
    lexer L;
    memset(&L, 0, sizeof L);
    if (len > KILN_CHAT_MAX_SOURCE)
        return KILN_FAIL(KILN_ERR_LIMIT, "chat template %s is too large (%zu bytes, limit %u)", name, len,
                         KILN_CHAT_MAX_SOURCE);
    if (!kiln_utf8_valid(source, len))
        return KILN_FAIL(KILN_ERR_TEMPLATE, "chat template %s is not valid UTF-8", name);
    /* normalize newlines; drop one trailing newline */
    char *src = kiln_ja_alloc(arena, len + 1);
    if (!src) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template)");
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        if (source[i] == '\r') {
            src[w++] = '\n';
            if (i + 1 < len && source[i + 1] == '\n') i++;
        } else {
            src[w++] = source[i];
        }
    }
    if (w && src[w - 1] == '\n') w--;
    src[w] = 0;
    L.src = src;
    L.len = w;
    L.line = 1;
    L.name = name;
    L.arena = arena;
    KILN_TRY(lex(&L));
    parser P = {L.toks, L.n, 0, name, arena, 0, 0};
    int which = -1;
    KILN_TRY(parse_body(&P, NULL, root, &which));
    KILN_TRY(kiln_jinja_scopes(*root, arena));
fail:
    free(L.toks);
    return st;
}
