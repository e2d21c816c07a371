/* One tcpx_perf peer: connect, then for each size run warm-up and timed
 * iterations, each started by a barrier over the rendezvous socket. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_mem.h"
#include "bench_numa.h"
#include "perf.h"

struct peer {
	const struct perf_opts *o;
	int role; /* 0 server, 1 client */
	tcpx_p2p_xfer *xr, *xs; /* this iteration's; left set by a failure */
	int numa_node;       /* bound node, -1 none */
	const char *numa_why;
	tcpx_p2p_session *s;
	tcpx_p2p_conn *c;
	struct bench_buf buf;
	tcpx_p2p_mr *mr;
	tcpx_p2p_session_info info;
	double *us;
};

static int fail(const char *what, int rc)
{
	fprintf(stderr, "tcpx_perf: %s: %s (%s)\n", what, tcpx_p2p_strerror(rc),
		tcpx_p2p_last_error());
	return rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Who moves data which way: uni = client sends, server receives. */
static int sends(const struct peer *p)
{
	return p->o->bidir || p->role == 1;
}

static int receives(const struct peer *p)
{
	return p->o->bidir || p->role == 0;
}

/* Pattern stream of (size, iteration, direction): stale or misplaced
 * data from another iteration or direction never matches. */
static uint64_t seed_of(size_t size, int it, int from_client)
{
	return ((uint64_t)size << 24) ^ ((uint64_t)(unsigned)it << 1) ^ (uint64_t)from_client;
}

/* After a failure this runs once the conn is destroyed (which fails and
 * detaches what was pending). */
static void release_xfers(struct peer *p)
{
	if (p->xr)
		tcpx_p2p_xfer_release(p->xr);
	if (p->xs)
		tcpx_p2p_xfer_release(p->xs);
	p->xr = p->xs = NULL;
}

static int one_iteration(struct peer *p, size_t size, int it, double *us)
{
	const struct perf_opts *o = p->o;
	size_t recv_off = o->bidir ? o->sweep.max_bytes : 0;
	double t0;
	size_t bad;
	int rc;

	if (o->verify && sends(p) && bench_buf_fill(&p->buf, 0, size, seed_of(size, it, p->role)))
		return fail("fill", TCPX_P2P_ECUDA);
	if (o->verify && receives(p) && bench_buf_poison(&p->buf, recv_off, size))
		return fail("poison", TCPX_P2P_ECUDA);
	rc = tcpx_p2p_conn_barrier(p->c, o->timeout_ms);
	if (rc)
		return fail("barrier", rc);
	t0 = now_s();
	if (receives(p) && (rc = tcpx_p2p_recv(p->c, p->mr, recv_off, size, &p->xr)))
		return fail("recv", rc);
	if (sends(p) && (rc = tcpx_p2p_send(p->c, p->mr, 0, size, &p->xs)))
		return fail("send", rc);
	if (p->xr && (rc = tcpx_p2p_wait(p->xr, o->timeout_ms)))
		return fail("wait (recv)", rc);
	if (p->xs && (rc = tcpx_p2p_wait(p->xs, o->timeout_ms)))
		return fail("wait (send)", rc);
	*us = (now_s() - t0) * 1e6;
	release_xfers(p);
	if (!o->verify || !receives(p))
		return 0;
	bad = bench_buf_check(&p->buf, recv_off, size, seed_of(size, it, 1 - p->role));
	if (bad == (size_t)-1)
		return 0;
	if (bad == (size_t)-2)
		return fail("copying the received buffer back for verification", TCPX_P2P_ECUDA);
	fprintf(stderr, "tcpx_perf: verification FAILED: size %zu, iteration %d, first bad byte "
		"at offset %zu\n", size, it, bad);
	return -1;
}

static int bind_numa(const struct perf_opts *o, int gpu, const char **why)
{
	char bus[32] = "";

	if (o->numa == BENCH_NUMA_AUTO && (gpu < 0 || bench_gpu_bus_id(gpu, bus, sizeof(bus)))) {
		*why = "no GPU";
		return -1;
	}
	return bench_numa_bind(o->numa, bus, why);
}

static int run_size(struct peer *p, size_t size, int report, FILE *json, int first)
{
	const struct perf_opts *o = p->o;
	struct bench_row row = { .size = size, .iters = o->sweep.iters };
	double start = now_s(), last = start, t;
	int it, rc;

	for (it = -o->sweep.warmup; it < o->sweep.iters; it++) {
		rc = one_iteration(p, size, it, it >= 0 ? &p->us[it] : &t);
		if (rc)
			return rc;
		if (report && !o->quiet && now_s() - last > 2.0 && now_s() - start > 3.0) {
			last = now_s();
			fprintf(stderr, "tcpx_perf: %zu bytes: iteration %d of %d\n", size,
				it + 1, o->sweep.iters);
		}
	}
	bench_stats(&row, p->us, o->bidir ? 2 * size : size);
	if (report) {
		perf_print_row(o, &row);
		perf_json_row(json, o, p->role, &p->info, p->numa_node, &row, first);
	}
	return 0;
}

static int connect_peer(struct peer *p, void (*listening)(void *, uint16_t), void *arg)
{
	const struct perf_opts *o = p->o;
	tcpx_p2p_server *srv;
	uint16_t port;
	int rc;

	if (p->role == 1) {
		rc = tcpx_p2p_dial(p->s, o->host, o->port, o->timeout_ms, &p->c);
		return rc ? fail("dial", rc) : 0;
	}
	rc = tcpx_p2p_server_create(p->s, o->bind, o->port, &srv);
	if (rc)
		return fail("listen", rc);
	tcpx_p2p_server_port(srv, &port);
	if (listening)
		listening(arg, port);
	rc = tcpx_p2p_server_accept(srv, o->timeout_ms, &p->c);
	tcpx_p2p_server_destroy(srv);
	return rc ? fail("accept", rc) : 0;
}

static int run_sizes(struct peer *p, int report)
{
	const struct perf_opts *o = p->o;
	FILE *json = NULL;
	size_t size;
	int rc, first = 1;

	if (report && perf_json_open(o, &json))
		return -1;
	if (report)
		perf_print_header(o, p->role, &p->info, p->numa_node, p->numa_why);
	for (size = o->sweep.min_bytes, rc = 0; size <= o->sweep.max_bytes && !rc;
	     size = bench_sweep_next(&o->sweep, size), first = 0)
		rc = run_size(p, size, report, json, first);
	perf_json_close(json);
	return rc;
}

int perf_run(const struct perf_opts *o, int role, int report,
	     void (*listening)(void *arg, uint16_t port), void *arg)
{
	struct peer p = { .o = o, .role = role };
	tcpx_p2p_config cfg = o->cfg;
	size_t len = o->bidir ? 2 * o->sweep.max_bytes : o->sweep.max_bytes;
	char err[256];
	int rc;

	cfg.gpu = o->cuda ? o->gpu[role] : -1;
	p.numa_node = bind_numa(o, cfg.gpu, &p.numa_why);
	p.info.struct_size = sizeof(p.info);
	p.us = calloc((size_t)o->sweep.iters, sizeof(*p.us));
	if (!p.us)
		return -1;
	rc = tcpx_p2p_session_create(&cfg, &p.s);
	if (rc) {
		fail("session", rc);
		goto free_us;
	}
	tcpx_p2p_session_query(p.s, &p.info);
	rc = connect_peer(&p, listening, arg);
	if (rc)
		goto destroy_session;
	if (bench_buf_alloc(&p.buf, len ? len : 1, o->cuda, cfg.gpu, err, sizeof(err))) {
		fprintf(stderr, "tcpx_perf: %s\n", err);
		rc = -1;
		goto destroy_conn;
	}
	rc = tcpx_p2p_mr_register(p.s, p.buf.ptr, len ? len : 1,
				  o->cuda ? TCPX_P2P_MEM_CUDA : TCPX_P2P_MEM_HOST, &p.mr);
	if (rc) {
		fail("mr_register", rc);
		goto free_buf;
	}
	rc = run_sizes(&p, report);
	/* Neither side closes while the other may still be transferring. */
	if (!rc && (rc = tcpx_p2p_conn_barrier(p.c, o->timeout_ms)))
		fail("final barrier", rc);
	/* The conn first: after a failure, destroying it is what stops writes
	 * into the buffer and completes what was pending. */
	tcpx_p2p_conn_destroy(p.c);
	release_xfers(&p);
	if (tcpx_p2p_mr_deregister(p.mr) == 0)
		bench_buf_free(&p.buf);
	goto destroy_session;
free_buf:
	bench_buf_free(&p.buf);
destroy_conn:
	tcpx_p2p_conn_destroy(p.c);
destroy_session:
	tcpx_p2p_session_destroy(p.s);
free_us:
	free(p.us);
	return rc;
}
