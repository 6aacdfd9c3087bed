/*
 * policy.c -- the Lua policy host. Runs a policy once at load in a sandbox
 * (base/table/string/math/utf8 only; no io, os, package or debug; memory
 * capped; an instruction-count limit; protected calls with tracebacks), hands
 * it read-only facts and converts the plan it returns into a kiln_program
 * (validated further in program.c). The only file that includes lua.h.
 *
 * Ownership: the Lua state lives for one kiln_program_build call.
 * Thread-safety: no shared state; each build has its own Lua state.
 */
#include "program.h"

#include "embed.h"

#include <float.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>

#define POLICY_MEM_LIMIT (64u << 20)
#define POLICY_INSN_LIMIT 200000000ull /* ~1-2 s of straight-line Lua; a tight loop's line hooks make it ~15 s */
#define POLICY_HOOK_EVERY 10000
#define POLICY_TIME_LIMIT_S 10.0 /* wall clock of one sandbox ($KILN_POLICY_TIME_LIMIT seconds) */

typedef struct host {
    size_t mem_used, mem_limit;
    char last_line[160]; /* "file:line" of the last policy line run */
    bool mem_exceeded;
    uint64_t insns;
    bool insn_exceeded;
    double t_start, t_limit; /* kiln_now_sec() at the sandbox's creation, the time limit */
    const char *policy_dir;
    char *policy_path; /* the file the policy came from (for messages) */
} host;

static void *host_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    host *h = ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        h->mem_used -= old;
        return NULL;
    }
    if (nsize > old && h->mem_used - old + nsize > h->mem_limit) {
        h->mem_exceeded = true;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p) h->mem_used = h->mem_used - old + nsize;
    return p;
}

static host *get_host(lua_State *L) {
    void *ud;
    lua_getallocf(L, &ud);
    return ud;
}

static void insn_hook(lua_State *L, lua_Debug *ar) {
    host *h = get_host(L);
    if (ar->event == LUA_HOOKLINE) {
        /* remember where we are, so a failed allocation can name the line */
        if (lua_getinfo(L, "S", ar)) snprintf(h->last_line, sizeof h->last_line, "%s:%d", ar->short_src, ar->currentline);
        if (h->mem_used > h->mem_limit / 4 * 3)
            luaL_error(L, "policy exceeded its memory limit (%d MB)", (int)(h->mem_limit >> 20));
        return;
    }
    h->insns += POLICY_HOOK_EVERY;
    if (h->insns > POLICY_INSN_LIMIT) {
        h->insn_exceeded = true;
        luaL_error(L, "policy exceeded the instruction limit (%d instructions): an infinite loop?",
                   (int)POLICY_INSN_LIMIT);
    }
    if (kiln_now_sec() - h->t_start > h->t_limit) {
        char lim[32];
        snprintf(lim, sizeof lim, "%g", h->t_limit); /* lua_pushfstring has no %g */
        luaL_error(L, "policy exceeded its time limit (%s s): an infinite loop?", lim);
    }
}

/* $KILN_POLICY_TIME_LIMIT (seconds, > 0) or POLICY_TIME_LIMIT_S */
static double policy_time_limit(void) {
    const char *v = getenv("KILN_POLICY_TIME_LIMIT");
    char *end = NULL;
    double t = v && *v ? strtod(v, &end) : 0;
    return end && !*end && t > 0 ? t : POLICY_TIME_LIMIT_S;
}

/* ------------------------------------------------------------ module source */

/* Read a policy module's source: from dir (policy_dir or $KILN_POLICY_DIR)
 * when given, else the embedded copy. *chunkname is "@path". */
static kiln_status module_source(const char *dir, const char *name, char **src, size_t *len, char **chunkname) {
    kiln_status st = KILN_OK;
    char *path = NULL;
    if (!dir || !*dir) dir = getenv("KILN_POLICY_DIR");
    if (dir && *dir) {
        char *file = kiln_asprintf("%s.lua", name);
        if (!file) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
        path = kiln_path_join(dir, file);
        free(file);
        KILN_CHECK_ALLOC(path);
        KILN_TRY(kiln_read_file(path, src, len));
        *chunkname = kiln_asprintf("@%s", path);
        KILN_CHECK_ALLOC(*chunkname);
    } else {
        path = kiln_asprintf("policies/%s.lua", name);
        KILN_CHECK_ALLOC(path);
        const kiln_embedded_file *f = kiln_embedded_find(path);
        KILN_CHECK(f, KILN_ERR_NOT_FOUND, "no built-in policy module '%s' (%s)", name, path);
        *src = kiln_strndup(f->data, f->len);
        KILN_CHECK_ALLOC(*src);
        *len = f->len;
        *chunkname = kiln_asprintf("@%s", path);
        KILN_CHECK_ALLOC(*chunkname);
    }
fail:
    free(path);
    return st;
}

