/*
 * jit.c -- NVRTC compilation of kernel sources with specialization defines,
 * in parallel, with a disk cache of CUBINs.
 *
 * Sources come from the copies embedded in libkiln (kernel_src/...), or from
 * $KILN_KERNEL_DIR (or opt->kernel_dir) when set; `#include "x.cuh"` lines
 * are resolved the same way and handed to NVRTC as in-memory headers, so no
 * CUDA include directory is needed. The cache key hashes the source, every
 * included header, the defines, the options, the arch and the NVRTC
 * version; entries are written atomically as <cache_dir>/<key>.kjit
 * ("KILNJIT1" header with the ptxas resource report, then the CUBIN).
 *
 * Ownership: results in kiln_jit_unit are owned by the unit
 * (kiln_jit_unit_clear). Thread-safety: kiln_jit_compile may be called from
 * several threads; each call compiles its units on its own thread pool.
 */
#include "rt_internal.h"
#include "embed.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define JIT_MAGIC "KILNJIT1\n"
#define JIT_MAX_HEADERS 16
#define JIT_KEY_VERSION "kiln-jit-3"

kiln_status kiln_jit_nvrtc_version(int *major, int *minor) {
    kiln_status st = KILN_OK;
    KILN_TRY(kiln_rt_load_nvrtc());
    KILN_CHECK_NVRTC(kiln_nvrtc.nvrtcVersion(major, minor));
fail:
    return st;
}

char *kiln_jit_cache_dir(const kiln_jit_options *opt) {
    if (opt && opt->cache_dir && *opt->cache_dir) return kiln_strdup(opt->cache_dir);
    const char *e = getenv("KILN_CACHE_DIR");
    if (e && *e) return kiln_strdup(e);
    const char *home = getenv("HOME");
    if (home && *home) return kiln_asprintf("%s/.cache/kiln/jit", home);
    return kiln_strdup("/tmp/kiln-jit");
}

static const char *kernel_dir(const kiln_jit_options *opt) {
    if (opt && opt->kernel_dir && *opt->kernel_dir) return opt->kernel_dir;
    const char *e = getenv("KILN_KERNEL_DIR");
    return (e && *e) ? e : NULL;
}

/* Load "kernel_src/x" from the kernel dir or the embedded copy. */
static kiln_status load_text(const char *kdir, const char *path, char **out) {
    if (kdir) {
        const char *rel = kiln_str_starts_with(path, "kernel_src/") ? path + strlen("kernel_src/") : path;
        char *full = kiln_path_join(kdir, rel);
        if (!full) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
        kiln_status st = kiln_read_file(full, out, NULL);
        if (st) kiln_error_context("KILN_KERNEL_DIR=%s", kdir);
        free(full);
        return st;
    }
    const kiln_embedded_file *f = kiln_embedded_find(path);
    if (!f) return KILN_FAIL(KILN_ERR_NOT_FOUND, "kernel source %s is not embedded in this build", path);
    *out = kiln_strndup(f->data, f->len);
    if (!*out) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    return KILN_OK;
}

typedef struct hdr_set {
    char *names[JIT_MAX_HEADERS];
    char *texts[JIT_MAX_HEADERS];
    int n;
} hdr_set;

static void hdr_free(hdr_set *h) {
    for (int i = 0; i < h->n; i++) {
        free(h->names[i]);
        free(h->texts[i]);
    }
    h->n = 0;
}

/* Every `#include "name"` of text (recursively), resolved under kernel_src/. */
static kiln_status collect_includes(const char *kdir, const char *text, hdr_set *h, int depth) {
    kiln_status st = KILN_OK;
    if (depth > 8) return KILN_FAIL(KILN_ERR_FORMAT, "kernel includes nest too deep");
    for (const char *p = text; p && *p;) {
        const char *line = p;
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : NULL;
        while (*line == ' ' || *line == '\t') line++;
        if (*line != '#') continue;
        line++;
        while (*line == ' ' || *line == '\t') line++;
        if (strncmp(line, "include", 7)) continue;
        line += 7;
        while (*line == ' ' || *line == '\t') line++;
        if (*line != '"') continue; /* <system> includes are NVRTC built-ins or an error */
        const char *e = strchr(line + 1, '"');
        if (!e || (nl && e > nl)) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(e - line - 1), line + 1);
        bool have = false;
        for (int i = 0; i < h->n; i++)
            if (!strcmp(h->names[i], name)) have = true;
        if (have) continue;
        KILN_CHECK(h->n < JIT_MAX_HEADERS, KILN_ERR_LIMIT, "too many kernel headers");
        char *path = kiln_asprintf("kernel_src/%s", name), *t = NULL;
        KILN_CHECK_ALLOC(path);
        st = load_text(kdir, path, &t);
        free(path);
        if (st) goto fail;
        h->names[h->n] = kiln_strdup(name);
        h->texts[h->n] = t;
        h->n++;
        KILN_TRY(collect_includes(kdir, t, h, depth + 1));
    }
