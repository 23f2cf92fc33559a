// A parameter-server shard's BSP round (ps_server_impl.h): each worker's
// gradient for the clock being aggregated, kept until the round is complete,
// then summed in worker order, weighted by examples, and applied once.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/foundation/trace.h"
#include "kernels/update.h"
#include "net/ps_server_impl.h"

static const trace_kind_t TK_BUFFER = {"buffer", "server", "worker"};  // bsp: one gradient taken into its round
static const trace_kind_t TK_BSP_ROUND = {"bsp_round", "server", "clock"};  // bsp: a round's sum applied

// A sparse round's merge, in one gradient: its keys and values, and how far it has got.
typedef struct ps_bsp_cursor {
    const uint32_t *keys;
    const float *values;
    size_t at, len;
} ps_bsp_cursor_t;

// A round of n_workers gradients of n values each (n >= 1).
int ps_bsp_init(ps_bsp_round_t *r, size_t n_workers, size_t n) {
    size_t nw = n_workers;
    r->grad = calloc(nw * n, sizeof *r->grad);
    r->held = malloc(nw * sizeof *r->held);
    r->held_keys = malloc(nw * sizeof *r->held_keys);
    for (size_t k = 0; r->held && r->held_keys && k < nw; k++) {
        zmq_msg_init(&r->held[k]);
        zmq_msg_init(&r->held_keys[k]);
    }
    r->examples = calloc(nw, sizeof *r->examples);
    r->version = calloc(nw, sizeof *r->version);
    r->weight = calloc(nw, sizeof *r->weight);
    r->terms = calloc(nw, sizeof *r->terms);
    r->cursor = calloc(nw, sizeof *r->cursor);
    return r->grad && r->held && r->held_keys && r->examples && r->version && r->weight && r->terms && r->cursor ? 0
                                                                                                                 : -1;
}

void ps_bsp_free(ps_bsp_round_t *r, size_t n_workers) {
    free(r->grad);
    for (size_t k = 0; r->held && r->held_keys && k < n_workers; k++) {
        zmq_msg_close(&r->held[k]);
        zmq_msg_close(&r->held_keys[k]);
    }
    free(r->held);
    free(r->held_keys);
    free(r->merged_keys);
    free(r->merged_sum);
    free(r->cursor);
    free(r->examples);
    free(r->version);
    free(r->weight);
    free(r->terms);
}

static int held_sparse(const ps_server_t *s, size_t k) { return zmq_msg_size(&s->bsp.held_keys[k]) > 0; }

// Worker k's sparse gradient, held as received, written out dense into
// bsp.grad (as a checkpoint or a round with a dense gradient needs it).
static void write_out_sparse(ps_server_t *s, size_t k) {
    const uint32_t *idx;
    const float *v;
    size_t count = ps_bsp_sparse(s, k, &idx, &v);
    ps_bsp_scatter(s, idx, v, count, s->bsp.grad + k * s->n);
    ps_bsp_release(s, k);
}

void ps_bsp_scatter(const ps_server_t *s, const uint32_t *keys, const float *values, size_t count, float *out) {
    memset(out, 0, s->n * sizeof *out);
    for (size_t j = 0; j < count; j++) out[keys[j] - s->begin] += values[j];
}

const float *ps_bsp_gradient(const ps_server_t *s, size_t k) {
    zmq_msg_t *held = &s->bsp.held[k];
    return zmq_msg_size(held) > 0 ? zmq_msg_data(held) : s->bsp.grad + k * s->n;
}

size_t ps_bsp_sparse(const ps_server_t *s, size_t k, const uint32_t **keys, const float **values) {
    if (!held_sparse(s, k)) return 0;
    *keys = zmq_msg_data(&s->bsp.held_keys[k]);
    *values = zmq_msg_data(&s->bsp.held[k]);
    return zmq_msg_size(&s->bsp.held_keys[k]) / sizeof **keys;
}

