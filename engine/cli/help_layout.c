// How a command's help is laid out (help_layout.h).
#include "engine/cli/help_layout.h"

#include <stdlib.h>
#include <string.h>

#include "engine/run/flag_synonyms.h"

static const char *const group_titles[] = {
    [HELP_TOPIC_DATA] = "data",
    [HELP_TOPIC_MODEL] = "model",
    [HELP_TOPIC_OPTIMISATION] = "optimisation",
    [HELP_TOPIC_DISTRIBUTED] = "distributed",
    [HELP_TOPIC_OUTPUT] = "output",
    [HELP_TOPIC_RELIABILITY] = "reliability",
    [HELP_TOPIC_COUNT] = "other",
};

// Every flag of every command, by topic. A flag's name means one thing in
// every command that has it.
static const struct {
    const char *name;
    help_topic_t topic;
} topics[] = {
    // data: what is read, and which part of it
    {"data", HELP_TOPIC_DATA},
    {"test-data", HELP_TOPIC_DATA},
    {"data-dir", HELP_TOPIC_DATA},
    {"train-limit", HELP_TOPIC_DATA},
    {"test-limit", HELP_TOPIC_DATA},
    {"test-frac", HELP_TOPIC_DATA},
    {"label-column", HELP_TOPIC_DATA},
    {"csv-header", HELP_TOPIC_DATA},
    {"seed", HELP_TOPIC_DATA},
    {"config", HELP_TOPIC_DATA},
    {"split", HELP_TOPIC_DATA},
    {"n", HELP_TOPIC_DATA},
    {"dim", HELP_TOPIC_DATA},
    {"nnz", HELP_TOPIC_DATA},
    {"zipf", HELP_TOPIC_DATA},
    {"noise", HELP_TOPIC_DATA},
    {"users", HELP_TOPIC_DATA},
    {"items", HELP_TOPIC_DATA},
    {"ratings", HELP_TOPIC_DATA},
    {"rating-noise", HELP_TOPIC_DATA},
    // model: what is trained, on what hardware
    {"model", HELP_TOPIC_MODEL},
    {"model-file", HELP_TOPIC_MODEL},
    {"l2", HELP_TOPIC_MODEL},
    {"hidden", HELP_TOPIC_MODEL},
    {"rank", HELP_TOPIC_MODEL},
    {"embed-dim", HELP_TOPIC_MODEL},
    {"device", HELP_TOPIC_MODEL},
    {"gpu", HELP_TOPIC_MODEL},
    {"gpu-scatter", HELP_TOPIC_MODEL},
    {"gpu-chunk", HELP_TOPIC_MODEL},
    {"gpu-in-flight", HELP_TOPIC_MODEL},
    // optimisation: how the steps are taken
    {"mode", HELP_TOPIC_OPTIMISATION},
    {"hogwild-variant", HELP_TOPIC_OPTIMISATION},
    {"merge-every", HELP_TOPIC_OPTIMISATION},
    {"threads", HELP_TOPIC_OPTIMISATION},
    {"epochs", HELP_TOPIC_OPTIMISATION},
    {"batch", HELP_TOPIC_OPTIMISATION},
    {"optimizer", HELP_TOPIC_OPTIMISATION},
    {"lr", HELP_TOPIC_OPTIMISATION},
    {"lr-schedule", HELP_TOPIC_OPTIMISATION},
    {"lr-decay", HELP_TOPIC_OPTIMISATION},
    {"warmup", HELP_TOPIC_OPTIMISATION},
    {"clip-grad-norm", HELP_TOPIC_OPTIMISATION},
    {"momentum", HELP_TOPIC_OPTIMISATION},
    {"adagrad-eps", HELP_TOPIC_OPTIMISATION},
    {"time-limit", HELP_TOPIC_OPTIMISATION},
    {"pin", HELP_TOPIC_OPTIMISATION},
    {"simulate-workers", HELP_TOPIC_OPTIMISATION},
    {"delay", HELP_TOPIC_OPTIMISATION},
    {"staleness-aware", HELP_TOPIC_OPTIMISATION},
    {"dc-asgd", HELP_TOPIC_OPTIMISATION},
    {"delay-adaptive", HELP_TOPIC_OPTIMISATION},
    // distributed: the processes of a run and how they share the model
    {"servers", HELP_TOPIC_DISTRIBUTED},
    {"workers", HELP_TOPIC_DISTRIBUTED},
    {"max-workers", HELP_TOPIC_DISTRIBUTED},
    {"sync", HELP_TOPIC_DISTRIBUTED},
    {"staleness", HELP_TOPIC_DISTRIBUTED},
    {"push-every", HELP_TOPIC_DISTRIBUTED},
    {"fetch-every", HELP_TOPIC_DISTRIBUTED},
    {"server-optimizer", HELP_TOPIC_DISTRIBUTED},
    {"server-lr", HELP_TOPIC_DISTRIBUTED},
    {"hot-params", HELP_TOPIC_DISTRIBUTED},
    {"server-staleness-aware", HELP_TOPIC_DISTRIBUTED},
    {"server-dc-asgd", HELP_TOPIC_DISTRIBUTED},
    {"server-delay-adaptive", HELP_TOPIC_DISTRIBUTED},
    {"delay-worker", HELP_TOPIC_DISTRIBUTED},
    {"coordinator", HELP_TOPIC_DISTRIBUTED},
    {"run-id", HELP_TOPIC_DISTRIBUTED},
    {"bind-host", HELP_TOPIC_DISTRIBUTED},
    {"curve-server-key", HELP_TOPIC_DISTRIBUTED},
    {"curve-key", HELP_TOPIC_DISTRIBUTED},
    {"curve-allow", HELP_TOPIC_DISTRIBUTED},
    {"insecure", HELP_TOPIC_DISTRIBUTED},
    {"ring-ipc", HELP_TOPIC_DISTRIBUTED},
    {"ps-transport", HELP_TOPIC_DISTRIBUTED},
    {"collective", HELP_TOPIC_DISTRIBUTED},
    {"compress", HELP_TOPIC_DISTRIBUTED},
    {"error-feedback", HELP_TOPIC_DISTRIBUTED},
    {"hybrid-sparse", HELP_TOPIC_DISTRIBUTED},
    {"scaling", HELP_TOPIC_DISTRIBUTED},
    {"lr-scaling", HELP_TOPIC_DISTRIBUTED},
    {"worker-eval", HELP_TOPIC_DISTRIBUTED},
    {"eval-snapshot-mb", HELP_TOPIC_DISTRIBUTED},
    {"backup-workers", HELP_TOPIC_DISTRIBUTED},
    {"local-steps", HELP_TOPIC_DISTRIBUTED},
    {"id", HELP_TOPIC_DISTRIBUTED},
    {"join", HELP_TOPIC_DISTRIBUTED},
    {"host-coordinator", HELP_TOPIC_DISTRIBUTED},
    {"allow", HELP_TOPIC_DISTRIBUTED},
    // output: what is measured and written
    {"eval-every", HELP_TOPIC_OUTPUT},
    {"eval-every-s", HELP_TOPIC_OUTPUT},
    {"eval-limit", HELP_TOPIC_OUTPUT},
    {"target-acc", HELP_TOPIC_OUTPUT},
    {"target-rmse", HELP_TOPIC_OUTPUT},
    {"stop-at-target", HELP_TOPIC_OUTPUT},
    {"log", HELP_TOPIC_OUTPUT},
    {"summary", HELP_TOPIC_OUTPUT},
    {"trace", HELP_TOPIC_OUTPUT},
    {"quiet", HELP_TOPIC_OUTPUT},
    {"verbose", HELP_TOPIC_OUTPUT},
    {"save-model", HELP_TOPIC_OUTPUT},
    {"run-dir", HELP_TOPIC_OUTPUT},
    {"progress-every", HELP_TOPIC_OUTPUT},
    {"out", HELP_TOPIC_OUTPUT},
    {"probabilities", HELP_TOPIC_OUTPUT},
    // reliability: checkpoints, restarts, timeouts, replicas
    {"checkpoint-every", HELP_TOPIC_RELIABILITY},
    {"checkpoint-dir", HELP_TOPIC_RELIABILITY},
    {"resume", HELP_TOPIC_RELIABILITY},
    {"restart-workers", HELP_TOPIC_RELIABILITY},
    {"restart-servers", HELP_TOPIC_RELIABILITY},
    {"server-replicas", HELP_TOPIC_RELIABILITY},
    {"replica", HELP_TOPIC_RELIABILITY},
    {"replica-backup", HELP_TOPIC_RELIABILITY},
    {"timeout-ms", HELP_TOPIC_RELIABILITY},
    {"heartbeat-ms", HELP_TOPIC_RELIABILITY},
    {"worker-timeout", HELP_TOPIC_RELIABILITY},
    {"retry-ms", HELP_TOPIC_RELIABILITY},
    {"server-memory-allowance", HELP_TOPIC_RELIABILITY},
};

