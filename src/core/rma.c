/* What the control channel carries: announcements of the items of each
 * data stream, and the one-sided transfers and notifications built on them.
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
#include <sys/random.h>

#include "core/ctl.h"
#include "util/error.h"
#include "util/log.h"

#define TP_RDESC_MAGIC 0x52585054u /* "TPXR" */
#define TP_RDESC_VERSION 2u /* 2: 128-bit keys */
/* A descriptor: u32 magic, u8 version, u8 memory type, u8 access, u8 0,
 * u32 export index, u32 0, u64 length, the key, zeros to 64 bytes. */
#define TP_RDESC_KEY 24

/* An answer's status on the wire (its own numbers, not the API's). */
enum tp_ack_status {
	TP_ACK_OK = 0,
	TP_ACK_MISMATCH = 1, /* a send's total differs from the receive's: value = the receive's */
	TP_ACK_REFUSED = 2,  /* a one-sided transfer refused: value = enum tp_refusal */
};

/* Why a target refused a one-sided transfer (the ack's value).  Every
 * reason a peer could learn something from by probing (does this export
 * exist, is this its key, how long is it, what does it allow, is it still
 * there) is one answer. */
enum tp_refusal {
	TP_REFUSE_DENIED = 1, /* no live export of the target allows it */
	TP_REFUSE_MIXED = 2,  /* host and CUDA exports in one transfer */
	TP_REFUSE_TOTAL = 3,  /* segment lengths do not add up to the total */
	TP_REFUSE_MEMORY = 4, /* the target had no memory for the segment list */
	TP_REFUSE_SHORT = 5,  /* fewer bytes arrived than the write announced */
};

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

struct tp_export {
	uint64_t mr_id;   /* looked up at each use: deregistration revokes */
	size_t off, len;  /* the exported range of the region */
	unsigned char key[TP_KEY_BYTES];
	unsigned access;
	int type;
	bool revoked;     /* tcpx_p2p_mr_unexport */
	/* resolve(): the message that last named it, and its region then */
	uint64_t stamp;
	struct tcpx_p2p_mr *mr;
};

struct tp_in {
	unsigned type;
	uint64_t id, len;
	uint32_t nseg;
	struct tp_wseg *seg;
	uint32_t notif_len;
	unsigned char *notif;
	struct tp_in *next;
};

/* A notification waiting until every receive item below mark landed;
 * of_write: it came with in-write `write` (and is dropped if that fails). */
struct tp_note {
	uint64_t mark;
	uint64_t write;
	bool of_write;
	size_t len;
	struct tp_note *next;
	unsigned char msg[];
};

/* A conn's one-sided state.  What the peer makes this side hold is
 * counted against the session's peer_max_* settings: segs (remote segments
 * of queued announcements and of accepted items), notes_n (notifications
 * waiting for their data) and delivered (in the session's queue, guarded by
 * s->notif_lock). */
struct tp_rma {
	struct tp_export *exp;
	uint32_t nexp, cap;
	struct tp_in *inq, *inq_tail;
	struct tp_note *notes, *notes_tail;
	uint64_t segs;
	uint32_t notes_n, delivered;
	uint32_t bad_keys;
	uint64_t stamp;   /* resolve() calls so far */
	bool failed_told; /* the conn's failure is in the session's notification queue */
};

struct tcpx_p2p_rmr {
	struct tcpx_p2p_conn *c;
	uint32_t idx;
	unsigned char key[TP_KEY_BYTES];
	size_t len;
	int type;
	unsigned access;
};

/* A delivered notification in the session's queue. */
struct tp_notif_node {
	struct tcpx_p2p_conn *c;
	size_t len;
	struct tp_notif_node *next;
	unsigned char msg[];
};

int tp__rma_create(struct tcpx_p2p_conn *c)
{
	c->rma = calloc(1, sizeof(*c->rma));
	return c->rma ? 0 : tp__error(TCPX_P2P_ENOMEM, "conn: out of memory");
}

static void in_free(struct tcpx_p2p_conn *c, struct tp_in *in)
{
	c->rma->segs -= in->nseg;
	free(in->seg);
	free(in->notif);
	free(in);
}

