// label: unit
/* test_policy.c -- the Lua policy host and plan validation: every bad policy
 * gives a clear error naming the policy file and line, and nothing crashes. */
#include "kiln_base.h"
#include "program.h"
#include "kt.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *cfg_json =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":64,"
    "\"intermediate_size\":96,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
    "\"vocab_size\":96,\"max_position_embeddings\":128,\"rms_norm_eps\":1e-5}";

static char dir[256];

static const char *policy_file(const char *name, const char *src) {
    static char path[512];
    snprintf(dir, sizeof dir, "%s/kt_policy_%d", KT_BINARY_DIR, (int)getpid());
    kiln_mkdirs(dir);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    kiln_write_file_atomic(path, src, strlen(src));
    return path;
}

static kiln_status build(const char *file, int tp, const char *options, kiln_program **out) {
    kiln_model_config cfg;
    kiln_status st = kiln_model_config_parse(cfg_json, "cfg", &cfg);
    if (st) return st;
    kiln_policy_facts f = {.cfg = &cfg, .device_kind = "cpu", .device_name = "cpu", .tp_rank = 0, .tp_size = tp,
                           .options_json = options, .dtype = "auto", .kv_cache_dtype = "auto"};
    st = kiln_program_build(&f, file, NULL, out);
    kiln_model_config_free(&cfg);
    return st;
}

KT_TEST(test_builtin_llama) {
    kiln_program *p = NULL;
    KT_OK(build(NULL, 1, NULL, &p));
    KT_CHECK(!strcmp(p->policy_name, "llama"));
    KT_CHECK(p->n_kv_layers == 2 && p->n_kv_heads == 2 && p->head_dim == 16);
    /* fused q/k/v: rows 4*16 + 2*2*16 */
    int qkv = -1;
    for (int i = 0; i < p->n_weights; i++)
        if (!strcmp(p->weights[i].id, "L0.qkv")) qkv = i;
    KT_REQUIRE(qkv >= 0);
    KT_CHECK(p->weights[qkv].rows == 128 && p->weights[qkv].cols == 64 && p->weights[qkv].n_parts == 3);
    kiln_buf b = {0};
    KT_OK(kiln_program_describe(p, &b));
    KT_CHECK(strstr(b.data, "rope_kv_write") && strstr(b.data, "add_rmsnorm"));
    kiln_buf_free(&b);
    kiln_program_free(p);
    /* options turn the fusions off: a different program from the same policy */
    KT_OK(build(NULL, 1, "{\"fuse_qkv\": false, \"fuse_residual_norm\": false, \"fuse_rope_kv\": false}", &p));
    KT_OK(kiln_program_describe(p, &b));
    KT_CHECK(strstr(b.data, "qkv[:, 64:96] = h @ L0.k^T") != NULL);
    KT_CHECK(strstr(b.data, " rope ") && strstr(b.data, "kv_write") && !strstr(b.data, "add_rmsnorm"));
    kiln_buf_free(&b);
    kiln_program_free(p);
}

KT_TEST(test_tp_shards) {
    kiln_program *p = NULL;
    KT_OK(build(NULL, 2, NULL, &p));
    int o = -1;
    for (int i = 0; i < p->n_weights; i++)
        if (!strcmp(p->weights[i].id, "L1.o")) o = i;
    KT_REQUIRE(o >= 0);
    KT_CHECK(p->weights[o].rows == 64 && p->weights[o].cols == 32); /* row-parallel */
    KT_CHECK(p->vocab_local == 48 && p->n_kv_heads == 1);
    bool has_allreduce = false;
    for (int i = 0; i < p->n_ops; i++) has_allreduce |= p->ops[i].kind == KILN_OP_ALL_REDUCE;
    KT_CHECK(has_allreduce);
    kiln_program_free(p);
    /* 4 ranks over 2 kv heads: replicated kv heads */
    KT_OK(build(NULL, 4, NULL, &p));
    KT_CHECK(p->n_kv_heads == 1);
    kiln_program_free(p);
    /* 3 does not divide 4 heads: the error names the policy line */
    KT_ERR(build(NULL, 3, NULL, &p), KILN_ERR_POLICY, "policies/llama.lua:");
    KT_CHECK(strstr(kiln_last_error(), "not divisible by the tensor-parallel size 3") != NULL);
}

