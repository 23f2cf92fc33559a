// hybrid: a model split in two. Its sparse part (embedding rows) lives on the
// servers: before a round the replica pulls the rows its examples read (under
// SSP once every worker has pushed the rounds the bound asks), and after it
// pushes its share of their average. Its dense part is every replica's: its
// gradient is summed by ring allreduce and applied by each (sync_strategy.h).
#include <stdio.h>
#include <stdlib.h>

#include "engine/replica/replica_impl.h"
#include "engine/replica/working_set.h"
#include "net/ps_client.h"

// The mode's state (r->mode): the rows a round reads.
typedef struct hybrid {
    uint32_t *keys;  // (ps_n) the sparse rows a round reads
    working_set_t ws;  // finds them (working_set_sparse_keys)
} hybrid_t;

// The spans in a --trace timeline (docs/trace.md).
static const trace_kind_t TK_PULL = {"pull", "net", "need"}, TK_PUSH = {"push", "net", "clock"};

// Before a round: the embedding rows its examples read, pulled from the
// servers (under SSP once every worker has pushed the rounds the bound asks).
static int prepare_hybrid(void *ctx, const uint32_t *examples, size_t count, param_t *w) {
    replica_t *r = ctx;
    hybrid_t *h = r->mode;
    double t0 = replica_now_s();
    size_t nk = working_set_sparse_keys(&h->ws, examples, count, h->keys);
    uint64_t need = ssp_gate(r->clock, 0, r->read_bound).pull_clock;
    uint64_t span = TRACE_BEGIN();
    if (ps_client_pull_keys_at(r->client, need, h->keys, nk, r->pulled, r->err, sizeof r->err) != 0) return -1;
    TRACE_END(&TK_PULL, span, need);
    for (size_t k = 0; k < nk; k++) param_set(&w[h->keys[k]], r->pulled[k]);
    replica_count_pull(r);
    double dt = replica_now_s() - t0;
    if (need > 0) r->stats.wait_s += dt;
    r->stats.comm_s += dt;
    return 0;
}

// After a round: the dense part's gradient is summed by allreduce (every
// replica then applies the same average with its own optimizer), and this
// replica's share of the sparse part's average, (its examples / all) times its
// gradient, is pushed to the servers, which apply it with their rule.
static int exchange_hybrid(void *ctx, grad_t *sum, size_t examples, float lr, param_t *w, int *applied) {
    (void)lr;
    (void)w;
    (void)applied;
    replica_t *r = ctx;
    double t0 = replica_now_s();
    size_t S = r->ps_n, D = r->n - S;
    float *buf = r->ring_buf, ex = (float)examples, total;
    for (size_t j = 0; j < D; j++) buf[j] = sum->value[S + j] * ex;  // zero where untouched
    if (replica_ring_sum(r, buf, D, examples, &total) != 0) return -1;
    size_t nnz = 0;
    for (size_t k = 0; k < sum->n_touched; k++)
        if (sum->touched[k] < S) r->idx[nnz++] = sum->touched[k];
    qsort(r->idx, nnz, sizeof *r->idx, replica_cmp_u32);
    float share = total > 0.0f ? ex / total : 0.0f;
    for (size_t k = 0; k < nnz; k++) r->val[k] = sum->value[r->idx[k]] * share;
    uint64_t span = TRACE_BEGIN();
    if (ps_client_push_sparse(r->client, r->idx, r->val, nnz, r->clock, (uint32_t)examples, 0, r->err, sizeof r->err) !=
        0)
        return -1;
    TRACE_END(&TK_PUSH, span, r->clock + 1);
    // What the trainer applies: the dense part's global average only.
    grad_clear(sum);
    if (total > 0.0f)
        for (size_t j = 0; j < D; j++)
            if (buf[j] != 0.0f) grad_add(sum, (uint32_t)(S + j), buf[j] / total);
    r->clock++;
    replica_count_push(r);
    r->stats.comm_s += replica_now_s() - t0;
    return 0;
}

// Before an evaluation: every sparse row as the servers hold it now.
static int refresh_hybrid(void *ctx, param_t *w) {
    replica_t *r = ctx;
    uint64_t min_clock;
    if (ps_client_pull(r->client, 0, r->pulled, &min_clock, r->err, sizeof r->err) != 0) return -1;
    for (size_t j = 0; j < r->ps_n; j++) param_set(&w[j], r->pulled[j]);
    replica_count_pull(r);
    return 0;
}

// ---- the strategy ---------------------------------------------------------------

static int hybrid_check(replica_t *r, const optimizer_config_t *oc, char *err, size_t err_len) {
    (void)oc;
    r->ps_n = model_num_sparse_params(r->model);
    if (r->ps_n == 0 || r->ps_n >= r->n) {
        char desc[160];
        model_describe(r->model, desc, sizeof desc);
        snprintf(err, err_len, "--sync hybrid needs a model with a sparse and a dense part, not %s", desc);
        return -1;
    }
    r->read_bound = r->rc->hybrid_ssp ? r->rc->staleness : STALENESS_INFINITE;
    return 0;
}

static int hybrid_alloc(replica_t *r, char *err, size_t err_len) {
    hybrid_t *h = r->mode = calloc(1, sizeof *h);
    if (!h) return replica_out_of_memory(r, err, err_len);
    h->keys = malloc(r->ps_n * sizeof *h->keys);
    if (!h->keys) return replica_out_of_memory(r, err, err_len);
    return working_set_init_keys(&h->ws, r->model, err, err_len);
}

static void hybrid_free(replica_t *r) {
    hybrid_t *h = r->mode;
    free(h->keys);
    working_set_free(&h->ws);
    free(h);
    r->mode = NULL;
}

// The last evaluation read every sparse row from the servers, and the dense
// part is every replica's: it was of the global model.
static int hybrid_global(replica_t *r, const train_result_t *out, replica_stats_t *stats, char *err, size_t err_len) {
    (void)r;
    (void)err;
    (void)err_len;
    stats->global_test_loss = out->last.test_loss;
    stats->global_test_metric = out->last.test_metric;
    return 0;
}

const sync_strategy_t sync_strategy_hybrid = {
    .family = "hybrid",
    .train_mode = TRAIN_MODE_SYNC,
    .servers = 1,
    .ring = 1,
    .check = hybrid_check,
    .alloc = hybrid_alloc,
    .free = hybrid_free,
    .exchange = exchange_hybrid,
    .prepare = prepare_hybrid,
    .refresh = refresh_hybrid,
    .global = hybrid_global,
};
