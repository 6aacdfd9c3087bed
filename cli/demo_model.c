/*
 * demo_model.c -- writes the small random-weight demo model the README's main
 * command uses when no model is given: a Llama-architecture checkpoint (4
 * layers, hidden 256, GQA 8/4, about 6 MB in bf16) with a byte-level
 * tokenizer, under $KILN_DEMO_DIR or ~/.cache/kiln/demo-model. Its output is
 * gibberish by design: the weights are random.
 */
#include "cli.h"
#include "kiln_base.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define DEMO_H 256
#define DEMO_I 688
#define DEMO_L 4
#define DEMO_NQ 8
#define DEMO_NKV 4
#define DEMO_HD 32
#define DEMO_V 260

static const char *specials[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|pad|>"};

/* GPT-2 byte-to-unicode: printable bytes map to themselves, the rest to
 * U+0100 onwards. Writes the UTF-8 of byte b's character into out. */
static void byte_char(int b, char out[4]) {
    int n = 0, cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
        cp = b;
    } else {
        int k = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) k++;
        cp = 256 + k;
    }
    if (cp < 0x80) out[n++] = (char)cp;
    else {
        out[n++] = (char)(0xC0 | (cp >> 6));
        out[n++] = (char)(0x80 | (cp & 0x3F));
    }
    out[n] = 0;
}

static kiln_status write_json(const char *dir, const char *name, json_t *j) {
    char *path = kiln_path_join(dir, name);
    char *text = json_dumps(j, JSON_INDENT(2));
    kiln_status st = (path && text) ? kiln_write_file_atomic(path, text, strlen(text))
                                    : KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of memory");
    free(path);
    free(text);
    json_decref(j);
    return st;
}

static kiln_status write_tokenizer(const char *dir) {
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        char c[4];
        byte_char(b, c);
        json_object_set_new(vocab, c, json_integer(b));
    }
    json_t *added = json_array();
    for (int i = 0; i < 4; i++)
        json_array_append_new(added, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", 256 + i, "content",
                                               specials[i], "single_word", 0, "lstrip", 0, "rstrip", 0,
                                               "normalized", 0, "special", 1));
    json_t *bytelevel = json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                                  "use_regex", 1);
    json_t *post = json_pack(
        "{s:s,s:[{s:{s:s,s:i}},{s:{s:s,s:i}}],s:[{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}}],"
        "s:{s:{s:s,s:[i],s:[s]}}}",
        "type", "TemplateProcessing", "single", "SpecialToken", "id", specials[0], "type_id", 0, "Sequence", "id", "A",
        "type_id", 0, "pair", "SpecialToken", "id", specials[0], "type_id", 0, "Sequence", "id", "A", "type_id", 0,
        "SpecialToken", "id", specials[0], "type_id", 1, "Sequence", "id", "B", "type_id", 1, "special_tokens",
        specials[0], "id", specials[0], "ids", 256, "tokens", specials[0]);
    json_t *model = json_pack("{s:s,s:n,s:n,s:n,s:n,s:b,s:b,s:b,s:o,s:[]}", "type", "BPE", "dropout", "unk_token",
                              "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
                              "ignore_merges", 0, "vocab", vocab, "merges");
    json_t *tok = json_pack("{s:s,s:n,s:n,s:o,s:n,s:o,s:o,s:o,s:o}", "version", "1.0", "truncation", "padding",
                            "added_tokens", added, "normalizer", "pre_tokenizer", bytelevel, "post_processor", post,
                            "decoder", json_deep_copy(bytelevel), "model", model);
    if (!tok) return KILN_FAIL(KILN_ERR_INTERNAL, "building the demo tokenizer failed");
    kiln_status st = write_json(dir, "tokenizer.json", tok);
    if (st) return st;
    json_t *tc = json_pack("{s:b,s:b,s:s,s:s,s:s}", "add_bos_token", 1, "add_eos_token", 0, "bos_token", specials[0],
                           "eos_token", specials[2],
                           "chat_template",
                           "{{ bos_token }}{% for message in messages %}{{ '<|start|>' + message['role'] + '\n' + "
                           "message['content'] + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ "
                           "'<|start|>assistant\n' }}{% endif %}");
    return write_json(dir, "tokenizer_config.json", tc);
}

/* safetensors writer for the demo weights (bf16). */
typedef struct demo_tensor {
    char name[96];
    int ndim;
    int64_t shape[2];
} demo_tensor;

