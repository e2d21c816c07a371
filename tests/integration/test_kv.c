/* Vectored transfers, one-sided WRITE/READ into exported memory and
 * notifications (the 0.3 API) between two sessions of this process over the
 * emulator.  Every case checks bytes: each region keeps a host shadow of
 * what it must hold, and the whole region (guard bytes around and between
 * the destinations included) is compared with it.
 *
 * Usage: test_kv host|cuda.  "cuda" makes both sessions with gpu 0 and
 * cudaMalloc'd regions (a build with TP_KV_CUDA; it exits 77 without a
 * GPU); "host" uses plain malloc.  TP_KV_SEED=n repeats a run's random
 * shapes (the seed is printed).  The emulator modes come from the
 * environment of each CTest registration.
 *
 * Overlapping writes in flight together: the chunks of one connection
 * travel over several channels and land in whatever order the channels
 * deliver them, so when two writes in flight cover the same remote bytes
 * the earlier one's may land last.  test_many_batches checks overwrites
 * after the overwritten writes completed; TP_KV_OVERLAP=1 posts them
 * while those are in flight ("land in posting order", include/tcpx_p2p.h,
 * read as bytes: fails today). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#ifdef TP_KV_CUDA
#include <cuda_runtime_api.h>
#endif

#include "pair.h"

static int g_cuda;
static uint64_t g_seed;

#define DEADLINE_S 30.0

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- random -------------------------------------------------------------- */

struct rng {
	uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t below(struct rng *r, size_t n)
{
	return n ? (size_t)(rnd(r) % n) : 0;
}

static size_t between(struct rng *r, size_t lo, size_t hi) /* [lo, hi] */
{
	return lo + below(r, hi - lo + 1);
}

static void shuffle(struct rng *r, size_t *v, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = below(r, i), t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}

/* ---- regions: host or device memory with a shadow of what it must hold ---- */

struct region {
	tcpx_p2p_session *s;
	unsigned char *p;      /* the memory (device memory in CUDA mode) */
	unsigned char *shadow; /* host: what p must hold */
	size_t len;
	tcpx_p2p_mr *mr;       /* NULL once deregistered */
};

#define MAX_REGIONS 16

struct fx {
	struct tp_pair p; /* s[0]/c[0]: initiator and sender; s[1]/c[1]: target */
	tcpx_p2p_session *s2; /* a second initiator (case 6) */
	tcpx_p2p_conn *c2[2]; /* s2's conn, the target's conn to s2 */
	struct region *reg[MAX_REGIONS];
	int nreg;
	struct rng rng;
	size_t chunk_bytes;
	int nchan;
};

static void dev_put(struct region *r, size_t off, size_t n)
{
	if (!n)
		return;
#ifdef TP_KV_CUDA
	if (g_cuda) {
		assert_int_equal(cudaMemcpy(r->p + off, r->shadow + off, n, cudaMemcpyHostToDevice),
				 cudaSuccess);
		return;
	}
#endif
	memcpy(r->p + off, r->shadow + off, n);
}

/* The region's actual bytes [off, +n) as host memory (tmp, or p itself). */
static const unsigned char *dev_get(const struct region *r, size_t off, size_t n,
				    unsigned char *tmp)
{
#ifdef TP_KV_CUDA
	if (g_cuda) {
		/* Synchronous copy on the legacy stream: no device-wide sync, so
		 * a completion reported before the library's copies ended shows. */
		assert_int_equal(cudaMemcpy(tmp, r->p + off, n, cudaMemcpyDeviceToHost),
				 cudaSuccess);
		return tmp;
	}
#endif
	(void)tmp;
	return r->p + off;
}

static struct region *region_new(struct fx *f, tcpx_p2p_session *s, size_t len, uint64_t seed)
{
	struct region *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	assert_true(f->nreg < MAX_REGIONS);
	r->s = s;
	r->len = len;
	r->shadow = malloc(len);
	assert_non_null(r->shadow);
#ifdef TP_KV_CUDA
	if (g_cuda) {
		assert_int_equal(cudaSetDevice(0), cudaSuccess);
		assert_int_equal(cudaMalloc((void **)&r->p, len), cudaSuccess);
	}
#endif
	if (!g_cuda)
		r->p = malloc(len);
	assert_non_null(r->p);
	/* Known contents everywhere: any byte written where it must not be shows. */
	tp_fill(r->shadow, len, seed);
	dev_put(r, 0, len);
	assert_int_equal(tcpx_p2p_mr_register(s, r->p, len,
					      g_cuda ? TCPX_P2P_MEM_CUDA : TCPX_P2P_MEM_HOST,
					      &r->mr), 0);
	f->reg[f->nreg++] = r;
	return r;
}

static void region_free(struct region *r)
{
	if (r->mr)
		assert_int_equal(tcpx_p2p_mr_deregister(r->mr), 0);
#ifdef TP_KV_CUDA
	if (g_cuda)
		cudaFree(r->p);
#endif
	if (!g_cuda)
		free(r->p);
	free(r->shadow);
	free(r);
}

/* The region holds its shadow in [off, +n)? Fails the test where not. */
static void verify_range(const struct region *r, size_t off, size_t n, const char *what)
{
	size_t step = 4u << 20;

	for (size_t o = off; o < off + n; o += step) {
		size_t k = off + n - o < step ? off + n - o : step, i;
		unsigned char *tmp = g_cuda ? malloc(k) : NULL;
		const unsigned char *got = dev_get(r, o, k, tmp);

		if (memcmp(got, r->shadow + o, k)) {
			for (i = 0; got[i] == r->shadow[o + i]; i++)
				;
			fail_msg("%s: byte %zu of the %zu-byte region is 0x%02x, want 0x%02x "
				 "(seed %llu)", what, o + i, r->len, got[i], r->shadow[o + i],
				 (unsigned long long)g_seed);
		}
		free(tmp);
	}
}

static void verify(const struct region *r, const char *what)
{
	verify_range(r, 0, r->len, what);
}

/* Expect src's [soff, +n) at dst's doff (the shadow only). */
static void expect_copy(struct region *dst, size_t doff, const struct region *src, size_t soff,
			size_t n)
{
	assert_true(doff + n <= dst->len && soff + n <= src->len);
	memmove(dst->shadow + doff, src->shadow + soff, n);
}

/* ---- fixture --------------------------------------------------------------- */

static int open_fx(void **state, int threaded)
{
	struct fx *f = calloc(1, sizeof(*f));
	tcpx_p2p_config cfg;
	static int round;

	if (!f || tcpx_p2p_config_init(&cfg))
		return -1;
	cfg.gpu = g_cuda ? 0 : -1;
	if (threaded)
		cfg.progress_thread = 1;
	if (tp_pair_open(&f->p, &cfg, 0)) {
		free(f);
		return -1;
	}
	f->chunk_bytes = cfg.chunk_bytes;
	f->nchan = cfg.num_channels;
	f->rng.s = g_seed + 0x1000193ull * (uint64_t)++round;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return open_fx(state, 0);
}

/* Both sessions with a progress thread, whatever the environment says. */
static int setup_threaded(void **state)
{
	return open_fx(state, 1);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	int i;

	for (i = 0; i < 2; i++) {
		if (f->c2[i])
			assert_int_equal(tcpx_p2p_conn_destroy(f->c2[i]), 0);
		if (f->p.c[i])
			assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[i]), 0);
		f->c2[i] = f->p.c[i] = NULL;
	}
	for (i = 0; i < f->nreg; i++)
		region_free(f->reg[i]);
	if (f->s2)
		assert_int_equal(tcpx_p2p_session_destroy(f->s2), 0);
	tp_pair_close(&f->p);
	free(f);
	return 0;
}

/* ---- driving: both peers live in this thread ------------------------------ */

static void drive(struct fx *f)
{
	assert_int_equal(tcpx_p2p_session_progress(f->p.s[0]), 0);
	assert_int_equal(tcpx_p2p_session_progress(f->p.s[1]), 0);
	if (f->s2)
		assert_int_equal(tcpx_p2p_session_progress(f->s2), 0);
}

struct result {
	int rc;
	char why[320];
};

/* Test x[0..n) (NULL entries skipped) until each completed or failed,
 * driving every session meanwhile; the outcome of each goes to res[i] and
 * each is released.  Fails the test after DEADLINE_S. */
static void complete(struct fx *f, tcpx_p2p_xfer **x, int n, struct result *res)
{
	double t0 = now_s();
	int left = 0, i, rc, done;

	for (i = 0; i < n; i++)
		left += x[i] != NULL;
	while (left) {
		for (i = 0; i < n; i++) {
			if (!x[i])
				continue;
			done = 0;
			rc = tcpx_p2p_test(x[i], &done);
			if (!rc && !done)
				continue;
			res[i].rc = rc;
			snprintf(res[i].why, sizeof(res[i].why), "%s", rc ? tcpx_p2p_last_error() : "");
			assert_int_equal(tcpx_p2p_xfer_release(x[i]), 0);
			x[i] = NULL;
			left--;
		}
		drive(f);
		if (now_s() - t0 > DEADLINE_S)
			fail_msg("%d transfer(s) still pending after %.0f s", left, DEADLINE_S);
	}
}

