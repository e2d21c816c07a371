/*
 * Helper threads.  Each request is cut into slices (64 KiB .. 1 MiB) dealt
 * round-robin over the comm's sockets, starting at a different socket for
 * each request; each socket that carries part of a request first carries a
 * small header {seq, size, tag}, so each thread knows the sender's size on
 * its own.  A request of one slice (or none) travels on one socket, as
 * TCPX gives a small message one task.  Helper thread i serves socket i
 * alone, with blocking I/O, whatever NCCL_SOCKET_NTHREADS says (emu.h says
 * why), so the sockets of a request move at once and, with the rotation,
 * no slice's task reliably finishes first, as with TCPX's polling helpers.
 * A helper sleeps until a request it carries is handed over (emu.h,
 * struct emu_thread).  Host data moves straight between the user buffer
 * and the socket.
 *
 * Bounce receives model TCPX's receive side (emu_bounce.c says why): a
 * task, one slice on one socket, takes its pages when it starts, cuts its
 * bytes into packet-and-page fragments, and appends its records to the
 * request when it finishes, under the comm lock, so tasks of different
 * sockets interleave in the order they finish.  The progress step in test
 * publishes them.  A receive whose records would pass 2048 fails where TCPX
 * would exit(1), and the rest of its bytes are drained so the comm lives.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "emu.h"

#define EMU_SCRATCH (64u << 10)

struct part {
	uint64_t seq;
	char *data;
	uint64_t size;
	int tag;
	int cuda;
};

static void min_u64(uint64_t *a, uint64_t b)
{
	if (b < *a)
		*a = b;
}

/* Marks the comm dead and wakes everyone; pending requests fail at test.
 * A peer that closed between two messages (a receive posted ahead for a
 * message that never came: the library's control channel) is a normal
 * end: logged at INFO. */
static void comm_break(struct emu_comm *c, int sock, const char *what, int err, bool idle)
{
	pthread_mutex_lock(&c->lock);
	if (!c->broken && !c->closing && idle)
		EMU_INFO("%s comm socket %d: the peer closed between messages (%s); failing "
			 "pending requests", c->kind == EMU_SEND ? "send" : "recv", sock,
			 strerror(err));
	else if (!c->broken && !c->closing)
		EMU_WARN("%s comm socket %d: %s: %s; failing pending requests",
			 c->kind == EMU_SEND ? "send" : "recv", sock, what, strerror(err));
	if (!c->broken)
		c->broken = err == ECONNRESET || err == EPIPE ? ncclRemoteError : ncclSystemError;
	tp__emu_wake_all(c);
	pthread_mutex_unlock(&c->lock);
	for (int i = 0; i < c->nsocks; i++)
		shutdown(c->fds[i], SHUT_RDWR);
}

/* The next request this send helper carries, once it is handed over (by
 * a test in strict mode, at post in eager mode); NULL when the comm is
 * going away.  Requests it does not carry are passed over: a slot whose
 * seq moved on was reused, so its request finished without this socket. */
static struct emu_req *next_send(struct emu_thread *t)
{
	struct emu_comm *c = t->comm;
	struct emu_req *r = NULL;