/* require(name): policy modules only (no filesystem search path). */
static int l_require(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return luaL_error(L, "require: bad module name '%s'", name);
    lua_getfield(L, LUA_REGISTRYINDEX, "kiln.loaded");
    lua_getfield(L, -1, name);
    if (!lua_isnil(L, -1)) return 1;
    lua_pop(L, 1);
    host *h = get_host(L);
    char *src = NULL, *chunk = NULL;
    size_t len = 0;
    if (module_source(h->policy_dir, name, &src, &len, &chunk) != KILN_OK) {
        lua_pushstring(L, kiln_last_error());
        free(src);
        free(chunk);
        return lua_error(L);
    }
    int r = luaL_loadbufferx(L, src, len, chunk, "t");
    free(src);
    free(chunk);
    if (r != LUA_OK) return lua_error(L);
    lua_call(L, 0, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    return 1;
}

/* kiln_where(level): "file:line" of the first frame at or above level that
 * is not inside kiln.lua, with " (via kiln.lua:N)" when the helper built it. */
static int l_where(lua_State *L) {
    int level = (int)luaL_optinteger(L, 1, 1);
    lua_Debug ar;
    char helper[64] = "";
    for (int lv = level; lv < level + 40; lv++) {
        if (!lua_getstack(L, lv, &ar)) break;
        if (!lua_getinfo(L, "Sl", &ar) || ar.currentline < 0) continue;
        if (kiln_str_ends_with(ar.short_src, "kiln.lua")) {
            if (!helper[0]) snprintf(helper, sizeof helper, "kiln.lua:%d", ar.currentline);
            continue;
        }
        if (helper[0])
            lua_pushfstring(L, "%s:%d (via %s)", ar.short_src, ar.currentline, helper);
        else
            lua_pushfstring(L, "%s:%d", ar.short_src, ar.currentline);
        return 1;
    }
    lua_pushstring(L, helper[0] ? helper : "?");
    return 1;
}

static int l_traceback(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) msg = luaL_tolstring(L, 1, NULL);
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* ------------------------------------------------------------- read-only */

static int ro_newindex(lua_State *L) { return luaL_error(L, "policy facts are read-only"); }
static int ro_len(lua_State *L) {
    lua_getmetatable(L, 1);
    lua_getfield(L, -1, "__index");
    lua_pushinteger(L, (lua_Integer)luaL_len(L, -1));
    return 1;
}
static int ro_next(lua_State *L) {
    lua_settop(L, 2);
    if (lua_next(L, 1)) return 2;
    lua_pushnil(L);
    return 1;
}
static int ro_pairs(lua_State *L) {
    lua_getmetatable(L, 1);
    lua_pushcfunction(L, ro_next);
    lua_getfield(L, -2, "__index");
    lua_pushnil(L);
    return 3;
}

/* Replace the table at the top of the stack by a read-only proxy. */
static void make_readonly(lua_State *L) {
    lua_newtable(L);            /* proxy */
    lua_newtable(L);            /* mt */
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, ro_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, ro_len);
    lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, ro_pairs);
    lua_setfield(L, -2, "__pairs");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_remove(L, -2);
}

static void push_json(lua_State *L, json_t *j, int depth) {
    if (depth > 64) {
        lua_pushnil(L);
        return;
    }
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        lua_newtable(L);
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            if (json_is_null(v)) continue;
            push_json(L, v, depth + 1);
            lua_setfield(L, -2, k);
        }
        make_readonly(L);
        break;
    }
    case JSON_ARRAY: {
        lua_newtable(L);
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            push_json(L, v, depth + 1);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        make_readonly(L);
        break;
    }
    case JSON_STRING: lua_pushlstring(L, json_string_value(j), json_string_length(j)); break;
    case JSON_INTEGER: lua_pushinteger(L, (lua_Integer)json_integer_value(j)); break;
    case JSON_REAL: lua_pushnumber(L, json_real_value(j)); break;
    case JSON_TRUE: lua_pushboolean(L, 1); break;
    case JSON_FALSE: lua_pushboolean(L, 0); break;
    default: lua_pushnil(L);
    }
}

#define SET_INT(name, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, name))
#define SET_NUM(name, v) (lua_pushnumber(L, (lua_Number)(v)), lua_setfield(L, -2, name))
#define SET_STR(name, v) (lua_pushstring(L, (v) ? (v) : ""), lua_setfield(L, -2, name))
#define SET_BOOL(name, v) (lua_pushboolean(L, (v)), lua_setfield(L, -2, name))

typedef struct facts_arg {
    const kiln_policy_facts *f;
    json_t *options;
} facts_arg;

static int l_push_facts(lua_State *L) {
    facts_arg *fa = lua_touserdata(L, 1);
    const kiln_policy_facts *f = fa->f;
    const kiln_model_config *c = f->cfg;
    lua_newtable(L);
    push_json(L, c->json, 0);
    lua_setfield(L, -2, "config");
    if (c->generation) {
        push_json(L, c->generation, 0);
        lua_setfield(L, -2, "generation_config");
    }
    lua_newtable(L); /* model */
    SET_STR("architecture", c->architecture);
    SET_STR("model_type", c->model_type);
    SET_INT("hidden_size", c->hidden_size);
    SET_INT("intermediate_size", c->intermediate_size);
    SET_INT("num_layers", c->num_layers);
    SET_INT("num_heads", c->num_heads);
    SET_INT("num_kv_heads", c->num_kv_heads);
    SET_INT("head_dim", c->head_dim);
    SET_INT("vocab_size", c->vocab_size);
    SET_INT("max_position_embeddings", c->max_position_embeddings);
    SET_NUM("rms_norm_eps", c->rms_norm_eps);
    SET_BOOL("tie_word_embeddings", c->tie_word_embeddings);
    SET_BOOL("attention_bias", c->attention_bias);
    SET_BOOL("mlp_bias", c->mlp_bias);
    SET_STR("hidden_act", c->hidden_act);
    SET_STR("dtype", kiln_dtype_name(c->dtype));
    SET_INT("sliding_window", c->sliding_window);
    lua_newtable(L);
    SET_STR("type", c->rope.type);
    SET_NUM("theta", c->rope.theta);
    SET_NUM("factor", c->rope.factor);
    SET_NUM("low_freq_factor", c->rope.low_freq_factor);
    SET_NUM("high_freq_factor", c->rope.high_freq_factor);
    SET_INT("original_max_position", c->rope.original_max_position);
    SET_NUM("partial_rotary_factor", c->rope.partial_rotary_factor);
    make_readonly(L);
    lua_setfield(L, -2, "rope");
    make_readonly(L);
    lua_setfield(L, -2, "model");
    lua_newtable(L);
    SET_STR("kind", f->device_kind);
    SET_STR("name", f->device_name);
    SET_INT("sm", f->sm);
    SET_NUM("memory", (double)f->device_memory);
    make_readonly(L);
    lua_setfield(L, -2, "device");
    lua_newtable(L);
    SET_INT("rank", f->tp_rank);
    SET_INT("size", f->tp_size);
    make_readonly(L);
    lua_setfield(L, -2, "tp");
    if (fa->options)
        push_json(L, fa->options, 0);
    else {
        lua_newtable(L);
        make_readonly(L);
    }
    lua_setfield(L, -2, "options");
    SET_STR("dtype", f->dtype);
    SET_STR("kv_cache_dtype", f->kv_cache_dtype);
    if (f->target_cfg) {
        const kiln_model_config *t = f->target_cfg;
        lua_newtable(L);
        SET_INT("num_layers", t->num_layers);
        SET_INT("num_heads", t->num_heads);
        SET_INT("num_kv_heads", t->num_kv_heads);
        SET_INT("head_dim", t->head_dim);
        SET_INT("hidden_size", t->hidden_size);
        SET_INT("vocab_size", t->vocab_size);
        SET_INT("spec_k", f->spec_k);
        make_readonly(L);
        lua_setfield(L, -2, "target");
    }
    make_readonly(L);
    return 1;
}

