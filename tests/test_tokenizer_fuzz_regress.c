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

#include "fuzz/fuzz_replay.h"

KT_TEST(replay_chat) { KT_CHECK(replay("chat", kiln_fuzz_chat_one) > 0); }
KT_TEST(replay_tokenizer_files) { KT_CHECK(replay("tokenizer_files", kiln_fuzz_tokenizer_files_one) > 0); }
KT_TEST(replay_tokenizer) {
    if (!kiln_path_exists(KT_FIXTURES "/tokenizers/llama3/tokenizer.json")) KT_SKIP("fixtures not found");
    KT_CHECK(replay("tokenizer", kiln_fuzz_tokenizer_one) > 0);
}

KT_MAIN(KT_CASE(replay_chat), KT_CASE(replay_tokenizer_files), KT_CASE(replay_tokenizer))
