/*
 * error.c -- the thread-local last-error record and status names.
 * Ownership: the record is per thread, owned by the library.
 * Thread-safety: everything here touches only the calling thread's record.
 */
#include "kiln_base.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define KILN_ERR_MSG_MAX 8192

typedef struct kiln_error_record {
    kiln_status code;
    char msg[KILN_ERR_MSG_MAX];
    char origin[256];
} kiln_error_record;

static _Thread_local kiln_error_record tl_err;

static const char *const status_names[KILN_STATUS_COUNT] = {
    [KILN_OK] = "KILN_OK",
    [KILN_ERR_INVALID_ARGUMENT] = "KILN_ERR_INVALID_ARGUMENT",
    [KILN_ERR_NOT_FOUND] = "KILN_ERR_NOT_FOUND",
    [KILN_ERR_IO] = "KILN_ERR_IO",
    [KILN_ERR_FORMAT] = "KILN_ERR_FORMAT",
    [KILN_ERR_UNSUPPORTED] = "KILN_ERR_UNSUPPORTED",
    [KILN_ERR_OUT_OF_MEMORY] = "KILN_ERR_OUT_OF_MEMORY",
    [KILN_ERR_DEVICE] = "KILN_ERR_DEVICE",
    [KILN_ERR_UNAVAILABLE] = "KILN_ERR_UNAVAILABLE",
    [KILN_ERR_POLICY] = "KILN_ERR_POLICY",
    [KILN_ERR_TEMPLATE] = "KILN_ERR_TEMPLATE",
    [KILN_ERR_LIMIT] = "KILN_ERR_LIMIT",
    [KILN_ERR_CANCELLED] = "KILN_ERR_CANCELLED",
    [KILN_ERR_BUSY] = "KILN_ERR_BUSY",
    [KILN_ERR_FATAL] = "KILN_ERR_FATAL",
    [KILN_ERR_INTERNAL] = "KILN_ERR_INTERNAL",
};

const char *kiln_status_name(kiln_status s) {
    if ((int)s < 0 || s >= KILN_STATUS_COUNT || !status_names[s]) return "KILN_ERR_UNKNOWN";
    return status_names[s];
}

kiln_status kiln__set_error(kiln_status code, const char *file, int line, const char *fmt, ...) {
    kiln_error_record *r = &tl_err;
    char tmp[KILN_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap); /* fmt may reference the old message */
    va_end(ap);
    memcpy(r->msg, tmp, sizeof tmp);
    const char *base = strrchr(file, '/');
    snprintf(r->origin, sizeof r->origin, "%s:%d", base ? base + 1 : file, line);
    r->code = code;
    if (kiln_log_enabled(KILN_LOG_DEBUG)) kiln_log(KILN_LOG_DEBUG, "error at %s: %s", r->origin, r->msg);
    return code;
}

kiln_status kiln_error_context(const char *fmt, ...) {
    kiln_error_record *r = &tl_err;
    char prefix[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char tmp[KILN_ERR_MSG_MAX];
    if (r->msg[0])
        snprintf(tmp, sizeof tmp, "%s: %s", prefix, r->msg);
    else
        snprintf(tmp, sizeof tmp, "%s", prefix);
    memcpy(r->msg, tmp, sizeof tmp);
    if (r->code == KILN_OK) r->code = KILN_ERR_INTERNAL;
    return r->code;
}

kiln_status kiln__errno_fail(kiln_status code, const char *file, int line, const char *what) {
    int e = errno;
    return kiln__set_error(code, file, line, "%s failed: %s", what, strerror(e));
}

const char *kiln_last_error(void) { return tl_err.msg; }
const char *kiln_last_error_origin(void) { return tl_err.origin; }
kiln_status kiln_last_error_code(void) { return tl_err.code; }
void kiln_clear_error(void) {
    tl_err.code = KILN_OK;
    tl_err.msg[0] = 0;
    tl_err.origin[0] = 0;
}
