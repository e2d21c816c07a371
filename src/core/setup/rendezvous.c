/* The built-in TCP rendezvous: a socket carries the two connection blobs
 * (framed, versioned; src/core/setup/handshake.c) and stays open for barriers.
 *
 * The server never waits on one peer while others are ready: it keeps the
 * connections it accepted but whose handshake has not started yet (their
 * first frame has not arrived) in a small set, each with its own deadline
 * (TCPX_P2P_HANDSHAKE_MS from its accept), and serves whichever speaks
 * first.  The set holds at most TP_SERVER_MAX_PENDING; beyond that the
 * oldest is dropped, so silent connections cannot crowd out a real peer. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/engine.h"
#include "core/pass.h"
#include "core/session.h"
#include "core/setup/handshake.h"
#include "util/error.h"
#include "util/log.h"
#include "util/sock.h"

#define TP_SERVER_MAX_PENDING 64
/* Longest a server_accept holds the server's lock in one poll, so that
 * several threads may accept on one server. */
#define TP_SERVER_SLICE_MS 20

struct tp_pending {
	int fd;
	tp_deadline deadline;
	char peer[64];
};

struct tcpx_p2p_server {
	struct tcpx_p2p_session *s;
	int fd;
	uint16_t port;
	pthread_mutex_t lock; /* guards the pending set */
	int npend;
	struct tp_pending pend[TP_SERVER_MAX_PENDING]; /* oldest first */
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
	rc = pthread_mutex_init(&srv->lock, NULL);
	if (rc) {
		tp__sock_close(srv->fd);
		free(srv);
		return tp__error(TCPX_P2P_ENOMEM, "server_create: cannot create a lock: %s",
				 strerror(rc));
	}
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

static void pend_drop(struct tcpx_p2p_server *srv, int i)
{
	tp__sock_close(srv->pend[i].fd);
	memmove(&srv->pend[i], &srv->pend[i + 1], (size_t)(srv->npend - i - 1) * sizeof(srv->pend[0]));
	srv->npend--;
}

int tcpx_p2p_server_destroy(tcpx_p2p_server *srv)
{
	if (!srv)
		return tp__error(TCPX_P2P_EINVAL, "server_destroy: NULL server");
	while (srv->npend)
		pend_drop(srv, 0);
	tp__sock_close(srv->fd);
	pthread_mutex_destroy(&srv->lock);
	pthread_mutex_lock(&srv->s->lock);
	srv->s->nservers--;
	pthread_mutex_unlock(&srv->s->lock);
	free(srv);
	return 0;
}

/* Take every queued connection into the pending set. */
static int accept_queued(struct tcpx_p2p_server *srv)
{
	struct tp_pending *p;
	int rc, fd;
	char peer[64];

	for (;;) {
		rc = tp__sock_accept_nb(srv->fd, &fd, peer, sizeof(peer));
		if (rc == TCPX_P2P_EAGAIN)
			return 0;
		if (rc)
			return rc;
		if (srv->npend == TP_SERVER_MAX_PENDING) {
			TP_WARN_RL("conn", "%d rendezvous handshakes waiting: dropping the oldest, "
				   "from %s", TP_SERVER_MAX_PENDING, srv->pend[0].peer);
			pend_drop(srv, 0);
		}
		p = &srv->pend[srv->npend++];
		p->fd = fd;
		p->deadline = tp__deadline_ms(srv->s->cfg.handshake_ms);
		snprintf(p->peer, sizeof(p->peer), "%s", peer);
		TP_DEBUG("conn", "rendezvous connection from %s", peer);
	}
}

/* Has the peer sent something (or closed)?  Then its deadline no longer
 * applies: it spoke in time, and waited only because every accepting
 * thread was busy with other handshakes. */
static bool spoke(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) > 0;
}

/* Drop connections whose peer let its handshake deadline pass silent. */
static int expire(struct tcpx_p2p_server *srv, int64_t now_ns)
{
	int i, n = 0;

	for (i = 0; i < srv->npend;) {
		if (now_ns < srv->pend[i].deadline || spoke(srv->pend[i].fd)) {
			i++;
			continue;
		}
		TP_INFO("conn", "dropping %s: no handshake within %d ms", srv->pend[i].peer,
			srv->s->cfg.handshake_ms);
		pend_drop(srv, i);
		n++;
	}
	return n;
}

/* Index of a pending connection with something to read, -1 if none came
 * before wait_ms (the listening socket may have become ready); < -1 (an
 * error code) if poll itself failed. */
static int wait_ready(struct tcpx_p2p_server *srv, int wait_ms)
{
	struct pollfd pfd[TP_SERVER_MAX_PENDING + 1];
	int i, n;

	pfd[0].fd = srv->fd;
	pfd[0].events = POLLIN;
	for (i = 0; i < srv->npend; i++) {
		pfd[i + 1].fd = srv->pend[i].fd;
		pfd[i + 1].events = POLLIN;
	}
	n = poll(pfd, (nfds_t)srv->npend + 1, wait_ms);
	if (n < 0)
		return errno == EINTR ? -1 :
				       tp__error(TCPX_P2P_ENET, "server_accept: poll: %s",
						 strerror(errno));
	for (i = 0; n > 0 && i < srv->npend; i++)
		if (pfd[i + 1].revents)
			return i;
	return -1;
}

