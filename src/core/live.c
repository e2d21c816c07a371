/* Liveness of a connection (docs/reliability.md, "Liveness").  A peer
 * that stops (SIGSTOP, a hung host, a cut link that sends no reset) leaves
 * every socket open, so nothing fails by itself: transfers wait for ever
 * and a target that only polls notifications never hears of it.  So each
 * side's passes send a HEARTBEAT on the control channel once they have
 * sent no control frame for heartbeat_ms, and fail a connection whose
 * peer has sent nothing at all (no data, no control message, no
 * heartbeat) for dead_after_ms.
 *
 * TCPX moves bytes only inside test(), so both halves happen only in
 * passes: silence is measured over this side's passes, and a gap between
 * two of them longer than a quarter of dead_after_ms is not counted (no
 * receive was being driven then, so the peer's heartbeats could not have
 * been seen).  A heartbeat is an empty message: it changes no state and
 * holds nothing, so a peer that sends only heartbeats costs a parse; and
 * so that such a peer cannot spend this side's passes on parses, messages
 * that carry no work (heartbeats, empty frames) are rate-bounded per
 * connection (ctl_stream.c, tp__ctl_idle). */
#include "core/close/close.h"
#include "core/conn.h"
#include "core/ctl.h"
#include "core/gate.h"
#include "core/live.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"
#include "util/time.h"

/* Whole heartbeat intervals the peer has been silent beyond the first,
 * counted once each (the stats' heartbeats_missed). */
static void count_missed(struct tcpx_p2p_conn *c, int64_t silent_ns, int64_t hb_ns)
{
	uint64_t n = hb_ns ? (uint64_t)(silent_ns / hb_ns) : 0;

	if (n > 1 && n - 1 > c->alive.missed) {
		c->stats.hb_missed += n - 1 - c->alive.missed;
		c->alive.missed = n - 1;
	}
}

/* One transfer at a look for stalls: moved since the last look, or for
 * how long not. */
bool tp__live_moved(struct tcpx_p2p_xfer *x, int64_t now)
{
	if (x->retired == x->stall_mark)
		return false;
	x->stall_mark = x->retired;
	x->t_moved = now;
	__atomic_store_n(&x->stalled, false, __ATOMIC_RELAXED);
	return true;
}

static void stall_check(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, int64_t now,
			int64_t stall_ns)
{
	if (x->state == TP_XS_DONE)
		return;
	if (tp__live_moved(x, now))
		return;
	if (!x->stalled && now - x->t_moved >= stall_ns) {
		__atomic_store_n(&x->stalled, true, __ATOMIC_RELAXED);
		/* The peer's transfers hosted here are counted apart: the
		 * target's application has no handle on them. */
		if (tp_op_internal(x->op))
			c->stats.in_stalls++;
		else
			c->stats.stalls++;
	}
}

/* Every stall_ms / 4 at most: the pending transfers (the chunk streams,
 * receives not yet matched, transfers waiting for the peer's answer).
 * Unlike the peer's silence, a gap in this side's passes counts: the
 * transfer did not move then either. */
static void stall_scan(struct tcpx_p2p_conn *c, int64_t now)
{
	int64_t stall_ns = (int64_t)c->s->cfg.stall_ms * TP_NS_PER_MS;
	struct tcpx_p2p_xfer *x;

	if (!stall_ns || now - c->alive.scan_ns < stall_ns / 4)
		return;
	c->alive.scan_ns = now;
	for (int d = 0; d < 2; d++)
		for (x = c->dir[d].head; x; x = x->dlink.next)
			stall_check(c, x, now, stall_ns);
	for (x = c->unmatched.head; x; x = x->wlink.next)
		stall_check(c, x, now, stall_ns);
	for (x = c->answers.head; x; x = x->wlink.next)
		stall_check(c, x, now, stall_ns);
}

/* A gated transfer past its deadline fails alone: nothing of it is on the
 * wire.  The earliest deadline of the others. */
static int64_t gates_past_deadline(struct tcpx_p2p_conn *c, int64_t now)
{
	struct tp_gate *g, *next_g;
	int64_t next = 0;

	for (g = c->gates.head; g; g = next_g) {
		struct tcpx_p2p_xfer *x = g->x;

		next_g = g->next;
		/* cancelled: a send already set to go out empty (gate.c) */
		if (!x || !x->deadline_ns || x->cancelled)
			continue;
		if (now >= x->deadline_ns) {
			tp__error(TCPX_P2P_ETIMEDOUT, "passed its deadline %lld ms after its post, "
				  "still gated (its CUDA event, or one posted before it, not "
				  "complete): nothing of it was sent",
				  (long long)((now - x->t_post) / TP_NS_PER_MS));
			tp__gate_fail(c, x, TCPX_P2P_ETIMEDOUT);
		} else if (!next || x->deadline_ns < next) {
			next = x->deadline_ns;
		}
	}
	return next;
}

