/* Segment lists: a transfer's bytes are its segments packed back to back
 * (the stream); chunks cut the stream, not the segments.  A chunk inside
 * one segment goes straight between the plugin and that segment; one that
 * spans several goes through a staging slot of its comm: gathered into it
 * before a send, scattered out of it (or out of the plugin's bounce pages)
 * after a receive. */
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/mr.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/pipeline/vec.h"
#include "core/pipeline/window.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"

static int hold_runs(struct tcpx_p2p_xfer *x, const char *what);

int tp__segs_build(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const tcpx_p2p_seg *segs,
		   size_t n, const char *what)
{
	size_t i, total = 0;
	struct tp_vseg *v;

	if (n && !segs)
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL segments", what);
	if (n > SIZE_MAX / sizeof(*v))
		return tp__error(TCPX_P2P_EINVAL, "%s: %zu segments", what, n);
	x->mtype = 0;
	x->mapped = n > 0;
	for (i = 0; i < n; i++) {
		const tcpx_p2p_seg *g = &segs[i];

		if (!g->mr)
			return tp__error(TCPX_P2P_EINVAL, "%s: segment %zu has no mr", what, i);
		if (g->mr->s != c->s)
			return tp__error(TCPX_P2P_EINVAL, "%s: segment %zu: mr of another session",
					 what, i);
		if (g->offset > g->mr->len || g->len > g->mr->len - g->offset)
			return tp__error(TCPX_P2P_EINVAL, "%s: segment %zu [%zu, +%zu) outside its "
					 "%zu-byte region", what, i, g->offset, g->len, g->mr->len);
		if (x->mtype && g->mr->type != x->mtype)
			return tp__error(TCPX_P2P_EINVAL, "%s: segment %zu: host and CUDA memory in "
					 "one transfer", what, i);
		x->mtype = g->mr->type;
		x->mapped &= g->mr->mapped;
		if (g->len > SIZE_MAX - total)
			return tp__error(TCPX_P2P_EINVAL, "%s: segment lengths overflow", what);
		total += g->len;
	}
	v = n == 1 ? &x->seg1 : n ? malloc(n * sizeof(*v)) : NULL;
	if (n > 1 && !v)
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory for %zu segments", what, n);
	for (i = 0, total = 0; i < n; i++) {
		v[i] = (struct tp_vseg){ segs[i].mr, segs[i].offset, segs[i].len, total };
		total += segs[i].len;
	}
	x->seg = v;
	x->nseg = n;
	x->len = total;
	return hold_runs(x, what);
}

/* A prepared list's segments, shared read-only by the list and its posts:
 * the last of them to go frees them. */
struct tp_segs_shared {
	long refs; /* atomic */
	struct tp_vseg seg[];
};

int tp__segs_share(struct tcpx_p2p_xfer *x)
{
	struct tp_segs_shared *sh;

	if (x->nseg <= 1 || x->shared)
		return 0;
	sh = malloc(sizeof(*sh) + x->nseg * sizeof(*x->seg));
	if (!sh)
		return TCPX_P2P_ENOMEM;
	sh->refs = 1;
	memcpy(sh->seg, x->seg, x->nseg * sizeof(*x->seg));
	free(x->seg);
	x->seg = sh->seg;
	x->shared = sh;
	return 0;
}

int tp__segs_copy(struct tcpx_p2p_xfer *x, const struct tcpx_p2p_xfer *from)
{
	size_t n = from->nseg;

	if (from->shared) {
		__atomic_add_fetch(&from->shared->refs, 1, __ATOMIC_RELAXED);
		x->shared = from->shared;
		x->seg = from->seg;
	} else if (n == 1) {
		x->seg1 = from->seg[0];
		x->seg = &x->seg1;
	} else {
		x->seg = NULL;
	}
	x->nseg = n;
	if (tp__held_alloc(x, from->nheld)) {
		tp__segs_free(x);
		return TCPX_P2P_ENOMEM;
	}
	memcpy(x->held, from->held, from->nheld * sizeof(*x->held));
	x->nheld = from->nheld;
	x->mtype = from->mtype;
	x->mapped = from->mapped;
	x->len = from->len;
	return 0;
}

int tp__held_alloc(struct tcpx_p2p_xfer *x, size_t n)
{
	x->held = n <= 1 ? &x->held1 : malloc(n * sizeof(*x->held));
	x->nheld = 0;
	return x->held ? 0 : tp__error(TCPX_P2P_ENOMEM, "out of memory for %zu regions", n);
}

