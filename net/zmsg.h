#ifndef ASGD_NET_ZMSG_H
#define ASGD_NET_ZMSG_H
// Sending and receiving protocol messages (wire.h) over libzmq sockets.
//
// Payloads travel without extra copies: a sender allocates a payload frame
// (zmsg_frame_alloc), fills it in place and hands it to zmsg_send, which takes
// ownership; a receiver reads payloads straight out of the received frames.
// Every libzmq call is retried on EINTR, and a failure is reported with the
// call, libzmq's text and where it happened.
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "net/zmq_error.h"
#include "net/wire.h"

// A received message. Payload pointers stay valid until zmsg_close.
typedef struct zmsg {
    zmq_msg_t identity;  // ROUTER peers only (has_identity)
    int has_identity;
    wire_header_t h;
    zmq_msg_t frames[2];
    size_t n_frames;
    wire_status_t status;  // WIRE_STATUS_OK, or why the message was refused
    int checksum_pending;  // received with zmsg_recv_deferred, not verified yet
    // 1: its payload's writer checked every value finite as it wrote it (a
    // BSP round through shared memory: net/ps_local_round.h); 0: unknown.
    int payload_finite;
} zmsg_t;

// Payload frame i's bytes (NULL if absent).
static inline const void *zmsg_payload(zmsg_t *m, size_t i) {
    return i < m->n_frames ? zmq_msg_data(&m->frames[i]) : NULL;
}

// Receives one message (with a leading identity frame when `router`), and
// validates it against run_id. Returns 1 with a valid message, 0 with an
// invalid one (m->status says why; the whole message was drained and may be
// closed), or -1 on a socket error — errno EAGAIN after the socket's receive
// timeout, ETERM when the context is shutting down — with err filled.
// After 0 or 1 the caller must zmsg_close(m).
int zmsg_recv(void *sock, int router, uint64_t run_id, zmsg_t *m, char *err, size_t err_len);
void zmsg_close(zmsg_t *m);

// zmsg_recv that leaves the payload checksum unchecked (m->checksum_pending):
// the caller must, before using the payload, either zmsg_verify it or copy
// its one frame out with zmsg_copy_verified (one pass instead of two).
int zmsg_recv_deferred(void *sock, int router, uint64_t run_id, zmsg_t *m, char *err, size_t err_len);
// Checks a deferred message's checksum; 0, or -1 with m->status BAD_CHECKSUM.
int zmsg_verify(zmsg_t *m);
// Copies payload frame 0 (the only one) to dst while checking the checksum
// (a plain copy when nothing is pending: checked already, or received by
// reference, net/shm_frames.h); 0, or -1 with m->status BAD_CHECKSUM (dst
// then holds garbage).
int zmsg_copy_verified(zmsg_t *m, void *dst);

// A payload frame of n bytes for the caller to fill. Returns 0 or -1.
int zmsg_frame_alloc(zmq_msg_t *frame, size_t n, char *err, size_t err_len);

// Sends identity (if not NULL; copied, not consumed), the header, and n_frames
// payload frames (consumed: closed whether or not the send succeeds). Computes
// the header's checksum from the frames first. `dontwait` fails with EAGAIN
// instead of blocking when the peer's queue is full. Returns 0 or -1.
int zmsg_send(void *sock, zmq_msg_t *identity, wire_header_t *h, zmq_msg_t *frames, size_t n_frames, int dontwait,
              char *err, size_t err_len);
// zmsg_send for frames whose checksum the caller already put in h->checksum
// (computed while filling them, with wire_checksum_copy).
int zmsg_send_sealed(void *sock, zmq_msg_t *identity, const wire_header_t *h, zmq_msg_t *frames, size_t n_frames,
                     int dontwait, char *err, size_t err_len);

// A header with magic, version, type and run id set, everything else zero.
wire_header_t zmsg_header(uint16_t type, uint64_t run_id);

// Socket options every asgd socket uses: ZMQ_LINGER 0 (a stopping process never
// waits for unsent messages) and, where heartbeat_ms > 0, ZMTP heartbeats with
// a timeout of 3 intervals. Returns 0 or -1.
int zmsg_socket_defaults(void *sock, int heartbeat_ms, char *err, size_t err_len);

// The largest payload frame a message about n values can legitimately hold:
// n float32/uint32 values, or an ENCODED vector of n values in the widest
// encoding (compress_max_encoded_bytes) — and at least a header.
size_t zmsg_max_frame(size_t n_values);

// Binds sock, a socket that receives from peers, to endpoint. First
// ZMQ_MAXMSGSIZE = max_frame (plus CURVE's per-frame overhead, and at least
// what the handshake needs, 4 KiB): libzmq drops the connection of a peer that
// announces a larger frame before allocating anything for it, so a peer
// cannot make this process allocate more than a legitimate message needs
// (max_frame 0: no limit, for inproc pipes between our own threads). Then
// the process's transport security (net/curve_auth.h): CURVE server, and no
// listening beyond loopback without CURVE or --insecure. Returns 0 or -1 with
// err naming the endpoint.
int zmsg_bind(void *sock, const char *endpoint, size_t max_frame, char *err, size_t err_len);
// Connects sock to endpoint, with the same ZMQ_MAXMSGSIZE (for what the peer
// sends back) and, under CURVE, as a client of the run's server key.
int zmsg_connect(void *sock, const char *endpoint, size_t max_frame, char *err, size_t err_len);

#endif
