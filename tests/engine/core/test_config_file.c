// Flag files (--config FILE, engine/core/flags_file.h; docs/cli.md):
//   a) flags_file_merge on a table: values, booleans alone or true/false,
//      comments, quotes; the command line overrides the file; unknown names,
//      repeats, missing and bad values are refused naming FILE:LINE;
//   b) flags_file_format writes what was given so that it reads back to the
//      same values (a string with '#' and blanks quoted, doubles exact);
//   c) asgd train --config: the flags apply, the command line wins, a bad line
//      is refused as a usage error naming the file and line; SUMMARY.config is
//      written;
//   d) asgd launch --run-dir A (1 server, 2 workers, asp) writes A/config;
//      asgd launch --config A/config --run-dir B repeats the run: the two
//      summary.json "config" objects are equal.
#include <math.h>
#include <sys/stat.h>

#include "engine/core/flags_file.h"
#include "tests/support/test_support.h"

static char dir[] = "/tmp/asgd_config_file_XXXXXX";
#include "tests/support/launch_support.h"

// dir/name (rotating buffers: a few at a time).
static const char *in_dir(const char *name) {
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static const char *write_text(const char *name, const char *text) {
    test_write_file(dir, name, text, strlen(text));
    return in_dir(name);
}

typedef struct opts {
    size_t epochs;
    double lr;
    int pin, sync;
    const char *log;
    uint64_t seed;
    const char *config;  // --config's target lives as long as the others
} opts_t;

static size_t table(opts_t *o, flag_spec_t *s) {
    memset(o, 0, sizeof *o);
    flag_spec_t t[] = {
        {"epochs", FLAG_TYPE_SIZE, &o->epochs, "E", "", 1, 100, NULL, 0},
        {"lr", FLAG_TYPE_DOUBLE, &o->lr, "RATE", "", 0, 0, NULL, 0},
        {"pin", FLAG_TYPE_BOOL, &o->pin, NULL, "", 0, 0, NULL, 0},
        {"sync", FLAG_TYPE_CHOICE, &o->sync, "S", "", 0, 0, "bsp|ssp|asp", 0},
        {"log", FLAG_TYPE_STRING, &o->log, "FILE", "", 0, 0, NULL, 0},
        {"seed", FLAG_TYPE_U64, &o->seed, "S", "", 0, 0, NULL, 0},
        {"config", FLAG_TYPE_STRING, &o->config, "FILE", "", 0, 0, NULL, 0},
    };
    memcpy(s, t, sizeof t);
    return sizeof t / sizeof t[0];
}

// Parses argv (with a flag file) into o; returns 0, or -1 with err.
static int parse(opts_t *o, flag_spec_t *specs, flags_argv_t *words, int argc, char **argv, char *err, size_t len) {
    size_t n = table(o, specs);
    if (flags_file_merge("t", "config", specs, n, argc, argv, words, err, len) != 0) return -1;
    return flags_parse("t", specs, n, words->argc, words->argv, err, len) == FLAGS_STATUS_OK ? 0 : -1;
}

static void expect_refused(const char *text, const char *needle) {
    const char *path = write_text("bad.cfg", text);
    char *argv[] = {"--config", (char *)path};
    opts_t o;
    flag_spec_t specs[8];
    flags_argv_t w;
    char err[512] = "";
    CHECK(parse(&o, specs, &w, 2, argv, err, sizeof err) != 0);
    printf("refused: %s\n", err);
    char where[600];
    snprintf(where, sizeof where, "%s:%s", path, needle);
    CHECK(strstr(err, where));
    for (const char *c = err; *c; c++) CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);  // no byte of the file echoed
}

