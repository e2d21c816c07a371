/* A transfer's states (xfer.h), the one place they change, and the one
 * way into DONE. */
#include <stdlib.h>

#include "core/conn.h"
#include "core/cq.h"
#include "core/pipeline/devq.h"
#include "core/stats.h"
#include "core/xfer.h"
#include "util/log.h"
#include "util/timeline.h"

#if TP_TEST_HOOKS
/* Test-hook builds (every CI suite, never a release) stop at the first
 * illegal move, so that no suite passes through one unseen; the state
 * test turns this off to check the warning a release build gives. */
bool tp__xfer_illegal_stops = true;
#endif

#define TO(s) (1u << TP_XS_##s)

/* The moves each state may make, and what makes them.  A conn that fails
 * (conn.c, tp__conn_cancel) moves every pending caller's transfer to DONE;
 * the library's own items (in-write, in-read, discard) go NEW -> STREAMING
 * and are freed where they end (tp__xfer_complete), never reaching DONE. */
static const unsigned legal[] = {
	/* Posted (xfer.c, tp__xfer_post; the op decides): a receive waits
	 * for the peer's send, a send or write streams and waits for the
	 * answer, a read waits for the response; the library's items stream
	 * (items/inqueue.c). */
	[TP_XS_NEW] = TO(UNMATCHED) | TO(STREAMING_UNANSWERED) | TO(UNANSWERED) | TO(STREAMING) |
		      TO(GATED),
	/* A send, write or read posted with an event, or behind one that is
	 * gated (gate.c): released as it would have been posted, or failed
	 * (its event failed, its deadline passed, its conn failed) without
	 * anything of it on the wire. */
	[TP_XS_GATED] = TO(STREAMING_UNANSWERED) | TO(UNANSWERED) | TO(DONE),
	/* The peer's send announced (items/inqueue.c): equal totals stream,
	 * others fail (EPROTO) through tp__xfer_complete. */
	[TP_XS_UNMATCHED] = TO(STREAMING) | TO(SETTLING) | TO(DONE),
	/* The peer's answer (items/inbound.c, on_ack) or the last chunk
	 * retired (tp__xfer_chunks_done), whichever comes first. */
	[TP_XS_STREAMING_UNANSWERED] = TO(STREAMING) | TO(UNANSWERED) | TO(DONE),
	/* The last chunk retired: complete (tp__xfer_complete), a receive or
	 * read settling first while this side owes the peer control bytes. */
	[TP_XS_STREAMING] = TO(SETTLING) | TO(DONE),
	/* A read's response (items/inqueue.c) streams; its refusal, or the
	 * answer to a send or write whose chunks all retired, completes it
	 * (items/inbound.c). */
	[TP_XS_UNANSWERED] = TO(STREAMING) | TO(SETTLING) | TO(DONE),
	/* This side owes the peer nothing more (tp__xfer_settle). */
	[TP_XS_SETTLING] = TO(DONE),
	/* Final: only release or the conn's close let go of it. */
	[TP_XS_DONE] = 0,
};

const char *tp__xfer_state_name(enum tp_xfer_state s)
{
	static const char *const names[] = {
		[TP_XS_NEW] = "new",
		[TP_XS_GATED] = "gated",
		[TP_XS_UNMATCHED] = "unmatched",
		[TP_XS_STREAMING] = "streaming",
		[TP_XS_STREAMING_UNANSWERED] = "streaming, unanswered",
		[TP_XS_UNANSWERED] = "unanswered",
		[TP_XS_SETTLING] = "settling",
		[TP_XS_DONE] = "done",
	};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "invalid";
}

void tp__xfer_set_state(struct tcpx_p2p_xfer *x, enum tp_xfer_state to)
{
	enum tp_xfer_state from = x->state;

	if ((unsigned)from > TP_XS_DONE || (unsigned)to > TP_XS_DONE || !(legal[from] & (1u << to))) {
		TP_WARN_RL("xfer", "internal error in libtcpx_p2p (please report): transfer %llu "
			   "(op %d) with %s: illegal move from %s to %s",
			   (unsigned long long)x->id, (int)x->op,
			   x->c && x->c->peer[0] ? x->c->peer : "the peer", tp__xfer_state_name(from),
			   tp__xfer_state_name(to));
#if TP_TEST_HOOKS
		if (tp__xfer_illegal_stops)
			abort();
#endif
	}
	/* DONE is read without the conn lock (xfer.c, xfer_done): the
	 * release store orders err and the rest of the transfer before it. */
	__atomic_store_n(&x->state, to, __ATOMIC_RELEASE);
}

/* The conn list (through wlink) a state names, or NULL: the chunk streams
 * (c->dir[d], through dlink) are stream.c's, the gates' FIFO gate.c's. */
static struct tp_xlist *wlist(struct tcpx_p2p_conn *c, enum tp_xfer_state s)
{
	switch (s) {
	case TP_XS_UNMATCHED:
		return &c->unmatched;
	case TP_XS_STREAMING_UNANSWERED:
	case TP_XS_UNANSWERED:
		return &c->answers;
	case TP_XS_SETTLING:
		return &c->settling;
	default:
		return NULL;
	}
}

void tp__xfer_move(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, enum tp_xfer_state to)
{
	struct tp_xlist *from = wlist(c, x->state), *into = wlist(c, to);

	/* One failed with its conn stays on the list it was on until
	 * conn_destroy (close/finish.c): its buffers may still be written. */
	if (to == TP_XS_DONE && x->conn_failed)
		from = into = NULL;
	/* Every list is read under the conn lock, held here; only the
	 * state is also read without it (DONE), and it is one store. */
	tp__xfer_set_state(x, to);
	if (from == into)
		return;
	if (from)
		tp_list_remove(from, x, wlink);
	if (into)
		tp_list_append(into, x, wlink);
}

void tp__xfer_mark_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	/* DONE first: a caller that sees it unlocked still needs this conn
	 * lock, held until the pass ends, to release x or read the stats. */
	tp__xfer_move(c, x, TP_XS_DONE);
	tp__stats_xfer_end(c, x, x->err);
	tp__tl_mark(x->dir == TP_SEND ? TP_TL_DONE_SEND : TP_TL_DONE_RECV);
	if (x->hold) { /* every byte written (success: its device work is known done) */
		tp__devq_release(c->s, x->hold - 1, x->err != 0);
		x->hold = 0;
	}
	tp__cq_push(c->s, x);
}

void tp__xlist_push(struct tp_xlist *l, struct tcpx_p2p_xfer *x)
{
	tp_list_append(l, x, wlink);
}

void tp__xlist_remove(struct tp_xlist *l, struct tcpx_p2p_xfer *x)
{
	tp_list_remove(l, x, wlink);
}
