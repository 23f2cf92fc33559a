// A worker replica of a distributed run (replica.h): its state and the common
// path every sync mode takes; what differs by mode is the mode's strategy
// (sync_strategy.h), and what the strategies share is in replica_shared.c.
#include "engine/replica/replica.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/core/test_hooks.h"
#include "engine/replica/collective.h"
#include "engine/replica/replica_impl.h"
#include "kernels/foundation/partition.h"
#include "net/compress.h"
#include "net/ps_client.h"
#include "net/ps_heartbeat.h"
#include "net/wire.h"

// ---- the common path -----------------------------------------------------------------

// The replica's settings, its strategy chosen from the sync mode, and the
// run's settings checked against it. Returns 0, or -1 with err filled.
static int replica_init(replica_t *r, const replica_config_t *rc, const model_t *m, const optimizer_config_t *oc,
                        const train_config_t *tc, char *err, size_t err_len) {
    memset(r, 0, sizeof *r);
    r->rc = rc;
    r->model = m;
    r->n = model_num_params(m);
    r->threads = tc->threads;
    r->batch = tc->batch;
    r->sparse = !model_grad_is_dense(m);
    r->lr = (float)oc->lr;
    r->eval_limit = tc->eval_limit;
    r->ps_n = r->n;
    r->read_bound = STALENESS_INFINITE;
    r->quota = (rc->push_every + r->threads - 1) / r->threads;
    if (r->quota == 0) r->quota = 1;
    const sync_strategy_t *s = r->strategy = sync_strategy_for(rc->mode);
    if (!s) {
        snprintf(err, err_len, "--sync: mode %d is not one of " SYNC_MODE_CHOICES, (int)rc->mode);
        return -1;
    }
    if (s->check && s->check(r, oc, err, err_len) != 0) return -1;
    if (rc->gpu && !s->gpu) {
        snprintf(err, err_len,
                 "--device cuda: GPU replicas run --sync asp and ssp (Downpour); bsp and allreduce "
                 "replicas run on the CPU");
        return -1;
    }
    if (s->ring && !rc->collective) {
        snprintf(err, err_len, "--sync %s needs a ring of workers", sync_mode_name(rc->mode));
        return -1;
    }
    int mpi = rc->collective && collective_kind(rc->collective) == COLLECTIVE_MPI;
    if (rc->collective && !mpi && !collective_compresses(rc->collective) && rc->compress.kind != COMPRESS_KIND_NONE) {
        snprintf(err, err_len,
                 "--compress: compressed exchanges go round the ZeroMQ ring, not through shared memory or "
                 "the stream ring");
        return -1;
    }
    if (rc->ckpt && s != &sync_strategy_downpour) {
        snprintf(err, err_len, "--checkpoint-every, --resume: workers checkpoint under --sync asp and ssp only");
        return -1;
    }
    if (mpi && rc->compress.kind != COMPRESS_KIND_NONE) {
        snprintf(err, err_len, "--compress: compressed exchanges go round the ring, not through MPI");
        return -1;
    }
    // Test build only (tests/e2e/test_ssp_bound.c): the threads run as under asp
    // while the run stays ssp, so that a test can show the bound it checks is
    // one the gate enforces.
    const char *gate_off = test_hook_value(TEST_HOOK_SSP_GATE_OFF);
    if (gate_off && strcmp(gate_off, "1") == 0) r->read_bound = STALENESS_INFINITE;
    return 0;
}

