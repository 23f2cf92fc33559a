// libzmq plumbing for protocol messages (zmsg.h).
#include "net/zmsg.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "net/compress.h"
#include "net/curve_auth.h"
#include "net/shm_frames.h"

wire_header_t zmsg_header(uint16_t type, uint64_t run_id) {
    wire_header_t h;
    memset(&h, 0, sizeof h);
    h.magic = WIRE_MAGIC;
    h.version = WIRE_VERSION;
    h.type = type;
    h.run_id = run_id;
    return h;
}

static int recv_frame(void *sock, zmq_msg_t *m) {
    int rc;
    do rc = zmq_msg_recv(m, sock, 0);
    while (rc < 0 && errno == EINTR);
    return rc;
}

static int more_frames(void *sock) {
    int more = 0;
    size_t len = sizeof more;
    if (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len) != 0) return 0;
    return more;
}

// Discards the rest of a multi-frame message.
static void drain(void *sock) {
    while (more_frames(sock)) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (recv_frame(sock, &m) < 0) {
            zmq_msg_close(&m);
            return;
        }
        zmq_msg_close(&m);
    }
}

// libzmq hands small frames out of its receive buffer at any offset; payloads
// are read as uint32/float arrays, so a misaligned one is copied once.
static int align_frame(zmq_msg_t *f) {
    if (((uintptr_t)zmq_msg_data(f) & 7u) == 0) return 0;
    size_t n = zmq_msg_size(f);
    zmq_msg_t copy;
    if (zmq_msg_init_size(&copy, n) != 0) return -1;
    memcpy(zmq_msg_data(&copy), zmq_msg_data(f), n);
    zmq_msg_move(f, &copy);
    zmq_msg_close(&copy);
    return 0;
}

static int recv_impl(void *sock, int router, uint64_t run_id, zmsg_t *m, int defer, char *err, size_t err_len) {
    memset(&m->h, 0, sizeof m->h);
    m->checksum_pending = 0;
    m->n_frames = 0;
    m->has_identity = 0;
    m->status = WIRE_STATUS_OK;
    zmq_msg_init(&m->identity);
    if (router) {
        if (recv_frame(sock, &m->identity) < 0) {
            zmq_msg_close(&m->identity);
            return ZMQ_FAIL("zmq_msg_recv (identity)", err, err_len);
        }
        m->has_identity = 1;
        if (!more_frames(sock)) {
            m->status = WIRE_STATUS_BAD_SIZE;
            return 0;
        }
    }
    zmq_msg_t header;
    zmq_msg_init(&header);
    if (recv_frame(sock, &header) < 0) {
        zmq_msg_close(&header);
        zmsg_close(m);
        return ZMQ_FAIL("zmq_msg_recv (header)", err, err_len);
    }
    // Up to two payload frames are kept; a message with more is malformed.
    int too_many = 0;
    while (more_frames(sock)) {
        if (m->n_frames == 2) {
            too_many = 1;
            drain(sock);
            break;
        }
        zmq_msg_init(&m->frames[m->n_frames]);
        if (recv_frame(sock, &m->frames[m->n_frames]) < 0) {
            zmq_msg_close(&m->frames[m->n_frames]);
            zmq_msg_close(&header);
            zmsg_close(m);
            return ZMQ_FAIL("zmq_msg_recv (payload)", err, err_len);
        }
        m->n_frames++;
        if (align_frame(&m->frames[m->n_frames - 1]) != 0) {
            zmq_msg_close(&header);
            zmsg_close(m);
            return ZMQ_FAIL("zmq_msg_init_size (aligned payload copy)", err, err_len);
        }
    }
    // The header first (wire_validate_header): a header that fails is refused
    // for that, and only a good one's frames may be references (wire_by_reference).
    m->status = too_many
                    ? WIRE_STATUS_BAD_SIZE
                    : wire_validate_header(zmq_msg_data(&header), zmq_msg_size(&header), run_id, m->n_frames, &m->h);
    int by_reference = m->status == WIRE_STATUS_OK && wire_by_reference(&m->h);
    if (by_reference && shm_frames_unpack(run_id, m->frames, m->n_frames) != WIRE_STATUS_OK)
        m->status = WIRE_STATUS_BAD_SHM;
    if (m->status == WIRE_STATUS_OK) {
        const void *payload[2] = {NULL, NULL};
        size_t lens[2] = {0, 0};
        for (size_t i = 0; i < m->n_frames; i++) {
            payload[i] = zmq_msg_data(&m->frames[i]);
            lens[i] = zmq_msg_size(&m->frames[i]);
        }
        // Deferred, the checksum is the caller's; a reference's bytes crossed no wire: nothing to check them against.
        m->status = wire_validate_payload(&m->h, payload, lens, m->n_frames, !defer && !by_reference);
    }
    m->checksum_pending = defer && !by_reference && m->status == WIRE_STATUS_OK;
    m->h.flags &= (uint16_t)~WIRE_FLAG_SHM;  // the frames are the payload now, wherever they lie
    zmq_msg_close(&header);
    return m->status == WIRE_STATUS_OK ? 1 : 0;
}

