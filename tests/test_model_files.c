// label: unit
/* test_model_files.c -- config.json parsing, safetensors validation, index
 * files and model resolution: every bad input gives a clear error. */
#include "kiln_base.h"
#include "loader.h"
#include "kt.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static void mk_tmp(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/kt_model_files_%d", KT_BINARY_DIR, (int)getpid());
    kiln_mkdirs(tmpdir);
}

static void write_text(const char *name, const char *text) {
    char *p = kiln_path_join(tmpdir, name);
    kiln_write_file_atomic(p, text, strlen(text));
    free(p);
}

static void write_bytes(const char *name, const void *data, size_t n) {
    char *p = kiln_path_join(tmpdir, name);
    kiln_write_file_atomic(p, data, n);
    free(p);
}

static void rm(const char *name) {
    char *p = kiln_path_join(tmpdir, name);
    unlink(p);
    free(p);
}

/* A safetensors file with the given header JSON and data_len bytes of data. */
static void write_st(const char *name, const char *header, size_t data_len, long hlen_override) {
    size_t hl = strlen(header);
    size_t total = 8 + hl + data_len;
    char *buf = calloc(1, total);
    uint64_t v = hlen_override >= 0 ? (uint64_t)hlen_override : hl;
    memcpy(buf, &v, 8);
    memcpy(buf + 8, header, hl);
    write_bytes(name, buf, total);
    free(buf);
}

static const char *tiny_cfg =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":8,"
    "\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
    "\"vocab_size\":4,\"max_position_embeddings\":32,\"rms_norm_eps\":1e-5,\"tie_word_embeddings\":true,"
    "\"torch_dtype\":\"float32\"}";

KT_TEST(test_config_errors) {
    mk_tmp();
    kiln_model_config cfg;
    rm("config.json");
    KT_ERR(kiln_model_config_load(tmpdir, &cfg), KILN_ERR_NOT_FOUND, "has no config.json");
    KT_ERR(kiln_model_config_load("/nonexistent/dir", &cfg), KILN_ERR_NOT_FOUND, "does not exist");
    write_text("config.json", "{not json");
    KT_ERR(kiln_model_config_load(tmpdir, &cfg), KILN_ERR_FORMAT, "is not valid JSON");
    write_text("config.json", "[1,2]");
    KT_ERR(kiln_model_config_load(tmpdir, &cfg), KILN_ERR_FORMAT, "must contain a JSON object");
    write_text("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8}");
    KT_ERR(kiln_model_config_load(tmpdir, &cfg), KILN_ERR_FORMAT, "\"intermediate_size\"");
    write_text("config.json", "{\"hidden_size\":8}");
    KT_ERR(kiln_model_config_load(tmpdir, &cfg), KILN_ERR_FORMAT, "\"architectures\"");
    write_text("config.json",
               "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":\"8\",\"intermediate_size\":16,"
               "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"vocab_size\":4}");
    KT_ERR(kiln_model_config_load(tmpdir, &cfg), KILN_ERR_FORMAT, "\"hidden_size\" must be an integer");
    write_text("config.json",
               "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"intermediate_size\":16,"
               "\"num_hidden_layers\":1,\"num_attention_heads\":3,\"num_key_value_heads\":2,\"head_dim\":4,"
               "\"vocab_size\":4}");
    KT_ERR(kiln_model_config_load(tmpdir, &cfg), KILN_ERR_FORMAT, "not a multiple of num_key_value_heads");
    write_text("config.json",
               "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"intermediate_size\":16,"
               "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"vocab_size\":4,\"rope_scaling\":{\"type\":\"su\"}}");
    KT_ERR(kiln_model_config_load(tmpdir, &cfg), KILN_ERR_UNSUPPORTED, "rope type \"su\" is not supported");
    write_text("config.json",
               "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"intermediate_size\":16,"
               "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"vocab_size\":4,\"torch_dtype\":\"int8\"}");
    KT_ERR(kiln_model_config_load(tmpdir, &cfg), KILN_ERR_UNSUPPORTED, "dtype \"int8\" is not supported");
}

