/* The RxDM thread: the unix sockets a TCPX plugin talks to (rxdm.h). */
#define _GNU_SOURCE
#include "rxdm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "devmem.h"

#define MAX_GPUS 16
#define MAX_LISTENERS (2 * MAX_GPUS + 3)
#define MAX_CONNS 64

enum service { SVC_GPU_FD, SVC_GPU_METADATA, SVC_RULE_INSTALL, SVC_RULE_UNINSTALL, SVC_REGISTRY };

struct listener {
	int fd;
	enum service svc;
	char gpu[32];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

struct conn {
	int fd;                 /* -1: slot free */
	const struct listener *from;
	size_t have, want;      /* bytes of the current length or payload */
	int in_payload;
	uint8_t buf[2 + 65535];
};

struct sim_rxdm {
	struct rxdm_ops ops;
	struct listener ls[MAX_LISTENERS];
	int nls;
	struct conn conns[MAX_CONNS];
	int stop_pipe[2];
	pthread_t thread;
};

static int listen_at(struct listener *l, const char *prefix, const char *name,
		     char *err, size_t errlen)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int n = snprintf(l->path, sizeof(l->path), "%s/%s", prefix, name);
	if (n < 0 || (size_t)n >= sizeof(l->path)) {
		snprintf(err, errlen, "socket path %s/%s is too long", prefix, name);
		return -ENAMETOOLONG;
	}
	memcpy(a.sun_path, l->path, (size_t)n + 1);
	unlink(l->path);
	l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&a, sizeof(a)) || listen(l->fd, 64)) {
		int e = errno;
		snprintf(err, errlen, "listen on %s: %s", l->path, strerror(e));
		if (l->fd >= 0)
			close(l->fd);
		l->fd = -1;
		l->path[0] = '\0';
		return -e;
	}
	return 0;
}

static int send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

/* One UnixSocketProto{raw_bytes}, framed by its big-endian length. */
static int reply_raw(int fd, const void *data, size_t len)
{
	uint8_t msg[2 + 1024];
	size_t n = rxdm_put_raw(msg + 2, sizeof(msg) - 2, data, len);
	if (!n)
		return -1;
	msg[0] = (uint8_t)(n >> 8);
	msg[1] = (uint8_t)n;
	return send_all(fd, msg, n + 2);
}

static int reply_text(int fd, const char *text)
{
	return reply_raw(fd, text, strlen(text));
}

