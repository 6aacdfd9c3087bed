/*
 * cmd_tokenize.c -- `kiln tokenize`, `kiln detokenize` and `kiln chat-render`:
 * JSON on stdin, JSON (or the rendered prompt) on stdout.
 *   tokenize:    ["text", ...]            -> [[id, ...], ...]
 *   detokenize:  [[id, ...], ...]          -> ["text", ...]
 *   chat-render: {"messages": [...], "add_generation_prompt": bool, ...}
 *                -> the prompt; every other key is a template variable.
 * Ownership: everything is freed before returning. Thread-safety: single
 * threaded.
 */
#include "chat.h" /* kiln_chat_template_use_model_tokens */
#include "cli.h"
#include "kiln_base.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

static json_t *read_stdin_json(const char *cmd) {
    kiln_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        if (kiln_buf_append(&b, chunk, n)) {
            kiln_buf_free(&b);
            fprintf(stderr, "kiln %s: out of memory reading stdin\n", cmd);
            return NULL;
        }
    }
    json_error_t je;
    json_t *j = json_loadb(b.data ? b.data : "", b.len, JSON_ALLOW_NUL, &je);
    kiln_buf_free(&b);
    if (!j) fprintf(stderr, "kiln %s: invalid JSON on stdin (line %d, column %d): %s\n", cmd, je.line, je.column, je.text);
    return j;
}

static int print_json(json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) {
        fprintf(stderr, "kiln: out of memory writing JSON\n");
        return 1;
    }
    fputs(s, stdout);
    fputc('\n', stdout);
    free(s);
    return fflush(stdout) ? 1 : 0;
}

int kiln_cmd_tokenize(int argc, char **argv) {
    const char *path = NULL;
    bool plain = false, add_special = false;
    cli_opt opts[] = {
        {"tokenizer", CLI_STR, &path, "PATH", "tokenizer file or model directory (required)"},
        {"plain", CLI_FLAG, &plain, NULL, "treat special-token text as ordinary text"},
        {"add-special", CLI_FLAG, &add_special, NULL, "add BOS/EOS as the tokenizer's post-processor says"},
        CLI_OPT_END,
    };
    cli_opt *tables[] = {opts, NULL};
    int r = cli_parse(argc, argv, "tokenize",
                      "Read a JSON array of strings on stdin; print a JSON array of token id arrays.", tables, NULL, 0,
                      NULL);
    if (r) return r == 3 ? 0 : r;
    if (!path) {
        fprintf(stderr, "kiln tokenize: --tokenizer PATH is required\n");
        return 2;
    }
    json_t *in = read_stdin_json("tokenize");
    if (!in) return 1;
    if (!json_is_array(in)) {
        fprintf(stderr, "kiln tokenize: stdin must be a JSON array of strings\n");
        json_decref(in);
        return 1;
    }
    kiln_tokenizer *tok = NULL;
    json_t *out = json_array();
    int rc = 1;
    if (kiln_tokenizer_load(path, &tok)) {
        rc = cli_fail("tokenize");
        goto done;
    }
    size_t i;
    json_t *v;
    json_array_foreach(in, i, v) {
        if (!json_is_string(v)) {
            fprintf(stderr, "kiln tokenize: element %zu is not a string\n", i);
            goto done;
        }
        kiln_encode_options o = {add_special, !plain};
        int32_t *ids = NULL;
        size_t n = 0;
        if (kiln_tokenize(tok, json_string_value(v), json_string_length(v), &o, &ids, &n)) {
            rc = cli_fail("tokenize");
            goto done;
        }
        json_t *arr = json_array();
        for (size_t k = 0; k < n; k++) json_array_append_new(arr, json_integer(ids[k]));
        json_array_append_new(out, arr);
        kiln_free(ids);
    }
    rc = print_json(out);
done:
    kiln_tokenizer_destroy(tok);
    json_decref(in);
    json_decref(out);
    return rc;
}

