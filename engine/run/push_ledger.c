// Every acknowledged push applied exactly once: the workers' push ledgers and the run's check (dist.h).
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "datasets/storage/checkpoint_file.h"
#include "datasets/storage/counter_file.h"
#include "kernels/foundation/partition.h"
#include "engine/run/dist.h"
#include "engine/replica/collective.h"
#include "engine/replica/collective_mpi.h"
#include "engine/replica/global_eval.h"
#include "engine/core/json_writer.h"
#include "engine/core/test_hooks.h"
#include "engine/run/model_file.h"
#include "engine/run/run_record.h"
#include "engine/run/servers_watch.h"
#include "engine/run/worker_live.h"
#include "engine/replica/replica.h"
#include "engine/replica/worker_checkpoint.h"
#include "engine/core/run_report.h"
#include "net/ps_client.h"
#include "net/curve_auth.h"
#include "kernels/foundation/trace.h"
#include "net/ps_server.h"
#include "net/ps_replica.h"
#include "net/rendezvous.h"
#include "net/stop_signal.h"
#include "net/ring.h"
#include "net/wire.h"
#include "staleness/delay.h"
#include "staleness/histogram.h"

// ---- the workers' push ledgers ---------------------------------------------------

static const char push_ledger_magic[8] = {'A', 'S', 'G', 'D', 'P', 'U', 'S', 'H'};
#define PUSH_LEDGER_MAX 100000  // incarnations of one worker looked for

static void push_ledger_path(char *out, size_t len, const char *dir, size_t worker, size_t incarnation) {
    snprintf(out, len, "%s/worker-%zu.pushes.%zu", dir, worker, incarnation);
}

// Counter 0 is the run id (a run directory used again holds an earlier run's
// ledgers, which are not this run's); then per shard a ps_push_count_t, two
// counters: sent, acked.
int dist_push_ledger_open(const char *dir, uint64_t run_id, size_t worker, size_t n_shards, counter_file_t *f,
                          size_t *incarnation, char *err, size_t err_len) {
    char path[1100];
    for (size_t n = 0; n < PUSH_LEDGER_MAX; n++) {
        push_ledger_path(path, sizeof path, dir, worker, n);
        if (counter_file_create(f, path, push_ledger_magic, 1 + 2 * n_shards, 1, err, err_len) == 0) {
            f->v[0] = run_id;
            *incarnation = n;
            return 0;
        }
        if (errno != EEXIST) return -1;
    }
    snprintf(err, err_len, "%s: %d incarnations of worker %zu already", dir, PUSH_LEDGER_MAX, worker);
    return -1;
}

ps_push_count_t *dist_push_ledger_counts(const counter_file_t *f) { return (ps_push_count_t *)(f->v + 1); }

int dist_push_ledger_sum(const char *dir, uint64_t run_id, size_t worker, size_t n_shards, ps_push_count_t *sums,
                         size_t *incarnations, char *err, size_t err_len) {
    memset(sums, 0, n_shards * sizeof *sums);
    *incarnations = 0;
    size_t n_counters = 1 + 2 * n_shards, held;
    uint64_t *one = malloc(n_counters * sizeof *one);
    if (!one) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    char path[1100];
    int rc = 0;
    for (size_t n = 0; n < PUSH_LEDGER_MAX; n++) {
        push_ledger_path(path, sizeof path, dir, worker, n);
        if (access(path, F_OK) != 0) break;
        if (counter_file_read(path, push_ledger_magic, n_counters, one, &held, err, err_len) != 0) {
            rc = -1;
            break;
        }
        if (held == 0 || one[0] != run_id) continue;  // never sized, or another run's
        if (held != n_counters) {
            snprintf(err, err_len, "%s: holds %zu counters; this run's ledgers hold %zu", path, held, n_counters);
            rc = -1;
            break;
        }
        for (size_t k = 0; k < n_shards; k++) {
            sums[k].sent += one[1 + 2 * k];
            sums[k].acked += one[2 + 2 * k];
        }
        (*incarnations)++;
    }
    free(one);
    if (rc == 0 && *incarnations == 0) {
        push_ledger_path(path, sizeof path, dir, worker, 0);
        snprintf(err, err_len, "%s: missing (or of another run): worker %zu counted no pushes", path, worker);
        rc = -1;
    }
    return rc;
}

// The run's exactly-once check (dist.h, docs/reliability.md), from the
// shards' result records and the workers' ledgers.
int dist_check_pushes_applied_once(const char *dir, size_t servers, size_t workers, char *why, size_t why_len) {
    ps_push_count_t *acks = calloc(servers ? servers : 1, sizeof *acks);
    server_result_t *shard = calloc(servers ? servers : 1, sizeof *shard);
    char err[1200];
    size_t held = 0;  // records read (freed at the end)
    int rc = acks && shard ? 0 : -1;
    if (rc != 0) snprintf(why, why_len, "out of memory");
    for (size_t s = 0; rc == 0 && s < servers; s++) {
        if (run_record_read_server(dir, s, &shard[s], why, why_len) != 0) {
            rc = -1;
            break;
        }
        held++;
        if (shard[s].workers < workers || shard[s].workers != shard[0].workers) {
            snprintf(why, why_len, "server %zu's result counts %llu workers; the run has %zu", s,
                     (unsigned long long)shard[s].workers, workers);
            rc = -1;
        } else if (!shard[s].lost_known) {
            snprintf(why, why_len,
                     "server %zu was resumed without the ledger beside its checkpoint "
                     "(server-%zu.ckpt.ledger): the pushes its crash lost cannot be counted",
                     s, s);
            rc = -1;
        }
    }
    uint64_t run_id = held ? shard[0].run_id : 0;  // server 0's names the run
    // Slots from `workers` on are joiners' (--max-workers): one nobody took has no ledger and no pushes.
    size_t slots = held ? (size_t)shard[0].workers : workers;
    for (size_t k = 0; rc == 0 && k < slots; k++) {
        size_t incarnations = 0;
        uint64_t applied_k = 0;
        for (size_t s = 0; k >= workers && s < servers; s++)
            applied_k += shard[s].pushes_total[k] + shard[s].pushes_lost[k];
        if (k >= workers && applied_k == 0 &&
            dist_push_ledger_sum(dir, run_id, k, servers, acks, &incarnations, err, sizeof err) != 0)
            continue;
        if (dist_push_ledger_sum(dir, run_id, k, servers, acks, &incarnations, err, sizeof err) != 0) {
            snprintf(why, why_len, "%s", err);
            rc = -1;
            break;
        }
        for (size_t s = 0; rc == 0 && s < servers; s++) {
            double total = (double)shard[s].pushes_total[k], lost = (double)shard[s].pushes_lost[k];
            double applied = total + lost, acked = (double)acks[s].acked, sent = (double)acks[s].sent;
            if (acked <= applied && applied <= sent) continue;
            snprintf(why, why_len,
                     "worker %zu, shard %zu: %s: its %zu incarnation%s sent %.0f pushes and were "
                     "acknowledged for %.0f; the shard applied %.0f (%.0f of them lost with a restart)",
                     k, s,
                     acked > applied ? "a push was acknowledged but not applied"
                                     : "more pushes were applied than were sent (one applied twice)",
                     incarnations, incarnations == 1 ? "" : "s", sent, acked, applied, lost);
            rc = 1;
        }
    }
    for (size_t s = 0; s < held; s++) server_result_free(&shard[s]);
    free(shard);
    free(acks);
    return rc;
}

// ---- security --------------------------------------------------------------------
