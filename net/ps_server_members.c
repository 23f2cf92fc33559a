// A parameter-server shard's membership and clocks (ps_server_impl.h): who
// is in the run, how far each worker got, what each was sent, what its clock
// can plausibly be, and the HELLOs it was answered.
#include <stdio.h>
#include <stdlib.h>

#include "kernels/foundation/mono_clock.h"
#include "kernels/foundation/trace.h"
#include "net/ps_local_round.h"
#include "net/ps_server_impl.h"

static const trace_kind_t TK_REJOIN = {"rejoin", "server", "worker"};

// The arrays; the clock table is made apart (clock_table_init, its own error).
int ps_members_init(ps_members_t *m, size_t n_workers) {
    size_t nw = n_workers;
    m->read_min_clock = calloc(nw, sizeof *m->read_min_clock);
    m->sent_version = malloc(nw * SENT_HISTORY * sizeof *m->sent_version);
    m->sent_clock = malloc(nw * SENT_HISTORY * sizeof *m->sent_clock);
    m->sent_head = calloc(nw, sizeof *m->sent_head);
    m->sent_len = calloc(nw, sizeof *m->sent_len);
    m->last_heard = calloc(nw, sizeof *m->last_heard);
    m->claim = calloc(nw, sizeof *m->claim);
    m->join_nonce = calloc(nw, sizeof *m->join_nonce);
    m->hello = calloc(nw, sizeof *m->hello);
    return m->read_min_clock && m->sent_version && m->sent_clock && m->sent_head && m->sent_len && m->last_heard &&
                   m->claim && m->join_nonce && m->hello
               ? 0
               : -1;
}

void ps_members_free(ps_members_t *m) {
    clock_table_free(&m->clocks);
    free(m->read_min_clock);
    free(m->sent_version);
    free(m->sent_clock);
    free(m->sent_head);
    free(m->sent_len);
    free(m->last_heard);
    free(m->claim);
    free(m->join_nonce);
    free(m->hello);
}

// The clock conditional pulls wait on: the slowest live worker's; under BSP
// with backup workers, the rounds applied (a round completes without the late).
uint64_t ps_members_ready_clock(const ps_server_t *s) {
    if (s->cfg.backup_workers > 0) return s->bsp.clock;
    return clock_table_min(&s->members.clocks);
}

// Worker k was sent parameters of `version` with min clock `min_clock`. A
// version sent again keeps the clock it was first sent with (the min clock can
// rise without an update only when a worker leaves, is evicted or rejoins).
void ps_members_note_sent(ps_server_t *s, uint32_t worker, uint64_t version, uint64_t min_clock) {
    s->members.read_min_clock[worker] = min_clock;
    uint64_t *v = s->members.sent_version + (size_t)worker * SENT_HISTORY,
             *c = s->members.sent_clock + (size_t)worker * SENT_HISTORY;
    uint32_t head = s->members.sent_head[worker], len = s->members.sent_len[worker];
    if (len > 0 && v[(head + len - 1) % SENT_HISTORY] == version) return;
    if (len == SENT_HISTORY)
        head = s->members.sent_head[worker] = (head + 1) % SENT_HISTORY;
    else
        s->members.sent_len[worker] = ++len;
    v[(head + len - 1) % SENT_HISTORY] = version;
    c[(head + len - 1) % SENT_HISTORY] = min_clock;
}

// The min clock this shard reported with version `version` when it sent it to
// `worker`: that of the latest version sent at or below it; when every version
// remembered is newer, the oldest one's; when none is (a shard restored from a
// checkpoint), the one reported with the worker's last pull.
uint64_t ps_members_read_clock(const ps_server_t *s, uint32_t worker, uint64_t version) {
    const uint64_t *v = s->members.sent_version + (size_t)worker * SENT_HISTORY,
                   *c = s->members.sent_clock + (size_t)worker * SENT_HISTORY;
    uint32_t head = s->members.sent_head[worker], len = s->members.sent_len[worker];
    if (len == 0) return s->members.read_min_clock[worker];
    for (uint32_t i = len; i-- > 0;)
        if (v[(head + i) % SENT_HISTORY] <= version) return c[(head + i) % SENT_HISTORY];
    return c[head];
}

