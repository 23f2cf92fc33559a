// A parameter-server shard's state to and from a checkpoint file
// (ps_server_impl.h): what identifies the run, the values and optimizer
// state, the clocks, the ledger, the pushes in parts and the BSP round.
// The sections are written in one fixed order and read by name.
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/ps_server_impl.h"

// What identifies the run and the shard's layout; a checkpoint is resumed only
// into the same. (The step size may change on a resume.)
enum { ID_RUN, ID_SHARD, ID_SHARDS, ID_PARAMS, ID_WORKERS, ID_MODE, ID_OPTIMIZER, ID_BACKUP, ID_COUNT_ };
static const char *const id_names[ID_COUNT_] = {"run id",  "shard",     "shards",    "parameters",
                                                "workers", "sync mode", "optimizer", "DC-ASGD"};

static void identity_of(const ps_server_t *s, uint64_t id[ID_COUNT_]) {
    id[ID_RUN] = s->cfg.run_id;
    id[ID_SHARD] = s->cfg.shard;
    id[ID_SHARDS] = s->cfg.n_shards;
    id[ID_PARAMS] = s->cfg.n_params;
    id[ID_WORKERS] = s->cfg.n_workers;
    id[ID_MODE] = (uint64_t)s->cfg.mode;
    id[ID_OPTIMIZER] = (uint64_t)s->cfg.optimizer;
    id[ID_BACKUP] = s->upd.backup != NULL;
}

// An identity field's value as the flags say it: modes and optimizers by name.
static void identity_value(int field, uint64_t v, char *out, size_t len) {
    if (field == ID_MODE)
        snprintf(out, len, "%s", sync_mode_name((sync_mode_t)v));
    else if (field == ID_OPTIMIZER)
        snprintf(out, len, "%s", optimizer_kind_name((optimizer_kind_t)v));
    else if (field == ID_BACKUP)
        snprintf(out, len, "%s", v ? "on" : "off");
    else
        snprintf(out, len, "%llu", (unsigned long long)v);
}

// Ends a checkpoint that could not be written for want of memory.
static int out_of_memory(ckpt_writer_t **w, char *err, size_t err_len) {
    ckpt_writer_abort(w);
    snprintf(err, err_len, "server: out of memory writing a checkpoint");
    return -1;
}

// The pushes being taken in parts, four numbers per worker: flags (open,
// late, resent_lost), clock, next, the step's bits. A shard that adopts or
// resumes this state skips the parts it took and takes the rest.
enum { PARTS_FIELDS = 4 };

static int save_parts(const ps_server_t *s, ckpt_writer_t *w, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers;
    uint64_t *v = malloc(PARTS_FIELDS * nw * sizeof *v);
    if (!v) return out_of_memory(&w, err, err_len);
    for (size_t k = 0; k < nw; k++) {
        const push_parts_t *p = &s->parts[k];
        uint32_t lr_bits;
        memcpy(&lr_bits, &p->lr, sizeof lr_bits);
        v[PARTS_FIELDS * k] = (uint64_t)p->open | (uint64_t)p->late << 1 | (uint64_t)p->resent_lost << 2;
        v[PARTS_FIELDS * k + 1] = p->clock;
        v[PARTS_FIELDS * k + 2] = p->next;
        v[PARTS_FIELDS * k + 3] = lr_bits;
    }
    ckpt_writer_section(w, "ps.parts", v, PARTS_FIELDS * nw * sizeof *v);
    free(v);
    return 0;
}

// A checkpoint written before pushes came in parts has no such section: none is open.
static int restore_parts(ps_server_t *s, const ckpt_file_t *f, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers, size = 0;
    const uint64_t *v = ckpt_file_section(f, "ps.parts", &size);
    memset(s->parts, 0, nw * sizeof *s->parts);
    s->parts_applying = 0;
    if (!v) return 0;
    if (size != PARTS_FIELDS * nw * sizeof *v) {
        snprintf(err, err_len, "%s: section 'ps.parts' holds %zu bytes, not %zu", ckpt_file_path(f), size,
                 PARTS_FIELDS * nw * sizeof *v);
        return -1;
    }
    for (size_t k = 0; k < nw; k++) {
        push_parts_t *p = &s->parts[k];
        uint32_t lr_bits = (uint32_t)v[PARTS_FIELDS * k + 3];
        p->open = v[PARTS_FIELDS * k] & 1, p->late = (v[PARTS_FIELDS * k] >> 1) & 1;
        p->resent_lost = (v[PARTS_FIELDS * k] >> 2) & 1;
        p->clock = v[PARTS_FIELDS * k + 1];
        p->next = v[PARTS_FIELDS * k + 2];
        memcpy(&p->lr, &lr_bits, sizeof p->lr);
        if (p->next > s->n) {
            snprintf(err, err_len,
                     "%s: section 'ps.parts': worker %zu's push resumes at %llu, beyond the shard's %zu "
                     "parameters",
                     ckpt_file_path(f), k, (unsigned long long)p->next, s->n);
            return -1;
        }
        if (p->open && s->cfg.mode != SYNC_MODE_BSP) s->parts_applying++;
    }
    return 0;
}

