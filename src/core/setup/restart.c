/* A peer that restarted (docs/reliability.md, "Restarted peers").  Each
 * session has a random epoch, its incarnation, that its blobs carry; a
 * connection keeps its peer's.  A dial to an address this session already
 * has a dialled connection to, answered by a session of another epoch, is
 * a new incarnation of that peer: the old one is gone, or hung, and its
 * connection would otherwise wait for dead_after_ms (or for ever, if the
 * old process still heartbeats).  Every transfer of the old connection
 * fails at once with EPEERRESTART, so that none of them hangs and nothing
 * of the old incarnation can land in the new one's connection (they share
 * nothing: regions are exported per connection).
 *
 * A dialler has no stable address (its ports are ephemeral), so a session
 * may name itself (tcpx_p2p_session_set_node_id): its blobs carry the node
 * id, and a connection made in any role to a peer with the node id of an
 * existing connection's peer but another epoch fails that one the same
 * way.  Without node ids only the dialling side recognises a restart. */
#include <string.h>

#include "core/conn.h"
#include "core/engine.h"
#include "core/setup/handshake.h"
#include "util/error.h"
#include "util/log.h"
#include "util/printable.h"

struct restart {
	const struct tcpx_p2p_conn *fresh;
	uint64_t completed;
};

/* c and n reach the same peer: its node id, or (both dialled) its address. */
static bool same_peer(const struct tcpx_p2p_conn *c, const struct tcpx_p2p_conn *n)
{
	if (n->peer_node[0] && !strcmp(c->peer_node, n->peer_node))
		return true;
	return c->dialled && n->dialled && !strcmp(c->peer, n->peer);
}

static void fail_old(struct tcpx_p2p_conn *c, void *arg)
{
	struct restart *r = arg;
	const struct tcpx_p2p_conn *n = r->fresh;
	char name[sizeof(n->peer_node) + 4];
	uint64_t before;

	if (c == n)
		return;
	pthread_mutex_lock(&c->lock);
	if (!c->err && c->peer_epoch != n->peer_epoch && same_peer(c, n)) {
		before = c->completed;
		if (n->peer_node[0] && !strcmp(c->peer_node, n->peer_node))
			tp__error(TCPX_P2P_EPEERRESTART, "the peer node \"%s\" restarted: a new "
				  "incarnation of it (epoch %016llx) connected, this connection's "
				  "is %016llx",
				  tp__printable(name, sizeof(name), n->peer_node,
						strlen(n->peer_node)),
				  (unsigned long long)n->peer_epoch,
				  (unsigned long long)c->peer_epoch);
		else
			tp__error(TCPX_P2P_EPEERRESTART, "the peer at %s restarted: a new incarnation "
				  "of it (epoch %016llx) answered a dial, this connection's is "
				  "%016llx", c->peer, (unsigned long long)n->peer_epoch,
				  (unsigned long long)c->peer_epoch);
		tp__conn_fail(c, TCPX_P2P_EPEERRESTART);
		r->completed += c->completed - before;
	}
	pthread_mutex_unlock(&c->lock);
}

void tp__restart_check(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *fresh, bool dialled)
{
	struct restart r = { .fresh = fresh };

	if (dialled) {
		pthread_mutex_lock(&fresh->lock); /* another dial's check reads it */
		fresh->dialled = true;
		pthread_mutex_unlock(&fresh->lock);
	}
	tp__engine_each(s, fail_old, &r);
	tp__engine_notify(s, r.completed);
}
