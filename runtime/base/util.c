/*
 * util.c -- growable buffers and arrays, strings, files, mmap, time, hashing.
 * Ownership: as stated in kiln_base.h. Thread-safety: no shared state.
 */
#define _GNU_SOURCE
#include "kiln_base.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

kiln_status kiln_buf_reserve(kiln_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return KILN_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "buffer too large");
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (buffer of %zu bytes)", cap);
    b->data = p;
    b->cap = cap;
    return KILN_OK;
}

kiln_status kiln_buf_append(kiln_buf *b, const void *p, size_t n) {
    kiln_status st = kiln_buf_reserve(b, n);
    if (st) return st;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return KILN_OK;
}

kiln_status kiln_buf_puts(kiln_buf *b, const char *s) { return kiln_buf_append(b, s, strlen(s)); }

kiln_status kiln_buf_vprintf(kiln_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return KILN_FAIL(KILN_ERR_INTERNAL, "bad format string");
    kiln_status st = kiln_buf_reserve(b, (size_t)n);
    if (st) return st;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return KILN_OK;
}

kiln_status kiln_buf_printf(kiln_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kiln_status st = kiln_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return st;
}

char *kiln_buf_steal(kiln_buf *b) {
    char *p = b->data;
    if (!p) p = calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

void kiln_buf_free(kiln_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

kiln_status kiln_vec_resize(kiln_vec *v, size_t n) {
    if (n > v->cap) {
        size_t cap = v->cap ? v->cap : 8;
        while (cap < n) cap *= 2;
        void *p = realloc(v->data, cap * v->item);
        if (!p) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (array of %zu)", cap);
        v->data = p;
        v->cap = cap;
    }
    if (n > v->len) memset((char *)v->data + v->len * v->item, 0, (n - v->len) * v->item);
    v->len = n;
    return KILN_OK;
}

kiln_status kiln_vec_push(kiln_vec *v, const void *item) {
    kiln_status st = kiln_vec_resize(v, v->len + 1);
    if (st) return st;
    memcpy((char *)v->data + (v->len - 1) * v->item, item, v->item);
    return KILN_OK;
}

void kiln_vec_free(kiln_vec *v) {
    free(v->data);
    v->data = NULL;
    v->len = v->cap = 0;
}

char *kiln_strdup(const char *s) { return s ? strdup(s) : NULL; }
char *kiln_strndup(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *kiln_asprintf(const char *fmt, ...) {
    kiln_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    kiln_status st = kiln_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (st) {
        kiln_buf_free(&b);
        return NULL;
    }
    return kiln_buf_steal(&b);
}

bool kiln_str_ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}
bool kiln_str_starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

void kiln_free(void *p) { free(p); }

/* ------------------------------------------------------------------- files */

kiln_status kiln_read_file(const char *path, char **data, size_t *len) {
    kiln_status st = KILN_OK;
    char *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return KILN_FAIL(e == ENOENT ? KILN_ERR_NOT_FOUND : KILN_ERR_IO, "cannot open %s: %s", path,
                         strerror(e));
    }
    struct stat sb;
    KILN_CHECK_ERRNO(fstat(fileno(f), &sb), KILN_ERR_IO, "reading %s", path);
    KILN_CHECK(!S_ISDIR(sb.st_mode), KILN_ERR_IO, "cannot read %s: it is a directory", path);
    size_t cap = sb.st_size > 0 ? (size_t)sb.st_size + 1 : 4096, n = 0;
    buf = malloc(cap);
    KILN_CHECK_ALLOC(buf);
    for (;;) {
        if (n + 1 >= cap) {
            char *p = realloc(buf, cap * 2);
            KILN_CHECK_ALLOC(p);
            buf = p;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    KILN_CHECK(!ferror(f), KILN_ERR_IO, "error reading %s", path);
    buf[n] = 0;
    *data = buf;
    if (len) *len = n;
    buf = NULL;
fail:
    free(buf);
    fclose(f);
    return st;
}

kiln_status kiln_write_file_atomic(const char *path, const void *data, size_t len) {
    kiln_status st = KILN_OK;
    char *tmp = kiln_asprintf("%s.tmp.%d.%lx", path, (int)getpid(), (unsigned long)random());
    int fd = -1;
    if (!tmp) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    KILN_CHECK_ERRNO(fd, KILN_ERR_IO, "creating %s", tmp);
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        KILN_CHECK_ERRNO(w, KILN_ERR_IO, "writing %s", tmp);
        p += w;
        left -= (size_t)w;
    }
    KILN_CHECK_ERRNO(close(fd), KILN_ERR_IO, "closing %s", tmp);
    fd = -1;
    KILN_CHECK_ERRNO(rename(tmp, path), KILN_ERR_IO, "renaming %s to %s", tmp, path);
    free(tmp);
    return KILN_OK;
fail:
    if (fd >= 0) close(fd);
    unlink(tmp);
    free(tmp);
    return st;
}

bool kiln_path_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}
bool kiln_path_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

char *kiln_path_join(const char *a, const char *b) {
    if (!a || !*a) return kiln_strdup(b);
    size_t la = strlen(a);
    return kiln_asprintf("%s%s%s", a, a[la - 1] == '/' ? "" : "/", b);
}

kiln_status kiln_mkdirs(const char *path) {
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf) return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "path too long: %s", path);
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return KILN_FAIL(KILN_ERR_IO, "cannot create directory %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return KILN_FAIL(KILN_ERR_IO, "cannot create directory %s: %s", buf, strerror(errno));
    return KILN_OK;
}

