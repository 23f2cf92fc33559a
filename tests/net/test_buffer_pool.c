// net/buffer_pool: buffers come back once every message over them and the
// taker's hold are let go, are reused (no new allocation while one is free),
// are freed beyond `keep`, and outlive the owner's release while a message
// still holds one. Messages travel a real PAIR of inproc sockets, so libzmq
// itself lets go of them; under TSan the give-back from its I/O thread is
// checked against the owner's takes.
#include <stdint.h>
#include <zmq.h>

#include "net/buffer_pool.h"
#include "tests/support/test_support.h"

enum { BYTES = 1 << 20 };

// Sends a message over data[offset, offset + len) from a to b and receives it;
// returns the first byte received.
static uint8_t send_through(void *a, void *b, void *data, size_t offset, size_t len) {
    zmq_msg_t m;
    CHECK(buffer_pool_message(data, offset, len, &m) == 0);
    CHECK(zmq_msg_send(&m, a, 0) == (int)len);
    zmq_msg_t r;
    zmq_msg_init(&r);
    CHECK(zmq_msg_recv(&r, b, 0) == (int)len);
    uint8_t first = *(const uint8_t *)zmq_msg_data(&r);
    zmq_msg_close(&r);
    return first;
}

int main(void) {
    void *ctx = zmq_ctx_new();
    void *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
    CHECK(ctx && a && b);
    CHECK(zmq_bind(b, "inproc://pool") == 0 && zmq_connect(a, "inproc://pool") == 0);

    buffer_pool_t *p = buffer_pool_new(BYTES, 2);
    CHECK(p != NULL && buffer_pool_bytes(p) == BYTES);
    buffer_pool_counts_t c;

    // Taken, written, sent in two parts, dropped: back in the pool once the
    // receiver let go, so the next take reuses it.
    uint8_t *x = buffer_pool_take(p);
    CHECK(x != NULL && ((uintptr_t)x % 64) == 0);
    memset(x, 7, BYTES);
    x[BYTES / 2] = 9;
    CHECK(send_through(a, b, x, 0, BYTES / 2) == 7);
    CHECK(send_through(a, b, x, BYTES / 2, BYTES / 2) == 9);
    buffer_pool_drop(x);
    uint8_t *y = buffer_pool_take(p);
    CHECK(y == x);
    buffer_pool_counts(p, &c);
    CHECK(c.allocated == 1 && c.taken == 2);

    // A message still alive holds its buffer: a second take allocates.
    zmq_msg_t held;
    CHECK(buffer_pool_message(y, 0, 64, &held) == 0);
    buffer_pool_drop(y);
    uint8_t *z = buffer_pool_take(p);
    CHECK(z != y);
    buffer_pool_counts(p, &c);
    CHECK(c.allocated == 2);
    // The copy of a message holds it too: the buffer comes back with the last.
    zmq_msg_t copy;
    zmq_msg_init(&copy);
    CHECK(zmq_msg_copy(&copy, &held) == 0);
    zmq_msg_close(&held);
    uint8_t *w = buffer_pool_take(p);
    CHECK(w != y && w != z);  // y is still held by the copy
    zmq_msg_close(&copy);
    uint8_t *v = buffer_pool_take(p);
    CHECK(v == y);  // back with the copy's close
    buffer_pool_counts(p, &c);
    CHECK(c.allocated == 3 && c.taken == 5);

    // Three come back with keep 2: one is freed; the next takes reuse the two kept.
    buffer_pool_drop(z);
    buffer_pool_drop(w);
    buffer_pool_drop(v);
    uint8_t *t1 = buffer_pool_take(p), *t2 = buffer_pool_take(p);
    CHECK(t1 != NULL && t2 != NULL);
    buffer_pool_counts(p, &c);
    CHECK(c.allocated == 3);
    uint8_t *u = buffer_pool_take(p);
    buffer_pool_counts(p, &c);
    CHECK(c.allocated == 4);

    // A frame: a message that alone holds a buffer of the pool (none is free
    // now: a fifth is allocated), back in the pool when it is closed.
    zmq_msg_t frame;
    uint8_t *f = buffer_pool_frame(p, 100, &frame);
    CHECK(f != NULL && zmq_msg_data(&frame) == f && zmq_msg_size(&frame) == 100);
    buffer_pool_counts(p, &c);
    CHECK(c.allocated == 5);
    zmq_msg_close(&frame);
    uint8_t *again = buffer_pool_take(p);
    CHECK(again == f);
    buffer_pool_drop(again);

    // The owner lets go while a message holds a buffer: the buffer stays
    // readable through it, and everything is freed when it is let go (ASan
    // and valgrind would see a leak or a use after free).
    memset(u, 5, 64);
    CHECK(buffer_pool_message(u, 0, 64, &held) == 0);
    buffer_pool_drop(u);
    buffer_pool_drop(t1);
    buffer_pool_drop(t2);
    buffer_pool_release(&p);
    CHECK(p == NULL);
    CHECK(((const uint8_t *)zmq_msg_data(&held))[63] == 5);
    CHECK(zmq_msg_send(&held, a, 0) == 64);
    zmq_msg_init(&held);
    CHECK(zmq_msg_recv(&held, b, 0) == 64 && ((const uint8_t *)zmq_msg_data(&held))[0] == 5);
    zmq_msg_close(&held);

    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
    printf("buffer pool: reused once given back, held by messages and their copies, outlives its owner\n");
    return 0;
}
