/*
 * tok_core.c -- the format-independent tokenizer: vocabulary and merge maps,
 * added-token matching, normalization, pre-tokenizer stages (PCRE2), BPE by
 * priority with a heap (O(n log n) on any pre-token length), the pre-token
 * cache, and decoding. The loaders (tok_hf.c, tok_tiktoken.c, tok_spm.c)
 * fill a kiln_tokenizer through the kiln_tok_* builder calls below.
 *
 * Ownership: the tokenizer owns its tables; kiln_tok_encode appends to the
 * caller's vector.
 * Thread-safety: encoding and decoding only read the tokenizer, except the
 * pre-token caches, each taken with pthread_mutex_trylock (a busy cache is
 * skipped), so concurrent calls are safe.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------ byte mapping */

uint32_t kiln_tok_byte_to_cp(uint8_t b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    uint32_t n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE))) n++;
    return 256 + n;
}

/* --------------------------------------------------------------- hash maps */

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static inline const char *tok_text(const kiln_tokenizer *t, int32_t id, size_t *len) {
    *len = t->text_off[id + 1] - t->text_off[id] - 1;
    return t->text_blob + t->text_off[id];
}

static int32_t strmap_get(const kiln_tokenizer *t, const char *s, size_t n) {
    if (!t->vocab.slots) return -1;
    uint32_t mask = t->vocab.mask;
    for (uint32_t i = (uint32_t)kiln_hash64(s, n, 0) & mask;; i = (i + 1) & mask) {
        uint32_t v = t->vocab.slots[i];
        if (!v) return -1;
        size_t l;
        const char *x = tok_text(t, (int32_t)(v - 1), &l);
        if (l == n && !memcmp(x, s, n)) return (int32_t)(v - 1);
    }
}

int32_t kiln_tok_id(const kiln_tokenizer *t, const char *s, size_t n) { return strmap_get(t, s, n); }

static kiln_status strmap_build(kiln_tokenizer *t) {
    size_t cap = 16;
    while (cap < (size_t)t->n_vocab * 2 + 16) cap *= 2;
    free(t->vocab.slots);
    t->vocab.slots = calloc(cap, sizeof(uint32_t));
    if (!t->vocab.slots) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (vocabulary map)");
    t->vocab.mask = (uint32_t)(cap - 1);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->flags[id] & KILN_TOKF_HOLE) continue;
        size_t n;
        const char *s = tok_text(t, id, &n);
        uint32_t i = (uint32_t)kiln_hash64(s, n, 0) & t->vocab.mask;
        for (;; i = (i + 1) & t->vocab.mask) {
            uint32_t v = t->vocab.slots[i];
            if (!v) {
                t->vocab.slots[i] = (uint32_t)id + 1;
                break;
            }
            size_t l;
            const char *x = tok_text(t, (int32_t)(v - 1), &l);
            if (l == n && !memcmp(x, s, n)) break; /* duplicate text: first id wins */
        }
    }
    return KILN_OK;
}

kiln_status kiln_tok_merges_init(kiln_tokenizer *t, size_t expected) {
    size_t cap = 1024;
    while (cap < expected * 2 + 16) cap *= 2;
    kiln_tok_pairmap *m = &t->merges;
    free(m->slots);
    m->slots = calloc(cap, sizeof *m->slots);
    m->n = 0;
    m->mask = (uint32_t)(cap - 1);
    if (!m->slots) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (merge table of %zu)", cap);
    return KILN_OK;
}

static kiln_status merges_grow(kiln_tokenizer *t) {
    kiln_tok_pairmap old = t->merges;
    memset(&t->merges, 0, sizeof t->merges);
    kiln_status st = kiln_tok_merges_init(t, (old.mask + 1));
    if (st) {
        t->merges = old;
        return st;
    }
    for (size_t i = 0; i <= old.mask; i++) {
        if (!old.slots[i].key) continue;
        uint32_t j = (uint32_t)mix64(old.slots[i].key) & t->merges.mask;
        while (t->merges.slots[j].key) j = (j + 1) & t->merges.mask;
        t->merges.slots[j] = old.slots[i];
        t->merges.n++;
    }
    free(old.slots);
    return KILN_OK;
}

