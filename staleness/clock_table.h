#ifndef ASGD_STALENESS_CLOCK_TABLE_H
#define ASGD_STALENESS_CLOCK_TABLE_H
// A server's vector clock: each worker's clock (push rounds applied) and
// whether it is live. The minimum over live workers is what SSP waits on.
//
// A worker stops being live when it leaves (BYE) or when it is evicted (silent
// for longer than the run's worker timeout); an evicted worker becomes live
// again when it rejoins.
//
// Elastic membership (docs/reliability.md): a table may have more slots than
// the run starts with. Slots below n_start count before they join (with clock
// 0, so nobody runs ahead of a late starter); the slots from n_start on are
// for workers that may join later (asgd worker --join) and hold nobody back
// until they have.
#include <stddef.h>
#include <stdint.h>

typedef struct clock_table {
    size_t n;  // slots: the most workers the run may have (--max-workers)
    size_t n_start;  // workers the run starts with (--workers); n unless set
    uint64_t *clock;  // (n) rounds applied, per worker
    uint8_t *joined;  // (n) said hello at least once
    uint8_t *left;  // (n) said bye (no longer holds anyone back)
    uint8_t *evicted;  // (n) silent too long: holds nobody back until it rejoins
    uint64_t *pushes;  // (n) pushes applied since the worker last joined
    uint64_t *pushes_total;  // (n) pushes applied over every time it joined
} clock_table_t;

int clock_table_init(clock_table_t *t, size_t n, char *err, size_t err_len);
// Slots [n_start, n) are for joiners (n_start in 1..n; the default is n).
void clock_table_set_start(clock_table_t *t, size_t n_start);
// The clock a joiner entering slot k (k >= n_start, never joined) starts at:
// the slowest live member's (the maximum when none is live), so that it neither
// holds the others back nor is held back by rounds it was not there for.
uint64_t clock_table_entry_clock(const clock_table_t *t, size_t k);
void clock_table_free(clock_table_t *t);

// Whether worker k holds the others back: it has neither left nor been evicted,
// and it has joined or is one of the n_start the run began with.
int clock_table_is_live(const clock_table_t *t, size_t k);
// Minimum clock over live workers. Workers that have not joined yet count with
// clock 0, so nobody runs ahead of a late starter; when no worker is live, the
// maximum clock (nobody is waited for).
uint64_t clock_table_min(const clock_table_t *t);
// The same minimum over the live workers other than `except`; UINT64_MAX when
// there are none.
uint64_t clock_table_min_others(const clock_table_t *t, size_t except);
uint64_t clock_table_max(const clock_table_t *t);
// Number of live workers.
size_t clock_table_live(const clock_table_t *t);

#endif