/* ------------------------------------------------------ plan -> program */

typedef struct conv {
    kiln_program *p;
    const char *policy_where; /* "file:line" of the policy function */
} conv;

/* Location of a plan entry (its recorded `where`) or the policy function. */
static const char *entry_where(lua_State *L, int idx, const conv *c) {
    /* the value stays on the stack (callers reset the top per entry), so the
     * string cannot be collected while it is in use */
    lua_getfield(L, idx, "where");
    return lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : c->policy_where;
}

static char *dup_or_die(lua_State *L, const char *s) {
    char *d = kiln_strdup(s);
    if (!d) luaL_error(L, "out of host memory");
    return d;
}

static const char *get_str(lua_State *L, int idx, const char *key, bool required, const char *ctx,
                           const char *where) {
    lua_getfield(L, idx, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        if (required) luaL_error(L, "%s: %s is missing field '%s'", where, ctx, key);
        return NULL;
    }
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s: %s field '%s' must be a string", where, ctx, key);
    return lua_tostring(L, -1); /* left on the stack: callers reset the top per entry */
}

static double get_num(lua_State *L, int idx, const char *key, bool required, double def, const char *ctx,
                      const char *where) {
    lua_getfield(L, idx, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        if (required) luaL_error(L, "%s: %s is missing field '%s'", where, ctx, key);
        return def;
    }
    if (lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "%s: %s field '%s' must be a number", where, ctx, key);
    double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

static int64_t get_int(lua_State *L, int idx, const char *key, bool required, int64_t def, const char *ctx,
                       const char *where) {
    lua_getfield(L, idx, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        if (required) luaL_error(L, "%s: %s is missing field '%s'", where, ctx, key);
        return def;
    }
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint) luaL_error(L, "%s: %s field '%s' must be an integer", where, ctx, key);
    lua_pop(L, 1);
    return (int64_t)v;
}

