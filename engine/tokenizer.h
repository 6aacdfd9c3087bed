/*
 * tokenizer.h -- internal tokenizer API: the tokenizer object shared by the
 * three file formats (HF tokenizer.json BPE, Meta tiktoken tokenizer.model,
 * SentencePiece tokenizer.model), UTF-8 helpers, and the streaming
 * detokenizer the engine and server use to turn generated ids into text.
 *
 * Model of a tokenizer (every format is loaded into this one shape):
 *   text -> added/special tokens split out (leftmost-longest)
 *        -> each remaining segment: normalizer (SentencePiece-style "▁"
 *           prepend/replace, NFC) -> pre-tokenizer stages (PCRE2 regex
 *           splits, Metaspace split) -> byte-level mapping (GPT-2 style) or
 *           characters -> BPE merges by priority (rank or piece score) ->
 *           ids (byte fallback <0xNN> / unk for what is not in the vocab).
 *   ids  -> per-token decoded bytes concatenated -> (SentencePiece) one
 *           leading space stripped -> invalid UTF-8 replaced by U+FFFD
 *           (maximal subparts, as Rust's from_utf8_lossy). With byte
 *           fallback (Hugging Face's ByteFallback decoder), each maximal run
 *           of <0xNN> tokens that is not valid UTF-8 becomes one U+FFFD per
 *           byte instead, as transformers decodes it.
 *
 * Ownership: a kiln_tokenizer owns everything it points to. A kiln_detok
 * borrows its tokenizer (which must outlive it) and owns its buffers.
 * Thread-safety: a loaded tokenizer is immutable except for its pre-token
 * caches, which are guarded by per-slot mutexes (trylock; a busy cache is
 * simply not used), so kiln_tokenize / kiln_detokenize may be called from
 * any number of threads at once. A kiln_detok is used by one thread at a time.
 */
#ifndef KILN_TOKENIZER_H
#define KILN_TOKENIZER_H

#include "kiln_base.h"

#include <pthread.h>

/* ------------------------------------------------------------------ UTF-8 */

/* Length of the valid UTF-8 sequence starting at s[0..n) (1..4), or 0 when
 * s[0] does not start a valid, complete sequence. */
size_t kiln_utf8_seq_len(const unsigned char *s, size_t n);
/* Length of the maximal subpart of an ill-formed sequence at s[0..n) (at
 * least 1): the bytes one U+FFFD replaces. When more input could complete
 * the sequence (s is a valid but truncated prefix that reaches the end of
 * the buffer), returns 0 and the caller must wait for more bytes. */
size_t kiln_utf8_invalid_len(const unsigned char *s, size_t n, bool at_end);
/* True when s[0..n) is entirely valid UTF-8. */
bool kiln_utf8_valid(const char *s, size_t n);
/* Append s[0..n) to out with each maximal ill-formed subpart replaced by
 * U+FFFD. Returns the number of bytes consumed: all of them when at_end,
 * otherwise a trailing incomplete-but-valid prefix is left unconsumed. */
kiln_status kiln_utf8_repair(kiln_buf *out, const char *s, size_t n, bool at_end, size_t *consumed);
/* Decode one code point at s (must be valid); returns its length. */
size_t kiln_utf8_decode(const unsigned char *s, uint32_t *cp);
/* Encode cp (<= 0x10FFFF) to out (4 bytes room); returns the length. */
size_t kiln_utf8_encode(uint32_t cp, char *out);

/* ------------------------------------------- minimal JSON reader (tok_json.c) */

/* A fast in-place JSON DOM for large tokenizer.json files (Jansson takes
 * ~250 ms on Llama 3's 7 MB file; this takes ~30 ms). Strings are unescaped
 * inside the caller's buffer, so node strings point into it. Nodes are laid
 * out in document order: a container's first child is the next node. */
typedef enum kiln_tj_type {
    KILN_TJ_NULL = 0, KILN_TJ_FALSE, KILN_TJ_TRUE, KILN_TJ_NUM, KILN_TJ_STR, KILN_TJ_ARR, KILN_TJ_OBJ
} kiln_tj_type;

typedef struct kiln_tj_node {
    uint32_t off, len;         /* string: unescaped bytes; number: its text  */
    uint32_t key_off, key_len; /* member key when the parent is an object    */
    int32_t next;              /* next sibling, -1 = none                    */
    uint32_t count;            /* children of an array/object                */
    uint8_t type;
} kiln_tj_node;

typedef struct kiln_tj {
    char *buf;
    kiln_tj_node *nodes;
    size_t n, cap;
} kiln_tj;

