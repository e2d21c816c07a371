/* The send path of a devmem-TCP kernel: SCM_DEVMEM_OFFSET sends and
 * zerocopy completion ids (send.h). */
#define _GNU_SOURCE
#include "send.h"

#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bounce.h"
#include "devmem.h"
#include "real.h"
#include "region.h"
#include "report.h"
#include "settings.h"
#include "sock.h"

#define SEND_STAGE (1u << 20)    /* bytes one devmem sendmsg moves at most */
#define SEND_PIECE (256u << 10)  /* its GPU reads, each sent as soon as it is done */

/* A send that asked for MSG_ZEROCOPY on a socket with SO_ZEROCOPY gets the
 * socket's next completion id, reported on the error queue later. */
static void zc_account(int fd, int flags, ssize_t sent)
{
	if (!(flags & MSG_ZEROCOPY) || sent <= 0)
		return;
	struct sock *s = sim_sock_get(fd);
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	if (!s->zerocopy)
		goto out;
	if (s->zc_len == s->zc_cap) {
		uint32_t cap = s->zc_cap ? 2 * s->zc_cap : 64;
		struct zc_pending *p = malloc(sizeof(*p) * cap);
		if (!p)
			goto out;
		for (uint32_t i = 0; i < s->zc_len; i++)
			p[i] = s->zc[(s->zc_head + i) % s->zc_cap];
		free(s->zc);
		s->zc = p;
		s->zc_head = 0;
		s->zc_cap = cap;
	}
	s->zc[(s->zc_head + s->zc_len++) % s->zc_cap] =
		(struct zc_pending){s->zc_next++, sim_now_ns() + sim_cfg.tx_delay_ns};
out:
	pthread_mutex_unlock(&s->lock);
}

const struct cmsghdr *sim_devmem_cmsg(const struct msghdr *m)
{
	if (!m->msg_control)
		return NULL;
	for (const struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)m); c;
	     c = CMSG_NXTHDR((struct msghdr *)m, (struct cmsghdr *)c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == DEVMEM_SCM_OFFSET)
			return c;
	return NULL;
}

/* A devmem send: up to SEND_STAGE bytes read from the GPU in pieces on a
 * lane of its own, each piece written to the socket as soon as its copy is
 * done while the next ones are still being read.  No lock is held across
 * the copies or the socket writes. */
ssize_t sim_devmem_send(int fd, const struct msghdr *m, const struct cmsghdr *c, int flags)
{
	int v[2];
	size_t len = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		len += m->msg_iov[i].iov_len;
	if (c->cmsg_len < CMSG_LEN(sizeof(v)))
		return sim_violation(EINVAL, "devmem sendmsg on fd %d: SCM_DEVMEM_OFFSET of %zu bytes", fd,
				 (size_t)c->cmsg_len);
	memcpy(v, CMSG_DATA(c), sizeof(v));
	struct region r;
	if (sim_region_find(v[0], &r) || !r.pages) {
		/* What the kernel answers; TCPX's socket threads do this after
		 * deregMr closed the file under a send still queued. */
		errno = EBADF;
		return -1;
	}
	if (v[1] < 0 || (size_t)v[1] > r.size || len > r.size - (size_t)v[1])
		return sim_violation(EFAULT, "devmem sendmsg on fd %d: [%d, +%zu) lies outside the %zu "
					 "registered bytes", fd, v[1], len, r.size);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (len == 0 || poll(&p, 1, 0) != 1) {
		errno = len ? EAGAIN : EINVAL;
		return -1;
	}
	if (len > SEND_STAGE)
		len = SEND_STAGE;
	uint64_t src = r.base + (uint64_t)v[1];
	if (!sim_cfg.on_gpu) {
		/* Host mode: registered host memory goes to the socket as is. */
		sim_test_hook(fd, 1);
		ssize_t k = REAL(send)(fd, (const void *)(uintptr_t)src, len,
				       (flags & ~MSG_ZEROCOPY) | MSG_DONTWAIT);
		if (k > 0) {
			STAT_ADD(devmem_sends, 1);
			zc_account(fd, flags, k);
		}
		return k;
	}
	int ok;
	void *ctx = sim_mem_ctx(src, sim_cfg.on_gpu, &ok);
	struct sim_lane *l = ok ? sim_lane_get(ctx) : NULL;
	if (!l) {
		errno = ok ? ENOMEM : EFAULT;
		return -1;
	}
	size_t pieces = (len + SEND_PIECE - 1) / SEND_PIECE, queued = 0, sent = 0;
	ssize_t k = 0;
	int err = 0;
	queued = sim_mem_reads(l, l->buf, src, len, SEND_PIECE);
	if (queued > pieces)
		queued = pieces;
	for (size_t i = 0; i < queued; i++) {
		size_t at = i * SEND_PIECE, n = len - at < SEND_PIECE ? len - at : SEND_PIECE;
		if (sim_mem_wait(l, (int)i)) {
			k = -1, err = EFAULT;
			break;
		}
		if (i == 0)
			sim_test_hook(fd, 1);
		k = REAL(send)(fd, l->buf + at, n, (flags & ~MSG_ZEROCOPY) | MSG_DONTWAIT);
		if (k <= 0) {
			err = errno;
			break;
		}
		sent += (size_t)k;
		if ((size_t)k < n)
			break;
	}
	if (queued == 0)
		k = -1, err = EFAULT;
	sim_lane_sync(l); /* the reads still queued, before the lane serves another call */
	sim_lane_put(l);
	if (sent == 0) {
		errno = err;
		return k;
	}
	STAT_ADD(devmem_sends, 1);
	zc_account(fd, flags, (ssize_t)sent);
	return (ssize_t)sent;
}

