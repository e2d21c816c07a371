/* The data requests of a closing connection (close.h).  A closing conn
 * (its CLOSE queued: the caller's destroy or the peer's CLOSE) posts no
 * more chunks, but the requests the plugin already has still complete. */
#include <stdlib.h>

#include "core/close/close.h"
#include "core/conn.h"
#include "core/ctl.h"
#include "core/mr.h"
#include "core/pipeline/chunk.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/stream.h"
#include "core/pipeline/window.h"
#include "core/session.h"
#include "util/error.h"

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

/* The peer's CLOSE (its counts on the comms, ctl.c).  Each count is
 * bounded by what this side knows, so that a peer's number never makes it
 * post more than the peer can be owed: the peer's sends on a channel by
 * the chunks it announced there, its receives by one window past the
 * chunks this side announced (receives posted ahead of their chunks) and
 * past this side's sends (a receive completes only against a send).  A count beyond fails the handshake (EPROTO).
 * Throw-away receives stop one window past this side's own
 * (tp__close_drain): a peer further ahead is one whose plugin completed
 * its sends without a receive (the emulator, TCP plugins), so nothing of
 * it waits for them. */
int tp__close_counts(struct tcpx_p2p_conn *c)
{
	uint32_t sends, recvs, most;
	int rc;

	for (int i = 0; i < c->nchan; i++) {
		sends = c->recv[i].peer_count;
		recvs = c->send[i].peer_count;
		rc = close_count_ok(&c->recv[i], sends, c->ctl->peer_on[i], i, "sends");
		/* its receives posted ahead of chunks not yet announced
		 * (stream.c) are one window at most */
		most = c->dir[TP_SEND].on[i] + TP_WINDOW_SLOTS;
		if ((int32_t)(most - (c->send[i].issued + TP_WINDOW_SLOTS)) > 0)
			most = c->send[i].issued + TP_WINDOW_SLOTS;
		if (!rc)
			rc = close_count_ok(&c->send[i], recvs, most, i, "receives");
		if (rc)
			return rc;
	}
	for (int i = 0; i < c->nchan; i++) {
		/* Its sends on channel i meet this side's receives, and back. */
		sends = c->recv[i].peer_count;
		most = c->recv[i].issued + TP_WINDOW_SLOTS;
		c->recv[i].drain_to = (int32_t)(sends - most) > 0 ? most : sends;
		c->send[i].drain_to = c->send[i].peer_count;
		c->recv[i].drain_set = c->send[i].drain_set = true;
	}
	return 0;
}

/* A closing conn (its CLOSE queued: the caller's destroy or the peer's
 * CLOSE) posts no more chunks, but the requests the plugin already has
 * still complete: the peer's bytes for receives posted here may arrive
 * after its CLOSE, and sends finish.  They are tested and handed back, the
 * receives unpacked nowhere (their transfers have failed), and their xfers
 * stay listed, holding their regions, until conn_destroy.  Both CLOSEs
 * carry each side's count of requests per data comm; a side posts empty
 * sends, or receives into a throw-away buffer, until its count on each comm
 * reaches the peer's on the other end, so that every request of both sides
 * completes (a plugin whose sends wait for the receiver's receive keeps
 * the peer's sends posted otherwise). */
void tp__close_freeze(struct tcpx_p2p_conn *c)
{
	for (int i = 0; i < 2 * c->nchan; i++) {
		struct tp_comm *cm = i < c->nchan ? &c->send[i] : &c->recv[i - c->nchan];

		/* Prepared, not handed over: dropped (their gathers end
		 * before the staging goes: conn_destroy waits for them). */
		cm->win.posted = cm->bound = cm->issued;
		cm->cursor = NULL;
		/* Their transfers have failed: chunks in flight retire none. */
		for (uint32_t k = cm->win.retired; k != cm->issued; k++)
			cm->slot[tp_window_slot(k)].x = NULL;
	}
}

/* Post one request past this side's own: an empty send, or a receive of
 * a whole chunk into memory nothing reads.  Returns 1 when the plugin took
 * it. */
