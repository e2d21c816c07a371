/*
 * tcp_probe: raw TCP throughput with the emulator plugin's socket layouts,
 * the denominator of "emulator host path / raw TCP".
 *
 * A message of --size bytes is split over S sockets (the last takes the
 * remainder) and moved in calls of --call bytes.  T threads per side serve
 * the sockets: thread t owns sockets t, t+T, ... and, for each message,
 * moves its whole share on one socket before the next, with blocking I/O,
 * as the emulator's helper threads do with a request's slices; T = S (the
 * default) is one thread per stream.  After every message the receiver
 * answers on a control connection, so an iteration is "send until the
 * receiver has it all", as tcpx_perf's is.
 *
 * --bounce (the receiver's option) reproduces a bounce-buffer receive's
 * extra work: the receiving threads read each message into shuffled 4 KiB
 * pages of a pool, cycling through a window of them as the emulator's
 * bounce modes recycle theirs, and the thread that answers copies the
 * pages into the message buffer once all of it is in, before it answers:
 * the same second pass over the bytes, by another thread, with no library
 * in between (which unpacks each chunk as it lands, so from about 1 MiB
 * this is an upper bound).
 *
 *   tcp_probe loopback [options]          both ends in this process
 *   tcp_probe server [options]            receives; takes S and the sweep
 *   tcp_probe client -H ADDR [options]    from the client, which sends
 *
 * Exit status: 0 success, 1 error or verification mismatch, 2 usage.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define PROBE_MAX_SOCKS 64
#define PROBE_MAGIC 0x50524f42u /* "PROB" */
#define PROBE_PAGE 4096u
#define PROBE_POOL_PAGES 8192u /* at least; a message needs as many */
#define PROBE_RECYCLE 1024u    /* pages cycled through, at least (a message's) */
#define PROBE_IOV 64

enum role { ROLE_LOOPBACK, ROLE_SERVER, ROLE_CLIENT };

struct opts {
	enum role role;
	const char *host;
	const char *bind;
	int port;
	int nsocks;
	int nthreads;     /* this side's helper threads */
	size_t call;
	struct bench_sweep sweep;
	int verify;
	int bounce;       /* receiver: read into pool pages, then copy out */
	int switches;     /* print context switches and CPU time per message */
	int quiet;
	const char *json;
};

/* What the client tells the server: the server adopts all of it. */
struct hello {
	uint32_t magic;
	uint32_t nsocks;
	uint64_t min_bytes, max_bytes;
	double factor;
	uint32_t iters, warmup;
	uint32_t verify;
	uint32_t pad;
};

struct side;

struct worker {
	struct side *sd;
	int idx;
	pthread_t tid;
	int err;
};

struct side {
	int send;           /* 1 sender, 0 receiver */
	int nsocks, nthreads;
	int fds[PROBE_MAX_SOCKS];
	size_t call;
	char *buf;
	size_t size;        /* this message */
	/* --bounce: the message's byte b lies at pool page
	 * perm[(first + b / PROBE_PAGE) % window], offset b % PROBE_PAGE */
	char *pool;
	uint32_t *perm;
	uint32_t npages, window, first;
	int stop;
	pthread_barrier_t start, end;
	struct worker w[PROBE_MAX_SOCKS];
};

static int send_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int recv_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = recv(fd, p, n, MSG_WAITALL);

		if (r == 0)
			errno = ECONNRESET;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Socket s's share of a message of size bytes. */
static void share(const struct side *sd, int s, size_t *off, size_t *len)
{
	size_t per = sd->size / (size_t)sd->nsocks;

	*off = per * (size_t)s;
	*len = s == sd->nsocks - 1 ? sd->size - *off : per;
}

static char *page_of(const struct side *sd, size_t b)
{
	return sd->pool + (size_t)sd->perm[(sd->first + b / PROBE_PAGE) % sd->window] * PROBE_PAGE;
}

