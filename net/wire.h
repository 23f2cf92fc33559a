#ifndef ASGD_NET_WIRE_H
#define ASGD_NET_WIRE_H
// asgd's wire protocol, version 2 (written down in docs/protocol.md).
//
// A message is one 64-byte header frame followed by zero, one or two payload
// frames, all little-endian:
//   PAYLOAD_KIND_NONE    no payload frame
//   PAYLOAD_KIND_DENSE   one frame: count float32, parameters [offset, offset + count)
//   PAYLOAD_KIND_SPARSE  two frames: count uint32 indices, then count float32 values
//   PAYLOAD_KIND_KEYS    one frame: count uint32 indices (a sparse pull's key set)
//   PAYLOAD_KIND_VALUES  one frame: count float32, the values at the keys of the
//                        PULL whose tag (its offset) the answer's offset repeats
//   PAYLOAD_KIND_ENCODED one frame: count values compressed (net/compress.h): an
//                        8-byte descriptor naming the encoding, then its body
// The header's checksum covers every payload frame, in order. Every received
// message goes through wire_validate before anything reads its payload.
#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC 0x44475341u  // "ASGD" read as a little-endian uint32
#define WIRE_VERSION 2u
#define WIRE_HEADER_SIZE 64u
#define WIRE_NO_ID 0xFFFFFFFFu  // sender/shard field that names no worker or shard

typedef enum msg_type {
    MSG_TYPE_HELLO = 1,  // worker -> server: join (offset = the model's parameter count)
    MSG_TYPE_WELCOME = 2,  // server -> worker: shard range [offset, offset + aux), clock, version
    MSG_TYPE_PUSH = 3,  // worker -> server: an update (dense range or sparse pairs)
    MSG_TYPE_PUSH_ACK = 4,  // server -> worker: applied (or buffered for BSP); clock = min clock
    MSG_TYPE_PULL = 5,  // worker -> server: parameters wanted (whole shard, or KEYS with a tag in offset)
    MSG_TYPE_PARAMS = 6,  // server -> worker: parameters (a dense range, or the VALUES of a keyed PULL)
    MSG_TYPE_BYE = 7,  // worker -> server: leaving
    MSG_TYPE_BYE_ACK = 8,  // server -> worker
    MSG_TYPE_REJECT = 9,  // server -> worker: request refused (aux = wire_status_t)
    MSG_TYPE_RING_CHUNK = 10,  // allreduce: a chunk between ring neighbours
    MSG_TYPE_RDV_JOIN = 11,  // process -> coordinator: rank, role, endpoint (payload: text)
    MSG_TYPE_RDV_TABLE = 12,  // coordinator -> process: every endpoint (payload: text)
    MSG_TYPE_HEARTBEAT = 13,  // worker -> server: still alive (no answer)
    MSG_TYPE_RING_GATHER = 14,  // allgather: one rank's encoded gradient between ring neighbours
    MSG_TYPE_REPLICA_JOIN =
        15,  // backup -> primary shard: send me your state (payload: text, my endpoint; aux = replica)
    MSG_TYPE_REPLICA_STATE = 16,  // primary -> backup: the state is written; forwarding starts
    MSG_TYPE_REPLICA_EVICT = 17,  // primary -> backup: evict worker `sender` (silent); answered in kind
    MSG_TYPE_MAX_ = 18,
} msg_type_t;

typedef enum payload_kind {
    PAYLOAD_KIND_NONE = 0,
    PAYLOAD_KIND_DENSE = 1,
    PAYLOAD_KIND_SPARSE = 2,
    PAYLOAD_KIND_KEYS = 3,
    PAYLOAD_KIND_TEXT = 4,  // one frame of count bytes (rendezvous tables)
    PAYLOAD_KIND_ENCODED = 5,  // one frame: count values in a self-described encoding (net/compress.h)
    PAYLOAD_KIND_VALUES = 6,  // one frame of count float32: a keyed PULL's answer, in its keys' order
    PAYLOAD_KIND_MAX_ = 7,
} payload_kind_t;

// Header flags.
#define WIRE_FLAG_SUM 0x1u  // PUSH: a gradient to be summed into the clock's aggregate (BSP)
#define WIRE_FLAG_JOIN 0x2u  // HELLO: a new member (asgd worker --join); aux (every HELLO's) is the client's nonce
#define WIRE_FLAG_ECHO 0x4u  // PUSH (ASP/SSP, dense): answer each part taken with its range's new values (PARAMS)
// PUSH, PARAMS: the payload frames are references into the sender's shared
// memory (net/shm_frames.h); count, kind and checksum describe what they refer to.
#define WIRE_FLAG_SHM 0x8u