/* complete(), every one must succeed. */
static void complete_ok(struct fx *f, tcpx_p2p_xfer **x, int n)
{
	struct result *res = calloc((size_t)n, sizeof(*res));
	int i;

	assert_non_null(res);
	complete(f, x, n, res);
	for (i = 0; i < n; i++)
		if (res[i].rc)
			fail_msg("transfer %d of %d: %s: %s", i, n, tcpx_p2p_strerror(res[i].rc),
				 res[i].why);
	free(res);
}

static void complete1_ok(struct fx *f, tcpx_p2p_xfer *x)
{
	complete_ok(f, &x, 1);
}

/* One finished transfer's outcome. */
static struct result complete1(struct fx *f, tcpx_p2p_xfer *x)
{
	struct result r;

	complete(f, &x, 1, &r);
	return r;
}

/* Take the next notification of session s, driving every session. */
static void notif_take(struct fx *f, tcpx_p2p_session *s, tcpx_p2p_notif *out)
{
	double t0 = now_s();
	int n = 0;

	for (;;) {
		assert_int_equal(tcpx_p2p_notif_poll(s, out, 1, &n), 0);
		if (n)
			return;
		drive(f);
		if (now_s() - t0 > DEADLINE_S)
			fail_msg("no notification after %.0f s", DEADLINE_S);
	}
}

static void notif_none(struct fx *f, tcpx_p2p_session *s)
{
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	int i, n = 0;

	assert_non_null(nt);
	for (i = 0; i < 50; i++) {
		drive(f);
		assert_int_equal(tcpx_p2p_notif_poll(s, nt, 1, &n), 0);
		if (n)
			fail_msg("unexpected notification of %zu bytes", nt->len);
	}
	free(nt);
}

static void notif_expect(const tcpx_p2p_notif *nt, tcpx_p2p_conn *c, const void *msg, size_t len)
{
	assert_ptr_equal(nt->conn, c);
	assert_int_equal(nt->len, len);
	assert_memory_equal(nt->msg, msg, len);
}

static int post_write(tcpx_p2p_conn *c, const tcpx_p2p_seg *l, size_t nl, const tcpx_p2p_rseg *r,
		      size_t nr, const void *notif, size_t notif_len, tcpx_p2p_xfer **x)
{
	tcpx_p2p_xfer_params p = { .struct_size = sizeof(p), .notif = notif,
				   .notif_len = notif_len };

	return tcpx_p2p_write(c, l, nl, r, nr, notif ? &p : NULL, x);
}

/* ---- case 1: random segment shapes ------------------------------------------- */

enum shape { SH_MIXED, SH_TINY, SH_LARGE, SH_CHUNKY };

struct segl {
	size_t n, cap;
	size_t *len, *off;
	size_t span; /* bytes the layout needs */
};

static void segl_add(struct segl *l, size_t len)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->len = realloc(l->len, l->cap * sizeof(*l->len));
		l->off = realloc(l->off, l->cap * sizeof(*l->off));
		assert_true(l->len && l->off);
	}
	l->len[l->n++] = len;
}

static void segl_free(struct segl *l)
{
	free(l->len);
	free(l->off);
	memset(l, 0, sizeof(*l));
}

/* The chunk size a transfer of len bytes gets (src/core/chunk.h). */
static size_t xfer_chunk(const struct fx *f, size_t len)
{
	size_t share = len / (size_t)f->nchan + (len % (size_t)f->nchan != 0);

	share = (share + 4095) & ~(size_t)4095;
	if (share < (64u << 10))
		share = 64u << 10;
	return share < f->chunk_bytes ? share : f->chunk_bytes;
}

/* Cut total bytes into segments of a style (0-byte segments included). */
static void cut(struct fx *f, struct segl *l, size_t total, enum shape sh)
{
	struct rng *r = &f->rng;
	size_t left = total, chunk = xfer_chunk(f, total), want, k;

	l->n = 0;
	if (sh == SH_LARGE) { /* 1..4 pieces */
		size_t pieces = between(r, 1, 4);

		for (k = 0; k + 1 < pieces && left; k++) {
			want = below(r, left + 1);
			segl_add(l, want);
			left -= want;
		}
		segl_add(l, left);
		return;
	}
	for (k = 0; left; k++) {
		size_t pick = below(r, 100);

		switch (sh) {
		case SH_TINY:
			want = pick < 10 ? 0 : between(r, 1, 8);
			break;
		case SH_CHUNKY: /* lengths around the chunk size: pieces straddle chunks */
			want = pick < 15 ? 1 : pick < 20 ? 0 : chunk - 2 + below(r, 5);
			break;
		default:
			want = pick < 8 ? 0 : pick < 16 ? 1 : pick < 45 ? between(r, 2, 100)
			     : pick < 80 ? between(r, 101, 64u << 10) : between(r, 64u << 10, 2 * chunk);
		}
		segl_add(l, want < left ? want : left);
		left -= want < left ? want : left;
		if (k % 7 == 3 && sh != SH_CHUNKY)
			segl_add(l, 0);
	}
	if (below(r, 2))
		segl_add(l, 0); /* a trailing empty one */
}

/* Place the segments in memory in a random order with gaps of
 * mingap..maxgap bytes (guards between receive segments). */
static void place(struct fx *f, struct segl *l, size_t mingap, size_t maxgap)
{
	size_t *order = malloc((l->n ? l->n : 1) * sizeof(*order)), i, at;

	assert_non_null(order);
	for (i = 0; i < l->n; i++)
		order[i] = i;
	shuffle(&f->rng, order, l->n);
	at = between(&f->rng, mingap, maxgap);
	for (i = 0; i < l->n; i++) {
		l->off[order[i]] = at;
		at += l->len[order[i]] + between(&f->rng, mingap, maxgap);
	}
	l->span = at;
	free(order);
}

static tcpx_p2p_seg *segs_of(const struct segl *l, const struct region *r)
{
	tcpx_p2p_seg *g = malloc((l->n ? l->n : 1) * sizeof(*g));

	assert_non_null(g);
	for (size_t i = 0; i < l->n; i++)
		g[i] = (tcpx_p2p_seg){ r->mr, l->off[i], l->len[i] };
	return g;
}

/* The sender's packed stream lands in the receiver's segments. */
static void expect_stream(struct region *dst, const struct segl *dl, const struct region *src,
			  const struct segl *sl)
{
	size_t si = 0, so = 0, di = 0, doff = 0;

	for (;;) {
		size_t n;

		while (si < sl->n && so == sl->len[si]) {
			si++;
			so = 0;
		}
		while (di < dl->n && doff == dl->len[di]) {
			di++;
			doff = 0;
		}
		if (si == sl->n || di == dl->n)
			break;
		n = sl->len[si] - so < dl->len[di] - doff ? sl->len[si] - so : dl->len[di] - doff;
		expect_copy(dst, dl->off[di] + doff, src, sl->off[si] + so, n);
		so += n;
		doff += n;
	}
}

/* One sendv/recvv pair of the given shapes from side `from`. */
static void vec_round(struct fx *f, int from, size_t total, enum shape ssh, enum shape rsh,
		      int round)
{
	struct segl sl = { 0 }, rl = { 0 };
	struct region *src, *dst;
	tcpx_p2p_seg *sg, *rg;
	tcpx_p2p_xfer *x[2];

	cut(f, &sl, total, ssh);
	cut(f, &rl, total, rsh);
	place(f, &sl, 0, ssh == SH_TINY ? 3 : 4096);
	place(f, &rl, 1, rsh == SH_TINY ? 3 : 4096);
	/* a tail of guard bytes after the last segment too */
	src = region_new(f, f->p.s[from], sl.span + 64, 5000 + (uint64_t)round);
	dst = region_new(f, f->p.s[1 - from], rl.span + 64, 6000 + (uint64_t)round);
	sg = segs_of(&sl, src);
	rg = segs_of(&rl, dst);
	print_message("  round %d: %zu bytes, %zu send segments, %zu receive segments\n", round,
		      total, sl.n, rl.n);
	expect_stream(dst, &rl, src, &sl);
	assert_int_equal(tcpx_p2p_recvv(f->p.c[1 - from], rl.n ? rg : NULL, rl.n, NULL, &x[0]), 0);
	assert_int_equal(tcpx_p2p_sendv(f->p.c[from], sl.n ? sg : NULL, sl.n, NULL, &x[1]), 0);
	complete_ok(f, x, 2);
	verify(dst, "receiver");
	verify(src, "sender");
	free(sg);
	free(rg);
	segl_free(&sl);
	segl_free(&rl);
	/* free the two regions now: later rounds need memory too */
	f->nreg -= 2;
	region_free(dst);
	region_free(src);
}

static void test_vec_shapes(void **state)
{
	struct fx *f = *state;
	size_t chunk = f->chunk_bytes;
	int round = 0;

	vec_round(f, 0, between(&f->rng, 1u << 20, 6u << 20), SH_MIXED, SH_MIXED, round++);
	vec_round(f, 1, between(&f->rng, 1u << 20, 4u << 20), SH_MIXED, SH_MIXED, round++);
	vec_round(f, 0, between(&f->rng, 20000, 30000), SH_TINY, SH_LARGE, round++);
	vec_round(f, 0, between(&f->rng, 20000, 30000), SH_LARGE, SH_TINY, round++);
	vec_round(f, 1, between(&f->rng, 12000, 16000), SH_TINY, SH_TINY, round++);
	vec_round(f, 0, 3 * chunk + between(&f->rng, 0, chunk), SH_CHUNKY, SH_MIXED, round++);
	vec_round(f, 0, 2 * chunk + between(&f->rng, 0, chunk), SH_MIXED, SH_CHUNKY, round++);
	vec_round(f, 0, 4 * chunk + 3, SH_CHUNKY, SH_CHUNKY, round++);
	vec_round(f, 1, between(&f->rng, 1, 100), SH_MIXED, SH_TINY, round++);
	vec_round(f, 0, 1, SH_LARGE, SH_TINY, round++);
	vec_round(f, 0, 0, SH_TINY, SH_LARGE, round++); /* only empty segments */
	while (round < 40) { /* and random ones */
		enum shape a = (enum shape)below(&f->rng, 4), b = (enum shape)below(&f->rng, 4);
		size_t total = a == SH_TINY || b == SH_TINY ? between(&f->rng, 0, 40000)
			     : between(&f->rng, 0, 8u << 20);

		vec_round(f, (int)below(&f->rng, 2), total, a, b, round++);
	}
}

