/*
 * cli.h -- the `kiln` command: subcommand table and shared option parsing.
 * Each subcommand is one file cli/cmd_NAME.c exporting
 * `int kiln_cmd_NAME(int argc, char **argv)` (argv[0] is the subcommand).
 * Exit codes: 0 ok, 1 runtime error, 2 usage error.
 * Thread-safety: single-threaded option parsing.
 */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include "kiln.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum cli_opt_type { CLI_FLAG, CLI_INT, CLI_FLOAT, CLI_DOUBLE, CLI_STR, CLI_SIZE, CLI_U64, CLI_END } cli_opt_type;

typedef struct cli_opt {
    const char *name;    /* long name without dashes: "max-tokens"        */
    cli_opt_type type;
    void *ptr;           /* bool*, int*, float*, double*, const char**,
                            size_t*, uint64_t*                            */
    const char *metavar; /* "N", "DIR", ...                               */
    const char *help;
} cli_opt;

#define CLI_OPT_END {NULL, CLI_END, NULL, NULL, NULL}

/* Parse argv[1..] against up to 4 option tables (NULL-terminated list).
 * Positionals are collected into pos (at most max_pos). Returns 0 on
 * success, 2 on a usage error (message printed), 3 when --help was shown. */
int cli_parse(int argc, char **argv, const char *cmd, const char *summary, cli_opt *const *tables,
              const char **pos, int max_pos, int *n_pos);

/* Engine options shared by generate, serve, bench, explain. */
cli_opt *cli_engine_opts(kiln_engine_params *p);
/* Sampling options shared by generate and bench. */
cli_opt *cli_sampling_opts(kiln_sampling_params *p);

/* Print "kiln CMD: <last error>" to stderr; returns 1. */
int cli_fail(const char *cmd);

/* Parse "1,2,3" into ids (returned owned, free()). */
int cli_parse_ids(const char *s, int32_t **ids, int *n);

int kiln_cmd_explain(int argc, char **argv);
int kiln_cmd_generate(int argc, char **argv);
int kiln_cmd_serve(int argc, char **argv);
int kiln_cmd_bench(int argc, char **argv);
int kiln_cmd_tokenize(int argc, char **argv);
int kiln_cmd_detokenize(int argc, char **argv);
int kiln_cmd_chat_render(int argc, char **argv);
int kiln_cmd_kernels(int argc, char **argv);

#endif