static kiln_status write_weights(const char *dir) {
    kiln_status st = KILN_OK;
    demo_tensor t[8 + DEMO_L * 9];
    int n = 0;
#define ADD(nm, d0, d1)                                                                                      \
    do {                                                                                                     \
        snprintf(t[n].name, sizeof t[n].name, "%s", nm);                                                     \
        t[n].ndim = (d1) ? 2 : 1;                                                                            \
        t[n].shape[0] = d0;                                                                                  \
        t[n].shape[1] = d1;                                                                                  \
        n++;                                                                                                 \
    } while (0)
    ADD("model.embed_tokens.weight", DEMO_V, DEMO_H);
    ADD("model.norm.weight", DEMO_H, 0);
    ADD("lm_head.weight", DEMO_V, DEMO_H);
    char nm[96];
    for (int l = 0; l < DEMO_L; l++) {
        static const struct { const char *p; int r, c; } parts[] = {
            {"self_attn.q_proj.weight", DEMO_NQ * DEMO_HD, DEMO_H},  {"self_attn.k_proj.weight", DEMO_NKV * DEMO_HD, DEMO_H},
            {"self_attn.v_proj.weight", DEMO_NKV * DEMO_HD, DEMO_H}, {"self_attn.o_proj.weight", DEMO_H, DEMO_NQ * DEMO_HD},
            {"mlp.gate_proj.weight", DEMO_I, DEMO_H},                {"mlp.up_proj.weight", DEMO_I, DEMO_H},
            {"mlp.down_proj.weight", DEMO_H, DEMO_I},                {"input_layernorm.weight", DEMO_H, 0},
            {"post_attention_layernorm.weight", DEMO_H, 0},
        };
        for (size_t k = 0; k < KILN_ARRAY_LEN(parts); k++) {
            snprintf(nm, sizeof nm, "model.layers.%d.%s", l, parts[k].p);
            ADD(nm, parts[k].r, parts[k].c);
        }
    }
#undef ADD
    json_t *hdr = json_object();
    json_object_set_new(hdr, "__metadata__", json_pack("{s:s}", "format", "pt"));
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t numel = (size_t)t[i].shape[0] * (size_t)(t[i].ndim == 2 ? t[i].shape[1] : 1);
        json_t *shape = t[i].ndim == 2 ? json_pack("[I,I]", (json_int_t)t[i].shape[0], (json_int_t)t[i].shape[1])
                                       : json_pack("[I]", (json_int_t)t[i].shape[0]);
        json_object_set_new(hdr, t[i].name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", "BF16", "shape", shape, "data_offsets",
                                      (json_int_t)off, (json_int_t)(off + numel * 2)));
        off += numel * 2;
    }
    char *htext = json_dumps(hdr, JSON_COMPACT);
    json_decref(hdr);
    KILN_CHECK_ALLOC(htext);
    size_t hlen = strlen(htext), pad = (8 - hlen % 8) % 8;
    size_t total = 8 + hlen + pad + off;
    char *buf = malloc(total);
    if (!buf) {
        free(htext);
        return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of memory");
    }
    uint64_t hl = hlen + pad;
    memcpy(buf, &hl, 8);
    memcpy(buf + 8, htext, hlen);
    memset(buf + 8 + hlen, ' ', pad);
    free(htext);
    uint16_t *w = (uint16_t *)(buf + 8 + hlen + pad);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        size_t numel = (size_t)t[i].shape[0] * (size_t)(t[i].ndim == 2 ? t[i].shape[1] : 1);
        float std = t[i].ndim == 1 ? 0.0f : (strstr(t[i].name, "embed") || strstr(t[i].name, "lm_head") ? 0.5f : 0.08f);
        bool head = strstr(t[i].name, "lm_head") != NULL;
        for (size_t j = 0; j < numel; j++, k++) {
            uint32_t r[4];
            kiln_philox4x32(42, (uint64_t)i, j, r);
            float u1 = kiln_u32_to_unit(r[0]) + 1e-7f, u2 = kiln_u32_to_unit(r[1]);
            float v = t[i].ndim == 1 ? 1.0f : std * sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
            /* the LM head only scores printable ASCII bytes, so the demo's
             * gibberish is at least readable characters */
            int64_t tok = head ? (int64_t)(j / (size_t)t[i].shape[1]) : 65;
            if (head && (tok < 32 || tok > 126)) v = 0.0f;
            w[k] = kiln_f32_to_bf16(v);
        }
    }
    char *path = kiln_path_join(dir, "model.safetensors");
    st = path ? kiln_write_file_atomic(path, buf, total) : KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of memory");
    free(path);
    free(buf);
fail:
    return st;
}

kiln_status cli_demo_model(char **dir_out) {
    kiln_status st = KILN_OK;
    const char *env = getenv("KILN_DEMO_DIR");
    char *dir = env && *env ? kiln_strdup(env) : NULL;
    if (!dir) {
        const char *home = getenv("HOME");
        dir = kiln_asprintf("%s/.cache/kiln/demo-model", home && *home ? home : "/tmp");
    }
    KILN_CHECK_ALLOC(dir);
    char *marker = kiln_path_join(dir, "model.safetensors");
    bool exists = marker && kiln_path_exists(marker);
    free(marker);
    if (!exists) {
        fprintf(stderr, "kiln: writing the demo model (random weights, Llama architecture) to %s\n", dir);
        KILN_TRY(kiln_mkdirs(dir));
        json_t *cfg = json_pack(
            "{s:[s],s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:b,s:s,s:s,s:i,s:[i,i]}", "architectures",
            "LlamaForCausalLM", "model_type", "llama", "hidden_size", DEMO_H, "intermediate_size", DEMO_I,
            "num_hidden_layers", DEMO_L, "num_attention_heads", DEMO_NQ, "num_key_value_heads", DEMO_NKV, "vocab_size",
            DEMO_V, "max_position_embeddings", 2048, "rms_norm_eps", 1e-5, "rope_theta", 500000.0,
            "tie_word_embeddings", 0, "torch_dtype", "bfloat16", "hidden_act", "silu", "bos_token_id", 256,
            "eos_token_id", 257, 258);
        json_object_set_new(cfg, "_comment", json_string("kiln demo model: RANDOM WEIGHTS, output is gibberish"));
        KILN_TRY(write_json(dir, "config.json", cfg));
        KILN_TRY(write_json(dir, "generation_config.json", json_pack("{s:i,s:[i,i]}", "bos_token_id", 256,
                                                                      "eos_token_id", 257, 258)));
        KILN_TRY(write_tokenizer(dir));
        KILN_TRY(write_weights(dir));
    }
    *dir_out = dir;
    dir = NULL;
fail:
    free(dir);
    return st;
}
