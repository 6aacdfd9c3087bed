/*
 * kiln.h -- the one public header of libkiln, an LLM inference engine.
 *
 * Conventions (they hold for every function below unless it says otherwise):
 *  - Fallible functions return kiln_status; results come back through
 *    out-parameters. On failure, kiln_last_error() describes what went wrong
 *    on the calling thread (message and origin); out-parameters are untouched.
 *  - Ownership: "borrows" means the callee does not keep the pointer past the
 *    call; "takes" means the callee frees it; "returns owned" means the caller
 *    frees it with the named function.
 *  - Threading: an engine is driven by one thread at a time (kiln_engine_step,
 *    kiln_engine_generate). kiln_engine_add_request, kiln_engine_cancel and
 *    kiln_engine_get_stats may be called from any thread at any time.
 *    Streaming callbacks run on the thread that calls kiln_engine_step.
 *  - The library never calls exit() or abort() on bad input, bad files or
 *    device errors.
 */
#ifndef KILN_H
#define KILN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KILN_API
#else
#define KILN_API __attribute__((visibility("default")))
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

/* ------------------------------------------------------------------ errors */

typedef enum kiln_status {
    KILN_OK = 0,
    KILN_ERR_INVALID_ARGUMENT, /* a bad parameter, option or request field   */
    KILN_ERR_NOT_FOUND,        /* file, directory, model, tensor, request id  */
    KILN_ERR_IO,               /* read/write/mmap failure                     */
    KILN_ERR_FORMAT,           /* malformed file or data                      */
    KILN_ERR_UNSUPPORTED,      /* valid but not supported (arch, dtype, ...)  */
    KILN_ERR_OUT_OF_MEMORY,    /* host or device memory                       */
    KILN_ERR_DEVICE,           /* CUDA, NVRTC, cuBLASLt, NCCL failure         */
    KILN_ERR_UNAVAILABLE,      /* a library or device is missing              */
    KILN_ERR_POLICY,           /* a Lua policy failed or returned a bad plan  */
    KILN_ERR_TEMPLATE,         /* a chat template failed                      */
    KILN_ERR_LIMIT,            /* a limit was exceeded (context length, ...)  */
    KILN_ERR_CANCELLED,        /* the operation was cancelled                 */
    KILN_ERR_BUSY,             /* queue full; try again later                 */
    KILN_ERR_FATAL,            /* the engine hit a sticky device fault        */
    KILN_ERR_INTERNAL,         /* a bug in kiln                               */
    KILN_STATUS_COUNT
} kiln_status;

/* A short constant name for a status, e.g. "KILN_ERR_FORMAT". Never NULL. */
KILN_API const char *kiln_status_name(kiln_status s);

/* The last error recorded on the calling thread: its message (with context
 * added by callers, outermost first) and the source location that raised it.
 * Returned strings are owned by the library and valid until the next kiln call
 * on this thread. Both return "" when there is no error. */
KILN_API const char *kiln_last_error(void);
KILN_API const char *kiln_last_error_origin(void);
KILN_API kiln_status kiln_last_error_code(void);
KILN_API void kiln_clear_error(void);

/* ----------------------------------------------------------------- logging */

typedef enum kiln_log_level {
    KILN_LOG_DEBUG = 0,
    KILN_LOG_INFO = 1,
    KILN_LOG_WARN = 2,
    KILN_LOG_ERROR = 3,
    KILN_LOG_OFF = 4
} kiln_log_level;

/* Receives each log line (no trailing newline). May be called from any
 * library thread; it must be thread-safe. */
typedef void (*kiln_log_fn)(void *user, kiln_log_level level, const char *msg);

/* Install a log callback (NULL restores the default, which writes to stderr).
 * Process-wide; call before creating engines. */
KILN_API void kiln_set_log_callback(kiln_log_fn fn, void *user);
/* Lines below this level are dropped. Default INFO, or $KILN_LOG_LEVEL
 * (debug|info|warn|error|off). Thread-safe. */
KILN_API void kiln_set_log_level(kiln_log_level level);
KILN_API kiln_log_level kiln_get_log_level(void);

/* --------------------------------------------------------------- tokenizer */

typedef struct kiln_tokenizer kiln_tokenizer;

