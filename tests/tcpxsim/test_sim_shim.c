/* The simulator as a TCPX plugin meets it: the RxDM's sockets, devmem
 * receives with their fragments and tokens, page returns, devmem sends
 * with zerocopy completions, and each fault setting.  Host bounce mode
 * (no GPU needed); linked to libtcpxsim.so, so its socket calls come first.
 *
 *   test_sim_shim basic|starve|linear|mss|strict|delay|parallel|pool
 *   (settings in the environment) */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devmem.h"
#include "pb.h"
#include "tcpxsim.h"

int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size, int type,
				  unsigned long long flags);

#define GPU "0000:04:00.0"
#define MAX_FRAGS 2048

static const char *prefix(void)
{
	const char *p = getenv("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX");
	assert_non_null(p); /* the simulator sets it */
	return p;
}

/* One request to an RxDM socket, as the plugin's client frames it; the
 * answer's payload, or a descriptor in *fd. */
static size_t rxdm_call(const char *service, const uint8_t *req, size_t len, uint8_t *ans,
			size_t cap, int *fd)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/%s", prefix(), service);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(s >= 0);
	assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len};
	assert_int_equal(send(s, hdr, 2, 0), 2);
	assert_int_equal(send(s, req, len, 0), (ssize_t)len);
	char ctl[CMSG_SPACE(sizeof(int))];
	uint8_t first[2];
	struct iovec iov = {first, 2};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	ssize_t k = recvmsg(s, &m, 0);
	assert_true(k >= 1);
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_type == SCM_RIGHTS) {
		memcpy(fd, CMSG_DATA(c), sizeof(int));
		close(s);
		return 0;
	}
	if (k == 1)
		assert_int_equal(recv(s, first + 1, 1, MSG_WAITALL), 1);
	size_t n = (size_t)first[0] << 8 | first[1];
	assert_true(n <= cap);
	assert_int_equal(recv(s, ans, n, MSG_WAITALL), (ssize_t)n);
	close(s);
	return n;
}

static void rxdm_rule(const char *service, int from, int to)
{
	struct sockaddr_in pa, ma;
	socklen_t l1 = sizeof(pa), l2 = sizeof(ma);
	struct rxdm_rule r = {.flow_type = 1, .queue_id = -1};
	uint8_t req[512], ans[64];
	struct rxdm_request parsed;
	int fd = -1;
	/* `to` receives what `from` sends: the rule names (peer -> us). */
	assert_int_equal(getsockname(from, (struct sockaddr *)&pa, &l1), 0);
	assert_int_equal(getsockname(to, (struct sockaddr *)&ma, &l2), 0);
	inet_ntop(AF_INET, &pa.sin_addr, r.src_ip, sizeof(r.src_ip));
	inet_ntop(AF_INET, &ma.sin_addr, r.dst_ip, sizeof(r.dst_ip));
	r.src_port = ntohs(pa.sin_port);
	r.dst_port = ntohs(ma.sin_port);
	snprintf(r.gpu, sizeof(r.gpu), GPU);
	size_t n = rxdm_put_rule(req, sizeof(req), &r);
	assert_true(n > 0);
	size_t a = rxdm_call(service, req, n, ans, sizeof(ans), &fd);
	assert_int_equal(rxdm_parse(ans, a, &parsed), 0);
	assert_int_equal(parsed.kind, RXDM_REQ_RAW);
	assert_int_equal(parsed.raw_len, 3);
	assert_memory_equal(parsed.raw, RXDM_OK, 3);
}

struct bounce_map {
	uint8_t *p;
	size_t size;
};

