/*
 * kiln_base.h -- internal foundation shared by every host layer: the error
 * record and its macros, logging, and small utilities (buffers, files, time,
 * number formats, a thread pool).
 *
 * Error convention: a fallible function returns kiln_status and records the
 * failure with KILN_FAIL (message + file:line). Callers add context with
 * kiln_error_context(), which prefixes the message. Foreign error codes are
 * converted at the boundary by the KILN_CHECK_* macro families (CUDA ones live
 * in runtime/cuda). The usual body shape is:
 *
 *     kiln_status st = KILN_OK;
 *     KILN_TRY(step_one());
 *     KILN_CHECK(n > 0, KILN_ERR_FORMAT, "n must be positive, got %d", n);
 *   fail:
 *     cleanup();
 *     return st;
 *
 * Thread-safety: the error record is thread-local; logging is thread-safe.
 */
#ifndef KILN_BASE_H
#define KILN_BASE_H

#include "kiln.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KILN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define KILN_UNUSED(x) ((void)(x))
#define KILN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KILN_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KILN_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define KILN_DIV_UP(a, b) (((a) + (b)-1) / (b))

/* ------------------------------------------------------------------ errors */

/* Record an error (replacing the previous one) and return code. */
kiln_status kiln__set_error(kiln_status code, const char *file, int line, const char *fmt, ...)
    KILN_PRINTF(4, 5);
/* Prefix the current message with "ctx: ". Returns the current code. */
kiln_status kiln_error_context(const char *fmt, ...) KILN_PRINTF(1, 2);

#define KILN_FAIL(code, ...) kiln__set_error((code), __FILE__, __LINE__, __VA_ARGS__)