static bool get_bool(lua_State *L, int idx, const char *key, bool def) {
    lua_getfield(L, idx, key);
    bool v = lua_isnil(L, -1) ? def : lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* Push field key of table idx, requiring a table (sequence). Returns length. */
static lua_Integer get_seq(lua_State *L, int idx, const char *key, bool required, const char *where) {
    lua_getfield(L, idx, key);
    if (lua_isnil(L, -1)) {
        if (required) luaL_error(L, "%s: plan is missing field '%s'", where, key);
        return -1;
    }
    if (!lua_istable(L, -1)) luaL_error(L, "%s: plan field '%s' must be a table", where, key);
    lua_Integer n = luaL_len(L, -1);
    if (n < 0 || n > 1000000) luaL_error(L, "%s: plan field '%s' has %d entries (limit 1000000)", where, key, (int)n);
    return n < 0 ? 0 : KILN_MIN(n, 1000000);
}

static int shard_from_name(const char *s) {
    static const char *names[] = {"replicated", "column", "row", "vocab", "kv_heads"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

static void conv_weights(lua_State *L, conv *c, int plan) {
    kiln_program *p = c->p;
    lua_Integer n = get_seq(L, plan, "weights", true, c->policy_where);
    int wt = lua_gettop(L);
    p->weights = calloc((size_t)(n > 0 ? n : 1), sizeof *p->weights);
    if (!p->weights) luaL_error(L, "out of host memory");
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, wt, i);
        int e = lua_gettop(L);
        if (!lua_istable(L, e)) luaL_error(L, "%s: weights[%d] must be a table", c->policy_where, (int)i);
        const char *where = entry_where(L, e, c);
        kiln_weight_desc *w = &p->weights[p->n_weights++];
        w->where = dup_or_die(L, where);
        w->id = dup_or_die(L, get_str(L, e, "id", true, "weight", where));
        const char *sh = get_str(L, e, "shard", false, "weight", where);
        int sk = sh ? shard_from_name(sh) : KILN_SHARD_REPLICATED;
        if (sk < 0)
            luaL_error(L, "%s: weight '%s': unknown shard rule '%s' (replicated, column, row, vocab, kv_heads)",
                       where, w->id, sh);
        w->shard = (kiln_shard_kind)sk;
        lua_getfield(L, e, "parts");
        int pt = lua_gettop(L);
        if (!lua_istable(L, pt)) luaL_error(L, "%s: weight '%s' is missing field 'parts'", where, w->id);
        lua_Integer np = luaL_len(L, pt);
        if (np < 1 || np > KILN_MAX_PARTS)
            luaL_error(L, "%s: weight '%s' must have 1 to %d parts (has %d)", where, w->id, KILN_MAX_PARTS, (int)np);
        for (lua_Integer j = 1; j <= np; j++) {
            lua_geti(L, pt, j);
            int q = lua_gettop(L);
            if (!lua_istable(L, q)) luaL_error(L, "%s: weight '%s' part %d must be a table", where, w->id, (int)j);
            kiln_weight_part *part = &w->parts[w->n_parts++];
            char ctx[128];
            snprintf(ctx, sizeof ctx, "weight '%s' part %d", w->id, (int)j);
            part->tensor = dup_or_die(L, get_str(L, q, "tensor", true, ctx, where));
            lua_getfield(L, q, "shape");
            if (!lua_istable(L, -1)) luaL_error(L, "%s: %s is missing field 'shape'", where, ctx);
            lua_Integer nd = luaL_len(L, -1);
            if (nd < 1 || nd > 2) luaL_error(L, "%s: %s: shape must have 1 or 2 dimensions", where, ctx);
            part->ndim = (int)nd;
            for (int d = 0; d < nd; d++) {
                lua_geti(L, -1, d + 1);
                int isint = 0;
                lua_Integer v = lua_tointegerx(L, -1, &isint);
                if (!isint || v <= 0) luaL_error(L, "%s: %s: shape[%d] must be a positive integer", where, ctx, d + 1);
                part->shape[d] = v;
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
            part->row0 = 0;
            part->nrows = part->shape[0];
            lua_getfield(L, q, "rows");
            if (!lua_isnil(L, -1)) {
                if (!lua_istable(L, -1) || luaL_len(L, -1) != 2)
                    luaL_error(L, "%s: %s: rows must be {first_row, count}", where, ctx);
                lua_geti(L, -1, 1);
                lua_geti(L, -2, 2);
                int i1 = 0, i2 = 0;
                part->row0 = lua_tointegerx(L, -2, &i1);
                part->nrows = lua_tointegerx(L, -1, &i2);
                if (!i1 || !i2) luaL_error(L, "%s: %s: rows must be integers", where, ctx);
                lua_pop(L, 2);
            }
            lua_pop(L, 1);
            const char *psh = get_str(L, q, "shard", false, ctx, where);
            int pk = psh ? shard_from_name(psh) : (int)w->shard;
            if (pk < 0) luaL_error(L, "%s: %s: unknown shard rule '%s'", where, ctx, psh);
            part->shard = (kiln_shard_kind)pk;
            part->unit = get_int(L, q, "unit", false, 1, ctx, where);
            if (part->unit < 1) luaL_error(L, "%s: %s: unit must be >= 1", where, ctx);
            lua_settop(L, q - 1);
        }
        lua_settop(L, wt);
    }
    lua_pop(L, 1);
}

static void conv_slots(lua_State *L, conv *c, int plan) {
    kiln_program *p = c->p;
    lua_Integer n = get_seq(L, plan, "slots", true, c->policy_where);
    int st = lua_gettop(L);
    p->slots = calloc((size_t)(n > 0 ? n : 1), sizeof *p->slots);
    if (!p->slots) luaL_error(L, "out of host memory");
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, st, i);
        int e = lua_gettop(L);
        if (!lua_istable(L, e)) luaL_error(L, "%s: slots[%d] must be a table", c->policy_where, (int)i);
        const char *where = entry_where(L, e, c);
        kiln_slot_desc *s = &p->slots[p->n_slots++];
        s->name = dup_or_die(L, get_str(L, e, "name", true, "slot", where));
        s->width = get_int(L, e, "width", true, 0, "slot", where);
        if (s->width < 1) luaL_error(L, "%s: slot '%s': width must be positive", where, s->name);
        const char *rows = get_str(L, e, "rows", false, "slot", where);
        if (rows && strcmp(rows, "tokens") && strcmp(rows, "out"))
            luaL_error(L, "%s: slot '%s': rows must be \"tokens\" or \"out\"", where, s->name);
        s->per_out = rows && !strcmp(rows, "out");
        lua_settop(L, st);
    }
    lua_pop(L, 1);
}

static int find_slot(const kiln_program *p, const char *name) {
    for (int i = 0; i < p->n_slots; i++)
        if (!strcmp(p->slots[i].name, name)) return i;
    return -1;
}
static int find_weight(const kiln_program *p, const char *id) {
    for (int i = 0; i < p->n_weights; i++)
        if (!strcmp(p->weights[i].id, id)) return i;
    return -1;
}

static int slot_ref(lua_State *L, conv *c, int e, const char *key, bool required, const char *opname,
                    const char *where) {
    const char *s = get_str(L, e, key, required, opname, where);
    if (!s) return -1;
    int id = find_slot(c->p, s);
    if (id < 0) luaL_error(L, "%s: op '%s': field '%s' names unknown slot '%s'", where, opname, key, s);
    return id;
}
static int weight_ref(lua_State *L, conv *c, int e, const char *key, bool required, const char *opname,
                      const char *where) {
    const char *s = get_str(L, e, key, required, opname, where);
    if (!s) return -1;
    int id = find_weight(c->p, s);
    if (id < 0) luaL_error(L, "%s: op '%s': field '%s' names unknown weight '%s'", where, opname, key, s);
    return id;
}

static void conv_kernels(lua_State *L, conv *c, int plan) {
    kiln_program *p = c->p;
    lua_Integer n = get_seq(L, plan, "kernels", false, c->policy_where);
    if (n < 0) {
        lua_pop(L, 1);
        return;
    }
    int kt = lua_gettop(L);
    p->kernels = calloc((size_t)(n > 0 ? n : 1), sizeof *p->kernels);
    if (!p->kernels) luaL_error(L, "out of host memory");
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, kt, i);
        int e = lua_gettop(L);
        if (!lua_istable(L, e)) luaL_error(L, "%s: kernels[%d] must be a table", c->policy_where, (int)i);
        const char *where = entry_where(L, e, c);
        kiln_custom_kernel *k = &p->kernels[p->n_kernels++];
        k->where = dup_or_die(L, where);
        k->name = dup_or_die(L, get_str(L, e, "name", true, "kernel", where));
        k->source = dup_or_die(L, get_str(L, e, "source", true, "kernel", where));
        k->entry = dup_or_die(L, get_str(L, e, "entry", true, "kernel", where));
        const char *rep = get_str(L, e, "replaces", true, "kernel", where);
        int kind = -1;
        for (int j = 0; j < KILN_OP_COUNT; j++)
            if (!strcmp(rep, kiln_op_kind_name((kiln_op_kind)j))) kind = j;
        if (kind < 0) luaL_error(L, "%s: kernel '%s': 'replaces' names unknown op kind '%s'", where, k->name, rep);
        k->replaces = (kiln_op_kind)kind;
        lua_settop(L, kt);
    }
    lua_pop(L, 1);
}