static struct bounce_map import_bounce(void)
{
	uint8_t req[64], ans[256];
	int fd = -1;
	struct rxdm_request parsed;
	struct rxdm_gpu_metadata md;
	size_t n = rxdm_put_raw(req, sizeof(req), GPU, strlen(GPU));
	assert_int_equal(rxdm_call(RXDM_GPU_FD GPU, req, n, ans, sizeof(ans), &fd), 0);
	assert_true(fd >= 0);
	size_t a = rxdm_call(RXDM_GPU_METADATA GPU, req, n, ans, sizeof(ans), &fd);
	assert_int_equal(rxdm_parse(ans, a, &parsed), 0);
	assert_int_equal(parsed.raw_len, sizeof(md));
	memcpy(&md, parsed.raw, sizeof(md));
	assert_true(md.size >= DEVMEM_PAGE && md.align >= DEVMEM_PAGE);
	void *p = mmap(NULL, md.size, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	close(fd);
	return (struct bounce_map){p, md.size};
}

/* A connected loopback pair: *snd -> *rcv. */
static void tcp_pair(int *snd, int *rcv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(ls, 1), 0);
	assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &l), 0);
	*snd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(*snd, (struct sockaddr *)&a, sizeof(a)), 0);
	*rcv = accept(ls, NULL, NULL);
	assert_true(*rcv >= 0);
	close(ls);
}

/* A pair whose flow a rule steers into the bounce buffer. */
static void steered_pair(int *snd, int *rcv)
{
	tcp_pair(snd, rcv);
	rxdm_rule(RXDM_RULE_INSTALL, *snd, *rcv);
}

static void fill_random(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

static int wait_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 10000) == 1;
}

struct got {
	size_t bytes, frags, linear;
	uint32_t tokens[1 << 16];
	size_t ntokens;
	int in_order;
	uint32_t last_off;
};

/* One devmem receive of at most `want` bytes, its fragments copied out of
 * the bounce buffer into `out` and checked against the plugin's rules. */
static ssize_t devmem_recv(int fd, struct bounce_map *b, uint8_t *out, size_t want,
			   struct got *g)
{
	static __thread char ctl[MAX_FRAGS * CMSG_SPACE(sizeof(struct devmem_frag))];
	uint8_t *lin = malloc(want);
	struct iovec iov = {lin, want};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	ssize_t k = recvmsg(fd, &m, DEVMEM_MSG_SOCK_DEVMEM | MSG_DONTWAIT);
	if (k <= 0) {
		free(lin);
		return k;
	}
	assert_int_equal(m.msg_flags & MSG_CTRUNC, 0);
	size_t sum = 0, lin_off = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		struct devmem_frag f;
		assert_int_equal(c->cmsg_level, SOL_SOCKET);
		memcpy(&f, CMSG_DATA(c), sizeof(f));
		if (c->cmsg_type == DEVMEM_SCM_HEADER) {
			memcpy(out + sum, lin + lin_off, f.frag_size);
			lin_off += f.frag_size;
			g->linear += f.frag_size;
		} else {
			assert_int_equal(c->cmsg_type, DEVMEM_SCM_OFFSET);
			assert_true(f.frag_size > 0 && f.frag_size <= DEVMEM_PAGE);
			/* within one page: a read that stopped inside a page
			 * continues it */
			assert_true(f.frag_offset % DEVMEM_PAGE + f.frag_size <= DEVMEM_PAGE);
			assert_true(f.frag_offset + f.frag_size <= b->size);
			memcpy(out + sum, b->p + f.frag_offset, f.frag_size);
			if (g->frags && f.frag_offset != g->last_off + DEVMEM_PAGE)
				g->in_order = 0;
			g->last_off = f.frag_offset;
			g->tokens[g->ntokens++] = f.frag_token;
			g->frags++;
		}
		sum += f.frag_size;
	}
	assert_int_equal(sum, (size_t)k); /* the plugin exits on a mismatch */
	g->bytes += (size_t)k;
	free(lin);
	return k;
}

/* Return tokens the way the plugin does: runs of consecutive tokens as one
 * range. */
static int return_tokens(int fd, const uint32_t *t, size_t n)
{
	struct devmem_token_range r[1 << 12];
	size_t nr = 0;
	for (size_t i = 0; i < n; i++) {
		if (nr && r[nr - 1].start + r[nr - 1].count == t[i]) {
			r[nr - 1].count++;
			continue;
		}
		assert_true(nr < sizeof(r) / sizeof(r[0]));
		r[nr++] = (struct devmem_token_range){t[i], 1};
	}
	return setsockopt(fd, SOL_SOCKET, DEVMEM_SO_DONTNEED, r, (socklen_t)(nr * sizeof(r[0])));
}

