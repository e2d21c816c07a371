/* The control channel (ctl.h): frames out of a byte stream, frames into a
 * byte stream, messages out of it.  The comms follow the same plugin rules
 * as the data channels: FIFO test of the head only, once more per request
 * still owed a hand-over, FIFO irecvConsumed, at most TP_CTL_SLOTS each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctl.h"
#include "util/error.h"
#include "util/log.h"

static int grow(unsigned char **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 4096;
	unsigned char *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*buf, n);
	if (!p)
		return tp__error(TCPX_P2P_ENOMEM, "control channel: out of memory");
	*buf = p;
	*cap = n;
	return 0;
}

unsigned char *tp__ctl_msg(struct tcpx_p2p_conn *c, enum tp_ctl_type type, size_t body_len)
{
	struct tp_ctl *t = c->ctl;
	unsigned char *m;

	if (t->close_queued) {
		tp__error(TCPX_P2P_ECLOSED, "control message after the connection's close");
		return NULL;
	}
	if (body_len > TP_CTL_MSG_MAX) {
		tp__error(TCPX_P2P_EINVAL, "control message of %zu bytes (at most %u)", body_len,
			  TP_CTL_MSG_MAX);
		return NULL;
	}
	/* Sent bytes are dropped from the front once they are as many as the
	 * unsent ones: a stream that never drains still stays within twice
	 * what waits in it. */
	if (t->out_off == t->out_len) {
		t->out_off = t->out_len = 0;
	} else if (t->out_off >= t->out_len - t->out_off) {
		memmove(t->out, t->out + t->out_off, t->out_len - t->out_off);
		t->out_len -= t->out_off;
		t->out_off = 0;
	}
	if (grow(&t->out, &t->out_cap, t->out_len + TP_CTL_MSG_HDR + body_len))
		return NULL;
	m = t->out + t->out_len;
	m[0] = (unsigned char)type;
	m[1] = m[2] = m[3] = 0;
	tp_put32(m + 4, (uint32_t)body_len);
	t->out_len += TP_CTL_MSG_HDR + body_len;
	return m + TP_CTL_MSG_HDR;
}

void *tp__ctl_comm(struct tcpx_p2p_conn *c, enum tp_dir dir)
{
	return dir == TP_SEND ? c->ctl->tx.comm : c->ctl->rx.comm;
}

static void free_host(char *p, bool pinned)
{
	if (pinned)
		tp__dev_host_free(p);
	else
		free(p);
}

static void ctl_free(struct tp_ctl *t)
{
	if (t->txmr)
		tcpx_p2p_mr_deregister(t->txmr);
	if (t->land_dev)
		tp__land_destroy(t->land, t->landmr);
	else if (t->landmr)
		tcpx_p2p_mr_deregister(t->landmr);
	free(t->txbuf);
	free_host(t->rxbuf, t->rx_pinned);
	free(t->out);
	free(t->in);
	free(t);
}

void tp__ctl_destroy(struct tcpx_p2p_conn *c)
{
	if (c->ctl)
		ctl_free(c->ctl);
	c->ctl = NULL;
}