/* Requires `kiln_status st` and a `fail:` label in scope. */
#define KILN_TRY(expr)                                                                     \
    do {                                                                                   \
        kiln_status kiln__s = (expr);                                                      \
        if (kiln__s != KILN_OK) {                                                          \
            st = kiln__s;                                                                  \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

#define KILN_CHECK(cond, code, ...)                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            st = KILN_FAIL((code), __VA_ARGS__);                                           \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

/* Allocation checks: record KILN_ERR_OUT_OF_MEMORY and jump to fail. */
#define KILN_CHECK_ALLOC(ptr)                                                              \
    KILN_CHECK((ptr) != NULL, KILN_ERR_OUT_OF_MEMORY, "out of host memory (%s)", #ptr)

/* libc calls that return -1 and set errno. */
#define KILN_CHECK_ERRNO(expr, code, ...)                                                  \
    do {                                                                                   \
        if ((expr) < 0) {                                                                  \
            st = kiln__errno_fail((code), __FILE__, __LINE__, #expr);                      \
            kiln_error_context(__VA_ARGS__);                                               \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)
kiln_status kiln__errno_fail(kiln_status code, const char *file, int line, const char *what);

/* Internal invariant (our own bug): logs and returns KILN_ERR_INTERNAL
 * rather than aborting. */
#define KILN_CHECK_INTERNAL(cond)                                                          \
    KILN_CHECK((cond), KILN_ERR_INTERNAL, "internal error: %s", #cond)

/* ----------------------------------------------------------------- logging */

void kiln_log(kiln_log_level level, const char *fmt, ...) KILN_PRINTF(2, 3);
bool kiln_log_enabled(kiln_log_level level);
#define KILN_DEBUG(...) kiln_log(KILN_LOG_DEBUG, __VA_ARGS__)
#define KILN_INFO(...) kiln_log(KILN_LOG_INFO, __VA_ARGS__)
#define KILN_WARN(...) kiln_log(KILN_LOG_WARN, __VA_ARGS__)
#define KILN_ERROR(...) kiln_log(KILN_LOG_ERROR, __VA_ARGS__)

/* ----------------------------------------------------------------- buffers */

/* Growable byte buffer; always NUL-terminated when data != NULL. */
typedef struct kiln_buf {
    char *data;
    size_t len;
    size_t cap;
} kiln_buf;

kiln_status kiln_buf_reserve(kiln_buf *b, size_t extra);
kiln_status kiln_buf_append(kiln_buf *b, const void *p, size_t n);
kiln_status kiln_buf_puts(kiln_buf *b, const char *s);
kiln_status kiln_buf_printf(kiln_buf *b, const char *fmt, ...) KILN_PRINTF(2, 3);
kiln_status kiln_buf_vprintf(kiln_buf *b, const char *fmt, va_list ap);
/* Hand the data to the caller (owned, free()) and reset b. */
char *kiln_buf_steal(kiln_buf *b);
void kiln_buf_free(kiln_buf *b);

/* Generic growable array of fixed-size items. */
typedef struct kiln_vec {
    void *data;
    size_t len;
    size_t cap;
    size_t item;
} kiln_vec;
#define KILN_VEC_INIT(T) {NULL, 0, 0, sizeof(T)}
kiln_status kiln_vec_push(kiln_vec *v, const void *item);
kiln_status kiln_vec_resize(kiln_vec *v, size_t n); /* new items zeroed */
void kiln_vec_free(kiln_vec *v);
#define KILN_VEC_AT(v, T, i) (((T *)(v)->data)[i])

char *kiln_strdup(const char *s);                 /* NULL-safe; NULL on OOM */
char *kiln_strndup(const char *s, size_t n);
char *kiln_asprintf(const char *fmt, ...) KILN_PRINTF(1, 2); /* NULL on OOM */
bool kiln_str_ends_with(const char *s, const char *suffix);
bool kiln_str_starts_with(const char *s, const char *prefix);

/* ------------------------------------------------------------------- files */

/* Read a whole file (NUL-terminated, returned owned via free()). */
kiln_status kiln_read_file(const char *path, char **data, size_t *len);
/* Write a file atomically (temp file in the same directory, then rename). */
kiln_status kiln_write_file_atomic(const char *path, const void *data, size_t len);
bool kiln_path_exists(const char *path);
bool kiln_path_is_dir(const char *path);
/* Join two path components; returned owned (free()), NULL on OOM. */
char *kiln_path_join(const char *a, const char *b);
/* mkdir -p. */
kiln_status kiln_mkdirs(const char *path);

/* Read-only memory map of a whole file. */
typedef struct kiln_mmap {
    void *data;
    size_t len;
    int fd;
} kiln_mmap;
kiln_status kiln_mmap_open(const char *path, kiln_mmap *m);
void kiln_mmap_close(kiln_mmap *m);

/* -------------------------------------------------------------------- time */

double kiln_now_sec(void); /* monotonic */

/* ----------------------------------------------------------------- hashing */

uint64_t kiln_hash64(const void *data, size_t len, uint64_t seed);

/* ------------------------------------------------------------ number types */

typedef enum kiln_dtype {
    KILN_DTYPE_INVALID = 0,
    KILN_DTYPE_F32,
    KILN_DTYPE_F16,
    KILN_DTYPE_BF16,
    KILN_DTYPE_FP8_E4M3,
    KILN_DTYPE_FP8_E5M2,
    KILN_DTYPE_I32,
    KILN_DTYPE_I64,
    KILN_DTYPE_I8,
    KILN_DTYPE_U8,
    KILN_DTYPE_F64,
    KILN_DTYPE_BOOL,
    KILN_DTYPE_I16,
    KILN_DTYPE_COUNT
} kiln_dtype;

size_t kiln_dtype_size(kiln_dtype t);
const char *kiln_dtype_name(kiln_dtype t);            /* "bf16", ...       */
kiln_dtype kiln_dtype_from_name(const char *name);    /* bf16/bfloat16/... */
kiln_dtype kiln_dtype_from_safetensors(const char *s); /* "BF16", "F32", ... */

static inline float kiln_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t kiln_f32_to_bf16(float f) { /* round to nearest even */
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
float kiln_f16_to_f32(uint16_t h);
uint16_t kiln_f32_to_f16(float f); /* round to nearest even */
/* FP8 (OCP): E4M3 (max 448, no inf, NaN = 0x7f/0xff) and E5M2 (IEEE-like).
 * f32 -> fp8 rounds to nearest even and saturates to the largest finite
 * value; NaN stays NaN (E4M3 has no infinity, so +-inf saturates too). */
float kiln_fp8_e4m3_to_f32(uint8_t v);
float kiln_fp8_e5m2_to_f32(uint8_t v);
uint8_t kiln_f32_to_fp8_e4m3(float f);
uint8_t kiln_f32_to_fp8_e5m2(float f);
/* Convert n elements of src (dtype t) to f32. */
void kiln_to_f32(float *dst, const void *src, kiln_dtype t, size_t n);
void kiln_from_f32(void *dst, kiln_dtype t, const float *src, size_t n);

/* ------------------------------------------------------------- thread pool */

typedef struct kiln_pool kiln_pool;
/* n_threads <= 0: number of online CPUs. Returns owned. */
kiln_status kiln_pool_create(int n_threads, kiln_pool **out);
void kiln_pool_destroy(kiln_pool *p);
int kiln_pool_size(const kiln_pool *p);
/* Run fn(ctx, i) for i in [0, n) across the pool, caller thread included;
 * returns when all are done. Not reentrant. p may be NULL (serial). */
typedef void (*kiln_pool_fn)(void *ctx, int64_t i);
void kiln_pool_for(kiln_pool *p, int64_t n, kiln_pool_fn fn, void *ctx);

/* ---------------------------------------------------------------- random */

/* Philox-4x32-10 counter-based generator: the same stream on CPU and GPU.
 * Returns 4 uint32 for (key, counter). */
void kiln_philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]);
/* Uniform float in [0, 1) from a uint32 (24-bit mantissa). */
static inline float kiln_u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

#endif /* KILN_BASE_H */
