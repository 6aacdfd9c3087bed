/* test_jit.c -- the kernel registry compiles through NVRTC for sm_80, sm_89
 * and sm_90 (no GPU needed), the disk cache hits on a second run, compile
 * errors name file and line, KILN_KERNEL_DIR sources and policy-provided
 * sources go through the same path. Skips (77) when libnvrtc cannot be
 * loaded. */
#include "kiln_rt.h"
#include "kt.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static bool have_nvrtc(void) {
    if (!kiln_rt_built_with_cuda()) return false;
    if (kiln_rt_load_nvrtc() != KILN_OK) return false;
    return true;
}

static char *temp_dir(const char *tag) {
    char *t = kiln_asprintf("%s/jit-test-%s-XXXXXX", KT_BINARY_DIR, tag);
    if (!t || !mkdtemp(t)) {
        free(t);
        return NULL;
    }
    return t;
}

static void rm_rf(const char *dir) {
    char *cmd = kiln_asprintf("rm -rf '%s'", dir);
    if (cmd && system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", dir);
    free(cmd);
}

/* All (file, defines) units of the registry's examples, deduplicated. */
typedef struct unit_list {
    kiln_jit_unit u[256];
    char *defs[256];
    const char *entries[256][8];
    int n_entries[256];
    int n;
} unit_list;

static void add_unit(unit_list *l, const char *file, const char *defines, const char *entry) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->u[i].file, file) && !strcmp(l->defs[i], defines)) {
            if (l->n_entries[i] < 8) l->entries[i][l->n_entries[i]++] = entry;
            return;
        }
    if (l->n >= 256) return;
    l->defs[l->n] = kiln_strdup(defines);
    memset(&l->u[l->n], 0, sizeof l->u[l->n]);
    l->u[l->n].file = file;
    l->u[l->n].defines = l->defs[l->n];
    l->entries[l->n][0] = entry;
    l->n_entries[l->n] = 1;
    l->n++;
}

/* every example of the registry; one_per_file: only the first unit of each source file (the sanitizer pass of
 * scripts/test.sh, $KT_JIT_ONE_PER_FILE: the host code a unit goes through is the same for all of a file's
 * specializations, which the plain pass compiles for every arch) */
static void build_units(unit_list *l, bool one_per_file) {
    int n = 0;
    const kiln_jit_kernel_def *reg = kiln_jit_registry(&n);
    l->n = 0;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < l->n && one_per_file; j++) seen |= !strcmp(l->u[j].file, reg[i].file);
        if (seen) continue;
        char *ex = kiln_strdup(reg[i].examples);
        char *save = NULL;
        bool any = false;
        for (char *t = strtok_r(ex, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
            KT_CHECKF(kiln_jit_check_defines(&reg[i], t) == KILN_OK, "%s [%s]: %s", reg[i].name, t, kiln_last_error());
            add_unit(l, reg[i].file, t, reg[i].entry);
            any = true;
            if (one_per_file) break;
        }
        if (!any) { /* no parameters */
            KT_CHECK(kiln_jit_check_defines(&reg[i], "") == KILN_OK);
            add_unit(l, reg[i].file, "", reg[i].entry);
        }
        free(ex);
    }
}

static void free_units(unit_list *l) {
    for (int i = 0; i < l->n; i++) {
        kiln_jit_unit_clear(&l->u[i]);
        free(l->defs[i]);
    }
    l->n = 0;
}

KT_TEST(test_registry_compiles_and_caches) {
    if (!have_nvrtc()) KT_SKIP("libnvrtc cannot be loaded: %s", kiln_last_error());
    static const char *archs[] = {"sm_80", "sm_89", "sm_90"};
    /* $KT_JIT_ARCH=sm_90 compiles for that one only (the sanitizer pass of
     * scripts/test.sh: the host code is the same for every arch) */
    const char *only = getenv("KT_JIT_ARCH"), *opf = getenv("KT_JIT_ONE_PER_FILE");
    const bool one_per_file = opf && *opf && strcmp(opf, "0");
    char *dir = temp_dir("cache");
    KT_REQUIRE(dir);
    static unit_list l;
    for (size_t a = 0; a < KILN_ARRAY_LEN(archs); a++) {
        if (only && *only && strcmp(only, archs[a])) continue;
        build_units(&l, one_per_file);
        KT_REQUIRE(l.n > 0);
        kiln_jit_options opt = {archs[a], dir, NULL, false, 0};
        double t0 = kiln_now_sec();
        kiln_status s = kiln_jit_compile(l.u, l.n, &opt);
        KT_CHECKF(s == KILN_OK, "%s: %s", archs[a], kiln_last_error());
        double cold = kiln_now_sec() - t0;
        uint64_t keys[256];
        size_t lens[256];
        for (int i = 0; i < l.n; i++) {
            KT_CHECKF(l.u[i].status == KILN_OK, "%s %s [%s]: %s", archs[a], l.u[i].file, l.u[i].defines,
                      l.u[i].error ? l.u[i].error : "");
            KT_CHECK(!l.u[i].cache_hit);
            KT_CHECK(l.u[i].cubin && l.u[i].cubin_len > 0);
            keys[i] = l.u[i].key;
            lens[i] = l.u[i].cubin_len;
            for (int e = 0; e < l.n_entries[i]; e++) {
                bool found = false;
                for (int f = 0; f < l.u[i].n_funcs; f++)
                    if (!strcmp(l.u[i].funcs[f].entry, l.entries[i][e])) {
                        found = true;
                        KT_CHECKF(l.u[i].funcs[f].regs > 0, "%s: no register count parsed", l.entries[i][e]);
                        KT_CHECKF(l.u[i].funcs[f].spill_stores == 0 || strcmp(archs[a], "sm_90"),
                                  "%s [%s] spills %d bytes on sm_90", l.entries[i][e], l.u[i].defines,
                                  l.u[i].funcs[f].spill_stores);
                    }
                KT_CHECKF(found, "%s [%s] for %s: entry %s missing from the compile report", l.u[i].file,
                          l.u[i].defines, archs[a], l.entries[i][e]);
            }
        }
        free_units(&l);
        /* second run: every unit from the disk cache, same key and cubin */
        build_units(&l, one_per_file);
        t0 = kiln_now_sec();
        s = kiln_jit_compile(l.u, l.n, &opt);
        double warm = kiln_now_sec() - t0;
        KT_CHECKF(s == KILN_OK, "%s warm: %s", archs[a], kiln_last_error());
        for (int i = 0; i < l.n; i++) {
            KT_CHECKF(l.u[i].cache_hit, "%s [%s] missed the cache", l.u[i].file, l.u[i].defines);
            KT_CHECK(l.u[i].key == keys[i] && l.u[i].cubin_len == lens[i]);
            KT_CHECK(l.u[i].n_funcs >= l.n_entries[i]);
        }
        fprintf(stderr, "  %s: %d units, cold %.2f s, warm %.1f ms\n", archs[a], l.n, cold, warm * 1e3);
        free_units(&l);
    }
    rm_rf(dir);
    free(dir);
}

