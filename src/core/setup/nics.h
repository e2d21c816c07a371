/* Which plugin devices (NICs) a session's channels use: TCPX_P2P_NICS. */
#ifndef TP_CORE_NICS_H
#define TP_CORE_NICS_H

#include "tcpx_p2p.h"

#define TP_MAX_NICS TCPX_P2P_MAX_NICS

/*
 * spec: NULL, "" or "auto" (the devices in closest[0..nclosest)), "all"
 * (every device, up to TP_MAX_NICS; both keywords in any case), or a comma-separated list of device
 * names (as the plugin reports them, e.g. "eth1,eth2") and indices.
 * Writes the chosen indices, in order and without repeats, to out and
 * their number to *nout.  Returns 0, or TCPX_P2P_EINVAL naming the entry
 * that matches no device (and the devices there are).
 */
int tp__nics_pick(const char *spec, const char *const *names, int ndev, const int *closest,
		  int nclosest, int *out, int *nout);

#endif
