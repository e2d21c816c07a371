/* One conn's progress pass.  Every comm is a FIFO of at most `window`
 * requests moving through  post -> test -> unpack -> consume  (sends:
 * post -> test).  One pass drives every stage on every channel and never
 * blocks: a stage that cannot move is left for the next pass while the
 * others go on.  The plugin contract (DESIGN §4.6-4.7, §4.13): test only
 * the oldest incomplete request, irecvConsumed in posting order, at most 16
 * requests per comm, a NULL request means "not now", and a posted request
 * moves no byte until test() hands it to the plugin's helper threads — at
 * most one per test, so a pass tests once per request it posted. */
#include <string.h>

#include "core/core.h"
#include "util/error.h"
#include "util/log.h"

void tp__xfer_enqueue(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	struct tp_direction *d = &c->dir[x->dir];
	struct tp_comm *cms = x->dir == TP_SEND ? c->send : c->recv;
	uint64_t end;
	int i;

	x->first_seq = d->next_seq;
	d->next_seq += x->nchunks;
	end = x->first_seq + x->nchunks;
	x->prev = d->tail;
	x->next = NULL;
	if (d->tail)
		d->tail->next = x;
	else
		d->head = x;
	d->tail = x;
	/* An idle comm has posted every chunk of its channel below
	 * x->first_seq, so its next_seq lies at or after it. */
	for (i = 0; i < c->nchan; i++)
		if (!cms[i].cursor && cms[i].next_seq < end)
			cms[i].cursor = x;
}

static void unlink_xfer(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	struct tp_direction *d = &c->dir[x->dir];

	if (x->prev)
		x->prev->next = x->next;
	else
		d->head = x->next;
	if (x->next)
		x->next->prev = x->prev;
	else
		d->tail = x->prev;
	x->prev = x->next = NULL;
}

static void retire_chunk(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	if (++x->retired < x->nchunks)
		return;
	__atomic_store_n(&x->done, true, __ATOMIC_RELEASE); /* read unlocked in xfer.c */
	c->completed++;
	unlink_xfer(c, x);
	tp__mr_put(x->mr);
}

static void advance_cursor(struct tcpx_p2p_conn *c, struct tp_comm *cm)
{
	cm->next_seq += (uint64_t)c->nchan;
	while (cm->cursor && cm->next_seq >= cm->cursor->first_seq + cm->cursor->nchunks)
		cm->cursor = cm->cursor->next;
}

static int post_stage(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	struct tp_net *net = c->s->net;
	struct tcpx_p2p_xfer *x;
	struct tp_slot *sl;
	size_t off, n;
	void *mh, *req;
	char *ptr;
	int rc;

	while (cm->cursor && tp_window_can_post(&cm->win)) {
		x = cm->cursor;
		tp_chunk_range(x->len, x->chunk, cm->next_seq - x->first_seq, &off, &n);
		ptr = x->mr->ptr + x->off + off;
		rc = tp__mr_handle(x->mr, cm, &mh);
		if (rc)
			return rc;
		req = NULL;
		if (cm->dir == TP_SEND)
			rc = net->ops->isend(net, cm->comm, ptr, n, tp_chunk_tag(cm->next_seq), mh,
					     &req);
		else
			rc = net->ops->irecv(net, cm->comm, ptr, n, tp_chunk_tag(cm->next_seq), mh,
					     &req);
		if (rc)
			return rc;
		if (!req)
			return 0; /* the plugin is not ready: retry next pass */
		sl = &cm->slot[tp_window_slot(cm->win.posted)];
		sl->request = req;
		sl->x = x;
		sl->dst = ptr;
		sl->len = (uint32_t)n;
		cm->win.posted++;
		cm->handover++;
		*moved = true;
		advance_cursor(c, cm);
	}
	return 0;
}

/* test() only the oldest incomplete request, once more for every request
 * not yet handed over; sends retire right away. */
static int test_stage(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	struct tp_net *net = c->s->net;
	struct tp_slot *sl;
	int done, rc;

	while (cm->win.tested != cm->win.posted) {
		sl = &cm->slot[tp_window_slot(cm->win.tested)];
		done = 0;
		rc = net->ops->test(net, sl->request, &done);
		if (rc)
			return rc;
		if (cm->handover)
			cm->handover--;
		if (!done) {
			if (cm->handover)
				continue;
			return 0;
		}
		cm->win.tested++;
		*moved = true;
		if (cm->dir == TP_SEND) {
			cm->win.unpacked = cm->win.retired = cm->win.tested;
			retire_chunk(c, sl->x);
		}
	}
	return 0;
}

/* Host bounce buffer to host memory: copy each record, checking that the
 * plugin's records stay inside the chunk. */
