/* The receive path of a devmem-TCP kernel: MSG_SOCK_DEVMEM receives
 * (recv.h). */
#define _GNU_SOURCE
#include "recv.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "bounce.h"
#include "devmem.h"
#include "pool.h"
#include "real.h"
#include "report.h"
#include "settings.h"
#include "sock.h"
#include "steer.h"

#define RECV_PIECE (512u << 10)  /* a receive's socket reads, each copied while the next runs */

static void add_cmsg(struct msghdr *m, size_t *used, int type, uint32_t off, uint32_t size,
		     uint32_t token)
{
	struct cmsghdr *c = (struct cmsghdr *)((char *)m->msg_control + *used);
	struct devmem_frag f = {off, size, token};
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = type;
	c->cmsg_len = CMSG_LEN(sizeof(f));
	memcpy(CMSG_DATA(c), &f, sizeof(f));
	*used += CMSG_SPACE(sizeof(f));
}

/* Hand out the fragments of bytes [*off, end) of the lane's buffer, from
 * fragment *nf on, as one read of them all would: with `last` 0, a
 * fragment that `end` would cut short waits for the next socket read.
 * Fresh pages come from `resv` (taken by the caller), *ri of them used.
 * With `copy`, the fragments' bytes are copied from the lane's buffer into
 * their pages (else they are there already).  Called with s->rx held;
 * takes s->lock.  A page's references belong to the socket that holds it
 * (pool.h), so the pool's lock is not taken here but to free a page whose
 * tokens all came back while it was open (rare: a page closed by a later
 * receive). */
static void give_frags(int fd, struct sock *s, struct sim_bounce *b, struct sim_lane *l,
		       struct msghdr *m, size_t *used, size_t *off, size_t end, int last, int copy,
		       size_t *nf, const uint32_t *resv, size_t nresv, size_t *ri)
{
	size_t first = *nf, from = *off;
	pthread_mutex_lock(&s->lock);
	while (*off < end && *nf < TCPXSIM_MAX_FRAGS) {
		uint32_t token, page;
		int fresh;
		uint32_t len = sim_cut_peek(&s->cut, sim_cfg.mss, end - *off, &fresh);
		if (!last && len == end - *off && sim_cut_peek(&s->cut, sim_cfg.mss, SIZE_MAX, &fresh) > len)
			break; /* cut short by this read's end: the next read may continue it */
		if (fresh && *ri == nresv) /* cannot happen: reserved by the plan */
			break;
		page = fresh ? resv[(*ri)++] : s->cut.page;
		l->lens[*nf] = len;
		l->offs[*nf] = page * DEVMEM_PAGE + (fresh ? 0 : DEVMEM_PAGE - s->cut.page_left);
		sim_pool_ref(&b->pool, page); /* the token's */
		sim_tokens_add(&s->tokens, page, &token);
		if (sim_cut_take(&s->cut, sim_cfg.mss, len, fresh, page) &&
		    sim_pool_unref(&b->pool, page)) {
			/* closed, and its tokens are back already: free again */
			pthread_mutex_lock(&b->lock);
			sim_pool_free(&b->pool, page);
			pthread_mutex_unlock(&b->lock);
		}
		add_cmsg(m, used, DEVMEM_SCM_OFFSET, l->offs[*nf], len, token);
		*off += len;
		if ((*nf)++ == 0)
			sim_test_hook(fd, 2);
	}
	pthread_mutex_unlock(&s->lock);
	STAT_ADD(frags, *nf - first);
	STAT_ADD(tokens_held, *nf - first);
	if (copy && sim_bounce_write_frags(b, l, l->buf + from, first, *nf - first))
		sim_say("tcpxsim: writing %zu fragments into the bounce buffer failed", *nf - first);
}

/* A bounce buffer the CPU can write (host mode, and hostmap, which the GPU
 * maps): the bytes are read straight into the pages they are handed out
 * in — laid out first exactly as give_frags will cut them, from the same
 * reserved pages — and the linear part straight into the caller's buffer,
 * so nothing is copied.  The bytes read; 0 with *k and *err from the read
 * when none. */
