/*
 * cmd_generate.c -- `kiln generate`: run prompts through the continuous
 * batcher and print the generations (text, or one JSON object per prompt
 * with --json). With no --model, the demo model (random weights) is used.
 */
#include "cli.h"
#include "kiln_base.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

kiln_status cli_demo_model(char **dir_out);

typedef struct prompt_in {
    char *text;
    int32_t *ids;
    int n_ids;
} prompt_in;

static bool looks_like_ids(const char *s) {
    bool digit = false;
    for (const char *c = s; *c; c++) {
        if (*c >= '0' && *c <= '9') digit = true;
        else if (!strchr(" ,[]\t\r\n", *c)) return false;
    }
    return digit;
}

/* Every request's events: the time of the first generated token, and the
 * text when streaming one prompt. */
typedef struct gen_watch {
    double first; /* kiln_now_sec() of the first generated token, 0 until then */
    bool stream;
} gen_watch;

static int stream_cb(void *user, const kiln_stream_event *ev) {
    gen_watch *w = user;
    if (!w->first && ev->n_generated_tokens > 0) w->first = kiln_now_sec();
    if (w->stream && ev->text_len) {
        fwrite(ev->text, 1, ev->text_len, stdout);
        fflush(stdout);
    }
    return 0;
}

int kiln_cmd_generate(int argc, char **argv) {
    kiln_engine_params p;
    kiln_engine_default_params(&p);
    kiln_sampling_params sp;
    kiln_sampling_default_params(&sp);
    sp.max_tokens = 32;
    sp.temperature = 0.0f;
    const char *prompt = NULL, *prompt_ids = NULL, *prompts_file = NULL;
    bool json_out = false, no_special = false;
    const char *stop = NULL;
    cli_opt own[] = {
        {"prompt", CLI_STR, &prompt, "TEXT", "prompt text (needs a tokenizer)"},
        {"prompt-ids", CLI_STR, &prompt_ids, "IDS", "prompt token ids, e.g. 1,2,3"},
        {"prompts-file", CLI_STR, &prompts_file, "FILE", "one prompt per line: token ids (1,2,3) or text"},
        {"json", CLI_FLAG, &json_out, NULL, "print one JSON object per prompt: {\"ids\": [...], \"text\": ...}"},
        {"no-add-special", CLI_FLAG, &no_special, NULL, "do not add BOS to text prompts"},
        {"stop", CLI_STR, &stop, "STR", "stop string"},
        CLI_OPT_END,
    };
    cli_opt *tables[] = {own, cli_engine_opts(&p), cli_sampling_opts(&sp), NULL};
    int r = cli_parse(argc, argv, "generate",
                      "Generate from prompts with continuous batching. Without --model, a small random-weight demo "
                      "model is written and used (its output is gibberish by design). Greedy by default.",
                      tables, NULL, 0, NULL);
    if (r) return r == 3 ? 0 : r;
    sp.has_seed = sp.seed != 0;
    const char *stops[1] = {stop};
    if (stop) {
        sp.stop = stops;
        sp.n_stop = 1;
    }
    char *demo = NULL;
    if (!p.model) {
        if (cli_demo_model(&demo) != KILN_OK) return cli_fail("generate");
        p.model = demo;
        if (!prompt && !prompt_ids && !prompts_file) prompt = "The kiln is hot and";
    }

    /* collect prompts */
    prompt_in *prompts = NULL;
    int n = 0, cap = 0, rc = 0;
    char *file = NULL;
#define PUSH_PROMPT(pi)                                                                        \
    do {                                                                                       \
        if (n == cap) {                                                                        \
            cap = cap ? cap * 2 : 8;                                                           \
            prompts = realloc(prompts, sizeof *prompts * (size_t)cap);                         \
            if (!prompts) {                                                                    \
                fprintf(stderr, "kiln generate: out of memory\n");                             \
                return 1;                                                                      \
            }                                                                                  \
        }                                                                                      \
        prompts[n++] = (pi);                                                                   \
    } while (0)
    if (prompt) PUSH_PROMPT(((prompt_in){kiln_strdup(prompt), NULL, 0}));
    if (prompt_ids) {
        prompt_in pi = {0};
        if (cli_parse_ids(prompt_ids, &pi.ids, &pi.n_ids)) {
            fprintf(stderr, "kiln generate: invalid --prompt-ids '%s': expected non-negative integers like 1,2,3\n",
                    prompt_ids);
            return 2;
        }
        PUSH_PROMPT(pi);
    }
    if (prompts_file) {
        size_t len;
        if (kiln_read_file(prompts_file, &file, &len) != KILN_OK) return cli_fail("generate");
        char *save = NULL;
        for (char *line = strtok_r(file, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            size_t l = strlen(line);
            if (l && line[l - 1] == '\r') line[--l] = 0;
            if (!l) continue;
            prompt_in pi = {0};
            if (looks_like_ids(line)) {
                if (cli_parse_ids(line, &pi.ids, &pi.n_ids)) {
                    fprintf(stderr, "kiln generate: bad token ids in %s: %s\n", prompts_file, line);
                    return 2;
                }
            } else {
                pi.text = kiln_strdup(line);
            }
            PUSH_PROMPT(pi);
        }
    }
    if (n == 0) {
        fprintf(stderr, "kiln generate: give --prompt, --prompt-ids or --prompts-file\n");
        return 2;
    }
    kiln_engine *e = NULL;
    double t0 = kiln_now_sec();
    if (kiln_engine_create(&p, &e) != KILN_OK) {
        rc = cli_fail("generate");
        goto out;
    }
    double t_load = kiln_now_sec() - t0;
    kiln_request *reqs = calloc((size_t)n, sizeof *reqs);
    kiln_result *res = calloc((size_t)n, sizeof *res);
    if (!reqs || !res) {
        rc = 1;
        goto out;
    }
    bool stream = !json_out && n == 1 && kiln_engine_tokenizer(e);
    gen_watch watch = {0, stream};
    for (int i = 0; i < n; i++) {
        kiln_request_default(&reqs[i]);
        reqs[i].sampling = sp;
        reqs[i].prompt = prompts[i].text;
        reqs[i].prompt_ids = prompts[i].ids;
        reqs[i].n_prompt_ids = prompts[i].n_ids;
        reqs[i].add_special = !no_special;
        reqs[i].on_event = stream_cb;
        reqs[i].user = &watch;
    }
    double t1 = kiln_now_sec();
    kiln_status st = kiln_engine_generate(e, reqs, n, res);
    double dt = kiln_now_sec() - t1;
    long total = 0;
    for (int i = 0; i < n; i++) {
        total += res[i].n_ids;
        if (res[i].error != KILN_OK) {
            fprintf(stderr, "kiln generate: prompt %d failed: %s\n", i, kiln_status_name(res[i].error));
            rc = 1;
        }
        if (json_out) {
            json_t *o = json_object(), *ids = json_array();
            for (int k = 0; k < res[i].n_ids; k++) json_array_append_new(ids, json_integer(res[i].ids[k]));
            json_object_set_new(o, "ids", ids);
            if (res[i].text) json_object_set_new(o, "text", json_stringn(res[i].text, strlen(res[i].text)));
            static const char *fin[] = {"none", "stop", "length", "abort"};
            json_object_set_new(o, "finish_reason", json_string(fin[res[i].finish]));
            json_object_set_new(o, "prompt_tokens", json_integer(res[i].n_prompt_tokens));
            char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
            puts(s);
            free(s);
            json_decref(o);
        } else if (stream) {
            putchar('\n');
        } else if (res[i].text) {
            printf("%s\n", res[i].text);
        } else {
            for (int k = 0; k < res[i].n_ids; k++) printf("%s%d", k ? "," : "", res[i].ids[k]);
            putchar('\n');
        }
        kiln_result_free(&res[i]);
    }
    kiln_stats s;
    kiln_engine_get_stats(e, &s);
    fprintf(stderr, "kiln: %d prompt%s, %ld tokens in %.3f s (%.1f tokens/s), load %.2f s, %llu steps, %llu preemptions\n",
            n, n == 1 ? "" : "s", total, dt, dt > 0 ? total / dt : 0.0, t_load, (unsigned long long)s.steps_total,
            (unsigned long long)s.num_preemptions_total);
    if (watch.first > 0)
        fprintf(stderr, "kiln: first token %.3f s after start (engine ready in %.3f s, then %.3f s)\n", watch.first - t0,
                t_load, watch.first - t1);
    if (st != KILN_OK) rc = cli_fail("generate");
    free(reqs);
    free(res);
out:
    kiln_engine_destroy(e);
    for (int i = 0; i < n; i++) {
        free(prompts[i].text);
        free(prompts[i].ids);
    }
    free(prompts);
    free(file);
    free(demo);
    return rc;
}
