/* Re-dial (redial_ms; docs/reliability.md, "Re-dialling a restarted
 * peer").  A connection made by tcpx_p2p_dial with redial_ms set is a
 * front over incarnations: the handle the application holds is the first
 * incarnation's struct, and each later one is a whole new connection, made
 * by a dial to the same address, that the handle's calls use from then on
 * (r->cur).  Nothing moves from one incarnation to the next: the failed
 * one keeps its transfers (failed, with its error), its exports and the
 * imports made on it, so that no byte or item of the old peer can land in
 * the new connection, whose control channel and comms are its own.
 *
 * A call on the handle whose current incarnation failed starts the
 * re-dial: a thread of its own dials with back-off until one succeeds or
 * redial_ms passed (then the handle stays failed with its error).  Calls
 * meanwhile return EAGAIN, never waiting on the dial.  Failed incarnations
 * stay allocated until conn_destroy of the handle: an application thread
 * may still hold one of their transfers.
 *
 * Lock order: r->mu, then an incarnation's lock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/session.h"
#include "core/setup/handshake.h"
#include "util/error.h"
#include "util/log.h"
#include "util/sock.h"
#include "util/time.h"

/* The first re-dial attempt waits this long, each next one twice its
 * predecessor's wait up to TP_REDIAL_MAX_WAIT_MS. */
#define TP_REDIAL_FIRST_WAIT_MS 10
#define TP_REDIAL_MAX_WAIT_MS 1000

struct tp_redial {
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* stop was set */
	char host[256];
	uint16_t port;
	struct tcpx_p2p_conn *cur;  /* the incarnation calls use (the handle at first) */
	struct tcpx_p2p_conn **old; /* failed incarnations other than the handle */
	int nold;
	uint32_t generation;        /* incarnations made by re-dial */
	bool dialling;              /* the thread runs an episode */
	bool gave_up;               /* redial_ms passed without a connection */
	bool stop;                  /* conn_destroy: the thread ends */
	bool joinable;              /* thread was started and not joined */
	pthread_t thread;
};

struct tp_redial *tp__redial_new(const char *host, uint16_t port)
{
	struct tp_redial *r = calloc(1, sizeof(*r));

	if (!r) {
		tp__error(TCPX_P2P_ENOMEM, "dial: out of memory for the re-dial state");
		return NULL;
	}
	if (pthread_mutex_init(&r->mu, NULL)) {
		free(r);
		tp__error(TCPX_P2P_ENOMEM, "dial: cannot create a lock");
		return NULL;
	}
	if (tp__cond_init(&r->cv)) { /* naps count on the library's clock */
		pthread_mutex_destroy(&r->mu);
		free(r);
		tp__error(TCPX_P2P_ENOMEM, "dial: cannot create a condition variable");
		return NULL;
	}
	snprintf(r->host, sizeof(r->host), "%s", host);
	r->port = port;
	return r;
}

void tp__redial_attach(struct tcpx_p2p_conn *c, struct tp_redial *r)
{
	r->cur = c;
	c->redial = r;
}

void tp__redial_free(struct tp_redial *r)
{
	if (!r)
		return;
	free(r->old);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* Wait ms or until stop (r->mu held): true if stopped. */
static bool nap(struct tp_redial *r, int64_t ms)
{
	struct timespec ts = tp__abs_time(tp__now_ns() + ms * TP_NS_PER_MS);

	while (!r->stop)
		if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT)
			break;
	return r->stop;
}

/* One attempt: a new incarnation in *out, or an error. */
static int attempt(struct tcpx_p2p_session *s, struct tp_redial *r, tp_deadline give_up,
		   struct tcpx_p2p_conn **out)
{
	tp_deadline deadline = tp__deadline_ms(s->cfg.handshake_ms);
	char peer[sizeof(r->host) + 8];
	int fd, rc;

	if (give_up < deadline)
		deadline = give_up;
	rc = tp__sock_dial(r->host, r->port, tp__deadline_left_ms(deadline), &fd);
	if (rc)
		return rc;
	snprintf(peer, sizeof(peer), "%s:%u", r->host, r->port);
	rc = tp__handshake(s, fd, peer, false, deadline, deadline, out);
	if (rc)
		tp__sock_close(fd);
	else
		tp__restart_check(s, *out, true);
	return rc;
}

/* Make the new incarnation n the handle's current one (r->mu held). */
static void swap_in(struct tcpx_p2p_conn *h, struct tp_redial *r, struct tcpx_p2p_conn *n)
{
	struct tcpx_p2p_conn *prev = r->cur;
	int64_t in_deadline;

	pthread_mutex_lock(&prev->lock);
	in_deadline = prev->alive.in_deadline_ns;
	pthread_mutex_unlock(&prev->lock);
	pthread_mutex_lock(&n->lock);
	n->alive.in_deadline_ns = in_deadline; /* the handle's setting */
	pthread_mutex_unlock(&n->lock);
	if (prev != h)
		r->old[r->nold++] = prev;
	r->cur = n;
	r->generation++;
	TP_INFO("conn", "connection to %s:%u re-established (generation %u)", r->host, r->port,
		r->generation);
}

