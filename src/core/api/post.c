/* Posting a send or a receive (api.h: no lock held on entry; takes the
 * conn's lock and drives the engine). */
#include <stddef.h>

#include "core/api/api.h"
#include "core/conn.h"
#include "core/engine.h"
#include "core/gate.h"
#include "core/pipeline/vec.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"
#include "util/timeline.h"

int tp__xfer_post(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		  size_t notif_len, const unsigned char *rwire, size_t nrseg, void *event,
		  tcpx_p2p_xfer **out)
{
	int rc;

	if (event && c->s->cfg.gpu < 0) {
		rc = tp__error(TCPX_P2P_ENOTSUP, "%s: a CUDA event on a session without a GPU "
			       "(config gpu = -1)", tp__op_name(x->op));
		goto refused;
	}
	x->c = c;
	pthread_mutex_lock(&c->lock);
	if (c->err) {
		rc = tp__error(c->err, "%s: the connection failed earlier: %s", tp__op_name(x->op),
			       c->why[0] ? c->why : tcpx_p2p_strerror(c->err));
	} else {
		tp__tl_mark(x->dir == TP_SEND ? TP_TL_SEND_POST : TP_TL_RECV_POST);
		rc = tp__gate_post(c, x, notif, notif_len, rwire, nrseg, event);
	}
	if (rc) {
		pthread_mutex_unlock(&c->lock);
		goto refused;
	}
	tp_list_prepend(&c->live, x, llink);
	tp__post_pass_unlock(c);
	*out = x;
	return 0;
refused:
	tp__xfer_free(x);
	return rc;
}

static int post_two_sided(tcpx_p2p_conn *c, const tcpx_p2p_seg *segs, size_t n,
			  const tcpx_p2p_xfer_params *params, enum tp_dir dir,
			  tcpx_p2p_xfer **out)
{
	const char *what = dir == TP_SEND ? "send" : "recv";
	struct tcpx_p2p_xfer *x;
	void *event;
	int rc;

	if (!c || !out)
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL argument", what);
	rc = tp__redial_use(&c, what);
	if (rc)
		return rc;
	rc = tp__params_check(params, false, what, &event);
	if (rc)
		return rc;
	/* Gating a receive would change nothing on the wire: the peer's send
	 * decides when its bytes come, and reusing the destination is the
	 * caller's own order to keep. */
	if (event && dir == TP_RECV)
		return tp__error(TCPX_P2P_EINVAL, "recv: a receive takes no event (params.event)");
	x = tp__xfer_new(dir == TP_SEND ? TP_OP_SEND : TP_OP_RECV, dir);
	if (!x)
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	x->user_data = tp__params_user_data(params);
	rc = tp__segs_build(c, x, segs, n, what);
	if (rc) {
		tp__xfer_free(x);
		return rc;
	}
	return tp__xfer_post(c, x, NULL, 0, NULL, 0, event, out);
}

int tcpx_p2p_send(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
		  tcpx_p2p_xfer **out)
{
	tcpx_p2p_seg g = { mr, offset, len };

	if (!mr)
		return tp__error(TCPX_P2P_EINVAL, "send: NULL argument");
	return post_two_sided(c, &g, 1, NULL, TP_SEND, out);
}

int tcpx_p2p_recv(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
		  tcpx_p2p_xfer **out)
{
	tcpx_p2p_seg g = { mr, offset, len };

	if (!mr)
		return tp__error(TCPX_P2P_EINVAL, "recv: NULL argument");
	return post_two_sided(c, &g, 1, NULL, TP_RECV, out);
}

int tcpx_p2p_sendv(tcpx_p2p_conn *c, const tcpx_p2p_seg *segs, size_t nsegs,
		   const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	return post_two_sided(c, segs, nsegs, params, TP_SEND, out);
}

int tcpx_p2p_recvv(tcpx_p2p_conn *c, const tcpx_p2p_seg *segs, size_t nsegs,
		   const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	return post_two_sided(c, segs, nsegs, params, TP_RECV, out);
}