/* A share read into its pool pages, up to PROBE_IOV pages a call. */
static int recv_pages(struct side *sd, int fd, size_t off, size_t len)
{
	struct iovec iov[PROBE_IOV];

	while (len) {
		size_t b = off, left = len;
		ssize_t r;
		int n = 0;

		for (; n < PROBE_IOV && left; n++) {
			size_t in = b % PROBE_PAGE, k = PROBE_PAGE - in < left ? PROBE_PAGE - in : left;

			iov[n] = (struct iovec){ page_of(sd, b) + in, k };
			b += k;
			left -= k;
		}
		r = readv(fd, iov, n);
		if (r == 0)
			errno = ECONNRESET;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		off += (size_t)r;
		len -= (size_t)r;
	}
	return 0;
}

/* --bounce: the message's pages copied into the buffer, in order. */
static void unpack_pages(struct side *sd, size_t size)
{
	for (size_t b = 0; b < size; b += PROBE_PAGE)
		memcpy(sd->buf + b, page_of(sd, b), size - b < PROBE_PAGE ? size - b : PROBE_PAGE);
	sd->first = (uint32_t)((sd->first + (size + PROBE_PAGE - 1) / PROBE_PAGE) % sd->window);
}

static int move_share(struct side *sd, int s)
{
	size_t off, len;

	share(sd, s, &off, &len);
	if (sd->pool)
		return recv_pages(sd, sd->fds[s], off, len);
	while (len) {
		size_t n = len < sd->call ? len : sd->call;
		int r = sd->send ? send_full(sd->fds[s], sd->buf + off, n)
				 : recv_full(sd->fds[s], sd->buf + off, n);

		if (r)
			return -1;
		off += n;
		len -= n;
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct side *sd = w->sd;

	for (;;) {
		pthread_barrier_wait(&sd->start);
		if (sd->stop)
			break;
		for (int s = w->idx; s < sd->nsocks && !w->err; s += sd->nthreads) {
			if (move_share(sd, s)) {
				fprintf(stderr, "tcp_probe: %s on socket %d: %s\n",
					sd->send ? "send" : "recv", s, strerror(errno));
				w->err = 1;
				/* The peer's threads must not wait for the rest. */
				for (int i = 0; i < sd->nsocks; i++)
					shutdown(sd->fds[i], SHUT_RDWR);
			}
		}
		pthread_barrier_wait(&sd->end);
	}
	return NULL;
}

/* The bounce pool: its pages in a shuffled order, touched once; messages
 * cycle through the first `window` of them. */
static int pool_start(struct side *sd, size_t max_bytes)
{
	size_t need = (max_bytes + PROBE_PAGE - 1) / PROBE_PAGE;

	sd->npages = need > PROBE_POOL_PAGES ? (uint32_t)need : PROBE_POOL_PAGES;
	sd->window = need > PROBE_RECYCLE ? (uint32_t)need : PROBE_RECYCLE;
	sd->pool = aligned_alloc(PROBE_PAGE, (size_t)sd->npages * PROBE_PAGE);
	sd->perm = malloc((size_t)sd->npages * sizeof(*sd->perm));
	if (!sd->pool || !sd->perm)
		return -1;
	memset(sd->pool, 0, (size_t)sd->npages * PROBE_PAGE);
	srand(12345);
	for (uint32_t i = 0; i < sd->npages; i++)
		sd->perm[i] = i;
	for (uint32_t i = sd->npages - 1; i > 0; i--) {
		uint32_t j = (uint32_t)rand() % (i + 1), t = sd->perm[i];

		sd->perm[i] = sd->perm[j];
		sd->perm[j] = t;
	}
	return 0;
}

static int side_start(struct side *sd, size_t max_bytes, int bounce)
{
	sd->buf = malloc(max_bytes ? max_bytes : 1);
	if (!sd->buf || (bounce && pool_start(sd, max_bytes))) {
		fprintf(stderr, "tcp_probe: out of memory\n");
		return -1;
	}
	memset(sd->buf, 0, max_bytes);
	pthread_barrier_init(&sd->start, NULL, (unsigned)sd->nthreads + 1);
	pthread_barrier_init(&sd->end, NULL, (unsigned)sd->nthreads + 1);
	for (int i = 0; i < sd->nthreads; i++) {
		sd->w[i] = (struct worker){ .sd = sd, .idx = i };
		if (pthread_create(&sd->w[i].tid, NULL, worker_main, &sd->w[i])) {
			fprintf(stderr, "tcp_probe: cannot start a thread\n");
			return -1;
		}
	}
	return 0;
}

/* One message: the workers move it; 0, or -1 if any of them failed. */
static int side_round(struct side *sd, size_t size)
{
	int err = 0;

	sd->size = size;
	pthread_barrier_wait(&sd->start);
	pthread_barrier_wait(&sd->end);
	for (int i = 0; i < sd->nthreads; i++)
		err |= sd->w[i].err;
	return err ? -1 : 0;
}

static void side_stop(struct side *sd)
{
	sd->stop = 1;
	pthread_barrier_wait(&sd->start);
	for (int i = 0; i < sd->nthreads; i++)
		pthread_join(sd->w[i].tid, NULL);
	pthread_barrier_destroy(&sd->start);
	pthread_barrier_destroy(&sd->end);
	for (int i = 0; i < sd->nsocks; i++)
		close(sd->fds[i]);
	free(sd->buf);
	free(sd->pool);
	free(sd->perm);
}

/* The byte pattern of iteration it: cheap, and differs per iteration. */
static void fill(char *buf, size_t n, uint32_t it)
{
	for (size_t i = 0; i < n; i += 64)
		buf[i] = (char)(it * 131u + (uint32_t)(i >> 6) * 7u);
}

static int check(const char *buf, size_t n, uint32_t it)
{
	for (size_t i = 0; i < n; i += 64)
		if (buf[i] != (char)(it * 131u + (uint32_t)(i >> 6) * 7u))
			return -1;
	return 0;
}

static void tune(int fd)
{
	int one = 1;

	/* As the emulator's sockets are. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int listen_on(const char *addr, int port, int *out_port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	socklen_t len = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	if (addr && inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "tcp_probe: --bind wants an IPv4 address: %s\n", addr);
		close(fd);
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, PROBE_MAX_SOCKS + 1) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len)) {
		perror("tcp_probe: listen");
		close(fd);
		return -1;
	}
	*out_port = ntohs(sa.sin_port);
	return fd;
}

static int dial(const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	char ps[16];
	int fd, rc;

	snprintf(ps, sizeof(ps), "%d", port);
	rc = getaddrinfo(host, ps, &hints, &ai);
	if (rc) {
		fprintf(stderr, "tcp_probe: %s: %s\n", host, gai_strerror(rc));
		return -1;
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	for (int tries = 0; fd >= 0; tries++) {
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		/* The server may not be listening yet. */
		if (tries == 100 || (errno != ECONNREFUSED && errno != EINTR)) {
			fprintf(stderr, "tcp_probe: connect %s:%d: %s\n", host, port,
				strerror(errno));
			close(fd);
			fd = -1;
			break;
		}
		usleep(100000);
	}
	freeaddrinfo(ai);
	if (fd >= 0)
		tune(fd);
	return fd;
}