static void conv_program(lua_State *L, conv *c, int plan) {
    kiln_program *p = c->p;
    lua_Integer n = get_seq(L, plan, "program", true, c->policy_where);
    int pt = lua_gettop(L);
    if (n < 1) luaL_error(L, "%s: plan field 'program' is empty", c->policy_where);
    p->ops = calloc((size_t)(n < 1 ? 1 : n), sizeof *p->ops);
    if (!p->ops) luaL_error(L, "out of host memory");
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, pt, i);
        int e = lua_gettop(L);
        if (!lua_istable(L, e)) luaL_error(L, "%s: program[%d] must be a table", c->policy_where, (int)i);
        const char *where = entry_where(L, e, c);
        kiln_op *op = &p->ops[p->n_ops++];
        op->where = dup_or_die(L, where);
        op->dst = op->src = op->src2 = op->w = op->bias = op->custom = -1;
        op->kv_layer = -1;
        const char *kind = get_str(L, e, "op", true, "program entry", where);
        int k = -1;
        for (int j = 0; j < KILN_OP_COUNT; j++)
            if (!strcmp(kind, kiln_op_kind_name((kiln_op_kind)j))) k = j;
        if (k < 0) {
            kiln_buf kinds = {0};
            for (int j = 0; j < KILN_OP_COUNT; j++) {
                if (kiln_buf_printf(&kinds, "%s%s", j ? ", " : "", kiln_op_kind_name((kiln_op_kind)j))) break;
            }
            lua_pushfstring(L, "%s: unknown op kind '%s' (known: %s)", where, kind, kinds.data ? kinds.data : "");
            kiln_buf_free(&kinds);
            lua_error(L);
        }
        op->kind = (kiln_op_kind)k;
        op->layer = (int)get_int(L, e, "layer", false, -1, kind, where);
        /* variant */
        const char *var = get_str(L, e, "variant", false, kind, where);
        op->variant = 0; /* "auto" */
        if (var && kiln_str_starts_with(var, "custom:")) {
            op->variant = -1;
            for (int j = 0; j < p->n_kernels; j++)
                if (!strcmp(p->kernels[j].name, var + 7)) op->custom = j;
            if (op->custom < 0) luaL_error(L, "%s: op '%s': variant '%s' names no kernel in the plan", where, kind, var);
            if (p->kernels[op->custom].replaces != op->kind)
                luaL_error(L, "%s: op '%s': kernel '%s' replaces '%s', not '%s'", where, kind, var + 7,
                           kiln_op_kind_name(p->kernels[op->custom].replaces), kind);
        } else if (var) {
            const char *const *vs = kiln_op_variants(op->kind);
            op->variant = -1;
            for (int j = 0; vs[j]; j++)
                if (!strcmp(vs[j], var)) op->variant = j;
            if (op->variant < 0) {
                kiln_buf names = {0};
                for (int j = 0; vs[j]; j++)
                    if (kiln_buf_printf(&names, "%s%s", j ? ", " : "", vs[j])) break;
                lua_pushfstring(L, "%s: op '%s': variant '%s' does not exist (variants: %s, custom:NAME)", where, kind,
                                var, names.data ? names.data : "");
                kiln_buf_free(&names);
                lua_error(L);
            }
        }
        switch (op->kind) {
        case KILN_OP_EMBED:
            op->dst = slot_ref(L, c, e, "out", true, kind, where);
            op->w = weight_ref(L, c, e, "weight", true, kind, where);
            break;
        case KILN_OP_RMSNORM:
            op->dst = slot_ref(L, c, e, "out", true, kind, where);
            op->src = slot_ref(L, c, e, "input", true, kind, where);
            op->w = weight_ref(L, c, e, "weight", true, kind, where);
            op->eps = (float)get_num(L, e, "eps", true, 0, kind, where);
            break;
        case KILN_OP_ADD_RMSNORM:
            op->dst = slot_ref(L, c, e, "out", true, kind, where);
            op->src = slot_ref(L, c, e, "input", true, kind, where);
            op->src2 = slot_ref(L, c, e, "residual", true, kind, where);
            op->w = weight_ref(L, c, e, "weight", true, kind, where);
            op->eps = (float)get_num(L, e, "eps", true, 0, kind, where);
            break;
        case KILN_OP_ADD:
            op->dst = slot_ref(L, c, e, "out", true, kind, where);
            op->src = slot_ref(L, c, e, "a", true, kind, where);
            op->src2 = slot_ref(L, c, e, "b", true, kind, where);
            break;
        case KILN_OP_SCALE:
            op->dst = slot_ref(L, c, e, "out", true, kind, where);
            op->src = slot_ref(L, c, e, "input", true, kind, where);
            op->scale = (float)get_num(L, e, "value", true, 1, kind, where);
            break;
        case KILN_OP_GEMM:
            op->dst = slot_ref(L, c, e, "out", true, kind, where);
            op->src = slot_ref(L, c, e, "input", true, kind, where);
            op->w = weight_ref(L, c, e, "weight", true, kind, where);
            op->bias = weight_ref(L, c, e, "bias", false, kind, where);
            op->dst_col = get_int(L, e, "out_col", false, 0, kind, where);
            break;
        case KILN_OP_ROPE:
        case KILN_OP_KV_WRITE:
        case KILN_OP_ROPE_KV_WRITE:
        case KILN_OP_ATTENTION:
            op->src = slot_ref(L, c, e, "qkv", true, kind, where);
            op->n_heads = (int)get_int(L, e, "heads", true, 0, kind, where);
            op->n_kv_heads = (int)get_int(L, e, "kv_heads", true, 0, kind, where);
            op->head_dim = (int)get_int(L, e, "head_dim", true, 0, kind, where);
            if (op->kind != KILN_OP_ROPE) op->kv_layer = (int)get_int(L, e, "kv_layer", true, 0, kind, where);
            if (op->kind == KILN_OP_ATTENTION) {
                op->dst = slot_ref(L, c, e, "out", true, kind, where);
                op->scale = (float)get_num(L, e, "scale", false, 0, kind, where);
                op->window = (int)get_int(L, e, "window", false, 0, kind, where);
            }
            break;
        case KILN_OP_SILU_MUL:
        case KILN_OP_GELU_MUL:
        case KILN_OP_GATHER_LAST:
        case KILN_OP_ALL_GATHER:
            op->dst = slot_ref(L, c, e, "out", true, kind, where);
            op->src = slot_ref(L, c, e, "input", true, kind, where);
            break;
        case KILN_OP_ALL_REDUCE: op->src = slot_ref(L, c, e, "slot", true, kind, where); break;
        case KILN_OP_CROSS_ATTENTION:
            op->dst = slot_ref(L, c, e, "out", true, kind, where);
            op->src = slot_ref(L, c, e, "input", true, kind, where);
            op->n_heads = (int)get_int(L, e, "heads", true, 0, kind, where);
            op->n_kv_heads = (int)get_int(L, e, "kv_heads", true, 0, kind, where);
            op->head_dim = (int)get_int(L, e, "head_dim", true, 0, kind, where);
            op->kv_layer = (int)get_int(L, e, "kv_layer", true, 0, kind, where);
            op->pos_offset = (int)get_int(L, e, "pos_offset", false, 0, kind, where);
            op->scale = (float)get_num(L, e, "scale", false, 0, kind, where);
            break;
        default: break;
        }
        lua_settop(L, pt);
    }
    lua_pop(L, 1);
}