static struct tcpxsim_stats stats(void)
{
	struct tcpxsim_stats s;
	tcpxsim_stats_get(&s);
	return s;
}

/* Receive all of `len` bytes into `out` over devmem, returning tokens as
 * we go when `give_back` (else they pile up). */
static void receive_all(int fd, struct bounce_map *b, uint8_t *out, size_t len, struct got *g,
			int give_back)
{
	while (g->bytes < len) {
		size_t before = g->ntokens;
		ssize_t k = devmem_recv(fd, b, out + g->bytes, len - g->bytes > (128u << 10) ?
								   128u << 10 : len - g->bytes, g);
		if (k < 0 && errno == EAGAIN) {
			assert_true(wait_readable(fd));
			continue;
		}
		assert_true(k > 0);
		if (give_back) {
			assert_int_equal(return_tokens(fd, g->tokens + before, g->ntokens - before), 0);
			g->ntokens = before;
		}
	}
}

static void run_basic(void)
{
	struct bounce_map b = import_bounce();
	int snd, rcv;
	const size_t len = 1u << 20;
	uint8_t *src = malloc(len), *dst = malloc(len);
	struct got *g = calloc(1, sizeof(*g));
	fill_random(src, len, 1);
	tcp_pair(&snd, &rcv);

	/* Before a rule steers the flow, its bytes arrive as ordinary data. */
	{
		char plain[16] = {0}, ctl[256];
		struct iovec iov = {plain, sizeof(plain)};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				   .msg_controllen = sizeof(ctl)};
		assert_int_equal(send(snd, "unsteered", 9, 0), 9);
		assert_true(wait_readable(rcv));
		assert_int_equal(recvmsg(rcv, &m, DEVMEM_MSG_SOCK_DEVMEM | MSG_DONTWAIT), 9);
		assert_int_equal(m.msg_controllen, 0);
		assert_memory_equal(plain, "unsteered", 9);
		assert_true(stats().unsteered_recvs >= 1);
	}

	rxdm_rule(RXDM_RULE_INSTALL, snd, rcv);
	assert_int_equal(stats().rules, 1);

	/* Steered: a plain recv() of queued bytes fails (they are in device
	 * pages); a devmem receive gets them. */
	{
		char plain[8];
		assert_int_equal(send(snd, "steer", 5, 0), 5);
		assert_true(wait_readable(rcv));
		assert_int_equal(recv(rcv, plain, sizeof(plain), MSG_DONTWAIT), -1);
		assert_int_equal(errno, EFAULT);
		struct iovec iov = {plain, sizeof(plain)};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		assert_int_equal(recvmsg(rcv, &m, MSG_DONTWAIT), -1);
		assert_int_equal(errno, EFAULT);
		receive_all(rcv, &b, dst, 5, g, 1);
		assert_memory_equal(dst, "steer", 5);
		memset(g, 0, sizeof(*g));
	}
	g->in_order = 1;
	assert_int_equal(send(snd, src, len, 0), (ssize_t)len);
	receive_all(rcv, &b, dst, len, g, 0);
	assert_memory_equal(dst, src, len);
	assert_false(g->in_order); /* scattered over the pool */
	/* 8192-byte packets of two pages each, a packet cut short where a
	 * read ended: at least one fragment per page of data */
	assert_true(g->frags >= len / DEVMEM_PAGE);
	assert_int_equal(stats().tokens_held, g->ntokens);

	/* Return them; their pages are poisoned. */
	uint32_t some = g->tokens[0];
	uint64_t returned = stats().tokens_returned;
	assert_int_equal(return_tokens(rcv, g->tokens, g->ntokens), 0);
	assert_int_equal(stats().tokens_held, 0);
	assert_int_equal(stats().tokens_returned, returned + g->ntokens);
	/* A second return of a token is refused (TCPXSIM_STRICT=0 here). */
	uint64_t v = stats().violations;
	assert_int_equal(return_tokens(rcv, &some, 1), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(stats().violations, v + 1);
	/* ... as is a token of another socket, or a malformed array */
	assert_int_equal(return_tokens(snd, &some, 1), -1);
	assert_int_equal(setsockopt(rcv, SOL_SOCKET, DEVMEM_SO_DONTNEED, &some, 3), -1);

	/* Poisoned pages: every returned fragment's page reads 0x5a. */
	{
		size_t poisoned = 0;
		for (size_t off = 0; off < b.size; off += DEVMEM_PAGE)
			if (b.p[off] == 0x5a && b.p[off + DEVMEM_PAGE - 1] == 0x5a)
				poisoned++;
		assert_true(poisoned >= len / DEVMEM_PAGE);
	}

	/* Send: "GPU" memory (host memory here) registered as a dma-buf. */
	{
		int dmabuf = -1, one = 1;
		uint8_t *reg = malloc(len);
		fill_random(reg, len, 2);
		assert_int_equal(cuMemGetHandleForAddressRange(&dmabuf, (uintptr_t)reg, len, 1, 0), 0);
		assert_true(dmabuf >= 0);
		struct devmem_create_pages info = {.dma_buf_fd = dmabuf};
		int pages = ioctl(dmabuf, DEVMEM_DMA_BUF_CREATE_PAGES, &info);
		assert_true(pages >= 0);
		assert_int_equal(setsockopt(snd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)), 0);

		int v2[2] = {pages, 4096 + 123};
		/* The iovec gives only the length, but a real buffer backs it
		 * (TCPX passes its host staging buffer; sanitizers read it). */
		static char unused[65536];
		char ctl[CMSG_SPACE(sizeof(v2))];
		struct iovec iov = {unused, 65536};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				   .msg_controllen = sizeof(ctl)};
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = DEVMEM_SCM_OFFSET;
		c->cmsg_len = CMSG_LEN(sizeof(v2));
		memcpy(CMSG_DATA(c), v2, sizeof(v2));
		size_t sent = 0;
		int calls = 0;
		while (sent < 65536) {
			iov.iov_len = 65536 - sent;
			v2[1] = 4096 + 123 + (int)sent;
			memcpy(CMSG_DATA(c), v2, sizeof(v2));
			ssize_t k = sendmsg(snd, &m, MSG_ZEROCOPY | MSG_DONTWAIT);
			assert_true(k > 0 || errno == EAGAIN);
			if (k > 0) {
				sent += (size_t)k;
				calls++;
			}
		}
		memset(g, 0, sizeof(*g));
		receive_all(rcv, &b, dst, 65536, g, 1);
		assert_memory_equal(dst, reg + 4096 + 123, 65536);

		/* One completion id per successful call, reported as a range. */
		char ectl[128];
		struct msghdr em = {.msg_control = ectl, .msg_controllen = sizeof(ectl)};
		assert_int_equal(recvmsg(snd, &em, MSG_ERRQUEUE), 0);
		struct cmsghdr *ec = CMSG_FIRSTHDR(&em);
		assert_non_null(ec);
		assert_int_equal(ec->cmsg_level, SOL_IP);
		assert_int_equal(ec->cmsg_type, IP_RECVERR);
		struct sock_extended_err e;
		memcpy(&e, CMSG_DATA(ec), sizeof(e));
		assert_int_equal(e.ee_origin, SO_EE_ORIGIN_ZEROCOPY);
		assert_int_equal(e.ee_errno, 0);
		assert_int_equal(e.ee_info, 0);
		assert_int_equal(e.ee_data, (uint32_t)calls - 1);
		em.msg_controllen = sizeof(ectl);
		assert_int_equal(recvmsg(snd, &em, MSG_ERRQUEUE), -1);
		assert_int_equal(errno, EAGAIN);

		/* Host sends with MSG_ZEROCOPY continue the same id sequence. */
		assert_int_equal(send(snd, reg, 100, MSG_ZEROCOPY), 100);
		em.msg_controllen = sizeof(ectl);
		assert_int_equal(recvmsg(snd, &em, MSG_ERRQUEUE), 0);
		memcpy(&e, CMSG_DATA(CMSG_FIRSTHDR(&em)), sizeof(e));
		assert_int_equal(e.ee_info, (uint32_t)calls);
		assert_int_equal(e.ee_data, (uint32_t)calls);
		memset(g, 0, sizeof(*g));
		receive_all(rcv, &b, dst, 100, g, 1);
		assert_memory_equal(dst, reg, 100);

		/* Out of the registered range, or a descriptor that is no pages
		 * file: refused, nothing sent. */
		v2[1] = (int)len - 100;
		iov.iov_len = 4096;
		memcpy(CMSG_DATA(c), v2, sizeof(v2));
		assert_int_equal(sendmsg(snd, &m, MSG_ZEROCOPY | MSG_DONTWAIT), -1);
		assert_int_equal(errno, EFAULT);
		v2[0] = dmabuf;
		v2[1] = 0;
		memcpy(CMSG_DATA(c), v2, sizeof(v2));
		assert_int_equal(sendmsg(snd, &m, MSG_ZEROCOPY | MSG_DONTWAIT), -1);
		assert_int_equal(errno, EBADF);
		close(pages);
		close(dmabuf);
		free(reg);
	}

	/* Uninstalled, a new flow with the same ends would not be steered;
	 * the open socket keeps its binding, as a flow already in a queue. */
	rxdm_rule(RXDM_RULE_UNINSTALL, snd, rcv);
	assert_int_equal(stats().rules, 0);

	/* Closing the socket returns what it still held. */
	assert_int_equal(send(snd, src, 65536, 0), 65536);
	memset(g, 0, sizeof(*g));
	receive_all(rcv, &b, dst, 65536, g, 0);
	assert_true(stats().tokens_held > 0);
	close(rcv);
	assert_int_equal(stats().tokens_held, 0);
	close(snd);
	free(g);
	free(src);
	free(dst);
}