KT_TEST(test_compile_error_names_file_and_line) {
    if (!have_nvrtc()) KT_SKIP("libnvrtc cannot be loaded");
    const char *src = "#include \"kiln_common.cuh\"\n"
                      "extern \"C\" __global__ void k(float *x) {\n"
                      "    x[0] = undefined_thing;\n"
                      "}\n";
    kiln_jit_options opt = {"sm_90", NULL, NULL, true, 1};
    kiln_jit_unit u;
    KT_ERR(kiln_jit_compile_source("policy/bad.cu", src, "", &opt, &u), KILN_ERR_FORMAT, "policy/bad.cu:3");
    KT_CHECK(strstr(kiln_last_error(), "undefined_thing") != NULL);
    kiln_jit_unit_clear(&u);
}

KT_TEST(test_policy_source_compiles) {
    if (!have_nvrtc()) KT_SKIP("libnvrtc cannot be loaded");
    const char *src = "#include \"kiln_common.cuh\"\n"
                      "typedef ACT act_t;\n"
                      "extern \"C\" __global__ void my_rmsnorm(act_t *out, const act_t *x, const act_t *w, int rows,\n"
                      "                                        int dim, float eps) {\n"
                      "    __shared__ float s[32];\n"
                      "    const act_t *r = x + (size_t)blockIdx.x * dim;\n"
                      "    float ss = 0;\n"
                      "    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += to_f32(r[i]) * to_f32(r[i]);\n"
                      "    ss = block_sum(ss, s);\n"
                      "    float k = rsqrtf(ss / dim + eps);\n"
                      "    for (int i = threadIdx.x; i < dim; i += blockDim.x)\n"
                      "        out[(size_t)blockIdx.x * dim + i] = from_f32<act_t>(to_f32(r[i]) * k * to_f32(w[i]));\n"
                      "}\n";
    char *dir = temp_dir("policy");
    KT_REQUIRE(dir);
    kiln_jit_options opt = {"sm_90", dir, NULL, false, 1};
    kiln_jit_unit u;
    KT_OK(kiln_jit_compile_source("policy/my_rmsnorm.cu", src, "ACT=bf16", &opt, &u));
    KT_CHECK(!u.cache_hit && u.cubin_len > 0);
    KT_CHECK(u.n_funcs == 1 && !strcmp(u.funcs[0].entry, "my_rmsnorm"));
    /* the entry made 20 years old: a hit refreshes its modification time (pruning by age) */
    char *path = kiln_asprintf("%s/%016llx.kjit", dir, (unsigned long long)u.key);
    KT_REQUIRE(path);
    const struct timespec old_t[2] = {{946684800, 0}, {946684800, 0}}; /* 2000-01-01 */
    KT_CHECK(utimensat(AT_FDCWD, path, old_t, 0) == 0);
    kiln_jit_unit_clear(&u);
    KT_OK(kiln_jit_compile_source("policy/my_rmsnorm.cu", src, "ACT=bf16", &opt, &u));
    KT_CHECK(u.cache_hit);
    struct stat sb;
    KT_CHECK(stat(path, &sb) == 0 && sb.st_mtime > 1700000000);
    free(path);
    kiln_jit_unit_clear(&u);
    rm_rf(dir);
    free(dir);
}

KT_TEST(test_kernel_dir_overrides_embedded) {
    if (!have_nvrtc()) KT_SKIP("libnvrtc cannot be loaded");
    char *dir = temp_dir("kdir");
    KT_REQUIRE(dir);
    /* copy the sources, then edit one: the key changes and it still compiles */
    char *cmd = kiln_asprintf("cp %s/kernel_src/*.cu %s/kernel_src/*.cuh '%s'/", KT_SOURCE_DIR, KT_SOURCE_DIR, dir);
    KT_REQUIRE(cmd && system(cmd) == 0);
    free(cmd);
    kiln_jit_options emb = {"sm_90", NULL, NULL, true, 1}, disk = {"sm_90", NULL, dir, true, 1};
    kiln_jit_unit a = {0}, b = {0}, c = {0};
    a.file = b.file = c.file = "kernel_src/act.cu";
    a.defines = b.defines = c.defines = "ACT=bf16";
    KT_OK(kiln_jit_compile(&a, 1, &emb));
    KT_OK(kiln_jit_compile(&b, 1, &disk));
    KT_CHECK(a.key == b.key); /* same text on disk as embedded */
    char *path = kiln_asprintf("%s/act.cu", dir), *text = NULL;
    KT_OK(kiln_read_file(path, &text, NULL));
    char *edited = kiln_asprintf("%s\n// edited by test_jit\n", text);
    KT_OK(kiln_write_file_atomic(path, edited, strlen(edited)));
    KT_OK(kiln_jit_compile(&c, 1, &disk));
    KT_CHECK(c.key != a.key);
    free(text);
    free(edited);
    free(path);
    kiln_jit_unit_clear(&a);
    kiln_jit_unit_clear(&b);
    kiln_jit_unit_clear(&c);
    /* a missing source names the kernel dir */
    kiln_jit_unit m = {0};
    m.file = "kernel_src/nope.cu";
    m.defines = "";
    KT_ERR(kiln_jit_compile(&m, 1, &disk), KILN_ERR_NOT_FOUND, "KILN_KERNEL_DIR");
    kiln_jit_unit_clear(&m);
    rm_rf(dir);
    free(dir);
}

