#ifndef ASGD_ENGINE_REPLICA_COLLECTIVE_IMPL_H
#define ASGD_ENGINE_REPLICA_COLLECTIVE_IMPL_H
// Inside a collective (collective.h): the table each implementation fills
// (collective_ring.c, collective_shm.c, collective_stream.c,
// collective_hier.c, collective_mpi.c) and the object that holds one.
#include <stddef.h>
#include <stdint.h>

#include "engine/replica/collective.h"
#include "net/compress.h"

typedef struct collective_ops {
    collective_choice_t kind;
    // Sums buf[0..n) over every worker, in place, as float32; every worker
    // ends with the same bits. Returns 0, or -1 with err.
    int (*sum)(void *impl, float *buf, size_t n, int timeout_ms, char *err, size_t err_len);
    // collective_sum_map where the implementation maps only its own slice; NULL:
    // collective.c sums and maps the whole.
    int (*sum_map)(void *impl, float *buf, size_t n, float weight, float *total, collective_map_fn map, void *ctx,
                   float *out, int timeout_ms, char *err, size_t err_len);
    // Compressed exchanges (collective_sum_compressed); NULL: it takes none.
    int (*sum_compressed)(void *impl, compressor_t *comp, float *residual, float *buf, size_t m, size_t examples,
                          float *total, uint64_t *raw_sent, int timeout_ms, char *err, size_t err_len);
    // Its input area for a call of up to max_count floats, when it lends one
    // (shared memory: the sum then spares a copy); NULL: none.
    float *(*buffer)(void *impl);
    // Payload bytes it sent and received beyond the main ring's; NULL: none.
    void (*net_bytes)(const void *impl, uint64_t *sent, uint64_t *recv);
    // What carries it between hosts ("stream" or "zeromq"); NULL: nothing of its own.
    const char *(*cross_ring)(const void *impl);
    // Seconds its calls waited for the other workers (collective_waited_s);
    // NULL: waiting is not told apart from the transfer.
    double (*waited_s)(const void *impl);
    // Every sum is done (collective_settled); NULL: nothing to do.
    void (*settled)(void *impl);
    void (*destroy)(void *impl);  // NULL: nothing of its own to free
} collective_ops_t;

struct collective {
    const collective_ops_t *ops;
    void *impl;  // the implementation's state
    struct ring *main_ring;  // borrowed: the ring the workers met on
    float *buffer;  // (max_count) a call's input area
    int own_buffer;  // buffer is ours to free (not lent by the implementation)
};

// The implementations: each returns its state (NULL with err on failure).
// The ZeroMQ ring (borrowed), with the buffers of the compression `compress`
// asks for, encodings of up to max_count - 1 values from each of n workers.
void *collective_ring_state(struct ring *ring, const compress_spec_t *compress, size_t n, size_t id, size_t max_count,
                            char *err, size_t err_len);
extern const collective_ops_t collective_ring_ops;
extern const collective_ops_t collective_shm_ops;  // state: an shm_allreduce_t, taken over
extern const collective_ops_t collective_stream_ops;  // state: a stream_ring_t, taken over
extern const collective_ops_t collective_hier_ops;  // state: a hier_allreduce_t, taken over
extern const collective_ops_t collective_mpi_ops;  // no state: MPI is one per process

#endif
