// Model files (model_file.h; the layout in docs/model_file.md).
#include "engine/cli/model_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/storage/checkpoint_file.h"  // defines: ckpt_crc32
#include "engine/cli/train_args.h"         // defines: MODEL_*, train_model_names

#define KIND_BYTES 16
#define N_KINDS 6

// Offsets of the header's fields.
enum {
    AT_MAGIC = 0,
    AT_VERSION = 8,
    AT_HEADER_BYTES = 12,
    AT_KIND = 16,
    AT_N_PARAMS = 32,
    AT_FIRST = 40,
    AT_COUNT = 48,
    AT_DIM = 56,
    AT_CLASSES = 64,
    AT_N_HIDDEN = 72,
    AT_HIDDEN = 80,
    AT_EMBED_DIM = 144,
    AT_RANK = 152,
    AT_USERS = 160,
    AT_ITEMS = 168,
    AT_MEAN = 176,
    AT_END = 180,  // zero padding up to MODEL_FILE_HEADER_BYTES
};
_Static_assert(AT_HIDDEN + 8 * MODEL_FILE_MAX_HIDDEN == AT_EMBED_DIM, "header layout");
_Static_assert(AT_END <= MODEL_FILE_HEADER_BYTES, "header layout");

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static void put_f32(uint8_t *p, float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    put_u32(p, v);
}
static float get_f32(const uint8_t *p) {
    uint32_t v = get_u32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

static size_t file_bytes(const model_file_info_t *info) {
    return MODEL_FILE_HEADER_BYTES + 4 * (size_t)info->classes + 4 * (size_t)info->count + 4;
}

// The parameter count the shapes imply; 0 when they make no model.
static uint64_t implied_params(const model_file_info_t *i) {
    switch (i->model) {
    case MODEL_LOGREG:
    case MODEL_SVM:
        return i->dim + 1;
    case MODEL_SOFTMAX:
    case MODEL_MLP: {
        uint64_t n = 0, in = i->dim;
        for (uint64_t l = 0; l <= i->n_hidden; l++) {
            uint64_t out = l < i->n_hidden ? i->hidden[l] : i->classes;
            n += out * in + out;
            in = out;
        }
        return n;
    }
    case MODEL_MF:
        return (i->users + i->items) * i->rank;
    case MODEL_EMBMLP:
        return i->n_hidden == 1 ? i->dim * i->embed_dim + i->hidden[0] * i->embed_dim + 2 * i->hidden[0] + 1 : 0;
    }
    return 0;
}

int model_file_info_of(const model_t *m, model_file_info_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    model_layout_t l;
    model_layout(m, &l);
    out->n_params = model_num_params(m);
    out->count = out->n_params;
    switch (l.kind) {
    case MODEL_KIND_LINEAR:
        out->model = l.loss == LINEAR_LOSS_HINGE ? MODEL_SVM : MODEL_LOGREG;
        out->dim = l.dim;
        break;
    case MODEL_KIND_MLP:
        if (l.n_layers > MODEL_FILE_MAX_HIDDEN + 1 || l.width[l.n_layers] > MODEL_FILE_MAX_CLASSES) {
            snprintf(err, err_len, "model file: an mlp of %zu layers and %zu classes does not fit the format",
                     l.n_layers, l.width[l.n_layers]);
            return -1;
        }
        out->model = l.n_layers == 1 ? MODEL_SOFTMAX : MODEL_MLP;
        out->dim = l.width[0];
        out->n_hidden = l.n_layers - 1;
        for (size_t k = 0; k + 1 < l.n_layers; k++) out->hidden[k] = l.width[k + 1];
        out->classes = l.width[l.n_layers];
        for (uint64_t c = 0; c < out->classes; c++) out->labels[c] = (int32_t)c;
        break;
    case MODEL_KIND_MF:
        out->model = MODEL_MF;
        out->rank = l.rank;
        out->users = l.n_users;
        out->items = l.n_items;
        out->mean = l.mean;
        break;
    case MODEL_KIND_EMBMLP:
        // n = dim k + H k + 2 H + 1 (model.h): the hidden width from the count.
        out->model = MODEL_EMBMLP;
        out->dim = l.dim;
        out->embed_dim = l.rank;
        out->n_hidden = 1;
        out->hidden[0] = (out->n_params - 1 - l.dim * l.rank) / (l.rank + 2);
        break;
    }
    if (out->model == MODEL_LOGREG || out->model == MODEL_SVM || out->model == MODEL_EMBMLP) {
        out->classes = 2;
        out->labels[0] = -1;
        out->labels[1] = +1;
    }
    if (implied_params(out) != out->n_params) {
        snprintf(err, err_len, "model file: %s with %llu parameters does not match its shapes",
                 train_model_names[out->model], (unsigned long long)out->n_params);
        return -1;
    }
    return 0;
}

int model_file_write(const char *path, const char *flag, const model_file_info_t *info, const float *values,
                     char *err, size_t err_len) {
    uint8_t h[MODEL_FILE_HEADER_BYTES];
    memset(h, 0, sizeof h);
    memcpy(h + AT_MAGIC, MODEL_FILE_MAGIC, 8);
    put_u32(h + AT_VERSION, MODEL_FILE_VERSION);
    put_u32(h + AT_HEADER_BYTES, MODEL_FILE_HEADER_BYTES);
    snprintf((char *)h + AT_KIND, KIND_BYTES, "%s", train_model_names[info->model]);
    put_u64(h + AT_N_PARAMS, info->n_params);
    put_u64(h + AT_FIRST, info->first);
    put_u64(h + AT_COUNT, info->count);
    put_u64(h + AT_DIM, info->dim);
    put_u64(h + AT_CLASSES, info->classes);
    put_u64(h + AT_N_HIDDEN, info->n_hidden);
    for (int k = 0; k < MODEL_FILE_MAX_HIDDEN; k++) put_u64(h + AT_HIDDEN + 8 * k, info->hidden[k]);
    put_u64(h + AT_EMBED_DIM, info->embed_dim);
    put_u64(h + AT_RANK, info->rank);
    put_u64(h + AT_USERS, info->users);
    put_u64(h + AT_ITEMS, info->items);
    put_f32(h + AT_MEAN, info->mean);
    uint8_t labels[4 * MODEL_FILE_MAX_CLASSES];
    for (uint64_t c = 0; c < info->classes; c++) put_u32(labels + 4 * c, (uint32_t)info->labels[c]);
    size_t label_bytes = 4 * (size_t)info->classes, value_bytes = 4 * (size_t)info->count;
    uint32_t crc = ckpt_crc32(0, h, sizeof h);
    crc = ckpt_crc32(crc, labels, label_bytes);
    crc = ckpt_crc32(crc, values, value_bytes);  // float32 little-endian: the host's order (asgd builds for no other)
    uint8_t tail[4];
    put_u32(tail, crc);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, err_len, "%s %s: cannot open %s for writing: %s", flag, path, tmp, strerror(errno));
        return -1;
    }
    int ok = fwrite(h, 1, sizeof h, f) == sizeof h && fwrite(labels, 1, label_bytes, f) == label_bytes &&
             fwrite(values, 1, value_bytes, f) == value_bytes && fwrite(tail, 1, 4, f) == 4;
    int saved = errno;
    if (fclose(f) != 0 && ok) ok = 0, saved = errno;
    if (!ok || rename(tmp, path) != 0) {
        if (ok) saved = errno;
        remove(tmp);
        snprintf(err, err_len, "%s %s: writing failed: %s", flag, path, strerror(saved));
        return -1;
    }
    return 0;
}