// Whether a push's clock is one its worker's steps can have reached; a
// plausible push's steps are added to what the worker has claimed.
int ps_members_clock_plausible(ps_server_t *s, uint32_t k, const wire_header_t *h) {
    struct clock_claim *c = &s->members.claim[k];
    if (c->unanchored) *c = (struct clock_claim){.base = h->clock};
    uint64_t limit = c->base + c->steps + h->aux;
    if (limit < c->base) limit = UINT64_MAX;  // saturate
    if (h->clock > limit) {
        if (!s->cfg.quiet && !s->warned_clock)
            fprintf(stderr,
                    "asgd server %zu: refused a push from worker %u: its clock %llu is beyond the %llu its "
                    "steps allow (further ones are counted, not shown)\n",
                    s->cfg.shard, k, (unsigned long long)h->clock, (unsigned long long)limit);
        s->warned_clock = 1;
        return 0;
    }
    c->steps += h->aux;
    return 1;
}

// A joiner's HELLO (asgd worker --join) is admitted unless its slot is live
// under another joiner: a retry (or a later HELLO round) carries the same
// nonce. Nonces are not checkpointed: a resumed shard (nonce 0) takes the
// live joiner's HELLO back.
int ps_members_admit_joiner(ps_server_t *s, uint32_t k, uint32_t nonce) {
    if (s->members.clocks.joined[k] && clock_table_is_live(&s->members.clocks, k) && s->members.join_nonce[k] != 0 &&
        s->members.join_nonce[k] != nonce)
        return 0;
    s->members.join_nonce[k] = nonce;
    return 1;
}

// A copy of the last HELLO handled from worker k: the same client (nonce,
// never 0 from ps_client) proposing the same clock. A later HELLO round of
// the same client proposes a later clock, and is handled.
int ps_members_hello_resent(const ps_server_t *s, uint32_t k, const wire_header_t *h) {
    const struct hello_seen *seen = &s->members.hello[k];
    return s->members.clocks.joined[k] && h->aux != 0 && seen->nonce == h->aux && seen->proposed == h->clock;
}

// HELLO from a worker that joined before (a restarted process, or one that was
// evicted) is a rejoin: it continues from the latest of its own clock, the
// clock it proposes (what another shard told it) and the slowest live worker's,
// so it neither holds the others back nor repeats rounds; its count of pushes
// since joining starts again.
static void rejoin(ps_server_t *s, uint32_t k, uint64_t proposed) {
    uint64_t span = TRACE_BEGIN();
    uint64_t c = s->members.clocks.clock[k];
    if (proposed > c) c = proposed;
    uint64_t others = clock_table_min_others(&s->members.clocks, k);
    if (others != UINT64_MAX && others > c) c = others;
    if (s->cfg.mode == SYNC_MODE_BSP && s->bsp.clock > c) c = s->bsp.clock;
    if (!s->cfg.quiet)
        fprintf(stderr, "asgd server %zu: worker %u rejoined%s at clock %llu (it had pushed %llu rounds)\n",
                s->cfg.shard, k, s->members.clocks.evicted[k] ? " after eviction" : "", (unsigned long long)c,
                (unsigned long long)s->members.clocks.clock[k]);
    s->members.clocks.clock[k] = c;
    s->members.clocks.evicted[k] = 0;
    s->members.clocks.left[k] = 0;
    s->members.clocks.pushes[k] = 0;
    s->stats.rejoins++;
    TRACE_END(&TK_REJOIN, span, k);
}

// The first HELLO of a joiner's slot: it enters at the slowest live member's
// clock (or the one it proposes, what another shard told it, if later); under
// BSP at the round after the one being aggregated, which completes without it.
static void enter(ps_server_t *s, uint32_t k, uint64_t proposed) {
    uint64_t c = clock_table_entry_clock(&s->members.clocks, k);
    if (s->cfg.mode == SYNC_MODE_BSP && c < s->bsp.clock + 1) c = s->bsp.clock + 1;
    if (proposed > c) c = proposed;
    s->members.clocks.clock[k] = c;
    if (!s->cfg.quiet)
        fprintf(stderr, "asgd server %zu: worker %u joined the run at clock %llu\n", s->cfg.shard, k,
                (unsigned long long)c);
}

