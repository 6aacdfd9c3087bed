/*
 * model.h -- a Hugging Face model directory: its config.json,
 * generation_config.json and safetensors checkpoint (one file or shards).
 *
 * Ownership: kiln_model_files_open returns an owned object holding the
 * parsed config, the memory-mapped shards and the tensor table; tensor data
 * pointers borrow from the maps and live until kiln_model_files_close.
 * Thread-safety: immutable after open; safe to read from any thread.
 */
#ifndef KILN_MODEL_H
#define KILN_MODEL_H

#include "kiln_base.h"

#include <jansson.h>

#define KILN_MAX_DIMS 8
#define KILN_MAX_EOS 16

typedef struct kiln_rope_config {
    char type[24];          /* default, linear, dynamic, llama3, yarn, ... */
    double theta;           /* rope_theta (base)                           */
    double factor;          /* scaling factor (1 when none)                */
    double low_freq_factor; /* llama3                                      */
    double high_freq_factor;
    int original_max_position; /* llama3 / dynamic / yarn                 */
    double partial_rotary_factor; /* fraction of head_dim rotated (1)     */
    double attention_factor;   /* yarn mscale (0: default)                */
    double beta_fast, beta_slow;
} kiln_rope_config;

typedef struct kiln_model_config {
    char *architecture;   /* architectures[0], e.g. "LlamaForCausalLM"      */
    char *model_type;     /* "llama", "qwen2", ...                           */
    int hidden_size;
    int intermediate_size;
    int num_layers;
    int num_heads;
    int num_kv_heads;
    int head_dim;
    int vocab_size;
    int max_position_embeddings;
    double rms_norm_eps;
    kiln_rope_config rope;
    bool tie_word_embeddings;
    bool attention_bias;
    bool mlp_bias;
    kiln_dtype dtype;     /* torch_dtype / dtype; BF16 when absent           */
    char *hidden_act;
    int sliding_window;   /* 0: none                                         */
    int bos_token_id;     /* -1: none                                        */
    int eos_token_ids[KILN_MAX_EOS]; /* config + generation_config, deduped  */
    int n_eos;
    int pad_token_id;
    json_t *json;         /* the whole config.json (owned)                   */
    json_t *generation;   /* generation_config.json or NULL (owned)          */
} kiln_model_config;

/* Parse config.json (and generation_config.json beside it when present).
 * Names the missing or malformed field on error. */
kiln_status kiln_model_config_load(const char *dir, kiln_model_config *cfg);
/* Parse from JSON text (used for built-in configs and tests). */
kiln_status kiln_model_config_parse(const char *json_text, const char *what, kiln_model_config *cfg);
void kiln_model_config_free(kiln_model_config *cfg);
/* Print the parsed config, one "key: value" per line. */
kiln_status kiln_model_config_describe(const kiln_model_config *cfg, kiln_buf *out);

/* One tensor of a safetensors checkpoint. */
typedef struct kiln_tensor_info {
    char *name;
    kiln_dtype dtype;
    char st_dtype[16];       /* as written in the header ("BF16")           */
    int ndim;
    int64_t shape[KILN_MAX_DIMS];
    const void *data;        /* into the mmap of its shard                   */
    size_t nbytes;
    int file;                /* shard index                                  */
    uint64_t offset;         /* absolute byte offset in its shard file       */
} kiln_tensor_info;

typedef struct kiln_shard {
    char *path;
    kiln_mmap map;
    uint64_t data_start;     /* 8 + header length                            */
} kiln_shard;

typedef struct kiln_checkpoint {
    kiln_shard *shards;
    int n_shards;
    kiln_tensor_info *tensors; /* sorted by name                            */
    int n_tensors;
    size_t total_bytes;
} kiln_checkpoint;

/* Open model.safetensors, or the shards named by model.safetensors.index.json,
 * memory-mapped; validates every header. */
kiln_status kiln_checkpoint_open(const char *dir, kiln_checkpoint *ck);
/* Open a single safetensors file (appends to ck). */
kiln_status kiln_checkpoint_add_file(kiln_checkpoint *ck, const char *path);
void kiln_checkpoint_close(kiln_checkpoint *ck);
const kiln_tensor_info *kiln_checkpoint_find(const kiln_checkpoint *ck, const char *name);
/* Check that a tensor exists with the given shape (ndim entries) and a
 * float dtype (f32/f16/bf16); the error names tensor, expected and found. */
kiln_status kiln_checkpoint_expect(const kiln_checkpoint *ck, const char *name, int ndim,
                                   const int64_t *shape, const kiln_tensor_info **out);

/* Resolve a model argument: an existing directory, or "org/name" looked up
 * in the local Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub,
 * ~/.cache/huggingface/hub). Returns an owned path (free()). */
kiln_status kiln_model_resolve(const char *model, char **dir);

/* Built-in configs by name for --load-format dummy ("llama3-8b", ...): the
 * config.json text (static) or NULL. */
const char *kiln_builtin_config(const char *name);
/* Space-separated list of built-in config names (static). */
const char *kiln_builtin_config_names(void);


#endif /* KILN_MODEL_H */