int zmsg_recv(void *sock, int router, uint64_t run_id, zmsg_t *m, char *err, size_t err_len) {
    return recv_impl(sock, router, run_id, m, 0, err, err_len);
}

int zmsg_recv_deferred(void *sock, int router, uint64_t run_id, zmsg_t *m, char *err, size_t err_len) {
    return recv_impl(sock, router, run_id, m, 1, err, err_len);
}

int zmsg_verify(zmsg_t *m) {
    if (!m->checksum_pending) return m->status == WIRE_STATUS_OK ? 0 : -1;
    uint32_t c = 0;
    for (size_t i = 0; i < m->n_frames; i++)
        c = wire_checksum(zmq_msg_data(&m->frames[i]), zmq_msg_size(&m->frames[i]), c);
    m->checksum_pending = 0;
    if (c != m->h.checksum) m->status = WIRE_STATUS_BAD_CHECKSUM;
    return m->status == WIRE_STATUS_OK ? 0 : -1;
}

int zmsg_copy_verified(zmsg_t *m, void *dst) {
    if (m->n_frames != 1) return zmsg_verify(m);
    if (!m->checksum_pending) {  // checked already, or received by reference: nothing to check
        memcpy(dst, zmq_msg_data(&m->frames[0]), zmq_msg_size(&m->frames[0]));
        return m->status == WIRE_STATUS_OK ? 0 : -1;
    }
    uint32_t c = wire_checksum_copy(dst, zmq_msg_data(&m->frames[0]), zmq_msg_size(&m->frames[0]), 0);
    if (c != m->h.checksum) m->status = WIRE_STATUS_BAD_CHECKSUM;
    m->checksum_pending = 0;
    return m->status == WIRE_STATUS_OK ? 0 : -1;
}

void zmsg_close(zmsg_t *m) {
    for (size_t i = 0; i < m->n_frames; i++) zmq_msg_close(&m->frames[i]);
    m->n_frames = 0;
    zmq_msg_close(&m->identity);
    m->has_identity = 0;
}

int zmsg_frame_alloc(zmq_msg_t *frame, size_t n, char *err, size_t err_len) {
    if (zmq_msg_init_size(frame, n) != 0) return ZMQ_FAIL("zmq_msg_init_size", err, err_len);
    return 0;
}

static int send_frame(void *sock, zmq_msg_t *m, int flags) {
    int rc;
    do rc = zmq_msg_send(m, sock, flags);
    while (rc < 0 && errno == EINTR);
    return rc;
}

int zmsg_send(void *sock, zmq_msg_t *identity, wire_header_t *h, zmq_msg_t *frames, size_t n_frames, int dontwait,
              char *err, size_t err_len) {
    uint32_t sum = 0;
    for (size_t i = 0; i < n_frames; i++) sum = wire_checksum(zmq_msg_data(&frames[i]), zmq_msg_size(&frames[i]), sum);
    h->checksum = sum;
    return zmsg_send_sealed(sock, identity, h, frames, n_frames, dontwait, err, err_len);
}

int zmsg_send_sealed(void *sock, zmq_msg_t *identity, const wire_header_t *h, zmq_msg_t *frames, size_t n_frames,
                     int dontwait, char *err, size_t err_len) {
    int base = dontwait ? ZMQ_DONTWAIT : 0;
    size_t sent = 0;  // payload frames handed to libzmq (it then owns them)
    uint8_t bytes[WIRE_HEADER_SIZE];
    wire_header_t by_reference = *h;
    int packed = shm_frames_pack(h, frames, n_frames);
    by_reference.flags |= packed ? WIRE_FLAG_SHM : 0;
    wire_header_encode(&by_reference, bytes);
    int rc = 0;
    if (identity) {
        zmq_msg_t id;
        zmq_msg_init(&id);
        zmq_msg_copy(&id, identity);
        if (send_frame(sock, &id, base | ZMQ_SNDMORE) < 0) {
            zmq_msg_close(&id);
            rc = ZMQ_FAIL("zmq_msg_send (identity)", err, err_len);
            goto out;
        }
    }
    zmq_msg_t head;
    if (zmq_msg_init_size(&head, WIRE_HEADER_SIZE) != 0) {
        rc = ZMQ_FAIL("zmq_msg_init_size", err, err_len);
        goto out;
    }
    memcpy(zmq_msg_data(&head), bytes, WIRE_HEADER_SIZE);
    if (send_frame(sock, &head, base | (n_frames ? ZMQ_SNDMORE : 0)) < 0) {
        zmq_msg_close(&head);
        rc = ZMQ_FAIL("zmq_msg_send (header)", err, err_len);
        goto out;
    }
    for (; sent < n_frames; sent++) {
        if (send_frame(sock, &frames[sent], base | (sent + 1 < n_frames ? ZMQ_SNDMORE : 0)) < 0) {
            rc = ZMQ_FAIL("zmq_msg_send (payload)", err, err_len);
            goto out;
        }
    }
out:
    for (size_t i = sent; i < n_frames; i++) {
        if (packed)
            shm_frames_drop_unsent(&frames[i]);
        else
            zmq_msg_close(&frames[i]);
    }
    return rc;
}

