#include "net/zmq_error.h"

#include <errno.h>
#include <stdio.h>
#include <zmq.h>

int net_zmq_fail(const char *what, char *err, size_t err_len) {
    int e = errno;
    snprintf(err, err_len, "%s failed: %s", what, zmq_strerror(e));
    errno = e;
    return -1;
}