/* Load a tokenizer from a file (tokenizer.json, tiktoken or SentencePiece
 * tokenizer.model) or a model directory. Returns owned; free with
 * kiln_tokenizer_destroy. */
KILN_API kiln_status kiln_tokenizer_load(const char *path, kiln_tokenizer **out);
KILN_API void kiln_tokenizer_destroy(kiln_tokenizer *tok);

typedef struct kiln_encode_options {
    bool add_special;   /* add BOS/EOS as the tokenizer's post-processor says */
    bool parse_special; /* special-token text (e.g. "<|eot_id|>") maps to its id */
} kiln_encode_options;

/* Encode UTF-8 text (len bytes). Invalid UTF-8 sequences are replaced by
 * U+FFFD before encoding. *ids is returned owned (free with kiln_free).
 * opt NULL means {add_special = true, parse_special = true}, as Hugging Face
 * tokenizer(text) does; a BOS already at the start of the text is not
 * doubled. Thread-safe: one tokenizer may encode from many threads. */
KILN_API kiln_status kiln_tokenize(const kiln_tokenizer *tok, const char *text, size_t len,
                                   const kiln_encode_options *opt, int32_t **ids,
                                   size_t *n_ids);
/* Decode ids to UTF-8 text; *text is returned owned, NUL-terminated (free with
 * kiln_free). Out-of-range ids are an error. The text is always valid UTF-8:
 * byte-level tokens that do not form valid UTF-8 become U+FFFD as in
 * Hugging Face tokenizers (per maximal ill-formed subpart; per byte for an
 * ill-formed run of <0xNN> byte-fallback tokens). Thread-safe. */
KILN_API kiln_status kiln_detokenize(const kiln_tokenizer *tok, const int32_t *ids, size_t n_ids,
                                     bool skip_special, char **text, size_t *len);
KILN_API int32_t kiln_tokenizer_vocab_size(const kiln_tokenizer *tok);
KILN_API int32_t kiln_tokenizer_bos_id(const kiln_tokenizer *tok); /* -1 if none */
KILN_API int32_t kiln_tokenizer_eos_id(const kiln_tokenizer *tok); /* -1 if none */
/* The text of one token as stored in the vocabulary (borrowed), or NULL. */
KILN_API const char *kiln_tokenizer_token_text(const kiln_tokenizer *tok, int32_t id);
/* Id of exact token text, or -1. */
KILN_API int32_t kiln_tokenizer_token_id(const kiln_tokenizer *tok, const char *text);

/* Render a chat. messages_json: a JSON array of {role, content, ...} objects;
 * extra_json: NULL or a JSON object of further template variables (tools,
 * bos_token, ...) overriding the model's. template_src: NULL to use the
 * model's template. *out is returned owned (kiln_free).
 * Rendering follows transformers' apply_chat_template (Jinja2 with
 * trim_blocks and lstrip_blocks; raise_exception, tojson, namespace,
 * strftime_now; message keys with null values dropped). kiln_chat_template_load
 * takes a model directory (chat_template.jinja, else the chat_template of
 * tokenizer_config.json, else chat_template.json; bos_token/eos_token from
 * tokenizer_config.json) or a template file. A template error, including
 * raise_exception's message, is KILN_ERR_TEMPLATE; a sandbox limit (output
 * size, loop iterations, nesting) is KILN_ERR_LIMIT. A loaded template is
 * immutable: renders may run on any threads at once. */
typedef struct kiln_chat_template kiln_chat_template;
KILN_API kiln_status kiln_chat_template_load(const char *model_dir_or_file,
                                             kiln_chat_template **out);
KILN_API kiln_status kiln_chat_template_from_string(const char *source, const char *name,
                                                    kiln_chat_template **out);
KILN_API void kiln_chat_template_destroy(kiln_chat_template *t);
KILN_API kiln_status kiln_chat_render(const kiln_chat_template *t, const char *messages_json,
                                      bool add_generation_prompt, const char *extra_json,
                                      char **out);

/* Free memory returned owned by kiln functions. NULL is ignored. */
KILN_API void kiln_free(void *p);

/* ------------------------------------------------------------------ engine */

typedef struct kiln_engine kiln_engine;