// HELLO from worker k, not a copy of the last one: a worker seen before
// rejoins, a joiner's slot is entered; its clock claims start again from the
// clock it is welcomed at, and the HELLO is remembered.
void ps_members_hello(ps_server_t *s, uint32_t k, const wire_header_t *h, double now) {
    ps_members_t *m = &s->members;
    if (m->clocks.joined[k])
        rejoin(s, k, h->clock);
    else if (k >= m->clocks.n_start)
        enter(s, k, h->clock);
    m->claim[k] = (struct clock_claim){.base = m->clocks.clock[k]};
    m->clocks.joined[k] = 1;
    m->last_heard[k] = now;
    m->hello[k] = (struct hello_seen){h->aux, h->clock, m->clocks.clock[k]};
}

static void note_not_live(ps_server_t *s, double now) {
    if (clock_table_live(&s->members.clocks) == 0) s->members.quiet_since = now;
}

void ps_members_leave(ps_server_t *s, uint32_t k, double now) {
    s->members.clocks.left[k] = 1;
    if (s->local) ps_local_round_out(s->local, k);
    note_not_live(s, now);
}

// Worker k is evicted: the minimum clock no longer counts it, so SSP waits
// and BSP rounds go on.
void ps_members_evict(ps_server_t *s, uint32_t k, double now) {
    s->members.clocks.evicted[k] = 1;
    s->stats.evictions++;
    if (s->local) ps_local_round_out(s->local, k);
    note_not_live(s, now);
}

// Done when every worker has joined and left (joiners' slots nobody took do
// not count); with a worker timeout, also once
// none is live and a further timeout passed without a rejoin.
int ps_members_run_finished(const ps_server_t *s, double now) {
    int all_left = 1, none_live = 1;
    for (size_t k = 0; k < s->cfg.n_workers; k++) {
        if (!s->members.clocks.joined[k] && k >= s->members.clocks.n_start) continue;  // a joiner's slot nobody took
        if (!s->members.clocks.joined[k]) return 0;
        all_left &= s->members.clocks.left[k];
        none_live &= !clock_table_is_live(&s->members.clocks, k);
    }
    if (all_left) return 1;
    return s->cfg.worker_timeout_ms > 0 && none_live &&
           (now - s->members.quiet_since) * 1000.0 >= s->cfg.worker_timeout_ms;
}

// Every worker counts as heard from at `now`, and the run as quiet since then.
void ps_members_heard_all(ps_server_t *s, double now) {
    for (size_t k = 0; k < s->cfg.n_workers; k++) s->members.last_heard[k] = now;
    s->members.quiet_since = now;
}

// The serving loop stalled for `gap` seconds: its workers' messages of that
// time are still on their way in, so the gap does not count as their silence.
void ps_members_forgive_stall(ps_server_t *s, double gap, double now) {
    for (size_t k = 0; k < s->cfg.n_workers; k++)
        s->members.last_heard[k] = s->members.last_heard[k] + gap < now ? s->members.last_heard[k] + gap : now;
    s->members.quiet_since = s->members.quiet_since + gap < now ? s->members.quiet_since + gap : now;
}

void ps_server_set_worker_timeout(ps_server_t *s, int worker_timeout_ms) {
    s->cfg.worker_timeout_ms = worker_timeout_ms;
    ps_members_heard_all(s, mono_clock_s());
}

const uint64_t *ps_server_pushes_per_worker(const ps_server_t *s) { return s->members.clocks.pushes; }
const uint64_t *ps_server_pushes_total_per_worker(const ps_server_t *s) { return s->members.clocks.pushes_total; }
const uint64_t *ps_server_clocks(const ps_server_t *s) { return s->members.clocks.clock; }