int tp__ctl_create(struct tcpx_p2p_conn *c, void *send_comm, void *recv_comm,
		   const ncclNetDeviceHandle_v7_t *devh)
{
	struct tcpx_p2p_session *s = c->s;
	size_t bytes = (size_t)TP_CTL_SLOTS * TP_CTL_FRAME;
	struct tp_ctl *t;
	int rc;

	if (!(s->props.ptr_support & NCCL_PTR_HOST))
		return tp__error(TCPX_P2P_ENOTSUP, "plugin %s cannot send host memory, which the "
				 "control channel needs", s->net->name);
	t = calloc(1, sizeof(*t));
	if (!t)
		return tp__error(TCPX_P2P_ENOMEM, "control channel: out of memory");
	t->tx.comm = send_comm;
	t->tx.dir = TP_SEND;
	t->tx.win.limit = TP_CTL_SLOTS;
	t->rx.comm = recv_comm;
	t->rx.dir = TP_RECV;
	t->rx.win.limit = TP_CTL_SLOTS;
	t->rx.devh = *devh;
	c->ctl = t;
	rc = tp__unpack_prepare(s, &t->rx);
	if (rc)
		return rc;
	/* A device bounce (TCPX) receives only into device memory: post into a
	 * device landing buffer the plugin never writes (also on a session
	 * without a GPU: TCPX answers a host-memory receive with a plain recv(),
	 * which fails on its steered sockets), and copy the records from the
	 * bounce pages into pinned frames the host parses. */
	t->rx_pinned = t->rx.meta && t->rx.bounce_on_device;
	t->land_dev = t->rx_pinned;
	t->txbuf = aligned_alloc(4096, bytes);
	if (!t->txbuf)
		return tp__error(TCPX_P2P_ENOMEM, "control channel: out of memory");
	if (t->rx_pinned)
		rc = tp__dev_host_alloc((void **)&t->rxbuf, bytes);
	else if (!(t->rxbuf = aligned_alloc(4096, bytes)))
		rc = tp__error(TCPX_P2P_ENOMEM, "control channel: out of memory");
	if (rc)
		return rc;
	if (t->land_dev) {
		rc = tp__land_create(s, bytes, &t->land, &t->landmr);
	} else {
		t->land = t->rxbuf;
		rc = tcpx_p2p_mr_register(s, t->land, bytes, TCPX_P2P_MEM_HOST, &t->landmr);
	}
	if (!rc)
		rc = tcpx_p2p_mr_register(s, t->txbuf, bytes, TCPX_P2P_MEM_HOST, &t->txmr);
	return rc;
}

/* Post one frame: the next n bytes of the outgoing stream (0: an empty
 * frame of the close handshake).  *posted: the plugin took it. */
static int post_frame(struct tcpx_p2p_conn *c, size_t n, bool *posted)
{
	struct tp_ctl *t = c->ctl;
	struct tp_comm *cm = &t->tx;
	struct tp_net *net = c->s->net;
	unsigned char *f = (unsigned char *)t->txbuf + (cm->win.posted % TP_CTL_SLOTS) * TP_CTL_FRAME;
	void *mh, *req;
	int rc;

	tp_put32(f, TP_CTL_FRAME_MAGIC);
	tp_put32(f + 4, (uint32_t)n);
	memcpy(f + TP_CTL_FRAME_HDR, t->out + t->out_off, n);
	rc = tp__mr_handle(t->txmr, cm, &mh);
	if (rc)
		return rc;
	req = NULL;
	rc = net->ops->isend(net, cm->comm, f, TP_CTL_FRAME_HDR + n, 0, mh, &req);
	if (rc || !req)
		return rc;
	cm->slot[tp_window_slot(cm->win.posted)].request = req;
	cm->issued = ++cm->win.posted;
	cm->handover++;
	t->out_off += n;
	c->alive.said = true;
	*posted = true;
	return 0;
}

/* Frame the outgoing stream.  Once the frame that ends with our CLOSE is
 * posted, TP_CTL_SLOTS - 1 empty frames follow it: the peer, which may
 * have posted up to that many receives past it, posts exactly that many
 * (rx_post) and stops. */
static int tx_post(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_ctl *t = c->ctl;
	struct tp_comm *cm = &t->tx;
	bool posted;
	size_t n;
	int rc;

	while (t->out_off != t->out_len && tp_window_can_post(&cm->win)) {
		n = t->out_len - t->out_off;
		if (n > TP_CTL_FRAME - TP_CTL_FRAME_HDR)
			n = TP_CTL_FRAME - TP_CTL_FRAME_HDR;
		posted = false;
		rc = post_frame(c, n, &posted);
		if (rc || !posted)
			return rc;
		*moved = true;
		if (t->close_queued && t->out_off == t->out_len) {
			t->close_framed = true;
			t->tx_end = cm->win.posted - 1 + TP_CTL_SLOTS;
		}
	}
	while (t->close_framed && cm->win.posted != t->tx_end && tp_window_can_post(&cm->win)) {
		posted = false;
		rc = post_frame(c, 0, &posted);
		if (rc || !posted)
			return rc;
		*moved = true;
	}
	return 0;
}

