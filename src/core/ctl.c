/* The control channel (ctl.h): its comms, frames out of the outgoing
 * byte stream and frames into the incoming one (ctl_stream.c parses it).
 * Its comms run the pipeline every comm runs (comm.c), at most
 * TP_CTL_SLOTS requests each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/mr.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/session.h"
#include "util/error.h"
#include "util/timeline.h"

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
		tp__mr_deregister(t->txmr);
	if (t->land_dev)
		tp__land_destroy(t->land, t->landmr);
	else if (t->landmr)
		tp__mr_deregister(t->landmr);
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
		rc = tp__mr_register(s, t->land, bytes, TCPX_P2P_MEM_HOST, 0, &t->landmr);
	}
	if (!rc)
		rc = tp__mr_register(s, t->txbuf, bytes, TCPX_P2P_MEM_HOST, 0, &t->txmr);
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
	bool taken;
	void *mh;
	int rc;

	tp_put32(f, TP_CTL_FRAME_MAGIC);
	tp_put32(f + 4, (uint32_t)n);
	memcpy(f + TP_CTL_FRAME_HDR, t->out + t->out_off, n);
	rc = tp__mr_handle(t->txmr, cm, &mh);
	if (rc)
		return rc;
	rc = tp__comm_issue(net, cm, f, TP_CTL_FRAME_HDR + n, mh, &taken);
	if (rc || !taken)
		return rc;
	cm->win.posted = cm->issued;
	tp__tl_mark(TP_TL_CTL_ISEND);
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
	bool taken;
	void *mh;
	int rc;

	while (tp_window_can_post(&cm->win) && (!t->peer_closed || cm->win.posted != t->rx_end)) {
		rc = tp__mr_handle(t->landmr, cm, &mh);
		if (rc)
			return rc;
		rc = tp__comm_issue(net, cm, t->land + (cm->win.posted % TP_CTL_SLOTS) * TP_CTL_FRAME,
				    TP_CTL_FRAME, mh, &taken);
		if (rc || !taken)
			return rc;
		cm->win.posted = cm->issued;
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
	sl->path = TP_PATH_NONE;
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
	if (!n)
		return 0;
	sl->path = TP_PATH_LIST_KERNEL; /* a list the GPU reaches, not pinned: copies */
	return tp__devq_copies(c->s, t->cp, n, TP_LIST_MAPPED, &sl->launch);
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
	bool ready;
	int rc;

	while (cm->win.retired != cm->win.unpacked) {
		sl = &cm->slot[tp_window_slot(cm->win.retired)];
		rc = tp__comm_unpacked(c->s, sl, true, &ready);
		if (rc || !ready)
			return rc;
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
		/* Before its CLOSE an empty frame carries nothing: bounded. */
		rc = n || t->peer_closed ? 0 : tp__ctl_idle(c, "empty control frames");
		if (!rc)
			rc = tp__ctl_feed(c, f + TP_CTL_FRAME_HDR, n);
		if (rc)
			return rc;
		/* test() reports no size: a short frame from a peer must not
		 * find this one's header again four frames later. */
		memset(f, 0, TP_CTL_FRAME_HDR);
		rc = tp__comm_consume(c->s->net, cm);
		if (rc)
			return rc;
		*moved = true;
	}
	return 0;
}

bool tp__ctl_owes(const struct tcpx_p2p_conn *c)
{
	return c->ctl->out_off != c->ctl->out_len || c->ctl->tx.handover;
}

/* The outgoing half: test, post what is queued, and hand what was just
 * posted to the plugin now (the peer may be waiting on it while nothing
 * here drives this side again).  A failure marks tx broken. */
static int tx_pass(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_ctl *t = c->ctl;
	struct tp_net *net = c->s->net;
	int rc;

	rc = tp__comm_test(net, &t->tx, moved);
	if (!rc)
		rc = tx_post(c, moved);
	if (!rc && t->tx.handover)
		rc = tp__comm_test(net, &t->tx, moved);
	t->tx_broken |= rc != 0;
	return rc;
}

int tp__ctl_push(struct tcpx_p2p_conn *c, bool *moved)
{
	return c->ctl->tx_broken ? 0 : tx_pass(c, moved);
}

bool tp__ctl_can_send(const struct tcpx_p2p_conn *c)
{
	return !c->ctl->tx_broken;
}

int tp__ctl_progress(struct tcpx_p2p_conn *c, bool *moved, bool *pending)
{
	struct tp_ctl *t = c->ctl;
	struct tp_comm *rx = &t->rx;
	struct tp_net *net = c->s->net;
	uint32_t tested, sent = t->tx.win.tested;
	int rc;

	rc = tx_pass(c, moved);
	if (t->tx.win.tested != sent)
		tp__tl_mark(TP_TL_CTL_SEND_DONE);
	tested = rx->win.tested;
	if (!rc)
		rc = tp__comm_test(net, rx, moved);
	if (rx->win.tested != tested) {
		c->alive.heard = true;
		tp__tl_mark(TP_TL_CTL_RECV_DONE);
	}
	for (; !rc && rx->win.unpacked != rx->win.tested; rx->win.unpacked++) {
		struct tp_slot *sl = &rx->slot[tp_window_slot(rx->win.unpacked)];

		sl->launch = 0;
		sl->path = TP_PATH_NONE;
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
