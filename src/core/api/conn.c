/* A connection's public calls (api.h: no lock held on entry): progress,
 * which drives the engine for it, its barriers on the rendezvous socket
 * and its generation (setup/redial.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "core/api/api.h"
#include "core/conn.h"
#include "core/engine.h"
#include "core/pass.h"
#include "core/session.h"
#include "core/setup/rdv_frame.h"
#include "util/error.h"
#include "util/sock.h"

/* A rendezvous frame whose first byte arrived is complete within this. */
#define TP_RDV_FRAME_MS 5000

int tcpx_p2p_progress(tcpx_p2p_conn *c)
{
	struct tp_pass_result st;
	int rc;

	if (!c)
		return tp__error(TCPX_P2P_EINVAL, "progress: NULL conn");
	rc = tp__redial_use(&c, "progress");
	if (rc) {
		/* Re-dialling: the session's other connections still move. */
		tp__engine_pass(c->s, NULL, &st);
		return rc;
	}
	tp__engine_pass(c->s, c, &st);
	pthread_mutex_lock(&c->lock);
	rc = c->err;
	if (rc)
		rc = tp__error(rc, "progress: the connection failed: %s",
			       c->why[0] ? c->why : tcpx_p2p_strerror(rc));
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* A barrier frame cut short leaves the rendezvous socket unreadable: close it. */
static int rdv_broken(struct tcpx_p2p_conn *c, int rc)
{
	tp__sock_close(c->rdv_fd);
	c->rdv_fd = -1;
	c->rdv_dead = true;
	return rc;
}

/* Barrier n carries n: a barrier whose wait timed out can be called again
 * and still pairs with the peer's n-th (its frame went out only once). */
static int barrier(struct tcpx_p2p_conn *c, int timeout_ms)
{
	struct pollfd pfd = { .fd = c->rdv_fd, .events = POLLIN };
	uint32_t seq = htonl(c->barriers), got = 0, len = 0;
	int rc;

	if (!c->barrier_sent) {
		rc = tp__rdv_frame_send(c->rdv_fd, TP_RDV_FRAME_BARRIER, &seq, sizeof(seq),
					timeout_ms);
		if (rc)
			return rdv_broken(c, rc);
		c->barrier_sent = true;
	}
	/* Wait for the peer's frame without consuming anything, so that a
	 * timeout here loses nothing. */
	rc = poll(&pfd, 1, timeout_ms);
	if (rc == 0)
		return tp__error(TCPX_P2P_ETIMEDOUT, "conn_barrier: peer did not arrive in %d ms",
				 timeout_ms);
	if (rc < 0)
		return tp__error(TCPX_P2P_ENET, "conn_barrier: poll: %s", strerror(errno));
	rc = tp__rdv_frame_recv(c->rdv_fd, TP_RDV_FRAME_BARRIER, &got, sizeof(got), &len,
			    TP_RDV_FRAME_MS);
	if (!rc && (len != sizeof(got) || ntohl(got) != c->barriers))
		rc = tp__error(TCPX_P2P_EPROTO, "conn_barrier: peer is at barrier %u, we at %u",
			       len == sizeof(got) ? ntohl(got) : 0, c->barriers);
	if (rc)
		return rdv_broken(c, rc);
	c->barrier_sent = false;
	c->barriers++;
	return 0;
}

int tcpx_p2p_conn_barrier(tcpx_p2p_conn *c, int timeout_ms)
{
	int rc;

	if (!c)
		return tp__error(TCPX_P2P_EINVAL, "conn_barrier: NULL conn");
	rc = tp__redial_use(&c, "conn_barrier");
	if (rc)
		return rc;
	timeout_ms = tp__session_timeout(c->s, timeout_ms);
	pthread_mutex_lock(&c->rdv_lock);
	if (c->rdv_dead)
		rc = tp__error(TCPX_P2P_ECLOSED,
			       "conn_barrier: the rendezvous socket failed earlier");
	else if (c->rdv_fd < 0)
		rc = tp__error(TCPX_P2P_ENOTSUP,
			       "conn_barrier: connection was made by blob exchange");
	else
		rc = barrier(c, timeout_ms);
	pthread_mutex_unlock(&c->rdv_lock);
	return rc;
}

int tcpx_p2p_conn_generation(tcpx_p2p_conn *c, uint32_t *generation)
{
	if (!c || !generation)
		return tp__error(TCPX_P2P_EINVAL, "conn_generation: NULL argument");
	*generation = tp__redial_generation(c);
	return 0;
}