fail:
    return st;
}

/* ---------------------------------------------------------------- ptxas log */

static kiln_jit_func_info *find_or_add(kiln_jit_unit *u, const char *name) {
    for (int i = 0; i < u->n_funcs; i++)
        if (!strcmp(u->funcs[i].entry, name)) return &u->funcs[i];
    kiln_jit_func_info *f = realloc(u->funcs, sizeof *f * (size_t)(u->n_funcs + 1));
    if (!f) return NULL;
    u->funcs = f;
    f = &u->funcs[u->n_funcs++];
    memset(f, 0, sizeof *f);
    snprintf(f->entry, sizeof f->entry, "%s", name);
    return f;
}

static void parse_ptxas(kiln_jit_unit *u, const char *log) {
    char entry[96] = "", props[96] = "";
    for (const char *p = log; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)KILN_MIN(len, sizeof line - 1), p);
        p = nl ? nl + 1 : NULL;
        const char *s;
        if ((s = strstr(line, "Compiling entry function '"))) {
            s += strlen("Compiling entry function '");
            const char *e = strchr(s, '\'');
            snprintf(entry, sizeof entry, "%.*s", e ? (int)(e - s) : 0, s);
            find_or_add(u, entry);
        } else if ((s = strstr(line, "Function properties for "))) {
            snprintf(props, sizeof props, "%s", s + strlen("Function properties for "));
        } else if (strstr(line, "bytes stack frame")) {
            kiln_jit_func_info *f = NULL;
            for (int i = 0; i < u->n_funcs; i++)
                if (!strcmp(u->funcs[i].entry, props)) f = &u->funcs[i];
            if (f) {
                const char *q = strstr(line, ".");
                sscanf(q ? q + 1 : line, " %d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &f->stack,
                       &f->spill_stores, &f->spill_loads);
            }
        } else if ((s = strstr(line, "Used ")) && entry[0]) {
            kiln_jit_func_info *f = find_or_add(u, entry);
            if (f) {
                sscanf(s, "Used %d registers", &f->regs);
                const char *sm = strstr(line, " bytes smem");
                if (sm) {
                    const char *b = sm;
                    while (b > line && (isdigit((unsigned char)b[-1]))) b--;
                    f->smem = atoi(b);
                }
            }
        }
    }
}

/* ------------------------------------------------------------------ cache */

static kiln_status cache_read(const char *path, kiln_jit_unit *u, bool *hit) {
    char *data = NULL;
    size_t len = 0;
    *hit = false;
    if (kiln_read_file(path, &data, &len) != KILN_OK) {
        kiln_clear_error();
        return KILN_OK;
    }
    const char *p = data, *end = data + len;
    int n = 0;
    size_t clen = 0;
    if (len < strlen(JIT_MAGIC) || memcmp(p, JIT_MAGIC, strlen(JIT_MAGIC))) goto bad;
    p += strlen(JIT_MAGIC);
    if (sscanf(p, "n_funcs %d\n", &n) != 1 || n < 0 || n > 64) goto bad;
    p = strchr(p, '\n') + 1;
    for (int i = 0; i < n; i++) {
        kiln_jit_func_info fi = {0};
        if (p >= end || sscanf(p, "F %95s %d %d %d %d %d\n", fi.entry, &fi.regs, &fi.smem, &fi.stack, &fi.spill_stores,
                               &fi.spill_loads) != 6)
            goto bad;
        kiln_jit_func_info *f = find_or_add(u, fi.entry);
        if (!f) goto bad;
        *f = fi;
        p = strchr(p, '\n');
        if (!p) goto bad;
        p++;
    }
    if (p >= end || sscanf(p, "cubin %zu\n", &clen) != 1) goto bad;
    p = strchr(p, '\n');
    if (!p) goto bad;
    p++;
    if ((size_t)(end - p) != clen) goto bad;
    u->cubin = malloc(clen);
    if (!u->cubin) goto bad;
    memcpy(u->cubin, p, clen);
    u->cubin_len = clen;
    *hit = true;
    free(data);
    return KILN_OK;
bad: /* a damaged entry is recompiled and rewritten */
    KILN_WARN("JIT cache entry %s is damaged; recompiling", path);
    free(u->funcs);
    u->funcs = NULL;
    u->n_funcs = 0;
    free(data);
    return KILN_OK;
}

