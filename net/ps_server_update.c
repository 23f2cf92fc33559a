// A parameter-server shard's update application (ps_server_impl.h): its
// values and the optimizer's state, DC-ASGD's backups, ASP/SSP pushes applied
// (dense, a range of a push in parts, or sparse), the staleness they are
// measured at, and divergence.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/finite.h"
#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/trace.h"
#include "kernels/update.h"
#include "net/ps_server_impl.h"

static const trace_kind_t TK_APPLY = {"apply", "server", "worker"};  // asp/ssp: one push applied

// A shard of n values (their contents set by ps_update_start).
int ps_update_init(ps_update_t *u, const ps_config_t *c, size_t n) {
    size_t nw = c->n_workers, room = n ? n : 1;
    u->values = ps_values_new(n);
    if (u->values) u->w = ps_values_get(u->values);
    u->told_diverged = calloc(nw, 1);
    u->scratch_idx = malloc(room * sizeof *u->scratch_idx);
    u->scratch_g = malloc(room * sizeof *u->scratch_g);
    u->decoded = malloc(room * sizeof *u->decoded);
    if (c->stale.dc_lambda > 0) u->backup = malloc(nw * room * sizeof *u->backup);
    if (c->optimizer == OPTIMIZER_KIND_ADAGRAD) u->h = calloc(room, sizeof *u->h);
    if (!u->w || !u->told_diverged || !u->scratch_idx || !u->scratch_g || !u->decoded ||
        (c->stale.dc_lambda > 0 && !u->backup) || (c->optimizer == OPTIMIZER_KIND_ADAGRAD && !u->h))
        return -1;
    return 0;
}

// The values from init (NULL: zeros), and every worker's DC-ASGD backup with them.
void ps_update_start(ps_update_t *u, const float *init, size_t n, size_t n_workers) {
    size_t room = n ? n : 1;
    if (init)
        memcpy(u->w, init, n * sizeof *u->w);
    else
        memset(u->w, 0, n * sizeof *u->w);
    for (size_t k = 0; u->backup && k < n_workers; k++) memcpy(u->backup + k * room, u->w, n * sizeof *u->w);
}

void ps_update_free(ps_update_t *u) {
    ps_values_release(&u->values);
    free(u->h);
    free(u->told_diverged);
    free(u->scratch_idx);
    free(u->scratch_g);
    free(u->decoded);
    free(u->backup);
}

// Records an update's staleness (docs/distributed.md, "Staleness, measured"):
// in clocks, `round` (the first round the update covers: the rounds its worker
// had pushed before it) minus the min clock this shard reported with the
// oldest parameters the update was computed from, version `version`; in
// versions, this shard's version now minus `version`.
void ps_update_record_staleness(ps_server_t *s, uint32_t worker, uint64_t round, uint64_t version) {
    uint64_t read = ps_members_read_clock(s, worker, version), v = s->stats.version;
    uint64_t in_clocks = round > read ? round - read : 0, in_versions = v > version ? v - version : 0;
    staleness_hist_add(&s->stats.staleness_clocks, in_clocks);
    staleness_hist_add(&s->stats.staleness_updates, in_versions);
}

// The step for the next update: lr, or during warm-up lr * (version + 1) / warmup.
float ps_update_step(const ps_server_t *s) {
    uint64_t w = s->cfg.warmup, v = s->stats.version;
    if (w == 0 || v + 1 >= w) return s->cfg.lr;
    return (float)((double)s->cfg.lr * (double)(v + 1) / (double)w);
}

static void apply_dense(ps_server_t *s, const float *g, float lr) {
    ps_values_apply(s->upd.values, g, lr, s->upd.h, s->cfg.adagrad_eps);
    s->upd.w = ps_values_get(s->upd.values);
}

// The step worker k's ASP/SSP push h is applied with, all its parts alike:
// the warmed-up step as the push's staleness in versions makes it. Its
// staleness is recorded.
float ps_update_push_step(ps_server_t *s, uint32_t k, const wire_header_t *h) {
    ps_update_record_staleness(s, k, s->members.clocks.clock[k], h->param_version);
    uint64_t tau = s->stats.version > h->param_version ? s->stats.version - h->param_version : 0;
    return stale_update_lr(&s->cfg.stale, ps_update_step(s), tau);
}

