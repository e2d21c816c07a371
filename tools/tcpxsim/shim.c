#define _GNU_SOURCE
#include "tcpxsim.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <errno.h>
#include <limits.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bounce.h"
#include "devmem.h"
#include "pool.h"
#include "rxdm.h"

#define MAX_GPUS 16

int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size, int type,
				  unsigned long long flags);
#define MAX_RULES 4096
#define SEND_STAGE (256u << 10)  /* bytes one devmem sendmsg moves at most */

enum steering { STEER_RULES, STEER_ALL, STEER_NONE };

struct region { /* memory behind a dma-buf fd or a "pages" fd */
	int fd;
	int pages;   /* 1: made by DMA_BUF_CREATE_PAGES, what sendmsg names */
	uint64_t base;
	size_t size;
	struct region *next;
};

struct zc_pending {
	uint32_t id;
	uint64_t due_ns;
};

struct sock {
	struct sim_bounce *b;    /* the buffer its flow is steered to, once known */
	struct sim_tokens tokens;
	struct sim_cut cut;      /* where its stream stands in packets and pages */
	uint64_t rules_seen;     /* S.rule_gen when steer() last found no rule */
	int family;
	int zerocopy;            /* SO_ZEROCOPY set */
	uint32_t zc_next;        /* next completion id */
	struct zc_pending *zc;   /* ids not yet reported, oldest first */
	uint32_t zc_head, zc_len, zc_cap;
};

static struct {
	pthread_mutex_t lock;
	/* settings */
	uint32_t mss;
	size_t bounce_bytes;
	uint32_t pool_pages;     /* 0: the whole buffer */
	enum steering steering;
	uint32_t linear;
	int poison;
	int strict;
	uint64_t tx_delay_ns;
	int on_gpu;
	int verbose;
	/* state */
	char prefix[96];
	int own_prefix;
	struct sim_rxdm *rxdm;
	char gpus[MAX_GPUS][32];
	int ngpus;
	struct sim_bounce *bounce[MAX_GPUS];
	struct rxdm_rule rules[MAX_RULES];
	int nrules;
	uint64_t rule_gen;       /* bumped at every rule change; starts at 1 */
	struct sock **socks;
	int nsocks;
	struct region *regions;
	struct tcpxsim_stats st;
} S = {.lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .rule_gen = 1};
/* Recursive: the simulator's own close() calls come back through close(). */

static struct {
	pthread_once_t once;
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*ioctl)(int, unsigned long, ...);
	int (*close)(int);
	char *(*realpath)(const char *, char *);
	int (*mem_handle)(void *, unsigned long long, size_t, int, unsigned long long);
} real = {.once = PTHREAD_ONCE_INIT};

static void resolve(void)
{
	*(void **)&real.recvmsg = dlsym(RTLD_NEXT, "recvmsg");
	*(void **)&real.sendmsg = dlsym(RTLD_NEXT, "sendmsg");
	*(void **)&real.send = dlsym(RTLD_NEXT, "send");
	*(void **)&real.recv = dlsym(RTLD_NEXT, "recv");
	*(void **)&real.setsockopt = dlsym(RTLD_NEXT, "setsockopt");
	*(void **)&real.ioctl = dlsym(RTLD_NEXT, "ioctl");
	*(void **)&real.close = dlsym(RTLD_NEXT, "close");
	*(void **)&real.realpath = dlsym(RTLD_NEXT, "realpath");
	*(void **)&real.mem_handle = dlsym(RTLD_NEXT, "cuMemGetHandleForAddressRange");
}

#define REAL(fn) (pthread_once(&real.once, resolve), real.fn)

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t k = write(STDERR_FILENO, line, (size_t)n);
	(void)k;
}

/* A breach of the devmem contract by the program above us.  Strict (the
 * default): it ends the process, loudly, as the test it is; else the call
 * fails with `err`. Called with the lock held. */
