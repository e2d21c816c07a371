/* The chunk stream of each direction over a connection's data channels
 * (stream.h).  One pass drives every stage on every channel and never
 * blocks: a stage that cannot move is left for the next pass while the
 * others go on.  Chunks of a transfer retire in order; the one that ends
 * it moves the transfer onto the caller's list of finished ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/mr.h"
#include "core/pipeline/chunk.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/pipeline/hostcopy.h"
#include "core/pipeline/stream.h"
#include "core/pipeline/vec.h"
#include "core/pipeline/window.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/xfer.h"
#include "util/config.h"
#include "util/error.h"
#include "util/timeline.h"

/* Where this side's send stream is idle an item starts on channel 0, so
 * that lone small transfers keep to the same comms, which the plugin
 * keeps warm (on 8 channels over Google's plugin under the simulator, a
 * quarter less latency at 4-32 KiB than rotating over comms idle since the
 * last one); behind items still in flight it starts where the last one
 * ended, so that transfers in flight together spread over every channel. */
unsigned tp__stream_start(const struct tcpx_p2p_conn *c)
{
	const struct tp_direction *d = &c->dir[TP_SEND];

	return d->head ? tp_chunk_channel(d->next_seq, (unsigned)c->nchan) : 0;
}

/* Move cm to the first number of its channel in its cursor's chunks, or
 * past the transfers that have none (some start beyond skipped numbers). */
static void settle(struct tcpx_p2p_conn *c, struct tp_comm *cm)
{
	unsigned n = (unsigned)c->nchan, i = tp_chunk_channel(cm->next_seq, n);
	struct tcpx_p2p_xfer *x;

	while ((x = cm->cursor)) {
		if (cm->next_seq < x->first_seq)
			cm->next_seq = tp_chunk_first(x->first_seq, i, n);
		if (cm->next_seq < x->first_seq + x->nchunks)
			return;
		cm->cursor = x->dlink.next;
	}
}

void tp__stream_enqueue(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	struct tp_direction *d = &c->dir[x->dir];
	struct tp_comm *cms = x->dir == TP_SEND ? c->send : c->recv;
	unsigned n = (unsigned)c->nchan, i;

	/* Both peers derive the cut from the same length (chunk.h), the
	 * numbers from the announced first channel. */
	x->chunk = tp_chunk_size(x->len, n, c->s->cfg.chunk_bytes,
				 (unsigned)c->s->cfg.chunks_per_channel);
	x->nchunks = tp_chunk_count(x->len, x->chunk);
	x->first_seq = tp_chunk_first(d->next_seq, x->chan0, n);
	d->next_seq = x->first_seq + x->nchunks;
	for (i = 0; i < n; i++)
		d->on[i] += (uint32_t)tp_chunk_on(x->first_seq, x->nchunks, n, i);
	tp_list_append(d, x, dlink);
	/* An idle comm has posted every chunk of its channel before x: its
	 * next number lies at or after the previous item's end. */
	for (i = 0; i < n; i++) {
		if (!cms[i].cursor) {
			cms[i].cursor = x;
			settle(c, &cms[i]);
		}
	}
}

/* A chunk of x is done; the last one takes x out of its direction's
 * stream onto done, for the caller to finish. */
static void retire_chunk(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, struct tp_xlist *done)
{
	if (++x->retired < x->nchunks)
		return;
	tp_list_remove(&c->dir[x->dir], x, dlink);
	tp_list_append(done, x, dlink);
}

static void advance_cursor(struct tcpx_p2p_conn *c, struct tp_comm *cm)
{
	cm->next_seq += (uint64_t)c->nchan;
	settle(c, cm);
}

/* A plugin that reports neither received sizes nor fragment records
 * (none known: TCP plugins report sizes, TCPX bounces) gives no way to
 * see a short chunk.  Until one of its receives on cm reported a size,
 * each staging slot is cleared before a receive is posted into it, so a
 * chunk that lands short leaves zeros, never bytes of an earlier chunk of
 * the comm, in the segments it is scattered into.  Device slots are
 * cleared on the stream from a cleared chunk of the conn, the receive
 * issued once that copy completed (tp__stream_issue). */
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
	return tp__devq_copies(c->s, cp, k, TP_LIST_MAPPED, &sl->launch);
}

/* Slot sl starts over for len bytes at off of x (NULL: a receive ahead,
 * its chunk not known yet): nothing staged, launched or requested. */
static void slot_start(struct tp_slot *sl, struct tcpx_p2p_xfer *x, size_t off, size_t len)
{
	sl->x = x;
	sl->soff = off;
	sl->len = (uint32_t)len;
	sl->launch = 0;
	sl->hjob_wait = false;
	sl->stage = NULL;
	sl->request = NULL;
}

