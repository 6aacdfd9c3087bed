/* tok_nfc.c -- placeholder (replaced below) */
#include "tokenizer.h"
kiln_status kiln_tok_nfc(const char *s, size_t n, kiln_buf *out) { return kiln_buf_append(out, s, n); }
