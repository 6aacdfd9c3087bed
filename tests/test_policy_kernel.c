// label: unit
/* test_policy_kernel.c -- a policy bringing its own CUDA kernel
 * (policies/examples/llama_custom_rmsnorm.lua): the plan carries it, the
 * rmsnorm ops select it, NVRTC compiles it for sm_80/sm_90 with the
 * registry's defines (no GPU needed), and on the CPU the engine runs the
 * reference variant and produces the built-in policy's tokens. */
#include "engine_internal.h"
#include "kiln_rt.h"
#include "kt_engine.h"

#include <stdlib.h>

#define POLICY KT_SOURCE_DIR "/policies/examples/llama_custom_rmsnorm.lua"

KT_TEST(test_plan_carries_kernel) {
    kiln_engine_params p;
    kiln_engine_default_params(&p);
    p.model = KT_MODEL("llama3-gqa");
    p.policy_file = POLICY;
    kiln_model_files mf;
    KT_OK(kiln_model_files_open(&p, "cuda", 0, &mf));
    const kiln_program *pr = mf.program;
    KT_REQUIRE(pr->n_kernels == 1);
    KT_CHECK(!strcmp(pr->kernels[0].entry, "my_rmsnorm") && pr->kernels[0].replaces == KILN_OP_RMSNORM);
    int custom = 0, plain = 0;
    for (int i = 0; i < pr->n_ops; i++) {
        if (pr->ops[i].kind != KILN_OP_RMSNORM) continue;
        if (pr->ops[i].custom == 0) custom++;
        else plain++;
    }
    KT_CHECK(custom > 0 && plain == 0);
    /* NVRTC compiles it as the GPU executor would (skip without NVRTC) */
    if (kiln_rt_load_nvrtc() != KILN_OK) {
        kiln_model_files_close(&mf);
        KT_SKIP("NVRTC not loadable: %s", kiln_last_error());
    }
    const char *archs[] = {"sm_80", "sm_90"};
    for (int a = 0; a < 2; a++) {
        kiln_jit_options o = {.arch = archs[a], .no_cache = true};
        kiln_jit_unit u;
        memset(&u, 0, sizeof u);
        KT_OK(kiln_jit_compile_source("my_rmsnorm", pr->kernels[0].source, "ACT=bf16 W=bf16", &o, &u));
        KT_CHECK(u.cubin && u.cubin_len > 0);
        kiln_jit_unit_clear(&u);
    }
    /* a broken kernel is a clear error naming the problem */
    kiln_jit_options o = {.arch = "sm_90", .no_cache = true};
    kiln_jit_unit u;
    memset(&u, 0, sizeof u);
    KT_CHECK(kiln_jit_compile_source("broken", "extern \"C\" __global__ void k() { undefined_thing(); }", "", &o, &u) !=
             KILN_OK);
    KT_CHECK(strstr(kiln_last_error(), "undefined_thing") != NULL);
    kiln_jit_unit_clear(&u);
    kiln_model_files_close(&mf);
}

KT_TEST(test_cpu_runs_reference) {
    kiln_engine_params p;
    kt_engine_params(&p, KT_MODEL("llama3-gqa"), "cpu");
    int32_t prompt[6] = {5, 17, 99, 200, 301, 7};
    kiln_request r;
    kiln_request_default(&r);
    r.prompt_ids = prompt;
    r.n_prompt_ids = 6;
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 12;
    kiln_result a, b;
    kiln_engine *e = NULL;
    KT_OK(kiln_engine_create(&p, &e));
    KT_OK(kiln_engine_generate(e, &r, 1, &a));
    kiln_engine_destroy(e);
    p.policy_file = POLICY;
    KT_OK(kiln_engine_create(&p, &e));
    KT_OK(kiln_engine_generate(e, &r, 1, &b));
    kiln_engine_destroy(e);
    KT_CHECK(a.n_ids == 12 && b.n_ids == 12 && !memcmp(a.ids, b.ids, sizeof(int32_t) * 12));
    kiln_result_free(&a);
    kiln_result_free(&b);
}

KT_MAIN(KT_CASE(test_plan_carries_kernel), KT_CASE(test_cpu_runs_reference))
