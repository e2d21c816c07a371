/*
 * sim_ceiling: the TCPX simulator's own ceiling (issue #28).  N loopback
 * socket pairs move data through libtcpxsim.so's devmem paths with no
 * plugin above them: each sender sendmsg()s with SCM_DEVMEM_OFFSET from
 * registered GPU memory (MSG_ZEROCOPY, completions drained), each receiver
 * recvmsg(MSG_SOCK_DEVMEM)s into the bounce buffer and returns every
 * token at once (the plugin returns them after its unpack: this is the
 * bound).  The same sockets first move the same bytes as plain TCP (no
 * rule steers them yet), so the run gives raw loopback TCP and the
 * simulator side by side, on the same sockets, threads and call sizes.
 *
 * Tokens go back from a thread of their own per socket, as a plugin's
 * irecvConsumed runs beside its socket thread (--return inline: from the
 * receiving thread, after each receive).
 *
 * Linked to libtcpxsim.so (its socket calls come first); the flows are
 * steered by rules sent to the simulator's RxDM as a plugin sends them.
 *
 *   sim_ceiling [-S sockets] [--gpus 0,1,..] [-s bytes per socket]
 *               [--call bytes] [-n iters] [-w warmup] [--mode raw|devmem|both]
 *               [--return thread|inline] [--json FILE]
 *
 * Socket i's flow is steered to GPU gpus[i % n], which also holds its
 * sender's memory.  Without CUDA (or TCPXSIM_BOUNCE=host) memory is host
 * memory and the GPUs are TCPXSIM_GPUS's.
 * Exit status: 0, 1 on an error, 2 usage.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#ifdef TP_BENCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "bench_util.h"
#include "devmem.h"
#include "pb.h"

int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size, int type,
				  unsigned long long flags);

#define MAX_SOCKS 64
#define MAX_GPUS 16
#define REGION (16u << 20) /* each sender's registered memory */
#define CTL_FRAGS 2048

struct opts {
	int nsocks;
	int gpus[MAX_GPUS], ngpus;
	size_t size, call;
	int iters, warmup;
	int raw, devmem;
	int inline_return;
	const char *json;
};

/* Token ranges on their way from a receiver to its returning thread. */
#define RET_SLOTS 8
struct ret_batch {
	size_t n;
	struct devmem_token_range r[CTL_FRAGS];
};

struct flow {
	int snd, rcv;
	int gpu;            /* index into opts.gpus */
	int pages;          /* the sender's registration */
	void *mem;          /* registered: devmem sends read it */
	char *host;         /* plain sends' bytes */
	int devmem;         /* this phase */
	size_t size, call;
	pthread_barrier_t *start, *stop;
	int iters;
	int failed;
	pthread_t ts, tr, tt;
	/* the returning thread's queue */
	int inline_return;
	pthread_mutex_t ql;
	pthread_cond_t qc;
	struct ret_batch *q;
	unsigned qhead, qlen;
	int qdone, qfailed;
};

static int on_gpu;
static char pci[MAX_GPUS][32];

static int fail(const char *what)
{
	fprintf(stderr, "sim_ceiling: %s: %s\n", what, strerror(errno));
	return -1;
}

/* ---- the RxDM, as a plugin talks to it ---- */

static int rxdm_call(const char *service, const uint8_t *req, size_t len)
{
	const char *prefix = getenv("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len}, ans[64];
	if (!prefix) {
		fprintf(stderr, "sim_ceiling: no RxDM (is libtcpxsim.so loaded?)\n");
		return -1;
	}
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/%s", prefix, service);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) || send(s, hdr, 2, 0) != 2 ||
	    send(s, req, len, 0) != (ssize_t)len || recv(s, hdr, 2, MSG_WAITALL) != 2) {
		if (s >= 0)
			close(s);
		return fail("RxDM request");
	}
	size_t n = (size_t)hdr[0] << 8 | hdr[1];
	ssize_t k = n <= sizeof(ans) ? recv(s, ans, n, MSG_WAITALL) : -1;
	close(s);
	struct rxdm_request r;
	if (k != (ssize_t)n || rxdm_parse(ans, n, &r) || r.raw_len != 3 || memcmp(r.raw, "Ok.", 3)) {
		fprintf(stderr, "sim_ceiling: the RxDM refused a rule\n");
		return -1;
	}
	return 0;
}