/* Fill slot sl with the next chunk of x (seq): straight from or into its
 * segment, or through a staging slot, gathering a send there first.
 * Returns 1 when no staging slot is free, or in a post's pass a gather
 * would run on the caller's thread (try again next pass). */
static int prepare(struct tcpx_p2p_conn *c, struct tp_comm *cm, struct tcpx_p2p_xfer *x,
		   struct tp_slot *sl)
{
	struct tcpx_p2p_session *s = c->s;
	struct tcpx_p2p_mr *mr = NULL;
	enum tp_copy_path path = TP_PATH_NONE;
	size_t off, n;
	uint32_t ncp;
	char *ptr = NULL;
	int rc;

	/* A cancelled transfer's chunks go out empty (a send: its receiver
	 * learns of the cancel from the empty chunk) or land nowhere. */
	bool nowhere = x->op == TP_OP_DISCARD || x->cancelled;

	tp_chunk_range(x->len, x->chunk, cm->next_seq - x->first_seq, &off, &n);
	if (x->cancelled && cm->dir == TP_SEND)
		n = 0;
	slot_start(sl, x, off, n);
	sl->dst_dev = x->mtype == TCPX_P2P_MEM_CUDA;
	sl->dst_mapped = x->mapped;
	if (!nowhere)
		ptr = tp__seg_single(x, off, n, &mr);
	sl->multi = !ptr;
	/* A send that is not one piece of its memory is gathered into a
	 * staging slot, by the path this decides. */
	if (!ptr && cm->dir == TP_SEND)
		path = tp__copy_path(s, cm, sl);
	/* A post's own pass gathers little on the calling thread: a window of
	 * staging slots filled by memcpy was 1.4-2.2 ms of a 1,024-segment
	 * write's post (docs/performance.md).  Decided before a slot is taken. */
	if (path == TP_PATH_HOST_NOW && c->posting) {
		if (n > c->post_gather)
			return 1;
		c->post_gather -= n;
	}
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
		if (cm->dir == TP_SEND && !x->cancelled) {
			rc = tp__vec_copies(s, x, sl, true, ptr, path == TP_PATH_HOST_NOW, &ncp);
			if (!rc && ncp && path == TP_PATH_HOST_THREADS) {
				rc = tp__hcopy_submit(s, &sl->hjob, sl->cp, ncp);
				sl->hjob_wait = !rc;
			} else if (!rc && ncp) {
				rc = tp__devq_copies(s, sl->cp, ncp,
						     sl->cp_pinned ? TP_LIST_KERNEL : TP_LIST_ASYNC,
						     &sl->launch);
			}
			if (rc) {
				tp__stage_give(cm, sl->stage);
				return rc;
			}
		} else if (cm->dir == TP_RECV && !nowhere) {
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
	x->prepared++;
	return 0;
}

/*
 * Receives ahead.  Where the plugin receives into bounce pages of its own
 * (TCPX, the emulator's bounce modes, the simulator), a receive's
 * destination is read only at unpack time: the posted buffer is never
 * written.  And the k-th receive of a comm meets the peer's k-th send on
 * it (tags: comm.h), which is the next chunk of the stream that travels
 * on that channel, whatever item it belongs to.  So each such comm keeps
 * its window full of receives posted before any announcement names their
 * chunks (post_ahead: into the landing buffer, or a host chunk nothing
 * reads), and the chunks bind to them in order as their items are
 * numbered (bind_ahead, from the comm's cursor as every post).  A receive
 * that completes unbound is tested (its pages held) but never unpacked
 * nor consumed until its chunk is bound: a peer's bytes land only in an
 * item it announced, and a peer that sends without announcing holds at
 * most one window of pages per comm.  The close counts each posted
 * receive as any other (close/drain.c bounds the peer's count of them by
 * one window past what this side announced).
 */
static bool ahead_comm(const struct tcpx_p2p_conn *c, const struct tp_comm *cm)
{
#if TP_TEST_HOOKS
	if (c->s->test_no_ahead)
		return false;
#else
	(void)c;
#endif
	return cm->dir == TP_RECV && cm->meta;
}

/* The buffer receives ahead are posted with: the plugin writes none of
 * it.  Device memory where the bounce pages are (TCPX takes only devmem
 * there), else a host chunk of the conn, registered on first use. */
static int ahead_buf(struct tcpx_p2p_conn *c, const struct tp_comm *cm, char **buf,
		     struct tcpx_p2p_mr **mr)
{
	size_t bytes = (c->s->cfg.chunk_bytes + 4095) & ~(size_t)4095;
	int rc;