static int violation(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int violation(int err, const char *fmt, ...)
{
	char what[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	S.st.violations++;
	say("tcpxsim: contract violation: %s", what);
	if (S.strict) {
		say("tcpxsim: aborting (TCPXSIM_STRICT=0 makes this an error return)");
		abort();
	}
	errno = err;
	return -1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- per-socket state ---- */

static struct sock *sock_find(int fd)
{
	return fd >= 0 && fd < S.nsocks ? S.socks[fd] : NULL;
}

static struct sock *sock_get(int fd)
{
	struct sock *s = sock_find(fd);
	if (s || fd < 0)
		return s;
	if (fd >= S.nsocks) {
		int n = S.nsocks ? S.nsocks : 256;
		while (n <= fd)
			n *= 2;
		struct sock **p = realloc(S.socks, sizeof(*p) * (size_t)n);
		if (!p)
			return NULL;
		memset(p + S.nsocks, 0, sizeof(*p) * (size_t)(n - S.nsocks));
		S.socks = p;
		S.nsocks = n;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);
	s->family = getsockname(fd, (struct sockaddr *)&a, &len) == 0 ? a.ss_family : AF_INET;
	S.socks[fd] = s;
	return s;
}

static void sock_forget(int fd)
{
	struct sock *s = sock_find(fd);
	if (!s)
		return;
	if (s->b) {
		S.st.tokens_held -= s->tokens.held;
		sim_tokens_drop_all(&s->tokens, &s->b->pool);
		sim_tokens_fini(&s->tokens);
		if (s->cut.page_left)
			sim_pool_put(&s->b->pool, s->cut.page);
	}
	free(s->zc);
	free(s);
	S.socks[fd] = NULL;
}

/* ---- steering ---- */

/* Addresses compare as text after one normal form (IPv4-mapped IPv6
 * addresses as plain IPv4). */
static void normal_ip(const char *in, char *out, size_t cap)
{
	struct in6_addr a6;
	struct in_addr a4;
	if (inet_pton(AF_INET6, in, &a6) == 1) {
		if (IN6_IS_ADDR_V4MAPPED(&a6)) {
			memcpy(&a4, &a6.s6_addr[12], 4);
			inet_ntop(AF_INET, &a4, out, (socklen_t)cap);
		} else {
			inet_ntop(AF_INET6, &a6, out, (socklen_t)cap);
		}
	} else if (inet_pton(AF_INET, in, &a4) == 1) {
		inet_ntop(AF_INET, &a4, out, (socklen_t)cap);
	} else {
		snprintf(out, cap, "%s", in);
	}
}

static int addr_text(const struct sockaddr_storage *a, char *ip, size_t cap, int *port)
{
	char raw[64];
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)a;
		inet_ntop(AF_INET, &s4->sin_addr, raw, sizeof(raw));
		*port = ntohs(s4->sin_port);
	} else if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)a;
		inet_ntop(AF_INET6, &s6->sin6_addr, raw, sizeof(raw));
		*port = ntohs(s6->sin6_port);
	} else {
		return -1;
	}
	normal_ip(raw, ip, cap);
	return 0;
}

static struct sim_bounce *bounce_of(const char *gpu, char *err, size_t errlen);

/* Which bounce buffer the NIC writes this socket's bytes into: the one of
 * the GPU a rule names for its flow (peer -> us), or none: the flow is not
 * steered and its bytes arrive as ordinary data. */
static struct sim_bounce *steer(int fd, struct sock *s)
{
	struct sockaddr_storage me, peer;
	socklen_t lm = sizeof(me), lp = sizeof(peer);
	char mip[64], pip[64], err[256];
	int mport, pport;
	const char *gpu = NULL;
	if (s->b || S.steering == STEER_NONE || s->rules_seen == S.rule_gen)
		return s->b;
	if (S.steering == STEER_ALL) {
		gpu = S.gpus[0];
	} else if (S.nrules) {
		if (getsockname(fd, (struct sockaddr *)&me, &lm) ||
		    getpeername(fd, (struct sockaddr *)&peer, &lp) ||
		    addr_text(&me, mip, sizeof(mip), &mport) || addr_text(&peer, pip, sizeof(pip), &pport))
			return NULL;
		for (int i = 0; i < S.nrules && !gpu; i++) {
			const struct rxdm_rule *r = &S.rules[i];
			if (r->src_port == pport && r->dst_port == mport && !strcmp(r->src_ip, pip) &&
			    !strcmp(r->dst_ip, mip))
				gpu = r->gpu[0] ? r->gpu : S.gpus[0];
		}
	}
	if (!gpu) {
		s->rules_seen = S.rule_gen; /* no need to look again until they change */
		return NULL;
	}
	struct sim_bounce *b = bounce_of(gpu, err, sizeof(err));
	if (!b) {
		say("tcpxsim: no bounce buffer for %s: %s", gpu, err);
		return NULL;
	}
	if (sim_tokens_init(&s->tokens, 2 * b->pool.npages))
		return NULL;
	s->b = b;
	return b;
}

/* ---- the RxDM's side ---- */