KT_TEST(test_config_rope_styles) {
    kiln_model_config c;
    /* classic keys */
    KT_OK(kiln_model_config_parse(
        "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":16,"
        "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":4,\"rope_theta\":500000,"
        "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":1,\"high_freq_factor\":4,"
        "\"original_max_position_embeddings\":8192},\"torch_dtype\":\"bfloat16\",\"eos_token_id\":[7,9]}",
        "c", &c));
    KT_CHECK(!strcmp(c.rope.type, "llama3") && c.rope.theta == 500000 && c.rope.factor == 8);
    KT_CHECK(c.rope.original_max_position == 8192 && c.head_dim == 16 && c.num_kv_heads == 4);
    KT_CHECK(c.dtype == KILN_DTYPE_BF16 && c.n_eos == 2 && c.eos_token_ids[1] == 9);
    kiln_model_config_free(&c);
    /* newer rope_parameters + dtype + explicit head_dim */
    KT_OK(kiln_model_config_parse(
        "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":16,"
        "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"head_dim\":32,\"vocab_size\":4,"
        "\"rope_parameters\":{\"rope_theta\":1000,\"rope_type\":\"linear\",\"factor\":2},\"dtype\":\"float16\"}",
        "c", &c));
    KT_CHECK(!strcmp(c.rope.type, "linear") && c.rope.theta == 1000 && c.rope.factor == 2);
    KT_CHECK(c.head_dim == 32 && c.dtype == KILN_DTYPE_F16);
    kiln_model_config_free(&c);
}

static void good_checkpoint(void) {
    write_text("config.json", tiny_cfg);
    /* embed [4, 8] f32, norm [8], ... enough for the tied llama policy */
    char hdr[4096];
    size_t off = 0;
    char *o = hdr;
    o += sprintf(o, "{");
#define T(nm, s0, s1)                                                                                          \
    do {                                                                                                       \
        size_t n = (size_t)(s0) * ((s1) ? (size_t)(s1) : 1) * 4;                                               \
        if ((s1))                                                                                              \
            o += sprintf(o, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",        \
                         o == hdr + 1 ? "" : ",", nm, s0, s1, off, off + n);                                   \
        else                                                                                                   \
            o += sprintf(o, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",           \
                         o == hdr + 1 ? "" : ",", nm, s0, off, off + n);                                       \
        off += n;                                                                                              \
    } while (0)
    T("model.embed_tokens.weight", 4, 8);
    T("model.norm.weight", 8, 0);
    T("model.layers.0.input_layernorm.weight", 8, 0);
    T("model.layers.0.post_attention_layernorm.weight", 8, 0);
    T("model.layers.0.self_attn.q_proj.weight", 8, 8);
    T("model.layers.0.self_attn.k_proj.weight", 4, 8);
    T("model.layers.0.self_attn.v_proj.weight", 4, 8);
    T("model.layers.0.self_attn.o_proj.weight", 8, 8);
    T("model.layers.0.mlp.gate_proj.weight", 16, 8);
    T("model.layers.0.mlp.up_proj.weight", 16, 8);
    T("model.layers.0.mlp.down_proj.weight", 8, 16);
#undef T
    sprintf(o, "}");
    write_st("model.safetensors", hdr, off, -1);
}

static kiln_status open_model(kiln_model_files *mf) {
    kiln_engine_params p;
    kiln_engine_default_params(&p);
    p.model = tmpdir;
    return kiln_model_files_open(&p, "cpu", 0, mf);
}