static int steer(const struct flow *f)
{
	struct sockaddr_in pa, ma;
	socklen_t l1 = sizeof(pa), l2 = sizeof(ma);
	struct rxdm_rule r = {.flow_type = 1, .queue_id = -1};
	uint8_t req[512];
	if (getsockname(f->snd, (struct sockaddr *)&pa, &l1) ||
	    getsockname(f->rcv, (struct sockaddr *)&ma, &l2))
		return fail("getsockname");
	inet_ntop(AF_INET, &pa.sin_addr, r.src_ip, sizeof(r.src_ip));
	inet_ntop(AF_INET, &ma.sin_addr, r.dst_ip, sizeof(r.dst_ip));
	r.src_port = ntohs(pa.sin_port);
	r.dst_port = ntohs(ma.sin_port);
	snprintf(r.gpu, sizeof(r.gpu), "%s", pci[f->gpu]);
	size_t n = rxdm_put_rule(req, sizeof(req), &r);
	return n ? rxdm_call(RXDM_RULE_INSTALL, req, n) : -1;
}

/* ---- set-up ---- */

static int tcp_pair(int *snd, int *rcv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1) ||
	    getsockname(ls, (struct sockaddr *)&a, &l))
		return fail("listen");
	*snd = socket(AF_INET, SOCK_STREAM, 0);
	if (*snd < 0 || connect(*snd, (struct sockaddr *)&a, sizeof(a)))
		return fail("connect");
	*rcv = accept(ls, NULL, NULL);
	close(ls);
	if (*rcv < 0)
		return fail("accept");
	setsockopt(*snd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one));
	return 0;
}

static int gpu_setup(struct opts *o)
{
	const char *mode = getenv("TCPXSIM_BOUNCE");
	on_gpu = !(mode && !strcmp(mode, "host"));
#ifdef TP_BENCH_HAVE_CUDA
	if (on_gpu) {
		for (int i = 0; i < o->ngpus; i++) {
			if (cudaDeviceGetPCIBusId(pci[i], sizeof(pci[i]), o->gpus[i]) != cudaSuccess) {
				fprintf(stderr, "sim_ceiling: no GPU %d\n", o->gpus[i]);
				return -1;
			}
			for (char *p = pci[i]; *p; p++)
				*p = (char)(*p >= 'A' && *p <= 'F' ? *p - 'A' + 'a' : *p);
		}
		return 0;
	}
#else
	if (on_gpu) {
		fprintf(stderr, "sim_ceiling: built without CUDA: set TCPXSIM_BOUNCE=host\n");
		return -1;
	}
#endif
	/* Host mode: the simulator's GPU names. */
	const char *list = getenv("TCPXSIM_GPUS");
	char copy[512], names[MAX_GPUS][32], *save = NULL, *t;
	snprintf(copy, sizeof(copy), "%s", list ? list : "0000:00:00.0");
	int n = 0;
	for (t = strtok_r(copy, ",", &save); t && n < MAX_GPUS; t = strtok_r(NULL, ",", &save))
		snprintf(names[n++], sizeof(names[0]), "%s", t);
	for (int i = 0; i < o->ngpus; i++) {
		if (o->gpus[i] >= n) {
			fprintf(stderr, "sim_ceiling: TCPXSIM_GPUS names no GPU %d\n", o->gpus[i]);
			return -1;
		}
		memcpy(pci[i], names[o->gpus[i]], sizeof(pci[i]));
	}
	return 0;
}

