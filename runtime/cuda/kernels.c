/*
 * kernels.c -- the per-device kernel set: registry kernels (or policy
 * overrides) specialized by defines, compiled through the JIT (and its disk
 * cache) and loaded as modules, on first use or ahead of time (prepare, in
 * parallel).
 *
 * Ownership: the set owns its modules; functions returned by get are
 * borrowed and live until kiln_rt_kernels_destroy.
 * Thread-safety: all entry points lock the set's mutex (compiles in prepare
 * run in parallel outside of any other caller's get).
 */
#include "rt_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct loaded {
    char *unit;    /* file, or "policy:NAME" for overrides */
    char *defines; /* normalized */
    kiln_rt_module *mod;
} loaded;

typedef struct override {
    char *name, *source, *entry, *signature, *file;
} override;

struct kiln_rt_kernels {
    kiln_rt_device *dev;
    char arch[16];
    char *cache_dir, *kernel_dir;
    bool no_cache;
    int n_threads;
    pthread_mutex_t mu;
    kiln_vec units;     /* loaded */
    kiln_vec overrides; /* override */
    char used[64][32];  /* names handed out by get */
    int n_used;
    bool pdl_early;     /* get specializes kiln's kernels with PDL_EARLY=1 (kiln_rt_kernels_set_pdl_early) */
};

static void mark_used(kiln_rt_kernels *k, const char *name) {
    for (int i = 0; i < k->n_used; i++)
        if (!strcmp(k->used[i], name)) return;
    if (k->n_used < 64) snprintf(k->used[k->n_used++], sizeof k->used[0], "%s", name);
}

bool kiln_rt_kernels_was_used(kiln_rt_kernels *k, const char *name) {
    pthread_mutex_lock(&k->mu);
    bool r = false;
    for (int i = 0; i < k->n_used; i++)
        if (!strcmp(k->used[i], name)) r = true;
    pthread_mutex_unlock(&k->mu);
    return r;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sort NAME=VALUE tokens so equal sets give equal strings. */
static char *normalize(const char *defines) {
    char *copy = kiln_strdup(defines ? defines : "");
    if (!copy) return NULL;
    char *toks[64];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t && n < 64; t = strtok_r(NULL, " ", &save)) toks[n++] = t;
    qsort(toks, (size_t)n, sizeof toks[0], cmp_str);
    kiln_buf b = {0};
    for (int i = 0; i < n; i++)
        if (kiln_buf_printf(&b, "%s%s", i ? " " : "", toks[i])) {
            kiln_buf_free(&b);
            free(copy);
            return NULL;
        }
    free(copy);
    return kiln_buf_steal(&b);
}

kiln_status kiln_rt_kernels_create(kiln_rt_device *d, const kiln_jit_options *opt, kiln_rt_kernels **out) {
    kiln_status st = KILN_OK;
    kiln_rt_kernels *k = calloc(1, sizeof *k);
    KILN_CHECK_ALLOC(k);
    k->dev = d;
    snprintf(k->arch, sizeof k->arch, "%s", opt && opt->arch ? opt->arch : d->info.arch);
    k->cache_dir = kiln_jit_cache_dir(opt);
    k->kernel_dir = opt && opt->kernel_dir ? kiln_strdup(opt->kernel_dir) : NULL;
    k->no_cache = opt && opt->no_cache;
    k->n_threads = opt ? opt->n_threads : 0;
    pthread_mutex_init(&k->mu, NULL);
    k->units = (kiln_vec)KILN_VEC_INIT(loaded);
    k->overrides = (kiln_vec)KILN_VEC_INIT(override);
    KILN_TRY(kiln_rt_load_nvrtc());
    *out = k;
    return KILN_OK;
fail:
    kiln_rt_kernels_destroy(k);
    return st;
}

void kiln_rt_kernels_destroy(kiln_rt_kernels *k) {
    if (!k) return;
    for (size_t i = 0; i < k->units.len; i++) {
        loaded *l = &KILN_VEC_AT(&k->units, loaded, i);
        kiln_rt_module_unload(l->mod);
        free(l->unit);
        free(l->defines);
    }
    for (size_t i = 0; i < k->overrides.len; i++) {
        override *o = &KILN_VEC_AT(&k->overrides, override, i);
        free(o->name);
        free(o->source);
        free(o->entry);
        free(o->signature);
        free(o->file);
    }
    kiln_vec_free(&k->units);
    kiln_vec_free(&k->overrides);
    pthread_mutex_destroy(&k->mu);
    free(k->cache_dir);
    free(k->kernel_dir);
    free(k);
}

static override *find_override(kiln_rt_kernels *k, const char *name) {
    for (size_t i = 0; i < k->overrides.len; i++) {
        override *o = &KILN_VEC_AT(&k->overrides, override, i);
        if (!strcmp(o->name, name)) return o;
    }
    return NULL;
}

