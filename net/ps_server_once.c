// A parameter-server shard's exactly-once ledger (ps_server_impl.h,
// docs/reliability.md): what each worker's pushes did over the whole run,
// kept so that a retried push is applied once and a resume knows what a
// crash lost.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/ps_server_impl.h"

int ps_once_init(ps_once_t *o, size_t n_workers) {
    size_t nw = n_workers;
    o->duplicates_by = calloc(nw, sizeof *o->duplicates_by);
    o->lost_by = calloc(nw, sizeof *o->lost_by);
    o->resumed_by = calloc(nw, sizeof *o->resumed_by);
    o->late_by = calloc(nw, sizeof *o->late_by);
    o->resend_clock = calloc(nw, sizeof *o->resend_clock);
    o->ledger = o->own_ledger = calloc(2 * nw, sizeof *o->own_ledger);
    return o->duplicates_by && o->lost_by && o->resumed_by && o->late_by && o->resend_clock && o->own_ledger ? 0 : -1;
}

void ps_once_free(ps_once_t *o) {
    free(o->duplicates_by);
    free(o->lost_by);
    free(o->resumed_by);
    free(o->late_by);
    free(o->resend_clock);
    free(o->own_ledger);
    counter_file_close(&o->ledger_file);
}

static const char ledger_magic[8] = {'A', 'S', 'G', 'D', 'A', 'P', 'P', 'L'};

static void ledger_path(char *out, size_t len, const char *checkpoint_path) {
    snprintf(out, len, "%s.ledger", checkpoint_path);
}

// With checkpoints, the ledger moves into CHECKPOINT.ledger, holding `values`
// (2 n_workers counters).
int ps_once_open_ledger(ps_server_t *s, const uint64_t *values, char *err, size_t err_len) {
    if (!s->cfg.checkpoint_path) return 0;
    char path[1100];
    ledger_path(path, sizeof path, s->cfg.checkpoint_path);
    size_t n = 2 * s->cfg.n_workers;
    char why[1200];
    if (counter_file_create(&s->once.ledger_file, path, ledger_magic, n, 0, why, sizeof why) != 0) {
        snprintf(err, err_len, "server: %s", why);
        return -1;
    }
    memcpy(s->once.ledger_file.v, values, n * sizeof *values);
    s->once.ledger = s->once.ledger_file.v;
    return 0;
}

// What the crash lost: the ledger the previous shard kept until it stopped
// (PATH.ledger, beside the checkpoint resumed from) counts every push it
// applied; those beyond the checkpoint's count are lost. The last of them may
// come again (its acknowledgement lost with the shard): resend_clock knows it.
void ps_once_count_lost(ps_server_t *s, const char *path, uint64_t *at_checkpoint) {
    size_t nw = s->cfg.n_workers;
    char lpath[1100], why[1200];
    ledger_path(lpath, sizeof lpath, path);
    uint64_t *now = s->once.own_ledger;  // the ledger at the crash, read into own memory
    size_t held = 0;
    int known = counter_file_read(lpath, ledger_magic, 2 * nw, now, &held, why, sizeof why) == 0;
    if (known && held != 2 * nw) {
        snprintf(why, sizeof why, "%s: holds %zu counters, not %zu", lpath, held, 2 * nw);
        known = 0;
    }
    for (size_t k = 0; known && k < nw; k++) known = now[2 * k] >= at_checkpoint[2 * k];
    if (!known) {
        s->stats.lost_unknown = 1;
        if (!s->cfg.quiet)
            fprintf(stderr,
                    "asgd server %zu: %s; the pushes applied after the checkpoint and lost cannot be "
                    "counted\n",
                    s->cfg.shard, known ? "its ledger is of another run" : why);
        memcpy(now, at_checkpoint, 2 * nw * sizeof *now);
    }
    for (size_t k = 0; k < nw; k++) {
        uint64_t after = now[2 * k] - at_checkpoint[2 * k];
        s->once.lost_by[k] += after;
        if (after > 0) s->once.resend_clock[k] = now[2 * k + 1];
        s->once.resumed_by[k] = s->members.clocks.pushes_total[k];
    }
}

// Worker k's push of `clock` was applied (under BSP: buffered for its round).
void ps_once_count_applied(ps_server_t *s, uint32_t k, uint64_t clock, int resent_lost) {
    s->members.clocks.clock[k] = clock + 1;
    s->members.clocks.pushes[k]++;
    s->members.clocks.pushes_total[k]++;
    s->stats.pushes_applied++;
    s->once.ledger[2 * k]++;  // a store into the mapped ledger: it survives a crash
    s->once.ledger[2 * k + 1] = clock + 1;
    if (resent_lost && s->once.lost_by[k] > 0) s->once.lost_by[k]--;
}

// A push applied already came again (its acknowledgement was lost): it is
// acknowledged again, not applied.
void ps_once_count_duplicate(ps_server_t *s, uint32_t k) {
    s->stats.duplicates++;
    s->once.duplicates_by[k]++;
}

const uint64_t *ps_server_duplicates_per_worker(const ps_server_t *s) { return s->once.duplicates_by; }
const uint64_t *ps_server_lost_per_worker(const ps_server_t *s) { return s->once.lost_by; }
const uint64_t *ps_server_resumed_pushes_per_worker(const ps_server_t *s) { return s->once.resumed_by; }
const uint64_t *ps_server_late_per_worker(const ps_server_t *s) { return s->once.late_by; }
