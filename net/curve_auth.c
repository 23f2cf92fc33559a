// CURVE keys, the listening rule and the ZAP handler (curve_auth.h).
#include "net/curve_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "net/zmq_error.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"  // fixed by RFC 27: one handler per context
#define ZAP_DOMAIN "asgd"
#define ZAP_POLL_MS 100  // how soon the handler notices a stop

// The process's settings: written once by net_security_set before any socket
// exists (see curve_auth.h), read by every thread that binds or connects.
static net_security_t security;
static atomic_int zap_handlers_running;
static atomic_int warned_insecure;

static int key_valid(const curve_key_t *k) {
    uint8_t raw[32];
    return strlen(k->z85) == CURVE_KEY_LEN && zmq_z85_decode(raw, k->z85) != NULL;
}

// The secret key's public half is the public key given with it.
static int pair_valid(const curve_key_t *pub, const curve_key_t *sec) {
    char derived[CURVE_KEY_LEN + 1];
    return key_valid(pub) && key_valid(sec) && zmq_curve_public(derived, sec->z85) == 0 &&
           strcmp(derived, pub->z85) == 0;
}

int net_security_set(const net_security_t *s, char *err, size_t err_len) {
    if (s->curve) {
        if (!zmq_has("curve")) {
            snprintf(
                err, err_len,
                "CURVE security was asked for, but this libzmq was built without it (zmq_has(\"curve\") is false)");
            return -1;
        }
        if (!key_valid(&s->server_public) ||
            (s->server_secret.z85[0] && !pair_valid(&s->server_public, &s->server_secret))) {
            snprintf(err, err_len, "the server key is not a valid CURVE key pair (make one with asgd keygen)");
            return -1;
        }
        if (!pair_valid(&s->client_public, &s->client_secret)) {
            snprintf(err, err_len, "the client key is not a valid CURVE key pair (make one with asgd keygen)");
            return -1;
        }
    }
    security = *s;
    return 0;
}

const net_security_t *net_security_get(void) { return &security; }

// ---- endpoints ------------------------------------------------------------------

int net_endpoint_is_local(const char *endpoint) {
    if (strncmp(endpoint, "ipc://", 6) == 0 || strncmp(endpoint, "inproc://", 9) == 0) return 1;
    if (strncmp(endpoint, "tcp://", 6) != 0) return 0;
    const char *host = endpoint + 6;
    // A source address ("tcp://src;dst") is not ours to judge: not local.
    if (strchr(host, ';')) return 0;
    const char *colon = strrchr(host, ':');
    size_t len = colon ? (size_t)(colon - host) : strlen(host);
    if (len == 9 && strncmp(host, "localhost", 9) == 0) return 1;
    if ((len == 5 && strncmp(host, "[::1]", 5) == 0) || (len == 3 && strncmp(host, "::1", 3) == 0)) return 1;
    // 127.0.0.0/8, written as four decimal numbers.
    if (len < 9 || strncmp(host, "127.", 4) != 0) return 0;
    int dots = 0, digits = 0;
    for (size_t i = 0; i < len; i++) {
        if (host[i] == '.') {
            if (digits == 0 || ++dots > 3) return 0;
            digits = 0;
        } else if (host[i] >= '0' && host[i] <= '9' && digits < 3) {
            digits++;
        } else {
            return 0;
        }
    }
    return dots == 3 && digits > 0;
}

// A listener without CURVE: on loopback, or beyond it under --insecure (warned once).
static int listen_without_curve(const char *endpoint, const char *instead, char *err, size_t err_len) {
    if (net_endpoint_is_local(endpoint)) return 0;
    if (!security.insecure) {
        errno = EACCES;  // not EADDRINUSE: a caller that retries busy addresses must not wait for this
        snprintf(err, err_len, "%.200s: refusing to listen beyond this machine without CURVE: %s", endpoint, instead);
        return -1;
    }
    if (!atomic_exchange(&warned_insecure, 1))
        fprintf(stderr,
                "asgd: WARNING: listening on %s without encryption or authentication (--insecure): anyone "
                "who can reach it can read the training traffic, send updates and stop the run\n",
                endpoint);
    return 0;
}

int net_security_listen_plain(const char *endpoint, char *err, size_t err_len) {
    if (security.curve) {
        errno = EACCES;
        snprintf(err, err_len, "%.200s: this run uses CURVE, and a plain TCP listener would bypass it", endpoint);
        return -1;
    }
    return listen_without_curve(endpoint, "on a network you trust, --insecure", err, err_len);
}

