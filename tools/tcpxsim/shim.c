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
#define MAX_RULES 4096
#define SEND_STAGE (1u << 20)    /* bytes one devmem sendmsg moves at most */
#define SEND_PIECE (256u << 10)  /* its GPU reads, each sent as soon as it is done */
#define RECV_PIECE (512u << 10)  /* a receive's socket reads, each copied while the next runs */
#define SOCK_CHUNK 1024          /* the socket table: fds below SOCK_CHUNK^2 */

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

/* One socket's state.  Made once per descriptor number and never freed
 * (close resets it), so a thread that found it never reads freed memory.
 * Locks, always taken in this order: rx, then lock, then a bounce
 * buffer's pool lock, then S.lock; none is held across a copy or a socket
 * call but rx, which only this socket's receives take. */
struct sock {
	pthread_mutex_t rx;      /* one receive at a time, as the kernel's socket lock */
	pthread_mutex_t lock;    /* everything below but `cut` */
	int live;                /* set up since the descriptor was last closed */
	struct sim_bounce *b;    /* the buffer its flow is steered to, once known */
	struct sim_tokens tokens;
	struct sim_cut cut;      /* where its stream stands in packets and pages (rx) */
	uint64_t rules_seen;     /* S.rule_gen when steer() last found no rule */
	int family;
	int zerocopy;            /* SO_ZEROCOPY set */
	uint32_t zc_next;        /* next completion id */
	struct zc_pending *zc;   /* ids not yet reported, oldest first */
	uint32_t zc_head, zc_len, zc_cap;
};

/* S.lock guards the rules, the regions, the bounce buffers' creation and
 * the socket table's growth: nothing on the data path but a devmem send's
 * region look-up and a socket's first steering. */
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
	int on_gpu;              /* senders' registered memory is GPU memory */
	enum sim_bounce_mode bounce_mode;
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
	uint64_t rule_gen;       /* bumped at every rule change; starts at 1 (atomic reads) */
	struct sock **table[SOCK_CHUNK];
	struct region *regions;
	struct tcpxsim_stats st; /* atomic adds */
	void (*hook)(int fd, int what);
	uint64_t starved_said;   /* when the last starvation report was */
} S = {.lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .rule_gen = 1};
/* Recursive: the simulator's own close() calls come back through close(). */

#define STAT_ADD(field, n) __atomic_fetch_add(&S.st.field, (uint64_t)(n), __ATOMIC_RELAXED)
#define STAT_SUB(field, n) __atomic_fetch_sub(&S.st.field, (uint64_t)(n), __ATOMIC_RELAXED)

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
 * fails with `err`. */
