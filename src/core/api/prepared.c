/* Prepared transfer lists: a WRITE or READ whose segment lists are checked
 * and encoded once (prepare), then posted many times.  A post shares the
 * checked local list with its xfer (vec.c: refcounted, so the list may be
 * released while posts are in flight) and copies the encoded remote list
 * into its announcement: no segment is looked at again on this side.  The target
 * checks every post as it checks any write or read (export.c), so what the
 * peer withdrew after prepare is still refused there. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/api/api.h"
#include "core/items/items.h"
#include "core/mr.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/vec.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"

struct tcpx_p2p_xlist {
	struct tcpx_p2p_conn *c;
	struct tcpx_p2p_session *s; /* outlives c: a release after conn_destroy */
	enum tp_op op;
	/* The local list, checked, with its regions held from prepare to
	 * release (tp__segs_get on this never-posted xfer). */
	struct tcpx_p2p_xfer *tpl;
	unsigned char *wire; /* nrseg remote segments as the request carries them */
	size_t nrseg;
};

static const char *const prep_what[] = { "xlist_prepare", "xlist_prepare_strided" };

static int prepare(tcpx_p2p_conn *c, int op, const tcpx_p2p_seg *local, size_t nlocal,
		   const tcpx_p2p_rseg *remote, size_t nremote, unsigned flags, bool strided,
		   tcpx_p2p_xlist **out)
{
	const char *what = prep_what[strided];
	size_t rtotal = 0, max_seg, ctl_max;
	struct tcpx_p2p_xlist *l;
	int rc;

	if (!c || !out)
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL argument", what);
	rc = tp__redial_use(&c, what);
	if (rc)
		return rc;
	if (op != TCPX_P2P_XLIST_WRITE && op != TCPX_P2P_XLIST_READ)
		return tp__error(TCPX_P2P_EINVAL, "%s: op %d (TCPX_P2P_XLIST_WRITE or _READ)",
				 what, op);
	if (flags)
		return tp__error(TCPX_P2P_EINVAL, "%s: unknown flags 0x%x", what, flags);
	/* What every post would be refused for, refused once here. */
	max_seg = (size_t)c->s->cfg.peer_max_segments;
	ctl_max = c->s->cfg.peer_max_ctl_bytes / 2;
	if (nremote > max_seg || ctl_max < TP_CTL_MSG_HDR + 24 ||
	    (ctl_max - TP_CTL_MSG_HDR - 24) / TP_WSEG_BYTES < nremote)
		return tp__error(TCPX_P2P_EINVAL, "%s: %zu remote segments: more than a peer "
				 "takes in one transfer (peer_max_segments %zu; 40 bytes each in "
				 "half of peer_max_ctl_bytes %zu)", what, nremote, max_seg,
				 2 * ctl_max);
	l = calloc(1, sizeof(*l));
	if (!l)
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	l->c = c;
	l->s = c->s;
	l->op = op == TCPX_P2P_XLIST_WRITE ? TP_OP_WRITE : TP_OP_READ;
	l->nrseg = nremote;
	rc = tp__rsegs_encode(c, op == TCPX_P2P_XLIST_WRITE ? TCPX_P2P_ACCESS_WRITE
							 : TCPX_P2P_ACCESS_READ,
			      remote, nremote, true, what, &l->wire, &rtotal);
	if (rc)
		goto free_list;
	l->tpl = tp__xfer_new(l->op, l->op == TP_OP_WRITE ? TP_SEND : TP_RECV);
	if (!l->tpl) {
		rc = tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
		goto free_wire;
	}
	rc = tp__segs_build(c, l->tpl, local, nlocal, what);
	if (!rc && tp__segs_share(l->tpl))
		rc = tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	if (!rc && rtotal != l->tpl->len)
		rc = tp__error(TCPX_P2P_EINVAL, "%s: local segments hold %zu bytes, remote %zu",
			       what, l->tpl->len, rtotal);
	if (rc)
		goto free_tpl;
	pthread_mutex_lock(&c->lock);
	rc = c->err ? tp__error(c->err, "%s: the connection failed earlier: %s", what,
				c->why[0] ? c->why : tcpx_p2p_strerror(c->err))
		    : 0;
	pthread_mutex_unlock(&c->lock);
	if (rc)
		goto free_tpl;
	tp__segs_get(c->s, l->tpl);
	*out = l;
	return 0;

free_tpl:
	tp__xfer_free(l->tpl);
free_wire:
	free(l->wire);
free_list:
	free(l);
	return rc;
}

int tcpx_p2p_xlist_prepare(tcpx_p2p_conn *c, int op, const tcpx_p2p_seg *local, size_t nlocal,
			   const tcpx_p2p_rseg *remote, size_t nremote, unsigned flags,
			   tcpx_p2p_xlist **out)
{
	return prepare(c, op, local, nlocal, remote, nremote, flags, false, out);
}

