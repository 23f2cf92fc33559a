// The manual pages and bash completion the build renders (asgd help --man,
// asgd help --completion bash; docs/cli.md) against the program itself:
//   a) every flag `asgd train --help` lists (the models' own included) is in
//      the built asgd-train.1 and in the completion's train branch, and so for
//      asgd launch; the built files are what the program prints now;
//   b) the completion offers every model of the registry after --model;
//   c) asgd.1 names every command;
//   d) every command's help is grouped: common flags first, then the topics,
//      and no flag falls under none ("other"); asgd help CMD prints the same;
//      every page has EXAMPLES, ENVIRONMENT and EXIT STATUS;
//   e) a default is printed once, from the flag's table, and before any
//      flag given with --help takes effect (asgd train --epochs 7 --help
//      still says "(default 1)"); no help text writes one of its own;
//   f) synonyms: --batch-size and --learning_rate set --batch and --lr (in a
//      flag file too), and a flag given under two names is refused.
#include "engine/models/model_registry.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_cli_manual_XXXXXX";
#include "tests/support/launch_support.h"

static char *built(const char *path) {
    char *text = launch_slurp(path);
    if (!*text) {
        fprintf(stderr, "%s is missing or empty (built by the asgd_manual target)\n", path);
        exit(1);
    }
    return text;
}

// The program's output for args (caller frees); it must equal the built file.
static char *printed(const char *const *args) {
    CHECK(launch_run(args) == 0);
    char path[600];
    snprintf(path, sizeof path, "%s/stdout", dir);
    return launch_slurp(path);
}

// The completion's branch for command (a pointer into text).
static const char *branch(const char *text, const char *command) {
    char head[64];
    snprintf(head, sizeof head, "\n    %s)\n", command);
    const char *p = strstr(text, head);
    CHECK(p);
    return p;
}

static size_t check_command(const char *command, const char *completion) {
    char page[600];
    snprintf(page, sizeof page, "%s/asgd-%s.1", ASGD_MAN_DIR, command);
    char *man = built(page);
    const char *man_args[] = {"help", "--man", command, NULL};
    char *now = printed(man_args);
    CHECK(strcmp(man, now) == 0);
    free(now);
    const char *help_args[] = {command, "--help", NULL};
    char *help = printed(help_args);
    const char *b = branch(completion, command);
    const char *words = strstr(b, "COMPREPLY=($(compgen -W \"--");  // the branch's list of flags
    CHECK(words);
    const char *words_end = strchr(words + 26, '"');
    size_t flags = 0;
    for (const char *line = help; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        const char *p = line;
        while (*p == ' ') p++;
        if (strncmp(p, "--", 2) != 0) continue;
        size_t n = strcspn(p + 2, " \n");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)n, p + 2);
        char in_man[128], in_completion[128];
        snprintf(in_man, sizeof in_man, "\\fB\\-\\-");
        for (const char *c = name; *c; c++) {
            size_t at = strlen(in_man);
            snprintf(in_man + at, sizeof in_man - at, *c == '-' ? "\\-" : "%c", *c);
        }
        size_t at = strlen(in_man);
        snprintf(in_man + at, sizeof in_man - at, "\\fR");
        snprintf(in_completion, sizeof in_completion, "--%s ", name);
        if (!strstr(man, in_man)) fprintf(stderr, "asgd-%s.1 lacks --%s\n", command, name);
        CHECK(strstr(man, in_man));
        const char *hit = strstr(words, in_completion);
        if (!hit || hit > words_end) {
            snprintf(in_completion, sizeof in_completion, "--%s\"", name);
            hit = strstr(words, in_completion);
        }
        if (!hit || hit > words_end) fprintf(stderr, "the completion of %s lacks --%s\n", command, name);
        CHECK(hit && hit <= words_end);
        flags++;
    }
    printf("a) asgd %s: %zu flags of --help in asgd-%s.1 and the completion\n", command, flags, command);
    free(help);
    free(man);
    return flags;
}

