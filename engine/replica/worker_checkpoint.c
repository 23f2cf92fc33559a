// Checkpoints of a distributed worker (worker_checkpoint.h).
#include "engine/replica/worker_checkpoint.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/storage/checkpoint_file.h"
#include "kernels/foundation/partition.h"

static const char *const id_names[] = {"worker id",
                                       "workers",
                                       "servers",
                                       "sync mode",
                                       "staleness bound",
                                       "seed",
                                       "threads",
                                       "batch",
                                       "push-every",
                                       "parameter count",
                                       "training-set size",
                                       "test-set size",
                                       "data (--data, --test-data) fingerprint"};
#define ID_FIELDS (offsetof(worker_ckpt_identity_t, model) / sizeof(uint64_t))
_Static_assert(sizeof id_names / sizeof id_names[0] == ID_FIELDS, "a name per identity field");

int worker_ckpt_save(const worker_ckpt_config_t *cfg, const worker_ckpt_t *c, char *err, size_t err_len) {
    ckpt_writer_t *w = ckpt_writer_open(cfg->path, err, err_len);
    if (!w) return -1;
    size_t T = c->at.threads;
    uint64_t counts[4] = {c->seq, c->clock, c->retrained, c->skipped};
    ckpt_writer_section(w, "wk.identity", &cfg->id, sizeof cfg->id);
    ckpt_writer_section(w, "wk.counts", counts, sizeof counts);
    ckpt_writer_section(w, "wk.steps", c->at.updates, T * sizeof *c->at.updates);
    ckpt_writer_section(w, "wk.samples", c->at.samples, T * sizeof *c->at.samples);
    ckpt_writer_section(w, "wk.loss_sum", c->at.loss_sum, T * sizeof *c->at.loss_sum);
    ckpt_writer_section(w, "wk.wall_s", &c->at.wall_s, sizeof c->at.wall_s);
    ckpt_writer_section(w, "wk.pending", c->pending, cfg->id.n_params * sizeof *c->pending);
    ckpt_writer_section(w, "wk.unpushed", &c->unpushed_steps, sizeof c->unpushed_steps);
    return ckpt_writer_commit(&w, err, err_len);
}

void worker_ckpt_free(worker_ckpt_t *c) {
    free(c->at.samples);
    free(c->at.updates);
    free(c->at.loss_sum);
    free(c->pending);
    memset(c, 0, sizeof *c);
}

// The first identity field that differs, in words; 0 when they match.
static int id_mismatch(const worker_ckpt_identity_t *have, const worker_ckpt_identity_t *want, char *out, size_t len) {
    const uint64_t *a = (const uint64_t *)have, *b = (const uint64_t *)want;
    for (size_t i = 0; i < ID_FIELDS; i++) {
        if (a[i] == b[i]) continue;
        snprintf(out, len, "%s %llu in the checkpoint, %llu in this worker", id_names[i], (unsigned long long)a[i],
                 (unsigned long long)b[i]);
        return 1;
    }
    if (strncmp(have->model, want->model, sizeof have->model) != 0) {
        snprintf(out, len, "model %.63s in the checkpoint, %.63s in this worker", have->model, want->model);
        return 1;
    }
    return 0;
}

