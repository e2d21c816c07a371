/* Posting a transfer onto its connection: announced at once, or gated on
 * the caller's CUDA event (gate.h).  Announcements are matched by the peer
 * in the order they arrive (two-sided matching, one-sided ordering), so a
 * gated one holds back everything posted after it on the conn: the conn's
 * FIFO of gates, whose head a pass releases once its event completed.  A
 * post takes everything it could be refused for (control bytes, credits,
 * the segment bounds) at once, so a caller's flow control is the same with
 * or without an event; what only the pass finds (the event failed) fails
 * that transfer alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/gate.h"
#include "core/items/items.h"
#include "core/pipeline/stream.h"
#include "core/pipeline/vec.h"
#include "core/xfer.h"
#include "device/tp_device.h"
#include "util/error.h"
#include "util/log.h"
#include "util/time.h"

/* x announced: on the lists its state names. */
static void queue(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	switch (x->op) {
	case TP_OP_RECV: /* streams once the peer's send is announced */
		/* after the peer's sends that receives cancelled before it owned */
		x->skip_before = c->unmatched_skip;
		c->unmatched_skip = 0;
		tp__xfer_move(c, x, TP_XS_UNMATCHED);
		break;
	case TP_OP_READ: /* streams once the target's response is announced */
		tp__xfer_move(c, x, TP_XS_UNANSWERED);
		break;
	default: /* a send or write: streams now, answered by the peer */
		tp__xfer_move(c, x, TP_XS_STREAMING_UNANSWERED);
		tp__stream_enqueue(c, x);
	}
}

/* Gate x: its announcement's room and credits reserved, its arguments
 * copied (the caller's may go once the post returns). */
static int gate(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		size_t notif_len, const unsigned char *rwire, size_t nrseg, void *event)
{
	struct tp_gate *g;
	int rc = tp__items_room(c, x, notif_len, nrseg);

	if (rc)
		return rc;
	g = calloc(1, sizeof(*g) + nrseg * TP_WSEG_BYTES + notif_len);
	if (!g)
		return tp__error(TCPX_P2P_ENOMEM, "post: out of memory");
	g->x = x;
	g->event = event;
	g->bytes = tp__items_announce_bytes(x, notif_len, nrseg);
	g->rwire = (unsigned char *)(g + 1);
	g->nrseg = nrseg;
	if (nrseg)
		memcpy(g->rwire, rwire, nrseg * TP_WSEG_BYTES);
	g->notif = g->rwire + nrseg * TP_WSEG_BYTES;
	g->notif_len = notif_len;
	if (notif_len) {
		memcpy(g->notif, notif, notif_len);
		tp__items_notif_spend(c, notif_len);
	}
	tp__xfer_move(c, x, TP_XS_GATED);
	tp_gate_append(&c->gates, g);
	return 0;
}

int tp__gate_post(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		  size_t notif_len, const unsigned char *rwire, size_t nrseg, void *event)
{
	/* A receive announces nothing: no gate, and none to wait behind. */
	bool gated = x->op != TP_OP_RECV && (event || c->gates.head);
	int rc = gated ? gate(c, x, notif, notif_len, rwire, nrseg, event)
		       : tp__items_announce(c, x, notif, notif_len, rwire, nrseg, false);

	if (rc)
		return rc;
	tp__segs_get(c->s, x); /* its regions held from the post, gated or not */
	if (!gated)
		queue(c, x);
	return 0;
}

static void unlink_gate(struct tcpx_p2p_conn *c, struct tp_gate *g, struct tp_gate *prev)
{
	if (prev)
		prev->next = g->next;
	else
		c->gates.head = g->next;
	if (c->gates.tail == g)
		c->gates.tail = prev;
	c->gates.bytes -= g->bytes;
}

/* g left the FIFO without going out: what its post took is given back,
 * its transfer (if any) ends with err; why: its own detail (NULL: the
 * conn's). */
static void end_unsent(struct tcpx_p2p_conn *c, struct tp_gate *g, int err, const char *why)
{
	struct tcpx_p2p_xfer *x = g->x;

	if (g->notif_len)
		tp__items_notif_refund(c, g->notif_len);
	if (!x) {
		if (why)
			TP_WARN("gate", "a notification to %s behind a gated transfer was dropped: "
				"%s", c->peer[0] ? c->peer : "the peer", why);
	} else {
		tp__segs_put(c->s, x);
		x->err = err;
		if (why)
			snprintf(x->why, sizeof(x->why), "%s", why);
		tp__xfer_mark_done(c, x);
		c->completed++;
	}
	free(g);
}

/* The head's event completed: announce it as its post would have. */
static int release(struct tcpx_p2p_conn *c, struct tp_gate *g)
{
	struct tcpx_p2p_xfer *x = g->x;
	int rc;

	if (!x)
		return tp__items_notif_msg(c, g->notif, g->notif_len);
	rc = tp__items_announce(c, x, g->notif, g->notif_len, g->rwire, g->nrseg, true);
	if (rc)
		return rc;
	/* Stalls count from here: waiting for its event is not the network's. */
	x->t_moved = tp__now_ns();
	queue(c, x);
	return 0;
}

/* A gated send that will not carry its bytes (its event failed, it was
 * cancelled, it passed its deadline) still takes its place among the
 * sends: the k-th send meets the peer's k-th receive, so dropping it
 * unannounced would hand its receive the next send's bytes.  It goes out
 * in turn with every chunk empty, which ends the peer's receive with
 * ECANCELED, and ends here with err. */
static void send_empty(struct tp_gate *g, int err, const char *why)
{
	struct tcpx_p2p_xfer *x = g->x;

	g->event = NULL;
	x->cancelled = true;
	if (!x->err) {
		x->err = err;
		snprintf(x->why, sizeof(x->why), "%s", why);
	}
}

void tp__gate_pass(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_gate *g;
	char why[sizeof(g->x->why)];
	int done, rc;

	while ((g = c->gates.head)) {
		done = 1;
		rc = g->event ? tp__dev_user_event_query(g->event, &done) : 0;
		if (!rc && !done)
			return;
		if (rc) {
			snprintf(why, sizeof(why), "the CUDA event %p it was posted on failed: %s",
				 g->event, tcpx_p2p_last_error());
			TP_INFO("gate", "a transfer to %s: %s", c->peer[0] ? c->peer : "the peer",
				why);
			if (g->x && g->x->op == TP_OP_SEND) {
				send_empty(g, rc, why); /* and released below, in turn */
			} else {
				unlink_gate(c, g, NULL);
				*moved = true;
				end_unsent(c, g, rc, why);
				continue;
			}
		}
		unlink_gate(c, g, NULL);
		*moved = true;
		rc = release(c, g);
		if (rc) {
			snprintf(why, sizeof(why), "%s", tcpx_p2p_last_error());
			end_unsent(c, g, rc, why);
			continue;
		}
		free(g);
	}
}

void tp__gate_fail(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, int err)
{
	struct tp_gate *g, *prev = NULL, *next;
	char why[sizeof(x->why)];

	/* One transfer: its own detail; all of them: the conn's. */
	if (x)
		snprintf(why, sizeof(why), "%s", tcpx_p2p_last_error());

	for (g = c->gates.head; g; g = next) {
		next = g->next;
		if (x && g->x != x) {
			prev = g;
			continue;
		}
		if (x && x->op == TP_OP_SEND) { /* keeps its place (send_empty) */
			send_empty(g, err, why);
			return;
		}
		unlink_gate(c, g, prev);
		end_unsent(c, g, err, x ? why : NULL);
	}
}