/* TCPXSIM_POOL_PAGES=8: no free page, no data, until pages come back. */
static void run_starve(void)
{
	struct bounce_map b = import_bounce();
	int snd, rcv;
	uint8_t src[65536], dst[65536];
	struct got *g = calloc(1, sizeof(*g));
	fill_random(src, sizeof(src), 3);
	steered_pair(&snd, &rcv);
	assert_int_equal(send(snd, src, sizeof(src), 0), (ssize_t)sizeof(src));
	while (g->bytes < 8 * DEVMEM_PAGE) {
		assert_true(wait_readable(rcv));
		ssize_t k = devmem_recv(rcv, &b, dst + g->bytes, sizeof(src) - g->bytes, g);
		assert_true(k > 0);
	}
	assert_int_equal(g->bytes, 8 * DEVMEM_PAGE);
	uint64_t starved = stats().starved;
	assert_int_equal(devmem_recv(rcv, &b, dst + g->bytes, sizeof(src) - g->bytes, g), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(stats().starved, starved + 1);
	assert_int_equal(return_tokens(rcv, g->tokens, g->ntokens), 0);
	g->ntokens = 0;
	struct got *rest = calloc(1, sizeof(*rest));
	receive_all(rcv, &b, dst + g->bytes, sizeof(src) - g->bytes, rest, 1);
	assert_memory_equal(dst, src, sizeof(src));
	close(snd);
	close(rcv);
	free(g);
	free(rest);
}

/* TCPXSIM_LINEAR=100: each receive's first 100 bytes come as header data,
 * in the caller's buffer. */
static void run_linear(void)
{
	struct bounce_map b = import_bounce();
	int snd, rcv;
	uint8_t src[100000], dst[100000];
	struct got *g = calloc(1, sizeof(*g));
	fill_random(src, sizeof(src), 4);
	steered_pair(&snd, &rcv);
	assert_int_equal(send(snd, src, sizeof(src), 0), (ssize_t)sizeof(src));
	receive_all(rcv, &b, dst, sizeof(src), g, 1);
	assert_memory_equal(dst, src, sizeof(src));
	assert_true(g->linear >= 100);
	assert_int_equal(stats().linear_bytes, g->linear);
	close(snd);
	close(rcv);
	free(g);
}

/* TCPXSIM_MSS=64: 64-byte fragments; one receive holds at most 2048. */
static void run_mss(void)
{
	struct bounce_map b = import_bounce();
	int snd, rcv;
	const size_t len = 256u << 10;
	uint8_t *src = malloc(len), *dst = malloc(len);
	struct got *g = calloc(1, sizeof(*g));
	fill_random(src, len, 5);
	steered_pair(&snd, &rcv);
	size_t sent = 0;
	while (sent < len) {
		ssize_t k = send(snd, src + sent, len - sent, MSG_DONTWAIT);
		if (k > 0)
			sent += (size_t)k;
		size_t before = g->ntokens;
		ssize_t r = devmem_recv(rcv, &b, dst + g->bytes, 128u << 10, g);
		if (r > 0) {
			assert_true((size_t)r <= MAX_FRAGS * 64);
			assert_int_equal(return_tokens(rcv, g->tokens + before, g->ntokens - before), 0);
			g->ntokens = before;
		}
	}
	receive_all(rcv, &b, dst, len, g, 1);
	assert_memory_equal(dst, src, len);
	assert_true(g->frags >= len / 64);
	close(snd);
	close(rcv);
	free(src);
	free(dst);
	free(g);
}

/* Strict (the default): a contract violation ends the process. */
static void run_strict(void)
{
	struct bounce_map b = import_bounce();
	int snd, rcv;
	steered_pair(&snd, &rcv);
	assert_int_equal(send(snd, "x", 1, 0), 1);
	struct got *g = calloc(1, sizeof(*g));
	uint8_t dst[1];
	assert_true(wait_readable(rcv));
	assert_int_equal(devmem_recv(rcv, &b, dst, 1, g), 1);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint32_t never = g->tokens[0] + 1;
		return_tokens(rcv, &never, 1);
		_exit(0); /* not reached when strict */
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	assert_int_equal(return_tokens(rcv, g->tokens, 1), 0); /* the parent is fine */
	close(snd);
	close(rcv);
	free(g);
}

/* TCPXSIM_TX_DELAY_US=10000000: completions are held back that long (the
 * check right after the send has those 10 s of margin on a loaded machine). */
static void run_delay(void)
{
	int snd, rcv, one = 1;
	char ectl[128], buf[100] = {0};
	tcp_pair(&snd, &rcv);
	assert_int_equal(setsockopt(snd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)), 0);
	assert_int_equal(send(snd, buf, sizeof(buf), MSG_ZEROCOPY), (ssize_t)sizeof(buf));
	struct msghdr em = {.msg_control = ectl, .msg_controllen = sizeof(ectl)};
	assert_int_equal(recvmsg(snd, &em, MSG_ERRQUEUE), -1);
	assert_int_equal(errno, EAGAIN);
	for (int i = 0; i < 6000; i++) { /* up to 60 s */
		em.msg_controllen = sizeof(ectl);
		if (recvmsg(snd, &em, MSG_ERRQUEUE) == 0)
			break;
		assert_int_equal(errno, EAGAIN);
		usleep(10000);
	}
	assert_int_equal(stats().completions, 1);
	close(snd);
	close(rcv);
}