int net_security_listen(void *sock, const char *endpoint, char *err, size_t err_len) {
    if (!security.curve)
        return listen_without_curve(endpoint,
                                    "give the run's keys (--curve-server-key, --curve-allow; make them with asgd "
                                    "keygen) or, on a network you trust, --insecure",
                                    err, err_len);
    if (strncmp(endpoint, "inproc://", 9) == 0) return 0;  // never leaves the process
    if (!security.server_secret.z85[0]) {
        snprintf(err, err_len,
                 "%.200s: listening with CURVE needs the server key's secret half: --curve-server-key FILE.key "
                 "(the .pub file only lets a process connect)",
                 endpoint);
        return -1;
    }
    // libzmq admits every CURVE client when no ZAP handler answers; without
    // one there would be encryption but no authentication.
    if (atomic_load(&zap_handlers_running) == 0) {
        snprintf(err, err_len,
                 "%.200s: listening with CURVE needs the allow list's ZAP handler running (--curve-allow FILE)",
                 endpoint);
        return -1;
    }
    int one = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, security.server_secret.z85, CURVE_KEY_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)) != 0)
        return ZMQ_FAIL("zmq_setsockopt(ZMQ_CURVE_SERVER/SECRETKEY/ZAP_DOMAIN)", err, err_len);
    return 0;
}

int net_security_dial(void *sock, char *err, size_t err_len) {
    if (!security.curve) return 0;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, security.server_public.z85, CURVE_KEY_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, security.client_public.z85, CURVE_KEY_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, security.client_secret.z85, CURVE_KEY_LEN) != 0)
        return ZMQ_FAIL("zmq_setsockopt(ZMQ_CURVE_SERVERKEY/PUBLICKEY/SECRETKEY)", err, err_len);
    return 0;
}

// ---- key files ------------------------------------------------------------------

static int write_new_file(const char *path, mode_t mode, const char *text, char *err, size_t err_len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0) {
        snprintf(err, err_len, "%s: cannot create: %s%s", path, strerror(errno),
                 errno == EEXIST ? " (asgd keygen never overwrites a key)" : "");
        return -1;
    }
    size_t len = strlen(text);
    ssize_t wrote = write(fd, text, len);
    int saved = errno;
    if (close(fd) != 0 && wrote == (ssize_t)len) wrote = -1, saved = errno;
    if (wrote != (ssize_t)len) {
        snprintf(err, err_len, "%s: write failed: %s", path, strerror(saved ? saved : EIO));
        unlink(path);
        return -1;
    }
    return 0;
}

int curve_keypair_new(curve_key_t *public_out, curve_key_t *secret_out, char *err, size_t err_len) {
    if (!zmq_has("curve")) {
        snprintf(err, err_len, "this libzmq was built without CURVE (zmq_has(\"curve\") is false)");
        return -1;
    }
    if (zmq_curve_keypair(public_out->z85, secret_out->z85) != 0) return ZMQ_FAIL("zmq_curve_keypair", err, err_len);
    return 0;
}

int curve_keygen(const char *base, curve_key_t *public_out, char *err, size_t err_len) {
    if (!zmq_has("curve")) {
        snprintf(err, err_len, "asgd keygen: this libzmq was built without CURVE (zmq_has(\"curve\") is false)");
        return -1;
    }
    curve_key_t pub, sec;
    if (zmq_curve_keypair(pub.z85, sec.z85) != 0) return ZMQ_FAIL("zmq_curve_keypair", err, err_len);
    char key_path[1024], pub_path[1024], text[2600];
    if (snprintf(key_path, sizeof key_path, "%s.key", base) >= (int)sizeof key_path ||
        snprintf(pub_path, sizeof pub_path, "%s.pub", base) >= (int)sizeof pub_path) {
        snprintf(err, err_len, "asgd keygen: the name '%.100s...' is too long", base);
        return -1;
    }
    snprintf(text, sizeof text,
             "# asgd CURVE key pair, made by asgd keygen. The secret key is this process's identity:\n"
             "# keep the file private (mode 0600); share only %s.\n"
             "public-key = %s\nsecret-key = %s\n",
             pub_path, pub.z85, sec.z85);
    if (write_new_file(key_path, 0600, text, err, err_len) != 0) return -1;
    snprintf(text, sizeof text, "# asgd CURVE public key (the secret half is in %s)\npublic-key = %s\n", key_path,
             pub.z85);
    if (write_new_file(pub_path, 0644, text, err, err_len) != 0) {
        unlink(key_path);
        return -1;
    }
    if (public_out) *public_out = pub;
    return 0;
}

