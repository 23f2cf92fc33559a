// Model files (model_file.h; the layout in docs/model_file.md).
#include "engine/run/model_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/storage/checkpoint_file.h"
#include "engine/run/data_fingerprint.h"

#define KIND_BYTES 16
_Static_assert(MODEL_NAME_MAX < KIND_BYTES, "a model's name fits the kind field");

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
    AT_SPARSE_INPUT = 180,
    AT_LABEL_TEXT_BYTES = 184,
    AT_SPLIT_RECORDED = 188,  // the training run's split (model_file_split_t)
    AT_SPLIT_TEST_DATA = 192,
    AT_SPLIT_TEST_FRAC = 200,  // 196-199: zero
    AT_SPLIT_SEED = 208,
    AT_SPLIT_TRAIN_LIMIT = 216,
    AT_SPLIT_TEST_LIMIT = 224,
    AT_SPLIT_TRAIN_FINGERPRINT = 232,
    AT_SPLIT_TEST_FINGERPRINT = 240,
    AT_END = 248,  // zero padding up to MODEL_FILE_HEADER_BYTES
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
static void put_f64(uint8_t *p, double d) {
    uint64_t v;
    memcpy(&v, &d, 8);
    put_u64(p, v);
}
static double get_f64(const uint8_t *p) {
    uint64_t v = get_u64(p);
    double d;
    memcpy(&d, &v, 8);
    return d;
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
    return MODEL_FILE_HEADER_BYTES + 4 * (size_t)info->classes + info->label_text_bytes + 4 * (size_t)info->count + 4;
}

// The header's shape fields to and from the descriptor's form.
static void shape_of_info(const model_file_info_t *i, model_shape_t *s) {
    memset(s, 0, sizeof *s);
    s->dim = i->dim;
    s->classes = i->classes;
    s->n_hidden = i->n_hidden;
    memcpy(s->hidden, i->hidden, sizeof s->hidden);
    s->embed_dim = i->embed_dim;
    s->rank = i->rank;
    s->users = i->users;
    s->items = i->items;
    s->mean = i->mean;
    s->sparse_input = i->sparse_input;
    memcpy(s->labels, i->labels, sizeof s->labels);
    s->label_text = model_file_label_text(i);
}

static void info_of_shape(const model_shape_t *s, model_file_info_t *i) {
    i->dim = s->dim;
    i->classes = s->classes;
    i->n_hidden = s->n_hidden;
    memcpy(i->hidden, s->hidden, sizeof i->hidden);
    i->embed_dim = s->embed_dim;
    i->rank = s->rank;
    i->users = s->users;
    i->items = s->items;
    i->mean = s->mean;
    i->sparse_input = s->sparse_input;
    memcpy(i->labels, s->labels, sizeof i->labels);
    size_t bytes = s->label_text ? dataset_label_text_bytes(s->label_text, s->classes) : 0;
    i->label_text_bytes =
        (uint32_t)bytes;  // at most MODEL_FILE_MAX_LABEL_TEXT: every name is short (DATASET_MAX_LABEL_BYTES)
    memcpy(i->label_text, s->label_text ? s->label_text : "", bytes);
}

// The parameter count the shapes imply; 0 when they make no model.
static uint64_t implied_params(const model_file_info_t *i) {
    model_shape_t s;
    shape_of_info(i, &s);
    return i->model->shape_params(&s);
}

int model_file_info_of(const model_t *m, model_file_info_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    out->model = model_registry_find(model_name(m));
    out->n_params = model_num_params(m);
    out->count = out->n_params;
    if (!out->model || !out->model->shape_of) {
        snprintf(err, err_len, "model file: %s has no model-file form", model_name(m));
        return -1;
    }
    model_shape_t s;
    memset(&s, 0, sizeof s);
    if (out->model->shape_of(m, &s, err, err_len) != 0) return -1;
    if (s.n_hidden > MODEL_FILE_MAX_HIDDEN || s.classes > MODEL_FILE_MAX_CLASSES) {
        snprintf(err, err_len, "model file: %s with %llu hidden layers and %llu classes does not fit the format",
                 out->model->name, (unsigned long long)s.n_hidden, (unsigned long long)s.classes);
        return -1;
    }
    info_of_shape(&s, out);
    if (implied_params(out) != out->n_params) {
        snprintf(err, err_len, "model file: %s with %llu parameters does not match its shapes", out->model->name,
                 (unsigned long long)out->n_params);
        return -1;
    }
    return 0;
}

