/*
 * jinja_scope.c -- static scope analysis of a parsed template, following
 * jinja2/idtracking.py, so that variable visibility matches Jinja exactly.
 *
 * Jinja compiles each frame (the template, a loop body, a macro, a block
 * set, a filter block) to Python locals. A name whose first occurrence in a
 * frame's own statements (if-branches included, nested frames excluded) is
 * an assignment at the frame's top level, and that no enclosing frame
 * refers to, starts out undefined in that frame: it hides a render variable
 * of the same name, also from nested loops and macros, until assigned. Every
 * other name resolves through the enclosing frames and then the render
 * variables, which the evaluator does dynamically. This pass records the
 * first kind of names on each frame body (kiln_jnode.fnames); the evaluator
 * binds them as undefined when it enters the frame.
 *
 * Ownership: scratch tables are freed before returning; results live in the
 * template arena. Thread-safety: runs once at template load.
 */
#include "chat.h"

#include <stdlib.h>

enum { REF_PARAM = 1, REF_RESOLVE, REF_ALIAS, REF_UNDEF };

typedef struct sym {
    const char *name;
    uint32_t len;
    uint8_t mode;
} sym;

typedef struct scope {
    const struct scope *parent;
    sym *v;
    int n, cap;
} scope;

/* frames found while visiting a frame, analyzed after it */
typedef struct pending {
    const kiln_jnode **v;
    int n, cap;
} pending;

static int local_find(const scope *s, const char *name, uint32_t len) {
    for (int i = 0; i < s->n; i++)
        if (s->v[i].len == len && !memcmp(s->v[i].name, name, len)) return i;
    return -1;
}

static bool find_ref(const scope *s, const char *name, uint32_t len) {
    for (; s; s = s->parent)
        if (local_find(s, name, len) >= 0) return true;
    return false;
}

static kiln_status define(scope *s, const char *name, uint32_t len, int mode) {
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        sym *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template analysis)");
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (sym){name, len, (uint8_t)mode};
    return KILN_OK;
}

static kiln_status load(scope *s, const char *name, uint32_t len) {
    return find_ref(s, name, len) ? KILN_OK : define(s, name, len, REF_RESOLVE);
}

static kiln_status store(scope *s, const char *name, uint32_t len) {
    if (local_find(s, name, len) >= 0) return KILN_OK;
    return define(s, name, len, s->parent && find_ref(s->parent, name, len) ? REF_ALIAS : REF_UNDEF);
}

static kiln_status pend(pending *p, const kiln_jnode *n) {
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 8;
        const kiln_jnode **v = realloc(p->v, (size_t)cap * sizeof *v);
        if (!v) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template analysis)");
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = n;
    return KILN_OK;
}

static kiln_status visit_expr(scope *s, const kiln_jnode *e, int depth) {
    kiln_status st;
    if (!e || depth > 4 * KILN_CHAT_MAX_DEPTH) return KILN_OK;
    if (e->kind == KILN_JN_NAME) return load(s, e->s, e->sn);
    const kiln_jnode *kids[4] = {e->a, e->b, e->c, e->d};
    for (int i = 0; i < 4; i++)
        if ((st = visit_expr(s, kids[i], depth + 1))) return st;
    for (int i = 0; i < e->n_items; i++)
        if ((st = visit_expr(s, e->items[i], depth + 1))) return st;
    for (int i = 0; i < e->n_items2; i++)
        if ((st = visit_expr(s, e->items2[i], depth + 1))) return st;
    return KILN_OK;
}

static kiln_status visit_stmt(scope *s, const kiln_jnode *n, pending *p, int depth);

/* An if-branch is visited on a copy; names it introduces become RESOLVE or
 * ALIAS in the frame (Jinja's branch_update: never undefined). */
static kiln_status visit_branch(scope *s, const kiln_jnode *n, pending *p, int depth) {
    kiln_status st = KILN_OK;
    if (!n) return KILN_OK;
    scope copy = {s->parent, NULL, 0, 0};
    for (int i = 0; i < s->n && !st; i++) st = define(&copy, s->v[i].name, s->v[i].len, s->v[i].mode);
    if (!st) st = visit_stmt(&copy, n, p, depth + 1);
    for (int i = s->n; i < copy.n && !st; i++) {
        if (local_find(s, copy.v[i].name, copy.v[i].len) >= 0) continue;
        bool outer = s->parent && find_ref(s->parent, copy.v[i].name, copy.v[i].len);
        st = define(s, copy.v[i].name, copy.v[i].len, outer ? REF_ALIAS : REF_RESOLVE);
    }
    free(copy.v);
    return st;
}

