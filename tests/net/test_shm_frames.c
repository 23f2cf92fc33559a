// net/shm_frames through real sockets (a PAIR over 127.0.0.1) and zmsg's
// send and receive, in one process: a large PUSH goes by reference and comes
// back byte for byte with the flag gone; small frames and other message
// types go inline; a slot is reused once the receiver closes its frame, and
// held frames take one slot each; with every slot held the next message goes
// inline, intact; a sparse message's two frames go together; a sender
// thread racing a receiver thread delivers every message's own bytes (under
// TSan: the slot's state word orders the two); a reference that is malformed,
// names another arena or a slot out of range is refused as BAD_SHM; disable
// takes the arenas' names away and sends go inline; a run's leftover names
// are removed by shm_frames_remove_run; a lent buffer goes to two receivers
// without a copy and counts them as readers until they close their frames;
// a frame handed out to fill goes without a copy and keeps its slot while
// the sender holds it.
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "net/shm_frames.h"
#include "net/zmsg.h"
#include "tests/support/test_support.h"

enum { BIG = 16384, SMALL = 1000, ROUNDS = 300 };
static const uint64_t RUN = 0x5151000000000001ull, RUN2 = 0x5151000000000002ull;

// Arena names of run_id made by this process, in /dev/shm.
static size_t arena_names(uint64_t run_id) {
    char prefix[96];
    snprintf(prefix, sizeof prefix, "asgd-pf-%u-%016llx-%u-", (unsigned)getuid(), (unsigned long long)run_id,
             (unsigned)getpid());
    DIR *d = opendir("/dev/shm");
    CHECK(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static shm_frames_counts_t counts(void) {
    shm_frames_counts_t c;
    shm_frames_counts(&c);
    return c;
}

// A message of `type` with one DENSE frame of n floats, fill + i.
static void send_dense(void *sock, uint16_t type, uint64_t run, size_t n, float fill) {
    char err[256];
    wire_header_t h = zmsg_header(type, run);
    h.payload_kind = PAYLOAD_KIND_DENSE;
    h.count = (uint32_t)n;
    zmq_msg_t f;
    CHECK(zmsg_frame_alloc(&f, n * sizeof(float), err, sizeof err) == 0);
    float *v = zmq_msg_data(&f);
    for (size_t i = 0; i < n; i++) v[i] = fill + (float)i;
    CHECK(zmsg_send(sock, NULL, &h, &f, 1, 0, err, sizeof err) == 0);
}

// Receives what send_dense sent and checks every value; the caller closes m.
static void recv_dense(void *sock, uint64_t run, size_t n, float fill, zmsg_t *m) {
    char err[256];
    CHECK(zmsg_recv(sock, 0, run, m, err, sizeof err) == 1);
    CHECK(m->h.count == n && m->n_frames == 1 && zmq_msg_size(&m->frames[0]) == n * sizeof(float));
    CHECK((m->h.flags & WIRE_FLAG_SHM) == 0);
    const float *v = zmsg_payload(m, 0);
    for (size_t i = 0; i < n; i++) CHECK(v[i] == fill + (float)i);
}

static void round_trip(void *a, void *b, uint16_t type, size_t n, float fill) {
    zmsg_t m;
    send_dense(a, type, RUN, n, fill);
    recv_dense(b, RUN, n, fill, &m);
    zmsg_close(&m);
}

typedef struct race {
    void *sock;
} race_t;

static void *sender(void *arg) {
    race_t *r = arg;
    for (int k = 0; k < ROUNDS; k++) send_dense(r->sock, MSG_TYPE_PARAMS, RUN, BIG, (float)k * 3.0f);
    return NULL;
}

// A PUSH by reference, received as raw frames (header, reference), so that
// the reference can be altered before it is sent on.
static void capture_reference(void *a, void *raw, zmq_msg_t *header, shm_ref_t *ref) {
    send_dense(a, MSG_TYPE_PUSH, RUN, BIG, 7.0f);
    zmq_msg_init(header);
    CHECK(zmq_msg_recv(header, raw, 0) == WIRE_HEADER_SIZE);
    zmq_msg_t f;
    zmq_msg_init(&f);
    CHECK(zmq_msg_recv(&f, raw, 0) == (int)sizeof *ref);
    memcpy(ref, zmq_msg_data(&f), sizeof *ref);
    zmq_msg_close(&f);
}

// Sends header and ref raw to the zmsg receiver: refused as BAD_SHM.
static void expect_refused(void *raw_out, void *b, zmq_msg_t *header, const shm_ref_t *ref) {
    zmq_msg_t h;
    zmq_msg_init(&h);
    zmq_msg_copy(&h, header);
    CHECK(zmq_msg_send(&h, raw_out, ZMQ_SNDMORE) == WIRE_HEADER_SIZE);
    CHECK(zmq_send(raw_out, ref, sizeof *ref, 0) == (int)sizeof *ref);
    zmsg_t m;
    char err[256];
    CHECK(zmsg_recv(b, 0, RUN, &m, err, sizeof err) == 0);
    CHECK(m.status == WIRE_STATUS_BAD_SHM);
    zmsg_close(&m);
}

static void pair(void *ctx, void **a, void **b) {
    *a = zmq_socket(ctx, ZMQ_PAIR);
    *b = zmq_socket(ctx, ZMQ_PAIR);
    CHECK(*a && *b && zmq_bind(*b, "tcp://127.0.0.1:*") == 0);
    char at[256];
    size_t len = sizeof at;
    CHECK(zmq_getsockopt(*b, ZMQ_LAST_ENDPOINT, at, &len) == 0 && zmq_connect(*a, at) == 0);
}

int main(void) {
    void *ctx = zmq_ctx_new(), *a, *b;
    CHECK(ctx);
    pair(ctx, &a, &b);
    shm_frames_enable(RUN);

    // a) A large PUSH goes by reference; its bytes and checksum arrive.
    round_trip(a, b, MSG_TYPE_PUSH, BIG, 1.0f);
    shm_frames_counts_t c = counts();
    CHECK(c.packed == 1 && c.unpacked == 1 && c.slots == 1 && arena_names(RUN) == 1);
    // b) Small frames, and messages other than PUSH and PARAMS, go inline.
    round_trip(a, b, MSG_TYPE_PUSH, SMALL, 2.0f);
    round_trip(a, b, MSG_TYPE_RING_CHUNK, BIG, 3.0f);
    c = counts();
    CHECK(c.packed == 1 && c.unpacked == 1);
    // c) A slot is the sender's again once the receiver closed its frame.
    for (int k = 0; k < 10; k++) round_trip(a, b, MSG_TYPE_PARAMS, BIG, (float)k);
    c = counts();
    CHECK(c.packed == 11 && c.slots == 1);
    // d) Frames held take a slot each; closed, they are all reused.
    zmsg_t held[64];
    for (int k = 0; k < 3; k++) {
        send_dense(a, MSG_TYPE_PUSH, RUN, BIG, (float)k);
        recv_dense(b, RUN, BIG, (float)k, &held[k]);
    }
    CHECK(counts().slots == 3);
    for (int k = 0; k < 3; k++) zmsg_close(&held[k]);
    for (int k = 0; k < 3; k++) round_trip(a, b, MSG_TYPE_PUSH, BIG, (float)k);
    CHECK(counts().slots == 3);
    // e) Every slot held: the next message goes inline, intact.
    for (int k = 0; k < 64; k++) {
        send_dense(a, MSG_TYPE_PUSH, RUN, BIG, (float)k);
        recv_dense(b, RUN, BIG, (float)k, &held[k]);
    }
    c = counts();
    CHECK(c.slots == 64 && c.inline_for_want_of_slot == 0);
    round_trip(a, b, MSG_TYPE_PUSH, BIG, 99.0f);
    CHECK(counts().inline_for_want_of_slot == 1 && counts().packed == c.packed);
    for (int k = 0; k < 64; k++) zmsg_close(&held[k]);
    // f) A sparse message's two frames go together.
    {
        char err[256];
        wire_header_t h = zmsg_header(MSG_TYPE_PUSH, RUN);
        h.payload_kind = PAYLOAD_KIND_SPARSE;
        h.count = BIG;
        zmq_msg_t f[2];
        CHECK(zmsg_frame_alloc(&f[0], BIG * 4, err, sizeof err) == 0 &&
              zmsg_frame_alloc(&f[1], BIG * 4, err, sizeof err) == 0);
        uint32_t *keys = zmq_msg_data(&f[0]);
        float *values = zmq_msg_data(&f[1]);
        for (uint32_t i = 0; i < BIG; i++) keys[i] = 3 * i, values[i] = -(float)i;
        uint64_t before = counts().packed;
        CHECK(zmsg_send(a, NULL, &h, f, 2, 0, err, sizeof err) == 0);
        CHECK(counts().packed == before + 1);
        zmsg_t m;
        CHECK(zmsg_recv(b, 0, RUN, &m, err, sizeof err) == 1 && m.n_frames == 2);
        const uint32_t *k = zmsg_payload(&m, 0);
        const float *v = zmsg_payload(&m, 1);
        for (uint32_t i = 0; i < BIG; i++) CHECK(k[i] == 3 * i && v[i] == -(float)i);
        zmsg_close(&m);
    }
    // g) A sender thread against this one: each message its own bytes,
    // whether it went by reference or (every slot in flight) inline.
    {
        race_t r = {.sock = a};
        pthread_t t;
        uint64_t before = counts().packed + counts().inline_for_want_of_slot;
        CHECK(pthread_create(&t, NULL, sender, &r) == 0);
        for (int k = 0; k < ROUNDS; k++) {
            zmsg_t m;
            recv_dense(b, RUN, BIG, (float)k * 3.0f, &m);
            zmsg_close(&m);
        }
        CHECK(pthread_join(t, NULL) == 0);
        c = counts();
        CHECK(c.packed + c.inline_for_want_of_slot == before + ROUNDS);
        printf("race: %d messages, %llu by reference in all, %llu inline for want of a slot\n", ROUNDS,
               (unsigned long long)c.packed, (unsigned long long)c.inline_for_want_of_slot);
    }
    // h) References that do not hold: refused, nothing read.
    {
        void *raw_in, *raw_out;
        pair(ctx, &raw_in, &raw_out);  // a -> raw (captured), raw_out -> b (altered)
        void *c_out, *c_in;
        pair(ctx, &c_out, &c_in);
        zmq_msg_t header;
        shm_ref_t ref, bad;
        capture_reference(c_out, c_in, &header, &ref);
        CHECK(ref.magic == SHM_REF_MAGIC && ref.run_id == RUN && ref.len == BIG * sizeof(float));
        bad = ref, bad.magic ^= 1;
        expect_refused(raw_in, raw_out, &header, &bad);
        bad = ref, bad.token ^= 1;  // the arena is another's
        expect_refused(raw_in, raw_out, &header, &bad);
        bad = ref, bad.pid = 0;  // no such arena
        expect_refused(raw_in, raw_out, &header, &bad);
        bad = ref, bad.offset = (uint64_t)1 << 40;  // past the arena
        expect_refused(raw_in, raw_out, &header, &bad);
        bad = ref, bad.len += 4;  // not the slot's length
        expect_refused(raw_in, raw_out, &header, &bad);
        bad = ref, bad.offset += 64;  // not a slot
        expect_refused(raw_in, raw_out, &header, &bad);
        // The reference as it was still reads the slot (nothing above freed it).
        zmq_msg_t h;
        zmq_msg_init(&h);
        zmq_msg_copy(&h, &header);
        CHECK(zmq_msg_send(&h, raw_in, ZMQ_SNDMORE) == WIRE_HEADER_SIZE);
        CHECK(zmq_send(raw_in, &ref, sizeof ref, 0) == (int)sizeof ref);
        zmsg_t m;
        recv_dense(raw_out, RUN, BIG, 7.0f, &m);
        zmsg_close(&m);
        zmq_msg_close(&header);
        zmq_close(raw_in);
        zmq_close(raw_out);
        zmq_close(c_out);
        zmq_close(c_in);
    }
    // k) A lent buffer: a frame over all of it goes by reference without a
    // copy to each receiver, one reader counted per frame until it is
    // closed; a frame over part of it is copied into a slot; a reference
    // never sent counts no reader.
    {
        char err[256];
        shm_lend_t *lend = NULL;
        float *buf = shm_frames_lend_new(BIG * sizeof(float), &lend);
        CHECK(buf && lend && (uintptr_t)buf % 64 == 0 && shm_frames_lend_readers(lend) == 0);
        for (size_t i = 0; i < BIG; i++) buf[i] = 0.5f + (float)i;
        uint64_t lent = counts().without_copy, slots = counts().slots;
        zmsg_t got[2];
        for (int k = 0; k < 2; k++) {
            wire_header_t h = zmsg_header(MSG_TYPE_PARAMS, RUN);
            h.payload_kind = PAYLOAD_KIND_DENSE;
            h.count = BIG;
            zmq_msg_t f;
            CHECK(zmq_msg_init_data(&f, buf, BIG * sizeof(float), NULL, NULL) == 0);
            CHECK(zmsg_send(a, NULL, &h, &f, 1, 0, err, sizeof err) == 0);
            recv_dense(b, RUN, BIG, 0.5f, &got[k]);
        }
        CHECK(counts().without_copy == lent + 2 && counts().slots == slots && shm_frames_lend_readers(lend) == 2);
        zmsg_close(&got[0]);
        CHECK(shm_frames_lend_readers(lend) == 1);
        zmsg_close(&got[1]);
        CHECK(shm_frames_lend_readers(lend) == 0);
        wire_header_t h = zmsg_header(MSG_TYPE_PARAMS, RUN);
        h.payload_kind = PAYLOAD_KIND_DENSE;
        h.count = BIG / 2;
        zmq_msg_t f;
        CHECK(zmq_msg_init_data(&f, buf, BIG / 2 * sizeof(float), NULL, NULL) == 0);
        CHECK(zmsg_send(a, NULL, &h, &f, 1, 0, err, sizeof err) == 0);
        zmsg_t part;
        recv_dense(b, RUN, BIG / 2, 0.5f, &part);
        CHECK(counts().without_copy == lent + 2 && shm_frames_lend_readers(lend) == 0);
        zmsg_close(&part);
        h.count = BIG;
        CHECK(zmq_msg_init_data(&f, buf, BIG * sizeof(float), NULL, NULL) == 0);
        CHECK(shm_frames_pack(&h, &f, 1) == 1 && shm_frames_lend_readers(lend) == 1);
        shm_frames_drop_unsent(&f);
        CHECK(shm_frames_lend_readers(lend) == 0);
        shm_frames_lend_destroy(&lend);
        CHECK(lend == NULL);
    }
    // l) A frame handed out to fill: sent by reference without a copy, its
    // slot the sender's while the frame or a copy kept for resending is
    // open, though the receiver closed its own; sent again from the copy, a
    // second reader; once all are closed, the slot is reused.
    {
        char err[256];
        uint64_t sent = counts().without_copy;
        zmq_msg_t f, kept;
        CHECK(shm_frames_frame(BIG * sizeof(float), &f) == 0);
        float *v = zmq_msg_data(&f);
        for (size_t i = 0; i < BIG; i++) v[i] = 2.5f + (float)i;
        zmq_msg_init(&kept);
        CHECK(zmq_msg_copy(&kept, &f) == 0);
        wire_header_t h = zmsg_header(MSG_TYPE_PUSH, RUN);
        h.payload_kind = PAYLOAD_KIND_DENSE;
        h.count = BIG;
        CHECK(zmsg_send(a, NULL, &h, &f, 1, 0, err, sizeof err) == 0);
        zmsg_t m1, m2;
        recv_dense(b, RUN, BIG, 2.5f, &m1);
        CHECK(counts().without_copy == sent + 1);
        zmsg_close(&m1);
        // The receiver let go, the sender did not: every other slot is handed
        // out before this one is (none is, until none is left).
        static zmq_msg_t other[64];
        size_t n_other = 0;
        while (n_other < 64 && shm_frames_frame(BIG * sizeof(float), &other[n_other]) == 0) {
            CHECK(zmq_msg_data(&other[n_other]) != (void *)v);
            n_other++;
        }
        CHECK(n_other == 63);  // this thread's arena holds 64 slots (e)
        for (size_t i = 0; i < n_other; i++) zmq_msg_close(&other[i]);
        zmq_msg_t again;
        zmq_msg_init(&again);
        CHECK(zmq_msg_copy(&again, &kept) == 0);
        CHECK(zmsg_send(a, NULL, &h, &again, 1, 0, err, sizeof err) == 0);
        recv_dense(b, RUN, BIG, 2.5f, &m2);
        CHECK(counts().without_copy == sent + 2);
        zmsg_close(&m2);
        zmq_msg_close(&kept);
        // All closed: the slot is handed out again.
        size_t n_again = 0;
        int found = 0;
        while (n_again < 64 && shm_frames_frame(BIG * sizeof(float), &other[n_again]) == 0)
            found |= zmq_msg_data(&other[n_again++]) == (void *)v;
        CHECK(found && n_again == 64);
        for (size_t i = 0; i < n_again; i++) zmq_msg_close(&other[i]);
        // Under SHM_FRAMES_MIN_BYTES the caller makes its own frame.
        CHECK(shm_frames_frame(SHM_FRAMES_MIN_BYTES - 1, &f) == -1);
    }
    // i) Disabled: the names are gone, sends go inline.
    CHECK(arena_names(RUN) == 2);  // this thread's arena and the racing sender's
    shm_frames_disable();
    CHECK(arena_names(RUN) == 0);
    uint64_t packed = counts().packed;
    round_trip(a, b, MSG_TYPE_PUSH, BIG, 5.0f);
    CHECK(counts().packed == packed);
    // j) A run's names left behind (no disable) are removed by run id.
    shm_frames_enable(RUN2);
    zmsg_t m;
    send_dense(a, MSG_TYPE_PUSH, RUN2, BIG, 6.0f);
    recv_dense(b, RUN2, BIG, 6.0f, &m);
    zmsg_close(&m);
    CHECK(counts().packed == packed + 1 && arena_names(RUN2) == 1);
    CHECK(shm_frames_remove_run(RUN2) == 1 && arena_names(RUN2) == 0);
    shm_frames_disable();

    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
    printf("test_shm_frames: ok\n");
    return 0;
}
