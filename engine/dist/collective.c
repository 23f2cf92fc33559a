// The choice between the ring and shared memory (collective.h).
#include "engine/dist/collective.h"

#include <stdio.h>
#include <string.h>

#include "engine/dist/collective_mpi.h"  // defines: collective_mpi_open
#include "net/curve_auth.h"     // defines: net_endpoint_is_local
#include "net/shm_allreduce.h"  // defines: shm_allreduce_new

const char *collective_name(collective_choice_t c) {
    return c == COLLECTIVE_SHM ? "shm" : c == COLLECTIVE_RING ? "ring" : c == COLLECTIVE_MPI ? "mpi" : "auto";
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

int collective_open(collective_choice_t choice, int compressed, const rdv_entry_t *ring, size_t n, size_t id,
                    uint64_t run_id, size_t max_count, struct shm_allreduce **shm, char *err, size_t err_len) {
    *shm = NULL;
    if (choice == COLLECTIVE_RING) return 0;
    if (compressed) {
        if (choice == COLLECTIVE_AUTO) return 0;
        snprintf(err, err_len, "--collective %s: compressed exchanges (--compress) go round the ring",
                 collective_name(choice));
        return -1;
    }
    if (choice == COLLECTIVE_MPI) return collective_mpi_open(n, id, err, err_len);
    if (!collective_one_host(ring, n)) {
        if (choice == COLLECTIVE_AUTO) return 0;
        size_t k = first_elsewhere(ring, n);
        snprintf(err, err_len, "--collective shm: the workers are not all on one host (worker 0's ring is at %s, "
                 "worker %zu's at %s); use --collective ring or auto", ring[0].endpoint, k, ring[k].endpoint);
        return -1;
    }
    *shm = shm_allreduce_new(run_id, id, n, max_count, err, err_len);
    return *shm ? 0 : -1;
}
