// Header encoding, checksum and validation for the wire protocol (wire.h).
#include "net/wire.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/foundation/rng.h"
#include "net/checksum_lanes.h"

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

void wire_header_encode(const wire_header_t *h, uint8_t out[WIRE_HEADER_SIZE]) {
    put32(out + 0, h->magic);
    put16(out + 4, h->version);
    put16(out + 6, h->type);
    put64(out + 8, h->run_id);
    put32(out + 16, h->sender);
    put32(out + 20, h->shard);
    put64(out + 24, h->clock);
    put64(out + 32, h->param_version);
    put64(out + 40, h->offset);
    put32(out + 48, h->count);
    put16(out + 52, h->payload_kind);
    put16(out + 54, h->flags);
    put32(out + 56, h->checksum);
    put32(out + 60, h->aux);
}

void wire_header_decode(const uint8_t in[WIRE_HEADER_SIZE], wire_header_t *h) {
    h->magic = get32(in + 0);
    h->version = get16(in + 4);
    h->type = get16(in + 6);
    h->run_id = get64(in + 8);
    h->sender = get32(in + 16);
    h->shard = get32(in + 20);
    h->clock = get64(in + 24);
    h->param_version = get64(in + 32);
    h->offset = get64(in + 40);
    h->count = get32(in + 48);
    h->payload_kind = get16(in + 52);
    h->flags = get16(in + 54);
    h->checksum = get32(in + 56);
    h->aux = get32(in + 60);
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint64_t load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

// Lane l's first value, for a stream begun with `seed`.
static uint64_t lane_start(uint32_t seed, int l) { return mix64((uint64_t)seed + (uint64_t)l + 1); }

void wire_checksum_begin(wire_checksum_stream_t *st, uint32_t seed) {
    for (int l = 0; l < 4; l++) {
        st->a[l] = lane_start(seed, l);
        st->b[l] = 0;
    }
    st->n = 0;
    st->closed = 0;
    st->seed = seed;
}

// The checksum's core; with dst set it also copies the bytes it reads. Whole
// 32-byte blocks go through the four lanes; a part block may only come last.
static inline void checksum_update(wire_checksum_stream_t *st, void *dst, const void *data, size_t n) {
    const uint8_t *p = data;
    uint8_t *q = dst;
    uint64_t a[4], b[4];  // in locals, so the compiler keeps them in registers
    for (int l = 0; l < 4; l++) {
        a[l] = st->a[l];
        b[l] = st->b[l];
    }
    size_t words = n / 8, i = 4 * (n / 32);
    checksum_lanes_add(a, b, p, q, n / 32);
    if (n % 32) {
        for (; i < words; i++) {
            if (q) memcpy(q + 8 * i, p + 8 * i, 8);
            a[0] += load_le64(p + 8 * i);
            b[0] += a[0];
        }
        uint8_t tail[8] = {0};
        if (n % 8) {
            memcpy(tail, p + 8 * words, n % 8);
            if (q) memcpy(q + 8 * words, p + 8 * words, n % 8);
        }
        a[1] += load_le64(tail);
        b[1] += a[1];
        st->closed = 1;
    }
    for (int l = 0; l < 4; l++) {
        st->a[l] = a[l];
        st->b[l] = b[l];
    }
    st->n += n;
}

void wire_checksum_update(wire_checksum_stream_t *st, const void *data, size_t n) {
    checksum_update(st, NULL, data, n);
}

void wire_checksum_update_copy(wire_checksum_stream_t *st, void *dst, const void *data, size_t n) {
    checksum_update(st, dst, data, n);
}

// Per lane, m words w_1..w_m added from (a0, b0) leave a = a0 + S and
// b = b0 + m*a0 + T (S the words' sum, T the sum of their running sums), all
// mod 2^64. `next` began at (I, 0), so S = a' - I and T = b' - m*I.
void wire_checksum_join(wire_checksum_stream_t *st, const wire_checksum_stream_t *next) {
    uint64_t m[4];
    for (int l = 0; l < 4; l++) m[l] = next->n / 32;
    if (next->closed) {  // the last piece's loose words went to lane 0, its tail word to lane 1
        m[0] += (next->n / 8) % 4;
        m[1] += 1;
    }
    for (int l = 0; l < 4; l++) {
        uint64_t start = lane_start(next->seed, l);
        st->b[l] += m[l] * st->a[l] + next->b[l] - m[l] * start;
        st->a[l] += next->a[l] - start;
    }
    st->n += next->n;
    st->closed = next->closed;
}

uint32_t wire_checksum_end(wire_checksum_stream_t *st) {
    if (!st->closed) {
        // The empty tail word of a length that ended on a block boundary.
        st->a[1] += 0;
        st->b[1] += st->a[1];
    }
    uint64_t h = mix64((uint64_t)st->n ^ 0x9e3779b97f4a7c15ull);
    for (int l = 0; l < 4; l++) h = mix64(h ^ st->a[l]) + st->b[l];
    h = mix64(h);
    return (uint32_t)(h ^ (h >> 32));
}

uint32_t wire_checksum(const void *data, size_t n, uint32_t seed) {
    wire_checksum_stream_t st;
    wire_checksum_begin(&st, seed);
    checksum_update(&st, NULL, data, n);
    return wire_checksum_end(&st);
}

uint32_t wire_checksum_copy(void *dst, const void *src, size_t n, uint32_t seed) {
    wire_checksum_stream_t st;
    wire_checksum_begin(&st, seed);
    checksum_update(&st, dst, src, n);
    return wire_checksum_end(&st);
}

void wire_payload_sizes(const wire_header_t *h, size_t *frame0, size_t *frame1) {
    size_t c = h->count;
    *frame0 = *frame1 = 0;
    switch (h->payload_kind) {
        case PAYLOAD_KIND_DENSE:
            *frame0 = 4 * c;
            break;
        case PAYLOAD_KIND_SPARSE:
            *frame0 = 4 * c;
            *frame1 = 4 * c;
            break;
        case PAYLOAD_KIND_KEYS:
        case PAYLOAD_KIND_VALUES:
            *frame0 = 4 * c;
            break;
        case PAYLOAD_KIND_TEXT:
            *frame0 = c;
            break;
        case PAYLOAD_KIND_ENCODED:
            *frame0 = WIRE_ENCODED_MIN_BYTES;
            break;
        default:
            break;
    }
}

static size_t payload_frames(uint16_t kind) {
    switch (kind) {
        case PAYLOAD_KIND_NONE:
            return 0;
        case PAYLOAD_KIND_SPARSE:
            return 2;
        default:
            return 1;
    }
}

void wire_seal(wire_header_t *h, const void *frame0, size_t len0, const void *frame1, size_t len1) {
    uint32_t c = 0;
    if (frame0) c = wire_checksum(frame0, len0, c);
    if (frame1) c = wire_checksum(frame1, len1, c);
    h->checksum = c;
}

int wire_kind_allowed(uint16_t type, uint16_t kind) {
#define KIND(k) (1u << PAYLOAD_KIND_##k)
    static const unsigned allowed[MSG_TYPE_MAX_] = {
        [MSG_TYPE_HELLO] = KIND(NONE),
        [MSG_TYPE_WELCOME] = KIND(NONE),
        [MSG_TYPE_PUSH] = KIND(DENSE) | KIND(SPARSE) | KIND(ENCODED),
        [MSG_TYPE_PUSH_ACK] = KIND(NONE),
        [MSG_TYPE_PULL] = KIND(NONE) | KIND(KEYS),
        [MSG_TYPE_PARAMS] = KIND(DENSE) | KIND(VALUES),
        [MSG_TYPE_BYE] = KIND(NONE),
        [MSG_TYPE_BYE_ACK] = KIND(NONE),
        [MSG_TYPE_REJECT] = KIND(NONE),
        [MSG_TYPE_RING_CHUNK] = KIND(DENSE) | KIND(ENCODED),
        [MSG_TYPE_RDV_JOIN] = KIND(TEXT),
        [MSG_TYPE_RDV_TABLE] = KIND(TEXT),
        [MSG_TYPE_HEARTBEAT] = KIND(NONE),
        [MSG_TYPE_RING_GATHER] = KIND(ENCODED),
        [MSG_TYPE_REPLICA_JOIN] = KIND(TEXT),
        [MSG_TYPE_REPLICA_STATE] = KIND(NONE),
        [MSG_TYPE_REPLICA_EVICT] = KIND(NONE),
    };
#undef KIND
    return type < MSG_TYPE_MAX_ && kind < PAYLOAD_KIND_MAX_ && (allowed[type] >> kind & 1u);
}

wire_status_t wire_validate_header(const uint8_t *header, size_t header_len, uint64_t run_id, size_t n_frames,
                                   wire_header_t *out) {
    if (header_len != WIRE_HEADER_SIZE) return WIRE_STATUS_BAD_SIZE;
    wire_header_decode(header, out);
    if (out->magic != WIRE_MAGIC) return WIRE_STATUS_BAD_MAGIC;
    if (out->version != WIRE_VERSION) return WIRE_STATUS_BAD_VERSION;
    if (out->type == 0 || out->type >= MSG_TYPE_MAX_) return WIRE_STATUS_BAD_TYPE;
    if (out->run_id != run_id) return WIRE_STATUS_BAD_RUN;
    if (!wire_kind_allowed(out->type, out->payload_kind)) return WIRE_STATUS_BAD_KIND;
    if (out->payload_kind == PAYLOAD_KIND_NONE && out->count != 0) return WIRE_STATUS_BAD_SIZE;
    if (n_frames != payload_frames(out->payload_kind)) return WIRE_STATUS_BAD_SIZE;
    return WIRE_STATUS_OK;
}

int wire_by_reference(const wire_header_t *h) {
    return (h->flags & WIRE_FLAG_SHM) && (h->type == MSG_TYPE_PUSH || h->type == MSG_TYPE_PARAMS) &&
           payload_frames(h->payload_kind) > 0;
}

wire_status_t wire_validate_payload(const wire_header_t *h, const void *const *frames, const size_t *frame_lens,
                                    size_t n_frames, int check_sum) {
    size_t want[2];
    wire_payload_sizes(h, &want[0], &want[1]);
    if (h->payload_kind == PAYLOAD_KIND_ENCODED) {
        if (frame_lens[0] < want[0]) return WIRE_STATUS_BAD_SIZE;
    } else {
        for (size_t f = 0; f < n_frames; f++)
            if (frame_lens[f] != want[f]) return WIRE_STATUS_BAD_SIZE;
    }
    if (!check_sum) return WIRE_STATUS_OK;
    uint32_t c = 0;
    for (size_t f = 0; f < n_frames; f++) c = wire_checksum(frames[f], frame_lens[f], c);
    return c == h->checksum ? WIRE_STATUS_OK : WIRE_STATUS_BAD_CHECKSUM;
}

wire_status_t wire_validate(const uint8_t *header, size_t header_len, uint64_t run_id, const void *const *frames,
                            const size_t *frame_lens, size_t n_frames, wire_header_t *out) {
    wire_status_t st = wire_validate_header(header, header_len, run_id, n_frames, out);
    return st != WIRE_STATUS_OK ? st : wire_validate_payload(out, frames, frame_lens, n_frames, 1);
}

const char *wire_status_name(wire_status_t s) {
    static const char *const names[WIRE_STATUS_COUNT_] = {"ok",
                                                          "bad size",
                                                          "bad magic",
                                                          "bad version",
                                                          "bad type",
                                                          "foreign run id",
                                                          "bad range",
                                                          "bad checksum",
                                                          "bad payload kind",
                                                          "evicted",
                                                          "not finite",
                                                          "bad gradient encoding",
                                                          "worker id live",
                                                          "shared-memory payload not readable here"};
    return (unsigned)s < WIRE_STATUS_COUNT_ ? names[s] : "unknown";
}

const char *msg_type_name(uint16_t type) {
    static const char *const names[MSG_TYPE_MAX_] = {
        "?",         "hello",     "welcome",     "push",         "push-ack",      "pull",
        "params",    "bye",       "bye-ack",     "reject",       "ring-chunk",    "rdv-join",
        "rdv-table", "heartbeat", "ring-gather", "replica-join", "replica-state", "replica-evict"};
    return type > 0 && type < MSG_TYPE_MAX_ ? names[type] : "unknown";
}

uint64_t wire_fresh_id(const void *salt) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x =
        (uint64_t)getpid() << 40 ^ (uint64_t)ts.tv_sec << 20 ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)salt;
    uint64_t id = rng_splitmix64(&x);
    return id ? id : 1;
}
