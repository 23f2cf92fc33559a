// A parameter-server shard (ps_server.h).
#include "net/ps_server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "datasets/split.h"         // defines: shard_range
#include "kernels/update.h"         // defines: sgd_update_cpu, adagrad_update_cpu, axpy_cpu
#include "net/zmsg.h"               // defines: zmsg_recv, zmsg_send, ZMQ_FAIL
#include "staleness/clock_table.h"  // defines: clock_table_t

typedef struct pending_pull {
    zmq_msg_t identity;
    uint32_t worker;
    uint64_t need;     // answer once the min clock reaches this
    uint32_t *keys;    // NULL: the whole shard
    uint32_t n_keys;
} pending_pull_t;

struct ps_server {
    ps_config_t cfg;
    void *sock;
    char endpoint[256];
    size_t begin, end, n;  // shard range, n = end - begin
    float *w;              // (n)
    float *h;              // (n) Adagrad's squared-gradient sums, or NULL
    uint64_t bound;        // effective staleness bound
    clock_table_t clocks;
    uint64_t *read_min_clock;  // (n_workers) min clock when the worker last pulled
    // BSP: each worker's gradient for the current clock, summed once all arrived.
    float *bsp_grad;           // (n_workers, n)
    uint32_t *bsp_examples;    // (n_workers) 0 = no gradient yet this clock
    uint64_t *bsp_version;     // (n_workers) version each gradient was computed from
    float *bsp_sum;            // (n)
    float *backup;             // (n_workers, n) DC-ASGD: the shard as each worker last pulled it
    float *scratch_g;          // (scratch_cap) a push's values after delay compensation
    uint32_t *scratch_idx;     // (scratch_cap) a sparse push's indices, shifted into the shard
    size_t scratch_cap;
    uint64_t bsp_clock;        // the clock being aggregated
    pending_pull_t *pending;
    size_t n_pending, cap_pending;
    ps_stats_t stats;
    int warned[WIRE_STATUS_COUNT_];
};

const char *server_optimizer_name(server_optimizer_t o) { return o == SERVER_OPTIMIZER_ADAGRAD ? "adagrad" : "sgd"; }