/* Empty lists: no segments at all on one side, empty ones on the other. */
static void test_vec_empty(void **state)
{
	struct fx *f = *state;
	struct region *a = region_new(f, f->p.s[0], 4096, 1), *b = region_new(f, f->p.s[1], 4096, 2);
	tcpx_p2p_seg e[3] = { { b->mr, 0, 0 }, { b->mr, 4096, 0 }, { b->mr, 17, 0 } };
	tcpx_p2p_seg g = { a->mr, 100, 50 }, h = { b->mr, 3000, 50 };
	tcpx_p2p_xfer *x[4];

	assert_int_equal(tcpx_p2p_recvv(f->p.c[1], e, 3, NULL, &x[0]), 0);
	if (tcpx_p2p_sendv(f->p.c[0], NULL, 0, NULL, &x[1]))
		fail_msg("sendv of no segments: %s", tcpx_p2p_last_error());
	assert_int_equal(tcpx_p2p_recvv(f->p.c[1], &h, 1, NULL, &x[2]), 0);
	assert_int_equal(tcpx_p2p_sendv(f->p.c[0], &g, 1, NULL, &x[3]), 0);
	complete_ok(f, x, 4);
	expect_copy(b, 3000, a, 100, 50);
	verify(b, "receiver");
	/* NULL list with segments, a segment outside its region: EINVAL, no xfer */
	x[0] = NULL;
	assert_int_equal(tcpx_p2p_sendv(f->p.c[0], NULL, 2, NULL, &x[0]), TCPX_P2P_EINVAL);
	g.offset = 4047;
	assert_int_equal(tcpx_p2p_sendv(f->p.c[0], &g, 1, NULL, &x[0]), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "outside"));
	assert_null(x[0]);
}

/* ---- case 2: mixed plain and vectored, several in flight ---------------- */

enum { MIX_N = 12, MIX_SEG = 5 };

struct mix {
	size_t len;
	int vsend, vrecv;          /* vectored on that side */
	tcpx_p2p_seg s[MIX_SEG], r[MIX_SEG];
};

static int mix_post_send(struct fx *f, const struct mix *m, tcpx_p2p_xfer **x)
{
	if (m->vsend)
		return tcpx_p2p_sendv(f->p.c[0], m->s, MIX_SEG, NULL, x);
	return tcpx_p2p_send(f->p.c[0], m->s[0].mr, m->s[0].offset, m->len, x);
}

static int mix_post_recv(struct fx *f, const struct mix *m, tcpx_p2p_xfer **x)
{
	if (m->vrecv)
		return tcpx_p2p_recvv(f->p.c[1], m->r, MIX_SEG, NULL, x);
	return tcpx_p2p_recv(f->p.c[1], m->r[0].mr, m->r[0].offset, m->len, x);
}

/* Plain send matched with recvv, sendv with plain recv (and the pure
 * pairs), twelve in a row posted before any completes: receives first,
 * then sends first.  Transfers 6 and 7 have equal totals, so a swap shows
 * in the bytes. */
static void test_mixed(void **state)
{
	struct fx *f = *state;
	struct region *src = region_new(f, f->p.s[0], 8u << 20, 11);
	struct region *dst = region_new(f, f->p.s[1], 8u << 20, 12);
	struct mix m[MIX_N];
	tcpx_p2p_xfer *x[2 * MIX_N];
	size_t soff, roff;
	int i, k, order;

	for (order = 0; order < 2; order++) {
		soff = roff = 0;
		for (i = 0; i < MIX_N; i++) {
			struct mix *mi = &m[i];

			mi->len = i == 5 ? 0 : between(&f->rng, 1, 300u << 10);
			if (i == 7)
				mi->len = m[6].len;
			mi->vsend = (i & 1) != 0;
			mi->vrecv = (i & 2) != 0;
			for (k = 0; k < MIX_SEG; k++) {
				size_t piece = k < MIX_SEG - 1 ? mi->len / MIX_SEG
							       : mi->len - mi->len / MIX_SEG * (MIX_SEG - 1);

				mi->s[k] = (tcpx_p2p_seg){ src->mr, soff, piece };
				mi->r[k] = (tcpx_p2p_seg){ dst->mr, roff, piece };
				expect_copy(dst, roff, src, soff, piece);
				soff += piece;
				roff += piece + (mi->vrecv ? 3 : 0); /* guards between pieces */
			}
			roff += 5;
		}
		for (i = 0; i < MIX_N; i++)
			assert_int_equal(order ? mix_post_send(f, &m[i], &x[i])
					       : mix_post_recv(f, &m[i], &x[i]), 0);
		for (i = 0; i < MIX_N; i++)
			assert_int_equal(order ? mix_post_recv(f, &m[i], &x[MIX_N + i])
					       : mix_post_send(f, &m[i], &x[MIX_N + i]), 0);
		complete_ok(f, x, 2 * MIX_N);
		verify(dst, order ? "receiver (sends posted first)" : "receiver (receives first)");
		verify(src, "sender");
		tp_fill(src->shadow, src->len, 13); /* other bytes for the next round */
		dev_put(src, 0, src->len);
	}
}

/* ---- case 3: totals that differ ------------------------------------------- */

/* A sendv of n bytes against a recvv of m != n: both fail with EPROTO and
 * the detail names the totals, the receive's memory is untouched, and the
 * pair posted right behind (before either completed) goes through. */
static void test_total_mismatch(void **state)
{
	struct fx *f = *state;
	struct region *src = region_new(f, f->p.s[0], 1u << 20, 31);
	struct region *dst = region_new(f, f->p.s[1], 1u << 20, 32);
	tcpx_p2p_xfer *x[4];
	struct result res[4];
	char want[64];
	int round;

	for (round = 0; round < 5; round++) {
		size_t n = between(&f->rng, 1000, 200u << 10), m, good = between(&f->rng, 1, 100000);
		tcpx_p2p_seg sg[3], rg[4], gs = { src->mr, 300u << 10, good },
			     gr = { dst->mr, 600u << 10, good };
		size_t k;

		m = round == 0 ? n + 1 : round == 1 ? n / 2 : round == 2 ? 0 : round == 3 ? n : n - 1;
		if (round == 3)
			n = 0; /* an empty send against a receive with bytes */
		for (k = 0; k < 3; k++)
			sg[k] = (tcpx_p2p_seg){ src->mr, k * (n / 3), k < 2 ? n / 3 : n - 2 * (n / 3) };
		for (k = 0; k < 4; k++) /* 10-byte guards between the pieces */
			rg[k] = (tcpx_p2p_seg){ dst->mr, 10 + k * (m / 4 + 10),
						k < 3 ? m / 4 : m - 3 * (m / 4) };
		expect_copy(dst, gr.offset, src, gs.offset, good);
		if (round == 4) { /* plain send and receive */
			assert_int_equal(tcpx_p2p_recv(f->p.c[1], dst->mr, 10, m, &x[0]), 0);
		} else {
			assert_int_equal(tcpx_p2p_recvv(f->p.c[1], rg, 4, NULL, &x[0]), 0);
		}
		assert_int_equal(tcpx_p2p_recvv(f->p.c[1], &gr, 1, NULL, &x[1]), 0);
		if (round == 4)
			assert_int_equal(tcpx_p2p_send(f->p.c[0], src->mr, 0, n, &x[2]), 0);
		else
			assert_int_equal(tcpx_p2p_sendv(f->p.c[0], sg, 3, NULL, &x[2]), 0);
		assert_int_equal(tcpx_p2p_sendv(f->p.c[0], &gs, 1, NULL, &x[3]), 0);
		complete(f, x, 4, res);
		print_message("  round %d: send %zu, receive %zu: \"%s\" / \"%s\"\n", round, n, m,
			      res[2].why, res[0].why);
		assert_int_equal(res[0].rc, TCPX_P2P_EPROTO);
		assert_int_equal(res[2].rc, TCPX_P2P_EPROTO);
		assert_int_equal(res[1].rc, 0);
		assert_int_equal(res[3].rc, 0);
		assert_non_null(strstr(res[0].why, "totals"));
		assert_non_null(strstr(res[2].why, "totals"));
		snprintf(want, sizeof(want), "%zu", m);
		assert_non_null(strstr(res[0].why, want));
		assert_non_null(strstr(res[2].why, want));
		snprintf(want, sizeof(want), "%zu", n);
		assert_non_null(strstr(res[0].why, want));
		assert_non_null(strstr(res[2].why, want));
		verify(dst, "receiver after a mismatch");
		verify(src, "sender");
	}
	/* and afterwards, a matched pair of each kind */
	vec_round(f, 0, 100000, SH_MIXED, SH_MIXED, 100);
	vec_round(f, 1, 5000, SH_TINY, SH_MIXED, 101);
}

