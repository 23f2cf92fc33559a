// The choice of the collective, and opening it (collective.h).
#include "engine/replica/collective.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/replica/collective_impl.h"
#include "engine/replica/collective_mpi.h"
#include "net/curve_auth.h"
#include "net/hier_allreduce.h"
#include "net/ring.h"
#include "net/shm_allreduce.h"
#include "net/stream_ring.h"

static const char *const names[] = {
    [COLLECTIVE_AUTO] = "auto", [COLLECTIVE_SHM] = "shm",   [COLLECTIVE_RING] = "ring",
    [COLLECTIVE_MPI] = "mpi",   [COLLECTIVE_HIER] = "hier", [COLLECTIVE_STREAM] = "stream",
};
_Static_assert(sizeof names / sizeof names[0] == COLLECTIVE_STREAM + 1, "one name per collective_choice_t");

const char *collective_name(collective_choice_t c) {
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "auto";
}

// Whether two ring endpoints are on the same host: both ipc:// or loopback,
// or both tcp:// with the same host name or address.
static int same_host(const char *a, const char *b) {
    int la = net_endpoint_is_local(a) != 0, lb = net_endpoint_is_local(b) != 0;
    if (la || lb) return la && lb;
    if (strncmp(a, "tcp://", 6) != 0 || strncmp(b, "tcp://", 6) != 0) return 0;
    const char *ca = strrchr(a + 6, ':'), *cb = strrchr(b + 6, ':');
    if (!ca || !cb || ca - a != cb - b) return 0;
    return strncmp(a, b, (size_t)(ca - a)) == 0;
}

// The first worker not on worker 0's host, or n.
static size_t first_elsewhere(const rdv_entry_t *ring, size_t n) {
    size_t k = 1;
    while (k < n && same_host(ring[0].endpoint, ring[k].endpoint)) k++;
    return k;
}

int collective_one_host(const rdv_entry_t *ring, size_t n) { return first_elsewhere(ring, n) >= n; }

int collective_host_id(size_t worker, char *out, size_t len, char *err, size_t err_len) {
    char buf[256] = "";
    const char *env = getenv("ASGD_HOST_ID");
    if (env && env[0] && strchr(env, ',')) {
        const char *p = env;
        for (size_t k = 0; k < worker && p; k++) {
            p = strchr(p, ',');
            if (p) p++;
        }
        size_t item = p ? strcspn(p, ",") : 0;
        if (!item) {
            snprintf(err, err_len, "ASGD_HOST_ID=%s: a list with no item for worker %zu", env, worker);
            return -1;
        }
        snprintf(buf, sizeof buf, "%.*s", (int)item, p);
    } else if (env && env[0]) {
        snprintf(buf, sizeof buf, "%s", env);
    } else if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) {
        snprintf(buf, sizeof buf, "localhost");
    }
    snprintf(out, len, "%s", buf);
    for (char *c = out; *c; c++)
        if (!isgraph((unsigned char)*c)) *c = '_';
    return 0;
}

// Whether workers a and b are on one host (collective_layout's rule).
static int same_group(const rdv_entry_t *a, const rdv_entry_t *b) {
    if (a->name[0] || b->name[0]) return a->name[0] && b->name[0] && strcmp(a->name, b->name) == 0;
    return same_host(a->endpoint, b->endpoint);
}

// Every worker's host and local index (host_of, local_of: n each; NULL
// local_of skips it). Returns the number of hosts.
static size_t group_all(const rdv_entry_t *ring, size_t n, size_t *host_of, size_t *local_of) {
    size_t hosts = 0;
    for (size_t k = 0; k < n; k++) {
        size_t lead = 0, local = 0;
        while (!same_group(&ring[lead], &ring[k])) lead++;  // the host's lowest worker
        host_of[k] = lead == k ? hosts++ : host_of[lead];
        for (size_t j = lead; j < k; j++) local += same_group(&ring[j], &ring[k]);
        if (local_of) local_of[k] = local;
    }
    return hosts;
}