ps_server_t *ps_server_new(void *zmq_ctx, const ps_config_t *c, const char *endpoint, const float *shard_init,
                           char *err, size_t err_len) {
    if (c->n_shards == 0 || c->shard >= c->n_shards || c->n_workers == 0 || c->n_params == 0) {
        snprintf(err, err_len, "server: shard %zu of %zu, %zu workers, %zu parameters is not a valid layout",
                 c->shard, c->n_shards, c->n_workers, c->n_params);
        return NULL;
    }
    if (c->mode == SYNC_MODE_BSP && (c->stale.staleness_aware || c->stale.dc_lambda > 0)) {
        snprintf(err, err_len, "server: staleness-aware steps and DC-ASGD apply to asp and ssp; bsp updates are never stale");
        return NULL;
    }
    if (c->mode == SYNC_MODE_ALLREDUCE) {
        snprintf(err, err_len, "server: --sync allreduce runs without parameter servers");
        return NULL;
    }
    ps_server_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "server: out of memory");
        return NULL;
    }
    s->cfg = *c;
    s->bound = sync_mode_bound(c->mode, c->staleness);
    shard_range(c->n_params, c->n_shards, c->shard, &s->begin, &s->end);
    s->n = s->end - s->begin;
    size_t nw = c->n_workers, n = s->n ? s->n : 1;
    s->w = malloc(n * sizeof *s->w);
    s->read_min_clock = calloc(nw, sizeof *s->read_min_clock);
    s->scratch_idx = malloc(n * sizeof *s->scratch_idx);
    s->scratch_g = malloc(n * sizeof *s->scratch_g);
    if (c->stale.dc_lambda > 0) s->backup = malloc(nw * n * sizeof *s->backup);
    s->scratch_cap = n;
    if (c->optimizer == SERVER_OPTIMIZER_ADAGRAD) s->h = calloc(n, sizeof *s->h);
    if (c->mode == SYNC_MODE_BSP) {
        s->bsp_grad = calloc(nw * n, sizeof *s->bsp_grad);
        s->bsp_examples = calloc(nw, sizeof *s->bsp_examples);
        s->bsp_version = calloc(nw, sizeof *s->bsp_version);
        s->bsp_sum = calloc(n, sizeof *s->bsp_sum);
    }
    if (!s->w || !s->read_min_clock || !s->scratch_idx || !s->scratch_g || (c->stale.dc_lambda > 0 && !s->backup) || (c->optimizer == SERVER_OPTIMIZER_ADAGRAD && !s->h) ||
        (c->mode == SYNC_MODE_BSP && (!s->bsp_grad || !s->bsp_examples || !s->bsp_version || !s->bsp_sum))) {
        snprintf(err, err_len, "server: out of memory for a shard of %zu parameters and %zu workers", s->n, nw);
        ps_server_destroy(&s);
        return NULL;
    }
    if (clock_table_init(&s->clocks, nw, err, err_len) != 0) {
        ps_server_destroy(&s);
        return NULL;
    }
    memcpy(s->w, shard_init, s->n * sizeof *s->w);
    for (size_t k = 0; s->backup && k < nw; k++) memcpy(s->backup + k * n, shard_init, s->n * sizeof *s->w);
    staleness_hist_init(&s->stats.staleness_clocks);
    staleness_hist_init(&s->stats.staleness_updates);
    s->sock = zmq_socket(zmq_ctx, ZMQ_ROUTER);
    if (!s->sock) {
        ZMQ_FAIL("server: zmq_socket(ROUTER)", err, err_len);
        ps_server_destroy(&s);
        return NULL;
    }
    int hwm = 0;  // never drop a reply: the peers bound what they have in flight
    int handover = 1;  // a restarted worker reclaims its identity at once
    if (zmsg_socket_defaults(s->sock, c->heartbeat_ms, err, err_len) != 0 ||
        zmq_setsockopt(s->sock, ZMQ_ROUTER_HANDOVER, &handover, sizeof handover) != 0 ||
        zmq_setsockopt(s->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
        zmq_setsockopt(s->sock, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0) {
        if (!err[0]) ZMQ_FAIL("server: zmq_setsockopt(HWM)", err, err_len);
        ps_server_destroy(&s);
        return NULL;
    }
    if (zmq_bind(s->sock, endpoint) != 0) {
        char what[300];
        snprintf(what, sizeof what, "server: zmq_bind(%s)", endpoint);
        ZMQ_FAIL(what, err, err_len);
        ps_server_destroy(&s);
        return NULL;
    }
    size_t len = sizeof s->endpoint;
    if (zmq_getsockopt(s->sock, ZMQ_LAST_ENDPOINT, s->endpoint, &len) != 0) {
        ZMQ_FAIL("server: zmq_getsockopt(ZMQ_LAST_ENDPOINT)", err, err_len);
        ps_server_destroy(&s);
        return NULL;
    }
    return s;
}

void ps_server_destroy(ps_server_t **sp) {
    if (!sp || !*sp) return;
    ps_server_t *s = *sp;
    for (size_t i = 0; i < s->n_pending; i++) {
        zmq_msg_close(&s->pending[i].identity);
        free(s->pending[i].keys);
    }
    free(s->pending);
    if (s->sock) zmq_close(s->sock);
    clock_table_free(&s->clocks);
    free(s->w);
    free(s->h);
    free(s->read_min_clock);
    free(s->bsp_grad);
    free(s->bsp_examples);
    free(s->bsp_version);
    free(s->bsp_sum);
    free(s->scratch_idx);
    free(s->scratch_g);
    free(s->backup);
    free(s);
    *sp = NULL;
}

const char *ps_server_endpoint(const ps_server_t *s) { return s->endpoint; }
void ps_server_range(const ps_server_t *s, size_t *begin, size_t *end) {
    *begin = s->begin;
    *end = s->end;
}
const uint64_t *ps_server_pushes_per_worker(const ps_server_t *s) { return s->clocks.pushes; }
const uint64_t *ps_server_clocks(const ps_server_t *s) { return s->clocks.clock; }
const float *ps_server_values(const ps_server_t *s) { return s->w; }

void ps_server_stats(const ps_server_t *s, ps_stats_t *out) {
    *out = s->stats;
    out->min_clock = clock_table_min(&s->clocks);
    out->max_clock = clock_table_max(&s->clocks);
}

// ---- replies -----------------------------------------------------------------

static wire_header_t reply_header(const ps_server_t *s, uint16_t type) {
    wire_header_t h = zmsg_header(type, s->cfg.run_id);
    h.sender = (uint32_t)s->cfg.shard;
    h.shard = (uint32_t)s->cfg.shard;
    h.clock = clock_table_min(&s->clocks);
    h.param_version = s->stats.version;
    return h;
}

static int send_simple(ps_server_t *s, zmq_msg_t *identity, uint16_t type, uint32_t aux, char *err, size_t err_len) {
    wire_header_t h = reply_header(s, type);
    h.aux = aux;
    if (type == MSG_TYPE_WELCOME) {
        h.offset = s->begin;
        h.count = 0;
        h.aux = (uint32_t)s->n;  // the range length travels in aux: a WELCOME has no payload
    }
    return zmsg_send(s->sock, identity, &h, NULL, 0, 0, err, err_len);
}

static int reject(ps_server_t *s, zmq_msg_t *identity, wire_status_t why, const wire_header_t *req, char *err,
                  size_t err_len) {
    s->stats.rejected++;
    if (!s->cfg.quiet && !s->warned[why]) {
        fprintf(stderr, "asgd server %zu: refused a %s from worker %u: %s (further ones are counted, not shown)\n",
                s->cfg.shard, msg_type_name(req->type), req->sender, wire_status_name(why));
        s->warned[why] = 1;
    }
    return send_simple(s, identity, MSG_TYPE_REJECT, why, err, err_len);
}

// Sends parameters: the whole shard, or the values at `keys` (global indices).
static int send_params(ps_server_t *s, zmq_msg_t *identity, uint32_t worker, const uint32_t *keys, uint32_t n_keys,
                       char *err, size_t err_len) {
    wire_header_t h = reply_header(s, MSG_TYPE_PARAMS);
    zmq_msg_t frames[2];
    size_t n_frames;
    if (!keys) {
        h.payload_kind = PAYLOAD_KIND_DENSE;
        h.offset = s->begin;
        h.count = (uint32_t)s->n;
        // Copied (the shard changes as soon as the next push is applied), and
        // checksummed in the same pass.
        if (zmsg_frame_alloc(&frames[0], s->n * sizeof(float), err, err_len) != 0) return -1;
        h.checksum = wire_checksum_copy(zmq_msg_data(&frames[0]), s->w, s->n * sizeof(float), 0);
        if (s->backup) memcpy(s->backup + (size_t)worker * s->n, s->w, s->n * sizeof(float));
        s->stats.bytes_out += 4u * h.count;
        s->stats.pulls_answered++;
        s->read_min_clock[worker] = clock_table_min(&s->clocks);
        return zmsg_send_sealed(s->sock, identity, &h, frames, 1, 0, err, err_len);
    } else {
        h.payload_kind = PAYLOAD_KIND_SPARSE;
        h.count = n_keys;
        if (zmsg_frame_alloc(&frames[0], n_keys * sizeof(uint32_t), err, err_len) != 0) return -1;
        if (zmsg_frame_alloc(&frames[1], n_keys * sizeof(float), err, err_len) != 0) {
            zmq_msg_close(&frames[0]);
            return -1;
        }
        memcpy(zmq_msg_data(&frames[0]), keys, n_keys * sizeof(uint32_t));
        float *v = zmq_msg_data(&frames[1]);
        for (uint32_t k = 0; k < n_keys; k++) v[k] = s->w[keys[k] - s->begin];
        n_frames = 2;
    }
    s->stats.bytes_out += h.count * (n_frames == 2 ? 8u : 4u);
    s->stats.pulls_answered++;
    s->read_min_clock[worker] = clock_table_min(&s->clocks);
    return zmsg_send(s->sock, identity, &h, frames, n_frames, 0, err, err_len);
}

// Answers every waiting pull whose clock condition now holds.
static int serve_pending(ps_server_t *s, char *err, size_t err_len) {
    uint64_t min = clock_table_min(&s->clocks);
    size_t kept = 0;
    int rc = 0;
    for (size_t i = 0; i < s->n_pending; i++) {
        pending_pull_t *p = &s->pending[i];
        if (p->need <= min && rc == 0) {
            rc = send_params(s, &p->identity, p->worker, p->keys, p->n_keys, err, err_len);
            zmq_msg_close(&p->identity);
            free(p->keys);
        } else {
            s->pending[kept++] = *p;
        }
    }
    s->n_pending = kept;
    return rc;
}

// ---- updates -----------------------------------------------------------------

// In clocks: the update belongs to round `round`, and was computed from
// parameters read when the slowest worker had pushed `read` rounds; SSP keeps
// round - read <= s. In versions: updates applied since the ones it read.
static void record_staleness(ps_server_t *s, uint32_t worker, uint64_t round, uint64_t computed_from_version) {
    uint64_t read = s->read_min_clock[worker];
    staleness_hist_add(&s->stats.staleness_clocks, round > read ? round - read : 0);
    uint64_t v = s->stats.version;
    staleness_hist_add(&s->stats.staleness_updates, v > computed_from_version ? v - computed_from_version : 0);
}

static void apply_dense(ps_server_t *s, const float *g, float lr) {
    if (s->h) adagrad_update_cpu(s->n, lr, s->cfg.adagrad_eps, g, s->h, s->w);
    else sgd_update_cpu(s->n, lr, g, s->w);
}

// Range checks of a push's payload against this shard; fills a dense view.
static wire_status_t check_push(const ps_server_t *s, const wire_header_t *h, zmsg_t *m) {
    if (h->payload_kind == PAYLOAD_KIND_DENSE) {
        if (h->offset != s->begin || h->count != s->n) return WIRE_STATUS_BAD_RANGE;
        return WIRE_STATUS_OK;
    }
    if (h->payload_kind == PAYLOAD_KIND_SPARSE) {
        const uint32_t *idx = zmsg_payload(m, 0);
        for (uint32_t k = 0; k < h->count; k++)
            if (idx[k] < s->begin || idx[k] >= s->end) return WIRE_STATUS_BAD_RANGE;
        return WIRE_STATUS_OK;
    }
    return WIRE_STATUS_BAD_KIND;
}

// BSP: once every live worker has pushed the current clock, one weighted sum in
// worker order, applied once.
static void bsp_maybe_apply(ps_server_t *s) {
    if (clock_table_min(&s->clocks) <= s->bsp_clock) return;
    uint32_t total = 0;
    for (size_t k = 0; k < s->cfg.n_workers; k++) total += s->bsp_examples[k];
    if (total > 0) {
        memset(s->bsp_sum, 0, s->n * sizeof *s->bsp_sum);
        for (size_t k = 0; k < s->cfg.n_workers; k++) {
            if (!s->bsp_examples[k]) continue;
            float weight = (float)s->bsp_examples[k] / (float)total;
            axpy_cpu(s->n, weight, s->bsp_grad + k * s->n, s->bsp_sum);
            record_staleness(s, (uint32_t)k, s->bsp_clock, s->bsp_version[k]);
        }
        apply_dense(s, s->bsp_sum, s->cfg.lr);
        s->stats.version++;
    }
    memset(s->bsp_examples, 0, s->cfg.n_workers * sizeof *s->bsp_examples);
    s->bsp_clock++;
}

static int handle_push(ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender;
    wire_status_t why = check_push(s, h, m);
    if (why != WIRE_STATUS_OK) return reject(s, &m->identity, why, h, err, err_len);
    int sum = (h->flags & WIRE_FLAG_SUM) != 0;
    if (sum != (s->cfg.mode == SYNC_MODE_BSP)) return reject(s, &m->identity, WIRE_STATUS_BAD_KIND, h, err, err_len);
    // BSP: one gradient per worker per clock, for the clock being aggregated.
    if (sum && (h->clock != s->clocks.clock[k] || h->clock != s->bsp_clock))
        return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
    s->stats.bytes_in += h->count * (h->payload_kind == PAYLOAD_KIND_SPARSE ? 8u : 4u);  // accepted pushes only
    if (sum) {
        float *g = s->bsp_grad + (size_t)k * s->n;
        if (h->payload_kind == PAYLOAD_KIND_DENSE) {
            memcpy(g, zmsg_payload(m, 0), s->n * sizeof *g);
        } else {
            memset(g, 0, s->n * sizeof *g);
            const uint32_t *idx = zmsg_payload(m, 0);
            const float *v = zmsg_payload(m, 1);
            for (uint32_t j = 0; j < h->count; j++) g[idx[j] - s->begin] += v[j];
        }
        s->bsp_examples[k] = h->aux;
        s->bsp_version[k] = h->param_version;
        s->clocks.clock[k] = h->clock + 1;
        s->clocks.pushes[k]++;
        s->stats.pushes_applied++;
        bsp_maybe_apply(s);
    } else {
        record_staleness(s, k, h->clock, h->param_version);
        uint64_t tau = s->stats.version > h->param_version ? s->stats.version - h->param_version : 0;
        float lr = stale_update_lr(&s->cfg.stale, s->cfg.lr, tau);
        // An ASP/SSP push sums the gradients of aux local steps (at least 1):
        // the compensation, made for one gradient, is spread over them.
        float lambda = (float)(s->cfg.stale.dc_lambda / (double)(h->aux ? h->aux : 1));
        const float *backup = s->backup ? s->backup + (size_t)k * s->n : NULL;
        if (h->payload_kind == PAYLOAD_KIND_DENSE) {
            const float *g = zmsg_payload(m, 0);
            if (backup) {
                memcpy(s->scratch_g, g, s->n * sizeof *g);
                dc_asgd_compensate(s->scratch_g, s->w, backup, s->n, lambda);
                g = s->scratch_g;
            }
            apply_dense(s, g, lr);
        } else {
            // The kernels index by parameter; shift the indices into the shard.
            const uint32_t *idx = zmsg_payload(m, 0);
            const float *v = zmsg_payload(m, 1);
            if (h->count > s->scratch_cap) {
                // Repeated indices can make a push longer than the shard.
                uint32_t *grown = realloc(s->scratch_idx, h->count * sizeof *grown);
                float *grown_g = grown ? realloc(s->scratch_g, h->count * sizeof *grown_g) : NULL;
                if (grown) s->scratch_idx = grown;
                if (!grown || !grown_g) {
                    snprintf(err, err_len, "server: out of memory for a push of %u values", h->count);
                    return -1;
                }
                s->scratch_g = grown_g;
                s->scratch_cap = h->count;
            }
            uint32_t *local = s->scratch_idx;
            for (uint32_t j = 0; j < h->count; j++) local[j] = idx[j] - (uint32_t)s->begin;
            if (backup) {
                for (uint32_t j = 0; j < h->count; j++) {
                    float g = v[j];
                    s->scratch_g[j] = g + lambda * g * g * (s->w[local[j]] - backup[local[j]]);
                }
                v = s->scratch_g;
            }
            if (s->h) adagrad_update_sparse_cpu(h->count, lr, s->cfg.adagrad_eps, local, v, s->h, s->w);
            else sgd_update_sparse_cpu(h->count, lr, local, v, s->w);
        }
        s->stats.version++;
        if (h->clock + 1 > s->clocks.clock[k]) s->clocks.clock[k] = h->clock + 1;
        s->clocks.pushes[k]++;
        s->stats.pushes_applied++;
    }
    if (send_simple(s, &m->identity, MSG_TYPE_PUSH_ACK, 0, err, err_len) != 0) return -1;
    return serve_pending(s, err, err_len);
}

static int handle_pull(ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    const uint32_t *keys = NULL;
    if (h->payload_kind == PAYLOAD_KIND_KEYS) {
        keys = zmsg_payload(m, 0);
        for (uint32_t j = 0; j < h->count; j++)
            if (keys[j] < s->begin || keys[j] >= s->end)
                return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
    } else if (h->payload_kind != PAYLOAD_KIND_NONE) {
        return reject(s, &m->identity, WIRE_STATUS_BAD_KIND, h, err, err_len);
    }
    if (h->clock <= clock_table_min(&s->clocks)) return send_params(s, &m->identity, h->sender, keys, h->count, err, err_len);
    if (s->n_pending == s->cap_pending) {
        size_t cap = s->cap_pending ? 2 * s->cap_pending : 8;
        pending_pull_t *p = realloc(s->pending, cap * sizeof *p);
        if (!p) {
            snprintf(err, err_len, "server: out of memory queueing a pull");
            return -1;
        }
        s->pending = p;
        s->cap_pending = cap;
    }
    pending_pull_t *p = &s->pending[s->n_pending];
    zmq_msg_init(&p->identity);
    zmq_msg_copy(&p->identity, &m->identity);
    p->worker = h->sender;
    p->need = h->clock;
    p->keys = NULL;
    p->n_keys = 0;
    if (keys) {
        p->keys = malloc((h->count ? h->count : 1) * sizeof *p->keys);
        if (!p->keys) {
            zmq_msg_close(&p->identity);
            snprintf(err, err_len, "server: out of memory queueing a pull");
            return -1;
        }
        memcpy(p->keys, keys, h->count * sizeof *keys);
        p->n_keys = h->count;
    }
    s->n_pending++;
    s->stats.pulls_waited++;
    return 0;
}

static int all_left(const ps_server_t *s) {
    for (size_t k = 0; k < s->cfg.n_workers; k++)
        if (!s->clocks.joined[k] || !s->clocks.left[k]) return 0;
    return 1;
}

static void count_dropped(ps_server_t *s, wire_status_t why) {
    s->stats.dropped[why]++;
    s->stats.dropped_total++;
    if (!s->cfg.quiet && !s->warned[why]) {
        fprintf(stderr, "asgd server %zu: dropped an invalid message: %s (further ones are counted, not shown)\n",
                s->cfg.shard, wire_status_name(why));
        s->warned[why] = 1;
    }
}

static int handle(ps_server_t *s, zmsg_t *m, char *err, size_t err_len) {
    const wire_header_t *h = &m->h;
    // A message for another shard, or from no worker of this run, is not ours to answer.
    if (h->sender >= s->cfg.n_workers || h->shard != s->cfg.shard) {
        count_dropped(s, WIRE_STATUS_BAD_RANGE);
        return 0;
    }
    uint32_t k = h->sender;
    switch (h->type) {
    case MSG_TYPE_HELLO:
        if (h->count != 0 || h->offset != s->cfg.n_params)
            return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
        s->clocks.joined[k] = 1;
        return send_simple(s, &m->identity, MSG_TYPE_WELCOME, 0, err, err_len);
    case MSG_TYPE_PUSH:
        if (!s->clocks.joined[k] || s->clocks.left[k]) return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
        return handle_push(s, m, err, err_len);
    case MSG_TYPE_PULL:
        if (!s->clocks.joined[k]) return reject(s, &m->identity, WIRE_STATUS_BAD_RANGE, h, err, err_len);
        return handle_pull(s, m, err, err_len);
    case MSG_TYPE_BYE:
        s->clocks.left[k] = 1;
        if (send_simple(s, &m->identity, MSG_TYPE_BYE_ACK, 0, err, err_len) != 0) return -1;
        if (s->cfg.mode == SYNC_MODE_BSP) bsp_maybe_apply(s);
        return serve_pending(s, err, err_len);
    default:
        count_dropped(s, WIRE_STATUS_BAD_TYPE);
        return 0;
    }
}

int ps_server_run(ps_server_t *s, atomic_int *stop, char *err, size_t err_len) {
    zmq_pollitem_t item = {.socket = s->sock, .events = ZMQ_POLLIN};
    while (!(stop && atomic_load(stop))) {
        int rc = zmq_poll(&item, 1, 100);
        if (rc < 0) {
            if (errno == EINTR) continue;
            return ZMQ_FAIL("server: zmq_poll", err, err_len);
        }
        if (rc == 0) continue;
        // Drain what is queued before polling again.
        for (;;) {
            int events = 0;
            size_t len = sizeof events;
            if (zmq_getsockopt(s->sock, ZMQ_EVENTS, &events, &len) != 0)
                return ZMQ_FAIL("server: zmq_getsockopt(ZMQ_EVENTS)", err, err_len);
            if (!(events & ZMQ_POLLIN)) break;
            zmsg_t m;
            int got = zmsg_recv(s->sock, 1, s->cfg.run_id, &m, err, err_len);
            if (got < 0) {
                if (errno == EAGAIN) break;
                return -1;
            }
            int hrc = 0;
            if (got == 0) count_dropped(s, m.status);
            else hrc = handle(s, &m, err, err_len);
            zmsg_close(&m);
            if (hrc != 0) return -1;
            if (all_left(s)) return 0;
        }
    }
    return 0;
}
