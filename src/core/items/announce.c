/* What this side puts on the control stream for its data stream: an
 * announcement of every item before its bytes flow, and the answers the
 * peer's announcements get. */
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/gate.h"
#include "core/items/items.h"
#include "core/pipeline/stream.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"

/* Room in the outgoing control stream.  An answer the peer's messages
 * caused (an ack, a read's response) may take it up to peer_max_ctl_bytes;
 * beyond that the peer is not reading what it asked for, and the conn
 * fails.  This side's own announcements stop at half of it (EAGAIN), which
 * leaves the answers their room whatever the application posts. */
static int answer_room(struct tcpx_p2p_conn *c)
{
	size_t max = c->s->cfg.peer_max_ctl_bytes;

	if (tp__ctl_out_bytes(c) <= max)
		return 0;
	return tp__error(TCPX_P2P_EPROTO, "control channel: %zu bytes of answers wait for the "
			 "peer, which does not read them (peer_max_ctl_bytes %zu)",
			 tp__ctl_out_bytes(c), max);
}

/* Room for this side's own message of `bytes` (header included): EAGAIN
 * where it would take the stream past half of peer_max_ctl_bytes (the
 * answers keep the other half), EINVAL where it alone is more than that.
 * Gated announcements count as queued: their room was taken at the post. */
static int own_room(struct tcpx_p2p_conn *c, const char *what, size_t bytes)
{
	size_t max = c->s->cfg.peer_max_ctl_bytes / 2,
	       queued = tp__ctl_out_bytes(c) + c->gates.bytes;

	if (bytes > max)
		return tp__error(TCPX_P2P_EINVAL, "%s: a control message of %zu bytes; at most half "
				 "of peer_max_ctl_bytes (%zu; 40 bytes per remote segment)", what,
				 bytes, max);
	if (queued + bytes <= max)
		return 0;
	return tp__error(TCPX_P2P_EAGAIN, "%s: %zu control bytes wait for the peer (half of "
			 "peer_max_ctl_bytes): drive progress and post again", what, queued);
}

int tp__items_send_ack(struct tcpx_p2p_conn *c, uint64_t id, enum tp_ack_status status,
		       uint64_t value)
{
	unsigned char *m;
	int rc = answer_room(c);

	if (!rc)
		rc = tp__ctl_msg(c, TP_CTL_ACK, 24, &m);
	if (rc)
		return rc;
	tp_put64(m, id);
	tp_put32(m + 8, status);
	tp_put32(m + 12, 0);
	tp_put64(m + 16, value);
	return 0;
}

int tp__items_send_cancel(struct tcpx_p2p_conn *c, uint64_t id)
{
	unsigned char *m;
	int rc = answer_room(c);

	if (!rc)
		rc = tp__ctl_msg(c, TP_CTL_CANCEL, 8, &m);
	if (rc)
		return rc;
	tp_put64(m, id);
	return 0;
}

size_t tp__items_announce_bytes(const struct tcpx_p2p_xfer *x, size_t notif_len, size_t nrseg)
{
	if (x->op == TP_OP_RECV)
		return 0;
	return TP_CTL_MSG_HDR + (x->op == TP_OP_WRITE || x->op == TP_OP_READ
					 ? 24 + nrseg * TP_WSEG_BYTES + notif_len
					 : 16);
}

int tp__items_room(struct tcpx_p2p_conn *c, const struct tcpx_p2p_xfer *x, size_t notif_len,
		   size_t nrseg)
{
	/* The message this side queues: an in-read's response is an answer. */
	size_t bytes = tp__items_announce_bytes(x, notif_len, nrseg);
	int rc = x->op == TP_OP_IN_READ ? answer_room(c)
		 : x->op == TP_OP_RECV	 ? 0
					 : own_room(c, "post", bytes);

	if (rc)
		return rc;
	if (nrseg > (TP_CTL_MSG_MAX - 24 - TCPX_P2P_NOTIF_LIMIT) / TP_WSEG_BYTES)
		return tp__error(TCPX_P2P_EINVAL, "%zu remote segments in one transfer (at most %u)",
				 nrseg, (TP_CTL_MSG_MAX - 24 - TCPX_P2P_NOTIF_LIMIT) / TP_WSEG_BYTES);
	if (nrseg > (size_t)c->s->cfg.peer_max_segments)
		return tp__error(TCPX_P2P_EINVAL, "%zu remote segments in one transfer: more than "
				 "a peer may hold (peer_max_segments %d, which should match the "
				 "peer's)", nrseg, c->s->cfg.peer_max_segments);
	if (notif_len)
		return tp__items_notif_room(c, "write", notif_len);
	return 0;
}