static void part_parse(void) {
    const char *path = write_text("a.cfg",
                                  "# a run\n\n  epochs = 7   # seven\nlr=0.25\npin\nsync = asp\n"
                                  "log = \"my # log.csv \"\nseed = 18446744073709551615\n");
    char *argv[] = {"--config", (char *)path, "--epochs", "9"};
    opts_t o;
    flag_spec_t specs[8];
    flags_argv_t w;
    char err[512] = "";
    CHECK_OK(parse(&o, specs, &w, 4, argv, err, sizeof err), err);
    CHECK(o.epochs == 9);  // the command line wins
    CHECK(o.lr == 0.25 && o.pin == 1 && o.sync == 2 && strcmp(o.log, "my # log.csv ") == 0);
    CHECK(o.seed == UINT64_MAX);
    // b) written back and read again: the same values.
    char *text = flags_file_format(specs, 7, (const char *const[]){"config", NULL}, err, sizeof err);
    CHECK(text);
    printf("written:\n%s", text);
    CHECK(!strstr(text, "config"));
    const char *again = write_text("b.cfg", text);
    free(text);
    flags_argv_free(&w);
    char *argv2[] = {"--config=" /* joined below */};
    char joined[600];
    snprintf(joined, sizeof joined, "--config=%s", again);
    argv2[0] = joined;
    opts_t o2;
    CHECK_OK(parse(&o2, specs, &w, 1, argv2, err, sizeof err), err);
    CHECK(o2.epochs == 9 && o2.lr == 0.25 && o2.pin == 1 && o2.sync == 2 && strcmp(o2.log, "my # log.csv ") == 0 &&
          o2.seed == UINT64_MAX);
    flags_argv_free(&w);
    // pin = false, and a false boolean written back as such.
    path = write_text("c.cfg", "pin = false\nlr = 0.1\n");
    char *argv3[] = {"--config", (char *)path, "--pin"};
    CHECK_OK(parse(&o, specs, &w, 3, argv3, err, sizeof err), err);
    CHECK(o.pin == 1 && o.lr == 0.1);
    flags_argv_free(&w);
    char *argv4[] = {"--config", (char *)path};
    CHECK_OK(parse(&o, specs, &w, 2, argv4, err, sizeof err), err);
    CHECK(o.pin == 0);
    text = flags_file_format(specs, 7, NULL, err, sizeof err);
    CHECK(strstr(text, "pin = false\n") && strstr(text, "lr = 0.10000000000000001\n") == NULL &&
          strstr(text, "lr = 0.1\n"));
    free(text);
    flags_argv_free(&w);

    expect_refused("epochs = 2\nnope = 1\n", "2: unknown flag 'nope'");
    expect_refused("epochs = 2\n\nepochs = 3\n", "3: epochs given twice (first on line 1)");
    expect_refused("lr\n", "1: lr needs a value");
    expect_refused("# x\nepochs = 0\n", "2: --epochs: 0 is out of range");
    expect_refused("sync = fast\n", "1: --sync: 'fast' is not one of: bsp, ssp, asp");
    expect_refused("pin = maybe\n", "1: --pin: 'maybe' is not true or false");
    expect_refused("--lr = 1\n", "1: '--lr': expected a flag's name without dashes");
    expect_refused("config = x\n", "1: config: a flag file cannot name another");
    expect_refused("log = \"open\n", "1: a quoted value has no closing");
    expect_refused("lr 0.5\n", "1: expected 'name = value'");
    // A binary file is refused by its line, its bytes never echoed.
    const char binary[] = "epochs = 2\n\x1f\x8b\x08\x00\xff\xfe\n";
    expect_refused(binary, "2: byte 0x1f: not a text file");
    // A FIFO is refused at once (without a writer, opening or reading it would block).
    const char *fifo = in_dir("fifo.cfg");
    CHECK(mkfifo(fifo, 0600) == 0);
    char *argv5[] = {"--config", (char *)fifo};
    opts_t o5;
    flag_spec_t specs5[8];
    flags_argv_t w5;
    CHECK(parse(&o5, specs5, &w5, 2, argv5, err, sizeof err) != 0);
    printf("refused: %s\n", err);
    CHECK(strstr(err, "not a regular file (a FIFO)"));
}