static size_t direct_read(int fd, struct sock *s, struct sim_bounce *b, struct sim_lane *l,
			  struct msghdr *m, size_t linear, size_t fit, ssize_t *k, int *err)
{
	struct sim_cut t = s->cut;
	size_t np = 0, ri = 0, got = 0, at = 0;
	for (size_t done = 0; done < fit && np < TCPXSIM_MAX_FRAGS; np++) {
		int fresh;
		uint32_t len = sim_cut_peek(&t, sim_cfg.mss, fit - done, &fresh);
		uint32_t page = fresh ? l->pages[ri++] : t.page;
		size_t pos = (size_t)page * DEVMEM_PAGE + (fresh ? 0 : DEVMEM_PAGE - t.page_left);
		sim_cut_take(&t, sim_cfg.mss, len, fresh, page);
		l->dst[np] = (uint64_t)(uintptr_t)(b->host + pos);
		l->len[np] = len;
		done += len;
	}
	int lin = linear > 0;
	while (lin || at < np) {
		struct iovec v[1024];
		size_t nv = 0, ask = 0;
		if (lin)
			v[nv++] = (struct iovec){m->msg_iov[0].iov_base, linear};
		for (; nv < sizeof(v) / sizeof(v[0]) && at < np; at++)
			v[nv++] = (struct iovec){(void *)(uintptr_t)l->dst[at], l->len[at]};
		for (size_t i = 0; i < nv; i++)
			ask += v[i].iov_len;
		struct msghdr h = {.msg_iov = v, .msg_iovlen = nv};
		*k = REAL(recvmsg)(fd, &h, MSG_DONTWAIT);
		if (*k <= 0) {
			*err = errno;
			break;
		}
		if (got == 0)
			sim_test_hook(fd, 0);
		got += (size_t)*k;
		lin = 0;
		if ((size_t)*k < ask)
			break;
	}
	return got;
}

/* A devmem receive.  The socket is read in pieces into a lane of its own;
 * each piece's fragments are handed out and their copies queued while the
 * next piece is read, and all are complete before the call returns.  Only
 * this socket's rx lock is held across the reads and copies; pages are
 * taken from the pool up front, under its lock, and what was not used goes
 * back at the end. */
