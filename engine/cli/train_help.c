// The help of a command that trains, and its parse with --help and usage errors printed (train_help.h).
#include <stdio.h>
#include <stdlib.h>

#include "engine/cli/train_help.h"

void train_args_print_help(FILE *out, const train_args_t *a, const char *command, const char *usage,
                           const char *description, const flag_spec_t *specs, size_t n_specs) {
    if (flags_help_hooked()) {  // asgd help --man/--completion: every flag, the models' included
        flags_print_help(out, command, usage, description, specs, n_specs);
        return;
    }
    flag_spec_t *shared = malloc((n_specs ? n_specs : 1) * sizeof *shared);
    size_t n = 0;
    for (size_t i = 0; shared && i < n_specs; i++)
        if (!train_args_is_model_flag(a, &specs[i])) shared[n++] = specs[i];
    flags_print_help(out, command, usage, description, shared ? shared : specs, shared ? n : n_specs);
    free(shared);
    fprintf(out, "\nmodels (--model M), each with its defaults and its own flags:\n");
    for (size_t i = 0; i < model_registry_count(); i++) {
        const model_descriptor_t *d = model_registry_at(i);
        fprintf(out, "  %-10s %s\n", d->name, d->summary ? d->summary : "");
        fprintf(out, "  %-10s data: %s (default --data %s); measured by %s%s\n", "", train_args_data_kind_text(d),
                d->defaults.data,
                d->metric == METRIC_KIND_RMSE ? "test RMSE (--target-rmse)" : "test accuracy (--target-acc)",
                d->gpu ? "" : "; CPU only");
        fprintf(out, "  %-10s defaults: --lr %g --batch %zu --l2 %g\n", "", d->defaults.lr, d->defaults.batch,
                d->defaults.l2);
        model_options_t scratch;
        flag_spec_t own[MODEL_MAX_FLAGS];
        model_options_init(d, &scratch, own);
        flags_print_specs(out, "    ", own, d->n_flags);
    }
}

int train_args_command(train_args_t *a, const char *command, const char *usage, const char *description,
                       flag_spec_t *specs, size_t n_specs, int argc, char **argv) {
    char err[512];
    flags_status_t st = train_args_parse(a, command, specs, n_specs, argc, argv, err, sizeof err);
    if (st == FLAGS_STATUS_HELP) {
        train_args_print_help(stdout, a, command, usage, description, specs, n_specs);
        return 0;
    }
    if (st == FLAGS_STATUS_ERROR) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    return -1;
}
