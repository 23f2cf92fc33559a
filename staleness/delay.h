#ifndef ASGD_STALENESS_DELAY_H
#define ASGD_STALENESS_DELAY_H
// Injected delays that make a worker a straggler, so that the value of
// asynchrony under imbalance can be measured.
#include <stddef.h>

// Parses "--delay-worker" values "ID:MS[,ID:MS...]" into per_worker_ms[0..n_workers)
// (milliseconds after every step; entries not named keep their value).
// Returns 0, or -1 with err naming the bad item.
int delay_spec_parse(const char *spec, size_t n_workers, double *per_worker_ms, char *err, size_t err_len);

#endif