static int unpack_memcpy(const struct tp_comm *cm, const struct tp_slot *sl, unsigned mslot)
{
	const tp_unpack_rec *r = cm->meta->mem[mslot];
	uint64_t i, cnt = cm->meta->cnt[mslot];

	if (cnt > TP_UNPACK_MAX_PAGES)
		return tp__error(TCPX_P2P_EPLUGIN, "unpack: %llu records in one receive",
				 (unsigned long long)cnt);
	for (i = 0; i < cnt; i++) {
		if (r[i].len > TP_UNPACK_PAGE_SIZE || r[i].dst_off > sl->len ||
		    r[i].len > sl->len - r[i].dst_off)
			return tp__error(TCPX_P2P_EPLUGIN,
					 "unpack: record %llu (dst %llu, len %u) outside the "
					 "%u-byte chunk", (unsigned long long)i,
					 (unsigned long long)r[i].dst_off, r[i].len, sl->len);
		memcpy(sl->dst + r[i].dst_off, cm->bounce + r[i].src_off, r[i].len);
	}
	return 0;
}

struct tp_batch {
	struct tp_comm *cm[TP_UNPACK_MAX_JOBS];
	struct tp_slot *sl[TP_UNPACK_MAX_JOBS];
	int n;
};

static int flush_batch(struct tcpx_p2p_conn *c, struct tp_batch *b)
{
	int rc = 0;

	if (b->n)
		rc = tp__unpack_start(c, b->cm, b->sl, b->n);
	b->n = 0;
	return rc;
}

/* Start the unpack of every tested receive; device unpacks of all channels
 * are batched into as few launches as possible. */
static int unpack_stage(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_batch b = { .n = 0 };
	struct tp_comm *cm;
	struct tp_slot *sl;
	int i, rc;

	for (i = 0; i < c->nchan; i++) {
		cm = &c->recv[i];
		for (; cm->win.unpacked != cm->win.tested; cm->win.unpacked++) {
			sl = &cm->slot[tp_window_slot(cm->win.unpacked)];
			*moved = true;
			if (!cm->meta) {
				sl->unpack = TP_UNPACK_NONE;
			} else if (!cm->bounce_on_device && sl->x->mr->type == TCPX_P2P_MEM_HOST) {
				sl->unpack = TP_UNPACK_MEMCPY;
				/* the k-th receive of a comm uses meta slot k % 16 */
				rc = unpack_memcpy(cm, sl, tp_window_slot(cm->win.unpacked));
				if (rc)
					return rc;
			} else {
				sl->unpack = TP_UNPACK_DEVICE;
				b.cm[b.n] = cm;
				b.sl[b.n++] = sl;
				if (b.n == TP_UNPACK_MAX_JOBS && (rc = flush_batch(c, &b)))
					return rc;
			}
		}
	}
	return flush_batch(c, &b);
}

/* Hand receive buffers back in posting order, once their unpack finished. */
static int consume_stage(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	struct tp_net *net = c->s->net;
	struct tp_slot *sl;
	bool done;
	int rc;

	while (cm->win.retired != cm->win.unpacked) {
		sl = &cm->slot[tp_window_slot(cm->win.retired)];
		if (sl->unpack == TP_UNPACK_DEVICE && !c->s->test_early_consume) {
			rc = tp__unpack_done(c->s, sl->launch, &done);
			if (rc)
				return rc;
			if (!done)
				return 0;
		}
		rc = net->ops->irecv_consumed(net, cm->comm, sl->request);
		if (rc)
			return rc;
		cm->win.retired++;
		*moved = true;
		retire_chunk(c, sl->x);
	}
	return 0;
}

/* Work the next pass can do at once: hand-overs owed, unpacks running. */
static void assess(const struct tcpx_p2p_conn *c, struct tp_progress *st)
{
	int i;

	st->busy = c->dir[TP_SEND].head || c->dir[TP_RECV].head;
	for (i = 0; i < c->nchan && !st->pending; i++)
		st->pending = c->send[i].handover || c->recv[i].handover ||
			      c->recv[i].win.unpacked != c->recv[i].win.retired;
}

int tp__progress(struct tcpx_p2p_conn *c, struct tp_progress *st)
{
	bool *moved = &st->moved;
	int i, rc = 0;

	*st = (struct tp_progress){ 0 };
	if (c->err)
		return c->err;
	for (i = 0; i < c->nchan && !rc; i++) {
		rc = test_stage(c, &c->send[i], moved);
		if (!rc)
			rc = post_stage(c, &c->send[i], moved);
	}
	for (i = 0; i < c->nchan && !rc; i++)
		rc = test_stage(c, &c->recv[i], moved);
	if (!rc)
		rc = unpack_stage(c, moved);
	for (i = 0; i < c->nchan && !rc; i++) {
		rc = consume_stage(c, &c->recv[i], moved);
		if (!rc)
			rc = post_stage(c, &c->recv[i], moved);
	}
	if (rc)
		return tp__conn_fail(c, rc);
	assess(c, st);
	return 0;
}
