#ifndef ASGD_NET_CURVE_AUTH_H
#define ASGD_NET_CURVE_AUTH_H
// Transport security of asgd's sockets (docs/security.md): CURVE — ZeroMQ's
// encryption and authentication of connections, libsodium behind libzmq —
// and the rule that no socket listens beyond the loopback interface without
// it, unless the user says --insecure.
//
// A run shares one *server* key pair: every socket that listens (parameter-
// server shards, the rendezvous coordinator, allreduce ring sockets) presents
// its public key, which every connecting process knows, so that nobody else
// can pose as a server. Every connecting process has a *client* key pair, and
// listeners admit only the client public keys on their allow list: libzmq
// asks a ZAP handler (zap_handler_new, a thread answering on
// inproc://zeromq.zap.01 of the context) about each new connection.
//
// Keys are Z85 text (40 characters). `asgd keygen --out BASE` writes BASE.key
// (the pair; mode 0600) and BASE.pub (the public key alone):
//   # comment lines
//   public-key = <40 characters>
//   secret-key = <40 characters>        (BASE.key only)
#include <stddef.h>
#include <stdint.h>

#define CURVE_KEY_LEN 40  // Z85 characters of a 32-byte key

typedef struct curve_key {
    char z85[CURVE_KEY_LEN + 1];
} curve_key_t;

// How this process's sockets are secured. Set once (net_security_set) before
// any socket listens or connects, and only read after that.
typedef struct net_security {
    int curve;  // CURVE on every tcp/ipc socket
    int insecure;  // without CURVE, listening beyond loopback is allowed (with a warning)
    curve_key_t server_public;  // curve: the run's server key
    curve_key_t server_secret;  // curve: "" where this process only connects
    curve_key_t client_public;  // curve: this process's own key pair, for connecting
    curve_key_t client_secret;
} net_security_t;

// Checks (a listener without the server secret is refused at its bind, not
// here) and installs s for every later zmsg_bind / zmsg_connect. Returns 0, or
// -1 with err when CURVE is asked for but this libzmq lacks it or a key is malformed.
int net_security_set(const net_security_t *s, char *err, size_t err_len);
const net_security_t *net_security_get(void);

// Called by zmsg_bind before binding sock to endpoint: refuses a listener
// beyond loopback without CURVE (unless insecure; then it warns once), and
// makes sock a CURVE server (ZAP domain "asgd", enforced: no handler, no entry).
int net_security_listen(void *sock, const char *endpoint, char *err, size_t err_len);
// The same rule for a listener outside libzmq, which CURVE cannot cover (the
// stream ring's plain TCP): refused when the run uses CURVE, and beyond
// loopback unless insecure (then it warns once). Returns 0, or -1 with err.
int net_security_listen_plain(const char *endpoint, char *err, size_t err_len);
// Called by zmsg_connect: makes sock a CURVE client of the server key.
int net_security_dial(void *sock, char *err, size_t err_len);
// Whether endpoint listens only on this machine: tcp:// on 127.x.x.x,
// localhost or ::1, and ipc:// and inproc://.
int net_endpoint_is_local(const char *endpoint);

// ---- key files ------------------------------------------------------------------
// A fresh key pair in memory (a local launch's throwaway keys). Returns 0, or
// -1 with err when this libzmq lacks CURVE.
int curve_keypair_new(curve_key_t *public_out, curve_key_t *secret_out, char *err, size_t err_len);
// Writes a fresh key pair to base.key (created with mode 0600, refused if it
// exists) and base.pub. Returns 0, or -1 with err naming the file.
int curve_keygen(const char *base, curve_key_t *public_out, char *err, size_t err_len);
// Reads a key file: the public key, and the secret one when the file holds it
// (else secret_out is ""). Errors name the file and line.
int curve_key_load(const char *path, curve_key_t *public_out, curve_key_t *secret_out, char *err, size_t err_len);
// Reads an allow list: public keys, one per line, bare or as "public-key = KEY"
// (so that .pub files can simply be concatenated); '#' comments and blank
// lines are skipped. *keys is the caller's (free). An empty list is an error.
int curve_allow_load(const char *path, curve_key_t **keys, size_t *n, char *err, size_t err_len);

// ---- the ZAP handler ------------------------------------------------------------
typedef struct zap_handler zap_handler_t;

// Starts the handler of zmq_ctx (one per context) admitting CURVE clients
// whose public key is one of allowed[0..n) (copied). Returns NULL with err.
zap_handler_t *zap_handler_new(void *zmq_ctx, const curve_key_t *allowed, size_t n, char *err, size_t err_len);
// Connections admitted and refused so far.
void zap_handler_counts(const zap_handler_t *z, uint64_t *admitted, uint64_t *refused);
void zap_handler_destroy(zap_handler_t **z);  // accepts NULL and nulls the pointer

#endif
