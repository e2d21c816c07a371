/* tcpx_p2p_conn_destroy (api.h: no lock held on entry): a connection the
 * caller lets go; it drives the engine until the close is under way
 * (close/ does the close). */
#include <stdio.h>
#include <stdlib.h>

#include "core/api/api.h"
#include "core/close/close.h"
#include "core/conn.h"
#include "core/ctl.h"
#include "core/engine.h"
#include "core/items/items.h"
#include "core/pass.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/pipeline/hostcopy.h"
#include "core/pipeline/stream.h"
#include "core/pipeline/window.h"
#include "core/session.h"
#include "util/error.h"
#include "util/log.h"

/* conn_destroy of a conn whose CLOSE is queued with chunks in the plugin's
 * hands that read or write the caller's memory: drive it, its session's
 * other conns and the process's other sessions until those completed
 * (true) or cannot, or close_timeout_ms passed (false). */
static bool wait_caller_memory(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_session *s = c->s;
	tp_deadline deadline = tp__deadline_ms(s->cfg.close_timeout_ms);
	struct tp_backoff b = { 0 };
	struct tp_pass_result st, one;

	for (;;) {
		/* Out of the engine's list, but a caller's thread may still
		 * look at one of its xfers. */
		pthread_mutex_lock(&c->lock);
		tp__pass_conn(c, &st);
		pthread_mutex_unlock(&c->lock);
		if (!tp__stream_caller_inflight(c))
			return true;
		if (c->closing.drain_failed || tp__deadline_passed(deadline))
			return false;
		/* Like every wait of the library: the session's other
		 * connections move meanwhile, whatever the peer does. */
		tp__engine_pass(s, NULL, &one);
		st.moved |= one.moved;
		st.pending |= one.pending;
		tp__close_drive_others(s, &st);
		tp__backoff(&b, &st);
	}
}

/* Destroying a conn closes it with the peer (docs/architecture.md
 * "Closing a connection"): both sides say CLOSE on the control channel and
 * post exactly the receives the other side's frames fill, so that no
 * request is left posted when the comms are closed (NCCL never closes a
 * comm with requests in flight; some plugins then break the other comms
 * of the process).  The caller gets control back at once: the handshake
 * ends in later passes of the session, or at session_destroy, within the
 * session's timeout.  Where it cannot run (the conn failed, or chunks
 * are in the plugin's hands) the comms are closed now, and a warning says
 * how many requests were still posted. */
static void destroy_one(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_session *s;
	const char *unclean = NULL;
	char reason[300];
	uint64_t before;
	void *ctx;
	int i;

	s = c->s;
	ctx = tp__gpu_save(s);
	/* No pass of the session reaches this conn after this (the session's
	 * statistics still count it). */
	tp__engine_remove(s, c);
	pthread_mutex_lock(&c->lock);
	/* A conn whose CLOSE only told the peer of its failure waits for no
	 * answer (close/exchange.c, tp__close_tell). */
	if (c->err && (!tp__ctl_closing(c) || c->closing.told)) {
		snprintf(reason, sizeof(reason), "the connection had failed: %s", c->why);
		unclean = reason;
	}
	before = c->completed;
	if (c->dir[TP_SEND].head || c->dir[TP_RECV].head || c->unmatched.head || c->answers.head ||
	    c->settling.head || c->gates.head) {
		if (!c->err)
			TP_INFO("conn", "closing the connection to %s with transfers pending",
				c->peer[0] ? c->peer : "peer");
		tp__conn_cancel(c, c->err ? c->err : TCPX_P2P_ECLOSED);
	}
	before = c->completed - before;
	pthread_mutex_unlock(&c->lock);
	tp__engine_notify(s, before);
	/* Unpacks queued for this conn read its bounce buffers: let them end
	 * before the comms (and the buffers) go. */
	tp__devq_drain(s);
	for (i = 0; i < c->nchan; i++) {
		for (unsigned k = 0; k < TP_WINDOW_SLOTS; k++) {
			tp__hcopy_wait(&c->send[i].slot[k].hjob);
			tp__hcopy_wait(&c->recv[i].slot[k].hjob);
		}
	}
	tp__session_use_gpu(s);
	c->destroyed = true;
	/* Notifications naming c go before the caller can no longer take them. */
	tp__items_destroy(c);
	if (!unclean && tp__close_queue(c))
		unclean = "out of memory for the close handshake";
	/* Chunks in the plugin's hands that may still read or write the
	 * caller's buffers complete (the peer, told of the close, finishes
	 * what it has under way too) before conn_destroy returns, or the
	 * comms close as they are.  Everything else of the close (chunks into
	 * bounce pages or the library's own staging, throw-away requests, the
	 * control frames) ends on the closing list: the peer never holds the
	 * caller for those. */
	if (!unclean && tp__stream_caller_inflight(c) && !wait_caller_memory(c))
		unclean = c->closing.drain_failed ? "transfers were under way and their chunks failed"
					  : "transfers were under way in the caller's memory and "
					    "their chunks did not complete within close_timeout_ms";
	/* Its transfers are failed and counted: the session's statistics keep
	 * them (and the conn leaves the engine's lists before the closing list
	 * takes its link). */
	tp__engine_retire(s, c);
	if (unclean) {
		/* With chunks still posted the plugin may write into the buffers
		 * of the failed xfers: the comms close before the caller gets
		 * them back. */
		tp__close_finish(c, unclean);
	} else {
		tp__close_drop_xfers(c);
		/* A progress thread asleep for want of connections has one to close. */
		if (tp__close_linger(c))
			tp__engine_kick(s);
	}
	/* After the conn is on the closing list: a session_destroy that then
	 * finds no conn of the caller's finds this one's close. */
	pthread_mutex_lock(&s->lock);
	s->nconns--;
	pthread_mutex_unlock(&s->lock);
	tp__dev_ctx_restore(ctx);
}

/* A handle with re-dial (setup/redial.c) destroys each of its
 * incarnations, oldest first, then itself. */
int tcpx_p2p_conn_destroy(tcpx_p2p_conn *c)
{
	struct tcpx_p2p_conn **incs;
	int i, n;

	if (!c)
		return tp__error(TCPX_P2P_EINVAL, "conn_destroy: NULL conn");
	tp__redial_end(c, &incs, &n);
	for (i = 0; i < n; i++)
		destroy_one(incs[i]);
	free(incs);
	destroy_one(c);
	return 0;
}
