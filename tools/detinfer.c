/*
 * detinfer.c — the `detinfer` command: deterministic greedy inference with
 * digests, and the checks around it. One subcommand per file:
 *
 *   detinfer run     greedy continuation of a prompt with per-token digests
 *   detinfer verify  the determinism contract checked on this deployment
 *   detinfer doctor  the environment fingerprint and its checks
 *   detinfer bench   prompt and generation tokens per second
 *   detinfer serve   an OpenAI-compatible HTTP service (tools/serve/)
 *   detinfer replay  a served answer recomputed from its receipt
 *
 * Built only on the public API (include/detinfer.h). Exit status: 0 success,
 * 1 a mismatch, failed check or library error, 2 bad arguments.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli_commands.h"
#include "cli/cli_options.h"

typedef struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary; /* NULL: hidden */
} subcommand;

static const subcommand subcommands[] = {
    {"run", cli_cmd_run, "greedy continuation of a prompt, each token's logits digest, the sequence digest"},
    {"verify", cli_cmd_verify,
     "check bitwise determinism across repetitions, batch sizes, threads, chunks, processes, backends"},
    {"doctor", cli_cmd_doctor, "environment fingerprint: library, CPU and SIMD path, OS, CUDA; OK/WARN checks"},
    {"bench", cli_cmd_bench, "prompt processing and generation tokens per second (pp N, tg N)"},
    {"serve", cli_cmd_serve, "HTTP service, OpenAI's API, continuous batching, digests in every response"},
    {"replay", cli_cmd_replay,
     "recompute served answers from their receipts (request + response); exit 0 if all match"},
    {"__verify-child", cli_cmd_verify_child, NULL},
    {NULL, NULL, NULL},
};

static void print_usage(FILE *f)
{
    fprintf(f, "usage: detinfer COMMAND [options]   (libdetinfer %s)\n\ncommands:\n", di_version_string());
    for (const subcommand *c = subcommands; c->name; c++)
        if (c->summary)
            fprintf(f, "  %-8s %s\n", c->name, c->summary);
    fprintf(f, "\n'detinfer COMMAND --help' describes each one. 'detinfer --version' prints the versions.\n"
               "Exit status: 0 success, 1 a mismatch, failed check or library error, 2 bad arguments.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "detinfer: a command is required\n");
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("detinfer %s (built with header %s)\n%s\n", di_version_string(), DI_VERSION_STRING,
               di_build_info());
        return CLI_EXIT_OK;
    }
    for (const subcommand *c = subcommands; c->name; c++)
        if (!strcmp(argv[1], c->name))
            return c->fn(argc - 1, argv + 1);
    fprintf(stderr, "detinfer: unknown command '%s'\n", argv[1]);
    print_usage(stderr);
    return CLI_EXIT_USAGE;
}
