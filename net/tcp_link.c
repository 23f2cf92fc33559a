// TCP connections with deadlines (tcp_link.h).
#include "net/tcp_link.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "kernels/foundation/mono_clock.h"

double tcp_link_now_ms(void) { return mono_clock_ms(); }

int tcp_link_poll_ms(double deadline_ms) {
    if (deadline_ms <= 0) return -1;
    double left = deadline_ms - tcp_link_now_ms();
    return left <= 0 ? 0 : (int)left + 1;
}

// Splits "tcp://HOST:PORT" (HOST may be "[ADDR]") into host and port.
static int split_endpoint(const char *endpoint, char *host, size_t host_len, char *port, size_t port_len) {
    if (strncmp(endpoint, "tcp://", 6) != 0) return -1;
    const char *h = endpoint + 6, *colon = strrchr(h, ':');
    if (!colon || colon == h || !colon[1]) return -1;
    size_t hl = (size_t)(colon - h);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= host_len || strlen(colon + 1) >= port_len) return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, port_len, "%s", colon + 1);
    return 0;
}

int tcp_link_listen(const char *host, int *fd, char *endpoint, size_t endpoint_len, char *err, size_t err_len) {
    *fd = -1;
    int any = strcmp(host, "*") == 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    int g = getaddrinfo(any ? "0.0.0.0" : host, "0", &hints, &res);
    if (g != 0) {
        snprintf(err, err_len, "cannot listen on %s: %s", host, gai_strerror(g));
        return -1;
    }
    int e = 0;
    for (struct addrinfo *a = res; a && *fd < 0; a = a->ai_next) {
        int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (s < 0 || bind(s, a->ai_addr, a->ai_addrlen) != 0 || listen(s, 16) != 0) {
            e = errno;
            if (s >= 0) close(s);
            continue;
        }
        *fd = s;
    }
    freeaddrinfo(res);
    if (*fd < 0) {
        snprintf(err, err_len, "cannot listen on %s: %s", host, strerror(e));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(*fd, (struct sockaddr *)&ss, &sl) != 0) {
        snprintf(err, err_len, "cannot read the port bound on %s: %s", host, strerror(errno));
        close(*fd);
        *fd = -1;
        return -1;
    }
    unsigned port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    int v6 = strchr(host, ':') != NULL;
    snprintf(endpoint, endpoint_len, v6 ? "tcp://[%s]:%u" : "tcp://%s:%u", host, port);
    return 0;
}

static void tune_connected(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // best effort: only latency
}

// One connection attempt to address a; returns the socket, -1 with *e set.
static int dial_once(const struct addrinfo *a, double deadline_ms, int *e) {
    int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) {
        *e = errno;
        return -1;
    }
    if (connect(s, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
        *e = errno;
        close(s);
        return -1;
    }
    struct pollfd p = {s, POLLOUT, 0};
    int pr;
    while ((pr = poll(&p, 1, tcp_link_poll_ms(deadline_ms))) < 0 && errno == EINTR) {
    }
    int so = 0;
    socklen_t sl = sizeof so;
    if (pr == 0)
        so = ETIMEDOUT;
    else if (pr < 0)
        so = errno;
    else if (getsockopt(s, SOL_SOCKET, SO_ERROR, &so, &sl) != 0)
        so = errno;
    if (so != 0) {
        *e = so;
        close(s);
        return -1;
    }
    tune_connected(s);
    return s;
}

int tcp_link_dial(const char *endpoint, double deadline_ms, char *err, size_t err_len) {
    char host[256], port[16];
    if (split_endpoint(endpoint, host, sizeof host, port, sizeof port) != 0) {
        snprintf(err, err_len, "endpoint %s is not of the form tcp://HOST:PORT", endpoint);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        snprintf(err, err_len, "cannot resolve %s: %s", endpoint, gai_strerror(g));
        return -1;
    }
    int e = 0, s = -1;
    for (;;) {
        for (struct addrinfo *a = res; a && s < 0; a = a->ai_next) s = dial_once(a, deadline_ms, &e);
        if (s >= 0 || e != ECONNREFUSED || tcp_link_poll_ms(deadline_ms) == 0) break;
        struct timespec pause = {0, 10 * 1000 * 1000};  // refused: the peer may not listen yet
        nanosleep(&pause, NULL);
    }
    freeaddrinfo(res);
    if (s < 0) snprintf(err, err_len, "cannot connect to %s: %s", endpoint, strerror(e));
    return s;
}

int tcp_link_accept(int listen_fd, double deadline_ms, char *err, size_t err_len) {
    for (;;) {
        int s = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (s >= 0) {
            tune_connected(s);
            return s;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
            snprintf(err, err_len, "accepting a connection failed: %s", strerror(errno));
            return -1;
        }
        struct pollfd p = {listen_fd, POLLIN, 0};
        int pr = poll(&p, 1, tcp_link_poll_ms(deadline_ms));
        if (pr == 0) {
            snprintf(err, err_len, "no connection came before the deadline");
            return -1;
        }
        if (pr < 0 && errno != EINTR) {
            snprintf(err, err_len, "waiting for a connection failed: %s", strerror(errno));
            return -1;
        }
    }
}

static int transfer_all(int fd, void *buf, size_t len, int sending, double deadline_ms, char *err, size_t err_len) {
    unsigned char *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t k = sending ? send(fd, p + done, len - done, MSG_NOSIGNAL) : recv(fd, p + done, len - done, 0);
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        if (k == 0) {
            snprintf(err, err_len, "the connection was closed by the other side");
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            snprintf(err, err_len, "%s failed: %s", sending ? "sending" : "receiving", strerror(errno));
            return -1;
        }
        struct pollfd pf = {fd, sending ? POLLOUT : POLLIN, 0};
        int pr = poll(&pf, 1, tcp_link_poll_ms(deadline_ms));
        if (pr == 0) {
            snprintf(err, err_len, "nothing %s before the deadline", sending ? "could be sent" : "arrived");
            return -1;
        }
        if (pr < 0 && errno != EINTR) {
            snprintf(err, err_len, "poll failed: %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

int tcp_link_send_all(int fd, const void *buf, size_t len, double deadline_ms, char *err, size_t err_len) {
    return transfer_all(fd, (void *)buf, len, 1, deadline_ms, err, err_len);
}

int tcp_link_recv_all(int fd, void *buf, size_t len, double deadline_ms, char *err, size_t err_len) {
    return transfer_all(fd, buf, len, 0, deadline_ms, err, err_len);
}