static struct sim_bounce *bounce_of(const char *gpu, char *err, size_t errlen)
{
	int i;
	for (i = 0; i < S.ngpus; i++)
		if (!strcmp(S.gpus[i], gpu))
			break;
	if (i == S.ngpus) {
		snprintf(err, errlen, "GPU %s is not served", gpu);
		return NULL;
	}
	if (!S.bounce[i]) {
		size_t bytes = S.bounce_bytes;
		if (S.pool_pages && (size_t)S.pool_pages * DEVMEM_PAGE < bytes)
			bytes = (size_t)S.pool_pages * DEVMEM_PAGE;
		if (sim_bounce_create(gpu, bytes, S.on_gpu, now_ns(), &S.bounce[i], err, errlen))
			return NULL;
		if (S.verbose)
			say("tcpxsim: bounce buffer for %s: %zu bytes in %s memory", gpu, S.bounce[i]->size,
			    S.on_gpu ? "GPU" : "host");
	}
	return S.bounce[i];
}

static int op_buffer(const char *gpu, struct sim_bounce **b, char *err, size_t errlen)
{
	pthread_mutex_lock(&S.lock);
	*b = bounce_of(gpu, err, errlen);
	pthread_mutex_unlock(&S.lock);
	return *b ? 0 : -ENODEV;
}

static int op_rule(const struct rxdm_rule *rule, int install, char *err, size_t errlen)
{
	struct rxdm_rule r = *rule;
	int rc = 0;
	normal_ip(rule->src_ip, r.src_ip, sizeof(r.src_ip));
	normal_ip(rule->dst_ip, r.dst_ip, sizeof(r.dst_ip));
	pthread_mutex_lock(&S.lock);
	int i;
	for (i = 0; i < S.nrules; i++)
		if (S.rules[i].src_port == r.src_port && S.rules[i].dst_port == r.dst_port &&
		    !strcmp(S.rules[i].src_ip, r.src_ip) && !strcmp(S.rules[i].dst_ip, r.dst_ip))
			break;
	if (install) {
		if (i < S.nrules) {
			S.rules[i] = r;
		} else if (S.nrules == MAX_RULES) {
			snprintf(err, errlen, "rule table full (%d)", MAX_RULES);
			rc = -ENOSPC;
		} else {
			S.rules[S.nrules++] = r;
		}
	} else if (i < S.nrules) {
		S.rules[i] = S.rules[--S.nrules];
	} else {
		snprintf(err, errlen, "no rule %s:%d -> %s:%d", r.src_ip, r.src_port, r.dst_ip, r.dst_port);
		rc = -ENOENT;
	}
	S.st.rules = (uint64_t)S.nrules;
	S.rule_gen++;
	pthread_mutex_unlock(&S.lock);
	if (S.verbose)
		say("tcpxsim: rule %s %s:%d -> %s:%d gpu %s%s", install ? "install" : "remove", r.src_ip,
		    r.src_port, r.dst_ip, r.dst_port, r.gpu, rc ? " (refused)" : "");
	return rc;
}

/* ---- receive ---- */

static void poison_page(void *arg, uint32_t page)
{
	struct sim_bounce *b = arg;
	sim_bounce_fill(b, (size_t)page * DEVMEM_PAGE, 0x5a, DEVMEM_PAGE);
}

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

/* Once per 5 s while starved: who holds the pages (a plugin that does not
 * return its tokens, or a window larger than the buffer). */
static void report_starved(const struct sim_bounce *b)
{
	static uint64_t last;
	uint64_t now = now_ns(), held = 0;
	int socks = 0, open = 0;
	if (now - last < 5000000000ull)
		return;
	last = now;
	for (int i = 0; i < S.nsocks; i++)
		if (S.socks[i] && S.socks[i]->b == b) {
			socks++;
			held += S.socks[i]->tokens.held;
			open += S.socks[i]->cut.page_left != 0;
		}
	say("tcpxsim: bounce buffer of %s starved: %u of %u pages free, %llu tokens held and %d "
	    "pages open over %d sockets", b->gpu, b->pool.nfree, b->pool.npages,
	    (unsigned long long)held, open, socks);
}

