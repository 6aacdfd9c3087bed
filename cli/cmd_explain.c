/*
 * cmd_explain.c -- `kiln explain --model DIR`: config, tensor table, plan and
 * layer program, without loading weights.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

int kiln_cmd_explain(int argc, char **argv) {
    kiln_engine_params p;
    kiln_engine_default_params(&p);
    p.device = "cpu";
    cli_opt *tables[] = {cli_engine_opts(&p), NULL};
    const char *pos[1];
    int n_pos = 0;
    int r = cli_parse(argc, argv, "explain",
                      "Print the parsed config, the checkpoint's tensors, the policy's plan and the layer program.",
                      tables, pos, 1, &n_pos);
    if (r) return r == 3 ? 0 : r;
    if (n_pos == 1 && !p.model) p.model = pos[0];
    if (!p.model) {
        fprintf(stderr, "kiln explain: --model DIR is required\n");
        return 2;
    }
    char *out = NULL;
    if (kiln_explain(&p, &out) != KILN_OK) return cli_fail("explain");
    fputs(out, stdout);
    kiln_free(out);
    return 0;
}