/* One hold per run of segments in one region. */
static int hold_runs(struct tcpx_p2p_xfer *x, const char *what)
{
	size_t i, runs = 0;

	for (i = 0; i < x->nseg; i++)
		runs += !i || x->seg[i].mr != x->seg[i - 1].mr;
	if (tp__held_alloc(x, runs))
		return tp__error(TCPX_P2P_ENOMEM, "%s: out of memory for %zu regions", what, runs);
	for (i = 0; i < x->nseg; i++)
		if (!i || x->seg[i].mr != x->seg[i - 1].mr)
			x->held[x->nheld++] = x->seg[i].mr;
	return 0;
}

void tp__segs_free(struct tcpx_p2p_xfer *x)
{
	if (x->shared) {
		if (!__atomic_sub_fetch(&x->shared->refs, 1, __ATOMIC_ACQ_REL))
			free(x->shared);
		x->shared = NULL;
	} else if (x->seg != &x->seg1) {
		free(x->seg);
	}
	if (x->held != &x->held1)
		free(x->held);
	x->seg = NULL;
	x->nseg = 0;
	x->held = NULL;
	x->nheld = 0;
}

void tp__segs_get(struct tcpx_p2p_session *s, struct tcpx_p2p_xfer *x)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < x->nheld; i++)
		x->held[i]->inflight++;
	pthread_mutex_unlock(&s->lock);
}

void tp__segs_put(struct tcpx_p2p_session *s, struct tcpx_p2p_xfer *x)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < x->nheld; i++)
		x->held[i]->inflight--;
	x->nheld = 0; /* dropped once */
	pthread_mutex_unlock(&s->lock);
}