static ssize_t devmem_recv(int fd, struct msghdr *m, int flags)
{
	size_t per = CMSG_SPACE(sizeof(struct devmem_frag));
	size_t max_frags = m->msg_control ? m->msg_controllen / per : 0;
	size_t want = m->msg_iovlen ? m->msg_iov[0].iov_len : 0;
	ssize_t k;
	if (!(flags & MSG_DONTWAIT)) {
		/* Wait for data outside the lock; the read itself never blocks. */
		struct pollfd p = {.fd = fd, .events = POLLIN};
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	}
	pthread_mutex_lock(&S.lock);
	struct sock *s = sock_get(fd);
	struct sim_bounce *b = s ? steer(fd, s) : NULL;
	if (!b) {
		/* Not steered to a bounce buffer: the NIC delivered ordinary
		 * packets and the kernel copies them, without any cmsg. */
		S.st.unsteered_recvs++;
		pthread_mutex_unlock(&S.lock);
		return REAL(recvmsg)(fd, m, flags & ~DEVMEM_MSG_SOCK_DEVMEM);
	}
	if (max_frags == 0 || want == 0) {
		pthread_mutex_unlock(&S.lock);
		errno = EINVAL;
		return -1;
	}
	size_t linear = S.linear < want ? S.linear : want;
	size_t frags = max_frags - (linear ? 1 : 0);
	size_t free_tokens = s->tokens.cap - s->tokens.held;
	if (frags > TCPXSIM_MAX_FRAGS)
		frags = TCPXSIM_MAX_FRAGS;
	if (frags > free_tokens)
		frags = free_tokens;
	size_t n = sim_cut_fit(&s->cut, S.mss, want - linear, frags, b->pool.nfree);
	if (n == 0 && want > linear) {
		/* No free page: the NIC drops, TCP backs off, nothing to read. */
		S.st.starved++;
		report_starved(b);
		pthread_mutex_unlock(&S.lock);
		errno = EAGAIN;
		return -1;
	}
	n += linear;
	size_t cap;
	uint8_t *buf = sim_stage(b->on_gpu, &cap);
	if (!buf) {
		pthread_mutex_unlock(&S.lock);
		errno = ENOMEM;
		return -1;
	}
	if (n > cap)
		n = cap;
	k = REAL(recv)(fd, buf, n, MSG_DONTWAIT);
	if (k <= 0) {
		pthread_mutex_unlock(&S.lock);
		return k;
	}
	size_t used = 0, got = (size_t)k, lin = linear < got ? linear : got;
	if (lin) {
		memcpy(m->msg_iov[0].iov_base, buf, lin);
		add_cmsg(m, &used, DEVMEM_SCM_HEADER, 0, (uint32_t)lin, 0);
		S.st.linear_bytes += lin;
	}
	static uint32_t offs[TCPXSIM_MAX_FRAGS], lens[TCPXSIM_MAX_FRAGS];
	size_t nf = 0;
	for (size_t off = lin; off < got && nf < TCPXSIM_MAX_FRAGS; nf++) {
		uint32_t token, page;
		int fresh;
		lens[nf] = sim_cut_peek(&s->cut, S.mss, got - off, &fresh);
		if (fresh && sim_pool_take(&b->pool, &page)) /* cannot happen: counted above */
			break;
		if (!fresh)
			page = s->cut.page;
		offs[nf] = page * DEVMEM_PAGE + (fresh ? 0 : DEVMEM_PAGE - s->cut.page_left);
		sim_pool_ref(&b->pool, page); /* the token's */
		sim_tokens_add(&s->tokens, page, &token);
		if (sim_cut_take(&s->cut, S.mss, lens[nf], fresh, page))
			sim_pool_put(&b->pool, page); /* closed: the socket's hold ends */
		add_cmsg(m, &used, DEVMEM_SCM_OFFSET, offs[nf], lens[nf], token);
		S.st.frags++;
		S.st.tokens_held++;
		off += lens[nf];
	}
	if (sim_bounce_write_frags(b, buf + lin, offs, lens, nf))
		say("tcpxsim: writing %zu fragments into the bounce buffer failed", nf);
	m->msg_controllen = used;
	m->msg_flags = 0;
	S.st.devmem_recvs++;
	pthread_mutex_unlock(&S.lock);
	return k;
}

static int dontneed(int fd, const void *val, socklen_t len)
{
	uint32_t bad = 0;
	int rc;
	pthread_mutex_lock(&S.lock);
	struct sock *s = sock_find(fd);
	if (!val || len % sizeof(struct devmem_token_range)) {
		rc = violation(EINVAL, "SO_DEVMEM_DONTNEED on fd %d: %u bytes is not a whole array of "
				       "{start, count}", fd, (unsigned)len);
	} else if (!s || !s->b) {
		rc = violation(EINVAL, "SO_DEVMEM_DONTNEED on fd %d, which holds no devmem tokens", fd);
	} else {
		size_t n = len / sizeof(struct devmem_token_range);
		uint64_t before = s->tokens.held;
		rc = sim_tokens_return(&s->tokens, &s->b->pool, val, n, &bad,
				       S.poison ? poison_page : NULL, s->b);
		if (rc)
			rc = violation(EINVAL, "SO_DEVMEM_DONTNEED on fd %d: token %u is not held by this "
					       "socket (never given, returned already, or named twice)",
				       fd, bad);
		S.st.tokens_returned += before - s->tokens.held;
		S.st.tokens_held -= before - s->tokens.held;
	}
	pthread_mutex_unlock(&S.lock);
	return rc;
}

