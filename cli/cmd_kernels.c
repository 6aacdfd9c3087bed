/*
 * cmd_kernels.c -- `kiln kernels [--arch sm_90] [--model DIR | --specs FILE]`:
 * list the CUDA kernel registry and compile every kernel (the registry's
 * example specializations, those a model needs, or those a run recorded with
 * $KILN_JIT_RECORD) for an arch, with no GPU needed, filling the JIT disk
 * cache. Prints kernel, specialization, registers, static shared memory,
 * stack, spills, compile ms and cache hit.
 */
#include "cli.h"
#include "kiln_rt.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>

int kiln_cmd_kernels(int argc, char **argv) {
    const char *arch = NULL, *model = NULL, *kv = "auto", *cache = NULL, *specs = NULL;
    int block_size = 16, threads = 0;
    bool list_only = false, no_cache = false;
    cli_opt opts[] = {
        {"arch", CLI_STR, &arch, "SM", "target architecture (default: the GPU's, else sm_90)"},
        {"model", CLI_STR, &model, "DIR|NAME", "compile only what this model needs (its config.json, or a built-in config)"},
        {"specs", CLI_STR, &specs, "FILE", "compile the specializations of FILE (\"name<TAB>defines\" lines, as "
                                              "$KILN_JIT_RECORD writes them)"},
        {"kv-cache-dtype", CLI_STR, &kv, "T", "KV cache dtype for --model: auto, fp8_e4m3, fp8_e5m2"},
        {"block-size", CLI_INT, &block_size, "N", "KV block size for --model (default 16)"},
        {"cache-dir", CLI_STR, &cache, "DIR", "JIT cache directory (default $KILN_CACHE_DIR or ~/.cache/kiln/jit)"},
        {"threads", CLI_INT, &threads, "N", "parallel compiles (default: CPUs)"},
        {"no-cache", CLI_FLAG, &no_cache, NULL, "neither read nor write the disk cache"},
        {"list", CLI_FLAG, &list_only, NULL, "list the registry without compiling"},
        CLI_OPT_END};
    cli_opt *tables[] = {opts, NULL};
    int n_pos = 0;
    int r = cli_parse(argc, argv, "kernels", "List the CUDA kernel registry and compile it (fills the JIT cache).",
                      tables, NULL, 0, &n_pos);
    if (r) return r == 3 ? 0 : r;

    int n_reg = 0;
    const kiln_jit_kernel_def *reg = kiln_jit_registry(&n_reg);
    if (list_only) {
        printf("%-18s %-26s %-28s %s\n", "kernel", "file", "entry", "parameters");
        for (int i = 0; i < n_reg; i++) {
            char params[256] = "";
            for (int p = 0; p < KILN_JIT_MAX_PARAMS && reg[i].params[p].name; p++)
                snprintf(params + strlen(params), sizeof params - strlen(params), "%s%s=%s", p ? " " : "",
                         reg[i].params[p].name, reg[i].params[p].values);
            printf("%-18s %-26s %-28s %s\n", reg[i].name, reg[i].file, reg[i].entry, params);
        }
        return 0;
    }
    if (!kiln_rt_built_with_cuda()) {
        fprintf(stderr, "kiln kernels: this build has no CUDA backend\n");
        return 1;
    }
    char arch_buf[16];
    if (!arch) {
        arch = "sm_90";
        int nd = 0;
        if (kiln_rt_device_count(&nd) == KILN_OK && nd > 0) {
            kiln_rt_device *d = NULL;
            if (kiln_rt_device_open(0, &d) == KILN_OK) {
                snprintf(arch_buf, sizeof arch_buf, "%s", kiln_rt_device_get_info(d)->arch);
                arch = arch_buf;
                kiln_rt_device_close(d);
            }
        }
        kiln_clear_error();
    }

    /* (registry name, defines) pairs to compile */
    typedef struct row { const kiln_jit_kernel_def *def; char defines[128]; int unit; } row;
    enum { MAX_ROWS = 2048 };
    row *rows = calloc(MAX_ROWS, sizeof *rows);
    kiln_jit_unit *units = calloc(MAX_ROWS, sizeof *units);
    int n_rows = 0, ret = 1;
    if (!rows || !units) {
        fprintf(stderr, "kiln kernels: out of memory\n");
        goto out;
    }
    if (model && specs) {
        fprintf(stderr, "kiln kernels: --model and --specs exclude each other\n");
        goto out;
    }
    if (specs) {
        FILE *f = fopen(specs, "r");
        if (!f) {
            fprintf(stderr, "kiln kernels: cannot open --specs file %s\n", specs);
            goto out;
        }
        char line[512];
        for (int ln = 1; fgets(line, sizeof line, f); ln++) {
            line[strcspn(line, "\r\n")] = 0;
            if (!line[0] || line[0] == '#') continue;
            char *tab = strchr(line, '\t');
            if (tab) *tab = 0;
            const char *defs = tab ? tab + 1 : "";
            const kiln_jit_kernel_def *def = kiln_jit_find(line);
            if (!def || strlen(defs) >= sizeof rows[0].defines) {
                fprintf(stderr, "kiln kernels: %s line %d: %s\n", specs, ln,
                        def ? "specialization too long" : "no such registry kernel");
                fclose(f);
                goto out;
            }
            bool seen = false; /* a recording repeats what each program compiled */
            for (int i = 0; i < n_rows && !seen; i++) seen = rows[i].def == def && !strcmp(rows[i].defines, defs);
            if (seen) continue;
            if (n_rows == MAX_ROWS) {
                fprintf(stderr, "kiln kernels: %s: more than %d specializations\n", specs, MAX_ROWS);
                fclose(f);
                goto out;
            }
            rows[n_rows].def = def;
            snprintf(rows[n_rows].defines, sizeof rows[n_rows].defines, "%s", defs);
            n_rows++;
        }
        fclose(f);
    } else if (model) {
        kiln_model_config cfg;
        char *dir = NULL;
        memset(&cfg, 0, sizeof cfg);
        /* a model directory, org/name in the HF cache, or a built-in config name (as kiln bench takes them) */
        const char *builtin = kiln_path_exists(model) ? NULL : kiln_builtin_config(model);
        kiln_status st = builtin ? kiln_model_config_parse(builtin, model, &cfg) : kiln_model_resolve(model, &dir);
        if (!builtin && st == KILN_OK) st = kiln_model_config_load(dir, &cfg);
        free(dir);
        if (st != KILN_OK) {
            if (!builtin && !strchr(model, '/'))
                kiln_error_context("\"%s\" is neither a model directory nor a built-in config (%s)", model,
                                   kiln_builtin_config_names());
            ret = cli_fail("kernels");
            goto out;
        }
        kiln_jit_model m = {cfg.dtype == KILN_DTYPE_F16 ? KILN_DTYPE_F16 : KILN_DTYPE_BF16, KILN_DTYPE_INVALID,
                            cfg.head_dim, cfg.num_heads, cfg.num_kv_heads, block_size,
                            cfg.hidden_act && strstr(cfg.hidden_act, "gelu"), false, false, false, 0, 0};
        m.kv = !strcmp(kv, "auto") ? m.act : !strcmp(kv, "fp8") ? KILN_DTYPE_FP8_E4M3 : kiln_dtype_from_name(kv);
        m.kv_calib = m.kv == KILN_DTYPE_FP8_E4M3; /* what the engine prepares (start-up calibration) */
        m.hidden = cfg.num_heads * cfg.head_dim, m.intermediate = m.gelu ? 0 : cfg.intermediate_size;
        int sm = 0; /* sm_90+: also the early-trigger copies small decode steps run (kiln_gpu_prepare) */
        m.pdl_early = sscanf(arch, "sm_%d", &sm) == 1 && sm >= 90 && KILN_PDL_EARLY_MAX_SEQS_DEFAULT > 0;
        kiln_model_config_free(&cfg);
        static kiln_jit_spec_list l; /* (~37 KiB) */
        if (kiln_jit_model_specs(&m, &l) != KILN_OK) {
            ret = cli_fail("kernels");
            goto out;
        }
        if (l.dropped)
            fprintf(stderr, "kiln kernels: the model's warm set is full (%d specializations); the others (%d asked "
                            "for) are not listed and compile on first use\n", l.n, l.dropped);
        for (int i = 0; i < l.n && n_rows < MAX_ROWS; i++) {
            rows[n_rows].def = kiln_jit_find(l.specs[i].name);
            snprintf(rows[n_rows].defines, sizeof rows[n_rows].defines, "%s", l.specs[i].defines);
            n_rows++;
        }
    } else {
        for (int i = 0; i < n_reg; i++) {
            char *ex = kiln_strdup(reg[i].examples), *save = NULL;
            bool any = false;
            for (char *t = strtok_r(ex, ";", &save); t && n_rows < MAX_ROWS; t = strtok_r(NULL, ";", &save)) {
                rows[n_rows].def = &reg[i];
                snprintf(rows[n_rows].defines, sizeof rows[n_rows].defines, "%s", t);
                n_rows++;
                any = true;
            }
            if (!any && n_rows < MAX_ROWS) {
                rows[n_rows].def = &reg[i];
                rows[n_rows].defines[0] = 0;
                n_rows++;
            }
            free(ex);
        }
    }
    /* one unit per (file, defines) */
    int n_units = 0;
    for (int i = 0; i < n_rows; i++) {
        if (kiln_jit_check_defines(rows[i].def, rows[i].defines) != KILN_OK) {
            ret = cli_fail("kernels");
            goto out;
        }
        int u = -1;
        for (int j = 0; j < n_units; j++)
            if (!strcmp(units[j].file, rows[i].def->file) && !strcmp(units[j].defines, rows[i].defines)) u = j;
        if (u < 0) {
            u = n_units++;
            units[u].file = rows[i].def->file;
            units[u].defines = rows[i].defines;
        }
        rows[i].unit = u;
    }
    kiln_jit_options opt = {arch, cache, NULL, no_cache, threads};
    double t0 = kiln_now_sec();
    kiln_status st = kiln_jit_compile(units, n_units, &opt);
    double wall = kiln_now_sec() - t0;
    char *cdir = kiln_jit_cache_dir(&opt);
    printf("arch %s, cache %s%s\n", arch, no_cache ? "(off) " : "", cdir);
    free(cdir);
    printf("%-17s %-46s %5s %6s %6s %6s %9s %5s\n", "kernel", "specialization", "regs", "smem", "stack", "spill",
           "compile", "cache");
    int hits = 0;
    for (int i = 0; i < n_rows; i++) {
        kiln_jit_unit *u = &units[rows[i].unit];
        const kiln_jit_func_info *fi = NULL;
        for (int f = 0; f < u->n_funcs; f++)
            if (!strcmp(u->funcs[f].entry, rows[i].def->entry)) fi = &u->funcs[f];
        if (u->status != KILN_OK || !fi) {
            printf("%-17s %-46s FAILED\n", rows[i].def->name, rows[i].defines);
            continue;
        }
        printf("%-17s %-46s %5d %6d %6d %6d %7.0fms %5s\n", rows[i].def->name, rows[i].defines[0] ? rows[i].defines : "-",
               fi->regs, fi->smem, fi->stack, fi->spill_stores + fi->spill_loads, u->compile_ms,
               u->cache_hit ? "hit" : "miss");
    }
    for (int j = 0; j < n_units; j++) hits += units[j].cache_hit;
    printf("%d units (%d from cache) in %.0f ms\n", n_units, hits, wall * 1e3);
    for (int j = 0; j < n_units; j++) kiln_jit_unit_clear(&units[j]);
    ret = st ? cli_fail("kernels") : 0;
out:
    free(rows);
    free(units);
    return ret;
}
