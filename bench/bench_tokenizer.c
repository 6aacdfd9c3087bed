/*
 * bench_tokenizer.c -- tokenizer, detokenizer and chat-template speed on one
 * thread: load times, encoding the Llama 3 golden corpus repeated to 10 MB
 * (one call, and case by case), 1 MB strings without spaces, decoding,
 * streaming detokenization and chat rendering. Results go to stdout as a
 * small table; bench/RESULTS.md records them.
 *   bench_tokenizer [FIXTURES_DIR]   (default: ../shared/fixtures)
 */
#include "kiln.h"
#include "kiln_base.h"
#include "tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

static const char *fix;

static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

static kiln_tokenizer *load(const char *rel, double *ms) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fix, rel);
    double t[5];
    kiln_tokenizer *tok = NULL;
    for (int i = 0; i < 5; i++) {
        if (tok) kiln_tokenizer_destroy(tok);
        double t0 = kiln_now_sec();
        if (kiln_tokenizer_load(path, &tok)) {
            fprintf(stderr, "load %s: %s\n", path, kiln_last_error());
            exit(1);
        }
        t[i] = (kiln_now_sec() - t0) * 1e3;
    }
    *ms = median(t, 5);
    return tok;
}

static void encode_bench(const char *label, kiln_tokenizer *t, const char *text, size_t len, int reps) {
    double best = 1e9;
    size_t n = 0;
    for (int r = 0; r < reps; r++) {
        int32_t *ids;
        double t0 = kiln_now_sec();
        kiln_encode_options o = {false, true};
        if (kiln_tokenize(t, text, len, &o, &ids, &n)) {
            fprintf(stderr, "%s: %s\n", label, kiln_last_error());
            exit(1);
        }
        double dt = kiln_now_sec() - t0;
        if (dt < best) best = dt;
        kiln_free(ids);
    }
    printf("| %-52s | %9.2f MB | %9.1f ms | %8.1f MB/s | %9zu tokens |\n", label, len / 1e6, best * 1e3,
           len / 1e6 / best, n);
}

