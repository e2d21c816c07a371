/*
 * listen / connect / accept.  Both connect and accept are asynchronous like
 * TCPX's: they return success with a NULL comm until every socket is up, and
 * deliberately for the first calls even when the peer is ready, so callers
 * must loop.  Connect records its progress in the caller's handle, which
 * makes every handle single-use, but as a slot of its own pending-connect
 * table and a random key (emu_pending.c), never as a pointer: handle bytes
 * come from the peer.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "handle_layout.h"
#include "emu.h"

_Static_assert(sizeof(struct emu_handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle fits");
_Static_assert(offsetof(struct emu_handle, stage) == TP_EMU_HANDLE_STAGE_OFF &&
		       sizeof(((struct emu_handle *)0)->stage) == TP_EMU_HANDLE_STAGE_LEN,
	       "stage where src/abi/handle_layout.h says");
_Static_assert(offsetof(struct emu_handle, calls) == TP_EMU_HANDLE_PROGRESS_OFF &&
		       sizeof(struct emu_handle) == TP_EMU_HANDLE_PROGRESS_OFF +
							TP_EMU_HANDLE_PROGRESS_LEN,
	       "calls, slot and key where src/abi/handle_layout.h says");

/* Calls that return NULL even when everything is ready. */
#define EMU_MIN_CALLS 2

ncclResult_t tp__emu_listen(int dev, void *handle, void **listen_comm)
{
	struct emu_handle *h = handle;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct emu_listen *l;

	if (dev < 0 || dev >= tp__emu_ndev()) {
		EMU_WARN("listen: no device %d", dev);
		return ncclInvalidArgument;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return ncclSystemError;
	tp__emu_config_load(&l->cfg);
	tp__emu_pending_reap(l->cfg.connect_abandon_ms);
	if (tp__emu_addr_resolve(&sa.sin_addr))
		goto free_listen;
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		goto warn;
	if (bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(l->fd, 64) ||
	    getsockname(l->fd, (struct sockaddr *)&sa, &len))
		goto close_fd;
	l->nonce = tp__emu_nonce();
	memset(h, 0, NCCL_NET_HANDLE_MAXSIZE);
	h->magic = EMU_MAGIC;
	h->stage = EMU_STAGE_FRESH;
	h->nonce = l->nonce;
	h->addr = sa;
	*listen_comm = l;
	return ncclSuccess;

close_fd:
	close(l->fd);
warn:
	EMU_WARN("listen on %s failed: %s", inet_ntoa(sa.sin_addr), strerror(errno));
free_listen:
	free(l);
	return ncclSystemError;
}

static ncclResult_t connect_start(struct emu_handle *h)
{
	struct emu_config cfg;
	struct emu_comm *c;

	tp__emu_config_load(&cfg);
	tp__emu_pending_reap(cfg.connect_abandon_ms);
	c = tp__emu_comm_alloc(EMU_SEND, &cfg);
	if (!c)
		return ncclSystemError;
	for (int i = 0; i < c->nsocks; i++) {
		c->fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->fds[i] < 0)
			goto fail;
		if (connect(c->fds[i], (struct sockaddr *)&h->addr, sizeof(h->addr)) &&
		    errno != EINPROGRESS)
			goto fail;
	}
	if (tp__emu_pending_add(c, &h->slot, &h->key)) {
		EMU_WARN("connect: %d connects already in progress in this process",
			 EMU_MAX_PENDING);
		tp__emu_comm_free(c);
		return ncclSystemError;
	}
	h->stage = EMU_STAGE_CONNECTING;
	h->calls = 0;
	tp__emu_pending_put(h->slot);
	return ncclSuccess;

fail:
	EMU_WARN("connect to %s:%u failed: %s", inet_ntoa(h->addr.sin_addr),
		 ntohs(h->addr.sin_port), strerror(errno));
	tp__emu_comm_free(c);
	return ncclSystemError;
}

