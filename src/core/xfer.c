/* Transfers: posting, completion and waiting. */
#include <stdlib.h>

#include "core/core.h"
#include "util/error.h"

static int post(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t off, size_t len, enum tp_dir dir,
		tcpx_p2p_xfer **out)
{
	struct tcpx_p2p_xfer *x;
	struct tp_progress st;
	uint64_t before;
	int rc;

	if (!c || !mr || !out)
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL argument", dir ? "recv" : "send");
	if (mr->s != c->s)
		return tp__error(TCPX_P2P_EINVAL, "%s: mr belongs to another session",
				 dir ? "recv" : "send");
	if (off > mr->len || len > mr->len - off)
		return tp__error(TCPX_P2P_EINVAL, "%s: [%zu, +%zu) outside the %zu-byte region",
				 dir ? "recv" : "send", off, len, mr->len);
	x = calloc(1, sizeof(*x));
	if (!x)
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", dir ? "recv" : "send");
	x->c = c;
	x->mr = mr;
	x->dir = dir;
	x->off = off;
	x->len = len;
	x->chunk = tp_chunk_size(len, (unsigned)c->nchan, c->s->cfg.chunk_bytes);
	x->nchunks = tp_chunk_count(len, x->chunk);

	pthread_mutex_lock(&c->lock);
	if (c->err) {
		rc = tp__error(c->err, "%s: the connection failed earlier: %s",
			       dir ? "recv" : "send", c->why[0] ? c->why : tcpx_p2p_strerror(c->err));
		pthread_mutex_unlock(&c->lock);
		free(x);
		return rc;
	}
	pthread_mutex_lock(&c->s->lock);
	mr->inflight++;
	pthread_mutex_unlock(&c->s->lock);
	tp__xfer_enqueue(c, x);
	/* Post what fits now; errors land on the xfer and the conn. */
	before = c->completed;
	tp__progress(c, &st);
	before = c->completed - before;
	pthread_mutex_unlock(&c->lock);
	tp__engine_notify(c->s, before);
	tp__engine_kick(c->s);
	*out = x;
	return 0;
}

int tcpx_p2p_send(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
		  tcpx_p2p_xfer **out)
{
	return post(c, mr, offset, len, TP_SEND, out);
}

int tcpx_p2p_recv(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
		  tcpx_p2p_xfer **out)
{
	return post(c, mr, offset, len, TP_RECV, out);
}

static int xfer_result(const struct tcpx_p2p_xfer *x)
{
	if (!x->err)
		return 0;
	if (x->c && x->c->why[0])
		return tp__error(x->err, "transfer failed: %s", x->c->why);
	return tp__error(x->err, "transfer failed: %s", tcpx_p2p_strerror(x->err));
}

/* Is x complete?  Read without the conn lock, so that callers polling
 * in progress-thread mode never make the thread skip the conn; the
 * release store that sets done (progress.c, conn.c) orders x->err. */
static bool xfer_done(struct tcpx_p2p_xfer *x)
{
	if (!x->c) /* its connection was destroyed: failed, final */
		return true;
	return __atomic_load_n(&x->done, __ATOMIC_ACQUIRE);
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
	int64_t deadline = timeout_ms < 0 ? INT64_MAX : tp__now_ns() + (int64_t)timeout_ms * 1000000;
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
			if (tp__now_ns() >= deadline)
				return -1;
			tp__engine_wait_completion(s, seen, deadline);
			continue;
		}
		/* At least one pass, even with timeout 0: a poll must drive. */
		tp__engine_pass(s, n == 1 ? xs[0]->c : NULL, &st);
		for (i = 0; i < n; i++)
			if (xfer_done(xs[i]))
				return i;
		if (tp__now_ns() >= deadline)
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
		free(x);
		return 0;
	}
	pthread_mutex_lock(&c->lock);
	if (!x->done) {
		pthread_mutex_unlock(&c->lock);
		return tp__error(TCPX_P2P_EBUSY, "xfer_release: transfer still pending");
	}
	/* A failed xfer stays with its conn until the comms are closed. */
	keep = x->err != 0;
	x->released = true;
	pthread_mutex_unlock(&c->lock);
	if (!keep)
		free(x);
	return 0;
}
