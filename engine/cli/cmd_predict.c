// asgd predict and asgd eval: a model saved by --save-model, applied to data.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/generate.h"
#include "datasets/csv.h"
#include "datasets/idx.h"
#include "datasets/libsvm.h"
#include "datasets/ratings_io.h"
#include "engine/cli/commands.h"
#include "engine/data/data_source.h"
#include "engine/core/flags.h"
#include "engine/core/json_writer.h"
#include "engine/run/data_fingerprint.h"
#include "engine/run/model_file.h"
#include "engine/models/model_registry.h"

#define ERR_LEN 768
#define MAX_PARTS 64
#define PREDICT_CHUNK 1024  // examples per model_predict call
#define EVAL_SLICES_MAX 64  // as the trainer's evaluation threads

enum { SPLIT_ALL, SPLIT_TEST, SPLIT_TRAIN };
static const char *const split_names[] = {"all", "test", "train"};

static const char predict_usage[] =
    "asgd predict --model-file M --data SPEC [--split all|test|train] [--probabilities] [--out FILE]";
static const char eval_usage[] = "asgd eval --model-file M --data SPEC [--split all|test|train] [--threads T]";
static const char data_description[] =
    "M is a file written by --save-model (or its parts, comma-separated: the servers' shards of a run,\n"
    "in order). --data takes what asgd train takes for that kind of model (asgd train --help lists each\n"
    "model's data): a libsvm or CSV file or gen:sparse for sparse features, a ratings file or gen:ratings\n"
    "for ratings, fashion-mnist for dense images. predict reads any label, or none (libsvm lines may\n"
    "start with their first index:value), and ignores features past the model's width (counted, said\n"
    "once on stderr); eval reads labels with the model's classes (one it was not trained on is refused).\n"
    "Predictions print the training data's labels.\n"
    "--split all (the default, except for fashion-mnist) uses every example; --split test the examples\n"
    "asgd train held out with the same --test-frac, --seed and --test-limit (fashion-mnist: the t10k\n"
    "files, its default); --split train the others. Ratings files map user and item ids to the\n"
    "model's rows in order of first appearance, as training did: use the training file (docs/model_file.md).";
static const char predict_more[] =
    "\nWrites one line per example, as the model's outputs go (asgd train --help): a classifier's\n"
    "predicted label and its probability, or for a margin classifier the label and the decision value\n"
    "w.x + b; a regression's predicted value (a rating). --probabilities: first a line \"labels L1 L2 ...\"\n"
    "(the model's, ascending), then per example the predicted label and each class's probability in\n"
    "that order (liblinear's -b 1, sklearn's predict_proba).";
static const char eval_more[] =
    "\nPrints the test loss and accuracy (or RMSE) as one JSON line: for the run's test data and\n"
    "--eval-limit, the numbers asgd train reported as final_test_loss and final_test_accuracy/rmse.";

typedef struct predict_args {
    const char *model_file, *data, *data_dir, *out;
    const char *label_column;
    int csv_header;
    int probabilities;  // predict --probabilities
    int split;
    double test_frac;
    uint64_t seed;
    size_t train_limit, test_limit, eval_limit, threads, batch;
} predict_args_t;

// Drops the features of d at or past `dim` (a model's width) and makes that
// its width. Returns how many it dropped.
static size_t sparse_drop_beyond(sparse_dataset_t *d, size_t dim) {
    size_t kept = 0, row_start = 0;
    for (size_t i = 0; i < d->n; i++) {
        size_t end = d->row_ptr[i + 1];
        for (size_t k = row_start; k < end; k++) {
            if (d->col[k] >= dim) continue;
            d->col[kept] = d->col[k];
            d->val[kept] = d->val[k];
            kept++;
        }
        row_start = end;
        d->row_ptr[i + 1] = kept;
    }
    size_t dropped = d->nnz - kept;
    d->nnz = kept;
    if (d->dim > dim) d->dim = dim;
    return dropped;
}