static int post_drain(struct tcpx_p2p_conn *c, struct tp_comm *cm)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_net *net = s->net;
	size_t bytes = s->cfg.chunk_bytes;
	struct tp_slot *sl = &cm->slot[tp_window_slot(cm->win.posted)];
	struct tcpx_p2p_mr *mr;
	char *buf;
	bool taken;
	void *mh;
	int rc;

	if (cm->dir == TP_SEND) {
		buf = c->ctl->txbuf;
		mr = c->ctl->txmr;
	} else if (cm->bounce_on_device) { /* TCPX receives only into device memory */
		buf = c->land;
		mr = c->landmr;
	} else {
		/* A chunk of host memory per comm, one receive at a time in it
		 * (drain_comm): no two writes of the plugin's threads meet. */
		size_t each = (bytes + 4095) & ~(size_t)4095;

		if (!c->closing.drain_buf) {
			c->closing.drain_buf = aligned_alloc(4096, each * (size_t)c->nchan);
			if (!c->closing.drain_buf)
				return tp__error(TCPX_P2P_ENOMEM, "close: out of memory");
			rc = tp__mr_register(s, c->closing.drain_buf, each * (size_t)c->nchan,
					     TCPX_P2P_MEM_HOST, 0, &c->closing.drain_mr);
			if (rc)
				return rc;
		}
		buf = c->closing.drain_buf + each * (size_t)(cm - c->recv);
		mr = c->closing.drain_mr;
	}
	rc = tp__mr_handle(mr, cm, &mh);
	if (rc)
		return rc;
	/* The slot is free (the window has room): cleared before the plugin
	 * may take it, so that no field of an earlier chunk stays — but for
	 * its copy list, the slot's own allocation (freed with the comm). */
	*sl = (struct tp_slot){ .got = TP_NET_SIZE_UNKNOWN, .cp = sl->cp, .cp_cap = sl->cp_cap,
				.cp_pinned = sl->cp_pinned };
	rc = tp__comm_issue(net, cm, buf, cm->dir == TP_SEND ? 0 : bytes, mh, &taken);
	if (rc || !taken)
		return rc;
	cm->win.posted = cm->bound = cm->issued;
	return 1;
}

static int drain_comm(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	int rc;

	/* Throw-away receives the plugin writes in place (no bounce buffer)
	 * go one at a time per comm. */
	while (cm->drain_set && (int32_t)(cm->drain_to - cm->issued) > 0 &&
	       tp_window_can_post(&cm->win) &&
	       (cm->dir == TP_SEND || cm->meta || cm->win.retired == cm->issued)) {
		rc = post_drain(c, cm);
		if (rc <= 0)
			return rc;
		*moved = true;
	}
	rc = tp__stream_test(c, cm, moved, NULL);
	if (rc || cm->dir == TP_SEND)
		return rc;
	/* What arrived is handed back as it is: never unpacked. */
	for (; cm->win.unpacked != cm->win.tested; cm->win.unpacked++)
		cm->slot[tp_window_slot(cm->win.unpacked)].path = TP_PATH_NONE;
	return tp__stream_consume(c, cm, moved, NULL);
}

int tp__close_drain(struct tcpx_p2p_conn *c, bool *moved)
{
	int rc = 0;

	for (int i = 0; i < c->nchan && !rc && !c->closing.drain_failed; i++) {
		rc = drain_comm(c, &c->send[i], moved);
		if (!rc)
			rc = drain_comm(c, &c->recv[i], moved);
	}
	/* What cannot complete now never will: the close ends unclean. */
	if (rc)
		c->closing.drain_failed = true;
	return rc;
}

bool tp__close_drained(const struct tcpx_p2p_conn *c)
{
	for (int i = 0; i < 2 * c->nchan; i++) {
		const struct tp_comm *cm = i < c->nchan ? &c->send[i] : &c->recv[i - c->nchan];

		if (!cm->drain_set || (int32_t)(cm->drain_to - cm->issued) > 0 ||
		    cm->win.retired != cm->issued)
			return false;
	}
	return true;
}
