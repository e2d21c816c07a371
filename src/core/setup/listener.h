/* A listener: the listen comms a connect or accept spends (listener.c). */
#ifndef TP_CORE_LISTENER_H
#define TP_CORE_LISTENER_H

#include <stdbool.h>
#include <stddef.h>

struct tcpx_p2p_session;

struct tcpx_p2p_listener {
	struct tcpx_p2p_session *s;
	int nchan;
	void **lcomm;       /* nchan listen comms */
	unsigned char *blob;
	size_t blob_len;
	bool spent;         /* a connect started on it: not reusable */
};

/* listener.c: a peer's blob against this session (layout, settings, MAC,
 * and its handles: nothing a plugin would follow or overrun). */
int tp__peer_blob_check(const struct tcpx_p2p_session *s, const void *blob, size_t len);

#endif
