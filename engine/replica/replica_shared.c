// What the replica's strategies share (replica_impl.h, by_key.h): time,
// messages, an encoded push, the final evaluation of the servers' model. Its
// own file, so that the strategies depend on it and replica.c on the
// strategies, not in a circle.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/replica/by_key.h"
#include "engine/replica/replica_impl.h"
#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/partition.h"
#include "net/compress.h"
#include "net/ps_client.h"

double replica_now_s(void) { return mono_clock_s(); }

void replica_count_push(replica_t *r) {
    r->stats.pushes++;
    if (r->rc->live) atomic_fetch_add_explicit(&r->rc->live->pushes, 1, memory_order_relaxed);
}

void replica_count_pull(replica_t *r) {
    r->stats.pulls++;
    if (r->rc->live) atomic_fetch_add_explicit(&r->rc->live->pulls, 1, memory_order_relaxed);
}

int replica_out_of_memory(const replica_t *r, char *err, size_t err_len) {
    snprintf(err, err_len, "worker: out of memory for a replica of %zu parameters", r->n);
    return -1;
}

int replica_cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int replica_push_encoded(replica_t *r, const float *g, uint32_t aux, int bsp) {
    const compress_spec_t *spec = compressor_spec(r->comp);
    size_t S = r->rc->n_servers;
    for (size_t k = 0; k < S; k++) {
        size_t begin, end;
        shard_range(r->n, S, k, &begin, &end);
        r->enc_bytes[k] = compress_encoded_bytes(spec, end - begin);
    }
    uint8_t *const *frames = ps_client_push_encoded_frames(r->client, r->enc_bytes, r->err, sizeof r->err);
    if (!frames) return -1;
    for (size_t k = 0; k < S; k++) {
        size_t begin, end;
        shard_range(r->n, S, k, &begin, &end);
        float *residual = r->resid.e ? r->resid.e + begin : NULL;
        if (compress_encode(r->comp, g + begin, end - begin, residual, NULL, frames[k], r->enc_bytes[k], r->err,
                            sizeof r->err) != 0)
            return -1;
    }
    r->raw_out += 4u * r->n;
    return ps_client_push_commit(r->client, r->clock, aux, bsp, r->err, sizeof r->err);
}

void by_key_free(by_key_t *k) {
    working_set_free(&k->ws);
    free(k->pull_keys);
    k->pull_keys = NULL;
}

// The servers' model into global: by key (the strategy's working set), what
// evaluating the first `limit` test examples reads (the rest left 0: no
// evaluation reads it); else, or when the model is to be kept (keep_model),
// all of it, into r->pulled too.
static int pull_global(replica_t *r, param_t *global, size_t limit, char *err, size_t err_len) {
    uint64_t min_clock;
    by_key_t *k = r->strategy->by_key ? r->strategy->by_key(r) : NULL;
    if (!k || r->keep_model) {
        if (ps_client_pull(r->client, 0, r->pulled, &min_clock, err, err_len) != 0) return -1;
        for (size_t j = 0; j < r->n; j++) param_set(&global[j], r->pulled[j]);
        return 0;
    }
    uint32_t *examples = malloc((limit ? limit : 1) * sizeof *examples);
    if (!examples) return replica_out_of_memory(r, err, err_len);
    for (size_t i = 0; i < limit; i++) examples[i] = (uint32_t)i;
    size_t nk = working_set_test_keys(&k->ws, examples, limit, k->pull_keys);
    free(examples);
    if (ps_client_pull_keys_at(r->client, 0, k->pull_keys, nk, r->pulled, err, err_len) != 0) return -1;
    for (size_t j = 0; j < r->n; j++) param_set(&global[j], 0.0f);
    for (size_t i = 0; i < nk; i++) param_set(&global[k->pull_keys[i]], r->pulled[i]);
    return 0;
}

int replica_evaluate_global(replica_t *r, const train_result_t *out, replica_stats_t *stats, char *err,
                            size_t err_len) {
    (void)out;
    param_t *global = params_new(r->n, err, err_len);
    model_ws_t *ws = global ? model_ws_new(r->model, 1, err, err_len) : NULL;
    size_t limit = model_num_test(r->model);
    if (r->eval_limit && r->eval_limit < limit) limit = r->eval_limit;
    if (!ws || pull_global(r, global, limit, err, err_len) != 0) {
        model_ws_destroy(&ws);
        params_free(&global);
        return -1;
    }
    eval_sums_t sums = {0.0, 0.0, 0};
    model_evaluate(r->model, global, 0, limit, ws, &sums);
    stats->global_test_loss = sums.count ? sums.loss_sum / (double)sums.count : NAN;
    stats->global_test_metric = eval_metric_value(model_metric(r->model), &sums);
    // Of several workers' final pulls, the one that saw the most shard
    // versions (they only grow) came last.
    uint64_t *versions = calloc(r->rc->n_servers, sizeof *versions);
    if (!versions) {
        snprintf(err, err_len, "worker: out of memory");
        model_ws_destroy(&ws);
        params_free(&global);
        return -1;
    }
    ps_client_pulled_versions(r->client, versions);
    stats->global_versions = 0;
    for (size_t k = 0; k < r->rc->n_servers; k++) stats->global_versions += versions[k];
    free(versions);
    model_ws_destroy(&ws);
    params_free(&global);
    return 0;
}
