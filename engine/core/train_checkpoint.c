// Checkpoints of a single-node training run (train_checkpoint.h).
#include "engine/core/train_checkpoint.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/storage/checkpoint_file.h"

static const char *const id_names[] = {"model", "parameter count", "training-set size", "mode", "threads", "batch",
                                       "seed",  "optimizer",       "momentum"};
#define ID_FIELDS (sizeof(train_identity_t) / sizeof(uint64_t))
_Static_assert(sizeof id_names / sizeof id_names[0] == ID_FIELDS, "a name per identity field");

int train_checkpoint_save(void *ctx, const train_position_t *at, const param_t *w, const optimizer_t *opt, char *err,
                          size_t err_len) {
    const train_checkpoint_t *c = ctx;
    size_t n = c->id.n_params, n_state = optimizer_state_len(opt);
    float *buf = malloc((n > n_state ? n : n_state) * sizeof *buf + 1);
    if (!buf) {
        snprintf(err, err_len, "%s: out of memory for the checkpoint of %zu parameters", c->path, n);
        return -1;
    }
    ckpt_writer_t *wr = ckpt_writer_open(c->path, err, err_len);
    if (!wr) {
        free(buf);
        return -1;
    }
    ckpt_writer_section(wr, "train.identity", &c->id, sizeof c->id);
    params_read(w, n, buf);
    ckpt_writer_section(wr, "train.params", buf, n * sizeof *buf);
    optimizer_state_read(opt, buf);
    ckpt_writer_section(wr, "train.optimizer", buf, n_state * sizeof *buf);
    ckpt_writer_section(wr, "train.samples", at->samples, at->threads * sizeof *at->samples);
    ckpt_writer_section(wr, "train.updates", at->updates, at->threads * sizeof *at->updates);
    ckpt_writer_section(wr, "train.loss_sum", at->loss_sum, at->threads * sizeof *at->loss_sum);
    ckpt_writer_section(wr, "train.wall_s", &at->wall_s, sizeof at->wall_s);
    free(buf);
    return ckpt_writer_commit(&wr, err, err_len);
}

void train_position_free(train_position_t *at) {
    free(at->samples);
    free(at->updates);
    free(at->loss_sum);
    memset(at, 0, sizeof *at);
}

// An identity field's value as the flags say it: names for the model, the
// mode and the optimizer, on/off for momentum, else the number.
static void id_value(size_t field, uint64_t v, train_model_name_fn name_model, char *out, size_t len) {
    size_t at = field * sizeof(uint64_t);
    const char *name = NULL;
    if (at == offsetof(train_identity_t, model) && name_model)
        name = name_model(v);
    else if (at == offsetof(train_identity_t, mode) && v <= TRAIN_MODE_SYNC)
        name = train_mode_name((train_mode_t)v);
    else if (at == offsetof(train_identity_t, optimizer) && v <= OPTIMIZER_KIND_ADAGRAD)
        name = optimizer_kind_name((optimizer_kind_t)v);
    else if (at == offsetof(train_identity_t, momentum))
        name = v ? "on" : "off";
    if (name)
        snprintf(out, len, "%s", name);
    else
        snprintf(out, len, "%llu", (unsigned long long)v);
}

int train_checkpoint_load(const char *path, const train_identity_t *id, train_model_name_fn name_model, param_t *w,
                          optimizer_t *opt, train_position_t *at, char *err, size_t err_len) {
    memset(at, 0, sizeof *at);
    ckpt_file_t *f = ckpt_file_read(path, err, err_len);
    if (!f) return -1;
    int rc = -1;
    float *buf = NULL;
    train_identity_t have;
    if (ckpt_file_get(f, "train.identity", &have, sizeof have, err, err_len) != 0) goto out;
    const uint64_t *a = (const uint64_t *)&have, *b = (const uint64_t *)id;
    for (size_t i = 0; i < ID_FIELDS; i++) {
        if (a[i] == b[i]) continue;
        char was[64], is[64];
        id_value(i, a[i], name_model, was, sizeof was);
        id_value(i, b[i], name_model, is, sizeof is);
        snprintf(err, err_len,
                 "%s: the checkpointed run's %s was %s, this run's is %s: resume with the flags it was started "
                 "with",
                 path, id_names[i], was, is);
        goto out;
    }
    size_t n = id->n_params, n_state = optimizer_state_len(opt), T = id->threads;
    buf = malloc((n > n_state ? n : n_state) * sizeof *buf + 1);
    at->samples = calloc(T, sizeof *at->samples);
    at->updates = calloc(T, sizeof *at->updates);
    at->loss_sum = calloc(T, sizeof *at->loss_sum);
    if (!buf || !at->samples || !at->updates || !at->loss_sum) {
        snprintf(err, err_len, "%s: out of memory", path);
        goto out;
    }
    at->threads = T;
    if (ckpt_file_get(f, "train.params", buf, n * sizeof *buf, err, err_len) != 0) goto out;
    for (size_t j = 0; j < n; j++) param_set(&w[j], buf[j]);
    if (ckpt_file_get(f, "train.optimizer", buf, n_state * sizeof *buf, err, err_len) != 0) goto out;
    optimizer_state_write(opt, buf);
    if (ckpt_file_get(f, "train.samples", at->samples, T * sizeof *at->samples, err, err_len) != 0 ||
        ckpt_file_get(f, "train.updates", at->updates, T * sizeof *at->updates, err, err_len) != 0 ||
        ckpt_file_get(f, "train.loss_sum", at->loss_sum, T * sizeof *at->loss_sum, err, err_len) != 0 ||
        ckpt_file_get(f, "train.wall_s", &at->wall_s, sizeof at->wall_s, err, err_len) != 0)
        goto out;
    rc = 0;
out:
    if (rc != 0) train_position_free(at);
    free(buf);
    ckpt_file_free(&f);
    return rc;
}