/* plan.kv_scales (FP8 E4M3): nil or "auto", "calibrate", "checkpoint",
 * "none", or {k = x | {per layer}, v = ...}; after plan.kv (layer count). */
static void conv_kv_scales(lua_State *L, conv *c, int plan) {
    kiln_program *p = c->p;
    snprintf(p->kv_scales, sizeof p->kv_scales, "auto");
    lua_getfield(L, plan, "kv_scales");
    int t = lua_gettop(L);
    if (lua_type(L, t) == LUA_TSTRING) {
        const char *m = lua_tostring(L, t);
        if (strcmp(m, "auto") && strcmp(m, "calibrate") && strcmp(m, "checkpoint") && strcmp(m, "none"))
            luaL_error(L, "%s: plan field 'kv_scales' = '%s' (auto, calibrate, checkpoint, none, or {k = .., v = ..})",
                       c->policy_where, m);
        snprintf(p->kv_scales, sizeof p->kv_scales, "%s", m);
    } else if (lua_istable(L, t)) {
        int n = p->n_kv_layers; /* a single number repeats over the layers */
        for (int which = 0; which < 2; which++) {
            const char *key = which ? "v" : "k";
            lua_getfield(L, t, key);
            int m = lua_type(L, -1) == LUA_TNUMBER ? 1 : lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : -1;
            if (n < 1 || m < 1 || (m != 1 && m != n))
                luaL_error(L, "%s: plan field 'kv_scales.%s' must be a number or a list of %d numbers (one per KV "
                              "layer)", c->policy_where, key, n);
            float *a = malloc(sizeof(float) * (size_t)n);
            if (!a) luaL_error(L, "out of host memory");
            if (which) p->kv_v_scales = a;
            else p->kv_k_scales = a;
            for (int i = 0; i < n; i++) {
                if (m > 1) lua_rawgeti(L, -1, i + 1);
                else lua_pushvalue(L, -1);
                double v = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
                if (!(v >= FLT_MIN && v < 1e30)) /* 1e-50 would be the float 0 */
                    luaL_error(L, "%s: plan field 'kv_scales.%s' entry %d must be a positive number (1.2e-38 to 1e30)",
                               c->policy_where, key, i + 1);
                a[i] = (float)v;
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        }
        p->n_kv_scales = n;
        snprintf(p->kv_scales, sizeof p->kv_scales, "values");
    } else if (!lua_isnil(L, t)) {
        luaL_error(L, "%s: plan field 'kv_scales' must be a string or a table", c->policy_where);
    }
    lua_settop(L, t - 1);
}

static int l_convert(lua_State *L) {
    conv *c = lua_touserdata(L, 1);
    int plan = 2;
    kiln_program *p = c->p;
    if (!lua_istable(L, plan))
        return luaL_error(L, "%s: the policy function must return a plan table (got %s)", c->policy_where,
                          luaL_typename(L, plan));
    const char *name = get_str(L, plan, "name", false, "plan", c->policy_where);
    p->policy_name = dup_or_die(L, name ? name : "?");
    const char *kvd = get_str(L, plan, "kv_cache_dtype", false, "plan", c->policy_where);
    snprintf(p->kv_cache_dtype, sizeof p->kv_cache_dtype, "%s", kvd ? kvd : "auto");
    static const char *const kv_ok[] = {"auto", "fp8_e5m2", "fp8_e4m3", "fp8", "bf16", "fp16", "fp32"};
    bool kv_known = false;
    for (size_t i = 0; i < KILN_ARRAY_LEN(kv_ok); i++) kv_known |= !strcmp(p->kv_cache_dtype, kv_ok[i]);
    if (!kv_known)
        return luaL_error(L, "%s: plan field 'kv_cache_dtype' = '%s' (auto, fp8_e4m3, fp8_e5m2, bf16, fp16, fp32)",
                          c->policy_where, p->kv_cache_dtype);
    /* rope */
    lua_getfield(L, plan, "rope");
    if (!lua_istable(L, -1)) return luaL_error(L, "%s: plan is missing field 'rope'", c->policy_where);
    {
        int r = lua_gettop(L);
        const char *t = get_str(L, r, "type", true, "rope", c->policy_where);
        snprintf(p->rope.type, sizeof p->rope.type, "%s", t);
        p->rope.theta = get_num(L, r, "theta", true, 0, "rope", c->policy_where);
        p->rope.factor = get_num(L, r, "factor", false, 1, "rope", c->policy_where);
        p->rope.low_freq_factor = get_num(L, r, "low_freq_factor", false, 1, "rope", c->policy_where);
        p->rope.high_freq_factor = get_num(L, r, "high_freq_factor", false, 4, "rope", c->policy_where);
        p->rope.original_max_position =
            (int)get_int(L, r, "original_max_position", false, 0, "rope", c->policy_where);
        p->rot_dim = (int)get_int(L, r, "rot_dim", true, 0, "rope", c->policy_where);
        p->rope_interleaved = get_bool(L, r, "interleaved", false);
        lua_settop(L, r - 1);
    }
    lua_getfield(L, plan, "kv");
    if (!lua_istable(L, -1)) return luaL_error(L, "%s: plan is missing field 'kv'", c->policy_where);
    p->n_kv_layers = (int)get_int(L, -1, "layers", true, 0, "kv", c->policy_where);
    p->n_kv_heads = (int)get_int(L, -1, "heads", true, 0, "kv", c->policy_where);
    p->head_dim = (int)get_int(L, -1, "head_dim", true, 0, "kv", c->policy_where);
    lua_pop(L, 1);
    lua_getfield(L, plan, "cross");
    if (lua_istable(L, -1)) {
        p->cross_kv_heads = (int)get_int(L, -1, "kv_heads", true, 0, "cross", c->policy_where);
        p->cross_head_dim = (int)get_int(L, -1, "head_dim", true, 0, "cross", c->policy_where);
    }
    lua_pop(L, 1);
    conv_kv_scales(L, c, plan);
    lua_getfield(L, plan, "vocab");
    if (!lua_istable(L, -1)) return luaL_error(L, "%s: plan is missing field 'vocab'", c->policy_where);
    p->vocab_size = (int)get_int(L, -1, "size", true, 0, "vocab", c->policy_where);
    p->vocab_local = (int)get_int(L, -1, "count", true, 0, "vocab", c->policy_where);
    p->vocab_start = (int)get_int(L, -1, "start", true, 0, "vocab", c->policy_where);
    lua_pop(L, 1);
    conv_weights(L, c, plan);
    conv_slots(L, c, plan);
    conv_kernels(L, c, plan);
    conv_program(L, c, plan);
    const char *logits = get_str(L, plan, "logits", true, "plan", c->policy_where);
    p->logits_slot = find_slot(p, logits);
    if (p->logits_slot < 0) return luaL_error(L, "%s: plan field 'logits' names unknown slot '%s'", c->policy_where, logits);
    return 0;
}

/* ------------------------------------------------------------ the driver */

static lua_State *new_sandbox(host *h) {
    h->t_start = kiln_now_sec();
    h->t_limit = policy_time_limit();
    lua_State *L = lua_newstate(host_alloc, h);
    if (!L) return NULL;
    static const luaL_Reg libs[] = {{LUA_GNAME, luaopen_base}, {LUA_TABLIBNAME, luaopen_table},
                                    {LUA_STRLIBNAME, luaopen_string}, {LUA_MATHLIBNAME, luaopen_math},
                                    {LUA_UTF8LIBNAME, luaopen_utf8}};
    for (size_t i = 0; i < KILN_ARRAY_LEN(libs); i++) {
        luaL_requiref(L, libs[i].name, libs[i].func, 1);
        lua_pop(L, 1);
    }
    /* no file access or bytecode loading from the base library */
    static const char *remove[] = {"dofile", "loadfile", "collectgarbage"};
    for (size_t i = 0; i < KILN_ARRAY_LEN(remove); i++) {
        lua_pushnil(L);
        lua_setglobal(L, remove[i]);
    }
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "kiln.loaded");
    lua_pushcfunction(L, l_require);
    lua_setglobal(L, "require");
    lua_pushcfunction(L, l_where);
    lua_setglobal(L, "kiln_where");
    lua_sethook(L, insn_hook, LUA_MASKCOUNT | LUA_MASKLINE, POLICY_HOOK_EVERY);
    return L;
}