/* One look under the server's lock: take what is queued, drop who let
 * their deadline pass, then wait at most one slice for a peer to speak.
 * 1 with *p taken out of the set when one did, 0 when none did, < 0 an
 * error (ETIMEDOUT once deadline passed). */
static int pick(struct tcpx_p2p_server *srv, tp_deadline deadline, int timeout_ms, int *dropped,
		struct tp_pending *p)
{
	int64_t now, next;
	int rc, i;

	pthread_mutex_lock(&srv->lock);
	rc = accept_queued(srv);
	if (rc)
		goto unlock;
	now = tp__now_ns();
	*dropped += expire(srv, now);
	if (now >= deadline) {
		rc = tp__error(TCPX_P2P_ETIMEDOUT,
			       "accept: timed out: no peer completed a handshake within %d ms "
			       "(%d silent connection(s) dropped after %d ms, %d still waiting)",
			       timeout_ms, *dropped, srv->s->cfg.handshake_ms, srv->npend);
		goto unlock;
	}
	next = now + (int64_t)TP_SERVER_SLICE_MS * TP_NS_PER_MS;
	if (deadline < next)
		next = deadline;
	for (i = 0; i < srv->npend; i++)
		if (srv->pend[i].deadline < next)
			next = srv->pend[i].deadline;
	i = wait_ready(srv, tp__deadline_left_ms(next));
	rc = i < -1 ? i : 0;
	if (i >= 0) {
		*p = srv->pend[i];
		memmove(&srv->pend[i], &srv->pend[i + 1],
			(size_t)(srv->npend - i - 1) * sizeof(srv->pend[0]));
		srv->npend--;
		rc = 1;
	}
unlock:
	pthread_mutex_unlock(&srv->lock);
	return rc;
}

int tcpx_p2p_server_accept(tcpx_p2p_server *srv, int timeout_ms, tcpx_p2p_conn **out)
{
	struct tp_pending p;
	tp_deadline deadline, peer_deadline, setup_deadline;
	int64_t now;
	int rc, dropped = 0;

	if (!srv || !out)
		return tp__error(TCPX_P2P_EINVAL, "server_accept: NULL argument");
	timeout_ms = tp__session_timeout(srv->s, timeout_ms);
	deadline = tp__deadline_ms(timeout_ms);
	while ((rc = pick(srv, deadline, timeout_ms, &dropped, &p)) == 0) {
		/* Between slices the session's connections go on (and keep
		 * telling their peers this side is alive) while this call waits
		 * for a new one. */
		struct tp_pass_result st;

		tp__engine_pass(srv->s, NULL, &st);
		sched_yield(); /* let another accepting thread have the lock */
	}
	if (rc < 0)
		return rc;
	/* The handshake runs outside the lock: other threads go on accepting.
	 * The peer gets handshake_ms from now for its frames (it may have
	 * waited its turn); the set-up that follows is bounded by the call's
	 * deadline or, for a call without one, the session's timeout_ms: an
	 * accept may wait for ever for a peer, not on one. */
	now = tp__now_ns();
	peer_deadline = now + (int64_t)srv->s->cfg.handshake_ms * TP_NS_PER_MS;
	setup_deadline = deadline;
	if (setup_deadline == TP_NO_DEADLINE && srv->s->cfg.timeout_ms > 0)
		setup_deadline = now + (int64_t)srv->s->cfg.timeout_ms * TP_NS_PER_MS;
	if (setup_deadline < peer_deadline)
		peer_deadline = setup_deadline;
	rc = tp__handshake(srv->s, p.fd, p.peer, true, peer_deadline, setup_deadline, out);
	if (rc)
		tp__sock_close(p.fd);
	return rc;
}

int tcpx_p2p_dial(tcpx_p2p_session *s, const char *host, uint16_t port, int timeout_ms,
		  tcpx_p2p_conn **out)
{
	struct tp_redial *r = NULL;
	char peer[64];
	tp_deadline deadline;
	int fd, rc;

	if (!s || !host || !out)
		return tp__error(TCPX_P2P_EINVAL, "dial: NULL argument");
	if (s->cfg.redial_ms > 0 && !(r = tp__redial_new(host, port)))
		return TCPX_P2P_ENOMEM;
	timeout_ms = tp__session_timeout(s, timeout_ms);
	deadline = tp__deadline_ms(timeout_ms);
	rc = tp__sock_dial(host, port, timeout_ms, &fd);
	if (rc) {
		tp__redial_free(r);
		return rc;
	}
	snprintf(peer, sizeof(peer), "%s:%u", host, port);
	rc = tp__handshake(s, fd, peer, false, deadline, deadline, out);
	if (rc) {
		tp__sock_close(fd);
		tp__redial_free(r);
		return rc;
	}
	tp__restart_check(s, *out, true);
	if (r)
		tp__redial_attach(*out, r);
	return 0;
}