void model_file_init(model_file_t *f) { memset(f, 0, sizeof *f); }

void model_file_free(model_file_t *f) {
    free(f->params);
    f->params = NULL;
}

// Checks a parsed header. Returns 0, or -1 with err (after "PATH: ").
static int check_header(const model_file_info_t *i, char *err, size_t err_len) {
    if (i->count > i->n_params || i->first > i->n_params - i->count) {
        snprintf(err, err_len, "parameters [%llu, %llu) lie outside the model's %llu", (unsigned long long)i->first,
                 (unsigned long long)(i->first + i->count), (unsigned long long)i->n_params);
        return -1;
    }
    if (i->n_hidden > MODEL_FILE_MAX_HIDDEN || i->classes > MODEL_FILE_MAX_CLASSES ||
        (i->model == MODEL_MF ? i->classes != 0 : i->classes < 2) || implied_params(i) != i->n_params) {
        snprintf(err, err_len, "its shapes (dim %llu, %llu classes, %llu hidden layers, rank %llu) do not make a %s "
                 "of %llu parameters", (unsigned long long)i->dim, (unsigned long long)i->classes,
                 (unsigned long long)i->n_hidden, (unsigned long long)i->rank, train_model_names[i->model],
                 (unsigned long long)i->n_params);
        return -1;
    }
    return 0;
}