static int mem_setup(struct flow *f, const struct opts *o)
{
#ifdef TP_BENCH_HAVE_CUDA
	if (on_gpu) {
		if (cudaSetDevice(o->gpus[f->gpu]) != cudaSuccess ||
		    cudaMalloc(&f->mem, REGION) != cudaSuccess ||
		    cudaMemset(f->mem, 0x3c, REGION) != cudaSuccess || cudaDeviceSynchronize())
			return fail("cudaMalloc");
	}
#endif
	if (!on_gpu) {
		if (!(f->mem = malloc(REGION)))
			return fail("malloc");
		memset(f->mem, 0x3c, REGION);
	}
	if (!(f->host = calloc(1, f->call)))
		return fail("malloc");
	int dmabuf = -1;
	if (cuMemGetHandleForAddressRange(&dmabuf, (uintptr_t)f->mem, REGION, 1, 0) || dmabuf < 0)
		return fail("registering the sender's memory");
	struct devmem_create_pages info = {.dma_buf_fd = dmabuf};
	f->pages = ioctl(dmabuf, DEVMEM_DMA_BUF_CREATE_PAGES, &info);
	return f->pages < 0 ? fail("DMA_BUF_CREATE_PAGES") : 0;
}

/* ---- the flows ---- */

static int wait_for(int fd, short ev)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int rc = poll(&p, 1, 10000);
	if (rc == 1)
		return 0;
	errno = rc == 0 ? ETIMEDOUT : errno;
	return -1;
}

static void drain_completions(int fd)
{
	char ctl[128];
	for (;;) {
		struct msghdr m = {.msg_control = ctl, .msg_controllen = sizeof(ctl)};
		if (recvmsg(fd, &m, MSG_ERRQUEUE) < 0)
			return;
	}
}

static int send_all(struct flow *f)
{
	size_t done = 0;
	while (done < f->size) {
		size_t n = f->size - done < f->call ? f->size - done : f->call;
		ssize_t k;
		if (f->devmem) {
			int v[2] = {f->pages, (int)(done % (REGION - f->call + 1) / 4096 * 4096)};
			char ctl[CMSG_SPACE(sizeof(v))];
			/* The iovec gives only the length (the bytes come from the
			 * registered region), but it must still describe memory. */
			struct iovec iov = {f->host, n};
			struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
					   .msg_controllen = sizeof(ctl)};
			struct cmsghdr *c = CMSG_FIRSTHDR(&m);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = DEVMEM_SCM_OFFSET;
			c->cmsg_len = CMSG_LEN(sizeof(v));
			memcpy(CMSG_DATA(c), v, sizeof(v));
			k = sendmsg(f->snd, &m, MSG_ZEROCOPY | MSG_DONTWAIT);
			drain_completions(f->snd);
		} else {
			k = send(f->snd, f->host, n, MSG_DONTWAIT);
		}
		if (k > 0) {
			done += (size_t)k;
		} else if (k < 0 && errno == EAGAIN) {
			if (wait_for(f->snd, POLLOUT))
				return fail("send: peer stalled");
		} else {
			return fail("send");
		}
	}
	return 0;
}

static int return_now(struct flow *f, const struct devmem_token_range *r, size_t nr)
{
	return setsockopt(f->rcv, SOL_SOCKET, DEVMEM_SO_DONTNEED, r, (socklen_t)(nr * sizeof(r[0])));
}

/* Hand a receive's tokens to the returning thread (waiting while its queue
 * is full), or return them here with --return inline. */
static int give_back(struct flow *f, const struct devmem_token_range *r, size_t nr)
{
	if (f->inline_return)
		return return_now(f, r, nr);
	pthread_mutex_lock(&f->ql);
	while (f->qlen == RET_SLOTS && !f->qfailed)
		pthread_cond_wait(&f->qc, &f->ql);
	int bad = f->qfailed;
	if (!bad) {
		struct ret_batch *b = &f->q[(f->qhead + f->qlen) % RET_SLOTS];
		memcpy(b->r, r, nr * sizeof(*r));
		b->n = nr;
		f->qlen++;
		pthread_cond_broadcast(&f->qc);
	}
	pthread_mutex_unlock(&f->ql);
	errno = bad ? EINVAL : errno;
	return bad ? -1 : 0;
}