// d) and e) for one command.
static void check_layout(const char *command) {
    const char *help_args[] = {command, "--help", NULL}, *via_help[] = {"help", command, NULL};
    char *help = printed(help_args), *again = printed(via_help);
    CHECK(strcmp(help, again) == 0);
    const char *common = strstr(help, "\ncommon flags:\n");
    CHECK(common);
    static const char *const topics[] = {"data", "model", "optimisation", "distributed", "output", "reliability"};
    const char *last = common;
    size_t topics_shown = 0;
    for (size_t t = 0; t < sizeof topics / sizeof topics[0]; t++) {
        char head[64];
        snprintf(head, sizeof head, "\n%s:\n", topics[t]);
        const char *at = strstr(help, head);
        if (!at) continue;
        CHECK(at > last);  // in order, after the common flags
        last = at;
        topics_shown++;
    }
    CHECK(!strstr(help, "\nother:\n"));  // every flag has a topic
    // One default per line, none in the help texts themselves.
    for (const char *line = help; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        const char *first = strstr(line, "default"), *nl = strchr(line, '\n');
        if (!first || (nl && first > nl)) continue;
        const char *second = strstr(first + 7, "default");
        if (second && (!nl || second < nl)) fprintf(stderr, "two defaults: %.*s\n", (int)(nl ? nl - line : 80), line);
        CHECK(!second || (nl && second > nl));
    }
    char page[600];
    snprintf(page, sizeof page, "%s/asgd-%s.1", ASGD_MAN_DIR, command);
    char *man = built(page);
    CHECK(strstr(man, ".SH EXAMPLES\n") && strstr(man, ".SH ENVIRONMENT\n") && strstr(man, ".SH EXIT STATUS\n"));
    CHECK(strstr(man, ".SS common flags\n"));
    printf(
        "d) asgd %s: common flags, then %zu topics; asgd help %s the same; the page has examples, environment, "
        "exit status\n",
        command, topics_shown, command);
    free(man), free(help), free(again);
}

static void check_defaults_and_synonyms(void) {
    const char *late[] = {"train", "--epochs", "7", "--help", NULL};
    char *help = printed(late);
    CHECK(strstr(help, "--epochs E               passes over the training set (default 1)"));
    CHECK(strstr(help, "(sgd|adagrad; default sgd)") && strstr(help, "--test-frac F") && strstr(help, "(default 0.1)"));
    free(help);
    printf("e) --help shows the table's defaults, before any flag given with it\n");
    const char *syn[] = {"train",
                         "--model",
                         "logreg",
                         "--data",
                         "gen:sparse:n=2000,dim=100,nnz=5",
                         "--batch-size",
                         "4",
                         "--learning_rate",
                         "0.125",
                         "--max-iter",
                         "2",
                         "--quiet",
                         NULL};
    char *out = printed(syn);
    CHECK(launch_field(out, "batch") == 4 && launch_field(out, "lr") == 0.125 && launch_field(out, "epochs") == 2);
    free(out);
    char cfg[600];
    snprintf(cfg, sizeof cfg, "%s/syn.config", dir);
    FILE *f = fopen(cfg, "w");
    CHECK(f && fputs("batch_size = 3\nweight-decay = 0.001\n", f) >= 0 && fclose(f) == 0);
    const char *from_file[] = {"train",    "--model", "logreg",  "--data", "gen:sparse:n=2000,dim=100,nnz=5",
                               "--config", cfg,       "--quiet", NULL};
    out = printed(from_file);
    CHECK(launch_field(out, "batch") == 3 && launch_field(out, "l2") == 0.001);
    free(out);
    const char *twice[] = {"train", "--epochs", "2", "--passes", "3", NULL};
    CHECK(launch_run(twice) == 2);
    char *e = launch_stderr();
    CHECK(strstr(e, "--epochs given twice (as --passes too)"));
    printf("f) synonyms on the command line and in a flag file; refused: %s", e);
    free(e);
}

int main(void) {
    CHECK(mkdtemp(dir));
    char *completion = built(ASGD_COMPLETION);
    const char *completion_args[] = {"help", "--completion", "bash", NULL};
    char *now = printed(completion_args);
    CHECK(strcmp(completion, now) == 0);
    free(now);
    CHECK(check_command("train", completion) > 40);
    CHECK(check_command("launch", completion) > 40);
    CHECK(strstr(completion, "--test-data ") && strstr(completion, "--config "));

    // b) the models after --model, from the registry.
    const char *train = branch(completion, "train");
    const char *model = strstr(train, "--model) COMPREPLY=($(compgen -W \"");
    CHECK(model);
    const char *end = strchr(model + strlen("--model) COMPREPLY=($(compgen -W \""), '"');
    for (size_t i = 0; i < model_registry_count(); i++) {
        const char *name = model_registry_at(i)->name;
        const char *hit = strstr(model, name);
        CHECK(hit && hit < end);
    }
    printf("b) --model completes to the %zu registered models\n", model_registry_count());

    // c) asgd.1 lists the commands.
    char page[600];
    snprintf(page, sizeof page, "%s/asgd.1", ASGD_MAN_DIR);
    char *main_page = built(page);
    const char *commands[] = {"train", "launch", "server", "worker", "merge", "predict", "eval", "gen", "keygen"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char ref[64];
        snprintf(ref, sizeof ref, "\\fBasgd\\-%s\\fR(1)", commands[i]);
        CHECK(strstr(main_page, ref));
    }
    free(main_page);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) check_layout(commands[i]);
    check_defaults_and_synonyms();
    free(completion);
    CHECK(test_remove_tree(dir) == 0);
    printf("test_cli_manual: ok\n");
    return 0;
}
