// Wire-message validation (net/wire.c), libzmq framing (net/zmsg.c) and the
// rendezvous table text (net/rendezvous.c). The first byte picks the target:
//   0  wire_validate on one message laid out as below
//   1  the same message sent over a real (inproc) DEALER -> ROUTER pair and
//      received with zmsg_recv, which must agree with wire_validate, except
//      that a valid header asking for its frames to be read as shared-memory
//      references (wire_by_reference) is refused as BAD_SHM: no arena of
//      this process's exists for them to name
//   2  rdv_table_parse of the rest as a table's text
// A message: n_frames (1 byte, mod 4), header length (1 byte), three frame
// lengths (uint16, little-endian), then the header's bytes and the frames'
// bytes in order; lengths are cut to the bytes there are.
#include <errno.h>
#include <zmq.h>

#include "net/rendezvous.h"
#include "net/wire.h"
#include "net/zmsg.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_RUN_ID 0x0123456789abcdefull  // the seeds' run id

typedef struct message {
    const uint8_t *header;
    size_t header_len;
    const void *frames[3];
    size_t lens[3];
    size_t n_frames;
} message_t;

static void cut_message(const uint8_t *data, size_t size, message_t *m) {
    memset(m, 0, sizeof *m);
    uint8_t prefix[8] = {0};
    memcpy(prefix, data, size < 8 ? size : 8);
    size_t at = size < 8 ? size : 8;
    m->n_frames = prefix[0] % 4;
    size_t want[4] = {prefix[1], (size_t)prefix[2] | (size_t)prefix[3] << 8, (size_t)prefix[4] | (size_t)prefix[5] << 8,
                      (size_t)prefix[6] | (size_t)prefix[7] << 8};
    const uint8_t *parts[4];
    for (int i = 0; i < 4; i++) {
        size_t n = want[i] < size - at ? want[i] : size - at;
        parts[i] = data + at;
        want[i] = n;
        at += n;
    }
    m->header = parts[0];
    m->header_len = want[0];
    for (int i = 0; i < 3; i++) {
        m->frames[i] = parts[i + 1];
        m->lens[i] = want[i + 1];
    }
}

static wire_status_t validate(const message_t *m, wire_header_t *h) {
    if (m->n_frames > 2) return WIRE_STATUS_BAD_SIZE;  // zmsg refuses a third payload frame before validating
    return wire_validate(m->header, m->header_len, FUZZ_RUN_ID, m->frames, m->lens, m->n_frames, h);
}

static wire_status_t fuzz_validate(const message_t *m) {
    wire_header_t h;
    wire_status_t st = validate(m, &h);
    if (st == WIRE_STATUS_OK) {
        uint8_t again[WIRE_HEADER_SIZE];
        wire_header_encode(&h, again);
        FUZZ_ASSERT(m->header_len == WIRE_HEADER_SIZE && memcmp(again, m->header, WIRE_HEADER_SIZE) == 0);
        size_t want[2];
        wire_payload_sizes(&h, &want[0], &want[1]);
        for (size_t i = 0; i < m->n_frames; i++)  // ENCODED: its descriptor, not count, gives the size
            FUZZ_ASSERT(h.payload_kind == PAYLOAD_KIND_ENCODED ? m->lens[i] >= want[i] : m->lens[i] == want[i]);
        FUZZ_ASSERT(wire_kind_allowed(h.type, h.payload_kind));
    }
    return st;
}

// One DEALER -> ROUTER pair for the whole run (a context per input would cost
// milliseconds each).
static void *router, *dealer;

static void pair_open(void) {
    if (router) return;
    void *ctx = zmq_ctx_new();
    router = zmq_socket(ctx, ZMQ_ROUTER);
    dealer = zmq_socket(ctx, ZMQ_DEALER);
    int timeout = 5000, zero = 0;
    FUZZ_ASSERT(router && dealer);
    FUZZ_ASSERT(zmq_setsockopt(router, ZMQ_RCVTIMEO, &timeout, sizeof timeout) == 0);
    FUZZ_ASSERT(zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero) == 0);
    FUZZ_ASSERT(zmq_bind(router, "inproc://fuzz-wire") == 0);
    FUZZ_ASSERT(zmq_connect(dealer, "inproc://fuzz-wire") == 0);
}