/* ---- one-sided: a pool exported by the target ---------------------------- */

#define BLK 16389u /* odd: blocks straddle chunks and pages everywhere */

struct kv {
	struct region *pool, *loc;
	size_t eo, elen, blk; /* the export: [eo, eo + elen) of pool, blocks of blk */
	tcpx_p2p_rdesc d;
	tcpx_p2p_rmr *rm;     /* imported on c[0] */
};

/* A pool of nb blocks on the target, exported with `access` at an odd
 * offset with guards around, and a local region of nl blocks. */
static void kv_open(struct fx *f, struct kv *k, size_t nb, size_t nl, size_t blk, unsigned access,
		    uint64_t seed)
{
	tcpx_p2p_rdesc wire;
	size_t len;
	int mt;
	unsigned acc;

	memset(k, 0, sizeof(*k));
	k->blk = blk;
	k->eo = 8192 - 3;
	k->elen = nb * blk;
	k->pool = region_new(f, f->p.s[1], k->eo + k->elen + 8192 + 5, seed);
	k->loc = region_new(f, f->p.s[0], nl * blk, seed + 1);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k->pool->mr, k->eo, k->elen, access, &k->d),
			 0);
	memcpy(&wire, &k->d, sizeof(wire)); /* as the application ships it */
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &wire, &k->rm), 0);
	assert_int_equal(tcpx_p2p_rmr_query(k->rm, &len, &mt, &acc), 0);
	assert_int_equal(len, k->elen);
	assert_int_equal(mt, g_cuda ? TCPX_P2P_MEM_CUDA : TCPX_P2P_MEM_HOST);
	assert_int_equal(acc, access);
}

static void kv_close(struct kv *k)
{
	assert_int_equal(tcpx_p2p_rmr_release(k->rm), 0);
	k->rm = NULL;
}

/* n distinct numbers below max (distinct = 1) or any (0). */
static void pick(struct fx *f, size_t *out, size_t n, size_t max, int distinct)
{
	size_t *all, i;

	if (!distinct) {
		for (i = 0; i < n; i++)
			out[i] = below(&f->rng, max);
		return;
	}
	assert_true(n <= max);
	all = malloc(max * sizeof(*all));
	assert_non_null(all);
	for (i = 0; i < max; i++)
		all[i] = i;
	for (i = 0; i < n; i++) { /* partial Fisher-Yates */
		size_t j = i + below(&f->rng, max - i), t = all[i];

		all[i] = all[j];
		all[j] = t;
		out[i] = all[i];
	}
	free(all);
}

/* Write local blocks lid[i] to remote blocks rid[i] of rmr (one segment
 * each) on conn c; expect = 1 records the result in the pool's shadow. */
static int kv_write_via(struct kv *k, tcpx_p2p_conn *c, const tcpx_p2p_rmr *rm,
			const size_t *lid, const size_t *rid, size_t n, const void *notif,
			size_t notif_len, int expect, tcpx_p2p_xfer **x)
{
	tcpx_p2p_seg *l = malloc((n ? n : 1) * sizeof(*l));
	tcpx_p2p_rseg *r = malloc((n ? n : 1) * sizeof(*r));
	int rc;

	assert_true(l && r);
	for (size_t i = 0; i < n; i++) {
		l[i] = (tcpx_p2p_seg){ k->loc->mr, lid[i] * k->blk, k->blk };
		r[i] = (tcpx_p2p_rseg){ rm, rid[i] * k->blk, k->blk };
	}
	rc = post_write(c, l, n, r, n, notif, notif_len, x);
	if (!rc && expect)
		for (size_t i = 0; i < n; i++)
			expect_copy(k->pool, k->eo + rid[i] * k->blk, k->loc, lid[i] * k->blk,
				    k->blk);
	free(l);
	free(r);
	return rc;
}

static int kv_write(struct fx *f, struct kv *k, const size_t *lid, const size_t *rid, size_t n,
		    const void *notif, size_t notif_len, tcpx_p2p_xfer **x)
{
	return kv_write_via(k, f->p.c[0], k->rm, lid, rid, n, notif, notif_len, 1, x);
}

/* A few blocks written and checked: the connection still works. */
static void good_write(struct fx *f, struct kv *k)
{
	size_t nb = k->elen / k->blk, nl = k->loc->len / k->blk, lid[4], rid[4];
	tcpx_p2p_xfer *x;

	pick(f, lid, 4, nl, 0);
	pick(f, rid, 4, nb, 1);
	assert_int_equal(kv_write(f, k, lid, rid, 4, NULL, 0, &x), 0);
	complete1_ok(f, x);
	verify(k->pool, "pool after a good write");
}

/* One-sided and two-sided on one connection: a WRITE (and a READ) posted
 * after a send waits until the target posted the matching receive; the
 * READ of the receive's memory then sees the sent bytes, and the write's
 * notification comes after both. */
static void test_mixed_one_sided(void **state)
{
	struct fx *f = *state;
	struct region *rb;
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	tcpx_p2p_xfer *x[4];
	tcpx_p2p_seg l;
	tcpx_p2p_rseg r;
	size_t lid[8], rid[8], i;
	int j, done;
	struct kv k;

	assert_non_null(nt);
	kv_open(f, &k, 64, 32, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 121);
	rb = region_new(f, f->p.s[0], 8 * (size_t)BLK + 2, 122);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], k.loc->mr, 0, 8 * (size_t)BLK, &x[0]), 0);
	for (i = 0; i < 8; i++) {
		lid[i] = 8 + i;
		rid[i] = 20 + i;
	}
	/* (its expectation is recorded once the receive is posted) */
	assert_int_equal(kv_write_via(&k, f->p.c[0], k.rm, lid, rid, 8, "after the send", 15, 0,
				      &x[1]), 0);
	l = (tcpx_p2p_seg){ rb->mr, 1, 8 * (size_t)BLK };
	r = (tcpx_p2p_rseg){ k.rm, 0, 8 * (size_t)BLK };
	expect_copy(rb, 1, k.loc, 0, 8 * (size_t)BLK); /* what the send brings */
	assert_int_equal(tcpx_p2p_read(f->p.c[0], &l, 1, &r, 1, NULL, &x[2]), 0);
	for (j = 0; j < 200; j++) {
		drive(f);
		for (i = 0; i < 3; i++) {
			done = 0;
			assert_int_equal(tcpx_p2p_test(x[i], &done), 0);
			assert_int_equal(done, 0);
		}
	}
	notif_none(f, f->p.s[1]);
	verify(k.pool, "pool before the receive was posted");
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], k.pool->mr, k.eo, 8 * (size_t)BLK, &x[3]), 0);
	expect_copy(k.pool, k.eo, k.loc, 0, 8 * (size_t)BLK);
	for (i = 0; i < 8; i++)
		expect_copy(k.pool, k.eo + rid[i] * BLK, k.loc, lid[i] * BLK, BLK);
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], "after the send", 15);
	verify(k.pool, "pool at the write's notification");
	complete_ok(f, x, 4);
	verify(rb, "read of the receive's memory");
	verify(k.pool, "pool");
	kv_close(&k);
	free(nt);
}

/* ---- case 4: WRITE with a notification ----------------------------------- */

static void test_write_notif(void **state)
{
	struct fx *f = *state;
	enum { NB = 192, NL = 128, B = 64 };
	static unsigned char big[TCPX_P2P_NOTIF_MAX];
	static const char text[] = "round 2: blocks written";
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	size_t lid[B], rid[B], i, l0, r0;
	struct kv k;
	int round;

	assert_non_null(nt);
	kv_open(f, &k, NB, NL, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 41);
	tp_fill(big, sizeof(big), 42);
	for (round = 0; round < 3; round++) {
		tcpx_p2p_seg l[B];
		tcpx_p2p_rseg r[B];
		size_t nl = B, nr = B;
		const void *msg = round == 0 ? "\x5a" : round == 1 ? (const void *)big : text;
		size_t mlen = round == 0 ? 1 : round == 1 ? sizeof(big) : sizeof(text);
		tcpx_p2p_xfer *x;

		pick(f, lid, B, NL, 0);
		pick(f, rid, B, NB, 1);
		l0 = below(&f->rng, NL - B + 1);
		r0 = below(&f->rng, NB - B + 1);
		for (i = 0; i < B; i++) {
			/* round 1: one local segment, remote blocks scattered;
			 * round 2: local blocks scattered, one remote segment */
			if (round == 1)
				lid[i] = l0 + i;
			if (round == 2)
				rid[i] = r0 + i;
			l[i] = (tcpx_p2p_seg){ k.loc->mr, lid[i] * BLK, BLK };
			r[i] = (tcpx_p2p_rseg){ k.rm, rid[i] * BLK, BLK };
			expect_copy(k.pool, k.eo + rid[i] * BLK, k.loc, lid[i] * BLK, BLK);
		}
		if (round == 1) {
			l[0] = (tcpx_p2p_seg){ k.loc->mr, l0 * BLK, (size_t)B * BLK };
			nl = 1;
		}
		if (round == 2) {
			r[0] = (tcpx_p2p_rseg){ k.rm, r0 * BLK, (size_t)B * BLK };
			nr = 1;
		}
		assert_int_equal(post_write(f->p.c[0], l, nl, r, nr, msg, mlen, &x), 0);
		/* Nothing posted on the target: its polls land the write. */
		notif_take(f, f->p.s[1], nt);
		verify(k.pool, "pool when the notification arrived");
		notif_expect(nt, f->p.c[1], msg, mlen);
		complete1_ok(f, x);
		verify(k.pool, "pool after the write");
		verify(k.loc, "initiator's blocks");
		notif_none(f, f->p.s[1]);
	}
	kv_close(&k);
	free(nt);
}