/* Advances socket i: connection completion, then its hello. <0 on error. */
static int connect_step(struct emu_comm *c, const struct emu_handle *h, int i)
{
	int fd = c->fds[i];

	if (!c->connected[i]) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int err = 0;
		socklen_t len = sizeof(err);

		if (poll(&p, 1, 0) <= 0)
			return 0;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
			errno = err ? err : errno;
			return -1;
		}
		c->connected[i] = 1;
	}
	if (c->hello_sent[i] < (int)sizeof(struct emu_hello)) {
		struct emu_hello hello = {
			.magic = EMU_MAGIC, .idx = (uint32_t)i, .nonce = h->nonce,
			.nsocks = (uint32_t)c->nsocks, .nthreads = (uint32_t)c->nthreads,
		};
		ssize_t r = send(fd, (char *)&hello + c->hello_sent[i],
				 sizeof(hello) - (size_t)c->hello_sent[i], MSG_NOSIGNAL);

		if (r < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->hello_sent[i] += (int)r;
	}
	return c->hello_sent[i] == (int)sizeof(struct emu_hello);
}

ncclResult_t tp__emu_connect(int dev, void *handle, void **send_comm,
			     ncclNetDeviceHandle_v7_t **dev_handle)
{
	struct emu_handle *h = handle;
	struct emu_comm *c = NULL;
	int ready = 0, rc;

	*send_comm = NULL;
	if (dev < 0 || dev >= tp__emu_ndev() || h->magic != EMU_MAGIC) {
		EMU_WARN("connect: invalid device %d or handle", dev);
		return ncclInvalidArgument;
	}
	if (h->stage == EMU_STAGE_DONE) {
		EMU_WARN("connect: handle already used for a completed connection "
			 "(connect from a private copy of a fresh handle)");
		return ncclInvalidUsage;
	}
	if (h->stage == EMU_STAGE_FRESH) {
		if (h->calls || h->slot || h->key) {
			EMU_WARN("connect: fresh handle with connect progress set (forged or "
				 "corrupt)");
			return ncclInvalidArgument;
		}
		return connect_start(h);
	}
	if (h->stage != EMU_STAGE_CONNECTING) {
		EMU_WARN("connect: corrupt handle stage %u", h->stage);
		return ncclInvalidArgument;
	}
	rc = tp__emu_pending_take(h->slot, h->key, &c);
	if (rc == EMU_PENDING_BUSY) {
		EMU_WARN("connect: another thread is advancing this handle's connect");
		return ncclInvalidUsage;
	}
	if (rc) {
		EMU_WARN("connect: handle names no connect in progress (slot %u): stale, "
			 "abandoned, or not made by this process", h->slot);
		return ncclInvalidArgument;
	}
	h->calls++;
	for (int i = 0; i < c->nsocks; i++) {
		int r = connect_step(c, h, i);

		if (r < 0) {
			EMU_WARN("connect to %s:%u failed: %s", inet_ntoa(h->addr.sin_addr),
				 ntohs(h->addr.sin_port), strerror(errno));
			goto fail;
		}
		ready += r;
	}
	if (ready < c->nsocks || h->calls < EMU_MIN_CALLS) {
		tp__emu_pending_put(h->slot);
		return ncclSuccess;
	}
	if (tp__emu_comm_start(c))
		goto fail;
	tp__emu_pending_remove(h->slot);
	h->stage = EMU_STAGE_DONE;
	h->slot = 0;
	h->key = 0;
	*send_comm = c;
	return ncclSuccess;

fail:
	tp__emu_pending_remove(h->slot);
	tp__emu_comm_free(c);
	h->stage = EMU_STAGE_FRESH;
	h->calls = 0;
	h->slot = 0;
	h->key = 0;
	return ncclSystemError;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pend_drop(struct emu_listen *l, int i)
{
	close(l->pend[i].fd);
	l->pend[i] = l->pend[--l->npend];
}

static void accept_new(struct emu_listen *l)
{
	for (;;) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				EMU_WARN("accept failed: %s", strerror(errno));
			return;
		}
		if (l->npend == (int)(sizeof(l->pend) / sizeof(l->pend[0]))) {
			EMU_WARN("accept: too many half-open connections, dropping one");
			close(fd);
			continue;
		}
		memset(&l->pend[l->npend], 0, sizeof(l->pend[0]));
		l->pend[l->npend++].fd = fd;
	}
}

static int hello_valid(const struct emu_listen *l, const struct emu_hello *m)
{
	return m->magic == EMU_MAGIC && m->nonce == l->nonce && m->nsocks >= 1 &&
	       m->nsocks <= EMU_MAX_SOCKS && m->nthreads >= 1 && m->nthreads <= m->nsocks &&
	       m->idx < m->nsocks;
}

