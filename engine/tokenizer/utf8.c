/*
 * utf8.c -- UTF-8 validation and repair shared by the tokenizer, the
 * streaming detokenizer and the chat templates. Ill-formed input is replaced
 * by U+FFFD one maximal subpart at a time (the Unicode "substitution of
 * maximal subparts" practice, which Rust's String::from_utf8_lossy and hence
 * Hugging Face tokenizers follow), so repairing a byte stream in pieces gives
 * the same text as repairing it at once.
 * Ownership: no state. Thread-safety: pure functions.
 */
#include "tokenizer.h"

/* Scan the sequence at s: returns the number of bytes that form a valid
 * prefix of a well-formed sequence (1..4) and sets *need to the full length
 * of that sequence (0 when s[0] cannot start one). */
static size_t utf8_scan(const unsigned char *s, size_t n, size_t *need) {
    unsigned char c = s[0];
    if (c < 0x80) {
        *need = 1;
        return 1;
    }
    unsigned char lo = 0x80, hi = 0xBF;
    size_t len;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *need = 0;
        return 1;
    }
    *need = len;
    size_t i = 1;
    if (i < n && s[i] >= lo && s[i] <= hi) {
        i++;
        while (i < len && i < n && s[i] >= 0x80 && s[i] <= 0xBF) i++;
    }
    return i;
}

size_t kiln_utf8_seq_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    size_t need, got = utf8_scan(s, n, &need);
    return (need && got == need) ? need : 0;
}

size_t kiln_utf8_invalid_len(const unsigned char *s, size_t n, bool at_end) {
    size_t need, got = utf8_scan(s, n, &need);
    if (need == 0) return 1;
    if (got == need) return 0; /* valid: not an invalid subpart */
    if (got == n && !at_end) return 0; /* truncated at the buffer end: wait */
    return got;
}

bool kiln_utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        /* ASCII fast path, 8 bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = kiln_utf8_seq_len(s + i, n - i);
        if (!l) return false;
        i += l;
    }
    return true;
}

kiln_status kiln_utf8_repair(kiln_buf *out, const char *str, size_t n, bool at_end, size_t *consumed) {
    const unsigned char *s = (const unsigned char *)str;
    kiln_status st = kiln_buf_reserve(out, n + 8);
    if (st) return st;
    size_t i = 0, run = 0; /* run: start of the pending valid span */
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t need, got = utf8_scan(s + i, n - i, &need);
        if (need && got == need) {
            i += need;
            continue;
        }
        if (need && got == n - i && !at_end) break; /* incomplete tail */
        if ((st = kiln_buf_append(out, str + run, i - run))) return st;
        if ((st = kiln_buf_append(out, "\xEF\xBF\xBD", 3))) return st;
        i += got;
        run = i;
    }
    if ((st = kiln_buf_append(out, str + run, i - run))) return st;
    if (consumed) *consumed = i;
    return KILN_OK;
}

size_t kiln_utf8_decode(const unsigned char *s, uint32_t *cp) {
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0) {
        *cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (c < 0xF0) {
        *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
          (s[3] & 0x3F);
    return 4;
}

size_t kiln_utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}