int model_file_read(const char *path, model_file_t *out, char *err, size_t err_len) {
    model_file_init(out);
    uint8_t h[MODEL_FILE_HEADER_BYTES];
    char what[300] = "";
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int rc = -1;
    size_t got = fread(h, 1, sizeof h, f);
    model_file_info_t *i = &out->info;
    if (got < 8 || memcmp(h, MODEL_FILE_MAGIC, 8) != 0) {
        snprintf(what, sizeof what, "not an asgd model file (expected \"%s\" at its start; files from "
                 "--save-model before format version 1 were raw float32 without a header)", MODEL_FILE_MAGIC);
        goto out;
    }
    if (got >= 12 && get_u32(h + AT_VERSION) != MODEL_FILE_VERSION) {
        snprintf(what, sizeof what, "model file format version %u; this asgd reads version %u", get_u32(h + AT_VERSION),
                 MODEL_FILE_VERSION);
        goto out;
    }
    if (got < sizeof h) {
        snprintf(what, sizeof what, "truncated: %zu bytes, shorter than the %u-byte header", got,
                 MODEL_FILE_HEADER_BYTES);
        goto out;
    }
    if (get_u32(h + AT_HEADER_BYTES) != MODEL_FILE_HEADER_BYTES) {
        snprintf(what, sizeof what, "header size %u; version %u has %u", get_u32(h + AT_HEADER_BYTES),
                 MODEL_FILE_VERSION, MODEL_FILE_HEADER_BYTES);
        goto out;
    }
    char kind[KIND_BYTES + 1];
    memcpy(kind, h + AT_KIND, KIND_BYTES);
    kind[KIND_BYTES] = '\0';
    i->model = -1;
    for (int k = 0; k < N_KINDS; k++)
        if (strcmp(kind, train_model_names[k]) == 0) i->model = k;
    if (i->model < 0) {
        snprintf(what, sizeof what, "unknown model kind '%.16s' (expected logreg, svm, softmax, mlp, mf or embmlp)", kind);
        goto out;
    }
    i->n_params = get_u64(h + AT_N_PARAMS);
    i->first = get_u64(h + AT_FIRST);
    i->count = get_u64(h + AT_COUNT);
    i->dim = get_u64(h + AT_DIM);
    i->classes = get_u64(h + AT_CLASSES);
    i->n_hidden = get_u64(h + AT_N_HIDDEN);
    for (int k = 0; k < MODEL_FILE_MAX_HIDDEN; k++) i->hidden[k] = get_u64(h + AT_HIDDEN + 8 * k);
    i->embed_dim = get_u64(h + AT_EMBED_DIM);
    i->rank = get_u64(h + AT_RANK);
    i->users = get_u64(h + AT_USERS);
    i->items = get_u64(h + AT_ITEMS);
    i->mean = get_f32(h + AT_MEAN);
    if (check_header(i, what, sizeof what) != 0) goto out;
    // The size the header promises, against the file's.
    if (fseek(f, 0, SEEK_END) != 0) {
        snprintf(what, sizeof what, "cannot seek: %s", strerror(errno));
        goto out;
    }
    long size = ftell(f);
    size_t want = file_bytes(i);
    if (size < 0 || (size_t)size != want) {
        snprintf(what, sizeof what, "%s: %ld bytes, but its header (%s, %llu parameters) makes %zu",
                 size >= 0 && (size_t)size < want ? "truncated" : "wrong size", size, train_model_names[i->model],
                 (unsigned long long)i->count, want);
        goto out;
    }
    uint8_t *rest = malloc(want - sizeof h);
    if (!rest) {
        snprintf(what, sizeof what, "out of memory for %llu parameters", (unsigned long long)i->count);
        goto out;
    }
    if (fseek(f, (long)sizeof h, SEEK_SET) != 0 || fread(rest, 1, want - sizeof h, f) != want - sizeof h) {
        snprintf(what, sizeof what, "reading failed: %s", ferror(f) ? strerror(errno) : "short read");
        free(rest);
        goto out;
    }
    size_t label_bytes = 4 * (size_t)i->classes, value_bytes = 4 * (size_t)i->count;
    uint32_t crc = ckpt_crc32(ckpt_crc32(0, h, sizeof h), rest, want - sizeof h - 4);
    if (crc != get_u32(rest + want - sizeof h - 4)) {
        snprintf(what, sizeof what, "checksum mismatch (CRC-32 %08x, stored %08x): the file is corrupt", crc,
                 get_u32(rest + want - sizeof h - 4));
        free(rest);
        goto out;
    }
    for (uint64_t c = 0; c < i->classes; c++) i->labels[c] = (int32_t)get_u32(rest + 4 * c);
    if (!(out->params = malloc(value_bytes ? value_bytes : 1))) {
        snprintf(what, sizeof what, "out of memory for %llu parameters", (unsigned long long)i->count);
        free(rest);
        goto out;
    }
    memcpy(out->params, rest + label_bytes, value_bytes);
    free(rest);
    rc = 0;
out:
    fclose(f);
    if (rc != 0) {
        snprintf(err, err_len, "%s: %s", path, what);
        model_file_free(out);
    }
    return rc;
}

