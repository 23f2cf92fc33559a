// A worker's model over the features its data uses (worker_keys.h).
#include "engine/run/worker_keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/feature_compact.h"
#include "engine/models/model_registry.h"
#include "engine/replica/working_set.h"
#include "staleness/sync_mode.h"

// What the run allows before the data is read: a CPU worker exchanging keys
// with the servers, whose final model is not written by the worker.
// (The modes whose servers hold the model, asp, ssp and bsp, move keys.)
static int run_allows(const train_args_t *t, const dist_args_t *d) {
    return dist_global_on_servers(d->sync) && !t->device && !d->save_model &&
           train_args_data_kind(t) == DATA_KIND_SPARSE;
}

// Whether model m, built over n_rows of global_rows features, is a sparse
// block of a row per feature followed by a dense tail that does not depend on
// the features: then the servers' model has the same tail after global_rows
// rows, and the map describes it.
static int describe_map(const model_descriptor_t *desc, const model_t *m, const dist_args_t *d, size_t global_rows,
                        ps_key_map_t *map) {
    size_t n_rows = map->n_rows, sparse = model_num_sparse_params(m);
    // A CPU worker (run_allows) moving keys as its strategy will.
    if (!working_set_by_key(m, (sync_mode_t)d->sync, 0, d->compress_spec.kind != COMPRESS_KIND_NONE)) return 0;
    if (!desc->shape_of || !desc->shape_params || sparse % n_rows != 0) return 0;
    size_t width = sparse / n_rows, tail = model_num_params(m) - sparse;
    model_shape_t shape;
    char why[256];
    if (desc->shape_of(m, &shape, why, sizeof why) != 0) return 0;
    shape.dim = global_rows;
    uint64_t n_global = desc->shape_params(&shape);
    if (n_global != (uint64_t)global_rows * width + tail || n_global > UINT32_MAX) return 0;
    map->width = width;
    map->global_rows = global_rows;
    map->n_global = (size_t)n_global;
    return 1;
}

int worker_keys_build(const train_args_t *t, const dist_args_t *d, data_bundle_t *data, model_t **model,
                      worker_keys_t *k, char *err, size_t err_len) {
    memset(k, 0, sizeof *k);
    *model = NULL;
    if (train_args_load(t, data, err, err_len) != 0) return -1;
    if (!run_allows(t, d)) return train_args_make_model(t, data, model, err, err_len);
    size_t global_rows = data->sparse_train.dim;
    int rc = feature_compact(&data->sparse_train, &data->sparse_test, &k->rows, &k->map.n_rows, err, err_len);
    if (rc < 0) return -1;
    if (rc > 0) return train_args_make_model(t, data, model, err, err_len);
    k->map.rows = k->rows;
    if (train_args_make_model(t, data, model, err, err_len) == 0 &&
        describe_map(train_args_model(t), *model, d, global_rows, &k->map)) {
        k->held = 1;
        return 0;
    }
    // Not a model of feature rows (or it failed over the renumbered data, which it
    // fails over the original data too): the whole model, over the data as read.
    model_destroy(model);
    feature_restore(&data->sparse_train, &data->sparse_test, k->rows, global_rows);
    worker_keys_free(k);
    return train_args_make_model(t, data, model, err, err_len);
}

void worker_keys_free(worker_keys_t *k) {
    free(k->rows);
    memset(k, 0, sizeof *k);
}

// ---- the global evaluator's model ----------------------------------------------

// The first `limit` test examples, copied and renumbered to their features.
static int compact_test(const sparse_dataset_t *test, size_t limit, eval_keys_t *k, size_t *n_rows, char *err,
                        size_t err_len) {
    uint32_t *idx = malloc((limit ? limit : 1) * sizeof *idx);
    if (!idx) {
        snprintf(err, err_len, "global evaluator: out of memory for %zu test examples", limit);
        return -1;
    }
    for (size_t i = 0; i < limit; i++) idx[i] = (uint32_t)i;
    int rc = sparse_dataset_subset(test, idx, limit, &k->test, err, err_len);
    free(idx);
    if (rc != 0) return -1;
    sparse_dataset_t none;
    sparse_dataset_init(&none);
    return feature_compact(&k->test, &none, &k->rows, n_rows, err, err_len);
}

int eval_keys_build(const train_args_t *t, const dist_args_t *d, const data_bundle_t *data, const model_t *m,
                    eval_keys_t *k, char *err, size_t err_len) {
    memset(k, 0, sizeof *k);
    sparse_dataset_init(&k->test);
    if (!dist_global_on_servers(d->sync) || train_args_data_kind(t) != DATA_KIND_SPARSE) return 0;
    size_t global_rows = data->sparse_train.dim, limit = data->sparse_test.n;
    if (t->eval_limit && t->eval_limit < limit) limit = t->eval_limit;
    if (limit == 0 || data->sparse_test.dim > global_rows) return 0;
    size_t n_rows = 0;
    int rc = compact_test(&data->sparse_test, limit, k, &n_rows, err, err_len);
    if (rc != 0) {
        eval_keys_free(k);
        return rc < 0 ? -1 : 0;  // 1: every feature is read; the whole model it is
    }
    k->map.rows = k->rows;
    k->map.n_rows = n_rows;
    const model_descriptor_t *desc = train_args_model(t);
    k->model = model_create(desc, DATA_KIND_SPARSE, &k->test, &k->test, &t->model_opts, t->l2, t->seed, err, err_len);
    if (!k->model) {
        eval_keys_free(k);
        return -1;
    }
    if (!describe_map(desc, k->model, d, global_rows, &k->map) || k->map.n_global != model_num_params(m)) {
        eval_keys_free(k);  // not a model of feature rows over these data: the whole model
        return 0;
    }
    return 0;
}

void eval_keys_free(eval_keys_t *k) {
    model_destroy(&k->model);
    sparse_dataset_free(&k->test);
    free(k->rows);
    memset(k, 0, sizeof *k);
    sparse_dataset_init(&k->test);
}