typedef struct wire_header {
    uint32_t magic;  // WIRE_MAGIC
    uint16_t version;  // WIRE_VERSION
    uint16_t type;  // msg_type_t
    uint64_t run_id;  // every process of one run shares it; others are dropped
    uint32_t sender;  // worker id (or shard id when a server sends)
    uint32_t shard;  // the shard addressed or answering
    uint64_t clock;  // sender's clock (worker: pushes done; server: min worker clock); HELLO: the
        // clock proposed on a rejoin; WELCOME: the clock the worker continues from
    uint64_t param_version;  // PUSH: version the update was computed from; PARAMS: version sent
    uint64_t offset;  // DENSE: first parameter index of the range; PUSH_ACK: the acknowledged push's clock;
        // PULL with KEYS: the worker's tag for it, which the VALUES answering it repeat
    uint32_t count;  // elements in the payload (0 for NONE)
    uint16_t payload_kind;  // payload_kind_t
    uint16_t flags;  // WIRE_FLAG_*
    uint32_t checksum;  // wire_checksum over the payload frames
    uint32_t aux;  // PUSH: examples behind a BSP gradient, or local steps an ASP/SSP update sums; REJECT:
        // wire_status_t; PARAMS: microseconds the shard held the pull for the bound
} wire_header_t;

// Why a message was refused (counted per kind by whoever validates).
typedef enum wire_status {
    WIRE_STATUS_OK = 0,
    WIRE_STATUS_BAD_SIZE,  // header frame not 64 bytes, or payload frames of the wrong size/number
    WIRE_STATUS_BAD_MAGIC,
    WIRE_STATUS_BAD_VERSION,
    WIRE_STATUS_BAD_TYPE,
    WIRE_STATUS_BAD_RUN,  // run id is not ours
    WIRE_STATUS_BAD_RANGE,  // offset/count or an index outside what the receiver holds
    WIRE_STATUS_BAD_CHECKSUM,
    WIRE_STATUS_BAD_KIND,  // unknown payload kind, one the message's type does not carry, or (REJECT) one the receiver does not take
    WIRE_STATUS_EVICTED,  // REJECT: the worker was silent too long and was evicted; it must rejoin (HELLO)
    WIRE_STATUS_NOT_FINITE,  // REJECT: the update holds NaN or Inf; the run has diverged and stops
    WIRE_STATUS_BAD_ENCODING,  // an ENCODED payload the receiver cannot decode (unknown encoding, malformed)
    WIRE_STATUS_ID_LIVE,  // REJECT: a joiner's HELLO names a worker id that is live in the run
    WIRE_STATUS_BAD_SHM,  // a shared-memory reference (WIRE_FLAG_SHM) this process cannot map or that is malformed
    WIRE_STATUS_COUNT_,
} wire_status_t;

const char *wire_status_name(wire_status_t s);
const char *msg_type_name(uint16_t type);  // "push", ... or "unknown"

// Header <-> 64 little-endian bytes.
void wire_header_encode(const wire_header_t *h, uint8_t out[WIRE_HEADER_SIZE]);
void wire_header_decode(const uint8_t in[WIRE_HEADER_SIZE], wire_header_t *h);

// A fast 32-bit checksum of n bytes, continuing from `seed` (0 to start); a
// message's is wire_checksum(frame1, len1, wire_checksum(frame0, len0, 0)).
// Fletcher-style sums over 64-bit words in four lanes (it runs at memory speed)
// folded through a mixer. It catches every single-bit error, truncation and
// reordered frames; being linear per lane, some deliberate multi-word changes
// cancel (e.g. +1, -2, +1 on words 0, 4, 8). It guards against corruption and
// foreign senders, not against an attacker: it is not a MAC.
uint32_t wire_checksum(const void *data, size_t n, uint32_t seed);