kiln_status kiln_tok_merges_add(kiln_tokenizer *t, int32_t left, int32_t right, int32_t prio, int32_t merged) {
    kiln_tok_pairmap *m = &t->merges;
    if (!m->slots || (m->n + 1) * 2 > (size_t)m->mask + 1) {
        kiln_status st = m->slots ? merges_grow(t) : kiln_tok_merges_init(t, 1024);
        if (st) return st;
    }
    uint64_t k = (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
    uint32_t j = (uint32_t)mix64(k) & m->mask;
    for (;; j = (j + 1) & m->mask) {
        if (!m->slots[j].key) break;
        if (m->slots[j].key == k) return KILN_OK; /* first (best) one wins */
    }
    m->slots[j] = (kiln_tok_pair){k, prio, merged};
    m->n++;
    return KILN_OK;
}

static inline bool merges_get(const kiln_tokenizer *t, int32_t left, int32_t right, int32_t *prio,
                              int32_t *merged) {
    const kiln_tok_pairmap *m = &t->merges;
    if (!m->slots) return false;
    uint64_t k = (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
    for (uint32_t j = (uint32_t)mix64(k) & m->mask;; j = (j + 1) & m->mask) {
        const kiln_tok_pair *p = &m->slots[j];
        if (!p->key) return false;
        if (p->key == k) {
            *prio = p->prio;
            *merged = p->merged;
            return true;
        }
    }
}

/* ------------------------------------------------------------- construction */

kiln_status kiln_tok_new(kiln_tok_format format, const char *source, int32_t n_vocab, kiln_tokenizer **out) {
    kiln_status st = KILN_OK;
    kiln_tokenizer *t = calloc(1, sizeof *t);
    KILN_CHECK_ALLOC(t);
    KILN_CHECK(n_vocab > 0 && n_vocab < (1 << 28), KILN_ERR_FORMAT, "%s: bad vocabulary size %d", source,
               (int)n_vocab);
    t->format = format;
    t->source = kiln_strdup(source ? source : "");
    t->n_vocab = n_vocab;
    t->flags = malloc((size_t)n_vocab);
    KILN_CHECK_ALLOC(t->source);
    KILN_CHECK_ALLOC(t->flags);
    memset(t->flags, KILN_TOKF_HOLE, (size_t)n_vocab);
    t->unk_id = t->bos_id = t->eos_id = -1;
    for (int b = 0; b < 256; b++) {
        t->byte_sym_ids[b] = t->byte_fb_ids[b] = -1;
        t->byte_cp[b] = kiln_tok_byte_to_cp((uint8_t)b);
    }
    for (int c = 0; c < 324; c++) t->cp_byte[c] = -1;
    for (int b = 0; b < 256; b++) t->cp_byte[t->byte_cp[b]] = (int16_t)b;
    for (int i = 0; i < KILN_TOK_CACHE_SLOTS; i++) pthread_mutex_init(&t->cache_mu[i], NULL);
    t->cache_mu_init = true;
    *out = t;
    return KILN_OK;
fail:
    kiln_tokenizer_destroy(t);
    return st;
}

kiln_status kiln_tok_set_token(kiln_tokenizer *t, kiln_tok_builder *b, int32_t id, const char *text, size_t len,
                               uint8_t flags) {
    kiln_status st = KILN_OK;
    if (id < 0 || id >= t->n_vocab)
        return KILN_FAIL(KILN_ERR_FORMAT, "%s: token id %d is outside the vocabulary (size %d)", t->source,
                         (int)id, (int)t->n_vocab);
    if (!b->off) {
        b->off = malloc((size_t)t->n_vocab * sizeof(uint32_t));
        if (!b->off) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (vocabulary)");
        memset(b->off, 0xff, (size_t)t->n_vocab * sizeof(uint32_t));
    }
    if (b->text.len + len + 1 >= UINT32_MAX) return KILN_FAIL(KILN_ERR_LIMIT, "%s: vocabulary too large", t->source);
    if (memchr(text, 0, len))
        return KILN_FAIL(KILN_ERR_FORMAT, "%s: token %d contains a NUL byte", t->source, (int)id);
    b->off[id] = (uint32_t)b->text.len;
    if ((st = kiln_buf_append(&b->text, text, len))) return st;
    if ((st = kiln_buf_append(&b->text, "", 1))) return st;
    t->flags[id] = flags;
    return KILN_OK;
}

kiln_status kiln_tok_finish_vocab(kiln_tokenizer *t, kiln_tok_builder *b) {
    kiln_status st = KILN_OK;
    kiln_buf blob = {0};
    t->text_off = malloc(((size_t)t->n_vocab + 1) * sizeof(uint32_t));
    KILN_CHECK_ALLOC(t->text_off);
    KILN_TRY(kiln_buf_reserve(&blob, b->text.len + (size_t)t->n_vocab + 1));
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->text_off[id] = (uint32_t)blob.len;
        if (b->off && b->off[id] != UINT32_MAX) {
            const char *s = b->text.data + b->off[id];
            KILN_TRY(kiln_buf_append(&blob, s, strlen(s) + 1));
        } else {
            t->flags[id] = KILN_TOKF_HOLE;
            KILN_TRY(kiln_buf_append(&blob, "", 1));
        }
    }
    t->text_off[t->n_vocab] = (uint32_t)blob.len;
    t->text_blob_len = blob.len;
    t->text_blob = kiln_buf_steal(&blob);
    KILN_TRY(strmap_build(t));
fail:
    kiln_buf_free(&blob);
    kiln_buf_free(&b->text);
    free(b->off);
    b->off = NULL;
    return st;
}

static kiln_status trie_node(kiln_tokenizer *t, uint8_t byte, int32_t *out) {
    if (t->n_trie == t->cap_trie) {
        int cap = t->cap_trie ? t->cap_trie * 2 : 256;
        int32_t *c = realloc(t->trie_child, (size_t)cap * sizeof(int32_t));
        if (c) t->trie_child = c;
        int32_t *s = realloc(t->trie_sibling, (size_t)cap * sizeof(int32_t));
        if (s) t->trie_sibling = s;
        int32_t *v = realloc(t->trie_value, (size_t)cap * sizeof(int32_t));
        if (v) t->trie_value = v;
        uint8_t *b = realloc(t->trie_byte, (size_t)cap);
        if (b) t->trie_byte = b;
        if (!c || !s || !v || !b) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (added tokens)");
        t->cap_trie = cap;
    }
    int32_t i = t->n_trie++;
    t->trie_child[i] = t->trie_sibling[i] = t->trie_value[i] = -1;
    t->trie_byte[i] = byte;
    *out = i;
    return KILN_OK;
}

static kiln_status trie_insert(kiln_tokenizer *t, const char *s, size_t n, int32_t value) {
    kiln_status st;
    int32_t node;
    if (t->n_trie == 0 && (st = trie_node(t, 0, &node))) return st;
    node = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        int32_t ch = t->trie_child[node];
        while (ch >= 0 && t->trie_byte[ch] != c) ch = t->trie_sibling[ch];
        if (ch < 0) {
            if ((st = trie_node(t, c, &ch))) return st;
            t->trie_sibling[ch] = t->trie_child[node];
            t->trie_child[node] = ch;
        }
        node = ch;
    }
    if (t->trie_value[node] < 0) t->trie_value[node] = value;
    return KILN_OK;
}

