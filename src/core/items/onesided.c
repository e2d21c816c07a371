/* Posting a one-sided write or read: the remote segments are checked
 * against the imported descriptors here, and again by the target. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctl.h"
#include "core/items/items.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/vec.h"
#include "core/xfer.h"
#include "util/error.h"

/* Local and remote segments of a write or read, checked on this side. */
static int one_sided(tcpx_p2p_conn *c, enum tp_op op, const tcpx_p2p_seg *local, size_t nlocal,
		     const tcpx_p2p_rseg *remote, size_t nremote,
		     const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	const char *what = op == TP_OP_WRITE ? "write" : "read";
	unsigned need = op == TP_OP_WRITE ? TCPX_P2P_ACCESS_WRITE : TCPX_P2P_ACCESS_READ;
	struct tcpx_p2p_xfer *x;
	struct tp_wseg *w = NULL;
	size_t i, rtotal = 0;
	int rc;

	if (!c || !out || (nremote && !remote))
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL argument", what);
	rc = tp__params_check(params, op == TP_OP_WRITE, what);
	if (rc)
		return rc;
	if (nremote > UINT32_MAX)
		return tp__error(TCPX_P2P_EINVAL, "%s: %zu remote segments", what, nremote);
	if (nremote && !(w = malloc(nremote * sizeof(*w))))
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	for (i = 0; i < nremote; i++) {
		const tcpx_p2p_rseg *g = &remote[i];

		rc = !g->rmr ? tp__error(TCPX_P2P_EINVAL, "%s: remote segment %zu has no rmr",
					 what, i)
		   : g->rmr->c != c ? tp__error(TCPX_P2P_EINVAL, "%s: remote segment %zu: rmr "
					       "imported on another connection", what, i)
		   : !(g->rmr->access & need) ? tp__error(TCPX_P2P_EINVAL, "%s: remote segment "
						       "%zu: the export does not allow it", what, i)
		   : g->offset > g->rmr->len || g->len > g->rmr->len - g->offset
			? tp__error(TCPX_P2P_EINVAL, "%s: remote segment %zu [%zu, +%zu) outside "
				    "its %zu-byte export", what, i, g->offset, g->len, g->rmr->len)
			: 0;
		if (rc) {
			free(w);
			return rc;
		}
		if (g->len > SIZE_MAX - rtotal) {
			free(w);
			return tp__error(TCPX_P2P_EINVAL, "%s: remote segment lengths overflow", what);
		}
		w[i] = (struct tp_wseg){ .idx = g->rmr->idx, .off = g->offset, .len = g->len };
		memcpy(w[i].key, g->rmr->key, TP_KEY_BYTES);
		rtotal += g->len;
	}
	x = tp__xfer_new(op, op == TP_OP_WRITE ? TP_SEND : TP_RECV);
	if (!x) {
		free(w);
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	}
	x->user_data = tp__params_user_data(params);
	rc = tp__segs_build(c, x, local, nlocal, what);
	if (!rc && rtotal != x->len)
		rc = tp__error(TCPX_P2P_EINVAL, "%s: local segments hold %zu bytes, remote %zu",
			       what, x->len, rtotal);
	if (rc) {
		free(w);
		tp__xfer_free(x);
		return rc;
	}
	rc = tp__xfer_post(c, x, params ? params->notif : NULL, params ? params->notif_len : 0, w,
			   nremote, out);
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