/* A strided side's extent: 0, or EINVAL naming the side. */
static int strided_check(const tcpx_p2p_strided *g, size_t region_len, const char *side)
{
	const char *what = prep_what[1];
	size_t last;

	if (!g->count || !g->len)
		return tp__error(TCPX_P2P_EINVAL, "%s: %s count %zu, len %zu (both 1..)", what, side,
				 g->count, g->len);
	if (g->count > 1 && g->stride < g->len)
		return tp__error(TCPX_P2P_EINVAL, "%s: %s stride %zu below its len %zu: blocks "
				 "would overlap", what, side, g->stride, g->len);
	/* base + stride * (count - 1) + len, every step checked */
	if (g->count - 1 > (SIZE_MAX - g->base) / (g->stride ? g->stride : 1) ||
	    (last = g->base + g->stride * (g->count - 1)) > SIZE_MAX - g->len)
		return tp__error(TCPX_P2P_EINVAL, "%s: %s base %zu + stride %zu x %zu blocks "
				 "overflows", what, side, g->base, g->stride, g->count);
	if (last + g->len > region_len)
		return tp__error(TCPX_P2P_EINVAL, "%s: %s blocks end at %zu, past the %zu-byte "
				 "%s", what, side, last + g->len, region_len,
				 side[0] == 'l' ? "region" : "export");
	return 0;
}

int tcpx_p2p_xlist_prepare_strided(tcpx_p2p_conn *c, int op, tcpx_p2p_mr *mr,
				   const tcpx_p2p_strided *local, const tcpx_p2p_rmr *rmr,
				   const tcpx_p2p_strided *remote, unsigned flags,
				   tcpx_p2p_xlist **out)
{
	const char *what = prep_what[1];
	tcpx_p2p_seg *ls = NULL;
	tcpx_p2p_rseg *rs = NULL;
	size_t i;
	int rc;

	if (!c || !mr || !local || !rmr || !remote || !out)
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL argument", what);
	rc = strided_check(local, mr->len, "local");
	if (!rc)
		rc = strided_check(remote, rmr->len, "remote");
	if (rc)
		return rc;
	/* Counts bounded by the region's length, which the blocks (len >= 1,
	 * apart) fit in; the remote one by what a peer takes. */
	if (remote->count > (size_t)c->s->cfg.peer_max_segments)
		return tp__error(TCPX_P2P_EINVAL, "%s: %zu remote blocks: more than a peer takes "
				 "in one transfer (peer_max_segments %d)", what, remote->count,
				 c->s->cfg.peer_max_segments);
	if (local->count > SIZE_MAX / sizeof(*ls) || local->count > SIZE_MAX / local->len ||
	    local->count * local->len != remote->count * remote->len)
		return tp__error(TCPX_P2P_EINVAL, "%s: local blocks hold %zu x %zu bytes, remote "
				 "%zu x %zu", what, local->count, local->len, remote->count,
				 remote->len);
	ls = malloc(local->count * sizeof(*ls));
	rs = malloc(remote->count * sizeof(*rs));
	if (!ls || !rs) {
		rc = tp__error(TCPX_P2P_ENOMEM, "%s: out of memory for %zu blocks", what,
			       local->count);
		goto out;
	}
	for (i = 0; i < local->count; i++)
		ls[i] = (tcpx_p2p_seg){ mr, local->base + i * local->stride, local->len };
	for (i = 0; i < remote->count; i++)
		rs[i] = (tcpx_p2p_rseg){ rmr, remote->base + i * remote->stride, remote->len };
	rc = prepare(c, op, ls, local->count, rs, remote->count, flags, true, out);
out:
	free(ls);
	free(rs);
	return rc;
}

int tcpx_p2p_xlist_post(tcpx_p2p_xlist *l, const tcpx_p2p_xfer_params *params,
			tcpx_p2p_xfer **out)
{
	const char *what = "xlist_post";
	struct tcpx_p2p_xfer *x;
	int rc;

	if (!l || !out)
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL argument", what);
	rc = tp__params_check(params, l->op == TP_OP_WRITE, what, NULL);
	if (rc)
		return rc;
	x = tp__xfer_new(l->op, l->tpl->dir);
	if (!x || tp__segs_copy(x, l->tpl)) {
		if (x)
			tp__xfer_free(x);
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory", what);
	}
	return tp__one_sided_post(l->c, x, params, l->wire, l->nrseg, out);
}

int tcpx_p2p_xlist_release(tcpx_p2p_xlist *l)
{
	if (!l)
		return tp__error(TCPX_P2P_EINVAL, "xlist_release: NULL list");
	tp__segs_put(l->s, l->tpl);
	tp__xfer_free(l->tpl);
	free(l->wire);
	free(l);
	return 0;
}
