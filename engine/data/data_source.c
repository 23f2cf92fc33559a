#include "engine/data/data_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/generate.h"
#include "datasets/csv.h"
#include "datasets/data_input.h"
#include "datasets/idx.h"
#include "datasets/libsvm.h"
#include "datasets/ratings_io.h"
#include "engine/data/train_test_split.h"
#include "engine/core/flags.h"

static const char *const kind_names[] = {"dense image", "sparse (libsvm)", "ratings"};

void data_bundle_init(data_bundle_t *b) {
    memset(b, 0, sizeof *b);
    dense_dataset_init(&b->dense_train);
    dense_dataset_init(&b->dense_test);
    sparse_dataset_init(&b->sparse_train);
    sparse_dataset_init(&b->sparse_test);
    ratings_init(&b->ratings_train);
    ratings_init(&b->ratings_test);
}

void data_bundle_free(data_bundle_t *b) {
    dense_dataset_free(&b->dense_train);
    dense_dataset_free(&b->dense_test);
    sparse_dataset_free(&b->sparse_train);
    sparse_dataset_free(&b->sparse_test);
    ratings_free(&b->ratings_train);
    ratings_free(&b->ratings_test);
}

size_t data_bundle_num_train(const data_bundle_t *b) {
    return b->kind == DATA_KIND_DENSE    ? b->dense_train.n
           : b->kind == DATA_KIND_SPARSE ? b->sparse_train.n
                                         : b->ratings_train.n;
}

size_t data_bundle_num_test(const data_bundle_t *b) {
    return b->kind == DATA_KIND_DENSE    ? b->dense_test.n
           : b->kind == DATA_KIND_SPARSE ? b->sparse_test.n
                                         : b->ratings_test.n;
}

// ---- generator parameters inside the spec ----

static int sparse_gen_pair(const char *key, const char *value, void *ctx, char *err, size_t err_len) {
    sparse_gen_config_t *c = ctx;
    char what[64];
    snprintf(what, sizeof what, "--data gen:sparse: %s", key);
    if (strcmp(key, "n") == 0) return flags_parse_size(what, value, &c->n_examples, err, err_len);
    if (strcmp(key, "dim") == 0) return flags_parse_size(what, value, &c->dim, err, err_len);
    if (strcmp(key, "nnz") == 0) return flags_parse_size(what, value, &c->nnz_per_example, err, err_len);
    if (strcmp(key, "zipf") == 0) return flags_parse_double(what, value, &c->zipf_exponent, err, err_len);
    if (strcmp(key, "noise") == 0) return flags_parse_double(what, value, &c->label_noise, err, err_len);
    if (strcmp(key, "seed") == 0) {
        size_t s;
        if (flags_parse_size(what, value, &s, err, err_len) != 0) return -1;
        c->seed = s;
        return 0;
    }
    snprintf(err, err_len, "--data gen:sparse: unknown parameter '%s' (n, dim, nnz, zipf, noise, seed)", key);
    return -1;
}

static int ratings_gen_pair(const char *key, const char *value, void *ctx, char *err, size_t err_len) {
    ratings_gen_config_t *c = ctx;
    char what[64];
    snprintf(what, sizeof what, "--data gen:ratings: %s", key);
    if (strcmp(key, "users") == 0) return flags_parse_size(what, value, &c->n_users, err, err_len);
    if (strcmp(key, "items") == 0) return flags_parse_size(what, value, &c->n_items, err, err_len);
    if (strcmp(key, "rank") == 0) return flags_parse_size(what, value, &c->rank, err, err_len);
    if (strcmp(key, "n") == 0) return flags_parse_size(what, value, &c->n_ratings, err, err_len);
    if (strcmp(key, "noise") == 0) return flags_parse_double(what, value, &c->noise_std, err, err_len);
    if (strcmp(key, "seed") == 0) {
        size_t s;
        if (flags_parse_size(what, value, &s, err, err_len) != 0) return -1;
        c->seed = s;
        return 0;
    }
    snprintf(err, err_len, "--data gen:ratings: unknown parameter '%s' (users, items, rank, n, noise, seed)", key);
    return -1;
}

// The parameters after "gen:NAME" ("" or ":k=v,...").
static const char *gen_params(const char *spec, const char *prefix) {
    const char *rest = spec + strlen(prefix);
    return *rest == ':' ? rest + 1 : rest;
}

// ---- splitting and limiting ----

