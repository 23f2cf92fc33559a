#ifndef ASGD_NET_RENDEZVOUS_H
#define ASGD_NET_RENDEZVOUS_H
// Rendezvous: how the processes of one run learn each other's endpoints.
//
// One process (rank 0's host, see launch_env.h) runs a coordinator; every
// process — the coordinator's own included — joins it with its rank, role and
// the endpoint it has bound. Once n_ranks distinct ranks have joined, the
// coordinator answers every joiner with the whole table, sorted by rank. The
// processes may start in any order: a joiner resends its join every second
// until the table arrives or its timeout passes.
//
// A process that has no rank (ps-lite numbers no one) joins for "any rank of
// my role" instead, under a name of its own that no other joiner uses: a
// coordinator with a role layout (rdv_server_new_roles) gives it the role's
// lowest free rank, first come first served, and the same name again (a
// retry) the same rank. The joiner finds itself in the table by that name,
// not by its endpoint: several joiners may advertise the same one ("-").
//
// On the wire (protocol messages, wire.h; payload PAYLOAD_KIND_TEXT):
//   RDV_JOIN   sender = rank, aux = n_ranks, payload "RANK ROLE ENDPOINT[ NAME]\n"
//              any rank: sender = WIRE_NO_ID, payload "* ROLE ENDPOINT NAME\n"
//   RDV_TABLE  sender = the rank it answers, aux = n_ranks,
//              payload n lines "RANK ROLE ENDPOINT[ NAME]\n", ranks 0..n-1 in order
// RANK and ROLE are decimal; ENDPOINT is one word (no blanks) shorter than
// RDV_ENDPOINT_MAX, NAME one shorter than RDV_NAME_MAX (a line has it when
// its joiner gave one). Messages with another run id, a bad checksum or a
// body that does not parse are dropped by whoever receives them.
#include <stddef.h>
#include <stdint.h>

#define RDV_ENDPOINT_MAX 200
#define RDV_NAME_MAX 64

typedef struct rdv_entry {
    uint32_t rank;
    uint32_t role;  // the caller's (launch_role_t); carried, not interpreted (but see _roles)
    char endpoint[RDV_ENDPOINT_MAX];  // where this rank can be reached, e.g. "tcp://node01:40123"
    char name[RDV_NAME_MAX];  // the joiner's own name, "" for none (required by rdv_join_any)
} rdv_entry_t;

// ---- the coordinator ---------------------------------------------------------
typedef struct rdv_server rdv_server_t;

// Binds a ROUTER socket at endpoint ("tcp://host:port"; port 0 or * picks a free
// one) and serves from its own thread, which owns the socket until
// rdv_server_destroy. Messages that are not a well-formed join of this run —
// another run id, garbage, a rank >= n_ranks, a joiner expecting another
// n_ranks, a rank already taken by a different endpoint, role or name, an
// any-rank join (this coordinator has no role layout) — are dropped and
// counted, each reason reported once on stderr. The same rank joining again
// with the same endpoint, role and name is a retry: it is answered (again,
// once the table is complete), never counted twice. zmq_ctx stays the caller's
// and must outlive the server. Returns NULL with err filled on failure (bad
// endpoint, port in use).
rdv_server_t *rdv_server_new(void *zmq_ctx, const char *endpoint, size_t n_ranks, uint64_t run_id, char *err,
                             size_t err_len);

// A coordinator for an elastic run: the table has n_ranks entries, and goes
// out once ranks [0, n_required) have joined; a rank from n_required on may
// join at any time (before or after), and is answered the table as it stands
// then. A rank nobody has taken appears in it as "RANK 0 -". rdv_server_wait
// waits for the required ranks only.
rdv_server_t *rdv_server_new_elastic(void *zmq_ctx, const char *endpoint, size_t n_ranks, size_t n_required,
                                     uint64_t run_id, char *err, size_t err_len);