// The buffers every mode uses, then the strategy's own. Returns 0, or -1.
static int replica_alloc(replica_t *r, char *err, size_t err_len) {
    r->w = params_new(r->n, err, err_len);
    if (!r->w) return -1;
    r->base = malloc(r->n * sizeof *r->base);
    r->pulled = malloc(r->n * sizeof *r->pulled);
    r->idx = malloc(r->n * sizeof *r->idx);
    r->val = malloc(r->n * sizeof *r->val);
    // A worker that checkpoints keeps its threads' progress in a mapped file,
    // which tells its next incarnation how far it got (replica_checkpoint.c).
    if (r->rc->ckpt) {
        if (replica_ckpt_progress(r, err, err_len) != 0) return -1;
    } else {
        r->progress = aligned_alloc(64, ((r->threads * sizeof *r->progress + 63) / 64) * 64);
    }
    for (size_t t = 0; r->progress && t < r->threads; t++) {
        atomic_init(&r->progress[t].steps, 0);
        atomic_init(&r->progress[t].wait_ns, 0);
        atomic_init(&r->progress[t].finished, 0);
        atomic_init(&r->progress[t].read_gen, 0);
    }
    // The collective's input area (in shared memory the segment's, which
    // saves the sum its copy in).
    if (r->strategy->ring) r->ring_buf = collective_buffer(r->rc->collective);
    if (!r->base || !r->pulled || !r->idx || !r->val || !r->progress || (r->strategy->ring && !r->ring_buf))
        return replica_out_of_memory(r, err, err_len);
    atomic_init(&r->abort, 0);
    atomic_init(&r->frozen, 0);
    if (pthread_mutex_init(&r->ckpt_mu, NULL) != 0) return replica_out_of_memory(r, err, err_len);
    r->ckpt_mu_ready = 1;
    atomic_init(&r->allowance, UINT64_MAX);
    return r->strategy->alloc ? r->strategy->alloc(r, err, err_len) : 0;
}

// A rejoining worker's threads start where its clock puts them in the data
// order: under hogwild each thread after its quota of steps of every round
// done, in sync mode after the rounds done.
static int rejoin_position(const replica_t *r, train_config_t *tc, train_position_t *start, char *err, size_t err_len) {
    start->threads = r->threads;
    start->samples = calloc(r->threads, sizeof *start->samples);
    start->updates = calloc(r->threads, sizeof *start->updates);
    start->loss_sum = calloc(r->threads, sizeof *start->loss_sum);
    if (!start->samples || !start->updates || !start->loss_sum) {
        snprintf(err, err_len, "worker: out of memory");
        return -1;
    }
    for (size_t t = 0; t < r->threads; t++)
        start->updates[t] = tc->mode == TRAIN_MODE_HOGWILD ? r->clock * r->quota : (t == 0 ? r->clock : 0);
    tc->start = start;
    return 0;
}

// A fresh worker (the servers gave it clock 0; not resuming a checkpoint) of
// a model read by key, exchanging with the servers only (asp, ssp, bsp):
// every shard started from the seeded model this worker makes itself.
static int starts_from_seed(const replica_t *r) {
    // A worker holding only its working set numbers its rows its own way: the
    // seed would give them the servers' values of other rows.
    return r->clock == 0 && !(r->rc->ckpt && r->rc->ckpt->resume) && model_num_sparse_params(r->model) > 0 &&
           r->strategy->servers && !r->strategy->ring && !r->rc->key_map;
}

// Joins the servers: the client (and its heartbeats), the model they hold
// (the part they hold), and the clock they give this worker, from which a
// rejoining worker goes on.
static int join_servers_now(replica_t *r, void *zmq_ctx, uint64_t init_seed, train_config_t *tc,
                            train_position_t *start, replica_stats_t *stats, char *err, size_t err_len) {
    const replica_config_t *rc = r->rc;
    r->client = ps_client_new_joiner(zmq_ctx, rc->run_id, (uint32_t)rc->id, rc->join_nonce, rc->servers, rc->n_servers,
                                     rc->key_map ? rc->key_map->n_global : r->ps_n, rc->heartbeat_ms, rc->timeout_ms,
                                     err, err_len);
    if (!r->client) return -1;
    if (rc->key_map && ps_client_set_key_map(r->client, rc->key_map, err, err_len) != 0) return -1;
    ps_client_set_abort(r->client, rc->servers_finished);
    ps_client_count_pushes(r->client, rc->push_counts);
    if (rc->retry_ms > 0) ps_client_set_retry_ms(r->client, rc->retry_ms);
    if (rc->heartbeat_ms > 0) {
        r->heartbeat = ps_heartbeat_start(zmq_ctx, rc->run_id, (uint32_t)rc->id, rc->servers, rc->n_servers,
                                          rc->heartbeat_ms, err, err_len);
        if (!r->heartbeat) return -1;
    }
    r->clock = ps_client_join_clock(r->client);
    if (starts_from_seed(r)) {
        // The servers' version 0, which a worker of a model read by key need
        // not pull: its pulls bring the keys its steps read.
        model_init_params(r->model, r->w, init_seed);
        params_read(r->w, r->n, r->base);
        r->g_read = 0;
    } else {
        uint64_t min_clock;
        if (ps_client_pull(r->client, 0, r->pulled, &min_clock, err, err_len) != 0) return -1;
        // What the servers do not hold (hybrid's dense part) starts where every replica's does, from the seed.
        if (r->ps_n < r->n) model_init_params(r->model, r->w, init_seed);
        for (size_t j = 0; j < r->ps_n; j++) param_set(&r->w[j], r->pulled[j]);
        memcpy(r->base, r->pulled, r->ps_n * sizeof *r->base);
        r->g_read = min_clock;
    }
    stats->start_clock = r->clock;
    return r->clock > 0 ? rejoin_position(r, tc, start, err, err_len) : 0;
}

