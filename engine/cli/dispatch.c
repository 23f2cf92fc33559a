// asgd COMMAND: the subcommands, their usage and the banner every run prints.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cli/commands.h"
#include "engine/run/dist.h"
#include "engine/run/flag_synonyms.h"
#include "engine/cli/help_layout.h"
#include "engine/run/banner.h"
#include "engine/run/run_output.h"
#include "engine/core/flags.h"
#include "kernels/blas_runtime.h"

static void print_usage(FILE *out) {
    fprintf(out,
            "asgd %s: asynchronous SGD training engine\n"
            "\n"
            "usage: asgd COMMAND [flags]     (asgd help COMMAND, or asgd COMMAND --help, for its flags)\n"
            "\n"
            "commands:\n",
            ASGD_VERSION);
    size_t n;
    const cli_command_t *c = cli_commands(&n);
    for (size_t i = 0; i < n; i++) fprintf(out, "  %-9s %s\n", c[i].name, c[i].summary);
}

static int role_has_flag(const char *name) {
    dist_role_args_t *a = malloc(sizeof *a);
    flag_spec_t flags[DIST_ROLE_N_FLAGS];
    int has = a && flags_find(flags, dist_role_flags(a, flags), name) != NULL;
    free(a);
    return has;
}

// flags_owner_fn: the commands other than `command` that take --name.
static size_t flag_owners(const char *command, const char *name, char *owners, size_t owners_len) {
    static const char *const names[] = {"asgd train", "asgd launch", "asgd server", "asgd worker"};
    int has[4] = {cmd_train_has_flag(name), cmd_launch_has_flag(name), role_has_flag(name), 0};
    has[3] = has[2];  // server and worker take the same flags
    const char *found[4];
    size_t n = 0;
    for (size_t i = 0; i < 4; i++)
        if (has[i] && strcmp(names[i], command) != 0) found[n++] = names[i];
    size_t at = 0;
    owners[0] = '\0';
    for (size_t i = 0; i < n && at < owners_len; i++) {
        int w = snprintf(owners + at, owners_len - at, "%s%s", i == 0 ? "" : i + 1 == n ? " and " : ", ", found[i]);
        at += w > 0 ? (size_t)w : 0;
    }
    return n;
}

// The run layer's words: messages on stderr, results on stdout.
static void say_on_stderr(void *ctx, const char *text) {
    (void)ctx;
    fputs(text, stderr);
    fflush(stderr);
}

void print_banner(FILE *out, const char *command) {
    char line[600];
    banner_line(line, sizeof line, command, 0);
    fprintf(out, "%s\n", line);
}

int asgd_cli_main(int argc, char **argv) {
    // Before anything else: this may restart the process with faster BLAS kernels.
    blas_prepare_process(argv, 0);
    if (argc < 2 || (strcmp(argv[1], "help") == 0 && argc == 2) || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        print_usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    run_output_t out = {say_on_stderr, NULL, stdout, stderr, isatty(STDERR_FILENO)};
    run_output_set(&out);
    flags_set_owner_lookup(flag_owners);
    flags_set_alias_lookup(flag_synonym_canonical);
    flags_set_help_renderer(help_render);
    const char *command = argv[1];
    if (strcmp(command, "version") == 0 || strcmp(command, "--version") == 0) {
        char blas[256];
        blas_describe(blas, sizeof blas);
        printf("asgd %s (%s)\n", ASGD_VERSION, blas);
        // --verbose: what CUDA says, in full (the banner says only "no GPU").
        if (argc > 2 && strcmp(argv[2], "--verbose") == 0) {
            char cuda[256];
            cuda_banner_part(cuda, sizeof cuda, 1, 1);
            printf("%s\n", cuda);
        } else if (argc > 2) {
            fprintf(stderr, "asgd version: unexpected argument '%s' (expected --verbose)\n", argv[2]);
            return 2;
        }
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