void collective_layout(const rdv_entry_t *ring, size_t n, size_t id, collective_layout_t *out) {
    memset(out, 0, sizeof *out);
    size_t *host_of = calloc(n ? 2 * n : 1, sizeof *host_of), *count;
    if (!host_of || n == 0) {
        free(host_of);
        return;
    }
    count = host_of + n;
    out->hosts = group_all(ring, n, host_of, NULL);
    for (size_t k = 0; k < n; k++) count[host_of[k]]++;
    out->local_n = count[0];
    for (size_t h = 1; h < out->hosts; h++)
        if (count[h] != count[0]) out->local_n = 0;
    out->host = host_of[id];
    for (size_t j = 0; j < id; j++) out->local += host_of[j] == host_of[id];
    free(host_of);
}

// The first worker whose host has another number of workers than worker 0's.
static size_t first_unequal(const rdv_entry_t *ring, size_t n, size_t *count0, size_t *count) {
    *count0 = *count = 0;
    for (size_t j = 0; j < n; j++) *count0 += same_group(&ring[0], &ring[j]);
    for (size_t k = 1; k < n; k++) {
        *count = 0;
        for (size_t j = 0; j < n; j++) *count += same_group(&ring[k], &ring[j]);
        if (*count != *count0) return k;
    }
    return n;
}

int collective_pick(collective_choice_t choice, int compressed, const rdv_entry_t *ring, size_t n, char *err,
                    size_t err_len) {
    if (choice == COLLECTIVE_RING) return COLLECTIVE_RING;
    if (compressed) {
        if (choice == COLLECTIVE_AUTO) return COLLECTIVE_RING;
        snprintf(err, err_len, "--collective %s: compressed exchanges (--compress) go round the ring",
                 collective_name(choice));
        return -1;
    }
    if (choice == COLLECTIVE_MPI) return COLLECTIVE_MPI;
    // The stream ring's connections are plain TCP: a run whose sockets are
    // encrypted and authenticated keeps its sums on the ZeroMQ ring.
    int curve = net_security_get()->curve;
    if (choice == COLLECTIVE_STREAM && curve) {
        snprintf(err, err_len,
                 "--collective stream: the stream ring's connections are plain TCP, neither encrypted "
                 "nor authenticated, and this run uses CURVE; use --collective ring (CURVE), or drop CURVE with "
                 "--insecure on a network you trust");
        return -1;
    }
    collective_layout_t l;
    collective_layout(ring, n, 0, &l);
    int one = collective_one_host(ring, n) && l.hosts == 1;
    if (choice == COLLECTIVE_AUTO)
        return one                            ? COLLECTIVE_SHM
               : l.hosts > 1 && l.local_n > 1 ? COLLECTIVE_HIER
               : curve                        ? COLLECTIVE_RING
                                              : COLLECTIVE_STREAM;
    if (choice == COLLECTIVE_SHM && !one) {
        size_t k = first_elsewhere(ring, n);
        if (k >= n) {  // one host by the endpoints, several by the identities
            k = 1;
            while (k < n && same_group(&ring[0], &ring[k])) k++;
            snprintf(err, err_len,
                     "--collective shm: the workers are not all on one host (worker 0 reported host "
                     "%s, worker %zu host %s); use --collective hier, ring or auto",
                     ring[0].name, k, ring[k].name);
            return -1;
        }
        snprintf(err, err_len,
                 "--collective shm: the workers are not all on one host (worker 0's ring is at %s, "
                 "worker %zu's at %s); use --collective ring or auto",
                 ring[0].endpoint, k, ring[k].endpoint);
        return -1;
    }
    if (choice == COLLECTIVE_HIER && !l.local_n) {
        size_t c0, c, k = first_unequal(ring, n, &c0, &c);
        snprintf(err, err_len,
                 "--collective hier: every host needs the same number of workers, but worker 0's host "
                 "(%s) has %zu and worker %zu's (%s) %zu; use --collective ring or auto",
                 ring[0].name[0] ? ring[0].name : ring[0].endpoint, c0, k,
                 ring[k].name[0] ? ring[k].name : ring[k].endpoint, c);
        return -1;
    }
    return choice;
}