int zmsg_socket_defaults(void *sock, int heartbeat_ms, char *err, size_t err_len) {
    int zero = 0;
    if (zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero) != 0)
        return ZMQ_FAIL("zmq_setsockopt(ZMQ_LINGER)", err, err_len);
    if (heartbeat_ms > 0) {
        int timeout = 3 * heartbeat_ms;
        if (zmq_setsockopt(sock, ZMQ_HEARTBEAT_IVL, &heartbeat_ms, sizeof heartbeat_ms) != 0)
            return ZMQ_FAIL("zmq_setsockopt(ZMQ_HEARTBEAT_IVL)", err, err_len);
        if (zmq_setsockopt(sock, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout) != 0)
            return ZMQ_FAIL("zmq_setsockopt(ZMQ_HEARTBEAT_TIMEOUT)", err, err_len);
        if (zmq_setsockopt(sock, ZMQ_HEARTBEAT_TTL, &timeout, sizeof timeout) != 0)
            return ZMQ_FAIL("zmq_setsockopt(ZMQ_HEARTBEAT_TTL)", err, err_len);
    }
    return 0;
}

size_t zmsg_max_frame(size_t n_values) {
    size_t most = compress_max_encoded_bytes(n_values);
    if (n_values <= SIZE_MAX / 4 && 4 * n_values > most) most = 4 * n_values;
    return most > WIRE_HEADER_SIZE ? most : WIRE_HEADER_SIZE;
}

// libzmq applies ZMQ_MAXMSGSIZE to every frame on the wire: the handshake's
// commands too (CURVE's INITIATE carries the peer's metadata: a few hundred
// bytes), and under CURVE each message frame travels inside a MESSAGE command
// (33 bytes more). The limit therefore never goes below a handshake's needs
// and carries the per-frame overhead; memory stays bounded all the same.
#define ZMSG_HANDSHAKE_FRAME_MAX 4096
#define ZMSG_FRAME_OVERHEAD 64

static int limit_frames(void *sock, size_t max_frame, char *err, size_t err_len) {
    if (max_frame == 0) return 0;
    if (max_frame < ZMSG_HANDSHAKE_FRAME_MAX) max_frame = ZMSG_HANDSHAKE_FRAME_MAX;
    int64_t limit =
        max_frame > INT64_MAX - ZMSG_FRAME_OVERHEAD ? INT64_MAX : (int64_t)(max_frame + ZMSG_FRAME_OVERHEAD);
    if (zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &limit, sizeof limit) != 0)
        return ZMQ_FAIL("zmq_setsockopt(ZMQ_MAXMSGSIZE)", err, err_len);
    return 0;
}

int zmsg_bind(void *sock, const char *endpoint, size_t max_frame, char *err, size_t err_len) {
    if (limit_frames(sock, max_frame, err, err_len) != 0) return -1;
    if (net_security_listen(sock, endpoint, err, err_len) != 0) return -1;
    if (zmq_bind(sock, endpoint) != 0) {
        char what[300];
        snprintf(what, sizeof what, "zmq_bind(%.250s)", endpoint);
        return ZMQ_FAIL(what, err, err_len);
    }
    return 0;
}

int zmsg_connect(void *sock, const char *endpoint, size_t max_frame, char *err, size_t err_len) {
    if (limit_frames(sock, max_frame, err, err_len) != 0) return -1;
    if (net_security_dial(sock, err, err_len) != 0) return -1;
    if (zmq_connect(sock, endpoint) != 0) {
        char what[300];
        snprintf(what, sizeof what, "zmq_connect(%.250s)", endpoint);
        return ZMQ_FAIL(what, err, err_len);
    }
    return 0;
}
