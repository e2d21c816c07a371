/* One conn's progress pass.  Every comm is a FIFO of at most `window`
 * requests moving through  post -> test -> unpack -> consume  (sends:
 * post -> test).  One pass drives every stage on every channel and never
 * blocks: a stage that cannot move is left for the next pass while the
 * others go on.  The plugin contract (docs/tcpx.md, rules 6, 7 and 12): test only
 * the oldest incomplete request, irecvConsumed in posting order, at most 16
 * requests per comm, a NULL request means "not now", and a posted request
 * moves no byte until test() hands it to the plugin's helper threads — at
 * most one per test, so a pass tests once per request it posted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/ctl.h"
#include "util/config.h"
#include "util/error.h"
#include "util/log.h"

void tp__xfer_enqueue(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	struct tp_direction *d = &c->dir[x->dir];
	struct tp_comm *cms = x->dir == TP_SEND ? c->send : c->recv;
	uint64_t end;
	int i;

	/* Both peers derive the cut from the same length (chunk.h). */
	x->chunk = tp_chunk_size(x->len, (unsigned)c->nchan, c->s->cfg.chunk_bytes);
	x->nchunks = tp_chunk_count(x->len, x->chunk);
	x->queued = true;
	x->first_seq = d->next_seq;
	d->next_seq += x->nchunks;
	end = x->first_seq + x->nchunks;
	tp_list_append(d, x, dlink);
	/* An idle comm has posted every chunk of its channel below
	 * x->first_seq, so its next_seq lies at or after it. */
	for (i = 0; i < c->nchan; i++)
		if (!cms[i].cursor && cms[i].next_seq < end)
			cms[i].cursor = x;
}

static void unlink_xfer(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	tp_list_remove(&c->dir[x->dir], x, dlink);
}

/* A chunk of x is done; the last one ends x (or its wait for an answer).
 * An error (an in-write's answer could not be queued) fails the conn. */
static int retire_chunk(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	if (++x->retired < x->nchunks)
		return 0;
	x->chunks_done = true;
	unlink_xfer(c, x);
	return tp__xfer_chunks_done(c, x);
}

static void advance_cursor(struct tcpx_p2p_conn *c, struct tp_comm *cm)
{
	cm->next_seq += (uint64_t)c->nchan;
	while (cm->cursor && cm->next_seq >= cm->cursor->first_seq + cm->cursor->nchunks)
		cm->cursor = cm->cursor->dlink.next;
}

/* A plugin that reports neither received sizes nor fragment records
 * (none known: TCP plugins report sizes, TCPX bounces) gives no way to
 * see a short chunk.  Until one of its receives on cm reported a size,
 * each staging slot is cleared before a receive is posted into it, so a
 * chunk that lands short leaves zeros, never bytes of an earlier chunk of
 * the comm, in the segments it is scattered into.  Device slots are
 * cleared on the stream from a cleared chunk of the conn, the receive
 * issued once that copy completed (issue_stage). */
static int stage_clear(struct tcpx_p2p_conn *c, const struct tp_comm *cm, struct tp_slot *sl,
		       char *slot, size_t n, int type)
{
	struct tp_copy cp[TP_MAX_CHUNK / TP_COPY_MAX_ENTRY];
	uint32_t k = 0;
	int rc;

	if (cm->meta || cm->sizes_seen)
		return 0;
	if (type != TCPX_P2P_MEM_CUDA) {
		memset(slot, 0, n);
		return 0;
	}
	if (!c->zero_dev) {
		/* tp__dev_malloc clears what it allocates */
		rc = tp__dev_malloc((void **)&c->zero_dev, c->s->cfg.chunk_bytes);
		if (rc)
			return rc;
	}
	for (size_t off = 0; off < n && k < sizeof(cp) / sizeof(cp[0]); off += TP_COPY_MAX_ENTRY)
		cp[k++] = (struct tp_copy){ c->zero_dev, slot + off,
					    n - off < TP_COPY_MAX_ENTRY ? n - off : TP_COPY_MAX_ENTRY };
	return tp__devq_copies(c->s, cp, k, false, &sl->launch);
}

/* Fill slot sl with the next chunk of x (seq): straight from or into its
 * segment, or through a staging slot, gathering a send there first.
 * Returns 1 when no staging slot is free (try again next pass). */
