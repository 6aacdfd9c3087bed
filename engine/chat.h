/*
 * chat.h -- chat templates: a sandboxed interpreter for the Jinja2 subset
 * that Hugging Face chat templates use, rendering exactly as transformers
 * does (Jinja2 with trim_blocks, lstrip_blocks, the loopcontrols extension,
 * no autoescape, keep_trailing_newline off; transformers' globals
 * raise_exception, strftime_now, namespace, dict and its tojson filter).
 *
 * Pipeline: source -> lexer (whitespace control) -> parser (AST, errors name
 * the template line) -> evaluator over values held in a per-render arena.
 * Unsupported constructs (extends, include, import, call blocks, ...) are
 * errors naming the line, never silently skipped.
 *
 * Sandbox: lists and dicts are immutable (as in Jinja's immutable sandbox;
 * only namespace attributes can be assigned), there is no access to host
 * objects, and every render is bounded: output size, loop iterations,
 * call depth and arena memory (KILN_CHAT_* limits below). A template error,
 * including raise_exception's message, is KILN_ERR_TEMPLATE; exceeding a
 * limit is KILN_ERR_LIMIT.
 *
 * Ownership: a kiln_chat_template owns its source copy, AST arena and
 * default variables. Rendering allocates only in a per-call arena.
 * Thread-safety: a loaded template is immutable; any number of threads may
 * render with it at once.
 */
#ifndef KILN_CHAT_H
#define KILN_CHAT_H

#include "kiln_base.h"

#define KILN_CHAT_MAX_OUTPUT (32u << 20)    /* bytes of rendered text        */
#define KILN_CHAT_MAX_ITERATIONS 1000000    /* loop iterations per render     */
#define KILN_CHAT_MAX_DEPTH 200             /* nested calls / expressions     */
#define KILN_CHAT_MAX_ARENA (512u << 20)    /* bytes of values per render     */
#define KILN_CHAT_MAX_SOURCE (4u << 20)     /* bytes of template source       */

/* ------------------------------------------------------------------ arena */

typedef struct kiln_jchunk kiln_jchunk;
typedef struct kiln_jarena {
    kiln_jchunk *head;
    size_t total, limit;
} kiln_jarena;

/* 16-byte aligned; NULL when the limit is reached or memory runs out. */
void *kiln_ja_alloc(kiln_jarena *a, size_t n);
void kiln_ja_free(kiln_jarena *a);

/* ----------------------------------------------------------------- values */

typedef enum kiln_jv_type {
    KILN_JV_UNDEF = 0, /* s/n: the name that was undefined (may be NULL)   */
    KILN_JV_NONE,
    KILN_JV_BOOL,
    KILN_JV_INT,
    KILN_JV_FLOAT,
    KILN_JV_STR,
    KILN_JV_LIST,      /* flags & KILN_JV_TUPLE: prints as a tuple          */
    KILN_JV_DICT,
    KILN_JV_NS,        /* namespace(): a dict whose attributes can be set  */
    KILN_JV_FUNC,      /* a global function (range, namespace, ...)        */
    KILN_JV_MACRO,
    KILN_JV_LOOP,
    KILN_JV_METHOD,    /* a bound method: "abc".upper                      */
} kiln_jv_type;

#define KILN_JV_TUPLE 1
#define KILN_JV_ITEMS 2 /* dict.items() view: prints as dict_items([...])   */
#define KILN_JV_GEN 4   /* a generator (map, select, ...): always true, no len */

typedef struct kiln_jlist kiln_jlist;
typedef struct kiln_jdict kiln_jdict;
typedef struct kiln_jloop kiln_jloop;
typedef struct kiln_jmethod kiln_jmethod;
typedef struct kiln_jnode kiln_jnode;
typedef struct kiln_jmacro kiln_jmacro;

typedef struct kiln_jv {
    uint8_t type;
    uint8_t flags;
    uint32_t n; /* string length */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s;
        kiln_jlist *l;
        kiln_jdict *d;
        int fn;
        const kiln_jmacro *macro;
        kiln_jloop *loop;
        kiln_jmethod *m;
    } u;
} kiln_jv;

struct kiln_jlist {
    size_t n;
    kiln_jv *items;
    const char *err; /* a generator over a non-iterable: error when iterated */
};