// A sparse push's pairs, compensated for delay against backup (NULL: none).
static void apply_sparse(ps_server_t *s, zmsg_t *m, float lambda, const float *backup, float lr) {
    const wire_header_t *h = &m->h;
    // The kernels index by parameter; shift the indices into the shard.
    const uint32_t *idx = zmsg_payload(m, 0);
    const float *v = zmsg_payload(m, 1);
    uint32_t *local = s->upd.scratch_idx;
    for (uint32_t j = 0; j < h->count; j++) local[j] = idx[j] - (uint32_t)s->begin;
    if (backup) {
        for (uint32_t j = 0; j < h->count; j++) {
            float g = v[j];
            s->upd.scratch_g[j] = g + lambda * g * g * (s->upd.w[local[j]] - backup[local[j]]);
        }
        v = s->upd.scratch_g;
    }
    s->upd.w = ps_values_write(s->upd.values);
    if (s->upd.h)
        adagrad_update_sparse_cpu(h->count, lr, s->cfg.adagrad_eps, local, v, s->upd.h, s->upd.w);
    else
        sgd_update_sparse_cpu(h->count, lr, local, v, s->upd.w);
}

uint32_t ps_update_apply(ps_server_t *s, zmsg_t *m, size_t from, const float *dense, float lr, float *copy) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender, copy_sum = 0;
    uint64_t span = TRACE_BEGIN();
    // An ASP/SSP push sums the gradients of aux local steps (at least 1):
    // the compensation, made for one gradient, is spread over them.
    float lambda = (float)(s->cfg.stale.dc_lambda / (double)(h->aux ? h->aux : 1));
    const float *backup = s->upd.backup ? s->upd.backup + (size_t)k * s->n : NULL;
    if (dense) {
        size_t count = h->payload_kind == PAYLOAD_KIND_DENSE ? h->count : s->n;
        const float *g = dense;
        if (backup) {
            memcpy(s->upd.scratch_g, g, count * sizeof *g);
            dc_asgd_compensate(s->upd.scratch_g, s->upd.w + from, backup + from, count, lambda);
            g = s->upd.scratch_g;
        }
        if (count == s->n) {
            apply_dense(s, g, lr);
        } else {
            copy_sum = ps_values_apply_range(s->upd.values, from, count, g, lr, s->upd.h, s->cfg.adagrad_eps, copy);
            s->upd.w = ps_values_get(s->upd.values);
        }
    } else {
        apply_sparse(s, m, lambda, backup, lr);
    }
    TRACE_END(&TK_APPLY, span, k);
    return copy_sum;
}

int ps_update_push_finite(const ps_server_t *s, zmsg_t *m) {
    if (s->upd.push_finite >= 0) return s->upd.push_finite;  // found with the checksum
    const wire_header_t *h = &m->h;
    const void *values = zmsg_payload(m, h->payload_kind == PAYLOAD_KIND_SPARSE ? 1 : 0);
    return all_finite_cpu(values, h->count);
}

// The run has diverged: NaN or Inf reached an update. The shard keeps its
// parameters as they were before that push and refuses everything from now on.
// `from`: where the refused part starts (0: the push's first message), as
// the parts before it were applied.
void ps_update_mark_diverged(ps_server_t *s, const wire_header_t *h, size_t from) {
    if (s->upd.diverged) return;
    s->upd.diverged = 1;
    s->upd.diverged_at = mono_clock_s();
    char kept[96];
    if (from == 0)
        snprintf(kept, sizeof kept, "from before that push");
    else
        snprintf(kept, sizeof kept, "with that push applied to its first %zu parameters only", from);
    snprintf(s->upd.diverged_msg, sizeof s->upd.diverged_msg,
             "worker %u pushed an update holding NaN or Inf (its clock %llu): the run diverged; the shard kept its "
             "parameters %s (lower --lr or --server-lr)",
             h->sender, (unsigned long long)h->clock, kept);
    if (!s->cfg.quiet) fprintf(stderr, "asgd server %zu: %s\n", s->cfg.shard, s->upd.diverged_msg);
}

// DC-ASGD: worker k was sent [from, from + count) of the values as they are
// now, against which its next push is compensated.
void ps_update_remember_sent(ps_server_t *s, uint32_t k, size_t from, size_t count) {
    if (s->upd.backup) memcpy(s->upd.backup + (size_t)k * s->n + from, s->upd.w + from, count * sizeof(float));
}

const float *ps_server_values(const ps_server_t *s) { return s->upd.w; }
