/*
 * main.c -- `kiln` entry point: dispatches to subcommands.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

typedef struct subcmd {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} subcmd;

static const subcmd cmds[] = {
    {"generate", kiln_cmd_generate, "generate text from prompts (offline, continuous batching)"},
    {"serve", kiln_cmd_serve, "OpenAI-compatible HTTP server"},
    {"bench", kiln_cmd_bench, "offline throughput benchmark"},
    {"explain", kiln_cmd_explain, "print a model's config, tensors, plan and layer program"},
    {"tokenize", kiln_cmd_tokenize, "JSON array of strings on stdin -> JSON array of id arrays"},
    {"detokenize", kiln_cmd_detokenize, "JSON array of id arrays on stdin -> JSON array of strings"},
    {"chat-render", kiln_cmd_chat_render, "render a chat template: JSON request on stdin -> prompt"},
    {"kernels", kiln_cmd_kernels, "list and compile the CUDA kernel registry (fills the JIT cache)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: kiln COMMAND [options]   (kiln COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) fprintf(f, "  %-12s %s\n", cmds[i].name, cmds[i].summary);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("kiln %d.%d.%d\n", KILN_VERSION_MAJOR, KILN_VERSION_MINOR, KILN_VERSION_PATCH);
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "kiln: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