/* Two sockets' receives at once: one receive is held inside the data path
 * (after its socket read, before its copies: where the simulator once held
 * a process-wide lock) while the other socket receives from the same
 * bounce buffer's pool, returns its tokens, and sends from "GPU" memory.
 * Structural, not timed: with a process-wide lock on the data path the
 * second socket's calls never return (the test's timeout fails it). */
static struct {
	int fd;          /* the receive to hold */
	int what;        /* where: the test hook's `what` */
	int entered[2];  /* the held receive says it is inside */
	int release[2];  /* and waits for this */
	int held;
} hold = {.fd = -1, .what = 0};

static void hold_hook(int fd, int what)
{
	char c = 0;
	if (what != hold.what || fd != hold.fd || hold.held)
		return;
	hold.held = 1;
	if (write(hold.entered[1], &c, 1) != 1 || read(hold.release[0], &c, 1) != 1)
		abort();
}

struct held_recv {
	int fd;
	struct bounce_map *b;
	uint8_t *out;
	size_t len;
	struct got *g;
	ssize_t first;   /* what the held receive returned */
};

static void *held_receiver(void *arg)
{
	struct held_recv *h = arg;
	h->first = devmem_recv(h->fd, h->b, h->out, h->len, h->g);
	return NULL;
}

/* Two steered socket pairs on one bounce buffer, and their buffers. */
struct two_pairs {
	struct bounce_map b;
	int snd1, rcv1, snd2, rcv2;
	size_t len;
	uint8_t *src1, *src2, *dst1, *dst2;
	struct got *g1, *g2;
	struct held_recv h;
	pthread_t t;
};