// The identity of a model: everything but which parameters a file holds.
static int same_model(const model_file_info_t *a, const model_file_info_t *b) {
    model_file_info_t x = *a, y = *b;
    x.first = y.first = x.count = y.count = 0;
    size_t used = offsetof(model_file_info_t, labels) + 4 * (size_t)x.classes;
    memset((char *)&x + used, 0, sizeof x - used);
    memset((char *)&y + used, 0, sizeof y - used);
    return x.classes == y.classes && memcmp(&x, &y, sizeof x) == 0;
}

int model_file_join(const char *const *paths, size_t n, model_file_t *out, char *err, size_t err_len) {
    model_file_init(out);
    uint8_t *covered = NULL;
    model_file_t part;
    model_file_init(&part);
    for (size_t p = 0; p < n; p++) {
        if (model_file_read(paths[p], &part, err, err_len) != 0) goto fail;
        const model_file_info_t *i = &part.info;
        if (p == 0) {
            out->info = *i;
            out->info.first = 0;
            out->info.count = i->n_params;
            out->params = malloc(i->n_params ? 4 * (size_t)i->n_params : 1);
            covered = calloc(i->n_params ? i->n_params : 1, 1);
            if (!out->params || !covered) {
                snprintf(err, err_len, "%s: out of memory for %llu parameters", paths[p],
                         (unsigned long long)i->n_params);
                goto fail;
            }
        } else if (!same_model(&out->info, i)) {
            snprintf(err, err_len, "%s: not a part of the same model as %s (kind, shapes or labels differ)", paths[p],
                     paths[0]);
            goto fail;
        }
        memcpy(out->params + i->first, part.params, 4 * (size_t)i->count);
        memset(covered + i->first, 1, i->count);
        model_file_free(&part);
    }
    for (uint64_t j = 0; j < out->info.n_params; j++) {
        if (!covered[j]) {
            snprintf(err, err_len, "%s: parameter %llu of %llu is in none of the %zu file(s): a server's file is one "
                     "part of the model; give every part, comma-separated", paths[0], (unsigned long long)j,
                     (unsigned long long)out->info.n_params, n);
            goto fail;
        }
    }
    free(covered);
    return 0;
fail:
    model_file_free(&part);
    model_file_free(out);
    free(covered);
    return -1;
}

data_kind_t model_file_data_kind(const model_file_info_t *info) {
    switch (info->model) {
    case MODEL_SOFTMAX:
    case MODEL_MLP:
        return DATA_KIND_DENSE;
    case MODEL_MF:
        return DATA_KIND_RATINGS;
    }
    return DATA_KIND_SPARSE;
}