void tp__live_hosted(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	if (!c->alive.in_deadline_ns)
		return;
	x->deadline_ns = x->t_post + c->alive.in_deadline_ns;
	if (!c->alive.deadline_ns || x->deadline_ns < c->alive.deadline_ns)
		c->alive.deadline_ns = x->deadline_ns;
}

/* A pending transfer past its deadline (the caller's, or one of the peer's
 * hosted here: tcpx_p2p_conn_in_deadline), or NULL; the earliest deadline
 * of the others is kept for the next look. */
static struct tcpx_p2p_xfer *past_deadline(struct tcpx_p2p_conn *c, int64_t now)
{
	struct tcpx_p2p_xfer *x, *lists[4] = { c->dir[0].head, c->dir[1].head, c->unmatched.head,
					       c->answers.head };
	int64_t next = gates_past_deadline(c, now);

	for (int i = 0; i < 4; i++)
		for (x = lists[i]; x; x = i < 2 ? x->dlink.next : x->wlink.next) {
			if (x->state == TP_XS_DONE || !x->deadline_ns)
				continue;
			if (now >= x->deadline_ns)
				return x;
			if (!next || x->deadline_ns < next)
				next = x->deadline_ns;
		}
	c->alive.deadline_ns = next;
	return NULL;
}

/* A transfer past its deadline cannot leave the chunk streams and the
 * answers it is matched in by itself: the connection fails with it and is
 * closed with the peer, whose CLOSE counts complete every chunk in flight
 * (architecture.md, "Closing a connection"). */
static int deadline_pass(struct tcpx_p2p_conn *c, int64_t now)
{
	struct tcpx_p2p_xfer *x = past_deadline(c, now);
	int rc;

	if (!x)
		return 0;
	rc = tp__close_queue(c);
	if (rc)
		return rc;
	if (tp_op_internal(x->op))
		return tp__error(TCPX_P2P_ETIMEDOUT, "the peer's %s of %zu bytes hosted here "
				 "(%llu of its %llu chunks done, accepted %lld ms ago) passed the "
				 "connection's in_deadline: the connection is closed with the peer",
				 x->op == TP_OP_IN_WRITE ? "write" : "read", x->len,
				 (unsigned long long)x->retired, (unsigned long long)x->nchunks,
				 (long long)((now - x->t_post) / TP_NS_PER_MS));
	return tp__error(TCPX_P2P_ETIMEDOUT, "a transfer of %zu bytes (%llu of its %llu chunks "
			 "done, posted %lld ms ago) passed its deadline: the connection is closed "
			 "with the peer, which cancels its chunks", x->len,
			 (unsigned long long)x->retired, (unsigned long long)x->nchunks,
			 (long long)((now - x->t_post) / TP_NS_PER_MS));
}

int tp__live_pass(struct tcpx_p2p_conn *c)
{
	const tcpx_p2p_config *cfg = &c->s->cfg;
	struct tp_live *l = &c->alive;
	int64_t now = tp__now_ns();
	int64_t dead_ns = (int64_t)cfg->dead_after_ms * TP_NS_PER_MS;
	int64_t hb_ns = (int64_t)cfg->heartbeat_ms * TP_NS_PER_MS;
	int64_t gap = now - l->pass_ns;

	l->pass_ns = now;
	stall_scan(c, now);
	if (l->deadline_ns && now >= l->deadline_ns) {
		int rc = deadline_pass(c, now);

		if (rc)
			return rc;
	}
	if (l->heard) {
		l->heard = false;
		l->heard_ns = now;
		l->missed = 0;
	} else if (dead_ns && gap > dead_ns / 4) {
		l->heard_ns += gap; /* nobody drove: not the peer's silence */
	}
	if (l->said) {
		l->said = false;
		l->said_ns = now;
	}
	/* Bytes already queued go out in this pass and say as much. */
	if (hb_ns && now - l->said_ns >= hb_ns && !tp__ctl_queued(c)) {
		unsigned char *none;
		int rc = tp__ctl_msg(c, TP_CTL_HEARTBEAT, 0, &none);

		if (rc)
			return rc;
		l->said_ns = now;
		c->stats.hb_sent++;
	}
	count_missed(c, now - l->heard_ns, hb_ns);
	if (dead_ns && now - l->heard_ns >= dead_ns)
		return tp__error(TCPX_P2P_ECLOSED, "the peer sent nothing (no data, control "
				 "message or heartbeat) for %lld ms while this side drove the "
				 "connection (dead_after_ms %d): presumed dead",
				 (long long)((now - l->heard_ns) / TP_NS_PER_MS), cfg->dead_after_ms);
	return 0;
}