/* The first segment that ends after stream offset o. */
static size_t seg_find(const struct tcpx_p2p_xfer *x, size_t o)
{
	size_t lo = 0, hi = x->nseg;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (x->seg[mid].start + x->seg[mid].len > o)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static char *seg_ptr(const struct tp_vseg *g, size_t o)
{
	return g->mr->ptr + g->off + (o - g->start);
}

char *tp__seg_single(const struct tcpx_p2p_xfer *x, size_t o, size_t n, struct tcpx_p2p_mr **mr)
{
	size_t i;

	if (!x->nseg)
		return NULL;
	if (!n || x->nseg == 1) { /* one segment holds every chunk; an empty transfer
				   * still posts a request: any registered address */
		*mr = x->seg[0].mr;
		return seg_ptr(&x->seg[0], n ? o : x->seg[0].start);
	}
	i = seg_find(x, o);
	if (i == x->nseg || o + n > x->seg[i].start + x->seg[i].len)
		return NULL;
	*mr = x->seg[i].mr;
	return seg_ptr(&x->seg[i], o);
}

static void cp_free(struct tcpx_p2p_session *s, struct tp_slot *sl)
{
	if (sl->cp_pinned)
		tp__devq_host_free(s, sl->cp);
	else
		free(sl->cp);
	sl->cp = NULL;
	sl->cp_cap = 0;
}

/* One copy: done at once (now: host memory, a small chunk), or appended to
 * the slot's copy list in pieces of at most TP_COPY_MAX_ENTRY for the copy
 * kernel, cudaMemcpyAsync or the host copy threads. */
static int cp_add(struct tcpx_p2p_session *s, struct tp_slot *sl, uint32_t *n, bool now,
		  const char *src, char *dst, size_t len)
{
	if (now) {
		memcpy(dst, src, len);
		return 0;
	}
	while (len) {
		size_t piece = len < TP_COPY_MAX_ENTRY ? len : TP_COPY_MAX_ENTRY;

		if (*n == sl->cp_cap) {
			/* Room at first for every record of a chunk (2048) and as
			 * many segment boundaries: growing frees pinned memory,
			 * which waits for the whole device. */
			uint32_t cap = sl->cp_cap ? 2 * sl->cp_cap : 4096;
			struct tp_copy *v = NULL;
			/* Pinned, so that the copy kernel can read it in place; a
			 * session without CUDA copies with cudaMemcpyAsync, which
			 * reads the list on the host. */
			bool pinned = !tp__dev_host_alloc((void **)&v, cap * sizeof(*v));

			if (!pinned && !(v = malloc(cap * sizeof(*v))))
				return tp__error(TCPX_P2P_ENOMEM, "vectored transfer: no memory for "
						 "%u copies", cap);
			if (*n)
				memcpy(v, sl->cp, *n * sizeof(*v));
			cp_free(s, sl);
			sl->cp = v;
			sl->cp_cap = cap;
			sl->cp_pinned = pinned;
		}
		sl->cp[(*n)++] = (struct tp_copy){ src, dst, piece };
		src += piece;
		dst += piece;
		len -= piece;
	}
	return 0;
}

/* Copies between the chunk [o, o + len) of the stream and a flat buffer:
 * gather (segments -> flat) or scatter (flat -> segments). */
int tp__vec_copies(struct tcpx_p2p_session *s, const struct tcpx_p2p_xfer *x, struct tp_slot *sl,
		   bool gather, char *flat, bool now, uint32_t *n)
{
	size_t o = sl->soff, end = sl->soff + sl->len, i = seg_find(x, o);
	int rc = 0;

	*n = 0;
	for (; !rc && o < end && i < x->nseg; i++) {
		const struct tp_vseg *g = &x->seg[i];
		size_t stop = g->start + g->len < end ? g->start + g->len : end;

		if (stop <= o)
			continue;
		if (gather)
			rc = cp_add(s, sl, n, now, seg_ptr(g, o), flat + (o - sl->soff), stop - o);
		else
			rc = cp_add(s, sl, n, now, flat + (o - sl->soff), seg_ptr(g, o), stop - o);
		o = stop;
	}
	return rc;
}

/* Copies of a received chunk's bounce records into the segments; records
 * come in any order and may straddle segments. */
int tp__vec_copies_recs(struct tcpx_p2p_session *s, const struct tcpx_p2p_xfer *x,
			struct tp_slot *sl, const struct tp_meta_view *v, const char *bounce,
			bool now, uint32_t *n)
{
	const tp_unpack_rec *r = v->rec;
	uint32_t k;
	int rc = 0;

	*n = 0;
	for (k = 0; k < v->cnt && !rc; k++) {
		size_t o, end;
		const char *src = bounce + r[k].src_off;
		size_t i;

		o = sl->soff + r[k].dst_off;
		end = o + r[k].len;
		for (i = seg_find(x, o); !rc && o < end && i < x->nseg; i++) {
			const struct tp_vseg *g = &x->seg[i];
			size_t stop = g->start + g->len < end ? g->start + g->len : end;

			if (stop <= o)
				continue;
			rc = cp_add(s, sl, n, now, src, seg_ptr(g, o), stop - o);
			src += stop - o;
			o = stop;
		}
	}
	return rc;
}

/* ---- staging ------------------------------------------------------------- */

/* Slots of a staging ring: stage[0] of a comm is host memory, stage[1] device. */
static uint32_t stage_slots(bool dev)
{
	return dev ? TP_STAGE_SLOTS_DEV : TP_STAGE_SLOTS_HOST;
}

static int stage_alloc(struct tcpx_p2p_session *s, struct tp_stage *st, bool dev)
{
	size_t slot = (s->cfg.chunk_bytes + 4095) & ~(size_t)4095;
	size_t bytes = slot * stage_slots(dev);
	void *p = NULL;
	int rc;

	if (dev) {
		rc = tp__session_use_gpu(s);
		if (!rc)
			rc = tp__dev_malloc(&p, bytes);
	} else {
		p = aligned_alloc(4096, bytes);
		rc = p ? 0 : tp__error(TCPX_P2P_ENOMEM, "staging: out of memory (%zu bytes)", bytes);
		/* Cleared (tp__dev_malloc clears device staging): a slot holds
		 * only bytes this comm carried, never the heap's old contents. */
		if (p)
			memset(p, 0, bytes);
	}
	if (rc)
		return rc;
	rc = tp__mr_register(s, p, bytes, dev ? TCPX_P2P_MEM_CUDA : TCPX_P2P_MEM_HOST, 0,
			     &st->mr);
	if (rc) {
		if (dev)
			tp__dev_free(p);
		else
			free(p);
		return rc;
	}
	st->base = p;
	st->slot_bytes = slot;
	return 0;
}

int tp__stage_take(struct tcpx_p2p_session *s, struct tp_comm *cm, int mtype, char **slot,
		   struct tcpx_p2p_mr **mr)
{
	bool dev = mtype == TCPX_P2P_MEM_CUDA;
	struct tp_stage *st = &cm->stage[dev];
	int rc;

	if (!st->mr) {
		rc = stage_alloc(s, st, dev);
		if (rc)
			return rc;
	}
	if (st->head - st->tail == stage_slots(dev))
		return 1;
	*slot = st->base + (st->head++ % stage_slots(dev)) * st->slot_bytes;
	*mr = st->mr;
	return 0;
}

void tp__stage_give(struct tp_comm *cm, const char *slot)
{
	for (int k = 0; k < 2; k++) {
		struct tp_stage *st = &cm->stage[k];

		if (st->mr && slot >= st->base && slot < st->base + stage_slots(k) * st->slot_bytes)
			st->tail++;
	}
}

void tp__stage_free(struct tcpx_p2p_session *s, struct tp_comm *cm)
{
	for (int k = 0; k < 2; k++) {
		struct tp_stage *st = &cm->stage[k];

		if (!st->mr)
			continue;
		tp__mr_deregister(st->mr);
		if (k)
			tp__dev_free(st->base);
		else
			free(st->base);
		st->mr = NULL;
	}
	for (unsigned i = 0; i < TP_WINDOW_SLOTS; i++)
		cp_free(s, &cm->slot[i]);
}