/* Resolve name -> (unit file, source or NULL, entry). */
static kiln_status resolve(kiln_rt_kernels *k, const char *name, const char *defines, const char **file,
                           const char **source, const char **entry, bool *builtin) {
    override *o = find_override(k, name);
    if (builtin) *builtin = !o;
    const kiln_jit_kernel_def *def = kiln_jit_find(name);
    if (def) {
        kiln_status st = kiln_jit_check_defines(def, defines);
        if (st) return st;
    }
    if (o) {
        *file = o->file;
        *source = o->source;
        *entry = o->entry;
        return KILN_OK;
    }
    if (!def) return KILN_FAIL(KILN_ERR_NOT_FOUND, "no kernel named %s in the registry", name);
    *file = def->file;
    *source = NULL;
    *entry = def->entry;
    return KILN_OK;
}

static loaded *find_loaded(kiln_rt_kernels *k, const char *file, const char *defines) {
    for (size_t i = 0; i < k->units.len; i++) {
        loaded *l = &KILN_VEC_AT(&k->units, loaded, i);
        if (!strcmp(l->unit, file) && !strcmp(l->defines, defines)) return l;
    }
    return NULL;
}

/* Programmatic dependent launch: sm_90 and later, unless $KILN_PDL=0. */
static bool pdl_allowed(const kiln_rt_kernels *k) {
    const char *v = getenv("KILN_PDL");
    if (v && !strcmp(v, "0")) return false;
    int sm = 0;
    return sscanf(k->arch, "sm_%d", &sm) == 1 && sm >= 90;
}

static kiln_jit_options make_opt(kiln_rt_kernels *k) {
    kiln_jit_options o = {k->arch, k->cache_dir, k->kernel_dir, k->no_cache, k->n_threads};
    return o;
}