/* ---- case 5: refusals ------------------------------------------------------ */

static void put_le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static tcpx_p2p_rmr *import_forged(struct fx *f, const tcpx_p2p_rdesc *d, int at, uint64_t v,
				   int n)
{
	tcpx_p2p_rdesc forged = *d;
	tcpx_p2p_rmr *rm;

	put_le(forged.bytes + at, v, n);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &forged, &rm), 0);
	return rm;
}

static uint64_t get_le(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The one refusal a target gives for every export check a peer could
 * probe with (key, index, range, access, revoked, deregistered). */
#define DENIED "no export of the target allows it"

/* x must fail with EINVAL, the target having refused it for `why`, and
 * nothing written into the pool. */
static void expect_refused(struct fx *f, struct kv *k, tcpx_p2p_xfer *x, const char *why)
{
	struct result r = complete1(f, x);

	if (r.rc != TCPX_P2P_EINVAL)
		fail_msg("refused write: %s (%s), want EINVAL", tcpx_p2p_strerror(r.rc), r.why);
	print_message("  refused: %s\n", r.why);
	assert_non_null(strstr(r.why, "refused"));
	assert_non_null(strstr(r.why, why));
	verify(k->pool, "pool after a refused write");
}

static void test_refusals(void **state)
{
	struct fx *f = *state;
	enum { NB = 64, NL = 16 };
	static const char note_bad[] = "refused", note_good[] = "good";
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	struct region *gone;
	tcpx_p2p_rdesc d, bad;
	tcpx_p2p_rmr *rm, *rm2;
	tcpx_p2p_xfer *x = NULL;
	tcpx_p2p_seg l[2];
	tcpx_p2p_rseg r[2];
	size_t lid[2] = { 3, 5 }, rid[2] = { 7, 9 }, len;
	struct kv k;

	assert_non_null(nt);
	kv_open(f, &k, NB, NL, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 51);
	/* Export arguments. */
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.pool->mr, 0, k.pool->len + 1,
					    TCPX_P2P_ACCESS_WRITE, &d), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.pool->mr, 0, 10, 0, &d), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.pool->mr, 0, 10, 4, &d), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.loc->mr, 0, 10, 1, &d), TCPX_P2P_EINVAL);

	/* Checked on this side at post: outside the rmr, totals, no rmr. */
	l[0] = (tcpx_p2p_seg){ k.loc->mr, 0, BLK };
	r[0] = (tcpx_p2p_rseg){ k.rm, k.elen - BLK + 1, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, NULL, 0, &x), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "outside"));
	r[0] = (tcpx_p2p_rseg){ k.rm, k.elen + 1, 0 };
	assert_int_equal(post_write(f->p.c[0], l, 0, r, 1, NULL, 0, &x), TCPX_P2P_EINVAL);
	r[0] = (tcpx_p2p_rseg){ k.rm, 0, BLK - 1 };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, NULL, 0, &x), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "local segments hold"));
	r[0] = (tcpx_p2p_rseg){ NULL, 0, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, NULL, 0, &x), TCPX_P2P_EINVAL);
	r[0] = (tcpx_p2p_rseg){ k.rm, 0, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, "", 0, &x), TCPX_P2P_EINVAL);
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, "x", TCPX_P2P_NOTIF_MAX + 1, &x),
			 TCPX_P2P_EINVAL);
	assert_null(x);
	good_write(f, &k);

	/* Not descriptors: bad magic, unknown access bits, unknown memory type. */
	bad = k.d;
	bad.bytes[0] ^= 1;
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &bad, &rm), TCPX_P2P_EPROTO);
	bad = k.d;
	bad.bytes[6] = 0x84;
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &bad, &rm), TCPX_P2P_EPROTO);
	bad = k.d;
	bad.bytes[5] = 9;
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &bad, &rm), TCPX_P2P_EPROTO);

	/* Forged length: the rmr claims 1 MiB more than the export; a block
	 * past the export's end (and one across it) passes the local check
	 * and the target refuses it.  The refused write's notification is not
	 * delivered; the next write's is. */
	rm = import_forged(f, &k.d, 16, k.elen + (1u << 20), 8);
	assert_int_equal(tcpx_p2p_rmr_query(rm, &len, NULL, NULL), 0);
	assert_int_equal(len, k.elen + (1u << 20));
	l[0] = (tcpx_p2p_seg){ k.loc->mr, 0, BLK };
	r[0] = (tcpx_p2p_rseg){ rm, k.elen, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, note_bad, sizeof(note_bad), &x), 0);
	expect_refused(f, &k, x, DENIED);
	r[0] = (tcpx_p2p_rseg){ rm, k.elen - 10, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, NULL, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	assert_int_equal(kv_write(f, &k, lid, rid, 2, note_good, sizeof(note_good), &x), 0);
	complete1_ok(f, x);
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], note_good, sizeof(note_good));
	verify(k.pool, "pool");

	/* Forged key, forged export index. */
	rm = import_forged(f, &k.d, 24, get_le(k.d.bytes + 24, 8) ^ 0x40, 8);
	assert_int_equal(kv_write_via(&k, f->p.c[0], rm, lid, rid, 2, NULL, 0, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	good_write(f, &k);
	rm = import_forged(f, &k.d, 8, 5, 4);
	assert_int_equal(kv_write_via(&k, f->p.c[0], rm, lid, rid, 2, NULL, 0, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	good_write(f, &k);

	/* One good and one forged remote segment: refused as a whole, the
	 * good segment's block untouched too. */
	l[0] = (tcpx_p2p_seg){ k.loc->mr, 0, 2 * (size_t)BLK };
	r[0] = (tcpx_p2p_rseg){ k.rm, 11 * (size_t)BLK, BLK };
	r[1] = (tcpx_p2p_rseg){ rm, 12 * (size_t)BLK, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 2, NULL, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	good_write(f, &k);

	/* A region deregistered on the target after its export. */
	gone = region_new(f, f->p.s[1], 4 * (size_t)BLK, 52);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], gone->mr, 0, gone->len,
					    TCPX_P2P_ACCESS_WRITE, &d), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(gone->mr), 0);
	gone->mr = NULL;
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &rm), 0);
	l[0] = (tcpx_p2p_seg){ k.loc->mr, 0, BLK };
	r[0] = (tcpx_p2p_rseg){ rm, BLK, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, NULL, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	verify(gone, "deregistered region");
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	good_write(f, &k);

	/* READ-only export: the rmr says no WRITE, refused at post. */
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.pool->mr, k.eo, k.elen,
					    TCPX_P2P_ACCESS_READ, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &rm), 0);
	x = NULL;
	assert_int_equal(kv_write_via(&k, f->p.c[0], rm, lid, rid, 2, NULL, 0, 0, &x),
			 TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "does not allow"));
	assert_null(x);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	/* ... and with the access byte forged, the target refuses it. */
	rm = import_forged(f, &d, 6, TCPX_P2P_ACCESS_READ | TCPX_P2P_ACCESS_WRITE, 1);
	assert_int_equal(kv_write_via(&k, f->p.c[0], rm, lid, rid, 2, NULL, 0, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	good_write(f, &k);

	/* Several refused writes in flight between good ones. */
	{
		tcpx_p2p_xfer *xs[6];
		struct result res[6];
		size_t lid2[6], rid2[6];
		int i;

		rm = import_forged(f, &k.d, 24, get_le(k.d.bytes + 24, 8) ^ 1, 8);
		rm2 = import_forged(f, &k.d, 16, k.elen + BLK, 8);
		pick(f, lid2, 6, NL, 0);
		pick(f, rid2, 6, NB, 1);
		for (i = 0; i < 6; i++) {
			if (i % 3 == 0)
				assert_int_equal(kv_write(f, &k, &lid2[i], &rid2[i], 1, NULL, 0, &xs[i]),
						 0);
			else if (i % 3 == 1)
				assert_int_equal(kv_write_via(&k, f->p.c[0], rm, &lid2[i], &rid2[i], 1,
							      note_bad, sizeof(note_bad), 0, &xs[i]), 0);
			else
				assert_int_equal(kv_write_via(&k, f->p.c[0], rm2, &lid2[i],
							      (size_t[]){ NB }, 1, NULL, 0, 0,
							      &xs[i]), 0);
		}
		complete(f, xs, 6, res);
		for (i = 0; i < 6; i++)
			assert_int_equal(res[i].rc, i % 3 == 0 ? 0 : TCPX_P2P_EINVAL);
		verify(k.pool, "pool after good and refused writes");
		assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
		assert_int_equal(tcpx_p2p_rmr_release(rm2), 0);
	}
	notif_none(f, f->p.s[1]);
	good_write(f, &k);
	kv_close(&k);
	free(nt);
}

/* ---- case 6: two initiators, one target ------------------------------------ */

struct initiator {
	struct kv *k;
	tcpx_p2p_conn *c;
	tcpx_p2p_rmr *rm;
	struct region *loc;
	size_t *lid, *rid, n, per;
	char note[32];
	int rc;
	char why[320];
	int done;
};

/* Post every write at once (the last with a notification), then wait for
 * each: this thread drives its own session only. */
static void *initiator_main(void *arg)
{
	struct initiator *in = arg;
	size_t nx = in->n / in->per, i, j;
	tcpx_p2p_xfer **x = calloc(nx, sizeof(*x));
	tcpx_p2p_seg *l = calloc(in->per, sizeof(*l));
	tcpx_p2p_rseg *r = calloc(in->per, sizeof(*r));
	size_t blk = in->k->blk;
	double t0 = now_s(), left_ms; /* one deadline for all the waits */
	int rc;

	in->rc = x && l && r ? 0 : TCPX_P2P_ENOMEM;
	for (i = 0; i < nx && !in->rc; i++) {
		for (j = 0; j < in->per; j++) {
			l[j] = (tcpx_p2p_seg){ in->loc->mr, in->lid[i * in->per + j] * blk, blk };
			r[j] = (tcpx_p2p_rseg){ in->rm, in->rid[i * in->per + j] * blk, blk };
		}
		in->rc = post_write(in->c, l, in->per, r, in->per, i + 1 == nx ? in->note : NULL,
				    i + 1 == nx ? strlen(in->note) + 1 : 0, &x[i]);
		if (in->rc)
			snprintf(in->why, sizeof(in->why), "post %zu: %s", i, tcpx_p2p_last_error());
	}
	for (i = 0; i < nx && x; i++) {
		if (!x[i])
			continue;
		left_ms = (DEADLINE_S - (now_s() - t0)) * 1000;
		rc = tcpx_p2p_wait(x[i], left_ms > 0 ? (int)left_ms : 0);
		if (rc && !in->rc) {
			in->rc = rc;
			snprintf(in->why, sizeof(in->why), "write %zu: %s", i, tcpx_p2p_last_error());
		}
		if (rc != TCPX_P2P_ETIMEDOUT)
			tcpx_p2p_xfer_release(x[i]);
	}
	free(x);
	free(l);
	free(r);
	__atomic_store_n(&in->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void open_second(struct fx *f)
{
	tcpx_p2p_config cfg;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.gpu = g_cuda ? 0 : -1;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &f->s2), 0);
	assert_int_equal(tp_link(f->s2, f->p.s[1], &f->c2[0], &f->c2[1]), 0);
}

static void test_two_initiators(void **state)
{
	struct fx *f = *state;
	enum { NB = 256, NL = 128, PER = 16 };
	struct initiator in[2];
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	size_t perm[NB], lid[2][NL];
	pthread_t th[2];
	double t0;
	int i, j, notes = 0, seen[2] = { 0, 0 }, n;
	struct kv k;

	assert_non_null(nt);
	open_second(f);
	kv_open(f, &k, NB, NL, BLK, TCPX_P2P_ACCESS_WRITE, 61);
	memset(in, 0, sizeof(in));
	in[0].c = f->p.c[0];
	in[0].rm = k.rm;
	in[0].loc = k.loc;
	in[1].c = f->c2[0];
	in[1].loc = region_new(f, f->s2, NL * (size_t)BLK, 62);
	{ /* the pool exported to the second initiator's conn as well */
		tcpx_p2p_rdesc d2;

		assert_int_equal(tcpx_p2p_mr_export(f->c2[1], k.pool->mr, k.eo, k.elen,
						    TCPX_P2P_ACCESS_WRITE, &d2), 0);
		assert_int_equal(tcpx_p2p_rmr_import(f->c2[0], &d2, &in[1].rm), 0);
	}
	/* disjoint halves of the pool, in random order */
	pick(f, perm, NB, NB, 1);
	for (i = 0; i < 2; i++) {
		in[i].k = &k;
		in[i].rid = &perm[i * NL];
		pick(f, lid[i], NL, NL, 1);
		in[i].lid = lid[i];
		in[i].n = NL;
		in[i].per = PER;
		snprintf(in[i].note, sizeof(in[i].note), "initiator %d done", i);
		for (j = 0; j < NL; j++)
			expect_copy(k.pool, k.eo + in[i].rid[j] * BLK, in[i].loc, lid[i][j] * BLK, BLK);
	}
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, initiator_main, &in[i]), 0);
	/* This thread is the target: it only drives its session and polls. */
	t0 = now_s();
	while (notes < 2 || !__atomic_load_n(&in[0].done, __ATOMIC_ACQUIRE) ||
	       !__atomic_load_n(&in[1].done, __ATOMIC_ACQUIRE)) {
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], nt, 1, &n), 0);
		if (n) {
			i = nt->conn == f->p.c[1] ? 0 : 1;
			assert_ptr_equal(nt->conn, i ? f->c2[1] : f->p.c[1]);
			assert_string_equal((const char *)nt->msg, in[i].note);
			assert_int_equal(seen[i]++, 0);
			notes++;
			/* that initiator's blocks are all in place now */
			for (j = 0; j < NL; j++)
				verify_range(k.pool, k.eo + in[i].rid[j] * BLK, BLK,
					     "an initiator's block at its notification");
		}
		if (now_s() - t0 > DEADLINE_S + 5) {
			/* their waits end by now: no thread may outlive the test */
			for (i = 0; i < 2; i++)
				pthread_join(th[i], NULL);
			fail_msg("two initiators: %d notification(s) after %.0f s (initiators "
				 "done %d %d: %s / %s)", notes, DEADLINE_S + 5,
				 __atomic_load_n(&in[0].done, __ATOMIC_ACQUIRE),
				 __atomic_load_n(&in[1].done, __ATOMIC_ACQUIRE), in[0].why, in[1].why);
		}
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		if (in[i].rc)
			fail_msg("initiator %d: %s: %s", i, tcpx_p2p_strerror(in[i].rc), in[i].why);
	}
	verify(k.pool, "pool written by two initiators");
	assert_int_equal(tcpx_p2p_rmr_release(in[1].rm), 0);
	kv_close(&k);
	free(nt);
}

