/*
 * simple_generate.c -- the smallest useful program on libkiln: load a model,
 * generate from a prompt, print the text as it streams.
 *
 *   cc simple_generate.c -Iinclude -Lbuild -lkiln -o simple_generate
 *   ./simple_generate MODEL_DIR "Once upon a time" [--ids 1,2,3]
 */
#include "kiln.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int on_token(void *user, const kiln_stream_event *ev) {
    (void)user;
    if (ev->text_len) fwrite(ev->text, 1, ev->text_len, stdout);
    else if (ev->token >= 0 && ev->text == NULL) printf("%d ", ev->token);
    fflush(stdout);
    return 0; /* non-zero would cancel the request */
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL_DIR PROMPT | MODEL_DIR --ids 1,2,3\n", argv[0]);
        return 2;
    }
    kiln_engine_params params;
    kiln_engine_default_params(&params);
    params.model = argv[1];

    kiln_engine *engine = NULL;
    if (kiln_engine_create(&params, &engine) != KILN_OK) {
        fprintf(stderr, "error: %s\n", kiln_last_error());
        return 1;
    }

    kiln_request req;
    kiln_request_default(&req);
    req.sampling.temperature = 0.0f; /* greedy */
    req.sampling.max_tokens = 32;
    req.on_event = on_token;
    int32_t ids[256];
    if (!strcmp(argv[2], "--ids") && argc > 3) {
        int n = 0;
        for (char *tok = strtok(argv[3], ","); tok && n < 256; tok = strtok(NULL, ",")) ids[n++] = atoi(tok);
        req.prompt_ids = ids;
        req.n_prompt_ids = n;
    } else {
        req.prompt = argv[2];
    }

    kiln_result result;
    kiln_status st = kiln_engine_generate(engine, &req, 1, &result);
    if (st == KILN_OK && result.error == KILN_OK) {
        printf("\n[%d tokens, finish reason %d]\n", result.n_ids, (int)result.finish);
    } else {
        fprintf(stderr, "\nerror: %s\n", kiln_last_error());
    }
    kiln_result_free(&result);
    kiln_engine_destroy(engine);
    return st == KILN_OK ? 0 : 1;
}