KT_TEST(test_defines_validated) {
    const kiln_jit_kernel_def *d = kiln_jit_find("attn_decode");
    KT_REQUIRE(d);
    KT_CHECK(kiln_jit_check_defines(d, "ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4 KV=bf16") == KILN_OK);
    KT_CHECK(kiln_jit_check_defines(d, "ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4 KV=fp8_e4m3") == KILN_OK);
    KT_ERR(kiln_jit_check_defines(d, "ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4"), KILN_ERR_INVALID_ARGUMENT, "KV");
    KT_ERR(kiln_jit_check_defines(d, "ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 KV=bf16"), KILN_ERR_INVALID_ARGUMENT, "GROUP");
    KT_ERR(kiln_jit_check_defines(d, "ACT=int8 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4"), KILN_ERR_INVALID_ARGUMENT,
           "ACT=int8");
    KT_ERR(kiln_jit_check_defines(d, "ACT=bf16 HEAD_DIM=x BLOCK_SIZE=16 GROUP=4 FOO=1"), KILN_ERR_INVALID_ARGUMENT,
           "HEAD_DIM");
    /* PDL_EARLY=0|1 (kernel_src/kiln_common.cuh) is every kernel's, nothing else */
    KT_CHECK(kiln_jit_check_defines(d, "ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4 KV=bf16 PDL_EARLY=1") == KILN_OK);
    KT_CHECK(kiln_jit_check_defines(kiln_jit_find("silu_mul"), "ACT=bf16 PDL_EARLY=0") == KILN_OK);
    KT_ERR(kiln_jit_check_defines(d, "ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4 KV=bf16 PDL_EARLY=2"),
           KILN_ERR_INVALID_ARGUMENT, "PDL_EARLY");
    KT_ERR(kiln_jit_check_defines(d, "ACT=bf16 HEAD_DIM=128 BLOCK_SIZE=16 GROUP=4 KV=bf16 PDL_EARLY=11"),
           KILN_ERR_INVALID_ARGUMENT, "PDL_EARLY");
    /* a model set with pdl_early: every spec, then each one's PDL_EARLY=1 copy in the same order */
    kiln_jit_model pm = {KILN_DTYPE_BF16, KILN_DTYPE_BF16, 128, 32, 8, 16, false, false, false, false, 0, 0};
    static kiln_jit_spec_list plain, early;
    KT_OK(kiln_jit_model_specs(&pm, &plain));
    pm.pdl_early = true;
    KT_OK(kiln_jit_model_specs(&pm, &early));
    KT_CHECK(plain.n > 0 && early.n == 2 * plain.n);
    for (int i = 0; i < plain.n && early.n == 2 * plain.n; i++) {
        char want[160];
        snprintf(want, sizeof want, "%s PDL_EARLY=1", plain.specs[i].defines);
        KT_CHECK(!strcmp(early.specs[i].name, plain.specs[i].name) &&
                 !strcmp(early.specs[i].defines, plain.specs[i].defines));
        KT_CHECKF(!strcmp(early.specs[plain.n + i].name, plain.specs[i].name) &&
                      !strcmp(early.specs[plain.n + i].defines, want),
                  "copy %d: %s [%s]", i, early.specs[plain.n + i].name, early.specs[plain.n + i].defines);
    }
    KT_CHECK(kiln_jit_find("no_such_kernel") == NULL);
    kiln_jit_arg k[32];
    int n = 0;
    KT_OK(kiln_jit_signature_parse("ptr,i32,i64,f32", k, 32, &n));
    KT_CHECK(n == 4 && k[0] == KILN_JIT_ARG_PTR && k[3] == KILN_JIT_ARG_F32);
    KT_OK(kiln_jit_signature_parse("ptr,tmap", k, 32, &n));
    KT_CHECK(n == 2 && k[1] == KILN_JIT_ARG_TMAP);
    KT_CHECK(kiln_jit_signature_parse("ptr,tmapx", k, 32, &n) != KILN_OK);
    KT_ERR(kiln_jit_signature_parse("ptr,u8", k, 32, &n), KILN_ERR_FORMAT, "u8");
    /* every registry signature parses and every file is embedded */
    int nr = 0;
    const kiln_jit_kernel_def *reg = kiln_jit_registry(&nr);
    for (int i = 0; i < nr; i++)
        KT_CHECKF(kiln_jit_signature_parse(reg[i].signature, k, 32, &n) == KILN_OK, "%s", reg[i].name);
}

/* Llama-3-8B's set (bf16 and FP8 caches, with the pdl_early copies, as the engine asks) fits the list with room to
 * spare, holds no spec twice, and has the 33..64-row gemm_sk_tma kernels (the down projection's, the gate/up +
 * SiLU's). The list was once full (kiln bench failed at start-up: "too many kernel specializations"). */