/* ---- send ---- */

static struct region *region_find(int fd)
{
	for (struct region *r = S.regions; r; r = r->next)
		if (r->fd == fd)
			return r;
	return NULL;
}

static int region_add(int pages, uint64_t base, size_t size)
{
	struct region *r = calloc(1, sizeof(*r));
	int fd = eventfd(0, EFD_CLOEXEC);
	if (!r || fd < 0) {
		free(r);
		if (fd >= 0)
			REAL(close)(fd);
		errno = ENOMEM;
		return -1;
	}
	*r = (struct region){.fd = fd, .pages = pages, .base = base, .size = size, .next = S.regions};
	S.regions = r;
	return fd;
}

static void region_forget(int fd)
{
	for (struct region **p = &S.regions; *p; p = &(*p)->next)
		if ((*p)->fd == fd) {
			struct region *r = *p;
			*p = r->next;
			free(r);
			return;
		}
}

/* A send that asked for MSG_ZEROCOPY on a socket with SO_ZEROCOPY gets the
 * socket's next completion id, reported on the error queue later. */
static void zc_account(int fd, int flags, ssize_t sent)
{
	if (!(flags & MSG_ZEROCOPY) || sent <= 0)
		return;
	struct sock *s = sock_get(fd);
	if (!s || !s->zerocopy)
		return;
	if (s->zc_len == s->zc_cap) {
		uint32_t cap = s->zc_cap ? 2 * s->zc_cap : 64;
		struct zc_pending *p = malloc(sizeof(*p) * cap);
		if (!p)
			return;
		for (uint32_t i = 0; i < s->zc_len; i++)
			p[i] = s->zc[(s->zc_head + i) % s->zc_cap];
		free(s->zc);
		s->zc = p;
		s->zc_head = 0;
		s->zc_cap = cap;
	}
	s->zc[(s->zc_head + s->zc_len++) % s->zc_cap] =
		(struct zc_pending){s->zc_next++, now_ns() + S.tx_delay_ns};
}

static const struct cmsghdr *devmem_cmsg(const struct msghdr *m)
{
	if (!m->msg_control)
		return NULL;
	for (const struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)m); c;
	     c = CMSG_NXTHDR((struct msghdr *)m, (struct cmsghdr *)c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == DEVMEM_SCM_OFFSET)
			return c;
	return NULL;
}

static ssize_t devmem_send(int fd, const struct msghdr *m, const struct cmsghdr *c, int flags)
{
	int v[2];
	size_t len = 0;
	ssize_t k;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		len += m->msg_iov[i].iov_len;
	pthread_mutex_lock(&S.lock);
	if (c->cmsg_len < CMSG_LEN(sizeof(v))) {
		k = violation(EINVAL, "devmem sendmsg on fd %d: SCM_DEVMEM_OFFSET of %zu bytes", fd,
			      (size_t)c->cmsg_len);
		goto out;
	}
	memcpy(v, CMSG_DATA(c), sizeof(v));
	struct region *r = region_find(v[0]);
	if (!r || !r->pages) {
		/* What the kernel answers; TCPX's socket threads do this after
		 * deregMr closed the file under a send still queued. */
		errno = EBADF;
		k = -1;
		goto out;
	}
	if (v[1] < 0 || (size_t)v[1] > r->size || len > r->size - (size_t)v[1]) {
		k = violation(EFAULT, "devmem sendmsg on fd %d: [%d, +%zu) lies outside the %zu "
				      "registered bytes", fd, v[1], len, r->size);
		goto out;
	}
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (len == 0 || poll(&p, 1, 0) != 1) {
		errno = len ? EAGAIN : EINVAL;
		k = -1;
		goto out;
	}
	if (len > SEND_STAGE)
		len = SEND_STAGE;
	size_t cap;
	uint8_t *buf = sim_stage(S.on_gpu, &cap);
	if (len > cap)
		len = cap;
	if (!buf || sim_mem_read(buf, r->base + (uint64_t)v[1], len, S.on_gpu)) {
		errno = buf ? EFAULT : ENOMEM;
		k = -1;
		goto out;
	}
	k = REAL(send)(fd, buf, len, (flags & ~MSG_ZEROCOPY) | MSG_DONTWAIT);
	if (k > 0)
		S.st.devmem_sends++;
	zc_account(fd, flags, k);
out:
	pthread_mutex_unlock(&S.lock);
	return k;
}