// The join, a span of a --trace timeline (docs/trace.md): its clock is where
// the worker goes on from (above 0: a rejoin, after a restart or an eviction).
static int join_servers(replica_t *r, void *zmq_ctx, uint64_t init_seed, train_config_t *tc, train_position_t *start,
                        replica_stats_t *stats, char *err, size_t err_len) {
    static const trace_kind_t join = {"join", "net", "clock"};
    uint64_t span = TRACE_BEGIN();
    int rc = join_servers_now(r, zmq_ctx, init_seed, tc, start, stats, err, err_len);
    TRACE_END(&join, span, r->clock);
    return rc;
}

// The compressor and buffers a compressed run needs, sized once.
static int compression_setup(replica_t *r, char *err, size_t err_len) {
    const replica_config_t *rc = r->rc;
    if (rc->compress.kind == COMPRESS_KIND_NONE) return 0;
    // Dense pushes to the servers' shards (asp, ssp, bsp), or the ring's sums
    // (allreduce, local SGD, hybrid's dense part).
    int to_servers = r->strategy->servers && !r->strategy->ring;
    if (to_servers && r->sparse) {
        snprintf(err, err_len,
                 "--compress %s: this model's pushes are already (index, value) pairs of the touched parameters; "
                 "compression applies to dense models and to allreduce",
                 compress_kind_name(rc->compress.kind));
        return -1;
    }
    size_t max_n = r->n;
    if (to_servers) {
        size_t begin, end;
        shard_range(r->n, rc->n_servers, 0, &begin, &end);  // shard 0 is the longest
        max_n = end - begin;
        r->enc_bytes = calloc(rc->n_servers, sizeof *r->enc_bytes);
        if (!r->enc_bytes) goto oom;
    }
    r->comp = compressor_new(&rc->compress, max_n, rc->compress_seed, 0x434f4d50u + rc->id, err, err_len);
    if (!r->comp) return -1;
    if (rc->error_feedback && ef_residual_init(&r->resid, r->n, err, err_len) != 0) return -1;
    return 0;
oom:
    snprintf(err, err_len, "worker: out of memory for compression buffers");
    return -1;
}

// The replica's optimizer and, with --device cuda, the GPU the steps run on.
static int make_optimizer_and_device(replica_t *r, const optimizer_config_t *oc, train_config_t *tc, char *err,
                                     size_t err_len) {
    optimizer_config_t local_oc = *oc;
    if (r->strategy->constant_local_step) local_oc.warmup = 0;  // the servers warm up their step (--warmup)
    if (!(r->opt = optimizer_new(&local_oc, r->n, err, err_len))) return -1;
    if (!r->rc->gpu) return 0;
    if (!(r->gpu = gpu_model_new(r->model, &local_oc, r->rc->gpu, tc->batch, err, err_len))) return -1;
    tc->device = &gpu_device_ops;
    tc->device_handle = r->gpu;
    return 0;
}

