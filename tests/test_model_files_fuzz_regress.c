// label: unit
/*
 * test_model_files_fuzz_regress.c -- replays every input kept under
 * tests/data/fuzz/safetensors/ and tests/data/fuzz/config/ (crashers found
 * by scripts/fuzz.sh and a few seeds) through the fuzz targets
 * tests/fuzz/fuzz_safetensors.c and tests/fuzz/fuzz_config.c. A regression
 * crashes or trips an invariant check (abort), failing this test. Also
 * checks that each seed is still accepted, so the targets keep reaching
 * past the first validation step.
 */
#define _GNU_SOURCE /* memmem in the fuzz targets */
#include "kt.h"

#include "fuzz/fuzz_config.c"
#include "fuzz/fuzz_safetensors.c"

#include "fuzz/fuzz_replay.h"

static char *read_seed(const char *target, const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fuzz/%s/%s", KT_DATA, target, name);
    char *data = NULL;
    if (kiln_read_file(path, &data, len)) return NULL;
    return data;
}

KT_TEST(replay_safetensors) { KT_CHECK(replay("safetensors", kiln_fuzz_safetensors_one) >= 3); }
KT_TEST(replay_config) { KT_CHECK(replay("config", kiln_fuzz_config_one) >= 3); }

/* the seeds are valid: the single file and the sharded index both open */
KT_TEST(seeds_safetensors_open) {
    static const char *const seeds[] = {"seed-single", "seed-dtypes", "seed-index"};
    for (size_t i = 0; i < KILN_ARRAY_LEN(seeds); i++) {
        size_t len = 0;
        char *data = read_seed("safetensors", seeds[i], &len);
        KT_CHECK(data != NULL);
        if (!data) continue;
        kiln_fuzz_safetensors_one((const uint8_t *)data, len);
        kiln_checkpoint ck;
        kiln_status st = kiln_checkpoint_open(kiln_fuzz_st_dir, &ck);
        if (st) fprintf(stderr, "  %s: %s\n", seeds[i], kiln_last_error());
        KT_CHECK(st == KILN_OK);
        if (st == KILN_OK) {
            KT_CHECK(ck.n_tensors >= 3);
            kiln_checkpoint_close(&ck);
        }
        free(data);
    }
}

KT_TEST(seeds_config_parse) {
    static const char *const seeds[] = {"seed-llama3.1-8b", "seed-llama2-7b", "seed-qwen2-bias", "seed-phi3",
                                        "seed-mistral-swa-generation"};
    for (size_t i = 0; i < KILN_ARRAY_LEN(seeds); i++) {
        size_t len = 0;
        char *data = read_seed("config", seeds[i], &len);
        KT_CHECK(data != NULL);
        if (!data) continue;
        kiln_model_config cfg;
        kiln_status st = kiln_model_config_parse(data, seeds[i], &cfg);
        if (st) fprintf(stderr, "  %s: %s\n", seeds[i], kiln_last_error());
        KT_CHECK(st == KILN_OK);
        if (st == KILN_OK) kiln_model_config_free(&cfg);
        free(data);
    }
}

/* Write the files of one fuzz input (first byte: layout, see
 * fuzz_safetensors.c) and open them again to look at the error. */
static kiln_status open_st_input(const char *input, size_t len) {
    kiln_fuzz_safetensors_one((const uint8_t *)input, len);
    kiln_checkpoint ck;
    kiln_clear_error();
    kiln_status st = kiln_checkpoint_open(kiln_fuzz_st_dir, &ck);
    if (st == KILN_OK) kiln_checkpoint_close(&ck);
    return st;
}

/* "\0" layout byte + 8-byte little-endian header length + header + data_len zero bytes */
static size_t st_single(char *out, size_t cap, const char *hdr, size_t data_len) {
    size_t h = strlen(hdr), n = 1 + 8 + h + data_len;
    if (n > cap) return 0;
    out[0] = 0;
    for (int i = 0; i < 8; i++) out[1 + i] = (char)((uint64_t)h >> (8 * i));
    memcpy(out + 9, hdr, h);
    memset(out + 9 + h, 0, data_len);
    return n;
}

#define U8T(name, n, b, e) "\"" name "\": {\"dtype\": \"U8\", \"shape\": [" #n "], \"data_offsets\": [" #b ", " #e "]}"