// Each command's most used flags, shown first.
static const struct {
    const char *command;
    const char *const flags[14];
} common[] = {
    {"asgd train",
     {"model", "data", "epochs", "batch", "lr", "threads", "mode", "test-frac", "save-model", "log", "config", NULL}},
    {"asgd launch",
     {"workers", "servers", "sync", "model", "data", "epochs", "batch", "lr", "threads", "run-dir", "save-model",
      "config", NULL}},
    {"asgd server", {"id", "coordinator", "servers", "workers", "sync", "model", "data", "run-dir", "config", NULL}},
    {"asgd worker", {"id", "coordinator", "servers", "workers", "sync", "model", "data", "run-dir", "config", NULL}},
    {"asgd predict", {"model-file", "data", "out", "probabilities", NULL}},
    {"asgd eval", {"model-file", "data", "split", NULL}},
    {"asgd gen", {"out", "seed", NULL}},
    {"asgd keygen", {"out", NULL}},
    {"asgd merge", {"save-model", NULL}},
};

static const struct {
    const char *command, *text;
} examples[] = {
    {"asgd train",
     "asgd train --model logreg --data my.svm --test-frac 0.2 --save-model m.bin   # train, keep the model\n"
     "asgd train --model mlp --data fashion-mnist --threads 2 --epochs 3 --log run.csv\n"
     "asgd train --model softmax --data table.csv --label-column species\n"
     "asgd train --model logreg --batch-size 32 --learning-rate 0.1 --max-iter 5   # names from PyTorch, sklearn\n"
     "asgd train --config run.json.config --epochs 5   # a run's flags again (--summary run.json wrote them), one "
     "changed\n"},
    {"asgd launch",
     "asgd launch --workers 4 --sync ssp --staleness 4 --model mlp --run-dir runs/ssp4\n"
     "asgd launch --workers 4 --sync allreduce --model logreg --data my.svm --save-model m.bin\n"
     "asgd launch --workers 3 --sync asp --worker-eval off --model logreg   # the global model's curve only\n"
     "asgd launch --config runs/ssp4/config --run-dir runs/again   # the same run again\n"
     "srun -n 4 asgd launch --servers 1 --model mlp   # one rank each: 1 server, 3 workers\n"},
    {"asgd server",
     "asgd server --id 0 --servers 1 --workers 2 --coordinator host0:29517 --host-coordinator tcp://0.0.0.0:29517 \\\n"
     "    --curve-server-key run.key --curve-allow workers.pub\n"},
    {"asgd worker",
     "asgd worker --id 1 --servers 1 --workers 2 --coordinator host0:29517 --curve-server-key run.pub\n"
     "asgd worker --join --id 2 --max-workers 3 --run-dir runs/x   # join a running launch\n"},
    {"asgd predict",
     "asgd predict --model-file m.bin --data new.svm --out predictions.txt   # labelled or not\n"
     "asgd predict --model-file m.bin --data new.svm --probabilities   # every class's probability\n"},
    {"asgd eval",
     "asgd eval --model-file m.bin --data my.svm --split test   # the rows train held out (the file records them)\n"
     "asgd eval --model-file runs/x/server-0.model,runs/x/server-1.model --data my.svm\n"},
    {"asgd gen", "asgd gen sparse --out rcv1like.svm --seed 7\nasgd gen ratings --out ratings.csv --users 500\n"},
    {"asgd keygen",
     "asgd keygen --out run   # run.key (secret) and run.pub\nasgd keygen --out w0 --allow workers.pub\n"},
    {"asgd merge", "asgd merge runs/launch-20261128-101500-4242   # after the launcher was stopped or killed\n"},
};

