/* Transfers: posting, completion and waiting. */
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "core/core.h"
#include "util/error.h"

static int post(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t off, size_t len, enum tp_dir dir,
		tcpx_p2p_xfer **out)
{
	struct tcpx_p2p_xfer *x;
	bool moved;
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
	x->nchunks = tp_chunk_count(len, c->s->cfg.chunk_bytes);

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
	tp__progress(c, &moved);
	pthread_mutex_unlock(&c->lock);
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

int tcpx_p2p_test(tcpx_p2p_xfer *x, int *done)
{
	struct tcpx_p2p_conn *c;
	bool moved;
	int rc;

	if (!x || !done)
		return tp__error(TCPX_P2P_EINVAL, "test: NULL argument");
	c = x->c;
	if (!c) /* its connection was destroyed: failed, final */
		return xfer_result(x);
	pthread_mutex_lock(&c->lock);
	if (!x->done)
		tp__progress(c, &moved);
	rc = x->done ? xfer_result(x) : 0;
	if (!rc)
		*done = x->done;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Idle policy while waiting: yield first (the plugin's helper threads may
 * need this core), then sleep briefly so that a stalled peer costs no CPU. */
static void idle(unsigned *spins)
{
	struct timespec ts = { 0, 20 * 1000 };

	if (++*spins < 256) {
		sched_yield();
		return;
	}
	nanosleep(&ts, NULL);
}

int tcpx_p2p_wait(tcpx_p2p_xfer *x, int timeout_ms)
{
	struct tcpx_p2p_conn *c;
	int64_t deadline;
	unsigned spins = 0;
	bool moved;
	int rc = 0;

	if (!x)
		return tp__error(TCPX_P2P_EINVAL, "wait: NULL xfer");
	c = x->c;
	if (!c)
		return xfer_result(x);
	deadline = timeout_ms < 0 ? INT64_MAX : now_ns() + (int64_t)timeout_ms * 1000000;
	pthread_mutex_lock(&c->lock);
	while (!x->done) {
		tp__progress(c, &moved);
		if (x->done)
			break;
		if (now_ns() >= deadline) {
			pthread_mutex_unlock(&c->lock);
			return tp__error(TCPX_P2P_ETIMEDOUT, "wait: transfer pending after %d ms",
					 timeout_ms);
		}
		/* Let other threads post or progress between passes. */
		pthread_mutex_unlock(&c->lock);
		if (moved)
			spins = 0;
		else
			idle(&spins);
		pthread_mutex_lock(&c->lock);
	}
	rc = xfer_result(x);
	pthread_mutex_unlock(&c->lock);
	return rc;
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