/* Pair 1's receive goes in on a thread of its own and stays inside, at
 * test hook point `what`, until release_first. */
static void hold_first(struct two_pairs *p, int what, unsigned seed)
{
	char c;

	p->b = import_bounce();
	p->len = 256u << 10;
	p->src1 = malloc(p->len);
	p->src2 = malloc(p->len);
	p->dst1 = malloc(p->len);
	p->dst2 = malloc(p->len);
	p->g1 = calloc(1, sizeof(*p->g1));
	p->g2 = calloc(1, sizeof(*p->g2));
	fill_random(p->src1, p->len, seed);
	fill_random(p->src2, p->len, seed + 1);
	steered_pair(&p->snd1, &p->rcv1);
	steered_pair(&p->snd2, &p->rcv2);
	assert_int_equal(pipe(hold.entered), 0);
	assert_int_equal(pipe(hold.release), 0);
	hold.fd = p->rcv1;
	hold.what = what;
	hold.held = 0;
	tcpxsim_set_test_hook(hold_hook);

	assert_int_equal(send(p->snd1, p->src1, p->len, 0), (ssize_t)p->len);
	assert_true(wait_readable(p->rcv1));
	p->h = (struct held_recv){p->rcv1, &p->b, p->dst1, p->len, p->g1, 0};
	assert_int_equal(pthread_create(&p->t, NULL, held_receiver, &p->h), 0);
	assert_int_equal(read(hold.entered[0], &c, 1), 1);
}

