#ifndef ASGD_STALENESS_CLOCK_TABLE_H
#define ASGD_STALENESS_CLOCK_TABLE_H
// A server's vector clock: each worker's clock (push rounds applied) and
// whether it is live. The minimum over live workers is what SSP waits on.
#include <stddef.h>
#include <stdint.h>

typedef struct clock_table {
    size_t n;           // workers the run was started with
    uint64_t *clock;    // (n) rounds applied, per worker
    uint8_t *joined;    // (n) said hello
    uint8_t *left;      // (n) said bye (no longer holds anyone back)
    uint64_t *pushes;   // (n) pushes applied, per worker
} clock_table_t;

int clock_table_init(clock_table_t *t, size_t n, char *err, size_t err_len);
void clock_table_free(clock_table_t *t);

// Minimum clock over workers that have not left. Workers that have not joined
// yet count with clock 0, so nobody runs ahead of a late starter; when every
// worker has left, the maximum clock (nobody is waited for).
uint64_t clock_table_min(const clock_table_t *t);
uint64_t clock_table_max(const clock_table_t *t);
// Number of workers that have not left.
size_t clock_table_live(const clock_table_t *t);

#endif
