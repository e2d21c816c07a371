/* What a connection's peer makes this side host (api.h: no lock held on
 * entry): the listing of its transfers served here and the deadline on
 * them (docs/reliability.md, "Stalled incoming transfers").  The work is
 * items/hosted.c's, under the conn's lock. */
#include "core/api/api.h"
#include "core/conn.h"
#include "core/items/items.h"
#include "util/error.h"
#include "util/time.h"

int tcpx_p2p_conn_in_deadline(tcpx_p2p_conn *c, int timeout_ms)
{
	int rc;

	if (!c || timeout_ms < 0)
		return tp__error(TCPX_P2P_EINVAL, "conn_in_deadline: NULL conn or timeout_ms %d",
				 timeout_ms);
	rc = tp__redial_use(&c, "conn_in_deadline");
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	if (c->err)
		rc = tp__error(TCPX_P2P_ECLOSED, "conn_in_deadline: the connection failed earlier: "
			       "%s", c->why);
	else
		tp__items_in_deadline(c, (int64_t)timeout_ms * TP_NS_PER_MS);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int tcpx_p2p_conn_hosted(tcpx_p2p_conn *c, tcpx_p2p_hosted *out, int max, int *n)
{
	int all;

	if (!c || !n || max < 0 || (!out && max))
		return tp__error(TCPX_P2P_EINVAL, "conn_hosted: NULL conn or n, max %d, or NULL out "
				 "with max > 0", max);
	c = tp__redial_cur(c);
	pthread_mutex_lock(&c->lock);
	all = tp__items_hosted_list(c, out, max);
	pthread_mutex_unlock(&c->lock);
	*n = all;
	if (all > max)
		return tp__error(TCPX_P2P_EAGAIN, "conn_hosted: %d hosted transfers, room for %d: "
				 "call again with room for all", all, max);
	return 0;
}
