/* The peer's messages on the control channel: announcements of the items
 * of its data stream, and the answers to this side's.
 *
 * The sender of a stream announces every item in stream order; the
 * receiver works through the announcements in that order (the in-queue)
 * and gives each item its chunk numbers only when it knows what it is:
 *   SEND       matched with the oldest receive the application posted;
 *              equal totals or both fail (the bytes go to a discard item)
 *   WRITE      checked against this side's exports, then received into
 *              them by the library (an in-write), acknowledged on landing
 *   READ_RESP  received into the read that asked for it
 *   READ_REQ   (a request, not an item) once every item announced before
 *              it has landed, checked and answered with an in-read: a send
 *              item of this side's stream
 *   NOTIF      delivered once every item announced before it has landed
 * Every check of a peer's message happens here, before anything is
 * allocated for it or written anywhere. */
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

static const char *refusal_text(uint64_t why)
{
	switch (why) {
	case TP_REFUSE_DENIED:
		return "no export of the target allows it (unknown, revoked or deregistered "
		       "export, or a range or access it does not give)";
	case TP_REFUSE_MIXED: return "the remote segments mix host and CUDA memory";
	case TP_REFUSE_TOTAL: return "the remote segments do not add up to the total";
	case TP_REFUSE_MEMORY: return "the target is out of memory";
	case TP_REFUSE_SHORT: return "fewer bytes arrived than the write announced";
	default: return "refused by the target";
	}
}

/* Remote segments naming a key this side never gave the peer that a
 * connection may send before it is failed: a peer that lost track of an
 * export stops long before 2^128 guesses mean anything. */
#define TP_BAD_KEYS_MAX 8u

int tp__items_create(struct tcpx_p2p_conn *c)
{
	c->items = calloc(1, sizeof(*c->items));
	return c->items ? 0 : tp__error(TCPX_P2P_ENOMEM, "conn: out of memory");
}

static void in_free(struct tcpx_p2p_conn *c, struct tp_in *in)
{
	c->items->segs -= in->nseg;
	free(in->seg);
	free(in->notif);
	free(in);
}

void tp__items_fail(struct tcpx_p2p_conn *c)
{
	struct tp_items *r = c->items;
	struct tp_in *in;
	struct tp_note *n;

	if (!r)
		return;
	while ((in = r->inq)) {
		r->inq = in->next;
		in_free(c, in);
		c->inbound--;
	}
	r->inq_tail = NULL;
	while ((n = r->notes)) {
		r->notes = n->next;
		free(n);
	}
	r->notes_tail = NULL;
}

void tp__items_destroy(struct tcpx_p2p_conn *c)
{
	/* First: delivered notifications name this conn, and notif_poll (any
	 * thread) reaches its counters through them. */
	tp__items_drop_notifs(c);
	tp__items_fail(c);
	if (c->items)
		free(c->items->exp);
	free(c->items);
	c->items = NULL;
}

bool tp__items_busy(const struct tcpx_p2p_conn *c)
{
	return c->items->inq || c->items->notes;
}

static struct tp_wseg get_seg(const unsigned char *p)
{
	struct tp_wseg g;

	g.idx = tp_get32(p);
	memcpy(g.key, p + 8, TP_KEY_BYTES);
	g.off = tp_get64(p + 8 + TP_KEY_BYTES);
	g.len = tp_get64(p + 16 + TP_KEY_BYTES);
	return g;
}

static struct tcpx_p2p_xfer *find_answer(struct tcpx_p2p_conn *c, uint64_t id)
{
	struct tcpx_p2p_xfer *x;

	for (x = c->answers.head; x; x = x->wlink.next)
		if (x->id == id)
			return x;
	return NULL;
}