kiln_status kiln_tok_add_added(kiln_tokenizer *t, const kiln_tok_added *a) {
    if (a->id < 0 || a->id >= t->n_vocab || (t->flags[a->id] & KILN_TOKF_HOLE))
        return KILN_FAIL(KILN_ERR_FORMAT, "%s: added token id %d has no text", t->source, (int)a->id);
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id == a->id) return KILN_OK;
    kiln_tok_added *n = realloc(t->added, (size_t)(t->n_added + 1) * sizeof *n);
    if (!n) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (added tokens)");
    t->added = n;
    t->added[t->n_added++] = *a;
    t->flags[a->id] |= KILN_TOKF_ADDED | (a->special ? KILN_TOKF_SPECIAL : 0);
    return KILN_OK;
}

/* Rewrite \s and \S so they mean Unicode White_Space exactly (as Rust's
 * regex and Oniguruma do; PCRE2's UCP \s lacks U+0085). */
#define WS_RANGES "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
static kiln_status rewrite_ws(const char *p, kiln_buf *out) {
    kiln_status st = KILN_OK;
    int in_class = 0;
    for (size_t i = 0; p[i]; i++) {
        char c = p[i];
        if (c == '\\' && p[i + 1]) {
            char d = p[i + 1];
            if (d == 's') {
                st = kiln_buf_puts(out, in_class ? WS_RANGES : "[" WS_RANGES "]");
            } else if (d == 'S' && !in_class) {
                st = kiln_buf_puts(out, "[^" WS_RANGES "]");
            } else {
                st = kiln_buf_append(out, p + i, 2);
            }
            if (st) return st;
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            if ((st = kiln_buf_append(out, "[", 1))) return st;
            /* a leading ^ and a leading ] are part of the class syntax */
            if (p[i + 1] == '^') {
                if ((st = kiln_buf_append(out, "^", 1))) return st;
                i++;
            }
            if (p[i + 1] == ']') {
                if ((st = kiln_buf_append(out, "]", 1))) return st;
                i++;
            }
            continue;
        }
        if (c == '[' && in_class && p[i + 1] == ':') { /* POSIX class [:alpha:] */
            const char *e = strstr(p + i + 2, ":]");
            if (e) {
                size_t l = (size_t)(e + 2 - (p + i));
                if ((st = kiln_buf_append(out, p + i, l))) return st;
                i += l - 1;
                continue;
            }
        }
        if (c == ']' && in_class) in_class = 0;
        if ((st = kiln_buf_append(out, &c, 1))) return st;
    }
    return KILN_OK;
}

kiln_status kiln_tok_add_regex_stage(kiln_tokenizer *t, const char *pattern, bool removed, bool invert) {
    kiln_status st = KILN_OK;
    kiln_buf pat = {0};
    if (t->n_stages >= KILN_TOK_MAX_STAGES)
        return KILN_FAIL(KILN_ERR_UNSUPPORTED, "%s: more than %d pre-tokenizer stages", t->source,
                         KILN_TOK_MAX_STAGES);
    KILN_TRY(rewrite_ws(pattern, &pat));
    int err;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(pat.data ? pat.data : ""), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        KILN_CHECK(0, KILN_ERR_FORMAT, "%s: pre-tokenizer regex does not compile at offset %zu: %s (pattern %s)",
                   t->source, (size_t)eoff, (const char *)msg, pattern);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* failure: the interpreter is used */
    kiln_tok_stage *sg = &t->stages[t->n_stages++];
    memset(sg, 0, sizeof *sg);
    sg->kind = KILN_TOK_STAGE_REGEX;
    sg->re = re;
    sg->removed = removed;
    sg->invert = invert;
fail:
    kiln_buf_free(&pat);
    return st;
}

static size_t ws_char_len(const unsigned char *s, size_t n);

kiln_status kiln_tok_finalize(kiln_tokenizer *t) {
    kiln_status st = KILN_OK;
    kiln_buf bytes = {0};
    char tmp[8];
    /* byte symbols and byte-fallback tokens */
    for (int b = 0; b < 256; b++) {
        if (t->byte_level) {
            size_t l = kiln_utf8_encode(t->byte_cp[b], tmp);
            t->byte_sym_ids[b] = strmap_get(t, tmp, l);
        }
        snprintf(tmp, sizeof tmp, "<0x%02X>", b);
        int32_t id = strmap_get(t, tmp, 6);
        t->byte_fb_ids[b] = id;
        if (id >= 0 && !t->byte_level && t->byte_runs) t->flags[id] |= KILN_TOKF_BYTE;
    }
    /* decoded bytes of every token */
    t->bytes_off = malloc(((size_t)t->n_vocab + 1) * sizeof(uint32_t));
    KILN_CHECK_ALLOC(t->bytes_off);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->bytes_off[id] = (uint32_t)bytes.len;
        size_t n;
        const char *s = tok_text(t, id, &n);
        if (t->flags[id] & KILN_TOKF_HOLE) continue;
        if (t->byte_level) {
            /* every char in the byte map -> its bytes; otherwise the raw text */
            size_t start = bytes.len, i = 0;
            bool ok = true;
            while (i < n) {
                size_t l = kiln_utf8_seq_len((const unsigned char *)s + i, n - i);
                uint32_t cp;
                if (!l) {
                    ok = false;
                    break;
                }
                kiln_utf8_decode((const unsigned char *)s + i, &cp);
                if (cp >= 324 || t->cp_byte[cp] < 0) {
                    ok = false;
                    break;
                }
                char c = (char)t->cp_byte[cp];
                KILN_TRY(kiln_buf_append(&bytes, &c, 1));
                i += l;
            }
            if (!ok) {
                bytes.len = start;
                KILN_TRY(kiln_buf_append(&bytes, s, n));
            }
        } else if (t->flags[id] & KILN_TOKF_BYTE) {
            unsigned v = 0;
            sscanf(s + 3, "%2X", &v);
            char c = (char)v;
            KILN_TRY(kiln_buf_append(&bytes, &c, 1));
        } else {
            size_t i = 0;
            while (i < n) {
                if (i + 3 <= n && !memcmp(s + i, "\xE2\x96\x81", 3)) {
                    KILN_TRY(kiln_buf_append(&bytes, " ", 1));
                    i += 3;
                } else {
                    KILN_TRY(kiln_buf_append(&bytes, s + i, 1));
                    i++;
                }
            }
        }
        KILN_CHECK(bytes.len < UINT32_MAX, KILN_ERR_LIMIT, "%s: vocabulary too large", t->source);
    }
    t->bytes_off[t->n_vocab] = (uint32_t)bytes.len;
    t->bytes_blob = kiln_buf_steal(&bytes);
    KILN_CHECK_ALLOC(t->bytes_blob);

    /* May BPE run per ▁-word? Only when no model token joins X▁ (X != ▁). */
    t->split_before_ws = false;
    if (!t->byte_level) {
        bool ok = true;
        for (int32_t id = 0; id < t->n_vocab && ok; id++) {
            if (t->flags[id] & (KILN_TOKF_HOLE | KILN_TOKF_ADDED)) continue;
            size_t n;
            const char *s = tok_text(t, id, &n);
            for (size_t i = 1; i + 3 <= n; i++)
                if (!memcmp(s + i, "\xE2\x96\x81", 3) && (i < 3 || memcmp(s + i - 3, "\xE2\x96\x81", 3))) {
                    ok = false;
                    break;
                }
        }
        t->split_before_ws = ok;
    }

    /* added tokens -> trie (normalized content when the normalizer would
     * change it: spaces become ▁) */
    memset(t->added_first, 0, sizeof t->added_first);
    for (int i = 0; i < t->n_added; i++) {
        size_t n;
        const char *s = tok_text(t, t->added[i].id, &n);
        if (!n) continue;
        KILN_TRY(trie_insert(t, s, n, i));
        t->added_first[(uint8_t)s[0]] = 1;
    }
    if (t->unk_id >= 0 && t->unk_id < t->n_vocab) t->flags[t->unk_id] |= KILN_TOKF_UNK;
    if (t->bos_id >= t->n_vocab) t->bos_id = -1;
    if (t->eos_id >= t->n_vocab) t->eos_id = -1;