const char *help_group_title(int group) {
    return group == HELP_GROUP_COMMON                ? "common flags"
           : group >= 0 && group <= HELP_TOPIC_COUNT ? group_titles[group]
                                                     : "?";
}

help_topic_t help_topic_of(const char *name) {
    for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++)
        if (strcmp(topics[i].name, name) == 0) return topics[i].topic;
    return HELP_TOPIC_COUNT;
}

static const char *const *common_of(const char *command) {
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++)
        if (strcmp(common[i].command, command) == 0) return common[i].flags;
    return NULL;
}

static int is_common(const char *const *list, const char *name) {
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(list[i], name) == 0) return 1;
    return 0;
}

size_t help_group(const char *command, int group, const flag_spec_t *specs, size_t n, const flag_spec_t **out) {
    const char *const *list = common_of(command);
    size_t got = 0;
    if (group == HELP_GROUP_COMMON) {  // in the list's order
        for (size_t i = 0; list && list[i]; i++) {
            const flag_spec_t *f = flags_find(specs, n, list[i]);
            if (f) out[got++] = f;
        }
        return got;
    }
    for (size_t i = 0; i < n; i++)
        if (!is_common(list, specs[i].name) && (int)help_topic_of(specs[i].name) == group) out[got++] = &specs[i];
    return got;
}