// A seeded train/test split whose index lists are cut to the requested limits
// (the first `limit` indices of each part; 0 keeps all).
static int split_limited(size_t n, const data_options_t *o, uint32_t **train_idx, size_t *n_train, uint32_t **test_idx,
                         size_t *n_test, char *err, size_t err_len) {
    if (split_train_test(n, o->test_fraction, o->seed, train_idx, n_train, test_idx, n_test, err, err_len) != 0)
        return -1;
    if (*n_test == 0 || *n_train == 0) {
        snprintf(err, err_len, "--test-frac %g of %zu examples leaves no %s example; %s", o->test_fraction, n,
                 *n_test == 0 ? "test" : "training",
                 *n_test == 0 ? "raise --test-frac or name a test set with --test-data FILE" : "lower --test-frac");
        free(*train_idx);
        free(*test_idx);
        *train_idx = *test_idx = NULL;
        return -1;
    }
    if (o->train_limit && o->train_limit < *n_train) *n_train = o->train_limit;
    if (o->test_limit && o->test_limit < *n_test) *n_test = o->test_limit;
    return 0;
}

static int split_sparse(const sparse_dataset_t *all, const data_options_t *o, data_bundle_t *b, char *err,
                        size_t err_len) {
    uint32_t *train_idx = NULL, *test_idx = NULL;
    size_t n_train = 0, n_test = 0;
    if (split_limited(all->n, o, &train_idx, &n_train, &test_idx, &n_test, err, err_len) != 0) return -1;
    int rc = sparse_dataset_subset(all, train_idx, n_train, &b->sparse_train, err, err_len);
    if (rc == 0) rc = sparse_dataset_subset(all, test_idx, n_test, &b->sparse_test, err, err_len);
    free(train_idx);
    free(test_idx);
    return rc;
}

static int split_ratings(const ratings_t *all, const data_options_t *o, data_bundle_t *b, char *err, size_t err_len) {
    uint32_t *train_idx = NULL, *test_idx = NULL;
    size_t n_train = 0, n_test = 0;
    if (split_limited(all->n, o, &train_idx, &n_train, &test_idx, &n_test, err, err_len) != 0) return -1;
    int rc = ratings_subset(all, train_idx, n_train, &b->ratings_train, err, err_len);
    if (rc == 0) rc = ratings_subset(all, test_idx, n_test, &b->ratings_test, err, err_len);
    free(train_idx);
    free(test_idx);
    return rc;
}

// The first `limit` examples of a set used whole (0: all).
static int first_indices(size_t n, size_t limit, uint32_t **idx, size_t *count, char *err, size_t err_len) {
    *count = limit && limit < n ? limit : n;
    if (!(*idx = malloc((*count ? *count : 1) * sizeof **idx))) {
        snprintf(err, err_len, "out of memory for %zu example indices", *count);
        return -1;
    }
    for (size_t i = 0; i < *count; i++) (*idx)[i] = (uint32_t)i;
    return 0;
}

static int limit_sparse(sparse_dataset_t *set, size_t limit, char *err, size_t err_len) {
    if (!limit || limit >= set->n) return 0;
    uint32_t *idx;
    size_t n;
    sparse_dataset_t part;
    sparse_dataset_init(&part);
    if (first_indices(set->n, limit, &idx, &n, err, err_len) != 0) return -1;
    int rc = sparse_dataset_subset(set, idx, n, &part, err, err_len);
    free(idx);
    if (rc != 0) return -1;
    sparse_dataset_free(set);
    *set = part;
    return 0;
}

static int limit_ratings(ratings_t *set, size_t limit, char *err, size_t err_len) {
    if (!limit || limit >= set->n) return 0;
    uint32_t *idx;
    size_t n;
    ratings_t part;
    ratings_init(&part);
    if (first_indices(set->n, limit, &idx, &n, err, err_len) != 0) return -1;
    int rc = ratings_subset(set, idx, n, &part, err, err_len);
    free(idx);
    if (rc != 0) return -1;
    ratings_free(set);
    *set = part;
    return 0;
}

// "--test-data " before a reader's message (which names the file and line).
static void prefix_test_data(char *err, size_t err_len) {
    static const char prefix[] = "--test-data ";
    size_t len = strlen(err), plen = sizeof prefix - 1;
    if (len + plen + 1 > err_len) len = err_len - plen - 1;
    memmove(err + plen, err, len);
    err[plen + len] = '\0';
    memcpy(err, prefix, plen);
}

data_kind_t data_spec_kind(const char *spec, data_kind_t model_kind, int also_sparse) {
    if (model_kind == DATA_KIND_DENSE && also_sparse && spec && strcmp(spec, "fashion-mnist") != 0)
        return DATA_KIND_SPARSE;
    return model_kind;
}

// A CSV file: "csv:PATH", or a name ending .csv or .tsv (then optionally .gz).
static const char *csv_path(const char *spec) {
    if (strncmp(spec, "csv:", 4) == 0) return spec + 4;
    size_t n = strlen(spec);
    if (n > 3 && strcmp(spec + n - 3, ".gz") == 0) n -= 3;
    if (n > 4 && (strncmp(spec + n - 4, ".csv", 4) == 0 || strncmp(spec + n - 4, ".tsv", 4) == 0)) return spec;
    return NULL;
}