typedef struct kiln_engine_params {
    const char *model;          /* model directory, org/name in the HF cache,
                                   or a built-in config name with
                                   load_format "dummy" (llama3-8b, ...)      */
    const char *tokenizer;      /* NULL: from the model directory; "none"    */
    const char *device;         /* "auto" (default), "cpu", "cuda"           */
    int device_id;              /* CUDA device ordinal (default 0)           */
    const char *policy_file;    /* NULL: the family's built-in policy        */
    const char *policy_dir;     /* NULL: built-in policies                   */
    const char *policy_options; /* NULL or a JSON object passed to the policy */
    const char *dtype;          /* "auto" (checkpoint), "bf16", "fp16", "fp32" */
    const char *kv_cache_dtype; /* "auto" (the policy's choice, else the
                                   activation dtype; f32 on the CPU),
                                   "fp8_e4m3" (alias "fp8"), "fp8_e5m2",
                                   "bf16", "fp16", "fp32"                     */
    const char *load_format;    /* "auto" (safetensors) or "dummy"           */
    int tensor_parallel_size;   /* default 1                                 */
    int max_num_seqs;           /* running sequences, default 256            */
    int max_num_batched_tokens; /* tokens per step, default 8192             */
    int max_model_len;          /* 0: from config (max_position_embeddings)  */
    int block_size;             /* KV block size in tokens, default 16        */
    size_t kv_cache_bytes;      /* CPU: KV pool size (0: 256 MiB default);
                                   GPU: 0 = from gpu_memory_utilization       */
    int num_kv_blocks;          /* >0 forces the pool size in blocks (tests) */
    double gpu_memory_utilization; /* default 0.9                            */
    double prefill_ratio;       /* run a prefill step when waiting >= ratio *
                                   running (default 0.25), or when idle       */
    int n_threads;              /* CPU threads (0: all cores)                */
    bool enforce_eager;         /* disable CUDA graphs                       */
    uint64_t seed;              /* engine seed for requests without one      */
    /* speculative decoding */
    const char *speculative_method; /* NULL/"none", "draft", "glide", "ngram" */
    const char *speculative_model;  /* draft / GliDe checkpoint              */
    int num_speculative_tokens;     /* default 4                             */
    int ngram_min, ngram_max;       /* n-gram drafter window (default 1..4)  */
    /* FP8 E4M3 KV cache scales (E5M2 uses none): NULL / "auto" (the
     * policy's choice, else the checkpoint's k_scale / v_scale tensors, else
     * calibration at start-up), "calibrate", "checkpoint", "none" (scale 1),
     * or a JSON file: {"k_scale": x | [per layer] | [[per head] per layer],
     * "v_scale": ...} or vLLM's {"kv_cache": {"scaling_factor": {rank:
     * {layer: x}}}}. Stored = fp8(value / scale). */
    const char *kv_scales;
} kiln_engine_params;

/* Fill *p with defaults. Always call before setting fields. */
KILN_API void kiln_engine_default_params(kiln_engine_params *p);

/* Load the model and build the engine. Borrows params (strings are copied).
 * Returns owned; free with kiln_engine_destroy. */
KILN_API kiln_status kiln_engine_create(const kiln_engine_params *params, kiln_engine **out);
/* Frees everything, cancelling unfinished requests (their callbacks receive
 * a final event with finish reason ABORT). NULL is ignored. */
KILN_API void kiln_engine_destroy(kiln_engine *e);

/* The engine's tokenizer (borrowed, lives as long as the engine), or NULL
 * when the model has none. */
KILN_API const kiln_tokenizer *kiln_engine_tokenizer(const kiln_engine *e);
/* The engine's chat template (borrowed), or NULL when the model has none. */
KILN_API const kiln_chat_template *kiln_engine_chat_template(const kiln_engine *e);