static void header(FILE *out, const struct opts *o, const struct side *sd)
{
	fprintf(out, "# tcp_probe %s: %d socket%s, %d thread%s per side (%s), call %zu, "
		"warm-up %d, iters %d%s%s\n",
		o->role == ROLE_LOOPBACK ? "loopback" : o->role == ROLE_CLIENT ? "client (sender)"
										 : "server (receiver)",
		sd->nsocks, sd->nsocks > 1 ? "s" : "", sd->nthreads, sd->nthreads > 1 ? "s" : "",
		sd->nthreads == sd->nsocks ? "one per socket" : "each serves its sockets in turn",
		o->call, o->sweep.warmup, o->sweep.iters, o->verify ? ", verified" : "",
		o->bounce ? ", received into bounce pages and copied out" : "");
	fprintf(out, "# GB/s = 10^9 bytes/s of payload; time = average per message, "
		"from the first send to the receiver's answer\n");
	fprintf(out, "# %12s %8s %12s %10s %12s %12s\n", "size(B)", "iters", "time(us)", "GB/s",
		"p50(us)", "p99(us)");
	fflush(out);
}

static void json_row(FILE *f, const struct opts *o, const struct side *sd,
		     const struct bench_row *r, int first)
{
	fprintf(f, "%s  {\"size\": %zu, \"iters\": %d, \"time_us\": %.3f, \"gbps\": %.4f, "
		"\"p50_us\": %.3f, \"p99_us\": %.3f, \"config\": {\"bench\": \"tcp_probe\", "
		"\"role\": \"%s\", \"sockets\": %d, \"threads\": %d, \"call_bytes\": %zu, "
		"\"verify\": %s, \"bounce\": %s, \"warmup\": %d}}",
		first ? "" : ",\n", r->size, r->iters, r->avg_us, r->gbps, r->p50_us, r->p99_us,
		o->role == ROLE_LOOPBACK ? "loopback" : "client", sd->nsocks, sd->nthreads,
		o->call, o->verify ? "true" : "false", o->bounce ? "true" : "false",
		o->sweep.warmup);
	fflush(f);
}

