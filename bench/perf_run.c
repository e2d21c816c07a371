/* One tcpx_perf peer: connect (--conns connections), then for each size run
 * warm-up and timed iterations, each started by a barrier over the first
 * conn's rendezvous socket.  An iteration splits the size evenly over the
 * conns, and each conn's share into --inflight transfers, posts every
 * transfer, then waits for them as an application would:
 * tcpx_p2p_wait_any over all of them (the session's progress engine drives
 * every conn whichever xfer is waited on).  In multi-session mode each pair
 * runs this in its own thread with its own session; the pairs of a peer
 * also meet at a group barrier after the conn barrier, so they all start
 * each timed iteration together. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#include "bench_mem.h"
#include "bench_numa.h"
#include "perf.h"

struct peer {
	const struct perf_opts *o;
	struct perf_group *g; /* NULL: the single mode */
	int pair;             /* 0 in the single mode */
	struct perf_peer_info pi;
	/* this iteration's, per conn and piece (k * inflight + j); left set by
	 * a failure */
	tcpx_p2p_xfer *xr[PERF_MAX_CONNS * PERF_MAX_INFLIGHT];
	tcpx_p2p_xfer *xs[PERF_MAX_CONNS * PERF_MAX_INFLIGHT];
	tcpx_p2p_session *s;
	tcpx_p2p_conn *c[PERF_MAX_CONNS];
	int nconns;          /* conns that exist */
	struct bench_buf buf;
	tcpx_p2p_mr *mr;
	double *us;
};

/* "pair K: " in multi-session mode, so each message names its pair. */
static __thread char who[16];

static int fail(const char *what, int rc)
{
	perf_error("tcpx_perf: %s%s: %s (%s)\n", who, what, tcpx_p2p_strerror(rc),
		   tcpx_p2p_last_error());
	return rc;
}

/* Who moves data which way: uni = client sends, server receives. */
static int sends(const struct peer *p)
{
	return p->o->bidir || p->pi.role == 1;
}

static int receives(const struct peer *p)
{
	return p->o->bidir || p->pi.role == 0;
}

/* Pattern stream of (pair, size, iteration, direction): stale or misplaced
 * data from another iteration, direction or pair never matches. */
static uint64_t seed_of(int pair, size_t size, int it, int from_client)
{
	return ((uint64_t)size << 24) ^ ((uint64_t)(unsigned)it << 1) ^ (uint64_t)from_client ^
	       (uint64_t)pair * 0x9e3779b97f4a7c15ull;
}

/* After a failure this runs once the conn is destroyed (which fails and
 * detaches what was pending). */
static void release_xfers(struct peer *p)
{
	int k;

	for (k = 0; k < p->o->conns * p->o->inflight; k++) {
		if (p->xr[k])
			tcpx_p2p_xfer_release(p->xr[k]);
		if (p->xs[k])
			tcpx_p2p_xfer_release(p->xs[k]);
		p->xr[k] = p->xs[k] = NULL;
	}
}

/* Conn k's share of a transfer of `size`: an even split, the last conn
 * taking the remainder. */
static size_t share_len(size_t size, int n, int k)
{
	return k == n - 1 ? size - (size_t)(n - 1) * (size / (size_t)n) : size / (size_t)n;
}

static int fail_conn(const char *what, int k, int rc)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%s, conn %d", what, k);
	return fail(buf, rc);
}

/* Piece j of conn k: conn k carries [k * size/n, +share_len) of each
 * region, cut the same way into o->inflight pieces. */
static void piece(const struct perf_opts *o, size_t size, int k, int j, size_t *off,
		  size_t *len)
{
	size_t share = share_len(size, o->conns, k);

	*off = (size_t)k * (size / (size_t)o->conns) + (size_t)j * (share / (size_t)o->inflight);
	*len = share_len(share, o->inflight, j);
}

/* Post this iteration's transfers on every conn: all receives, then all
 * sends, each conn's pieces in order. */
static int post_all(struct peer *p, size_t size, size_t recv_off)
{
	const struct perf_opts *o = p->o;
	size_t off, len;
	int k, j, rc;

	for (k = 0; k < o->conns && receives(p); k++) {
		for (j = 0; j < o->inflight; j++) {
			piece(o, size, k, j, &off, &len);
			rc = tcpx_p2p_recv(p->c[k], p->mr, recv_off + off, len,
					   &p->xr[k * o->inflight + j]);
			if (rc)
				return fail_conn("recv", k, rc);
		}
	}
	for (k = 0; k < o->conns && sends(p); k++) {
		for (j = 0; j < o->inflight; j++) {
			piece(o, size, k, j, &off, &len);
			rc = tcpx_p2p_send(p->c[k], p->mr, off, len, &p->xs[k * o->inflight + j]);
			if (rc)
				return fail_conn("send", k, rc);
		}
	}
	return 0;
}