void model_file_model_free(model_file_model_t *mm) {
    model_destroy(&mm->model);
    params_free(&mm->w);
    data_bundle_free(&mm->shape);
}

int model_file_instantiate(const model_file_t *f, const void *test, const char *data_name, model_file_model_t *out,
                           char *err, size_t err_len) {
    const model_file_info_t *i = &f->info;
    memset(out, 0, sizeof *out);
    data_bundle_init(&out->shape);
    data_kind_t kind = model_file_data_kind(i);
    out->shape.kind = kind;
    if (i->first != 0 || i->count != i->n_params) {
        snprintf(err, err_len, "the model file holds parameters [%llu, %llu) of %llu only (one server's part): give "
                 "every part, comma-separated", (unsigned long long)i->first,
                 (unsigned long long)(i->first + i->count), (unsigned long long)i->n_params);
        return -1;
    }
    // Each model takes its shapes from its training set: one example of the file's.
    size_t hidden[MODEL_FILE_MAX_HIDDEN];
    for (int k = 0; k < MODEL_FILE_MAX_HIDDEN; k++) hidden[k] = i->hidden[k];
    if (kind == DATA_KIND_SPARSE) {
        const sparse_dataset_t *t = test;
        if (t->dim > i->dim) {
            snprintf(err, err_len, "%s: features up to %zu; the model (%s) takes %llu", data_name, t->dim,
                     train_model_names[i->model], (unsigned long long)i->dim);
            return -1;
        }
        sparse_dataset_t *s = &out->shape.sparse_train;
        if (sparse_dataset_alloc(s, 1, i->dim, 0, err, err_len) != 0) goto fail;
        s->row_ptr[0] = s->row_ptr[1] = 0;
        s->y[0] = 1.0f;
        out->model = i->model == MODEL_EMBMLP
                         ? model_new_embmlp(s, t, i->embed_dim, i->hidden[0], 0.0, err, err_len)
                         : model_new_linear(i->model == MODEL_SVM ? LINEAR_LOSS_HINGE : LINEAR_LOSS_LOGISTIC, s, t,
                                            0.0, err, err_len);
    } else if (kind == DATA_KIND_DENSE) {
        const dense_dataset_t *t = test;
        if (t->dim != i->dim || t->n_classes > i->classes) {
            snprintf(err, err_len, "%s: %zu features per example and %zu classes; the model (%s) takes %llu features "
                     "and %llu classes", data_name, t->dim, t->n_classes, train_model_names[i->model],
                     (unsigned long long)i->dim, (unsigned long long)i->classes);
            return -1;
        }
        dense_dataset_t *s = &out->shape.dense_train;
        if (dense_dataset_alloc(s, 1, i->dim, i->classes, err, err_len) != 0) goto fail;
        memset(s->x, 0, i->dim * sizeof *s->x);
        s->y[0] = 0;
        out->model = model_new_mlp(s, t, hidden, i->n_hidden, 0.0, err, err_len);
    } else {
        const ratings_t *t = test;
        if (t->n_users > i->users || t->n_items > i->items) {
            snprintf(err, err_len, "%s: %zu users and %zu items; the model (mf) knows %llu users and %llu items",
                     data_name, t->n_users, t->n_items, (unsigned long long)i->users, (unsigned long long)i->items);
            return -1;
        }
        ratings_t *s = &out->shape.ratings_train;
        if (ratings_alloc(s, 1, i->users, i->items, err, err_len) != 0) goto fail;
        s->user[0] = s->item[0] = 0;
        s->rating[0] = i->mean;  // the model's mean is its training set's: exactly this float
        out->model = model_new_mf(s, t, i->rank, 0.0, err, err_len);
    }
    if (!out->model) goto fail;
    if (model_num_params(out->model) != i->n_params) {
        snprintf(err, err_len, "the rebuilt %s has %zu parameters, the file %llu", train_model_names[i->model],
                 model_num_params(out->model), (unsigned long long)i->n_params);
        goto fail;
    }
    if (!(out->w = params_new(i->n_params, err, err_len))) goto fail;
    for (uint64_t j = 0; j < i->n_params; j++) param_set(&out->w[j], f->params[j]);
    return 0;
fail:
    model_file_model_free(out);
    return -1;
}