static int rx_post(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_ctl *t = c->ctl;
	struct tp_comm *cm = &t->rx;
	struct tp_net *net = c->s->net;
	void *mh, *req;
	int rc;

	while (tp_window_can_post(&cm->win) && (!t->peer_closed || cm->win.posted != t->rx_end)) {
		rc = tp__mr_handle(t->landmr, cm, &mh);
		if (rc)
			return rc;
		req = NULL;
		rc = net->ops->irecv(net, cm->comm,
				     t->land + (cm->win.posted % TP_CTL_SLOTS) * TP_CTL_FRAME,
				     TP_CTL_FRAME, 0, mh, &req);
		if (rc || !req)
			return rc;
		cm->slot[tp_window_slot(cm->win.posted)].request = req;
		cm->issued = ++cm->win.posted;
		cm->handover++;
		*moved = true;
	}
	return 0;
}

/* Bring a received frame from the bounce pages into its host frame. */
static int rx_unpack(struct tcpx_p2p_conn *c, uint32_t k, struct tp_slot *sl)
{
	struct tp_ctl *t = c->ctl;
	char *frame = t->rxbuf + (k % TP_CTL_SLOTS) * TP_CTL_FRAME;
	struct tp_meta_view v;
	const tp_unpack_rec *r;
	uint32_t i, n = 0;
	int rc;

	sl->launch = 0;
	rc = tp__meta_read(t->rx.meta, tp_window_slot(k), TP_CTL_FRAME, t->rx.bounce_len,
			   "control channel", &v);
	if (rc)
		return rc;
	for (i = 0, r = v.rec; i < v.cnt; i++) {
		if (!t->rx_pinned) { /* a host bounce */
			memcpy(frame + r[i].dst_off, t->rx.bounce + r[i].src_off, r[i].len);
			continue;
		}
		t->cp[n++] = (struct tp_copy){ t->rx.bounce + r[i].src_off, frame + r[i].dst_off,
					       r[i].len };
	}
	return n ? tp__devq_copies(c->s, t->cp, n, false, &sl->launch) : 0;
}

/* Requests of channel i among the first `chunks` of a stream (chunk seq
 * travels on channel seq % nchan), as the 32-bit count a comm keeps. */
static uint32_t chunks_on(uint64_t chunks, int nchan, int i)
{
	return (uint32_t)(chunks / (uint64_t)nchan + ((uint64_t)i < chunks % (uint64_t)nchan));
}

/* A count the peer's CLOSE may carry for comm cm: `most`, what it can
 * legitimately have there; beyond it the handshake fails at once. */
static int close_count_ok(const struct tp_comm *cm, uint32_t count, uint32_t most, int i,
			  const char *what)
{
	if ((int32_t)(count - most) <= 0)
		return 0;
	return tp__error(TCPX_P2P_EPROTO, "control channel: the peer's close counts %u %s on "
			 "channel %d, where it can have at most %u (this side has %u posted)",
			 count, what, i, most, cm->issued);
}

