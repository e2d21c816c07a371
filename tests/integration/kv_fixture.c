/* test_kv's fixture: random numbers, regions with a shadow of what they
 * must hold, the pair of sessions, driving them and taking results. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#ifdef TP_KV_CUDA
#include <cuda_runtime_api.h>
#endif

#include "kv.h"

double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- random -------------------------------------------------------------- */

uint64_t rnd(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

size_t below(struct rng *r, size_t n)
{
	return n ? (size_t)(rnd(r) % n) : 0;
}

size_t between(struct rng *r, size_t lo, size_t hi) /* [lo, hi] */
{
	return lo + below(r, hi - lo + 1);
}

void shuffle(struct rng *r, size_t *v, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = below(r, i), t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}

/* ---- regions: host or device memory with a shadow of what it must hold ---- */

void dev_put(struct region *r, size_t off, size_t n)
{
	if (!n)
		return;
#ifdef TP_KV_CUDA
	if (g_cuda) {
		/* From pageable memory the copy may return before the bytes
		 * landed; the library reads them on its own streams. */
		assert_int_equal(cudaMemcpy(r->p + off, r->shadow + off, n, cudaMemcpyHostToDevice),
				 cudaSuccess);
		assert_int_equal(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
		return;
	}
#endif
	memcpy(r->p + off, r->shadow + off, n);
}

/* The region's actual bytes [off, +n) as host memory (tmp, or p itself). */
const unsigned char *dev_get(const struct region *r, size_t off, size_t n,
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

struct region *region_new(struct fx *f, tcpx_p2p_session *s, size_t len, uint64_t seed)
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

void region_free(struct region *r)
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
void verify_range(const struct region *r, size_t off, size_t n, const char *what)
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

void verify(const struct region *r, const char *what)
{
	verify_range(r, 0, r->len, what);
}

/* Expect src's [soff, +n) at dst's doff (the shadow only). */
void expect_copy(struct region *dst, size_t doff, const struct region *src, size_t soff,
		 size_t n)
{
	assert_true(doff + n <= dst->len && soff + n <= src->len);
	memmove(dst->shadow + doff, src->shadow + soff, n);
}

/* ---- fixture --------------------------------------------------------------- */

int open_fx(void **state, int threaded)
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
	f->depth = cfg.chunks_per_channel;
	f->nchan = cfg.num_channels;
	f->rng.s = g_seed + 0x1000193ull * (uint64_t)++round;
	*state = f;
	return 0;
}

int setup(void **state)
{
	return open_fx(state, 0);
}

/* Both sessions with a progress thread, whatever the environment says. */
int setup_threaded(void **state)
{
	return open_fx(state, 1);
}

int teardown(void **state)
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

void drive(struct fx *f)
{
	assert_int_equal(tcpx_p2p_session_progress(f->p.s[0]), 0);
	assert_int_equal(tcpx_p2p_session_progress(f->p.s[1]), 0);
	if (f->s2)
		assert_int_equal(tcpx_p2p_session_progress(f->s2), 0);
	if (f->pause_us) {
		struct timespec t = { f->pause_us / 1000000, f->pause_us % 1000000 * 1000 };

		nanosleep(&t, NULL);
	}
}

/* Test x[0..n) (NULL entries skipped) until each completed or failed,
 * driving every session meanwhile; the outcome of each goes to res[i] and
 * each is released.  Fails the test after DEADLINE_S. */
void complete(struct fx *f, tcpx_p2p_xfer **x, int n, struct result *res)
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
void complete_ok(struct fx *f, tcpx_p2p_xfer **x, int n)
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

void complete1_ok(struct fx *f, tcpx_p2p_xfer *x)
{
	complete_ok(f, &x, 1);
}

/* One finished transfer's outcome. */
struct result complete1(struct fx *f, tcpx_p2p_xfer *x)
{
	struct result r;

	complete(f, &x, 1, &r);
	return r;
}

/* Take the next notification of session s, driving every session. */
void notif_take(struct fx *f, tcpx_p2p_session *s, tcpx_p2p_notif *out)
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

void notif_none(struct fx *f, tcpx_p2p_session *s)
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

void notif_expect(const tcpx_p2p_notif *nt, tcpx_p2p_conn *c, const void *msg, size_t len)
{
	assert_ptr_equal(nt->conn, c);
	assert_int_equal(nt->len, len);
	assert_memory_equal(nt->msg, msg, len);
}

int post_write(tcpx_p2p_conn *c, const tcpx_p2p_seg *l, size_t nl, const tcpx_p2p_rseg *r,
	       size_t nr, const void *notif, size_t notif_len, tcpx_p2p_xfer **x)
{
	tcpx_p2p_xfer_params p = { .struct_size = sizeof(p), .notif = notif,
				   .notif_len = notif_len };

	return tcpx_p2p_write(c, l, nl, r, nr, notif ? &p : NULL, x);
}
