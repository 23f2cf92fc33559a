// net/ps_progress: a reader sees whole publications, and a waiter is woken
// by the publication that reaches its threshold (not polled): a writer
// thread publishes samples 1..N while this thread waits for thresholds along
// the way with a timeout far longer than the test, so a lost wake-up would
// show as a wait that returns below its threshold at the timeout; a wake
// call returns the waiter at once, and one made before the wait is not lost;
// a threshold already reached returns at once, and so does a zero timeout.
#include <pthread.h>
#include <stdint.h>

#include "net/ps_progress.h"
#include "tests/support/test_support.h"

enum { N = 20000, STEP = 997 };
#define LONG_S 600.0  // far past any run of this test: reaching it means a wake-up was lost

typedef struct writer {
    ps_progress_board_t *b;
} writer_t;

static void *write_all(void *arg) {
    writer_t *w = arg;
    for (uint64_t s = 1; s <= N; s++) {
        ps_progress_t p = {.samples = s, .version = s, .min_clock = s / 2};
        ps_progress_board_publish(w->b, &p);
    }
    return NULL;
}

int main(void) {
    ps_progress_board_t b;
    ps_progress_board_init(&b);
    // Already there, or no time to wait: at once.
    ps_progress_board_wait(&b, 0, LONG_S);
    ps_progress_board_wait(&b, 1, 0.0);
    ps_progress_t now;
    ps_progress_board_read(&b, &now);
    CHECK(now.samples == 0);

    writer_t w = {.b = &b};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, write_all, &w) == 0);
    size_t waits = 0;
    for (uint64_t at = STEP; at <= N; at += STEP, waits++) {
        ps_progress_board_wait(&b, at, LONG_S);
        ps_progress_board_read(&b, &now);
        CHECK(now.samples >= at);  // woken by the publication that reached it, never by the timeout
        CHECK(now.version == now.samples && now.min_clock == now.samples / 2);  // one whole publication
    }
    CHECK(pthread_join(t, NULL) == 0);
    ps_progress_board_read(&b, &now);
    CHECK(now.samples == N);

    // A wake before the wait is kept for it: a threshold never to be reached returns.
    ps_progress_board_wake(&b);
    ps_progress_board_wait(&b, UINT64_MAX, LONG_S);
    ps_progress_board_free(&b);
    printf("test_ps_progress: %zu waits woken by the writer: ok\n", waits);
    return 0;
}
