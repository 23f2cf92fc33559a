// Buffers reused across zero-copy messages (buffer_pool.h).
#include "net/buffer_pool.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct pool_buf {
    struct buffer_pool *pool;
    struct pool_buf *next;  // in the free list
    _Atomic size_t holds;  // the taker's, plus one per message over it
    alignas(64) unsigned char data[];
} pool_buf_t;

struct buffer_pool {
    pthread_mutex_t lock;  // the free list: taken on the owner's thread, given back on I/O threads
    pool_buf_t *free;
    size_t n_free, keep, bytes;
    _Atomic size_t refs;  // the owner's, plus one per buffer out of the free list
    buffer_pool_counts_t counts;
};

static pool_buf_t *buf_of(void *data) { return (pool_buf_t *)((unsigned char *)data - offsetof(pool_buf_t, data)); }

static void pool_free(buffer_pool_t *p) {
    while (p->free) {
        pool_buf_t *b = p->free;
        p->free = b->next;
        free(b);
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static void unref(buffer_pool_t *p) {
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) pool_free(p);
}

buffer_pool_t *buffer_pool_new(size_t bytes, size_t keep) {
    buffer_pool_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return NULL;
    }
    p->bytes = bytes;
    p->keep = keep;
    atomic_init(&p->refs, 1);
    return p;
}

void buffer_pool_release(buffer_pool_t **pp) {
    if (!pp || !*pp) return;
    unref(*pp);
    *pp = NULL;
}

size_t buffer_pool_bytes(const buffer_pool_t *p) { return p->bytes; }

void *buffer_pool_take(buffer_pool_t *p) {
    pthread_mutex_lock(&p->lock);
    pool_buf_t *b = p->free;
    if (b) {
        p->free = b->next;
        p->n_free--;
    }
    pthread_mutex_unlock(&p->lock);
    if (!b) {
        size_t size = (offsetof(pool_buf_t, data) + (p->bytes ? p->bytes : 1) + 63) / 64 * 64;
        if (!(b = aligned_alloc(64, size))) return NULL;
        b->pool = p;
        p->counts.allocated++;
    }
    p->counts.taken++;
    b->next = NULL;
    atomic_init(&b->holds, 1);
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return b->data;
}

// Back to the free list (or freed, beyond `keep`), and the pool's reference with it.
static void give_back(pool_buf_t *b) {
    buffer_pool_t *p = b->pool;
    pthread_mutex_lock(&p->lock);
    int kept = p->n_free < p->keep;
    if (kept) {
        b->next = p->free;
        p->free = b;
        p->n_free++;
    }
    pthread_mutex_unlock(&p->lock);
    if (!kept) free(b);
    unref(p);
}

void buffer_pool_drop(void *data) {
    pool_buf_t *b = buf_of(data);
    // acq_rel: every write to the buffer by any holder happens before its reuse.
    if (atomic_fetch_sub_explicit(&b->holds, 1, memory_order_acq_rel) == 1) give_back(b);
}

static void message_done(void *data, void *hint) {
    (void)data;
    buffer_pool_drop(((pool_buf_t *)hint)->data);
}

int buffer_pool_message(void *data, size_t offset, size_t len, zmq_msg_t *msg) {
    pool_buf_t *b = buf_of(data);
    atomic_fetch_add_explicit(&b->holds, 1, memory_order_relaxed);
    if (zmq_msg_init_data(msg, b->data + offset, len, message_done, b) == 0) return 0;
    atomic_fetch_sub_explicit(&b->holds, 1, memory_order_relaxed);  // the caller still holds it
    return -1;
}

void *buffer_pool_frame(buffer_pool_t *p, size_t bytes, zmq_msg_t *msg) {
    void *data = buffer_pool_take(p);
    if (!data) return NULL;
    int rc = buffer_pool_message(data, 0, bytes, msg);
    buffer_pool_drop(data);  // the message holds it now (or nobody: back to the pool)
    return rc == 0 ? data : NULL;
}

void buffer_pool_counts(buffer_pool_t *p, buffer_pool_counts_t *out) { *out = p->counts; }
