/*
 * log.c -- leveled logging with a replaceable process-wide callback.
 * The default sink writes "kiln: LEVEL: msg" lines to stderr.
 * Thread-safety: level and sink are read atomically; the sink must be
 * thread-safe (the default one writes each line with one fputs call).
 */
#include "kiln_base.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static _Atomic int g_level = -1; /* -1: not yet read from the environment */
static _Atomic(kiln_log_fn) g_fn;
static _Atomic(void *) g_user;

static int level_from_env(void) {
    const char *s = getenv("KILN_LOG_LEVEL");
    if (!s || !*s) return KILN_LOG_INFO;
    if (!strcasecmp(s, "debug")) return KILN_LOG_DEBUG;
    if (!strcasecmp(s, "info")) return KILN_LOG_INFO;
    if (!strcasecmp(s, "warn") || !strcasecmp(s, "warning")) return KILN_LOG_WARN;
    if (!strcasecmp(s, "error")) return KILN_LOG_ERROR;
    if (!strcasecmp(s, "off") || !strcasecmp(s, "none")) return KILN_LOG_OFF;
    return KILN_LOG_INFO;
}

kiln_log_level kiln_get_log_level(void) {
    int l = atomic_load(&g_level);
    if (l < 0) {
        l = level_from_env();
        atomic_store(&g_level, l);
    }
    return (kiln_log_level)l;
}

void kiln_set_log_level(kiln_log_level level) { atomic_store(&g_level, (int)level); }

void kiln_set_log_callback(kiln_log_fn fn, void *user) {
    atomic_store(&g_user, user);
    atomic_store(&g_fn, fn);
}

bool kiln_log_enabled(kiln_log_level level) { return level >= kiln_get_log_level() && level < KILN_LOG_OFF; }

static const char *level_name(kiln_log_level l) {
    switch (l) {
    case KILN_LOG_DEBUG: return "debug";
    case KILN_LOG_INFO: return "info";
    case KILN_LOG_WARN: return "warning";
    case KILN_LOG_ERROR: return "error";
    default: return "";
    }
}

void kiln_log(kiln_log_level level, const char *fmt, ...) {
    if (!kiln_log_enabled(level)) return;
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kiln_log_fn fn = atomic_load(&g_fn);
    if (fn) {
        fn(atomic_load(&g_user), level, msg);
        return;
    }
    char line[4200];
    snprintf(line, sizeof line, "kiln: %s: %s\n", level_name(level), msg);
    fputs(line, stderr);
}