// The same checksum computed piece by piece, e.g. block by block while a
// payload is being written, when each block is still in cache: begin, then
// update with pieces in order — each a multiple of 32 bytes except the last —
// then end. The result equals wire_checksum over the concatenation.
typedef struct wire_checksum_stream {
    uint64_t a[4], b[4];
    size_t n;
    int closed;  // a piece that was not a multiple of 32 bytes ended the stream
    uint32_t seed;  // as begun (wire_checksum_join needs it)
} wire_checksum_stream_t;
void wire_checksum_begin(wire_checksum_stream_t *st, uint32_t seed);
void wire_checksum_update(wire_checksum_stream_t *st, const void *data, size_t n);
// wire_checksum_update that also copies the piece to dst, in the same pass.
void wire_checksum_update_copy(wire_checksum_stream_t *st, void *dst, const void *data, size_t n);
uint32_t wire_checksum_end(wire_checksum_stream_t *st);

// Appends the bytes `next` summed (a stream begun with any seed, not yet
// ended) to st (not closed), as if st had been updated with them itself: one
// pass gives both a range's checksum and the running one of what holds it.
// The sums are linear, so this costs a few multiplications, not a pass.
void wire_checksum_join(wire_checksum_stream_t *st, const wire_checksum_stream_t *next);

// wire_checksum of src while copying it to dst in the same pass (one trip
// through memory instead of two): the same value wire_checksum(src, n, seed) gives.
uint32_t wire_checksum_copy(void *dst, const void *src, size_t n, uint32_t seed);

// An ENCODED frame holds at least its descriptor; the descriptor, not the
// header, gives its exact size, which the receiver checks when it decodes
// (after the checksum), with compress_check.
#define WIRE_ENCODED_MIN_BYTES 8u

// Payload bytes a header announces, per frame (0 when the frame is absent);
// for ENCODED, the least the frame may hold (WIRE_ENCODED_MIN_BYTES).
void wire_payload_sizes(const wire_header_t *h, size_t *frame0, size_t *frame1);

// Whether a message of this type may carry this payload kind: HELLO, WELCOME,
// PUSH_ACK, BYE, BYE_ACK, REJECT, HEARTBEAT, REPLICA_STATE and REPLICA_EVICT none; PUSH
// DENSE, SPARSE or ENCODED; PARAMS DENSE or SPARSE; PULL NONE or KEYS;
// RING_CHUNK DENSE or ENCODED; RING_GATHER ENCODED; RDV_JOIN, RDV_TABLE and
// REPLICA_JOIN TEXT.
int wire_kind_allowed(uint16_t type, uint16_t kind);

// Checks a received message: header size, magic, version, type, run id,
// payload kind against the type (wire_kind_allowed), payload frame count and
// sizes against count/kind, and checksum. `frames`
// holds the payload frames (after the header) and their sizes. Range checks
// need the receiver's state and are its own. Returns WIRE_STATUS_OK or why not.
wire_status_t wire_validate(const uint8_t *header, size_t header_len, uint64_t run_id, const void *const *frames,
                            const size_t *frame_lens, size_t n_frames, wire_header_t *out);

// wire_validate's checks of the header alone (size, magic, version, type, run
// id, kind, a NONE's count) and of how many payload frames it takes, not
// their sizes: what a receiver checks before it turns shared-memory references
// into frames (wire_by_reference).
wire_status_t wire_validate_header(const uint8_t *header, size_t header_len, uint64_t run_id, size_t n_frames,
                                   wire_header_t *out);
// The rest of wire_validate, for a header that passed wire_validate_header:
// the payload frames' sizes against count and kind, then, when check_sum,
// the checksum (0: for a receiver that verifies the payload while copying it
// out, wire_checksum_copy, before using it).
wire_status_t wire_validate_payload(const wire_header_t *h, const void *const *frames, const size_t *frame_lens,
                                    size_t n_frames, int check_sum);
// Whether a header that passed wire_validate_header says its payload frames
// are shared-memory references (net/shm_frames.h): a PUSH or PARAMS with the
// SHM flag and at least one frame. Other messages' SHM bit is ignored.
int wire_by_reference(const wire_header_t *h);

// Fills a header's checksum field from its payload frames (as wire_validate checks it).
void wire_seal(wire_header_t *h, const void *frame0, size_t len0, const void *frame1, size_t len1);

// A number for an identifier that must differ between processes, and
// between objects of one process: a run id, a client's or a replica's nonce.
// The process id, the real-time clock and salt's address, mixed (splitmix64);
// never 0. Not reproducible, and not a secret.
uint64_t wire_fresh_id(const void *salt);

#endif