KT_TEST(test_policy_errors) {
    kiln_program *p = NULL;
    const char *f;
    f = policy_file("syntax.lua", "local K = require('kiln')\nreturn function(facts)\n  local x = = 1\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "syntax.lua:3:");
    f = policy_file("runtime.lua", "return function(facts)\n  local t = nil\n  return t.x\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "runtime.lua:3:");
    KT_CHECK(strstr(kiln_last_error(), "attempt to index") != NULL);
    /* an endless loop: the instruction limit (many instructions a line, so few line hooks; the time limit
     * out of the way), then the time limit of a tight loop (a line hook each turn) */
    setenv("KILN_POLICY_TIME_LIMIT", "600", 1);
    f = policy_file("loop.lua", "return function(facts)\n  local a, b = 0, 1\n"
                                "  while true do a = a + b; b = a - b; a = a * 1; b = b * 1; a = a + 0; b = b + 0; a = a % 7 end\n"
                                "end\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "loop.lua:3:");
    KT_CHECK(strstr(kiln_last_error(), "instruction limit") != NULL);
    setenv("KILN_POLICY_TIME_LIMIT", "0.3", 1);
    f = policy_file("spin.lua", "return function(facts)\n  while true do end\nend\n");
    double t0 = kiln_now_sec();
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "spin.lua:2:");
    KT_CHECK(strstr(kiln_last_error(), "time limit (0.3 s)") != NULL);
    KT_CHECKF(kiln_now_sec() - t0 < 30, "the time limit took %.1f s", kiln_now_sec() - t0);
    unsetenv("KILN_POLICY_TIME_LIMIT");
    f = policy_file("bomb.lua",
                    "return function(facts)\n  local t = {}\n  for i = 1, 1e9 do t[i] = string.rep('x', 64) .. i end\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "bomb.lua:3");
    KT_CHECK(strstr(kiln_last_error(), "memory limit") != NULL);
    f = policy_file("bomb2.lua", "return function(facts)\n  local s = string.rep('x', 1 << 30)\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "bomb2.lua:2");
    KT_CHECK(strstr(kiln_last_error(), "memory limit") != NULL);
    f = policy_file("notfn.lua", "return 42\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "must return a function");
    f = policy_file("noprog.lua",
                    "local K = require('kiln')\nreturn function(facts)\n"
                    "  local P = K.decoder(facts, {name='x', names=K.llama_names()})\n"
                    "  local plan = P:finish()\n  plan.program = nil\n  return plan\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "noprog.lua:2: plan is missing field 'program'");
    f = policy_file("noout.lua",
                    "local K = require('kiln')\nreturn function(facts)\n"
                    "  local P = K.decoder(facts, {name='x', names=K.llama_names()})\n"
                    "  P:op{op = 'silu_mul', input = 'gu'}\n  return P:finish()\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "noout.lua:4: silu_mul is missing field 'out'");
    f = policy_file("variant.lua",
                    "local K = require('kiln')\nreturn function(facts)\n"
                    "  local P = K.decoder(facts, {name='x', names=K.llama_names()})\n"
                    "  P:op{op = 'attention', out = 'attn', qkv = 'qkv', kv_layer = 0, heads = 4, kv_heads = 2,\n"
                    "       head_dim = 16, variant = 'turbo'}\n  return P:finish()\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "variant.lua:4: op 'attention': variant 'turbo' does not exist");
    f = policy_file("badop.lua",
                    "local K = require('kiln')\nreturn function(facts)\n"
                    "  local P = K.decoder(facts, {name='x', names=K.llama_names()})\n"
                    "  P:op{op = 'softmax', out = 'h'}\n  return P:finish()\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "badop.lua:4: unknown op kind 'softmax'");
    f = policy_file("shard.lua",
                    "local K = require('kiln')\nreturn function(facts)\n"
                    "  local P = K.decoder(facts, {name='x', names=K.llama_names()})\n"
                    "  P:weight{id = 'odd', tensor = 'model.norm.weight', shape = {64}, shard = 'column', unit = 48}\n"
                    "  return P:finish()\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "shard.lua:4: weight 'odd' part 1 (model.norm.weight): shard "
                                                    "rule 'column' does not divide");
    f = policy_file("shape.lua",
                    "local K = require('kiln')\nreturn function(facts)\n"
                    "  local P = K.decoder(facts, {name='x', names=K.llama_names()})\n"
                    "  P:op{op = 'gemm', out = 'y', input = 'h', weight = 'L0.gate_up'}\n"
                    "  return P:finish()\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "shape.lua:4: gemm: weight 'L0.gate_up' writes columns");
    f = policy_file("unknownslot.lua",
                    "local K = require('kiln')\nreturn function(facts)\n"
                    "  local P = K.decoder(facts, {name='x', names=K.llama_names()})\n"
                    "  P:op{op = 'add', out = 'y', a = 'x', b = 'zz'}\n  return P:finish()\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "unknownslot.lua:4: op 'add': field 'b' names unknown slot 'zz'");
    f = policy_file("readonly.lua", "return function(facts)\n  facts.model.hidden_size = 1\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "readonly.lua:2: policy facts are read-only");
    f = policy_file("io.lua", "return function(facts)\n  return io.open('/etc/passwd')\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "io.lua:2:");
    f = policy_file("req.lua", "local x = require('os')\nreturn function() end\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "no built-in policy module 'os'");
}

KT_TEST(test_custom_kernel_and_facts) {
    kiln_program *p = NULL;
    const char *f = policy_file(
        "custom.lua",
        "local K = require('kiln')\nreturn function(facts)\n"
        "  assert(facts.tp.size == 1 and facts.device.kind == 'cpu' and facts.config.vocab_size == 96)\n"
        "  local n = 0\n  for k, v in pairs(facts.model) do n = n + 1 end\n  assert(n > 10)\n"
        "  assert(#facts.config.architectures == 1)\n"
        "  local P = K.decoder(facts, {name='mine', names=K.llama_names(), norm_variant = 'custom:my_rmsnorm'})\n"
        "  P:kernel{name = 'my_rmsnorm', entry = 'my_rmsnorm', replaces = 'rmsnorm',\n"
        "           source = 'extern \"C\" __global__ void my_rmsnorm() {}'}\n"
        "  return P:finish()\nend\n");
    KT_ERR(build(f, 1, NULL, &p), KILN_ERR_POLICY, "kernel 'my_rmsnorm' replaces 'rmsnorm', not 'add_rmsnorm'");
    /* declare the kernel before the ops that use it, for rmsnorm ops only */
    f = policy_file(
        "custom2.lua",
        "local K = require('kiln')\nreturn function(facts)\n"
        "  local P = K.decoder(facts, {name='mine', names=K.llama_names()})\n"
        "  local v = P:kernel{name = 'my_rmsnorm', entry = 'my_rmsnorm', replaces = 'rmsnorm',\n"
        "           source = 'extern \"C\" __global__ void my_rmsnorm() {}'}\n"
        "  for _, o in ipairs(P.program) do if o.op == 'rmsnorm' then o.variant = v end end\n"
        "  return P:finish()\nend\n");
    KT_OK(build(f, 1, NULL, &p));
    KT_CHECK(p->n_kernels == 1 && p->ops[1].custom == 0);
    kiln_program_free(p);
}

KT_MAIN(KT_CASE(test_builtin_llama), KT_CASE(test_tp_shards), KT_CASE(test_policy_errors),
        KT_CASE(test_custom_kernel_and_facts))