void ps_bsp_release(ps_server_t *s, size_t k) {
    if (zmq_msg_size(&s->bsp.held_keys[k]) > 0) {
        zmq_msg_close(&s->bsp.held_keys[k]);
        zmq_msg_init(&s->bsp.held_keys[k]);
    }
    if (zmq_msg_size(&s->bsp.held[k]) == 0) return;
    zmq_msg_close(&s->bsp.held[k]);
    zmq_msg_init(&s->bsp.held[k]);
}

void ps_bsp_take(ps_server_t *s, zmsg_t *m, size_t from, const float *dense) {
    const wire_header_t *h = &m->h;
    uint32_t k = h->sender;
    uint64_t span = TRACE_BEGIN();
    float *g = s->bsp.grad + (size_t)k * s->n;
    ps_bsp_release(s, k);  // a gradient taken before for this round is replaced
    if (h->payload_kind == PAYLOAD_KIND_DENSE && h->count == s->n) {
        zmq_msg_move(&s->bsp.held[k], &m->frames[0]);  // kept, not copied: read once, when the round is applied
    } else if (dense) {
        memcpy(g + from, dense, (h->payload_kind == PAYLOAD_KIND_DENSE ? h->count : s->n) * sizeof *g);
    } else if (h->count > 0) {
        // Kept as received (keys ascending, checked): the round sums the keys
        // its gradients hold, not the shard (ps_bsp_maybe_apply).
        zmq_msg_move(&s->bsp.held_keys[k], &m->frames[0]);
        zmq_msg_move(&s->bsp.held[k], &m->frames[1]);
    } else {
        ps_bsp_scatter(s, NULL, NULL, 0, g);
    }
    TRACE_END(&TK_BUFFER, span, k);
}

// The pulls a BSP round answers as its sum is applied, range by range
// (docs/protocol.md, "A round's values in ranges").
#define ROUND_RANGE ((size_t)1 << 18)

typedef struct round_answers {
    ps_server_t *s;
    size_t *which;  // indices into s->pending: whole-shard pulls the round makes ready
    size_t n;
    wire_header_t h;  // PARAMS as it will stand after the round
    char *err;
    size_t err_len;
} round_answers_t;

// ps_range_done_fn: values [from, from + n) of the round are written; each
// waiting pull gets them now (lent, as whole replies are).
static int send_round_range(void *ctx, size_t from, size_t n, uint32_t checksum) {
    round_answers_t *r = ctx;
    ps_server_t *s = r->s;
    for (size_t i = 0; i < r->n; i++) {
        zmq_msg_t frame;
        if (ps_values_reply_range(s->upd.values, from, n, &frame, r->err, r->err_len) != 0) return -1;
        wire_header_t h = r->h;
        h.offset = s->begin + from;
        h.count = (uint32_t)n;
        h.checksum = checksum;
        if (ps_send_sealed(s, &s->pending[r->which[i]].identity, &h, &frame, 1, r->err, r->err_len) != 0) return -1;
        s->stats.bytes_out += 4u * n;
    }
    return 0;
}

// The clock conditional pulls wait on once the round being applied is (as
// ps_members_ready_clock: with backup workers the rounds applied, else the
// min clock, which the round's last gradient already raised).
static uint64_t round_ready_clock(const ps_server_t *s) {
    return s->cfg.backup_workers > 0 ? s->bsp.clock + 1 : clock_table_min(&s->members.clocks);
}

// The whole-shard pulls of workers that this round (complete, about to be
// applied) lets through: answered in ranges as it is applied. Their indices
// go to which[]; returns how many.
static size_t pulls_for_round(const ps_server_t *s, size_t *which) {
    uint64_t after = round_ready_clock(s);
    size_t n = 0;
    for (size_t i = 0; i < s->n_pending; i++)
        if (!s->pending[i].keys && s->pending[i].worker != WIRE_NO_ID && ssp_gate(s->pending[i].need, after, 0).proceed)
            which[n++] = i;
    return n;
}

