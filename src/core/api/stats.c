/* Statistics' public calls (api.h: no lock held on entry): a conn's
 * counters, and a session's summed over its conns (stats.c, engine.c). */
#include "core/api/api.h"
#include "core/conn.h"
#include "core/engine.h"
#include "core/stats.h"

TCPX_P2P_API int tcpx_p2p_conn_stats(tcpx_p2p_conn *c, tcpx_p2p_stats *out)
{
	struct tp_stats st;
	int rc = tp__stats_check(c, out, "tcpx_p2p_conn_stats");

	if (rc)
		return rc;
	c = tp__redial_cur(c);
	pthread_mutex_lock(&c->lock);
	st = c->stats;
	pthread_mutex_unlock(&c->lock);
	tp__stats_export(&st, 1, out);
	return 0;
}

TCPX_P2P_API int tcpx_p2p_session_stats(tcpx_p2p_session *s, tcpx_p2p_stats *out)
{
	struct tp_stats st;
	int nconns, rc = tp__stats_check(s, out, "tcpx_p2p_session_stats");

	if (rc)
		return rc;
	tp__engine_stats(s, &st, &nconns);
	tp__stats_export(&st, nconns, out);
	return 0;
}