/* Parse buf[0..len) in place. what names the file in errors. */
kiln_status kiln_tj_parse(kiln_tj *j, char *buf, size_t len, const char *what);
void kiln_tj_free(kiln_tj *j);
/* Member of object node obj by key, or -1 (also when obj is not an object). */
int32_t kiln_tj_get(const kiln_tj *j, int32_t obj, const char *key);
static inline int32_t kiln_tj_first(const kiln_tj *j, int32_t node) {
    return (node >= 0 && j->nodes[node].count) ? node + 1 : -1;
}
static inline int32_t kiln_tj_next(const kiln_tj *j, int32_t node) { return j->nodes[node].next; }
static inline kiln_tj_type kiln_tj_type_of(const kiln_tj *j, int32_t node) {
    return node < 0 ? KILN_TJ_NULL : (kiln_tj_type)j->nodes[node].type;
}
static inline const char *kiln_tj_str(const kiln_tj *j, int32_t node, size_t *len) {
    *len = j->nodes[node].len;
    return j->buf + j->nodes[node].off;
}
/* String value of a member (NULL when absent or not a string). */
const char *kiln_tj_get_str(const kiln_tj *j, int32_t obj, const char *key, size_t *len);
/* Boolean member; def when absent or null. */
bool kiln_tj_get_bool(const kiln_tj *j, int32_t obj, const char *key, bool def);
/* Numeric value of a number node (0 when not a number). */
double kiln_tj_num(const kiln_tj *j, int32_t node);
/* True when the string node equals s. */
bool kiln_tj_str_eq(const kiln_tj *j, int32_t node, const char *s);

/* --------------------------------------------------------------- internals */

/* Flags per token id. */
enum {
    KILN_TOKF_SPECIAL = 1 << 0, /* added special / control: skipped by skip_special */
    KILN_TOKF_ADDED = 1 << 1,   /* matched in text before pre-tokenization     */
    KILN_TOKF_BYTE = 1 << 2,    /* <0xNN> token decoded as a byte (byte_runs)   */
    KILN_TOKF_UNUSED = 1 << 3,  /* SentencePiece UNUSED piece (resegmented)     */
    KILN_TOKF_UNK = 1 << 4,
    KILN_TOKF_HOLE = 1 << 5,    /* id with no token (gap in the vocabulary)     */
};

typedef enum kiln_tok_format {
    KILN_TOK_FORMAT_HF_JSON = 1,
    KILN_TOK_FORMAT_TIKTOKEN,
    KILN_TOK_FORMAT_SENTENCEPIECE,
} kiln_tok_format;

/* One pre-tokenizer stage. */
typedef enum kiln_tok_stage_kind {
    KILN_TOK_STAGE_REGEX = 1, /* split by a regex; Isolated or Removed behavior */
    KILN_TOK_STAGE_METASPACE, /* replace ' ' by ▁, prepend, optionally split   */
    KILN_TOK_STAGE_BYTELEVEL_PREFIX, /* ByteLevel add_prefix_space              */
} kiln_tok_stage_kind;

typedef struct kiln_tok_stage {
    kiln_tok_stage_kind kind;
    void *re;        /* pcre2_code_8 *                                        */
    bool removed;    /* behavior "Removed": matches are dropped               */
    bool invert;     /* Split invert: the gaps are the delimiters             */
    bool ms_split;   /* Metaspace: split before each ▁                        */
    int ms_prepend;  /* Metaspace: 0 never, 1 always, 2 first                 */
} kiln_tok_stage;

#define KILN_TOK_MAX_STAGES 8
#define KILN_TOK_CACHE_SLOTS 4

typedef struct kiln_tok_cache kiln_tok_cache;

/* Open-addressing maps (tokenizer-private layout; see tok_core.c). */
typedef struct kiln_tok_strmap {
    uint32_t *slots; /* id + 1, 0 = empty                                      */
    uint32_t mask;
} kiln_tok_strmap;

typedef struct kiln_tok_pair {
    uint64_t key;    /* (left << 32 | right) + 1, 0 = empty                    */
    int32_t prio;    /* merge priority: lower merges first                     */
    int32_t merged;  /* id of the merged token                                 */
} kiln_tok_pair;

typedef struct kiln_tok_pairmap {
    kiln_tok_pair *slots; /* one cache-friendly array                          */
    uint32_t mask;
    size_t n;
} kiln_tok_pairmap;

typedef struct kiln_tok_added {
    int32_t id;
    bool special, lstrip, rstrip, single_word, normalized;
} kiln_tok_added;