// Every example of a sparse --data SPEC (--split all) into d. predict: any
// label or none (every example then has the model's first class: labels are
// not read), eval: labels among the model's. Features past the model's width
// are left out and counted in *beyond.
static int load_sparse_all(const predict_args_t *p, const model_file_info_t *info, const data_spec_t *spec, int predict,
                           sparse_dataset_t *d, size_t *beyond, char *err, size_t err_len) {
    int rc;
    *beyond = 0;
    if (spec->source == DATA_SOURCE_CSV) {
        csv_options_t co = {p->label_column, p->csv_header, predict ? NULL : info->labels, predict ? 0 : info->classes,
                            predict ? NULL : model_file_label_text(info)};
        rc = csv_load(spec->path, &co, d, err, err_len);
    } else if (spec->source == DATA_SOURCE_FILE) {
        rc = predict ? libsvm_load_unlabelled(spec->path, info->dim, d, beyond, err, err_len)
                     : libsvm_load_mapped(spec->path, 0, info->labels, model_file_label_text(info), info->classes, d,
                                          err, err_len);
    } else {
        rc = gen_sparse(&spec->sparse, d, err, err_len);
    }
    if (rc != 0) return -1;
    *beyond += sparse_drop_beyond(d, info->dim);
    // A prediction's set takes the model's classes (and their names), whatever its own labels were.
    if (predict && spec->source != DATA_SOURCE_GEN_SPARSE &&
        (sparse_dataset_set_classes(d, info->labels, info->classes, err, err_len) != 0 ||
         sparse_dataset_set_label_text(d, model_file_label_text(info), err, err_len) != 0))
        return -1;
    return 0;
}

// The examples to predict or evaluate, kept in b; *set points at them.
// Sparse examples are read as load_sparse_all says (*beyond: the features
// past the model's width left out).
static int load_examples(const predict_args_t *p, const model_file_info_t *info, int predict, data_bundle_t *b,
                         const void **set, size_t *n, size_t *beyond, char *err, size_t err_len) {
    *beyond = 0;
    data_kind_t kind = model_file_data_kind(info);
    data_bundle_init(b);
    b->kind = kind;
    char data_name[400];
    snprintf(data_name, sizeof data_name, "--data %s", p->data);
    if (p->split != SPLIT_ALL) {
        data_options_t o = {p->data, p->data_dir, p->train_limit,  p->test_limit, p->test_frac,
                            p->seed, NULL,        p->label_column, p->csv_header};
        if (data_bundle_load(&o, kind, b, err, err_len) != 0) return -1;
        int test = p->split == SPLIT_TEST;
        if (kind == DATA_KIND_SPARSE &&
            sparse_dataset_remap(test ? &b->sparse_test : &b->sparse_train, info->labels, model_file_label_text(info),
                                 info->classes, data_name, err, err_len) != 0)
            return -1;
        *set = kind == DATA_KIND_DENSE    ? (const void *)(test ? &b->dense_test : &b->dense_train)
               : kind == DATA_KIND_SPARSE ? (const void *)(test ? &b->sparse_test : &b->sparse_train)
                                          : (const void *)(test ? &b->ratings_test : &b->ratings_train);
        *n = test ? data_bundle_num_test(b) : data_bundle_num_train(b);
        return 0;
    }
    data_spec_t spec;
    if (data_spec_parse(p->data, kind, p->seed, &spec, err, err_len) != 0) return -1;
    int rc;
    int file = spec.source == DATA_SOURCE_FILE;
    if (spec.source == DATA_SOURCE_FASHION_MNIST) {
        // Every example: the training files', then the test files'.
        dense_dataset_t *tr = &b->dense_train, *te = &b->dense_test, all;
        dense_dataset_init(&all);
        rc = fashion_mnist_load(p->data_dir, 1, 0, tr, err, err_len);
        if (rc == 0) rc = fashion_mnist_load(p->data_dir, 0, 0, te, err, err_len);
        if (rc == 0) rc = dense_dataset_alloc(&all, tr->n + te->n, tr->dim, tr->n_classes, err, err_len);
        if (rc == 0) {
            memcpy(all.x, tr->x, tr->n * tr->dim * sizeof *all.x);
            memcpy(all.x + tr->n * tr->dim, te->x, te->n * te->dim * sizeof *all.x);
            memcpy(all.y, tr->y, tr->n * sizeof *all.y);
            memcpy(all.y + tr->n, te->y, te->n * sizeof *all.y);
            dense_dataset_free(tr);
            dense_dataset_free(te);
            *te = all;
        }
        *set = te;
        *n = te->n;
    } else if (kind == DATA_KIND_SPARSE) {
        rc = load_sparse_all(p, info, &spec, predict, &b->sparse_test, beyond, err, err_len);
        *set = &b->sparse_test;
        *n = b->sparse_test.n;
    } else {
        rc = file ? ratings_load(spec.path, &b->ratings_test, err, err_len)
                  : gen_ratings(&spec.ratings, &b->ratings_test, err, err_len);
        *set = &b->ratings_test;
        *n = b->ratings_test.n;
    }
    return rc;
}