/* Pair 1's receive is still inside (it has not returned); let it go: it
 * completes with its own bytes, then the rest follow, every token back. */
static void release_first(struct two_pairs *p)
{
	assert_int_equal(p->h.first, 0);
	assert_int_equal(write(hold.release[1], "", 1), 1);
	assert_int_equal(pthread_join(p->t, NULL), 0);
	tcpxsim_set_test_hook(NULL);
	assert_true(p->h.first > 0);
	receive_all(p->rcv1, &p->b, p->dst1, p->len, p->g1, 0);
	assert_memory_equal(p->dst1, p->src1, p->len);
	assert_int_equal(return_tokens(p->rcv1, p->g1->tokens, p->g1->ntokens), 0);
	assert_int_equal(stats().tokens_held, 0);
	close(p->snd1);
	close(p->rcv1);
	close(p->snd2);
	close(p->rcv2);
	free(p->src1);
	free(p->src2);
	free(p->dst1);
	free(p->dst2);
	free(p->g1);
	free(p->g2);
}

static void run_parallel(void)
{
	struct two_pairs p;

	hold_first(&p, 0, 11);

	/* Meanwhile socket 2: receives (same pool), token returns, and a
	 * devmem send, all complete. */
	uint64_t recvs = stats().devmem_recvs;
	assert_int_equal(send(p.snd2, p.src2, p.len, 0), (ssize_t)p.len);
	receive_all(p.rcv2, &p.b, p.dst2, p.len, p.g2, 1);
	assert_memory_equal(p.dst2, p.src2, p.len);
	assert_true(stats().devmem_recvs > recvs);
	{
		int dmabuf = -1;
		assert_int_equal(cuMemGetHandleForAddressRange(&dmabuf, (uintptr_t)p.src2, p.len, 1, 0), 0);
		struct devmem_create_pages info = {.dma_buf_fd = dmabuf};
		int pages = ioctl(dmabuf, DEVMEM_DMA_BUF_CREATE_PAGES, &info);
		assert_true(pages >= 0);
		int v2[2] = {pages, 0};
		static char unused[4096];
		char ctl[CMSG_SPACE(sizeof(v2))];
		struct iovec iov = {unused, sizeof(unused)};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				   .msg_controllen = sizeof(ctl)};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = DEVMEM_SCM_OFFSET;
		cm->cmsg_len = CMSG_LEN(sizeof(v2));
		memcpy(CMSG_DATA(cm), v2, sizeof(v2));
		assert_int_equal(sendmsg(p.snd2, &m, MSG_DONTWAIT), (ssize_t)sizeof(unused));
		memset(p.g2, 0, sizeof(*p.g2));
		receive_all(p.rcv2, &p.b, p.dst2, sizeof(unused), p.g2, 1);
		assert_memory_equal(p.dst2, p.src2, sizeof(unused));
		close(pages);
		close(dmabuf);
	}
	release_first(&p);
}