int collective_open(collective_choice_t choice, int compressed, const rdv_entry_t *ring, size_t n, size_t id,
                    uint64_t run_id, size_t max_count, struct shm_allreduce **shm, char *err, size_t err_len) {
    *shm = NULL;
    int pick = collective_pick(choice, compressed, ring, n, err, err_len);
    if (pick < 0) return -1;
    if (pick == COLLECTIVE_RING) return 0;
    if (pick == COLLECTIVE_MPI) return collective_mpi_open(n, id, err, err_len);
    if (pick == COLLECTIVE_HIER || pick == COLLECTIVE_STREAM) {
        snprintf(err, err_len, "--collective %s: %s is opened by collective_open_%s", collective_name(choice),
                 collective_name((collective_choice_t)pick), collective_name((collective_choice_t)pick));
        return -1;
    }
    *shm = shm_allreduce_new(run_id, id, n, max_count, err, err_len);
    return *shm ? 0 : -1;
}

// Every worker's cross-ring endpoint (RDV_ENDPOINT_MAX bytes each, in out),
// through allreduces over the main ring of the bytes as floats: each worker
// fills its own row, the others are zeros, and small integers sum exactly.
static int exchange_endpoints(struct ring *main_ring, const char *mine, size_t n, size_t id, size_t max_count,
                              int timeout_ms, const char *what, char *out, char *err, size_t err_len) {
    size_t total = n * RDV_ENDPOINT_MAX;
    float *v = calloc(total, sizeof *v);
    if (!v) {
        snprintf(err, err_len, "--collective %s: out of memory", what);
        return -1;
    }
    for (size_t i = 0; mine[i] && i + 1 < RDV_ENDPOINT_MAX; i++)
        v[id * RDV_ENDPOINT_MAX + i] = (float)(unsigned char)mine[i];
    int rc = 0;
    for (size_t at = 0; at < total && rc == 0; at += max_count) {
        size_t len = total - at < max_count ? total - at : max_count;
        char why[512];
        rc = ring_allreduce_sum(main_ring, v + at, len, timeout_ms, why, sizeof why);
        if (rc != 0) snprintf(err, err_len, "--collective %s: exchanging the endpoints: %s", what, why);
    }
    for (size_t i = 0; rc == 0 && i < total; i++) out[i] = (char)(unsigned char)v[i];
    free(v);
    return rc;
}

// What a worker advertises for a second listener bound at `bound`: the host
// of its main ring's advertised endpoint (the host the others dial), with the
// bound port; the bound endpoint itself when the main ring is on ipc://.
static void advertised(const char *main_endpoint, const char *bound, int ipc, char out[RDV_ENDPOINT_MAX]) {
    const char *port = strrchr(bound, ':'), *colon = strrchr(main_endpoint, ':');
    if (!ipc && port && colon && strncmp(main_endpoint, "tcp://", 6) == 0)
        snprintf(out, RDV_ENDPOINT_MAX, "%.*s%s", (int)(colon - main_endpoint), main_endpoint, port);
    else
        snprintf(out, RDV_ENDPOINT_MAX, "%s", bound);
}

int collective_open_hier(void *zmq_ctx, struct ring *main_ring, const rdv_entry_t *ring, size_t n, size_t id,
                         uint64_t run_id, size_t max_count, const char *bind_host, int timeout_ms,
                         struct hier_allreduce **hier, char *err, size_t err_len) {
    *hier = NULL;
    collective_layout_t l;
    collective_layout(ring, n, id, &l);
    if (!l.local_n) {
        collective_pick(COLLECTIVE_HIER, 0, ring, n, err, err_len);  // names the hosts that differ
        return -1;
    }
    int ipc = strncmp(ring[id].endpoint, "ipc://", 6) == 0;
    // Cross rings over plain TCP where the run's sockets are plain; under
    // CURVE over the (encrypted) ZeroMQ ring.
    int stream = !net_security_get()->curve;
    const char *host = !ipc ? bind_host : stream ? "127.0.0.1" : "ipc";
    char why[600];
    *hier = hier_allreduce_new(zmq_ctx, stream, run_id, l.host, l.hosts, l.local, l.local_n, max_count, host, why,
                               sizeof why);
    if (!*hier) {
        snprintf(err, err_len, "--collective hier: %s", why);
        return -1;
    }
    if (l.hosts == 1) return 0;
    char mine[RDV_ENDPOINT_MAX];
    advertised(ring[id].endpoint, hier_allreduce_endpoint(*hier), ipc, mine);
    char *all = malloc(n * RDV_ENDPOINT_MAX);
    size_t *host_of = calloc(2 * n, sizeof *host_of);
    int rc = all && host_of
                 ? exchange_endpoints(main_ring, mine, n, id, max_count, timeout_ms, "hier", all, err, err_len)
                 : -1;
    if (!all || !host_of) snprintf(err, err_len, "--collective hier: out of memory");
    if (rc == 0) {
        // The next host's worker of the same local index (there is one: every host has local_n).
        size_t next = 0, *local_of = host_of + n;
        group_all(ring, n, host_of, local_of);
        while (host_of[next] != (l.host + 1) % l.hosts || local_of[next] != l.local) next++;
        rc = hier_allreduce_connect(*hier, all + next * RDV_ENDPOINT_MAX, timeout_ms, err, err_len);
    }
    free(host_of);
    free(all);
    if (rc != 0) hier_allreduce_destroy(hier);
    return rc;
}