static ssize_t errqueue(int fd, struct msghdr *m, int flags)
{
	pthread_mutex_lock(&S.lock);
	struct sock *s = sock_find(fd);
	if (!s || !s->zerocopy) {
		pthread_mutex_unlock(&S.lock);
		return REAL(recvmsg)(fd, m, flags);
	}
	uint64_t now = now_ns();
	uint32_t n = 0;
	while (n < s->zc_len && s->zc[(s->zc_head + n) % s->zc_cap].due_ns <= now)
		n++;
	size_t need = CMSG_SPACE(sizeof(struct sock_extended_err));
	if (n == 0 || !m->msg_control || m->msg_controllen < need) {
		pthread_mutex_unlock(&S.lock);
		errno = EAGAIN;
		return -1;
	}
	uint32_t lo = s->zc[s->zc_head].id, hi = s->zc[(s->zc_head + n - 1) % s->zc_cap].id;
	s->zc_head = (s->zc_head + n) % s->zc_cap;
	s->zc_len -= n;
	S.st.completions += n;
	struct sock_extended_err e = {.ee_errno = 0, .ee_origin = SO_EE_ORIGIN_ZEROCOPY,
				      .ee_code = SO_EE_CODE_ZEROCOPY_COPIED, .ee_info = lo,
				      .ee_data = hi};
	struct cmsghdr *c = CMSG_FIRSTHDR(m);
	c->cmsg_level = s->family == AF_INET6 ? SOL_IPV6 : SOL_IP;
	c->cmsg_type = s->family == AF_INET6 ? IPV6_RECVERR : IP_RECVERR;
	c->cmsg_len = CMSG_LEN(sizeof(e));
	memcpy(CMSG_DATA(c), &e, sizeof(e));
	m->msg_controllen = need;
	m->msg_flags = MSG_ERRQUEUE;
	pthread_mutex_unlock(&S.lock);
	return 0;
}

/* A plain receive on a steered flow: its bytes sit in device pages, which
 * devmem-TCP hands out only to MSG_SOCK_DEVMEM receives; recv() and plain
 * recvmsg() fail with EFAULT once such bytes are queued (read() is left
 * alone: no TCPX plugin reads its sockets that way).  (With STEER_ALL only the
 * sockets that asked for devmem count as steered: control sockets are not.)
 * 1 when the read must fail. */
static int plain_read_refused(int fd)
{
	int queued = 0, refuse = 0;
	if (S.steering == STEER_NONE)
		return 0;
	pthread_mutex_lock(&S.lock);
	struct sock *s = sock_find(fd);
	if (s && s->b)
		refuse = 1;
	else if (S.nrules && S.steering == STEER_RULES && (s = sock_get(fd)))
		refuse = steer(fd, s) != NULL;
	pthread_mutex_unlock(&S.lock);
	if (!refuse || REAL(ioctl)(fd, FIONREAD, &queued) != 0 || queued == 0)
		return 0;
	errno = EFAULT;
	return 1;
}

/* A plain send asked for MSG_ZEROCOPY (sent without it): the simulator
 * owns the socket's completion ids, so that host and devmem sends share one
 * sequence as they do in the kernel.  Returns `sent`, errno kept. */
static ssize_t zc_sent(int fd, int flags, ssize_t sent)
{
	int e = errno;
	pthread_mutex_lock(&S.lock);
	zc_account(fd, flags, sent);
	pthread_mutex_unlock(&S.lock);
	errno = e;
	return sent;
}

/* ---- interposed calls ---- */

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	if (flags & MSG_ERRQUEUE)
		return errqueue(fd, m, flags);
	if (flags & DEVMEM_MSG_SOCK_DEVMEM)
		return devmem_recv(fd, m, flags);
	if (plain_read_refused(fd))
		return -1;
	return REAL(recvmsg)(fd, m, flags);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	if (plain_read_refused(fd))
		return -1;
	return REAL(recv)(fd, buf, len, flags);
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	const struct cmsghdr *c = devmem_cmsg(m);
	if (c)
		return devmem_send(fd, m, c, flags);
	if (!(flags & MSG_ZEROCOPY))
		return REAL(sendmsg)(fd, m, flags);
	return zc_sent(fd, flags, REAL(sendmsg)(fd, m, flags & ~MSG_ZEROCOPY));
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	if (!(flags & MSG_ZEROCOPY))
		return REAL(send)(fd, buf, len, flags);
	return zc_sent(fd, flags, REAL(send)(fd, buf, len, flags & ~MSG_ZEROCOPY));
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (level == SOL_SOCKET && name == DEVMEM_SO_DONTNEED)
		return dontneed(fd, val, len);
	int rc = REAL(setsockopt)(fd, level, name, val, len);
	if (rc == 0 && level == SOL_SOCKET && name == SO_ZEROCOPY && val && len >= sizeof(int)) {
		pthread_mutex_lock(&S.lock);
		struct sock *s = sock_get(fd);
		if (s)
			s->zerocopy = *(const int *)val != 0;
		pthread_mutex_unlock(&S.lock);
	}
	return rc;
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	if (req == DEVMEM_DMA_BUF_CREATE_PAGES) {
		pthread_mutex_lock(&S.lock);
		struct region *r = region_find(fd);
		int rc = r && !r->pages ? region_add(1, r->base, r->size) : -2;
		pthread_mutex_unlock(&S.lock);
		if (rc != -2)
			return rc;
	}
	return REAL(ioctl)(fd, req, arg);
}

