/* The rendezvous handshake on a connected socket: blobs framed as HELLO,
 * then the plugin connect (tcpx_p2p_connect).  The dialer sends its blob
 * first; the server reads the peer's before it calls the plugin at all, so
 * a peer that says nothing, or garbage, costs it no plugin resources.
 * Peers that predate this order (both sides send first) interoperate: the
 * frames wait in the socket buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "core/handshake.h"
#include "util/error.h"
#include "util/log.h"
#include "util/sock.h"

int64_t tp__now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int tp__left_ms(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - tp__now_ms();
	return left < 1 ? 1 : left > 0x7fffffff ? 0x7fffffff : (int)left;
}

/* Every error of the handshake names the peer. */
static int with_peer(int rc, const char *peer)
{
	if (rc && !strstr(tcpx_p2p_last_error(), peer))
		tp__error(rc, "handshake with %s: %s", peer, tcpx_p2p_last_error());
	return rc;
}

int tp__handshake(struct tcpx_p2p_session *s, int fd, const char *peer, bool server,
		  int64_t peer_deadline, int64_t deadline, struct tcpx_p2p_conn **out)
{
	struct tcpx_p2p_listener *l = NULL;
	unsigned char *peer_blob;
	const void *blob;
	uint32_t peer_len = 0;
	size_t len;
	int rc;

	peer_blob = malloc(TP_FRAME_MAX);
	if (!peer_blob)
		return tp__error(TCPX_P2P_ENOMEM, "handshake with %s: out of memory", peer);
	if (server) {
		rc = tp__frame_recv(fd, TP_FRAME_HELLO, peer_blob, TP_FRAME_MAX, &peer_len,
				    tp__left_ms(peer_deadline));
		if (!rc)
			rc = tcpx_p2p_listen(s, &l);
		if (!rc) {
			tcpx_p2p_listener_blob(l, &blob, &len);
			rc = tp__frame_send(fd, TP_FRAME_HELLO, blob, (uint32_t)len,
					    tp__left_ms(deadline));
		}
	} else {
		rc = tcpx_p2p_listen(s, &l);
		if (!rc) {
			tcpx_p2p_listener_blob(l, &blob, &len);
			rc = tp__frame_send(fd, TP_FRAME_HELLO, blob, (uint32_t)len,
					    tp__left_ms(deadline));
		}
		if (!rc)
			rc = tp__frame_recv(fd, TP_FRAME_HELLO, peer_blob, TP_FRAME_MAX,
					    &peer_len, tp__left_ms(deadline));
	}
	if (!rc)
		rc = tcpx_p2p_connect(l, peer_blob, peer_len, tp__left_ms(deadline), out);
	if (rc) {
		with_peer(rc, peer);
		TP_WARN("conn", "%s", tcpx_p2p_last_error());
		if (l)
			tcpx_p2p_listener_destroy(l);
		goto free_blob;
	}
	(*out)->ctrl_fd = fd;
	snprintf((*out)->peer, sizeof((*out)->peer), "%s", peer);
	TP_INFO("conn", "connected to %s: %d channels", peer, (*out)->nchan);
free_blob:
	free(peer_blob);
	return rc;
}