fail:
    kiln_buf_free(&bytes);
    return st;
}

/* ------------------------------------------------------------ pre-token cache */

#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_ENTRIES (CACHE_SLOTS / 2)
#define CACHE_MAX_KEY 96
#define CACHE_MAX_BLOB (8u << 20)

typedef struct cache_ent {
    uint64_t h; /* 0 = empty */
    uint32_t key_off, val_off;
    uint16_t key_len, n_ids;
} cache_ent;

struct kiln_tok_cache {
    cache_ent *ents;
    size_t n;
    kiln_buf keys;
    kiln_vec vals; /* int32_t */
};

static void cache_free(kiln_tok_cache *c) {
    if (!c) return;
    free(c->ents);
    kiln_buf_free(&c->keys);
    kiln_vec_free(&c->vals);
    free(c);
}

static void cache_clear(kiln_tok_cache *c) {
    memset(c->ents, 0, CACHE_SLOTS * sizeof *c->ents);
    c->n = 0;
    c->keys.len = 0;
    c->vals.len = 0;
}

static const int32_t *cache_get(kiln_tok_cache *c, const char *s, size_t n, uint64_t h, size_t *n_ids) {
    for (uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        cache_ent *e = &c->ents[i];
        if (!e->h) return NULL;
        if (e->h == h && e->key_len == n && !memcmp(c->keys.data + e->key_off, s, n)) {
            *n_ids = e->n_ids;
            return (const int32_t *)c->vals.data + e->val_off;
        }
    }
}

static void cache_put(kiln_tok_cache *c, const char *s, size_t n, uint64_t h, const int32_t *ids, size_t n_ids) {
    if (n_ids > 0xffff) return;
    if (c->n >= CACHE_MAX_ENTRIES || c->keys.len + n > CACHE_MAX_BLOB || c->vals.len + n_ids > CACHE_MAX_BLOB)
        cache_clear(c);
    size_t ko = c->keys.len, vo = c->vals.len;
    if (kiln_buf_append(&c->keys, s, n)) return;
    if (kiln_vec_resize(&c->vals, vo + n_ids)) {
        c->keys.len = ko;
        return;
    }
    memcpy((int32_t *)c->vals.data + vo, ids, n_ids * sizeof(int32_t));
    uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);
    while (c->ents[i].h) i = (i + 1) & (CACHE_SLOTS - 1);
    c->ents[i] = (cache_ent){h, (uint32_t)ko, (uint32_t)vo, (uint16_t)n, (uint16_t)n_ids};
    c->n++;
}

/* ----------------------------------------------------------------- encoding */

typedef struct bsym {
    int32_t id;
    int32_t prev, next;
    uint32_t start, len; /* bytes of the word; len 0 = merged away */
} bsym;

typedef struct hent {
    int32_t prio, pos, left, right;
} hent;

typedef struct enc {
    const kiln_tokenizer *t;
    kiln_vec *ids;
    kiln_tok_cache *cache;
    int cache_slot;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    kiln_buf norm, conv, word;
    kiln_buf stage_buf[KILN_TOK_MAX_STAGES];
    bsym *syms;
    size_t cap_syms;
    hent *heap;
    size_t n_heap, cap_heap;
} enc;

static inline kiln_status push_id(enc *e, int32_t id) {
    kiln_vec *v = e->ids;
    if (v->len == v->cap) {
        kiln_status st = kiln_vec_resize(v, v->len + 1);
        if (st) return st;
        v->len--;
    }
    ((int32_t *)v->data)[v->len++] = id;
    return KILN_OK;
}

static inline bool hent_less(const hent *a, const hent *b) {
    return a->prio < b->prio || (a->prio == b->prio && a->pos < b->pos);
}