static kiln_status cache_write(const char *dir, const char *path, const kiln_jit_unit *u) {
    kiln_status st = KILN_OK;
    kiln_buf b = {0};
    KILN_TRY(kiln_mkdirs(dir));
    KILN_TRY(kiln_buf_puts(&b, JIT_MAGIC));
    KILN_TRY(kiln_buf_printf(&b, "n_funcs %d\n", u->n_funcs));
    for (int i = 0; i < u->n_funcs; i++) {
        const kiln_jit_func_info *f = &u->funcs[i];
        KILN_TRY(kiln_buf_printf(&b, "F %s %d %d %d %d %d\n", f->entry, f->regs, f->smem, f->stack, f->spill_stores,
                                 f->spill_loads));
    }
    KILN_TRY(kiln_buf_printf(&b, "cubin %zu\n", u->cubin_len));
    KILN_TRY(kiln_buf_append(&b, u->cubin, u->cubin_len));
    KILN_TRY(kiln_write_file_atomic(path, b.data, b.len));
fail:
    kiln_buf_free(&b);
    return st;
}

/* ---------------------------------------------------------------- compile */

typedef struct jit_ctx {
    kiln_jit_unit *units;
    const kiln_jit_options *opt;
    const char *kdir;
    char *cache_dir;
    int nv_major, nv_minor;
} jit_ctx;

/* First "file(line): error" of an NVRTC log, for the message head. */
static void first_error(const char *log, char *where, size_t n) {
    const char *e = strstr(log, ": error");
    if (!e) e = strstr(log, "error");
    where[0] = 0;
    if (!e) return;
    const char *ls = e;
    while (ls > log && ls[-1] != '\n') ls--;
    const char *lp = memchr(ls, '(', (size_t)(e - ls));
    if (lp) {
        int line = atoi(lp + 1);
        snprintf(where, n, "%.*s:%d", (int)(lp - ls), ls, line);
    }
}

static kiln_status compile_unit(jit_ctx *c, kiln_jit_unit *u) {
    kiln_status st = KILN_OK;
    char *src = NULL, *log = NULL, *cpath = NULL;
    hdr_set h = {{0}, {0}, 0};
    const char *opts[48];
    char *optbuf[48] = {0};
    int n_opt = 0;
    nvrtcProgram prog = NULL;
    double t0 = kiln_now_sec();

    if (u->source) {
        src = kiln_strdup(u->source);
        KILN_CHECK_ALLOC(src);
    } else {
        KILN_TRY(load_text(c->kdir, u->file, &src));
    }
    KILN_TRY(collect_includes(c->kdir, src, &h, 0));

    const char *arch = kiln_jit_unit_arch(u->file, c->opt->arch); /* sm_90a for the files that need it */
    optbuf[n_opt] = kiln_asprintf("--gpu-architecture=%s", arch);
    KILN_CHECK_ALLOC(optbuf[n_opt]);
    opts[n_opt] = optbuf[n_opt];
    n_opt++;
    opts[n_opt++] = "-std=c++17";
    opts[n_opt++] = "-Xptxas=-v";
    opts[n_opt++] = "-DKILN_JIT=1";
    for (const char *p = u->defines ? u->defines : ""; *p;) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        KILN_CHECK(n_opt < 46, KILN_ERR_LIMIT, "too many defines");
        optbuf[n_opt] = kiln_asprintf("-D%.*s", (int)len, p);
        KILN_CHECK_ALLOC(optbuf[n_opt]);
        opts[n_opt] = optbuf[n_opt];
        n_opt++;
        p += len;
    }

    /* cache key */
    {
        uint64_t k = kiln_hash64(JIT_KEY_VERSION, strlen(JIT_KEY_VERSION), 0);
        k = kiln_hash64(u->file, strlen(u->file), k);
        k = kiln_hash64(src, strlen(src), k);
        for (int i = 0; i < h.n; i++) {
            k = kiln_hash64(h.names[i], strlen(h.names[i]) + 1, k);
            k = kiln_hash64(h.texts[i], strlen(h.texts[i]), k);
        }
        for (int i = 0; i < n_opt; i++) k = kiln_hash64(opts[i], strlen(opts[i]) + 1, k);
        int ver[2] = {c->nv_major, c->nv_minor};
        k = kiln_hash64(ver, sizeof ver, k);
        u->key = k;
    }
    if (!c->opt->no_cache && c->cache_dir) {
        cpath = kiln_asprintf("%s/%016llx.kjit", c->cache_dir, (unsigned long long)u->key);
        KILN_CHECK_ALLOC(cpath);
        bool hit = false;
        KILN_TRY(cache_read(cpath, u, &hit));
        if (hit) {
            /* a hit refreshes the entry's modification time (ignored where the cache is read-only), so
             * entries no run uses can be pruned by age: find DIR -name '*.kjit' -mtime +30 -delete */
            (void)utimensat(AT_FDCWD, cpath, NULL, 0);
            u->cache_hit = true;
            goto done;
        }
    }

    KILN_CHECK_NVRTC(kiln_nvrtc.nvrtcCreateProgram(&prog, src, u->file, h.n, (const char *const *)h.texts,
                                                   (const char *const *)h.names));
    {
        nvrtcResult r = kiln_nvrtc.nvrtcCompileProgram(prog, n_opt, opts);
        size_t ls = 0;
        kiln_nvrtc.nvrtcGetProgramLogSize(prog, &ls);
        log = calloc(1, ls + 1);
        KILN_CHECK_ALLOC(log);
        if (ls) kiln_nvrtc.nvrtcGetProgramLog(prog, log);
        if (r != NVRTC_SUCCESS) {
            char where[300];
            first_error(log, where, sizeof where);
            st = KILN_FAIL(KILN_ERR_FORMAT, "%s: compiling %s [%s] for %s failed (%s):\n%s",
                           where[0] ? where : u->file, u->file, u->defines ? u->defines : "", arch,
                           kiln_nvrtc.nvrtcGetErrorString(r), log);
            goto fail;
        }
    }
    parse_ptxas(u, log);
    KILN_CHECK_NVRTC(kiln_nvrtc.nvrtcGetCUBINSize(prog, &u->cubin_len));
    u->cubin = malloc(u->cubin_len ? u->cubin_len : 1);
    KILN_CHECK_ALLOC(u->cubin);
    KILN_CHECK_NVRTC(kiln_nvrtc.nvrtcGetCUBIN(prog, u->cubin));
    if (cpath) {
        kiln_status ws = cache_write(c->cache_dir, cpath, u);
        if (ws) {
            KILN_WARN("cannot write the JIT cache (%s); continuing", kiln_last_error());
            kiln_clear_error();
        }
    }
