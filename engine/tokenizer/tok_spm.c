/*
 * tok_spm.c -- load a SentencePiece tokenizer.model (protobuf ModelProto)
 * with a BPE model, as Llama 2 / Mistral ship it: pieces with scores and
 * types, byte fallback <0xNN> pieces, the identity normalizer with the "▁"
 * dummy prefix. Encoding follows sentencepiece's bpe_model.cc: characters,
 * then repeatedly the adjacent pair whose concatenation is a piece with the
 * highest score (leftmost on ties), UNUSED pieces resegmented, characters
 * outside the vocabulary as bytes (or unk, runs fused).
 * Control pieces (<s>, </s>) and <unk> are special tokens, matched in text
 * only when special-token parsing is on (as Hugging Face does).
 * Ownership: the returned tokenizer is owned by the caller. Thread-safety:
 * no shared state.
 */
#include "tokenizer.h"

#include <stdlib.h>

typedef struct pb {
    const uint8_t *p, *end;
} pb;

static bool pb_varint(pb *b, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end) return false;
        uint8_t c = *b->p++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

static bool pb_key(pb *b, uint32_t *field, uint32_t *wire) {
    uint64_t k;
    if (!pb_varint(b, &k)) return false;
    *field = (uint32_t)(k >> 3);
    *wire = (uint32_t)(k & 7);
    return *field != 0;
}

static bool pb_bytes(pb *b, pb *sub) {
    uint64_t n;
    if (!pb_varint(b, &n) || n > (uint64_t)(b->end - b->p)) return false;
    sub->p = b->p;
    sub->end = b->p + n;
    b->p += n;
    return true;
}

static bool pb_skip(pb *b, uint32_t wire) {
    uint64_t v;
    pb sub;
    switch (wire) {
    case 0: return pb_varint(b, &v);
    case 1:
        if (b->end - b->p < 8) return false;
        b->p += 8;
        return true;
    case 2: return pb_bytes(b, &sub);
    case 5:
        if (b->end - b->p < 4) return false;
        b->p += 4;
        return true;
    default: return false;
    }
}

enum { SP_NORMAL = 1, SP_UNKNOWN = 2, SP_CONTROL = 3, SP_USER = 4, SP_UNUSED = 5, SP_BYTE = 6 };

typedef struct sp_piece {
    const char *s;
    uint32_t n;
    float score;
    int type;
} sp_piece;

typedef struct score_id {
    float score;
    int32_t id;
} score_id;