void tp__rma_fail(struct tcpx_p2p_conn *c)
{
	struct tp_rma *r = c->rma;
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
	r->notes_n = 0;
}

void tp__rma_drop_notifs(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_notif_node **pp, *n;

	pthread_mutex_lock(&s->notif_lock);
	for (pp = &s->notifs; (n = *pp);) {
		if (n->c == c) {
			*pp = n->next;
			free(n);
		} else {
			pp = &n->next;
		}
	}
	s->notifs_tail = NULL;
	for (n = s->notifs; n; n = n->next)
		s->notifs_tail = n;
	pthread_mutex_unlock(&s->notif_lock);
}

void tp__rma_destroy(struct tcpx_p2p_conn *c)
{
	tp__rma_fail(c);
	if (c->rma)
		free(c->rma->exp);
	free(c->rma);
	c->rma = NULL;
	/* Delivered notifications name this conn: drop them with it. */
	tp__rma_drop_notifs(c);
}

bool tp__rma_busy(const struct tcpx_p2p_conn *c)
{
	return c->rma->inq || c->rma->notes;
}

/* ---- announcements --------------------------------------------------------- */

static void put_segs(unsigned char *p, const struct tp_wseg *g, size_t n)
{
	for (size_t i = 0; i < n; i++, p += TP_WSEG_BYTES) {
		tp_put32(p, g[i].idx);
		tp_put32(p + 4, 0);
		memcpy(p + 8, g[i].key, TP_KEY_BYTES);
		tp_put64(p + 8 + TP_KEY_BYTES, g[i].off);
		tp_put64(p + 16 + TP_KEY_BYTES, g[i].len);
	}
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

static int own_room(struct tcpx_p2p_conn *c, const char *what)
{
	size_t max = c->s->cfg.peer_max_ctl_bytes / 2;

	if (tp__ctl_out_bytes(c) <= max)
		return 0;
	return tp__error(TCPX_P2P_EAGAIN, "%s: %zu control bytes wait for the peer (half of "
			 "peer_max_ctl_bytes): drive progress and post again", what,
			 tp__ctl_out_bytes(c));
}

static int announce_hdr(struct tcpx_p2p_conn *c, enum tp_ctl_type type, uint64_t id, uint64_t len,
			size_t nseg, const struct tp_wseg *seg, const void *notif, size_t notif_len)
{
	size_t body = 24 + nseg * TP_WSEG_BYTES + notif_len;
	unsigned char *m;

	if (nseg > (TP_CTL_MSG_MAX - 24 - TCPX_P2P_NOTIF_MAX) / TP_WSEG_BYTES)
		return tp__error(TCPX_P2P_EINVAL, "%zu remote segments in one transfer (at most %u)",
				 nseg, (TP_CTL_MSG_MAX - 24 - TCPX_P2P_NOTIF_MAX) / TP_WSEG_BYTES);
	if (nseg > (size_t)c->s->cfg.peer_max_segments)
		return tp__error(TCPX_P2P_EINVAL, "%zu remote segments in one transfer: more than "
				 "a peer may hold (peer_max_segments %d, which should match the "
				 "peer's)", nseg, c->s->cfg.peer_max_segments);
	m = tp__ctl_msg(c, type, body);
	if (!m)
		return tcpx_p2p_last_error()[0] ? TCPX_P2P_ENOMEM : TCPX_P2P_EINTERNAL;
	tp_put64(m, id);
	tp_put64(m + 8, len);
	tp_put32(m + 16, (uint32_t)nseg);
	tp_put32(m + 20, (uint32_t)notif_len);
	put_segs(m + 24, seg, nseg);
	if (notif_len)
		memcpy(m + 24 + nseg * TP_WSEG_BYTES, notif, notif_len);
	return 0;
}

static int short_msg(struct tcpx_p2p_conn *c, enum tp_ctl_type type, uint64_t id, uint64_t len)
{
	unsigned char *m = tp__ctl_msg(c, type, 16);

	if (!m)
		return TCPX_P2P_ENOMEM;
	tp_put64(m, id);
	tp_put64(m + 8, len);
	return 0;
}

static int send_ack(struct tcpx_p2p_conn *c, uint64_t id, enum tp_ack_status status,
		    uint64_t value)
{
	unsigned char *m;
	int rc = answer_room(c);

	if (rc)
		return rc;
	m = tp__ctl_msg(c, TP_CTL_ACK, 24);
	if (!m)
		return TCPX_P2P_ENOMEM;
	tp_put64(m, id);
	tp_put32(m + 8, status);
	tp_put32(m + 12, 0);
	tp_put64(m + 16, value);
	return 0;
}

int tp__rma_announce(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		     size_t notif_len, const struct tp_wseg *rseg, size_t nrseg)
{
	int rc = x->op == TP_OP_IN_READ ? answer_room(c)
		 : x->op == TP_OP_RECV	 ? 0
					 : own_room(c, "post");

	if (rc)
		return rc;
	switch (x->op) {
	case TP_OP_SEND:
		x->id = ++c->next_id;
		return short_msg(c, TP_CTL_SEND, x->id, x->len);
	case TP_OP_WRITE:
		x->id = ++c->next_id;
		return announce_hdr(c, TP_CTL_WRITE, x->id, x->len, nrseg, rseg, notif, notif_len);
	case TP_OP_READ:
		x->id = ++c->next_id;
		return announce_hdr(c, TP_CTL_READ_REQ, x->id, x->len, nrseg, rseg, NULL, 0);
	case TP_OP_IN_READ:
		return short_msg(c, TP_CTL_READ_RESP, x->id, x->len);
	default:
		return 0;
	}
}

/* ---- inbound messages ---------------------------------------------------- */

static struct tcpx_p2p_xfer *find_answer(struct tcpx_p2p_conn *c, uint64_t id)
{
	struct tcpx_p2p_xfer *x;

	for (x = c->answers.head; x; x = x->wnext)
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

int tp__rma_on_msg(struct tcpx_p2p_conn *c, unsigned type, const unsigned char *b, size_t len)
{
	struct tp_rma *r = c->rma;
	struct tp_in *in;
	uint64_t nseg = 0, nlen = 0;

	switch (type) {
	case TP_CTL_ACK:
		return len == 24 ? on_ack(c, b) : bad_msg(type, len);
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
		if (nlen > TCPX_P2P_NOTIF_MAX || (type == TP_CTL_READ_REQ && nlen) ||
		    len != 24 + nseg * TP_WSEG_BYTES + nlen)
			return bad_msg(type, len);
		break;
	case TP_CTL_NOTIF:
		if (len < 4)
			return bad_msg(type, len);
		nlen = tp_get32(b);
		if (!nlen || nlen > TCPX_P2P_NOTIF_MAX || len != 4 + nlen)
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

/* ---- the in-queue ------------------------------------------------------------- */

static int add_note(struct tcpx_p2p_conn *c, uint64_t mark, const struct tp_in *write,
		    const unsigned char *msg, size_t len)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_rma *r = c->rma;
	struct tp_note *n;
	uint32_t held;

	pthread_mutex_lock(&s->notif_lock);
	held = r->notes_n + r->delivered;
	pthread_mutex_unlock(&s->notif_lock);
	if (held >= (uint32_t)s->cfg.peer_max_notifs)
		return tp__error(TCPX_P2P_EPROTO, "the peer sent more than %d notifications this "
				 "side has not taken (peer_max_notifs; tcpx_p2p_notif_poll takes "
				 "them)", s->cfg.peer_max_notifs);
	n = malloc(sizeof(*n) + len);
	if (!n)
		return tp__error(TCPX_P2P_ENOMEM, "notification: out of memory");
	n->mark = mark;
	n->of_write = write != NULL;
	n->write = write ? write->id : 0;
	n->len = len;
	n->next = NULL;
	memcpy(n->msg, msg, len);
	if (r->notes_tail)
		r->notes_tail->next = n;
	else
		r->notes = n;
	r->notes_tail = n;
	r->notes_n++;
	return 0;
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
	tp__xfer_enqueue(c, x);
	return 0;
}

static int on_send(struct tcpx_p2p_conn *c, const struct tp_in *in)
{
	struct tcpx_p2p_xfer *x = c->unmatched.head;
	size_t mine = x->len;
	int rc;

	tp__xlist_remove(&c->unmatched, x);
	if (mine == in->len) {
		tp__xfer_enqueue(c, x);
		return send_ack(c, in->id, TP_ACK_OK, mine);
	}
	snprintf(x->why, sizeof(x->why), "the peer sent %llu bytes, this receive has %zu "
		 "(totals must match)", (unsigned long long)in->len, mine);
	tp__xfer_complete(c, x, TCPX_P2P_EPROTO);
	rc = discard(c, in->len);
	return rc ? rc : send_ack(c, in->id, TP_ACK_MISMATCH, mine);
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
	tp__xfer_enqueue(c, x);
	return 0;
}

/* Constant time: how long a comparison takes says nothing of the key. */
static bool key_equal(const unsigned char *a, const unsigned char *b)
{
	unsigned char d = 0;

	for (unsigned i = 0; i < TP_KEY_BYTES; i++)
		d |= a[i] ^ b[i];
	return !d;
}

/* One remote segment against this conn's exports: its export, or NULL
 * with *why (and *bad_key when the peer named a key it was never given). */
static struct tp_export *check_seg(struct tp_rma *r, const struct tp_wseg *g, unsigned access,
				   uint64_t *why, bool *bad_key)
{
	struct tp_export *e = g->idx < r->nexp ? &r->exp[g->idx] : NULL;

	if (!e || !key_equal(e->key, g->key)) {
		*bad_key = true;
		*why = TP_REFUSE_DENIED;
		return NULL;
	}
	if (e->revoked || !(e->access & access) || g->off > e->len || g->len > e->len - g->off) {
		*why = TP_REFUSE_DENIED;
		return NULL;
	}
	return e;
}

/* The segments of an inbound write or read against this conn's exports:
 * 0 and x's segments with a hold on each region they name, or a refusal
 * reason (*bad_key: a key the peer was never given).  Each export is looked
 * up once per message, whatever the segment count, and the session lock is
 * taken once per export named, never across the segment list. */
static uint64_t resolve(struct tcpx_p2p_conn *c, const struct tp_in *in, unsigned access,
			struct tcpx_p2p_xfer *x, bool *bad_key)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_rma *r = c->rma;
	uint64_t why = 0, total = 0, stamp = ++r->stamp;
	struct tp_export *e, **named = NULL;
	size_t nnamed = 0, i;

	*bad_key = false;
	x->seg = in->nseg == 1 ? &x->seg1 : in->nseg ? calloc(in->nseg, sizeof(*x->seg)) : NULL;
	/* At most one entry per export (and no more than segments). */
	if (in->nseg)
		named = calloc(in->nseg < r->nexp ? in->nseg : r->nexp + 1, sizeof(*named));
	if (in->nseg && (!x->seg || !named))
		why = TP_REFUSE_MEMORY; /* refuse rather than fail the conn */
	for (i = 0; i < in->nseg && !why; i++) {
		const struct tp_wseg *g = &in->seg[i];

		e = check_seg(r, g, access, &why, bad_key);
		if (!e)
			break;
		if (x->mtype && e->type != x->mtype)
			why = TP_REFUSE_MIXED;
		else if (g->len > UINT64_MAX - total)
			why = TP_REFUSE_TOTAL;
		if (why)
			break;
		x->mtype = e->type;
		total += g->len;
		if (e->stamp != stamp) {
			e->stamp = stamp;
			named[nnamed++] = e;
		}
	}
	if (!why && total != in->len)
		why = TP_REFUSE_TOTAL;
	if (!why && tp__held_alloc(x, nnamed))
		why = TP_REFUSE_MEMORY;
	/* The regions: deregistration revokes, so each is looked up now, and
	 * held by the transfer until it ends. */
	x->mapped = nnamed > 0;
	for (i = 0; i < nnamed && !why; i++) {
		e = named[i];
		pthread_mutex_lock(&s->lock);
		e->mr = tp__mr_find(s, e->mr_id);
		if (e->mr)
			e->mr->inflight++;
		pthread_mutex_unlock(&s->lock);
		if (!e->mr)
			why = TP_REFUSE_DENIED;
		else
			x->held[x->nheld++] = e->mr;
		x->mapped = x->mapped && e->mr && e->mr->mapped;
	}
	free(named);
	if (why) {
		tp__segs_put(s, x);
		x->nseg = 0;
		x->len = 0;
		return why;
	}
	for (i = 0, total = 0; i < in->nseg; i++) {
		const struct tp_wseg *g = &in->seg[i];

		e = &r->exp[g->idx];
		x->seg[i] = (struct tp_vseg){ e->mr, e->off + g->off, g->len, total };
		total += g->len;
	}
	x->nseg = in->nseg;
	x->len = (size_t)total;
	r->segs += x->nseg; /* until the item ends (tp__rma_item_end) */
	return 0;
}

void tp__rma_item_end(struct tcpx_p2p_conn *c, const struct tcpx_p2p_xfer *x)
{
	if (x->op == TP_OP_IN_WRITE || x->op == TP_OP_IN_READ)
		c->rma->segs -= x->nseg;
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
	*why = resolve(c, in, write ? TCPX_P2P_ACCESS_WRITE : TCPX_P2P_ACCESS_READ, x, bad_key);
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
	struct tp_rma *r = c->rma;

	TP_DEBUG("rma", "refused %s %llu from %s: %s%s",
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
		rc = refused(c, in, why, bad_key);
		if (!rc)
			rc = discard(c, in->len);
		return rc ? rc : send_ack(c, in->id, TP_ACK_REFUSED, why);
	}
	c->inbound++;
	tp__xfer_enqueue(c, x);
	return in->notif_len ? add_note(c, x->first_seq + x->nchunks, in, in->notif,
					in->notif_len)
			     : 0;
}

/* The notification that came with a failed in-write is never delivered. */
static void drop_note(struct tcpx_p2p_conn *c, uint64_t write)
{
	struct tp_rma *r = c->rma;
	struct tp_note *prev = NULL, *n;

	for (n = r->notes; n && !(n->of_write && n->write == write); n = n->next)
		prev = n;
	if (!n)
		return;
	if (prev)
		prev->next = n->next;
	else
		r->notes = n->next;
	if (r->notes_tail == n)
		r->notes_tail = prev;
	free(n);
	r->notes_n--;
}

int tp__rma_in_write_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	int rc;

	if (x->err) { /* some chunk did not land whole (progress.c) */
		TP_DEBUG("rma", "refused write %llu from %s: %s", (unsigned long long)x->id,
			 c->peer, x->why);
		drop_note(c, x->id);
		rc = send_ack(c, x->id, TP_ACK_REFUSED, TP_REFUSE_SHORT);
	} else {
		rc = send_ack(c, x->id, TP_ACK_OK, 0);
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
		return rc ? rc : send_ack(c, in->id, TP_ACK_REFUSED, why);
	}
	rc = tp__rma_announce(c, x, NULL, 0, NULL, 0);
	if (rc) {
		tp__rma_item_end(c, x);
		tp__segs_put(c->s, x);
		tp__xfer_free(x);
		return rc;
	}
	c->inbound++;
	tp__xfer_enqueue(c, x);
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
		rc = add_note(c, c->dir[TP_RECV].next_seq, NULL, in->notif, in->notif_len);
		break;
	default:
		rc = tp__error(TCPX_P2P_EINTERNAL, "control channel: message type %u queued",
			       in->type);
	}
	return rc ? rc : 1;
}