static void *redial_thread(void *arg)
{
	struct tcpx_p2p_conn *h = arg, *n, **old;
	struct tp_redial *r = h->redial;
	struct tcpx_p2p_session *s = h->s;
	tp_deadline give_up = tp__deadline_ms(s->cfg.redial_ms);
	int64_t wait_ms = TP_REDIAL_FIRST_WAIT_MS;
	bool on_gpu;
	int rc;

	tp__conn_making(h); /* what this thread's attempts create is h's */
	/* TCPX takes its GPU from the calling thread. */
	on_gpu = !tp__session_use_gpu(s);
	pthread_mutex_lock(&r->mu);
	if (!on_gpu) {
		TP_WARN("conn", "re-dial of %s:%u: cannot select gpu %d: %s", r->host, r->port,
			s->cfg.gpu, tcpx_p2p_last_error());
		r->gave_up = true;
	}
	while (on_gpu && !nap(r, wait_ms)) {
		/* Room for the incarnation that leaves and, at conn_destroy,
		 * the current one. */
		old = realloc(r->old, (size_t)(r->nold + 2) * sizeof(*old));
		if (!old) {
			TP_WARN("conn", "re-dial of %s:%u gave up: out of memory", r->host, r->port);
			r->gave_up = true;
			break;
		}
		r->old = old;
		pthread_mutex_unlock(&r->mu);
		n = NULL;
		rc = attempt(s, r, give_up, &n);
		pthread_mutex_lock(&r->mu);
		if (!rc) {
			swap_in(h, r, n); /* even if stopped: conn_destroy destroys it */
			break;
		}
		if (tp__deadline_passed(give_up)) {
			TP_WARN("conn", "re-dial of %s:%u gave up after redial_ms %d: %s", r->host,
				r->port, s->cfg.redial_ms, tcpx_p2p_last_error());
			r->gave_up = true;
			break;
		}
		TP_DEBUG("conn", "re-dial of %s:%u: %s", r->host, r->port, tcpx_p2p_last_error());
		wait_ms = wait_ms * 2 < TP_REDIAL_MAX_WAIT_MS ? wait_ms * 2 : TP_REDIAL_MAX_WAIT_MS;
		if (tp__deadline_left_ms(give_up) < wait_ms)
			wait_ms = tp__deadline_left_ms(give_up);
	}
	r->dialling = false;
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

int tp__redial_use(struct tcpx_p2p_conn **cp, const char *call)
{
	struct tcpx_p2p_conn *h = *cp, *cur;
	struct tp_redial *r = h->redial;
	int err, rc = 0;

	if (!r)
		return 0;
	pthread_mutex_lock(&r->mu);
	cur = r->cur;
	if (!r->dialling && !r->gave_up && !r->stop) {
		pthread_mutex_lock(&cur->lock);
		err = cur->err;
		pthread_mutex_unlock(&cur->lock);
		if (err) {
			if (r->joinable)
				pthread_join(r->thread, NULL); /* it ended: dialling is false */
			r->joinable = false;
			rc = pthread_create(&r->thread, NULL, redial_thread, h);
			if (rc) {
				TP_WARN("conn", "cannot start the re-dial of %s:%u: %s", r->host,
					r->port, strerror(rc));
				r->gave_up = true;
			} else {
				TP_INFO("conn", "re-dialling %s:%u: the connection failed: %s",
					r->host, r->port, tcpx_p2p_strerror(err));
				r->joinable = true;
				r->dialling = true;
			}
		}
	}
	rc = 0;
	if (r->dialling)
		rc = tp__error(TCPX_P2P_EAGAIN, "%s: the connection to %s:%u is being "
			       "re-established (redial_ms); call again", call, r->host, r->port);
	pthread_mutex_unlock(&r->mu);
	if (!rc)
		*cp = cur;
	return rc;
}

struct tcpx_p2p_conn *tp__redial_cur(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_conn *cur;

	if (!c->redial)
		return c;
	pthread_mutex_lock(&c->redial->mu);
	cur = c->redial->cur;
	pthread_mutex_unlock(&c->redial->mu);
	return cur;
}

uint32_t tp__redial_generation(struct tcpx_p2p_conn *c)
{
	uint32_t g;

	if (!c->redial)
		return 0;
	pthread_mutex_lock(&c->redial->mu);
	g = c->redial->generation;
	pthread_mutex_unlock(&c->redial->mu);
	return g;
}

void tp__redial_end(struct tcpx_p2p_conn *c, struct tcpx_p2p_conn ***incs, int *n)
{
	struct tp_redial *r = c->redial;

	*incs = NULL;
	*n = 0;
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (r->joinable)
		pthread_join(r->thread, NULL);
	/* The thread is gone: r is this call's alone.  r->old has room for
	 * the current incarnation (made after a realloc to nold + 2). */
	if (r->cur != c)
		r->old[r->nold++] = r->cur;
	*incs = r->old;
	*n = r->nold;
	r->old = NULL;
	c->redial = NULL;
	tp__redial_free(r);
}
