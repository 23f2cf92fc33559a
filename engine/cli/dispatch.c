// asgd COMMAND: the subcommands, their usage and the banner every run prints.
#include <stdio.h>
#include <string.h>

#include "engine/cli/commands.h"
#include "kernels/blas_runtime.h"  // defines: blas_prepare_process, blas_describe

static void print_usage(FILE *out) {
    fprintf(out,
            "asgd %s: asynchronous SGD training engine\n"
            "\n"
            "usage: asgd COMMAND [flags]     (asgd COMMAND --help for its flags)\n"
            "\n"
            "commands:\n",
            ASGD_VERSION);
    size_t n;
    const cli_command_t *c = cli_commands(&n);
    for (size_t i = 0; i < n; i++) fprintf(out, "  %-9s %s\n", c[i].name, c[i].summary);
}

int asgd_cli_main(int argc, char **argv) {
    // Before anything else: this may restart the process with faster BLAS kernels.
    blas_prepare_process(argv, 0);
    if (argc < 2 || (strcmp(argv[1], "help") == 0 && argc == 2) || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        print_usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *command = argv[1];
    if (strcmp(command, "version") == 0 || strcmp(command, "--version") == 0) {
        char blas[256];
        blas_describe(blas, sizeof blas);
        printf("asgd %s (%s)\n", ASGD_VERSION, blas);
        return 0;
    }
    if (strcmp(command, "help") == 0) return cmd_help(argc - 2, argv + 2);
    size_t n;
    const cli_command_t *c = cli_commands(&n);
    for (size_t i = 0; i < n; i++)
        if (c[i].run && strcmp(command, c[i].name) == 0) return c[i].run(argc - 2, argv + 2);
    fprintf(stderr, "asgd: unknown command '%s' (see asgd help)\n", command);
    return 2;
}
