/* The in-queue: the peer's announcements, worked through in stream order
 * (docs/architecture.md, "Control channel and announcements").  Each item
 * gets its chunk numbers only when this side knows what it is:
 *   SEND       matched with the oldest receive the application posted;
 *              equal totals or both fail (the bytes go to a discard item)
 *   WRITE      checked against this side's exports, then received into
 *              them by the library (an in-write), acknowledged on landing
 *   READ_RESP  received into the read that asked for it
 *   READ_REQ   (a request, not an item) once every item announced before
 *              it has landed, checked and answered with an in-read: a send
 *              item of this side's stream
 *   NOTIF      delivered once every item announced before it has landed
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/items/items.h"
#include "core/live.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/stream.h"
#include "core/pipeline/vec.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timeline.h"

/* Remote segments naming a key this side never gave the peer that a
 * connection may send before it is failed: a peer that lost track of an
 * export stops long before 2^128 guesses mean anything. */
#define TP_BAD_KEYS_MAX 8u

/* Bytes that must be received and dropped: a refused write, a send whose
 * receive had another total. */
static int discard(struct tcpx_p2p_conn *c, const struct tp_in *in)
{
	struct tcpx_p2p_xfer *x = tp__xfer_new(TP_OP_DISCARD, TP_RECV);

	if (!x)
		return tp__error(TCPX_P2P_ENOMEM, "conn: out of memory");
	c->inbound++;
	x->c = c;
	x->len = (size_t)in->len;
	x->chan0 = in->chan;
	tp__xfer_move(c, x, TP_XS_STREAMING);
	tp__stream_enqueue(c, x);
	return 0;
}

/* A send whose receive was cancelled before the send was announced: its
 * bytes go nowhere, and its sender learns why. */
static int skip_send(struct tcpx_p2p_conn *c, const struct tp_in *in)
{
	struct tcpx_p2p_xfer *x = c->unmatched.head;
	int rc;

	if (x)
		x->skip_before--;
	else
		c->unmatched_skip--;
	rc = discard(c, in);
	return rc ? rc : tp__items_send_ack(c, in->id, TP_ACK_CANCELED, 0);
}

static int on_send(struct tcpx_p2p_conn *c, const struct tp_in *in)
{
	struct tcpx_p2p_xfer *x = c->unmatched.head;
	size_t mine;
	int rc;

	if (x ? x->skip_before : c->unmatched_skip)
		return skip_send(c, in);
	mine = x->len;
	if (mine == in->len) {
		x->chan0 = in->chan;
		tp__xfer_move(c, x, TP_XS_STREAMING);
		tp__stream_enqueue(c, x);
		tp__tl_mark(TP_TL_MATCHED);
		return tp__items_send_ack(c, in->id, TP_ACK_OK, mine);
	}
	snprintf(x->why, sizeof(x->why), "the peer sent %llu bytes, this receive has %zu "
		 "(totals must match)", (unsigned long long)in->len, mine);
	tp__xfer_complete(c, x, TCPX_P2P_EPROTO);
	rc = discard(c, in);
	return rc ? rc : tp__items_send_ack(c, in->id, TP_ACK_MISMATCH, mine);
}

static int on_read_resp(struct tcpx_p2p_conn *c, const struct tp_in *in)
{
	struct tcpx_p2p_xfer *x = tp__items_find_answer(c, in->id);

	if (!x || x->op != TP_OP_READ || in->len != x->len)
		return tp__error(TCPX_P2P_EPROTO, "control channel: unexpected read response %llu "
				 "(%llu bytes)", (unsigned long long)in->id,
				 (unsigned long long)in->len);
	x->chan0 = in->chan;
	tp__xfer_move(c, x, TP_XS_STREAMING); /* the response was the answer */
	tp__stream_enqueue(c, x);
	return 0;
}

/* The library's own item for a peer's write (an in-write) or read (an
 * in-read), its segments resolved against this conn's exports.  0 and
 * *out, or *why (a refusal reason, nothing kept), or an error. */
static int inbound_item(struct tcpx_p2p_conn *c, const struct tp_in *in, enum tp_op op,
			struct tcpx_p2p_xfer **out, uint64_t *why, bool *bad_key)
{
	bool write = op == TP_OP_IN_WRITE;
	struct tcpx_p2p_xfer *x = tp__xfer_new(op, write ? TP_RECV : TP_SEND);

	if (!x)
		return tp__error(TCPX_P2P_ENOMEM, "conn: out of memory");
	x->c = c;
	x->id = in->id;
	*why = tp__items_resolve(c, in, write ? TCPX_P2P_ACCESS_WRITE : TCPX_P2P_ACCESS_READ, x, bad_key);
	if (*why) {
		tp__xfer_free(x);
		x = NULL;
	} else {
		tp__live_hosted(c, x);
	}
	*out = x;
	return 0;
}

/* A refused write or read: a key the peer was never given counts against
 * the conn, which fails past TP_BAD_KEYS_MAX of them. */