int main(int argc, char **argv) {
    fix = argc > 1 ? argv[1] : KILN_SOURCE_DIR "/../shared/fixtures";
    double ms;
    printf("### loading (median of 5)\n\n| file | ms |\n|---|---|\n");
    kiln_tokenizer *l3 = load("tokenizers/llama3/tokenizer.json", &ms);
    printf("| llama3/tokenizer.json (7.2 MB) | %.1f |\n", ms);
    kiln_tokenizer *l3t = load("tokenizers/llama3/tokenizer.model", &ms);
    printf("| llama3/tokenizer.model (tiktoken) | %.1f |\n", ms);
    kiln_tokenizer *l2 = load("tokenizers/llama2/tokenizer.model", &ms);
    printf("| llama2/tokenizer.model (SentencePiece) | %.1f |\n", ms);

    /* corpus: golden texts joined by newlines, repeated to 10 MB */
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizers/llama3/golden.json", fix);
    json_error_t je;
    json_t *g = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!g) {
        fprintf(stderr, "%s: %s\n", path, je.text);
        return 1;
    }
    kiln_buf one = {0}, corpus = {0};
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(g, "cases"), i, c) {
        kiln_buf_append(&one, json_string_value(json_object_get(c, "text")), json_string_length(json_object_get(c, "text")));
        kiln_buf_append(&one, "\n", 1);
    }
    while (corpus.len < 10u << 20) kiln_buf_append(&corpus, one.data, one.len);
    printf("\n### encoding (one thread, best of 3)\n\n| input | size | time | speed | output |\n|---|---|---|---|---|\n");
    encode_bench("llama3 tokenizer.json, golden corpus x N, one call", l3, corpus.data, corpus.len, 3);
    encode_bench("llama3 tiktoken, golden corpus x N, one call", l3t, corpus.data, corpus.len, 3);
    encode_bench("llama2 SentencePiece, golden corpus x N, one call", l2, corpus.data, corpus.len, 3);
    {
        /* case by case: many short calls (the serving pattern) */
        double t0 = kiln_now_sec();
        size_t bytes = 0, toks = 0;
        while (bytes < 10u << 20) {
            json_array_foreach(json_object_get(g, "cases"), i, c) {
                int32_t *ids;
                size_t n;
                kiln_encode_options o = {false, true};
                const char *s = json_string_value(json_object_get(c, "text"));
                size_t l = json_string_length(json_object_get(c, "text"));
                kiln_tokenize(l3, s, l, &o, &ids, &n);
                kiln_free(ids);
                bytes += l;
                toks += n;
            }
        }
        double dt = kiln_now_sec() - t0;
        printf("| %-52s | %9.2f MB | %9.1f ms | %8.1f MB/s | %9zu tokens |\n",
               "llama3 tokenizer.json, golden cases one call each", bytes / 1e6, dt * 1e3, bytes / 1e6 / dt, toks);
    }
    /* 1 MB without spaces */
    size_t mb = 1u << 20;
    char *s = malloc(mb + 8);
    uint64_t rng = 1;
    for (int kind = 0; kind < 3; kind++) {
        const char *name = kind == 0 ? "'a' x 1 MB" : kind == 1 ? "random letters, 1 MB" : "random CJK, 1 MB";
        size_t len = 0;
        while (len < mb) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            if (kind == 0) s[len++] = 'a';
            else if (kind == 1) s[len++] = (char)('a' + (rng >> 33) % 26);
            else len += kiln_utf8_encode(0x4E00 + (uint32_t)((rng >> 33) % 3000), s + len);
        }
        char label[96];
        snprintf(label, sizeof label, "llama3 json, %s, no spaces", name);
        encode_bench(label, l3, s, len, 1);
        snprintf(label, sizeof label, "llama2 spm, %s, no spaces", name);
        encode_bench(label, l2, s, len, 1);
    }
    free(s);

    /* decoding and streaming */
    {
        int32_t *ids;
        size_t n;
        kiln_encode_options o = {false, true};
        kiln_tokenize(l3, corpus.data, corpus.len, &o, &ids, &n);
        double t0 = kiln_now_sec();
        char *text;
        size_t tl;
        kiln_detokenize(l3, ids, n, false, &text, &tl);
        double dt = kiln_now_sec() - t0;
        kiln_free(text);
        printf("\n### decoding\n\n| what | tokens | time | per token |\n|---|---|---|---|\n");
        printf("| decode at once (llama3) | %zu | %.1f ms | %.1f ns |\n", n, dt * 1e3, dt * 1e9 / n);
        const char *stops[] = {"<|never|>", "\nUser:"};
        kiln_detok *d;
        kiln_detok_create(l3, NULL, 0, false, stops, 2, &d);
        kiln_buf out = {0};
        t0 = kiln_now_sec();
        for (size_t k = 0; k < n; k++) {
            out.len = 0;
            bool hit;
            kiln_detok_push(d, ids[k], &out, &hit);
        }
        dt = kiln_now_sec() - t0;
        printf("| streaming, 2 stop strings (llama3) | %zu | %.1f ms | %.1f ns |\n", n, dt * 1e3, dt * 1e9 / n);
        kiln_detok_destroy(d);
        kiln_buf_free(&out);
        kiln_free(ids);
    }
    /* chat rendering */
    {
        snprintf(path, sizeof path, "%s/chat_templates/qwen2.5-instruct.jinja", fix);
        kiln_chat_template *ct;
        if (kiln_chat_template_load(path, &ct) == KILN_OK) {
            const char *msgs = "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"},"
                               "{\"role\":\"assistant\",\"content\":\"Hello!\"},{\"role\":\"user\",\"content\":\"Why?\"}]";
            int reps = 2000;
            double t0 = kiln_now_sec();
            for (int k = 0; k < reps; k++) {
                char *o;
                kiln_chat_render(ct, msgs, true, NULL, &o);
                kiln_free(o);
            }
            double dt = kiln_now_sec() - t0;
            printf("\n### chat templates\n\n| template | per render |\n|---|---|\n| qwen2.5-instruct, 4 messages | %.1f us |\n",
                   dt * 1e6 / reps);
            kiln_chat_template_destroy(ct);
        }
    }
    kiln_buf_free(&one);
    kiln_buf_free(&corpus);
    json_decref(g);
    kiln_tokenizer_destroy(l3);
    kiln_tokenizer_destroy(l3t);
    kiln_tokenizer_destroy(l2);
    return 0;
}