int worker_ckpt_load(const char *path, const worker_ckpt_identity_t *id, worker_ckpt_t *out, char *err,
                     size_t err_len) {
    memset(out, 0, sizeof *out);
    ckpt_file_t *f = ckpt_file_read(path, err, err_len);
    if (!f) return -1;
    int rc = -1;
    worker_ckpt_identity_t have;
    char why[200];
    if (ckpt_file_get(f, "wk.identity", &have, sizeof have, err, err_len) != 0) goto out;
    have.model[sizeof have.model - 1] = '\0';
    if (id_mismatch(&have, id, why, sizeof why)) {
        snprintf(err, err_len, "%s: not this worker's checkpoint: %s (resume with the flags the run was started with)",
                 path, why);
        goto out;
    }
    size_t T = id->threads, n = id->n_params;
    out->at.threads = T;
    out->at.samples = calloc(T, sizeof *out->at.samples);
    out->at.updates = calloc(T, sizeof *out->at.updates);
    out->at.loss_sum = calloc(T, sizeof *out->at.loss_sum);
    out->pending = malloc(n * sizeof *out->pending + 1);
    if (!out->at.samples || !out->at.updates || !out->at.loss_sum || !out->pending) {
        snprintf(err, err_len, "%s: out of memory", path);
        goto out;
    }
    uint64_t counts[4];
    if (ckpt_file_get(f, "wk.counts", counts, sizeof counts, err, err_len) != 0 ||
        ckpt_file_get(f, "wk.steps", out->at.updates, T * sizeof *out->at.updates, err, err_len) != 0 ||
        ckpt_file_get(f, "wk.samples", out->at.samples, T * sizeof *out->at.samples, err, err_len) != 0 ||
        ckpt_file_get(f, "wk.loss_sum", out->at.loss_sum, T * sizeof *out->at.loss_sum, err, err_len) != 0 ||
        ckpt_file_get(f, "wk.wall_s", &out->at.wall_s, sizeof out->at.wall_s, err, err_len) != 0 ||
        ckpt_file_get(f, "wk.pending", out->pending, n * sizeof *out->pending, err, err_len) != 0)
        goto out;
    out->seq = counts[0];
    out->clock = counts[1];
    out->retrained = counts[2];
    out->skipped = counts[3];
    // Absent from the files of earlier builds: their pending steps go unclaimed.
    size_t size = 0;
    const void *unpushed = ckpt_file_section(f, "wk.unpushed", &size);
    if (unpushed && size == sizeof out->unpushed_steps) memcpy(&out->unpushed_steps, unpushed, size);
    rc = 0;
out:
    if (rc != 0) worker_ckpt_free(out);
    ckpt_file_free(&f);
    return rc;
}

// ---- the progress file -----------------------------------------------------------

// Counters: [0] samples_retrained and [1] samples_skipped carried from earlier
// restarts, [2..5] unused, then from counter 6 (byte 64 of the file, as the
// mapping starts on a page) the threads' train_thread_progress_t, 8 counters
// each, `steps` first.
static const char progress_magic[8] = {'A', 'S', 'G', 'D', 'W', 'P', 'R', 'G'};
#define PROGRESS_FIRST 6
#define PROGRESS_STRIDE (sizeof(train_thread_progress_t) / sizeof(uint64_t))
_Static_assert(sizeof(train_thread_progress_t) == 64 && offsetof(train_thread_progress_t, steps) == 0,
               "a thread's progress is one cache line, steps first");

int worker_progress_create(const char *path, size_t threads, uint64_t retrained, uint64_t skipped, counter_file_t *f,
                           train_thread_progress_t **progress, char *err, size_t err_len) {
    if (counter_file_create(f, path, progress_magic, PROGRESS_FIRST + PROGRESS_STRIDE * threads, 0, err, err_len) != 0)
        return -1;
    f->v[0] = retrained;
    f->v[1] = skipped;
    *progress = (train_thread_progress_t *)(void *)(f->v + PROGRESS_FIRST);
    return 0;
}

int worker_progress_read(const char *path, size_t threads, uint64_t *steps, uint64_t *retrained, uint64_t *skipped,
                         char *err, size_t err_len) {
    size_t n = PROGRESS_FIRST + PROGRESS_STRIDE * threads, held = 0;
    uint64_t *v = malloc(n * sizeof *v);
    if (!v) {
        snprintf(err, err_len, "%s: out of memory", path);
        return -1;
    }
    int rc = counter_file_read(path, progress_magic, n, v, &held, err, err_len);
    if (rc == 0 && held != n) {
        snprintf(err, err_len, "%s: holds %zu counters, %zu expected for %zu threads", path, held, n, threads);
        rc = -1;
    }
    if (rc == 0) {
        *retrained = v[0];
        *skipped = v[1];
        for (size_t t = 0; t < threads; t++) steps[t] = v[PROGRESS_FIRST + PROGRESS_STRIDE * t];
    }
    free(v);
    return rc;
}

uint64_t worker_steps_samples(size_t len, size_t batch, uint64_t steps) {
    if (len == 0 || batch == 0) return 0;
    uint64_t per_epoch = (len + batch - 1) / batch;
    uint64_t in_epoch = (steps % per_epoch) * batch;
    return (steps / per_epoch) * len + (in_epoch < len ? in_epoch : len);
}

size_t worker_thread_len(size_t n_train, size_t ranks, size_t rank, size_t threads, size_t t) {
    size_t lo, hi, b, e;
    shard_range(n_train, ranks, rank, &lo, &hi);
    shard_range(hi - lo, threads, t, &b, &e);
    return e - b;
}