/* The receiving end: one answer per message on the control socket. */
static int receiver_loop(struct side *rx, int ctl, const struct bench_sweep *w, int verify)
{
	uint32_t it = 0;
	char ok = 1;

	for (size_t size = w->min_bytes; size <= w->max_bytes; size = bench_sweep_next(w, size)) {
		for (int i = 0; i < w->warmup + w->iters; i++, it++) {
			if (side_round(rx, size))
				return -1;
			if (rx->pool)
				unpack_pages(rx, size);
			if (verify && check(rx->buf, size, it)) {
				fprintf(stderr, "tcp_probe: data mismatch at size %zu\n", size);
				ok = 0;
			}
			if (send_full(ctl, &ok, 1))
				return -1;
			if (!ok)
				return -1;
		}
	}
	return 0;
}

static int sender_loop(struct side *tx, int ctl, const struct opts *o)
{
	const struct bench_sweep *w = &o->sweep;
	FILE *jf = NULL, *out = o->json && !strcmp(o->json, "-") ? stderr : stdout;
	double *us = calloc((size_t)w->iters, sizeof(*us));
	int first = 1, rc = -1;
	uint32_t it = 0;

	if (!us)
		return -1;
	if (o->json && !(jf = strcmp(o->json, "-") ? fopen(o->json, "w") : stdout)) {
		perror(o->json);
		goto out;
	}
	if (jf)
		fputs("[\n", jf);
	header(out, o, tx);
	for (size_t size = w->min_bytes; size <= w->max_bytes; size = bench_sweep_next(w, size)) {
		struct bench_row row = { .size = size, .iters = w->iters };
		struct rusage ru0 = { 0 }, ru1 = { 0 };

		for (int i = 0; i < w->warmup + w->iters; i++, it++) {
			double t0;
			char ok;

			if (i == w->warmup && o->switches)
				getrusage(RUSAGE_SELF, &ru0);
			if (o->verify)
				fill(tx->buf, size, it);
			t0 = bench_now_s() * 1e6;
			if (side_round(tx, size) || recv_full(ctl, &ok, 1))
				goto out;
			if (!ok)
				goto out;
			if (i >= w->warmup)
				us[i - w->warmup] = bench_now_s() * 1e6 - t0;
		}
		if (o->switches)
			getrusage(RUSAGE_SELF, &ru1);
		bench_stats(&row, us, size);
		fprintf(out, "  %12zu %8d %12.1f %10.3f %12.1f %12.1f\n", row.size, row.iters,
			row.avg_us, row.gbps, row.p50_us, row.p99_us);
		if (o->switches) {
			char line[192];

			bench_rusage_line(line, sizeof(line), &ru0, &ru1, w->iters);
			fprintf(out, "# %zu bytes: %s per message (this process: %s)\n", size, line,
				o->role == ROLE_LOOPBACK ? "both ends" : "the sender");
		}
		fflush(out);
		if (jf)
			json_row(jf, o, tx, &row, first);
		first = 0;
	}
	rc = 0;
out:
	if (jf) {
		fputs("\n]\n", jf);
		if (jf != stdout)
			fclose(jf);
	}
	free(us);
	return rc;
}