/* The message that announces x: SEND {id, len} and READ_RESP {id, len}
 * name the next item of this side's stream; WRITE {id, len, nseg,
 * notif_len, segs, notif} and READ_REQ {id, len, nseg, 0, segs} carry the
 * remote segments, encoded once where the post checked them.  0 for what
 * announces nothing: a receive, and the library's in-writes and discards. */
static enum tp_ctl_type announce_type(enum tp_op op)
{
	switch (op) {
	case TP_OP_SEND:
		return TP_CTL_SEND;
	case TP_OP_WRITE:
		return TP_CTL_WRITE;
	case TP_OP_READ:
		return TP_CTL_READ_REQ;
	case TP_OP_IN_READ:
		return TP_CTL_READ_RESP;
	default:
		return 0;
	}
}

int tp__items_announce(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		       size_t notif_len, const unsigned char *rwire, size_t nrseg, bool reserved)
{
	enum tp_ctl_type type = announce_type(x->op);
	bool segs = type == TP_CTL_WRITE || type == TP_CTL_READ_REQ;
	unsigned chan = 0;
	unsigned char *m;
	int rc = reserved ? 0 : tp__items_room(c, x, notif_len, nrseg);

	if (rc || !type)
		return rc;
	if (type != TP_CTL_WRITE)
		notif_len = 0; /* only a write carries a notification */
	/* The items of this side's stream (a send, a write, an in-read) are
	 * numbered right after, under the same hold of the conn lock, from
	 * the channel announced; a read's request names no channel. */
	if (type != TP_CTL_READ_REQ)
		chan = x->chan0 = tp__stream_start(c);
	if (type != TP_CTL_READ_RESP) /* a response keeps the peer's id */
		x->id = ++c->next_id;
	rc = tp__ctl_item_msg(c, type, chan,
			      tp__items_announce_bytes(x, notif_len, nrseg) - TP_CTL_MSG_HDR, &m);
	if (rc)
		return rc;
	tp_put64(m, x->id);
	tp_put64(m + 8, x->len);
	if (segs) {
		tp_put32(m + 16, (uint32_t)nrseg);
		tp_put32(m + 20, (uint32_t)notif_len);
		if (nrseg)
			memcpy(m + 24, rwire, nrseg * TP_WSEG_BYTES);
		if (notif_len)
			memcpy(m + 24 + nrseg * TP_WSEG_BYTES, notif, notif_len);
	}
	if (notif_len && !reserved)
		tp__items_notif_spend(c, notif_len);
	return 0;
}

int tp__items_notif_msg(struct tcpx_p2p_conn *c, const void *msg, size_t len)
{
	unsigned char *m;
	int rc = tp__ctl_msg(c, TP_CTL_NOTIF, 4 + len, &m);

	if (rc)
		return rc;
	tp_put32(m, (uint32_t)len);
	memcpy(m + 4, msg, len);
	return 0;
}

/* Behind gated announcements a notification waits its turn (gate.h). */
static int notify_gated(struct tcpx_p2p_conn *c, const void *msg, size_t len)
{
	struct tp_gate *g = calloc(1, sizeof(*g) + len);

	if (!g)
		return tp__error(TCPX_P2P_ENOMEM, "notify: out of memory");
	g->bytes = TP_CTL_MSG_HDR + 4 + len;
	g->notif = (unsigned char *)(g + 1);
	g->notif_len = len;
	memcpy(g->notif, msg, len);
	tp_gate_append(&c->gates, g);
	return 0;
}

int tp__items_notify(struct tcpx_p2p_conn *c, const void *msg, size_t len)
{
	int rc;

	if ((rc = own_room(c, "notify", TP_CTL_MSG_HDR + 4 + len)) ||
	    (rc = tp__items_notif_room(c, "notify", len)))
		return rc; /* EAGAIN: the peer has not taken what waits for it */
	rc = c->gates.head ? notify_gated(c, msg, len) : tp__items_notif_msg(c, msg, len);
	if (!rc)
		tp__items_notif_spend(c, len); /* gated or not: spent at the post */
	return rc;
}