int collective_open_stream(struct ring *main_ring, const rdv_entry_t *ring, size_t n, size_t id, uint64_t run_id,
                           size_t max_count, const char *bind_host, int timeout_ms, struct stream_ring **stream,
                           char *err, size_t err_len) {
    int ipc = strncmp(ring[id].endpoint, "ipc://", 6) == 0;
    const char *host = ipc ? "127.0.0.1" : bind_host;
    // A run id of its own: nothing of the main ring's can pass for it.
    char why[600];
    *stream = stream_ring_new(id, n, run_id ^ 0x53545245414dull, max_count, host, why, sizeof why);
    if (!*stream) {
        snprintf(err, err_len, "--collective stream: %s", why);
        return -1;
    }
    char mine[RDV_ENDPOINT_MAX];
    advertised(ring[id].endpoint, stream_ring_endpoint(*stream), ipc, mine);
    char *all = malloc(n * RDV_ENDPOINT_MAX);
    int rc = all ? exchange_endpoints(main_ring, mine, n, id, max_count, timeout_ms, "stream", all, err, err_len) : -1;
    if (!all) snprintf(err, err_len, "--collective stream: out of memory");
    if (rc == 0) {
        rc = stream_ring_connect(*stream, all + ((id + 1) % n) * RDV_ENDPOINT_MAX, timeout_ms, why, sizeof why);
        if (rc != 0) snprintf(err, err_len, "--collective stream: %s", why);
    }
    free(all);
    if (rc != 0) stream_ring_destroy(stream);
    return rc;
}

// ---- the collective a worker sums with (collective_impl.h) ----

// The implementation of `pick`, opened: its table and state.
static int open_state(void *zmq_ctx, struct ring *main_ring, collective_choice_t pick, const compress_spec_t *compress,
                      const rdv_entry_t *ring, size_t n, size_t id, uint64_t run_id, size_t max_count,
                      const char *bind_host, int timeout_ms, collective_t *c, char *err, size_t err_len) {
    int compressed = compress->kind != COMPRESS_KIND_NONE, rc = -1;
    if (pick == COLLECTIVE_RING) {
        c->ops = &collective_ring_ops;
        c->impl = collective_ring_state(main_ring, compress, n, id, max_count, err, err_len);
        rc = c->impl ? 0 : -1;
    } else if (pick == COLLECTIVE_HIER) {
        struct hier_allreduce *h = NULL;
        c->ops = &collective_hier_ops;
        rc = collective_open_hier(zmq_ctx, main_ring, ring, n, id, run_id, max_count, bind_host, timeout_ms, &h, err,
                                  err_len);
        c->impl = h;
    } else if (pick == COLLECTIVE_STREAM) {
        struct stream_ring *s = NULL;
        c->ops = &collective_stream_ops;
        rc = collective_open_stream(main_ring, ring, n, id, run_id, max_count, bind_host, timeout_ms, &s, err, err_len);
        c->impl = s;
    } else {  // shm, or MPI (one per process: no state of its own)
        struct shm_allreduce *shm = NULL;
        c->ops = pick == COLLECTIVE_MPI ? &collective_mpi_ops : &collective_shm_ops;
        rc = collective_open(pick, compressed, ring, n, id, run_id, max_count, &shm, err, err_len);
        c->impl = shm;
    }
    return rc;
}

