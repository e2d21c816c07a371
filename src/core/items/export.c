/* The check of a peer's write or read against this side's exports (the
 * public calls that export and import: api/export.c). */
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/items/items.h"
#include "core/mr.h"
#include "core/pipeline/vec.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"

/* Constant time: how long a comparison takes says nothing of the key. */
bool tp__items_key_equal(const unsigned char *a, const unsigned char *b)
{
	unsigned char d = 0;

	for (unsigned i = 0; i < TP_KEY_BYTES; i++)
		d |= a[i] ^ b[i];
	return !d;
}

/* One remote segment against this conn's exports: its export, or NULL
 * with *why (and *bad_key when the peer named a key it was never given). */
static struct tp_export *check_seg(struct tp_items *r, const struct tp_wseg *g, unsigned access,
				   uint64_t *why, bool *bad_key)
{
	struct tp_export *e = g->idx < r->nexp ? &r->exp[g->idx] : NULL;

	if (!e || !tp__items_key_equal(e->key, g->key)) {
		*bad_key = true;
		*why = TP_REFUSE_DENIED;
		return NULL;
	}
	if (e->revoked || !(e->access & access) || g->off > e->len || g->len > e->len - g->off) {
		*why = TP_REFUSE_DENIED;
		return NULL;
	}
	return e;
}

/* The segments of an inbound write or read against this conn's exports:
 * 0 and x's segments with a hold on each region they name, or a refusal
 * reason (*bad_key: a key the peer was never given).  Each export is looked
 * up once per message, whatever the segment count, and the session lock is
 * taken once per export named, never across the segment list. */
uint64_t tp__items_resolve(struct tcpx_p2p_conn *c, const struct tp_in *in, unsigned access,
			   struct tcpx_p2p_xfer *x, bool *bad_key)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_items *r = c->items;
	uint64_t why = 0, total = 0, stamp = ++r->stamp;
	struct tp_export *e, **named = NULL;
	size_t nnamed = 0, i;

	*bad_key = false;
	x->seg = in->nseg == 1 ? &x->seg1 : in->nseg ? calloc(in->nseg, sizeof(*x->seg)) : NULL;
	/* At most one entry per export (and no more than segments). */
	if (in->nseg)
		named = calloc(in->nseg < r->nexp ? in->nseg : r->nexp + 1, sizeof(*named));
	if (in->nseg && (!x->seg || !named))
		why = TP_REFUSE_MEMORY; /* refuse rather than fail the conn */
	for (i = 0; i < in->nseg && !why; i++) {
		const struct tp_wseg *g = &in->seg[i];

		e = check_seg(r, g, access, &why, bad_key);
		if (!e)
			break;
		if (x->mtype && e->type != x->mtype)
			why = TP_REFUSE_MIXED;
		else if (g->len > UINT64_MAX - total)
			why = TP_REFUSE_TOTAL;
		if (why)
			break;
		x->mtype = e->type;
		total += g->len;
		if (e->stamp != stamp) {
			e->stamp = stamp;
			named[nnamed++] = e;
		}
	}
	if (!why && total != in->len)
		why = TP_REFUSE_TOTAL;
	if (!why && tp__held_alloc(x, nnamed))
		why = TP_REFUSE_MEMORY;
	/* The regions: deregistration revokes, so each is looked up now, and
	 * held by the transfer until it ends. */
	x->mapped = nnamed > 0;
	for (i = 0; i < nnamed && !why; i++) {
		e = named[i];
		pthread_mutex_lock(&s->lock);
		e->mr = tp__mr_find(s, e->mr_id);
		if (e->mr)
			e->mr->inflight++;
		pthread_mutex_unlock(&s->lock);
		if (!e->mr)
			why = TP_REFUSE_DENIED;
		else
			x->held[x->nheld++] = e->mr;
		x->mapped = x->mapped && e->mr && e->mr->mapped;
	}
	free(named);
	if (why) {
		tp__segs_put(s, x);
		x->nseg = 0;
		x->len = 0;
		return why;
	}
	for (i = 0, total = 0; i < in->nseg; i++) {
		const struct tp_wseg *g = &in->seg[i];

		e = &r->exp[g->idx];
		x->seg[i] = (struct tp_vseg){ e->mr, e->off + g->off, g->len, total };
		total += g->len;
	}
	x->nseg = in->nseg;
	x->len = (size_t)total;
	r->segs += x->nseg; /* until the item ends (tp__items_end) */
	return 0;
}

void tp__items_end(struct tcpx_p2p_conn *c, const struct tcpx_p2p_xfer *x)
{
	if (x->op == TP_OP_IN_WRITE || x->op == TP_OP_IN_READ)
		c->items->segs -= x->nseg;
}
