/*
 * api.h -- the OpenAI request decoder and response encoder: pure functions
 * from bytes to a validated request (api_decode.c) and from engine events to
 * JSON / Server-Sent Event text (api_encode.c). No engine, no sockets, so
 * both are fuzzed directly (tests/fuzz/fuzz_server_*.c).
 * Ownership: api_request owns every pointer in it (api_request_free).
 * Thread-safety: no shared state; any thread.
 */
#ifndef KILN_SERVER_API_H
#define KILN_SERVER_API_H

#include "kiln.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define API_MAX_DEPTH 128         /* JSON nesting limit                     */
#define API_MAX_STOP 16           /* stop strings per request               */
#define API_MAX_STOP_LEN 256      /* bytes per stop string                  */
#define API_MAX_STOP_IDS 1024     /* stop_token_ids per request             */
#define API_MAX_LOGPROBS 20       /* logprobs / top_logprobs                */
#define API_MAX_PROMPTS 1024      /* prompts in one completion request      */

/* An OpenAI error object: {"error": {"message", "type", "param", "code"}}. */
typedef struct api_error {
    int status;        /* HTTP status                                    */
    const char *type;  /* "invalid_request_error", "server_error", ...   */
    const char *code;  /* NULL or "context_length_exceeded", ...         */
    char param[64];    /* "" when no parameter is at fault               */
    char message[1024];
} api_error;

/* Set *e (printf-style message); returns false so callers can `return api_fail(...)`. */
bool api_fail(api_error *e, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The error object as compact JSON (returned owned, free()). */
char *api_error_json(const api_error *e);

typedef enum api_kind { API_COMPLETION = 0, API_CHAT = 1 } api_kind;

typedef struct api_prompt {
    char *text;     /* UTF-8 text, or NULL when ids are given */
    size_t text_len;
    int32_t *ids;
    int n_ids;
} api_prompt;

typedef struct api_request {
    api_kind kind;
    char *model;               /* NULL: the served model                        */
    /* completions */
    api_prompt *prompts;
    int n_prompts;
    bool echo;
    /* chat */
    char *messages_json;       /* normalized messages array (content as text)   */
    char *template_extra_json; /* chat_template_kwargs (+ tools), or NULL       */
    bool add_generation_prompt;
    /* both */
    bool stream;
    bool include_usage;
    int n;
    bool max_tokens_set;
    double max_tokens;         /* integral; may exceed INT_MAX (huge requests)  */
    const char *max_tokens_param; /* "max_tokens" or "max_completion_tokens"    */
    int min_tokens;
    float temperature, top_p, min_p, presence_penalty, frequency_penalty, repetition_penalty;
    int top_k;
    char **stop;
    int n_stop;
    int32_t *stop_token_ids;
    int n_stop_token_ids;
    bool has_seed;
    uint64_t seed;
    bool ignore_eos;
    bool logprobs;             /* report logprobs of the sampled tokens          */
    int top_logprobs;          /* and this many alternatives                     */
    bool add_special_tokens;   /* BOS for text prompts                           */
    bool skip_special_tokens;
    bool include_stop_str_in_output;
} api_request;

typedef struct api_limits {
    int max_n;
    int vocab_size;            /* <= 0: token ids not range-checked here */
} api_limits;

/* Parse a request body (len bytes, need not be NUL-terminated) into JSON:
 * rejects bodies that are not a JSON object, nesting deeper than
 * API_MAX_DEPTH, invalid UTF-8, \u0000 and lone surrogates, naming the
 * position. Numbers too large for a double / int64 are read as +-1e308 so
 * the field check can say what is wrong with them. Returns owned JSON. */
json_t *api_parse_body(const char *body, size_t len, api_error *err);

/* Decode and validate a completions / chat request. Returns false with *err
 * set (status 400 naming the param) on bad input; *out is then empty. */
bool api_decode_request(const json_t *root, api_kind kind, const api_limits *lim, api_request *out, api_error *err);
void api_request_free(api_request *r);

/* Decoders for /tokenize and /detokenize. */
typedef struct api_tokenize_req {
    char *model;
    char *prompt;          /* text, or NULL for messages */
    size_t prompt_len;
    char *messages_json;
    char *template_extra_json;
    bool add_generation_prompt;
    bool add_special_tokens;
} api_tokenize_req;
bool api_decode_tokenize(const json_t *root, api_tokenize_req *out, api_error *err);
void api_tokenize_req_free(api_tokenize_req *r);

bool api_decode_detokenize(const json_t *root, int32_t **ids, int *n_ids, char **model, api_error *err);

/* ------------------------------------------------------------ encoding */

/* Growable byte buffer. */
typedef struct api_buf {
    char *data;
    size_t len, cap;
    bool oom;
} api_buf;
void api_buf_put(api_buf *b, const void *p, size_t n);
void api_buf_puts(api_buf *b, const char *s);
void api_buf_printf(api_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void api_buf_free(api_buf *b);

/* UTF-8 carry: text deltas are re-split so that no multi-byte sequence is
 * cut across chunks; invalid bytes become U+FFFD. */
typedef struct api_utf8 {
    unsigned char pend[4];
    int n_pend;
} api_utf8;
/* Append the valid UTF-8 prefix of (carry + text) to out; an incomplete
 * sequence at the end is kept in the carry unless flush. */
void api_utf8_feed(api_utf8 *u, const char *text, size_t len, bool flush, api_buf *out);

/* One generated token of one choice, as the connection thread sees it. */
typedef struct api_token {
    int32_t id;
    float logprob;
    const kiln_logprob *top;
    int n_top;
} api_token;

/* Decodes a token id to its text for logprobs (may be NULL: "<id>" is used). */
typedef struct api_token_namer {
    char *(*name)(void *user, int32_t id, size_t *len); /* returns owned (free()) */
    void *user;
} api_token_namer;

/* Per-response constants. */
typedef struct api_resp_info {
    api_kind kind;
    const char *id;       /* "cmpl-..." / "chatcmpl-..."   */
    long long created;
    const char *model;
    bool include_usage;   /* streaming: "usage": null in chunks + final usage chunk */
} api_resp_info;

/* Completions logprobs accumulator (also used for chat). */
typedef struct api_logprobs {
    json_t *tokens, *token_logprobs, *top_logprobs, *text_offset; /* completions */
    json_t *content;                                              /* chat */
} api_logprobs;
void api_logprobs_init(api_logprobs *lp, api_kind kind);
void api_logprobs_add(api_logprobs *lp, api_kind kind, const api_token *t, size_t text_offset,
                      const api_token_namer *namer);
/* Steals the accumulated arrays into a JSON object ("logprobs" value). */
json_t *api_logprobs_take(api_logprobs *lp, api_kind kind);
void api_logprobs_free(api_logprobs *lp);

const char *api_finish_name(kiln_finish_reason f);

/* SSE framing: "data: <json>\n\n". */
void api_sse_json(api_buf *out, json_t *obj);
void api_sse_done(api_buf *out);

/* A streaming chunk for one choice. text may be NULL. role_first: the chat
 * role chunk. logprobs: NULL or a JSON value (stolen). finish: NONE for
 * content chunks. */
json_t *api_chunk(const api_resp_info *ri, int index, const char *text, size_t text_len, bool role_first,
                  json_t *logprobs, kiln_finish_reason finish);
json_t *api_usage(int prompt_tokens, int completion_tokens);
/* The final usage chunk: choices [] and usage. */
json_t *api_usage_chunk(const api_resp_info *ri, int prompt_tokens, int completion_tokens);

#endif