static kiln_status heap_push(enc *e, hent h) {
    if (e->n_heap == e->cap_heap) {
        size_t cap = e->cap_heap ? e->cap_heap * 2 : 256;
        hent *n = realloc(e->heap, cap * sizeof *n);
        if (!n) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (BPE heap)");
        e->heap = n;
        e->cap_heap = cap;
    }
    size_t i = e->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hent_less(&h, &e->heap[p])) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = h;
    return KILN_OK;
}

static hent heap_pop(enc *e) {
    hent top = e->heap[0], last = e->heap[--e->n_heap];
    size_t i = 0, n = e->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && hent_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!hent_less(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n) e->heap[i] = last;
    return top;
}

static kiln_status try_pair(enc *e, int32_t i) {
    bsym *s = e->syms;
    int32_t j = s[i].next;
    if (j < 0 || s[i].id < 0 || s[j].id < 0) return KILN_OK;
    int32_t prio, merged;
    if (!merges_get(e->t, s[i].id, s[j].id, &prio, &merged)) return KILN_OK;
    return heap_push(e, (hent){prio, i, s[i].id, s[j].id});
}

/* Emit a SentencePiece UNUSED piece as the pieces it was merged from. */
static kiln_status emit_resegment(enc *e, int32_t id, int depth) {
    const kiln_tokenizer *t = e->t;
    if (depth < 32 && (t->flags[id] & KILN_TOKF_UNUSED)) {
        size_t n;
        const char *s = tok_text(t, id, &n);
        for (size_t k = 1; k < n; k++) {
            if (((unsigned char)s[k] & 0xC0) == 0x80) continue;
            int32_t a = strmap_get(t, s, k), b = strmap_get(t, s + k, n - k), prio, m;
            if (a >= 0 && b >= 0 && merges_get(t, a, b, &prio, &m) && m == id) {
                kiln_status st = emit_resegment(e, a, depth + 1);
                if (st) return st;
                return emit_resegment(e, b, depth + 1);
            }
        }
    }
    return push_id(e, id);
}

/* BPE on one pre-token (bytes s[0..n), valid UTF-8 unless byte-level). */
static kiln_status bpe_word(enc *e, const char *s, size_t n) {
    kiln_status st = KILN_OK;
    const kiln_tokenizer *t = e->t;
    if (n == 0) return KILN_OK;
    uint64_t h = 0;
    size_t start_len = e->ids->len;
    if (e->cache && n <= CACHE_MAX_KEY) {
        h = kiln_hash64(s, n, 0x6b696c6e) | 1;
        size_t k;
        const int32_t *hit = cache_get(e->cache, s, n, h, &k);
        if (hit) {
            if ((st = kiln_vec_resize(e->ids, e->ids->len + k))) return st;
            memcpy((int32_t *)e->ids->data + start_len, hit, k * sizeof(int32_t));
            return KILN_OK;
        }
    }
    if (t->ignore_merges) {
        const char *key = s;
        size_t kn = n;
        if (t->byte_level) {
            e->conv.len = 0;
            if ((st = kiln_buf_reserve(&e->conv, n * 2))) return st;
            for (size_t i = 0; i < n; i++)
                e->conv.len += kiln_utf8_encode(t->byte_cp[(uint8_t)s[i]], e->conv.data + e->conv.len);
            key = e->conv.data;
            kn = e->conv.len;
        }
        int32_t id = strmap_get(t, key, kn);
        if (id >= 0 && !(t->flags[id] & KILN_TOKF_ADDED)) {
            if ((st = push_id(e, id))) return st;
            goto done;
        }
    }
    /* initial symbols */
    if (n + 1 > e->cap_syms) {
        size_t cap = KILN_MAX(n + 1, e->cap_syms * 2);
        bsym *ns = realloc(e->syms, cap * sizeof *ns);
        if (!ns) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (BPE of a %zu-byte piece)", n);
        e->syms = ns;
        e->cap_syms = cap;
    }
    bsym *sy = e->syms;
    int32_t ns = 0;
    if (t->byte_level) {
        for (size_t i = 0; i < n; i++, ns++) sy[ns] = (bsym){t->byte_sym_ids[(uint8_t)s[i]], ns - 1, ns + 1, (uint32_t)i, 1};
    } else {
        size_t i = 0;
        while (i < n) {
            size_t l = kiln_utf8_seq_len((const unsigned char *)s + i, n - i);
            if (!l) l = 1;
            int32_t id = strmap_get(t, s + i, l);
            if (id >= 0 && (t->flags[id] & KILN_TOKF_SPECIAL)) id = -1;
            if (id >= 0) {
                sy[ns] = (bsym){id, ns - 1, ns + 1, (uint32_t)i, (uint32_t)l};
                ns++;
            } else if (t->byte_fallback && t->byte_fb_ids[(uint8_t)s[i]] >= 0) {
                for (size_t k = 0; k < l; k++) {
                    int32_t b = t->byte_fb_ids[(uint8_t)s[i + k]];
                    sy[ns] = (bsym){b >= 0 ? b : t->unk_id, ns - 1, ns + 1, (uint32_t)(i + k), 1};
                    ns++;
                }
            } else {
                sy[ns] = (bsym){-1, ns - 1, ns + 1, (uint32_t)i, (uint32_t)l};
                ns++;
            }
            i += l;
        }
    }
    sy[ns - 1].next = -1;
    /* merge by priority, leftmost first on ties */
    e->n_heap = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if ((st = try_pair(e, i))) return st;
    while (e->n_heap) {
        hent top = heap_pop(e);
        bsym *a = &sy[top.pos];
        if (!a->len || a->id != top.left || a->next < 0) continue;
        bsym *b = &sy[a->next];
        if (b->id != top.right) continue;
        int32_t prio, merged;
        if (!merges_get(t, a->id, b->id, &prio, &merged)) continue;
        a->id = merged;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0) sy[a->next].prev = top.pos;
        if (a->prev >= 0 && (st = try_pair(e, a->prev))) return st;
        if ((st = try_pair(e, top.pos))) return st;
    }
    /* emit */
    bool prev_unk = false;
    for (int32_t i = 0; i >= 0; i = sy[i].next) {
        int32_t id = sy[i].id;
        if (id < 0) id = t->unk_id;
        if (id < 0) continue; /* no unk token: dropped, as Hugging Face does */
        bool is_unk = id == t->unk_id;
        if (is_unk && prev_unk && t->fuse_unk) continue;
        prev_unk = is_unk;
        if ((st = emit_resegment(e, id, 0))) return st;
    }
