/* What a peer makes this side host: its WRITEs landing in exports here and
 * its READs served from them (the library's own items, op >=
 * TP_OP_IN_WRITE).  The target's application holds no handle on them, so
 * what it can do about one that stalls is here (docs/reliability.md,
 * "Stalled incoming transfers"): a deadline on them per connection
 * (tcpx_p2p_conn_in_deadline; checked with the caller's deadlines in
 * live.c), and a deregistration that fails the connections whose hosted
 * transfers hold the region (tcpx_p2p_mr_deregister_ex, mr.c).  Either
 * way the connection is closed with the peer, so that the peer's transfer
 * fails at once, and the regions are let go once the close has drained
 * every data request: the plugin writes into them no more. */
#include "core/close/close.h"
#include "core/conn.h"
#include "core/engine.h"
#include "core/items/items.h"
#include "core/pipeline/vec.h"
#include "core/xfer.h"
#include "util/error.h"
#include "util/time.h"

static bool hosted(const struct tcpx_p2p_xfer *x)
{
	return x->op == TP_OP_IN_WRITE || x->op == TP_OP_IN_READ;
}

int tcpx_p2p_conn_in_deadline(tcpx_p2p_conn *c, int timeout_ms)
{
	int64_t now = tp__now_ns(), ns = (int64_t)timeout_ms * TP_NS_PER_MS;
	struct tcpx_p2p_xfer *x;
	int rc = 0;

	if (!c || timeout_ms < 0)
		return tp__error(TCPX_P2P_EINVAL, "conn_in_deadline: NULL conn or timeout_ms %d",
				 timeout_ms);
	pthread_mutex_lock(&c->lock);
	if (c->err) {
		rc = tp__error(TCPX_P2P_ECLOSED, "conn_in_deadline: the connection failed earlier: "
			       "%s", c->why);
	} else {
		c->alive.in_deadline_ns = ns;
		for (int d = 0; d < 2; d++)
			for (x = c->dir[d].head; x; x = x->dlink.next) {
				if (!hosted(x) || x->state == TP_XS_DONE)
					continue;
				x->deadline_ns = ns ? now + ns : 0;
				if (ns && (!c->alive.deadline_ns ||
					   x->deadline_ns < c->alive.deadline_ns))
					c->alive.deadline_ns = x->deadline_ns;
			}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* One of c's hosted transfers holds mr (c->lock held). */
static bool holds(const struct tcpx_p2p_conn *c, const struct tcpx_p2p_mr *mr)
{
	for (int d = 0; d < 2; d++)
		for (const struct tcpx_p2p_xfer *x = c->dir[d].head; x; x = x->dlink.next) {
			if (!hosted(x))
				continue;
			for (size_t i = 0; i < x->nheld; i++)
				if (x->held[i] == mr)
					return true;
		}
	return false;
}

void tp__items_hosted_fail(struct tcpx_p2p_conn *c, void *arg)
{
	struct tp_hosted_fail *f = arg;
	uint64_t before;
	int rc;

	pthread_mutex_lock(&c->lock);
	if (holds(c, f->mr)) {
		f->holding++;
		if (!c->err) {
			before = c->completed;
			/* The peer is told: our CLOSE ends its transfers at once. */
			rc = tp__close_queue(c);
			if (!rc)
				rc = tp__error(TCPX_P2P_ECANCELED, "mr_deregister_ex: a transfer of the "
					       "peer's hosted here held the region being "
					       "deregistered: the connection is closed with the peer");
			tp__conn_fail(c, rc);
			f->failed++;
			f->completed += c->completed - before;
		}
	}
	pthread_mutex_unlock(&c->lock);
}

void tp__items_hosted_release(struct tcpx_p2p_conn *c)
{
	if (c->alive.hosted_free || !tp__close_drained(c))
		return;
	c->alive.hosted_free = true;
	for (int d = 0; d < 2; d++)
		for (struct tcpx_p2p_xfer *x = c->dir[d].head; x; x = x->dlink.next)
			if (hosted(x))
				tp__segs_put(c->s, x);
}
