// net/ps_local_round: a shard's segment and a worker's side of it, in one
// process (the two sides map the same file at different addresses, as two
// processes would). Attaching needs the shard's segment, made for the same
// values and a slot in range; the identity of a local slot is told from
// libzmq's; a post rings the doorbell and is taken once, with its fields
// (its writer's word on the values being finite among them) and the gradient
// where the worker wrote it; the worker gets the
// acknowledgement and the values bit for bit, written in ranges once for two
// workers, or referred to where the shard keeps them (a lent buffer, which
// counts the worker as its reader until it has copied them); a refusal reaches the post it refuses; values overwritten while a
// worker has not copied them are refused, not copied torn; a worker whose
// shard has exited fails instead of waiting; a restarted worker goes on from
// its predecessor's count; and 300 rounds between a shard thread and a
// worker thread each bring back their own values.
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "net/ps_local_round.h"
#include "net/shm_frames.h"
#include "net/zmsg.h"
#include "tests/support/test_support.h"

// BIG: a shard whose values go by reference (at least SHM_FRAMES_MIN_BYTES).
enum { N = 1000, BIG = 16384, ROUNDS = 300 };
static const uint64_t RUN = 0x10ca1000000000a1ull;

static int bell_rang(ps_local_round_t *shard) {
    struct pollfd p = {.fd = ps_local_round_fd(shard), .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

static void fill(float *v, float base) {
    for (size_t i = 0; i < N; i++) v[i] = base + 0.25f * (float)i;
}

static void check_identity(void) {
    zmq_msg_t id;
    uint32_t k = 0;
    ps_local_round_identity(7, &id);
    CHECK(ps_local_round_is_local(&id, &k) && k == 7);
    zmq_msg_close(&id);
    const uint8_t libzmq_own[5] = {0, 1, 2, 3, 4}, chosen[6] = {'L', 0, 0, 0, 0, 0};
    zmq_msg_init_size(&id, 5);
    memcpy(zmq_msg_data(&id), libzmq_own, 5);
    CHECK(!ps_local_round_is_local(&id, &k));
    zmq_msg_close(&id);
    zmq_msg_init_size(&id, 6);
    memcpy(zmq_msg_data(&id), chosen, 6);
    CHECK(!ps_local_round_is_local(&id, &k));
    zmq_msg_close(&id);
}

static void check_attach_refused(void) {
    char err[300];
    CHECK(!ps_local_round_attach(RUN, 0, 0, N, err, sizeof err));
    CHECK(strstr(err, "no segment"));
    ps_local_round_t *shard = ps_local_round_create(RUN, 0, 2, N, err, sizeof err);
    CHECK(shard);
    CHECK(!ps_local_round_attach(RUN, 0, 0, N + 1, err, sizeof err));  // another model's
    CHECK(strstr(err, "not made for this worker and model"));
    CHECK(!ps_local_round_attach(RUN, 0, 2, N, err, sizeof err));  // no slot 2
    CHECK(!ps_local_round_attach(RUN, 1, 0, N, err, sizeof err));  // no shard 1
    ps_local_round_destroy(&shard);
    CHECK(!shard);
    printf("attach: refused without a segment, for another size, slot or shard\n");
}

// A round of both workers: posts taken with their fields, the values written
// in two ranges for each, and each worker's copy bit for bit.
static void check_round(ps_local_round_t *shard, ps_local_round_t *w[2], uint64_t clock) {
    char err[300];
    float values[N], out[N];
    for (uint32_t k = 0; k < 2; k++) {
        fill(ps_local_round_gradient(w[k]), (float)(clock * 10 + k));
        CHECK(ps_local_round_post(w[k], clock, 40 + clock, 16 + k, (int)k, err, sizeof err) == 0);
    }
    CHECK(bell_rang(shard));
    ps_local_round_quiet(shard);
    CHECK(!bell_rang(shard));
    for (uint32_t k = 0; k < 2; k++) {
        ps_local_post_t p;
        CHECK(ps_local_round_take(shard, k, &p) == 1);
        CHECK(p.clock == clock && p.param_version == 40 + clock && p.examples == 16 + k && p.finite == (int)k);
        float want[N];
        fill(want, (float)(clock * 10 + k));
        CHECK(memcmp(p.values, want, sizeof want) == 0);
        CHECK(ps_local_round_take(shard, k, &p) == 0);  // taken once
        ps_local_round_ack(shard, k, clock);
    }
    fill(values, -(float)clock);
    for (uint32_t k = 0; k < 2; k++) ps_local_round_values(shard, k, values, 0, N / 2, 50 + clock, clock + 1, 0);
    for (uint32_t k = 0; k < 2; k++)
        ps_local_round_values(shard, k, values + N / 2, N / 2, N / 2, 50 + clock, clock + 1, 1);
    for (uint32_t k = 0; k < 2; k++) {
        ps_local_answer_t a;
        memset(out, 0, sizeof out);
        CHECK(ps_local_round_await(w[k], clock, out, NULL, &a, err, sizeof err) == 0);
        CHECK(a.refused == WIRE_STATUS_OK && a.version == 50 + clock && a.clock == clock + 1);
        CHECK(memcmp(out, values, sizeof out) == 0);
    }
}

static void check_rounds_and_refusals(void) {
    char err[300];
    ps_local_round_t *shard = ps_local_round_create(RUN, 0, 2, N, err, sizeof err), *w[2];
    CHECK(shard);
    for (uint32_t k = 0; k < 2; k++) CHECK((w[k] = ps_local_round_attach(RUN, 0, k, N, err, sizeof err)));
    check_round(shard, w, 3);
    check_round(shard, w, 4);
    // A refusal answers the post it refuses.
    CHECK(ps_local_round_post(w[0], 5, 45, 16, 0, err, sizeof err) == 0);
    ps_local_post_t p;
    CHECK(ps_local_round_take(shard, 0, &p) == 1);
    ps_local_round_refuse(shard, 0, WIRE_STATUS_EVICTED);
    ps_local_answer_t a;
    float out[N];
    CHECK(ps_local_round_await(w[0], 5, out, NULL, &a, err, sizeof err) == 0);
    CHECK(a.refused == WIRE_STATUS_EVICTED);
    // A restarted worker 0 goes on from its predecessor's count of posts.
    ps_local_round_destroy(&w[0]);
    CHECK((w[0] = ps_local_round_attach(RUN, 0, 0, N, err, sizeof err)));
    check_round(shard, w, 6);
    // Worker 1 answered whole; then the shard writes the next version's first
    // range (for another worker) before worker 1 copies: refused, not torn.
    CHECK(ps_local_round_post(w[1], 7, 47, 16, 0, err, sizeof err) == 0);
    CHECK(ps_local_round_take(shard, 1, &p) == 1);
    float values[N];
    fill(values, 1.0f);
    ps_local_round_ack(shard, 1, 7);
    ps_local_round_values(shard, 1, values, 0, N, 60, 8, 1);
    ps_local_round_values(shard, 0, values, 0, N / 2, 61, 9, 0);
    CHECK(ps_local_round_await(w[1], 7, out, NULL, &a, err, sizeof err) == -1);
    CHECK(strstr(err, "overwritten while read"));
    // The shard exits: a worker waiting on it fails instead of waiting.
    CHECK(ps_local_round_post(w[0], 8, 48, 16, 0, err, sizeof err) == 0);
    ps_local_round_destroy(&shard);
    CHECK(ps_local_round_await(w[0], 8, out, NULL, &a, err, sizeof err) == -1);
    CHECK(strstr(err, "server shard 0 has stopped"));
    printf("rounds: taken once, values bit for bit; refusal, restart, torn copy and a gone shard: %s\n", err);
    for (int k = 0; k < 2; k++) ps_local_round_destroy(&w[k]);
}

// The doorbell rings once a round, at its last post: not for a post while
// another worker taking part has not posted for the round; for the one that
// completes it; for a post of a worker alone once the other is marked out
// (left or evicted); and for a worker's first posts, before the shard has
// taken any post from the other.
static void check_last_post_rings(void) {
    char err[300];
    ps_local_round_t *shard = ps_local_round_create(RUN, 3, 2, N, err, sizeof err), *w[2];
    CHECK(shard);
    for (uint32_t k = 0; k < 2; k++) CHECK((w[k] = ps_local_round_attach(RUN, 3, k, N, err, sizeof err)));
    ps_local_post_t p;
    float values[N], out[N];
    ps_local_answer_t a;
    CHECK(ps_local_round_post(w[0], 0, 0, 16, 0, err, sizeof err) == 0);
    CHECK(bell_rang(shard));  // the shard has taken nothing from worker 1 yet
    ps_local_round_quiet(shard);
    CHECK(ps_local_round_take(shard, 0, &p) == 1);
    ps_local_round_ack(shard, 0, 0);
    fill(values, 0.0f);
    ps_local_round_values(shard, 0, values, 0, N, 0, 1, 1);
    CHECK(ps_local_round_await(w[0], 0, out, NULL, &a, err, sizeof err) == 0);
    check_round(shard, w, 1);  // both posts taken: both take part from now on
    for (uint64_t clock = 2; clock <= 3; clock++) {
        uint32_t first = clock % 2, last = 1 - first;
        CHECK(ps_local_round_post(w[first], clock, clock, 16, 0, err, sizeof err) == 0);
        CHECK(!bell_rang(shard));
        CHECK(ps_local_round_post(w[last], clock, clock, 16, 0, err, sizeof err) == 0);
        CHECK(bell_rang(shard));
        ps_local_round_quiet(shard);
        for (uint32_t k = 0; k < 2; k++) {
            CHECK(ps_local_round_take(shard, k, &p) == 1 && p.clock == clock);
            ps_local_round_ack(shard, k, clock);
        }
        fill(values, (float)clock);
        for (uint32_t k = 0; k < 2; k++) ps_local_round_values(shard, k, values, 0, N, clock, clock + 1, 1);
        for (uint32_t k = 0; k < 2; k++) {
            CHECK(ps_local_round_await(w[k], clock, out, NULL, &a, err, sizeof err) == 0);
        }
    }
    ps_local_round_out(shard, 1);
    CHECK(ps_local_round_post(w[0], 4, 4, 16, 0, err, sizeof err) == 0);
    CHECK(bell_rang(shard));
    printf("doorbell: rung by a round's last post only, and by a worker alone once the other is out\n");
    for (int k = 0; k < 2; k++) ps_local_round_destroy(&w[k]);
    ps_local_round_destroy(&shard);
}

// A shard's values in a lent buffer of its arena (as ps_reply.h keeps
// them), answered by reference: copied bit for bit, one reader until then.
static void check_referred(void) {
    char err[300];
    shm_frames_enable(RUN);
    ps_local_round_t *shard = ps_local_round_create(RUN, 2, 1, BIG, err, sizeof err), *w;
    CHECK(shard && (w = ps_local_round_attach(RUN, 2, 0, BIG, err, sizeof err)));
    shm_lend_t *lend;
    float *buffer = shm_frames_lend_new(BIG * sizeof(float), &lend);
    CHECK(buffer);
    for (size_t i = 0; i < BIG; i++) buffer[i] = 3.0f + 0.5f * (float)i;
    CHECK(ps_local_round_post(w, 0, 0, 8, 0, err, sizeof err) == 0);
    ps_local_post_t p;
    CHECK(ps_local_round_take(shard, 0, &p) == 1);
    ps_local_round_ack(shard, 0, 0);
    wire_header_t h = zmsg_header(MSG_TYPE_PARAMS, RUN);
    h.payload_kind = PAYLOAD_KIND_DENSE;
    h.count = BIG;
    zmq_msg_t frame;
    zmq_msg_init_data(&frame, buffer, BIG * sizeof(float), NULL, NULL);
    CHECK(shm_frames_pack(&h, &frame, 1) == 1);
    CHECK(shm_frames_lend_readers(lend) == 1);
    CHECK(ps_local_round_values_ref(shard, 0, zmq_msg_data(&frame), zmq_msg_size(&frame), 5, 1) == 0);
    zmq_msg_close(&frame);
    static float out[BIG];
    ps_local_answer_t a;
    CHECK(ps_local_round_await(w, 0, out, NULL, &a, err, sizeof err) == 0);
    CHECK(a.refused == WIRE_STATUS_OK && a.version == 5 && a.clock == 1);
    CHECK(memcmp(out, buffer, sizeof out) == 0);
    CHECK(shm_frames_lend_readers(lend) == 0);
    printf("referred: the shard's own values copied bit for bit, its reader gone once copied\n");
    shm_frames_lend_destroy(&lend);
    shm_frames_disable();
    ps_local_round_destroy(&w);
    ps_local_round_destroy(&shard);
}

typedef struct {
    ps_local_round_t *shard;
    int failed;
} shard_thread_t;

// The shard's side of ROUNDS rounds of one worker: values = its gradient + 1.
static void *serve(void *arg) {
    shard_thread_t *t = arg;
    float values[N];
    for (uint64_t c = 0; c < ROUNDS; c++) {
        ps_local_post_t p;
        while (ps_local_round_take(t->shard, 0, &p) == 0) {
            struct pollfd pf = {.fd = ps_local_round_fd(t->shard), .events = POLLIN};
            poll(&pf, 1, 100);
            ps_local_round_quiet(t->shard);
        }
        if (p.clock != c) t->failed = 1;
        for (size_t i = 0; i < N; i++) values[i] = p.values[i] + 1.0f;
        ps_local_round_ack(t->shard, 0, c);
        ps_local_round_values(t->shard, 0, values, 0, N, c + 1, c + 1, 1);
    }
    return NULL;
}

static void check_threads(void) {
    char err[300];
    shard_thread_t t = {.shard = ps_local_round_create(RUN, 1, 1, N, err, sizeof err)};
    CHECK(t.shard);
    ps_local_round_t *w = ps_local_round_attach(RUN, 1, 0, N, err, sizeof err);
    CHECK(w);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, serve, &t) == 0);
    float out[N];
    size_t wrong = 0;
    for (uint64_t c = 0; c < ROUNDS; c++) {
        fill(ps_local_round_gradient(w), (float)c);
        CHECK(ps_local_round_post(w, c, c, 8, 0, err, sizeof err) == 0);
        ps_local_answer_t a;
        CHECK(ps_local_round_await(w, c, out, NULL, &a, err, sizeof err) == 0);
        float want[N];
        fill(want, (float)c + 1.0f);
        wrong += a.version != c + 1 || memcmp(out, want, sizeof want) != 0;
    }
    CHECK(pthread_join(th, NULL) == 0);
    printf("threads: %d rounds, %zu with other values\n", ROUNDS, wrong);
    CHECK(wrong == 0 && !t.failed);
    ps_local_round_destroy(&w);
    ps_local_round_destroy(&t.shard);
}

int main(void) {
    check_identity();
    check_attach_refused();
    check_rounds_and_refusals();
    check_last_post_rings();
    check_referred();
    check_threads();
    return 0;
}
