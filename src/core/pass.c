/* One connection's progress pass (pass.h): every stage on every channel,
 * never blocking; a stage that cannot move is left for the next pass
 * while the others go on.  Completions flow back here: the data stages
 * return the transfers whose last chunk retired, and the pass finishes
 * them (xfer.c; an in-write answers its initiator, inbound.c). */
#include "core/close/close.h"
#include "core/conn.h"
#include "core/ctl.h"
#include "core/gate.h"
#include "core/items/items.h"
#include "core/live.h"
#include "core/pass.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/stream.h"
#include "core/session.h"
#include "core/xfer.h"

/* Transfers whose chunks all retired in a stage: each completes, or waits
 * for its answer; an in-write's initiator is answered (an error there
 * fails the conn).  rc: the stage's own result, kept first. */
static int finish(struct tcpx_p2p_conn *c, struct tp_xlist *done, int rc)
{
	struct tcpx_p2p_xfer *x;
	int r;

	while ((x = done->head)) {
		tp_list_remove(done, x, dlink);
		if (x->op == TP_OP_IN_WRITE) {
			/* After a failure the conn fails: later writes are not
			 * answered (the peer fails them with the conn), nor
			 * are their notifications delivered. */
			if (rc) {
				tp__items_drop_note(c, x->first_seq + x->nchunks);
				tp__xfer_complete(c, x, rc);
				continue;
			}
			r = tp__items_in_write_done(c, x);
			rc = rc ? rc : r;
		} else {
			tp__xfer_chunks_done(c, x);
		}
	}
	return rc;
}

/* Work the next pass can do at once: hand-overs owed, unpacks running. */
static void assess(const struct tcpx_p2p_conn *c, struct tp_pass_result *st)
{
	int i;

	st->busy = st->busy || c->dir[TP_SEND].head || c->dir[TP_RECV].head ||
		   c->unmatched.head || c->answers.head || c->settling.head || c->gates.head ||
		   tp__items_busy(c);
	for (i = 0; i < c->nchan && !st->pending; i++)
		st->pending = c->send[i].handover || c->recv[i].handover ||
			      c->send[i].issued != c->send[i].win.posted ||
			      c->recv[i].win.unpacked != c->recv[i].win.retired;
}

/* The data channels: sends (test, post, issue), then receives (test, bind
 * the chunks of announcements just matched to receives posted ahead,
 * unpack batched over the channels, consume, post, issue): a chunk that
 * landed before its announcement is unpacked in the pass that matched it. */
static int data_pass(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_xlist done = { 0 };
	int i, rc = 0;

	for (i = 0; i < c->nchan && !rc; i++) {
		rc = finish(c, &done, tp__stream_test(c, &c->send[i], moved, &done));
		if (!rc)
			rc = tp__stream_post(c, &c->send[i], moved);
		if (!rc)
			rc = tp__stream_issue(c, &c->send[i], moved);
	}
	for (i = 0; i < c->nchan && !rc; i++) {
		if (!tp__stream_resting(c, &c->recv[i]))
			rc = tp__stream_test(c, &c->recv[i], moved, &done);
		if (!rc)
			rc = tp__stream_bind(c, &c->recv[i], moved);
	}
	if (!rc)
		rc = tp__stream_unpack(c, moved);
	for (i = 0; i < c->nchan && !rc; i++) {
		rc = finish(c, &done, tp__stream_consume(c, &c->recv[i], moved, &done));
		if (!rc)
			rc = tp__stream_post(c, &c->recv[i], moved);
		if (!rc)
			rc = tp__stream_issue(c, &c->recv[i], moved);
	}
	return rc;
}

/* The control channel (ctl.c), then the peer's messages it parsed, each
 * handed to the item protocol in order (inbound.c): the channel only
 * parses and queues them.  The first error, the channel's kept first. */
static int ctl_pass(struct tcpx_p2p_conn *c, bool *moved, bool *pending)
{
	struct tp_ctl_msg m;
	int rc = tp__ctl_progress(c, moved, pending), r;

	while (tp__ctl_next(c, &m)) {
		r = tp__items_on_msg(c, m.type, m.chan, m.body, m.len);
		if (r)
			return rc ? rc : r;
	}
	return rc;
}

/* The pass failed c: the peer is told (a CLOSE, unless one is queued
 * already: the peer's answered, or a deadline's), so that an honest but
 * buggy peer's transfers fail at once rather than after its
 * dead_after_ms. */
static int fail(struct tcpx_p2p_conn *c, int rc)
{
	rc = tp__conn_fail(c, rc);
	tp__close_tell(c);
	return rc;
}

static int pass_locked(struct tcpx_p2p_conn *c, struct tp_pass_result *st)
{
	bool *moved = &st->moved;
	int rc = 0;

	*st = (struct tp_pass_result){ 0 };
	if (!c->err) {
		rc = ctl_pass(c, moved, &st->pending);
		if (rc) {
			/* A CLOSE read before the error is answered first, as it
			 * would have been: the conn fails as closed by the peer
			 * and goes on with the handshake.  (One behind a message
			 * whose handling failed was not read before it.) */
			if (tp__ctl_peer_closed(c) && tp__ctl_taken(c) && !c->closing.answered)
				(void)tp__close_in_pass(c, st);
			return fail(c, rc);
		}
	}
	/* A failed or closing conn's pass is its close; the peer's CLOSE,
	 * just read, fails the conn there. */
	rc = tp__close_in_pass(c, st);
	if (rc) {
		/* A failed conn whose close drained: the peer's transfers
		 * hosted here let go of their regions. */
		tp__items_hosted_release(c);
		return rc;
	}
	if (!tp__ctl_closing(c))
		rc = tp__live_pass(c);
	/* Gated announcements whose events completed join this pass. */
	if (!rc)
		tp__gate_pass(c, moved);
	if (!rc)
		rc = tp__items_progress(c, moved);
	/* What is queued by now (an answer to a receive just matched, above
	 * all) goes out before the data stages, as far as the control window
	 * has room: on a bounce plugin the receive's chunks may have landed
	 * already, and their unpack must not hold up the answer the sender
	 * waits for. */
	if (!rc && tp__ctl_queued(c))
		rc = tp__ctl_push(c, moved);
	if (!rc)
		rc = data_pass(c, moved);
	/* Items that ended in this pass may release notifications. */
	if (!rc && *moved)
		rc = tp__items_progress(c, moved);
	/* Announcements and acks queued by this pass go out now, not a pass later. */
	if (!rc && tp__ctl_queued(c))
		rc = ctl_pass(c, moved, &st->pending);
	if (rc)
		return fail(c, rc);
	tp__xfer_settle(c);
	assess(c, st);
	return 0;
}

/* Every pass runs here, on whichever thread drives: the plugin and CUDA
 * calls of the pass run on the session's GPU, and the thread gets its own
 * context back. */
int tp__pass_conn(struct tcpx_p2p_conn *c, struct tp_pass_result *st)
{
	void *ctx = tp__gpu_save(c->s);
	int rc = pass_locked(c, st);

	tp__dev_ctx_restore(ctx);
	return rc;
}