/* Wait until every posted xfer completes, whichever finishes first. */
static int complete_all(struct peer *p)
{
	static __thread tcpx_p2p_xfer *pend[2 * PERF_MAX_CONNS * PERF_MAX_INFLIGHT];
	static __thread int tag[2 * PERF_MAX_CONNS * PERF_MAX_INFLIGHT]; /* 2 conn + (1: send) */
	int n = 0, k, i, done, rc;

	for (k = 0; k < p->o->conns * p->o->inflight; k++) {
		if (p->xr[k]) {
			tag[n] = 2 * (k / p->o->inflight);
			pend[n++] = p->xr[k];
		}
		if (p->xs[k]) {
			tag[n] = 2 * (k / p->o->inflight) + 1;
			pend[n++] = p->xs[k];
		}
	}
	while (n > 0) {
		rc = tcpx_p2p_wait_any(pend, n, p->o->timeout_ms, 0, &i);
		if (rc)
			return fail("wait_any", rc);
		rc = tcpx_p2p_test(pend[i], &done);
		if (rc || !done)
			return fail_conn(tag[i] & 1 ? "wait (send)" : "wait (recv)", tag[i] / 2,
					 rc ? rc : TCPX_P2P_EPROTO);
		pend[i] = pend[n - 1];
		tag[i] = tag[n - 1];
		n--;
	}
	return 0;
}

static int one_iteration(struct peer *p, size_t size, int it, double *us)
{
	const struct perf_opts *o = p->o;
	size_t recv_off = o->bidir ? o->sweep.max_bytes : 0;
	double t0, t1;
	size_t bad;
	int k, rc;

	if (it == 0 && p->pair == 0 && perf_test_fail(p->pi.role, "run"))
		return -1;
	if (o->verify && sends(p) &&
	    bench_buf_fill(&p->buf, 0, size, seed_of(p->pair, size, it, p->pi.role)))
		return fail("fill", TCPX_P2P_ECUDA);
	if (o->verify && receives(p) && bench_buf_poison(&p->buf, recv_off, size))
		return fail("poison", TCPX_P2P_ECUDA);
	rc = tcpx_p2p_conn_barrier(p->c[0], o->timeout_ms);
	if (rc)
		return fail("barrier", rc);
	if (p->g && perf_group_sync(p->g))
		return -1; /* another pair failed and said so */
	t0 = bench_now_s();
	rc = post_all(p, size, recv_off);
	if (!rc)
		rc = complete_all(p);
	if (rc)
		return rc;
	t1 = bench_now_s();
	*us = (t1 - t0) * 1e6;
	if (p->g && it >= 0) {
		p->g->t0[p->pair * o->sweep.iters + it] = t0;
		p->g->t1[p->pair * o->sweep.iters + it] = t1;
	}
	release_xfers(p);
	if (!o->verify || !receives(p))
		return 0;
	bad = bench_buf_check(&p->buf, recv_off, size, seed_of(p->pair, size, it, 1 - p->pi.role));
	if (bad == (size_t)-1)
		return 0;
	if (bad == (size_t)-2)
		return fail("copying the received buffer back for verification", TCPX_P2P_ECUDA);
	k = size >= (size_t)o->conns ? (int)(bad / (size / (size_t)o->conns)) : o->conns - 1;
	perf_error("tcpx_perf: %sverification FAILED: size %zu, iteration %d, first bad byte at "
		   "offset %zu (conn %d)\n", who, size, it, bad, k < o->conns ? k : o->conns - 1);
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
	double start = bench_now_s(), last = start, t;
	struct rusage ru0 = { 0 }, ru1;
	int it, rc;

	for (it = -o->sweep.warmup; it < o->sweep.iters; it++) {
		if (it == 0 && o->switches)
			getrusage(RUSAGE_SELF, &ru0);
		rc = one_iteration(p, size, it, it >= 0 ? &p->us[it] : &t);
		if (rc)
			return rc;
		if (report && !o->quiet && bench_now_s() - last > 2.0 && bench_now_s() - start > 3.0) {
			last = bench_now_s();
			fprintf(stderr, "tcpx_perf: %zu bytes: iteration %d of %d\n", size,
				it + 1, o->sweep.iters);
		}
	}
	if (o->switches && getrusage(RUSAGE_SELF, &ru1))
		ru1 = ru0;
	bench_stats(&row, p->us, o->bidir ? 2 * size : size);
	if (p->g) {
		/* Every pair's row and times are in before the reporter reads
		 * them; nobody writes them again before the next size's first
		 * sync, which the reporter reaches only after reporting. */
		p->g->rows[p->pair] = row;
		if (perf_group_sync(p->g))
			return -1;
		if (report)
			perf_group_report(p->g, size);
	} else if (report) {
		perf_print_row(o, &row);
		perf_json_row(json, o, &p->pi, &row, first, -1);
	}
	/* A comment line, so that the table's readers skip it; never into
	 * JSON on stdout. */
	if (report && o->switches && !(o->json && !strcmp(o->json, "-"))) {
		char line[192];

		bench_rusage_line(line, sizeof(line), &ru0, &ru1, o->sweep.iters);
		printf("# %zu bytes: %s per transfer (the whole process over the timed iterations, "
		       "their barriers included)\n", size, line);
	}
	return 0;
}

