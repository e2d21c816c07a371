/*
 * chunk_cost: the library's own cost per chunk, for an instruction-count
 * profile (scripts/chunk_cost.sh runs it under callgrind).
 *
 * One process, two host-memory sessions over the in-process MemNet plugin
 * (bench/memnet/), one connection between them, made by blob exchange (a
 * thread each side, as tcpx_p2p_connect wants both sides at once).  Then
 * one thread moves T transfers of C chunks, one transfer at a time, and
 * drives both sides by polling (tcpx_p2p_test of each side's xfer, or of
 * the initiator's xfer and tcpx_p2p_session_progress of the target), so
 * the work done, and the instruction count, is the same in every run.
 *
 *   chunk_cost [-n T] [-c C] [--vec] [--write] [options]
 *
 * Modes: send/recv (default), --vec (sendv/recvv of --segs segments each
 * side), --write (tcpx_p2p_write into the target's export; the target
 * posts nothing and only drives its session), --write --vec (a write of
 * --segs local and --segs remote segments).
 *
 * Exit status: 0 success, 1 error or verification mismatch, 2 usage.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "tcpx_p2p.h"

/* Polls after which a transfer counts as stalled (MemNet needs a handful). */
#define CC_STALL_POLLS 1000000L
#define CC_MAX_SEGS 4096
/* MemNet copies requests of at most this (its control-frame rule). */
#define CC_MEMNET_COPY_MAX (64u << 10)

struct opts {
	int transfers;
	int warmup;
	int chunks;      /* per transfer */
	int channels;
	size_t chunk_bytes;
	int segs;        /* --vec: segments per side */
	bool vec;
	bool write;
	bool verify;
	bool json;
	const char *plugin;
};