static void *returner(void *arg)
{
	struct flow *f = arg;
	pthread_mutex_lock(&f->ql);
	for (;;) {
		while (!f->qlen && !f->qdone)
			pthread_cond_wait(&f->qc, &f->ql);
		if (!f->qlen)
			break;
		struct ret_batch *b = &f->q[f->qhead];
		pthread_mutex_unlock(&f->ql);
		int rc = return_now(f, b->r, b->n);
		pthread_mutex_lock(&f->ql);
		if (rc && !f->qfailed) {
			fail("SO_DEVMEM_DONTNEED");
			f->qfailed = 1;
		}
		f->qhead = (f->qhead + 1) % RET_SLOTS;
		f->qlen--;
		pthread_cond_broadcast(&f->qc);
	}
	pthread_mutex_unlock(&f->ql);
	return NULL;
}

static int recv_all(struct flow *f, uint8_t *buf, char *ctl, size_t ctl_len)
{
	size_t done = 0;
	while (done < f->size) {
		size_t n = f->size - done < f->call ? f->size - done : f->call;
		ssize_t k;
		if (wait_for(f->rcv, POLLIN))
			return fail("recv: peer stalled");
		if (f->devmem) {
			struct devmem_token_range r[CTL_FRAGS];
			size_t nr = 0;
			struct iovec iov = {buf, n};
			struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
					   .msg_controllen = ctl_len};
			k = recvmsg(f->rcv, &m, DEVMEM_MSG_SOCK_DEVMEM | MSG_DONTWAIT);
			for (struct cmsghdr *c = k > 0 ? CMSG_FIRSTHDR(&m) : NULL; c;
			     c = CMSG_NXTHDR(&m, c)) {
				struct devmem_frag fr;
				if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != DEVMEM_SCM_OFFSET)
					continue;
				memcpy(&fr, CMSG_DATA(c), sizeof(fr));
				if (nr && r[nr - 1].start + r[nr - 1].count == fr.frag_token)
					r[nr - 1].count++;
				else
					r[nr++] = (struct devmem_token_range){fr.frag_token, 1};
			}
			if (nr && give_back(f, r, nr))
				return fail("SO_DEVMEM_DONTNEED");
		} else {
			k = recv(f->rcv, buf, n, MSG_DONTWAIT);
		}
		if (k > 0)
			done += (size_t)k;
		else if (k == 0)
			return fail("recv: closed");
		else if (errno != EAGAIN) /* EAGAIN: starved, or raced: poll again */
			return fail("recv");
	}
	return 0;
}

static void *sender(void *arg)
{
	struct flow *f = arg;
	for (int i = 0; i < f->iters; i++) {
		pthread_barrier_wait(f->start);
		if (!f->failed && send_all(f))
			f->failed = 1;
		pthread_barrier_wait(f->stop);
	}
	return NULL;
}

static void *receiver(void *arg)
{
	struct flow *f = arg;
	size_t ctl_len = CTL_FRAGS * CMSG_SPACE(sizeof(struct devmem_frag));
	uint8_t *buf = malloc(f->call);
	char *ctl = malloc(ctl_len);
	for (int i = 0; i < f->iters; i++) {
		pthread_barrier_wait(f->start);
		if (!f->failed && (!buf || !ctl || recv_all(f, buf, ctl, ctl_len)))
			f->failed = 1;
		pthread_barrier_wait(f->stop);
	}
	free(buf);
	free(ctl);
	return NULL;
}

