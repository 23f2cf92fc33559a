#ifndef ASGD_ENGINE_REPLICA_COLLECTIVE_H
#define ASGD_ENGINE_REPLICA_COLLECTIVE_H
// Which collective sums a ring mode's exchanges (allreduce, local, hybrid's
// dense part): the ZeroMQ ring (net/ring.h), the stream ring (net/stream_ring.h)
// or, when every worker is on this host, the shared-memory segment
// (net/shm_allreduce.h), or, when asked for under mpirun, MPI_Allreduce
// (collective_mpi.h). docs/allreduce.md, "Choosing the collective".
// The one chosen is a collective_t: one table of operations
// (collective_impl.h), one implementation per file (collective_ring.c,
// collective_shm.c, collective_stream.c, collective_hier.c, collective_mpi.c),
// each owning its state.
#include <stddef.h>
#include <stdint.h>

#include "net/compress.h"
#include "net/rendezvous.h"

typedef enum collective_choice {
    COLLECTIVE_AUTO = 0,  // shared memory when every worker is on this host and nothing is compressed
    COLLECTIVE_SHM = 1,
    COLLECTIVE_RING = 2,
    COLLECTIVE_MPI = 3,  // MPI_Allreduce (collective_mpi.h); never chosen by auto
    COLLECTIVE_HIER = 4,  // shared memory within each host, rings across hosts (net/hier_allreduce.h)
    COLLECTIVE_STREAM = 5,  // the ring over plain TCP connections (net/stream_ring.h)
} collective_choice_t;

struct shm_allreduce;
struct hier_allreduce;
struct ring;
struct stream_ring;

// "auto", "shm", "ring", "mpi", "hier" or "stream".
const char *collective_name(collective_choice_t c);

// This process's host identity, which a worker reports in the rendezvous (its
// entry's name) and by which workers are grouped into hosts: $ASGD_HOST_ID
// when set and not empty, else the host name. A comma-separated list
// "ID0,ID1,..." gives worker `worker` its worker-th item, so that one
// environment (e.g. `asgd launch` on one machine) can pretend to be several
// hosts. Made one word of at most len - 1 bytes (blanks and control bytes
// become '_'). Returns 0, or -1 with err naming ASGD_HOST_ID when its list
// has no item for this worker.
int collective_host_id(size_t worker, char *out, size_t len, char *err, size_t err_len);

// How the workers of a table group into hosts: two workers are on one host
// when both reported a host identity (rdv_entry_t.name) and they are equal, or
// neither did and their ring endpoints say so (collective_one_host's rule).
// Hosts are numbered by their lowest worker; a worker's local index is its
// place among its host's workers in worker order. local_n is the number of
// workers on every host, or 0 when the hosts have different numbers.
typedef struct collective_layout {
    size_t hosts, local_n;
    size_t host, local;  // worker `id`'s
} collective_layout_t;
void collective_layout(const rdv_entry_t *ring, size_t n, size_t id, collective_layout_t *out);

// What `choice` comes to for this table: auto is shm when every worker is on
// one host (collective_one_host, and one host identity), hier when there are
// several hosts with the same number of workers, more than one, on each,
// else the stream ring, or the ZeroMQ ring when the run uses CURVE (the stream
// ring is plain TCP; a forced stream is refused then); compressed exchanges
// stay on the ZeroMQ ring. A forced choice that
// cannot be honoured returns -1 with err naming --collective.
int collective_pick(collective_choice_t choice, int compressed, const rdv_entry_t *ring, size_t n, char *err,
                    size_t err_len);

// Whether the workers' ring endpoints (ring[0..n), as they advertised them)
// say they are all on one host: every one ipc:// or loopback (such rings
// work only within one host), or every one tcp:// on the same host name or
// address. Every worker sees the same table, so all decide alike.
int collective_one_host(const rdv_entry_t *ring, size_t n);

// Decides for worker `id` of n and, for shared memory, attaches it to the
// run's segment (named by run_id; calls of up to max_count floats).
// compressed: the run compresses its exchanges, which stay on the ring.
// *shm is NULL when the ring or MPI is chosen; MPI is opened here for the
// process (collective_mpi_open). A forced shm or mpi that cannot be honoured
// (compression; for shm workers on several hosts) or a failed attach or MPI
// start returns -1 with err naming --collective or the segment.
// A choice that comes to hier or stream (collective_pick) fails here: use
// collective_open_hier or collective_open_stream.
int collective_open(collective_choice_t choice, int compressed, const rdv_entry_t *ring, size_t n, size_t id,
                    uint64_t run_id, size_t max_count, struct shm_allreduce **shm, char *err, size_t err_len);