struct rx_args {
	struct side *rx;
	int ctl;
	const struct bench_sweep *w;
	int verify;
	int rc;
};

static void *rx_main(void *arg)
{
	struct rx_args *a = arg;

	a->rc = receiver_loop(a->rx, a->ctl, a->w, a->verify);
	if (a->rc)
		for (int i = 0; i < a->rx->nsocks; i++)
			shutdown(a->rx->fds[i], SHUT_RDWR);
	shutdown(a->ctl, SHUT_RDWR);
	return NULL;
}

/* Data connections say which socket they are: shares differ in size. */
static int accept_data(int lfd, int *fds, int nsocks)
{
	for (int i = 0; i < nsocks; i++)
		fds[i] = -1;
	for (int i = 0; i < nsocks; i++) {
		uint32_t idx;
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0 || recv_full(fd, &idx, sizeof(idx)) || idx >= (uint32_t)nsocks ||
		    fds[idx] >= 0) {
			fprintf(stderr, "tcp_probe: bad data connection\n");
			if (fd >= 0)
				close(fd);
			return -1;
		}
		tune(fd);
		fds[idx] = fd;
	}
	return 0;
}

static int dial_data(const char *host, int port, int *fds, int nsocks)
{
	for (int i = 0; i < nsocks; i++) {
		uint32_t idx = (uint32_t)i;

		if ((fds[i] = dial(host, port)) < 0 || send_full(fds[i], &idx, sizeof(idx)))
			return -1;
	}
	return 0;
}

static int run_loopback(const struct opts *o)
{
	struct side tx = { .send = 1, .nsocks = o->nsocks, .nthreads = o->nthreads,
			   .call = o->call };
	struct side rx = { .send = 0, .nsocks = o->nsocks, .nthreads = o->nthreads,
			   .call = o->call };
	struct rx_args ra = { .rx = &rx, .w = &o->sweep, .verify = o->verify };
	int port, lfd, ctl = -1, rc;
	pthread_t t;

	lfd = listen_on("127.0.0.1", 0, &port);
	if (lfd < 0)
		return 1;
	/* The backlog holds the dials until they are accepted. */
	rc = (ctl = dial("127.0.0.1", port)) < 0 ||
	     dial_data("127.0.0.1", port, tx.fds, o->nsocks) ||
	     (ra.ctl = accept(lfd, NULL, NULL)) < 0 || accept_data(lfd, rx.fds, o->nsocks);
	close(lfd);
	if (rc) {
		perror("tcp_probe: loopback connections");
		return 1;
	}
	if (side_start(&tx, o->sweep.max_bytes, 0) ||
	    side_start(&rx, o->sweep.max_bytes, o->bounce))
		return 1;
	pthread_create(&t, NULL, rx_main, &ra);
	rc = sender_loop(&tx, ctl, o);
	if (rc)
		for (int i = 0; i < tx.nsocks; i++)
			shutdown(tx.fds[i], SHUT_RDWR);
	pthread_join(t, NULL);
	side_stop(&tx);
	side_stop(&rx);
	close(ctl);
	close(ra.ctl);
	return rc || ra.rc ? 1 : 0;
}