int close(int fd)
{
	pthread_mutex_lock(&S.lock);
	sock_forget(fd);
	region_forget(fd);
	pthread_mutex_unlock(&S.lock);
	return REAL(close)(fd);
}

/* A NIC without a PCI device (lo) still needs an address: the plugin takes
 * the last component of /sys/class/net/IF/device's real path. */
char *realpath(const char *path, char *resolved)
{
	char *r = REAL(realpath)(path, resolved);
	const char *pre = "/sys/class/net/", *suf = "/device";
	size_t n = path ? strlen(path) : 0;
	if (r || n <= strlen(pre) + strlen(suf) || strncmp(path, pre, strlen(pre)) ||
	    strcmp(path + n - strlen(suf), suf))
		return r;
	const char *fake = "/sys/devices/tcpxsim/0000:fe:00.0";
	if (resolved) {
		snprintf(resolved, PATH_MAX, "%s", fake);
		return resolved;
	}
	return strdup(fake);
}

/* cuMemGetHandleForAddressRange(DMA_BUF_FD): the sender's registration.
 * The "dma-buf" is an eventfd the simulator maps to the range. */
int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size, int type,
				  unsigned long long flags)
{
	const int dma_buf_fd = 0x1; /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
	if (type != dma_buf_fd) {
		if (!REAL(mem_handle))
			return 801; /* CUDA_ERROR_NOT_SUPPORTED */
		return real.mem_handle(handle, dptr, size, type, flags);
	}
	pthread_mutex_lock(&S.lock);
	int fd = handle && size ? region_add(0, dptr, size) : -1;
	pthread_mutex_unlock(&S.lock);
	if (handle)
		*(int *)handle = fd;
	return fd >= 0 ? 0 : 1; /* CUDA_ERROR_INVALID_VALUE */
}

void tcpxsim_stats_get(struct tcpxsim_stats *out)
{
	pthread_mutex_lock(&S.lock);
	*out = S.st;
	pthread_mutex_unlock(&S.lock);
}

/* ---- set-up ---- */

/* A crash under the simulator says where (the plugin's own frames as
 * library+offset, for addr2line), then takes its default course. */
