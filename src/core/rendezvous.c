/* The built-in TCP rendezvous: a socket carries the two connection blobs
 * (framed, versioned) and stays open for barriers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "util/error.h"
#include "util/log.h"
#include "util/sock.h"

struct tcpx_p2p_server {
	struct tcpx_p2p_session *s;
	int fd;
	uint16_t port;
};

int tcpx_p2p_server_create(tcpx_p2p_session *s, const char *bind_addr, uint16_t port,
			   tcpx_p2p_server **out)
{
	struct tcpx_p2p_server *srv;
	int rc;

	if (!s || !out)
		return tp__error(TCPX_P2P_EINVAL, "server_create: NULL argument");
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return tp__error(TCPX_P2P_ENOMEM, "server_create: out of memory");
	rc = tp__sock_listen(bind_addr, port, &srv->fd, &srv->port);
	if (rc) {
		free(srv);
		return rc;
	}
	srv->s = s;
	pthread_mutex_lock(&s->lock);
	s->nservers++;
	pthread_mutex_unlock(&s->lock);
	*out = srv;
	return 0;
}

int tcpx_p2p_server_port(const tcpx_p2p_server *srv, uint16_t *port)
{
	if (!srv || !port)
		return tp__error(TCPX_P2P_EINVAL, "server_port: NULL argument");
	*port = srv->port;
	return 0;
}

int tcpx_p2p_server_destroy(tcpx_p2p_server *srv)
{
	if (!srv)
		return tp__error(TCPX_P2P_EINVAL, "server_destroy: NULL server");
	tp__sock_close(srv->fd);
	pthread_mutex_lock(&srv->s->lock);
	srv->s->nservers--;
	pthread_mutex_unlock(&srv->s->lock);
	free(srv);
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left before deadline (< 0: none), at least 1 so that an
 * expired step still reports its own timeout. */
static int left_ms(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - now_ms();
	return left < 1 ? 1 : (int)left;
}

/* Both sides: listen, send our blob, read the peer's, connect; all within
 * one deadline. */
static int handshake(struct tcpx_p2p_session *s, int fd, const char *peer, int timeout_ms,
		     struct tcpx_p2p_conn **out)
{
	struct tcpx_p2p_listener *l;
	const void *blob;
	unsigned char *peer_blob;
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	size_t len;
	uint32_t peer_len;
	int rc;

	peer_blob = malloc(TP_FRAME_MAX);
	if (!peer_blob)
		return tp__error(TCPX_P2P_ENOMEM, "handshake: out of memory");
	rc = tcpx_p2p_listen(s, &l);
	if (rc)
		goto free_blob;
	tcpx_p2p_listener_blob(l, &blob, &len);
	rc = tp__frame_send(fd, TP_FRAME_HELLO, blob, (uint32_t)len, left_ms(deadline));
	if (!rc)
		rc = tp__frame_recv(fd, TP_FRAME_HELLO, peer_blob, TP_FRAME_MAX, &peer_len,
				    left_ms(deadline));
	if (!rc)
		rc = tcpx_p2p_connect(l, peer_blob, peer_len, left_ms(deadline), out);
	if (rc) {
		TP_WARN("conn", "handshake with %s failed: %s", peer, tcpx_p2p_last_error());
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

int tcpx_p2p_server_accept(tcpx_p2p_server *srv, int timeout_ms, tcpx_p2p_conn **out)
{
	char peer[64];
	int fd, rc;

	if (!srv || !out)
		return tp__error(TCPX_P2P_EINVAL, "server_accept: NULL argument");
	timeout_ms = tp__session_timeout(srv->s, timeout_ms);
	rc = tp__sock_accept(srv->fd, timeout_ms, &fd, peer, sizeof(peer));
	if (rc)
		return rc;
	rc = handshake(srv->s, fd, peer, timeout_ms, out);
	if (rc)
		tp__sock_close(fd);
	return rc;
}

int tcpx_p2p_dial(tcpx_p2p_session *s, const char *host, uint16_t port, int timeout_ms,
		  tcpx_p2p_conn **out)
{
	char peer[64];
	int fd, rc;

	if (!s || !host || !out)
		return tp__error(TCPX_P2P_EINVAL, "dial: NULL argument");
	timeout_ms = tp__session_timeout(s, timeout_ms);
	rc = tp__sock_dial(host, port, timeout_ms, &fd);
	if (rc)
		return rc;
	snprintf(peer, sizeof(peer), "%s:%u", host, port);
	rc = handshake(s, fd, peer, timeout_ms, out);
	if (rc)
		tp__sock_close(fd);
	return rc;
}