static int prepare(struct tcpx_p2p_conn *c, struct tp_comm *cm, struct tcpx_p2p_xfer *x,
		   struct tp_slot *sl)
{
	struct tcpx_p2p_session *s = c->s;
	struct tcpx_p2p_mr *mr = NULL;
	size_t off, n;
	uint32_t ncp;
	char *ptr = NULL;
	int rc;

	tp_chunk_range(x->len, x->chunk, cm->next_seq - x->first_seq, &off, &n);
	sl->x = x;
	sl->soff = off;
	sl->len = (uint32_t)n;
	sl->launch = 0;
	sl->hjob_wait = false;
	sl->stage = NULL;
	sl->request = NULL;
	sl->dst_dev = x->mtype == TCPX_P2P_MEM_CUDA;
	sl->dst_mapped = x->mapped;
	if (x->op != TP_OP_DISCARD)
		ptr = tp__seg_single(x, off, n, &mr);
	sl->multi = !ptr;
	if (!ptr) {
		/* Bytes that go nowhere (or an empty transfer) still need a
		 * buffer the plugin accepts: device memory where it bounces
		 * through device pages (TCPX receives only devmem there). */
		int type = x->mtype ? x->mtype
			   : cm->bounce_on_device && s->cfg.gpu >= 0 ? TCPX_P2P_MEM_CUDA
								     : TCPX_P2P_MEM_HOST;

		rc = tp__stage_take(s, cm, type, &sl->stage, &mr);
		if (rc)
			return rc;
		ptr = sl->stage;
		if (cm->dir == TP_SEND) {
			enum tp_copy_path path = tp__copy_path(s, cm, sl);

			rc = tp__vec_copies(s, x, sl, true, ptr, path == TP_PATH_HOST_NOW, &ncp);
			if (!rc && ncp && path == TP_PATH_HOST_THREADS) {
				rc = tp__hcopy_submit(s, &sl->hjob, sl->cp, ncp);
				sl->hjob_wait = !rc;
			} else if (!rc && ncp) {
				rc = tp__devq_copies(s, sl->cp, ncp, sl->cp_pinned, &sl->launch);
			}
			if (rc) {
				tp__stage_give(cm, sl->stage);
				return rc;
			}
		} else if (x->op != TP_OP_DISCARD) {
			rc = stage_clear(c, cm, sl, ptr, n, type);
			if (rc) {
				tp__stage_give(cm, sl->stage);
				return rc;
			}
		}
	}
	sl->buf = ptr;
	sl->mr = mr;
	sl->seq = cm->next_seq;
	return 0;
}

/* Prepare chunks into free window slots, in stream order. */
static int post_stage(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	int rc;

	while (cm->cursor && tp_window_can_post(&cm->win)) {
		rc = prepare(c, cm, cm->cursor, &cm->slot[tp_window_slot(cm->win.posted)]);
		if (rc)
			return rc < 0 ? rc : 0;
		cm->win.posted++;
		*moved = true;
		advance_cursor(c, cm);
	}
	if (cm->cursor)
		c->stats.windows_full++;
	return 0;
}

/* Hand prepared chunks to the plugin in order, each once its gather is
 * done; a NULL request means "not now". */
static int issue_stage(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	struct tp_net *net = c->s->net;
	struct tp_slot *sl;
	void *mh, *req;
	bool done;
	int rc;

	while (cm->issued != cm->win.posted) {
		sl = &cm->slot[tp_window_slot(cm->issued)];
		if (sl->hjob_wait) {
			if (!tp__hcopy_done(&sl->hjob))
				return 0;
			sl->hjob_wait = false;
		}
		if (sl->launch) {
			rc = tp__devq_done(c->s, sl->launch, &done);
			if (rc || !done)
				return rc;
			sl->launch = 0;
		}
		/* Host memory behind a device bounce is posted as the landing
		 * buffer (conn.c says why); the unpack still writes sl->buf. */
		struct tcpx_p2p_mr *pmr = sl->mr;
		char *pbuf = sl->buf;
		if (cm->dir == TP_RECV && c->landmr && sl->mr->type != TCPX_P2P_MEM_CUDA) {
			pmr = c->landmr;
			pbuf = c->land;
		}
		rc = tp__mr_handle(pmr, cm, &mh);
		if (rc)
			return rc;
		req = NULL;
		if (cm->dir == TP_SEND)
			rc = net->ops->isend(net, cm->comm, pbuf, sl->len, tp_chunk_tag(sl->seq),
					     mh, &req);
		else
			rc = net->ops->irecv(net, cm->comm, pbuf, sl->len, tp_chunk_tag(sl->seq),
					     mh, &req);
		if (rc || !req)
			return rc;
		sl->request = req;
		if (cm->dir == TP_SEND)
			sl->t_issue = tp__now_ns();
		sl->caller = !sl->stage && (cm->dir == TP_SEND || (!cm->meta && pbuf == sl->buf));
		cm->issued++;
		cm->handover++;
		*moved = true;
	}
	return 0;
}

