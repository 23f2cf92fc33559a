#ifndef ASGD_STALENESS_CLOCK_TABLE_H
#define ASGD_STALENESS_CLOCK_TABLE_H
// A server's vector clock: each worker's clock (push rounds applied) and
// whether it is live. The minimum over live workers is what SSP waits on.
//
// A worker stops being live when it leaves (BYE) or when it is evicted (silent
// for longer than the run's worker timeout); an evicted worker becomes live
// again when it rejoins.
#include <stddef.h>
#include <stdint.h>

typedef struct clock_table {
    size_t n;                // workers the run was started with
    uint64_t *clock;         // (n) rounds applied, per worker
    uint8_t *joined;         // (n) said hello at least once
    uint8_t *left;           // (n) said bye (no longer holds anyone back)
    uint8_t *evicted;        // (n) silent too long: holds nobody back until it rejoins
    uint64_t *pushes;        // (n) pushes applied since the worker last joined
    uint64_t *pushes_total;  // (n) pushes applied over every time it joined
} clock_table_t;

int clock_table_init(clock_table_t *t, size_t n, char *err, size_t err_len);
void clock_table_free(clock_table_t *t);

// Whether worker k holds the others back: it has neither left nor been evicted.
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