void model_file_split_of(const data_bundle_t *data, double test_frac, uint64_t seed, size_t train_limit,
                         size_t test_limit, int test_data, model_file_split_t *out) {
    *out = (model_file_split_t){
        .recorded = 1,
        .test_data = test_data != 0,
        .test_frac = test_frac,
        .seed = seed,
        .train_limit = train_limit,
        .test_limit = test_limit,
        .train_fingerprint = data_fingerprint(data, 0),
        .test_fingerprint = data_fingerprint(data, 1),
    };
}

static void put_split(uint8_t *h, const model_file_split_t *s) {
    if (!s->recorded) return;  // zeros, as files without a record have
    put_u32(h + AT_SPLIT_RECORDED, 1);
    put_u32(h + AT_SPLIT_TEST_DATA, s->test_data);
    put_f64(h + AT_SPLIT_TEST_FRAC, s->test_frac);
    put_u64(h + AT_SPLIT_SEED, s->seed);
    put_u64(h + AT_SPLIT_TRAIN_LIMIT, s->train_limit);
    put_u64(h + AT_SPLIT_TEST_LIMIT, s->test_limit);
    put_u64(h + AT_SPLIT_TRAIN_FINGERPRINT, s->train_fingerprint);
    put_u64(h + AT_SPLIT_TEST_FINGERPRINT, s->test_fingerprint);
}

// The record, or -1 with what is wrong with it.
static int get_split(const uint8_t *h, model_file_split_t *s, char *what, size_t what_len) {
    memset(s, 0, sizeof *s);
    s->recorded = get_u32(h + AT_SPLIT_RECORDED);
    if (s->recorded == 0) return 0;  // an older file's zeros
    s->test_data = get_u32(h + AT_SPLIT_TEST_DATA);
    s->test_frac = get_f64(h + AT_SPLIT_TEST_FRAC);
    s->seed = get_u64(h + AT_SPLIT_SEED);
    s->train_limit = get_u64(h + AT_SPLIT_TRAIN_LIMIT);
    s->test_limit = get_u64(h + AT_SPLIT_TEST_LIMIT);
    s->train_fingerprint = get_u64(h + AT_SPLIT_TRAIN_FINGERPRINT);
    s->test_fingerprint = get_u64(h + AT_SPLIT_TEST_FINGERPRINT);
    if (s->recorded != 1 || s->test_data > 1 || !(s->test_frac >= 0.0 && s->test_frac < 1.0)) {
        snprintf(what, what_len, "its split record (recorded %u, test_data %u, test_frac %g) is not one asgd writes",
                 s->recorded, s->test_data, s->test_frac);
        return -1;
    }
    return 0;
}

int model_file_write(const char *path, const char *flag, const model_file_info_t *info, const float *values, char *err,
                     size_t err_len) {
    uint8_t h[MODEL_FILE_HEADER_BYTES];
    memset(h, 0, sizeof h);
    memcpy(h + AT_MAGIC, MODEL_FILE_MAGIC, 8);
    put_u32(h + AT_VERSION, info->label_text_bytes ? MODEL_FILE_VERSION_NAMES : MODEL_FILE_VERSION);
    put_u32(h + AT_HEADER_BYTES, MODEL_FILE_HEADER_BYTES);
    snprintf((char *)h + AT_KIND, KIND_BYTES, "%s", info->model->name);
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
    put_u32(h + AT_SPARSE_INPUT, info->sparse_input);
    put_u32(h + AT_LABEL_TEXT_BYTES, info->label_text_bytes);
    put_split(h, &info->split);
    uint8_t labels[4 * MODEL_FILE_MAX_CLASSES];
    for (uint64_t c = 0; c < info->classes; c++) put_u32(labels + 4 * c, (uint32_t)info->labels[c]);
    size_t label_bytes = 4 * (size_t)info->classes, value_bytes = 4 * (size_t)info->count;
    uint32_t crc = ckpt_crc32(0, h, sizeof h);
    crc = ckpt_crc32(crc, labels, label_bytes);
    crc = ckpt_crc32(crc, info->label_text, info->label_text_bytes);
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
             fwrite(info->label_text, 1, info->label_text_bytes, f) == info->label_text_bytes &&
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
        (i->model->metric == METRIC_KIND_RMSE ? i->classes != 0 : i->classes < 2) || implied_params(i) != i->n_params) {
        snprintf(err, err_len,
                 "its shapes (dim %llu, %llu classes, %llu hidden layers, rank %llu) do not make a %s "
                 "of %llu parameters",
                 (unsigned long long)i->dim, (unsigned long long)i->classes, (unsigned long long)i->n_hidden,
                 (unsigned long long)i->rank, i->model->name, (unsigned long long)i->n_params);
        return -1;
    }
    return 0;
}

