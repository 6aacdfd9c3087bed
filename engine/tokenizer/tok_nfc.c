/*
 * tok_nfc.c -- Unicode NFC normalization for tokenizers with an NFC
 * normalizer (Qwen2). Text is copied through unchanged between NFC
 * boundaries; only the runs around code points that are not a boundary
 * (combining marks, NFC_QC No/Maybe) are decomposed, canonically ordered and
 * recomposed (tables in tok_nfc_tables.c; Hangul algorithmically).
 * Ownership: appends to the caller's buffer. Thread-safety: pure.
 */
#include "tokenizer.h"

#include <stdlib.h>

extern const uint32_t kiln_nfc_ccc[][2];
extern const int kiln_nfc_n_ccc;
extern const uint32_t kiln_nfc_decomp[][3];
extern const int kiln_nfc_n_decomp;
extern const uint32_t kiln_nfc_decomp_cps[];
extern const uint32_t kiln_nfc_comp[][3];
extern const int kiln_nfc_n_comp;
extern const uint32_t kiln_nfc_unsafe[][2];
extern const int kiln_nfc_n_unsafe;

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19, VCOUNT = 21, TCOUNT = 28,
       NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static int ccc_of(uint32_t cp) {
    if (cp < 0x300) return 0;
    int lo = 0, hi = kiln_nfc_n_ccc - 1;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        if (kiln_nfc_ccc[m][0] == cp) return (int)kiln_nfc_ccc[m][1];
        if (kiln_nfc_ccc[m][0] < cp) lo = m + 1;
        else hi = m - 1;
    }
    return 0;
}

static bool unsafe(uint32_t cp) {
    if (cp < 0x300) return false;
    int lo = 0, hi = kiln_nfc_n_unsafe - 1;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        if (cp < kiln_nfc_unsafe[m][0]) hi = m - 1;
        else if (cp > kiln_nfc_unsafe[m][1]) lo = m + 1;
        else return true;
    }
    return false;
}

static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    int lo = 0, hi = kiln_nfc_n_comp - 1;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        const uint32_t *e = kiln_nfc_comp[m];
        if (e[0] == a && e[1] == b) return e[2];
        if (e[0] < a || (e[0] == a && e[1] < b)) lo = m + 1;
        else hi = m - 1;
    }
    return 0;
}

static kiln_status push_cp(kiln_vec *v, uint32_t cp) { return kiln_vec_push(v, &cp); }

static kiln_status decompose(uint32_t cp, kiln_vec *v) {
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE;
        kiln_status st = push_cp(v, LBASE + s / NCOUNT);
        if (!st) st = push_cp(v, VBASE + (s % NCOUNT) / TCOUNT);
        if (!st && s % TCOUNT) st = push_cp(v, TBASE + s % TCOUNT);
        return st;
    }
    int lo = 0, hi = kiln_nfc_n_decomp - 1;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        if (kiln_nfc_decomp[m][0] == cp) {
            for (uint32_t k = 0; k < kiln_nfc_decomp[m][2]; k++) {
                kiln_status st = push_cp(v, kiln_nfc_decomp_cps[kiln_nfc_decomp[m][1] + k]);
                if (st) return st;
            }
            return KILN_OK;
        }
        if (kiln_nfc_decomp[m][0] < cp) lo = m + 1;
        else hi = m - 1;
    }
    return push_cp(v, cp);
}

/* Normalize one run (valid UTF-8) and append it. */
static kiln_status nfc_run(const char *s, size_t n, kiln_buf *out) {
    kiln_status st = KILN_OK;
    kiln_vec v = KILN_VEC_INIT(uint32_t);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += kiln_utf8_decode((const unsigned char *)s + i, &cp);
        KILN_TRY(decompose(cp, &v));
    }
    uint32_t *c = v.data;
    size_t m = v.len;
    /* canonical ordering: stable insertion sort of non-starter runs */
    for (size_t i = 1; i < m; i++) {
        int cc = ccc_of(c[i]);
        if (!cc) continue;
        size_t j = i;
        uint32_t x = c[i];
        while (j > 0 && ccc_of(c[j - 1]) > cc) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = x;
    }
    /* canonical composition */
    if (m) {
        size_t starter = 0, w = 1;
        int last = ccc_of(c[0]) ? 256 : 0;
        for (size_t i = 1; i < m; i++) {
            uint32_t ch = c[i];
            int cc = ccc_of(ch);
            uint32_t comp = compose(c[starter], ch);
            if (comp && (last < cc || last == 0)) {
                c[starter] = comp;
                continue;
            }
            if (!cc) starter = w;
            last = cc;
            c[w++] = ch;
        }
        m = w;
    }
    char tmp[4];
    for (size_t i = 0; i < m; i++) KILN_TRY(kiln_buf_append(out, tmp, kiln_utf8_encode(c[i], tmp)));
fail:
    kiln_vec_free(&v);
    return st;
}

kiln_status kiln_tok_nfc(const char *s, size_t n, kiln_buf *out) {
    kiln_status st = KILN_OK;
    size_t i = 0, copied = 0, last_safe = 0, run_start = 0;
    bool in_run = false;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp = c;
        size_t l = 1;
        if (c >= 0x80) l = kiln_utf8_decode((const unsigned char *)s + i, &cp);
        if (cp >= 0x300 && unsafe(cp)) {
            if (!in_run) {
                KILN_TRY(kiln_buf_append(out, s + copied, last_safe - copied));
                run_start = last_safe;
                in_run = true;
            }
        } else {
            if (in_run) {
                KILN_TRY(nfc_run(s + run_start, i - run_start, out));
                copied = i;
                in_run = false;
            }
            last_safe = i;
        }
        i += l;
    }
    if (in_run)
        KILN_TRY(nfc_run(s + run_start, n - run_start, out));
    else
        KILN_TRY(kiln_buf_append(out, s + copied, n - copied));
fail:
    return st;
}
