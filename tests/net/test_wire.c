// The wire protocol (docs/protocol.md): the header's byte layout, the payload
// checksum against a byte-by-byte reference and fixed test vectors, one
// wire_validate case per refusal reason, and zmsg over real ROUTER/DEALER
// sockets on tcp://127.0.0.1:* — valid messages both ways, raw malformed
// multipart messages that must each be refused with the right status without
// desynchronising the socket, a receive timeout and a refused send.
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <zmq.h>

#include "kernels/foundation/rng.h"
#include "net/checksum_lanes.h"
#include "net/wire.h"
#include "net/zmsg.h"
#include "tests/support/test_support.h"

#define RUN 0x5eed0000c0ffee01ull
#define OTHER_RUN 0x5eed0000c0ffee02ull

// A libzmq call that returns < 0 on failure.
#define ZCHECK(call)                                                                                         \
    do {                                                                                                     \
        if ((call) < 0) {                                                                                    \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, zmq_strerror(zmq_errno())); \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

static void fill_random(uint8_t *p, size_t n, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed, 7);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rng_next(&r) >> 56);
}

static int headers_equal(const wire_header_t *a, const wire_header_t *b) {
    return a->magic == b->magic && a->version == b->version && a->type == b->type && a->run_id == b->run_id &&
           a->sender == b->sender && a->shard == b->shard && a->clock == b->clock &&
           a->param_version == b->param_version && a->offset == b->offset && a->count == b->count &&
           a->payload_kind == b->payload_kind && a->flags == b->flags && a->checksum == b->checksum && a->aux == b->aux;
}

// ---- header layout ---------------------------------------------------------------

static void put_le(uint8_t *buf, size_t off, size_t size, uint64_t v) {
    for (size_t i = 0; i < size; i++) buf[off + i] = (uint8_t)(v >> (8 * i));
}

// Every field holds distinct bytes so that a field written at the wrong offset,
// with the wrong width or byte order shows up.
static wire_header_t busy_header(void) {
    wire_header_t h;
    memset(&h, 0, sizeof h);
    h.magic = WIRE_MAGIC;
    h.version = WIRE_VERSION;
    h.type = MSG_TYPE_PARAMS;
    h.run_id = 0x0123456789abcdefull;
    h.sender = 0xa1b2c3d4u;
    h.shard = 0x0badcafeu;
    h.clock = 0x1122334455667788ull;
    h.param_version = 0x99aabbccddeeff00ull;
    h.offset = 0xfedcba9876543210ull;
    h.count = 0x13579bdfu;
    h.payload_kind = 0x0203u;
    h.flags = 0x8001u;
    h.checksum = 0xdeadbeefu;
    h.aux = 0x2468ace0u;
    return h;
}

static void test_header_layout(void) {
    wire_header_t h = busy_header();
    uint8_t got[WIRE_HEADER_SIZE];
    memset(got, 0xee, sizeof got);
    wire_header_encode(&h, got);

    // The magic reads "ASGD" on the wire.
    CHECK(got[0] == 'A' && got[1] == 'S' && got[2] == 'G' && got[3] == 'D');
    CHECK(got[4] == 2 && got[5] == 0);  // version 2, little-endian
    CHECK(got[6] == MSG_TYPE_PARAMS && got[7] == 0);  // type
    CHECK(got[8] == 0xef && got[15] == 0x01);  // run id: low byte first
    CHECK(got[48] == 0xdf && got[51] == 0x13);  // count
    CHECK(got[56] == 0xef && got[59] == 0xde);  // checksum

    // The whole layout, from the table in docs/protocol.md.
    uint8_t want[WIRE_HEADER_SIZE];
    memset(want, 0, sizeof want);
    put_le(want, 0, 4, h.magic);
    put_le(want, 4, 2, h.version);
    put_le(want, 6, 2, h.type);
    put_le(want, 8, 8, h.run_id);
    put_le(want, 16, 4, h.sender);
    put_le(want, 20, 4, h.shard);
    put_le(want, 24, 8, h.clock);
    put_le(want, 32, 8, h.param_version);
    put_le(want, 40, 8, h.offset);
    put_le(want, 48, 4, h.count);
    put_le(want, 52, 2, h.payload_kind);
    put_le(want, 54, 2, h.flags);
    put_le(want, 56, 4, h.checksum);
    put_le(want, 60, 4, h.aux);
    for (size_t i = 0; i < WIRE_HEADER_SIZE; i++) {
        if (got[i] != want[i]) fprintf(stderr, "header byte %zu: got 0x%02x, want 0x%02x\n", i, got[i], want[i]);
        CHECK(got[i] == want[i]);
    }

    // Round trip of every field.
    wire_header_t back;
    memset(&back, 0x55, sizeof back);
    wire_header_decode(got, &back);
    CHECK(headers_equal(&h, &back));

    // The 64 bytes hold the fields and nothing else: any bytes survive decode + encode.
    for (int t = 0; t < 1000; t++) {
        uint8_t in[WIRE_HEADER_SIZE], out[WIRE_HEADER_SIZE];
        fill_random(in, sizeof in, 1000 + (uint64_t)t);
        wire_header_decode(in, &back);
        wire_header_encode(&back, out);
        CHECK(memcmp(in, out, sizeof in) == 0);
    }

    // Single-field round trips with extreme values.
    wire_header_t e;
    memset(&e, 0xff, sizeof e);
    wire_header_encode(&e, got);
    for (size_t i = 0; i < WIRE_HEADER_SIZE; i++) CHECK(got[i] == 0xff);
    wire_header_decode(got, &back);
    CHECK(back.run_id == UINT64_MAX && back.count == UINT32_MAX && back.flags == UINT16_MAX && back.aux == UINT32_MAX);
}

// ---- checksum ----------------------------------------------------------------------

static uint64_t ref_mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The checksum exactly as docs/protocol.md describes it, one word at a time.
static uint32_t ref_checksum(const uint8_t *p, size_t n, uint32_t seed) {
    uint64_t a[4], b[4];
    for (int l = 0; l < 4; l++) {
        a[l] = ref_mix((uint64_t)seed + (uint64_t)l + 1);
        b[l] = 0;
    }
    size_t words = n / 8, blocked = words / 4 * 4;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = 0;
        for (size_t k = 0; k < 8; k++) w |= (uint64_t)p[8 * i + k] << (8 * k);
        size_t l = i < blocked ? i % 4 : 0;  // whole blocks of four words go to lanes 0..3, the rest to lane 0
        a[l] += w;
        b[l] += a[l];
    }
    uint64_t tail = 0;  // the last n % 8 bytes, zero-padded; always added, even when empty
    for (size_t k = 0; k < n % 8; k++) tail |= (uint64_t)p[8 * words + k] << (8 * k);
    a[1] += tail;
    b[1] += a[1];
    uint64_t h = ref_mix((uint64_t)n ^ 0x9e3779b97f4a7c15ull);
    for (int l = 0; l < 4; l++) h = ref_mix(h ^ a[l]) + b[l];
    h = ref_mix(h);
    return (uint32_t)(h ^ (h >> 32));
}

