// label: unit
/* test_server_fuzz.c -- replays the server fuzz targets' inputs as a
 * normal test: every file under tests/fuzz/seeds/<target>/ and
 * tests/fuzz/regress/<target>/ (crashers found by scripts/fuzz_server.sh,
 * kept as regression inputs) goes through the same entry points the
 * fuzzers run, so a fixed bug stays fixed. Also runs under ASan+UBSan in CI.
 */
#include "kt.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/api_decode.c"
#include "../server/api_encode.c"

#define FUZZ_ENTRY fuzz_decode_one
#include "fuzz/fuzz_server_decode.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_sse_one
#include "fuzz/fuzz_server_sse.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_stop_one
#define FUZZ_SOURCE_DIR KT_SOURCE_DIR
#include "fuzz/fuzz_server_stop.c"
#undef FUZZ_ENTRY

static int replay_dir(const char *dir, int (*fn)(const uint8_t *, size_t)) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
        size_t got = len > 0 ? fread(buf, 1, (size_t)len, f) : 0;
        fclose(f);
        fn(buf, got); /* aborts on a broken invariant */
        free(buf);
        n++;
    }
    closedir(d);
    return n;
}

static int replay(const char *target, int (*fn)(const uint8_t *, size_t)) {
    char dir[4096];
    int n = 0;
    snprintf(dir, sizeof dir, "%s/tests/fuzz/seeds/%s", KT_SOURCE_DIR, target);
    n += replay_dir(dir, fn);
    snprintf(dir, sizeof dir, "%s/tests/fuzz/regress/%s", KT_SOURCE_DIR, target);
    n += replay_dir(dir, fn);
    return n;
}

KT_TEST(decode_inputs) {
    int n = replay("fuzz_server_decode", fuzz_decode_one);
    KT_CHECK(n >= 10);
    /* hand-picked inputs too */
    static const char *inputs[] = {
        "", "{", "[]", "{\"prompt\": 1e400, \"max_tokens\": -1e400}", "{\"stop\": [\"\\ud800\"]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}]}]}",
        "{\"prompt\": [[1,2],[3]], \"n\": 128, \"stream\": true, \"stream_options\": {\"include_usage\": true}}",
        "{\"prompt\": \"x\", \"seed\": -9223372036854775808, \"max_tokens\": 18446744073709551616}",
    };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        fuzz_decode_one((const uint8_t *)inputs[i], strlen(inputs[i]));
}

KT_TEST(sse_inputs) {
    int n = replay("fuzz_server_sse", fuzz_sse_one);
    KT_CHECK(n >= 5);
    uint8_t buf[600];
    for (int seed = 0; seed < 200; seed++) {
        uint32_t x = (uint32_t)seed * 2654435761u + 1;
        for (size_t i = 0; i < sizeof buf; i++) {
            x = x * 1103515245u + 12345u;
            buf[i] = (uint8_t)(x >> 16);
        }
        fuzz_sse_one(buf, (size_t)(seed * 3) % sizeof buf);
    }
}

KT_TEST(stop_inputs) {
    stop_load();
    if (stop_n_toks == 0) KT_SKIP("no tokenizer in this build: stop-string inputs not replayed");
    int n = replay("fuzz_server_stop", fuzz_stop_one);
    KT_CHECK(n >= 3);
}

KT_MAIN(KT_CASE(decode_inputs), KT_CASE(sse_inputs), KT_CASE(stop_inputs))