KT_TEST(test_model_specs_fit) {
    const kiln_jit_model ms[] = {
        {KILN_DTYPE_BF16, KILN_DTYPE_BF16, 128, 32, 8, 16, false, false, false, true, 4096, 14336},
        {KILN_DTYPE_BF16, KILN_DTYPE_FP8_E4M3, 128, 32, 8, 16, false, false, true, true, 4096, 14336},
        {KILN_DTYPE_F16, KILN_DTYPE_FP8_E5M2, 128, 32, 8, 16, false, false, false, true, 4096, 14336},
    };
    static kiln_jit_spec_list l;
    for (size_t m = 0; m < KILN_ARRAY_LEN(ms); m++) {
        KT_OK(kiln_jit_model_specs(&ms[m], &l));
        KT_CHECKF(l.n <= KILN_JIT_MAX_SPECS * 3 / 4 && !l.dropped, "model %zu: %d specs of %d, %d dropped", m, l.n,
                  KILN_JIT_MAX_SPECS, l.dropped);
        int down64 = 0, glu64 = 0;
        for (int i = 0; i < l.n; i++) {
            for (int j = 0; j < i; j++)
                KT_CHECKF(strcmp(l.specs[i].name, l.specs[j].name) || strcmp(l.specs[i].defines, l.specs[j].defines),
                          "model %zu: %s [%s] twice", m, l.specs[i].name, l.specs[i].defines);
            if (!strcmp(l.specs[i].name, "gemm_sk_tma") && strstr(l.specs[i].defines, "MAXM=64 ")) {
                down64 += strstr(l.specs[i].defines, "RT=1 STAGES=14 CL=2 GLU=0") != NULL;
                glu64 += strstr(l.specs[i].defines, "GLU=1") != NULL;
            }
        }
        KT_CHECKF(down64 >= 1 && glu64 >= 1, "model %zu: MAXM 64 down %d, gate/up %d", m, down64, glu64);
    }
    /* a set larger than the list: the first cap specs, the rest counted as dropped, no error (a warm set) */
    kiln_jit_model np = ms[2];
    np.pdl_early = false; /* (the copies are of the listed specs only) */
    KT_OK(kiln_jit_model_specs(&np, &l));
    const int full = l.n;
    KT_OK(kiln_jit_model_specs_cap(&np, &l, 10));
    /* (dropped counts the specs asked for past the cap, a duplicate of an unlisted one too) */
    KT_CHECKF(l.n == 10 && l.dropped >= full - 10, "cap 10: %d listed, %d dropped of %d", l.n, l.dropped, full);
    for (int i = 0; i < 10; i++) KT_CHECK(kiln_jit_find(l.specs[i].name) && l.specs[i].defines == l.defines[i]);
    KT_OK(kiln_jit_model_specs_cap(&np, &l, 0)); /* 0: the whole list */
    KT_CHECK(l.n == full && l.dropped == 0);
}

/* The specializations an FP8 engine asks for (the tiny test models' shapes
 * and Llama-3-8B's) compile for sm_90, with the activation-dtype kernels of
 * start-up calibration for E4M3; bad combinations are refused up front. */
KT_TEST(test_fp8_model_specs) {
    kiln_jit_model bad = {KILN_DTYPE_BF16, KILN_DTYPE_FP8_E4M3, 72, 8, 1, 16, false, false, true, false, 0, 0};
    kiln_jit_spec_list l;
    KT_ERR(kiln_jit_model_specs(&bad, &l), KILN_ERR_UNSUPPORTED, "multiples of 16");
    bad.head_dim = 64, bad.block_size = 8;
    KT_ERR(kiln_jit_model_specs(&bad, &l), KILN_ERR_UNSUPPORTED, "multiples of 16");
    bad.block_size = 16, bad.kv = KILN_DTYPE_F16;
    KT_ERR(kiln_jit_model_specs(&bad, &l), KILN_ERR_UNSUPPORTED, "activation dtype or FP8");
    if (!have_nvrtc()) KT_SKIP("libnvrtc cannot be loaded");
    char *dir = temp_dir("fp8");
    KT_REQUIRE(dir);
    static kiln_jit_unit u[KILN_JIT_MAX_SPECS * 4];
    int nu = 0;
    static char defs[KILN_JIT_MAX_SPECS * 4][128];
    const kiln_jit_model ms[] = {
        {KILN_DTYPE_BF16, KILN_DTYPE_FP8_E4M3, 16, 4, 2, 16, false, false, true, false, 0, 0},
        {KILN_DTYPE_BF16, KILN_DTYPE_FP8_E5M2, 128, 8, 2, 16, false, false, false, false, 0, 0},
        {KILN_DTYPE_BF16, KILN_DTYPE_FP8_E4M3, 128, 32, 8, 16, false, false, true, false, 4096, 14336},
    };
    for (size_t m = 0; m < KILN_ARRAY_LEN(ms); m++) {
        KT_OK(kiln_jit_model_specs(&ms[m], &l));
        bool calib = false;
        for (int i = 0; i < l.n; i++) {
            const kiln_jit_kernel_def *d = kiln_jit_find(l.specs[i].name);
            KT_REQUIRE(d);
            KT_CHECKF(kiln_jit_check_defines(d, l.specs[i].defines) == KILN_OK, "%s [%s]: %s", l.specs[i].name,
                      l.specs[i].defines, kiln_last_error());
            calib |= !strcmp(l.specs[i].name, "attn_prefill") && strstr(l.specs[i].defines, "KV=bf16");
            bool dup = false;
            for (int j = 0; j < nu && !dup; j++) dup = !strcmp(u[j].file, d->file) && !strcmp(defs[j], l.specs[i].defines);
            if (dup) continue;
            snprintf(defs[nu], sizeof defs[nu], "%s", l.specs[i].defines);
            memset(&u[nu], 0, sizeof u[nu]);
            u[nu].file = d->file;
            u[nu].defines = defs[nu];
            nu++;
        }
        KT_CHECKF(calib == ms[m].kv_calib, "model %zu: calibration kernels %s", m, calib ? "present" : "missing");
    }
    kiln_jit_options opt = {"sm_90", dir, NULL, true, 0};
    KT_CHECKF(kiln_jit_compile(u, nu, &opt) == KILN_OK, "%s", kiln_last_error());
    for (int i = 0; i < nu; i++) {
        KT_CHECKF(u[i].status == KILN_OK, "%s [%s]: %s", u[i].file, u[i].defines, u[i].error ? u[i].error : "");
        for (int f = 0; f < u[i].n_funcs; f++)
            KT_CHECKF(u[i].funcs[f].spill_stores == 0, "%s [%s] spills %d bytes on sm_90", u[i].funcs[f].entry,
                      u[i].defines, u[i].funcs[f].spill_stores);
        kiln_jit_unit_clear(&u[i]);
    }
    rm_rf(dir);
    free(dir);
}