// libFuzzer's timer signals can interrupt a libzmq call (EINTR): retried, as zmsg does.
static int send_frame(const void *data, size_t len, int flags) {
    int rc;
    do rc = zmq_send(dealer, data, len, flags);
    while (rc < 0 && errno == EINTR);
    return rc;
}

static int send_message(const message_t *m) {
    if (send_frame(m->header, m->header_len, m->n_frames ? ZMQ_SNDMORE : 0) < 0) return -1;
    for (size_t i = 0; i < m->n_frames; i++)
        if (send_frame(m->frames[i], m->lens[i], i + 1 < m->n_frames ? ZMQ_SNDMORE : 0) < 0) return -1;
    return 0;
}

// What zmsg_recv must make of the message: wire_validate's status, or
// BAD_SHM for references (checked on the header before the frames).
static wire_status_t received_as(const message_t *m) {
    wire_header_t h;
    if (m->n_frames <= 2 &&
        wire_validate_header(m->header, m->header_len, FUZZ_RUN_ID, m->n_frames, &h) == WIRE_STATUS_OK &&
        wire_by_reference(&h))
        return WIRE_STATUS_BAD_SHM;
    return validate(m, &h);
}

static wire_status_t fuzz_zmsg(const message_t *m, char *err, size_t err_len) {
    pair_open();
    wire_status_t want = received_as(m);
    // Received whole, then received with the checksum deferred: both agree with wire_validate.
    for (int deferred = 0; deferred < 2; deferred++) {
        FUZZ_ASSERT(send_message(m) == 0);
        zmsg_t got;
        int rc = deferred ? zmsg_recv_deferred(router, 1, FUZZ_RUN_ID, &got, err, err_len)
                          : zmsg_recv(router, 1, FUZZ_RUN_ID, &got, err, err_len);
        FUZZ_ASSERT(rc >= 0);
        if (deferred && rc == 1) rc = zmsg_verify(&got) == 0;
        FUZZ_ASSERT(got.status == want && rc == (want == WIRE_STATUS_OK));
        FUZZ_ASSERT(got.has_identity && got.n_frames <= 2);
        for (size_t i = 0; rc == 1 && i < got.n_frames; i++) {
            FUZZ_ASSERT(((uintptr_t)zmsg_payload(&got, i) & 7u) == 0);  // payloads are read as uint32/float arrays
            FUZZ_ASSERT(zmq_msg_size(&got.frames[i]) == m->lens[i]);
            FUZZ_ASSERT(memcmp(zmsg_payload(&got, i), m->frames[i], m->lens[i]) == 0);
        }
        zmsg_close(&got);
    }
    // Nothing of the message was left behind for the next one.
    char byte;
    int left;
    do left = zmq_recv(router, &byte, 1, ZMQ_DONTWAIT);
    while (left < 0 && errno == EINTR);
    FUZZ_ASSERT(left == -1 && errno == EAGAIN);
    return want;
}

static int fuzz_table(const uint8_t *data, size_t size, char *err, size_t err_len) {
    size_t n = size ? 1 + data[0] % 8 : 1;
    rdv_entry_t table[8];
    const char *text = size ? (const char *)data + 1 : "";
    if (rdv_table_parse(text, size ? size - 1 : 0, n, table, err, err_len) != 0) return -1;
    for (size_t i = 0; i < n; i++) {
        size_t len = strnlen(table[i].endpoint, RDV_ENDPOINT_MAX);
        FUZZ_ASSERT(table[i].rank == i && len > 0 && len < RDV_ENDPOINT_MAX);
        for (size_t c = 0; c < len; c++) FUZZ_ASSERT(table[i].endpoint[c] > ' ' && table[i].endpoint[c] < 0x7f);
    }
    return 0;
}

int fuzz_wire(const uint8_t *data, size_t size, char *err, size_t err_len) {
    if (size == 0) return 0;
    int mode = data[0] % 3;
    if (mode == 2) return fuzz_refused(fuzz_table(data + 1, size - 1, err, err_len), err);
    message_t m;
    cut_message(data + 1, size - 1, &m);
    wire_status_t st = mode == 0 ? fuzz_validate(&m) : fuzz_zmsg(&m, err, err_len);
    if (st == WIRE_STATUS_OK) return 0;
    snprintf(err, err_len, "refused: %s", wire_status_name(st));
    return -1;
}

FUZZ_ENTRY(fuzz_wire)