/* Turn a failed protected call into a kiln error naming the policy. */
static kiln_status lua_failure(lua_State *L, host *h, int r, const char *what) {
    const char *msg = lua_tostring(L, -1);
    if (!msg) msg = "(error object is not a string)";
    if (h->mem_exceeded || r == LUA_ERRMEM)
        return KILN_FAIL(KILN_ERR_POLICY, "policy %s exceeded its memory limit (%u MB) at %s: %s", h->policy_path,
                         POLICY_MEM_LIMIT >> 20, h->last_line[0] ? h->last_line : "?", msg);
    return KILN_FAIL(KILN_ERR_POLICY, "policy %s failed %s: %s", h->policy_path, what, msg);
}

kiln_status kiln_program_validate(kiln_program *p);

kiln_status kiln_program_build(const kiln_policy_facts *facts, const char *policy_file, const char *policy_dir,
                               kiln_program **out) {
    kiln_status st = KILN_OK;
    host h = {0};
    h.mem_limit = POLICY_MEM_LIMIT;
    h.policy_dir = policy_dir;
    lua_State *L = NULL;
    char *src = NULL, *chunk = NULL, *module = NULL, *pwhere = NULL;
    size_t len = 0;
    json_t *options = NULL;
    kiln_program *p = calloc(1, sizeof *p);
    KILN_CHECK_ALLOC(p);
    p->tp_rank = facts->tp_rank;
    p->tp_size = facts->tp_size;
    p->hidden_size = facts->cfg->hidden_size;

    if (facts->options_json && *facts->options_json) {
        json_error_t jerr;
        options = json_loads(facts->options_json, 0, &jerr);
        KILN_CHECK(options && json_is_object(options), KILN_ERR_INVALID_ARGUMENT,
                   "policy options must be a JSON object: %s", options ? "got another JSON type" : jerr.text);
    }
    if (policy_file) {
        KILN_TRY(kiln_read_file(policy_file, &src, &len));
        chunk = kiln_asprintf("@%s", policy_file);
        KILN_CHECK_ALLOC(chunk);
        h.policy_path = kiln_strdup(policy_file);
    } else {
        KILN_TRY(kiln_policy_for_architecture(policy_dir, facts->cfg->architecture, &module));
        KILN_TRY(module_source(policy_dir, module, &src, &len, &chunk));
        h.policy_path = kiln_strdup(chunk + 1);
    }
    KILN_CHECK_ALLOC(h.policy_path);
    p->policy_file = kiln_strdup(h.policy_path);
    KILN_CHECK_ALLOC(p->policy_file);

    L = new_sandbox(&h);
    KILN_CHECK(L, KILN_ERR_OUT_OF_MEMORY, "cannot create the Lua state for the policy");
    lua_pushcfunction(L, l_traceback);
    int tb = lua_gettop(L);
    int r = luaL_loadbufferx(L, src, len, chunk, "t");
    if (r != LUA_OK) {
        st = lua_failure(L, &h, r, "to load");
        goto fail;
    }
    r = lua_pcall(L, 0, 1, tb);
    if (r != LUA_OK) {
        st = lua_failure(L, &h, r, "while loading");
        goto fail;
    }
    if (!lua_isfunction(L, -1)) {
        st = KILN_FAIL(KILN_ERR_POLICY, "policy %s must return a function(facts) -> plan (it returned a %s)",
                       h.policy_path, luaL_typename(L, -1));
        goto fail;
    }
    {
        lua_Debug ar;
        lua_pushvalue(L, -1);
        lua_getinfo(L, ">S", &ar);
        pwhere = kiln_asprintf("%s:%d", ar.short_src, ar.linedefined);
        KILN_CHECK_ALLOC(pwhere);
    }
    /* facts */
    facts_arg fa = {facts, options};
    lua_pushcfunction(L, l_push_facts);
    lua_pushlightuserdata(L, &fa);
    r = lua_pcall(L, 1, 1, tb);
    if (r != LUA_OK) {
        st = lua_failure(L, &h, r, "building facts");
        goto fail;
    }
    r = lua_pcall(L, 1, 1, tb); /* policy(facts) */
    if (r != LUA_OK) {
        st = lua_failure(L, &h, r, "while running");
        goto fail;
    }
    conv c = {p, pwhere};
    lua_pushcfunction(L, l_convert);
    lua_insert(L, -2);
    lua_pushlightuserdata(L, &c);
    lua_insert(L, -2);
    r = lua_pcall(L, 2, 0, tb);
    if (r != LUA_OK) {
        st = lua_failure(L, &h, r, "validation");
        goto fail;
    }
    lua_close(L);
    L = NULL;
    KILN_TRY(kiln_program_validate(p));
    *out = p;
    p = NULL;
fail:
    if (L) lua_close(L);
    if (options) json_decref(options);
    kiln_program_free(p);
    free(src);
    free(chunk);
    free(module);
    free(pwhere);
    free(h.policy_path);
    return st;
}