/* Append a notification of c (len 0: c failed) to the session's queue. */
static int deliver(struct tcpx_p2p_conn *c, const unsigned char *msg, size_t len)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_notif_node *d = malloc(sizeof(*d) + len);

	if (!d)
		return tp__error(TCPX_P2P_ENOMEM, "notification: out of memory");
	d->c = c;
	d->len = len;
	d->next = NULL;
	if (len)
		memcpy(d->msg, msg, len);
	pthread_mutex_lock(&s->notif_lock);
	if (s->notifs_tail)
		s->notifs_tail->next = d;
	else
		s->notifs = d;
	s->notifs_tail = d;
	if (len) {
		c->rma->notes_n--;
		c->rma->delivered++;
	}
	pthread_mutex_unlock(&s->notif_lock);
	return 0;
}

void tp__rma_tell_failed(struct tcpx_p2p_conn *c)
{
	if (!c->rma || c->rma->failed_told)
		return;
	/* Without memory the failure still shows in every call on c. */
	c->rma->failed_told = !deliver(c, NULL, 0);
}

int tp__rma_progress(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_rma *r = c->rma;
	struct tcpx_p2p_xfer *h;
	struct tp_note *n;
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
	/* Every receive item below the mark has landed when the oldest still
	 * in flight starts at or after it.  Deliver only once the answers this
	 * side owes (a write's) were handed to the plugin: the application may
	 * stop driving when the notification arrives. */
	h = c->dir[TP_RECV].head;
	while ((n = r->notes) && (!h || h->first_seq >= n->mark) && !tp__ctl_owes(c)) {
		rc = deliver(c, n->msg, n->len);
		if (rc)
			return rc;
		r->notes = n->next;
		if (!r->notes)
			r->notes_tail = NULL;
		free(n);
		*moved = true;
	}
	return 0;
}