/* Two sockets' page-pool work at once: socket 1's receive is held in the
 * middle of handing out its fragments (test hook 2: its socket's lock held,
 * its first fragment's page referenced, its token given) while socket 2,
 * steered to the same bounce buffer, receives (taking fresh pages from the
 * pool), returns its tokens (pages poisoned and freed into the pool) and
 * receives again.  Structural, not timed: were the pool's lock held across
 * a receive's hand-out, as it once was, socket 2's first receive would
 * never return (the test's timeout fails it). */
static void run_pool(void)
{
	struct two_pairs p;

	hold_first(&p, 2, 21);

	/* Socket 2, same pool: receives, returns every token, twice over. */
	struct tcpxsim_stats before = stats();
	assert_int_equal(send(p.snd2, p.src2, p.len, 0), (ssize_t)p.len);
	receive_all(p.rcv2, &p.b, p.dst2, p.len, p.g2, 1);
	assert_memory_equal(p.dst2, p.src2, p.len);
	memset(p.g2, 0, sizeof(*p.g2));
	assert_int_equal(send(p.snd2, p.src1, p.len, 0), (ssize_t)p.len);
	receive_all(p.rcv2, &p.b, p.dst2, p.len, p.g2, 1);
	assert_memory_equal(p.dst2, p.src1, p.len);
	struct tcpxsim_stats after = stats();
	assert_true(after.devmem_recvs > before.devmem_recvs);
	assert_true(after.tokens_returned >= before.tokens_returned + 2 * p.len / DEVMEM_PAGE);
	release_first(&p);
}

static const char *scenario;

static void test_scenario(void **state)
{
	if (!strcmp(scenario, "basic"))
		run_basic();
	else if (!strcmp(scenario, "starve"))
		run_starve();
	else if (!strcmp(scenario, "linear"))
		run_linear();
	else if (!strcmp(scenario, "mss"))
		run_mss();
	else if (!strcmp(scenario, "strict"))
		run_strict();
	else if (!strcmp(scenario, "delay"))
		run_delay();
	else if (!strcmp(scenario, "parallel"))
		run_parallel();
	else if (!strcmp(scenario, "pool"))
		run_pool();
	else
		fail_msg("unknown scenario %s", scenario);
}

int main(int argc, char **argv)
{
	scenario = argc > 1 ? argv[1] : "basic";
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_scenario)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