// The round's sum, applied in one pass over the shard (ps_values_apply_sum),
// range by range when pulls wait for it: each range goes to them as soon as
// it is written, so the answers travel while the rest is summed. Returns 0,
// or -1 with err (a send failed; the round is applied all the same).
static int bsp_sum_and_answer(ps_server_t *s, int answer, char *err, size_t err_len) {
    size_t which[64];
    size_t n = answer && s->n_pending <= 64 ? pulls_for_round(s, which) : 0;
    if (n == 0 || s->n < 2 * ROUND_RANGE) {
        ps_values_apply_sum(s->upd.values, s->bsp.terms, s->bsp.weight, s->cfg.n_workers, ps_update_step(s), s->upd.h,
                            s->cfg.adagrad_eps);
        return 0;
    }
    round_answers_t r = {
        .s = s, .which = which, .n = n, .h = ps_answer_header(s, MSG_TYPE_PARAMS), .err = err, .err_len = err_len};
    r.h.param_version = s->stats.version + 1;
    r.h.clock = round_ready_clock(s);
    r.h.payload_kind = PAYLOAD_KIND_DENSE;
    int rc =
        ps_values_apply_sum_in_ranges(s->upd.values, s->bsp.terms, s->bsp.weight, s->cfg.n_workers, ps_update_step(s),
                                      s->upd.h, s->cfg.adagrad_eps, ROUND_RANGE, send_round_range, &r);
    ps_pulls_answered_in_ranges(s, which, n, r.h.param_version, r.h.clock);  // answered: out of the queue
    return rc;
}

// A round whose gradients are all sparse: every key one of them holds, in
// ascending order (a merge of the workers' ascending keys), with the weighted
// sum there in worker order, into bsp.merged_keys/merged_sum (shard-local).
// The same bits as the dense sum (update_blocks: 0, then += weight * g per
// gradient, where a gradient that does not hold the key adds weight * 0,
// which leaves a sum that started from +0 as it was). Returns the keys, or
// -1 (out of memory).
static long merge_sparse_round(ps_server_t *s) {
    ps_bsp_round_t *r = &s->bsp;
    size_t nw = s->cfg.n_workers, total = 0;
    ps_bsp_cursor_t *cur = r->cursor;
    for (size_t k = 0; k < nw; k++) {
        cur[k].at = 0;
        cur[k].len = r->examples[k] ? ps_bsp_sparse(s, k, &cur[k].keys, &cur[k].values) : 0;
        total += cur[k].len;
    }
    if (total > r->merged_cap) {
        uint32_t *keys = realloc(r->merged_keys, total * sizeof *keys);
        if (keys) r->merged_keys = keys;
        float *sum = realloc(r->merged_sum, total * sizeof *sum);
        if (sum) r->merged_sum = sum;
        if (!keys || !sum) return -1;
        r->merged_cap = total;
    }
    size_t n = 0;
    for (;;) {
        uint32_t key = 0;
        int any = 0;
        for (size_t k = 0; k < nw; k++)
            if (cur[k].at < cur[k].len && (!any || cur[k].keys[cur[k].at] < key)) key = cur[k].keys[cur[k].at], any = 1;
        if (!any) break;
        float sum = 0.0f;
        for (size_t k = 0; k < nw; k++)
            if (cur[k].at < cur[k].len && cur[k].keys[cur[k].at] == key)
                sum += r->weight[k] * (0.0f + cur[k].values[cur[k].at++]);
        r->merged_keys[n] = key - (uint32_t)s->begin;
        r->merged_sum[n++] = sum;
    }
    return (long)n;
}

// The round's sum applied to the keys its sparse gradients hold, and nowhere
// else: a step costs what the workers' gradients touched, not the shard.
// Returns 0, 1 when the round is not all sparse (or memory ran out: the dense
// pass then), applying nothing.
static int bsp_apply_sparse(ps_server_t *s) {
    for (size_t k = 0; k < s->cfg.n_workers; k++)
        if (s->bsp.examples[k] && !held_sparse(s, k)) return 1;
    long n = merge_sparse_round(s);
    if (n < 0) return 1;
    s->upd.w = ps_values_write(s->upd.values);
    float lr = ps_update_step(s);
    if (s->upd.h)
        adagrad_update_sparse_cpu((size_t)n, lr, s->cfg.adagrad_eps, s->bsp.merged_keys, s->bsp.merged_sum, s->upd.h,
                                  s->upd.w);
    else
        sgd_update_sparse_cpu((size_t)n, lr, s->bsp.merged_keys, s->bsp.merged_sum, s->upd.w);
    return 0;
}