struct kiln_tokenizer {
    kiln_tok_format format;
    char *source;            /* the file it was loaded from                   */
    int32_t n_vocab;         /* max id + 1                                     */
    /* token text as stored in the vocabulary ("Ġhello", "▁Hi", "<0x0A>"),
     * NUL-terminated inside text_blob                                        */
    char *text_blob;
    size_t text_blob_len;
    uint32_t *text_off;      /* [n_vocab + 1]                                 */
    /* decoded bytes of each token                                            */
    char *bytes_blob;
    uint32_t *bytes_off;     /* [n_vocab + 1]                                 */
    uint8_t *flags;          /* [n_vocab] KILN_TOKF_*                         */
    kiln_tok_strmap vocab;   /* stored text -> id (model vocab + added)       */
    kiln_tok_pairmap merges; /* (left id, right id) -> priority, merged id    */

    /* encoding pipeline */
    bool byte_level;         /* GPT-2 byte-to-unicode symbols                 */
    bool spm_normalize;      /* SentencePiece normalizer: ' ' -> ▁            */
    int spm_prepend;         /* ▁ prepended to: 0 no segment, 1 every non-empty
                                segment, 2 only the segment at text offset 0  */
    bool spm_remove_extra_ws;    /* SentencePiece remove_extra_whitespaces    */
    bool nfc;                /* NFC normalizer                                */
    bool byte_fallback;
    bool ignore_merges;
    bool fuse_unk;
    bool split_before_ws;    /* no piece joins X▁ (X != ▁): BPE per word      */
    bool strip_leading_space;/* decoder strips one leading space              */
    bool byte_runs;          /* <0xNN> tokens decode as bytes, run by run: a
                                run that is not valid UTF-8 becomes one U+FFFD
                                per byte (HF's ByteFallback decoder)           */
    int32_t unk_id;
    int32_t byte_sym_ids[256]; /* byte-level: id of byte b's symbol, or -1    */
    int32_t byte_fb_ids[256];  /* byte fallback: id of <0xNN>, or -1          */
    uint32_t byte_cp[256];     /* GPT-2 byte-to-unicode code points           */
    int16_t cp_byte[324];      /* the reverse mapping (cp < 324), -1 = none   */
    kiln_tok_stage stages[KILN_TOK_MAX_STAGES];
    int n_stages;

    /* added tokens: a byte trie over their content                           */
    kiln_tok_added *added;
    int n_added;
    int32_t *trie_child, *trie_sibling, *trie_value; /* value: added index or -1 */
    uint8_t *trie_byte;
    int n_trie, cap_trie;
    uint8_t added_first[256];/* 1: some added token starts with this byte     */

    /* BOS / EOS */
    int32_t bos_id, eos_id;
    bool add_bos, add_eos;

    /* pre-token caches (mutable, guarded)                                    */
    pthread_mutex_t cache_mu[KILN_TOK_CACHE_SLOTS];
    kiln_tok_cache *cache[KILN_TOK_CACHE_SLOTS];
    bool cache_mu_init;
};

/* Allocate an empty tokenizer with n_vocab ids (all holes). Returns owned. */
kiln_status kiln_tok_new(kiln_tok_format format, const char *source, int32_t n_vocab,
                         kiln_tokenizer **out);
/* Build step helpers used by the loaders (tok_core.c). Texts are copied. */
typedef struct kiln_tok_builder {
    kiln_buf text;   /* token texts, NUL-separated                              */
    uint32_t *off;   /* [n_vocab] offset into text, UINT32_MAX = hole          */
} kiln_tok_builder;
kiln_status kiln_tok_set_token(kiln_tokenizer *t, kiln_tok_builder *b, int32_t id, const char *text,
                               size_t len, uint8_t flags);
/* Finish the vocabulary: pack the texts and build the text -> id map. */
kiln_status kiln_tok_finish_vocab(kiln_tokenizer *t, kiln_tok_builder *b);
kiln_status kiln_tok_merges_init(kiln_tokenizer *t, size_t expected);
kiln_status kiln_tok_merges_add(kiln_tokenizer *t, int32_t left, int32_t right, int32_t prio,
                                int32_t merged);
kiln_status kiln_tok_add_added(kiln_tokenizer *t, const kiln_tok_added *a);
/* Compile a pre-tokenizer regex (PCRE2, UTF + UCP, JIT). */
kiln_status kiln_tok_add_regex_stage(kiln_tokenizer *t, const char *pattern, bool removed, bool invert);
/* Derived tables, once byte_level / byte_runs / added tokens are set: the
 * byte symbol and byte-fallback ids, the decoded bytes of every token
 * (byte-level reverse mapping, or ▁ -> space and <0xNN> -> byte), whether
 * BPE may run per ▁-word (split_before_ws), the added-token trie. */