/* One phase: warm-up and timed iterations; the median GB/s. */
static int phase(struct flow *fl, const struct opts *o, int devmem, double *gbps)
{
	int iters = o->warmup + o->iters, bad = 0;
	pthread_barrier_t start, stop;
	double t[256];
	pthread_barrier_init(&start, NULL, (unsigned)(2 * o->nsocks + 1));
	pthread_barrier_init(&stop, NULL, (unsigned)(2 * o->nsocks + 1));
	for (int i = 0; i < o->nsocks; i++) {
		fl[i].devmem = devmem;
		fl[i].iters = iters;
		fl[i].start = &start;
		fl[i].stop = &stop;
		fl[i].inline_return = o->inline_return;
		fl[i].qdone = 0;
		pthread_create(&fl[i].ts, NULL, sender, &fl[i]);
		pthread_create(&fl[i].tr, NULL, receiver, &fl[i]);
		if (devmem && !o->inline_return)
			pthread_create(&fl[i].tt, NULL, returner, &fl[i]);
	}
	for (int i = 0; i < iters; i++) {
		pthread_barrier_wait(&start);
		double t0 = bench_now_s();
		pthread_barrier_wait(&stop);
		if (i >= o->warmup)
			t[i - o->warmup] = bench_now_s() - t0;
	}
	for (int i = 0; i < o->nsocks; i++) {
		pthread_join(fl[i].ts, NULL);
		pthread_join(fl[i].tr, NULL);
		if (devmem && !o->inline_return) {
			pthread_mutex_lock(&fl[i].ql);
			fl[i].qdone = 1;
			pthread_cond_broadcast(&fl[i].qc);
			pthread_mutex_unlock(&fl[i].ql);
			pthread_join(fl[i].tt, NULL);
		}
		bad |= fl[i].failed | fl[i].qfailed;
	}
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&stop);
	for (int i = 1; i < o->iters; i++) /* insertion sort: a handful */
		for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
			double x = t[j];
			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	*gbps = (double)o->size * o->nsocks / t[o->iters / 2] / 1e9;
	return bad ? -1 : 0;
}

/* One record per phase run: {"bench", "phase", "size" (bytes per socket),
 * "gbps" (all sockets), "config": {...}}. */
