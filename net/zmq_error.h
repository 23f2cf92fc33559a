#ifndef ASGD_NET_ZMQ_ERROR_H
#define ASGD_NET_ZMQ_ERROR_H
// How a failed libzmq call is reported: the call and its object in the
// caller's words (what), then libzmq's reason. No source location: messages
// are for users, and `what` already says where.
#include <stddef.h>

// Fills err with "<what> failed: <zmq_strerror(errno)>", keeps errno, and
// evaluates to -1.
int net_zmq_fail(const char *what, char *err, size_t err_len);
#define ZMQ_FAIL(what, err, err_len) net_zmq_fail((what), (err), (err_len))
#endif