/* Reads hellos; files each valid socket into the comm being assembled. */
static ncclResult_t accept_hellos(struct emu_listen *l)
{
	for (int i = 0; i < l->npend;) {
		struct emu_hello *m = &l->pend[i].hello;
		ssize_t r = recv(l->pend[i].fd, (char *)m + l->pend[i].got,
				 sizeof(*m) - l->pend[i].got, 0);

		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			i++;
			continue;
		}
		if (r <= 0) {
			pend_drop(l, i);
			continue;
		}
		l->pend[i].got += (size_t)r;
		if (l->pend[i].got < sizeof(*m))
			continue;
		if (!hello_valid(l, m) || (l->comm && ((uint32_t)l->comm->nsocks != m->nsocks ||
						       l->comm->fds[m->idx] >= 0))) {
			EMU_WARN("accept: dropping a connection with a bad hello");
			pend_drop(l, i);
			continue;
		}
		if (!l->comm) {
			struct emu_config cfg = l->cfg;

			cfg.nsocks = (int)m->nsocks;
			cfg.nthreads = (int)m->nthreads;
			l->comm = tp__emu_comm_alloc(EMU_RECV, &cfg);
			if (!l->comm)
				return ncclSystemError;
		}
		l->comm->fds[m->idx] = l->pend[i].fd;
		l->pend[i] = l->pend[--l->npend];
	}
	return ncclSuccess;
}

static ncclResult_t accept_finish(struct emu_listen *l, ncclNetDeviceHandle_v7_t *dh)
{
	struct emu_comm *c = l->comm;

	if (c->cfg.bounce != EMU_BOUNCE_OFF) {
		if (tp__emu_pool_create(&c->pool, c->cfg.bounce, c->cfg.pages,
					l->nonce ^ (uintptr_t)c, c->cfg.null_bounce))
			return ncclSystemError;
		dh->netDeviceType = NCCL_NET_DEVICE_UNPACK;
		dh->netDeviceVersion = NCCL_NET_DEVICE_UNPACK_VERSION;
		dh->handle = c->pool.uh;
		dh->size = sizeof(struct tp_unpack_handle);
		dh->needsProxyProgress = 1;
	}
	if (tp__emu_comm_start(c))
		return ncclSystemError;
	return ncclSuccess;
}

ncclResult_t tp__emu_accept(void *listen_comm, void **recv_comm,
			    ncclNetDeviceHandle_v7_t **dev_handle)
{
	struct emu_listen *l = listen_comm;
	ncclResult_t ret;

	*recv_comm = NULL;
	if (l->used) {
		EMU_WARN("accept: this listen comm already served its one connection");
		return ncclInvalidUsage;
	}
	if (l->cfg.bounce != EMU_BOUNCE_OFF && (!dev_handle || !*dev_handle)) {
		EMU_WARN("accept needs caller-owned ncclNetDeviceHandle storage");
		return ncclInvalidArgument;
	}
	l->calls++;
	accept_new(l);
	ret = accept_hellos(l);
	if (ret != ncclSuccess)
		return ret;
	if (!l->comm || l->calls < EMU_MIN_CALLS)
		return ncclSuccess;
	for (int i = 0; i < l->comm->nsocks; i++)
		if (l->comm->fds[i] < 0)
			return ncclSuccess;
	/* TCPX programs flow steering for the new sockets in a thread of its
	 * own and sleeps meanwhile; accept returns the comm only after that. */
	if (!l->ready_ns)
		l->ready_ns = now_ns() + (uint64_t)l->cfg.accept_wait_us * 1000;
	if (now_ns() < l->ready_ns)
		return ncclSuccess;
	ret = accept_finish(l, dev_handle ? *dev_handle : NULL);
	if (ret != ncclSuccess) {
		tp__emu_comm_free(l->comm);
		l->comm = NULL;
		return ret;
	}
	l->used = 1;
	*recv_comm = l->comm;
	l->comm = NULL;
	return ncclSuccess;
}

ncclResult_t tp__emu_close_listen(void *listen_comm)
{
	struct emu_listen *l = listen_comm;

	if (!l)
		return ncclSuccess;
	while (l->npend)
		pend_drop(l, 0);
	tp__emu_comm_free(l->comm);
	close(l->fd);
	free(l);
	return ncclSuccess;
}