/* The peer's CLOSE, in the frame being parsed (number rx.win.retired):
 * it must end the stream, and the peer sends TP_CTL_SLOTS - 1 empty
 * frames after it (tx_post), which is never fewer than the receives this
 * side has posted past it (at most TP_CTL_SLOTS in flight).  Its body
 * gives the peer's count of requests per data comm (tp__ctl_close).
 *
 * Each count is bounded by what this side knows, so that a peer's number
 * never makes it post more than the peer can be owed: the peer's sends on
 * a channel by the chunks it announced there, its receives by the chunks
 * this side announced and by one window past this side's sends (a receive
 * completes only against a send).  A count beyond fails the handshake
 * (EPROTO).  Throw-away receives stop one window past this side's own
 * (data_drain): a peer further ahead is one whose plugin completed its
 * sends without a receive (the emulator, TCP plugins), so nothing of it
 * waits for them. */
static int on_close(struct tcpx_p2p_conn *c, const unsigned char *body, uint32_t len)
{
	struct tp_ctl *t = c->ctl;
	uint64_t mine = c->dir[TP_SEND].next_seq;
	uint32_t sends, recvs, most;
	int rc;

	if (len != 4 + 8 * (uint32_t)c->nchan || tp_get32(body) != (uint32_t)c->nchan)
		return tp__error(TCPX_P2P_EPROTO, "control channel: peer's close of %u bytes "
				 "(%d channels)", len, c->nchan);
	if (t->in_len - t->in_off != TP_CTL_MSG_HDR + len)
		return tp__error(TCPX_P2P_EPROTO, "control channel: peer sent bytes after its "
				 "close");
	if (t->peer_closed)
		return tp__error(TCPX_P2P_EPROTO, "control channel: peer closed twice");
	for (int i = 0; i < c->nchan; i++) {
		sends = tp_get32(body + 4 + 8 * i);
		recvs = tp_get32(body + 8 + 8 * i);
		rc = close_count_ok(&c->recv[i], sends, chunks_on(t->peer_chunks, c->nchan, i), i,
				    "sends");
		most = chunks_on(mine, c->nchan, i);
		if ((int32_t)(most - (c->send[i].issued + TP_WINDOW_SLOTS)) > 0)
			most = c->send[i].issued + TP_WINDOW_SLOTS;
		if (!rc)
			rc = close_count_ok(&c->send[i], recvs, most, i, "receives");
		if (rc)
			return rc;
	}
	t->peer_closed = true;
	t->rx_end = t->rx.win.retired + TP_CTL_SLOTS;
	for (int i = 0; i < c->nchan; i++) {
		/* Its sends on channel i meet this side's receives, and back. */
		sends = tp_get32(body + 4 + 8 * i);
		most = c->recv[i].issued + TP_WINDOW_SLOTS;
		c->recv[i].drain_to = (int32_t)(sends - most) > 0 ? most : sends;
		c->send[i].drain_to = tp_get32(body + 8 + 8 * i);
		c->recv[i].drain_set = c->send[i].drain_set = true;
	}
	return tp__conn_peer_closed(c);
}

/* Chunks of an item the peer announces, counted whether or not the
 * message is then parsed (after this side's CLOSE it is dropped): the
 * peer may have posted its sends all the same. */
static void count_item(struct tcpx_p2p_conn *c, const unsigned char *m, uint32_t body)
{
	uint64_t len;

	if ((m[0] != TP_CTL_SEND && m[0] != TP_CTL_WRITE && m[0] != TP_CTL_READ_RESP) ||
	    body < 16)
		return;
	len = tp_get64(m + TP_CTL_MSG_HDR + 8);
	if (len <= TP_CTL_LEN_MAX) /* else refused as malformed, or dropped */
		c->ctl->peer_chunks += tp_chunk_count(
			(size_t)len, tp_chunk_size((size_t)len, (unsigned)c->nchan,
						   c->s->cfg.chunk_bytes));
}

