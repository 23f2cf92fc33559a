// The ZeroMQ ring behind the collective table (collective_impl.h): float32
// sums, and the compressed exchanges, which only it carries: fp16 partial
// sums on its reduce-scatter, other encodings by allgather.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/replica/collective_impl.h"
#include "net/ring.h"

typedef struct ring_collective {
    ring_t *ring;  // borrowed
    size_t n, id;
    // Allgather (encodings that cannot be added on the way): every worker's.
    uint8_t *blobs;  // (n, blob_cap) encodings
    size_t blob_cap;
    size_t *blob_lens;  // (n)
    uint32_t *blob_weights;  // (n) examples behind each
} ring_collective_t;

static void ring_free(void *impl) {
    ring_collective_t *c = impl;
    if (!c) return;
    free(c->blobs);
    free(c->blob_lens);
    free(c->blob_weights);
    free(c);
}

void *collective_ring_state(ring_t *ring, const compress_spec_t *compress, size_t n, size_t id, size_t max_count,
                            char *err, size_t err_len) {
    ring_collective_t *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    c->ring = ring;
    c->n = n;
    c->id = id;
    if (compress->kind != COMPRESS_KIND_NONE && compress->kind != COMPRESS_KIND_FP16) {
        c->blob_cap = compress_encoded_bytes(compress, max_count - 1);
        c->blobs = malloc(n * c->blob_cap);
        c->blob_lens = calloc(n, sizeof *c->blob_lens);
        c->blob_weights = calloc(n, sizeof *c->blob_weights);
        if (!c->blobs || !c->blob_lens || !c->blob_weights) goto oom;
    }
    return c;
oom:
    ring_free(c);
    snprintf(err, err_len, "worker: out of memory for compression buffers");
    return NULL;
}

static int ring_sum(void *impl, float *buf, size_t n, int timeout_ms, char *err, size_t err_len) {
    ring_collective_t *c = impl;
    return ring_allreduce_sum(c->ring, buf, n, timeout_ms, err, err_len);
}

// Encodings that cannot be added on the way: every worker's goes round (an
// allgather), and every worker adds them up in rank order, so all apply the
// same bits.
static int sum_allgather(ring_collective_t *c, compressor_t *comp, float *residual, float *buf, size_t m,
                         size_t examples, float *total, int timeout_ms, char *err, size_t err_len) {
    c->blob_lens[c->id] = compress_encoded_bytes(compressor_spec(comp), m);
    c->blob_weights[c->id] = (uint32_t)examples;
    if (compress_encode(comp, buf, m, residual, NULL, c->blobs + c->id * c->blob_cap, c->blob_cap, err, err_len) != 0 ||
        ring_allgather_encoded(c->ring, c->blobs, c->blob_cap, c->blob_lens, c->blob_weights, m, timeout_ms, err,
                               err_len) != 0)
        return -1;
    memset(buf, 0, m * sizeof *buf);
    uint64_t examples_all = 0;
    for (size_t k = 0; k < c->n; k++) {
        if (compress_decode_add(c->blobs + k * c->blob_cap, c->blob_lens[k], m, buf, err, err_len) != 0) return -1;
        examples_all += c->blob_weights[k];
    }
    *total = (float)examples_all;
    return 0;
}

static int ring_sum_compressed(void *impl, compressor_t *comp, float *residual, float *buf, size_t m, size_t examples,
                               float *total, uint64_t *raw_sent, int timeout_ms, char *err, size_t err_len) {
    ring_collective_t *c = impl;
    if (compressor_spec(comp)->kind == COMPRESS_KIND_FP16) {
        // fp16 partial sums on the wire, added in float32; the count stays exact.
        if (ring_allreduce_sum_fp16(c->ring, buf, m + 1, m, timeout_ms, err, err_len) != 0) return -1;
        *total = buf[m];
    } else if (sum_allgather(c, comp, residual, buf, m, examples, total, timeout_ms, err, err_len) != 0) {
        return -1;
    }
    *raw_sent += ring_allreduce_bytes_sent(c->ring, m + 1);
    return 0;
}

const collective_ops_t collective_ring_ops = {
    .kind = COLLECTIVE_RING,
    .sum = ring_sum,
    .sum_compressed = ring_sum_compressed,
    .destroy = ring_free,
};