typedef struct kiln_sampling_params {
    float temperature;        /* 0: greedy (default 1.0)                    */
    float top_p;              /* (0, 1], default 1                          */
    int top_k;                /* <= 0: off                                  */
    float min_p;              /* [0, 1], default 0                          */
    float presence_penalty;   /* [-2, 2]                                    */
    float frequency_penalty;  /* [-2, 2]                                    */
    float repetition_penalty; /* > 0, default 1                             */
    int no_repeat_ngram_size; /* 0: off                                     */
    int max_tokens;           /* default 16; < 0: until max_model_len       */
    int min_tokens;           /* EOS/stop suppressed before this many       */
    bool ignore_eos;
    bool has_seed;
    uint64_t seed;
    const int32_t *stop_token_ids; /* borrowed during add_request           */
    int n_stop_token_ids;
    const char *const *stop;       /* stop strings, borrowed during add     */
    int n_stop;                    /* matched across token boundaries; the
                                      stop string itself is not output      */
    bool skip_special_tokens;      /* for streamed text, default true        */
    int logprobs;                  /* 0: off; N: top-N logprobs per token    */
} kiln_sampling_params;

KILN_API void kiln_sampling_default_params(kiln_sampling_params *p);

typedef enum kiln_finish_reason {
    KILN_FINISH_NONE = 0, /* still running                               */
    KILN_FINISH_STOP,     /* EOS, stop token or stop string              */
    KILN_FINISH_LENGTH,   /* max_tokens or max_model_len                 */
    KILN_FINISH_ABORT,    /* cancelled, or the engine failed             */
} kiln_finish_reason;

typedef struct kiln_logprob {
    int32_t id;
    float logprob;
} kiln_logprob;

/* One streaming event: a new token (and the text it completes) or the end. */
typedef struct kiln_stream_event {
    uint64_t request_id;
    int32_t token;            /* -1 on a final event without a new token    */
    float logprob;            /* of `token` under the sampled distribution  */
    const kiln_logprob *top;  /* n_top entries, borrowed for the call        */
    int n_top;
    const char *text;         /* new text (UTF-8, may be ""), borrowed       */
    size_t text_len;
    kiln_finish_reason finish; /* != NONE on the last event                  */
    kiln_status error;        /* != KILN_OK when the request failed          */
    const char *error_message; /* borrowed, or NULL                          */
    int n_prompt_tokens;
    int n_generated_tokens;
} kiln_stream_event;

/* Called on the stepping thread. Return 0 to continue, non-zero to cancel the
 * request (a final ABORT event follows). */
typedef int (*kiln_stream_fn)(void *user, const kiln_stream_event *ev);

typedef struct kiln_request {
    const char *prompt;           /* UTF-8 text, or NULL when ids are given  */
    const int32_t *prompt_ids;    /* borrowed during the call                */
    int n_prompt_ids;
    bool add_special;             /* add BOS to text prompts (default true)  */
    kiln_sampling_params sampling;
    kiln_stream_fn on_event;      /* may be NULL                             */
    void *user;
    int num_speculative_tokens;   /* -1: the engine's setting (default);
                                     0: never speculate for this request     */
} kiln_request;

KILN_API void kiln_request_default(kiln_request *r);

/* Queue a request. Thread-safe. *id identifies it for cancel and in events.
 * Validates it first (empty prompt, ids out of vocabulary, context length,
 * sampling ranges) and returns an error without queueing. */
KILN_API kiln_status kiln_engine_add_request(kiln_engine *e, const kiln_request *r, uint64_t *id);
/* Cancel a queued or running request; its blocks are freed at the next step
 * and its callback receives an ABORT event. Thread-safe. Unknown ids:
 * KILN_ERR_NOT_FOUND. */
KILN_API kiln_status kiln_engine_cancel(kiln_engine *e, uint64_t id);
/* Run one scheduler step (a prefill or a decode batch); invokes callbacks.
 * *n_unfinished (optional) receives queued + running requests after the step.
 * Returns KILN_ERR_FATAL once the engine is dead. */
KILN_API kiln_status kiln_engine_step(kiln_engine *e, int *n_unfinished);
/* True while requests are queued or running. Thread-safe. */
KILN_API bool kiln_engine_has_work(kiln_engine *e);

/* Blocking convenience: run requests to completion through the batcher.
 * results[i] receives request i's generated ids and text (owned; free with
 * kiln_result_free). */
typedef struct kiln_result {
    int32_t *ids;   /* generated token ids */
    int n_ids;
    char *text;     /* generated text, NULL when the engine has no tokenizer */
    int n_prompt_tokens;
    kiln_finish_reason finish;
    kiln_status error;
} kiln_result;
KILN_API kiln_status kiln_engine_generate(kiln_engine *e, const kiln_request *reqs, int n,
                                          kiln_result *results);