ssize_t sim_devmem_recv(int fd, struct msghdr *m, int flags)
{
	size_t per = CMSG_SPACE(sizeof(struct devmem_frag));
	size_t max_frags = m->msg_control ? m->msg_controllen / per : 0;
	size_t want = m->msg_iovlen ? m->msg_iov[0].iov_len : 0;
	if (!(flags & MSG_DONTWAIT)) {
		/* Wait for data outside every lock; the reads never block. */
		struct pollfd p = {.fd = fd, .events = POLLIN};
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	}
	struct sock *s = sim_sock_get(fd);
	struct sim_bounce *b = NULL;
	size_t free_tokens = 0;
	if (s) {
		pthread_mutex_lock(&s->rx);
		pthread_mutex_lock(&s->lock);
		if ((b = sim_steer(fd, s)))
			free_tokens = s->tokens.cap - s->tokens.held;
		pthread_mutex_unlock(&s->lock);
	}
	if (!b) {
		/* Not steered to a bounce buffer: the NIC delivered ordinary
		 * packets and the kernel copies them, without any cmsg. */
		if (s)
			pthread_mutex_unlock(&s->rx);
		STAT_ADD(unsteered_recvs, 1);
		return REAL(recvmsg)(fd, m, flags & ~DEVMEM_MSG_SOCK_DEVMEM);
	}
	if (max_frags == 0 || want == 0) {
		pthread_mutex_unlock(&s->rx);
		errno = EINVAL;
		return -1;
	}
	size_t linear = sim_cfg.linear < want ? sim_cfg.linear : want;
	size_t frags = max_frags - (linear ? 1 : 0);
	if (frags > TCPXSIM_MAX_FRAGS)
		frags = TCPXSIM_MAX_FRAGS;
	if (frags > free_tokens) /* only this call takes this socket's tokens */
		frags = free_tokens;
	size_t room = want - linear < TCPXSIM_STAGE_BYTES - linear ? want - linear
								    : TCPXSIM_STAGE_BYTES - linear;
	/* Pages for the bytes queued now, not for all that were asked for:
	 * other sockets share the pool.  (Nothing queued: the read answers.) */
	int queued = 0;
	if (REAL(ioctl)(fd, FIONREAD, &queued) == 0 && queued > 0) {
		size_t q = (size_t)queued > linear ? (size_t)queued - linear : 0;
		room = q < room ? q : room;
	}
	size_t fit = sim_cut_fit(&s->cut, sim_cfg.mss, room, frags, SIZE_MAX);
	size_t need = sim_cut_fresh(&s->cut, sim_cfg.mss, fit), nresv = 0, ri = 0;
	struct sim_lane *l = sim_lane_get(b->on_gpu ? b->ctx : NULL);
	if (!l) {
		pthread_mutex_unlock(&s->rx);
		errno = ENOMEM;
		return -1;
	}
	/* The fresh pages this receive may open, taken now. */
	ssize_t k = 0;
	pthread_mutex_lock(&b->lock);
	while (nresv < need && sim_pool_take(&b->pool, &l->pages[nresv]) == 0)
		nresv++;
	pthread_mutex_unlock(&b->lock);
	if (nresv < need)
		fit = sim_cut_fit(&s->cut, sim_cfg.mss, fit, frags, nresv);
	if (fit == 0 && room > 0) {
		/* No free page: the NIC drops, TCP backs off, nothing to read. */
		STAT_ADD(starved, 1);
		sim_socks_report_starved(b, s);
		sim_lane_put(l);
		pthread_mutex_unlock(&s->rx);
		errno = EAGAIN;
		return -1;
	}
	size_t n = fit + linear, got = 0, used = 0, off = 0, nf = 0;
	int err = 0;
	if (b->host) {
		got = direct_read(fd, s, b, l, m, linear, fit, &k, &err);
		if (got) {
			off = linear < got ? linear : got;
			if (off) {
				add_cmsg(m, &used, DEVMEM_SCM_HEADER, 0, (uint32_t)off, 0);
				STAT_ADD(linear_bytes, off);
			}
		}
		n = got; /* the pieces below have nothing left to read */
	}
	while (got < n) {
		size_t ask = n - got < RECV_PIECE ? n - got : RECV_PIECE;
		k = REAL(recv)(fd, l->buf + got, ask, MSG_DONTWAIT);
		if (k <= 0) {
			err = errno;
			break;
		}
		if (got == 0)
			sim_test_hook(fd, 0);
		got += (size_t)k;
		if (off < linear && got > off) {
			size_t lin = linear < got ? linear : got;
			memcpy(m->msg_iov[0].iov_base, l->buf, lin);
			add_cmsg(m, &used, DEVMEM_SCM_HEADER, 0, (uint32_t)lin, 0);
			STAT_ADD(linear_bytes, lin);
			off = lin;
		}
		if ((size_t)k < ask)
			break;
		if (got < n)
			give_frags(fd, s, b, l, m, &used, &off, got, 0, 1, &nf, l->pages, nresv, &ri);
	}
	if (got)
		give_frags(fd, s, b, l, m, &used, &off, got, 1, !b->host, &nf, l->pages, nresv, &ri);
	if (ri < nresv) {
		pthread_mutex_lock(&b->lock);
		while (ri < nresv)
			sim_pool_put(&b->pool, l->pages[--nresv]);
		pthread_mutex_unlock(&b->lock);
	}
	if (sim_lane_sync(l))
		sim_say("tcpxsim: copying %zu fragments into the bounce buffer failed", nf);
	sim_lane_put(l);
	pthread_mutex_unlock(&s->rx);
	if (!got) {
		errno = err;
		return k;
	}
	m->msg_controllen = used;
	m->msg_flags = 0;
	STAT_ADD(devmem_recvs, 1);
	return (ssize_t)got;
}

struct freed_pages {
	uint32_t *page;
	size_t n, cap;
};

static void collect_page(void *arg, uint32_t page)
{
	struct freed_pages *f = arg;
	if (f->n < f->cap) /* cap: every token named (fewer held: the return fails first) */
		f->page[f->n++] = page;
}

#define DONTNEED_STACK 1024 /* pages collected without a malloc */

