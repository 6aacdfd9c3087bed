/*
 * jinja_eval.c -- executes a parsed template: statements (output, if, for
 * with loop.* and else, set / namespace attributes / block set, macros,
 * filter blocks, break/continue) and expressions with Python semantics.
 *
 * Scoping follows Jinja: each for-loop iteration runs in a fresh frame
 * whose parent is the enclosing one (assignments inside a loop do not
 * survive it; reads see outer names), a macro call runs in a frame whose
 * parent is the template's top-level frame, and names resolve through
 * frames, then the render variables, then the globals.
 *
 * Every render is bounded (chat.h): output bytes, loop iterations, nesting
 * depth and arena memory.
 * Ownership: values in the render arena; output appended to the caller's
 * buffer. Thread-safety: all state is per render.
 */
#define _GNU_SOURCE /* memmem */
#include "chat.h"

#include "tokenizer.h" /* UTF-8 helpers */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static kiln_status exec(kiln_jctx *c, const kiln_jnode *n, kiln_buf *out);
static kiln_status eval(kiln_jctx *c, const kiln_jnode *n, kiln_jv *out);

static kiln_status out_limit(kiln_jctx *c) {
    return KILN_FAIL(KILN_ERR_LIMIT, "chat template %s line %d: output exceeds the %u-byte limit", c->name, c->line,
                     KILN_CHAT_MAX_OUTPUT);
}

static kiln_status emit(kiln_jctx *c, kiln_buf *out, const char *s, size_t n) {
    if (out->len + n > KILN_CHAT_MAX_OUTPUT) return out_limit(c);
    return kiln_buf_append(out, s, n);
}

/* ---------------------------------------------------------------- frames */

static kiln_jv *frame_find(kiln_jframe *f, const char *name, uint32_t n) {
    for (; f; f = f->parent)
        for (int i = f->n - 1; i >= 0; i--)
            if (f->vars[i].len == n && !memcmp(f->vars[i].name, name, n)) return &f->vars[i].value;
    return NULL;
}

static kiln_status frame_set(kiln_jctx *c, kiln_jframe *f, const char *name, uint32_t n, kiln_jv v) {
    for (int i = 0; i < f->n; i++)
        if (f->vars[i].len == n && !memcmp(f->vars[i].name, name, n)) {
            f->vars[i].value = v;
            return KILN_OK;
        }
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 8;
        kiln_jvar *nv = kiln_ja_alloc(c->a, (size_t)cap * sizeof *nv);
        if (!nv) return KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory");
        if (f->n) memcpy(nv, f->vars, (size_t)f->n * sizeof *nv);
        f->vars = nv;
        f->cap = cap;
    }
    f->vars[f->n++] = (kiln_jvar){name, n, v};
    return KILN_OK;
}

/* Names the frame assigns before reading start out undefined (Jinja). */
static kiln_status bind_missing(kiln_jctx *c, kiln_jframe *f, const kiln_jnode *body) {
    for (int i = 0; body && i < body->n_fnames; i++) {
        kiln_status st = frame_set(c, f, body->fnames[i], body->fname_lens[i],
                                   kiln_jv_undef(body->fnames[i], body->fname_lens[i], 0));
        if (st) return st;
    }
    return KILN_OK;
}

static kiln_status lookup(kiln_jctx *c, const char *name, uint32_t n, kiln_jv *out) {
    kiln_jv *v = frame_find(c->frame, name, n);
    if (v) {
        *out = *v;
        return KILN_OK;
    }
    for (int i = c->n_vars - 1; i >= 0; i--)
        if (c->vars[i].len == n && !memcmp(c->vars[i].name, name, n)) {
            *out = c->vars[i].value;
            return KILN_OK;
        }
    if (kiln_jglobal(name, n, out)) return KILN_OK;
    *out = kiln_jv_undef(name, n, 0);
    return KILN_OK;
}

/* ------------------------------------------------------------- arithmetic */