	pthread_mutex_lock(&c->lock);
	while (!c->closing && !c->broken) {
		if (t->seq < c->nactive) {
			struct emu_req *q = &c->reqs[t->seq % EMU_MAX_REQS];

			if (q->seq == t->seq && q->state == EMU_REQ_POSTED &&
			    tp__emu_carries(t->idx, q->seq, q->size, c->nsocks)) {
				r = q;
				break;
			}
			t->seq++;
			continue;
		}
		pthread_cond_wait(&t->cv, &c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* Waits for the request a header named to be handed over; NULL when the
 * comm is going away or the header names no request this socket may
 * carry now (the peer broke the protocol). */
static struct emu_req *await_recv(struct emu_thread *t, const struct emu_hdr *h)
{
	struct emu_comm *c = t->comm;
	struct emu_req *r = NULL;

	pthread_mutex_lock(&c->lock);
	t->wait_seq = h->seq;
	while (!c->closing && !c->broken && h->seq >= c->nactive)
		pthread_cond_wait(&t->cv, &c->lock);
	t->wait_seq = UINT64_MAX;
	if (!c->closing && !c->broken) {
		r = &c->reqs[h->seq % EMU_MAX_REQS];
		if (r->seq != h->seq || r->state != EMU_REQ_POSTED)
			r = NULL, errno = EPROTO;
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

static void part_done(struct emu_comm *c, struct emu_req *r)
{
	pthread_mutex_lock(&c->lock);
	if (++r->parts_done == r->nparts) {
		/* The worst case did not happen: pages promised, never taken. */
		c->pool.reserved -= r->resv;
		r->resv = 0;
		if (c->cfg.eager)
			tp__emu_req_publish(c, r);
		else
			r->state = EMU_REQ_FINISHED;
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->lock);
}

static int send_slices(struct emu_thread *t, int s, const struct part *p)
{
	struct emu_comm *c = t->comm;
	uint64_t slice = tp__emu_slice_size(p->size, c->nsocks);
	uint64_t nslices = (p->size + slice - 1) / slice;
	struct emu_hdr hdr = {
		.seq = p->seq, .size = p->size, .tag = p->tag, .magic = EMU_MAGIC,
	};

	if (tp__emu_send_full(c->fds[s], &hdr, sizeof(hdr)))
		return -1;
	for (uint64_t i = tp__emu_first_slice(s, p->seq, c->nsocks); i < nslices;
	     i += (uint64_t)c->nsocks) {
		uint64_t off = i * slice, len = slice;
		const char *src = p->data + off;

		min_u64(&len, p->size - off);
		if (p->cuda) {
			if (tp__emu_cuda_copy(t->staging, src, len, t->stream) ||
			    tp__emu_cuda_sync(t->stream)) {
				errno = EIO;
				return -1;
			}
			src = t->staging;
		}
		if (tp__emu_send_full(c->fds[s], src, len))
			return -1;
	}
	return 0;
}

void *tp__emu_send_thread(void *arg)
{
	struct emu_thread *t = arg;
	struct emu_comm *c = t->comm;

	tp__emu_cuda_set_device(c->cuda_dev);
	for (;;) {
		struct emu_req *r = next_send(t);
		struct part p;

		if (!r)
			break;
		p = (struct part){ r->seq, r->data, r->size, r->tag, r->cuda };
		if (send_slices(t, t->idx, &p)) {
			comm_break(c, t->idx, "send", errno, false);
			return NULL;
		}
		t->seq++;
		part_done(c, r);
	}
	return NULL;
}

/*
 * First header of a request on this side: decide its fate and, in bounce
 * mode, reserve the most pages its tasks can take (waiting for
 * irecvConsumed to return some if the pool is short).  Reserving for the
 * whole request here, in request order (a socket that carries no part of
 * the previous request may read this one's header first), is what keeps a
 * task from waiting for pages held by a later request while an earlier
 * one cannot finish.  Called with the lock held.
 */
static int recv_setup(struct emu_comm *c, struct emu_req *r, const struct emu_hdr *h)
{
	uint64_t slice = tp__emu_slice_size(h->size, c->nsocks);
	uint32_t n;

	while ((r->setup == 1 || (r->setup == 0 && c->nsetup != r->seq)) && !c->closing &&
	       !c->broken)
		pthread_cond_wait(&c->cv, &c->lock);
	if (c->closing || c->broken)
		return -1;
	if (r->setup == 2) {
		errno = EPROTO;
		return h->size == r->size ? 0 : -1;
	}
	r->setup = 1;
	r->size = h->size;
	r->nparts = tp__emu_nparts(h->size, c->nsocks);
	if (h->size > r->cap) {
		EMU_WARN("message truncated: sender posted %llu bytes, receive buffer holds %llu",
			 (unsigned long long)h->size, (unsigned long long)r->cap);
		r->result = ncclRemoteError;
		r->discard = 1;
	} else if (c->cfg.strict_tags && h->tag != r->tag) {
		EMU_WARN("tag mismatch: send tag %d, posted receive tag %d", h->tag, r->tag);
		r->result = ncclInvalidUsage;
		r->discard = 1;
	} else if (c->pool.meta && h->size > EMU_MAX_BOUNCE_BYTES) {
		EMU_WARN("receive of %llu bytes exceeds the 4 MiB bounce limit",
			 (unsigned long long)h->size);
		r->result = ncclInternalError;
		r->discard = 1;
	}
	if (c->pool.meta && !r->discard) {
		n = tp__emu_pool_need(h->size, (h->size + slice - 1) / slice);
		if (n > c->pool.npages) {
			EMU_WARN("receive of %llu bytes may need %u pages, the pool has %u",
				 (unsigned long long)h->size, n, c->pool.npages);
			r->result = ncclInternalError;
			r->discard = 1;
		} else {
			while (c->pool.nfree - c->pool.reserved < n && !c->closing && !c->broken)
				pthread_cond_wait(&c->cv, &c->lock);
			if (c->closing || c->broken)
				return -1;
			c->pool.reserved += n;
			r->resv = n;
		}
	}
	r->setup = 2;
	c->nsetup++;
	pthread_cond_broadcast(&c->cv);
	tp__emu_wake_for(c, r->seq); /* a helper that waits to learn if it carries it */
	return 0;
}

static int drain(struct emu_thread *t, int fd, uint64_t len)
{
	while (len) {
		uint64_t n = EMU_SCRATCH;

		min_u64(&n, len);
		if (tp__emu_recv_full(fd, t->scratch, n))
			return -1;
		len -= n;
	}
	return 0;
}

/* Waits for the slice queued last on this thread's stream, if any. */
static int stream_drain(struct emu_thread *t)
{
	if (!t->inflight)
		return 0;
	t->inflight = 0;
	if (tp__emu_cuda_sync(t->stream)) {
		errno = EIO;
		return -1;
	}
	return 0;
}

/*
 * Device bounce, fast path: one H2D copy of the slice and one kernel that
 * puts the task's nrec records on their pages, both left running while the
 * next slice arrives in the other half of staging (its records in the other
 * half of recs).  The sync here, before queueing, is what frees those other
 * halves; the one before part_done is what makes the pages valid before
 * test can report the receive done.  Returns 1 where the kernel cannot run
 * (nothing left in flight then).
 */
static int scatter_slice(struct emu_thread *t, const char *host, const tp_unpack_rec *recs_dev,
			 uint32_t nrec, uint64_t off, uint64_t len)
{
	struct emu_pool *pool = &t->comm->pool;
	int ret;

	if (stream_drain(t))
		return -1;
	if (tp__emu_cuda_copy(t->dstaging, host, len, t->stream)) {
		errno = EIO;
		return -1;
	}
	t->inflight = 1;
	ret = tp__emu_cuda_scatter(recs_dev, nrec, off, len, t->dstaging, pool->buf, t->stream);
	if (ret)
		return stream_drain(t) ? -1 : 1;
	t->flip ^= 1;
	return 0;
}

/* A task finished: its records join the request's, after those of the
 * tasks that finished before it, unless that passes TCPX's limit. */
static void task_done(struct emu_comm *c, struct emu_req *r, const tp_unpack_rec *rec,
		      uint32_t n)
{
	pthread_mutex_lock(&c->lock);
	if (__atomic_load_n(&r->discard, __ATOMIC_RELAXED)) {
		/* failed already: the rest is drained */
	} else if (r->nrec + n > TP_UNPACK_MAX_PAGES) {
		EMU_WARN("receive of %llu bytes needs more than %d fragments (MSS %u); "
			 "TCPX would exit(1) here",
			 (unsigned long long)r->size, TP_UNPACK_MAX_PAGES, c->mss);
		r->result = ncclInternalError;
		__atomic_store_n(&r->discard, 1, __ATOMIC_RELAXED);
	} else {
		memcpy(r->recs + r->nrec, rec, (size_t)n * sizeof(*rec));
		r->nrec += n;
	}
	pthread_mutex_unlock(&c->lock);
}

/*
 * One task: take its pages, cut its bytes into fragments, receive them.
 * A fragment's bytes continue the previous one's on the same page when a
 * packet boundary splits them, so runs of such records are merged into one
 * iovec or copy; a slice thus needs about one per page.
 */
static int recv_bounce(struct emu_thread *t, int fd, struct emu_req *r, uint64_t off,
		       uint64_t len)
{
	struct emu_comm *c = t->comm;
	struct emu_pool *pool = &c->pool;
	int dev = pool->mode == EMU_BOUNCE_DEVICE;
	char *host = t->staging + (t->flip ? EMU_SLICE_MAX : 0);
	size_t half = t->flip ? t->rec_cap : 0;
	tp_unpack_rec *rec = t->recs + half;
	uint32_t first, intra, n;
	int cnt = 0;

	pthread_mutex_lock(&c->lock);
	first = r->npages;
	intra = tp__emu_pool_take(pool, len, r->pages, &r->npages);
	pool->reserved -= r->npages - first;
	r->resv -= r->npages - first;
	pthread_mutex_unlock(&c->lock);
	n = tp__emu_frags(rec, r->pages + first, intra, c->mss, off, len);

	if (dev && tp__emu_recv_full(fd, host, len))
		return -1;
	if (dev && t->dstaging) {
		int ret = scatter_slice(t, host, t->recs_dev + half, n, off, len);

		if (ret < 0)
			return -1;
		if (ret == 0)
			goto done;
	}
	for (uint32_t i = 0; i < n; i++) {
		char *dst = pool->buf + rec[i].src_off;

		if (dev) {
			if (cnt && (char *)t->cp_dst[cnt - 1] + t->cp_len[cnt - 1] == dst) {
				t->cp_len[cnt - 1] += rec[i].len;
				continue;
			}
			t->cp_dst[cnt] = dst;
			t->cp_src[cnt] = host + (rec[i].dst_off - off);
			t->cp_len[cnt++] = rec[i].len;
		} else {
			if (cnt && (char *)t->iov[cnt - 1].iov_base + t->iov[cnt - 1].iov_len == dst) {
				t->iov[cnt - 1].iov_len += rec[i].len;
				continue;
			}
			t->iov[cnt].iov_base = dst;
			t->iov[cnt++].iov_len = rec[i].len;
		}
	}
	if (!dev) {
		if (tp__emu_recv_iov(fd, t->iov, cnt))
			return -1;
	} else if (tp__emu_cuda_copy_batch(t->cp_dst, t->cp_src, t->cp_len, (size_t)cnt,
					   c->cfg.cuda_batch, t->stream) ||
		   tp__emu_cuda_sync(t->stream)) {
		errno = EIO;
		return -1;
	}
done:
	task_done(c, r, rec, n);
	return 0;
}

static int recv_slices(struct emu_thread *t, int s, struct emu_req *r)
{
	struct emu_comm *c = t->comm;
	uint64_t slice = tp__emu_slice_size(r->size, c->nsocks);
	uint64_t nslices = (r->size + slice - 1) / slice;
	int fd = c->fds[s];

	for (uint64_t i = tp__emu_first_slice(s, r->seq, c->nsocks); i < nslices;
	     i += (uint64_t)c->nsocks) {
		uint64_t off = i * slice, len = slice;
		int ret;

		min_u64(&len, r->size - off);
		if (__atomic_load_n(&r->discard, __ATOMIC_RELAXED))
			ret = drain(t, fd, len);
		else if (c->pool.meta)
			ret = recv_bounce(t, fd, r, off, len);
		else if (!r->cuda)
			ret = tp__emu_recv_full(fd, r->data + off, len);
		else if (tp__emu_recv_full(fd, t->staging, len))
			ret = -1;
		else if (tp__emu_cuda_copy(r->data + off, t->staging, len, t->stream) ||
			 tp__emu_cuda_sync(t->stream))
			ret = (errno = EIO, -1);
		else
			ret = 0;
		if (ret)
			return -1;
	}
	return 0;
}

/*
 * A header names the next request this socket carries.  Socket s carries
 * every request whose seq is s modulo nsocks (its first slice), so it may
 * pass over fewer than nsocks requests, and none of those it was to carry
 * (their size known by now); anything else is a broken peer.  A header
 * that passes over a request this socket carries whose size is not known
 * yet goes unnoticed here: that request then never completes (a peer
 * that broke the protocol).  Lock held.
 */
static int header_fits(const struct emu_thread *t, const struct emu_hdr *h)
{
	const struct emu_comm *c = t->comm;
	uint64_t n = (uint64_t)c->nsocks;

	if (h->magic != EMU_MAGIC || h->seq < t->seq || h->seq - t->seq >= n)
		return 0;
	for (uint64_t q = t->seq; q < h->seq; q++) {
		const struct emu_req *r = &c->reqs[q % EMU_MAX_REQS];

		if (q % n == (uint64_t)t->idx)
			return 0;
		if (r->seq == q && r->setup == 2 && tp__emu_carries(t->idx, q, r->size, c->nsocks))
			return 0;
	}
	return 1;
}

/* One request on this thread's socket: its header, then its slices. */
static int recv_socket(struct emu_thread *t, struct emu_req **rp, bool *idle)
{
	struct emu_comm *c = t->comm;
	struct emu_req *r;
	struct emu_hdr h;
	int ret;

	*idle = true;
	if (tp__emu_recv_full(c->fds[t->idx], &h, sizeof(h)))
		return -1;
	*idle = false;
	pthread_mutex_lock(&c->lock);
	ret = header_fits(t, &h);
	pthread_mutex_unlock(&c->lock);
	if (!ret) {
		errno = EPROTO;
		return -1;
	}
	r = *rp = await_recv(t, &h);
	if (!r)
		return -1;
	pthread_mutex_lock(&c->lock);
	ret = recv_setup(c, r, &h);
	if (!ret && !tp__emu_carries(t->idx, h.seq, h.size, c->nsocks))
		ret = -1, errno = EPROTO;
	pthread_mutex_unlock(&c->lock);
	if (ret)
		return -1;
	return recv_slices(t, t->idx, r);
}

/*
 * The peer closed this socket between messages.  That breaks only a
 * request the socket carries (a receive posted ahead for a message that
 * never came is the library's control channel at a close): the helper
 * waits, as it would have without reading ahead, until a request it
 * carries is handed over, and only then breaks the comm; or the comm goes
 * away first.  Socket s carries request seq when seq is s modulo nsocks,
 * else as the request's size (known once it is set up) says.
 */
static void recv_eof(struct emu_thread *t, int err)
{
	struct emu_comm *c = t->comm;
	uint64_t n = (uint64_t)c->nsocks;

	pthread_mutex_lock(&c->lock);
	while (!c->closing && !c->broken) {
		uint64_t p = t->seq;
		const struct emu_req *r = &c->reqs[p % EMU_MAX_REQS];

		if (p < c->nactive) {
			if (r->seq != p || (r->setup == 2 && !tp__emu_carries(t->idx, p, r->size,
									 c->nsocks))) {
				t->seq++; /* finished without this socket, or not its */
				continue;
			}
			if (p % n == (uint64_t)t->idx || r->setup == 2) {
				pthread_mutex_unlock(&c->lock);
				comm_break(c, t->idx, "receive", err, true);
				return;
			}
		}
		t->wait_seq = p;
		pthread_cond_wait(&t->cv, &c->lock);
		t->wait_seq = UINT64_MAX;
	}
	pthread_mutex_unlock(&c->lock);
}

void *tp__emu_recv_thread(void *arg)
{
	struct emu_thread *t = arg;
	struct emu_comm *c = t->comm;

	tp__emu_cuda_set_device(c->cuda_dev);
	for (;;) {
		struct emu_req *r = NULL;
		bool idle;

		if (recv_socket(t, &r, &idle)) {
			if (idle)
				recv_eof(t, errno);
			else
				comm_break(c, t->idx, "receive", errno, false);
			goto drain;
		}
		if (stream_drain(t)) {
			comm_break(c, t->idx, "receive", errno, false);
			goto drain;
		}
		t->seq = r->seq + 1;
		part_done(c, r);
	}
drain:
	/* Nothing of ours may still run when the comm frees its buffers. */
	(void)stream_drain(t);
	return NULL;
}