/* A descriptor exported to one connection, imported on another: import
 * checks the form only, and the exporter refuses the write (EINVAL) with
 * nothing written, although that conn has an export at the same index. */
static void test_foreign_descriptor(void **state)
{
	struct fx *f = *state;
	struct region *src;
	struct kv k;
	tcpx_p2p_rmr *rm = NULL;
	tcpx_p2p_xfer *x;
	tcpx_p2p_seg l;
	tcpx_p2p_rseg r;
	struct result res;
	tcpx_p2p_rdesc d2;

	open_second(f);
	kv_open(f, &k, 16, 4, BLK, TCPX_P2P_ACCESS_WRITE, 71);
	assert_int_equal(tcpx_p2p_mr_export(f->c2[1], k.pool->mr, 0, k.pool->len,
					    TCPX_P2P_ACCESS_WRITE, &d2), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->c2[0], &k.d, &rm), 0);
	src = region_new(f, f->s2, BLK, 72);
	l = (tcpx_p2p_seg){ src->mr, 0, BLK };
	r = (tcpx_p2p_rseg){ rm, 0, BLK };
	assert_int_equal(post_write(f->c2[0], &l, 1, &r, 1, NULL, 0, &x), 0);
	res = complete1(f, x);
	print_message("  write through a foreign descriptor: %s\n", res.why);
	assert_int_equal(res.rc, TCPX_P2P_EINVAL);
	assert_non_null(strstr(res.why, "refused"));
	verify(k.pool, "pool after a write through a foreign descriptor");
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	/* the right descriptor on that conn works */
	assert_int_equal(tcpx_p2p_rmr_import(f->c2[0], &d2, &rm), 0);
	r = (tcpx_p2p_rseg){ rm, k.eo + BLK, BLK };
	expect_copy(k.pool, k.eo + BLK, src, 0, BLK);
	assert_int_equal(post_write(f->c2[0], &l, 1, &r, 1, NULL, 0, &x), 0);
	complete1_ok(f, x);
	verify(k.pool, "pool");
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	kv_close(&k);
}

/* A target with a progress thread whose application posts nothing and only
 * polls for notifications (tcpx_p2p_notif_poll does not drive then): its
 * thread alone must receive the write, deliver the note and serve a read
 * (include/tcpx_p2p.h, tcpx_p2p_write: "The peer's progress engine (its
 * test/wait/progress calls or its progress thread) receives them").  No
 * session is driven by this thread here: no drive(), no test(). */
