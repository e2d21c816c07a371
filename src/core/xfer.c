/* Transfers: posting, completion and waiting. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/cq.h"
#include "core/ctl.h"
#include "core/engine.h"
#include "core/gate.h"
#include "core/items/items.h"
#include "core/pass.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/pipeline/stream.h"
#include "core/pipeline/vec.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/xfer.h"
#include "util/error.h"
#include "util/timeline.h"

struct tcpx_p2p_xfer *tp__xfer_new(enum tp_op op, enum tp_dir dir)
{
	struct tcpx_p2p_xfer *x = calloc(1, sizeof(*x));

	if (x) {
		x->op = op;
		x->dir = dir;
		x->t_post = x->t_moved = tp__now_ns();
	}
	return x;
}

void tp__xfer_free(struct tcpx_p2p_xfer *x)
{
	tp__cq_forget(x); /* never left queued for completions to hand out */
	tp__segs_free(x);
	free(x);
}

static bool internal(const struct tcpx_p2p_xfer *x)
{
	return x->op >= TP_OP_IN_WRITE;
}

void tp__xfer_complete(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, int err)
{
	if (x->state == TP_XS_DONE) /* failed with its conn already: its regions stay held */
		return;
	tp__segs_put(c->s, x);
	if (internal(x)) {
		tp__stats_xfer_end(c, x, err);
		c->inbound--;
		tp__items_end(c, x);
		tp__xfer_free(x);
		return;
	}
	if (!x->err)
		x->err = err;
	if (x->dir == TP_RECV && tp__ctl_owes(c)) {
		tp__xfer_set_state(x, TP_XS_SETTLING);
		tp__xlist_push(&c->settling, x);
		return;
	}
	tp__xfer_mark_done(c, x);
	c->completed++;
}

void tp__xfer_settle(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_xfer *x;

	if (!c->settling.head || tp__ctl_owes(c))
		return;
	while ((x = c->settling.head)) {
		tp__xlist_remove(&c->settling, x);
		tp__xfer_mark_done(c, x);
		c->completed++;
	}
}

void tp__xfer_chunks_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	if (x->state == TP_XS_STREAMING_UNANSWERED) {
		tp__xfer_set_state(x, TP_XS_UNANSWERED); /* the answer completes it */
		return;
	}
	tp__xfer_complete(c, x, 0);
}

uint64_t tp__params_user_data(const tcpx_p2p_xfer_params *p)
{
	if (!p || p->struct_size < offsetof(tcpx_p2p_xfer_params, user_data) + sizeof(p->user_data))
		return 0;
	return p->user_data;
}

void *tp__params_event(const tcpx_p2p_xfer_params *p)
{
	/* Read only where the caller's struct has it (0.10). */
	if (!p || p->struct_size < offsetof(tcpx_p2p_xfer_params, event) + sizeof(p->event))
		return NULL;
	return p->event;
}

int tp__params_check(const tcpx_p2p_xfer_params *p, bool notif_ok, const char *what,
		     void **event)
{
	if (event)
		*event = tp__params_event(p);
	if (!p)
		return 0;
	if (p->struct_size < offsetof(tcpx_p2p_xfer_params, notif_len) + sizeof(p->notif_len))
		return tp__error(TCPX_P2P_EINVAL, "%s: params.struct_size %zu (set it to "
				 "sizeof(tcpx_p2p_xfer_params))", what, p->struct_size);
	if (p->flags)
		return tp__error(TCPX_P2P_EINVAL, "%s: unknown flags 0x%x", what, p->flags);
	if (!p->notif && !p->notif_len)
		return 0;
	if (!notif_ok)
		return tp__error(TCPX_P2P_EINVAL, "%s takes no notification", what);
	if (!p->notif || !p->notif_len || p->notif_len > TCPX_P2P_NOTIF_LIMIT)
		return tp__error(TCPX_P2P_EINVAL, "%s: notification of %zu bytes (1..%d, "
				 "non-NULL)", what, p->notif_len, TCPX_P2P_NOTIF_LIMIT);
	return 0;
}