static void on_crash(int sig)
{
	void *frames[64];
	char line[64];
	int n = backtrace(frames, 64);
	int len = snprintf(line, sizeof(line), "tcpxsim: signal %d; backtrace:\n", sig);
	ssize_t k = write(STDERR_FILENO, line, (size_t)len);
	(void)k;
	backtrace_symbols_fd(frames, n, STDERR_FILENO);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_crashes(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
	void *warm[1];
	backtrace(warm, 1); /* loads libgcc now, not inside the handler */
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa = {.sa_handler = on_crash, .sa_flags = SA_RESETHAND};
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
}

static unsigned long env_num(const char *name, unsigned long def, unsigned long lo,
			     unsigned long hi)
{
	const char *v = getenv(name);
	char *end;
	if (!v || !*v)
		return def;
	errno = 0;
	unsigned long x = strtoul(v, &end, 0);
	if (errno || *end || x < lo || x > hi) {
		say("tcpxsim: %s=%s is not a number in [%lu, %lu]; using %lu", name, v, lo, hi, def);
		return def;
	}
	return x;
}

static void find_gpus(void)
{
	const char *list = getenv("TCPXSIM_GPUS");
	if (list && *list) {
		char copy[512], *save = NULL;
		snprintf(copy, sizeof(copy), "%s", list);
		for (char *t = strtok_r(copy, ",", &save); t && S.ngpus < MAX_GPUS;
		     t = strtok_r(NULL, ",", &save))
			snprintf(S.gpus[S.ngpus++], 32, "%s", t);
		return;
	}
	DIR *d = opendir("/proc/driver/nvidia/gpus");
	for (struct dirent *e; d && (e = readdir(d)) && S.ngpus < MAX_GPUS;)
		if (e->d_name[0] != '.')
			snprintf(S.gpus[S.ngpus++], 32, "%.31s", e->d_name);
	if (d)
		closedir(d);
	if (S.ngpus == 0)
		snprintf(S.gpus[S.ngpus++], 32, "0000:00:00.0");
}

__attribute__((constructor)) static void tcpxsim_init(void)
{
	const char *v;
	char err[256];
	pthread_once(&real.once, resolve);
	S.mss = (uint32_t)env_num("TCPXSIM_MSS", 8192, 1, 65536);
	S.bounce_bytes = env_num("TCPXSIM_BOUNCE_MB", 256, 1, 65536) << 20;
	S.pool_pages = (uint32_t)env_num("TCPXSIM_POOL_PAGES", 0, 0, UINT32_MAX);
	S.linear = (uint32_t)env_num("TCPXSIM_LINEAR", 0, 0, 1u << 20);
	S.poison = (int)env_num("TCPXSIM_POISON", 1, 0, 1);
	S.strict = (int)env_num("TCPXSIM_STRICT", 1, 0, 1);
	S.tx_delay_ns = env_num("TCPXSIM_TX_DELAY_US", 0, 0, 10000000) * 1000u;
	S.verbose = (int)env_num("TCPXSIM_LOG", 0, 0, 1);
	if (env_num("TCPXSIM_BACKTRACE", 1, 0, 1))
		catch_crashes();
	v = getenv("TCPXSIM_STEERING");
	S.steering = v && !strcmp(v, "all") ? STEER_ALL : v && !strcmp(v, "none") ? STEER_NONE
										  : STEER_RULES;
	if (v && strcmp(v, "all") && strcmp(v, "none") && strcmp(v, "rules"))
		say("tcpxsim: TCPXSIM_STEERING=%s: expected rules, all or none; using rules", v);
	find_gpus();
	v = getenv("TCPXSIM_BOUNCE");
	if (v && !strcmp(v, "host"))
		S.on_gpu = 0;
	else if (v && !strcmp(v, "gpu"))
		S.on_gpu = 1;
	else
		S.on_gpu = access("/proc/driver/nvidia/gpus", F_OK) == 0;
	if ((v = getenv("TCPXSIM_RXDM")) && !strcmp(v, "0"))
		return;
	/* Each process serves its own RxDM, in a directory of its own unless
	 * the plugin's prefix is set already. */
	/* A prefix another simulator set (our parent's, inherited) is not
	 * ours to serve: binding its sockets would take them from it. */
	v = getenv("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX");
	const char *owner = getenv("TCPXSIM_PREFIX_OWNER");
	if (owner && v && atol(owner) != (long)getpid())
		v = NULL;
	if (v && *v) {
		snprintf(S.prefix, sizeof(S.prefix), "%s", v);
		mkdir(S.prefix, 0700);
	} else {
		snprintf(S.prefix, sizeof(S.prefix), "/tmp/tcpxsim.XXXXXX");
		if (!mkdtemp(S.prefix)) {
			say("tcpxsim: mkdtemp: %s; no RxDM", strerror(errno));
			return;
		}
		S.own_prefix = 1;
		char pid[24];
		snprintf(pid, sizeof(pid), "%ld", (long)getpid());
		setenv("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX", S.prefix, 1);
		setenv("TCPXSIM_PREFIX_OWNER", pid, 1);
	}
	static const struct rxdm_ops ops = {op_buffer, op_rule};
	if (rxdm_start(S.prefix, S.gpus, S.ngpus, &ops, &S.rxdm, err, sizeof(err)))
		say("tcpxsim: RxDM not started: %s", err);
	else if (S.verbose)
		say("tcpxsim: RxDM at %s for %d GPU(s), first %s; bounce in %s memory", S.prefix,
		    S.ngpus, S.gpus[0], S.on_gpu ? "GPU" : "host");
}

__attribute__((destructor)) static void tcpxsim_fini(void)
{
	if (S.verbose || S.st.violations)
		say("tcpxsim: %llu devmem receives, %llu fragments, %llu linear bytes, %llu unsteered, "
		    "%llu starved; tokens %llu returned, %llu held; %llu devmem sends, %llu "
		    "completions; %llu violations",
		    (unsigned long long)S.st.devmem_recvs, (unsigned long long)S.st.frags,
		    (unsigned long long)S.st.linear_bytes, (unsigned long long)S.st.unsteered_recvs,
		    (unsigned long long)S.st.starved, (unsigned long long)S.st.tokens_returned,
		    (unsigned long long)S.st.tokens_held, (unsigned long long)S.st.devmem_sends,
		    (unsigned long long)S.st.completions, (unsigned long long)S.st.violations);
	rxdm_stop(S.rxdm);
	S.rxdm = NULL;
	if (S.own_prefix)
		rmdir(S.prefix);
}