/* The rendezvous port of this pair: a server listens on port + pair (port
 * 0, any, stays 0); a client dials the loopback server's pair port when
 * given, else port + pair. */
static uint16_t pair_port(const struct peer *p)
{
	const struct perf_opts *o = p->o;

	if (p->pi.role == 0)
		return o->port ? (uint16_t)(o->port + p->pair) : 0;
	return o->pair_ports ? o->pair_ports[p->pair] : (uint16_t)(o->port + p->pair);
}

/* Make o->conns conns: the client dials them one after another, the server
 * accepts them in the same order, so conn k is the same on both sides.
 * Each accept builds its conn's channels concurrently.  The set-up time runs
 * from the first dial or accept (the server's includes waiting for the
 * client to dial) until the last conn exists. */
static int connect_peer(struct peer *p, perf_listening_fn *listening, void *arg)
{
	const struct perf_opts *o = p->o;
	tcpx_p2p_server *srv = NULL;
	uint16_t port = pair_port(p);
	double t0;
	int rc = 0;

	if (p->pi.role == 0) {
		rc = tcpx_p2p_server_create(p->s, o->bind, port, &srv);
		if (rc)
			return fail("listen", rc);
		tcpx_p2p_server_port(srv, &port);
		if (listening)
			listening(arg, p->pair, port);
	}
	if (p->pair == 0 && perf_test_fail(p->pi.role, "connect")) {
		if (srv)
			tcpx_p2p_server_destroy(srv);
		return -1;
	}
	t0 = bench_now_s();
	for (p->nconns = 0; p->nconns < o->conns; p->nconns++) {
		if (srv)
			rc = tcpx_p2p_server_accept(srv, o->timeout_ms, &p->c[p->nconns]);
		else
			rc = tcpx_p2p_dial(p->s, o->host, port, o->timeout_ms, &p->c[p->nconns]);
		if (rc) {
			fail_conn(srv ? "accept" : "dial", p->nconns, rc);
			break;
		}
	}
	p->pi.setup_ms = (bench_now_s() - t0) * 1e3;
	if (srv)
		tcpx_p2p_server_destroy(srv);
	return rc;
}

#define HELLO_LEN 64

static uint64_t hello_seed(int pair, int npairs, int from_client)
{
	return 0x7463707870616972ull ^ ((uint64_t)npairs << 40) ^ ((uint64_t)pair << 8) ^
	       (uint64_t)from_client;
}

/* Multi-session mode: before any timing, each side sends a pattern of
 * (pair, number of pairs) over conn 0 and checks the peer's, so pair k is
 * known to talk to the peer's pair k and both run as many pairs. */
static int hello(struct peer *p)
{
	const struct perf_opts *o = p->o;
	size_t bad;
	int rc;

	if (bench_buf_fill(&p->buf, 0, HELLO_LEN, hello_seed(p->pair, o->npairs, p->pi.role)) ||
	    bench_buf_poison(&p->buf, HELLO_LEN, HELLO_LEN))
		return fail("hello fill", TCPX_P2P_ECUDA);
	rc = tcpx_p2p_recv(p->c[0], p->mr, HELLO_LEN, HELLO_LEN, &p->xr[0]);
	if (rc)
		return fail("hello recv", rc);
	rc = tcpx_p2p_send(p->c[0], p->mr, 0, HELLO_LEN, &p->xs[0]);
	if (rc)
		return fail("hello send", rc);
	rc = complete_all(p);
	if (rc)
		return rc;
	release_xfers(p);
	bad = bench_buf_check(&p->buf, HELLO_LEN, HELLO_LEN,
			      hello_seed(p->pair, o->npairs, 1 - p->pi.role));
	if (bad == (size_t)-2)
		return fail("hello check", TCPX_P2P_ECUDA);
	if (bad != (size_t)-1) {
		perf_error("tcpx_perf: %sthe peer did not answer as pair %d of %d: do both peers "
			   "give as many --pairs or --gpus, and does port %u reach the peer's pair "
			   "%d?\n", who, p->pair, o->npairs, (unsigned)pair_port(p), p->pair);
		return -1;
	}
	return 0;
}

static void destroy_conns(struct peer *p)
{
	while (p->nconns > 0)
		tcpx_p2p_conn_destroy(p->c[--p->nconns]);
}