struct kiln_jdict {
    size_t n, cap;
    kiln_jv *keys, *vals;
};

struct kiln_jmethod {
    kiln_jv self;
    const char *name;
    uint32_t name_len;
};

struct kiln_jmacro {
    const kiln_jnode *node;        /* the MACRO statement                     */
    struct kiln_jframe *closure;   /* names visible where it was defined      */
};

struct kiln_jloop {
    kiln_jlist *items;
    size_t index0;
    int depth0;
};

/* ------------------------------------------------------------------- AST */

typedef enum kiln_jnode_kind {
    /* statements */
    KILN_JN_BODY = 1, KILN_JN_TEXT, KILN_JN_OUTPUT, KILN_JN_IF, KILN_JN_FOR, KILN_JN_SET, KILN_JN_SET_ATTR,
    KILN_JN_SET_BLOCK, KILN_JN_MACRO, KILN_JN_FILTER_BLOCK, KILN_JN_BREAK, KILN_JN_CONTINUE,
    /* expressions */
    KILN_JN_LIT, KILN_JN_NAME, KILN_JN_LIST, KILN_JN_TUPLE, KILN_JN_DICT, KILN_JN_ATTR, KILN_JN_ITEM,
    KILN_JN_SLICE, KILN_JN_CALL, KILN_JN_FILTER, KILN_JN_TEST, KILN_JN_NEG, KILN_JN_POS, KILN_JN_NOT,
    KILN_JN_BINARY, KILN_JN_AND, KILN_JN_OR, KILN_JN_COND, KILN_JN_COMPARE, KILN_JN_CONCAT,
} kiln_jnode_kind;

/* binary / comparison operators */
enum {
    KILN_JOP_ADD = 1, KILN_JOP_SUB, KILN_JOP_MUL, KILN_JOP_DIV, KILN_JOP_FLOORDIV, KILN_JOP_MOD, KILN_JOP_POW,
    KILN_JOP_EQ, KILN_JOP_NE, KILN_JOP_LT, KILN_JOP_LE, KILN_JOP_GT, KILN_JOP_GE, KILN_JOP_IN, KILN_JOP_NOTIN,
};

/*
 * One node. Field use by kind:
 *   BODY: items = statements.            TEXT: s/sn.    OUTPUT: a.
 *   IF: a = condition, b = then BODY, c = else (BODY or IF for elif).
 *   FOR: names = targets, a = iterable, b = filter or NULL, c = body,
 *        d = else body or NULL, flag = recursive.
 *   SET: names = targets, a = value.     SET_ATTR: s = object name, names[0] = attribute, a = value.
 *   SET_BLOCK: names[0] = target, c = body, b = filter chain (FILTER with a = NULL) or NULL.
 *   MACRO: s = name, names = parameters, items = defaults (NULL entries), c = body.
 *   FILTER_BLOCK: b = filter chain, c = body.
 *   LIT: lit. NAME: s. LIST/TUPLE: items. DICT: items = keys, items2 = values.
 *   ATTR: a, s. ITEM: a, b. SLICE: a, items[0..2] = start, stop, step (NULL ok).
 *   CALL: a = callee, items = args, names/items2 = keyword args.
 *   FILTER: a = operand (NULL inside a chain head), s = name, items/names/items2 = args.
 *   TEST: a, s = name, items = args, flag = negated.
 *   NEG/POS/NOT: a. BINARY: op, a, b. AND/OR: a, b. COND: a = value, b = condition, c = else or NULL.
 *   COMPARE: a = first, items = operands, ops = operators.  CONCAT: items.
 */
struct kiln_jnode {
    uint8_t kind, op, flag;
    int line;
    /* BODY of a frame (template, loop body, macro, block set, filter
     * block): names the frame assigns before reading them, which Jinja
     * starts out undefined in the frame (they hide render variables) */
    const char **fnames;
    uint32_t *fname_lens;
    int n_fnames;
    kiln_jnode *a, *b, *c, *d;
    kiln_jnode **items, **items2;
    int n_items, n_items2;
    const char **names;
    uint32_t *name_lens;
    int n_names;
    const char *s;
    uint32_t sn;
    uint8_t *ops;
    kiln_jv lit;
};

/* Parse a template (source is copied into the arena). name labels errors. */
kiln_status kiln_jinja_parse(const char *source, size_t len, const char *name, kiln_jarena *arena,
                             kiln_jnode **root);