// A coordinator with a role layout: role r (0 <= r < n_roles) owns the next
// role_counts[r] ranks (role 0 ranks 0..role_counts[0]-1, and so on; n_ranks
// is their sum). Besides everything rdv_server_new takes, it answers any-rank
// joins (rdv_join_any), and it drops a join whose role is not in the layout
// or, for a fixed rank, not that rank's role, and an any-rank join when every
// rank of its role is taken by other names.
rdv_server_t *rdv_server_new_roles(void *zmq_ctx, const char *endpoint, const size_t *role_counts, size_t n_roles,
                                   uint64_t run_id, char *err, size_t err_len);

// The bound endpoint with its port resolved, e.g. "tcp://127.0.0.1:41873".
const char *rdv_server_endpoint(const rdv_server_t *s);

// Blocks until the table has been sent to every rank (timeout_ms < 0: no
// limit). Returns 0, or -1 with err listing how many ranks joined and which
// are missing. The server keeps answering late retries until destroyed.
int rdv_server_wait(rdv_server_t *s, int timeout_ms, char *err, size_t err_len);

// How many times the table has gone to rank (0 until it has joined and the
// table is complete; one more for each join of it after that, a restarted
// process's or a retry's): a caller that starts a process again reads this
// to learn whether the new one got as far as joining. 0 for a rank >= n_ranks.
size_t rdv_server_answers(const rdv_server_t *s, size_t rank);

// Messages dropped so far (all reasons).
size_t rdv_server_dropped(const rdv_server_t *s);

// Stops the thread, closes the socket and frees; accepts NULL and nulls *s.
// Tables still queued in libzmq get up to half a second to leave, which
// zmq_ctx_term (not this call) waits for.
void rdv_server_destroy(rdv_server_t **s);

// ---- a process joining -------------------------------------------------------
// Sends *me to the coordinator ("tcp://host:port") and waits for the table,
// resending the join every second (the coordinator may start after us), for at
// most timeout_ms (< 0: no limit). On success *table holds n_ranks entries
// sorted by rank (entry i has rank i) and the caller owns it (free). Returns -1
// with err when the coordinator does not answer in time, the table is
// malformed, or it does not contain *me as sent.
int rdv_join(void *zmq_ctx, const char *coordinator, uint64_t run_id, const rdv_entry_t *me, size_t n_ranks,
             rdv_entry_t **table, int timeout_ms, char *err, size_t err_len);

// rdv_join for any rank of me->role (me->rank is ignored; me->name must be set,
// one word, and no other joiner's): on success *rank is the rank the
// coordinator assigned, and (*table)[*rank] is *me with that rank — the only
// entry with me->name. Fails as rdv_join does, and when the table does not
// hold this process's name exactly once, at the rank the answer names.
int rdv_join_any(void *zmq_ctx, const char *coordinator, uint64_t run_id, const rdv_entry_t *me, size_t n_ranks,
                 rdv_entry_t **table, uint32_t *rank, int timeout_ms, char *err, size_t err_len);

// Parses a table's text of n entries (n lines "RANK ROLE ENDPOINT[ NAME]\n", ranks
// 0..n-1 in order, nothing after them) into out[0..n). Returns 0, or -1 with
// why naming the line that is wrong.
int rdv_table_parse(const char *text, size_t len, size_t n, rdv_entry_t *out, char *why, size_t why_len);

// ---- endpoints -----------------------------------------------------------------
// Binds sock to tcp://host:* and writes the endpoint libzmq chose
// (ZMQ_LAST_ENDPOINT, e.g. "tcp://127.0.0.1:40123") to endpoint_out. A host of
// "*" or "0.0.0.0" binds every interface, and the endpoint then names 0.0.0.0,
// which is no address for another machine: advertise the host's name instead.
// The bind follows zmsg_bind's security rules; a caller that limits frame
// sizes sets ZMQ_MAXMSGSIZE on sock first. Returns 0 or -1 with err.
int net_bind_ephemeral(void *sock, const char *host, char *endpoint_out, size_t len, char *err, size_t err_len);

#endif