collective_t *collective_new(void *zmq_ctx, struct ring *main_ring, collective_choice_t choice,
                             const compress_spec_t *compress, const rdv_entry_t *ring, size_t n, size_t id,
                             uint64_t run_id, size_t max_count, const char *bind_host, int timeout_ms, char *err,
                             size_t err_len) {
    int pick = collective_pick(choice, compress->kind != COMPRESS_KIND_NONE, ring, n, err, err_len);
    if (pick < 0) return NULL;
    collective_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_len, "worker: out of memory");
        return NULL;
    }
    c->main_ring = main_ring;
    if (open_state(zmq_ctx, main_ring, (collective_choice_t)pick, compress, ring, n, id, run_id, max_count, bind_host,
                   timeout_ms, c, err, err_len) != 0) {
        collective_destroy(&c);
        return NULL;
    }
    c->buffer = c->ops->buffer ? c->ops->buffer(c->impl) : NULL;
    if (!c->buffer) {
        c->own_buffer = 1;
        if (!(c->buffer = malloc(max_count * sizeof *c->buffer))) {
            snprintf(err, err_len, "worker: out of memory for a collective of %zu floats", max_count);
            collective_destroy(&c);
            return NULL;
        }
    }
    return c;
}

void collective_destroy(collective_t **cp) {
    collective_t *c = cp ? *cp : NULL;
    if (!c) return;
    if (c->own_buffer) free(c->buffer);
    if (c->impl && c->ops->destroy) c->ops->destroy(c->impl);
    free(c);
    *cp = NULL;
}

collective_choice_t collective_kind(const collective_t *c) { return c->ops->kind; }

float *collective_buffer(collective_t *c) { return c->buffer; }

int collective_sum(collective_t *c, float *buf, size_t n, int timeout_ms, char *err, size_t err_len) {
    return c->ops->sum(c->impl, buf, n, timeout_ms, err, err_len);
}

enum { MAP_BLOCK = 2048 };  // floats mapped and copied out while in L1

int collective_sum_map(collective_t *c, float *buf, size_t n, float weight, float *total, collective_map_fn map,
                       void *ctx, float *out, int timeout_ms, char *err, size_t err_len) {
    if (c->ops->sum_map)
        return c->ops->sum_map(c->impl, buf, n, weight, total, map, ctx, out, timeout_ms, err, err_len);
    buf[n] = weight;
    if (c->ops->sum(c->impl, buf, n + 1, timeout_ms, err, err_len) != 0) return -1;
    *total = buf[n];
    if (*total > 0.0f) collective_map_all(buf, n, map, ctx, out);
    return 0;
}

void collective_map_all(float *sum, size_t n, collective_map_fn map, void *ctx, float *out) {
    for (size_t off = 0; off < n; off += MAP_BLOCK) {
        size_t m = n - off < MAP_BLOCK ? n - off : MAP_BLOCK;
        map(ctx, off, sum + off, m);
        memcpy(out + off, sum + off, m * sizeof *out);
    }
}

int collective_compresses(const collective_t *c) { return c->ops->sum_compressed != NULL; }

int collective_sum_compressed(collective_t *c, compressor_t *comp, float *residual, float *buf, size_t m,
                              size_t examples, float *total, uint64_t *raw_sent, int timeout_ms, char *err,
                              size_t err_len) {
    if (!c->ops->sum_compressed) {
        snprintf(err, err_len, "--compress: compressed exchanges go round the ZeroMQ ring, not --collective %s",
                 collective_name(c->ops->kind));
        return -1;
    }
    return c->ops->sum_compressed(c->impl, comp, residual, buf, m, examples, total, raw_sent, timeout_ms, err, err_len);
}

void collective_net_bytes(const collective_t *c, uint64_t *sent, uint64_t *recv) {
    ring_stats_t rs;
    ring_get_stats(c->main_ring, &rs);
    *sent = rs.bytes_sent;
    *recv = rs.bytes_recv;
    if (!c->ops->net_bytes) return;
    uint64_t s = 0, r = 0;
    c->ops->net_bytes(c->impl, &s, &r);
    *sent += s;
    *recv += r;
}

double collective_waited_s(const collective_t *c) { return c->ops->waited_s ? c->ops->waited_s(c->impl) : NAN; }

const char *collective_cross_ring(const collective_t *c) {
    return c->ops->cross_ring ? c->ops->cross_ring(c->impl) : NULL;
}

void collective_settled(collective_t *c) {
    if (c->ops->settled) c->ops->settled(c->impl);
}