static int on_ack(struct tcpx_p2p_conn *c, const unsigned char *b)
{
	uint64_t id = tp_get64(b), value = tp_get64(b + 16);
	uint32_t wire = tp_get32(b + 8);
	struct tcpx_p2p_xfer *x = find_answer(c, id);
	int status;

	if (!x || wire > TP_ACK_REFUSED || (x->op == TP_OP_READ && wire != TP_ACK_REFUSED) ||
	    (x->op != TP_OP_READ && x->acked) ||
	    (wire == TP_ACK_MISMATCH && x->op != TP_OP_SEND))
		return tp__error(TCPX_P2P_EPROTO, "control channel: unexpected answer %u to "
				 "transfer %llu", wire, (unsigned long long)id);
	status = wire == TP_ACK_MISMATCH ? TCPX_P2P_EPROTO
		 : wire == TP_ACK_REFUSED ? TCPX_P2P_EINVAL : 0;
	if (status) {
		if (x->op == TP_OP_SEND)
			snprintf(x->why, sizeof(x->why), "the peer's receive has %llu bytes, this "
				 "send %zu (totals must match)", (unsigned long long)value, x->len);
		else
			snprintf(x->why, sizeof(x->why), "the target refused it: %s",
				 refusal_text(value));
		x->err = status;
	}
	if (x->op == TP_OP_READ) { /* refused: no response will come */
		tp__xlist_remove(&c->answers, x);
		tp__xfer_complete(c, x, status);
		return 0;
	}
	x->acked = true;
	if (x->chunks_done) {
		tp__xlist_remove(&c->answers, x);
		tp__xfer_complete(c, x, x->err);
	}
	return 0;
}

static int bad_msg(unsigned type, size_t len)
{
	return tp__error(TCPX_P2P_EPROTO, "control channel: malformed message (type %u, %zu bytes)",
			 type, len);
}

int tp__items_on_msg(struct tcpx_p2p_conn *c, unsigned type, const unsigned char *b, size_t len)
{
	struct tp_items *r = c->items;
	struct tp_in *in;
	uint64_t nseg = 0, nlen = 0;

	switch (type) {
	case TP_CTL_ACK:
		return len == 24 ? on_ack(c, b) : bad_msg(type, len);
	case TP_CTL_CREDIT:
		return len == 4 ? tp__items_on_credit(c, tp_get32(b)) : bad_msg(type, len);
	case TP_CTL_HEARTBEAT:
		return tp__live_on_heartbeat(c, len);
	case TP_CTL_SEND:
	case TP_CTL_READ_RESP:
		if (len != 16)
			return bad_msg(type, len);
		break;
	case TP_CTL_WRITE:
	case TP_CTL_READ_REQ:
		if (len < 24)
			return bad_msg(type, len);
		nseg = tp_get32(b + 16);
		nlen = tp_get32(b + 20);
		if (nlen > (uint64_t)c->s->cfg.notif_max_bytes || (type == TP_CTL_READ_REQ && nlen) ||
		    len != 24 + nseg * TP_WSEG_BYTES + nlen)
			return bad_msg(type, len);
		break;
	case TP_CTL_NOTIF:
		if (len < 4)
			return bad_msg(type, len);
		nlen = tp_get32(b);
		if (!nlen || nlen > (uint64_t)c->s->cfg.notif_max_bytes || len != 4 + nlen)
			return bad_msg(type, len);
		break;
	default:
		return bad_msg(type, len);
	}
	if (type != TP_CTL_NOTIF && tp_get64(b + 8) > TP_CTL_LEN_MAX)
		return tp__error(TCPX_P2P_EPROTO, "control channel: the peer announced a "
				 "transfer of %llu bytes", (unsigned long long)tp_get64(b + 8));
	if (c->inbound >= (uint32_t)c->s->cfg.peer_max_items)
		return tp__error(TCPX_P2P_EPROTO, "control channel: the peer has more than %d "
				 "transfers outstanding here (peer_max_items)",
				 c->s->cfg.peer_max_items);
	if (r->segs + nseg > (uint64_t)c->s->cfg.peer_max_segments)
		return tp__error(TCPX_P2P_EPROTO, "control channel: the peer's transfers would "
				 "hold %llu remote segments here (peer_max_segments %d)",
				 (unsigned long long)(r->segs + nseg), c->s->cfg.peer_max_segments);
	if (nlen) {
		int rc = tp__items_note_arrives(c, (size_t)nlen);

		if (rc)
			return rc;
	}
	in = calloc(1, sizeof(*in));
	if (!in)
		return tp__error(TCPX_P2P_ENOMEM, "control channel: out of memory");
	in->type = type;
	if (type != TP_CTL_NOTIF) {
		in->id = tp_get64(b);
		in->len = tp_get64(b + 8);
	}
	in->notif_len = (uint32_t)nlen;
	if (nseg && !(in->seg = malloc(nseg * sizeof(*in->seg))))
		goto nomem;
	if (nlen && !(in->notif = malloc(nlen)))
		goto nomem;
	in->nseg = (uint32_t)nseg;
	r->segs += nseg; /* counted from here: in_free gives them back */
	for (uint64_t i = 0; i < nseg; i++)
		in->seg[i] = get_seg(b + 24 + i * TP_WSEG_BYTES);
	if (nlen)
		memcpy(in->notif, type == TP_CTL_NOTIF ? b + 4 : b + 24 + nseg * TP_WSEG_BYTES, nlen);
	if (r->inq_tail)
		r->inq_tail->next = in;
	else
		r->inq = in;
	r->inq_tail = in;
	c->inbound++;
	return 0;
nomem:
	in_free(c, in);
	return tp__error(TCPX_P2P_ENOMEM, "control channel: out of memory");
}