/* Static scope analysis after parsing (jinja_scope.c): fills the fnames
 * of every frame body, following Jinja's idtracking. */
kiln_status kiln_jinja_scopes(kiln_jnode *root, kiln_jarena *arena);

/* Variables of one render: names and values (the values may live in the
 * render arena). */
typedef struct kiln_jvar {
    const char *name;
    uint32_t len;
    kiln_jv value;
} kiln_jvar;

/* Render root with the given variables, appending to out. */
kiln_status kiln_jinja_render(const kiln_jnode *root, const char *name, const kiln_jvar *vars, int n_vars,
                              kiln_jarena *arena, kiln_buf *out);

/* JSON (a Jansson json_t *, passed as void *) to a value in the arena.
 * drop_null_keys: leave out object members whose value is null. */
kiln_status kiln_jv_from_json(kiln_jarena *a, const void *json, bool drop_null_keys, kiln_jv *out);

/* ------------------------------------------------- evaluator internals */

#define KILN_JV_UNDEF_ATTR 1 /* flags of an undefined from a missing attribute */
#define KILN_JV_UNDEF_HINT 2 /* flags of an undefined whose s/n is its message */

typedef struct kiln_jframe {
    struct kiln_jframe *parent;
    kiln_jvar *vars;
    int n, cap;
} kiln_jframe;

typedef struct kiln_jctx {
    kiln_jarena *a;
    const char *name;
    const kiln_jvar *vars; /* render variables                            */
    int n_vars;
    kiln_jframe *root, *frame;
    size_t iterations;
    int depth;
    int line;              /* line of the node being evaluated           */
    int loop_ctl;          /* 1: break, 2: continue pending              */
    void *locale;          /* locale_t for Unicode case mapping, lazily  */
    bool locale_tried;
} kiln_jctx;

/* KILN_ERR_TEMPLATE "chat template NAME line N: message". */
kiln_status kiln_jerr(kiln_jctx *c, const char *fmt, ...) KILN_PRINTF(2, 3);

static inline kiln_jv kiln_jv_none(void) { kiln_jv v; memset(&v, 0, sizeof v); v.type = KILN_JV_NONE; return v; }
static inline kiln_jv kiln_jv_bool(bool b) { kiln_jv v = kiln_jv_none(); v.type = KILN_JV_BOOL; v.u.b = b; return v; }
static inline kiln_jv kiln_jv_int(int64_t i) { kiln_jv v = kiln_jv_none(); v.type = KILN_JV_INT; v.u.i = i; return v; }
static inline kiln_jv kiln_jv_float(double f) { kiln_jv v = kiln_jv_none(); v.type = KILN_JV_FLOAT; v.u.f = f; return v; }
static inline kiln_jv kiln_jv_strv(const char *s, size_t n) {
    kiln_jv v = kiln_jv_none(); v.type = KILN_JV_STR; v.u.s = s; v.n = (uint32_t)n; return v;
}
static inline kiln_jv kiln_jv_undef(const char *name, size_t n, int flags) {
    kiln_jv v = kiln_jv_none(); v.type = KILN_JV_UNDEF; v.u.s = name; v.n = (uint32_t)n; v.flags = (uint8_t)flags; return v;
}

/* Arena copies and builders. */
kiln_status kiln_jv_str_copy(kiln_jctx *c, const char *s, size_t n, kiln_jv *out);
kiln_status kiln_jv_list_new(kiln_jctx *c, size_t n, kiln_jv *out); /* items zeroed (undefined) */
kiln_status kiln_jv_dict_new(kiln_jctx *c, size_t cap, kiln_jv *out);
kiln_status kiln_jv_dict_set(kiln_jctx *c, kiln_jdict *d, kiln_jv key, kiln_jv val);
/* Lookup by key; NULL when absent. */
kiln_jv *kiln_jv_dict_get(const kiln_jdict *d, kiln_jv key);
kiln_jv *kiln_jv_dict_get_str(const kiln_jdict *d, const char *s, size_t n);