static int write_json(const struct opts *o, double raw, double dev)
{
	FILE *f = strcmp(o->json, "-") ? fopen(o->json, "w") : stdout;
	int first = 1;
	if (!f)
		return fail(o->json);
	fputs("[\n", f);
	for (int p = 0; p < 2; p++) {
		if (!(p ? o->devmem : o->raw))
			continue;
		fprintf(f, "%s  {\"bench\": \"sim_ceiling\", \"phase\": \"%s\", \"size\": %zu, "
			"\"iters\": %d, \"gbps\": %.4f, \"config\": {\"sockets\": %d, \"call\": %zu, "
			"\"warmup\": %d, \"mem\": \"%s\", \"return\": \"%s\", \"gpus\": [",
			first ? "" : ",\n", p ? "simulator" : "raw_tcp", o->size, o->iters,
			p ? dev : raw, o->nsocks, o->call, o->warmup, on_gpu ? "cuda" : "host",
			o->inline_return ? "inline" : "thread");
		for (int g = 0; g < o->ngpus; g++)
			fprintf(f, "%s%d", g ? ", " : "", o->gpus[g]);
		fputs("]}}", f);
		first = 0;
	}
	fputs("\n]\n", f);
	return f != stdout ? fclose(f) : fflush(f);
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: sim_ceiling [options]   (linked to libtcpxsim.so)\n"
"  -S, --sockets N     socket pairs, 1..%d (default 8)\n"
"      --gpus LIST     GPUs, socket i on LIST[i %% n] (default 0)\n"
"  -s, --size N        bytes per socket per iteration (default 256M)\n"
"      --call N        bytes per send/recv call (default 1M)\n"
"  -n, --iters N       timed iterations (default 5); -w, --warmup N (default 1)\n"
"      --mode M        raw, devmem or both (default both: raw first, same sockets)\n"
"      --return R      thread (default: a thread per socket returns its tokens)\n"
"                      or inline (the receiving thread, after each receive)\n"
"      --json FILE     the results as a JSON array (- = stdout)\n"
"GB/s: 10^9 bytes per second over all sockets; the median iteration.\n", MAX_SOCKS);
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{"sockets", 1, 0, 'S'}, {"gpus", 1, 0, 'g'}, {"size", 1, 0, 's'},
		{"call", 1, 0, 'c'},    {"iters", 1, 0, 'n'}, {"warmup", 1, 0, 'w'},
		{"mode", 1, 0, 'm'},    {"return", 1, 0, 'r'}, {"json", 1, 0, 'j'},
		{"help", 0, 0, 'h'},
		{0, 0, 0, 0}};
	int c;
	*o = (struct opts){.nsocks = 8, .ngpus = 1, .size = 256u << 20, .call = 1u << 20,
			   .iters = 5, .warmup = 1, .raw = 1, .devmem = 1};
	while ((c = getopt_long(argc, argv, "S:s:n:w:h", lo, NULL)) != -1) {
		char copy[256], *save = NULL, *t;
		switch (c) {
		case 'S':
			if (bench_parse_int(optarg, 1, MAX_SOCKS, &o->nsocks))
				return -1;
			break;
		case 'g':
			snprintf(copy, sizeof(copy), "%s", optarg);
			o->ngpus = 0;
			for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
				if (o->ngpus == MAX_GPUS ||
				    bench_parse_int(t, 0, 63, &o->gpus[o->ngpus++]))
					return -1;
			if (!o->ngpus)
				return -1;
			break;
		case 's':
			if (bench_parse_size(optarg, &o->size) || !o->size)
				return -1;
			break;
		case 'c':
			if (bench_parse_size(optarg, &o->call) || !o->call || o->call > (8u << 20))
				return -1;
			break;
		case 'n':
			if (bench_parse_int(optarg, 1, 200, &o->iters))
				return -1;
			break;
		case 'w':
			if (bench_parse_int(optarg, 0, 50, &o->warmup))
				return -1;
			break;
		case 'm':
			o->raw = !strcmp(optarg, "raw") || !strcmp(optarg, "both");
			o->devmem = !strcmp(optarg, "devmem") || !strcmp(optarg, "both");
			if (!o->raw && !o->devmem)
				return -1;
			break;
		case 'r':
			if (strcmp(optarg, "thread") && strcmp(optarg, "inline"))
				return -1;
			o->inline_return = !strcmp(optarg, "inline");
			break;
		case 'j':
			o->json = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct flow fl[MAX_SOCKS] = {0};
	double raw = 0, dev = 0;
	if (parse(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	if (gpu_setup(&o))
		return 1;
	for (int i = 0; i < o.nsocks; i++) {
		fl[i].gpu = i % o.ngpus;
		pthread_mutex_init(&fl[i].ql, NULL);
		pthread_cond_init(&fl[i].qc, NULL);
		if (!(fl[i].q = calloc(RET_SLOTS, sizeof(*fl[i].q))))
			return 1;
		fl[i].size = o.size;
		fl[i].call = o.call;
		if (tcp_pair(&fl[i].snd, &fl[i].rcv) || mem_setup(&fl[i], &o))
			return 1;
	}
	printf("# sim_ceiling: %d socket pairs over %d GPU(s) (%s memory), %zu bytes per socket, "
	       "calls of %zu, tokens returned %s, median of %d\n", o.nsocks, o.ngpus,
	       on_gpu ? "GPU" : "host", o.size, o.call,
	       o.inline_return ? "inline" : "by a thread per socket", o.iters);
	fflush(stdout);
	if (o.raw) {
		if (phase(fl, &o, 0, &raw))
			return 1;
		printf("raw_tcp     %8.3f GB/s  %8.3f per GPU\n", raw, raw / o.ngpus);
	}
	if (o.devmem) {
		for (int i = 0; i < o.nsocks; i++)
			if (steer(&fl[i]))
				return 1;
		if (phase(fl, &o, 1, &dev))
			return 1;
		printf("simulator   %8.3f GB/s  %8.3f per GPU\n", dev, dev / o.ngpus);
	}
	if (o.raw && o.devmem)
		printf("ratio       %8.3f (simulator / raw TCP)\n", raw > 0 ? dev / raw : 0);
	fflush(stdout);
	if (o.json && write_json(&o, raw, dev))
		return 1;
	for (int i = 0; i < o.nsocks; i++) {
		close(fl[i].snd);
		close(fl[i].rcv);
	}
	return 0;
}