KT_TEST(safetensors_errors_named) {
    char buf[1024];
    size_t n;
    /* an empty tensor between two overlapping ones used to hide the overlap */
    n = st_single(buf, sizeof buf, "{" U8T("a", 100, 0, 100) ", " U8T("e", 0, 5, 5) ", " U8T("c", 10, 50, 60) "}",
                  100);
    KT_ERR(open_st_input(buf, n), KILN_ERR_FORMAT, "tensors \"a\" (bytes 0 to 100) and \"c\" (bytes 50 to 60) overlap");
    /* ... and so did a long tensor reaching past a short one */
    n = st_single(buf, sizeof buf, "{" U8T("a", 100, 0, 100) ", " U8T("b", 10, 10, 20) ", " U8T("c", 10, 50, 60) "}",
                  100);
    KT_ERR(open_st_input(buf, n), KILN_ERR_FORMAT, "overlap");
    /* empty tensors anywhere, and touching ones, are fine */
    n = st_single(buf, sizeof buf, "{" U8T("a", 50, 0, 50) ", " U8T("e", 0, 50, 50) ", " U8T("c", 50, 50, 100) "}",
                  100);
    KT_OK(open_st_input(buf, n));
    n = st_single(buf, sizeof buf,
                  "{\"a\": {\"dtype\": \"U8\", \"shape\": [4611686018427387904], \"data_offsets\": [0, 1]}}", 1);
    KT_ERR(open_st_input(buf, n), KILN_ERR_FORMAT, "shape has 2^62 or more elements");

    /* two shards whose headers are "{}": the second realloc(tensors, 0)
     * freed the table and the error path freed it again */
    static const char two_empty[] = "\x01{\"weight_map\": {\"x\": \"a.safetensors\", \"y\": \"b.safetensors\"}}"
                                    "--8<--\x02\0\0\0\0\0\0\0{}--8<--\x02\0\0\0\0\0\0\0{}";
    KT_ERR(open_st_input(two_empty, sizeof two_empty - 1), KILN_ERR_FORMAT,
           "lists tensor \"x\" in a.safetensors, but that shard does not contain it");
    /* "." is not a shard file */
    static const char dot[] = "\x01{\"weight_map\": {\"x\": \".\"}}";
    KT_ERR(open_st_input(dot, sizeof dot - 1), KILN_ERR_FORMAT, "is not a plain file name");
    /* a tensor in two shards is named with both */
    char idx[1024];
    static const char map[] = "\x01{\"weight_map\": {\"x\": \"a.safetensors\", \"y\": \"b.safetensors\"}}--8<--";
    memcpy(idx, map, sizeof map - 1);
    size_t at = sizeof map - 1;
    n = st_single(buf, sizeof buf, "{" U8T("x", 1, 0, 1) "}", 1);
    memcpy(idx + at, buf + 1, n - 1);
    at += n - 1;
    memcpy(idx + at, "--8<--", 6);
    at += 6;
    memcpy(idx + at, buf + 1, n - 1);
    at += n - 1;
    KT_ERR(open_st_input(idx, at), KILN_ERR_FORMAT, "tensor \"x\" appears in more than one shard");

    /* the index says x is in b.safetensors, but it is in ab.safetensors: a
     * suffix match of the shard path used to accept that */
    static const char idx_ab[] = "\x01{\"weight_map\": {\"x\": \"b.safetensors\", \"y\": \"ab.safetensors\"}}"
                                 "--8<----8<--\x02\0\0\0\0\0\0\0{}"; /* b.safetensors: no tensors */
    kiln_fuzz_safetensors_one((const uint8_t *)idx_ab, sizeof idx_ab - 1);
    char ab[600];
    snprintf(ab, sizeof ab, "%s/ab.safetensors", kiln_fuzz_st_dir);
    n = st_single(buf, sizeof buf, "{" U8T("x", 1, 0, 1) ", " U8T("y", 1, 1, 2) "}", 2);
    FILE *f = fopen(ab, "wb");
    KT_REQUIRE(f != NULL);
    fwrite(buf + 1, 1, n - 1, f);
    fclose(f);
    kiln_checkpoint ck;
    KT_ERR(kiln_checkpoint_open(kiln_fuzz_st_dir, &ck), KILN_ERR_FORMAT,
           "lists tensor \"x\" in b.safetensors, but it is in");
    unlink(ab);
}

/* a small valid config plus extra fields (hidden_size 64 unless extra sets it) */
static kiln_status parse_cfg(const char *extra) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"architectures\": [\"LlamaForCausalLM\"], \"intermediate_size\": 128, \"num_hidden_layers\": 2, "
             "\"num_attention_heads\": 4, \"vocab_size\": 512%s%s}",
             strstr(extra, "\"hidden_size\"") ? "" : ", \"hidden_size\": 64", extra);
    kiln_model_config cfg;
    kiln_clear_error();
    kiln_status st = kiln_model_config_parse(text, "t/config.json", &cfg);
    if (st == KILN_OK) kiln_model_config_free(&cfg);
    return st;
}

