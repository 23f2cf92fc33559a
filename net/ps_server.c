// A parameter-server shard (ps_server.h): made, resumed from a checkpoint,
// destroyed; its figures and its size. What it does lives by concern in
// ps_server_*.c (ps_server_impl.h lists them).
#include "net/ps_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/partition.h"
#include "net/ps_local_round.h"
#include "net/ps_server_impl.h"

// Whether c describes a shard this server can be.
static int config_check(const ps_config_t *c, char *err, size_t err_len) {
    if (c->n_shards == 0 || c->shard >= c->n_shards || c->n_workers == 0 || c->n_params == 0) {
        snprintf(err, err_len, "server: shard %zu of %zu, %zu workers, %zu parameters is not a valid layout", c->shard,
                 c->n_shards, c->n_workers, c->n_params);
        return -1;
    }
    if (c->mode == SYNC_MODE_BSP && (c->stale.staleness_aware || c->stale.dc_lambda > 0 || c->stale.delay_adaptive)) {
        snprintf(err, err_len,
                 "server: staleness-aware and delay-adaptive steps and DC-ASGD apply to asp and ssp; bsp updates are "
                 "never stale");
        return -1;
    }
    char why[160];
    if (stale_update_config_check(&c->stale, why, sizeof why) != 0) {
        snprintf(err, err_len, "server: %s", why);
        return -1;
    }
    if (c->mode == SYNC_MODE_ALLREDUCE) {
        snprintf(err, err_len, "server: --sync allreduce runs without parameter servers");
        return -1;
    }
    if (c->n_start_workers > c->n_workers) {
        snprintf(err, err_len, "server: %zu workers to start with, but room for %zu", c->n_start_workers, c->n_workers);
        return -1;
    }
    if (c->backup_workers > 0 && c->n_start_workers && c->n_start_workers < c->n_workers) {
        snprintf(err, err_len, "server: --backup-workers and --max-workers above --workers do not combine");
        return -1;
    }
    if (c->backup_workers > 0 && (c->mode != SYNC_MODE_BSP || c->backup_workers >= c->n_workers)) {
        snprintf(err, err_len, "server: --backup-workers %zu: applies to bsp, and must be below the %zu workers",
                 c->backup_workers, c->n_workers);
        return -1;
    }
    return 0;
}

// A shard with its state allocated and initialised from shard_init (NULL:
// zeros, for a shard about to be restored), not yet bound.
static ps_server_t *server_alloc(const ps_config_t *c, const float *shard_init, char *err, size_t err_len) {
    if (config_check(c, err, err_len) != 0) return NULL;
    ps_server_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "server: out of memory");
        return NULL;
    }
    s->cfg = *c;
    ps_progress_board_init(&s->board);
    shard_range(c->n_params, c->n_shards, c->shard, &s->begin, &s->end);
    s->n = s->end - s->begin;
    size_t nw = c->n_workers;
    if (ps_members_init(&s->members, nw) != 0 || ps_update_init(&s->upd, c, s->n) != 0 ||
        ps_once_init(&s->once, nw) != 0 || !(s->parts = calloc(nw, sizeof *s->parts)) ||
        (c->mode == SYNC_MODE_BSP && ps_bsp_init(&s->bsp, nw, s->n ? s->n : 1) != 0)) {
        snprintf(err, err_len, "server: out of memory for a shard of %zu parameters and %zu workers", s->n, nw);
        ps_server_destroy(&s);
        return NULL;
    }
    if (clock_table_init(&s->members.clocks, nw, err, err_len) != 0) {
        ps_server_destroy(&s);
        return NULL;
    }
    clock_table_set_start(&s->members.clocks, c->n_start_workers ? c->n_start_workers : nw);
    ps_update_start(&s->upd, shard_init, s->n, nw);
    staleness_hist_init(&s->stats.staleness_clocks);
    staleness_hist_init(&s->stats.staleness_updates);
    return s;
}

ps_server_t *ps_server_new(void *zmq_ctx, const ps_config_t *c, const char *endpoint, const float *shard_init,
                           char *err, size_t err_len) {
    ps_server_t *s = server_alloc(c, shard_init, err, err_len);
    if (s && ps_once_open_ledger(s, s->once.own_ledger, err, err_len) != 0) ps_server_destroy(&s);
    if (s && ps_loop_bind(s, zmq_ctx, endpoint, 0.0, err, err_len) != 0) ps_server_destroy(&s);
    return s;
}