// The command's flags: the data's and the split's, then predict's or eval's own.
#define PREDICT_MAX_FLAGS 16
static size_t predict_flags(predict_args_t *p, int eval, flag_spec_t *flags) {
    const flag_spec_t common[] = {
        {"model-file", FLAG_TYPE_STRING, &p->model_file, "M",
         "the model (required): a --save-model file, or parts A,B,...", 0, 0, NULL, 0},
        {"data", FLAG_TYPE_STRING, &p->data, "SPEC",
         "the examples (models on dense images: fashion-mnist when not given)", 0, 0, NULL, 0},
        {"data-dir", FLAG_TYPE_STRING, &p->data_dir, "DIR", "directory with the Fashion-MNIST IDX files", 0, 0, NULL,
         0},
        {"label-column", FLAG_TYPE_STRING, &p->label_column, "N|NAME",
         "CSV data: the labels' column, by position from 0 or by header name (the first when not given)", 0, 0, NULL,
         0},
        {"csv-header", FLAG_TYPE_BOOL, &p->csv_header, NULL,
         "CSV data: the first line names the columns (else detected)", 0, 0, NULL, 0},
        {"split", FLAG_TYPE_CHOICE, &p->split, "S", "which examples (fashion-mnist: test when not given)", 0, 0,
         "all|test|train", 0},
        {"test-frac", FLAG_TYPE_DOUBLE, &p->test_frac, "F",
         "--split test|train: the training run's held-out fraction (the model file's record when not given)", 0.0001,
         0.9999, NULL, 0},
        {"seed", FLAG_TYPE_U64, &p->seed, "S",
         "the training run's seed: its split and generated data (the model file's record when not given)", 0, 0, NULL,
         0},
        {"train-limit", FLAG_TYPE_SIZE, &p->train_limit, "N",
         "--split train: the first N, 0 all (the model file's record when not given)", 0, 0, NULL, 0},
        {"test-limit", FLAG_TYPE_SIZE, &p->test_limit, "N",
         "--split test: the first N, 0 all (the model file's record when not given)", 0, 0, NULL, 0},
    };
    const flag_spec_t predict_own[] = {
        {"out", FLAG_TYPE_STRING, &p->out, "FILE", "write the predictions to FILE (stdout when not given)", 0, 0, NULL,
         0},
        {"probabilities", FLAG_TYPE_BOOL, &p->probabilities, NULL,
         "print each class's probability (logreg, embmlp, softmax, mlp)", 0, 0, NULL, 0},
    };
    const flag_spec_t eval_own[] = {
        {"eval-limit", FLAG_TYPE_SIZE, &p->eval_limit, "N", "the first N examples only (0: all)", 0, 0, NULL, 0},
        {"threads", FLAG_TYPE_SIZE, &p->threads, "T",
         "evaluate in T slices summed in order, as a T-thread asgd train does", 1, 1024, NULL, 0},
        {"batch", FLAG_TYPE_SIZE, &p->batch, "B",
         "the training run's --batch (dense models evaluate max(B, 256) rows at a time)", 1, 1 << 20, NULL, 0},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++) flags[n++] = common[i];
    const flag_spec_t *own = eval ? eval_own : predict_own;
    size_t n_own = eval ? sizeof eval_own / sizeof eval_own[0] : sizeof predict_own / sizeof predict_own[0];
    for (size_t i = 0; i < n_own; i++) flags[n++] = own[i];
    return n;
}

