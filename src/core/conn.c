/* Connections: nchan channels, each a plugin send comm and recv comm;
 * creating one and failing one (its public calls: api/conn.c; closing
 * one: close/). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/conn.h"
#include "core/gate.h"
#include "core/ctl.h"
#include "core/items/items.h"
#include "core/mr.h"
#include "core/pass.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/time.h"

static void init_comm(struct tp_comm *cm, void *comm, enum tp_dir dir, int window)
{
	memset(cm, 0, sizeof(*cm));
	cm->comm = comm;
	cm->dir = dir;
	cm->win.limit = (uint32_t)window;
}

/* TCPX's data sockets are steered into its device bounce buffer: the
 * kernel answers a plain recv() on them with EFAULT, so the plugin may be
 * handed device memory only, even for bytes bound for host memory.  Such
 * receives post into this landing buffer (one chunk of device memory; the
 * plugin writes nothing there) and are unpacked from the bounce pages into
 * their host destination. */
static int land_create(struct tcpx_p2p_conn *c)
{
	size_t bytes = (c->s->cfg.chunk_bytes + 4095) & ~(size_t)4095;
	bool dev = false;

	for (int i = 0; i < c->nchan; i++)
		dev |= c->recv[i].bounce_on_device;
	return dev ? tp__land_create(c->s, bytes, &c->land, &c->landmr) : 0;
}

static void land_destroy(struct tcpx_p2p_conn *c)
{
	tp__land_destroy(c->land, c->landmr);
	c->landmr = NULL;
	c->land = NULL;
}

/* The handle whose re-dial the calling thread runs (setup/redial.c): a
 * conn created on that thread is the handle's next incarnation from its
 * creation, so that a notification its peer sends at once already names
 * the handle. */
static __thread struct tcpx_p2p_conn *making;

void tp__conn_making(struct tcpx_p2p_conn *front)
{
	making = front;
}

int tp__conn_create(struct tcpx_p2p_session *s, int nchan, void **send_comms,
		    void **recv_comms, const ncclNetDeviceHandle_v7_t *devh,
		    struct tcpx_p2p_conn **out)
{
	struct tcpx_p2p_conn *c;
	int64_t now;
	int i, rc;

	c = calloc(1, sizeof(*c));
	if (!c)
		return tp__error(TCPX_P2P_ENOMEM, "conn: out of memory");
	c->send = calloc((size_t)nchan, sizeof(*c->send));
	c->recv = calloc((size_t)nchan, sizeof(*c->recv));
	if (!c->send || !c->recv) {
		rc = tp__error(TCPX_P2P_ENOMEM, "conn: out of memory");
		goto free_conn;
	}
	if (pthread_mutex_init(&c->lock, NULL)) {
		rc = tp__error(TCPX_P2P_ENOMEM, "conn: mutex init failed");
		goto free_conn;
	}
	if (pthread_mutex_init(&c->rdv_lock, NULL)) {
		rc = tp__error(TCPX_P2P_ENOMEM, "conn: mutex init failed");
		goto destroy_lock;
	}
	c->s = s;
	c->front = making; /* before any pass or notification sees c */
	c->nchan = nchan - 1; /* the last channel is the control channel */
	c->rdv_fd = -1;
	rc = tp__items_create(c);
	if (!rc)
		rc = tp__ctl_create(c, send_comms[c->nchan], recv_comms[c->nchan], &devh[c->nchan]);
	if (rc)
		goto free_ctl;
	for (i = 0; i < c->nchan; i++) {
		init_comm(&c->send[i], send_comms[i], TP_SEND, s->cfg.send_window);
		init_comm(&c->recv[i], recv_comms[i], TP_RECV, s->cfg.recv_window);
		c->send[i].next_seq = (uint64_t)i;
		c->recv[i].next_seq = (uint64_t)i;
		c->recv[i].devh = devh[i];
		rc = tp__unpack_prepare(s, &c->recv[i]);
		if (rc)
			goto free_ctl;
	}
	rc = land_create(c);
	if (rc)
		goto free_ctl;
	now = tp__now_ns();
	c->alive = (struct tp_live){ .heard_ns = now, .said_ns = now, .pass_ns = now,
				     .idle_tokens = TP_IDLE_BURST, .idle_ns = now };
	pthread_mutex_lock(&s->lock);
	s->nconns++;
	pthread_mutex_unlock(&s->lock);
	*out = c;
	return 0;

free_ctl:
	land_destroy(c);
	tp__ctl_destroy(c);
	tp__items_destroy(c);
	pthread_mutex_destroy(&c->rdv_lock);
destroy_lock:
	pthread_mutex_destroy(&c->lock);
free_conn:
	free(c->recv);
	free(c->send);
	free(c);
	return rc;
}

/* Every pending xfer completes with err.  They stay listed, and keep their
 * regions busy, until conn_destroy has closed the comms: until then the
 * plugin (or a queued unpack) may still write into their buffers. */
static void fail_one(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, int err)
{
	if (tp_op_internal(x->op) || x->state == TP_XS_DONE)
		return;
	c->completed++;
	x->err = err;
	x->conn_failed = true;
	tp__xfer_mark_done(c, x);
}

void tp__conn_cancel(struct tcpx_p2p_conn *c, int err)
{
	struct tcpx_p2p_xfer *x;
	int d;

	c->err = err;
	/* Gated ones never reached the wire: they let go of their regions now. */
	tp__gate_fail(c, NULL, err);
	for (d = 0; d < 2; d++)
		for (x = c->dir[d].head; x; x = x->dlink.next)
			fail_one(c, x, err);
	/* Receives not matched yet and transfers waiting for an answer; like
	 * the others they keep their regions until conn_destroy. */
	for (x = c->unmatched.head; x; x = x->wlink.next)
		fail_one(c, x, err);
	for (x = c->answers.head; x; x = x->wlink.next)
		fail_one(c, x, err);
	while ((x = c->settling.head)) {
		c->completed++;
		tp__xfer_mark_done(c, x);
	}
	tp__items_fail(c);
}

int tp__conn_fail(struct tcpx_p2p_conn *c, int err)
{
	if (c->err)
		return c->err;
	snprintf(c->why, sizeof(c->why), "%s", tcpx_p2p_last_error());
	TP_WARN("conn", "connection to %s failed: %s (%s)", c->peer[0] ? c->peer : "peer",
		tcpx_p2p_strerror(err), c->why);
	tp__conn_cancel(c, err);
	/* A target that only polls notifications hears of it there too. */
	tp__items_tell_failed(c);
	return err;
}

void tp__conn_peer_gone(struct tcpx_p2p_conn *c)
{
	snprintf(c->why, sizeof(c->why), "the peer closed the connection");
	TP_INFO("conn", "%s closed the connection", c->peer[0] ? c->peer : "the peer");
	/* What it notified before its CLOSE comes first. */
	tp__items_close_notes(c);
	tp__conn_cancel(c, TCPX_P2P_ECLOSED);
	tp__items_tell_failed(c);
}