KT_TEST(test_safetensors_errors) {
    mk_tmp();
    rm("model.safetensors.index.json");
    good_checkpoint();
    kiln_model_files mf;
    KT_OK(open_model(&mf));
    KT_CHECK(mf.ck.n_tensors == 11);
    kiln_model_files_close(&mf);
    rm("model.safetensors");
    KT_ERR(open_model(&mf), KILN_ERR_NOT_FOUND, "has no model.safetensors");
    write_bytes("model.safetensors", "abc", 3);
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "truncated safetensors file");
    write_st("model.safetensors", "{}", 0, 1 << 20);
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "is larger than the file");
    write_st("model.safetensors", "{\"a\": [1,", 0, -1);
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "malformed safetensors header JSON");
    write_st("model.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, -1);
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "fall outside the data section");
    write_st("model.safetensors",
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
             24, -1);
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "overlap");
    write_st("model.safetensors", "{\"a\":{\"dtype\":\"Q4_K\",\"shape\":[4],\"data_offsets\":[0,2]}}", 8, -1);
    KT_ERR(open_model(&mf), KILN_ERR_UNSUPPORTED, "unsupported dtype \"Q4_K\"");
    write_st("model.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,12]}}", 16, -1);
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "shape needs 16 bytes");
    /* a shape that does not match the config */
    good_checkpoint();
    write_text("config.json",
               "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"intermediate_size\":32,"
               "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"vocab_size\":4,"
               "\"tie_word_embeddings\":true}");
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "has shape [16, 8] but the config implies [32, 8]");
    /* a missing tensor */
    write_text("config.json", tiny_cfg);
    write_text("config.json",
               "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"intermediate_size\":16,"
               "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"vocab_size\":4}");
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "missing tensor \"lm_head.weight\"");
    /* unknown architecture lists the supported ones */
    write_text("config.json",
               "{\"architectures\":[\"GPT2LMHeadModel\"],\"hidden_size\":8,\"intermediate_size\":16,"
               "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"vocab_size\":4}");
    KT_ERR(open_model(&mf), KILN_ERR_UNSUPPORTED, "supported: GlideLlamaForCausalLM, LlamaForCausalLM, MistralForCausalLM");
    write_text("config.json", tiny_cfg);
}

KT_TEST(test_index_errors) {
    mk_tmp();
    good_checkpoint();
    kiln_model_files mf;
    write_text("model.safetensors.index.json",
               "{\"weight_map\":{\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\"}}");
    KT_ERR(open_model(&mf), KILN_ERR_NOT_FOUND, "names shard");
    write_text("model.safetensors.index.json", "{\"weight_map\": 5}");
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "missing \"weight_map\"");
    write_text("model.safetensors.index.json", "{\"weight_map\":{\"x\":\"../../etc/passwd\"}}");
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "not a plain file name");
    write_text("model.safetensors.index.json", "{\"weight_map\":{\"nope\":\"model.safetensors\"}}");
    KT_ERR(open_model(&mf), KILN_ERR_FORMAT, "lists tensor \"nope\"");
    rm("model.safetensors.index.json");
}

KT_TEST(test_hf_cache_resolution) {
    mk_tmp();
    char hub[512], snap[600], ref[600];
    snprintf(hub, sizeof hub, "%s/hub", tmpdir);
    snprintf(snap, sizeof snap, "%s/models--acme--tiny/snapshots/abc123", hub);
    snprintf(ref, sizeof ref, "%s/models--acme--tiny/refs", hub);
    KT_OK(kiln_mkdirs(snap));
    KT_OK(kiln_mkdirs(ref));
    strcat(ref, "/main");
    KT_OK(kiln_write_file_atomic(ref, "abc123\n", 7));
    setenv("HF_HUB_CACHE", hub, 1);
    char *dir = NULL;
    KT_OK(kiln_model_resolve("acme/tiny", &dir));
    KT_CHECK(dir && !strcmp(dir, snap));
    free(dir);
    KT_ERR(kiln_model_resolve("acme/missing", &dir), KILN_ERR_NOT_FOUND, "not in the Hugging Face cache");
    KT_ERR(kiln_model_resolve("./no/such/dir", &dir), KILN_ERR_NOT_FOUND, "does not exist");
    unsetenv("HF_HUB_CACHE");
}

KT_MAIN(KT_CASE(test_config_errors), KT_CASE(test_config_rope_styles), KT_CASE(test_safetensors_errors),
        KT_CASE(test_index_errors), KT_CASE(test_hf_cache_resolution))
