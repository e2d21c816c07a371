/* What a peer makes this side host: its WRITEs landing in exports here and
 * its READs served from them (the library's own items, op >=
 * TP_OP_IN_WRITE).  The target's application holds no handle on them, so
 * what it can do about one that stalls is here (docs/reliability.md,
 * "Stalled incoming transfers"): a listing of them (tcpx_p2p_conn_hosted,
 * api/hosted.c), a deadline on them per connection
 * (tcpx_p2p_conn_in_deadline, api/hosted.c; checked with the caller's
 * deadlines in live.c), and a deregistration that fails the connections whose hosted
 * transfers hold the region (tcpx_p2p_mr_deregister_ex, mr.c).  Either
 * way the connection is closed with the peer, so that the peer's transfer
 * fails at once, and the regions are let go once the close has drained
 * every data request: the plugin writes into them no more. */
#include "core/close/close.h"
#include "core/conn.h"
#include "core/engine.h"
#include "core/items/items.h"
#include "core/live.h"
#include "core/pipeline/vec.h"
#include "core/xfer.h"
#include "util/error.h"
#include "util/time.h"

static bool hosted(const struct tcpx_p2p_xfer *x)
{
	return x->op == TP_OP_IN_WRITE || x->op == TP_OP_IN_READ;
}

void tp__items_in_deadline(struct tcpx_p2p_conn *c, int64_t ns)
{
	int64_t now = tp__now_ns();
	struct tcpx_p2p_xfer *x;

	c->alive.in_deadline_ns = ns;
	for (int d = 0; d < 2; d++)
		for (x = c->dir[d].head; x; x = x->dlink.next) {
			if (!hosted(x) || x->state == TP_XS_DONE)
				continue;
			x->deadline_ns = ns ? now + ns : 0;
			if (ns && (!c->alive.deadline_ns || x->deadline_ns < c->alive.deadline_ns))
				c->alive.deadline_ns = x->deadline_ns;
		}
}

/* One hosted transfer as tcpx_p2p_conn_hosted lists it. */
static void describe(struct tcpx_p2p_xfer *x, int64_t now, tcpx_p2p_hosted *h)
{
	uint64_t bytes = x->retired * (uint64_t)x->chunk;

	(void)tp__live_moved(x, now);
	*h = (tcpx_p2p_hosted){
		.id = x->id,
		.op = x->op == TP_OP_IN_WRITE ? TCPX_P2P_HOSTED_WRITE : TCPX_P2P_HOSTED_READ,
		.stalled = __atomic_load_n(&x->stalled, __ATOMIC_RELAXED),
		.len = x->len,
		.done = bytes < x->len ? (size_t)bytes : x->len,
		.idle_ms = (now - x->t_moved) / TP_NS_PER_MS,
		.age_ms = (now - x->t_post) / TP_NS_PER_MS,
		.nregions = (int)x->nheld,
	};
	for (size_t i = 0; i < x->nheld && i < TCPX_P2P_HOSTED_REGIONS; i++)
		h->region[i] = x->held[i];
}

int tp__items_hosted_list(struct tcpx_p2p_conn *c, tcpx_p2p_hosted *out, int max)
{
	/* Writes land through the receive stream, reads leave through the send one. */
	static const enum tp_dir order[2] = { TP_RECV, TP_SEND };
	int64_t now = tp__now_ns();
	int n = 0;

	/* A failed conn whose close drained has let go of them. */
	if (c->alive.hosted_free)
		return 0;
	for (int d = 0; d < 2; d++)
		for (struct tcpx_p2p_xfer *x = c->dir[order[d]].head; x; x = x->dlink.next) {
			if (!hosted(x) || x->state == TP_XS_DONE)
				continue;
			if (n < max)
				describe(x, now, &out[n]);
			n++;
		}
	return n;
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
