/* Posting a one-sided write or read: the remote segments are checked
 * against the imported descriptors here, and again by the target. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctl.h"
#include "core/api/api.h"
#include "core/conn.h"
#include "core/items/items.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/vec.h"
#include "core/xfer.h"
#include "util/error.h"

int tp__rsegs_encode(tcpx_p2p_conn *c, unsigned need, const tcpx_p2p_rseg *remote, size_t n,
		     bool one_type, const char *what, unsigned char **wire, size_t *total)
{
	unsigned char *w = NULL;
	size_t i, rtotal = 0;
	int rc, type = 0;

	if (n && !remote)
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL remote segments", what);
	if (n > UINT32_MAX || n > SIZE_MAX / TP_WSEG_BYTES)
		return tp__error(TCPX_P2P_EINVAL, "%s: %zu remote segments", what, n);
	if (n && !(w = malloc(n * TP_WSEG_BYTES)))
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	for (i = 0; i < n; i++) {
		const tcpx_p2p_rseg *g = &remote[i];

		rc = !g->rmr ? tp__error(TCPX_P2P_EINVAL, "%s: remote segment %zu has no rmr",
					 what, i)
		   : g->rmr->c != c && tp__conn_handle(g->rmr->c) == tp__conn_handle(c)
			? tp__error(TCPX_P2P_EPEERRESTART, "%s: remote segment %zu: rmr imported "
				    "before the connection was re-established (its peer's "
				    "exports are gone): import the peer's new descriptors", what, i)
		   : g->rmr->c != c ? tp__error(TCPX_P2P_EINVAL, "%s: remote segment %zu: rmr "
					       "imported on another connection", what, i)
		   : !(g->rmr->access & need) ? tp__error(TCPX_P2P_EINVAL, "%s: remote segment "
						       "%zu: the export does not allow it", what, i)
		   : g->offset > g->rmr->len || g->len > g->rmr->len - g->offset
			? tp__error(TCPX_P2P_EINVAL, "%s: remote segment %zu [%zu, +%zu) outside "
				    "its %zu-byte export", what, i, g->offset, g->len, g->rmr->len)
		   : one_type && type && g->rmr->type != type
			? tp__error(TCPX_P2P_EINVAL, "%s: remote segment %zu: host and CUDA "
				    "memory in one transfer", what, i)
		   : g->len > SIZE_MAX - rtotal
			? tp__error(TCPX_P2P_EINVAL, "%s: remote segment lengths overflow", what)
			: 0;
		if (rc) {
			free(w);
			return rc;
		}
		type = g->rmr->type;
		tp_wseg_put(w + i * TP_WSEG_BYTES, g->rmr->idx, g->rmr->key, g->offset, g->len);
		rtotal += g->len;
	}
	*wire = w;
	*total = rtotal;
	return 0;
}

int tp__one_sided_post(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x,
		       const tcpx_p2p_xfer_params *params, const unsigned char *wire, size_t nrseg,
		       tcpx_p2p_xfer **out)
{
	x->user_data = tp__params_user_data(params);
	return tp__xfer_post(c, x, params ? params->notif : NULL, params ? params->notif_len : 0,
			     wire, nrseg, tp__params_event(params), out);
}

/* Local and remote segments of a write or read, checked on this side. */
static int one_sided(tcpx_p2p_conn *c, enum tp_op op, const tcpx_p2p_seg *local, size_t nlocal,
		     const tcpx_p2p_rseg *remote, size_t nremote,
		     const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	const char *what = op == TP_OP_WRITE ? "write" : "read";
	unsigned need = op == TP_OP_WRITE ? TCPX_P2P_ACCESS_WRITE : TCPX_P2P_ACCESS_READ;
	struct tcpx_p2p_xfer *x;
	unsigned char *w = NULL;
	size_t rtotal = 0;
	int rc;

	if (!c || !out || (nremote && !remote))
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL argument", what);
	rc = tp__redial_use(&c, what);
	if (rc)
		return rc;
	rc = tp__params_check(params, op == TP_OP_WRITE, what, NULL);
	if (rc)
		return rc;
	/* Mixed memory types are the target's to refuse here, as they were. */
	rc = tp__rsegs_encode(c, need, remote, nremote, false, what, &w, &rtotal);
	if (rc)
		return rc;
	x = tp__xfer_new(op, op == TP_OP_WRITE ? TP_SEND : TP_RECV);
	if (!x) {
		free(w);
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	}
	rc = tp__segs_build(c, x, local, nlocal, what);
	if (!rc && rtotal != x->len)
		rc = tp__error(TCPX_P2P_EINVAL, "%s: local segments hold %zu bytes, remote %zu",
			       what, x->len, rtotal);
	if (rc) {
		free(w);
		tp__xfer_free(x);
		return rc;
	}
	rc = tp__one_sided_post(c, x, params, w, nremote, out);
	free(w);
	return rc;
}

int tcpx_p2p_write(tcpx_p2p_conn *c, const tcpx_p2p_seg *local, size_t nlocal,
		   const tcpx_p2p_rseg *remote, size_t nremote,
		   const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	return one_sided(c, TP_OP_WRITE, local, nlocal, remote, nremote, params, out);
}

int tcpx_p2p_read(tcpx_p2p_conn *c, const tcpx_p2p_seg *local, size_t nlocal,
		  const tcpx_p2p_rseg *remote, size_t nremote,
		  const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	return one_sided(c, TP_OP_READ, local, nlocal, remote, nremote, params, out);
}