/* Parse every complete message of the incoming stream. */
static int parse(struct tcpx_p2p_conn *c)
{
	struct tp_ctl *t = c->ctl;
	uint32_t body;
	int rc;

	while (t->in_len - t->in_off >= TP_CTL_MSG_HDR) {
		const unsigned char *m = t->in + t->in_off;

		body = tp_get32(m + 4);
		if (body > TP_CTL_MSG_MAX)
			return tp__error(TCPX_P2P_EPROTO, "control channel: peer sent a %u-byte "
					 "message (at most %u)", body, TP_CTL_MSG_MAX);
		if (t->in_len - t->in_off < TP_CTL_MSG_HDR + (size_t)body)
			break;
		count_item(c, m, body);
		if (m[0] == TP_CTL_CLOSE)
			rc = on_close(c, m + TP_CTL_MSG_HDR, body);
		else if (t->close_queued) /* closing: what the peer still says is moot */
			rc = 0;
		else
			rc = tp__rma_on_msg(c, m[0], m + TP_CTL_MSG_HDR, body);
		if (rc)
			return rc;
		t->in_off += TP_CTL_MSG_HDR + body;
	}
	if (t->in_off == t->in_len) {
		t->in_off = t->in_len = 0;
	} else if (t->in_off > t->in_cap / 2) {
		memmove(t->in, t->in + t->in_off, t->in_len - t->in_off);
		t->in_len -= t->in_off;
		t->in_off = 0;
	}
	return 0;
}

int tp__ctl_feed(struct tcpx_p2p_conn *c, const void *bytes, size_t n)
{
	struct tp_ctl *t = c->ctl;
	int rc;

	if (!n) /* an empty frame (a peer may send one) */
		return 0;
	rc = grow(&t->in, &t->in_cap, t->in_len + n);
	if (rc)
		return rc;
	memcpy(t->in + t->in_len, bytes, n);
	t->in_len += n;
	return parse(c);
}

/* Frames whose bytes are in host memory: append to the stream, hand the
 * receive back, parse.  FIFO, like every irecvConsumed. */
static int rx_consume(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_ctl *t = c->ctl;
	struct tp_comm *cm = &t->rx;
	struct tp_slot *sl;
	unsigned char *f;
	uint32_t n;
	bool done;
	int rc;

	while (cm->win.retired != cm->win.unpacked) {
		sl = &cm->slot[tp_window_slot(cm->win.retired)];
		if (sl->launch) {
			rc = tp__devq_done(c->s, sl->launch, &done);
			if (rc || !done)
				return rc;
		}
		f = (unsigned char *)t->rxbuf + (cm->win.retired % TP_CTL_SLOTS) * TP_CTL_FRAME;
		n = tp_get32(f + 4);
		if (tp_get32(f) != TP_CTL_FRAME_MAGIC || n > TP_CTL_FRAME - TP_CTL_FRAME_HDR)
			return tp__error(TCPX_P2P_EPROTO, "control channel: malformed frame "
					 "(magic 0x%08x, %u bytes)", tp_get32(f), n);
		/* Where the plugin says how much arrived, the header may not
		 * claim more (the rest would be an earlier frame's bytes). */
		if (sl->got >= 0 && (uint32_t)sl->got < TP_CTL_FRAME_HDR + n)
			return tp__error(TCPX_P2P_EPROTO, "control channel: a frame of %u bytes "
					 "arrived with %d", TP_CTL_FRAME_HDR + n, sl->got);
		if (t->peer_closed && n)
			return tp__error(TCPX_P2P_EPROTO, "control channel: peer sent %u bytes after "
					 "its close", n);
		rc = tp__ctl_feed(c, f + TP_CTL_FRAME_HDR, n);
		if (rc)
			return rc;
		/* test() reports no size: a short frame from a peer must not
		 * find this one's header again four frames later. */
		memset(f, 0, TP_CTL_FRAME_HDR);
		rc = c->s->net->ops->irecv_consumed(c->s->net, cm->comm, sl->request);
		if (rc)
			return rc;
		cm->win.retired++;
		*moved = true;
	}
	return 0;
}

size_t tp__ctl_out_bytes(const struct tcpx_p2p_conn *c)
{
	return c->ctl->out_len - c->ctl->out_off;
}