static int run_client(const struct opts *o)
{
	struct side tx = { .send = 1, .nsocks = o->nsocks, .nthreads = o->nthreads,
			   .call = o->call };
	struct hello h = {
		.magic = PROBE_MAGIC, .nsocks = (uint32_t)o->nsocks,
		.min_bytes = o->sweep.min_bytes, .max_bytes = o->sweep.max_bytes,
		.factor = o->sweep.factor, .iters = (uint32_t)o->sweep.iters,
		.warmup = (uint32_t)o->sweep.warmup, .verify = (uint32_t)o->verify,
	};
	int ctl, rc;

	/* The hello goes first, so the control connection is accepted first. */
	if ((ctl = dial(o->host, o->port)) < 0 || send_full(ctl, &h, sizeof(h)) ||
	    dial_data(o->host, o->port, tx.fds, o->nsocks) ||
	    side_start(&tx, o->sweep.max_bytes, 0))
		return 1;
	rc = sender_loop(&tx, ctl, o);
	if (rc)
		for (int i = 0; i < tx.nsocks; i++)
			shutdown(tx.fds[i], SHUT_RDWR);
	side_stop(&tx);
	close(ctl);
	return rc ? 1 : 0;
}

static int run_server(const struct opts *o)
{
	struct side rx = { .send = 0, .nthreads = o->nthreads, .call = o->call };
	struct bench_sweep w;
	struct hello h;
	int port, lfd, ctl = -1, rc;

	lfd = listen_on(o->bind, o->port, &port);
	if (lfd < 0)
		return 1;
	if (!o->quiet)
		fprintf(stderr, "tcp_probe: listening on port %d\n", port);
	ctl = accept(lfd, NULL, NULL);
	if (ctl < 0 || recv_full(ctl, &h, sizeof(h)) || h.magic != PROBE_MAGIC || !h.nsocks ||
	    h.nsocks > PROBE_MAX_SOCKS || !h.iters || h.min_bytes > h.max_bytes ||
	    !(h.factor > 1.0)) {
		fprintf(stderr, "tcp_probe: no valid client hello\n");
		close(lfd);
		return 1;
	}
	tune(ctl);
	rx.nsocks = (int)h.nsocks;
	if (rx.nthreads > rx.nsocks || rx.nthreads == 0)
		rx.nthreads = rx.nsocks;
	w = (struct bench_sweep){ .min_bytes = h.min_bytes, .max_bytes = h.max_bytes,
				  .factor = h.factor, .iters = (int)h.iters,
				  .warmup = (int)h.warmup };
	rc = accept_data(lfd, rx.fds, rx.nsocks);
	close(lfd);
	if (rc)
		return 1;
	if (side_start(&rx, w.max_bytes, o->bounce))
		return 1;
	if (!o->quiet)
		fprintf(stderr, "tcp_probe: %d sockets, %d receiving threads\n", rx.nsocks,
			rx.nthreads);
	rc = receiver_loop(&rx, ctl, &w, (int)h.verify);
	if (rc)
		for (int i = 0; i < rx.nsocks; i++)
			shutdown(rx.fds[i], SHUT_RDWR);
	side_stop(&rx);
	close(ctl);
	return rc ? 1 : 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tcp_probe loopback|server|client [options]\n"
		"  raw TCP throughput over S sockets, for comparison with the emulator plugin\n"
		"  (tcpx_perf --channels C uses 2C sockets by default).  server receives and\n"
		"  takes S and the sweep from the client; client dials and sends.\n"
		"  -H, --host ADDR        server to dial (client)\n"
		"      --bind ADDR        address to listen on (server; default all)\n"
		"  -p, --port N           TCP port (default 18516)\n"
		"  -S, --sockets N        data sockets, 1..%d (default 2)\n"
		"  -T, --threads N        threads per side; thread t serves sockets t, t+T, ...\n"
		"                         in turn, one message share at a time (default S:\n"
		"                         one thread per socket)\n"
		"      --call N           bytes per send/recv call (default 1M)\n"
		BENCH_SWEEP_USAGE
		"      --verify           check the data of every message (sampled bytes)\n"
		"      --bounce           (loopback, server) read into shuffled 4 KiB pages of a\n"
		"                         pool, then copy them out on the answering thread, as\n"
		"                         a bounce-buffer receive and its unpack do (--call\n"
		"                         does not apply: up to 64 pages a read)\n"
		"      --switches         per size, this process's context switches and CPU time\n"
		"                         per timed message (loopback: both ends; client: the\n"
		"                         sender; the server prints no table)\n"
		"      --json FILE        write results as a JSON array (- = stdout)\n"
		"  -q, --quiet            no progress lines\n"
		"GB/s means 10^9 bytes per second.\n",
		PROBE_MAX_SOCKS);
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "host", 1, NULL, 'H' }, { "bind", 1, NULL, 'B' }, { "port", 1, NULL, 'p' },
		{ "sockets", 1, NULL, 'S' }, { "threads", 1, NULL, 'T' }, { "call", 1, NULL, 'C' },
		{ "verify", 0, NULL, 'V' }, { "bounce", 0, NULL, 'U' },
		{ "switches", 0, NULL, 'W' }, { "json", 1, NULL, 'J' },
		{ "quiet", 0, NULL, 'q' },
		{ "help", 0, NULL, 'h' }, BENCH_SWEEP_LONGOPTS, { NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .port = 18516, .nsocks = 2, .call = 1u << 20 };
	bench_sweep_defaults(&o->sweep);
	if (argc < 2 || argv[1][0] == '-') {
		usage(argc >= 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
		return argc >= 2 && !strcmp(argv[1], "--help") ? 1 : -1;
	}
	if (!strcmp(argv[1], "loopback"))
		o->role = ROLE_LOOPBACK;
	else if (!strcmp(argv[1], "server"))
		o->role = ROLE_SERVER;
	else if (!strcmp(argv[1], "client"))
		o->role = ROLE_CLIENT;
	else {
		fprintf(stderr, "tcp_probe: unknown role '%s'\n", argv[1]);
		return -1;
	}
	optind = 2;
	while ((c = getopt_long(argc, argv, "H:p:S:T:qh" BENCH_SWEEP_SHORTOPTS, lopts, NULL)) !=
	       -1) {
		int r = bench_sweep_flag(&o->sweep, c, optarg, "tcp_probe");

		if (r < 0)
			return -1;
		if (r > 0)
			continue;
		switch (c) {
		case 'H': o->host = optarg; break;
		case 'B': o->bind = optarg; break;
		case 'p':
			if (bench_parse_int(optarg, 1, 65535, &o->port))
				goto bad;
			break;
		case 'S':
			if (bench_parse_int(optarg, 1, PROBE_MAX_SOCKS, &o->nsocks))
				goto bad;
			break;
		case 'T':
			if (bench_parse_int(optarg, 1, PROBE_MAX_SOCKS, &o->nthreads))
				goto bad;
			break;
		case 'C':
			if (bench_parse_size(optarg, &o->call) || !o->call)
				goto bad;
			break;
		case 'V': o->verify = 1; break;
		case 'U': o->bounce = 1; break;
		case 'W': o->switches = 1; break;
		case 'J': o->json = optarg; break;
		case 'q': o->quiet = 1; break;
		case 'h': usage(stdout); return 1;
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tcp_probe: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	bench_sweep_finish(&o->sweep);
	if (o->role == ROLE_CLIENT && o->bounce) {
		fprintf(stderr, "tcp_probe: --bounce is the receiver's: give it to the server\n");
		return -1;
	}
	if (o->role == ROLE_CLIENT && !o->host) {
		fprintf(stderr, "tcp_probe: client needs -H ADDR\n");
		return -1;
	}
	/* The server's S comes from the client; its -T applies once known. */
	if (o->role != ROLE_SERVER && (!o->nthreads || o->nthreads > o->nsocks))
		o->nthreads = o->nsocks;
	return 0;
bad:
	fprintf(stderr, "tcp_probe: bad value for option: '%s'\n", optarg);
	return -1;
}

int main(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);

	if (rc)
		return rc > 0 ? 0 : 2;
	switch (o.role) {
	case ROLE_LOOPBACK: return run_loopback(&o);
	case ROLE_CLIENT: return run_client(&o);
	default: return run_server(&o);
	}
}
