/* nfq_delay: hold every packet of one NFQUEUE for a fixed time, then accept it.
 *
 * A stand-in for `tc qdisc ... netem delay` on kernels built without netem.
 * Packets reach it through an iptables rule such as
 *     iptables -A INPUT -i eth0 -j NFQUEUE --queue-num 0
 * and it gives each one the verdict NF_ACCEPT once --delay-ms has passed since
 * it arrived. The kernel keeps the packets; this program only keeps their ids
 * and release times in a FIFO (with one fixed delay, arrival order is release
 * order), so a held packet never blocks the ones behind it from being queued,
 * and every verdict is issued when it is due — by one batch verdict for all the
 * packets whose time has come (queue ids rise monotonically).
 *
 * Usage: nfq_delay --delay-ms MS [--queue N] [--ready-file PATH] [--quiet]
 * On SIGTERM/SIGINT it accepts everything still held, prints its counts on
 * stderr and exits 0. Errors are reported on stderr with a non-zero exit.
 * Runs as root (CAP_NET_ADMIN) in the network namespace whose traffic it delays.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

typedef struct {
    uint32_t id;
    uint64_t due_ns;
} held_t;

typedef struct {
    held_t *buf;
    size_t cap, head, len;
} fifo_t;

static volatile sig_atomic_t stop_signal = 0;
static fifo_t fifo;
static uint64_t delay_ns;
static uint64_t n_packets, n_batches, max_held, n_enobufs;
static int fatal;

static void on_signal(int sig) { stop_signal = sig; }

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int fifo_push(fifo_t *f, held_t h) {
    if (f->len == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 1024;
        held_t *b = malloc(cap * sizeof *b);
        if (!b) return -1;
        for (size_t i = 0; i < f->len; i++) b[i] = f->buf[(f->head + i) % f->cap];
        free(f->buf);
        f->buf = b;
        f->cap = cap;
        f->head = 0;
    }
    f->buf[(f->head + f->len) % f->cap] = h;
    f->len++;
    return 0;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
    (void)qh;
    (void)msg;
    (void)data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) return 0;
    held_t h = {ntohl(ph->packet_id), now_ns() + delay_ns};
    if (fifo_push(&fifo, h) != 0) {
        fprintf(stderr, "nfq_delay: out of memory holding %zu packets\n", fifo.len);
        fatal = 1;
        return -1;
    }
    n_packets++;
    if (fifo.len > max_held) max_held = fifo.len;
    return 0;
}

/* Accept every held packet due by `now` (all of them when now == UINT64_MAX). */
static int release_due(struct nfq_q_handle *qh, uint64_t now) {
    uint32_t last = 0;
    size_t n = 0;
    while (fifo.len > 0 && fifo.buf[fifo.head].due_ns <= now) {
        last = fifo.buf[fifo.head].id;
        fifo.head = (fifo.head + 1) % fifo.cap;
        fifo.len--;
        n++;
    }
    if (n == 0) return 0;
    n_batches++;
    if (nfq_set_verdict_batch(qh, last, NF_ACCEPT) < 0) {
        fprintf(stderr, "nfq_delay: verdict for packets up to id %u failed: %s\n", last, strerror(errno));
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, double *delay_ms, unsigned *queue, const char **ready, int *quiet) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quiet") == 0) {
            *quiet = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return 1;
        if (i + 1 >= argc) {
            fprintf(stderr, "nfq_delay: %s: missing value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        char *end = NULL;
        errno = 0;
        if (strcmp(a, "--delay-ms") == 0) {
            *delay_ms = strtod(v, &end);
            if (errno || !end || *end || !(*delay_ms >= 0) || *delay_ms > 60000) {
                fprintf(stderr, "nfq_delay: --delay-ms %s: want a number of milliseconds in [0, 60000]\n", v);
                return 2;
            }
        } else if (strcmp(a, "--queue") == 0) {
            unsigned long q = strtoul(v, &end, 10);
            if (errno || !end || *end || q > 65535) {
                fprintf(stderr, "nfq_delay: --queue %s: want a queue number in [0, 65535]\n", v);
                return 2;
            }
            *queue = (unsigned)q;
        } else if (strcmp(a, "--ready-file") == 0) {
            *ready = v;
        } else {
            fprintf(stderr, "nfq_delay: unknown option %s (try --help)\n", a);
            return 2;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    double delay_ms = -1;
    unsigned queue = 0;
    const char *ready = NULL;
    int quiet = 0;
    int rc = parse_args(argc, argv, &delay_ms, &queue, &ready, &quiet);
    if (rc == 0 && delay_ms < 0) {
        fprintf(stderr, "nfq_delay: --delay-ms MS is required\n");
        rc = 2;
    }
    if (rc != 0) {
        fprintf(rc == 1 ? stdout : stderr,
                "usage: nfq_delay --delay-ms MS [--queue N] [--ready-file PATH] [--quiet]\n"
                "Holds each packet of NFQUEUE N (default 0) for MS milliseconds, then accepts it.\n"
                "--ready-file: create PATH once the queue is bound (for scripts to wait on).\n");
        return rc == 1 ? 0 : 2;
    }
    delay_ns = (uint64_t)(delay_ms * 1e6 + 0.5);
    /* Sub-millisecond delays: wake up on time, not up to 50 us late (the default slack). */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

    /* Block the stop signals; ppoll unblocks them only while waiting, so a
     * signal can never slip in between checking stop_signal and sleeping. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigset_t block, wait_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &wait_mask);
    sigdelset(&wait_mask, SIGTERM);
    sigdelset(&wait_mask, SIGINT);
    sigdelset(&wait_mask, SIGHUP);

    struct nfq_handle *h = nfq_open();
    if (!h) {
        fprintf(stderr, "nfq_delay: nfq_open: %s (needs root / CAP_NET_ADMIN and nfnetlink_queue)\n", strerror(errno));
        return 1;
    }
    struct nfq_q_handle *qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
    if (!qh) {
        fprintf(stderr, "nfq_delay: cannot bind NFQUEUE %u: %s (another program on this queue?)\n", queue,
                strerror(errno));
        nfq_close(h);
        return 1;
    }
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) {
        fprintf(stderr, "nfq_delay: nfq_set_mode: %s\n", strerror(errno));
        rc = 1;
        goto out;
    }
    /* Many packets may be held at once: rate × delay, plus bursts. */
    if (nfq_set_queue_maxlen(qh, 1u << 16) < 0)
        fprintf(stderr, "nfq_delay: warning: nfq_set_queue_maxlen: %s\n", strerror(errno));
    /* Take GSO packets whole (no segmentation in the kernel just for us). */
    if (nfq_set_queue_flags(qh, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO) < 0)
        fprintf(stderr, "nfq_delay: warning: cannot set NFQA_CFG_F_GSO: %s\n", strerror(errno));
    nfnl_rcvbufsiz(nfq_nfnlh(h), 8u << 20);
    int fd = nfq_fd(h);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        fprintf(stderr, "nfq_delay: fcntl: %s\n", strerror(errno));
        rc = 1;
        goto out;
    }
    if (ready) {
        FILE *f = fopen(ready, "w");
        if (!f) {
            fprintf(stderr, "nfq_delay: --ready-file %s: %s\n", ready, strerror(errno));
            rc = 1;
            goto out;
        }
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    if (!quiet) fprintf(stderr, "nfq_delay: queue %u, holding packets %.3f ms\n", queue, delay_ms);

    static char buf[1 << 16] __attribute__((aligned));
    while (!stop_signal && !fatal) {
        struct timespec ts, *tsp = NULL;
        if (fifo.len > 0) {
            uint64_t now = now_ns(), due = fifo.buf[fifo.head].due_ns;
            uint64_t wait = due > now ? due - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000ull);
            ts.tv_nsec = (long)(wait % 1000000000ull);
            tsp = &ts;
        }
        struct pollfd pfd = {fd, POLLIN, 0};
        int pr = ppoll(&pfd, 1, tsp, &wait_mask);
        if (pr < 0 && errno != EINTR) {
            fprintf(stderr, "nfq_delay: ppoll: %s\n", strerror(errno));
            rc = 1;
            break;
        }
        if (pr > 0) {
            for (;;) {
                ssize_t n = recv(fd, buf, sizeof buf, 0);
                if (n >= 0) {
                    nfq_handle_packet(h, buf, (int)n);
                    if (fatal) break;
                    continue;
                }
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
                /* The socket overflowed and the kernel dropped queue messages. Their
                 * packets stay queued in the kernel, unknown to us; the next batch
                 * verdict covers every id up to its own, so it releases them (early). */
                if (errno == ENOBUFS) {
                    n_enobufs++;
                    continue;
                }
                fprintf(stderr, "nfq_delay: recv: %s\n", strerror(errno));
                fatal = 1;
                break;
            }
        }
        if (release_due(qh, now_ns()) != 0) fatal = 1;
    }
    if (fatal) rc = 1;
    /* Let go of everything still held, so that nothing waits on a dead queue. */
    release_due(qh, UINT64_MAX);
    if (!quiet || rc != 0 || n_enobufs)
        fprintf(stderr, "nfq_delay: %s; %llu packets delayed in %llu verdict batches, at most %llu held at once%s",
                stop_signal ? "stopped by signal" : "stopped on error", (unsigned long long)n_packets,
                (unsigned long long)n_batches, (unsigned long long)max_held, n_enobufs ? "" : "\n");
    if (n_enobufs)
        fprintf(stderr, "; %llu receive overruns (their packets went through undelayed)\n",
                (unsigned long long)n_enobufs);
out:
    nfq_destroy_queue(qh);
    nfq_close(h);
    free(fifo.buf);
    return rc;
}