// The counters kept across a restart, in their order in section "ps.counters".
static const size_t counter_at[] = {
    offsetof(ps_server_t, stats.version),        offsetof(ps_server_t, stats.pushes_applied),
    offsetof(ps_server_t, stats.pulls_answered), offsetof(ps_server_t, stats.pulls_waited),
    offsetof(ps_server_t, stats.bytes_in),       offsetof(ps_server_t, stats.bytes_out),
    offsetof(ps_server_t, stats.rejected),       offsetof(ps_server_t, stats.duplicates),
    offsetof(ps_server_t, stats.evictions),      offsetof(ps_server_t, stats.rejoins),
    offsetof(ps_server_t, stats.rounds_skipped), offsetof(ps_server_t, bsp.clock)};
enum { CT_COUNT_ = sizeof counter_at / sizeof *counter_at };

// The identity, the endpoint, the counters, and the values with the optimizer's state.
static void save_shard(const ps_server_t *s, ckpt_writer_t *w) {
    uint64_t id[ID_COUNT_], counters[CT_COUNT_];
    for (size_t i = 0; i < CT_COUNT_; i++) counters[i] = *(const uint64_t *)((const char *)s + counter_at[i]);
    identity_of(s, id);
    ckpt_writer_section(w, "ps.identity", id, sizeof id);
    ckpt_writer_section(w, "ps.endpoint", s->endpoint, strlen(s->endpoint));
    ckpt_writer_section(w, "ps.counters", counters, sizeof counters);
    ckpt_writer_section(w, "ps.values", s->upd.w, s->n * sizeof *s->upd.w);
    if (s->upd.h) ckpt_writer_section(w, "ps.adagrad", s->upd.h, s->n * sizeof *s->upd.h);
}

static void save_clocks(const ps_server_t *s, ckpt_writer_t *w) {
    size_t nw = s->cfg.n_workers;
    const clock_table_t *t = &s->members.clocks;
    ckpt_writer_section(w, "ps.clock", t->clock, nw * sizeof *t->clock);
    ckpt_writer_section(w, "ps.joined", t->joined, nw);
    ckpt_writer_section(w, "ps.left", t->left, nw);
    ckpt_writer_section(w, "ps.evicted", t->evicted, nw);
    ckpt_writer_section(w, "ps.pushes", t->pushes, nw * sizeof *t->pushes);
    ckpt_writer_section(w, "ps.pushes_total", t->pushes_total, nw * sizeof *t->pushes_total);
    ckpt_writer_section(w, "ps.read_min", s->members.read_min_clock, nw * sizeof *s->members.read_min_clock);
}

// What each worker's pushes have claimed (ps_members_clock_plausible) and
// the HELLOs answered: a backup that adopts this state judges the next push
// and answers a resent HELLO as the primary does.
static int save_claims(const ps_server_t *s, ckpt_writer_t *w, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers;
    uint64_t *claims = malloc(2 * nw * sizeof *claims);
    if (!claims) return out_of_memory(&w, err, err_len);
    for (size_t k = 0; k < nw; k++)
        claims[2 * k] = s->members.claim[k].base, claims[2 * k + 1] = s->members.claim[k].steps;
    ckpt_writer_section(w, "ps.claims", claims, 2 * nw * sizeof *claims);
    free(claims);
    ckpt_writer_section(w, "ps.hellos", s->members.hello, nw * sizeof *s->members.hello);
    return 0;
}

