/* The tests' whole-buffer socket moves with a timeout in ms (< 0: none),
 * over the library's deadline-bound ones (util/sock.h), which only the
 * rendezvous's frames use inside the library. */
#ifndef TP_TESTS_SOCK_ALL_H
#define TP_TESTS_SOCK_ALL_H

#include <stddef.h>

#include "util/sock.h"
#include "util/time.h"

static inline int sock_send_all(int fd, const void *buf, size_t len, int timeout_ms)
{
	return tp__sock_send_by(fd, buf, len, tp__deadline_ms(timeout_ms));
}

static inline int sock_recv_all(int fd, void *buf, size_t len, int timeout_ms)
{
	return tp__sock_recv_by(fd, buf, len, tp__deadline_ms(timeout_ms));
}

#endif
