#ifndef ASGD_ENGINE_CLI_COMMANDS_H
#define ASGD_ENGINE_CLI_COMMANDS_H
#include <stddef.h>
#include <stdio.h>
// Subcommands of the asgd binary. Each takes the arguments after its own name
// and returns the process exit status (0 ok, 1 failure, 2 usage error).
int cmd_train(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_server(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_merge(int argc, char **argv);

// dist_role_check for `asgd server` / `asgd worker`: 0, or 2 after printing the usage error.
struct dist_role_args;
struct flag_spec;
int dist_role_finish(struct dist_role_args *a, const struct flag_spec *specs, size_t n_specs, const char *command);

// asgd help --man [COMMAND] | --completion bash: the manual pages and the
// bash completion, rendered from the commands' own flag tables.
int cmd_help(int argc, char **argv);

// The subcommands, in the order `asgd help` lists them (run is NULL for help
// and version, which the dispatcher answers itself).
typedef struct cli_command {
    const char *name;
    const char *summary;  // one line
    int (*run)(int argc, char **argv);
} cli_command_t;
const cli_command_t *cli_commands(size_t *n);
// Whether the command takes --name (for an unknown flag's message elsewhere).
int cmd_train_has_flag(const char *name);
int cmd_launch_has_flag(const char *name);

// The whole program: dispatches argv[1] to its command (main() is just this call).
// Before anything else it may restart the process with faster BLAS kernels.
int asgd_cli_main(int argc, char **argv);

// The startup banner (engine/run/banner.h), one line on out.
void print_banner(FILE *out, const char *command);
#endif
