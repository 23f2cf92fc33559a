// The manual pages and bash completion the build renders (asgd help --man,
// asgd help --completion bash; docs/cli.md) against the program itself:
//   a) every flag `asgd train --help` lists (the models' own included) is in
//      the built asgd-train.1 and in the completion's train branch, and so for
//      asgd launch; the built files are what the program prints now;
//   b) the completion offers every model of the registry after --model;
//   c) asgd.1 names every command.
#include "engine/models/model_registry.h"  // defines: model_registry_at, model_registry_count
#include "test_support.h"

static char dir[] = "/tmp/asgd_cli_manual_XXXXXX";
#include "launch_support.h"

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
    const char *commands[] = {"train", "launch", "server", "worker", "predict", "eval", "gen", "keygen"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char ref[64];
        snprintf(ref, sizeof ref, "\\fBasgd\\-%s\\fR(1)", commands[i]);
        CHECK(strstr(main_page, ref));
    }
    free(main_page);
    free(completion);
    CHECK(test_remove_tree(dir) == 0);
    printf("test_cli_manual: ok\n");
    return 0;
}