int data_spec_parse(const char *spec, data_kind_t kind, uint64_t seed, data_spec_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    out->path = spec;
    if (!spec || !*spec) {
        snprintf(err, err_len, "--data: no %s data named", kind_names[kind]);
        return -1;
    }
    if (kind == DATA_KIND_DENSE) {
        if (strcmp(spec, "fashion-mnist") != 0) {
            snprintf(err, err_len,
                     "--data %s: dense models read Fashion-MNIST IDX files: use --data fashion-mnist "
                     "(with --data-dir DIR for files elsewhere)",
                     spec);
            return -1;
        }
        out->source = DATA_SOURCE_FASHION_MNIST;
        return 0;
    }
    const char *gen = kind == DATA_KIND_SPARSE ? "gen:sparse" : "gen:ratings";
    size_t gen_len = strlen(gen);
    if (strncmp(spec, gen, gen_len) == 0 && (spec[gen_len] == '\0' || spec[gen_len] == ':')) {
        if (kind == DATA_KIND_SPARSE) {
            out->source = DATA_SOURCE_GEN_SPARSE;
            sparse_gen_config_default(&out->sparse);
            out->sparse.seed = seed;
            return flags_parse_pairs(gen_params(spec, gen), sparse_gen_pair, &out->sparse, err, err_len);
        }
        out->source = DATA_SOURCE_GEN_RATINGS;
        ratings_gen_config_default(&out->ratings);
        out->ratings.seed = seed;
        return flags_parse_pairs(gen_params(spec, gen), ratings_gen_pair, &out->ratings, err, err_len);
    }
    if (strncmp(spec, "gen:", 4) == 0) {
        snprintf(err, err_len, "--data %s: %s", spec,
                 kind == DATA_KIND_SPARSE ? "models on sparse features use gen:sparse (or a libsvm file)"
                                          : "models on ratings use gen:ratings (or a ratings file)");
        return -1;
    }
    out->source = DATA_SOURCE_FILE;
    if (kind == DATA_KIND_SPARSE && csv_path(spec)) {
        out->source = DATA_SOURCE_CSV;
        out->path = csv_path(spec);
    }
    return 0;
}

static int load_dense(const data_options_t *o, data_bundle_t *b, char *err, size_t err_len) {
    if (fashion_mnist_load(o->data_dir, 1, o->train_limit, &b->dense_train, err, err_len) != 0) return -1;
    if (fashion_mnist_load(o->test_spec ? o->test_spec : o->data_dir, 0, o->test_limit, &b->dense_test, err, err_len) !=
        0) {
        if (o->test_spec) prefix_test_data(err, err_len);
        return -1;
    }
    snprintf(b->description, sizeof b->description, "fashion-mnist (%s)%s%.100s",
             o->data_dir ? o->data_dir : ASGD_FASHION_MNIST_DIR, o->test_spec ? "; test " : "",
             o->test_spec ? o->test_spec : "");
    return 0;
}

static int load_sparse(const data_options_t *o, const data_spec_t *spec, data_bundle_t *b, char *err, size_t err_len) {
    sparse_dataset_t all;
    sparse_dataset_init(&all);
    if (spec->source == DATA_SOURCE_GEN_SPARSE) {
        const sparse_gen_config_t *c = &spec->sparse;
        if (gen_sparse(c, &all, err, err_len) != 0) return -1;
        snprintf(b->description, sizeof b->description, "gen:sparse n=%zu dim=%zu nnz=%zu zipf=%g noise=%g seed=%llu",
                 c->n_examples, c->dim, c->nnz_per_example, c->zipf_exponent, c->label_noise,
                 (unsigned long long)c->seed);
    } else if (spec->source == DATA_SOURCE_CSV) {
        csv_options_t co = {o->label_column, o->csv_header, NULL, 0, NULL};
        if (csv_load(spec->path, &co, &all, err, err_len) != 0) return -1;
        snprintf(b->description, sizeof b->description, "%s (csv)", data_input_display_name(spec->path));
    } else {
        if (libsvm_load(spec->path, 0, &all, err, err_len) != 0) return -1;
        snprintf(b->description, sizeof b->description, "%s (libsvm)", data_input_display_name(spec->path));
    }
    if (!o->test_spec) {
        int rc = split_sparse(&all, o, b, err, err_len);
        sparse_dataset_free(&all);
        return rc;
    }
    // The training data whole; the test file at its width, with its classes
    // (a label the training data lacks is an error at its line).
    b->sparse_train = all;
    const char *test_csv = csv_path(o->test_spec);
    csv_options_t co = {o->label_column, o->csv_header, all.labels, all.n_classes, all.label_text};
    int rc = test_csv ? csv_load(test_csv, &co, &b->sparse_test, err, err_len)
                      : libsvm_load_mapped(o->test_spec, all.dim, all.labels, all.label_text, all.n_classes,
                                           &b->sparse_test, err, err_len);
    if (rc != 0) {
        prefix_test_data(err, err_len);
        return -1;
    }
    if (test_csv && b->sparse_test.dim > all.dim) {
        snprintf(err, err_len, "--test-data %.300s: %zu features; the training data has %zu", test_csv,
                 b->sparse_test.dim, all.dim);
        return -1;
    }
    size_t len = strlen(b->description);
    snprintf(b->description + len, sizeof b->description - len, "; test %.120s (%s)",
             data_input_display_name(o->test_spec), test_csv ? "csv" : "libsvm");
    if (limit_sparse(&b->sparse_train, o->train_limit, err, err_len) != 0) return -1;
    return limit_sparse(&b->sparse_test, o->test_limit, err, err_len);
}