static int refused(struct tcpx_p2p_conn *c, const struct tp_in *in, uint64_t why, bool bad_key)
{
	struct tp_items *r = c->items;

	TP_DEBUG("items", "refused %s %llu from %s: %s%s",
		 in->type == TP_CTL_WRITE ? "write" : "read", (unsigned long long)in->id, c->peer,
		 tp__items_refusal(why), bad_key ? " (a key it was never given)" : "");
	if (bad_key && ++r->bad_keys > TP_BAD_KEYS_MAX)
		return tp__error(TCPX_P2P_EPROTO, "the peer named export keys this side never "
				 "gave it %u times: a connection that guesses keys is failed",
				 r->bad_keys);
	return 0;
}

static int on_write(struct tcpx_p2p_conn *c, const struct tp_in *in)
{
	struct tcpx_p2p_xfer *x;
	uint64_t why;
	bool bad_key;
	int rc = inbound_item(c, in, TP_OP_IN_WRITE, &x, &why, &bad_key);

	if (rc)
		return rc;
	if (why) {
		if (in->notif_len) /* never delivered */
			tp__items_note_gone(c, in->notif_len);
		rc = refused(c, in, why, bad_key);
		if (!rc)
			rc = discard(c, in);
		return rc ? rc : tp__items_send_ack(c, in->id, TP_ACK_REFUSED, why);
	}
	c->inbound++;
	x->chan0 = in->chan;
	tp__xfer_move(c, x, TP_XS_STREAMING);
	tp__stream_enqueue(c, x);
	return in->notif_len ? tp__items_add_note(c, x->first_seq + x->nchunks, true, in->notif,
					in->notif_len)
			     : 0;
}

int tp__items_in_write_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	int rc;

	if (x->err) { /* some chunk did not land whole (stream.c) */
		TP_DEBUG("items", "refused write %llu from %s: %s", (unsigned long long)x->id,
			 c->peer, x->why);
		tp__items_drop_note(c, x->first_seq + x->nchunks);
		rc = tp__items_send_ack(c, x->id, TP_ACK_REFUSED, TP_REFUSE_SHORT);
	} else {
		rc = tp__items_send_ack(c, x->id, TP_ACK_OK, 0);
	}
	tp__xfer_complete(c, x, 0);
	return rc;
}

static int on_read_req(struct tcpx_p2p_conn *c, const struct tp_in *in)
{
	struct tcpx_p2p_xfer *x;
	uint64_t why;
	bool bad_key;
	int rc = inbound_item(c, in, TP_OP_IN_READ, &x, &why, &bad_key);

	if (rc)
		return rc;
	if (why) {
		rc = refused(c, in, why, bad_key);
		return rc ? rc : tp__items_send_ack(c, in->id, TP_ACK_REFUSED, why);
	}
	rc = tp__items_announce(c, x, NULL, 0, NULL, 0, false);
	if (rc) {
		tp__items_end(c, x);
		tp__segs_put(c->s, x);
		tp__xfer_free(x);
		return rc;
	}
	c->inbound++;
	tp__xfer_move(c, x, TP_XS_STREAMING);
	tp__stream_enqueue(c, x);
	return 0;
}

/* Handle the head of the in-queue if it can go now: 1 = handled, 0 = it
 * waits (no receive posted; earlier items still landing), < 0 error. */
static int handle(struct tcpx_p2p_conn *c, const struct tp_in *in)
{
	int rc;

	switch (in->type) {
	case TP_CTL_SEND:
		if (!c->unmatched.head && !c->unmatched_skip)
			return 0;
		rc = on_send(c, in);
		break;
	case TP_CTL_READ_RESP:
		rc = on_read_resp(c, in);
		break;
	case TP_CTL_WRITE:
		rc = on_write(c, in);
		break;
	case TP_CTL_READ_REQ:
		if (in->cancelled) {
			rc = tp__items_send_ack(c, in->id, TP_ACK_CANCELED, 0);
			break;
		}
		/* A read sees every write announced before it. */
		if (c->dir[TP_RECV].head)
			return 0;
		rc = on_read_req(c, in);
		break;
	case TP_CTL_NOTIF:
		rc = tp__items_add_note(c, c->dir[TP_RECV].next_seq, false, in->notif, in->notif_len);
		break;
	default:
		rc = tp__error(TCPX_P2P_EINTERNAL, "control channel: message type %u queued",
			       in->type);
	}
	return rc ? rc : 1;
}

int tp__items_progress(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_items *r = c->items;
	struct tp_in *in;
	int rc;

	while ((in = r->inq)) {
		rc = handle(c, in);
		if (rc <= 0)
			return rc;
		r->inq = in->next;
		if (!r->inq)
			r->inq_tail = NULL;
		tp__items_in_free(c, in);
		c->inbound--;
		*moved = true;
	}
	rc = tp__items_notes_release(c, moved);
	return rc ? rc : tp__items_credit_out(c);
}