done:
    if (e->cache && n <= CACHE_MAX_KEY)
        cache_put(e->cache, s, n, h, (const int32_t *)e->ids->data + start_len, e->ids->len - start_len);
    return KILN_OK;
}

/* Final pieces: BPE, per ▁-word when no token spans a word start. */
static kiln_status word(enc *e, const char *s, size_t n) {
    if (!e->t->split_before_ws) return bpe_word(e, s, n);
    size_t start = 0;
    for (size_t i = 3; i + 3 <= n; i++) {
        if (!memcmp(s + i, "\xE2\x96\x81", 3) && memcmp(s + i - 3, "\xE2\x96\x81", 3)) {
            kiln_status st = bpe_word(e, s + start, i - start);
            if (st) return st;
            start = i;
            i += 2;
        }
    }
    return bpe_word(e, s + start, n - start);
}

static kiln_status run_stage(enc *e, int k, const char *s, size_t n, bool origin);

static int regex_match(enc *e, const kiln_tok_stage *sg, const char *s, size_t n, size_t pos) {
    int rc = pcre2_match((pcre2_code *)sg->re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, e->md, e->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !e->jstack) {
        e->jstack = pcre2_jit_stack_create(64 * 1024, 256 * 1024 * 1024, NULL);
        if (!e->mctx) e->mctx = pcre2_match_context_create(NULL);
        if (e->jstack && e->mctx) {
            pcre2_jit_stack_assign(e->mctx, NULL, e->jstack);
            rc = pcre2_match((pcre2_code *)sg->re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, e->md, e->mctx);
        }
    }
    return rc;
}

static kiln_status stage_piece(enc *e, int k, const char *s, size_t n, bool origin) {
    if (!n) return KILN_OK;
    return run_stage(e, k + 1, s, n, origin);
}

static kiln_status run_stage(enc *e, int k, const char *s, size_t n, bool origin) {
    kiln_status st = KILN_OK;
    const kiln_tokenizer *t = e->t;
    if (k == t->n_stages) return word(e, s, n);
    const kiln_tok_stage *sg = &t->stages[k];
    switch (sg->kind) {
    case KILN_TOK_STAGE_REGEX: {
        size_t pos = 0, last = 0;
        while (pos <= n) {
            int rc = regex_match(e, sg, s, n, pos);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return KILN_FAIL(KILN_ERR_LIMIT, "pre-tokenizer regex failed on a %zu-byte piece: %s", n,
                                 (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
            size_t ms = ov[0], me = ov[1];
            if (me <= ms) { /* empty match: step one character */
                if (ms >= n) break;
                size_t l = kiln_utf8_seq_len((const unsigned char *)s + ms, n - ms);
                pos = ms + (l ? l : 1);
                continue;
            }
            if (ms > last) {
                bool keep = !sg->removed || sg->invert;
                if (keep && (st = stage_piece(e, k, s + last, ms - last, origin && last == 0))) return st;
            }
            bool keep = !sg->removed || !sg->invert;
            if (keep && (st = stage_piece(e, k, s + ms, me - ms, origin && ms == 0))) return st;
            last = pos = me;
        }
        if (last < n) {
            bool keep = !sg->removed || sg->invert;
            if (keep && (st = stage_piece(e, k, s + last, n - last, origin && last == 0))) return st;
        }
        return KILN_OK;
    }
    case KILN_TOK_STAGE_METASPACE: {
        kiln_buf *b = &e->stage_buf[k];
        b->len = 0;
        bool starts = n >= 1 && (s[0] == ' ' || (n >= 3 && !memcmp(s, "\xE2\x96\x81", 3)));
        if (!starts && (sg->ms_prepend == 1 || (sg->ms_prepend == 2 && origin)))
            if ((st = kiln_buf_append(b, "\xE2\x96\x81", 3))) return st;
        if ((st = kiln_buf_reserve(b, n * 3))) return st;
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ' ') {
                memcpy(b->data + b->len, "\xE2\x96\x81", 3);
                b->len += 3;
            } else {
                b->data[b->len++] = s[i];
            }
        }
        if (!sg->ms_split) return stage_piece(e, k, b->data, b->len, origin);
        size_t start = 0;
        for (size_t i = 1; i + 3 <= b->len; i++) {
            if (!memcmp(b->data + i, "\xE2\x96\x81", 3)) {
                if ((st = stage_piece(e, k, b->data + start, i - start, origin && start == 0))) return st;
                start = i;
                i += 2;
            }
        }
        return stage_piece(e, k, b->data + start, b->len - start, origin && start == 0);
    }
    case KILN_TOK_STAGE_BYTELEVEL_PREFIX: {
        if (s[0] == ' ') return stage_piece(e, k, s, n, origin);
        kiln_buf *b = &e->stage_buf[k];
        b->len = 0;
        if ((st = kiln_buf_append(b, " ", 1)) || (st = kiln_buf_append(b, s, n))) return st;
        return stage_piece(e, k, b->data, b->len, origin);
    }
    }
    return KILN_FAIL(KILN_ERR_INTERNAL, "unknown pre-tokenizer stage");
}