// How the trainer reaches this replica (train_link_t): the strategy's hooks.
static void link_init(replica_t *r, train_config_t *tc) {
    train_link_t *l = &r->link;
    l->rank = r->rc->id;
    l->ranks = r->rc->n_workers;
    l->step_allowance = &r->allowance;
    l->progress = r->progress;
    l->abort = &r->abort;
    l->ctx = r;
    l->exchange = r->strategy->exchange;
    l->exchange_step = r->strategy->exchange_step;
    l->sum_buffer = r->strategy->exchange_step ? r->ring_buf : NULL;
    l->prepare = r->strategy->prepare;
    l->refresh = r->strategy->refresh;
    l->step_delay = r->rc->delay;
    tc->link = l;
}

// The dense part's bits (the whole model when it has no sparse part):
// replicas that apply the same updates report the same checksum.
static void dense_checksum(replica_t *r, replica_stats_t *stats) {
    size_t S = r->ps_n < r->n ? r->ps_n : 0;  // hybrid: the sparse part is the servers
    for (size_t j = S; j < r->n; j++) r->pulled[j - S] = param_get(&r->w[j]);
    stats->dense_checksum = wire_checksum(r->pulled, (r->n - S) * sizeof(float), 0);
}

// After a good run: the global model's figures, the goodbye, final_w and the
// dense part's checksum.
static int replica_finish(replica_t *r, const train_result_t *out, replica_stats_t *stats, float *final_w, char *err,
                          size_t err_len) {
    const sync_strategy_t *s = r->strategy;
    stats->global_test_loss = stats->global_test_metric = NAN;
    if (s->servers) {
        if (ps_client_wait_acks(r->client, err, err_len) != 0) return -1;
        if (s->global(r, out, stats, err, err_len) != 0) return -1;
        if (ps_client_bye(r->client, err, err_len) != 0) return -1;
    }
    // The model that matters: under asp/ssp the servers' (as the global
    // evaluation pulled it after this replica's last push), not the local
    // copy; under bsp, allreduce, local SGD and hybrid the replica holds it.
    if (final_w && s->final_from_servers)
        memcpy(final_w, r->pulled, r->n * sizeof *final_w);
    else if (final_w)
        params_read(r->w, r->n, final_w);
    dense_checksum(r, stats);
    return 0;
}

// The replica's figures, whatever became of the run.
static void replica_report(const replica_t *r, int failed, replica_stats_t *stats) {
    stats->wait_s = r->stats.wait_s;
    // Threads held by the staleness bound (asp/ssp; zero where none waits).
    for (size_t t = 0; r->progress && t < r->threads; t++)
        stats->wait_s += 1e-9 * (double)atomic_load_explicit(&r->progress[t].wait_ns, memory_order_relaxed);
    stats->clock = r->clock;
    const collective_t *coll = r->strategy && r->strategy->ring ? r->rc->collective : NULL;
    double coll_waited = coll ? collective_waited_s(coll) : NAN;
    if (!isnan(coll_waited)) stats->wait_s += coll_waited;  // the ring modes' sums, held by slower workers
    stats->collective = coll ? collective_name(collective_kind(coll)) : NULL;
    stats->cross_ring = coll ? collective_cross_ring(coll) : NULL;
    stats->pushes = r->stats.pushes;
    stats->pulls = r->stats.pulls;
    stats->steps_per_push_mean = stats->steps_per_pull_mean = NAN;  // none measured but the mode's
    stats->steps_per_push_p99 = stats->steps_per_pull_p99 = 0;
    if (r->mode && r->strategy->report) r->strategy->report(r, stats);
    stats->checkpoint_failures = r->stats.checkpoint_failures;
    stats->comm_s = r->stats.comm_s;
    if (r->client) {
        ps_client_stats_t cs;
        ps_client_get_stats(r->client, &cs);
        wire_status_t why = ps_client_refusal(r->client);
        stats->evicted = failed && why == WIRE_STATUS_EVICTED;
        stats->servers_finished = failed && r->rc->servers_finished && atomic_load(r->rc->servers_finished);
        stats->diverged = failed && why == WIRE_STATUS_NOT_FINITE;
        stats->retries = cs.retries;
        stats->pulls_cancelled = cs.pulls_cancelled;
        stats->pushes_acked = cs.pushes_acked;
        stats->pull_wait_s = cs.pull_wait_s;
        stats->pull_held_s = cs.pull_held_s;
        stats->bytes_out = cs.bytes_out;
        stats->bytes_in = cs.bytes_in;
    }
    if (r->rc->collective) {
        uint64_t sent, recv;
        collective_net_bytes(r->rc->collective, &sent, &recv);
        stats->bytes_out += sent;
        stats->bytes_in += recv;
    }
    // Uncompressed exchanges send what they would send.
    stats->bytes_out_raw = r->comp ? r->raw_out : stats->bytes_out;
    stats->residual_norm = r->resid.e ? ef_residual_norm(&r->resid) : 0.0;
}