static void test_checksum_reference(void) {
    static uint8_t buf[4096 + 64];
    fill_random(buf, sizeof buf, 1);
    const uint32_t seeds[] = {0, 1, 0x80000000u, 0xffffffffu, 0x12345678u};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        for (size_t n = 0; n <= 300; n++) CHECK(wire_checksum(buf, n, seeds[s]) == ref_checksum(buf, n, seeds[s]));
        const size_t big[] = {1023, 1024, 1025, 4096, 4096 + 63};
        for (size_t k = 0; k < sizeof big / sizeof big[0]; k++)
            CHECK(wire_checksum(buf, big[k], seeds[s]) == ref_checksum(buf, big[k], seeds[s]));
    }

    // Fixed vectors: a change here changes the protocol (docs/protocol.md lists them).
    uint8_t ramp[256];
    for (size_t i = 0; i < sizeof ramp; i++) ramp[i] = (uint8_t)i;
    const uint8_t asgd[] = {'A', 'S', 'G', 'D'};
    CHECK(wire_checksum(ramp, 0, 0) == 0xc7d17c79u);
    CHECK(wire_checksum(ramp, 0, 1) == 0xe01395e1u);
    CHECK(wire_checksum(asgd, 4, 0) == 0x7fae9e52u);
    CHECK(wire_checksum(ramp, 35, 0) == 0xf2f7daf6u);
    CHECK(wire_checksum(ramp, 256, 0) == 0x43e4b38au);
    CHECK(wire_checksum(ramp, 256, 0x7fae9e52u) == 0xa2885962u);
}