/* Python semantics. */
bool kiln_jv_truthy(const kiln_jv *v);
bool kiln_jv_eq(const kiln_jv *a, const kiln_jv *b);
/* <0, 0, >0; error for unorderable types (Python's TypeError). */
kiln_status kiln_jv_cmp(kiln_jctx *c, const kiln_jv *a, const kiln_jv *b, const char *op, int *res);
const char *kiln_jv_type_name(const kiln_jv *v); /* Python type name: str, int, list, ... */
/* str(v) / repr(v) appended to b. */
kiln_status kiln_jv_to_str(kiln_jctx *c, const kiln_jv *v, kiln_buf *b);
kiln_status kiln_jv_repr(kiln_jctx *c, const kiln_jv *v, kiln_buf *b);
/* str(v) as a value (strings pass through). */
kiln_status kiln_jv_as_str(kiln_jctx *c, const kiln_jv *v, kiln_jv *out);
/* json.dumps(v, ensure_ascii, indent (<0: None), separators, sort_keys). */
kiln_status kiln_jv_to_json(kiln_jctx *c, const kiln_jv *v, kiln_buf *b, bool ensure_ascii, int indent,
                            const char *item_sep, const char *key_sep, bool sort_keys);
/* An error for using an undefined value. */
kiln_status kiln_jv_undef_err(kiln_jctx *c, const kiln_jv *v);
/* The values iterating over v yields (list items, dict keys, string
 * characters, nothing for undefined). */
kiln_status kiln_jv_iter(kiln_jctx *c, const kiln_jv *v, kiln_jlist **out);
/* Code points of a UTF-8 string; sets *ascii when all are ASCII. */
size_t kiln_jstr_len(const char *s, size_t n);
/* Python float repr. */
void kiln_jfloat_repr(double f, char *out, size_t cap);

/* Attribute and item access (Jinja's getattr / getitem). */
kiln_status kiln_jv_getattr(kiln_jctx *c, const kiln_jv *obj, const char *name, size_t n, kiln_jv *out);
kiln_status kiln_jv_getitem(kiln_jctx *c, const kiln_jv *obj, const kiln_jv *key, kiln_jv *out);

/* Builtins (jinja_builtins.c). Arguments: positional args[0..n_args),
 * keywords kw_names/kw_vals[0..n_kw). */
typedef struct kiln_jargs {
    const kiln_jv *args;
    int n_args;
    const char *const *kw_names;
    const uint32_t *kw_lens;
    const kiln_jv *kw_vals;
    int n_kw;
} kiln_jargs;
kiln_status kiln_jfilter(kiln_jctx *c, const char *name, size_t n, const kiln_jv *in, const kiln_jargs *a,
                         kiln_jv *out);
kiln_status kiln_jtest(kiln_jctx *c, const char *name, size_t n, const kiln_jv *in, const kiln_jargs *a,
                       bool *out);
kiln_status kiln_jcall(kiln_jctx *c, const kiln_jv *fn, const kiln_jargs *a, kiln_jv *out);
/* A global function by name (range, namespace, dict, raise_exception,
 * strftime_now), or false. */
bool kiln_jglobal(const char *name, size_t n, kiln_jv *out);
/* "fmt" % args (printf-style formatting of str % value). */
kiln_status kiln_jpercent_format(kiln_jctx *c, const kiln_jv *fmt, const kiln_jv *args, kiln_jv *out);
/* Release per-render resources held by the context (the locale). */
void kiln_jctx_fini(kiln_jctx *c);
/* Macro calls are evaluated by jinja_eval.c. */
kiln_status kiln_jcall_macro(kiln_jctx *c, const kiln_jmacro *macro, const kiln_jargs *a, kiln_jv *out);
/* Binary operators with Python semantics (KILN_JOP_ADD ... KILN_JOP_POW). */
kiln_status kiln_jbinop(kiln_jctx *c, int op, const kiln_jv *a, const kiln_jv *b, kiln_jv *out);

/* --------------------------------------------------------- chat templates */

struct kiln_chat_template {
    char *name;      /* where it came from, for errors                      */
    char *source;
    kiln_jarena ast_arena;
    kiln_jnode *root;
    void *defaults;  /* json_t * object: bos_token, eos_token, ... (owned)  */
};

/* Replace the template's default variables (bos_token, eos_token,
 * unk_token, pad_token) with those of model_dir/tokenizer_config.json. */
kiln_status kiln_chat_template_use_model_tokens(kiln_chat_template *t, const char *model_dir);

#endif /* KILN_CHAT_H */
