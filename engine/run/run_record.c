// Result records (run_record.h): one writer and one reader per kind, both
// driven by the field tables below.
#include "engine/run/run_record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/run/dist.h"

static const char magic[8] = {'A', 'S', 'G', 'D', 'R', 'S', 'L', 'T'};
#define HEADER_BYTES 32
#define KIND_WORKER 1u
#define KIND_SERVER 2u

enum { T_U64 = 1, T_F64 = 2, T_U64S = 3, T_HIST = 4 };
static const char *const type_names[] = {"?", "u64", "f64", "u64 array", "histogram"};

typedef struct field {
    const char *name;
    uint8_t type;
    size_t offset;
} field_t;

#define WF(type, member) \
    { #member, type, offsetof(worker_result_t, member) }
static const field_t worker_fields[] = {
    WF(T_U64, id),
    WF(T_U64, metric_rmse),
    WF(T_U64, samples),
    WF(T_U64, updates),
    WF(T_U64, train_examples),
    WF(T_U64, pushes),
    WF(T_U64, local_rounds),
    WF(T_U64, left),
    WF(T_U64, global_versions),
    WF(T_U64, samples_to_target),
    WF(T_U64, bytes_out),
    WF(T_U64, bytes_in),
    WF(T_U64, bytes_out_uncompressed),
    WF(T_F64, wall_s),
    WF(T_F64, samples_per_s),
    WF(T_F64, wait_s),
    WF(T_F64, final_test_loss),
    WF(T_F64, final_test_metric),
    WF(T_F64, time_to_target_s),
    WF(T_F64, global_test_loss),
    WF(T_F64, global_test_metric),
    WF(T_U64, samples_retrained),
    WF(T_U64, samples_skipped),
    WF(T_U64, pulls),
    WF(T_U64, steps_per_push_p99),
    WF(T_U64, steps_per_pull_p99),
    WF(T_F64, pull_held_s),
    WF(T_U64, evicted),
};

// `workers` comes before the arrays it sizes.
#define SF(type, member) \
    { #member, type, offsetof(server_result_t, member) }
static const field_t server_fields[] = {
    SF(T_U64, id),
    SF(T_U64, run_id),
    SF(T_U64, lost_known),
    SF(T_U64, workers),
    SF(T_U64S, pushes_total),
    SF(T_U64S, pushes_lost),
    SF(T_U64S, late_dropped),
    SF(T_HIST, staleness_clocks),
    SF(T_HIST, staleness_updates),
};

#define N_FIELDS(table) (sizeof table / sizeof table[0])

void run_record_path(char *out, size_t len, const char *dir, int server, size_t id) {
    snprintf(out, len, "%s/%s-%zu.result", dir, server ? "server" : "worker", id);
}

// ---- writing ----------------------------------------------------------------------

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
    int failed;
} buf_t;

static void put_bytes(buf_t *b, const void *src, size_t n) {
    if (b->failed) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *grown = realloc(b->p, cap);
        if (!grown) {
            b->failed = 1;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_le(buf_t *b, uint64_t v, size_t bytes) {
    uint8_t le[8];
    for (size_t i = 0; i < bytes; i++) le[i] = (uint8_t)(v >> (8 * i));
    put_bytes(b, le, bytes);
}

static uint64_t f64_bits(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static void put_hist(buf_t *b, const staleness_hist_t *h) {
    put_le(b, h->count, 8);
    put_le(b, h->max, 8);
    put_le(b, f64_bits(h->sum), 8);
    put_le(b, STALENESS_HIST_BINS, 8);
    for (size_t i = 0; i < STALENESS_HIST_BINS; i++) put_le(b, h->bins[i], 8);
}

// Header and fields of one record; `workers` sizes the arrays.
static void encode(buf_t *b, uint32_t kind, const field_t *fields, size_t n, const void *r, uint64_t workers) {
    put_bytes(b, magic, sizeof magic);
    put_le(b, RUN_RECORD_VERSION, 4);
    put_le(b, kind, 4);
    put_le(b, n, 4);
    put_le(b, 0, 4);
    put_le(b, 0, 8);  // the fields' bytes, filled in below
    const uint8_t *base = r;
    for (size_t i = 0; i < n; i++) {
        const void *at = base + fields[i].offset;
        put_le(b, i, 2);
        put_le(b, fields[i].type, 1);
        put_le(b, 0, 1);
        if (fields[i].type == T_U64) {
            put_le(b, *(const uint64_t *)at, 8);
        } else if (fields[i].type == T_F64) {
            put_le(b, f64_bits(*(const double *)at), 8);
        } else if (fields[i].type == T_U64S) {
            const uint64_t *v = *(uint64_t *const *)at;
            put_le(b, workers, 8);
            for (uint64_t k = 0; k < workers; k++) put_le(b, v ? v[k] : 0, 8);
        } else {
            put_hist(b, at);
        }
    }
    if (!b->failed)
        for (size_t i = 0; i < 8; i++) b->p[24 + i] = (uint8_t)((uint64_t)(b->len - HEADER_BYTES) >> (8 * i));
}

static int write_record(const char *dir, int server, size_t id, uint32_t kind, const field_t *fields, size_t n,
                        const void *r, uint64_t workers, char *err, size_t err_len) {
    char name[64];
    snprintf(name, sizeof name, "%s-%zu.result", server ? "server" : "worker", id);
    buf_t b = {0};
    encode(&b, kind, fields, n, r, workers);
    int rc = -1;
    FILE *f = NULL;
    if (b.failed)
        snprintf(err, err_len, "%s/%s: out of memory", dir, name);
    else if ((f = dist_file_open(dir, name, err, err_len)) != NULL) {
        size_t put = fwrite(b.p, 1, b.len, f);
        rc = dist_file_close(f, dir, name, err, err_len);
        if (rc == 0 && put != b.len) {
            snprintf(err, err_len, "%s/%s: writing failed: %s", dir, name, strerror(errno));
            rc = -1;
        }
    }
    free(b.p);
    return rc;
}

int run_record_write_worker(const char *dir, const worker_result_t *r, char *err, size_t err_len) {
    return write_record(dir, 0, r->id, KIND_WORKER, worker_fields, N_FIELDS(worker_fields), r, 0, err, err_len);
}

int run_record_write_server(const char *dir, const server_result_t *r, char *err, size_t err_len) {
    return write_record(dir, 1, r->id, KIND_SERVER, server_fields, N_FIELDS(server_fields), r, r->workers, err,
                        err_len);
}

// ---- reading ----------------------------------------------------------------------

typedef struct cursor {
    const uint8_t *p;
    size_t len, at;
    const char *path;
    char *err;
    size_t err_len;
} cursor_t;

static uint64_t get_le(const uint8_t *p, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

// The next `bytes` bytes, or NULL with err: the file ends inside field `what`.
static const uint8_t *take(cursor_t *c, size_t bytes, const char *what) {
    if (c->len - c->at < bytes) {
        snprintf(c->err, c->err_len, "%s: cut short: it ends at byte %zu, inside field %s", c->path, c->len, what);
        return NULL;
    }
    const uint8_t *p = c->p + c->at;
    c->at += bytes;
    return p;
}

static int take_u64(cursor_t *c, const char *what, uint64_t *v) {
    const uint8_t *p = take(c, 8, what);
    if (!p) return -1;
    *v = get_le(p, 8);
    return 0;
}

static int take_f64(cursor_t *c, const char *what, double *v) {
    uint64_t u;
    if (take_u64(c, what, &u) != 0) return -1;
    memcpy(v, &u, sizeof *v);
    return 0;
}

static int take_array(cursor_t *c, const field_t *f, uint64_t workers, uint64_t **out) {
    uint64_t n;
    if (take_u64(c, f->name, &n) != 0) return -1;
    if (n != workers) {
        snprintf(c->err, c->err_len, "%s: field %s holds %llu entries for %llu workers", c->path, f->name,
                 (unsigned long long)n, (unsigned long long)workers);
        return -1;
    }
    if (n > (c->len - c->at) / 8) {
        snprintf(c->err, c->err_len, "%s: cut short: it ends inside field %s", c->path, f->name);
        return -1;
    }
    uint64_t *v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        snprintf(c->err, c->err_len, "%s: out of memory for field %s", c->path, f->name);
        return -1;
    }
    for (uint64_t k = 0; k < n; k++) v[k] = get_le(take(c, 8, f->name), 8);
    *out = v;
    return 0;
}

static int take_hist(cursor_t *c, const field_t *f, staleness_hist_t *h) {
    uint64_t bins;
    if (take_u64(c, f->name, &h->count) != 0 || take_u64(c, f->name, &h->max) != 0 ||
        take_f64(c, f->name, &h->sum) != 0 || take_u64(c, f->name, &bins) != 0)
        return -1;
    if (bins != STALENESS_HIST_BINS) {
        snprintf(c->err, c->err_len, "%s: field %s has %llu bins; this asgd counts %d", c->path, f->name,
                 (unsigned long long)bins, STALENESS_HIST_BINS);
        return -1;
    }
    const uint8_t *p = take(c, 8 * STALENESS_HIST_BINS, f->name);
    if (!p) return -1;
    for (size_t i = 0; i < STALENESS_HIST_BINS; i++) h->bins[i] = get_le(p + 8 * i, 8);
    return 0;
}

static const char *kind_name(uint64_t kind) {
    return kind == KIND_WORKER ? "worker" : kind == KIND_SERVER ? "server" : "unknown";
}

static int check_header(cursor_t *c, uint32_t kind, size_t n_fields) {
    if (c->len >= sizeof magic && memcmp(c->p, magic, sizeof magic) != 0) {
        snprintf(c->err, c->err_len, "%s: not a result record (it does not start with ASGDRSLT)", c->path);
        return -1;
    }
    const uint8_t *h = take(c, HEADER_BYTES, "header");
    if (!h) return -1;
    uint64_t version = get_le(h + 8, 4), got_kind = get_le(h + 12, 4), count = get_le(h + 16, 4);
    uint64_t body = get_le(h + 24, 8);
    if (version != RUN_RECORD_VERSION) {
        snprintf(c->err, c->err_len,
                 "%s: result record version %llu; this asgd reads version %u (rerun the run with "
                 "one asgd)",
                 c->path, (unsigned long long)version, RUN_RECORD_VERSION);
        return -1;
    }
    if (got_kind != kind) {
        snprintf(c->err, c->err_len, "%s: a %s record where a %s record belongs", c->path, kind_name(got_kind),
                 kind_name(kind));
        return -1;
    }
    if (count != n_fields) {
        snprintf(c->err, c->err_len, "%s: %llu fields; a version %u %s record has %zu", c->path,
                 (unsigned long long)count, RUN_RECORD_VERSION, kind_name(kind), n_fields);
        return -1;
    }
    if (body != c->len - HEADER_BYTES) {
        snprintf(c->err, c->err_len, "%s: %s: holds %zu bytes of fields, its header says %llu", c->path,
                 body > c->len - HEADER_BYTES ? "cut short" : "trailing bytes", c->len - HEADER_BYTES,
                 (unsigned long long)body);
        return -1;
    }
    return 0;
}

// Fields into r (arrays allocated); on failure the caller frees what was.
static int decode(cursor_t *c, uint32_t kind, const field_t *fields, size_t n, void *r, const uint64_t *workers) {
    if (check_header(c, kind, n) != 0) return -1;
    uint8_t *base = r;
    for (size_t i = 0; i < n; i++) {
        const field_t *f = &fields[i];
        const uint8_t *tag = take(c, 4, f->name);
        if (!tag) return -1;
        uint64_t index = get_le(tag, 2), type = tag[2];
        if (index != i || type != f->type) {
            snprintf(c->err, c->err_len, "%s: malformed: field %llu (%s) where field %zu (%s, %s) belongs", c->path,
                     (unsigned long long)index, type < 5 ? type_names[type] : "?", i, f->name, type_names[f->type]);
            return -1;
        }
        void *at = base + f->offset;
        int rc = f->type == T_U64    ? take_u64(c, f->name, at)
                 : f->type == T_F64  ? take_f64(c, f->name, at)
                 : f->type == T_U64S ? take_array(c, f, *workers, at)
                                     : take_hist(c, f, at);
        if (rc != 0) return -1;
    }
    return 0;
}

static int read_record(const char *dir, int server, size_t id, uint32_t kind, const field_t *fields, size_t n, void *r,
                       const uint64_t *workers, char *err, size_t err_len) {
    char path[1100];
    run_record_path(path, sizeof path, dir, server, id);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_len, "%s: %s: the %s wrote no result", path, strerror(errno), server ? "shard" : "worker");
        return -1;
    }
    size_t cap = 1 << 16, len = 0, got;
    uint8_t *p = malloc(cap);
    while (p && (got = fread(p + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len < cap) continue;
        uint8_t *grown = realloc(p, cap * 2);
        if (!grown) free(p);
        p = grown;
        cap *= 2;
    }
    int failed = p ? ferror(f) : 0;
    fclose(f);
    int rc = -1;
    if (!p)
        snprintf(err, err_len, "%s: out of memory", path);
    else if (failed)
        snprintf(err, err_len, "%s: cannot read: %s", path, strerror(errno));
    else {
        cursor_t c = {p, len, 0, path, err, err_len};
        rc = decode(&c, kind, fields, n, r, workers);
    }
    free(p);
    return rc;
}

int run_record_read_worker(const char *dir, size_t id, worker_result_t *r, char *err, size_t err_len) {
    memset(r, 0, sizeof *r);
    return read_record(dir, 0, id, KIND_WORKER, worker_fields, N_FIELDS(worker_fields), r, NULL, err, err_len);
}

int run_record_read_server(const char *dir, size_t id, server_result_t *r, char *err, size_t err_len) {
    memset(r, 0, sizeof *r);
    int rc = read_record(dir, 1, id, KIND_SERVER, server_fields, N_FIELDS(server_fields), r, &r->workers, err, err_len);
    if (rc != 0) server_result_free(r);
    return rc;
}

int server_result_alloc(server_result_t *r, size_t workers, char *err, size_t err_len) {
    r->workers = workers;
    r->pushes_total = calloc(workers ? workers : 1, sizeof *r->pushes_total);
    r->pushes_lost = calloc(workers ? workers : 1, sizeof *r->pushes_lost);
    r->late_dropped = calloc(workers ? workers : 1, sizeof *r->late_dropped);
    if (r->pushes_total && r->pushes_lost && r->late_dropped) return 0;
    server_result_free(r);
    snprintf(err, err_len, "out of memory for a result record of %zu workers", workers);
    return -1;
}

void server_result_free(server_result_t *r) {
    free(r->pushes_total);
    free(r->pushes_lost);
    free(r->late_dropped);
    r->pushes_total = r->pushes_lost = r->late_dropped = NULL;
}