ssize_t sim_errqueue(int fd, struct msghdr *m, int flags)
{
	struct sock *s = sim_sock_slot(fd, 0);
	if (s)
		pthread_mutex_lock(&s->lock);
	if (!s || !s->live || !s->zerocopy) {
		if (s)
			pthread_mutex_unlock(&s->lock);
		return REAL(recvmsg)(fd, m, flags);
	}
	uint64_t now = sim_now_ns();
	uint32_t n = 0;
	while (n < s->zc_len && s->zc[(s->zc_head + n) % s->zc_cap].due_ns <= now)
		n++;
	size_t need = CMSG_SPACE(sizeof(struct sock_extended_err));
	if (n == 0 || !m->msg_control || m->msg_controllen < need) {
		pthread_mutex_unlock(&s->lock);
		errno = EAGAIN;
		return -1;
	}
	uint32_t lo = s->zc[s->zc_head].id, hi = s->zc[(s->zc_head + n - 1) % s->zc_cap].id;
	s->zc_head = (s->zc_head + n) % s->zc_cap;
	s->zc_len -= n;
	int family = s->family;
	pthread_mutex_unlock(&s->lock);
	STAT_ADD(completions, n);
	struct sock_extended_err e = {.ee_errno = 0, .ee_origin = SO_EE_ORIGIN_ZEROCOPY,
				      .ee_code = SO_EE_CODE_ZEROCOPY_COPIED, .ee_info = lo,
				      .ee_data = hi};
	struct cmsghdr *c = CMSG_FIRSTHDR(m);
	c->cmsg_level = family == AF_INET6 ? SOL_IPV6 : SOL_IP;
	c->cmsg_type = family == AF_INET6 ? IPV6_RECVERR : IP_RECVERR;
	c->cmsg_len = CMSG_LEN(sizeof(e));
	memcpy(CMSG_DATA(c), &e, sizeof(e));
	m->msg_controllen = need;
	m->msg_flags = MSG_ERRQUEUE;
	return 0;
}

/* The simulator owns the socket's completion ids, so that host and devmem
 * sends share one sequence as they do in the kernel. */
ssize_t sim_zc_sent(int fd, int flags, ssize_t sent)
{
	int e = errno;
	zc_account(fd, flags, sent);
	errno = e;
	return sent;
}

void sim_zc_enable(int fd, int on)
{
	struct sock *s = sim_sock_get(fd);
	if (s) {
		pthread_mutex_lock(&s->lock);
		s->zerocopy = on;
		pthread_mutex_unlock(&s->lock);
	}
}
