/* Waiting on, releasing, cancelling and querying a transfer (api.h: no
 * lock held on entry; takes the conn's lock and drives the engine). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/api/api.h"
#include "core/conn.h"
#include "core/cq.h"
#include "core/engine.h"
#include "core/gate.h"
#include "core/items/items.h"
#include "core/pass.h"
#include "core/pipeline/devq.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"

static int xfer_result(const struct tcpx_p2p_xfer *x)
{
	if (!x->err)
		return 0;
	if (x->why[0])
		return tp__error(x->err, "%s failed: %s", tp__op_name(x->op), x->why);
	if (x->c && x->c->why[0])
		return tp__error(x->err, "transfer failed: %s", x->c->why);
	return tp__error(x->err, "transfer failed: %s", tcpx_p2p_strerror(x->err));
}

/* Is x complete?  Read without the conn lock, so that callers polling
 * in progress-thread mode never make the thread skip the conn; the
 * release store that sets DONE (xfer_state.c) orders x->err. */
static bool xfer_done(struct tcpx_p2p_xfer *x)
{
	if (!x->c) /* its connection was destroyed: failed, final */
		return true;
	return __atomic_load_n(&x->state, __ATOMIC_ACQUIRE) == TP_XS_DONE;
}

static int xfer_final(struct tcpx_p2p_xfer *x)
{
	struct tcpx_p2p_conn *c = x->c;
	int rc;

	if (!c)
		return xfer_result(x);
	pthread_mutex_lock(&c->lock);
	rc = xfer_result(x);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int tcpx_p2p_test(tcpx_p2p_xfer *x, int *done)
{
	struct tp_pass_result st;
	int rc;

	if (!x || !done)
		return tp__error(TCPX_P2P_EINVAL, "test: NULL argument");
	if (x->c && !tp__engine_threaded(x->c->s) && !xfer_done(x))
		tp__engine_pass(x->c->s, x->c, &st);
	if (!xfer_done(x)) {
		*done = 0;
		return 0;
	}
	rc = xfer_final(x);
	if (!rc)
		*done = 1;
	return rc;
}

/*
 * Index of the first complete xfer of xs, or -1.  Without a progress
 * thread each round drives the whole session once (waiting for the conn of
 * a single waited-on xfer, skipping conns other threads hold); with one,
 * it sleeps until the thread reports a completion.  s is the session of
 * the xfers that still have a conn.
 */
static int wait_some(struct tcpx_p2p_xfer *const *xs, int n, struct tcpx_p2p_session *s,
		     int timeout_ms)
{
	tp_deadline deadline = tp__deadline_ms(timeout_ms);
	struct tp_backoff b = { 0 };
	struct tp_pass_result st;
	uint64_t seen;
	int i;

	for (;;) {
		seen = s && tp__engine_threaded(s) ? tp__engine_completions(s) : 0;
		for (i = 0; i < n; i++)
			if (xfer_done(xs[i]))
				return i;
		if (tp__engine_threaded(s)) {
			if (tp__deadline_passed(deadline))
				return -1;
			tp__engine_wait_completion(s, seen, deadline);
			continue;
		}
		/* At least one pass, even with timeout 0: a poll must drive. */
		tp__engine_pass(s, n == 1 ? xs[0]->c : NULL, &st);
		for (i = 0; i < n; i++)
			if (xfer_done(xs[i]))
				return i;
		if (tp__deadline_passed(deadline))
			return -1;
		tp__backoff(&b, &st);
	}
}

int tcpx_p2p_wait(tcpx_p2p_xfer *x, int timeout_ms)
{
	if (!x)
		return tp__error(TCPX_P2P_EINVAL, "wait: NULL xfer");
	if (wait_some(&x, 1, x->c ? x->c->s : NULL, timeout_ms) < 0)
		return tp__error(TCPX_P2P_ETIMEDOUT, "wait: transfer pending after %d ms",
				 timeout_ms);
	return xfer_final(x);
}

int tcpx_p2p_wait_any(tcpx_p2p_xfer *const *xfers, int n, int timeout_ms, unsigned flags,
		      int *index)
{
	struct tcpx_p2p_session *s = NULL;
	int i;

	if (!xfers || n <= 0 || !index || flags)
		return tp__error(TCPX_P2P_EINVAL, "wait_any: NULL argument, n %d or flags 0x%x", n,
				 flags);
	for (i = 0; i < n; i++) {
		if (!xfers[i])
			return tp__error(TCPX_P2P_EINVAL, "wait_any: xfers[%d] is NULL", i);
		if (!xfers[i]->c)
			continue;
		if (s && xfers[i]->c->s != s)
			return tp__error(TCPX_P2P_EINVAL, "wait_any: xfers of different sessions");
		s = xfers[i]->c->s;
	}
	i = wait_some(xfers, n, s, timeout_ms);
	if (i < 0)
		return tp__error(TCPX_P2P_ETIMEDOUT, "wait_any: no transfer completed in %d ms",
				 timeout_ms);
	*index = i;
	return 0;
}

int tcpx_p2p_xfer_release(tcpx_p2p_xfer *x)
{
	struct tcpx_p2p_conn *c;
	bool keep;

	if (!x)
		return tp__error(TCPX_P2P_EINVAL, "xfer_release: NULL xfer");
	c = x->c;
	if (!c) {
		tp__xfer_free(x);
		return 0;
	}
	pthread_mutex_lock(&c->lock);
	if (x->state != TP_XS_DONE) {
		pthread_mutex_unlock(&c->lock);
		return tp__error(TCPX_P2P_EBUSY, "xfer_release: transfer still pending");
	}
	tp__cq_forget(x);
	/* A failed xfer stays with its conn until the comms are closed. */
	keep = x->conn_failed;
	x->released = true;
	tp_list_remove(&c->live, x, llink);
	pthread_mutex_unlock(&c->lock);
	if (!keep)
		tp__xfer_free(x);
	return 0;
}

/* Cancel x (c->lock held): see tcpx_p2p_xfer_cancel in the header for what
 * each kind does.  A receive not yet matched leaves the list at once and
 * hands its place to the receive after it (or to the list's tail), so the
 * peer's send it would have met goes nowhere; anything streaming is cut at
 * its first chunk not yet prepared, and ends when its chunks retire. */
static int cancel_locked(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	struct tcpx_p2p_xfer *next;

	if (x->cancelled || x->state == TP_XS_DONE || x->state == TP_XS_SETTLING || c->err)
		return 0;
	if (x->state == TP_XS_GATED) { /* never announced: the peer knows nothing of it */
		tp__gate_fail(c, x, TCPX_P2P_ECANCELED);
		snprintf(x->why, sizeof(x->why), "cancelled before its event completed");
		return 0;
	}
	if (x->state == TP_XS_UNMATCHED) {
		next = x->wlink.next;
		if (next)
			next->skip_before += 1 + x->skip_before;
		else
			c->unmatched_skip += 1 + x->skip_before;
		snprintf(x->why, sizeof(x->why), "cancelled");
		tp__xfer_complete(c, x, TCPX_P2P_ECANCELED);
		return 0;
	}
	/* A read not yet answered has prepared nothing; anything else is
	 * too late once every chunk went to the plugin. */
	if (!(x->op == TP_OP_READ && x->state == TP_XS_UNANSWERED) &&
	    (x->state == TP_XS_UNANSWERED || x->prepared >= x->nchunks || !x->len))
		return 0;
	if (x->op == TP_OP_READ) {
		int rc = tp__items_send_cancel(c, x->id);

		if (rc)
			return rc;
	}
	x->cancelled = true;
	if (!x->err) {
		x->err = TCPX_P2P_ECANCELED;
		snprintf(x->why, sizeof(x->why), "cancelled");
	}
	return 0;
}

int tcpx_p2p_xfer_cancel(tcpx_p2p_xfer *x)
{
	struct tcpx_p2p_session *s;
	struct tcpx_p2p_conn *c;
	uint64_t ended;
	int rc;

	if (!x)
		return tp__error(TCPX_P2P_EINVAL, "xfer_cancel: NULL xfer");
	c = x->c;
	if (!c || x->op > TP_OP_READ) /* ended with its connection */
		return 0;
	s = c->s;
	pthread_mutex_lock(&c->lock);
	ended = c->completed;
	rc = cancel_locked(c, x);
	ended = c->completed - ended; /* ended here, before the pass counts: waiters told */
	tp__post_pass_unlock(c);
	tp__engine_notify(s, ended);
	return rc;
}

TCPX_P2P_API int tcpx_p2p_xfer_query(tcpx_p2p_xfer *x, tcpx_p2p_xfer_info *info)
{
	tcpx_p2p_xfer_info full = { .struct_size = sizeof(full) };
	struct tcpx_p2p_conn *c;

	if (!x || !info || info->struct_size < offsetof(tcpx_p2p_xfer_info, done))
		return tp__error(TCPX_P2P_EINVAL, "xfer_query: NULL argument or struct_size %zu",
				 info ? info->struct_size : 0);
	c = x->c;
	if (c)
		pthread_mutex_lock(&c->lock);
	full.done = xfer_done(x);
	full.err = full.done ? x->err : 0;
	full.stalled = !full.done && __atomic_load_n(&x->stalled, __ATOMIC_RELAXED);
	full.chunks = x->nchunks;
	full.chunks_done = x->retired;
	if (c)
		pthread_mutex_unlock(&c->lock);
	if (info->struct_size < sizeof(full))
		full.struct_size = info->struct_size;
	memcpy(info, &full, full.struct_size);
	return 0;
}

TCPX_P2P_API int tcpx_p2p_stream_wait(tcpx_p2p_xfer *x, void *stream)
{
	struct tcpx_p2p_conn *c;
	void *ctx;
	int rc, slot;

	if (!x)
		return tp__error(TCPX_P2P_EINVAL, "stream_wait: NULL xfer");
	c = x->c;
	if (!c) /* ended with its connection: nothing to wait for */
		return xfer_result(x);
	if (c->s->cfg.gpu < 0)
		return tp__error(TCPX_P2P_ENOTSUP, "stream_wait: the session has no GPU "
				 "(config gpu = -1)");
	if (c->s->cfg.unpack == TCPX_P2P_UNPACK_HOST)
		return tp__error(TCPX_P2P_ENOTSUP, "stream_wait: not with unpack = host (its host "
				 "staging needs the session's stream and synchronous CUDA calls, which "
				 "a held stream blocks)");
	/* NULL, cudaStreamLegacy, cudaStreamPerThread: refused whatever x's
	 * state, so that a caller meets it at once (tp__dev_stream_check says
	 * why, for them and for every blocking stream) */
	if ((uintptr_t)stream <= 2)
		return tp__error(TCPX_P2P_EINVAL, "stream_wait: a default CUDA stream cannot be "
				 "held: use a stream made with cudaStreamNonBlocking");
	pthread_mutex_lock(&c->lock);
	if (x->state == TP_XS_DONE) {
		rc = xfer_result(x);
	} else if (x->hold) {
		rc = tp__error(TCPX_P2P_EBUSY, "stream_wait: the transfer holds a stream already");
	} else if (x->mtype == TCPX_P2P_MEM_HOST && !x->mapped) {
		/* its copies would go to the stream as synchronous device-to-pageable
		 * copies, which a held stream can block forever (docs/api.md) */
		rc = tp__error(TCPX_P2P_EINVAL, "stream_wait: the transfer's memory is pageable; "
			       "register it page-locked (TCPX_P2P_MR_PIN) to hold a stream for it");
	} else {
		ctx = tp__gpu_save(c->s);
		rc = tp__dev_stream_check(stream);
		if (!rc)
			rc = tp__devq_hold(c->s, stream, &slot);
		if (!rc)
			x->hold = slot + 1;
		tp__dev_ctx_restore(ctx);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

TCPX_P2P_API int tcpx_p2p_xfer_deadline(tcpx_p2p_xfer *x, int timeout_ms)
{
	struct tcpx_p2p_conn *c;

	if (!x || timeout_ms <= 0)
		return tp__error(TCPX_P2P_EINVAL, "xfer_deadline: NULL xfer or timeout_ms %d",
				 timeout_ms);
	c = x->c;
	if (!c) /* its connection was destroyed: it has ended */
		return 0;
	pthread_mutex_lock(&c->lock);
	if (x->state != TP_XS_DONE) {
		x->deadline_ns = tp__now_ns() + (int64_t)timeout_ms * TP_NS_PER_MS;
		/* The earliest is what a pass compares with; a later one is found
		 * when that one has passed or ended (live.c). */
		if (!c->alive.deadline_ns || x->deadline_ns < c->alive.deadline_ns)
			c->alive.deadline_ns = x->deadline_ns;
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}