static void part_train(void) {
    FILE *f = fopen(in_dir("train.svm"), "w");
    for (int i = 0; i < 200; i++) fprintf(f, "%s %d:1 %d:1\n", i % 2 ? "+1" : "-1", 1 + i % 2, 3 + i % 5);
    fclose(f);
    char text[1200];
    snprintf(text, sizeof text, "model = logreg\ndata = %s\nepochs = 4\nlr = 0.3\nquiet\n", in_dir("train.svm"));
    const char *cfg = write_text("train.cfg", text);
    const char *summary = in_dir("train.json");
    const char *args[] = {"train", "--config", cfg, "--epochs", "2", "--summary", summary, NULL};
    CHECK(launch_run(args) == 0);
    char *s = launch_slurp(summary);
    CHECK(strstr(s, "\"epochs\":2,") && launch_field(s, "lr") == 0.3 && strstr(s, "\"model\":\"logreg\""));
    free(s);
    char written[600];
    snprintf(written, sizeof written, "%s.config", summary);
    char *w = launch_slurp(written);
    printf("train.json.config:\n%s", w);
    CHECK(strstr(w, "model = logreg\n") && strstr(w, "epochs = 2\n") &&
          strstr(w, "lr = 0.29999999999999999\n") == NULL && strstr(w, "lr = 0.3\n") && strstr(w, "quiet\n") &&
          !strstr(w, "config ="));
    free(w);
    // The written file repeats the run.
    const char *again[] = {"train", "--config", written, NULL};
    CHECK(launch_run(again) == 0);
    s = launch_slurp(summary);
    CHECK(strstr(s, "\"epochs\":2,") && launch_field(s, "lr") == 0.3);
    free(s);
    const char *bad_cfg = write_text("bad_train.cfg", "model = logreg\nepochs = many\n");
    const char *bad[] = {"train", "--config", bad_cfg, NULL};
    char where[600];
    snprintf(where, sizeof where, "%s:2: --epochs: 'many'", bad_cfg);
    launch_expect_refusal(bad, where);
}

// The text of the "config" object in a summary (caller frees).
static char *config_object(const char *json) {
    const char *p = strstr(json, "\"config\":{");
    CHECK(p);
    const char *q = p + strlen("\"config\":");
    int depth = 0;
    const char *e = q;
    for (; *e; e++) {
        if (*e == '{') depth++;
        if (*e == '}' && --depth == 0) break;
    }
    CHECK(*e == '}');
    size_t n = (size_t)(e - q) + 1;
    char *out = malloc(n + 1);
    memcpy(out, q, n);
    out[n] = '\0';
    return out;
}

static void part_launch(void) {
    const char *a[] = {"launch",  "--servers", "1",      "--workers",         "2",         "--sync",    "asp",
                       "--model", "logreg",    "--data", in_dir("train.svm"), "--epochs",  "2",         "--lr",
                       "0.2",     "--seed",    "5",      "--quiet",           "--run-dir", in_dir("A"), NULL};
    CHECK(launch_run(a) == 0);
    char *cfg = launch_file("A", "config");
    printf("A/config:\n%s", cfg);
    CHECK(strstr(cfg, "servers = 1\n") && strstr(cfg, "workers = 2\n") && strstr(cfg, "sync = asp\n") &&
          !strstr(cfg, "run-dir"));
    free(cfg);
    char from[600];
    snprintf(from, sizeof from, "%s/config", in_dir("A"));
    const char *b[] = {"launch", "--config", from, "--run-dir", in_dir("B"), NULL};
    CHECK(launch_run(b) == 0);
    char *sa = launch_file("A", "summary.json"), *sb = launch_file("B", "summary.json");
    char *ca = config_object(sa), *cb = config_object(sb);
    printf("A config: %s\nB config: %s\n", ca, cb);
    CHECK(strcmp(ca, cb) == 0);
    CHECK(strstr(ca, "\"sync\":\"asp\"") && strstr(ca, "\"seed\":5"));
    free(ca), free(cb), free(sa), free(sb);
}

int main(void) {
    CHECK(mkdtemp(dir));
    part_parse();
    part_train();
    part_launch();
    CHECK(test_remove_tree(dir) == 0);
    printf("test_config_file: ok\n");
    return 0;
}