// The split flags not given take the model file's record (when it has one);
// one given that differs from it is said on stderr, with what follows.
// Returns how many were said.
static size_t apply_recorded_split(const char *command, predict_args_t *p, const model_file_split_t *r,
                                   const flag_spec_t *flags, size_t n_flags) {
    if (!r->recorded || r->test_data) return 0;
    size_t said = 0;
    struct {
        const char *name;
        int differs;
        char given[40], recorded[40];
    } f[4] = {{"test-frac", p->test_frac != r->test_frac, "", ""},
              {"seed", p->seed != r->seed, "", ""},
              {"train-limit", p->train_limit != r->train_limit, "", ""},
              {"test-limit", p->test_limit != r->test_limit, "", ""}};
    snprintf(f[0].given, sizeof f[0].given, "%g", p->test_frac);
    snprintf(f[0].recorded, sizeof f[0].recorded, "%g", r->test_frac);
    snprintf(f[1].given, sizeof f[1].given, "%llu", (unsigned long long)p->seed);
    snprintf(f[1].recorded, sizeof f[1].recorded, "%llu", (unsigned long long)r->seed);
    snprintf(f[2].given, sizeof f[2].given, "%zu", p->train_limit);
    snprintf(f[2].recorded, sizeof f[2].recorded, "%llu", (unsigned long long)r->train_limit);
    snprintf(f[3].given, sizeof f[3].given, "%zu", p->test_limit);
    snprintf(f[3].recorded, sizeof f[3].recorded, "%llu", (unsigned long long)r->test_limit);
    for (size_t i = 0; i < 4; i++) {
        if (!flags_find(flags, n_flags, f[i].name)->seen || !f[i].differs || p->split == SPLIT_ALL) continue;
        said++;
        fprintf(stderr,
                "%s: --%s %s is not the training run's (%s, recorded in the model file): --split %s takes "
                "other rows than the run's %s set\n",
                command, f[i].name, f[i].given, f[i].recorded, split_names[p->split], split_names[p->split]);
    }
    if (!flags_find(flags, n_flags, "test-frac")->seen) p->test_frac = r->test_frac;
    if (!flags_find(flags, n_flags, "seed")->seen) p->seed = r->seed;
    if (!flags_find(flags, n_flags, "train-limit")->seen) p->train_limit = (size_t)r->train_limit;
    if (!flags_find(flags, n_flags, "test-limit")->seen) p->test_limit = (size_t)r->test_limit;
    return said;
}

// After --split test|train loaded the data: whether it was the training run's
// (its training and test sets together: the fingerprints of the whole), and
// whether these rows are the run's (unless flags_said: the flags that differ
// were named already). Said on stderr when not.
static void check_split_data(const char *command, const predict_args_t *p, const model_file_split_t *r,
                             const data_bundle_t *b, size_t flags_said) {
    if (!r->recorded || p->split == SPLIT_ALL) return;
    uint64_t train = data_fingerprint(b, 0), test = data_fingerprint(b, 1);
    if (r->test_data) {
        fprintf(stderr,
                "%s: the model was trained with --test-data (a test file of its own, no split): --split %s "
                "is not its %s set; give that file as --data with --split all\n",
                command, split_names[p->split], split_names[p->split]);
    } else if (train + test != r->train_fingerprint + r->test_fingerprint) {
        fprintf(stderr,
                "%s: --data %s is not the data the model was trained on (its fingerprint differs from the "
                "model file's record): --split %s is no set of the training run\n",
                command, p->data, split_names[p->split]);
    } else if (!flags_said && (p->split == SPLIT_TEST ? test : train) !=
                                  (p->split == SPLIT_TEST ? r->test_fingerprint : r->train_fingerprint)) {
        fprintf(stderr,
                "%s: --split %s of --data %s holds other rows than the training run's %s set (the split "
                "flags differ from the model file's record)\n",
                command, split_names[p->split], p->data, split_names[p->split]);
    }
}

