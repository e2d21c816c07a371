/* The peer's messages on the control channel: each decoded and checked,
 * the answers to this side's items taken at once, the announcements of
 * the peer's items queued in order for inqueue.c (which says what each
 * becomes).  Every check of a peer's message happens here or there,
 * before anything is allocated for it or written anywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/items/items.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timeline.h"

const char *tp__items_refusal(uint64_t why)
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

int tp__items_create(struct tcpx_p2p_conn *c)
{
	c->items = calloc(1, sizeof(*c->items));
	return c->items ? 0 : tp__error(TCPX_P2P_ENOMEM, "conn: out of memory");
}

void tp__items_in_free(struct tcpx_p2p_conn *c, struct tp_in *in)
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
		c->stats.notifs_dropped += in->notif_len != 0;
		tp__items_in_free(c, in);
		c->inbound--;
	}
	r->inq_tail = NULL;
	while ((n = r->notes)) {
		r->notes = n->next;
		c->stats.notifs_dropped++;
		free(n);
	}
	r->notes_tail = NULL;
}

/* The peer closed (its CLOSE read, nothing failed yet): what it sent
 * before is delivered where it can be, before the failure notification.
 * A notification is deliverable when every receive item announced before
 * it has landed: those still in flight, and the announcements not yet
 * worked through, fail with the close, and a notification behind one of
 * them is dropped (tp__items_fail counts it).  A READ_REQ is no item of
 * the peer's stream: a notification behind it is still deliverable. */
void tp__items_close_notes(struct tcpx_p2p_conn *c)
{
	struct tp_items *r = c->items;
	struct tp_in *in, **pp;

	/* Announcements not worked through come after every waiting note. */
	if (!tp__items_notes_close(c))
		return;
	for (pp = &r->inq; (in = *pp);) {
		if (in->type == TP_CTL_SEND || in->type == TP_CTL_WRITE ||
		    in->type == TP_CTL_READ_RESP)
			break;
		if (in->type != TP_CTL_NOTIF) {
			pp = &in->next;
			continue;
		}
		if (tp__items_deliver(c, in->notif, in->notif_len))
			break;
		*pp = in->next;
		tp__items_in_free(c, in);
		c->inbound--;
	}
	r->inq_tail = NULL;
	for (in = r->inq; in; in = in->next)
		r->inq_tail = in;
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

struct tcpx_p2p_xfer *tp__items_find_answer(struct tcpx_p2p_conn *c, uint64_t id)
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
	struct tcpx_p2p_xfer *x = tp__items_find_answer(c, id);
	int status;

	tp__tl_mark(TP_TL_ACK_READ);
	/* A transfer answered once has left the answers list: a second
	 * answer finds nothing.  CANCELED answers a send (its receive was
	 * cancelled there) or a read this side cancelled. */
	if (!x || wire > TP_ACK_CANCELED ||
	    (x->op == TP_OP_READ && wire != TP_ACK_REFUSED && wire != TP_ACK_CANCELED) ||
	    (wire == TP_ACK_MISMATCH && x->op != TP_OP_SEND) ||
	    (wire == TP_ACK_CANCELED && x->op == TP_OP_WRITE) ||
	    (wire == TP_ACK_CANCELED && x->op == TP_OP_READ && !x->cancelled))
		return tp__error(TCPX_P2P_EPROTO, "control channel: unexpected answer %u to "
				 "transfer %llu", wire, (unsigned long long)id);
	status = wire == TP_ACK_MISMATCH ? TCPX_P2P_EPROTO
		 : wire == TP_ACK_REFUSED ? TCPX_P2P_EINVAL
		 : wire == TP_ACK_CANCELED ? TCPX_P2P_ECANCELED : 0;
	if (wire == TP_ACK_CANCELED && !x->err) {
		snprintf(x->why, sizeof(x->why), "the peer cancelled its receive");
		x->err = status;
		x->cancelled = true; /* its chunks not yet prepared go out empty */
	} else if (status && x->cancelled) {
		/* cancelled here first: the target's refusal of what landed
		 * short (a write) says nothing more */
	} else if (status) {
		if (x->op == TP_OP_SEND)
			snprintf(x->why, sizeof(x->why), "the peer's receive has %llu bytes, this "
				 "send %zu (totals must match)", (unsigned long long)value, x->len);
		else
			snprintf(x->why, sizeof(x->why), "the target refused it: %s",
				 tp__items_refusal(value));
		x->err = status;
	}
	if (x->op == TP_OP_READ) /* refused: no response will come */
		tp__xfer_complete(c, x, status);
	else if (x->state == TP_XS_STREAMING_UNANSWERED) /* its last chunk completes it */
		tp__xfer_move(c, x, TP_XS_STREAMING);
	else /* every chunk retired already */
		tp__xfer_complete(c, x, x->err);
	return 0;
}

/* The peer cancelled its read id: a request not yet served is answered
 * CANCELED when the in-queue reaches it (inqueue.c), an in-read under way
 * sends what it has not prepared empty; an id unknown or finished changes
 * nothing. */
static int on_cancel(struct tcpx_p2p_conn *c, uint64_t id)
{
	struct tcpx_p2p_xfer *x;
	struct tp_in *in;

	for (in = c->items->inq; in; in = in->next)
		if (in->type == TP_CTL_READ_REQ && in->id == id && !in->cancelled) {
			in->cancelled = true;
			return 0;
		}
	for (x = c->dir[TP_SEND].head; x; x = x->dlink.next)
		if (x->op == TP_OP_IN_READ && x->id == id && !x->cancelled) {
			x->cancelled = true;
			return 0;
		}
	/* Nothing to stop (finished, never asked, cancelled already): work for
	 * nothing, bounded as heartbeats are. */
	return tp__ctl_idle(c, "cancels of reads it is not making");
}

static int bad_msg(unsigned type, size_t len)
{
	return tp__error(TCPX_P2P_EPROTO, "control channel: malformed message (type %u, %zu bytes)",
			 type, len);
}

int tp__items_on_msg(struct tcpx_p2p_conn *c, unsigned type, unsigned chan,
		     const unsigned char *b, size_t len)
{
	struct tp_items *r = c->items;
	struct tp_in *in;
	uint64_t nseg = 0, nlen = 0;

	switch (type) {
	case TP_CTL_ACK:
		return len == 24 ? on_ack(c, b) : bad_msg(type, len);
	case TP_CTL_CREDIT:
		return len == 4 ? tp__items_on_credit(c, tp_get32(b)) : bad_msg(type, len);
	case TP_CTL_CANCEL:
		return len == 8 ? on_cancel(c, tp_get64(b)) : bad_msg(type, len);
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
	in->chan = chan;
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
	tp__items_in_free(c, in);
	return tp__error(TCPX_P2P_ENOMEM, "control channel: out of memory");
}