static void replica_free(replica_t *r) {
    replica_ckpt_free(r);  // first: r->progress may be in its mapping
    gpu_model_destroy(&r->gpu);
    ps_heartbeat_stop(&r->heartbeat);
    ps_client_destroy(&r->client);
    params_free(&r->w);
    optimizer_destroy(&r->opt);
    free(r->base);
    free(r->pulled);
    free(r->idx);
    free(r->val);
    free(r->progress);
    compressor_destroy(&r->comp);
    ef_residual_free(&r->resid);
    free(r->enc_bytes);
    if (r->mode) r->strategy->free(r);
}

int replica_train(void *zmq_ctx, const replica_config_t *rc, const model_t *m, const optimizer_config_t *oc,
                  const train_config_t *tc_in, uint64_t init_seed, const train_callbacks_t *cb, train_result_t *out,
                  replica_stats_t *stats, float *final_w, char *err, size_t err_len) {
    memset(stats, 0, sizeof *stats);
    replica_t r;
    if (replica_init(&r, rc, m, oc, tc_in, err, err_len) != 0) return -1;
    r.keep_model = final_w != NULL;
    const sync_strategy_t *s = r.strategy;
    train_config_t tc = *tc_in;
    tc.mode = s->train_mode;
    train_position_t start = {0, NULL, NULL, NULL, 0.0};
    int status = -1;
    if (replica_ckpt_prepare(&r, err, err_len) != 0 || replica_alloc(&r, err, err_len) != 0) goto out;
    if (!s->servers)
        model_init_params(m, r.w, init_seed);
    else if (join_servers(&r, zmq_ctx, init_seed, &tc, &start, stats, err, err_len) != 0)
        goto out;
    if (rc->ckpt && rc->ckpt->resume && replica_ckpt_resume(&r, &tc, &start, stats, err, err_len) != 0) goto out;
    if (compression_setup(&r, err, err_len) != 0 || make_optimizer_and_device(&r, oc, &tc, err, err_len) != 0) goto out;
    link_init(&r, &tc);
    if (rc->ckpt && rc->ckpt->every_s > 0) {
        tc.checkpoint_every_s = rc->ckpt->every_s;
        tc.checkpoint = replica_ckpt_save;
        tc.checkpoint_ctx = &r;
    }
    if (s->begin && s->begin(&r, &tc, &cb, err, err_len) != 0) goto out;
    int train_rc = train_run(m, r.opt, r.w, &tc, cb, out, err, err_len);
    if (s->end) s->end(&r);
    if (r.err[0] && atomic_load(&r.abort))
        snprintf(err, err_len, "%s", r.err);
    else if (train_rc == 0 && replica_finish(&r, out, stats, final_w, err, err_len) == 0)
        status = 0;
    // Stopped by a signal that reached the other replicas a round sooner: a
    // round's exchange completes for all or none, so this one's parameters
    // are theirs (replica.h, stopped_with_peers).
    if (status != 0 && s->ring && !s->servers && tc.interrupt && atomic_load(tc.interrupt)) {
        stats->stopped_with_peers = 1;
        out->interrupted = 1;
        if (final_w) params_read(r.w, r.n, final_w);
        dense_checksum(&r, stats);
    }
    // Its last sum is behind it: exit may finalise MPI.
    if (status == 0 && rc->collective) collective_settled(rc->collective);
out:
    replica_report(&r, status != 0, stats);
    free(start.samples);
    free(start.updates);
    free(start.loss_sum);
    replica_free(&r);
    return status;
}