static const char *op_name(enum tp_op op)
{
	static const char *const names[] = { "send", "recv", "write", "read" };

	return op <= TP_OP_READ ? names[op] : "transfer";
}

int tp__xfer_post(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		  size_t notif_len, const unsigned char *rwire, size_t nrseg, void *event,
		  tcpx_p2p_xfer **out)
{
	int rc;

	if (event && c->s->cfg.gpu < 0) {
		rc = tp__error(TCPX_P2P_ENOTSUP, "%s: a CUDA event on a session without a GPU "
			       "(config gpu = -1)", op_name(x->op));
		tp__xfer_free(x);
		return rc;
	}
	x->c = c;
	pthread_mutex_lock(&c->lock);
	if (c->err) {
		rc = tp__error(c->err, "%s: the connection failed earlier: %s", op_name(x->op),
			       c->why[0] ? c->why : tcpx_p2p_strerror(c->err));
		pthread_mutex_unlock(&c->lock);
		tp__xfer_free(x);
		return rc;
	}
	tp__tl_mark(x->dir == TP_SEND ? TP_TL_SEND_POST : TP_TL_RECV_POST);
	rc = tp__gate_post(c, x, notif, notif_len, rwire, nrseg, event);
	if (rc) {
		pthread_mutex_unlock(&c->lock);
		tp__xfer_free(x);
		return rc;
	}
	tp_list_prepend(&c->live, x, llink);
	tp__post_pass_unlock(c);
	*out = x;
	return 0;
}

static int post_two_sided(tcpx_p2p_conn *c, const tcpx_p2p_seg *segs, size_t n,
			  const tcpx_p2p_xfer_params *params, enum tp_dir dir,
			  tcpx_p2p_xfer **out)
{
	const char *what = dir == TP_SEND ? "send" : "recv";
	struct tcpx_p2p_xfer *x;
	void *event;
	int rc;

	if (!c || !out)
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL argument", what);
	rc = tp__params_check(params, false, what, &event);
	if (rc)
		return rc;
	/* Gating a receive would change nothing on the wire: the peer's send
	 * decides when its bytes come, and reusing the destination is the
	 * caller's own order to keep. */
	if (event && dir == TP_RECV)
		return tp__error(TCPX_P2P_EINVAL, "recv: a receive takes no event (params.event)");
	x = tp__xfer_new(dir == TP_SEND ? TP_OP_SEND : TP_OP_RECV, dir);
	if (!x)
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	x->user_data = tp__params_user_data(params);
	rc = tp__segs_build(c, x, segs, n, what);
	if (rc) {
		tp__xfer_free(x);
		return rc;
	}
	return tp__xfer_post(c, x, NULL, 0, NULL, 0, event, out);
}

int tcpx_p2p_send(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
		  tcpx_p2p_xfer **out)
{
	tcpx_p2p_seg g = { mr, offset, len };

	if (!mr)
		return tp__error(TCPX_P2P_EINVAL, "send: NULL argument");
	return post_two_sided(c, &g, 1, NULL, TP_SEND, out);
}

int tcpx_p2p_recv(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
		  tcpx_p2p_xfer **out)
{
	tcpx_p2p_seg g = { mr, offset, len };

	if (!mr)
		return tp__error(TCPX_P2P_EINVAL, "recv: NULL argument");
	return post_two_sided(c, &g, 1, NULL, TP_RECV, out);
}

int tcpx_p2p_sendv(tcpx_p2p_conn *c, const tcpx_p2p_seg *segs, size_t nsegs,
		   const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	return post_two_sided(c, segs, nsegs, params, TP_SEND, out);
}

int tcpx_p2p_recvv(tcpx_p2p_conn *c, const tcpx_p2p_seg *segs, size_t nsegs,
		   const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	return post_two_sided(c, segs, nsegs, params, TP_RECV, out);
}

static int xfer_result(const struct tcpx_p2p_xfer *x)
{
	if (!x->err)
		return 0;
	if (x->why[0])
		return tp__error(x->err, "%s failed: %s", op_name(x->op), x->why);
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
	struct tp_progress st;
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
	struct tp_progress st;
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
		tp__xlist_remove(&c->unmatched, x);
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