const char *help_examples(const char *command) {
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++)
        if (strcmp(examples[i].command, command) == 0) return examples[i].text;
    return "";
}

// One flag: its form, help, choices and default, and its other names.
static void render_flag(FILE *out, const flag_spec_t *f) {
    char left[64], shown[96], also[160];
    if (f->type == FLAG_TYPE_BOOL)
        snprintf(left, sizeof left, "--%s", f->name);
    else
        snprintf(left, sizeof left, "--%s %s", f->name,
                 f->value_name                 ? f->value_name
                 : f->type == FLAG_TYPE_CHOICE ? "CHOICE"
                                               : "VALUE");
    int has_default = flags_default_text(f, shown, sizeof shown);
    fprintf(out, "  %-24s %s", left, f->help);
    if (f->type == FLAG_TYPE_CHOICE)
        fprintf(out, " (%s%s%s)", f->choices, has_default ? "; default " : "", has_default ? shown : "");
    else if (has_default)
        fprintf(out, " (default %s)", shown);
    if (flag_synonyms_of(f->name, also, sizeof also)) fprintf(out, " [also %s]", also);
    fputc('\n', out);
}

void help_render(FILE *out, const char *command, const char *usage, const char *description, const flag_spec_t *specs,
                 size_t n_specs) {
    fprintf(out, "usage: %s\n\n%s\n", usage, description);
    const flag_spec_t **group = malloc((n_specs ? n_specs : 1) * sizeof *group);
    for (int g = HELP_GROUP_FIRST; group && g <= HELP_GROUP_LAST; g++) {
        size_t n = help_group(command, g, specs, n_specs, group);
        if (n == 0 && g != HELP_GROUP_COMMON) continue;
        fprintf(out, "\n%s:\n", help_group_title(g));
        for (size_t i = 0; i < n; i++) render_flag(out, group[i]);
        if (g == HELP_GROUP_COMMON)
            fprintf(out, "  %-24s %s\n", "--help", "show this help (also asgd help COMMAND, and man asgd-COMMAND)");
    }
    free(group);
    const char *ex = help_examples(command);
    if (ex[0]) fprintf(out, "\nexamples:\n%s", ex);
}