static void test_threaded_target(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	size_t lid[8], rid[8], i;
	struct region *rb;
	tcpx_p2p_xfer *x, *xr;
	tcpx_p2p_seg l;
	tcpx_p2p_rseg r[8];
	double t0 = now_s();
	int n = 0, rc;
	struct kv k;

	assert_non_null(nt);
	kv_open(f, &k, 16, 16, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 131);
	rb = region_new(f, f->p.s[0], 8 * (size_t)BLK, 132);
	pick(f, lid, 8, 16, 0);
	pick(f, rid, 8, 16, 1);
	assert_int_equal(kv_write(f, &k, lid, rid, 8, "threaded", 9, &x), 0);
	while (!n && now_s() - t0 < DEADLINE_S) {
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], nt, 1, &n), 0);
		if (!n)
			usleep(100);
	}
	if (!n) {
		/* fail without leaking the write: its conn goes first */
		assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[0]), 0);
		f->p.c[0] = NULL;
		rc = tcpx_p2p_wait(x, 10000);
		assert_int_equal(tcpx_p2p_xfer_release(x), 0);
		kv_close(&k);
		free(nt);
		fail_msg("no notification in 10 s from a target whose progress thread alone "
			 "drives it (the write: %s)", tcpx_p2p_strerror(rc));
	}
	notif_expect(nt, f->p.c[1], "threaded", 9);
	verify(k.pool, "pool at the notification");
	assert_int_equal(tcpx_p2p_wait(x, 10000), 0);
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	/* and a read served by the thread alone */
	l = (tcpx_p2p_seg){ rb->mr, 0, 8 * (size_t)BLK };
	for (i = 0; i < 8; i++) {
		r[i] = (tcpx_p2p_rseg){ k.rm, rid[7 - i] * BLK, BLK };
		expect_copy(rb, i * BLK, k.pool, k.eo + rid[7 - i] * BLK, BLK);
	}
	assert_int_equal(tcpx_p2p_read(f->p.c[0], &l, 1, r, 8, NULL, &xr), 0);
	assert_int_equal(tcpx_p2p_wait(xr, 10000), 0);
	assert_int_equal(tcpx_p2p_xfer_release(xr), 0);
	verify(rb, "read served by the target's thread");
	kv_close(&k);
	free(nt);
}

/* ---- case 7: READ ------------------------------------------------------------ */

static void test_read(void **state)
{
	struct fx *f = *state;
	enum { NB = 128, NL = 64, B = 32 };
	struct region *rb; /* where reads land, on the initiator */
	size_t lid[B], rid[B], perm[B], i;
	tcpx_p2p_seg l[B];
	tcpx_p2p_rseg r[B];
	tcpx_p2p_xfer *x[2];
	tcpx_p2p_xfer_params p = { .struct_size = sizeof(p), .notif = "n", .notif_len = 1 };
	tcpx_p2p_rdesc d;
	tcpx_p2p_rmr *rm;
	struct result res;
	struct kv k;

	kv_open(f, &k, NB, NL, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 81);
	rb = region_new(f, f->p.s[0], (NL + 2) * (size_t)BLK, 82);

	/* WRITE, then at once a READ of the same blocks (another order) into
	 * one contiguous local range: it sees the write. */
	pick(f, lid, B, NL, 0);
	pick(f, rid, B, NB, 1);
	assert_int_equal(kv_write(f, &k, lid, rid, B, NULL, 0, &x[0]), 0);
	pick(f, perm, B, B, 1);
	for (i = 0; i < B; i++) {
		r[i] = (tcpx_p2p_rseg){ k.rm, rid[perm[i]] * BLK, BLK };
		expect_copy(rb, 100 + i * BLK, k.pool, k.eo + rid[perm[i]] * BLK, BLK);
	}
	l[0] = (tcpx_p2p_seg){ rb->mr, 100, (size_t)B * BLK };
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 1, r, B, NULL, &x[1]), 0);
	complete_ok(f, x, 2);
	verify(rb, "read-back of written blocks");
	verify(k.pool, "pool");

	/* Blocks never written (their initial bytes) scattered locally, with
	 * one remote segment spanning several blocks. */
	for (i = 0; i < 8; i++)
		l[i] = (tcpx_p2p_seg){ rb->mr, 7 + (7 - i) * (BLK + 5), BLK };
	r[0] = (tcpx_p2p_rseg){ k.rm, 3 * (size_t)BLK + 1, 8 * (size_t)BLK };
	for (i = 0; i < 8; i++)
		expect_copy(rb, l[i].offset, k.pool, k.eo + 3 * BLK + 1 + i * BLK, BLK);
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 8, r, 1, NULL, &x[0]), 0);
	complete1_ok(f, x[0]);
	verify(rb, "read of initial bytes");

	/* A read takes no notification. */
	x[0] = NULL;
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 8, r, 1, &p, &x[0]), TCPX_P2P_EINVAL);
	assert_null(x[0]);

	/* A WRITE-only export: refused at post ... */
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.pool->mr, k.eo, k.elen,
					    TCPX_P2P_ACCESS_WRITE, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &rm), 0);
	r[0] = (tcpx_p2p_rseg){ rm, 0, 8 * (size_t)BLK };
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 8, r, 1, NULL, &x[0]), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "does not allow"));
	assert_null(x[0]);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	/* ... and with the access byte forged, by the target: nothing lands. */
	rm = import_forged(f, &d, 6, TCPX_P2P_ACCESS_READ | TCPX_P2P_ACCESS_WRITE, 1);
	r[0] = (tcpx_p2p_rseg){ rm, 0, 8 * (size_t)BLK };
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 8, r, 1, NULL, &x[0]), 0);
	res = complete1(f, x[0]);
	print_message("  refused read: %s\n", res.why);
	assert_int_equal(res.rc, TCPX_P2P_EINVAL);
	assert_non_null(strstr(res.why, "refused"));
	verify(rb, "read buffer after a refused read");
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);

	/* Still usable: write + read once more, then a read of a byte. */
	pick(f, lid, B, NL, 0);
	pick(f, rid, B, NB, 1);
	assert_int_equal(kv_write(f, &k, lid, rid, B, NULL, 0, &x[0]), 0);
	for (i = 0; i < B; i++) {
		l[i] = (tcpx_p2p_seg){ rb->mr, i * BLK, BLK };
		r[i] = (tcpx_p2p_rseg){ k.rm, rid[i] * BLK, BLK };
		expect_copy(rb, i * BLK, k.pool, k.eo + rid[i] * BLK, BLK);
	}
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, B, r, B, NULL, &x[1]), 0);
	complete_ok(f, x, 2);
	verify(rb, "second read-back");
	l[0] = (tcpx_p2p_seg){ rb->mr, rb->len - 1, 1 };
	r[0] = (tcpx_p2p_rseg){ k.rm, k.elen - 1, 1 };
	expect_copy(rb, rb->len - 1, k.pool, k.eo + k.elen - 1, 1);
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 1, r, 1, NULL, &x[0]), 0);
	complete1_ok(f, x[0]);
	verify(rb, "one-byte read");
	kv_close(&k);
}

/* ---- case 8: notification order ------------------------------------------- */

static void test_notif_order(void **state)
{
	struct fx *f = *state;
	enum { NB = 256, HALF = 128, BIG = 64u << 10 };
	tcpx_p2p_notif *nt = calloc(8, sizeof(*nt));
	unsigned char msg[TCPX_P2P_NOTIF_MAX];
	size_t lid[HALF], rid[HALF], i, len;
	tcpx_p2p_xfer *x[4], *xs[10];
	struct region *rr;
	tcpx_p2p_seg sg[3], rg[2];
	int n, got, j;
	double t0;
	struct kv k;

	assert_non_null(nt);
	kv_open(f, &k, NB, NB, BIG, TCPX_P2P_ACCESS_WRITE, 91);
	/* W1 (8 MiB, no note), note A, W2 (8 MiB, note B), note C: back to back. */
	for (i = 0; i < HALF; i++) {
		lid[i] = i;
		rid[i] = i;
	}
	assert_int_equal(kv_write(f, &k, lid, rid, HALF, NULL, 0, &x[0]), 0);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "A", 2), 0);
	for (i = 0; i < HALF; i++) {
		lid[i] = HALF + i;
		rid[i] = NB - 1 - i;
	}
	assert_int_equal(kv_write(f, &k, lid, rid, HALF, "B", 2, &x[1]), 0);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "C", 2), 0);
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], "A", 2);
	verify_range(k.pool, 0, k.eo + HALF * (size_t)BIG, "W1 when note A arrived");
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], "B", 2);
	verify(k.pool, "pool when note B arrived");
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], "C", 2);
	complete_ok(f, x, 2);
	verify(k.pool, "pool");

	/* After a two-sided transfer: the note comes once its bytes are in. */
	rr = region_new(f, f->p.s[1], 3u << 20, 92);
	sg[0] = (tcpx_p2p_seg){ k.loc->mr, 5, 1u << 20 };
	sg[1] = (tcpx_p2p_seg){ k.loc->mr, 2u << 20, 1 };
	sg[2] = (tcpx_p2p_seg){ k.loc->mr, 8u << 20, (1u << 20) - 1 };
	rg[0] = (tcpx_p2p_seg){ rr->mr, 1, 1u << 20 };
	rg[1] = (tcpx_p2p_seg){ rr->mr, (1u << 20) + 2, 1u << 20 };
	expect_copy(rr, 1, k.loc, 5, 1u << 20);
	expect_copy(rr, (1u << 20) + 2, k.loc, 2u << 20, 1);
	expect_copy(rr, (1u << 20) + 3, k.loc, 8u << 20, (1u << 20) - 1);
	assert_int_equal(tcpx_p2p_recvv(f->p.c[1], rg, 2, NULL, &x[0]), 0);
	assert_int_equal(tcpx_p2p_sendv(f->p.c[0], sg, 3, NULL, &x[1]), 0);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "D", 1), 0);
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], "D", 1);
	verify(rr, "receive when note D arrived");
	complete_ok(f, x, 2);

	/* Small writes with notes and standalone notes interleaved. */
	for (j = 0; j < 10; j++) {
		size_t l1 = (size_t)j, r1 = (size_t)(3 * j + 1);

		snprintf((char *)msg, sizeof(msg), "w%d", j);
		assert_int_equal(kv_write(f, &k, &l1, &r1, 1, msg, strlen((char *)msg) + 1,
					  &xs[j]), 0);
		snprintf((char *)msg, sizeof(msg), "n%d", j);
		assert_int_equal(tcpx_p2p_notify(f->p.c[0], msg, strlen((char *)msg) + 1), 0);
	}
	for (j = 0; j < 20; j++) {
		char want[8];

		notif_take(f, f->p.s[1], nt);
		snprintf(want, sizeof(want), "%c%d", j & 1 ? 'n' : 'w', j / 2);
		notif_expect(nt, f->p.c[1], want, strlen(want) + 1);
		verify_range(k.pool, k.eo + (size_t)(3 * (j / 2) + 1) * BIG, BIG,
			     "a small write's block at its note");
	}
	complete_ok(f, xs, 10);
	verify(k.pool, "pool after the small writes");

	/* 100 notes in a row, lengths 1..NOTIF_MAX, taken up to 8 at a time. */
	for (j = 0; j < 100; j++) {
		len = 1 + (size_t)(j * 97) % TCPX_P2P_NOTIF_MAX;
		if (j == 99)
			len = TCPX_P2P_NOTIF_MAX;
		for (i = 0; i < len; i++)
			msg[i] = (unsigned char)(j * 31 + i);
		assert_int_equal(tcpx_p2p_notify(f->p.c[0], msg, len), 0);
	}
	for (got = 0, t0 = now_s(); got < 100;) {
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], nt, 8, &n), 0);
		assert_true(n >= 0 && n <= 8);
		for (j = 0; j < n; j++, got++) {
			len = 1 + (size_t)(got * 97) % TCPX_P2P_NOTIF_MAX;
			if (got == 99)
				len = TCPX_P2P_NOTIF_MAX;
			for (i = 0; i < len; i++)
				msg[i] = (unsigned char)(got * 31 + i);
			notif_expect(&nt[j], f->p.c[1], msg, len);
		}
		drive(f);
		if (now_s() - t0 > DEADLINE_S)
			fail_msg("100 notes: %d arrived", got);
	}
	notif_none(f, f->p.s[1]);

	/* Arguments. */
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], msg, 0), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], msg, TCPX_P2P_NOTIF_MAX + 1), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], NULL, 1), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notify(NULL, msg, 1), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notif_poll(NULL, nt, 1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], NULL, 1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], nt, -1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], NULL, 0, &n), 0);
	assert_int_equal(n, 0);
	kv_close(&k);
	free(nt);
}

