/* The end of a connection (close.h): its comms closed, what it held let
 * go, its memory freed. */
#include <stdlib.h>

#include "core/close/close.h"
#include "core/conn.h"
#include "core/ctl.h"
#include "core/items/items.h"
#include "core/mr.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/pipeline/stream.h"
#include "core/pipeline/vec.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/log.h"
#include "util/sock.h"

/* After the comms are closed nothing writes into the buffers of the
 * xfers that failed with the conn: free those released, detach the rest
 * (their release frees them), and let go of their regions. */
static void drop_xfer(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	tp__segs_put(c->s, x);
	x->dlink.prev = x->dlink.next = x->wlink.prev = x->wlink.next = NULL;
	if (x->released || tp_op_internal(x->op))
		tp__xfer_free(x);
	else
		x->c = NULL;
}

static void drop_failed_xfers(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_xfer *x, *next;
	int d;

	for (x = c->unmatched.head; x; x = next) {
		next = x->wlink.next;
		tp__xlist_remove(&c->unmatched, x);
		drop_xfer(c, x);
	}
	/* An xfer waiting for an answer may also be in a chunk stream, and
	 * is dropped there: one queued (nchunks > 0) with a chunk not yet
	 * retired.  Its state says DONE now (failed), not where it was. */
	for (x = c->answers.head; x; x = next) {
		next = x->wlink.next;
		tp__xlist_remove(&c->answers, x);
		if (x->retired == x->nchunks)
			drop_xfer(c, x);
	}
	for (d = 0; d < 2; d++) {
		for (x = c->dir[d].head; x; x = next) {
			next = x->dlink.next;
			drop_xfer(c, x);
		}
		c->dir[d].head = c->dir[d].tail = NULL;
	}
}

/* The caller's xfers outlive the conn: test, wait and release then see a
 * destroyed conn, not freed memory. */
static void detach_live(struct tcpx_p2p_conn *c)
{
	for (struct tcpx_p2p_xfer *x = c->live.head, *next; x; x = next) {
		next = x->llink.next;
		x->llink.prev = x->llink.next = NULL;
		x->c = NULL;
	}
	c->live.head = c->live.tail = NULL;
}

void tp__close_drop_xfers(struct tcpx_p2p_conn *c)
{
	drop_failed_xfers(c);
	detach_live(c);
}

static void close_comm(struct tcpx_p2p_session *s, void *comm, enum tp_dir dir, bool *refused)
{
	int rc;

	tp__mr_drop_comm(s, comm);
	rc = dir == TP_SEND ? s->net->ops->close_send(s->net, comm)
			    : s->net->ops->close_recv(s->net, comm);
	*refused |= rc != 0;
}

void tp__close_finish(struct tcpx_p2p_conn *c, const char *reason)
{
	struct tcpx_p2p_session *s = c->s;
	uint32_t posted = tp__stream_inflight(c) + tp__ctl_inflight(c);
	bool refused = false;
	int i;

	/* Control-frame copies out of the bounce buffer read it until they end. */
	tp__devq_drain(s);
	for (i = 0; i < c->nchan; i++) {
		close_comm(s, c->send[i].comm, TP_SEND, &refused);
		close_comm(s, c->recv[i].comm, TP_RECV, &refused);
	}
	close_comm(s, tp__ctl_comm(c, TP_SEND), TP_SEND, &refused);
	close_comm(s, tp__ctl_comm(c, TP_RECV), TP_RECV, &refused);
	if (posted || refused) {
		__atomic_add_fetch(&s->unclean_closes, 1, __ATOMIC_RELAXED);
		TP_WARN("conn", "connection to %s closed with %u plugin requests posted%s: %s",
			c->peer[0] ? c->peer : "peer", posted,
			refused ? " (the plugin reported an error)" : "", reason);
	}
	tp__close_drop_xfers(c);
	for (i = 0; i < c->nchan; i++) {
		tp__stage_free(c->s, &c->send[i]);
		tp__stage_free(c->s, &c->recv[i]);
	}
	tp__land_destroy(c->land, c->landmr);
	if (c->closing.drain_mr)
		tp__mr_deregister(c->closing.drain_mr);
	free(c->closing.drain_buf);
	if (c->aheadmr)
		tp__mr_deregister(c->aheadmr);
	free(c->ahead);
	tp__dev_free(c->zero_dev);
	tp__ctl_destroy(c);
	tp__items_destroy(c);
	if (c->rdv_fd >= 0)
		tp__sock_close(c->rdv_fd);
	pthread_mutex_destroy(&c->rdv_lock);
	pthread_mutex_destroy(&c->lock);
	free(c->recv);
	free(c->send);
	free(c);
}
