#include "net/stop_signal.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

static atomic_int stop_flag;

static void on_stop(int sig) {
    int first = 0;
    if (atomic_compare_exchange_strong(&stop_flag, &first, sig)) return;
    // A second stop signal (of any of the three) kills: the default action,
    // delivered when this handler returns.
    signal(sig, SIG_DFL);
    raise(sig);
}

int stop_signal_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    // No SA_RESTART: a blocking call in the thread that takes the signal
    // returns EINTR and its loop looks at the flag.
    sa.sa_flags = 0;
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        // A signal ignored on entry stays ignored (asgd launch has its
        // children ignore SIGINT: Ctrl-C goes to it, and it stops them in order).
        struct sigaction was;
        if (sigaction(sigs[i], NULL, &was) != 0) return -1;
        if (was.sa_handler == SIG_IGN) continue;
        if (sigaction(sigs[i], &sa, NULL) != 0) return -1;
    }
    return 0;
}

void stop_signal_hold(sigset_t *was) {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, was);
}

void stop_signal_release(const sigset_t *was) { pthread_sigmask(SIG_SETMASK, was, NULL); }

int stop_signal_received(void) { return atomic_load(&stop_flag); }

atomic_int *stop_signal_flag(void) { return &stop_flag; }