static bool is_num(const kiln_jv *v) {
    return v->type == KILN_JV_BOOL || v->type == KILN_JV_INT || v->type == KILN_JV_FLOAT;
}
static double num_f(const kiln_jv *v) {
    return v->type == KILN_JV_FLOAT ? v->u.f : v->type == KILN_JV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t num_i(const kiln_jv *v) { return v->type == KILN_JV_INT ? v->u.i : (int64_t)v->u.b; }

static const char *op_text(int op) {
    switch (op) {
    case KILN_JOP_ADD: return "+";
    case KILN_JOP_SUB: return "-";
    case KILN_JOP_MUL: return "*";
    case KILN_JOP_DIV: return "/";
    case KILN_JOP_FLOORDIV: return "//";
    case KILN_JOP_MOD: return "%";
    case KILN_JOP_POW: return "**";
    case KILN_JOP_EQ: return "==";
    case KILN_JOP_NE: return "!=";
    case KILN_JOP_LT: return "<";
    case KILN_JOP_LE: return "<=";
    case KILN_JOP_GT: return ">";
    case KILN_JOP_GE: return ">=";
    case KILN_JOP_IN: return "in";
    default: return "not in";
    }
}

static kiln_status repeat(kiln_jctx *c, const kiln_jv *seq, int64_t times, kiln_jv *out) {
    kiln_status st;
    /* an empty sequence repeated is empty, without `times` copies of
     * nothing ("" * (2**63 - 1) looped that many times; [] * 9 offset the
     * NULL items of an empty list) */
    if (times < 0 || (seq->type == KILN_JV_STR ? seq->n : seq->u.l->n) == 0) times = 0;
    if (seq->type == KILN_JV_STR) {
        if (seq->n && (uint64_t)times > KILN_CHAT_MAX_OUTPUT / seq->n) return out_limit(c);
        size_t n = seq->n * (size_t)times;
        char *p = kiln_ja_alloc(c->a, n + 1);
        if (!p) return KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory");
        for (int64_t i = 0; i < times; i++) memcpy(p + (size_t)i * seq->n, seq->u.s, seq->n);
        p[n] = 0;
        *out = kiln_jv_strv(p, n);
        return KILN_OK;
    }
    size_t n = seq->u.l->n;
    if (n && (uint64_t)times > KILN_CHAT_MAX_ITERATIONS / n)
        return KILN_FAIL(KILN_ERR_LIMIT, "chat template %s line %d: list repetition too large", c->name, c->line);
    if ((st = kiln_jv_list_new(c, n * (size_t)times, out))) return st;
    for (int64_t i = 0; i < times; i++) memcpy(out->u.l->items + (size_t)i * n, seq->u.l->items, n * sizeof(kiln_jv));
    out->flags = seq->flags & KILN_JV_TUPLE;
    return KILN_OK;
}

kiln_status kiln_jbinop(kiln_jctx *c, int op, const kiln_jv *a, const kiln_jv *b, kiln_jv *out) {
    kiln_status st;
    if (a->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, a);
    if (b->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, b);
    bool nums = is_num(a) && is_num(b);
    bool flt = nums && (a->type == KILN_JV_FLOAT || b->type == KILN_JV_FLOAT);
    switch (op) {
    case KILN_JOP_ADD:
        if (nums) {
            if (flt) {
                *out = kiln_jv_float(num_f(a) + num_f(b));
                return KILN_OK;
            }
            int64_t r;
            if (__builtin_add_overflow(num_i(a), num_i(b), &r)) return kiln_jerr(c, "integer overflow");
            *out = kiln_jv_int(r);
            return KILN_OK;
        }
        if (a->type == KILN_JV_STR && b->type == KILN_JV_STR) {
            if ((size_t)a->n + b->n > KILN_CHAT_MAX_OUTPUT) return out_limit(c);
            char *p = kiln_ja_alloc(c->a, (size_t)a->n + b->n + 1);
            if (!p) return KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory");
            memcpy(p, a->u.s, a->n);
            memcpy(p + a->n, b->u.s, b->n);
            p[a->n + b->n] = 0;
            *out = kiln_jv_strv(p, (size_t)a->n + b->n);
            return KILN_OK;
        }
        if (a->type == KILN_JV_LIST && b->type == KILN_JV_LIST &&
            (a->flags & KILN_JV_TUPLE) == (b->flags & KILN_JV_TUPLE) && !((a->flags | b->flags) & (KILN_JV_ITEMS | KILN_JV_GEN))) {
            size_t n1 = a->u.l->n, n2 = b->u.l->n;
            if ((st = kiln_jv_list_new(c, n1 + n2, out))) return st;
            if (n1) memcpy(out->u.l->items, a->u.l->items, n1 * sizeof(kiln_jv));
            if (n2) memcpy(out->u.l->items + n1, b->u.l->items, n2 * sizeof(kiln_jv));
            out->flags = a->flags & KILN_JV_TUPLE;
            return KILN_OK;
        }
        if (a->type == KILN_JV_STR)
            return kiln_jerr(c, "can only concatenate str (not \"%s\") to str", kiln_jv_type_name(b));
        break;
    case KILN_JOP_SUB:
        if (nums) {
            if (flt) {
                *out = kiln_jv_float(num_f(a) - num_f(b));
                return KILN_OK;
            }
            int64_t r;
            if (__builtin_sub_overflow(num_i(a), num_i(b), &r)) return kiln_jerr(c, "integer overflow");
            *out = kiln_jv_int(r);
            return KILN_OK;
        }
        break;
    case KILN_JOP_MUL:
        if (nums) {
            if (flt) {
                *out = kiln_jv_float(num_f(a) * num_f(b));
                return KILN_OK;
            }
            int64_t r;
            if (__builtin_mul_overflow(num_i(a), num_i(b), &r)) return kiln_jerr(c, "integer overflow");
            *out = kiln_jv_int(r);
            return KILN_OK;
        }
        if ((a->type == KILN_JV_STR || a->type == KILN_JV_LIST) && (b->type == KILN_JV_INT || b->type == KILN_JV_BOOL))
            return repeat(c, a, num_i(b), out);
        if ((b->type == KILN_JV_STR || b->type == KILN_JV_LIST) && (a->type == KILN_JV_INT || a->type == KILN_JV_BOOL))
            return repeat(c, b, num_i(a), out);
        break;
    case KILN_JOP_DIV:
        if (nums) {
            if (num_f(b) == 0) return kiln_jerr(c, "division by zero");
            *out = kiln_jv_float(num_f(a) / num_f(b));
            return KILN_OK;
        }
        break;
    case KILN_JOP_FLOORDIV:
    case KILN_JOP_MOD:
        if (nums) {
            if (num_f(b) == 0) return kiln_jerr(c, op == KILN_JOP_MOD ? "modulo by zero" : "division by zero");
            if (flt) {
                double x = num_f(a), y = num_f(b), m = fmod(x, y);
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                *out = kiln_jv_float(op == KILN_JOP_MOD ? m : floor(x / y));
                return KILN_OK;
            }
            int64_t x = num_i(a), y = num_i(b);
            if (x == INT64_MIN && y == -1) return kiln_jerr(c, "integer overflow");
            int64_t q = x / y, r = x % y;
            if (r && ((r < 0) != (y < 0))) {
                q--;
                r += y;
            }
            *out = kiln_jv_int(op == KILN_JOP_MOD ? r : q);
            return KILN_OK;
        }
        if (op == KILN_JOP_MOD && a->type == KILN_JV_STR) return kiln_jpercent_format(c, a, b, out);
        break;
    case KILN_JOP_POW:
        if (nums) {
            if (!flt && num_i(b) >= 0) {
                int64_t base = num_i(a), e = num_i(b), r = 1;
                while (e-- > 0)
                    if (__builtin_mul_overflow(r, base, &r)) return kiln_jerr(c, "integer overflow");
                *out = kiln_jv_int(r);
                return KILN_OK;
            }
            if (num_f(a) == 0 && num_f(b) < 0) return kiln_jerr(c, "0.0 cannot be raised to a negative power");
            *out = kiln_jv_float(pow(num_f(a), num_f(b)));
            return KILN_OK;
        }
        break;
    }
    return kiln_jerr(c, "unsupported operand type(s) for %s: '%s' and '%s'", op_text(op), kiln_jv_type_name(a),
                     kiln_jv_type_name(b));
}

static kiln_status contains(kiln_jctx *c, const kiln_jv *item, const kiln_jv *cont, bool *res) {
    switch (cont->type) {
    case KILN_JV_UNDEF: *res = false; return KILN_OK;
    case KILN_JV_STR:
        if (item->type != KILN_JV_STR)
            return kiln_jerr(c, "'in <string>' requires string as left operand, not %s", kiln_jv_type_name(item));
        *res = item->n == 0 || (item->n <= cont->n && memmem(cont->u.s, cont->n, item->u.s, item->n) != NULL);
        return KILN_OK;
    case KILN_JV_LIST:
        if (cont->flags & KILN_JV_GEN) { /* consumes the generator */
            kiln_jlist *l;
            kiln_status st = kiln_jv_iter(c, cont, &l);
            if (st) return st;
            *res = false;
            for (size_t i = 0; i < l->n && !*res; i++) *res = kiln_jv_eq(&l->items[i], item);
            return KILN_OK;
        }
        for (size_t i = 0; i < cont->u.l->n; i++)
            if (kiln_jv_eq(&cont->u.l->items[i], item)) {
                *res = true;
                return KILN_OK;
            }
        *res = false;
        return KILN_OK;
    case KILN_JV_DICT:
    case KILN_JV_NS: *res = kiln_jv_dict_get(cont->u.d, *item) != NULL; return KILN_OK;
    default: return kiln_jerr(c, "argument of type '%s' is not iterable", kiln_jv_type_name(cont));
    }
}

static kiln_status compare(kiln_jctx *c, int op, const kiln_jv *a, const kiln_jv *b, bool *res) {
    kiln_status st;
    int r;
    switch (op) {
    case KILN_JOP_EQ: *res = kiln_jv_eq(a, b); return KILN_OK;
    case KILN_JOP_NE: *res = !kiln_jv_eq(a, b); return KILN_OK;
    case KILN_JOP_IN: return contains(c, a, b, res);
    case KILN_JOP_NOTIN:
        if ((st = contains(c, a, b, res))) return st;
        *res = !*res;
        return KILN_OK;
    default:
        if ((st = kiln_jv_cmp(c, a, b, op_text(op), &r))) return st;
        *res = op == KILN_JOP_LT ? r < 0 : op == KILN_JOP_LE ? r <= 0 : op == KILN_JOP_GT ? r > 0 : r >= 0;
        return KILN_OK;
    }
}

/* --------------------------------------------------------------- slicing */

static kiln_status slice(kiln_jctx *c, const kiln_jv *obj, const kiln_jv *start, const kiln_jv *stop,
                         const kiln_jv *step, bool literal, kiln_jv *out) {
    kiln_status st;
    if (obj->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, obj);
    if ((obj->type != KILN_JV_STR && obj->type != KILN_JV_LIST) || (obj->flags & KILN_JV_GEN)) {
        /* Jinja slices with Python's obj[a:b] (a TypeError), except that a
         * literal operand is constant-folded through getitem (undefined) */
        if (literal) {
            *out = kiln_jv_undef(NULL, 0, 0);
            return KILN_OK;
        }
        if (obj->type == KILN_JV_DICT || obj->type == KILN_JV_NS) return kiln_jerr(c, "unhashable type: 'slice'");
        return kiln_jerr(c, "'%s' object is not subscriptable", kiln_jv_type_name(obj));
    }
    for (int k = 0; k < 3; k++) {
        const kiln_jv *x = k == 0 ? start : k == 1 ? stop : step;
        if (x->type != KILN_JV_NONE && x->type != KILN_JV_INT && x->type != KILN_JV_BOOL)
            return kiln_jerr(c, "slice indices must be integers or None");
    }
    /* string: work on code point offsets */
    size_t len, *offs = NULL;
    bool is_str = obj->type == KILN_JV_STR;
    if (is_str) {
        len = kiln_jstr_len(obj->u.s, obj->n);
        if (len != obj->n) {
            offs = kiln_ja_alloc(c->a, (len + 1) * sizeof *offs);
            if (!offs) return KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory");
            size_t k = 0;
            for (size_t i = 0; i < obj->n; i++)
                if (((unsigned char)obj->u.s[i] & 0xC0) != 0x80) offs[k++] = i;
            offs[len] = obj->n;
        }
    } else {
        len = obj->u.l->n;
    }
    int64_t stp = step->type == KILN_JV_NONE ? 1 : num_i(step);
    if (stp == 0) return kiln_jerr(c, "slice step cannot be zero");
    int64_t L = (int64_t)len, lower = stp > 0 ? 0 : -1, upper = stp > 0 ? L : L - 1, b, e;
    if (start->type == KILN_JV_NONE) {
        b = stp > 0 ? lower : upper;
    } else {
        b = num_i(start);
        if (b < 0) b = KILN_MAX(b + L, lower);
        else b = KILN_MIN(b, upper);
    }
    if (stop->type == KILN_JV_NONE) {
        e = stp > 0 ? upper : lower;
    } else {
        e = num_i(stop);
        if (e < 0) e = KILN_MAX(e + L, lower);
        else e = KILN_MIN(e, upper);
    }
    size_t count = 0;
    if (stp > 0 && e > b) count = (size_t)((e - b + stp - 1) / stp);
    if (stp < 0 && b > e) count = (size_t)((b - e + (-stp) - 1) / (-stp));
    if (is_str) {
        kiln_buf tmp = {0};
        for (size_t k = 0; k < count; k++) {
            size_t i = (size_t)(b + (int64_t)k * stp);
            size_t s0 = offs ? offs[i] : i, s1 = offs ? offs[i + 1] : i + 1;
            if ((st = kiln_buf_append(&tmp, obj->u.s + s0, s1 - s0))) {
                kiln_buf_free(&tmp);
                return st;
            }
        }
        st = kiln_jv_str_copy(c, tmp.data ? tmp.data : "", tmp.len, out);
        kiln_buf_free(&tmp);
        return st;
    }
    if ((st = kiln_jv_list_new(c, count, out))) return st;
    for (size_t k = 0; k < count; k++) out->u.l->items[k] = obj->u.l->items[b + (int64_t)k * stp];
    out->flags = obj->flags & KILN_JV_TUPLE;
    return KILN_OK;
}

/* ------------------------------------------------------------- arguments */

typedef struct argbuf {
    kiln_jv *args, *kw_vals;
    kiln_jargs a;
} argbuf;

static kiln_status eval_args(kiln_jctx *c, const kiln_jnode *n, const kiln_jv *first, argbuf *ab) {
    kiln_status st;
    int extra = first ? 1 : 0;
    memset(ab, 0, sizeof *ab);
    int na = n->n_items + extra;
    if (na) {
        ab->args = kiln_ja_alloc(c->a, (size_t)na * sizeof(kiln_jv));
        if (!ab->args) return KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory");
        if (first) ab->args[0] = *first;
        for (int i = 0; i < n->n_items; i++)
            if ((st = eval(c, n->items[i], &ab->args[i + extra]))) return st;
    }
    if (n->n_items2) {
        ab->kw_vals = kiln_ja_alloc(c->a, (size_t)n->n_items2 * sizeof(kiln_jv));
        if (!ab->kw_vals) return KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory");
        for (int i = 0; i < n->n_items2; i++)
            if ((st = eval(c, n->items2[i], &ab->kw_vals[i]))) return st;
    }
    ab->a = (kiln_jargs){ab->args, na, n->names, n->name_lens, ab->kw_vals, n->n_items2};
    return KILN_OK;
}

/* a filter chain (FILTER nodes, innermost has a == NULL) applied to v */
static kiln_status apply_chain(kiln_jctx *c, const kiln_jnode *f, kiln_jv v, kiln_jv *out) {
    kiln_status st;
    if (f->a && (st = apply_chain(c, f->a, v, &v))) return st;
    argbuf ab;
    if ((st = eval_args(c, f, NULL, &ab))) return st;
    c->line = f->line;
    return kiln_jfilter(c, f->s, f->sn, &v, &ab.a, out);
}

/* ------------------------------------------------------------ expressions */

static kiln_status eval(kiln_jctx *c, const kiln_jnode *n, kiln_jv *out) {
    kiln_status st = KILN_OK;
    if (++c->depth > KILN_CHAT_MAX_DEPTH)
        return KILN_FAIL(KILN_ERR_LIMIT, "chat template %s line %d: nesting deeper than %d", c->name, n->line,
                         KILN_CHAT_MAX_DEPTH);
    c->line = n->line;
    switch (n->kind) {
    case KILN_JN_LIT: *out = n->lit; break;
    case KILN_JN_NAME: st = lookup(c, n->s, n->sn, out); break;
    case KILN_JN_LIST:
    case KILN_JN_TUPLE:
        if ((st = kiln_jv_list_new(c, (size_t)n->n_items, out))) break;
        for (int i = 0; i < n->n_items && !st; i++) st = eval(c, n->items[i], &out->u.l->items[i]);
        out->flags = n->kind == KILN_JN_TUPLE ? KILN_JV_TUPLE : 0;
        break;
    case KILN_JN_DICT:
        if ((st = kiln_jv_dict_new(c, (size_t)n->n_items, out))) break;
        for (int i = 0; i < n->n_items && !st; i++) {
            kiln_jv k, v;
            if ((st = eval(c, n->items[i], &k)) || (st = eval(c, n->items2[i], &v))) break;
            st = kiln_jv_dict_set(c, out->u.d, k, v);
        }
        break;
    case KILN_JN_ATTR: {
        kiln_jv o;
        if ((st = eval(c, n->a, &o))) break;
        c->line = n->line;
        st = kiln_jv_getattr(c, &o, n->s, n->sn, out);
        break;
    }
    case KILN_JN_ITEM: {
        kiln_jv o, k;
        if ((st = eval(c, n->a, &o)) || (st = eval(c, n->b, &k))) break;
        c->line = n->line;
        st = kiln_jv_getitem(c, &o, &k, out);
        break;
    }
    case KILN_JN_SLICE: {
        kiln_jv o, p[3];
        if ((st = eval(c, n->a, &o))) break;
        for (int i = 0; i < 3 && !st; i++) {
            if (n->items[i]) st = eval(c, n->items[i], &p[i]);
            else p[i] = kiln_jv_none();
        }
        if (st) break;
        c->line = n->line;
        st = slice(c, &o, &p[0], &p[1], &p[2], n->a->kind == KILN_JN_LIT, out);
        break;
    }
    case KILN_JN_CALL: {
        kiln_jv fn;
        argbuf ab;
        if ((st = eval(c, n->a, &fn)) || (st = eval_args(c, n, NULL, &ab))) break;
        c->line = n->line;
        if (fn.type == KILN_JV_MACRO) st = kiln_jcall_macro(c, fn.u.macro, &ab.a, out);
        else if (fn.type == KILN_JV_UNDEF) st = kiln_jv_undef_err(c, &fn);
        else st = kiln_jcall(c, &fn, &ab.a, out);
        break;
    }
    case KILN_JN_FILTER: {
        kiln_jv v;
        argbuf ab;
        if ((st = eval(c, n->a, &v)) || (st = eval_args(c, n, NULL, &ab))) break;
        c->line = n->line;
        st = kiln_jfilter(c, n->s, n->sn, &v, &ab.a, out);
        break;
    }
    case KILN_JN_TEST: {
        kiln_jv v;
        argbuf ab;
        bool r;
        if ((st = eval(c, n->a, &v)) || (st = eval_args(c, n, NULL, &ab))) break;
        c->line = n->line;
        if ((st = kiln_jtest(c, n->s, n->sn, &v, &ab.a, &r))) break;
        *out = kiln_jv_bool(n->flag ? !r : r);
        break;
    }
    case KILN_JN_NEG:
    case KILN_JN_POS: {
        kiln_jv v;
        if ((st = eval(c, n->a, &v))) break;
        c->line = n->line;
        if (v.type == KILN_JV_UNDEF) {
            st = kiln_jv_undef_err(c, &v);
        } else if (v.type == KILN_JV_FLOAT) {
            *out = kiln_jv_float(n->kind == KILN_JN_NEG ? -v.u.f : v.u.f);
        } else if (v.type == KILN_JV_INT || v.type == KILN_JV_BOOL) {
            int64_t x = num_i(&v);
            if (n->kind == KILN_JN_NEG && x == INT64_MIN) st = kiln_jerr(c, "integer overflow");
            else *out = kiln_jv_int(n->kind == KILN_JN_NEG ? -x : x);
        } else {
            st = kiln_jerr(c, "bad operand type for unary %s: '%s'", n->kind == KILN_JN_NEG ? "-" : "+",
                           kiln_jv_type_name(&v));
        }
        break;
    }
    case KILN_JN_NOT: {
        kiln_jv v;
        if ((st = eval(c, n->a, &v))) break;
        *out = kiln_jv_bool(!kiln_jv_truthy(&v));
        break;
    }
    case KILN_JN_AND:
    case KILN_JN_OR: {
        kiln_jv v;
        if ((st = eval(c, n->a, &v))) break;
        bool t = kiln_jv_truthy(&v);
        if ((n->kind == KILN_JN_AND) != t) *out = v;
        else st = eval(c, n->b, out);
        break;
    }
    case KILN_JN_COND: {
        kiln_jv cond;
        if ((st = eval(c, n->b, &cond))) break;
        if (kiln_jv_truthy(&cond)) st = eval(c, n->a, out);
        else if (n->c) st = eval(c, n->c, out);
        else *out = kiln_jv_undef(NULL, 0, 0);
        break;
    }
    case KILN_JN_BINARY: {
        kiln_jv a, b;
        if ((st = eval(c, n->a, &a)) || (st = eval(c, n->b, &b))) break;
        c->line = n->line;
        st = kiln_jbinop(c, n->op, &a, &b, out);
        break;
    }
    case KILN_JN_COMPARE: {
        kiln_jv left, right;
        if ((st = eval(c, n->a, &left))) break;
        bool r = true;
        for (int i = 0; i < n->n_items && r; i++) {
            if ((st = eval(c, n->items[i], &right))) break;
            c->line = n->line;
            if ((st = compare(c, n->ops[i], &left, &right, &r))) break;
            left = right;
        }
        if (!st) *out = kiln_jv_bool(r);
        break;
    }
    case KILN_JN_CONCAT: {
        kiln_buf b = {0};
        for (int i = 0; i < n->n_items && !st; i++) {
            kiln_jv v;
            if ((st = eval(c, n->items[i], &v))) break;
            st = kiln_jv_to_str(c, &v, &b);
            if (!st && b.len > KILN_CHAT_MAX_OUTPUT) st = out_limit(c);
        }
        if (!st) st = kiln_jv_str_copy(c, b.data ? b.data : "", b.len, out);
        kiln_buf_free(&b);
        break;
    }
    default: st = kiln_jerr(c, "internal: node kind %d is not an expression", n->kind);
    }
    c->depth--;
    return st;
}

/* ------------------------------------------------------------- statements */

static kiln_status iteration(kiln_jctx *c) {
    if (++c->iterations > KILN_CHAT_MAX_ITERATIONS)
        return KILN_FAIL(KILN_ERR_LIMIT, "chat template %s line %d: more than %d loop iterations", c->name, c->line,
                         KILN_CHAT_MAX_ITERATIONS);
    return KILN_OK;
}

static kiln_status bind_targets(kiln_jctx *c, kiln_jframe *f, const kiln_jnode *n, const kiln_jv *v) {
    if (n->n_names == 1) return frame_set(c, f, n->names[0], n->name_lens[0], *v);
    kiln_jlist *items;
    kiln_status st;
    if (v->type == KILN_JV_UNDEF) return kiln_jv_undef_err(c, v);
    if ((st = kiln_jv_iter(c, v, &items))) return st;
    if (items->n != (size_t)n->n_names)
        return kiln_jerr(c, "%s values to unpack (expected %d, got %zu)",
                         items->n > (size_t)n->n_names ? "too many" : "not enough", n->n_names, items->n);
    for (int i = 0; i < n->n_names; i++)
        if ((st = frame_set(c, f, n->names[i], n->name_lens[i], items->items[i]))) return st;
    return KILN_OK;
}

/* Render a frame body (block set, filter block) to a string in a child frame. */
static kiln_status render_body(kiln_jctx *c, const kiln_jnode *body, kiln_jv *out) {
    kiln_buf b = {0};
    kiln_jframe f = {c->frame, NULL, 0, 0}, *saved = c->frame;
    c->frame = &f;
    kiln_status st = bind_missing(c, &f, body);
    if (!st) st = exec(c, body, &b);
    c->frame = saved;
    if (!st) st = kiln_jv_str_copy(c, b.data ? b.data : "", b.len, out);
    kiln_buf_free(&b);
    return st;
}

static int loop_depth_of(kiln_jctx *c) {
    int d = 0;
    for (kiln_jframe *f = c->frame; f; f = f->parent) {
        kiln_jv *v = NULL;
        for (int i = 0; i < f->n; i++)
            if (f->vars[i].len == 4 && !memcmp(f->vars[i].name, "loop", 4)) v = &f->vars[i].value;
        if (v && v->type == KILN_JV_LOOP) return v->u.loop->depth0 + 1;
    }
    return d;
}

static kiln_status exec_for(kiln_jctx *c, const kiln_jnode *n, kiln_buf *out) {
    kiln_status st;
    kiln_jv it;
    kiln_jlist *items;
    if ((st = eval(c, n->a, &it))) return st;
    c->line = n->line;
    if ((st = kiln_jv_iter(c, &it, &items))) return st;
    if (n->b) { /* "for x in xs if cond": filter first, so loop.length counts what remains */
        kiln_jv keep;
        if ((st = kiln_jv_list_new(c, items->n, &keep))) return st;
        size_t k = 0;
        kiln_jframe *saved = c->frame;
        for (size_t i = 0; i < items->n; i++) {
            if ((st = iteration(c))) return st;
            kiln_jframe f = {saved, NULL, 0, 0};
            c->frame = &f;
            kiln_jv cond;
            st = bind_targets(c, &f, n, &items->items[i]);
            if (!st) st = eval(c, n->b, &cond);
            c->frame = saved;
            if (st) return st;
            if (kiln_jv_truthy(&cond)) keep.u.l->items[k++] = items->items[i];
        }
        keep.u.l->n = k;
        items = keep.u.l;
    }
    int depth0 = 0; /* loop.depth counts recursive-loop levels only */
    kiln_jframe *saved = c->frame;
    /* Jinja runs the else block unless some iteration reached the end of
     * the body (so also after a break in the first iteration, or when every
     * iteration continued) */
    bool completed = false;
    for (size_t i = 0; i < items->n; i++) {
        if ((st = iteration(c))) return st;
        kiln_jframe f = {saved, NULL, 0, 0};
        kiln_jloop *lp = kiln_ja_alloc(c->a, sizeof *lp);
        if (!lp) return KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory");
        *lp = (kiln_jloop){items, i, depth0};
        kiln_jv lv = kiln_jv_none();
        lv.type = KILN_JV_LOOP;
        lv.u.loop = lp;
        c->frame = &f;
        st = bind_missing(c, &f, n->c);
        if (!st) st = frame_set(c, &f, "loop", 4, lv);
        if (!st) st = bind_targets(c, &f, n, &items->items[i]);
        if (!st) st = exec(c, n->c, out);
        c->frame = saved;
        if (st) return st;
        if (c->loop_ctl == 1) {
            c->loop_ctl = 0;
            break;
        }
        if (!c->loop_ctl) completed = true;
        c->loop_ctl = 0;
    }
    if (!completed && n->d) {
        kiln_jframe f = {saved, NULL, 0, 0};
        c->frame = &f;
        st = bind_missing(c, &f, n->d);
        if (!st) st = exec(c, n->d, out);
        c->frame = saved;
        return st;
    }
    return KILN_OK;
}

static kiln_status exec(kiln_jctx *c, const kiln_jnode *n, kiln_buf *out) {
    kiln_status st = KILN_OK;
    if (++c->depth > KILN_CHAT_MAX_DEPTH)
        return KILN_FAIL(KILN_ERR_LIMIT, "chat template %s line %d: nesting deeper than %d", c->name, n->line,
                         KILN_CHAT_MAX_DEPTH);
    c->line = n->line;
    switch (n->kind) {
    case KILN_JN_BODY:
        for (int i = 0; i < n->n_items && !st && !c->loop_ctl; i++) st = exec(c, n->items[i], out);
        break;
    case KILN_JN_TEXT: st = emit(c, out, n->s, n->sn); break;
    case KILN_JN_OUTPUT: {
        kiln_jv v;
        if ((st = eval(c, n->a, &v))) break;
        if (v.type == KILN_JV_STR) {
            st = emit(c, out, v.u.s, v.n);
        } else {
            size_t before = out->len;
            st = kiln_jv_to_str(c, &v, out);
            if (!st && out->len > KILN_CHAT_MAX_OUTPUT) {
                out->len = before;
                st = out_limit(c);
            }
        }
        break;
    }
    case KILN_JN_IF: {
        kiln_jv cond;
        if ((st = eval(c, n->a, &cond))) break;
        if (kiln_jv_truthy(&cond)) st = exec(c, n->b, out);
        else if (n->c) st = exec(c, n->c, out);
        break;
    }
    case KILN_JN_FOR: st = exec_for(c, n, out); break;
    case KILN_JN_SET: {
        kiln_jv v;
        if ((st = eval(c, n->a, &v))) break;
        c->line = n->line;
        st = bind_targets(c, c->frame, n, &v);
        break;
    }
    case KILN_JN_SET_ATTR: {
        kiln_jv ns, v;
        if ((st = lookup(c, n->s, n->sn, &ns))) break;
        if (ns.type != KILN_JV_NS) {
            st = kiln_jerr(c, "cannot assign attribute on non-namespace object '%.*s'", (int)n->sn, n->s);
            break;
        }
        if (n->name_lens[0] && n->names[0][0] == '_') {
            st = kiln_jerr(c, "cannot store underscore-prefixed attribute '%.*s' on a namespace",
                           (int)n->name_lens[0], n->names[0]);
            break;
        }
        if ((st = eval(c, n->a, &v))) break;
        st = kiln_jv_dict_set(c, ns.u.d, kiln_jv_strv(n->names[0], n->name_lens[0]), v);
        break;
    }
    case KILN_JN_SET_BLOCK: {
        kiln_jv v;
        if ((st = render_body(c, n->c, &v))) break;
        if (n->b && (st = apply_chain(c, n->b, v, &v))) break;
        st = frame_set(c, c->frame, n->names[0], n->name_lens[0], v);
        break;
    }
    case KILN_JN_MACRO: {
        /* the macro sees the names visible here: the template's top-level
         * frame by reference, inner frames (loops) as they are now */
        kiln_jmacro *mc = kiln_ja_alloc(c->a, sizeof *mc);
        if (!mc) {
            st = KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory");
            break;
        }
        mc->node = n;
        mc->closure = c->root;
        if (c->frame != c->root) {
            kiln_jframe *snap = kiln_ja_alloc(c->a, sizeof *snap);
            if (!snap) {
                st = KILN_FAIL(KILN_ERR_LIMIT, "chat template: out of render memory");
                break;
            }
            *snap = (kiln_jframe){c->root, NULL, 0, 0};
            /* innermost binding wins: copy outer frames first */
            kiln_jframe *chain[KILN_CHAT_MAX_DEPTH + 1];
            int nc = 0;
            for (kiln_jframe *f = c->frame; f && f != c->root && nc < KILN_CHAT_MAX_DEPTH; f = f->parent) chain[nc++] = f;
            for (int k = nc - 1; k >= 0 && !st; k--)
                for (int i = 0; i < chain[k]->n && !st; i++)
                    st = frame_set(c, snap, chain[k]->vars[i].name, chain[k]->vars[i].len, chain[k]->vars[i].value);
            mc->closure = snap;
        }
        kiln_jv m = kiln_jv_none();
        m.type = KILN_JV_MACRO;
        m.u.macro = mc;
        if (!st) st = frame_set(c, c->frame, n->s, n->sn, m);
        break;
    }
    case KILN_JN_FILTER_BLOCK: {
        kiln_jv v;
        if ((st = render_body(c, n->c, &v)) || (st = apply_chain(c, n->b, v, &v))) break;
        if (v.type != KILN_JV_STR && (st = kiln_jv_as_str(c, &v, &v))) break;
        st = emit(c, out, v.u.s, v.n);
        break;
    }
    case KILN_JN_BREAK:
    case KILN_JN_CONTINUE:
        if (!loop_depth_of(c)) {
            st = kiln_jerr(c, "'%s' outside of a loop", n->kind == KILN_JN_BREAK ? "break" : "continue");
            break;
        }
        c->loop_ctl = n->kind == KILN_JN_BREAK ? 1 : 2;
        break;
    default: st = kiln_jerr(c, "internal: node kind %d is not a statement", n->kind);
    }
    c->depth--;
    return st;
}

kiln_status kiln_jcall_macro(kiln_jctx *c, const kiln_jmacro *mc, const kiln_jargs *a, kiln_jv *out) {
    kiln_status st = KILN_OK;
    const kiln_jnode *m = mc->node;
    kiln_jframe f = {mc->closure, NULL, 0, 0};
    kiln_jframe *saved = c->frame;
    int saved_ctl = c->loop_ctl;
    c->frame = &f;
    c->loop_ctl = 0;
    kiln_jv varargs, kwargs;
    int extra = a->n_args > m->n_names ? a->n_args - m->n_names : 0;
    KILN_TRY(bind_missing(c, &f, m->c));
    KILN_TRY(kiln_jv_list_new(c, (size_t)extra, &varargs));
    varargs.flags = KILN_JV_TUPLE;
    KILN_TRY(kiln_jv_dict_new(c, 0, &kwargs));
    for (int i = 0; i < extra; i++) varargs.u.l->items[i] = a->args[m->n_names + i];
    for (int k = 0; k < a->n_kw; k++) {
        bool known = false;
        for (int i = 0; i < m->n_names; i++)
            if (m->name_lens[i] == a->kw_lens[k] && !memcmp(m->names[i], a->kw_names[k], a->kw_lens[k])) {
                known = true;
                if (i < a->n_args) {
                    st = kiln_jerr(c, "macro '%.*s' got multiple values for argument '%.*s'", (int)m->sn, m->s,
                                   (int)a->kw_lens[k], a->kw_names[k]);
                    goto fail;
                }
            }
        if (!known) KILN_TRY(kiln_jv_dict_set(c, kwargs.u.d, kiln_jv_strv(a->kw_names[k], a->kw_lens[k]), a->kw_vals[k]));
    }
    for (int i = 0; i < m->n_names; i++) {
        kiln_jv v;
        bool have = false;
        if (i < a->n_args) {
            v = a->args[i];
            have = true;
        }
        for (int k = 0; k < a->n_kw && !have; k++)
            if (m->name_lens[i] == a->kw_lens[k] && !memcmp(m->names[i], a->kw_names[k], a->kw_lens[k])) {
                v = a->kw_vals[k];
                have = true;
            }
        if (!have) {
            if (m->items[i]) KILN_TRY(eval(c, m->items[i], &v));
            else v = kiln_jv_undef(m->names[i], m->name_lens[i], 0);
        }
        KILN_TRY(frame_set(c, &f, m->names[i], m->name_lens[i], v));
    }
    KILN_TRY(frame_set(c, &f, "varargs", 7, varargs));
    KILN_TRY(frame_set(c, &f, "kwargs", 6, kwargs));
    {
        kiln_buf b = {0};
        st = exec(c, m->c, &b);
        if (!st) st = kiln_jv_str_copy(c, b.data ? b.data : "", b.len, out);
        kiln_buf_free(&b);
    }
fail:
    c->frame = saved;
    c->loop_ctl = saved_ctl;
    return st;
}

kiln_status kiln_jinja_render(const kiln_jnode *root, const char *name, const kiln_jvar *vars, int n_vars,
                              kiln_jarena *arena, kiln_buf *out) {
    kiln_jctx c;
    memset(&c, 0, sizeof c);
    kiln_jframe top = {NULL, NULL, 0, 0};
    c.a = arena;
    c.name = name;
    c.vars = vars;
    c.n_vars = n_vars;
    c.root = c.frame = &top;
    kiln_status st = bind_missing(&c, &top, root);
    if (!st) st = exec(&c, root, out);
    kiln_jctx_fini(&c);
    return st;
}
