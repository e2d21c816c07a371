/* A peer that restarted (docs/reliability.md, "Restarted peers").  Each
 * session has a random epoch, its incarnation, that its blobs carry; a
 * connection keeps its peer's.  A dial to an address this session already
 * has a dialled connection to, answered by a session of another epoch, is
 * a new incarnation of that peer: the old one is gone, or hung, and its
 * connection would otherwise wait for dead_after_ms (or for ever, if the
 * old process still heartbeats).  Every transfer of the old connection
 * fails at once with EPEERRESTART, so that none of them hangs and nothing
 * of the old incarnation can land in the new one's connection (they share
 * nothing: regions are exported per connection). */
#include <string.h>

#include "core/conn.h"
#include "core/engine.h"
#include "core/setup/handshake.h"
#include "util/error.h"
#include "util/log.h"

struct restart {
	const struct tcpx_p2p_conn *fresh;
	uint64_t completed;
};

static void fail_old(struct tcpx_p2p_conn *c, void *arg)
{
	struct restart *r = arg;
	const struct tcpx_p2p_conn *n = r->fresh;
	uint64_t before;

	if (c == n)
		return;
	pthread_mutex_lock(&c->lock);
	if (c->dialled && !c->err && c->peer_epoch != n->peer_epoch &&
	    !strcmp(c->peer, n->peer)) {
		before = c->completed;
		tp__error(TCPX_P2P_EPEERRESTART, "the peer at %s restarted: a new incarnation of "
			  "it (epoch %016llx) answered a dial, this connection's is %016llx",
			  c->peer, (unsigned long long)n->peer_epoch,
			  (unsigned long long)c->peer_epoch);
		tp__conn_fail(c, TCPX_P2P_EPEERRESTART);
		r->completed += c->completed - before;
	}
	pthread_mutex_unlock(&c->lock);
}

void tp__restart_check(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *fresh)
{
	struct restart r = { .fresh = fresh };

	pthread_mutex_lock(&fresh->lock); /* another dial's check reads it */
	fresh->dialled = true;
	pthread_mutex_unlock(&fresh->lock);
	tp__engine_each(s, fail_old, &r);
	tp__engine_notify(s, r.completed);
}