struct side {
	tcpx_p2p_session *s;
	tcpx_p2p_listener *l;
	tcpx_p2p_conn *c;
	tcpx_p2p_mr *mr;
	char *buf;
	const void *peer_blob;
	size_t peer_len;
	int rc;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: chunk_cost [options]\n"
		"  -n, --transfers N     timed transfers (default 200)\n"
		"  -w, --warmup N        untimed transfers first (default 2)\n"
		"  -c, --chunks N        chunks per transfer (default 16)\n"
		"      --chunk-bytes N   bytes per chunk (default 64K; K/M = 2^10/2^20)\n"
		"      --channels N      data channels per connection (default 2)\n"
		"      --vec             sendv/recvv (or, with --write, a vectored write)\n"
		"      --segs N          segments per side with --vec (default 64)\n"
		"      --write           one-sided tcpx_p2p_write into the target's export\n"
		"      --verify          check every byte (chunk bytes <= 64K: MemNet copies\n"
		"                        no larger request)\n"
		"      --plugin PATH     the MemNet plugin (default: the one built with this)\n"
		"      --json            one JSON record on stdout instead of the text line\n"
		"A transfer is chunks x chunk-bytes long and is cut into exactly that many\n"
		"chunks when chunks >= channels or chunk-bytes <= 64K.\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{ "transfers", 1, NULL, 'n' }, { "warmup", 1, NULL, 'w' },
		{ "chunks", 1, NULL, 'c' },    { "chunk-bytes", 1, NULL, 'B' },
		{ "channels", 1, NULL, 'C' },  { "vec", 0, NULL, 'v' },
		{ "segs", 1, NULL, 'S' },      { "write", 0, NULL, 'W' },
		{ "verify", 0, NULL, 'V' },    { "plugin", 1, NULL, 'P' },
		{ "json", 0, NULL, 'j' },      { "help", 0, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, bad = 0;

	*o = (struct opts){ .transfers = 200, .warmup = 2, .chunks = 16, .channels = 2,
			    .chunk_bytes = 64 << 10, .segs = 64, .plugin = CC_MEMNET_PATH };
	while ((c = getopt_long(argc, argv, "n:w:c:h", longs, NULL)) != -1) {
		switch (c) {
		case 'n': bad = bench_parse_int(optarg, 1, 1 << 24, &o->transfers); break;
		case 'w': bad = bench_parse_int(optarg, 0, 1 << 24, &o->warmup); break;
		case 'c': bad = bench_parse_int(optarg, 1, 1 << 16, &o->chunks); break;
		case 'B': bad = bench_parse_size(optarg, &o->chunk_bytes); break;
		case 'C': bad = bench_parse_int(optarg, 1, 16, &o->channels); break;
		case 'S': bad = bench_parse_int(optarg, 1, CC_MAX_SEGS, &o->segs); break;
		case 'v': o->vec = true; break;
		case 'W': o->write = true; break;
		case 'V': o->verify = true; break;
		case 'P': o->plugin = optarg; break;
		case 'j': o->json = true; break;
		case 'h': usage(stdout); exit(0);
		default: bad = 1; break;
		}
		if (bad) {
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc || !o->chunk_bytes || o->chunk_bytes > (4u << 20)) {
		usage(stderr);
		return -1;
	}
	if (o->chunks < o->channels && o->chunk_bytes > (64u << 10)) {
		fprintf(stderr, "chunk_cost: with fewer chunks than channels, chunk-bytes must be "
			"<= 64K (the library would split the transfer otherwise)\n");
		return -1;
	}
	if ((size_t)o->chunks * o->chunk_bytes > (1u << 30)) {
		fprintf(stderr, "chunk_cost: chunks x chunk-bytes above 1 GiB\n");
		return -1;
	}
	if (o->vec && (size_t)o->segs > (size_t)o->chunks * o->chunk_bytes) {
		fprintf(stderr, "chunk_cost: more segments than bytes\n");
		return -1;
	}
	if (o->verify && o->chunk_bytes > CC_MEMNET_COPY_MAX) {
		fprintf(stderr, "chunk_cost: --verify needs chunk-bytes <= 64K\n");
		return -1;
	}
	return 0;
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "chunk_cost: %s: %s (%s)\n", what, tcpx_p2p_strerror(rc),
		tcpx_p2p_last_error());
	return 1;
}

static int side_create(const struct opts *o, struct side *sd, size_t len)
{
	tcpx_p2p_config cfg;
	int rc;

	rc = tcpx_p2p_config_init(&cfg);
	if (rc)
		return fail("config_init", rc);
	cfg.gpu = -1;
	cfg.plugin_path = o->plugin;
	cfg.num_channels = o->channels;
	cfg.chunk_bytes = o->chunk_bytes;
	cfg.progress_thread = 0;
	rc = tcpx_p2p_session_create(&cfg, &sd->s);
	if (rc)
		return fail("session_create", rc);
	sd->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!sd->buf) {
		fprintf(stderr, "chunk_cost: out of memory\n");
		return 1;
	}
	memset(sd->buf, 0, len); /* fault the pages in before anything is counted */
	rc = tcpx_p2p_mr_register(sd->s, sd->buf, len, TCPX_P2P_MEM_HOST, &sd->mr);
	if (rc)
		return fail("mr_register", rc);
	rc = tcpx_p2p_listen(sd->s, &sd->l);
	if (rc)
		return fail("listen", rc);
	return 0;
}

/* Both conns go before either session: the second destroy answers the
 * first one's close (both peers are driven by this one thread). */
static void side_destroy(struct side *sd)
{
	if (sd->l)
		tcpx_p2p_listener_destroy(sd->l);
	if (sd->mr)
		tcpx_p2p_mr_deregister(sd->mr);
	if (sd->s)
		tcpx_p2p_session_destroy(sd->s);
	free(sd->buf);
}

static void *connect_main(void *arg)
{
	struct side *sd = arg;

	sd->rc = tcpx_p2p_connect(sd->l, sd->peer_blob, sd->peer_len, 10000, &sd->c);
	if (!sd->rc)
		sd->l = NULL; /* consumed */
	return NULL;
}