static int run_sizes(struct peer *p, int report)
{
	const struct perf_opts *o = p->o;
	FILE *json = NULL;
	size_t size;
	int rc, first = 1;

	if (p->g) {
		/* The reporter's header needs every pair connected. */
		p->g->pi[p->pair] = p->pi;
		if (perf_group_sync(p->g))
			return -1;
		if (report && perf_json_open(o, &p->g->json))
			return -1;
		if (report)
			perf_group_header(p->g);
	} else {
		if (report && perf_json_open(o, &json))
			return -1;
		if (report)
			perf_print_header(o, &p->pi);
	}
	for (size = o->sweep.min_bytes, rc = 0; size <= o->sweep.max_bytes && !rc;
	     size = bench_sweep_next(&o->sweep, size), first = 0)
		rc = run_size(p, size, report, json, first);
	if (p->g && report) {
		perf_json_close(p->g->json);
		p->g->json = NULL;
	}
	perf_json_close(json);
	return rc;
}

static int run_peer(const struct perf_opts *o, int role, int report, struct perf_group *g,
		    int pair, perf_listening_fn *listening, void *arg)
{
	struct peer p = { .o = o, .g = g, .pair = pair, .pi.role = role };
	tcpx_p2p_config cfg = o->cfg;
	size_t len = o->bidir ? 2 * o->sweep.max_bytes : o->sweep.max_bytes;
	double teardown = 0;
	char err[256];
	int rc;

	if (g) {
		snprintf(who, sizeof(who), "pair %d: ", pair);
		len = len > 2 * HELLO_LEN ? len : 2 * HELLO_LEN;
	}
	cfg.gpu = perf_mem_on_gpu(o) ? (o->multi ? o->pair_gpu[pair] : o->gpu[role]) : -1;
	p.pi.numa_node = bind_numa(o, cfg.gpu, &p.pi.numa_why);
	p.pi.session.struct_size = sizeof(p.pi.session);
	p.us = calloc((size_t)o->sweep.iters, sizeof(*p.us));
	if (!p.us)
		return -1;
	rc = tcpx_p2p_session_create(&cfg, &p.s);
	if (rc) {
		fail("session", rc);
		goto free_us;
	}
	tcpx_p2p_session_query(p.s, &p.pi.session);
	rc = connect_peer(&p, listening, arg);
	if (rc)
		goto close_conns;
	if (bench_buf_alloc(&p.buf, len ? len : 1, perf_mem_kind(o), cfg.gpu, err, sizeof(err))) {
		perf_error("tcpx_perf: %s%s\n", who, err);
		rc = -1;
		goto close_conns;
	}
	rc = tcpx_p2p_mr_register_ex(p.s, p.buf.ptr, len ? len : 1,
				     o->cuda ? TCPX_P2P_MEM_CUDA : TCPX_P2P_MEM_HOST,
				     perf_mr_params(o), &p.mr);
	if (rc) {
		fail("mr_register", rc);
		goto free_buf;
	}
	rc = g ? hello(&p) : 0;
	if (!rc)
		rc = run_sizes(&p, report);
	if (!rc && o->stats) {
		tcpx_p2p_stats st = { .struct_size = sizeof(st) };

		if (!tcpx_p2p_session_stats(p.s, &st))
			perf_print_stats(o, role, &st);
	}
	/* Neither side closes while the other may still be transferring. */
	if (!rc && (rc = tcpx_p2p_conn_barrier(p.c[0], o->timeout_ms)))
		fail("final barrier", rc);
	/* The conns first: after a failure, destroying them is what stops
	 * writes into the buffer and completes what was pending. */
	teardown = bench_now_s();
	destroy_conns(&p);
	release_xfers(&p);
	if (tcpx_p2p_mr_deregister(p.mr) == 0)
		bench_buf_free(&p.buf);
	goto destroy_session;
free_buf:
	bench_buf_free(&p.buf);
close_conns:
	destroy_conns(&p);
destroy_session:
	tcpx_p2p_session_destroy(p.s);
	/* Both sides close with the peer (the close handshake): how long
	 * that takes, from the first conn_destroy to the session gone. */
	if (!rc && report && !o->quiet && !o->json)
		printf("# %steardown %.2f ms (conn_destroy until session_destroy returned)\n", who,
		       (bench_now_s() - teardown) * 1e3);
free_us:
	free(p.us);
	return rc;
}

int perf_run(const struct perf_opts *o, int role, int report, perf_listening_fn *listening,
	     void *arg)
{
	return run_peer(o, role, report, NULL, 0, listening, arg);
}

int perf_run_pair(struct perf_group *g, int pair)
{
	return run_peer(g->o, g->role, g->report && pair == 0, g, pair, g->listening, g->arg);
}