kiln_status kiln_tok_finalize(kiln_tokenizer *t);

/* Id of the token whose stored text is s[0..n), or -1. */
int32_t kiln_tok_id(const kiln_tokenizer *t, const char *s, size_t n);

/* The GPT-2 byte-to-unicode mapping: code point for byte b. */
uint32_t kiln_tok_byte_to_cp(uint8_t b);

/* Format loaders (tok_hf.c, tok_tiktoken.c, tok_spm.c). data is the whole
 * file, NUL-terminated; the HF loader parses it in place (modifies it). */
kiln_status kiln_tok_load_hf_json(char *data, size_t len, const char *path, kiln_tokenizer **out);
/* config_json: NULL or a borrowed json_t * of tokenizer_config.json, whose
 * added_tokens_decoder may rename the 256 special tokens (Llama 3.1+). */
kiln_status kiln_tok_load_tiktoken(const char *data, size_t len, const char *path, const void *config_json,
                                   kiln_tokenizer **out);
kiln_status kiln_tok_load_spm(const char *data, size_t len, const char *path, kiln_tokenizer **out);
/* True when data looks like a tiktoken BPE file (base64 + rank lines). */
bool kiln_tok_is_tiktoken(const char *data, size_t len);

/* Apply tokenizer_config.json (add_bos_token, add_eos_token, bos_token,
 * eos_token). Borrowed json_t * passed as void * to keep jansson out. */
kiln_status kiln_tok_apply_config(kiln_tokenizer *t, const void *config_json);

/* Decoded bytes of one token (borrowed), or NULL for an invalid id. */
static inline const char *kiln_tok_bytes(const kiln_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    *len = t->bytes_off[id + 1] - t->bytes_off[id];
    return t->bytes_blob + t->bytes_off[id];
}
static inline bool kiln_tok_is_special(const kiln_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && (t->flags[id] & KILN_TOKF_SPECIAL);
}

/* NFC-normalize s[0..n) (valid UTF-8), appending to out (tok_nfc.c). */
kiln_status kiln_tok_nfc(const char *s, size_t n, kiln_buf *out);

/* Encode into ids (appending to *ids, a kiln_vec of int32_t). */
kiln_status kiln_tok_encode(const kiln_tokenizer *t, const char *text, size_t len, bool add_special,
                            bool parse_special, kiln_vec *ids);
/* Append a run of byte-fallback bytes as decoding does (the bytes when
 * valid UTF-8, else one U+FFFD per byte) and empty the run. */
kiln_status kiln_tok_flush_run(kiln_buf *out, kiln_buf *run);
/* Decode appending UTF-8 text to out. */
kiln_status kiln_tok_decode(const kiln_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                            kiln_buf *out);

/* ------------------------------------------------------ streaming detokenizer */

/*
 * kiln_detok turns generated ids into text one id at a time:
 *  - the concatenation of everything it emits equals decode(prefix + ids)
 *    minus decode(prefix) (with no prefix: decode(ids)), as long as no stop
 *    string matched;
 *  - it never emits part of a UTF-8 sequence (an incomplete tail is held
 *    until the next bytes complete or break it; ill-formed bytes become
 *    U+FFFD exactly as decoding at once does);
 *  - it holds back text that could be the start of a stop string; when a
 *    stop string appears (it may span tokens), the text before it is emitted,
 *    the stop string and everything after it are not, *stop_hit is set, and
 *    further pushes emit nothing;
 *  - per push it does O(token length + longest stop string) work.
 * prefix ids (the prompt) give context: whether any text came before (the
 * SentencePiece leading-space rule) and a trailing incomplete UTF-8 sequence
 * the generated bytes may complete. Their own text is never emitted.
 */
typedef struct kiln_detok kiln_detok;

kiln_status kiln_detok_create(const kiln_tokenizer *tok, const int32_t *prefix_ids, size_t n_prefix,
                              bool skip_special, const char *const *stops, int n_stops,
                              kiln_detok **out);
/* Appends newly safe text to out_text (may append nothing). stop_hit may be
 * NULL. Out-of-range ids are an error (nothing is emitted). */
kiln_status kiln_detok_push(kiln_detok *d, int32_t id, kiln_buf *out_text, bool *stop_hit);
/* End of generation: flush held-back text (an incomplete UTF-8 tail becomes
 * U+FFFD; a partial stop-string prefix is emitted as ordinary text). */
kiln_status kiln_detok_finish(kiln_detok *d, kiln_buf *out_text);
/* True once a stop string matched. */
bool kiln_detok_stopped(const kiln_detok *d);
void kiln_detok_destroy(kiln_detok *d);

#endif /* KILN_TOKENIZER_H */