static int has_file_form(const model_descriptor_t *d) { return d->shape_params != NULL; }

// The names of a version 2 file: one for each class, 1 to DATASET_MAX_LABEL_BYTES
// bytes, ascending in byte order, filling label_text_bytes exactly; and the
// labels 0..classes-1. 0, or -1 with what (after "PATH: ").
static int check_label_text(const model_file_info_t *i, char *what, size_t what_len) {
    const char *p = i->label_text, *end = i->label_text + i->label_text_bytes, *prev = NULL;
    for (uint64_t c = 0; c < i->classes; c++) {
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        if (!nul || nul == p || nul - p > DATASET_MAX_LABEL_BYTES || (prev && strcmp(prev, p) >= 0) ||
            i->labels[c] != (int32_t)c) {
            snprintf(what, what_len,
                     "class %llu's name is missing, empty, too long or out of order (expected %llu "
                     "names in byte order, each NUL-terminated, in %u bytes)",
                     (unsigned long long)c, (unsigned long long)i->classes, i->label_text_bytes);
            return -1;
        }
        prev = p;
        p = nul + 1;
    }
    if (p != end) {
        snprintf(what, what_len, "%zu bytes after the %llu class names (expected %u bytes of names)", (size_t)(end - p),
                 (unsigned long long)i->classes, i->label_text_bytes);
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
        snprintf(what, sizeof what,
                 "not an asgd model file (expected \"%s\" at its start; files from "
                 "--save-model before format version 1 were raw float32 without a header)",
                 MODEL_FILE_MAGIC);
        goto out;
    }
    uint32_t version = got >= 12 ? get_u32(h + AT_VERSION) : MODEL_FILE_VERSION;
    if (version != MODEL_FILE_VERSION && version != MODEL_FILE_VERSION_NAMES) {
        snprintf(what, sizeof what, "model file format version %u; this asgd reads versions %u and %u", version,
                 MODEL_FILE_VERSION, MODEL_FILE_VERSION_NAMES);
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
    i->model = model_registry_find(kind);
    if (!i->model || !i->model->shape_params) {
        char names[200];
        model_registry_names(names, sizeof names, ", ", has_file_form);
        snprintf(what, sizeof what, "unknown model kind '%.16s' (expected one of %s)", kind, names);
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
    i->sparse_input = get_u32(h + AT_SPARSE_INPUT);
    i->label_text_bytes = get_u32(h + AT_LABEL_TEXT_BYTES);
    if ((version == MODEL_FILE_VERSION) != (i->label_text_bytes == 0) ||
        i->label_text_bytes > MODEL_FILE_MAX_LABEL_TEXT) {
        snprintf(what, sizeof what,
                 "version %u with %u bytes of class names (expected none in version %u; in "
                 "version %u, 1 to %u)",
                 version, i->label_text_bytes, MODEL_FILE_VERSION, MODEL_FILE_VERSION_NAMES,
                 (unsigned)MODEL_FILE_MAX_LABEL_TEXT);
        goto out;
    }
    if (i->sparse_input > 1 || (i->sparse_input && !i->model->create_sparse)) {
        snprintf(what, sizeof what, "sparse_input %u for a %s (0, or 1 for a model that reads sparse input)",
                 i->sparse_input, i->model->name);
        goto out;
    }
    if (check_header(i, what, sizeof what) != 0 || get_split(h, &i->split, what, sizeof what) != 0) goto out;
    // The size the header promises, against the file's.
    if (fseek(f, 0, SEEK_END) != 0) {
        snprintf(what, sizeof what, "cannot seek: %s", strerror(errno));
        goto out;
    }
    long size = ftell(f);
    size_t want = file_bytes(i);
    if (size < 0 || (size_t)size != want) {
        snprintf(what, sizeof what, "%s: %ld bytes, but its header (%s, %llu parameters) makes %zu",
                 size >= 0 && (size_t)size < want ? "truncated" : "wrong size", size, i->model->name,
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
    memcpy(i->label_text, rest + label_bytes, i->label_text_bytes);
    if (i->label_text_bytes && check_label_text(i, what, sizeof what) != 0) {
        free(rest);
        goto out;
    }
    if (!(out->params = malloc(value_bytes ? value_bytes : 1))) {
        snprintf(what, sizeof what, "out of memory for %llu parameters", (unsigned long long)i->count);
        free(rest);
        goto out;
    }
    memcpy(out->params, rest + label_bytes + i->label_text_bytes, value_bytes);
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
    enum { HEAD = offsetof(model_file_info_t, labels) };  // the fields before the labels
    unsigned char x[HEAD], y[HEAD];
    memcpy(x, a, HEAD);
    memcpy(y, b, HEAD);
    for (size_t at = offsetof(model_file_info_t, first); at < offsetof(model_file_info_t, count) + 8; at++)
        x[at] = y[at] = 0;
    return memcmp(x, y, HEAD) == 0 && a->classes == b->classes &&
           memcmp(a->labels, b->labels, 4 * (size_t)a->classes) == 0 && a->label_text_bytes == b->label_text_bytes &&
           memcmp(a->label_text, b->label_text, a->label_text_bytes) == 0;
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
            snprintf(err, err_len,
                     "%s: parameter %llu of %llu is in none of the %zu file(s): a server's file is one "
                     "part of the model; give every part, comma-separated",
                     paths[0], (unsigned long long)j, (unsigned long long)out->info.n_params, n);
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

const char *model_file_label_text(const model_file_info_t *info) {
    return info->label_text_bytes ? info->label_text : NULL;
}

const char *model_file_label(const model_file_info_t *info, size_t k, char buf[16]) {
    if (!info->label_text_bytes) {
        snprintf(buf, 16, "%d", (int)info->labels[k]);
        return buf;
    }
    const char *p = info->label_text;
    for (size_t c = 0; c < k; c++) p += strlen(p) + 1;
    return p;
}

data_kind_t model_file_data_kind(const model_file_info_t *info) {
    return info->sparse_input ? DATA_KIND_SPARSE : info->model->data;
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
        snprintf(err, err_len,
                 "the model file holds parameters [%llu, %llu) of %llu only (one server's part): give "
                 "every part, comma-separated",
                 (unsigned long long)i->first, (unsigned long long)(i->first + i->count),
                 (unsigned long long)i->n_params);
        return -1;
    }
    // Each model takes its shapes from its training set: one example of the file's.
    const model_descriptor_t *d = i->model;
    const void *shape_train;
    if (kind == DATA_KIND_SPARSE) {
        const sparse_dataset_t *t = test;
        if (t->dim > i->dim) {
            snprintf(err, err_len, "%s: features up to %zu; the model (%s) takes %llu", data_name, t->dim, d->name,
                     (unsigned long long)i->dim);
            return -1;
        }
        sparse_dataset_t *s = &out->shape.sparse_train;
        if (sparse_dataset_alloc(s, 1, i->dim, 0, err, err_len) != 0) goto fail;
        s->row_ptr[0] = s->row_ptr[1] = 0;
        s->y[0] = 1.0f;
        // The file's classes, for a test set read with them (a generated one has none).
        if (t->cls && sparse_dataset_set_classes(s, i->labels, i->classes, err, err_len) != 0) goto fail;
        shape_train = s;
    } else if (kind == DATA_KIND_DENSE) {
        const dense_dataset_t *t = test;
        if (t->dim != i->dim || t->n_classes > i->classes) {
            snprintf(err, err_len,
                     "%s: %zu features per example and %zu classes; the model (%s) takes %llu features "
                     "and %llu classes",
                     data_name, t->dim, t->n_classes, d->name, (unsigned long long)i->dim,
                     (unsigned long long)i->classes);
            return -1;
        }
        dense_dataset_t *s = &out->shape.dense_train;
        if (dense_dataset_alloc(s, 1, i->dim, i->classes, err, err_len) != 0) goto fail;
        memset(s->x, 0, i->dim * sizeof *s->x);
        s->y[0] = 0;
        shape_train = s;
    } else {
        const ratings_t *t = test;
        if (t->n_users > i->users || t->n_items > i->items) {
            snprintf(err, err_len, "%s: %zu users and %zu items; the model (%s) knows %llu users and %llu items",
                     data_name, t->n_users, t->n_items, d->name, (unsigned long long)i->users,
                     (unsigned long long)i->items);
            return -1;
        }
        ratings_t *s = &out->shape.ratings_train;
        if (ratings_alloc(s, 1, i->users, i->items, err, err_len) != 0) goto fail;
        s->user[0] = s->item[0] = 0;
        s->rating[0] = i->mean;  // the model's mean is its training set's: exactly this float
        shape_train = s;
    }
    model_options_t opts;
    flag_spec_t specs[MODEL_MAX_FLAGS];
    model_shape_t shape;
    model_options_init(d, &opts, specs);
    shape_of_info(i, &shape);
    d->options_of_shape(&shape, &opts);
    out->model = model_create(d, kind, shape_train, test, &opts, 0.0, 0, err, err_len);
    if (!out->model) goto fail;
    if (model_num_params(out->model) != i->n_params) {
        snprintf(err, err_len, "the rebuilt %s has %zu parameters, the file %llu", d->name,
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