// The round's gradients, dense (a sparse one written out for the file).
static int save_bsp(const ps_server_t *s, ckpt_writer_t *w, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers;
    const void **parts = malloc(nw * sizeof *parts);
    size_t *sizes = malloc(nw * sizeof *sizes);
    float **dense = calloc(nw, sizeof *dense);
    int ok = parts && sizes && dense;
    for (size_t k = 0; ok && k < nw; k++) {
        const uint32_t *keys;
        const float *values;
        size_t count = ps_bsp_sparse(s, k, &keys, &values);
        parts[k] = ps_bsp_gradient(s, k), sizes[k] = s->n * sizeof *s->bsp.grad;
        if (count == 0) continue;
        if (!(dense[k] = malloc(s->n * sizeof **dense))) ok = 0;
        if (ok) ps_bsp_scatter(s, keys, values, count, dense[k]), parts[k] = dense[k];
    }
    if (ok) ckpt_writer_section_parts(w, "bsp.grad", parts, sizes, nw);
    for (size_t k = 0; dense && k < nw; k++) free(dense[k]);
    free(parts), free(sizes), free(dense);
    if (!ok) return out_of_memory(&w, err, err_len);
    ckpt_writer_section(w, "bsp.examples", s->bsp.examples, nw * sizeof *s->bsp.examples);
    ckpt_writer_section(w, "bsp.version", s->bsp.version, nw * sizeof *s->bsp.version);
    return 0;
}

int ps_server_save(const ps_server_t *s, const char *path, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers;
    ckpt_writer_t *w = ckpt_writer_open(path, err, err_len);
    if (!w) return -1;
    save_shard(s, w);
    save_clocks(s, w);
    ckpt_writer_section(w, "ps.duplicates", s->once.duplicates_by, nw * sizeof *s->once.duplicates_by);
    if (save_claims(s, w, err, err_len) != 0) return -1;
    ckpt_writer_section(w, "ps.lost", s->once.lost_by, nw * sizeof *s->once.lost_by);
    ckpt_writer_section(w, "ps.resend", s->once.resend_clock, nw * sizeof *s->once.resend_clock);
    ckpt_writer_section(w, "ps.ledger", s->once.ledger, 2 * nw * sizeof *s->once.ledger);
    if (save_parts(s, w, err, err_len) != 0) return -1;
    ckpt_writer_section(w, "ps.stale_clocks", &s->stats.staleness_clocks, sizeof s->stats.staleness_clocks);
    ckpt_writer_section(w, "ps.stale_vers", &s->stats.staleness_updates, sizeof s->stats.staleness_updates);
    if (s->bsp.grad && save_bsp(s, w, err, err_len) != 0) return -1;
    if (s->upd.backup) ckpt_writer_section(w, "dc.backup", s->upd.backup, nw * s->n * sizeof *s->upd.backup);
    return ckpt_writer_commit(&w, err, err_len);
}

// The checkpoint is of this run and layout.
static int check_identity(const ps_server_t *s, const ckpt_file_t *f, char *err, size_t err_len) {
    uint64_t want[ID_COUNT_], have[ID_COUNT_];
    identity_of(s, want);
    if (ckpt_file_get(f, "ps.identity", have, sizeof have, err, err_len) != 0) return -1;
    for (int i = 0; i < ID_COUNT_; i++) {
        if (have[i] == want[i]) continue;
        char its[48], ours[48];
        identity_value(i, have[i], its, sizeof its);
        identity_value(i, want[i], ours, sizeof ours);
        snprintf(err, err_len, "%s: a checkpoint of another run or layout: its %s is %s, this server's %s",
                 ckpt_file_path(f), id_names[i], its, ours);
        return -1;
    }
    return 0;
}

static int restore_endpoint(const ckpt_file_t *f, char *endpoint, size_t endpoint_len, char *err, size_t err_len) {
    size_t len = 0;
    const char *ep = ckpt_file_section(f, "ps.endpoint", &len);
    if (!ep || len == 0 || len >= endpoint_len) {
        snprintf(err, err_len, "%s: no valid section 'ps.endpoint'", ckpt_file_path(f));
        return -1;
    }
    memcpy(endpoint, ep, len);
    endpoint[len] = '\0';
    return 0;
}

static int restore_clocks(ps_server_t *s, const ckpt_file_t *f, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers;
    clock_table_t *t = &s->members.clocks;
    if (ckpt_file_get(f, "ps.clock", t->clock, nw * sizeof *t->clock, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.joined", t->joined, nw, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.left", t->left, nw, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.evicted", t->evicted, nw, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.pushes", t->pushes, nw * sizeof *t->pushes, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.pushes_total", t->pushes_total, nw * sizeof *t->pushes_total, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.read_min", s->members.read_min_clock, nw * sizeof *s->members.read_min_clock, err,
                      err_len) != 0)
        return -1;
    return 0;
}

