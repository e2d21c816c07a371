/* Error codes and the thread-local last-error detail. */
#ifndef TP_UTIL_ERROR_H
#define TP_UTIL_ERROR_H

#include "tcpx_p2p.h"

/* Record a detail for the calling thread and return code (for
 * `return tp__error(TCPX_P2P_EINVAL, "chunk_bytes %zu > 4 MiB", n);`). */
int tp__error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