/* gemm_sk's launch plan (kiln_skgemm_plan, shared by the engine and the
 * model kernel set) over Llama-3-8B's projections at every MAXM bucket and
 * a sweep of odd shapes: the ring fits the block's shared memory, the split
 * is 1..8 with no empty slice and at least 2 chunks a slice when split,
 * 1 before sm_90, the knob wins within those bounds, and the automatic split
 * makes at most 2 blocks an SM; every planned specialization is allowed by
 * the registry. */
KT_TEST(test_skgemm_plan) {
    const kiln_jit_kernel_def *d = kiln_jit_find("gemm_sk");
    KT_REQUIRE(d);
    static const int NK[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {3072, 4096},
                                {4096, 2048}, {24, 8},      {1001, 136},   {640, 2056},   {200, 512}};
    for (size_t si = 0; si < KILN_ARRAY_LEN(NK); si++)
        for (int maxm = 8; maxm <= 64; maxm *= 2)
            for (int cc = 8; cc <= 9; cc++)
                for (int knob = 0; knob <= 9; knob += 3) {
                    const int N = NK[si][0], K = NK[si][1], rt = KILN_SKGEMM_TILES_DEFAULT(maxm);
                    const int nchunks = (K + 63) / 64;
                    kiln_skgemm_shape p = kiln_skgemm_plan(132, 233472, 232448, cc, N, K, maxm, KILN_SKGEMM_WARPS_DEFAULT,
                                                           rt, KILN_SKGEMM_STAGES_DEFAULT(maxm), knob, 0);
                    char what[96];
                    snprintf(what, sizeof what, "N %d K %d maxm %d cc %d knob %d", N, K, maxm, cc, knob);
                    KT_CHECKF(p.stages >= 2 && p.stages <= KILN_SKGEMM_STAGES_DEFAULT(maxm), "%s: stages %d", what,
                              p.stages);
                    KT_CHECKF(p.smem <= 232448, "%s: %d bytes of shared memory", what, p.smem);
                    KT_CHECKF(p.split >= 1 && p.split <= 8, "%s: split %d", what, p.split);
                    KT_CHECKF(p.cps >= 1 && (int64_t)p.cps * p.split >= nchunks && (int64_t)p.cps * (p.split - 1) < nchunks,
                              "%s: %d slices of %d chunks for %d", what, p.split, p.cps, nchunks);
                    KT_CHECKF(p.split == 1 || p.cps >= 2, "%s: slices of %d chunk", what, p.cps);
                    KT_CHECKF(cc >= 9 || p.split == 1, "%s: split %d before sm_90", what, p.split);
                    KT_CHECKF(p.tiles == (N + KILN_SKGEMM_WARPS_DEFAULT * rt * 16 - 1) / (KILN_SKGEMM_WARPS_DEFAULT * rt * 16),
                              "%s: %d tiles", what, p.tiles);
                    if (knob && cc >= 9) KT_CHECKF(p.split <= knob, "%s: split %d above the knob", what, p.split);
                    if (!knob) KT_CHECKF((int64_t)p.tiles * p.split <= 2 * 132, "%s: %d blocks for 132 SMs", what,
                                         p.tiles * p.split);
                    char defs[128];
                    snprintf(defs, sizeof defs, "ACT=bf16 OUT=bf16 MAXM=%d WARPS=%d RT=%d STAGES=%d CL=%d GLU=0", maxm,
                             KILN_SKGEMM_WARPS_DEFAULT, rt, p.stages, p.split);
                    KT_CHECKF(kiln_jit_check_defines(d, defs) == KILN_OK, "%s: [%s] %s", what, defs, kiln_last_error());
                }
    /* the measured defaults on an H200: qkv 5 slices at M = 32 (3 stages), o 8, gate_up 1 */
    KT_CHECK(kiln_skgemm_plan(132, 233472, 232448, 9, 6144, 4096, 32, 4, 2, 3, 0, 0).split == 5);
    KT_CHECK(kiln_skgemm_plan(132, 233472, 232448, 9, 4096, 4096, 16, 4, 2, 4, 0, 0).split == 8);
    KT_CHECK(kiln_skgemm_plan(132, 233472, 232448, 9, 28672, 4096, 8, 4, 2, 4, 0, 0).split == 1);
    /* gemm_sk_tma's plain plan at M = 32: o in 64-row tiles x 2 (16 stages), qkv in 128-row tiles x 2 (11 stages);
     * the automatic split capped at KILN_SKGEMM_TMA_MAX_SPLIT (a 1024-row weight would take 8), a knob not */
    KT_CHECK(kiln_skgemm_tma_tiles(132, 4096) == 1 && kiln_skgemm_tma_tiles(132, 6144) == 2);
    {
        const kiln_skgemm_shape o = kiln_skgemm_plan_capped(132, 233472, 232448, 9, 4096, 4096, 32, 4, 1, 16, 0,
                                                            KILN_SKGEMM_TMA_SLACK, KILN_SKGEMM_TMA_MAX_SPLIT),
                                q = kiln_skgemm_plan_capped(132, 233472, 232448, 9, 6144, 4096, 32, 4, 2, 16, 0,
                                                            KILN_SKGEMM_TMA_SLACK, KILN_SKGEMM_TMA_MAX_SPLIT);
        KT_CHECKF(o.tiles == 64 && o.split == 2 && o.stages == 16, "o: %d tiles, split %d, %d stages", o.tiles, o.split,
                  o.stages);
        KT_CHECKF(q.tiles == 48 && q.split == 2 && q.stages == 11, "qkv: %d tiles, split %d, %d stages", q.tiles, q.split,
                  q.stages);
        /* down (4096 x 14336, through it at 17..32 rows since the twenty-eighth session): o's tiling, so o's CUBIN */
        const kiln_skgemm_shape dn = kiln_skgemm_plan_capped(132, 233472, 232448, 9, 4096, 14336, 32, 4,
                                                             kiln_skgemm_tma_tiles(132, 4096), 16, 0,
                                                             KILN_SKGEMM_TMA_SLACK, KILN_SKGEMM_TMA_MAX_SPLIT);
        KT_CHECKF(dn.tiles == 64 && dn.split == 2 && dn.stages == 16, "down: %d tiles, split %d, %d stages", dn.tiles,
                  dn.split, dn.stages);
        /* which projections gemm_sk takes by rows (the defaults; Llama-3-8B: o 32 MiB, qkv 48, down 112) */
        const int64_t ob = (int64_t)4096 * 4096 * 2, qb = (int64_t)6144 * 4096 * 2, db = (int64_t)4096 * 14336 * 2;
#define WOK(M, b) kiln_skgemm_weight_ok(M, b, KILN_SKGEMM_MAX_WEIGHT_MB_DEFAULT, KILN_SKGEMM_MAX_WEIGHT_MB_M32_DEFAULT)
        KT_CHECK(WOK(16, ob) && WOK(16, qb) && !WOK(16, db)); /* 2..16 rows: at most 64 MiB */
        KT_CHECK(WOK(17, ob) && WOK(32, qb) && WOK(32, db));  /* 17..64: at most 120 */
        KT_CHECK(WOK(33, ob) && WOK(64, qb) && WOK(64, db) && !WOK(64, (int64_t)8192 * 8192 * 2));
#undef WOK
        KT_CHECK(kiln_skgemm_weight_ok(16, db, -1, 120) && !kiln_skgemm_weight_ok(32, db, 64, 100) &&
                 kiln_skgemm_weight_ok(32, db, 64, -1) && kiln_skgemm_weight_ok(32, db, 64, 0) == 0 &&
                 kiln_skgemm_weight_ok(8, db, 0, 120));
        /* the defaults by GPU: gemm_sk_tma's limits on sm_90 (17..32 bucket on it), the mma.sync kernel's elsewhere */
        int mm = 0, mb = 0;
        kiln_skgemm_default_limits(9, 0, 32, 0, &mm, &mb);
        KT_CHECK(mm == 64 && mb == 120);
        kiln_skgemm_default_limits(9, 0, 0, 2, &mm, &mb); /* $KILN_SKGEMM_WG=2: gemm_sk_tma at every M */
        KT_CHECK(mm == 64 && mb == 120);
        kiln_skgemm_default_limits(9, 0, 0, 0, &mm, &mb); /* $KILN_SKGEMM_TMA=0 */
        KT_CHECK(mm == 32 && mb == 40);
        kiln_skgemm_default_limits(9, 0, 64, 0, &mm, &mb); /* gemm_sk_tma from MAXM 64 only */
        KT_CHECK(mm == 32 && mb == 40);
        kiln_skgemm_default_limits(8, 0, 32, 2, &mm, &mb); /* A100 */
        KT_CHECK(mm == 32 && mb == 40);
        kiln_skgemm_default_limits(8, 9, 32, 0, &mm, &mb); /* L40 */
        KT_CHECK(mm == 32 && mb == 40 && !kiln_skgemm_weight_ok(32, qb, 64, mb) && kiln_skgemm_weight_ok(32, ob, 64, mb));
        const kiln_skgemm_shape d64 = kiln_skgemm_plan_capped(132, 233472, 232448, 9, 4096, 14336, 64, 4, 1, 16, 0,
                                                              KILN_SKGEMM_TMA_SLACK, KILN_SKGEMM_TMA_MAX_SPLIT);
        KT_CHECKF(d64.tiles == 64 && d64.split == 2 && d64.stages == 14, "down at MAXM 64: %d tiles, split %d, %d stages",
                  d64.tiles, d64.split, d64.stages);
        KT_CHECK(kiln_skgemm_plan(132, 233472, 232448, 9, 1024, 4096, 32, 4, 1, 16, 0, KILN_SKGEMM_TMA_SLACK).split == 8);
        KT_CHECK(kiln_skgemm_plan_capped(132, 233472, 232448, 9, 1024, 4096, 32, 4, 1, 16, 0, KILN_SKGEMM_TMA_SLACK,
                                         KILN_SKGEMM_TMA_MAX_SPLIT).split == KILN_SKGEMM_TMA_MAX_SPLIT);
        KT_CHECK(kiln_skgemm_plan_capped(132, 233472, 232448, 9, 1024, 4096, 32, 4, 1, 16, 4, KILN_SKGEMM_TMA_SLACK,
                                         KILN_SKGEMM_TMA_MAX_SPLIT).split == 4);
    }
    /* gemm_sk_wg's alignment slack: in the block's shared memory, and the ring still fits with it */
    for (int maxm = 8; maxm <= 64; maxm *= 2) {
        const kiln_skgemm_shape a = kiln_skgemm_plan(132, 233472, 232448, 9, 6144, 4096, maxm, 4, 4, 8, 0, 0),
                                b = kiln_skgemm_plan(132, 233472, 232448, 9, 6144, 4096, maxm, 4, 4, 8, 0, KILN_SKGEMM_WG_SLACK);
        KT_CHECKF(b.smem <= 232448 && b.stages <= a.stages, "maxm %d: %d bytes, %d stages", maxm, b.smem, b.stages);
        KT_CHECKF(b.stages < a.stages || b.smem == a.smem + KILN_SKGEMM_WG_SLACK, "maxm %d: %d bytes against %d", maxm, b.smem, a.smem);
    }
    /* the warpgroup-MMA gemm_sk compiles for sm_90a on sm_90 (a trapping body elsewhere), the plain one as asked */
    KT_CHECK(!strcmp(kiln_jit_unit_arch("kernel_src/gemm_sk_wg.cu", "sm_90"), "sm_90a"));
    KT_CHECK(!strcmp(kiln_jit_unit_arch("kernel_src/gemm_sk_wg.cu", "sm_80"), "sm_80"));
    KT_CHECK(!strcmp(kiln_jit_unit_arch("kernel_src/gemm_sk.cu", "sm_90"), "sm_90"));
    KT_CHECK(!strcmp(kiln_jit_unit_arch("kernel_src/gemm_sk_tma.cu", "sm_90"), "sm_90a"));
    const kiln_jit_kernel_def *w = kiln_jit_find("gemm_sk_wg");
    KT_REQUIRE(w);
    KT_CHECK(kiln_jit_check_defines(w, "ACT=bf16 OUT=bf16 MAXM=32 WARPS=4 RT=2 STAGES=3 CL=4 GLU=0") == KILN_OK);
    KT_CHECK(kiln_jit_check_defines(w, "ACT=bf16 OUT=bf16 MAXM=32 WARPS=8 RT=2 STAGES=3 CL=4 GLU=0") != KILN_OK);
}