/* ---- the public calls ---------------------------------------------------- */

int tcpx_p2p_mr_export(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
		       unsigned access, tcpx_p2p_rdesc *out)
{
	unsigned char key[TP_KEY_BYTES];
	struct tp_rma *r;
	struct tp_export *e;
	unsigned char *d;
	int rc = 0;

	if (!c || !mr || !out)
		return tp__error(TCPX_P2P_EINVAL, "mr_export: NULL argument");
	if (mr->s != c->s)
		return tp__error(TCPX_P2P_EINVAL, "mr_export: mr of another session");
	if (!access || (access & ~(unsigned)(TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ)))
		return tp__error(TCPX_P2P_EINVAL, "mr_export: access 0x%x", access);
	if (offset > mr->len || len > mr->len - offset)
		return tp__error(TCPX_P2P_EINVAL, "mr_export: [%zu, +%zu) outside the %zu-byte "
				 "region", offset, len, mr->len);
	if (getrandom(key, sizeof(key), 0) != sizeof(key))
		return tp__error(TCPX_P2P_ENET, "mr_export: no random bytes");
	pthread_mutex_lock(&c->lock);
	r = c->rma;
	if (c->err) {
		rc = tp__error(c->err, "mr_export: the connection failed earlier: %s", c->why);
	} else if (r->nexp == r->cap) {
		uint32_t cap = r->cap ? 2 * r->cap : 8;

		e = realloc(r->exp, cap * sizeof(*e));
		if (e) {
			r->exp = e;
			r->cap = cap;
		} else {
			rc = tp__error(TCPX_P2P_ENOMEM, "mr_export: out of memory");
		}
	}
	if (!rc) {
		e = &r->exp[r->nexp];
		*e = (struct tp_export){ .mr_id = mr->id, .off = offset, .len = len,
					 .access = access, .type = mr->type };
		memcpy(e->key, key, TP_KEY_BYTES);
		memset(out, 0, sizeof(*out));
		d = out->bytes;
		tp_put32(d, TP_RDESC_MAGIC);
		d[4] = TP_RDESC_VERSION;
		d[5] = (unsigned char)mr->type;
		d[6] = (unsigned char)access;
		tp_put32(d + 8, r->nexp);
		tp_put64(d + 16, len);
		memcpy(d + TP_RDESC_KEY, key, TP_KEY_BYTES);
		r->nexp++;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int tcpx_p2p_mr_unexport(tcpx_p2p_conn *c, const tcpx_p2p_rdesc *desc)
{
	const unsigned char *d;
	struct tp_export *e;
	uint32_t idx;
	int rc = 0;

	if (!c || !desc)
		return tp__error(TCPX_P2P_EINVAL, "mr_unexport: NULL argument");
	d = desc->bytes;
	idx = tp_get32(d + 8);
	pthread_mutex_lock(&c->lock);
	e = tp_get32(d) == TP_RDESC_MAGIC && d[4] == TP_RDESC_VERSION && idx < c->rma->nexp
		    ? &c->rma->exp[idx]
		    : NULL;
	if (!e || !key_equal(e->key, d + TP_RDESC_KEY))
		rc = tp__error(TCPX_P2P_EINVAL, "mr_unexport: not a descriptor exported on this "
			       "connection");
	else
		e->revoked = true; /* every later use is refused; accepted ones finish */
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int tcpx_p2p_rmr_import(tcpx_p2p_conn *c, const tcpx_p2p_rdesc *desc, tcpx_p2p_rmr **out)
{
	const unsigned char *d;
	struct tcpx_p2p_rmr *m;

	if (!c || !desc || !out)
		return tp__error(TCPX_P2P_EINVAL, "rmr_import: NULL argument");
	d = desc->bytes;
	if (tp_get32(d) != TP_RDESC_MAGIC || d[4] != TP_RDESC_VERSION ||
	    (d[5] != TCPX_P2P_MEM_HOST && d[5] != TCPX_P2P_MEM_CUDA) || !d[6] ||
	    (d[6] & ~(TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ)))
		return tp__error(TCPX_P2P_EPROTO, "rmr_import: not a region descriptor of this "
				 "version");
	m = calloc(1, sizeof(*m));
	if (!m)
		return tp__error(TCPX_P2P_ENOMEM, "rmr_import: out of memory");
	m->c = c;
	m->type = d[5];
	m->access = d[6];
	m->idx = tp_get32(d + 8);
	memcpy(m->key, d + TP_RDESC_KEY, TP_KEY_BYTES);
	m->len = (size_t)tp_get64(d + 16);
	*out = m;
	return 0;
}

int tcpx_p2p_rmr_query(const tcpx_p2p_rmr *r, size_t *len, int *mem_type, unsigned *access)
{
	if (!r)
		return tp__error(TCPX_P2P_EINVAL, "rmr_query: NULL rmr");
	if (len)
		*len = r->len;
	if (mem_type)
		*mem_type = r->type;
	if (access)
		*access = r->access;
	return 0;
}

int tcpx_p2p_rmr_release(tcpx_p2p_rmr *r)
{
	free(r);
	return 0;
}

/* Local and remote segments of a write or read, checked on this side. */
static int one_sided(tcpx_p2p_conn *c, enum tp_op op, const tcpx_p2p_seg *local, size_t nlocal,
		     const tcpx_p2p_rseg *remote, size_t nremote,
		     const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	const char *what = op == TP_OP_WRITE ? "write" : "read";
	unsigned need = op == TP_OP_WRITE ? TCPX_P2P_ACCESS_WRITE : TCPX_P2P_ACCESS_READ;
	struct tcpx_p2p_xfer *x;
	struct tp_wseg *w = NULL;
	size_t i, rtotal = 0;
	int rc;

	if (!c || !out || (nremote && !remote))
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL argument", what);
	rc = tp__params_check(params, op == TP_OP_WRITE, what);
	if (rc)
		return rc;
	if (nremote > UINT32_MAX)
		return tp__error(TCPX_P2P_EINVAL, "%s: %zu remote segments", what, nremote);
	if (nremote && !(w = malloc(nremote * sizeof(*w))))
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	for (i = 0; i < nremote; i++) {
		const tcpx_p2p_rseg *g = &remote[i];

		rc = !g->rmr ? tp__error(TCPX_P2P_EINVAL, "%s: remote segment %zu has no rmr",
					 what, i)
		   : g->rmr->c != c ? tp__error(TCPX_P2P_EINVAL, "%s: remote segment %zu: rmr "
					       "imported on another connection", what, i)
		   : !(g->rmr->access & need) ? tp__error(TCPX_P2P_EINVAL, "%s: remote segment "
						       "%zu: the export does not allow it", what, i)
		   : g->offset > g->rmr->len || g->len > g->rmr->len - g->offset
			? tp__error(TCPX_P2P_EINVAL, "%s: remote segment %zu [%zu, +%zu) outside "
				    "its %zu-byte export", what, i, g->offset, g->len, g->rmr->len)
			: 0;
		if (rc) {
			free(w);
			return rc;
		}
		if (g->len > SIZE_MAX - rtotal) {
			free(w);
			return tp__error(TCPX_P2P_EINVAL, "%s: remote segment lengths overflow", what);
		}
		w[i] = (struct tp_wseg){ .idx = g->rmr->idx, .off = g->offset, .len = g->len };
		memcpy(w[i].key, g->rmr->key, TP_KEY_BYTES);
		rtotal += g->len;
	}
	x = tp__xfer_new(op, op == TP_OP_WRITE ? TP_SEND : TP_RECV);
	if (!x) {
		free(w);
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	}
	rc = tp__segs_build(c, x, local, nlocal, what);
	if (!rc && rtotal != x->len)
		rc = tp__error(TCPX_P2P_EINVAL, "%s: local segments hold %zu bytes, remote %zu",
			       what, x->len, rtotal);
	if (rc) {
		free(w);
		tp__xfer_free(x);
		return rc;
	}
	x->need_ack = true;
	rc = tp__xfer_post(c, x, params ? params->notif : NULL, params ? params->notif_len : 0, w,
			   nremote, out);
	free(w);
	return rc;
}

int tcpx_p2p_write(tcpx_p2p_conn *c, const tcpx_p2p_seg *local, size_t nlocal,
		   const tcpx_p2p_rseg *remote, size_t nremote,
		   const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	return one_sided(c, TP_OP_WRITE, local, nlocal, remote, nremote, params, out);
}

int tcpx_p2p_read(tcpx_p2p_conn *c, const tcpx_p2p_seg *local, size_t nlocal,
		  const tcpx_p2p_rseg *remote, size_t nremote,
		  const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	return one_sided(c, TP_OP_READ, local, nlocal, remote, nremote, params, out);
}

int tcpx_p2p_notify(tcpx_p2p_conn *c, const void *msg, size_t len)
{
	struct tp_progress st;
	uint64_t before = 0;
	unsigned char *m;
	int rc = 0;

	if (!c || !msg || !len || len > TCPX_P2P_NOTIF_MAX)
		return tp__error(TCPX_P2P_EINVAL, "notify: NULL argument or %zu bytes (1..%d)", len,
				 TCPX_P2P_NOTIF_MAX);
	pthread_mutex_lock(&c->lock);
	if (c->err) {
		rc = tp__error(c->err, "notify: the connection failed earlier: %s", c->why);
	} else if ((rc = own_room(c, "notify"))) {
		/* EAGAIN: the peer has not taken what waits for it */
	} else if (!(m = tp__ctl_msg(c, TP_CTL_NOTIF, 4 + len))) {
		rc = TCPX_P2P_ENOMEM;
	} else {
		tp_put32(m, (uint32_t)len);
		memcpy(m + 4, msg, len);
		before = c->completed;
		tp__progress(c, &st);
		before = c->completed - before;
	}
	pthread_mutex_unlock(&c->lock);
	tp__engine_notify(c->s, before);
	tp__engine_kick(c->s);
	return rc;
}

int tcpx_p2p_notif_poll(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n)
{
	struct tp_notif_node *d;
	struct tp_progress st;
	int k = 0;

	if (!s || !n || max < 0 || (max && !out))
		return tp__error(TCPX_P2P_EINVAL, "notif_poll: NULL argument or max %d", max);
	if (!tp__engine_threaded(s))
		tp__engine_pass(s, NULL, &st);
	pthread_mutex_lock(&s->notif_lock);
	while (k < max && (d = s->notifs)) {
		s->notifs = d->next;
		if (!s->notifs)
			s->notifs_tail = NULL;
		out[k].conn = d->c;
		out[k].len = d->len;
		memcpy(out[k].msg, d->msg, d->len);
		if (d->len)
			d->c->rma->delivered--;
		free(d);
		k++;
	}
	pthread_mutex_unlock(&s->notif_lock);
	*n = k;
	return 0;
}