	if (cm->bounce_on_device && c->land) {
		*buf = c->land;
		*mr = c->landmr;
		return 0;
	}
	if (!c->ahead) {
		c->ahead = aligned_alloc(4096, bytes);
		if (!c->ahead)
			return tp__error(TCPX_P2P_ENOMEM, "receives ahead: out of memory");
		rc = tp__mr_register(c->s, c->ahead, bytes, TCPX_P2P_MEM_HOST, 0, &c->aheadmr);
		if (rc) {
			free(c->ahead);
			c->ahead = NULL;
			return rc;
		}
	}
	*buf = c->ahead;
	*mr = c->aheadmr;
	return 0;
}

/* A receive of a whole chunk for whatever chunk comes next on cm. */
static int post_ahead(struct tcpx_p2p_conn *c, struct tp_comm *cm, struct tp_slot *sl)
{
	char *buf = NULL;
	struct tcpx_p2p_mr *mr = NULL;
	int rc = ahead_buf(c, cm, &buf, &mr);

	if (rc)
		return rc;
	slot_start(sl, NULL, 0, c->s->cfg.chunk_bytes);
	sl->multi = false;
	sl->dst_dev = sl->dst_mapped = false;
	sl->buf = buf;
	sl->mr = mr;
	sl->seq = 0;
	return 0;
}

/* The receive in sl, posted ahead, gets the chunk seq of x (cm's cursor):
 * prepared as if posted now, its request and what its test said kept.
 * Returns 1 when no staging slot is free (try again next pass). */
static int bind_ahead(struct tcpx_p2p_conn *c, struct tp_comm *cm, struct tcpx_p2p_xfer *x,
		      struct tp_slot *sl)
{
	struct tp_slot was = *sl;
	int rc = prepare(c, cm, x, sl);

	if (rc) {
		*sl = was;
		return rc;
	}
	sl->request = was.request;
	sl->got = was.got;
	sl->caller = was.caller;
	c->stats.chunks_ahead++;
	tp__tl_mark(TP_TL_BOUND);
	return 0;
}

bool tp__stream_resting(const struct tcpx_p2p_conn *c, const struct tp_comm *cm)
{
	return cm->win.tested == cm->bound && !cm->handover && !c->unmatched.head &&
	       !c->dir[TP_RECV].head;
}

int tp__stream_bind(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	int rc;

	while (cm->cursor && cm->bound != cm->win.posted) {
		rc = bind_ahead(c, cm, cm->cursor, &cm->slot[tp_window_slot(cm->bound)]);
		if (rc)
			return rc < 0 ? rc : 0;
		cm->bound++;
		*moved = true;
		advance_cursor(c, cm);
	}
	return 0;
}

/* Prepare chunks into free window slots, in stream order: first into the
 * receives posted ahead of them, then into new ones; a bounce comm with
 * no chunk known fills its window with receives ahead. */
int tp__stream_post(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	int rc = tp__stream_bind(c, cm, moved);

	if (rc || (cm->cursor && cm->bound != cm->win.posted))
		return rc;
	while (cm->cursor && tp_window_can_post(&cm->win)) {
		rc = prepare(c, cm, cm->cursor, &cm->slot[tp_window_slot(cm->win.posted)]);
		if (rc)
			return rc < 0 ? rc : 0;
		cm->bound = ++cm->win.posted;
		*moved = true;
		advance_cursor(c, cm);
	}
	if (cm->cursor) {
		c->stats.windows_full++;
		return 0;
	}
	while (ahead_comm(c, cm) && tp_window_can_post(&cm->win)) {
		rc = post_ahead(c, cm, &cm->slot[tp_window_slot(cm->win.posted)]);
		if (rc)
			return rc;
		cm->win.posted++;
		*moved = true;
	}
	return 0;
}

/* Hand prepared chunks to the plugin in order, each once its gather is
 * done; a NULL request means "not now". */
int tp__stream_issue(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved)
{
	struct tp_net *net = c->s->net;
	struct tp_slot *sl;
	void *mh;
	bool done, taken;
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
		rc = tp__comm_issue(net, cm, pbuf, sl->len, mh, &taken);
		if (rc || !taken)
			return rc;
		if (cm->dir == TP_SEND)
			sl->t_issue = tp__now_ns();
		tp__tl_mark(cm->dir == TP_SEND ? TP_TL_DATA_ISEND : TP_TL_DATA_IRECV);
		sl->caller = !sl->stage && (cm->dir == TP_SEND || (!cm->meta && pbuf == sl->buf));
		*moved = true;
	}
	return 0;
}

int tp__stream_test(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved,
		    struct tp_xlist *done)
{
	uint32_t k = cm->win.tested;
	int rc = tp__comm_test(c->s->net, cm, moved);