kiln_status kiln_mmap_open(const char *path, kiln_mmap *m) {
    kiln_status st = KILN_OK;
    m->data = NULL;
    m->len = 0;
    m->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m->fd < 0) {
        int e = errno;
        return KILN_FAIL(e == ENOENT ? KILN_ERR_NOT_FOUND : KILN_ERR_IO, "cannot open %s: %s", path,
                         strerror(e));
    }
    struct stat sb;
    KILN_CHECK_ERRNO(fstat(m->fd, &sb), KILN_ERR_IO, "reading %s", path);
    KILN_CHECK(S_ISREG(sb.st_mode), KILN_ERR_IO, "%s is not a regular file", path);
    m->len = (size_t)sb.st_size;
    if (m->len > 0) {
        void *p = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, m->fd, 0);
        KILN_CHECK(p != MAP_FAILED, KILN_ERR_IO, "cannot mmap %s: %s", path, strerror(errno));
        m->data = p;
    }
    return KILN_OK;
fail:
    close(m->fd);
    m->fd = -1;
    return st;
}

void kiln_mmap_close(kiln_mmap *m) {
    if (m->data) munmap(m->data, m->len);
    if (m->fd >= 0) close(m->fd);
    m->data = NULL;
    m->len = 0;
    m->fd = -1;
}

double kiln_now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 64-bit hash (xxHash64 algorithm). */
#define P1 11400714785074694791ULL
#define P2 14029467366897019727ULL
#define P3 1609587929392839161ULL
#define P4 9650029242287828579ULL
#define P5 2870177450012600261ULL
static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t round64(uint64_t acc, uint64_t in) { acc += in * P2; acc = rotl64(acc, 31); return acc * P1; }
static inline uint64_t merge64(uint64_t acc, uint64_t v) { acc ^= round64(0, v); return acc * P1 + P4; }

uint64_t kiln_hash64(const void *data, size_t len, uint64_t seed) {
    const uint8_t *p = data, *end = p + len;
    uint64_t h;
    if (len >= 32) {
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        const uint8_t *limit = end - 32;
        do {
            v1 = round64(v1, rd64(p)); p += 8;
            v2 = round64(v2, rd64(p)); p += 8;
            v3 = round64(v3, rd64(p)); p += 8;
            v4 = round64(v4, rd64(p)); p += 8;
        } while (p <= limit);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = merge64(h, v1); h = merge64(h, v2); h = merge64(h, v3); h = merge64(h, v4);
    } else {
        h = seed + P5;
    }
    h += (uint64_t)len;
    while (p + 8 <= end) { h ^= round64(0, rd64(p)); h = rotl64(h, 27) * P1 + P4; p += 8; }
    if (p + 4 <= end) { h ^= (uint64_t)rd32(p) * P1; h = rotl64(h, 23) * P2 + P3; p += 4; }
    while (p < end) { h ^= (*p) * P5; h = rotl64(h, 11) * P1; p++; }
    h ^= h >> 33; h *= P2; h ^= h >> 29; h *= P3; h ^= h >> 32;
    return h;
}

/* Philox-4x32-10 (Salmon et al. 2011), the generator cuRAND and PyTorch use. */
void kiln_philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter_lo, c1 = (uint32_t)(counter_lo >> 32);
    uint32_t c2 = (uint32_t)counter_hi, c3 = (uint32_t)(counter_hi >> 32);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}
