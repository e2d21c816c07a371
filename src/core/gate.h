/* Posting a transfer onto its connection (gate.c): at once, or gated on
 * the caller's CUDA event.  A connection keeps one FIFO of gated
 * announcements in posting order; a pass releases its head once the head's
 * event completed, so nothing posted after a gated transfer (a transfer,
 * gated or not; a notification) is announced before it.  Receives are
 * never gated: nothing of them is announced.  The public calls post
 * (tp__gate_post, and tcpx_p2p_notify with tp_gate_append); the pass
 * releases (tp__gate_pass); conn.c and live.c fail (tp__gate_fail). */
#ifndef TP_CORE_GATE_H
#define TP_CORE_GATE_H

#include <stdbool.h>
#include <stddef.h>

struct tcpx_p2p_conn;
struct tcpx_p2p_xfer;

/* One gated announcement: what it needs once released, and what its post
 * reserved (control bytes, the notification's credits, its regions). */
struct tp_gate {
	struct tp_gate *next;
	struct tcpx_p2p_xfer *x; /* GATED; NULL: a notification (tcpx_p2p_notify) */
	void *event;             /* the caller's cudaEvent_t; NULL: waits its turn only */
	size_t bytes;            /* control bytes reserved for the announcement */
	unsigned char *rwire;    /* copies of the encoded remote segments and the notification */
	size_t nrseg;
	size_t notif_len;
	unsigned char *notif;
};

/* The conn's FIFO (c->gates); bytes count against peer_max_ctl_bytes as
 * queued control bytes do. */
struct tp_gates {
	struct tp_gate *head, *tail;
	size_t bytes;
};

static inline void tp_gate_append(struct tp_gates *q, struct tp_gate *g)
{
	g->next = NULL;
	if (q->tail)
		q->tail->next = g;
	else
		q->head = g;
	q->tail = g;
	q->bytes += g->bytes;
}

/* Post x (conn lock held, c healthy): announced and queued now, or, with
 * an event or behind a gated announcement, gated with its room reserved.
 * Either way x holds its regions.  Non-zero: nothing was taken. */
int tp__gate_post(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		  size_t notif_len, const unsigned char *rwire, size_t nrseg, void *event);
/* A pass: release the head while its event completed (an event that failed
 * fails its transfer alone, ECUDA); the head waits otherwise. */
void tp__gate_pass(struct tcpx_p2p_conn *c, bool *moved);
/* Fail gated transfer x with err (its detail from the last error), or
 * every gated one (x NULL: the conn failed or closes, err its error).
 * Nothing of them reached the wire: their regions are let go at once —
 * but for a single gated send, which keeps its place among the sends and
 * goes out in turn with every chunk empty (the peer's receive it meets
 * ends ECANCELED), ending with err when those retire. */
void tp__gate_fail(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, int err);

#endif