/* A file descriptor travels alone, with one dummy byte. */
static int reply_fd(int fd, int give)
{
	char dummy = 0, ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {&dummy, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &give, sizeof(int));
	return sendmsg(fd, &m, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* Answer one request; -1 closes the connection. */
static int serve(struct sim_rxdm *d, struct conn *c, const uint8_t *payload, size_t len)
{
	const struct listener *l = c->from;
	struct rxdm_request req;
	struct sim_bounce *b;
	char err[256] = "";
	if (rxdm_parse(payload, len, &req)) {
		reply_text(c->fd, "error: not a UnixSocketProto");
		return -1;
	}
	switch (l->svc) {
	case SVC_GPU_FD:
	case SVC_GPU_METADATA:
		if (req.kind != RXDM_REQ_RAW) {
			reply_text(c->fd, "error: expected the GPU's PCI address");
			return -1;
		}
		if (d->ops.buffer(l->gpu, &b, err, sizeof(err))) {
			char text[300];
			snprintf(text, sizeof(text), "error: %s", err);
			return reply_text(c->fd, text);
		}
		if (l->svc == SVC_GPU_FD) {
			int give = dup(b->fd);
			int rc = give >= 0 ? reply_fd(c->fd, give) : -1;
			if (give >= 0)
				close(give);
			return rc;
		} else {
			struct rxdm_gpu_metadata md = {.fd = b->fd, .size = b->size, .align = b->align};
			return reply_raw(c->fd, &md, sizeof(md));
		}
	case SVC_RULE_INSTALL:
	case SVC_RULE_UNINSTALL:
		if (req.kind != RXDM_REQ_RULE) {
			reply_text(c->fd, "error: expected a flow steering rule");
			return -1;
		}
		if (d->ops.rule(&req.rule, l->svc == SVC_RULE_INSTALL, err, sizeof(err))) {
			char text[300];
			snprintf(text, sizeof(text), "error: %s", err);
			return reply_text(c->fd, text);
		}
		return reply_text(c->fd, RXDM_OK);
	case SVC_REGISTRY:
		return reply_text(c->fd, RXDM_OK);
	}
	return -1;
}

static void drop(struct conn *c)
{
	close(c->fd);
	c->fd = -1;
}

/* Read what is there; serve each whole request. */
static void on_readable(struct sim_rxdm *d, struct conn *c)
{
	ssize_t k = recv(c->fd, c->buf + c->have, c->want - c->have, MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k <= 0) {
		drop(c);
		return;
	}
	c->have += (size_t)k;
	if (c->have < c->want)
		return;
	if (!c->in_payload) {
		size_t len = (size_t)c->buf[0] << 8 | c->buf[1];
		c->in_payload = 1;
		c->want = 2 + len;
		if (len)
			return;
	}
	int rc = serve(d, c, c->buf + 2, c->want - 2);
	c->in_payload = 0;
	c->have = 0;
	c->want = 2;
	if (rc)
		drop(c);
}

static void *run(void *arg)
{
	struct sim_rxdm *d = arg;
	struct pollfd p[1 + MAX_LISTENERS + MAX_CONNS];
	for (;;) {
		int n = 0;
		p[n++] = (struct pollfd){.fd = d->stop_pipe[0], .events = POLLIN};
		for (int i = 0; i < d->nls; i++)
			p[n++] = (struct pollfd){.fd = d->ls[i].fd, .events = POLLIN};
		for (int i = 0; i < MAX_CONNS; i++)
			p[n++] = (struct pollfd){.fd = d->conns[i].fd, .events = POLLIN};
		if (poll(p, (nfds_t)n, -1) < 0 && errno != EINTR)
			return NULL;
		if (p[0].revents)
			return NULL;
		for (int i = 0; i < d->nls; i++) {
			if (!p[1 + i].revents)
				continue;
			int fd = accept4(d->ls[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			struct conn *c = NULL;
			for (int j = 0; j < MAX_CONNS && !c; j++)
				if (d->conns[j].fd < 0)
					c = &d->conns[j];
			if (!c) {
				close(fd);
				continue;
			}
			c->fd = fd;
			c->from = &d->ls[i];
			c->have = 0;
			c->want = 2;
			c->in_payload = 0;
		}
		for (int i = 0; i < MAX_CONNS; i++)
			if (p[1 + d->nls + i].revents && d->conns[i].fd >= 0)
				on_readable(d, &d->conns[i]);
	}
}

int rxdm_start(const char *prefix, char (*gpus)[32], int ngpus, const struct rxdm_ops *ops,
	       struct sim_rxdm **out, char *err, size_t errlen)
{
	struct sim_rxdm *d = calloc(1, sizeof(*d));
	static const struct {
		enum service svc;
		const char *name;
	} shared[] = {{SVC_RULE_INSTALL, RXDM_RULE_INSTALL},
		      {SVC_RULE_UNINSTALL, RXDM_RULE_UNINSTALL},
		      {SVC_REGISTRY, RXDM_APP_REGISTRY}};
	int rc = 0;
	if (!d)
		return -ENOMEM;
	if (ngpus > MAX_GPUS)
		ngpus = MAX_GPUS;
	d->ops = *ops;
	d->stop_pipe[0] = d->stop_pipe[1] = -1;
	for (int i = 0; i < MAX_CONNS; i++)
		d->conns[i].fd = -1;
	for (int g = 0; g < ngpus && !rc; g++)
		for (int k = 0; k < 2 && !rc; k++) {
			struct listener *l = &d->ls[d->nls];
			char name[64];
			snprintf(name, sizeof(name), "%s%s", k ? RXDM_GPU_METADATA : RXDM_GPU_FD, gpus[g]);
			l->svc = k ? SVC_GPU_METADATA : SVC_GPU_FD;
			snprintf(l->gpu, sizeof(l->gpu), "%s", gpus[g]);
			if (!(rc = listen_at(l, prefix, name, err, errlen)))
				d->nls++;
		}
	for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]) && !rc; i++) {
		struct listener *l = &d->ls[d->nls];
		l->svc = shared[i].svc;
		if (!(rc = listen_at(l, prefix, shared[i].name, err, errlen)))
			d->nls++;
	}
	if (!rc && pipe2(d->stop_pipe, O_CLOEXEC)) {
		rc = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(errno));
	}
	if (!rc && (rc = -pthread_create(&d->thread, NULL, run, d)))
		snprintf(err, errlen, "pthread_create: %s", strerror(-rc));
	if (rc) {
		d->thread = 0;
		rxdm_stop(d);
		return rc;
	}
	*out = d;
	return 0;
}

void rxdm_stop(struct sim_rxdm *d)
{
	if (!d)
		return;
	if (d->thread) {
		ssize_t k = write(d->stop_pipe[1], "x", 1);
		(void)k;
		pthread_join(d->thread, NULL);
	}
	for (int i = 0; i < d->nls; i++) {
		close(d->ls[i].fd);
		unlink(d->ls[i].path);
	}
	for (int i = 0; i < MAX_CONNS; i++)
		if (d->conns[i].fd >= 0)
			close(d->conns[i].fd);
	if (d->stop_pipe[0] >= 0) {
		close(d->stop_pipe[0]);
		close(d->stop_pipe[1]);
	}
	free(d);
}