ps_server_t *ps_server_resume(void *zmq_ctx, const ps_config_t *c, const char *endpoint, const char *path, char *err,
                              size_t err_len) {
    ckpt_file_t *f = ckpt_file_read(path, err, err_len);
    if (!f) return NULL;
    ps_server_t *s = server_alloc(c, NULL, err, err_len);
    uint64_t *at_checkpoint = calloc(2 * c->n_workers + 1, sizeof *at_checkpoint);
    char saved[256];
    if (s && !at_checkpoint) {
        snprintf(err, err_len, "server: out of memory");
        ps_server_destroy(&s);
    }
    if (s && ps_checkpoint_restore(s, f, saved, sizeof saved, at_checkpoint, err, err_len) != 0) ps_server_destroy(&s);
    ckpt_file_free(&f);
    if (s) ps_once_count_lost(s, path, at_checkpoint);
    free(at_checkpoint);
    if (s && ps_once_open_ledger(s, s->once.own_ledger, err, err_len) != 0) ps_server_destroy(&s);
    if (s && ps_loop_bind(s, zmq_ctx, endpoint ? endpoint : saved, 5.0, err, err_len) != 0) ps_server_destroy(&s);
    return s;
}

void ps_server_destroy(ps_server_t **sp) {
    if (!sp || !*sp) return;
    ps_server_t *s = *sp;
    ps_pulls_free(s);
    memory_guard_destroy(&s->guard);
    if (s->sock) zmq_close(s->sock);
    ps_members_free(&s->members);
    ps_update_free(&s->upd);
    ps_once_free(&s->once);
    free(s->parts);
    buffer_pool_release(&s->echo_pool);
    ps_bsp_free(&s->bsp, s->cfg.n_workers);
    ps_local_round_destroy(&s->local);  // after the round that may hold gradients read from it
    for (size_t k = 0; s->held_hellos && k < s->cfg.n_workers; k++)
        if (s->held_hellos[k].has_identity) zmsg_close(&s->held_hellos[k]);
    free(s->held_hellos);
    ps_progress_board_free(&s->board);
    free(s);
    *sp = NULL;
}

void ps_server_set_hooks(ps_server_t *s, const ps_server_hooks_t *h) { s->hooks = *h; }

int ps_server_hold_hellos(ps_server_t *s, const atomic_int *open, char *err, size_t err_len) {
    if (!(s->held_hellos = calloc(s->cfg.n_workers, sizeof *s->held_hellos))) {
        snprintf(err, err_len, "server: out of memory");
        return -1;
    }
    s->hellos_open = open;
    return 0;
}
void *ps_server_socket(ps_server_t *s) { return s->sock; }
const char *ps_server_endpoint(const ps_server_t *s) { return s->endpoint; }
void ps_server_range(const ps_server_t *s, size_t *begin, size_t *end) {
    *begin = s->begin;
    *end = s->end;
}
void ps_server_progress(const ps_server_t *s, ps_progress_t *out) { ps_progress_board_read(&s->board, out); }
void ps_server_progress_wait(ps_server_t *s, uint64_t samples, double timeout_s) {
    ps_progress_board_wait(&s->board, samples, timeout_s);
}
void ps_server_progress_wake(ps_server_t *s) { ps_progress_board_wake(&s->board); }

void ps_server_stats(const ps_server_t *s, ps_stats_t *out) {
    *out = s->stats;
    ps_values_counts_t vc;
    ps_values_counts(s->upd.values, &vc);
    out->replies_lent = vc.lent;
    out->replies_copied = vc.copied;
    out->writes_moved = vc.moved;
    out->min_clock = clock_table_min(&s->members.clocks);
    out->max_clock = clock_table_max(&s->members.clocks);
}

size_t ps_server_bytes_per_param(const ps_config_t *c) {
    // The values and the buffer they move to while a reply holds them; the
    // scratch of a sparse or encoded push (an index, a gradient, a decoded value).
    size_t bytes = 2 * sizeof(float) + sizeof(uint32_t) + 2 * sizeof(float);
    if (c->optimizer == OPTIMIZER_KIND_ADAGRAD) bytes += sizeof(float);
    if (c->stale.dc_lambda > 0) bytes += c->n_workers * sizeof(float);  // each worker's backup
    if (c->mode == SYNC_MODE_BSP) bytes += c->n_workers * sizeof(float);  // each worker's gradient of the round
    return bytes;
}