/* SO_DEVMEM_DONTNEED.  Tokens and their pages' references under the
 * socket's lock only (a page's references are its socket's: pool.h); pages
 * whose last token this was are poisoned outside every lock and only then
 * go back to the pool, under its lock, all at once. */
int sim_dontneed(int fd, const void *val, socklen_t len)
{
	uint32_t bad = 0, stack[DONTNEED_STACK];
	int rc = 0;
	struct sock *s = sim_sock_slot(fd, 0);
	struct freed_pages f = {0};
	const struct devmem_token_range *r = val;
	size_t n = len / sizeof(struct devmem_token_range), named = 0;
	if (!val || len % sizeof(struct devmem_token_range))
		return sim_violation(EINVAL, "SO_DEVMEM_DONTNEED on fd %d: %u bytes is not a whole array "
					 "of {start, count}", fd, (unsigned)len);
	for (size_t i = 0; i < n && named <= UINT32_MAX; i++)
		named += r[i].count;
	if (s)
		pthread_mutex_lock(&s->lock);
	struct sim_bounce *b = s && s->live ? s->b : NULL;
	if (!b) {
		if (s)
			pthread_mutex_unlock(&s->lock);
		return sim_violation(EINVAL, "SO_DEVMEM_DONTNEED on fd %d, which holds no devmem tokens",
				 fd);
	}
	/* More tokens named than held: the return fails, nothing collected. */
	if (named <= s->tokens.held) {
		f.cap = named;
		f.page = named <= DONTNEED_STACK ? stack : malloc(sizeof(*f.page) * named);
		if (!f.page) {
			pthread_mutex_unlock(&s->lock);
			errno = ENOMEM;
			return -1;
		}
	}
	uint64_t before = s->tokens.held;
	rc = sim_tokens_return(&s->tokens, &b->pool, r, n, &bad, collect_page, &f);
	uint64_t gone = before - s->tokens.held;
	pthread_mutex_unlock(&s->lock);
	STAT_ADD(tokens_returned, gone);
	STAT_SUB(tokens_held, gone);
	if (f.n) {
		if (sim_cfg.poison) {
			struct sim_lane *l = b->on_gpu ? sim_lane_get(b->ctx) : NULL;
			if ((b->on_gpu && !l) || sim_bounce_poison(b, l, f.page, f.n))
				sim_say("tcpxsim: poisoning %zu returned pages failed", f.n);
			sim_lane_put(l);
		}
		pthread_mutex_lock(&b->lock);
		for (size_t i = 0; i < f.n; i++)
			sim_pool_free(&b->pool, f.page[i]);
		pthread_mutex_unlock(&b->lock);
	}
	if (f.page != stack)
		free(f.page);
	if (rc)
		rc = sim_violation(EINVAL, "SO_DEVMEM_DONTNEED on fd %d: token %u is not held by this "
				       "socket (never given, returned already, or named twice)",
			       fd, bad);
	return rc;
}

/* A plain receive on a steered flow: its bytes sit in device pages, which
 * devmem-TCP hands out only to MSG_SOCK_DEVMEM receives; recv() and plain
 * recvmsg() fail with EFAULT once such bytes are queued (read() is left
 * alone: no TCPX plugin reads its sockets that way).  (With STEER_ALL only the
 * sockets that asked for devmem count as steered: control sockets are not.)
 * 1 when the read must fail. */
int sim_plain_read_refused(int fd)
{
	int queued = 0, refuse = 0;
	if (sim_cfg.steering == STEER_NONE)
		return 0;
	struct sock *s = sim_sock_slot(fd, 0);
	if (s) {
		pthread_mutex_lock(&s->lock);
		refuse = s->live && s->b;
		pthread_mutex_unlock(&s->lock);
	}
	if (!refuse && sim_cfg.steering == STEER_RULES && sim_rules_exist() && (s = sim_sock_get(fd))) {
		pthread_mutex_lock(&s->lock);
		refuse = sim_steer(fd, s) != NULL;
		pthread_mutex_unlock(&s->lock);
	}
	if (!refuse || REAL(ioctl)(fd, FIONREAD, &queued) != 0 || queued == 0)
		return 0;
	errno = EFAULT;
	return 1;
}
