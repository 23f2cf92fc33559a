#ifndef ASGD_NET_PS_KEY_MAP_H
#define ASGD_NET_PS_KEY_MAP_H
// The keys a worker holds when it holds only its working set, not the model:
// its own keys 0..n_local-1 name some of the servers' keys, in the same order.
//
// The servers' model is a sparse block of `global_rows` rows of `width` keys
// (a feature's weights) followed by a dense tail; the worker holds `n_rows` of
// those rows, row r being the servers' row rows[r] (strictly ascending), and
// the whole dense tail after them. Because the map keeps the order, a set of
// the worker's keys in ascending order names the servers' keys in ascending
// order too, which is the order every keyed message carries.
#include <stddef.h>
#include <stdint.h>

typedef struct ps_key_map {
    const uint32_t *rows;  // (n_rows) the servers' row of each of the worker's rows, strictly ascending
    size_t n_rows;  // the worker's rows
    size_t width;  // keys per row (>= 1)
    size_t global_rows;  // the servers' rows
    size_t n_global;  // the servers' keys: global_rows * width + the dense tail
} ps_key_map_t;

// The worker's keys: its rows' and the dense tail.
static inline size_t ps_key_map_local_keys(const ps_key_map_t *m) {
    return m->n_rows * m->width + (m->n_global - m->global_rows * m->width);
}

// The servers' key of the worker's key `local` (< ps_key_map_local_keys).
static inline uint32_t ps_key_map_global(const ps_key_map_t *m, uint32_t local) {
    size_t sparse = m->n_rows * m->width;
    if (local >= sparse) return (uint32_t)(local - sparse + m->global_rows * m->width);
    if (m->width == 1) return m->rows[local];
    return (uint32_t)(m->rows[local / m->width] * m->width + local % m->width);
}

#endif
