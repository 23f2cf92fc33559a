// Which CPU a pinned training thread runs on (--pin).
#ifndef ASGD_ENGINE_CORE_CPU_PIN_H
#define ASGD_ENGINE_CORE_CPU_PIN_H

#include <stddef.h>

// The slot-th CPU (mod their count) of those this process may run on, in
// ascending order: the set taskset, cgroups or mpirun left it, not CPUs
// 0..n-1, so that a pinned thread never asks for a CPU it is not allowed.
// A distributed worker numbers its threads after those of the workers before
// it on the machine, so that two workers' threads do not share a CPU while
// another sits idle. Returns 0 and sets *cpu, or -1 with a message.
int cpu_pin_choose(size_t slot, int *cpu, char *err, size_t err_len);

#endif