static kiln_status add_loaded(kiln_rt_kernels *k, const char *file, const char *defines, const kiln_jit_unit *u) {
    kiln_status st = KILN_OK;
    loaded l = {kiln_strdup(file), kiln_strdup(defines), NULL};
    KILN_CHECK(l.unit && l.defines, KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    KILN_TRY(kiln_rt_module_load(k->dev, u->cubin, u->cubin_len, &l.mod));
    KILN_TRY(kiln_vec_push(&k->units, &l));
    return KILN_OK;
fail:
    kiln_rt_module_unload(l.mod);
    free(l.unit);
    free(l.defines);
    return st;
}

/* $KILN_JIT_RECORD=FILE: every registry kernel compiled (or read from the
 * disk cache) for a program appends "name<TAB>defines" to FILE, so a run's
 * specializations can be compiled ahead elsewhere (`kiln kernels --specs
 * FILE`; scripts/gpu-run.sh fills the GPU machine's cache that way). A line
 * is one write in append mode: processes may share FILE. */
static void record_spec(const char *name, const char *defines) {
    const char *path = getenv("KILN_JIT_RECORD");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    char line[512];
    int n = snprintf(line, sizeof line, "%s\t%s\n", name, defines ? defines : "");
    if (n > 0 && n < (int)sizeof line) fputs(line, f);
    fclose(f);
}

bool kiln_rt_kernels_pdl(const kiln_rt_kernels *k) { return pdl_allowed(k); }

bool kiln_rt_kernels_set_pdl_early(kiln_rt_kernels *k, bool on) {
    pthread_mutex_lock(&k->mu);
    bool was = k->pdl_early;
    k->pdl_early = on;
    pthread_mutex_unlock(&k->mu);
    return was;
}

kiln_status kiln_rt_kernels_get(kiln_rt_kernels *k, const char *name, const char *defines, kiln_rt_func **out) {
    kiln_status st = KILN_OK;
    kiln_jit_unit u = {0};
    char *norm = normalize(defines);
    const char *file = NULL, *source = NULL, *entry = NULL;
    bool builtin = false;
    pthread_mutex_lock(&k->mu);
    KILN_CHECK_ALLOC(norm);
    KILN_TRY(resolve(k, name, norm, &file, &source, &entry, &builtin));
    if (builtin && k->pdl_early && pdl_allowed(k) && !strstr(norm, "PDL_EARLY=")) {
        /* the early-trigger specialization of the same kernel */
        size_t n = strlen(defines ? defines : "") + 16;
        char *d = malloc(n);
        KILN_CHECK_ALLOC(d);
        snprintf(d, n, "%s PDL_EARLY=1", defines ? defines : "");
        free(norm);
        norm = normalize(d);
        free(d);
        KILN_CHECK_ALLOC(norm);
    }
    loaded *l = find_loaded(k, file, norm);
    if (!l) {
        kiln_jit_options o = make_opt(k);
        u.file = file;
        u.source = source;
        u.defines = norm;
        KILN_TRY(kiln_jit_compile(&u, 1, &o));
        KILN_TRY(add_loaded(k, file, norm, &u));
        l = find_loaded(k, file, norm);
        if (builtin) record_spec(name, norm);
    }
    KILN_TRY(kiln_rt_module_get(l->mod, entry, out));
    /* kiln's kernels wait on their predecessor (pdl_wait) before reading its
     * output, so on sm_90+ they may launch before it ends; a policy's own
     * kernel may not, and runs after it */
    kiln_rt_func_set_pdl(*out, builtin && pdl_allowed(k));
    mark_used(k, name);
fail:
    pthread_mutex_unlock(&k->mu);
    if (st) kiln_error_context("kernel %s [%s]", name, defines ? defines : "");
    kiln_jit_unit_clear(&u);
    free(norm);
    return st;
}

kiln_status kiln_rt_kernels_prepare(kiln_rt_kernels *k, const kiln_jit_spec *specs, int n) {
    kiln_status st = KILN_OK;
    kiln_jit_unit *units = calloc((size_t)(n > 0 ? n : 1), sizeof *units);
    char **norms = calloc((size_t)(n > 0 ? n : 1), sizeof *norms);
    int nu = 0;
    pthread_mutex_lock(&k->mu);
    KILN_CHECK(units && norms, KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < n; i++) {
        const char *file = NULL, *source = NULL, *entry = NULL;
        char *norm = normalize(specs[i].defines);
        KILN_CHECK_ALLOC(norm);
        st = resolve(k, specs[i].name, norm, &file, &source, &entry, NULL);
        if (st) {
            free(norm);
            kiln_error_context("kernel %s", specs[i].name);
            goto fail;
        }
        bool dup = find_loaded(k, file, norm) != NULL;
        for (int j = 0; j < nu && !dup; j++)
            if (!strcmp(units[j].file, file) && !strcmp(units[j].defines, norm)) dup = true;
        if (dup) {
            free(norm);
            continue;
        }
        if (!find_override(k, specs[i].name)) record_spec(specs[i].name, norm);
        norms[nu] = norm;
        units[nu].file = file;
        units[nu].source = source;
        units[nu].defines = norm;
        nu++;
    }
    {
        kiln_jit_options o = make_opt(k);
        KILN_TRY(kiln_jit_compile(units, nu, &o));
    }
    for (int i = 0; i < nu; i++) KILN_TRY(add_loaded(k, units[i].file, units[i].defines, &units[i]));
fail:
    pthread_mutex_unlock(&k->mu);
    for (int i = 0; i < nu; i++) {
        kiln_jit_unit_clear(&units[i]);
        free(norms[i]);
    }
    free(units);
    free(norms);
    return st;
}

kiln_status kiln_rt_kernels_add_source(kiln_rt_kernels *k, const char *name, const char *source, const char *entry,
                                       const char *signature) {
    kiln_status st = KILN_OK;
    kiln_jit_arg kinds[64];
    int nk = 0;
    pthread_mutex_lock(&k->mu);
    KILN_CHECK(name && *name && source && entry && *entry, KILN_ERR_INVALID_ARGUMENT,
               "a policy kernel needs a name, CUDA source and an entry point");
    const kiln_jit_kernel_def *def = kiln_jit_find(name);
    if (signature) KILN_TRY(kiln_jit_signature_parse(signature, kinds, 64, &nk));
    if (def && signature)
        KILN_CHECK(!strcmp(signature, def->signature), KILN_ERR_INVALID_ARGUMENT,
                   "policy kernel %s replaces a registry kernel whose signature is \"%s\", not \"%s\"", name,
                   def->signature, signature);
    override *o = find_override(k, name);
    if (!o) {
        override z = {0};
        KILN_TRY(kiln_vec_push(&k->overrides, &z));
        o = &KILN_VEC_AT(&k->overrides, override, k->overrides.len - 1);
    } else {
        free(o->name);
        free(o->source);
        free(o->entry);
        free(o->signature);
        free(o->file);
    }
    o->name = kiln_strdup(name);
    o->source = kiln_strdup(source);
    o->entry = kiln_strdup(entry);
    o->signature = kiln_strdup(signature ? signature : (def ? def->signature : ""));
    /* the unit name carries a hash of the source so a changed source is a new unit */
    o->file = kiln_asprintf("policy/%s-%016llx.cu", name, (unsigned long long)kiln_hash64(source, strlen(source), 0));
    KILN_CHECK(o->name && o->source && o->entry && o->signature && o->file, KILN_ERR_OUT_OF_MEMORY,
               "out of host memory");
fail:
    pthread_mutex_unlock(&k->mu);
    return st;
}