/* Both sides connect at once: each call returns when all comms exist. */
static int connect_pair(struct side *a, struct side *b)
{
	pthread_t tid;
	int rc;

	if ((rc = tcpx_p2p_listener_blob(a->l, &b->peer_blob, &b->peer_len)) ||
	    (rc = tcpx_p2p_listener_blob(b->l, &a->peer_blob, &a->peer_len)))
		return fail("listener_blob", rc);
	if (pthread_create(&tid, NULL, connect_main, b)) {
		fprintf(stderr, "chunk_cost: cannot start a thread\n");
		return 1;
	}
	connect_main(a);
	pthread_join(tid, NULL);
	if (a->rc)
		return fail("connect (initiator)", a->rc);
	if (b->rc)
		return fail("connect (target)", b->rc);
	return 0;
}

/* --vec: len split into n segments, the last taking the remainder. */
static void make_segs(tcpx_p2p_seg *g, int n, tcpx_p2p_mr *mr, size_t len)
{
	size_t each = len / (size_t)n;

	for (int i = 0; i < n; i++)
		g[i] = (tcpx_p2p_seg){ mr, (size_t)i * each, i == n - 1 ? len - (size_t)i * each : each };
}

static void make_rsegs(tcpx_p2p_rseg *g, const tcpx_p2p_seg *local, int n,
		       const tcpx_p2p_rmr *rmr)
{
	for (int i = 0; i < n; i++)
		g[i] = (tcpx_p2p_rseg){ rmr, local[i].offset, local[i].len };
}

struct run {
	const struct opts *o;
	struct side *a, *b;      /* initiator (sender), target (receiver) */
	tcpx_p2p_seg *sa, *sb;   /* segments of each side */
	tcpx_p2p_rseg *rseg;     /* --write: the target's segments */
	int nseg;
	tcpx_p2p_rmr *rmr;
	size_t len;
	long polls;
};

static void fill(char *p, size_t len, int t)
{
	uint64_t v = 0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1);

	for (size_t i = 0; i + 8 <= len; i += 8, v += 0x632be59bd9b4e019ULL)
		memcpy(p + i, &v, 8);
}

/* Poll x done, driving its session; also drive the other side as
 * asked: its xfer y (two-sided) or its session (the write's target). */
static int drive(struct run *r, tcpx_p2p_xfer *x, tcpx_p2p_xfer *y, tcpx_p2p_session *other)
{
	int dx = 0, dy = !y, rc;
	long n;

	for (n = 0; !(dx && dy); n++) {
		if (n == CC_STALL_POLLS) {
			fprintf(stderr, "chunk_cost: transfer stalled after %ld polls\n", n);
			return 1;
		}
		if (!dx && (rc = tcpx_p2p_test(x, &dx)))
			return fail("test (initiator)", rc);
		if (!dy && (rc = tcpx_p2p_test(y, &dy)))
			return fail("test (target)", rc);
		if (other && !dx && (rc = tcpx_p2p_session_progress(other)))
			return fail("session_progress (target)", rc);
	}
	r->polls += n;
	return 0;
}

static int one_transfer(struct run *r, int t)
{
	const struct opts *o = r->o;
	tcpx_p2p_xfer *xa = NULL, *xb = NULL;
	int rc, ret = 1;

	if (o->verify) {
		fill(r->a->buf, r->len, t);
		memset(r->b->buf, 0, r->len);
	}
	if (o->write) {
		rc = tcpx_p2p_write(r->a->c, r->sa, (size_t)r->nseg, r->rseg, (size_t)r->nseg,
				    NULL, &xa);
		if (rc)
			return fail("write", rc);
		ret = drive(r, xa, NULL, r->b->s);
	} else {
		if (o->vec)
			rc = tcpx_p2p_recvv(r->b->c, r->sb, (size_t)r->nseg, NULL, &xb);
		else
			rc = tcpx_p2p_recv(r->b->c, r->b->mr, 0, r->len, &xb);
		if (rc)
			return fail("recv", rc);
		if (o->vec)
			rc = tcpx_p2p_sendv(r->a->c, r->sa, (size_t)r->nseg, NULL, &xa);
		else
			rc = tcpx_p2p_send(r->a->c, r->a->mr, 0, r->len, &xa);
		if (rc) {
			fail("send", rc);
			goto release;
		}
		ret = drive(r, xa, xb, NULL);
	}
	if (!ret && o->verify && memcmp(r->a->buf, r->b->buf, r->len)) {
		fprintf(stderr, "chunk_cost: transfer %d: the target's bytes differ\n", t);
		ret = 1;
	}
release:
	if (xa && (rc = tcpx_p2p_xfer_release(xa)))
		ret = fail("xfer_release", rc);
	if (xb && (rc = tcpx_p2p_xfer_release(xb)))
		ret = fail("xfer_release", rc);
	return ret;
}