static void test_checksum_properties(void) {
    enum { N = 4096 };
    static uint8_t buf[N + 16], copy[N + 16];
    fill_random(buf, N, 2);
    uint32_t base = wire_checksum(buf, N, 0);

    // Deterministic, and independent of where the bytes lie in memory.
    CHECK(wire_checksum(buf, N, 0) == base);
    for (size_t shift = 1; shift < 8; shift++) {
        memcpy(copy + shift, buf, N);
        CHECK(wire_checksum(copy + shift, N, 0) == base);
    }

    // Every single-bit flip of a 4 KiB random buffer changes it.
    for (size_t bit = 0; bit < 8 * (size_t)N; bit++) {
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        uint32_t c = wire_checksum(buf, N, 0);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        if (c == base) fprintf(stderr, "flipping bit %zu of %d bytes leaves the checksum unchanged\n", bit, N);
        CHECK(c != base);
    }
    CHECK(wire_checksum(buf, N, 0) == base);

    // ... and of every short buffer, all bits, at every length (the tail path).
    for (size_t n = 1; n <= 40; n++) {
        uint32_t c0 = wire_checksum(buf, n, 0);
        for (size_t bit = 0; bit < 8 * n; bit++) {
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            CHECK(wire_checksum(buf, n, 0) != c0);
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
    }

    // Random single-bit flips of a 1 MiB buffer.
    size_t big_n = (size_t)1 << 20;
    uint8_t *big = malloc(big_n);
    CHECK(big);
    fill_random(big, big_n, 3);
    uint32_t big_base = wire_checksum(big, big_n, 0);
    rng_t r;
    rng_seed(&r, 4, 0);
    for (int t = 0; t < 64; t++) {
        size_t bit = (size_t)rng_below(&r, 8 * (uint64_t)big_n);
        if (t == 0) bit = 8 * big_n - 1;  // the very last bit
        big[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        CHECK(wire_checksum(big, big_n, 0) != big_base);
        big[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    CHECK(wire_checksum(big, big_n, 0) == big_base);
    free(big);

    // Truncation by 1..8 bytes changes it, also when the lost bytes are zeros
    // (the tail is zero-padded, so only the length tells those apart).
    static uint8_t zeros[N];
    const size_t lens[] = {N, N - 1, N - 5, 1000, 40, 33, 32, 17, 9, 8};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t n = lens[k];
        for (size_t t = 1; t <= 8 && t <= n; t++) {
            CHECK(wire_checksum(buf, n - t, 0) != wire_checksum(buf, n, 0));
            CHECK(wire_checksum(zeros, n - t, 0) != wire_checksum(zeros, n, 0));
        }
    }

    // Lengths 0..40 read exactly n bytes (each buffer is its own allocation, so
    // an overread trips AddressSanitizer) and zero buffers of each length differ.
    uint32_t zero_sums[41];
    for (size_t n = 0; n <= 40; n++) {
        uint8_t *exact = malloc(n ? n : 1);
        CHECK(exact);
        memcpy(exact, buf, n);
        CHECK(wire_checksum(exact, n, 0) == wire_checksum(buf, n, 0));
        CHECK(wire_checksum(exact, n, 0) == ref_checksum(exact, n, 0));
        memset(exact, 0, n);
        zero_sums[n] = wire_checksum(exact, n, 0);
        for (size_t m = 0; m < n; m++) CHECK(zero_sums[m] != zero_sums[n]);
        free(exact);
    }

    // Seeds: every seed gives a different sum, and chaining is how a message's
    // frames are covered (wire_seal agrees).
    uint32_t by_seed[64];
    for (uint32_t s = 0; s < 64; s++) {
        by_seed[s] = wire_checksum(buf, 100, s);
        for (uint32_t q = 0; q < s; q++) CHECK(by_seed[q] != by_seed[s]);
    }
    CHECK(wire_checksum(buf, 0, 0) != wire_checksum(buf, 0, 1));
    CHECK(wire_checksum(buf, 100, 0xffffffffu) != wire_checksum(buf, 100, 0x7fffffffu));

    const uint8_t *f0 = buf, *f1 = buf + 200;
    uint32_t chained = wire_checksum(f1, 120, wire_checksum(f0, 80, 0));
    wire_header_t h;
    memset(&h, 0, sizeof h);
    wire_seal(&h, f0, 80, f1, 120);
    CHECK(h.checksum == chained);
    wire_seal(&h, f0, 80, NULL, 0);
    CHECK(h.checksum == wire_checksum(f0, 80, 0));
    wire_seal(&h, NULL, 0, NULL, 0);
    CHECK(h.checksum == 0);  // a message without payload frames carries checksum 0
    CHECK(wire_checksum(f0, 120, wire_checksum(f1, 80, 0)) != chained);  // frame order matters
    // Moving the boundary between two frames changes the message's sum.
    uint32_t split80 = wire_checksum(buf + 80, 120, wire_checksum(buf, 80, 0));
    CHECK(wire_checksum(buf + 84, 116, wire_checksum(buf, 84, 0)) != split80);
}

// ---- wire_validate -----------------------------------------------------------------

// Encodes h (after sealing it over the frames unless keep_sum) and validates it.
static wire_status_t validate(wire_header_t h, int keep_sum, const void *const *frames, const size_t *lens, size_t n,
                              wire_header_t *out) {
    if (!keep_sum) {
        uint32_t c = 0;
        for (size_t i = 0; i < n; i++) c = wire_checksum(frames[i], lens[i], c);
        h.checksum = c;
    }
    uint8_t bytes[WIRE_HEADER_SIZE];
    wire_header_encode(&h, bytes);
    wire_header_t local;
    return wire_validate(bytes, sizeof bytes, RUN, frames, lens, n, out ? out : &local);
}

static void expect(wire_status_t got, wire_status_t want, int line) {
    if (got != want) {
        fprintf(stderr, "%s:%d: wire_validate gave '%s', want '%s'\n", __FILE__, line, wire_status_name(got),
                wire_status_name(want));
        exit(1);
    }
}
#define EXPECT(got, want) expect((got), (want), __LINE__)

static void test_validate(void) {
    enum { C = 10 };
    float values[C];
    uint32_t idx[C];
    char text[] = "rank=0 role=server endpoint=tcp://127.0.0.1:5555";
    for (int i = 0; i < C; i++) values[i] = 0.25f * (float)i - 1.0f, idx[i] = (uint32_t)(7 * i + 3);
    wire_header_t out;

    // OK for every payload kind.
    wire_header_t h = zmsg_header(MSG_TYPE_PUSH, RUN);
    h.sender = 3, h.shard = 1, h.clock = 9, h.param_version = 40, h.offset = 500, h.count = C;
    h.payload_kind = PAYLOAD_KIND_DENSE, h.flags = WIRE_FLAG_SUM, h.aux = 32;
    const void *dense[1] = {values};
    size_t dense_len[1] = {sizeof values};
    EXPECT(validate(h, 0, dense, dense_len, 1, &out), WIRE_STATUS_OK);
    h.checksum = wire_checksum(values, sizeof values, 0);
    CHECK(headers_equal(&h, &out));

    wire_header_t sp = h;
    sp.payload_kind = PAYLOAD_KIND_SPARSE;
    const void *sparse[2] = {idx, values};
    size_t sparse_len[2] = {sizeof idx, sizeof values};
    EXPECT(validate(sp, 0, sparse, sparse_len, 2, &out), WIRE_STATUS_OK);
    CHECK(out.checksum == wire_checksum(values, sizeof values, wire_checksum(idx, sizeof idx, 0)));

    wire_header_t keys = zmsg_header(MSG_TYPE_PULL, RUN);
    keys.count = C, keys.payload_kind = PAYLOAD_KIND_KEYS;
    const void *kf[1] = {idx};
    size_t kl[1] = {sizeof idx};
    EXPECT(validate(keys, 0, kf, kl, 1, NULL), WIRE_STATUS_OK);

    // ENCODED: one frame of at least the 8-byte descriptor; the header's count
    // is the values it decodes to, so the frame's exact size is not checked here.
    wire_header_t en = h;
    en.payload_kind = PAYLOAD_KIND_ENCODED, en.flags = 0;
    uint8_t enc[WIRE_ENCODED_MIN_BYTES + 3] = {1, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9};
    const void *ef[1] = {enc};
    size_t el[1] = {sizeof enc};
    EXPECT(validate(en, 0, ef, el, 1, NULL), WIRE_STATUS_OK);
    el[0] = WIRE_ENCODED_MIN_BYTES;
    EXPECT(validate(en, 0, ef, el, 1, NULL), WIRE_STATUS_OK);
    el[0] = WIRE_ENCODED_MIN_BYTES - 1;
    EXPECT(validate(en, 0, ef, el, 1, NULL), WIRE_STATUS_BAD_SIZE);
    el[0] = sizeof enc;
    EXPECT(validate(en, 0, ef, el, 0, NULL), WIRE_STATUS_BAD_SIZE);

    wire_header_t tx = zmsg_header(MSG_TYPE_RDV_JOIN, RUN);
    tx.count = (uint32_t)strlen(text), tx.payload_kind = PAYLOAD_KIND_TEXT;
    const void *tf[1] = {text};
    size_t tl[1] = {strlen(text)};
    EXPECT(validate(tx, 0, tf, tl, 1, NULL), WIRE_STATUS_OK);

    wire_header_t none = zmsg_header(MSG_TYPE_BYE, RUN);
    none.sender = 3;
    EXPECT(validate(none, 0, NULL, NULL, 0, &out), WIRE_STATUS_OK);
    CHECK(out.checksum == 0 && out.sender == 3);
    // Each type carries only the payload kinds of the message table in
    // docs/protocol.md; any other kind, well-formed or not, is BAD_KIND.
    static const char *const kinds_of[MSG_TYPE_MAX_] = {
        [MSG_TYPE_HELLO] = "N",         [MSG_TYPE_WELCOME] = "N",      [MSG_TYPE_PUSH] = "DSE",
        [MSG_TYPE_PUSH_ACK] = "N",      [MSG_TYPE_PULL] = "NK",        [MSG_TYPE_PARAMS] = "DV",
        [MSG_TYPE_BYE] = "N",           [MSG_TYPE_BYE_ACK] = "N",      [MSG_TYPE_REJECT] = "N",
        [MSG_TYPE_RING_CHUNK] = "DE",   [MSG_TYPE_RDV_JOIN] = "T",     [MSG_TYPE_RDV_TABLE] = "T",
        [MSG_TYPE_HEARTBEAT] = "N",     [MSG_TYPE_RING_GATHER] = "E",  [MSG_TYPE_REPLICA_JOIN] = "T",
        [MSG_TYPE_REPLICA_STATE] = "N", [MSG_TYPE_REPLICA_EVICT] = "N"};
    static const char kind_letter[PAYLOAD_KIND_MAX_] = {'N', 'D', 'S', 'K', 'T', 'E', 'V'};
    for (uint16_t t = 1; t < MSG_TYPE_MAX_; t++) {
        CHECK(strcmp(msg_type_name(t), "unknown") != 0);
        for (uint16_t k = 0; k < PAYLOAD_KIND_MAX_; k++) {
            wire_header_t any = zmsg_header(t, RUN);
            any.payload_kind = k;
            any.count = k == PAYLOAD_KIND_NONE ? 0 : k == PAYLOAD_KIND_TEXT ? (uint32_t)strlen(text) : C;
            const void *f[2] = {k == PAYLOAD_KIND_TEXT                                ? (const void *)text
                                : k == PAYLOAD_KIND_DENSE || k == PAYLOAD_KIND_VALUES ? (const void *)values
                                                                                      : (const void *)idx,
                                values};
            size_t fl[2] = {k == PAYLOAD_KIND_TEXT ? strlen(text) : sizeof idx, sizeof values};
            size_t nf = k == PAYLOAD_KIND_NONE ? 0 : k == PAYLOAD_KIND_SPARSE ? 2 : 1;
            int allowed = strchr(kinds_of[t], kind_letter[k]) != NULL;
            CHECK(wire_kind_allowed(t, k) == allowed);
            EXPECT(validate(any, 0, f, fl, nf, NULL), allowed ? WIRE_STATUS_OK : WIRE_STATUS_BAD_KIND);
        }
        CHECK(!wire_kind_allowed(t, PAYLOAD_KIND_MAX_) && !wire_kind_allowed(t, 0xffff));
    }
    CHECK(!wire_kind_allowed(0, PAYLOAD_KIND_NONE) && !wire_kind_allowed(MSG_TYPE_MAX_, PAYLOAD_KIND_NONE));
    CHECK(strcmp(msg_type_name(0), "unknown") == 0 && strcmp(msg_type_name(MSG_TYPE_MAX_), "unknown") == 0);

    // Empty payloads still travel as one (or two) empty frames.
    wire_header_t empty = h;
    empty.count = 0;
    size_t zero[2] = {0, 0};
    EXPECT(validate(empty, 0, dense, zero, 1, NULL), WIRE_STATUS_OK);
    empty.payload_kind = PAYLOAD_KIND_SPARSE;
    EXPECT(validate(empty, 0, sparse, zero, 2, NULL), WIRE_STATUS_OK);
    EXPECT(validate(empty, 0, sparse, zero, 1, NULL), WIRE_STATUS_BAD_SIZE);

    // Header frame of the wrong size.
    uint8_t bytes[WIRE_HEADER_SIZE + 1];
    wire_header_t nh = none;
    wire_header_encode(&nh, bytes);
    bytes[WIRE_HEADER_SIZE] = 0;
    EXPECT(wire_validate(bytes, WIRE_HEADER_SIZE, RUN, NULL, NULL, 0, &out), WIRE_STATUS_OK);
    EXPECT(wire_validate(bytes, WIRE_HEADER_SIZE - 1, RUN, NULL, NULL, 0, &out), WIRE_STATUS_BAD_SIZE);
    EXPECT(wire_validate(bytes, WIRE_HEADER_SIZE + 1, RUN, NULL, NULL, 0, &out), WIRE_STATUS_BAD_SIZE);
    EXPECT(wire_validate(bytes, 0, RUN, NULL, NULL, 0, &out), WIRE_STATUS_BAD_SIZE);

    // Magic, version, type.
    nh = none, nh.magic = 0x44475342u;
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_MAGIC);
    nh = none, nh.magic = 0x41534744u;  // "ASGD" read big-endian
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_MAGIC);
    nh = none, nh.version = 0;
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_VERSION);
    nh = none, nh.version = WIRE_VERSION + 1;
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_VERSION);
    nh = none, nh.version = 0x0200;  // version 2 written big-endian
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_VERSION);
    nh = none, nh.version = 1;  // before keyed pulls were answered with values alone
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_VERSION);
    nh = none, nh.type = 0;
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_TYPE);
    nh = none, nh.type = MSG_TYPE_MAX_;
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_TYPE);
    nh = none, nh.type = 0xffff;
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_TYPE);

    // Run id.
    nh = none, nh.run_id = OTHER_RUN;
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_RUN);
    nh = none, nh.run_id = 0;
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_RUN);

    // Payload kind.
    wire_header_t bk = h;
    bk.payload_kind = PAYLOAD_KIND_MAX_;
    EXPECT(validate(bk, 0, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_KIND);
    bk.payload_kind = 0xffff;
    EXPECT(validate(bk, 0, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_KIND);

    // NONE with a count.
    nh = none, nh.count = 1;
    EXPECT(validate(nh, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_SIZE);

    // Wrong number of payload frames for the kind.
    const void *three[3] = {idx, values, values};
    size_t three_len[3] = {sizeof idx, sizeof values, sizeof values};
    EXPECT(validate(h, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_SIZE);  // DENSE, no frame
    EXPECT(validate(h, 0, sparse, sparse_len, 2, NULL), WIRE_STATUS_BAD_SIZE);  // DENSE, two frames
    EXPECT(validate(sp, 0, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_SIZE);  // SPARSE, one frame
    EXPECT(validate(sp, 0, three, three_len, 3, NULL), WIRE_STATUS_BAD_SIZE);  // SPARSE, three frames
    EXPECT(validate(none, 0, dense, zero, 1, NULL), WIRE_STATUS_BAD_SIZE);  // NONE, an empty frame
    EXPECT(validate(keys, 0, sparse, sparse_len, 2, NULL), WIRE_STATUS_BAD_SIZE);
    EXPECT(validate(tx, 0, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_SIZE);

    // Frame sizes that do not match count.
    size_t short_len[1] = {sizeof values - 1}, long_len[1] = {sizeof values + 4};
    EXPECT(validate(h, 0, dense, short_len, 1, NULL), WIRE_STATUS_BAD_SIZE);
    float longer[C + 1] = {0};
    const void *lf[1] = {longer};
    EXPECT(validate(h, 0, lf, long_len, 1, NULL), WIRE_STATUS_BAD_SIZE);
    wire_header_t more = h;
    more.count = C + 1;
    EXPECT(validate(more, 0, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_SIZE);
    size_t sp_bad1[2] = {sizeof idx, sizeof values - 4}, sp_bad0[2] = {sizeof idx - 4, sizeof values};
    EXPECT(validate(sp, 0, sparse, sp_bad1, 2, NULL), WIRE_STATUS_BAD_SIZE);
    EXPECT(validate(sp, 0, sparse, sp_bad0, 2, NULL), WIRE_STATUS_BAD_SIZE);
    EXPECT(validate(keys, 0, kf, short_len, 1, NULL), WIRE_STATUS_BAD_SIZE);
    size_t tl_bad[1] = {strlen(text) + 1};  // the terminating NUL is not part of a TEXT payload
    EXPECT(validate(tx, 0, tf, tl_bad, 1, NULL), WIRE_STATUS_BAD_SIZE);
    wire_header_t huge = h;  // 4 * count does not wrap around
    huge.count = 0x40000001u;
    size_t four[1] = {4};
    EXPECT(validate(huge, 0, dense, four, 1, NULL), WIRE_STATUS_BAD_SIZE);

    // Checksum: a flipped payload bit, a flipped checksum bit, swapped frames, a stale sum.
    float flipped[C];
    memcpy(flipped, values, sizeof values);
    ((uint8_t *)flipped)[17] ^= 0x04;
    const void *ff[1] = {flipped};
    wire_header_t sealed = h;
    sealed.checksum = wire_checksum(values, sizeof values, 0);
    EXPECT(validate(sealed, 1, dense, dense_len, 1, NULL), WIRE_STATUS_OK);
    EXPECT(validate(sealed, 1, ff, dense_len, 1, NULL), WIRE_STATUS_BAD_CHECKSUM);
    sealed.checksum ^= 0x80000000u;
    EXPECT(validate(sealed, 1, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_CHECKSUM);
    wire_header_t sps = sp;
    sps.checksum = wire_checksum(values, sizeof values, wire_checksum(idx, sizeof idx, 0));
    const void *swapped[2] = {values, idx};
    EXPECT(validate(sps, 1, swapped, sparse_len, 2, NULL), WIRE_STATUS_BAD_CHECKSUM);
    nh = none, nh.checksum = 1;  // NONE must carry 0
    EXPECT(validate(nh, 1, NULL, NULL, 0, NULL), WIRE_STATUS_BAD_CHECKSUM);

    // The checks run in the documented order: the first failing one is reported.
    nh = none, nh.magic = 0, nh.version = 9, nh.type = 0, nh.run_id = OTHER_RUN, nh.payload_kind = 99, nh.checksum = 5;
    EXPECT(validate(nh, 1, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_MAGIC);
    nh.magic = WIRE_MAGIC;
    EXPECT(validate(nh, 1, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_VERSION);
    nh.version = WIRE_VERSION;
    EXPECT(validate(nh, 1, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_TYPE);
    nh.type = MSG_TYPE_PUSH;
    EXPECT(validate(nh, 1, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_RUN);
    nh.run_id = RUN;
    EXPECT(validate(nh, 1, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_KIND);
    nh.payload_kind = PAYLOAD_KIND_DENSE, nh.count = C + 1;
    EXPECT(validate(nh, 1, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_SIZE);
    nh.count = C;
    EXPECT(validate(nh, 1, dense, dense_len, 1, NULL), WIRE_STATUS_BAD_CHECKSUM);

    // Every status has its own name.
    for (int s = 0; s < WIRE_STATUS_COUNT_; s++) {
        CHECK(strcmp(wire_status_name((wire_status_t)s), "unknown") != 0);
        for (int q = 0; q < s; q++)
            CHECK(strcmp(wire_status_name((wire_status_t)s), wire_status_name((wire_status_t)q)) != 0);
    }
    CHECK(strcmp(wire_status_name(WIRE_STATUS_COUNT_), "unknown") == 0);

    // Payload sizes per kind.
    size_t s0, s1;
    wire_header_t ph = h;
    ph.count = 5;
    const size_t want[PAYLOAD_KIND_MAX_][2] = {{0, 0}, {20, 0}, {20, 20}, {20, 0}, {5, 0}, {WIRE_ENCODED_MIN_BYTES, 0},
                                               {20, 0}};
    for (uint16_t k = 0; k < PAYLOAD_KIND_MAX_; k++) {
        ph.payload_kind = k;
        wire_payload_sizes(&ph, &s0, &s1);
        CHECK(s0 == want[k][0] && s1 == want[k][1]);
    }
}

// ---- zmsg over sockets -------------------------------------------------------------

typedef struct net {
    void *ctx, *router, *dealer, *dealer2;
    char endpoint[256];
} net_t;

static void set_int(void *sock, int opt, int v) { ZCHECK(zmq_setsockopt(sock, opt, &v, sizeof v)); }

static void *connect_dealer(net_t *n, const char *id) {
    char err[256];
    void *d = zmq_socket(n->ctx, ZMQ_DEALER);
    CHECK(d);
    CHECK_OK(zmsg_socket_defaults(d, 0, err, sizeof err), err);
    ZCHECK(zmq_setsockopt(d, ZMQ_ROUTING_ID, id, strlen(id)));
    set_int(d, ZMQ_RCVTIMEO, 10000);  // a lost message fails the test instead of hanging it
    ZCHECK(zmq_connect(d, n->endpoint));
    return d;
}

static void net_open(net_t *n) {
    char err[256];
    n->ctx = zmq_ctx_new();
    CHECK(n->ctx);
    n->router = zmq_socket(n->ctx, ZMQ_ROUTER);
    CHECK(n->router);
    CHECK_OK(zmsg_socket_defaults(n->router, 1000, err, sizeof err), err);
    set_int(n->router, ZMQ_RCVTIMEO, 10000);
    ZCHECK(zmq_bind(n->router, "tcp://127.0.0.1:*"));
    size_t len = sizeof n->endpoint;
    ZCHECK(zmq_getsockopt(n->router, ZMQ_LAST_ENDPOINT, n->endpoint, &len));
    CHECK(strncmp(n->endpoint, "tcp://127.0.0.1:", 16) == 0 && atoi(n->endpoint + 16) > 0);
    n->dealer = connect_dealer(n, "worker-7");
    n->dealer2 = connect_dealer(n, "worker-9");
}

static void net_close(net_t *n) {
    ZCHECK(zmq_close(n->dealer2));
    ZCHECK(zmq_close(n->dealer));
    ZCHECK(zmq_close(n->router));
    ZCHECK(zmq_ctx_term(n->ctx));
}

static int identity_is(zmsg_t *m, const char *id) {
    return m->has_identity && zmq_msg_size(&m->identity) == strlen(id) &&
           memcmp(zmq_msg_data(&m->identity), id, strlen(id)) == 0;
}

// A frame holding a copy of n bytes.
static void frame_from(zmq_msg_t *f, const void *bytes, size_t n) {
    char err[256];
    CHECK_OK(zmsg_frame_alloc(f, n, err, sizeof err), err);
    if (n) memcpy(zmq_msg_data(f), bytes, n);
}

static void check_frame(zmsg_t *m, size_t i, const void *bytes, size_t n) {
    CHECK(i < m->n_frames);
    CHECK(zmq_msg_size(&m->frames[i]) == n);
    CHECK(zmsg_payload(m, i) != NULL);
    CHECK(n == 0 || memcmp(zmsg_payload(m, i), bytes, n) == 0);
}

// A small valid message from `dealer` that the router must receive intact next.
static void roundtrip_probe(net_t *n, void *dealer, const char *id, uint64_t clock) {
    char err[256];
    const float probe[3] = {1.5f, -2.25f, (float)clock};
    zmq_msg_t f;
    frame_from(&f, probe, sizeof probe);
    wire_header_t h = zmsg_header(MSG_TYPE_PUSH, RUN);
    h.clock = clock, h.count = 3, h.payload_kind = PAYLOAD_KIND_DENSE, h.offset = 11;
    CHECK_OK(zmsg_send(dealer, NULL, &h, &f, 1, 0, err, sizeof err), err);
    zmsg_t m;
    CHECK(zmsg_recv(n->router, 1, RUN, &m, err, sizeof err) == 1);
    CHECK(identity_is(&m, id));
    CHECK(m.h.type == MSG_TYPE_PUSH && m.h.clock == clock && m.h.offset == 11 && m.n_frames == 1);
    check_frame(&m, 0, probe, sizeof probe);
    zmsg_close(&m);
}

static void test_zmsg_valid(net_t *n) {
    char err[256];
    zmsg_t m;

    // DEALER -> ROUTER: a dense push of 1e6 floats.
    const uint32_t big = 1000000;
    float *w = malloc(big * sizeof *w);
    CHECK(w);
    for (uint32_t i = 0; i < big; i++) w[i] = (float)i * 0.001f - 3.0f;
    zmq_msg_t f[2];
    frame_from(&f[0], w, big * sizeof *w);
    wire_header_t h = zmsg_header(MSG_TYPE_PUSH, RUN);
    h.sender = 7, h.shard = 2, h.clock = 41, h.param_version = 1234567, h.offset = 2000000, h.count = big;
    h.payload_kind = PAYLOAD_KIND_DENSE, h.flags = WIRE_FLAG_SUM, h.aux = 64;
    CHECK_OK(zmsg_send(n->dealer, NULL, &h, f, 1, 0, err, sizeof err), err);
    CHECK(h.checksum == wire_checksum(w, big * sizeof *w, 0));  // zmsg_send seals the caller's header
    CHECK(zmsg_recv(n->router, 1, RUN, &m, err, sizeof err) == 1);
    CHECK(m.status == WIRE_STATUS_OK);
    CHECK(identity_is(&m, "worker-7"));
    CHECK(headers_equal(&m.h, &h));
    CHECK(m.n_frames == 1 && zmsg_payload(&m, 1) == NULL);
    check_frame(&m, 0, w, big * sizeof *w);

    // ROUTER -> that DEALER, addressed by the identity just received: the
    // values answering a keyed pull, naming it by its tag.
    const float val[5] = {0.5f, -1.0f, 3.0e-8f, 65504.0f, -0.0f};
    frame_from(&f[0], val, sizeof val);
    wire_header_t r = zmsg_header(MSG_TYPE_PARAMS, RUN);
    r.sender = 2, r.shard = 2, r.clock = 40, r.param_version = 1234568, r.count = 5, r.offset = 77;
    r.payload_kind = PAYLOAD_KIND_VALUES;
    CHECK_OK(zmsg_send(n->router, &m.identity, &r, f, 1, 0, err, sizeof err), err);
    CHECK(zmq_msg_size(&m.identity) == strlen("worker-7"));  // the identity is copied, not consumed
    zmsg_close(&m);
    CHECK(zmsg_recv(n->dealer, 0, RUN, &m, err, sizeof err) == 1);
    CHECK(!m.has_identity);
    CHECK(headers_equal(&m.h, &r));
    CHECK(m.n_frames == 1 && m.h.offset == 77);
    check_frame(&m, 0, val, sizeof val);
    zmsg_close(&m);

    // NONE both ways, with dontwait.
    wire_header_t bye = zmsg_header(MSG_TYPE_BYE, RUN);
    bye.sender = 7, bye.clock = 42;
    CHECK_OK(zmsg_send(n->dealer, NULL, &bye, NULL, 0, 1, err, sizeof err), err);
    CHECK(zmsg_recv(n->router, 1, RUN, &m, err, sizeof err) == 1);
    CHECK(identity_is(&m, "worker-7") && m.h.type == MSG_TYPE_BYE && m.h.clock == 42 && m.n_frames == 0);
    CHECK(m.h.checksum == 0 && zmsg_payload(&m, 0) == NULL);
    wire_header_t ack = zmsg_header(MSG_TYPE_BYE_ACK, RUN);
    ack.shard = 2;
    CHECK_OK(zmsg_send(n->router, &m.identity, &ack, NULL, 0, 1, err, sizeof err), err);
    zmsg_close(&m);
    CHECK(zmsg_recv(n->dealer, 0, RUN, &m, err, sizeof err) == 1);
    CHECK(m.h.type == MSG_TYPE_BYE_ACK && m.h.shard == 2 && m.n_frames == 0);
    zmsg_close(&m);

    // Two workers: each reply reaches the worker it is addressed to.
    for (int k = 0; k < 2; k++) {
        void *d = k ? n->dealer2 : n->dealer;
        wire_header_t hello = zmsg_header(MSG_TYPE_HELLO, RUN);
        hello.sender = k ? 9 : 7;
        CHECK_OK(zmsg_send(d, NULL, &hello, NULL, 0, 0, err, sizeof err), err);
    }
    zmsg_t got[2];
    for (int k = 0; k < 2; k++) {
        CHECK(zmsg_recv(n->router, 1, RUN, &got[k], err, sizeof err) == 1);
        CHECK(got[k].h.type == MSG_TYPE_HELLO);
        CHECK(identity_is(&got[k], got[k].h.sender == 9 ? "worker-9" : "worker-7"));
    }
    CHECK(got[0].h.sender != got[1].h.sender);
    for (int k = 1; k >= 0; k--) {
        wire_header_t welcome = zmsg_header(MSG_TYPE_WELCOME, RUN);
        welcome.offset = 1000u * got[k].h.sender;
        CHECK_OK(zmsg_send(n->router, &got[k].identity, &welcome, NULL, 0, 0, err, sizeof err), err);
        zmsg_close(&got[k]);
    }
    CHECK(zmsg_recv(n->dealer, 0, RUN, &m, err, sizeof err) == 1);
    CHECK(m.h.type == MSG_TYPE_WELCOME && m.h.offset == 7000);
    zmsg_close(&m);
    CHECK(zmsg_recv(n->dealer2, 0, RUN, &m, err, sizeof err) == 1);
    CHECK(m.h.type == MSG_TYPE_WELCOME && m.h.offset == 9000);
    zmsg_close(&m);
    free(w);
}

// Sends n raw frames as one message.
static void send_raw(void *sock, const void *const *parts, const size_t *lens, size_t n) {
    for (size_t i = 0; i < n; i++) ZCHECK(zmq_send(sock, parts[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0));
}

static void expect_refused(net_t *n, wire_status_t want, int line) {
    char err[256];
    zmsg_t m;
    int rc = zmsg_recv(n->router, 1, RUN, &m, err, sizeof err);
    if (rc != 0 || m.status != want) {
        fprintf(stderr, "%s:%d: zmsg_recv gave %d '%s', want 0 '%s'%s%s\n", __FILE__, line, rc,
                rc >= 0 ? wire_status_name(m.status) : "-", wire_status_name(want), rc < 0 ? ": " : "",
                rc < 0 ? err : "");
        exit(1);
    }
    CHECK(identity_is(&m, "worker-7"));  // the sender is still known, e.g. for a per-peer drop count
    zmsg_close(&m);
}
#define EXPECT_REFUSED(n, want) expect_refused((n), (want), __LINE__)

static void test_zmsg_malformed(net_t *n) {
    char err[256];
    float vals[4] = {1, 2, 3, 4};
    uint32_t keys[4] = {10, 11, 12, 13};
    uint8_t head[WIRE_HEADER_SIZE + 8];
    wire_header_t h = zmsg_header(MSG_TYPE_PUSH, RUN);
    h.count = 4, h.payload_kind = PAYLOAD_KIND_DENSE;
    h.checksum = wire_checksum(vals, sizeof vals, 0);
    wire_header_encode(&h, head);
    uint64_t probe = 100;

    // A 10-byte header, and an empty one.
    {
        const void *p[1] = {head};
        size_t l[1] = {10};
        send_raw(n->dealer, p, l, 1);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_SIZE);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
        l[0] = 0;
        send_raw(n->dealer, p, l, 1);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_SIZE);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
    }
    // A 10-byte header followed by payload frames: all of them are drained.
    {
        const void *p[3] = {head, vals, vals};
        size_t l[3] = {10, sizeof vals, sizeof vals};
        send_raw(n->dealer, p, l, 3);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_SIZE);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
    }
    // 64 bytes of garbage, then a payload frame.
    {
        uint8_t junk[WIRE_HEADER_SIZE];
        fill_random(junk, sizeof junk, 99);
        junk[0] = 'X';
        const void *p[2] = {junk, vals};
        size_t l[2] = {sizeof junk, sizeof vals};
        send_raw(n->dealer, p, l, 2);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_MAGIC);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
    }
    // A correct header, a flipped payload byte.
    {
        float bad[4];
        memcpy(bad, vals, sizeof vals);
        ((uint8_t *)bad)[5] ^= 0x10;
        const void *p[2] = {head, bad};
        size_t l[2] = {WIRE_HEADER_SIZE, sizeof bad};
        send_raw(n->dealer, p, l, 2);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_CHECKSUM);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
        p[1] = vals;  // the same frames, unflipped, pass
        send_raw(n->dealer, p, l, 2);
        zmsg_t m;
        CHECK(zmsg_recv(n->router, 1, RUN, &m, err, sizeof err) == 1);
        check_frame(&m, 0, vals, sizeof vals);
        zmsg_close(&m);
    }
    // Three and five payload frames.
    {
        const void *p[6] = {head, vals, vals, vals, vals, vals};
        size_t l[6] = {WIRE_HEADER_SIZE, sizeof vals, sizeof vals, sizeof vals, sizeof vals, sizeof vals};
        send_raw(n->dealer, p, l, 4);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_SIZE);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
        send_raw(n->dealer, p, l, 6);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_SIZE);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
    }
    // A foreign run id (correctly sealed).
    {
        wire_header_t f = h;
        f.run_id = OTHER_RUN;
        uint8_t fh[WIRE_HEADER_SIZE];
        wire_header_encode(&f, fh);
        const void *p[2] = {fh, vals};
        size_t l[2] = {WIRE_HEADER_SIZE, sizeof vals};
        send_raw(n->dealer, p, l, 2);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_RUN);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
        // ... which a receiver of that run accepts.
        send_raw(n->dealer, p, l, 2);
        zmsg_t m;
        CHECK(zmsg_recv(n->router, 1, OTHER_RUN, &m, err, sizeof err) == 1);
        zmsg_close(&m);
    }
    // Bad version and bad type on the wire.
    {
        wire_header_t v = zmsg_header(MSG_TYPE_PULL, RUN);
        v.version = WIRE_VERSION + 1;
        uint8_t vh[WIRE_HEADER_SIZE];
        wire_header_encode(&v, vh);
        const void *p[1] = {vh};
        size_t l[1] = {WIRE_HEADER_SIZE};
        send_raw(n->dealer, p, l, 1);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_VERSION);
        v.version = WIRE_VERSION, v.type = MSG_TYPE_MAX_;
        wire_header_encode(&v, vh);
        send_raw(n->dealer, p, l, 1);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_TYPE);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
    }
    // A header announcing no payload (NONE), or 4 floats, with trailing frames of the wrong size.
    {
        wire_header_t z = zmsg_header(MSG_TYPE_PULL, RUN);
        uint8_t zh[WIRE_HEADER_SIZE];
        wire_header_encode(&z, zh);
        const void *p[2] = {zh, vals};
        size_t l[2] = {WIRE_HEADER_SIZE, sizeof vals};
        send_raw(n->dealer, p, l, 2);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_SIZE);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
        p[0] = head, l[1] = sizeof vals - 1;
        send_raw(n->dealer, p, l, 2);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_SIZE);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
        const void *p3[3] = {head, vals, keys};  // DENSE with a second frame
        size_t l3[3] = {WIRE_HEADER_SIZE, sizeof vals, sizeof keys};
        send_raw(n->dealer, p3, l3, 3);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_SIZE);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
        l3[0] = WIRE_HEADER_SIZE, l3[1] = 0;  // ... or an empty one
        send_raw(n->dealer, p3, l3, 2);
        EXPECT_REFUSED(n, WIRE_STATUS_BAD_SIZE);
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
    }
    // A burst of bad messages queued ahead of a good one.
    {
        const void *p[4] = {head, vals, vals, vals};
        size_t l[4] = {WIRE_HEADER_SIZE, sizeof vals, sizeof vals, sizeof vals};
        for (int k = 0; k < 20; k++) send_raw(n->dealer, p, l, k % 2 ? 4 : 2);  // odd ones: 3 payload frames
        for (int k = 0; k < 20; k++) {
            zmsg_t m;
            int rc = zmsg_recv(n->router, 1, RUN, &m, err, sizeof err);
            CHECK(rc == (k % 2 ? 0 : 1));
            CHECK(k % 2 ? m.status == WIRE_STATUS_BAD_SIZE : m.status == WIRE_STATUS_OK);
            zmsg_close(&m);
        }
        roundtrip_probe(n, n->dealer, "worker-7", probe++);
    }

    // The other direction: a DEALER refuses bad messages from the ROUTER
    // (validation does not look at who sends which type: a two-frame kind
    // shows every way the frames can be wrong).
    {
        wire_header_t s = zmsg_header(MSG_TYPE_PUSH, RUN);
        s.count = 4, s.payload_kind = PAYLOAD_KIND_SPARSE;
        wire_seal(&s, keys, sizeof keys, vals, sizeof vals);
        uint8_t sh[WIRE_HEADER_SIZE];
        wire_header_encode(&s, sh);
        const char *id = "worker-9";
        const void *p[4] = {id, sh, keys, vals};
        size_t l[4] = {strlen(id), WIRE_HEADER_SIZE, sizeof keys, sizeof vals};
        send_raw(n->router, p, l, 3);  // one frame short
        const float longer[5] = {1, 2, 3, 4, 5};
        p[3] = longer, l[3] = sizeof longer;
        send_raw(n->router, p, l, 4);  // second frame too long
        l[3] = sizeof vals;
        p[2] = vals, p[3] = keys;
        send_raw(n->router, p, l, 4);  // frames swapped
        p[2] = keys, p[3] = vals;
        send_raw(n->router, p, l, 4);  // intact
        const wire_status_t want[4] = {WIRE_STATUS_BAD_SIZE, WIRE_STATUS_BAD_SIZE, WIRE_STATUS_BAD_CHECKSUM,
                                       WIRE_STATUS_OK};
        for (int k = 0; k < 4; k++) {
            zmsg_t m;
            int rc = zmsg_recv(n->dealer2, 0, RUN, &m, err, sizeof err);
            CHECK(rc == (k == 3 ? 1 : 0));
            CHECK(m.status == want[k]);
            if (k == 3) {
                check_frame(&m, 0, keys, sizeof keys);
                check_frame(&m, 1, vals, sizeof vals);
            }
            zmsg_close(&m);
        }
    }
}

static void test_zmsg_errors(net_t *n) {
    char err[256];
    zmsg_t m;

    // Receive timeouts, on both kinds of socket; the socket works afterwards.
    void *socks[2] = {n->dealer, n->router};
    for (int k = 0; k < 2; k++) {
        set_int(socks[k], ZMQ_RCVTIMEO, 50);
        err[0] = 0;
        errno = 0;
        CHECK(zmsg_recv(socks[k], k, RUN, &m, err, sizeof err) == -1);
        CHECK(errno == EAGAIN);
        CHECK(strstr(err, "zmq_msg_recv") != NULL && strstr(err, zmq_strerror(EAGAIN)) != NULL);
        set_int(socks[k], ZMQ_RCVTIMEO, 10000);
    }
    roundtrip_probe(n, n->dealer, "worker-7", 500);

    // A DEALER with no peer cannot send without blocking: zmsg_send fails with
    // EAGAIN and still releases the payload frames (LeakSanitizer checks).
    void *lonely = zmq_socket(n->ctx, ZMQ_DEALER);
    CHECK(lonely);
    CHECK_OK(zmsg_socket_defaults(lonely, 0, err, sizeof err), err);
    zmq_msg_t f[2];
    char errbuf[256];
    CHECK_OK(zmsg_frame_alloc(&f[0], 1 << 20, errbuf, sizeof errbuf), errbuf);
    CHECK_OK(zmsg_frame_alloc(&f[1], 1 << 20, errbuf, sizeof errbuf), errbuf);
    memset(zmq_msg_data(&f[0]), 1, 1 << 20);
    memset(zmq_msg_data(&f[1]), 2, 1 << 20);
    wire_header_t h = zmsg_header(MSG_TYPE_PUSH, RUN);
    h.count = (1 << 20) / 4, h.payload_kind = PAYLOAD_KIND_SPARSE;
    err[0] = 0;
    CHECK(zmsg_send(lonely, NULL, &h, f, 2, 1, err, sizeof err) == -1);
    CHECK(errno == EAGAIN);
    CHECK(strstr(err, "zmq_msg_send") != NULL);
    ZCHECK(zmq_close(lonely));

    // ZMQ_FAIL keeps errno and names the call and libzmq's reason, not a source file.
    errno = EINTR;
    CHECK(ZMQ_FAIL("zmq_poll", err, sizeof err) == -1);
    CHECK(errno == EINTR);
    CHECK(strcmp(err, "zmq_poll failed: Interrupted system call") == 0 && strstr(err, ".c:") == NULL);
}

// Block by block (as a worker writes a push), copying (as a pull is read) and
// joined from a piece summed alone (as a shard sums a range it echoes) give
// the one-shot checksum, for every length up to 300 bytes split at every
// multiple of 32, and for a large buffer in 8 KiB blocks with a short last one.
static void test_checksum_stream_and_copy(void) {
    size_t big = (1u << 20) + 44;
    uint8_t *buf = malloc(big), *copy = malloc(big);
    CHECK(buf && copy);
    rng_t r;
    rng_seed(&r, 99, 3);
    for (size_t i = 0; i < big; i++) buf[i] = (uint8_t)rng_next(&r);
    for (size_t n = 0; n <= 300; n++) {
        uint32_t want = wire_checksum(buf, n, 7);
        for (size_t cut = 0; cut <= n; cut += 32) {
            wire_checksum_stream_t st;
            wire_checksum_begin(&st, 7);
            wire_checksum_update(&st, buf, cut);
            wire_checksum_update(&st, buf + cut, n - cut);
            CHECK(wire_checksum_end(&st) == want);
            // The piece after the cut summed alone (any seed, copied as it is
            // read) and joined to the stream of the bytes before it.
            wire_checksum_stream_t head, tail;
            wire_checksum_begin(&head, 7);
            wire_checksum_update(&head, buf, cut);
            wire_checksum_begin(&tail, (uint32_t)(n * 31 + cut));
            memset(copy, 0, n + 1);
            wire_checksum_update_copy(&tail, copy, buf + cut, n - cut);
            CHECK(memcmp(copy, buf + cut, n - cut) == 0 && copy[n - cut] == 0);
            wire_checksum_stream_t tail_kept = tail;
            wire_checksum_join(&head, &tail);
            CHECK(wire_checksum_end(&head) == want);
            CHECK(wire_checksum_end(&tail_kept) == wire_checksum(buf + cut, n - cut, (uint32_t)(n * 31 + cut)));
        }
        memset(copy, 0, n + 1);
        CHECK(wire_checksum_copy(copy, buf, n, 7) == want);
        CHECK(memcmp(copy, buf, n) == 0 && copy[n] == 0);
    }
    wire_checksum_stream_t st;
    wire_checksum_begin(&st, 0);
    for (size_t at = 0; at < big; at += 8192) wire_checksum_update(&st, buf + at, big - at < 8192 ? big - at : 8192);
    CHECK(wire_checksum_end(&st) == wire_checksum(buf, big, 0));
    // 2^17-byte ranges joined one after another, as a shard's ranges are.
    wire_checksum_begin(&st, 0);
    for (size_t at = 0; at < big; at += 1u << 17) {
        wire_checksum_stream_t range;
        wire_checksum_begin(&range, 0);
        wire_checksum_update(&range, buf + at, big - at < (1u << 17) ? big - at : (1u << 17));
        wire_checksum_join(&st, &range);
    }
    CHECK(st.closed == 1 && wire_checksum_end(&st) == wire_checksum(buf, big, 0));
    free(buf);
    free(copy);
}

// Every way of adding the lanes this CPU has (vectors of 128 and 256 bits)
// gives the word-by-word sums and copies exactly, at unaligned addresses and
// for 0 to 70 blocks; and the way wire_checksum takes is one of them.
static void test_checksum_lanes_ways(void) {
    enum { MAX_BLOCKS = 70 };
    uint8_t src[32 * MAX_BLOCKS + 8], want_copy[32 * MAX_BLOCKS + 8], copy[32 * MAX_BLOCKS + 8];
    rng_t r;
    rng_seed(&r, 5, 1);
    for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)rng_next(&r);
    int ways = 0;
    for (int way = CHECKSUM_LANES_WORDS; way <= CHECKSUM_LANES_AVX2; way++) {
        if (!checksum_lanes_available((checksum_lanes_way_t)way)) continue;
        ways++;
        for (size_t blocks = 0; blocks <= MAX_BLOCKS; blocks += blocks < 9 ? 1 : 13) {
            for (size_t skew = 0; skew < 8; skew += 3) {
                uint64_t a0[4], b0[4], a[4], b[4], a1[4], b1[4];
                for (int l = 0; l < 4; l++) a0[l] = a[l] = a1[l] = rng_next(&r), b0[l] = b[l] = b1[l] = rng_next(&r);
                memset(want_copy, 0xA5, sizeof want_copy);
                memset(copy, 0xA5, sizeof copy);
                checksum_lanes_add_with(CHECKSUM_LANES_WORDS, a0, b0, src + skew, want_copy + 1, blocks);
                checksum_lanes_add_with((checksum_lanes_way_t)way, a, b, src + skew, copy + 1, blocks);
                checksum_lanes_add_with((checksum_lanes_way_t)way, a1, b1, src + skew, NULL, blocks);
                CHECK(memcmp(a, a0, sizeof a) == 0 && memcmp(b, b0, sizeof b) == 0);
                CHECK(memcmp(a1, a0, sizeof a) == 0 && memcmp(b1, b0, sizeof b) == 0);
                CHECK(memcmp(copy, want_copy, sizeof copy) == 0);
                CHECK(blocks == 0 || memcmp(copy + 1, src + skew, 32 * blocks) == 0);
            }
        }
    }
    CHECK(ways >= 2);  // words, and vectors wherever GCC or Clang builds this
    uint64_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, a0[4] = {1, 2, 3, 4}, b0[4] = {5, 6, 7, 8};
    checksum_lanes_add(a, b, src, NULL, MAX_BLOCKS);
    checksum_lanes_add_with(CHECKSUM_LANES_WORDS, a0, b0, src, NULL, MAX_BLOCKS);
    CHECK(memcmp(a, a0, sizeof a) == 0 && memcmp(b, b0, sizeof b) == 0);
    printf("checksum lanes: %d ways give the same sums and copies\n", ways);
}

// Fresh identifiers: never 0, and two objects of one process get different ones.
static void test_fresh_id(void) {
    int a, b;
    uint64_t x = wire_fresh_id(&a), y = wire_fresh_id(&b);
    CHECK(x != 0 && y != 0 && x != y);
}

int main(void) {
    test_header_layout();
    test_fresh_id();
    test_checksum_stream_and_copy();
    test_checksum_lanes_ways();
    test_checksum_reference();
    test_checksum_properties();
    test_validate();
    net_t n;
    net_open(&n);
    test_zmsg_valid(&n);
    test_zmsg_malformed(&n);
    test_zmsg_errors(&n);
    net_close(&n);
    printf("test_wire: ok\n");
    return 0;
}