static int violation(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int violation(int err, const char *fmt, ...)
{
	char what[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	STAT_ADD(violations, 1);
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

/* The socket of `fd`, made when `create`; NULL for descriptors past the
 * table (never steered). */
static struct sock *sock_slot(int fd, int create)
{
	if (fd < 0 || fd >= SOCK_CHUNK * SOCK_CHUNK)
		return NULL;
	struct sock **chunk = __atomic_load_n(&S.table[fd / SOCK_CHUNK], __ATOMIC_ACQUIRE);
	struct sock *s = chunk ? __atomic_load_n(&chunk[fd % SOCK_CHUNK], __ATOMIC_ACQUIRE) : NULL;
	if (s || !create)
		return s;
	pthread_mutex_lock(&S.lock);
	if (!(chunk = S.table[fd / SOCK_CHUNK]) && (chunk = calloc(SOCK_CHUNK, sizeof(*chunk))))
		__atomic_store_n(&S.table[fd / SOCK_CHUNK], chunk, __ATOMIC_RELEASE);
	if (chunk && !(s = chunk[fd % SOCK_CHUNK]) && (s = calloc(1, sizeof(*s)))) {
		pthread_mutex_init(&s->rx, NULL);
		pthread_mutex_init(&s->lock, NULL);
		__atomic_store_n(&chunk[fd % SOCK_CHUNK], s, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&S.lock);
	return s;
}

/* Set up on first use since the descriptor was opened.  Called with
 * s->lock held. */
static void sock_live(int fd, struct sock *s)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);
	if (s->live)
		return;
	s->family = getsockname(fd, (struct sockaddr *)&a, &len) == 0 ? a.ss_family : AF_INET;
	__atomic_store_n(&s->live, 1, __ATOMIC_RELEASE);
}

static struct sock *sock_get(int fd)
{
	struct sock *s = sock_slot(fd, 1);
	if (s) {
		pthread_mutex_lock(&s->lock);
		sock_live(fd, s);
		pthread_mutex_unlock(&s->lock);
	}
	return s;
}

static void sock_forget(int fd)
{
	struct sock *s = sock_slot(fd, 0);
	if (!s || !__atomic_load_n(&s->live, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&s->rx);
	pthread_mutex_lock(&s->lock);
	if (s->b) {
		STAT_SUB(tokens_held, s->tokens.held);
		pthread_mutex_lock(&s->b->lock);
		sim_tokens_drop_all(&s->tokens, &s->b->pool);
		if (s->cut.page_left)
			sim_pool_put(&s->b->pool, s->cut.page);
		pthread_mutex_unlock(&s->b->lock);
		sim_tokens_fini(&s->tokens);
	}
	free(s->zc);
	s->b = NULL;
	s->cut = (struct sim_cut){0};
	s->rules_seen = 0;
	s->zerocopy = 0;
	s->zc_next = 0;
	s->zc = NULL;
	s->zc_head = s->zc_len = s->zc_cap = 0;
	__atomic_store_n(&s->live, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->rx);
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
 * steered and its bytes arrive as ordinary data.  Called with s->lock held. */
static struct sim_bounce *steer(int fd, struct sock *s)
{
	struct sockaddr_storage me, peer;
	socklen_t lm = sizeof(me), lp = sizeof(peer);
	char mip[64], pip[64], err[256], gpu[32] = "";
	int mport, pport;
	uint64_t gen = __atomic_load_n(&S.rule_gen, __ATOMIC_ACQUIRE);
	if (s->b || S.steering == STEER_NONE || s->rules_seen == gen)
		return s->b;
	if (S.steering == STEER_ALL) {
		snprintf(gpu, sizeof(gpu), "%s", S.gpus[0]);
	} else {
		if (getsockname(fd, (struct sockaddr *)&me, &lm) ||
		    getpeername(fd, (struct sockaddr *)&peer, &lp) ||
		    addr_text(&me, mip, sizeof(mip), &mport) || addr_text(&peer, pip, sizeof(pip), &pport))
			return NULL;
		pthread_mutex_lock(&S.lock);
		for (int i = 0; i < S.nrules && !gpu[0]; i++) {
			const struct rxdm_rule *r = &S.rules[i];
			if (r->src_port == pport && r->dst_port == mport && !strcmp(r->src_ip, pip) &&
			    !strcmp(r->dst_ip, mip))
				snprintf(gpu, sizeof(gpu), "%s", r->gpu[0] ? r->gpu : S.gpus[0]);
		}
		pthread_mutex_unlock(&S.lock);
	}
	if (!gpu[0]) {
		s->rules_seen = gen; /* no need to look again until they change */
		return NULL;
	}
	pthread_mutex_lock(&S.lock);
	struct sim_bounce *b = bounce_of(gpu, err, sizeof(err));
	pthread_mutex_unlock(&S.lock);
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

/* Called with S.lock held. */
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
		if (sim_bounce_create(gpu, bytes, S.bounce_mode, now_ns(), &S.bounce[i], err, errlen))
			return NULL;
		if (S.verbose)
			say("tcpxsim: bounce buffer for %s: %zu bytes in %s memory", gpu, S.bounce[i]->size,
			    S.bounce_mode == SIM_BOUNCE_GPU ? "GPU" : S.bounce_mode == SIM_BOUNCE_HOSTMAP
				   ? "GPU-mapped host" : "host");
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
	__atomic_store_n(&S.st.rules, (uint64_t)S.nrules, __ATOMIC_RELAXED);
	__atomic_store_n(&S.rule_gen, S.rule_gen + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&S.lock);
	if (S.verbose)
		say("tcpxsim: rule %s %s:%d -> %s:%d gpu %s%s", install ? "install" : "remove", r.src_ip,
		    r.src_port, r.dst_ip, r.dst_port, r.gpu, rc ? " (refused)" : "");
	return rc;
}

static int rules_exist(void)
{
	return __atomic_load_n(&S.st.rules, __ATOMIC_RELAXED) != 0;
}

/* ---- receive ---- */

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

static void test_hook(int fd, int what)
{
	void (*fn)(int, int) = __atomic_load_n(&S.hook, __ATOMIC_ACQUIRE);
	if (fn)
		fn(fd, what);
}

/* Once per 5 s while starved: who holds the pages (a plugin that does not
 * return its tokens, or a window larger than the buffer).  `me` (its rx
 * held) is counted as is; other sockets busy at the moment are left out. */
static void report_starved(const struct sim_bounce *b, struct sock *me)
{
	uint64_t now = now_ns(), held = 0;
	uint64_t last = __atomic_load_n(&S.starved_said, __ATOMIC_RELAXED);
	int socks = 0, open = 0, busy = 0;
	if (now - last < 5000000000ull ||
	    !__atomic_compare_exchange_n(&S.starved_said, &last, now, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	for (int c = 0; c < SOCK_CHUNK; c++) {
		struct sock **chunk = __atomic_load_n(&S.table[c], __ATOMIC_ACQUIRE);
		for (int i = 0; chunk && i < SOCK_CHUNK; i++) {
			struct sock *s = __atomic_load_n(&chunk[i], __ATOMIC_ACQUIRE);
			int mine = s == me;
			if (!s || (!mine && pthread_mutex_trylock(&s->rx))) {
				busy += s != NULL;
				continue;
			}
			pthread_mutex_lock(&s->lock);
			if (s->live && s->b == b) {
				socks++;
				held += s->tokens.held;
				open += s->cut.page_left != 0;
			}
			pthread_mutex_unlock(&s->lock);
			if (!mine)
				pthread_mutex_unlock(&s->rx);
		}
	}
	pthread_mutex_lock((pthread_mutex_t *)&b->lock);
	uint32_t nfree = b->pool.nfree, npages = b->pool.npages;
	pthread_mutex_unlock((pthread_mutex_t *)&b->lock);
	say("tcpxsim: bounce buffer of %s starved: %u of %u pages free, %llu tokens held and %d "
	    "pages open over %d sockets (%d busy in a receive, not counted: its pages are taken "
	    "up front)", b->gpu, nfree, npages,
	    (unsigned long long)held, open, socks, busy);
}

/* Hand out the fragments of bytes [*off, end) of the lane's buffer, from
 * fragment *nf on, as one read of them all would: with `last` 0, a
 * fragment that `end` would cut short waits for the next socket read.
 * Fresh pages come from `resv` (taken by the caller), *ri of them used.
 * With `copy`, the fragments' bytes are copied from the lane's buffer into
 * their pages (else they are there already).  Called with s->rx held;
 * takes s->lock and the pool's lock. */
static void give_frags(struct sock *s, struct sim_bounce *b, struct sim_lane *l,
		       struct msghdr *m, size_t *used, size_t *off, size_t end, int last, int copy,
		       size_t *nf, const uint32_t *resv, size_t nresv, size_t *ri)
{
	size_t first = *nf, from = *off;
	pthread_mutex_lock(&s->lock);
	pthread_mutex_lock(&b->lock);
	while (*off < end && *nf < TCPXSIM_MAX_FRAGS) {
		uint32_t token, page;
		int fresh;
		uint32_t len = sim_cut_peek(&s->cut, S.mss, end - *off, &fresh);
		if (!last && len == end - *off && sim_cut_peek(&s->cut, S.mss, SIZE_MAX, &fresh) > len)
			break; /* cut short by this read's end: the next read may continue it */
		if (fresh && *ri == nresv) /* cannot happen: reserved by the plan */
			break;
		page = fresh ? resv[(*ri)++] : s->cut.page;
		l->lens[*nf] = len;
		l->offs[*nf] = page * DEVMEM_PAGE + (fresh ? 0 : DEVMEM_PAGE - s->cut.page_left);
		sim_pool_ref(&b->pool, page); /* the token's */
		sim_tokens_add(&s->tokens, page, &token);
		if (sim_cut_take(&s->cut, S.mss, len, fresh, page))
			sim_pool_put(&b->pool, page); /* closed: the socket's hold ends */
		add_cmsg(m, used, DEVMEM_SCM_OFFSET, l->offs[*nf], len, token);
		*off += len;
		(*nf)++;
	}
	pthread_mutex_unlock(&b->lock);
	pthread_mutex_unlock(&s->lock);
	STAT_ADD(frags, *nf - first);
	STAT_ADD(tokens_held, *nf - first);
	if (copy && sim_bounce_write_frags(b, l, l->buf + from, first, *nf - first))
		say("tcpxsim: writing %zu fragments into the bounce buffer failed", *nf - first);
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
		uint32_t len = sim_cut_peek(&t, S.mss, fit - done, &fresh);
		uint32_t page = fresh ? l->pages[ri++] : t.page;
		size_t pos = (size_t)page * DEVMEM_PAGE + (fresh ? 0 : DEVMEM_PAGE - t.page_left);
		sim_cut_take(&t, S.mss, len, fresh, page);
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
			test_hook(fd, 0);
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
static ssize_t devmem_recv(int fd, struct msghdr *m, int flags)
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
	struct sock *s = sock_get(fd);
	struct sim_bounce *b = NULL;
	size_t free_tokens = 0;
	if (s) {
		pthread_mutex_lock(&s->rx);
		pthread_mutex_lock(&s->lock);
		if ((b = steer(fd, s)))
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
	size_t linear = S.linear < want ? S.linear : want;
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
	size_t fit = sim_cut_fit(&s->cut, S.mss, room, frags, SIZE_MAX);
	size_t need = sim_cut_fresh(&s->cut, S.mss, fit), nresv = 0, ri = 0;
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
		fit = sim_cut_fit(&s->cut, S.mss, fit, frags, nresv);
	if (fit == 0 && room > 0) {
		/* No free page: the NIC drops, TCP backs off, nothing to read. */
		STAT_ADD(starved, 1);
		report_starved(b, s);
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
			test_hook(fd, 0);
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
			give_frags(s, b, l, m, &used, &off, got, 0, 1, &nf, l->pages, nresv, &ri);
	}
	if (got)
		give_frags(s, b, l, m, &used, &off, got, 1, !b->host, &nf, l->pages, nresv, &ri);
	if (ri < nresv) {
		pthread_mutex_lock(&b->lock);
		while (ri < nresv)
			sim_pool_put(&b->pool, l->pages[--nresv]);
		pthread_mutex_unlock(&b->lock);
	}
	if (sim_lane_sync(l))
		say("tcpxsim: copying %zu fragments into the bounce buffer failed", nf);
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
	f->page[f->n++] = page; /* cap: every token named */
}

/* SO_DEVMEM_DONTNEED.  Tokens under the socket's lock and page references
 * under the pool's; pages whose last token this was are poisoned outside
 * both and only then go back to the pool. */
static int dontneed(int fd, const void *val, socklen_t len)
{
	uint32_t bad = 0;
	int rc = 0;
	struct sock *s = sock_slot(fd, 0);
	struct freed_pages f = {0};
	const struct devmem_token_range *r = val;
	size_t n = len / sizeof(struct devmem_token_range), named = 0;
	if (!val || len % sizeof(struct devmem_token_range))
		return violation(EINVAL, "SO_DEVMEM_DONTNEED on fd %d: %u bytes is not a whole array "
					 "of {start, count}", fd, (unsigned)len);
	for (size_t i = 0; i < n && named <= UINT32_MAX; i++)
		named += r[i].count;
	if (s)
		pthread_mutex_lock(&s->lock);
	struct sim_bounce *b = s && s->live ? s->b : NULL;
	if (!b) {
		if (s)
			pthread_mutex_unlock(&s->lock);
		return violation(EINVAL, "SO_DEVMEM_DONTNEED on fd %d, which holds no devmem tokens",
				 fd);
	}
	if (S.poison && named <= s->tokens.held && !(f.page = malloc(sizeof(*f.page) * (named + 1)))) {
		pthread_mutex_unlock(&s->lock);
		errno = ENOMEM;
		return -1;
	}
	uint64_t before = s->tokens.held;
	/* More tokens named than held: the return fails, nothing collected. */
	pthread_mutex_lock(&b->lock);
	rc = sim_tokens_return(&s->tokens, &b->pool, r, n, &bad, f.page ? collect_page : NULL, &f);
	pthread_mutex_unlock(&b->lock);
	uint64_t gone = before - s->tokens.held;
	pthread_mutex_unlock(&s->lock);
	STAT_ADD(tokens_returned, gone);
	STAT_SUB(tokens_held, gone);
	if (f.n) {
		struct sim_lane *l = b->on_gpu ? sim_lane_get(b->ctx) : NULL;
		if ((b->on_gpu && !l) || sim_bounce_poison(b, l, f.page, f.n))
			say("tcpxsim: poisoning %zu returned pages failed", f.n);
		sim_lane_put(l);
		pthread_mutex_lock(&b->lock);
		for (size_t i = 0; i < f.n; i++)
			sim_pool_free(&b->pool, f.page[i]);
		pthread_mutex_unlock(&b->lock);
	}
	free(f.page);
	if (rc)
		rc = violation(EINVAL, "SO_DEVMEM_DONTNEED on fd %d: token %u is not held by this "
				       "socket (never given, returned already, or named twice)",
			       fd, bad);
	return rc;
}

/* ---- send ---- */

/* Called with S.lock held. */
static struct region *region_find(int fd)
{
	for (struct region *r = S.regions; r; r = r->next)
		if (r->fd == fd)
			return r;
	return NULL;
}

/* Called with S.lock held. */
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
	pthread_mutex_lock(&S.lock);
	for (struct region **p = &S.regions; *p; p = &(*p)->next)
		if ((*p)->fd == fd) {
			struct region *r = *p;
			*p = r->next;
			free(r);
			break;
		}
	pthread_mutex_unlock(&S.lock);
}

/* A send that asked for MSG_ZEROCOPY on a socket with SO_ZEROCOPY gets the
 * socket's next completion id, reported on the error queue later. */
static void zc_account(int fd, int flags, ssize_t sent)
{
	if (!(flags & MSG_ZEROCOPY) || sent <= 0)
		return;
	struct sock *s = sock_get(fd);
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
		(struct zc_pending){s->zc_next++, now_ns() + S.tx_delay_ns};
out:
	pthread_mutex_unlock(&s->lock);
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

/* A devmem send: up to SEND_STAGE bytes read from the GPU in pieces on a
 * lane of its own, each piece written to the socket as soon as its copy is
 * done while the next ones are still being read.  No lock is held across
 * the copies or the socket writes. */
static ssize_t devmem_send(int fd, const struct msghdr *m, const struct cmsghdr *c, int flags)
{
	int v[2];
	size_t len = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		len += m->msg_iov[i].iov_len;
	if (c->cmsg_len < CMSG_LEN(sizeof(v)))
		return violation(EINVAL, "devmem sendmsg on fd %d: SCM_DEVMEM_OFFSET of %zu bytes", fd,
				 (size_t)c->cmsg_len);
	memcpy(v, CMSG_DATA(c), sizeof(v));
	pthread_mutex_lock(&S.lock);
	struct region *rp = region_find(v[0]);
	struct region r = rp ? *rp : (struct region){0};
	pthread_mutex_unlock(&S.lock);
	if (!rp || !r.pages) {
		/* What the kernel answers; TCPX's socket threads do this after
		 * deregMr closed the file under a send still queued. */
		errno = EBADF;
		return -1;
	}
	if (v[1] < 0 || (size_t)v[1] > r.size || len > r.size - (size_t)v[1])
		return violation(EFAULT, "devmem sendmsg on fd %d: [%d, +%zu) lies outside the %zu "
					 "registered bytes", fd, v[1], len, r.size);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (len == 0 || poll(&p, 1, 0) != 1) {
		errno = len ? EAGAIN : EINVAL;
		return -1;
	}
	if (len > SEND_STAGE)
		len = SEND_STAGE;
	uint64_t src = r.base + (uint64_t)v[1];
	if (!S.on_gpu) {
		/* Host mode: registered host memory goes to the socket as is. */
		test_hook(fd, 1);
		ssize_t k = REAL(send)(fd, (const void *)(uintptr_t)src, len,
				       (flags & ~MSG_ZEROCOPY) | MSG_DONTWAIT);
		if (k > 0) {
			STAT_ADD(devmem_sends, 1);
			zc_account(fd, flags, k);
		}
		return k;
	}
	int ok;
	void *ctx = sim_mem_ctx(src, S.on_gpu, &ok);
	struct sim_lane *l = ok ? sim_lane_get(ctx) : NULL;
	if (!l) {
		errno = ok ? ENOMEM : EFAULT;
		return -1;
	}
	size_t pieces = (len + SEND_PIECE - 1) / SEND_PIECE, queued = 0, sent = 0;
	ssize_t k = 0;
	int err = 0;
	for (; queued < pieces; queued++) {
		size_t at = queued * SEND_PIECE, n = len - at < SEND_PIECE ? len - at : SEND_PIECE;
		if (sim_mem_read(l, l->buf + at, src + at, n, (int)queued))
			break;
	}
	for (size_t i = 0; i < queued; i++) {
		size_t at = i * SEND_PIECE, n = len - at < SEND_PIECE ? len - at : SEND_PIECE;
		if (sim_mem_wait(l, (int)i)) {
			k = -1, err = EFAULT;
			break;
		}
		if (i == 0)
			test_hook(fd, 1);
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

static ssize_t errqueue(int fd, struct msghdr *m, int flags)
{
	struct sock *s = sock_slot(fd, 0);
	if (s)
		pthread_mutex_lock(&s->lock);
	if (!s || !s->live || !s->zerocopy) {
		if (s)
			pthread_mutex_unlock(&s->lock);
		return REAL(recvmsg)(fd, m, flags);
	}
	uint64_t now = now_ns();
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
	struct sock *s = sock_slot(fd, 0);
	if (s) {
		pthread_mutex_lock(&s->lock);
		refuse = s->live && s->b;
		pthread_mutex_unlock(&s->lock);
	}
	if (!refuse && S.steering == STEER_RULES && rules_exist() && (s = sock_get(fd))) {
		pthread_mutex_lock(&s->lock);
		refuse = steer(fd, s) != NULL;
		pthread_mutex_unlock(&s->lock);
	}
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
	zc_account(fd, flags, sent);
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
		struct sock *s = sock_get(fd);
		if (s) {
			pthread_mutex_lock(&s->lock);
			s->zerocopy = *(const int *)val != 0;
			pthread_mutex_unlock(&s->lock);
		}
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
	sock_forget(fd);
	region_forget(fd);
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
	uint64_t *to = (uint64_t *)out, *from = (uint64_t *)&S.st;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

void tcpxsim_set_test_hook(void (*fn)(int fd, int what))
{
	__atomic_store_n(&S.hook, fn, __ATOMIC_RELEASE);
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
	else if (v && (!strcmp(v, "gpu") || !strcmp(v, "hostmap")))
		S.on_gpu = 1;
	else
		S.on_gpu = access("/proc/driver/nvidia/gpus", F_OK) == 0;
	S.bounce_mode = !S.on_gpu ? SIM_BOUNCE_HOST : v && !strcmp(v, "hostmap") ? SIM_BOUNCE_HOSTMAP
										   : SIM_BOUNCE_GPU;
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
		    S.ngpus, S.gpus[0], S.bounce_mode == SIM_BOUNCE_GPU ? "GPU" :
		    S.bounce_mode == SIM_BOUNCE_HOSTMAP ? "GPU-mapped host" : "host");
}

__attribute__((destructor)) static void tcpxsim_fini(void)
{
	struct tcpxsim_stats st;
	tcpxsim_stats_get(&st);
	if (S.verbose || st.violations)
		say("tcpxsim: %llu devmem receives, %llu fragments, %llu linear bytes, %llu unsteered, "
		    "%llu starved; tokens %llu returned, %llu held; %llu devmem sends, %llu "
		    "completions; %llu violations",
		    (unsigned long long)st.devmem_recvs, (unsigned long long)st.frags,
		    (unsigned long long)st.linear_bytes, (unsigned long long)st.unsteered_recvs,
		    (unsigned long long)st.starved, (unsigned long long)st.tokens_returned,
		    (unsigned long long)st.tokens_held, (unsigned long long)st.devmem_sends,
		    (unsigned long long)st.completions, (unsigned long long)st.violations);
	rxdm_stop(S.rxdm);
	S.rxdm = NULL;
	if (S.own_prefix)
		rmdir(S.prefix);
}