// One line of a key file: "public-key = KEY" or "secret-key = KEY", a bare
// KEY, a comment ("#" then a blank or the end of the line) or a blank line;
// anything after the key must be a blank then such a comment. (Z85 itself
// uses '#' and '=', never a blank, so a key is always one word.) Returns 1
// with *name ("" for a bare key) and the key, 0 for no key, -1 for a bad line.
static int parse_key_line(char *line, const char **name, curve_key_t *key) {
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '\0' || *p == '\n' || *p == '\r') return 0;
    if (*p == '#' && (p[1] == ' ' || p[1] == '\t' || p[1] == '\0' || p[1] == '\n' || p[1] == '\r')) return 0;
    *name = "";
    static const char *const names[] = {"public-key", "secret-key"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(names[i]);
        char *q = p + n;
        while (*q == ' ' || *q == '\t') q++;
        if (strncmp(p, names[i], n) == 0 && *q == '=') {
            *name = names[i];
            p = q + 1;
            while (*p == ' ' || *p == '\t') p++;
            break;
        }
    }
    size_t len = strcspn(p, " \t\r\n");
    char *rest = p + len;
    while (*rest == ' ' || *rest == '\t') rest++;
    if (*rest && *rest != '\n' && *rest != '\r' && !(*rest == '#' && rest > p + len)) return -1;
    if (len != CURVE_KEY_LEN) return -1;
    memcpy(key->z85, p, CURVE_KEY_LEN);
    key->z85[CURVE_KEY_LEN] = '\0';
    return key_valid(key) ? 1 : -1;
}

int curve_key_load(const char *path, curve_key_t *public_out, curve_key_t *secret_out, char *err, size_t err_len) {
    memset(public_out, 0, sizeof *public_out);
    memset(secret_out, 0, sizeof *secret_out);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char line[256];
    int rc = 0;
    for (size_t n = 1; rc == 0 && fgets(line, sizeof line, f); n++) {
        const char *name;
        curve_key_t k;
        int got = parse_key_line(line, &name, &k);
        if (got == 0) continue;
        if (got > 0 && (strcmp(name, "public-key") == 0 || name[0] == '\0'))
            *public_out = k;
        else if (got > 0 && strcmp(name, "secret-key") == 0)
            *secret_out = k;
        else {
            snprintf(err, err_len,
                     "%s:%zu: expected 'public-key = KEY' or 'secret-key = KEY' with a 40-character Z85 key", path, n);
            rc = -1;
        }
    }
    fclose(f);
    if (rc != 0) return -1;
    if (!public_out->z85[0]) {
        snprintf(err, err_len, "%s: no public-key line (is it a key file made by asgd keygen?)", path);
        return -1;
    }
    if (secret_out->z85[0] && !pair_valid(public_out, secret_out)) {
        snprintf(err, err_len, "%s: the secret key does not belong to the public key", path);
        return -1;
    }
    return 0;
}

int curve_allow_load(const char *path, curve_key_t **keys, size_t *n, char *err, size_t err_len) {
    *keys = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char line[256];
    size_t cap = 0;
    int rc = 0;
    for (size_t lineno = 1; rc == 0 && fgets(line, sizeof line, f); lineno++) {
        const char *name;
        curve_key_t k;
        int got = parse_key_line(line, &name, &k);
        if (got == 0) continue;
        if (got < 0 || (name[0] && strcmp(name, "public-key") != 0)) {
            snprintf(err, err_len, "%s:%zu: expected a public key (40 Z85 characters, bare or as 'public-key = KEY')%s",
                     path, lineno,
                     got > 0 && strcmp(name, "secret-key") == 0 ? "; this is a secret key: list .pub files" : "");
            rc = -1;
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            curve_key_t *grown = realloc(*keys, cap * sizeof *grown);
            if (!grown) {
                snprintf(err, err_len, "%s: out of memory", path);
                rc = -1;
                break;
            }
            *keys = grown;
        }
        (*keys)[(*n)++] = k;
    }
    fclose(f);
    if (rc == 0 && *n == 0) {
        snprintf(err, err_len, "%s: no public keys listed (nobody could connect)", path);
        rc = -1;
    }
    if (rc != 0) {
        free(*keys);
        *keys = NULL;
        *n = 0;
    }
    return rc;
}

// ---- the ZAP handler ------------------------------------------------------------

struct zap_handler {
    void *rep;  // bound at ZAP_ENDPOINT; used by the thread once it runs
    pthread_t thread;
    atomic_int stop;
    atomic_uint_least64_t admitted, refused;
    uint8_t (*allowed)[32];  // (n) decoded public keys
    size_t n;
};

static int is_allowed(const zap_handler_t *z, const uint8_t *key, size_t len) {
    if (len != 32) return 0;
    for (size_t i = 0; i < z->n; i++)
        if (memcmp(z->allowed[i], key, 32) == 0) return 1;
    return 0;
}