/* Bytes that must be received and dropped: a refused write, a send whose
 * receive had another total. */
static int discard(struct tcpx_p2p_conn *c, uint64_t len)
{
	struct tcpx_p2p_xfer *x = tp__xfer_new(TP_OP_DISCARD, TP_RECV);

	if (!x)
		return tp__error(TCPX_P2P_ENOMEM, "conn: out of memory");
	c->inbound++;
	x->c = c;
	x->len = (size_t)len;
	tp__stream_enqueue(c, x);
	return 0;
}

static int on_send(struct tcpx_p2p_conn *c, const struct tp_in *in)
{
	struct tcpx_p2p_xfer *x = c->unmatched.head;
	size_t mine = x->len;
	int rc;

	tp__xlist_remove(&c->unmatched, x);
	if (mine == in->len) {
		tp__stream_enqueue(c, x);
		return tp__items_send_ack(c, in->id, TP_ACK_OK, mine);
	}
	snprintf(x->why, sizeof(x->why), "the peer sent %llu bytes, this receive has %zu "
		 "(totals must match)", (unsigned long long)in->len, mine);
	tp__xfer_complete(c, x, TCPX_P2P_EPROTO);
	rc = discard(c, in->len);
	return rc ? rc : tp__items_send_ack(c, in->id, TP_ACK_MISMATCH, mine);
}

static int on_read_resp(struct tcpx_p2p_conn *c, const struct tp_in *in)
{
	struct tcpx_p2p_xfer *x = find_answer(c, in->id);

	if (!x || x->op != TP_OP_READ || in->len != x->len)
		return tp__error(TCPX_P2P_EPROTO, "control channel: unexpected read response %llu "
				 "(%llu bytes)", (unsigned long long)in->id,
				 (unsigned long long)in->len);
	tp__xlist_remove(&c->answers, x);
	x->need_ack = false; /* the response was the answer */
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
		 refusal_text(why), bad_key ? " (a key it was never given)" : "");
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
			rc = discard(c, in->len);
		return rc ? rc : tp__items_send_ack(c, in->id, TP_ACK_REFUSED, why);
	}
	c->inbound++;
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
	rc = tp__items_announce(c, x, NULL, 0, NULL, 0);
	if (rc) {
		tp__items_end(c, x);
		tp__segs_put(c->s, x);
		tp__xfer_free(x);
		return rc;
	}
	c->inbound++;
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
		if (!c->unmatched.head)
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
		in_free(c, in);
		c->inbound--;
		*moved = true;
	}
	rc = tp__items_notes_release(c, moved);
	return rc ? rc : tp__items_credit_out(c);
}