int kiln_cmd_detokenize(int argc, char **argv) {
    const char *path = NULL;
    bool skip = false;
    cli_opt opts[] = {
        {"tokenizer", CLI_STR, &path, "PATH", "tokenizer file or model directory (required)"},
        {"skip-special", CLI_FLAG, &skip, NULL, "leave special tokens out of the text"},
        CLI_OPT_END,
    };
    cli_opt *tables[] = {opts, NULL};
    int r = cli_parse(argc, argv, "detokenize",
                      "Read a JSON array of token id arrays on stdin; print a JSON array of strings.", tables, NULL,
                      0, NULL);
    if (r) return r == 3 ? 0 : r;
    if (!path) {
        fprintf(stderr, "kiln detokenize: --tokenizer PATH is required\n");
        return 2;
    }
    json_t *in = read_stdin_json("detokenize");
    if (!in) return 1;
    kiln_tokenizer *tok = NULL;
    json_t *out = json_array();
    int32_t *ids = NULL;
    int rc = 1;
    if (!json_is_array(in)) {
        fprintf(stderr, "kiln detokenize: stdin must be a JSON array of id arrays\n");
        goto done;
    }
    if (kiln_tokenizer_load(path, &tok)) {
        rc = cli_fail("detokenize");
        goto done;
    }
    size_t i;
    json_t *v;
    json_array_foreach(in, i, v) {
        if (!json_is_array(v)) {
            fprintf(stderr, "kiln detokenize: element %zu is not an array of ids\n", i);
            goto done;
        }
        size_t n = json_array_size(v);
        ids = malloc((n ? n : 1) * sizeof *ids);
        if (!ids) {
            fprintf(stderr, "kiln detokenize: out of memory\n");
            goto done;
        }
        for (size_t k = 0; k < n; k++) {
            json_t *x = json_array_get(v, k);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX) {
                fprintf(stderr, "kiln detokenize: element %zu, position %zu is not a token id\n", i, k);
                goto done;
            }
            ids[k] = (int32_t)json_integer_value(x);
        }
        char *text = NULL;
        size_t len = 0;
        if (kiln_detokenize(tok, ids, n, skip, &text, &len)) {
            rc = cli_fail("detokenize");
            goto done;
        }
        json_array_append_new(out, json_stringn(text, len));
        kiln_free(text);
        free(ids);
        ids = NULL;
    }
    rc = print_json(out);
done:
    free(ids);
    kiln_tokenizer_destroy(tok);
    json_decref(in);
    json_decref(out);
    return rc;
}

int kiln_cmd_chat_render(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    cli_opt opts[] = {
        {"model", CLI_STR, &model, "DIR", "model directory (chat_template.jinja or tokenizer_config.json)"},
        {"chat-template", CLI_STR, &file, "FILE", "a template file (.jinja, or a JSON file with chat_template)"},
        CLI_OPT_END,
    };
    cli_opt *tables[] = {opts, NULL};
    int r = cli_parse(argc, argv, "chat-render",
                      "Read {\"messages\": [...], \"add_generation_prompt\": bool, ...} on stdin and print the "
                      "rendered prompt. Other keys (bos_token, eos_token, tools, ...) are template variables.",
                      tables, NULL, 0, NULL);
    if (r) return r == 3 ? 0 : r;
    if (!model && !file) {
        fprintf(stderr, "kiln chat-render: --model DIR or --chat-template FILE is required\n");
        return 2;
    }
    json_t *in = read_stdin_json("chat-render");
    if (!in) return 1;
    kiln_chat_template *t = NULL;
    char *msgs = NULL, *extra = NULL, *out = NULL;
    int rc = 1;
    json_t *vars = NULL;
    if (!json_is_object(in)) {
        fprintf(stderr, "kiln chat-render: stdin must be a JSON object with \"messages\"\n");
        goto done;
    }
    json_t *m = json_object_get(in, "messages");
    if (!json_is_array(m)) {
        fprintf(stderr, "kiln chat-render: \"messages\" must be an array\n");
        goto done;
    }
    json_t *agp = json_object_get(in, "add_generation_prompt");
    if (agp && !json_is_boolean(agp)) {
        fprintf(stderr, "kiln chat-render: \"add_generation_prompt\" must be true or false\n");
        goto done;
    }
    vars = json_deep_copy(in);
    json_object_del(vars, "messages");
    json_object_del(vars, "add_generation_prompt");
    if (kiln_chat_template_load(file ? file : model, &t)) {
        rc = cli_fail("chat-render");
        goto done;
    }
    if (file && model && kiln_chat_template_use_model_tokens(t, model)) {
        rc = cli_fail("chat-render");
        goto done;
    }
    msgs = json_dumps(m, JSON_COMPACT | JSON_ENCODE_ANY);
    extra = json_dumps(vars, JSON_COMPACT);
    if (!msgs || !extra) {
        fprintf(stderr, "kiln chat-render: out of memory\n");
        goto done;
    }
    if (kiln_chat_render(t, msgs, agp && json_is_true(agp), extra, &out)) {
        fprintf(stderr, "kiln chat-render: %s\n", kiln_last_error());
        goto done;
    }
    fputs(out, stdout);
    rc = fflush(stdout) ? 1 : 0;
done:
    kiln_free(out);
    free(msgs);
    free(extra);
    json_decref(vars);
    json_decref(in);
    kiln_chat_template_destroy(t);
    return rc;
}