bool tp__ctl_queued(const struct tcpx_p2p_conn *c)
{
	return c->ctl->out_off != c->ctl->out_len;
}

bool tp__ctl_owes(const struct tcpx_p2p_conn *c)
{
	return c->ctl->out_off != c->ctl->out_len || c->ctl->tx.handover;
}

int tp__ctl_progress(struct tcpx_p2p_conn *c, bool *moved, bool *pending)
{
	struct tp_ctl *t = c->ctl;
	struct tp_comm *rx = &t->rx;
	int rc;

	rc = tp__comm_test(c, &t->tx, moved);
	if (!rc)
		rc = tx_post(c, moved);
	/* Hand what was just posted to the plugin now: the peer may be
	 * waiting on it while nothing here drives this side again. */
	if (!rc && t->tx.handover)
		rc = tp__comm_test(c, &t->tx, moved);
	if (!rc)
		rc = tp__comm_test(c, rx, moved);
	for (; !rc && rx->win.unpacked != rx->win.tested; rx->win.unpacked++) {
		struct tp_slot *sl = &rx->slot[tp_window_slot(rx->win.unpacked)];

		sl->launch = 0;
		if (rx->meta)
			rc = rx_unpack(c, rx->win.unpacked, sl);
		*moved = true;
	}
	if (!rc)
		rc = rx_consume(c, moved);
	if (!rc)
		rc = rx_post(c, moved);
	*pending = t->tx.handover || rx->handover || rx->win.retired != rx->win.unpacked ||
		   (t->out_off != t->out_len && tp_window_can_post(&t->tx.win));
	return rc;
}

int tp__ctl_close(struct tcpx_p2p_conn *c)
{
	struct tp_ctl *t = c->ctl;
	unsigned char *b;

	if (t->close_queued)
		return 0;
	b = tp__ctl_msg(c, TP_CTL_CLOSE, 4 + 8 * (size_t)c->nchan);
	if (!b)
		return TCPX_P2P_ENOMEM; /* recorded */
	/* No chunk is posted after this: the counts below are final. */
	tp__data_freeze(c);
	tp_put32(b, (uint32_t)c->nchan);
	for (int i = 0; i < c->nchan; i++) {
		tp_put32(b + 4 + 8 * i, c->send[i].issued);
		tp_put32(b + 8 + 8 * i, c->recv[i].issued);
	}
	t->close_queued = true;
	return 0;
}

bool tp__ctl_closing(const struct tcpx_p2p_conn *c)
{
	return c->ctl->close_queued;
}

int tp__ctl_close_step(struct tcpx_p2p_conn *c, bool *moved, bool *pending)
{
	struct tp_ctl *t = c->ctl;

	if (!t->close_rc) {
		t->close_rc = tp__ctl_progress(c, moved, pending);
		if (t->close_rc)
			snprintf(t->close_why, sizeof(t->close_why), "%s", tcpx_p2p_last_error());
	}
	return t->close_rc;
}

const char *tp__ctl_close_why(const struct tcpx_p2p_conn *c)
{
	return c->ctl->close_why;
}

bool tp__ctl_close_done(const struct tcpx_p2p_conn *c)
{
	const struct tp_ctl *t = c->ctl;

	return t->close_framed && t->peer_closed && t->tx.win.retired == t->tx_end &&
	       t->rx.win.posted == t->rx_end && t->rx.win.retired == t->rx_end;
}

bool tp__ctl_close_sent(const struct tcpx_p2p_conn *c)
{
	const struct tp_ctl *t = c->ctl;

	return t->close_framed && t->tx.win.posted == t->tx_end && !t->tx.handover;
}

uint32_t tp__ctl_inflight(const struct tcpx_p2p_conn *c)
{
	const struct tp_ctl *t = c->ctl;

	return (t->tx.issued - t->tx.win.retired) + (t->rx.issued - t->rx.win.retired);
}