	/* What completed before an error counts all the same. */
	for (; k != cm->win.tested; k++) {
		struct tp_slot *sl = &cm->slot[tp_window_slot(k)];

		tp__tl_mark(cm->dir == TP_SEND ? TP_TL_DATA_SEND_DONE : TP_TL_DATA_RECV_DONE);
		if (cm->dir == TP_RECV) {
			c->alive.heard = true;
			continue;
		}
		if (!sl->x || !done)
			continue;
		tp__hist_add(&c->stats.req_lat, sl->t_done - sl->t_issue);
		retire_chunk(c, sl->x, done);
	}
	return rc;
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
	long long got;
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
	got = cm->meta && sl->got < 0 ? (long long)sl->meta.bytes : (long long)sl->got;
	if (!sl->x->err && !got) { /* a sender's cancel (tcpx_p2p_xfer_cancel) */
		sl->x->err = TCPX_P2P_ECANCELED;
		snprintf(sl->x->why, sizeof(sl->x->why), "the sender cancelled it (chunk %llu "
			 "arrived empty)", (unsigned long long)(sl->seq - sl->x->first_seq));
	} else if (!sl->x->err) {
		sl->x->err = TCPX_P2P_EPROTO;
		snprintf(sl->x->why, sizeof(sl->x->why), "chunk %llu arrived with %lld of its %u "
			 "bytes", (unsigned long long)(sl->seq - sl->x->first_seq), got, sl->len);
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
	if (rc || !n) {
		sl->path = TP_PATH_NONE; /* nothing to wait for */
		return rc;
	}
	if (path == TP_PATH_HOST_THREADS)
		return tp__hcopy_submit(s, &sl->hjob, sl->cp, n);
	return tp__devq_copies(s, sl->cp, n,
			       path != TP_PATH_LIST_KERNEL ? TP_LIST_ASYNC
			       : sl->cp_pinned	    ? TP_LIST_KERNEL
						    : TP_LIST_MAPPED,
			       &sl->launch);
}

/* Start the unpack of every tested receive; device unpacks of all channels
 * are batched into as few launches as possible. */
int tp__stream_unpack(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_batch b; /* only n is read before being set: no 520-byte clear per pass */
	struct tp_comm *cm;
	struct tp_slot *sl;
	int i, rc;

	b.n = 0;
	for (i = 0; i < c->nchan; i++) {
		cm = &c->recv[i];
		/* a receive posted ahead waits for its chunk (its item's
		 * announcement) before anything reads its pages */
		for (; cm->win.unpacked != cm->win.tested && cm->win.unpacked != cm->bound;
		     cm->win.unpacked++) {
			sl = &cm->slot[tp_window_slot(cm->win.unpacked)];
			*moved = true;
			tp__tl_mark(TP_TL_UNPACK);
			/* the k-th receive of a comm uses meta slot k % 16 */
			rc = sl->x->op == TP_OP_DISCARD || sl->x->cancelled
				     ? 0
				     : landed_whole(cm, sl, tp_window_slot(cm->win.unpacked));
			if (rc < 0)
				return rc;
			sl->path = rc ? tp__copy_path(c->s, cm, sl) : TP_PATH_NONE;
			switch (sl->path) {
			case TP_PATH_NONE:
				break;
			case TP_PATH_RECORDS:
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

int tp__stream_consume(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved,
		       struct tp_xlist *done)
{
	struct tp_slot *sl;
	bool ready;
	int rc;

	while (cm->win.retired != cm->win.unpacked) {
		sl = &cm->slot[tp_window_slot(cm->win.retired)];
		rc = tp__comm_unpacked(c->s, sl, !early_consume(c->s), &ready);
		if (rc || !ready)
			return rc;
		rc = tp__comm_consume(c->s->net, cm);
		if (rc)
			return rc;
		tp__tl_mark(TP_TL_CONSUMED);
		*moved = true;
		if (sl->x && done) /* none: a closing conn's (close/drain.c) */
			retire_chunk(c, sl->x, done);
	}
	return 0;
}

/* Requests the plugin has on the data channels (chunks in its hands). */
uint32_t tp__stream_inflight(const struct tcpx_p2p_conn *c)
{
	uint32_t n = 0;

	for (int i = 0; i < c->nchan; i++)
		n += (c->send[i].issued - c->send[i].win.retired) +
		     (c->recv[i].issued - c->recv[i].win.retired);
	return n;
}

/* Of those, the ones whose plugin may still read or write the caller's
 * memory: sends posted from it (not from staging) and receives the plugin
 * writes in place (no bounce buffer, not into staging or the landing
 * buffer). */
uint32_t tp__stream_caller_inflight(const struct tcpx_p2p_conn *c)
{
	uint32_t n = 0;

	for (int i = 0; i < 2 * c->nchan; i++) {
		const struct tp_comm *cm = i < c->nchan ? &c->send[i] : &c->recv[i - c->nchan];

		for (uint32_t k = cm->win.retired; k != cm->issued; k++)
			n += cm->slot[tp_window_slot(k)].caller;
	}
	return n;
}
