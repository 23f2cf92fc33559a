// A replica's checkpoints and its resume from one (asp and ssp; the file is
// engine/replica/worker_checkpoint.h's, the rules are in docs/reliability.md).
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/replica/replica_impl.h"
#include "engine/core/test_hooks.h"
#include "engine/replica/worker_checkpoint.h"
#include "net/ps_client.h"

int replica_ckpt_prepare(replica_t *r, char *err, size_t err_len) {
    const worker_ckpt_config_t *k = r->rc->ckpt;
    // Test build only (tests/e2e/test_worker_checkpoint.c): the first checkpoint
    // holding at least this many samples is the last; then the worker neither
    // pushes nor pulls, so that a test can kill it with work after its
    // checkpoint that no shard holds.
    const char *freeze = test_hook_value(TEST_HOOK_WORKER_FREEZE_AT_SAMPLES);
    if (freeze) r->freeze_at_samples = strtoull(freeze, NULL, 10);
    if (!k || !k->resume) return 0;
    if (worker_ckpt_load(k->path, &k->id, &r->resume, err, err_len) != 0) return -1;
    r->ckpt_seq = r->resume.seq;
    r->dead_steps = calloc(r->threads, sizeof *r->dead_steps);
    if (!r->dead_steps) return replica_out_of_memory(r, err, err_len);
    // How far the dead incarnation got, and what it carried; without its
    // file (it died before making it) nothing was trained after the checkpoint.
    char why[256];
    if (worker_progress_read(k->progress_path, r->threads, r->dead_steps, &r->carry_retrained, &r->carry_skipped, why,
                             sizeof why) != 0) {
        memcpy(r->dead_steps, r->resume.at.updates, r->threads * sizeof *r->dead_steps);
        r->carry_retrained = r->resume.retrained;
        r->carry_skipped = r->resume.skipped;
    }
    return 0;
}

int replica_ckpt_progress(replica_t *r, char *err, size_t err_len) {
    const worker_ckpt_config_t *k = r->rc->ckpt;
    return worker_progress_create(k->progress_path, r->threads, r->carry_retrained, r->carry_skipped, &r->progress_file,
                                  &r->progress, err, err_len);
}

// Samples thread t takes in steps [from, to) (0 when to <= from).
static uint64_t span_samples(const replica_t *r, const train_config_t *tc, size_t t, uint64_t from, uint64_t to) {
    if (to <= from) return 0;
    size_t len = worker_thread_len(model_num_train(r->model), r->rc->n_workers, r->rc->id, r->threads, t);
    return worker_steps_samples(len, tc->batch, to) - worker_steps_samples(len, tc->batch, from);
}

int replica_ckpt_resume(replica_t *r, train_config_t *tc, train_position_t *start, replica_stats_t *stats, char *err,
                        size_t err_len) {
    const worker_ckpt_t *ck = &r->resume;
    size_t T = r->threads;
    uint64_t joined = r->clock;  // the clock the servers gave it
    if (!start->samples) {
        start->threads = T;
        start->samples = calloc(T, sizeof *start->samples);
        start->updates = calloc(T, sizeof *start->updates);
        start->loss_sum = calloc(T, sizeof *start->loss_sum);
        if (!start->samples || !start->updates || !start->loss_sum) return replica_out_of_memory(r, err, err_len);
    }
    // The servers past the checkpoint (pushes of the dead incarnation after it
    // were applied, or the others moved on while it was away): their clock
    // wins, as for any rejoin, and the pending update went out (or is lost)
    // with the rounds it belonged to. Else it goes on exactly from the checkpoint.
    int past = joined > ck->clock;
    r->clock = past ? joined : ck->clock;
    uint64_t retrained = 0, skipped = 0, samples = 0;
    for (size_t t = 0; t < T; t++) {
        uint64_t p = ck->at.updates[t], s = p;
        if (past && r->clock * r->quota > s) s = r->clock * r->quota;
        start->updates[t] = s;
        start->samples[t] = s == p ? ck->at.samples[t] : ck->at.samples[t] + span_samples(r, tc, t, p, s);
        start->loss_sum[t] = ck->at.loss_sum[t];
        uint64_t dead = r->dead_steps[t] > p ? r->dead_steps[t] : p;
        retrained += span_samples(r, tc, t, s, dead);  // trained by the dead incarnation, and again from s
        skipped += span_samples(r, tc, t, dead, s);  // trained by neither
        samples += start->samples[t];
    }
    start->wall_s = ck->at.wall_s;
    tc->start = start;
    if (!past) {
        for (size_t j = 0; j < r->ps_n; j++) param_set(&r->w[j], r->base[j] + ck->pending[j]);
        r->strategy->resume_unpushed(r, ck->unpushed_steps);
    }
    r->carry_retrained += retrained;
    r->carry_skipped += skipped;
    r->progress_file.v[0] = r->carry_retrained;
    r->progress_file.v[1] = r->carry_skipped;
    stats->resumed = 1;
    stats->resumed_samples = samples;
    stats->resumed_clock = r->clock;
    stats->start_clock = r->clock;
    stats->samples_retrained = r->carry_retrained;
    stats->samples_skipped = r->carry_skipped;
    return 0;
}

int replica_ckpt_save(void *ctx, const train_position_t *at, const param_t *w, const optimizer_t *opt, char *err,
                      size_t err_len) {
    (void)opt;  // asp/ssp workers step with plain SGD: the optimizer keeps no state
    replica_t *r = ctx;
    if (atomic_load_explicit(&r->frozen, memory_order_acquire)) return 0;
    pthread_mutex_lock(&r->ckpt_mu);
    // Every push sent is acknowledged (applied): what the shards do not hold
    // is exactly the local copy's change since the last push.
    int rc = ps_client_wait_acks(r->client, err, err_len);
    if (rc == 0) {
        for (size_t j = 0; j < r->n; j++) r->val[j] = param_get(&w[j]) - r->base[j];
        uint64_t steps = 0;
        for (size_t t = 0; t < at->threads; t++) steps += at->updates[t];
        worker_ckpt_t c = {.seq = r->ckpt_seq + 1,
                           .clock = r->clock,
                           .retrained = r->carry_retrained,
                           .skipped = r->carry_skipped,
                           .at = *at,
                           .pending = r->val,
                           .unpushed_steps = r->strategy->unpushed_steps(r, steps)};
        const worker_ckpt_config_t *k = r->rc->ckpt;
        if (worker_ckpt_save(k, &c, err, err_len) == 0) {
            r->ckpt_seq++;
        } else {
            // Not fatal: the previous checkpoint stays, and training goes on.
            r->stats.checkpoint_failures++;
            if (k->on_failure) k->on_failure(k->failure_ctx, err);
            err[0] = '\0';
            rc = 1;
        }
        uint64_t samples = 0;
        for (size_t t = 0; t < at->threads; t++) samples += at->samples[t];
        if (rc == 0 && r->freeze_at_samples && samples >= r->freeze_at_samples)
            atomic_store_explicit(&r->frozen, 1, memory_order_release);
    }
    pthread_mutex_unlock(&r->ckpt_mu);
    return rc < 0 ? -1 : 0;
}

void replica_ckpt_free(replica_t *r) {
    if (r->progress_file.map) {
        counter_file_close(&r->progress_file);
        r->progress = NULL;  // it was in the mapping
    }
    worker_ckpt_free(&r->resume);
    free(r->dead_steps);
    if (r->ckpt_mu_ready) pthread_mutex_destroy(&r->ckpt_mu);
}
