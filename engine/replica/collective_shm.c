// Shared memory behind the collective table (collective_impl.h): the
// segment of the workers on this host (net/shm_allreduce.h), whose input
// area the caller writes into, sparing the sum its copy in.
#include "engine/replica/collective_impl.h"
#include "net/shm_allreduce.h"

static int shm_sum(void *impl, float *buf, size_t n, int timeout_ms, char *err, size_t err_len) {
    return shm_allreduce_sum(impl, buf, n, timeout_ms, err, err_len);
}

static int shm_sum_map(void *impl, float *buf, size_t n, float weight, float *total, collective_map_fn map, void *ctx,
                       float *out, int timeout_ms, char *err, size_t err_len) {
    return shm_allreduce_sum_map(impl, buf, n, weight, total, map, ctx, out, timeout_ms, err, err_len);
}

static double shm_waited_s(const void *impl) { return shm_allreduce_waited_s(impl); }

static float *shm_buffer(void *impl) { return shm_allreduce_buffer(impl); }

static void shm_free(void *impl) {
    shm_allreduce_t *s = impl;
    shm_allreduce_destroy(&s);
}

const collective_ops_t collective_shm_ops = {
    .kind = COLLECTIVE_SHM,
    .sum = shm_sum,
    .sum_map = shm_sum_map,
    .buffer = shm_buffer,
    .waited_s = shm_waited_s,
    .destroy = shm_free,
};
