#include "engine/core/cpu_pin.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

int cpu_pin_choose(size_t slot, int *cpu, char *err, size_t err_len) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        snprintf(err, err_len, "--pin: reading the CPUs this process may run on: %s", strerror(errno));
        return -1;
    }
    size_t count = (size_t)CPU_COUNT(&allowed);
    size_t want = count ? slot % count : 0;
    for (int c = 0; count && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed) && want-- == 0) {
            *cpu = c;
            return 0;
        }
    snprintf(err, err_len, "--pin: this process may run on no CPU");
    return -1;
}