static int cmp_score_desc(const void *a, const void *b) {
    const score_id *x = a, *y = b;
    if (x->score > y->score) return -1;
    if (x->score < y->score) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool mergeable(int type) { return type == SP_NORMAL || type == SP_USER || type == SP_UNUSED; }

kiln_status kiln_tok_load_spm(const char *data, size_t len, const char *path, kiln_tokenizer **out) {
    kiln_status st = KILN_OK;
    kiln_tokenizer *t = NULL;
    kiln_tok_builder b = {0};
    kiln_vec pieces = KILN_VEC_INIT(sp_piece);
    score_id *order = NULL;
    int32_t *prio = NULL;
    int model_type = 1; /* UNIGRAM unless the trainer spec says otherwise */
    bool byte_fallback = false, add_dummy_prefix = true, remove_extra_ws = true, escape_ws = true;
    bool ws_suffix = false;
    int64_t unk_id = 0, bos_id = 1, eos_id = 2;
    const char *norm_name = NULL;
    size_t norm_name_len = 0, charsmap_len = 0;

    pb b0 = {(const uint8_t *)data, (const uint8_t *)data + len};
    uint32_t f, w;
    while (b0.p < b0.end) {
        KILN_CHECK(pb_key(&b0, &f, &w), KILN_ERR_FORMAT, "%s: not a SentencePiece model (bad protobuf at byte %zu)",
                   path, (size_t)(b0.p - (const uint8_t *)data));
        if (f == 1 && w == 2) {
            pb m;
            KILN_CHECK(pb_bytes(&b0, &m), KILN_ERR_FORMAT, "%s: truncated piece", path);
            sp_piece pc = {"", 0, 0.0f, SP_NORMAL};
            while (m.p < m.end) {
                KILN_CHECK(pb_key(&m, &f, &w), KILN_ERR_FORMAT, "%s: bad piece %zu", path, pieces.len);
                if (f == 1 && w == 2) {
                    pb s;
                    KILN_CHECK(pb_bytes(&m, &s), KILN_ERR_FORMAT, "%s: bad piece %zu", path, pieces.len);
                    pc.s = (const char *)s.p;
                    pc.n = (uint32_t)(s.end - s.p);
                } else if (f == 2 && w == 5) {
                    KILN_CHECK(m.end - m.p >= 4, KILN_ERR_FORMAT, "%s: bad piece %zu", path, pieces.len);
                    memcpy(&pc.score, m.p, 4);
                    m.p += 4;
                } else if (f == 3 && w == 0) {
                    uint64_t v;
                    KILN_CHECK(pb_varint(&m, &v), KILN_ERR_FORMAT, "%s: bad piece %zu", path, pieces.len);
                    pc.type = (int)v;
                } else {
                    KILN_CHECK(pb_skip(&m, w), KILN_ERR_FORMAT, "%s: bad piece %zu", path, pieces.len);
                }
            }
            KILN_CHECK(pc.n > 0, KILN_ERR_FORMAT, "%s: piece %zu is empty", path, pieces.len);
            KILN_TRY(kiln_vec_push(&pieces, &pc));
        } else if ((f == 2 || f == 3) && w == 2) {
            pb m;
            bool trainer = f == 2;
            KILN_CHECK(pb_bytes(&b0, &m), KILN_ERR_FORMAT, "%s: truncated %s spec", path,
                       trainer ? "trainer" : "normalizer");
            while (m.p < m.end) {
                KILN_CHECK(pb_key(&m, &f, &w), KILN_ERR_FORMAT, "%s: bad spec", path);
                uint64_t v = 0;
                if (w == 0) {
                    KILN_CHECK(pb_varint(&m, &v), KILN_ERR_FORMAT, "%s: bad spec", path);
                    if (trainer) {
                        if (f == 3) model_type = (int)v;
                        if (f == 35) byte_fallback = v != 0;
                        if (f == 24) ws_suffix = v != 0;
                        if (f == 40) unk_id = (int32_t)v;
                        if (f == 41) bos_id = (int32_t)v;
                        if (f == 42) eos_id = (int32_t)v;
                    } else {
                        if (f == 3) add_dummy_prefix = v != 0;
                        if (f == 4) remove_extra_ws = v != 0;
                        if (f == 5) escape_ws = v != 0;
                    }
                } else if (!trainer && w == 2 && (f == 1 || f == 2)) {
                    pb s;
                    KILN_CHECK(pb_bytes(&m, &s), KILN_ERR_FORMAT, "%s: bad normalizer spec", path);
                    if (f == 1) {
                        norm_name = (const char *)s.p;
                        norm_name_len = (size_t)(s.end - s.p);
                    } else {
                        charsmap_len = (size_t)(s.end - s.p);
                    }
                } else {
                    KILN_CHECK(pb_skip(&m, w), KILN_ERR_FORMAT, "%s: bad spec", path);
                }
            }
        } else {
            KILN_CHECK(pb_skip(&b0, w), KILN_ERR_FORMAT, "%s: bad protobuf field %u", path, f);
        }
    }
    KILN_CHECK(pieces.len > 0, KILN_ERR_FORMAT, "%s: not a SentencePiece model (no pieces)", path);
    KILN_CHECK(model_type == 2, KILN_ERR_UNSUPPORTED,
               "%s: SentencePiece model type %s is not supported (only BPE)", path,
               model_type == 1 ? "UNIGRAM" : model_type == 3 ? "WORD" : model_type == 4 ? "CHAR" : "unknown");
    KILN_CHECK(charsmap_len == 0, KILN_ERR_UNSUPPORTED,
               "%s: SentencePiece normalizer \"%.*s\" (a precompiled character map) is not supported", path,
               (int)norm_name_len, norm_name ? norm_name : "");
    KILN_CHECK(escape_ws && !ws_suffix, KILN_ERR_UNSUPPORTED,
               "%s: SentencePiece models without escaped whitespace, or with whitespace as suffix, are not supported",
               path);
    KILN_CHECK(pieces.len < (1u << 28), KILN_ERR_FORMAT, "%s: too many pieces", path);

    int32_t n = (int32_t)pieces.len;
    sp_piece *pc = pieces.data;
    KILN_TRY(kiln_tok_new(KILN_TOK_FORMAT_SENTENCEPIECE, path, n, &t));
    for (int32_t id = 0; id < n; id++) {
        uint8_t fl = 0;
        if (pc[id].type == SP_UNKNOWN || pc[id].type == SP_CONTROL) fl = 0; /* set by add_added */
        if (pc[id].type == SP_UNUSED) fl = KILN_TOKF_UNUSED;
        KILN_TRY(kiln_tok_set_token(t, &b, id, pc[id].s, pc[id].n, fl));
    }
    KILN_TRY(kiln_tok_finish_vocab(t, &b));
    for (int32_t id = 0; id < n; id++) {
        int ty = pc[id].type;
        if (ty == SP_UNKNOWN || ty == SP_CONTROL || ty == SP_USER) {
            kiln_tok_added a = {id, ty != SP_USER, false, false, false, false};
            KILN_TRY(kiln_tok_add_added(t, &a));
        }
        if (ty == SP_UNKNOWN) t->unk_id = id;
    }
    if (t->unk_id < 0 && unk_id >= 0 && unk_id < n) t->unk_id = (int32_t)unk_id;
    /* merge priority: rank of the piece's score, highest first; equal
     * scores share a priority so ties go to the leftmost pair */
    order = malloc((size_t)n * sizeof *order);
    prio = malloc((size_t)n * sizeof *prio);
    KILN_CHECK_ALLOC(order);
    KILN_CHECK_ALLOC(prio);
    int32_t m = 0;
    for (int32_t id = 0; id < n; id++)
        if (mergeable(pc[id].type)) order[m++] = (score_id){pc[id].score, id};
    qsort(order, (size_t)m, sizeof *order, cmp_score_desc);
    int32_t rank = 0;
    for (int32_t k = 0; k < m; k++) {
        if (k && order[k].score != order[k - 1].score) rank++;
        prio[order[k].id] = rank;
    }
    KILN_TRY(kiln_tok_merges_init(t, (size_t)m * 2));
    for (int32_t id = 0; id < n; id++) {
        if (!mergeable(pc[id].type)) continue;
        const char *s = pc[id].s;
        uint32_t l = pc[id].n;
        for (uint32_t k = 1; k < l; k++) {
            if (((unsigned char)s[k] & 0xC0) == 0x80) continue;
            int32_t x = kiln_tok_id(t, s, k);
            if (x < 0 || !mergeable(pc[x].type)) continue;
            int32_t y = kiln_tok_id(t, s + k, l - k);
            if (y < 0 || !mergeable(pc[y].type)) continue;
            KILN_TRY(kiln_tok_merges_add(t, x, y, prio[id], id));
        }
    }
    t->byte_fallback = byte_fallback;
    t->fuse_unk = true;
    t->spm_normalize = true;
    t->spm_prepend = add_dummy_prefix ? 1 : 0;
    t->spm_remove_extra_ws = remove_extra_ws;
    t->strip_leading_space = add_dummy_prefix;
    t->byte_runs = true;
    t->bos_id = (bos_id >= 0 && bos_id < n) ? (int32_t)bos_id : -1;
    t->eos_id = (eos_id >= 0 && eos_id < n) ? (int32_t)eos_id : -1;
    t->add_bos = t->bos_id >= 0;
    KILN_TRY(kiln_tok_finalize(t));
    *out = t;
    t = NULL;
fail:
    kiln_tokenizer_destroy(t);
    kiln_buf_free(&b.text);
    free(b.off);
    kiln_vec_free(&pieces);
    free(order);
    free(prio);
    return st;
}