/* Python/Rust whitespace (char::is_whitespace): length of the char at s or 0. */
static size_t ws_char_len(const unsigned char *s, size_t n) {
    if (!n) return 0;
    unsigned char c = s[0];
    if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
    if (c < 0x80) return 0;
    size_t l = kiln_utf8_seq_len(s, n);
    if (!l) return 0;
    uint32_t cp;
    kiln_utf8_decode(s, &cp);
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
        cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return l;
    return 0;
}

static bool is_word_byte(unsigned char c) {
    return c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* Find the next added token in s[from..n): leftmost, then longest.
 * want: 1 = tokens matched on raw text, 2 = normalized tokens (SentencePiece
 * second pass). Returns the added index or -1; *ms,*me: the span consumed
 * (with lstrip/rstrip whitespace). */
static int find_added(const kiln_tokenizer *t, const char *s, size_t n, size_t from, bool parse_special,
                      int want, size_t *ms, size_t *me) {
    if (!t->n_added || !t->n_trie) return -1;
    for (size_t p = from; p < n; p++) {
        if (!t->added_first[(uint8_t)s[p]]) continue;
        int32_t node = 0, best = -1;
        size_t best_end = 0;
        for (size_t q = p; q < n; q++) {
            int32_t ch = t->trie_child[node];
            while (ch >= 0 && t->trie_byte[ch] != (uint8_t)s[q]) ch = t->trie_sibling[ch];
            if (ch < 0) break;
            node = ch;
            int32_t v = t->trie_value[node];
            if (v >= 0) {
                const kiln_tok_added *a = &t->added[v];
                bool norm_pass = t->spm_normalize && a->normalized && !a->special;
                if ((want == 2) != norm_pass) continue;
                if (a->special && !parse_special) continue;
                best = v;
                best_end = q + 1;
            }
        }
        if (best < 0) continue;
        const kiln_tok_added *a = &t->added[best];
        if (a->single_word) {
            bool before_ok = p == 0 || !is_word_byte((unsigned char)s[p - 1]);
            bool after_ok = best_end >= n || !is_word_byte((unsigned char)s[best_end]);
            if (!before_ok || !after_ok) continue;
        }
        size_t a0 = p, a1 = best_end;
        if (a->lstrip) {
            while (a0 > from) {
                size_t k = a0 - 1;
                while (k > from && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
                if (!ws_char_len((const unsigned char *)s + k, a0 - k)) break;
                a0 = k;
            }
        }
        if (a->rstrip) {
            size_t l;
            while (a1 < n && (l = ws_char_len((const unsigned char *)s + a1, n - a1))) a1 += l;
        }
        *ms = a0;
        *me = a1;
        return best;
    }
    return -1;
}

/* Normalized text of one segment -> stages (after the second added-token
 * pass for SentencePiece-normalized added tokens). */
static kiln_status encode_normalized(enc *e, const char *s, size_t n, bool origin, bool parse_special) {
    kiln_status st;
    const kiln_tokenizer *t = e->t;
    if (t->spm_normalize && t->n_added) {
        size_t pos = 0, ms, me;
        int a;
        while ((a = find_added(t, s, n, pos, parse_special, 2, &ms, &me)) >= 0) {
            if (ms > pos && (st = run_stage(e, 0, s + pos, ms - pos, origin && pos == 0))) return st;
            if ((st = push_id(e, t->added[a].id))) return st;
            pos = me;
        }
        return pos < n ? run_stage(e, 0, s + pos, n - pos, origin && pos == 0) : KILN_OK;
    }
    return run_stage(e, 0, s, n, origin);
}

static kiln_status encode_segment(enc *e, const char *s, size_t n, bool at_start, bool parse_special) {
    kiln_status st;
    const kiln_tokenizer *t = e->t;
    if (!n) return KILN_OK;
    if (t->nfc) {
        e->word.len = 0;
        if ((st = kiln_tok_nfc(s, n, &e->word))) return st;
        s = e->word.data;
        n = e->word.len;
    }
    if (!t->spm_normalize) return encode_normalized(e, s, n, at_start, parse_special);
    /* SentencePiece normalization: optional whitespace cleanup, ▁ prefix,
     * spaces to ▁ */
    kiln_buf *b = &e->norm;
    b->len = 0;
    size_t i0 = 0, i1 = n;
    if (t->spm_remove_extra_ws) {
        while (i0 < i1 && s[i0] == ' ') i0++;
        while (i1 > i0 && s[i1 - 1] == ' ') i1--;
        if (i0 == i1) return KILN_OK;
    }
    if (t->spm_prepend == 1 || (t->spm_prepend == 2 && at_start))
        if ((st = kiln_buf_append(b, "\xE2\x96\x81", 3))) return st;
    if ((st = kiln_buf_reserve(b, (i1 - i0) * 3))) return st;
    for (size_t i = i0; i < i1; i++) {
        if (s[i] == ' ') {
            if (t->spm_remove_extra_ws && i > i0 && s[i - 1] == ' ') continue;
            memcpy(b->data + b->len, "\xE2\x96\x81", 3);
            b->len += 3;
        } else {
            b->data[b->len++] = s[i];
        }
    }
    b->data[b->len] = 0;
    return encode_normalized(e, b->data, b->len, at_start, parse_special);
}

static void enc_fini(enc *e) {
    if (e->cache_slot >= 0) pthread_mutex_unlock((pthread_mutex_t *)&e->t->cache_mu[e->cache_slot]);
    if (e->md) pcre2_match_data_free(e->md);
    if (e->mctx) pcre2_match_context_free(e->mctx);
    if (e->jstack) pcre2_jit_stack_free(e->jstack);
    kiln_buf_free(&e->norm);
    kiln_buf_free(&e->conv);
    kiln_buf_free(&e->word);
    for (int i = 0; i < KILN_TOK_MAX_STAGES; i++) kiln_buf_free(&e->stage_buf[i]);
    free(e->syms);
    free(e->heap);
}

kiln_status kiln_tok_encode(const kiln_tokenizer *t, const char *text, size_t len, bool add_special,
                            bool parse_special, kiln_vec *ids) {
    kiln_status st = KILN_OK;
    kiln_buf fixed = {0};
    enc e;
    memset(&e, 0, sizeof e);
    e.t = t;
    e.ids = ids;
    e.cache_slot = -1;
    size_t start_len = ids->len;
    if (!text && len) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "kiln_tokenize: text is NULL");
    if (len && !kiln_utf8_valid(text, len)) {
        KILN_TRY(kiln_utf8_repair(&fixed, text, len, true, NULL));
        text = fixed.data;
        len = fixed.len;
    }
    if (t->n_stages) {
        e.md = pcre2_match_data_create(1, NULL);
        KILN_CHECK_ALLOC(e.md);
    }
    /* a pre-token cache pays off only on longer texts */
    if (len >= 256) {
        kiln_tokenizer *mt = (kiln_tokenizer *)t; /* caches are the mutable part */
        for (int i = 0; i < KILN_TOK_CACHE_SLOTS; i++) {
            if (pthread_mutex_trylock(&mt->cache_mu[i])) continue;
            if (!mt->cache[i]) {
                kiln_tok_cache *c = calloc(1, sizeof *c);
                if (c) {
                    c->ents = calloc(CACHE_SLOTS, sizeof *c->ents);
                    c->vals = (kiln_vec)KILN_VEC_INIT(int32_t);
                    if (!c->ents) {
                        free(c);
                        c = NULL;
                    }
                }
                mt->cache[i] = c;
            }
            if (!mt->cache[i]) {
                pthread_mutex_unlock(&mt->cache_mu[i]);
                break;
            }
            e.cache = mt->cache[i];
            e.cache_slot = i;
            break;
        }
    }
    if (add_special && t->add_bos && t->bos_id >= 0) KILN_TRY(push_id(&e, t->bos_id));
    size_t pos = 0, ms, me;
    int a;
    while ((a = find_added(t, text, len, pos, parse_special, 1, &ms, &me)) >= 0) {
        KILN_TRY(encode_segment(&e, text + pos, ms - pos, pos == 0, parse_special));
        KILN_TRY(push_id(&e, t->added[a].id));
        pos = me;
    }
    KILN_TRY(encode_segment(&e, text + pos, len - pos, pos == 0, parse_special));
    if (add_special && t->add_bos && t->bos_id >= 0) {
        /* never a double BOS: the text already began with it */
        int32_t *v = (int32_t *)ids->data + start_len;
        if (ids->len - start_len >= 2 && v[1] == t->bos_id) {
            memmove(v, v + 1, (ids->len - start_len - 1) * sizeof(int32_t));
            ids->len--;
        }
    }
    if (add_special && t->add_eos && t->eos_id >= 0) KILN_TRY(push_id(&e, t->eos_id));
fail:
    if (st) ids->len = start_len;
    enc_fini(&e);
    kiln_buf_free(&fixed);
    return st;
}

/* ----------------------------------------------------------------- decoding */

kiln_status kiln_tok_flush_run(kiln_buf *out, kiln_buf *run) {
    kiln_status st = KILN_OK;
    if (!run->len) return KILN_OK;
    if (kiln_utf8_valid(run->data, run->len)) {
        st = kiln_buf_append(out, run->data, run->len);
    } else {
        for (size_t k = 0; k < run->len && !st; k++) st = kiln_buf_append(out, "\xEF\xBF\xBD", 3);
    }
    run->len = 0;
    return st;
}

kiln_status kiln_tok_decode(const kiln_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                            kiln_buf *out) {
    kiln_status st = KILN_OK;
    kiln_buf raw = {0}, run = {0};
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        KILN_CHECK(id >= 0 && id < t->n_vocab, KILN_ERR_INVALID_ARGUMENT,
                   "token id %d at position %zu is outside the vocabulary (size %d)", (int)id, i, (int)t->n_vocab);
        if (skip_special && (t->flags[id] & KILN_TOKF_SPECIAL)) continue;
        size_t l;
        const char *b = kiln_tok_bytes(t, id, &l);
        if (t->flags[id] & KILN_TOKF_BYTE) {
            KILN_TRY(kiln_buf_append(&run, b, l));
            continue;
        }
        KILN_TRY(kiln_tok_flush_run(&raw, &run));
        KILN_TRY(kiln_buf_append(&raw, b, l));
    }
    KILN_TRY(kiln_tok_flush_run(&raw, &run));
    size_t skip = (t->strip_leading_space && raw.len && raw.data[0] == ' ') ? 1 : 0;
    KILN_TRY(kiln_utf8_repair(out, raw.data ? raw.data + skip : "", raw.len - skip, true, NULL));
    if (!out->data) KILN_TRY(kiln_buf_reserve(out, 1));
fail:
    kiln_buf_free(&raw);
    kiln_buf_free(&run);
    return st;
}

/* ------------------------------------------------------------- destruction */

void kiln_tokenizer_destroy(kiln_tokenizer *t) {
    if (!t) return;
    free(t->source);
    free(t->text_blob);
    free(t->text_off);
    free(t->bytes_blob);
    free(t->bytes_off);
    free(t->flags);
    free(t->vocab.slots);
    free(t->merges.slots);
    for (int i = 0; i < t->n_stages; i++)
        if (t->stages[i].re) pcre2_code_free((pcre2_code *)t->stages[i].re);
    free(t->added);
    free(t->trie_child);
    free(t->trie_sibling);
    free(t->trie_value);
    free(t->trie_byte);
    for (int i = 0; i < KILN_TOK_CACHE_SLOTS; i++) {
        cache_free(t->cache[i]);
        if (t->cache_mu_init) pthread_mutex_destroy(&t->cache_mu[i]);
    }
    free(t);
}