/* ---- case 9: the target goes away mid-write -------------------------------- */

/* One try: a 64 MiB write and a notification, under way on both sides, then
 * the target's conn destroyed.  Returns the write's result.  0 means it had
 * landed before the kill — with progress threads the whole write can get
 * through before the destroy on a loaded machine — so its bytes are checked
 * and nothing else: the kill was not exercised. */
static int kill_mid_write(struct fx *f)
{
	enum { NSEG = 16, SEG = 4u << 20 };
	tcpx_p2p_seg l = { 0 };
	tcpx_p2p_rseg r[NSEG];
	tcpx_p2p_xfer *x, *x2 = NULL;
	int i, rc;
	struct kv k;

	kv_open(f, &k, NSEG, NSEG, SEG, TCPX_P2P_ACCESS_WRITE, 101);
	l = (tcpx_p2p_seg){ k.loc->mr, 0, (size_t)NSEG * SEG };
	for (i = 0; i < NSEG; i++)
		r[i] = (tcpx_p2p_rseg){ k.rm, (size_t)(NSEG - 1 - i) * SEG, SEG };
	assert_int_equal(post_write(f->p.c[0], &l, 1, r, NSEG, "never", 6, &x), 0);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "never either", 13), 0);
	/* get it going on both sides */
	for (i = 0; i < 4; i++)
		drive(f);
	assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[1]), 0);
	f->p.c[1] = NULL;
	/* The wait's deadline only stops a hang: a failure other than
	 * ETIMEDOUT shows the loss was noticed, not waited out. */
	rc = tcpx_p2p_wait(x, TP_TEST_TIMEOUT_MS);
	print_message("  initiator's write: %s (%s)\n", tcpx_p2p_strerror(rc),
		      rc ? tcpx_p2p_last_error() : "");
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	if (!rc) {
		for (i = 0; i < NSEG; i++)
			expect_copy(k.pool, k.eo + (size_t)(NSEG - 1 - i) * SEG, k.loc,
				    (size_t)i * SEG, SEG);
		verify(k.pool, "a write that succeeded before its target went away");
		kv_close(&k);
		return 0;
	}
	assert_true(rc != TCPX_P2P_ETIMEDOUT);
	/* Later posts report the connection's failure at once. */
	assert_int_equal(post_write(f->p.c[0], &l, 1, r, NSEG, NULL, 0, &x2), rc);
	assert_null(x2);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "x", 1), rc);
	kv_close(&k);
	/* The pool's region must be free to go now its conn is gone (teardown
	 * deregisters it: nothing may hold it in flight). */
	return rc;
}

static void test_target_killed(void **state)
{
	int tries = 0, rc;

	while (!(rc = kill_mid_write(*state)) && ++tries < 5) {
		print_message("  the write landed before the kill (try %d): again on a new pair\n",
			      tries);
		assert_int_equal(teardown(state), 0);
		assert_int_equal(setup(state), 0);
	}
	if (!rc)
		fail_msg("the write landed before its target went away in all %d tries: the kill "
			 "was never exercised", tries);
}

/* ---- case 10: many batches in flight ------------------------------------------ */

static void test_many_batches(void **state)
{
	struct fx *f = *state;
	enum { NW = 32, PER = 64, NB = NW * PER, NL = NB + 256, OVER = 4, BS = 4096 + 3 };
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	size_t *rid = malloc(NB * sizeof(size_t)), *lid = malloc(NL * sizeof(size_t));
	size_t orid[OVER * PER], olid[PER];
	tcpx_p2p_xfer *x[NW + OVER];
	char note[16];
	const char *ov = getenv("TP_KV_OVERLAP");
	int w, notes = 0, overlap = ov && *ov == '1';
	struct kv k;

	assert_true(nt && rid && lid);
	kv_open(f, &k, NB, NL, BS, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 111);
	pick(f, rid, NB, NB, 1);
	pick(f, lid, NL, NL, 1);
	for (w = 0; w < NW; w++) {
		snprintf(note, sizeof(note), "batch %d", w);
		assert_int_equal(kv_write(f, &k, &lid[w * PER], &rid[w * PER], PER,
					  w % 8 == 7 ? note : NULL, strlen(note) + 1, &x[w]), 0);
	}
	/* Then overwrite blocks of those writes from the spare local blocks:
	 * posted once the first 32 completed, or (TP_KV_OVERLAP=1) at once,
	 * while the writes they overlap are in flight: see the note at the top
	 * of this file. */
	if (!overlap) {
		complete_ok(f, x, NW);
		verify(k.pool, "pool after 32 writes in flight");
	}
	pick(f, orid, OVER * PER, NB, 1); /* distinct: these are in flight together */
	for (w = 0; w < OVER; w++) {
		if (overlap)
			pick(f, orid + w * PER, PER, NB, 1);
		pick(f, olid, PER, NL - NB, 0);
		for (int i = 0; i < PER; i++)
			olid[i] += NB;
		snprintf(note, sizeof(note), "over %d", w);
		assert_int_equal(kv_write(f, &k, olid, orid + w * PER, PER, note,
					  strlen(note) + 1, &x[NW + w]), 0);
	}
	complete_ok(f, x, NW + OVER);
	verify(k.pool, "pool after the overwrites");
	verify(k.loc, "initiator's blocks");
	for (w = 0; w < NW + OVER; w++) {
		if (w < NW && w % 8 != 7)
			continue;
		notif_take(f, f->p.s[1], nt);
		if (w < NW)
			snprintf(note, sizeof(note), "batch %d", w);
		else
			snprintf(note, sizeof(note), "over %d", w - NW);
		notif_expect(nt, f->p.c[1], note, strlen(note) + 1);
		notes++;
	}
	assert_int_equal(notes, NW / 8 + OVER);
	notif_none(f, f->p.s[1]);
	kv_close(&k);
	free(rid);
	free(lid);
	free(nt);
}

/* ---- main ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_vec_shapes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vec_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mixed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mixed_one_sided, setup, teardown),
		cmocka_unit_test_setup_teardown(test_total_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_notif, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_initiators, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_descriptor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threaded_target, setup_threaded, teardown),
		cmocka_unit_test_setup_teardown(test_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_notif_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_target_killed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_batches, setup, teardown),
	};
	const char *mode = argc > 1 ? argv[1] : "host";
	const char *seed = getenv("TP_KV_SEED");

	if (!strcmp(mode, "cuda")) {
#ifdef TP_KV_CUDA
		int n = 0;

		if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
			printf("test_kv: no CUDA device: skipping\n");
			return 77;
		}
		g_cuda = 1;
#else
		printf("test_kv: built without CUDA (the gpu registration is test_kv_cuda): "
		       "skipping\n");
		return 77;
#endif
	} else if (strcmp(mode, "host")) {
		fprintf(stderr, "usage: test_kv host|cuda\n");
		return 2;
	}
	g_seed = seed ? strtoull(seed, NULL, 0)
		      : (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
	printf("test_kv: %s memory, seed %llu (TP_KV_SEED=%llu repeats it)\n", mode,
	       (unsigned long long)g_seed, (unsigned long long)g_seed);
	fflush(stdout);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