// One request (RFC 27): version, request id, domain, address, routing id,
// mechanism, credentials; the reply: version, request id, status code and
// text, user id, metadata.
static void answer_one(zap_handler_t *z) {
    zmq_msg_t part[7];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t scratch;
        zmq_msg_t *m = n < 7 ? &part[n] : &scratch;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, z->rep, 0) < 0) {
            zmq_msg_close(m);
            for (int i = 0; i < n && i < 7; i++) zmq_msg_close(&part[i]);
            return;
        }
        more = zmq_msg_more(m);
        if (m == &scratch) zmq_msg_close(m);
        n++;
    }
    int ok = n == 7 && zmq_msg_size(&part[0]) == 3 && memcmp(zmq_msg_data(&part[0]), "1.0", 3) == 0 &&
             zmq_msg_size(&part[5]) == 5 && memcmp(zmq_msg_data(&part[5]), "CURVE", 5) == 0 &&
             is_allowed(z, zmq_msg_data(&part[6]), zmq_msg_size(&part[6]));
    if (ok)
        atomic_fetch_add(&z->admitted, 1);
    else
        atomic_fetch_add(&z->refused, 1);
    const char *status = ok ? "200" : "400", *text = ok ? "OK" : "public key not on the allow list";
    const void *id = n >= 2 ? zmq_msg_data(&part[1]) : "";
    size_t id_len = n >= 2 ? zmq_msg_size(&part[1]) : 0;
    // A reply that cannot be sent leaves the connection unadmitted (libzmq
    // times the handshake out): refused, which is the safe side, but said.
    if (zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE) < 0 || zmq_send(z->rep, id, id_len, ZMQ_SNDMORE) < 0 ||
        zmq_send(z->rep, status, 3, ZMQ_SNDMORE) < 0 || zmq_send(z->rep, text, strlen(text), ZMQ_SNDMORE) < 0 ||
        zmq_send(z->rep, "", 0, ZMQ_SNDMORE) < 0 ||  // user id
        zmq_send(z->rep, "", 0, 0) < 0)  // metadata
        fprintf(stderr, "asgd: ZAP handler: sending a reply failed: %s\n", zmq_strerror(errno));
    for (int i = 0; i < n && i < 7; i++) zmq_msg_close(&part[i]);
}

static void *zap_main(void *arg) {
    zap_handler_t *z = arg;
    zmq_pollitem_t item = {z->rep, 0, ZMQ_POLLIN, 0};
    while (!atomic_load(&z->stop)) {
        int rc = zmq_poll(&item, 1, ZAP_POLL_MS);
        if (rc < 0) {
            if (errno == EINTR) continue;
            break;  // the context is ending (ETERM)
        }
        if (rc > 0) answer_one(z);
    }
    zmq_close(z->rep);
    z->rep = NULL;
    return NULL;
}

zap_handler_t *zap_handler_new(void *zmq_ctx, const curve_key_t *allowed, size_t n, char *err, size_t err_len) {
    zap_handler_t *z = calloc(1, sizeof *z);
    if (!z || !(z->allowed = malloc((n ? n : 1) * sizeof *z->allowed))) {
        snprintf(err, err_len, "ZAP handler: out of memory");
        free(z);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!key_valid(&allowed[i])) {
            snprintf(err, err_len, "ZAP handler: allowed key %zu is not a Z85 CURVE public key", i + 1);
            free(z->allowed);
            free(z);
            return NULL;
        }
        zmq_z85_decode(z->allowed[i], allowed[i].z85);
    }
    z->n = n;
    atomic_init(&z->stop, 0);
    atomic_init(&z->admitted, 0);
    atomic_init(&z->refused, 0);
    int zero = 0;
    z->rep = zmq_socket(zmq_ctx, ZMQ_REP);
    if (!z->rep || zmq_setsockopt(z->rep, ZMQ_LINGER, &zero, sizeof zero) != 0 || zmq_bind(z->rep, ZAP_ENDPOINT) != 0) {
        ZMQ_FAIL("ZAP handler: zmq_bind(" ZAP_ENDPOINT ")", err, err_len);
        if (z->rep) zmq_close(z->rep);
        free(z->allowed);
        free(z);
        return NULL;
    }
    // Bound before the thread starts: a server that binds after this returns
    // finds its handler there. Thread creation hands the socket over.
    int prc = pthread_create(&z->thread, NULL, zap_main, z);
    if (prc != 0) {
        snprintf(err, err_len, "ZAP handler: cannot start its thread: %s", strerror(prc));
        zmq_close(z->rep);
        free(z->allowed);
        free(z);
        return NULL;
    }
    atomic_fetch_add(&zap_handlers_running, 1);
    return z;
}

void zap_handler_counts(const zap_handler_t *z, uint64_t *admitted, uint64_t *refused) {
    *admitted = atomic_load(&((zap_handler_t *)z)->admitted);
    *refused = atomic_load(&((zap_handler_t *)z)->refused);
}

void zap_handler_destroy(zap_handler_t **zp) {
    if (!zp || !*zp) return;
    zap_handler_t *z = *zp;
    *zp = NULL;
    atomic_store(&z->stop, 1);
    pthread_join(z->thread, NULL);
    atomic_fetch_sub(&zap_handlers_running, 1);
    free(z->allowed);
    free(z);
}
