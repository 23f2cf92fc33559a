#ifndef ASGD_NET_STOP_SIGNAL_H
#define ASGD_NET_STOP_SIGNAL_H
// A process's request to stop: SIGTERM, SIGINT or SIGHUP, caught once.
//
// stop_signal_install makes the first of these set a process-wide flag (and
// restores the default action, so a second one kills at once); the loops that
// block (training, serving, the rendezvous) look at the flag and end early.
// docs/reliability.md, "Signals".
#include <signal.h>
#include <stdatomic.h>

// Installs the handlers. Returns 0, or -1 (errno set).
int stop_signal_install(void);

// 0 while no stop was asked for, else the signal's number.
int stop_signal_received(void);

// The flag the handlers set (non-zero: the signal's number), for loops that
// take an atomic_int *stop.
atomic_int *stop_signal_flag(void);

// Holds the stop signals back from the calling thread (their previous mask
// into *was) while it writes a file under a temporary name and renames it:
// a second signal, which kills, then lands after the rename, never between.
// For the end of a run, when no other thread of the process can take them
// (libzmq's threads block them; the training threads have ended).
// stop_signal_release delivers what came meanwhile.
void stop_signal_hold(sigset_t *was);
void stop_signal_release(const sigset_t *was);

#endif