KT_TEST(config_errors_named) {
    KT_OK(parse_cfg(""));
    KT_ERR(parse_cfg(", \"rope_theta\": 0"), KILN_ERR_FORMAT, "t/config.json: rope_theta = 0 must be positive");
    KT_ERR(parse_cfg(", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": -5.0}"), KILN_ERR_FORMAT,
           "rope_theta = -5 must be positive");
    KT_ERR(parse_cfg(", \"partial_rotary_factor\": 0"), KILN_ERR_FORMAT, "partial_rotary_factor = 0 must be in (0, 1]");
    KT_ERR(parse_cfg(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0, "
                     "\"high_freq_factor\": 4.0}"),
           KILN_ERR_FORMAT, "llama3 rope needs 0 < low_freq_factor < high_freq_factor (got 4 and 4)");
    KT_ERR(parse_cfg(", \"rope_scaling\": {\"rope_type\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"),
           KILN_ERR_UNSUPPORTED, "rope type \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\" is not supported");
    KT_ERR(parse_cfg(", \"rms_norm_eps\": -1"), KILN_ERR_FORMAT, "rms_norm_eps = -1 must not be negative");
    /* hidden_size 66 / 4 heads: a null head_dim does not excuse it */
    KT_ERR(parse_cfg(", \"hidden_size\": 66, \"head_dim\": null"), KILN_ERR_FORMAT,
           "hidden_size 66 is not divisible by num_attention_heads 4");
    KT_OK(parse_cfg(", \"hidden_size\": 66, \"head_dim\": 16"));
    KT_ERR(parse_cfg(", \"head_dim\": 1000000000"), KILN_ERR_FORMAT,
           "(num_attention_heads 4 + 2 * num_key_value_heads 4) * head_dim 1000000000 = 12000000000 is too large");
    KT_ERR(parse_cfg(", \"hidden_size\": 2000000000"), KILN_ERR_FORMAT,
           "\"hidden_size\" = 2000000000 is out of range (1 to 1000000000)");
    KT_ERR(parse_cfg(", \"eos_token_id\": 4294967297"), KILN_ERR_FORMAT, "eos_token_id = 4294967297 is out of range");
    KT_ERR(parse_cfg(", \"eos_token_id\": [1, 4294967297]"), KILN_ERR_FORMAT,
           "eos_token_id[1] = 4294967297 is out of range");
    KT_ERR(parse_cfg(", \"bos_token_id\": 2147483648"), KILN_ERR_FORMAT, "bos_token_id = 2147483648 is out of range");
    KT_ERR(parse_cfg(", \"pad_token_id\": 9223372036854775807"), KILN_ERR_FORMAT, "pad_token_id = 9223372036854775807");
    KT_ERR(parse_cfg(", \"sliding_window\": -5"), KILN_ERR_FORMAT, "\"sliding_window\" = -5 is out of range");
    KT_ERR(parse_cfg(", \"sliding_window\": 4294967296"), KILN_ERR_FORMAT,
           "\"sliding_window\" = 4294967296 is out of range");
    KT_ERR(parse_cfg(", \"sliding_window\": \"4096\""), KILN_ERR_FORMAT, "\"sliding_window\" must be an integer");
    KT_ERR(parse_cfg(", \"dtype\": 16"), KILN_ERR_FORMAT, "field \"dtype\" must be a string");
    /* negative ids mean none; a disabled window is not read */
    kiln_model_config cfg;
    KT_OK(kiln_model_config_parse("{\"architectures\": [\"X\"], \"hidden_size\": 64, \"intermediate_size\": 1, "
                                  "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 8, "
                                  "\"bos_token_id\": -4294967295, \"eos_token_id\": [-1, 3], "
                                  "\"use_sliding_window\": false, \"sliding_window\": -1}",
                                  "t", &cfg));
    KT_CHECK(cfg.bos_token_id == -1 && cfg.n_eos == 1 && cfg.eos_token_ids[0] == 3 && cfg.sliding_window == 0);
    kiln_model_config_free(&cfg);
}

KT_MAIN(KT_CASE(replay_safetensors), KT_CASE(replay_config), KT_CASE(seeds_safetensors_open),
        KT_CASE(seeds_config_parse), KT_CASE(safetensors_errors_named), KT_CASE(config_errors_named))