KILN_API void kiln_result_free(kiln_result *r);

typedef struct kiln_stats {
    int num_running;
    int num_waiting;
    int num_kv_blocks;
    int num_free_kv_blocks;
    int block_size;
    double kv_cache_usage;           /* 0..1 */
    uint64_t prompt_tokens_total;
    uint64_t generation_tokens_total;
    uint64_t num_preemptions_total;
    uint64_t requests_finished[4];   /* by kiln_finish_reason */
    uint64_t steps_total;
    uint64_t spec_draft_tokens_total;
    uint64_t spec_accepted_tokens_total;
    uint64_t spec_steps_total;
    bool fatal;
    /* Wall time of the target model's forward (the executor call that
     * returns logits or, on the GPU, the sampled token ids: it includes the
     * device sync) by kind of step: any prefill in the batch; plain decode
     * (no drafted tokens in the batch); verification (drafted tokens in the
     * batch). Counts are steps; seconds are summed. */
    uint64_t prefill_steps_total;
    uint64_t decode_steps_total;
    uint64_t verify_steps_total;
    double prefill_forward_seconds_total;
    double decode_forward_seconds_total;
    double verify_forward_seconds_total;
    /* Drafting (n-gram lookup or the draft model's forwards) in decode
     * steps that speculate; draft_calls_total counts such steps. */
    uint64_t draft_calls_total;
    double draft_seconds_total;
    /* Pipelined decode (where the executor overlaps, the GPU; KILN_OVERLAP=0
     * turns it off): decode steps launched before the tokens of the step
     * ahead of them were on the host, their input tokens fed on the device.
     * Counted among decode_steps_total when collected. */
    uint64_t decode_pipelined_steps_total;
} kiln_stats;

/* Thread-safe snapshot of counters. */
KILN_API void kiln_engine_get_stats(kiln_engine *e, kiln_stats *s);

/* The engine's counters and latency histograms as Prometheus text, with
 * vLLM's metric names (vllm:num_requests_running, ...) labelled
 * model_name=model (NULL: the model argument). Thread-safe. *out returned
 * owned (kiln_free). */
KILN_API kiln_status kiln_engine_metrics_prometheus(kiln_engine *e, const char *model, char **out);

/* Model facts (borrowed strings live as long as the engine). */
typedef struct kiln_model_info {
    const char *architecture;
    const char *model_path;
    int vocab_size;
    int max_model_len;
    int hidden_size;
    int num_layers;
    const char *device;       /* "cpu" or "cuda" */
    const char *dtype;
    const char *kv_cache_dtype;
    const char *kv_cache_scales; /* FP8 E4M3: where the scales came from
                                    ("checkpoint", "calibration (N tokens)",
                                    "file PATH", "policy", "none"); else "" */
    int kv_cache_tokens;         /* capacity of the KV pool in tokens       */
} kiln_model_info;
KILN_API void kiln_engine_model_info(const kiln_engine *e, kiln_model_info *info);

/* Describe what kiln_engine_create would build, without loading weights:
 * the parsed config, the checkpoint's tensor table, the policy's plan and the
 * layer program listing. *out is returned owned (kiln_free). Validates the
 * checkpoint against the plan like kiln_engine_create does. */
KILN_API kiln_status kiln_explain(const kiln_engine_params *params, char **out);

/* Speculative decoding on/off at run time (when the engine was created with a
 * speculative method). Thread-safe; takes effect at the next step. */
KILN_API kiln_status kiln_engine_set_speculation(kiln_engine *e, bool enabled);

/* Speculative decoding as configured and as switched now. */
typedef struct kiln_speculation_info {
    const char *method;          /* "none", "ngram", "draft" or "glide" (static) */
    int num_speculative_tokens;  /* k; 0 without a method                         */
    bool enabled;                /* drafting at the next step                     */
} kiln_speculation_info;
/* Thread-safe. */
KILN_API void kiln_engine_speculation_info(kiln_engine *e, kiln_speculation_info *info);

#ifdef __cplusplus
}
#endif

#endif /* KILN_H */
