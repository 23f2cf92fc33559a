#ifndef ASGD_NET_TCP_LINK_H
#define ASGD_NET_TCP_LINK_H
// Plain TCP connections for transports that do their own socket I/O (the
// stream ring): listen, dial and accept with deadlines, all sockets
// non-blocking, close-on-exec and (connected ones) TCP_NODELAY. Endpoints are
// written "tcp://HOST:PORT" as libzmq writes them ("[ADDR]" for IPv6).
#include <stddef.h>

// Monotonic milliseconds, for deadlines.
double tcp_link_now_ms(void);

// Listens on host ("*" or "0.0.0.0": every IPv4 interface) at an ephemeral
// port; *fd is the listening socket and endpoint "tcp://HOST:PORT" with the
// port bound. Returns 0, or -1 with err naming the host.
int tcp_link_listen(const char *host, int *fd, char *endpoint, size_t endpoint_len, char *err, size_t err_len);

// Connects to "tcp://HOST:PORT", trying again while it is refused, until
// deadline_ms (tcp_link_now_ms's clock; <= 0: no deadline). Returns the
// connected socket, or -1 with err naming the endpoint and why.
int tcp_link_dial(const char *endpoint, double deadline_ms, char *err, size_t err_len);

// Accepts one connection on a listening socket, waiting until deadline_ms
// (<= 0: no deadline). Returns the socket, or -1 with err.
int tcp_link_accept(int listen_fd, double deadline_ms, char *err, size_t err_len);

// Sends or receives exactly len bytes on a non-blocking socket, waiting until
// deadline_ms (<= 0: no deadline). Returns 0, or -1 with err saying what went
// wrong (a closed connection, a deadline passed, the system's reason).
int tcp_link_send_all(int fd, const void *buf, size_t len, double deadline_ms, char *err, size_t err_len);
int tcp_link_recv_all(int fd, void *buf, size_t len, double deadline_ms, char *err, size_t err_len);

// Milliseconds to pass to poll() until deadline_ms: -1 for none, 0 when past.
int tcp_link_poll_ms(double deadline_ms);

#endif
