#ifndef ASGD_NET_FUTEX_WORD_H
#define ASGD_NET_FUTEX_WORD_H
// Sleeping on a 32-bit word in memory that processes share (a segment in
// /dev/shm): the shared futex, not the private one, so a waiter in one
// process is woken by a store in another (net/shm_allreduce.c,
// net/ps_local_round.c).
#include <stdatomic.h>
#include <stdint.h>

// Sleeps while *word still holds `seen`, at most ms milliseconds (a wake-up,
// a signal or the time may end it early: the caller checks again).
void futex_word_wait(_Atomic uint32_t *word, uint32_t seen, int ms);
// Wakes every process asleep on word.
void futex_word_wake(_Atomic uint32_t *word);

#endif
