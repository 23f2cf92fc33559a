// The sub-chunk sequence of a ring allreduce (ring_schedule.h).
#include "net/ring_schedule.h"

#include <string.h>

#include "kernels/foundation/partition.h"

size_t ring_schedule_steps(const ring_schedule_t *s) { return 2 * s->n - 2; }

// Loads the first non-empty chunk from c->step on.
static void cursor_load(const ring_schedule_t *s, int recv, ring_cursor_t *c) {
    for (; c->step < ring_schedule_steps(s); c->step++) {
        size_t chunk = (s->rank + 2 * s->n - c->step - (recv ? 1 : 0)) % s->n;
        shard_range(s->count, s->n, chunk, &c->begin, &c->end);
        c->mid = c->begin < s->fp16_count && s->fp16_count < c->end ? s->fp16_count : c->end;
        c->subs_before_mid = (c->mid - c->begin + s->sub - 1) / s->sub;
        c->n_subs = c->subs_before_mid + (c->end - c->mid + s->sub - 1) / s->sub;
        if (c->n_subs) return;  // an empty chunk (count < n) has no messages
    }
}

void ring_cursor_init(const ring_schedule_t *s, int recv, ring_cursor_t *c) {
    memset(c, 0, sizeof *c);
    cursor_load(s, recv, c);
}

int ring_cursor_done(const ring_schedule_t *s, const ring_cursor_t *c) { return c->step >= ring_schedule_steps(s); }

void ring_cursor_next(const ring_schedule_t *s, int recv, ring_cursor_t *c) {
    if (++c->k < c->n_subs) return;
    c->k = 0;
    c->step++;
    cursor_load(s, recv, c);
}

size_t ring_cursor_offset(const ring_schedule_t *s, const ring_cursor_t *c) {
    if (c->k < c->subs_before_mid) return c->begin + c->k * s->sub;
    return c->mid + (c->k - c->subs_before_mid) * s->sub;
}

size_t ring_cursor_len(const ring_schedule_t *s, const ring_cursor_t *c) {
    size_t a = ring_cursor_offset(s, c), stop = c->k < c->subs_before_mid ? c->mid : c->end;
    return (stop - a < s->sub) ? stop - a : s->sub;
}

int ring_cursor_send_ready(const ring_cursor_t *send, const ring_cursor_t *recv) {
    if (send->step == 0) return 1;
    return recv->step > send->step - 1 || (recv->step == send->step - 1 && recv->k > send->k);
}