static int load_ratings(const data_options_t *o, const data_spec_t *spec, data_bundle_t *b, char *err, size_t err_len) {
    ratings_t all;
    ratings_init(&all);
    if (spec->source == DATA_SOURCE_GEN_RATINGS) {
        const ratings_gen_config_t *c = &spec->ratings;
        if (gen_ratings(c, &all, err, err_len) != 0) return -1;
        snprintf(b->description, sizeof b->description,
                 "gen:ratings users=%zu items=%zu rank=%zu n=%zu noise=%g seed=%llu", c->n_users, c->n_items, c->rank,
                 c->n_ratings, c->noise_std, (unsigned long long)c->seed);
    } else if (o->test_spec) {
        // The two files' ids name the same users and items.
        if (ratings_load_pair(spec->path, o->test_spec, &b->ratings_train, &b->ratings_test, err, err_len) != 0) {
            if (strncmp(err, o->test_spec, strlen(o->test_spec)) == 0) prefix_test_data(err, err_len);
            return -1;
        }
        snprintf(b->description, sizeof b->description, "%.100s (ratings); test %.100s (ratings)",
                 data_input_display_name(spec->path), data_input_display_name(o->test_spec));
        if (limit_ratings(&b->ratings_train, o->train_limit, err, err_len) != 0) return -1;
        return limit_ratings(&b->ratings_test, o->test_limit, err, err_len);
    } else {
        if (ratings_load(spec->path, &all, err, err_len) != 0) return -1;
        snprintf(b->description, sizeof b->description, "%s (ratings)", data_input_display_name(spec->path));
    }
    int rc = split_ratings(&all, o, b, err, err_len);
    ratings_free(&all);
    return rc;
}

int data_bundle_load(const data_options_t *o, data_kind_t kind, data_bundle_t *b, char *err, size_t err_len) {
    data_bundle_init(b);
    b->kind = kind;
    data_spec_t spec;
    if (data_spec_parse(o->spec, kind, o->seed, &spec, err, err_len) != 0) return -1;
    if (o->test_spec && !*o->test_spec) {
        snprintf(err, err_len, "--test-data: no file named");
        return -1;
    }
    const char *test_path = o->test_spec && csv_path(o->test_spec) ? csv_path(o->test_spec) : o->test_spec;
    if (test_path && strcmp(test_path, "-") == 0 &&
        (spec.source == DATA_SOURCE_FILE || spec.source == DATA_SOURCE_CSV) && strcmp(spec.path, "-") == 0) {
        snprintf(err, err_len,
                 "--data %s and --test-data %s: both are stdin, which can be read once; give one of "
                 "them as a file",
                 o->spec, o->test_spec);
        return -1;
    }
    if (o->test_spec && kind == DATA_KIND_RATINGS && spec.source != DATA_SOURCE_FILE) {
        snprintf(err, err_len,
                 "--test-data %s: a ratings test file needs a ratings training file (--data FILE): "
                 "the two files' ids are matched",
                 o->test_spec);
        return -1;
    }
    if (!o->test_spec && !(o->test_fraction > 0.0 && o->test_fraction < 1.0) && kind != DATA_KIND_DENSE) {
        if (o->test_fraction == 0.0)
            snprintf(err, err_len,
                     "--test-frac 0: the test set would be empty; give a fraction in (0, 1) or name "
                     "the test set with --test-data FILE");
        else
            snprintf(err, err_len, "--test-frac: %g; expected a fraction in (0, 1)", o->test_fraction);
        return -1;
    }
    int rc;
    if (kind == DATA_KIND_DENSE) {
        rc = load_dense(o, b, err, err_len);
    } else if (kind == DATA_KIND_SPARSE) {
        rc = load_sparse(o, &spec, b, err, err_len);
    } else {
        rc = load_ratings(o, &spec, b, err, err_len);
    }
    if (rc != 0) {
        data_bundle_free(b);
        b->kind = kind;
    }
    return rc;
}