// BSP: the weighted sum of the gradients buffered for the current clock, in
// worker order, applied once (answering the pulls it lets through on the way
// when `answer`); then the next clock is aggregated.
static int bsp_apply_round(ps_server_t *s, int answer, char *err, size_t err_len) {
    uint64_t span = TRACE_BEGIN();
    uint32_t total = 0;
    int rc = 0;
    for (size_t k = 0; k < s->cfg.n_workers; k++) total += s->bsp.examples[k];
    if (total > 0) {
        for (size_t k = 0; k < s->cfg.n_workers; k++) {
            s->bsp.weight[k] = (float)s->bsp.examples[k] / (float)total;
            if (s->bsp.examples[k]) ps_update_record_staleness(s, (uint32_t)k, s->bsp.clock, s->bsp.version[k]);
        }
        if (bsp_apply_sparse(s) != 0) {
            for (size_t k = 0; k < s->cfg.n_workers; k++) {
                if (held_sparse(s, k)) write_out_sparse(s, k);
                s->bsp.terms[k] = s->bsp.examples[k] ? ps_bsp_gradient(s, k) : NULL;
            }
            rc = bsp_sum_and_answer(s, answer, err, err_len);
        }
        s->upd.w = ps_values_get(s->upd.values);
        s->stats.version++;
        s->samples += total;
    }
    memset(s->bsp.examples, 0, s->cfg.n_workers * sizeof *s->bsp.examples);
    for (size_t k = 0; k < s->cfg.n_workers; k++) ps_bsp_release(s, k);
    TRACE_END(&TK_BSP_ROUND, span, s->bsp.clock);
    s->bsp.clock++;
    return rc;
}

// Whether the round being aggregated is complete: every live worker has pushed
// it (evicted workers are not waited for; a gradient one of them pushed before
// it went silent still counts: it was acknowledged), or, with b backup workers,
// N - b workers have.
static int bsp_round_complete(const ps_server_t *s) {
    if (clock_table_live(&s->members.clocks) == 0) return 0;
    if (clock_table_min(&s->members.clocks) > s->bsp.clock) return 1;
    if (s->cfg.backup_workers == 0) return 0;
    size_t in = 0;
    for (size_t k = 0; k < s->cfg.n_workers; k++) in += s->members.clocks.clock[k] > s->bsp.clock;
    return in >= s->cfg.n_workers - s->cfg.backup_workers;
}

int ps_bsp_maybe_apply(ps_server_t *s, char *err, size_t err_len) {
    if (s->cfg.mode != SYNC_MODE_BSP) return 0;
    while (bsp_round_complete(s))
        if (bsp_apply_round(s, 1, err, err_len) != 0) return -1;
    return 0;
}

// A resumed shard restored round r from its checkpoint, but before it stopped
// it had applied rounds up to c - 1 as well, and the workers have moved on to
// c: those rounds are lost with it. The gradients buffered for round r (pushed
// before the checkpoint) are applied as they are, and every clock moves to c.
int ps_bsp_skip_to(ps_server_t *s, uint64_t c, char *err, size_t err_len) {
    // Rounds [bsp.clock, c) as the workers saw them are lost; the restored
    // round is among them (applied here with only the gradients that were in
    // the checkpoint).
    if (!s->cfg.quiet)
        fprintf(stderr,
                "asgd server %zu: resumed at round %llu but the workers are at round %llu: rounds applied "
                "after the checkpoint were lost\n",
                s->cfg.shard, (unsigned long long)s->bsp.clock, (unsigned long long)c);
    s->stats.rounds_skipped += c - s->bsp.clock;
    int buffered = 0;
    for (size_t k = 0; k < s->cfg.n_workers; k++) buffered |= s->bsp.examples[k] != 0;
    if (buffered && bsp_apply_round(s, 0, err, err_len) != 0) return -1;
    s->bsp.clock = c;
    for (size_t k = 0; k < s->cfg.n_workers; k++)
        if (s->members.clocks.clock[k] < c) s->members.clocks.clock[k] = c;
    return 0;
}