static kiln_status visit_stmt(scope *s, const kiln_jnode *n, pending *p, int depth) {
    kiln_status st = KILN_OK;
    if (!n || depth > 4 * KILN_CHAT_MAX_DEPTH) return KILN_OK;
    switch (n->kind) {
    case KILN_JN_BODY:
        for (int i = 0; i < n->n_items && !st; i++) st = visit_stmt(s, n->items[i], p, depth + 1);
        return st;
    case KILN_JN_OUTPUT: return visit_expr(s, n->a, 0);
    case KILN_JN_IF:
        if ((st = visit_expr(s, n->a, 0))) return st;
        if ((st = visit_branch(s, n->b, p, depth))) return st;
        return visit_branch(s, n->c, p, depth);
    case KILN_JN_FOR:
        if ((st = visit_expr(s, n->a, 0))) return st;
        return pend(p, n);
    case KILN_JN_SET:
        if ((st = visit_expr(s, n->a, 0))) return st;
        for (int i = 0; i < n->n_names && !st; i++) st = store(s, n->names[i], n->name_lens[i]);
        return st;
    case KILN_JN_SET_ATTR:
        if ((st = visit_expr(s, n->a, 0))) return st;
        return load(s, n->s, n->sn);
    case KILN_JN_SET_BLOCK:
        if ((st = store(s, n->names[0], n->name_lens[0]))) return st;
        return pend(p, n);
    case KILN_JN_MACRO:
        if ((st = store(s, n->s, n->sn))) return st;
        return pend(p, n);
    case KILN_JN_FILTER_BLOCK:
        if ((st = visit_expr(s, n->b, 0))) return st;
        return pend(p, n);
    default: return KILN_OK;
    }
}

static kiln_status analyze_frame(kiln_jnode *body, const scope *parent, const char *const *params,
                                 const uint32_t *plens, int n_params, kiln_jarena *arena, int depth);

static kiln_status analyze_pending(const kiln_jnode *n, const scope *s, kiln_jarena *arena, int depth) {
    kiln_status st = KILN_OK;
    switch (n->kind) {
    case KILN_JN_FOR: {
        int np = n->n_names + 1;
        const char **names = malloc((size_t)np * sizeof *names);
        uint32_t *lens = malloc((size_t)np * sizeof *lens);
        if (!names || !lens) {
            free(names);
            free(lens);
            return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template analysis)");
        }
        for (int i = 0; i < n->n_names; i++) names[i] = n->names[i], lens[i] = n->name_lens[i];
        names[np - 1] = "loop";
        lens[np - 1] = 4;
        st = analyze_frame(n->c, s, names, lens, np, arena, depth + 1);
        free(names);
        free(lens);
        if (!st && n->d) st = analyze_frame(n->d, s, NULL, NULL, 0, arena, depth + 1);
        return st;
    }
    case KILN_JN_MACRO: {
        int np = n->n_names + 3;
        const char **names = malloc((size_t)np * sizeof *names);
        uint32_t *lens = malloc((size_t)np * sizeof *lens);
        if (!names || !lens) {
            free(names);
            free(lens);
            return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template analysis)");
        }
        for (int i = 0; i < n->n_names; i++) names[i] = n->names[i], lens[i] = n->name_lens[i];
        names[np - 3] = "varargs", lens[np - 3] = 7;
        names[np - 2] = "kwargs", lens[np - 2] = 6;
        names[np - 1] = "caller", lens[np - 1] = 6;
        st = analyze_frame(n->c, s, names, lens, np, arena, depth + 1);
        free(names);
        free(lens);
        return st;
    }
    case KILN_JN_SET_BLOCK:
    case KILN_JN_FILTER_BLOCK: return analyze_frame(n->c, s, NULL, NULL, 0, arena, depth + 1);
    default: return KILN_OK;
    }
}

static kiln_status analyze_frame(kiln_jnode *body, const scope *parent, const char *const *params,
                                 const uint32_t *plens, int n_params, kiln_jarena *arena, int depth) {
    kiln_status st = KILN_OK;
    scope s = {parent, NULL, 0, 0};
    pending p = {NULL, 0, 0};
    if (!body || depth > 4 * KILN_CHAT_MAX_DEPTH) return KILN_OK;
    for (int i = 0; i < n_params && !st; i++) st = define(&s, params[i], plens[i], REF_PARAM);
    if (!st) st = visit_stmt(&s, body, &p, 0);
    int k = 0;
    for (int i = 0; i < s.n; i++) k += s.v[i].mode == REF_UNDEF;
    if (!st && k) {
        body->fnames = kiln_ja_alloc(arena, (size_t)k * sizeof *body->fnames);
        body->fname_lens = kiln_ja_alloc(arena, (size_t)k * sizeof *body->fname_lens);
        if (!body->fnames || !body->fname_lens) {
            st = KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (template analysis)");
        } else {
            for (int i = 0; i < s.n; i++)
                if (s.v[i].mode == REF_UNDEF) {
                    body->fnames[body->n_fnames] = s.v[i].name;
                    body->fname_lens[body->n_fnames++] = s.v[i].len;
                }
        }
    }
    for (int i = 0; i < p.n && !st; i++) st = analyze_pending(p.v[i], &s, arena, depth);
    free(p.v);
    free(s.v);
    return st;
}

kiln_status kiln_jinja_scopes(kiln_jnode *root, kiln_jarena *arena) {
    return analyze_frame(root, NULL, NULL, NULL, 0, arena, 0);
}