// For a choice that came to hier: attaches worker `id` to its host's segment,
// binds its cross-host ring (a stream ring, or under CURVE a ZeroMQ ring; on
// bind_host, the one the main ring was bound on; 127.0.0.1, or "ipc" for a
// ZeroMQ ring, when the main ring is on ipc://), learns the other workers'
// cross-ring endpoints through one exchange over the connected main ring
// `main_ring` (every worker calls this at the same point), and connects.
// Returns 0 with *hier set, or -1 with err.
int collective_open_hier(void *zmq_ctx, struct ring *main_ring, const rdv_entry_t *ring, size_t n, size_t id,
                         uint64_t run_id, size_t max_count, const char *bind_host, int timeout_ms,
                         struct hier_allreduce **hier, char *err, size_t err_len);

// For a choice that came to stream: binds worker `id`'s stream ring (on
// bind_host, the one the main ring was bound on; 127.0.0.1 when the main ring
// is on ipc://; beyond loopback only with --insecure, as every plain
// listener), learns the others' endpoints through one exchange over the
// connected main ring `main_ring` (every worker calls this at the same point),
// and connects to the next worker's. Returns 0 with *stream set, or -1 with err.
int collective_open_stream(struct ring *main_ring, const rdv_entry_t *ring, size_t n, size_t id, uint64_t run_id,
                           size_t max_count, const char *bind_host, int timeout_ms, struct stream_ring **stream,
                           char *err, size_t err_len);

// ---- the collective a worker sums with ------------------------------------

typedef struct collective collective_t;

// Picks the collective for worker `id` of n from the rendezvous table `ring`
// (collective_pick) and opens it: on the connected main ring `main_ring`
// (borrowed: it outlives the collective; the others' endpoints are exchanged
// over it), for calls of up to max_count floats, with the buffers the
// compression `compress` asks for, bound as collective_open_hier and
// collective_open_stream say. Returns the collective, or NULL with err.
collective_t *collective_new(void *zmq_ctx, struct ring *main_ring, collective_choice_t choice,
                             const compress_spec_t *compress, const rdv_entry_t *ring, size_t n, size_t id,
                             uint64_t run_id, size_t max_count, const char *bind_host, int timeout_ms, char *err,
                             size_t err_len);
void collective_destroy(collective_t **c);  // accepts NULL and nulls the pointer

// What was chosen (never COLLECTIVE_AUTO).
collective_choice_t collective_kind(const collective_t *c);

// The input area of a call, max_count floats, owned by the collective: in
// shared memory the segment's, which spares the sum its copy in.
float *collective_buffer(collective_t *c);

// Sums buf[0..n) (n <= max_count) over every worker in place, as float32;
// every worker ends with the same bits. Returns 0, or -1 with err.
int collective_sum(collective_t *c, float *buf, size_t n, int timeout_ms, char *err, size_t err_len);

// A sum that ends in what the caller makes of it (shm_allreduce_sum_map's
// contract, net/shm_allreduce.h): buf[0..n) summed over every worker, each
// element's sum handed to map in blocks (values: the sum there on entry, what
// out is to hold there on return), weight summed into *total before any map;
// out[0..n) ends with every block's mapped values, the same bits on every
// worker; nothing is mapped and out is left alone when *total <= 0. In shared
// memory each worker maps its own slice only; elsewhere every worker maps the
// whole sum (buf then holds n + 1 floats: the weight travels in buf[n]).
// Returns 0, or -1 with err.
typedef void (*collective_map_fn)(void *ctx, size_t offset, float *values, size_t n);
int collective_sum_map(collective_t *c, float *buf, size_t n, float weight, float *total, collective_map_fn map,
                       void *ctx, float *out, int timeout_ms, char *err, size_t err_len);
// The map of a sum formed elsewhere (a compressed exchange): every block of
// sum[0..n) mapped in place, while in L1, and copied to out, as
// collective_sum_map does where the collective maps the whole.
void collective_map_all(float *sum, size_t n, collective_map_fn map, void *ctx, float *out);

// Whether it carries compressed exchanges (the ZeroMQ ring only).
int collective_compresses(const collective_t *c);

// A compressed exchange (collective_compresses): buf[0..m) encoded by comp
// (with error feedback into residual when not NULL), buf[m] the examples
// behind it. On return buf[0..m) is the sum and *total the examples of every
// worker; *raw_sent grows by what float32 would have sent. Returns 0, or -1.
int collective_sum_compressed(collective_t *c, compressor_t *comp, float *residual, float *buf, size_t m,
                              size_t examples, float *total, uint64_t *raw_sent, int timeout_ms, char *err,
                              size_t err_len);

// Payload bytes sent and received, the main ring's included.
void collective_net_bytes(const collective_t *c, uint64_t *sent, uint64_t *recv);

// Seconds this worker's sums waited for the other workers (shared memory:
// for their inputs and their summed slices), apart from its own copying and
// summing; NaN where the collective does not tell waiting from the transfer
// (the ZeroMQ, stream, hierarchical and MPI rings).
double collective_waited_s(const collective_t *c);

// hier: what carries it across hosts, "stream" or "zeromq"; else NULL.
const char *collective_cross_ring(const collective_t *c);

// This worker took part in every sum it was to (MPI may then be finalised
// at exit: collective_mpi_settled).
void collective_settled(collective_t *c);

#endif