// Parses the flags, reads the model and the data, rebuilds the model over them.
// Returns -1 to go on, else the exit status.
static int prepare(const char *command, const char *usage, const char *more, int eval, int argc, char **argv,
                   predict_args_t *p, model_file_t *mf, data_bundle_t *data, model_file_model_t *mm, size_t *n) {
    memset(p, 0, sizeof *p);
    p->test_frac = 0.1;
    p->seed = 1;
    p->threads = 1;
    p->batch = 1;
    flag_spec_t flags[PREDICT_MAX_FLAGS];
    size_t n_flags = predict_flags(p, eval, flags);
    char description[2048], err[ERR_LEN] = "";
    snprintf(description, sizeof description, "%s%s", data_description, more);
    int parsed = flags_command(command, usage, description, flags, n_flags, argc, argv);
    if (parsed >= 0) return parsed;
    if (!p->model_file) {
        fprintf(stderr, "%s: --model-file M is required (a file written by --save-model)\n", command);
        return 2;
    }
    // Comma-separated parts, applied in order.
    char *list = strdup(p->model_file);
    const char *parts[MAX_PARTS];
    size_t n_parts = 0;
    for (char *save = NULL, *tok = list ? strtok_r(list, ",", &save) : NULL; tok && n_parts < MAX_PARTS;
         tok = strtok_r(NULL, ",", &save))
        parts[n_parts++] = tok;
    int rc = n_parts ? model_file_join(parts, n_parts, mf, err, sizeof err) : -1;
    if (n_parts == 0) snprintf(err, sizeof err, "--model-file '%s': no file named", p->model_file);
    free(list);
    if (rc != 0) {
        fprintf(stderr, "%s: --model-file %s\n", command, err);
        return 1;
    }
    const model_descriptor_t *md = mf->info.model;
    if (p->probabilities && (md->output == MODEL_OUTPUT_MARGIN || md->output == MODEL_OUTPUT_VALUE)) {
        fprintf(stderr, "%s: --probabilities: %s gives %s, not probabilities; drop the flag\n", command, md->name,
                md->output == MODEL_OUTPUT_MARGIN ? "decision values (w.x + b)" : "values (ratings)");
        return 2;
    }
    data_kind_t kind = model_file_data_kind(&mf->info);
    if (!p->data) {
        if (kind != DATA_KIND_DENSE) {
            fprintf(stderr, "%s: --data: the model is %s; name its data (a %s file or %s)\n", command, md->name,
                    kind == DATA_KIND_SPARSE ? "libsvm or CSV" : "ratings",
                    kind == DATA_KIND_SPARSE ? "gen:sparse" : "gen:ratings");
            return 2;
        }
        p->data = "fashion-mnist";
    }
    if (!flags_find(flags, n_flags, "split")->seen && kind == DATA_KIND_DENSE) p->split = SPLIT_TEST;
    size_t flags_said = apply_recorded_split(command, p, &mf->info.split, flags, n_flags);
    const void *set = NULL;
    size_t beyond = 0;
    if (load_examples(p, &mf->info, !eval, data, &set, n, &beyond, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", command, err);
        return 1;
    }
    check_split_data(command, p, &mf->info.split, data, flags_said);
    if (beyond)
        fprintf(stderr, "%s: --data %s: %zu feature value%s past the model's width (%llu features) ignored\n", command,
                p->data, beyond, beyond == 1 ? "" : "s", (unsigned long long)mf->info.dim);
    char data_name[400];
    snprintf(data_name, sizeof data_name, "--data %s", p->data);
    if (model_file_instantiate(mf, set, data_name, mm, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", command, err);
        return 1;
    }
    return -1;
}

// --probabilities: the line before the predictions, the model's labels in order.
static void write_probability_header(FILE *out, const model_file_info_t *info) {
    char buf[16];
    fputs("labels", out);
    for (uint64_t k = 0; k < info->classes; k++) fprintf(out, " %s", model_file_label(info, k, buf));
    fputc('\n', out);
}

// One example's prediction from the model's outputs o: the label and its
// probability, or (probabilities) the label and every class's.
static void write_prediction(FILE *out, const model_file_info_t *info, const double *o, int probabilities) {
    char buf[16];
    switch (info->model->output) {
        case MODEL_OUTPUT_VALUE:
            fprintf(out, "%.9g\n", o[0]);
            return;
        case MODEL_OUTPUT_MARGIN:
            fprintf(out, "%s %.9g\n", model_file_label(info, o[0] >= 0.0, buf), o[0]);
            return;
        case MODEL_OUTPUT_LOGISTIC: {
            double p1 = 1.0 / (1.0 + exp(-o[0]));
            const char *label = model_file_label(info, o[0] >= 0.0, buf);
            if (probabilities)
                fprintf(out, "%s %.6f %.6f\n", label, 1.0 - p1, p1);
            else
                fprintf(out, "%s %.6f\n", label, o[0] >= 0.0 ? p1 : 1.0 - p1);
            return;
        }
        case MODEL_OUTPUT_CLASS_LOGITS: {
            size_t best = 0;
            for (size_t k = 1; k < info->classes; k++)
                if (o[k] > o[best]) best = k;
            double sum = 0.0;
            for (size_t k = 0; k < info->classes; k++) sum += exp(o[k] - o[best]);
            fputs(model_file_label(info, best, buf), out);
            if (!probabilities) fprintf(out, " %.6f", 1.0 / sum);
            for (size_t k = 0; probabilities && k < info->classes; k++)
                fprintf(out, " %.6f", exp(o[k] - o[best]) / sum);
            fputc('\n', out);
        }
    }
}

int cmd_predict(int argc, char **argv) {
    predict_args_t p;
    model_file_t mf;
    data_bundle_t data;
    model_file_model_t mm;
    model_file_init(&mf);
    data_bundle_init(&data);
    memset(&mm, 0, sizeof mm);
    data_bundle_init(&mm.shape);
    size_t n = 0;
    int status = prepare("asgd predict", predict_usage, predict_more, 0, argc, argv, &p, &mf, &data, &mm, &n);
    char err[ERR_LEN] = "";
    FILE *out = stdout;
    model_ws_t *ws = NULL;
    double *o = NULL;
    if (status >= 0) goto done;
    status = 1;
    size_t outputs = model_num_outputs(mm.model);
    if (!(ws = model_ws_new(mm.model, 1, err, sizeof err))) goto fail;
    if (!(o = malloc(PREDICT_CHUNK * outputs * sizeof *o))) {
        snprintf(err, sizeof err, "out of memory for the predictions");
        goto fail;
    }
    if (p.out && !(out = fopen(p.out, "w"))) {
        snprintf(err, sizeof err, "--out %s: cannot open for writing: %s", p.out, strerror(errno));
        out = stdout;
        goto fail;
    }
    if (p.probabilities) write_probability_header(out, &mf.info);
    for (size_t start = 0; start < n; start += PREDICT_CHUNK) {
        size_t end = n - start < PREDICT_CHUNK ? n : start + PREDICT_CHUNK;
        model_predict(mm.model, mm.w, start, end, ws, o);
        for (size_t i = 0; i < end - start; i++) write_prediction(out, &mf.info, o + i * outputs, p.probabilities);
    }
    if (ferror(out) || (out != stdout ? fclose(out) : fflush(out)) != 0) {
        out = stdout;
        snprintf(err, sizeof err, "%s%s: writing failed: %s", p.out ? "--out " : "", p.out ? p.out : "stdout",
                 strerror(errno));
        goto fail;
    }
    out = stdout;
    status = 0;
fail:
    if (status != 0) fprintf(stderr, "asgd predict: %s\n", err);
    if (out != stdout) fclose(out);
done:
    free(o);
    model_ws_destroy(&ws);
    model_file_model_free(&mm);
    data_bundle_free(&data);
    model_file_free(&mf);
    return status;
}

int cmd_eval(int argc, char **argv) {
    predict_args_t p;
    model_file_t mf;
    data_bundle_t data;
    model_file_model_t mm;
    model_file_init(&mf);
    data_bundle_init(&data);
    memset(&mm, 0, sizeof mm);
    data_bundle_init(&mm.shape);
    size_t n = 0;
    int status = prepare("asgd eval", eval_usage, eval_more, 1, argc, argv, &p, &mf, &data, &mm, &n);
    char err[ERR_LEN] = "";
    model_ws_t *ws = NULL;
    if (status >= 0) goto done;
    status = 1;
    if (!(ws = model_ws_new(mm.model, p.batch, err, sizeof err))) {
        fprintf(stderr, "asgd eval: %s\n", err);
        goto done;
    }
    size_t limit = p.eval_limit && p.eval_limit < n ? p.eval_limit : n;
    // The trainer's slices, summed in the same order: the same numbers.
    size_t slices = p.threads < EVAL_SLICES_MAX ? p.threads : EVAL_SLICES_MAX;
    eval_sums_t sums = {0.0, 0.0, 0};
    for (size_t i = 0; i < slices; i++) {
        eval_sums_t s = {0.0, 0.0, 0};
        model_evaluate(mm.model, mm.w, model_eval_slice(limit, i, slices), model_eval_slice(limit, i + 1, slices), ws,
                       &s);
        sums.loss_sum += s.loss_sum;
        sums.metric_sum += s.metric_sum;
        sums.count += s.count;
    }
    metric_kind_t metric = model_metric(mm.model);
    char desc[160];
    model_describe(mm.model, desc, sizeof desc);
    json_writer_t j;
    json_begin(&j, stdout);
    json_string(&j, "asgd", ASGD_VERSION);
    json_string(&j, "command", "eval");
    json_string(&j, "model", mf.info.model->name);
    json_string(&j, "model_detail", desc);
    json_uint(&j, "params", mf.info.n_params);
    json_string(&j, "model_file", p.model_file);
    json_string(&j, "data", p.data);
    json_string(&j, "split", split_names[p.split]);
    json_uint(&j, "examples", sums.count);
    json_number(&j, "test_loss", sums.count ? sums.loss_sum / (double)sums.count : NAN);
    json_number(&j, metric == METRIC_KIND_ACCURACY ? "test_accuracy" : "test_rmse", eval_metric_value(metric, &sums));
    json_end(&j);
    fputc('\n', stdout);
    status = fflush(stdout) == 0 ? 0 : 1;
done:
    model_ws_destroy(&ws);
    model_file_model_free(&mm);
    data_bundle_free(&data);
    model_file_free(&mf);
    return status;
}