/* test() only the oldest incomplete request, once more for every request
 * not yet handed over; sends retire right away.  Also the control
 * channel's comms (ctl.c), whose slots carry no xfer. */
int tp__comm_test(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	struct tp_net *net = c->s->net;
	struct tp_slot *sl;
	int done, size, rc;

	while (cm->win.tested != cm->issued) {
		sl = &cm->slot[tp_window_slot(cm->win.tested)];
		done = 0;
		rc = net->ops->test(net, sl->request, &done, &size);
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
		sl->got = size;
		cm->sizes_seen |= size != TP_NET_SIZE_UNKNOWN && cm->dir == TP_RECV;
		if (cm->dir == TP_RECV) {
			c->alive.heard = true;
		} else if (sl->x) {
			tp__hist_add(&c->stats.req_lat, tp__now_ns() - sl->t_issue);
		}
		if (cm->dir == TP_SEND) {
			cm->win.unpacked = cm->win.retired = cm->win.tested;
			if (sl->stage)
				tp__stage_give(cm, sl->stage);
			rc = sl->x ? retire_chunk(c, sl->x) : 0;
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* A receive chunk must land whole: as many bytes as the plugin says
 * arrived, where it says (TCP plugins), and as its fragment records add up
 * to, where it has them (TCPX).  A peer that sent fewer (or a plugin that
 * lost some) fails the chunk's transfer with EPROTO: nothing of the chunk
 * is unpacked or copied out of staging, so bytes that never arrived are
 * never taken from a bounce page or a staging slot.  The chunks still
 * retire in order; a write's target then refuses it (inbound.c). */
static int landed_whole(const struct tp_comm *cm, struct tp_slot *sl, unsigned mslot)
{
	bool whole = sl->got == TP_NET_SIZE_UNKNOWN || sl->got == (int)sl->len;
	int rc;

	if (whole && cm->meta) {
		/* records the plugin cannot have written fail the conn (EPLUGIN) */
		rc = tp__meta_read(cm->meta, mslot, sl->len, cm->bounce_len, "unpack", &sl->meta);
		if (rc)
			return rc;
		whole = sl->meta.bytes == sl->len;
	}
	if (whole)
		return 1;
	if (!sl->x->err) {
		sl->x->err = TCPX_P2P_EPROTO;
		snprintf(sl->x->why, sizeof(sl->x->why), "chunk %llu arrived with %lld of its %u "
			 "bytes", (unsigned long long)(sl->seq - sl->x->first_seq),
			 cm->meta && sl->got < 0 ? (long long)sl->meta.bytes : (long long)sl->got,
			 sl->len);
	}
	return 0;
}

/* Host bounce buffer to host memory: copy each (checked) record. */
static void unpack_memcpy(const struct tp_comm *cm, const struct tp_slot *sl)
{
	const tp_unpack_rec *r = sl->meta.rec;

	for (uint32_t i = 0; i < sl->meta.cnt; i++)
		memcpy(sl->buf + r[i].dst_off, cm->bounce + r[i].src_off, r[i].len);
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

/* A received chunk scattered by a list of copies (path: HOST_*, LIST_*):
 * from the bounce records or the staging slot into its segments. */
static int unpack_list(struct tcpx_p2p_conn *c, struct tp_comm *cm, struct tp_slot *sl,
		       enum tp_copy_path path)
{
	struct tcpx_p2p_session *s = c->s;
	bool now = path == TP_PATH_HOST_NOW;
	uint32_t n;
	int rc;

	if (cm->meta)
		rc = tp__vec_copies_recs(s, sl->x, sl, &sl->meta, cm->bounce, now, &n);
	else
		rc = tp__vec_copies(s, sl->x, sl, false, sl->stage, now, &n);
	sl->unpack = TP_UNPACK_NONE;
	if (rc || !n)
		return rc;
	if (path == TP_PATH_HOST_THREADS) {
		sl->unpack = TP_UNPACK_HCOPY;
		return tp__hcopy_submit(s, &sl->hjob, sl->cp, n);
	}
	sl->unpack = TP_UNPACK_DEVICE;
	return tp__devq_copies(s, sl->cp, n, path == TP_PATH_LIST_KERNEL && sl->cp_pinned,
				 &sl->launch);
}

/* Start the unpack of every tested receive; device unpacks of all channels
 * are batched into as few launches as possible. */
static int unpack_stage(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_batch b; /* only n is read before being set: no 520-byte clear per pass */
	struct tp_comm *cm;
	struct tp_slot *sl;
	int i, rc;

	b.n = 0;
	for (i = 0; i < c->nchan; i++) {
		cm = &c->recv[i];
		for (; cm->win.unpacked != cm->win.tested; cm->win.unpacked++) {
			sl = &cm->slot[tp_window_slot(cm->win.unpacked)];
			*moved = true;
			/* the k-th receive of a comm uses meta slot k % 16 */
			rc = sl->x->op == TP_OP_DISCARD
				     ? 0
				     : landed_whole(cm, sl, tp_window_slot(cm->win.unpacked));
			if (rc < 0)
				return rc;
			sl->path = rc ? tp__copy_path(c->s, cm, sl) : TP_PATH_NONE;
			switch (sl->path) {
			case TP_PATH_NONE:
				sl->unpack = TP_UNPACK_NONE;
				break;
			case TP_PATH_RECORDS:
				sl->unpack = TP_UNPACK_MEMCPY;
				unpack_memcpy(cm, sl);
				break;
			case TP_PATH_HOST_NOW:
			case TP_PATH_HOST_THREADS:
			case TP_PATH_LIST_KERNEL:
			case TP_PATH_LIST_COPIES:
				rc = unpack_list(c, cm, sl, sl->path);
				if (rc)
					return rc;
				break;
			case TP_PATH_KERNEL:
			case TP_PATH_D2D:
			case TP_PATH_STAGED:
				sl->unpack = TP_UNPACK_DEVICE;
				b.cm[b.n] = cm;
				b.sl[b.n++] = sl;
				if (b.n == TP_UNPACK_MAX_JOBS && (rc = flush_batch(c, &b)))
					return rc;
				break;
			}
		}
	}
	return flush_batch(c, &b);
}

/* Test builds only (TCPX_P2P_TEST_EARLY_CONSUME): consume a device unpack
 * without waiting for it, so that the GPU poison tests can prove they
 * catch that.  A release build has no such switch to read. */
static bool early_consume(const struct tcpx_p2p_session *s)
{
#if TP_TEST_HOOKS
	return s->test_early_consume;
#else
	(void)s;
	return false;
#endif
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
		if (sl->unpack == TP_UNPACK_HCOPY && !tp__hcopy_done(&sl->hjob))
			return 0;
		if (sl->unpack == TP_UNPACK_DEVICE && !early_consume(c->s)) {
			rc = tp__devq_done(c->s, sl->launch, &done);
			if (rc)
				return rc;
			if (!done)
				return 0;
		}
		rc = net->ops->irecv_consumed(net, cm->comm, sl->request);
		if (rc)
			return rc;
		if (sl->stage)
			tp__stage_give(cm, sl->stage);
		cm->win.retired++;
		*moved = true;
		rc = sl->x ? retire_chunk(c, sl->x) : 0; /* none: a closing conn's (drain_comm) */
		if (rc)
			return rc;
	}
	return 0;
}

/* A closing conn (its CLOSE queued: the caller's destroy or the peer's
 * CLOSE) posts no more chunks, but the requests the plugin already has
 * still complete: the peer's bytes for receives posted here may arrive
 * after its CLOSE, and sends finish.  They are tested and handed back, the
 * receives unpacked nowhere (their transfers have failed), and their xfers
 * stay listed, holding their regions, until conn_destroy.  Both CLOSEs
 * carry each side's count of requests per data comm; a side posts empty
 * sends, or receives into a throw-away buffer, until its count on each comm
 * reaches the peer's on the other end, so that every request of both sides
 * completes (a plugin whose sends wait for the receiver's receive keeps
 * the peer's sends posted otherwise). */
void tp__data_freeze(struct tcpx_p2p_conn *c)
{
	for (int i = 0; i < 2 * c->nchan; i++) {
		struct tp_comm *cm = i < c->nchan ? &c->send[i] : &c->recv[i - c->nchan];

		/* Prepared, not handed over: their gathers end before the
		 * staging goes (conn_destroy waits for them). */
		if (cm->issued != cm->win.posted)
			cm->next_seq = cm->slot[tp_window_slot(cm->issued)].seq;
		cm->win.posted = cm->issued;
		cm->cursor = NULL;
		/* Their transfers have failed: chunks in flight retire none. */
		for (uint32_t k = cm->win.retired; k != cm->issued; k++)
			cm->slot[tp_window_slot(k)].x = NULL;
	}
}

/* Post one request past this side's own: an empty send, or a receive of
 * a whole chunk into memory nothing reads.  Returns 1 when the plugin took
 * it. */
static int post_drain(struct tcpx_p2p_conn *c, struct tp_comm *cm)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_net *net = s->net;
	size_t bytes = s->cfg.chunk_bytes;
	struct tp_slot *sl = &cm->slot[tp_window_slot(cm->win.posted)];
	struct tcpx_p2p_mr *mr;
	char *buf;
	void *mh, *req = NULL;
	int rc;

	if (cm->dir == TP_SEND) {
		buf = c->ctl->txbuf;
		mr = c->ctl->txmr;
	} else if (cm->bounce_on_device) { /* TCPX receives only into device memory */
		buf = c->land;
		mr = c->landmr;
	} else {
		/* A chunk of host memory per comm, one receive at a time in it
		 * (drain_comm): no two writes of the plugin's threads meet. */
		size_t each = (bytes + 4095) & ~(size_t)4095;

		if (!c->drain_buf) {
			c->drain_buf = aligned_alloc(4096, each * (size_t)c->nchan);
			if (!c->drain_buf)
				return tp__error(TCPX_P2P_ENOMEM, "close: out of memory");
			rc = tcpx_p2p_mr_register(s, c->drain_buf, each * (size_t)c->nchan,
						  TCPX_P2P_MEM_HOST, &c->drain_mr);
			if (rc)
				return rc;
		}
		buf = c->drain_buf + each * (size_t)(cm - c->recv);
		mr = c->drain_mr;
	}
	rc = tp__mr_handle(mr, cm, &mh);
	if (rc)
		return rc;
	if (cm->dir == TP_SEND)
		rc = net->ops->isend(net, cm->comm, buf, 0, tp_chunk_tag(cm->next_seq), mh, &req);
	else
		rc = net->ops->irecv(net, cm->comm, buf, bytes, tp_chunk_tag(cm->next_seq), mh,
				     &req);
	if (rc || !req)
		return rc;
	*sl = (struct tp_slot){ .request = req, .seq = cm->next_seq, .got = TP_NET_SIZE_UNKNOWN };
	cm->next_seq += (uint64_t)c->nchan;
	cm->issued = ++cm->win.posted;
	cm->handover++;
	return 1;
}

static int drain_comm(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	int rc;

	/* Throw-away receives the plugin writes in place (no bounce buffer)
	 * go one at a time per comm. */
	while (cm->drain_set && (int32_t)(cm->drain_to - cm->issued) > 0 &&
	       tp_window_can_post(&cm->win) &&
	       (cm->dir == TP_SEND || cm->meta || cm->win.retired == cm->issued)) {
		rc = post_drain(c, cm);
		if (rc <= 0)
			return rc;
		*moved = true;
	}
	rc = tp__comm_test(c, cm, moved);
	if (rc || cm->dir == TP_SEND)
		return rc;
	/* What arrived is handed back as it is: never unpacked. */
	for (; cm->win.unpacked != cm->win.tested; cm->win.unpacked++)
		cm->slot[tp_window_slot(cm->win.unpacked)].unpack = TP_UNPACK_NONE;
	return consume_stage(c, cm, moved);
}

int tp__data_drain(struct tcpx_p2p_conn *c, bool *moved)
{
	int rc = 0;

	for (int i = 0; i < c->nchan && !rc && !c->drain_failed; i++) {
		rc = drain_comm(c, &c->send[i], moved);
		if (!rc)
			rc = drain_comm(c, &c->recv[i], moved);
	}
	/* What cannot complete now never will: the close ends unclean. */
	if (rc)
		c->drain_failed = true;
	return rc;
}

bool tp__data_drained(const struct tcpx_p2p_conn *c)
{
	for (int i = 0; i < 2 * c->nchan; i++) {
		const struct tp_comm *cm = i < c->nchan ? &c->send[i] : &c->recv[i - c->nchan];

		if (!cm->drain_set || (int32_t)(cm->drain_to - cm->issued) > 0 ||
		    cm->win.retired != cm->issued)
			return false;
	}
	return true;
}

/* One pass of a conn that failed: a closing one goes on with its close
 * handshake and drains its data channels. */
static int failed_pass(struct tcpx_p2p_conn *c, struct tp_progress *st)
{
	if (!tp__ctl_closing(c))
		return c->err;
	(void)tp__ctl_close_step(c, &st->moved, &st->pending);
	(void)tp__data_drain(c, &st->moved);
	return c->err;
}

/* Work the next pass can do at once: hand-overs owed, unpacks running. */
static void assess(const struct tcpx_p2p_conn *c, struct tp_progress *st)
{
	int i;

	st->busy = st->busy || c->dir[TP_SEND].head || c->dir[TP_RECV].head ||
		   c->unmatched.head || c->answers.head || c->settling.head || tp__rma_busy(c);
	for (i = 0; i < c->nchan && !st->pending; i++)
		st->pending = c->send[i].handover || c->recv[i].handover ||
			      c->send[i].issued != c->send[i].win.posted ||
			      c->recv[i].win.unpacked != c->recv[i].win.retired;
}

static int progress_conn(struct tcpx_p2p_conn *c, struct tp_progress *st)
{
	bool *moved = &st->moved;
	int i, rc = 0;

	*st = (struct tp_progress){ 0 };
	if (c->err)
		return failed_pass(c, st);
	rc = tp__ctl_progress(c, moved, &st->pending);
	/* The peer's CLOSE, just read, failed the conn: no stage runs for
	 * the transfers it failed. */
	if (!rc && c->err)
		return failed_pass(c, st);
	if (!rc && !tp__ctl_closing(c))
		rc = tp__live_pass(c);
	if (!rc)
		rc = tp__rma_progress(c, moved);
	for (i = 0; i < c->nchan && !rc; i++) {
		rc = tp__comm_test(c, &c->send[i], moved);
		if (!rc)
			rc = post_stage(c, &c->send[i], moved);
		if (!rc)
			rc = issue_stage(c, &c->send[i], moved);
	}
	for (i = 0; i < c->nchan && !rc; i++)
		rc = tp__comm_test(c, &c->recv[i], moved);
	if (!rc)
		rc = unpack_stage(c, moved);
	for (i = 0; i < c->nchan && !rc; i++) {
		rc = consume_stage(c, &c->recv[i], moved);
		if (!rc)
			rc = post_stage(c, &c->recv[i], moved);
		if (!rc)
			rc = issue_stage(c, &c->recv[i], moved);
	}
	/* Items that ended in this pass may release notifications. */
	if (!rc && *moved)
		rc = tp__rma_progress(c, moved);
	/* Announcements and acks queued by this pass go out now, not a pass later. */
	if (!rc && tp__ctl_queued(c))
		rc = tp__ctl_progress(c, moved, &st->pending);
	if (rc)
		return tp__conn_fail(c, rc);
	tp__xfer_settle(c);
	assess(c, st);
	return 0;
}

/* Every pass runs here, on whichever thread drives: the plugin and CUDA
 * calls of the pass run on the session's GPU, and the thread gets its own
 * context back. */
int tp__progress(struct tcpx_p2p_conn *c, struct tp_progress *st)
{
	void *ctx = tp__gpu_save(c->s);
	int rc = progress_conn(c, st);

	tp__dev_ctx_restore(ctx);
	return rc;
}
