// label: unit
/*
 * test_tokenizer_fuzz_regress.c -- replays every input kept under
 * tests/data/fuzz/<target>/ (crashers found by scripts/fuzz.sh and a few
 * seeds) through the fuzz targets in tests/fuzz/. A regression crashes or
 * trips an invariant check, failing this test. The tokenizer target needs
 * ../shared/fixtures and is skipped without it.
 */
#define _GNU_SOURCE /* memmem in the fuzz targets */
#define KILN_FUZZ_SOURCE_DIR KT_SOURCE_DIR
#include "kt.h"

#include "fuzz/fuzz_chat.c"
#include "fuzz/fuzz_tokenizer.c"
#include "fuzz/fuzz_tokenizer_files.c"

#include <dirent.h>

static int replay(const char *target, int (*fn)(const uint8_t *, size_t)) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fuzz/%s", KT_DATA, target);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "README.md")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *data = NULL;
        size_t len = 0;
        if (kiln_read_file(path, &data, &len)) continue;
        fprintf(stderr, "  %s/%s\n", target, e->d_name);
        fn((const uint8_t *)data, len);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

KT_TEST(replay_chat) { KT_CHECK(replay("chat", kiln_fuzz_chat_one) > 0); }
KT_TEST(replay_tokenizer_files) { KT_CHECK(replay("tokenizer_files", kiln_fuzz_tokenizer_files_one) > 0); }
KT_TEST(replay_tokenizer) {
    if (!kiln_path_exists(KT_FIXTURES "/tokenizers/llama3/tokenizer.json")) KT_SKIP("fixtures not found");
    KT_CHECK(replay("tokenizer", kiln_fuzz_tokenizer_one) > 0);
}

KT_MAIN(KT_CASE(replay_chat), KT_CASE(replay_tokenizer_files), KT_CASE(replay_tokenizer))