/* The cuBLASLt autotuner's M buckets (kiln_rt_gemm_bucket_m): fine buckets
 * are the decode-graph ladder up to 256, so each graph's GEMMs get an
 * algorithm timed at their own M; power-of-two buckets otherwise */
KT_TEST(test_gemm_buckets) {
    /* every ladder size from 8 to 256 is its own bucket */
    int n = 0;
    for (int b = 8; b <= 256; b = kiln_rt_batch_ladder_next(b), n++) {
        KT_CHECKF(kiln_rt_gemm_bucket_m(b, true) == b, "ladder size %d in bucket %lld", b,
                  (long long)kiln_rt_gemm_bucket_m(b, true));
        KT_CHECK(kiln_rt_gemm_bucket_m(b + 1, true) > b);
    }
    KT_CHECK(n == 14); /* 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256 */
    KT_CHECK(kiln_rt_batch_ladder_next(1) == 2 && kiln_rt_batch_ladder_next(2) == 4 && kiln_rt_batch_ladder_next(4) == 8);
    KT_CHECK(kiln_rt_batch_ladder_next(100) == 116 && kiln_rt_batch_ladder_next(20) == 24);
    const int64_t fine[][2] = {{1, 8}, {3, 8}, {9, 16}, {25, 32}, {33, 48}, {49, 64}, {129, 160}, {255, 256}, {257, 512}, {4096, 4096}};
    for (size_t i = 0; i < KILN_ARRAY_LEN(fine); i++)
        KT_CHECKF(kiln_rt_gemm_bucket_m(fine[i][0], true) == fine[i][1], "M %lld: bucket %lld, want %lld",
                  (long long)fine[i][0], (long long)kiln_rt_gemm_bucket_m(fine[i][0], true), (long long)fine[i][1]);
    const int64_t pow2[][2] = {{1, 8}, {24, 32}, {48, 64}, {80, 128}, {160, 256}, {4097, 8192}};
    for (size_t i = 0; i < KILN_ARRAY_LEN(pow2); i++)
        KT_CHECK(kiln_rt_gemm_bucket_m(pow2[i][0], false) == pow2[i][1]);
}

