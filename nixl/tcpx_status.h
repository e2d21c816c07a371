/* Our error codes to NIXL's, in one place. */
#ifndef TCPX_NIXL_STATUS_H
#define TCPX_NIXL_STATUS_H

#include "nixl_types.h"

/* rc is 0 or a negative TCPX_P2P_E* code.  A failure is logged once here,
 * through NIXL's log, with what was being done and the library's detail. */
nixl_status_t tcpxStatus(int rc, const char *what);

/* The same mapping, without logging (for failures already logged). */
nixl_status_t tcpxStatusQuiet(int rc);

#endif