done:
    u->compile_ms = (kiln_now_sec() - t0) * 1e3;
fail:
    if (prog) kiln_nvrtc.nvrtcDestroyProgram(&prog);
    for (int i = 0; i < n_opt; i++) free(optbuf[i]);
    hdr_free(&h);
    free(src);
    free(log);
    free(cpath);
    return st;
}

static void compile_task(void *vctx, int64_t i) {
    jit_ctx *c = vctx;
    kiln_jit_unit *u = &c->units[i];
    u->status = compile_unit(c, u);
    if (u->status) u->error = kiln_strdup(kiln_last_error());
}

kiln_status kiln_jit_compile(kiln_jit_unit *units, int n, const kiln_jit_options *opt) {
    kiln_status st = KILN_OK;
    kiln_pool *pool = NULL;
    jit_ctx c = {units, opt, kernel_dir(opt), NULL, 0, 0};
    KILN_CHECK(opt && opt->arch && kiln_str_starts_with(opt->arch, "sm_"), KILN_ERR_INVALID_ARGUMENT,
               "JIT: an arch like sm_90 is required");
    KILN_TRY(kiln_jit_nvrtc_version(&c.nv_major, &c.nv_minor));
    c.cache_dir = kiln_jit_cache_dir(opt);
    for (int i = 0; i < n; i++) {
        free(units[i].error);
        units[i].error = NULL;
        units[i].status = KILN_OK;
    }
    if (n > 1) {
        int nt = opt->n_threads > 0 ? opt->n_threads : 0;
        KILN_TRY(kiln_pool_create(nt, &pool));
    }
    kiln_pool_for(pool, n, compile_task, &c);
    for (int i = 0; i < n; i++)
        if (units[i].status) {
            st = KILN_FAIL(units[i].status, "%s", units[i].error ? units[i].error : "JIT compile failed");
            break;
        }
fail:
    kiln_pool_destroy(pool);
    free(c.cache_dir);
    return st;
}

void kiln_jit_unit_clear(kiln_jit_unit *u) {
    free(u->cubin);
    free(u->funcs);
    free(u->error);
    u->cubin = NULL;
    u->funcs = NULL;
    u->error = NULL;
    u->cubin_len = 0;
    u->n_funcs = 0;
}

kiln_status kiln_jit_compile_source(const char *name, const char *source, const char *defines,
                                    const kiln_jit_options *opt, kiln_jit_unit *out) {
    memset(out, 0, sizeof *out);
    out->file = name;
    out->source = source;
    out->defines = defines;
    return kiln_jit_compile(out, 1, opt);
}