/* gemm_skx's launch plan (kiln_skx_plan): wherever it serves, K splits into cl x warps x kw columns with kw
 * a multiple of 64 and of the slot's columns, x's fragments fit 128 registers, N splits into whole tiles of
 * 16 rt rows, one wave of one block an SM, at least 3 slots a warp in the shared memory asked, cl 1 before
 * sm_90; the Llama-3-8B shapes it takes (o, qkv at 32 rows through clusters of 2, down at 8 rows; no K split
 * at 16 rows for o / qkv; o / qkv / down at one row) and those it leaves (down at 16 / 32 rows, gate_up, ragged
 * N, M > 32); every planned specialization is allowed by the registry. */
KT_TEST(test_skx_plan) {
    const kiln_jit_kernel_def *d = kiln_jit_find("gemm_skx");
    KT_REQUIRE(d);
    static const int NK[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {208, 512},
                                {64, 1024},   {1024, 2048}, {96, 8192},    {200, 512},    {24, 8}, {128256, 4096}};
    static const int Ms[] = {1, 2, 8, 9, 16, 17, 32, 33};
    int served = 0;
    for (size_t si = 0; si < KILN_ARRAY_LEN(NK); si++)
        for (size_t mi = 0; mi < KILN_ARRAY_LEN(Ms); mi++)
            for (int cc = 8; cc <= 9; cc++) {
                const int N = NK[si][0], K = NK[si][1], M = Ms[mi];
                const kiln_skx_shape p = kiln_skx_plan(132, 232448, cc, M, N, K);
                char what[96];
                snprintf(what, sizeof what, "N %d K %d M %d cc %d", N, K, M, cc);
                if (M > 32) KT_CHECKF(!p.ok, "%s: served", what);
                if (!p.ok) continue;
                served++;
                const int nt = p.maxm / 8;
                KT_CHECKF(p.maxm >= M && (p.maxm == 8 || p.maxm / 2 < M), "%s: MAXM %d", what, p.maxm);
                KT_CHECKF((int64_t)p.cl * p.warps * p.kw == K && p.kw % 64 == 0 && p.kw % p.sk == 0, "%s: %d x %d x %d columns",
                          what, p.cl, p.warps, p.kw);
                KT_CHECKF(p.kw / 16 * nt * 2 <= 128, "%s: %d registers of x", what, p.kw / 16 * nt * 2);
                KT_CHECKF(p.rt >= 1 && p.rt <= 8 && p.tiles * 16 * p.rt == N, "%s: %d tiles of %d rows", what, p.tiles, 16 * p.rt);
                KT_CHECKF(p.tiles * p.cl <= 132, "%s: %d blocks", what, p.tiles * p.cl);
                KT_CHECKF(p.s >= 3 && p.s <= 16 && p.smem <= 232448, "%s: %d slots, %d bytes", what, p.s, p.smem);
                KT_CHECKF(cc >= 9 || p.cl == 1, "%s: a cluster of %d before sm_90", what, p.cl);
                char defs[160];
                snprintf(defs, sizeof defs, "ACT=bf16 OUT=bf16 MAXM=%d WARPS=%d KW=%d SK=%d SLOTS=%d RT=%d CL=%d", p.maxm,
                         p.warps, p.kw, p.sk, p.s, p.rt, p.cl);
                KT_CHECKF(kiln_jit_check_defines(d, defs) == KILN_OK, "%s: [%s] %s", what, defs, kiln_last_error());
            }
    KT_CHECK(served > 40);
    /* the shapes of the design (bench/skx_micro.cu) on an H200 */
    kiln_skx_shape o32 = kiln_skx_plan(132, 232448, 9, 32, 4096, 4096), q32 = kiln_skx_plan(132, 232448, 9, 32, 6144, 4096),
                   o16 = kiln_skx_plan(132, 232448, 9, 16, 4096, 4096), d16 = kiln_skx_plan(132, 232448, 9, 16, 4096, 14336);
    KT_CHECK(o32.ok && o32.cl == 2 && o32.kw == 256 && o32.rt == 4 && o32.s == 5 && o32.tiles == 64);
    KT_CHECK(q32.ok && q32.cl == 2 && q32.rt == 6 && q32.s == 4);
    KT_CHECK(o16.ok && o16.cl == 1 && o16.kw == 512 && o16.rt == 2 && o16.tiles == 128);
    KT_CHECK(!d16.ok); /* down at 16 rows would need a cluster of 4 */
    KT_CHECK(kiln_skx_plan(132, 232448, 9, 8, 4096, 14336).cl == 2); /* ... at 8 rows 2 */
    KT_CHECK(!kiln_skx_plan(132, 232448, 9, 32, 4096, 14336).ok);  /* down at 32 rows: x would not fit */
    KT_CHECK(!kiln_skx_plan(132, 232448, 9, 8, 28672, 4096).ok);   /* gate_up: more than a wave */
    KT_CHECK(!kiln_skx_plan(132, 232448, 9, 8, 200, 512).ok);      /* ragged N */
    KT_CHECK(!kiln_skx_plan(132, 232448, 8, 32, 4096, 4096).ok);   /* o at 32 rows needs a cluster */
    KT_CHECK(!kiln_skx_plan(132, 232448, 9, 32, 96, 8192).ok);    /* no cluster of 4 */
    KT_CHECK(kiln_skx_plan(132, 232448, 9, 16, 96, 8192).cl == 2);
    KT_CHECK(kiln_skx_plan(132, 232448, 9, 32, 208, 512).sk == 64);
    /* one row (the batch-1 GEMMs, $KILN_SKX_M1): o and qkv without a split, down in clusters of 2 */
    const kiln_skx_shape o1 = kiln_skx_plan(132, 232448, 9, 1, 4096, 4096), d1 = kiln_skx_plan(132, 232448, 9, 1, 4096, 14336);
    KT_CHECK(o1.ok && o1.maxm == 8 && o1.cl == 1 && o1.kw == 512 && o1.rt == 2 && o1.s == 6);
    KT_CHECK(d1.ok && d1.maxm == 8 && d1.cl == 2 && d1.kw == 896 && d1.rt == 4 && d1.tiles == 64);
    KT_CHECK(!kiln_skx_plan(132, 232448, 8, 1, 4096, 14336).ok); /* ... not before sm_90 */
}

KT_MAIN(KT_CASE(test_defines_validated), KT_CASE(test_model_specs_fit), KT_CASE(test_skgemm_plan), KT_CASE(test_skx_plan), KT_CASE(test_gemm_buckets), KT_CASE(test_fp8_model_specs), KT_CASE(test_compile_error_names_file_and_line),
        KT_CASE(test_policy_source_compiles), KT_CASE(test_kernel_dir_overrides_embedded),
        KT_CASE(test_registry_compiles_and_caches))
