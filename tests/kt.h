/*
 * kt.h -- a tiny test harness. Each test file defines KT_TEST(name) functions
 * and one KT_MAIN() listing them; `./test_x [filter]` runs those whose name
 * contains filter (`=name`: the one of that exact name). A failed check
 * prints file:line and the expression and marks the test failed (the test
 * continues). Exit status 1 on any failure, 77 when every test skipped.
 */
#ifndef KT_H
#define KT_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kt_case {
    const char *name;
    void (*fn)(void);
} kt_case;

static int kt_failed_checks;
static int kt_skipped;

#define KT_TEST(name) static void name(void)
#define KT_CHECK(cond)                                                                     \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);              \
            kt_failed_checks++;                                                            \
        }                                                                                  \
    } while (0)
#define KT_CHECKF(cond, ...)                                                               \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            kt_failed_checks++;                                                            \
        }                                                                                  \
    } while (0)
/* Stop the current test when a check fails (for checks later ones need). */
#define KT_REQUIRE(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  FAIL %s:%d: %s (required)\n", __FILE__, __LINE__, #cond);   \
            kt_failed_checks++;                                                            \
            return;                                                                        \
        }                                                                                  \
    } while (0)
#define KT_OK(expr)                                                                        \
    do {                                                                                   \
        kiln_status kt__s = (expr);                                                        \
        if (kt__s != KILN_OK) {                                                            \
            fprintf(stderr, "  FAIL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr,     \
                    kiln_status_name(kt__s), kiln_last_error());                           \
            kt_failed_checks++;                                                            \
            return;                                                                        \
        }                                                                                  \
    } while (0)
/* expr must fail with code and the error message must contain substr. */
#define KT_ERR(expr, code, substr)                                                         \
    do {                                                                                   \
        kiln_clear_error();                                                                \
        kiln_status kt__s = (expr);                                                        \
        if (kt__s != (code) || !strstr(kiln_last_error(), (substr))) {                     \
            fprintf(stderr, "  FAIL %s:%d: %s -> %s \"%s\"; wanted %s containing \"%s\"\n", \
                    __FILE__, __LINE__, #expr, kiln_status_name(kt__s), kiln_last_error(), \
                    kiln_status_name(code), (substr));                                     \
            kt_failed_checks++;                                                            \
        }                                                                                  \
    } while (0)
#define KT_SKIP(...)                                                                       \
    do {                                                                                   \
        fprintf(stderr, "  SKIP: ");                                                       \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fprintf(stderr, "\n");                                                             \
        kt_skipped++;                                                                      \
        return;                                                                            \
    } while (0)

#define KT_MAIN(...)                                                                       \
    int main(int argc, char **argv) {                                                      \
        kt_case cases[] = {__VA_ARGS__};                                                   \
        int n = (int)(sizeof cases / sizeof cases[0]), failed = 0, ran = 0;                \
        for (int i = 0; i < n; i++) {                                                      \
            if (argc > 1 && (argv[1][0] == '=' ? strcmp(cases[i].name, argv[1] + 1) != 0   \
                                                : !strstr(cases[i].name, argv[1])))      \
                continue;                                                                  \
            int before = kt_failed_checks, sk = kt_skipped;                                \
            fprintf(stderr, "[ RUN  ] %s\n", cases[i].name);                               \
            cases[i].fn();                                                                 \
            ran++;                                                                         \
            if (kt_failed_checks != before) {                                              \
                failed++;                                                                  \
                fprintf(stderr, "[ FAIL ] %s\n", cases[i].name);                           \
            } else {                                                                       \
                fprintf(stderr, "[ %s ] %s\n", kt_skipped != sk ? "SKIP" : " OK ",         \
                        cases[i].name);                                                    \
            }                                                                              \
        }                                                                                  \
        fprintf(stderr, "%d/%d passed, %d skipped\n", ran - failed, ran, kt_skipped);      \
        if (failed) return 1;                                                              \
        return (ran > 0 && kt_skipped == ran) ? 77 : 0;                                    \
    }
#define KT_CASE(fn) {#fn, fn}

/* Paths given by CMake. */
#ifndef KT_SOURCE_DIR
#define KT_SOURCE_DIR "."
#endif
#ifndef KT_BINARY_DIR
#define KT_BINARY_DIR "."
#endif
#define KT_DATA KT_SOURCE_DIR "/tests/data"
#define KT_FIXTURES KT_SOURCE_DIR "/../shared/fixtures"

#endif
