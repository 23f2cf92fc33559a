// The subcommands' names, summaries and entry points (commands.h): what
// `asgd help` lists and asgd help --man/--completion renders.
#include "engine/cli/commands.h"

static const cli_command_t commands[] = {
    {"train", "train a model on this machine: hogwild, locked or sync threads", cmd_train},
    {"launch", "a distributed run: parameter servers and worker replicas (here, or under srun/mpirun)", cmd_launch},
    {"server", "one parameter-server shard of a distributed run", cmd_server},
    {"worker", "one worker replica of a distributed run", cmd_worker},
    {"merge",
     "merge a distributed run's directory into its summary, curves and model (a run stopped before its launcher did)",
     cmd_merge},
    {"predict", "apply a saved model (--save-model) to data: one prediction per example", cmd_predict},
    {"eval", "a saved model's test loss and accuracy (or RMSE) on data, as JSON", cmd_eval},
    {"gen", "write a generated dataset (sparse libsvm or ratings) to a file", cmd_gen},
    {"keygen", "make a CURVE key pair to encrypt and authenticate a distributed run", cmd_keygen},
    {"help", "show this help (help --man [COMMAND], help --completion bash: the manual and bash completion)", NULL},
    {"version", "print the version (--verbose: and what CUDA says about this machine)", NULL},
};

const cli_command_t *cli_commands(size_t *n) {
    *n = sizeof commands / sizeof commands[0];
    return commands;
}