// ledger_at_checkpoint (2 n_workers) receives the ledger as the checkpoint saw it.
static int restore_once(ps_server_t *s, const ckpt_file_t *f, uint64_t *ledger_at_checkpoint, char *err,
                        size_t err_len) {
    size_t nw = s->cfg.n_workers;
    ps_once_t *o = &s->once;
    if (ckpt_file_get(f, "ps.duplicates", o->duplicates_by, nw * sizeof *o->duplicates_by, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.lost", o->lost_by, nw * sizeof *o->lost_by, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.resend", o->resend_clock, nw * sizeof *o->resend_clock, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.ledger", ledger_at_checkpoint, 2 * nw * sizeof *ledger_at_checkpoint, err, err_len) != 0)
        return -1;
    return 0;
}

static int restore_bsp(ps_server_t *s, const ckpt_file_t *f, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers;
    if (ckpt_file_get(f, "bsp.grad", s->bsp.grad, nw * s->n * sizeof *s->bsp.grad, err, err_len) != 0 ||
        ckpt_file_get(f, "bsp.examples", s->bsp.examples, nw * sizeof *s->bsp.examples, err, err_len) != 0 ||
        ckpt_file_get(f, "bsp.version", s->bsp.version, nw * sizeof *s->bsp.version, err, err_len) != 0)
        return -1;
    for (size_t k = 0; k < nw; k++) ps_bsp_release(s, k);  // the checkpoint's gradients are in bsp.grad now
    return 0;
}

int ps_checkpoint_restore(ps_server_t *s, const ckpt_file_t *f, char *endpoint, size_t endpoint_len,
                          uint64_t *ledger_at_checkpoint, char *err, size_t err_len) {
    size_t nw = s->cfg.n_workers, n = s->n;
    uint64_t counters[CT_COUNT_];
    if (check_identity(s, f, err, err_len) != 0 || restore_endpoint(f, endpoint, endpoint_len, err, err_len) != 0)
        return -1;
    if (ckpt_file_get(f, "ps.counters", counters, sizeof counters, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.values", ps_values_write(s->upd.values), n * sizeof *s->upd.w, err, err_len) != 0 ||
        (s->upd.h && ckpt_file_get(f, "ps.adagrad", s->upd.h, n * sizeof *s->upd.h, err, err_len) != 0) ||
        restore_clocks(s, f, err, err_len) != 0 || restore_once(s, f, ledger_at_checkpoint, err, err_len) != 0 ||
        ckpt_file_get(f, "ps.stale_clocks", &s->stats.staleness_clocks, sizeof s->stats.staleness_clocks, err,
                      err_len) != 0 ||
        ckpt_file_get(f, "ps.stale_vers", &s->stats.staleness_updates, sizeof s->stats.staleness_updates, err,
                      err_len) != 0 ||
        restore_parts(s, f, err, err_len) != 0 || (s->bsp.grad && restore_bsp(s, f, err, err_len) != 0))
        return -1;
    if (s->upd.backup &&
        ckpt_file_get(f, "dc.backup", s->upd.backup, nw * n * sizeof *s->upd.backup, err, err_len) != 0)
        return -1;
    for (size_t i = 0; i < CT_COUNT_; i++) *(uint64_t *)((char *)s + counter_at[i]) = counters[i];
    s->stats.resumed_version = s->stats.version;
    s->resumed = 1;
    for (size_t k = 0; k < nw; k++) s->members.claim[k].unanchored = 1;
    return 0;
}

int ps_server_adopt(ps_server_t *s, const char *path, char *err, size_t err_len) {
    ckpt_file_t *f = ckpt_file_read(path, err, err_len);
    if (!f) return -1;
    char saved[256];
    uint64_t resumed_version = s->stats.resumed_version;
    int rc = ps_checkpoint_restore(s, f, saved, sizeof saved, s->once.ledger, err, err_len);
    if (rc == 0) {
        s->resumed = 0;  // a copy of a live shard: nothing was lost
        // Its claims too, so that the backup refuses exactly the pushes the
        // primary refuses (a crash-resume instead re-anchors on the next push).
        size_t nw = s->cfg.n_workers, size = 0;
        const uint64_t *claims = ckpt_file_section(f, "ps.claims", &size);
        if (claims && size == 2 * nw * sizeof *claims)
            for (size_t k = 0; k < nw; k++)
                s->members.claim[k] = (struct clock_claim){.base = claims[2 * k], .steps = claims[2 * k + 1]};
        const void *hellos = ckpt_file_section(f, "ps.hellos", &size);
        if (hellos && size == nw * sizeof *s->members.hello) memcpy(s->members.hello, hellos, size);
        s->stats.resumed_version = resumed_version;
    }
    ckpt_file_free(&f);
    return rc;
}