static const char *mode_name(const struct opts *o)
{
	if (o->write)
		return o->vec ? "write-vec" : "write";
	return o->vec ? "vec" : "send";
}

static void report(const struct run *r, double secs)
{
	const struct opts *o = r->o;
	long chunks = (long)o->transfers * o->chunks;

	if (o->json) {
		printf("{\"mode\": \"%s\", \"transfers\": %d, \"chunks\": %ld, \"chunks_per_transfer\": "
		       "%d, \"chunk_bytes\": %zu, \"channels\": %d, \"segs\": %d, \"warmup\": %d, "
		       "\"polls\": %ld, \"wall_s\": %.6f, \"us_per_chunk\": %.4f}\n",
		       mode_name(o), o->transfers, chunks, o->chunks, o->chunk_bytes, o->channels,
		       r->nseg, o->warmup, r->polls, secs, secs * 1e6 / (double)chunks);
		return;
	}
	printf("# chunk_cost: %s, %d channels, %zu-byte chunks, %d per transfer, %d segment(s) "
	       "per side, %d warm-up transfer(s), plugin %s\n", mode_name(o), o->channels,
	       o->chunk_bytes, o->chunks, r->nseg, o->warmup, o->plugin);
	printf("transfers %d chunks %ld polls %ld wall_s %.6f us_per_chunk %.4f\n", o->transfers,
	       chunks, r->polls, secs, secs * 1e6 / (double)chunks);
}

static int run_all(struct run *r)
{
	const struct opts *o = r->o;
	struct timespec t0, t1;
	int t;

	for (t = 0; t < o->warmup; t++)
		if (one_transfer(r, t))
			return 1;
	r->polls = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (t = 0; t < o->transfers; t++)
		if (one_transfer(r, o->warmup + t))
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	report(r, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
	return 0;
}

int main(int argc, char **argv)
{
	struct side a = { 0 }, b = { 0 };
	struct opts o;
	struct run r = { .o = &o, .a = &a, .b = &b };
	tcpx_p2p_rdesc desc;
	int rc, ret = 1;

	if (parse(argc, argv, &o))
		return 2;
	r.len = (size_t)o.chunks * o.chunk_bytes;
	r.nseg = o.vec ? o.segs : 1;
	r.sa = calloc((size_t)r.nseg, sizeof(*r.sa));
	r.sb = calloc((size_t)r.nseg, sizeof(*r.sb));
	r.rseg = calloc((size_t)r.nseg, sizeof(*r.rseg));
	if (!r.sa || !r.sb || !r.rseg) {
		fprintf(stderr, "chunk_cost: out of memory\n");
		goto out;
	}
	if (side_create(&o, &a, r.len) || side_create(&o, &b, r.len) || connect_pair(&a, &b))
		goto out;
	make_segs(r.sa, r.nseg, a.mr, r.len);
	make_segs(r.sb, r.nseg, b.mr, r.len);
	if (o.write) {
		rc = tcpx_p2p_mr_export(b.c, b.mr, 0, r.len, TCPX_P2P_ACCESS_WRITE, &desc);
		if (rc) {
			fail("mr_export", rc);
			goto out;
		}
		rc = tcpx_p2p_rmr_import(a.c, &desc, &r.rmr);
		if (rc) {
			fail("rmr_import", rc);
			goto out;
		}
		make_rsegs(r.rseg, r.sb, r.nseg, r.rmr);
	}
	ret = run_all(&r);
out:
	if (r.rmr)
		tcpx_p2p_rmr_release(r.rmr);
	if (a.c)
		tcpx_p2p_conn_destroy(a.c);
	if (b.c)
		tcpx_p2p_conn_destroy(b.c);
	side_destroy(&a);
	side_destroy(&b);
	free(r.rseg);
	free(r.sb);
	free(r.sa);
	return ret;
}