/* ---------------------------------------------------------- policy index */

static kiln_status load_index(const char *policy_dir, lua_State **out, host *h) {
    kiln_status st = KILN_OK;
    char *src = NULL, *chunk = NULL;
    size_t len = 0;
    lua_State *L = NULL;
    KILN_TRY(module_source(policy_dir, "index", &src, &len, &chunk));
    L = new_sandbox(h);
    KILN_CHECK(L, KILN_ERR_OUT_OF_MEMORY, "cannot create a Lua state");
    int r = luaL_loadbufferx(L, src, len, chunk, "t");
    if (r == LUA_OK) r = lua_pcall(L, 0, 1, 0);
    if (r != LUA_OK) {
        h->policy_path = chunk + 1;
        st = lua_failure(L, h, r, "to load");
        h->policy_path = NULL;
        goto fail;
    }
    KILN_CHECK(lua_istable(L, -1), KILN_ERR_POLICY, "%s must return a table", chunk + 1);
    *out = L;
    L = NULL;
fail:
    if (L) lua_close(L);
    free(src);
    free(chunk);
    return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

kiln_status kiln_policy_architectures(const char *policy_dir, char **list) {
    kiln_status st = KILN_OK;
    host h = {0};
    h.mem_limit = POLICY_MEM_LIMIT;
    lua_State *L = NULL;
    kiln_vec names = KILN_VEC_INIT(char *);
    kiln_buf b = {0};
    KILN_TRY(load_index(policy_dir, &L, &h));
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char *k = lua_tostring(L, -2);
            KILN_TRY(kiln_vec_push(&names, &k));
        }
        lua_pop(L, 1);
    }
    qsort(names.data, names.len, sizeof(char *), cmp_str);
    for (size_t i = 0; i < names.len; i++)
        KILN_TRY(kiln_buf_printf(&b, "%s%s", i ? ", " : "", KILN_VEC_AT(&names, char *, i)));
    *list = kiln_buf_steal(&b);
fail:
    kiln_vec_free(&names);
    kiln_buf_free(&b);
    if (L) lua_close(L);
    return st;
}

kiln_status kiln_policy_for_architecture(const char *policy_dir, const char *arch, char **module) {
    kiln_status st = KILN_OK;
    host h = {0};
    h.mem_limit = POLICY_MEM_LIMIT;
    lua_State *L = NULL;
    char *list = NULL;
    KILN_TRY(load_index(policy_dir, &L, &h));
    lua_getfield(L, -1, arch);
    if (lua_type(L, -1) != LUA_TSTRING) {
        lua_close(L);
        L = NULL;
        if (kiln_policy_architectures(policy_dir, &list) != KILN_OK) list = kiln_strdup("?");
        st = KILN_FAIL(KILN_ERR_UNSUPPORTED, "architecture \"%s\" is not supported (supported: %s)", arch,
                       list ? list : "?");
        goto fail;
    }
    *module = kiln_strdup(lua_tostring(L, -1));
    KILN_CHECK_ALLOC(*module);
fail:
    free(list);
    if (L) lua_close(L);
    return st;
}
