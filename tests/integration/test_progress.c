/* The session-wide progress engine and the progress thread, over the
 * emulator in its default strict mode (bytes move only inside test()):
 * several connections per session, to one peer and to two; one thread
 * waiting for all; several threads posting and waiting at once; a caller
 * that posts on four connections and waits only on the last; callers that
 * post and return while a progress thread does the rest.  Every byte is
 * checked.  argv[1] picks the group (tests/integration/CMakeLists.txt). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pair.h"

#define NCONN 4

static tcpx_p2p_session *open_session(int progress_thread)
{
	tcpx_p2p_config cfg;
	tcpx_p2p_session *s = NULL;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.progress_thread = progress_thread;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), 0);
	return s;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

struct buf {
	unsigned char *p;
	size_t len;
	tcpx_p2p_mr *mr;
};

static void buf_open(struct buf *b, tcpx_p2p_session *s, size_t len)
{
	b->p = malloc(len);
	b->len = len;
	assert_non_null(b->p);
	memset(b->p, 0, len);
	assert_int_equal(tcpx_p2p_mr_register(s, b->p, len, TCPX_P2P_MEM_HOST, &b->mr), 0);
}

static void buf_close(struct buf *b)
{
	assert_int_equal(tcpx_p2p_mr_deregister(b->mr), 0);
	free(b->p);
}

/*
 * A posts sends on four connections (three small, one large, to two peer
 * sessions), then waits only on the last.  The peers have progress
 * threads.  Waiting on the large one must drive the three others to
 * completion: afterwards A makes no call, yet the peers receive every
 * byte.  With per-connection progress the three small sends would never
 * be handed to the plugin.
 */
static void test_wait_last_drives_all(void **state)
{
	tcpx_p2p_session *a = open_session(0), *peer[2] = { open_session(1), open_session(1) };
	tcpx_p2p_conn *ca[NCONN], *cp[NCONN];
	struct buf sb[NCONN], rb[NCONN];
	tcpx_p2p_xfer *xs[NCONN], *xr[NCONN];
	size_t len[NCONN] = { 256 << 10, 300000, 1, 48u << 20 };
	int i;

	for (i = 0; i < NCONN; i++) {
		tcpx_p2p_session *ps = peer[i % 2];

		assert_int_equal(tp_link(a, ps, &ca[i], &cp[i]), 0);
		buf_open(&sb[i], a, len[i]);
		buf_open(&rb[i], ps, len[i]);
		tp_fill(sb[i].p, len[i], (uint64_t)i + 100);
		assert_int_equal(tcpx_p2p_recv(cp[i], rb[i].mr, 0, len[i], &xr[i]), 0);
	}
	for (i = 0; i < NCONN; i++)
		assert_int_equal(tcpx_p2p_send(ca[i], sb[i].mr, 0, len[i], &xs[i]), 0);
	assert_int_equal(tcpx_p2p_wait(xs[NCONN - 1], TP_TEST_TIMEOUT_MS), 0);
	/* From here on A calls nothing until the peers have everything. */
	for (i = 0; i < NCONN; i++) {
		assert_int_equal(tcpx_p2p_wait(xr[i], TP_TEST_TIMEOUT_MS), 0);
		assert_int_equal(tp_check(rb[i].p, len[i], (uint64_t)i + 100), (size_t)-1);
	}
	for (i = 0; i < NCONN; i++) {
		int done = 0;

		assert_int_equal(tcpx_p2p_test(xs[i], &done), 0);
		assert_int_equal(done, 1);
		assert_int_equal(tcpx_p2p_xfer_release(xs[i]), 0);
		assert_int_equal(tcpx_p2p_xfer_release(xr[i]), 0);
		assert_int_equal(tcpx_p2p_conn_destroy(ca[i]), 0);
		assert_int_equal(tcpx_p2p_conn_destroy(cp[i]), 0);
		buf_close(&sb[i]);
		buf_close(&rb[i]);
	}
	assert_int_equal(tcpx_p2p_session_destroy(a), 0);
	assert_int_equal(tcpx_p2p_session_destroy(peer[0]), 0);
	assert_int_equal(tcpx_p2p_session_destroy(peer[1]), 0);
}

/*
 * Two sessions, four connections between them, a thread per connection on
 * each side posting sends and receives in both directions and waiting on
 * them, all at once (runs under TSan in CI).
 */
struct worker {
	tcpx_p2p_conn *c;
	tcpx_p2p_session *s;
	int side, idx, rounds;
	int rc;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct buf sb, rb;
	size_t len = (size_t)(200000 + 65536 * w->idx);
	int r;

	sb.p = malloc(len);
	rb.p = malloc(len);
	if (!sb.p || !rb.p ||
	    tcpx_p2p_mr_register(w->s, sb.p, len, TCPX_P2P_MEM_HOST, &sb.mr) ||
	    tcpx_p2p_mr_register(w->s, rb.p, len, TCPX_P2P_MEM_HOST, &rb.mr)) {
		w->rc = -1;
		return NULL;
	}
	for (r = 0; r < w->rounds && !w->rc; r++) {
		tcpx_p2p_xfer *xs = NULL, *xr = NULL;
		uint64_t mine = (uint64_t)(w->idx * 1000 + r * 2 + w->side);
		uint64_t theirs = (uint64_t)(w->idx * 1000 + r * 2 + 1 - w->side);

		tp_fill(sb.p, len, mine);
		memset(rb.p, 0, len);
		w->rc = tcpx_p2p_recv(w->c, rb.mr, 0, len, &xr);
		if (!w->rc)
			w->rc = tcpx_p2p_send(w->c, sb.mr, 0, len, &xs);
		/* Alternate which one is waited on first. */
		if (!w->rc)
			w->rc = tcpx_p2p_wait(r % 2 ? xs : xr, TP_TEST_TIMEOUT_MS);
		if (!w->rc)
			w->rc = tcpx_p2p_wait(r % 2 ? xr : xs, TP_TEST_TIMEOUT_MS);
		if (!w->rc && tp_check(rb.p, len, theirs) != (size_t)-1)
			w->rc = -2;
		if (xs)
			tcpx_p2p_xfer_release(xs);
		if (xr)
			tcpx_p2p_xfer_release(xr);
	}
	tcpx_p2p_mr_deregister(sb.mr);
	tcpx_p2p_mr_deregister(rb.mr);
	free(sb.p);
	free(rb.p);
	return NULL;
}

static void run_threads(int progress_thread)
{
	tcpx_p2p_session *s[2] = { open_session(progress_thread), open_session(progress_thread) };
	struct worker w[2][NCONN];
	pthread_t th[2][NCONN];
	int i, side;

	for (i = 0; i < NCONN; i++) {
		assert_int_equal(tp_link(s[0], s[1], &w[0][i].c, &w[1][i].c), 0);
		for (side = 0; side < 2; side++) {
			w[side][i].s = s[side];
			w[side][i].side = side;
			w[side][i].idx = i;
			w[side][i].rounds = 12;
			w[side][i].rc = 0;
		}
	}
	for (side = 0; side < 2; side++)
		for (i = 0; i < NCONN; i++)
			pthread_create(&th[side][i], NULL, worker_main, &w[side][i]);
	for (side = 0; side < 2; side++) {
		for (i = 0; i < NCONN; i++) {
			pthread_join(th[side][i], NULL);
			if (w[side][i].rc)
				fprintf(stderr, "worker %d/%d: %d %s\n", side, i, w[side][i].rc,
					tcpx_p2p_last_error());
			assert_int_equal(w[side][i].rc, 0);
		}
	}
	for (side = 0; side < 2; side++)
		for (i = 0; i < NCONN; i++)
			assert_int_equal(tcpx_p2p_conn_destroy(w[side][i].c), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s[0]), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s[1]), 0);
}

static void test_threads_caller_progress(void **state)
{
	run_threads(0);
}

static void test_threads_progress_thread(void **state)
{
	run_threads(1);
}

/*
 * Progress thread: both sides post and return; nothing calls test, wait or
 * progress, yet every transfer completes (tcpx_p2p_test only looks in this
 * mode).  Then wait_any collects completions one by one.
 */
static void test_post_and_return(void **state)
{
	tcpx_p2p_session *s[2] = { open_session(1), open_session(1) };
	tcpx_p2p_conn *c[2][2];
	struct buf sb[2], rb[2];
	tcpx_p2p_xfer *x[4];
	size_t len = 8u << 20;
	int i, idx, done, left, tries, seen[4] = { 0 };

	for (i = 0; i < 2; i++) {
		assert_int_equal(tp_link(s[0], s[1], &c[0][i], &c[1][i]), 0);
		buf_open(&sb[i], s[0], len);
		buf_open(&rb[i], s[1], len);
		tp_fill(sb[i].p, len, (uint64_t)i + 7);
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_recv(c[1][i], rb[i].mr, 0, len, &x[2 + i]), 0);
		assert_int_equal(tcpx_p2p_send(c[0][i], sb[i].mr, 0, len, &x[i]), 0);
	}
	/* Nothing drives these sessions: tcpx_p2p_test only looks where a
	 * progress thread runs, so the threads alone must finish both
	 * transfers.  Looked at every 10 ms, for as long as the machine needs
	 * (the limit only stops a hang). */
	for (tries = 0;; tries++) {
		for (left = 0, idx = 0; idx < 4; idx++) {
			assert_int_equal(tcpx_p2p_test(x[idx], &done), 0);
			left += !done;
		}
		if (!left)
			break;
		if (tries * 10 > TP_TEST_TIMEOUT_MS)
			fail_msg("%d transfer(s) still pending after %d ms", left,
				 TP_TEST_TIMEOUT_MS);
		sleep_ms(10);
	}
	for (i = 0; i < 2; i++)
		assert_int_equal(tp_check(rb[i].p, len, (uint64_t)i + 7), (size_t)-1);

	/* wait_any over the receives of a second round (one session). */
	for (i = 0; i < 4; i++)
		assert_int_equal(tcpx_p2p_xfer_release(x[i]), 0);
	for (i = 0; i < 2; i++) {
		memset(rb[i].p, 0, len);
		assert_int_equal(tcpx_p2p_recv(c[1][i], rb[i].mr, 0, len, &x[2 + i]), 0);
		assert_int_equal(tcpx_p2p_send(c[0][i], sb[i].mr, 0, len, &x[i]), 0);
	}
	for (left = 2; left; left--) {
		tcpx_p2p_xfer *pending[2];
		int map[2], n = 0;

		for (i = 0; i < 2; i++)
			if (!seen[i]) {
				map[n] = i;
				pending[n++] = x[2 + i];
			}
		assert_int_equal(tcpx_p2p_wait_any(pending, n, TP_TEST_TIMEOUT_MS, 0, &idx), 0);
		assert_true(idx >= 0 && idx < n);
		seen[map[idx]] = 1;
		assert_int_equal(tcpx_p2p_wait(x[2 + map[idx]], 0), 0);
		assert_int_equal(tp_check(rb[map[idx]].p, len, (uint64_t)map[idx] + 7), (size_t)-1);
	}
	for (i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_wait(x[i], TP_TEST_TIMEOUT_MS), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(tcpx_p2p_xfer_release(x[i]), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_conn_destroy(c[0][i]), 0);
		assert_int_equal(tcpx_p2p_conn_destroy(c[1][i]), 0);
		buf_close(&sb[i]);
		buf_close(&rb[i]);
	}
	assert_int_equal(tcpx_p2p_session_destroy(s[0]), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s[1]), 0);
}

/* A one-sided target whose application makes no call at all: its progress
 * thread (idle otherwise: nothing posted on its side) must notice the
 * peer's write and read on the control channel and serve them; the
 * notification is then already there for a poll that only looks. */
static void test_thread_serves_one_sided(void **state)
{
	tcpx_p2p_session *s[2] = { open_session(0), open_session(1) };
	tcpx_p2p_xfer_params prm = { .struct_size = sizeof(prm), .notif = "landed",
				     .notif_len = 7 };
	size_t len = 4u << 20;
	struct buf src, dst, back;
	tcpx_p2p_conn *c[2];
	tcpx_p2p_rdesc desc;
	tcpx_p2p_rmr *rmr;
	tcpx_p2p_notif nf;
	tcpx_p2p_xfer *x;
	int n;

	assert_int_equal(tp_link(s[0], s[1], &c[0], &c[1]), 0);
	buf_open(&src, s[0], len);
	buf_open(&back, s[0], len);
	buf_open(&dst, s[1], 2 * len);
	tp_fill(src.p, len, 31);
	assert_int_equal(tcpx_p2p_mr_export(c[1], dst.mr, len, len,
					    TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, &desc), 0);
	/* Let the target's thread settle into its idle sleep first. */
	sleep_ms(300);
	assert_int_equal(tcpx_p2p_rmr_import(c[0], &desc, &rmr), 0);
	{
		tcpx_p2p_seg l = { src.mr, 0, len };
		tcpx_p2p_rseg r = { rmr, 0, len };

		assert_int_equal(tcpx_p2p_write(c[0], &l, 1, &r, 1, &prm, &x), 0);
		assert_int_equal(tcpx_p2p_wait(x, TP_TEST_TIMEOUT_MS), 0);
		assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	}
	assert_int_equal(tp_check(dst.p + len, len, 31), (size_t)-1);
	assert_int_equal(tcpx_p2p_notif_poll(s[1], &nf, 1, &n), 0);
	assert_int_equal(n, 1);
	assert_ptr_equal(nf.conn, c[1]);
	assert_int_equal(nf.len, 7);
	assert_string_equal((const char *)nf.msg, "landed");
	{
		tcpx_p2p_seg l = { back.mr, 0, len };
		tcpx_p2p_rseg r = { rmr, 0, len };

		assert_int_equal(tcpx_p2p_read(c[0], &l, 1, &r, 1, NULL, &x), 0);
		assert_int_equal(tcpx_p2p_wait(x, TP_TEST_TIMEOUT_MS), 0);
		assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	}
	assert_int_equal(tp_check(back.p, len, 31), (size_t)-1);
	assert_int_equal(tcpx_p2p_rmr_release(rmr), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c[0]), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c[1]), 0);
	buf_close(&src);
	buf_close(&back);
	buf_close(&dst);
	assert_int_equal(tcpx_p2p_session_destroy(s[0]), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s[1]), 0);
}

/* A side whose receive (or notification) completed may stop driving at
 * once: what it owed the peer for it (the answer that completes the
 * peer's send or write) was handed to the plugin before the completion was
 * reported.  With 30% "not now" answers from the plugin, 1-byte transfers
 * hit the window between queueing the answer and handing it over. */
static void test_done_side_may_stop(void **state)
{
	tcpx_p2p_session *s[2];
	tcpx_p2p_conn *c[2];
	struct buf a, b;
	tcpx_p2p_rdesc desc;
	tcpx_p2p_rmr *rmr;
	int i, done, n;

	setenv("TCPX_EMU_NULL_REQ_PCT", "30", 1);
	s[0] = open_session(0);
	s[1] = open_session(0);
	assert_int_equal(tp_link(s[0], s[1], &c[0], &c[1]), 0);
	unsetenv("TCPX_EMU_NULL_REQ_PCT");
	buf_open(&a, s[0], 4096);
	buf_open(&b, s[1], 4096);
	assert_int_equal(tcpx_p2p_mr_export(c[1], b.mr, 0, 4096, TCPX_P2P_ACCESS_WRITE, &desc), 0);
	assert_int_equal(tcpx_p2p_rmr_import(c[0], &desc, &rmr), 0);
	for (i = 0; i < 200; i++) {
		tcpx_p2p_xfer *xs, *xr;

		/* two-sided: drive both until the receive is done, then only the sender */
		assert_int_equal(tcpx_p2p_recv(c[1], b.mr, 0, 1, &xr), 0);
		assert_int_equal(tcpx_p2p_send(c[0], a.mr, 0, 1, &xs), 0);
		for (done = 0; !done;) {
			assert_int_equal(tcpx_p2p_session_progress(s[0]), 0);
			assert_int_equal(tcpx_p2p_test(xr, &done), 0);
		}
		assert_int_equal(tcpx_p2p_xfer_release(xr), 0);
		assert_int_equal(tcpx_p2p_wait(xs, 5000), 0);
		assert_int_equal(tcpx_p2p_xfer_release(xs), 0);
		/* one-sided: the target drives until the notification, then stops */
		{
			tcpx_p2p_xfer_params prm = { .struct_size = sizeof(prm), .notif = "n",
						     .notif_len = 1 };
			tcpx_p2p_seg l = { a.mr, 0, 1 };
			tcpx_p2p_rseg r = { rmr, 0, 1 };
			tcpx_p2p_notif nf;

			assert_int_equal(tcpx_p2p_write(c[0], &l, 1, &r, 1, &prm, &xs), 0);
			for (n = 0; !n;) {
				assert_int_equal(tcpx_p2p_session_progress(s[0]), 0);
				assert_int_equal(tcpx_p2p_notif_poll(s[1], &nf, 1, &n), 0);
			}
			assert_int_equal(tcpx_p2p_wait(xs, 5000), 0);
			assert_int_equal(tcpx_p2p_xfer_release(xs), 0);
		}
	}
	assert_int_equal(tcpx_p2p_rmr_release(rmr), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c[0]), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c[1]), 0);
	buf_close(&a);
	buf_close(&b);
	assert_int_equal(tcpx_p2p_session_destroy(s[0]), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s[1]), 0);
}

/* wait and wait_any with timeout 0 are polls, and a poll must drive:
 * both sides in this one thread, nothing but zero-timeout waits. */
static void test_poll_with_zero_timeout(void **state)
{
	struct tp_pair p;
	struct buf b[2];
	tcpx_p2p_xfer *x[2];
	size_t len = 4u << 20;
	int i, idx, done[2] = { 0, 0 };
	long rounds;

	assert_int_equal(tp_pair_open(&p, NULL, 1), 0);
	for (i = 0; i < 2; i++)
		buf_open(&b[i], p.s[i], len);
	tp_fill(b[0].p, len, 5);
	assert_int_equal(tcpx_p2p_recv(p.c[1], b[1].mr, 0, len, &x[1]), 0);
	assert_int_equal(tcpx_p2p_send(p.c[0], b[0].mr, 0, len, &x[0]), 0);
	for (rounds = 0; rounds < 20000000 && !(done[0] && done[1]); rounds++) {
		for (i = 0; i < 2; i++) {
			int rc = done[i] ? 0 : (rounds % 2 ? tcpx_p2p_wait(x[i], 0)
						       : tcpx_p2p_wait_any(&x[i], 1, 0, 0, &idx));

			if (!done[i] && rc == 0)
				done[i] = 1;
			else if (!done[i])
				assert_int_equal(rc, TCPX_P2P_ETIMEDOUT);
		}
	}
	assert_true(done[0] && done[1]);
	assert_int_equal(tp_check(b[1].p, len, 5), (size_t)-1);
	for (i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_xfer_release(x[i]), 0);
		buf_close(&b[i]);
	}
	tp_pair_close(&p);
}

static double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * A waiter on a transfer the peer never matches must sleep, not spin:
 * with a progress thread it sleeps on the completion notice (a timed wait
 * on the wrong clock would return at once and spin), without one it backs
 * off to short sleeps once nothing can move.
 */
static void waiter_sleeps(int progress_thread, double max_share)
{
	tcpx_p2p_session *s[2] = { open_session(progress_thread), open_session(0) };
	tcpx_p2p_conn *c[2];
	tcpx_p2p_xfer *x;
	struct buf b;
	double cpu;

	assert_int_equal(tp_link(s[0], s[1], &c[0], &c[1]), 0);
	buf_open(&b, s[0], 4096);
	assert_int_equal(tcpx_p2p_recv(c[0], b.mr, 0, 4096, &x), 0);
	cpu = thread_cpu_s();
	assert_int_equal(tcpx_p2p_wait(x, 400), TCPX_P2P_ETIMEDOUT);
	cpu = thread_cpu_s() - cpu;
	fprintf(stderr, "waiter (progress thread %d): %.1f ms CPU in 400 ms\n", progress_thread,
		cpu * 1e3);
	assert_true(cpu < 0.4 * max_share);
	assert_int_equal(tcpx_p2p_conn_destroy(c[0]), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c[1]), 0);
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	buf_close(&b);
	assert_int_equal(tcpx_p2p_session_destroy(s[0]), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s[1]), 0);
}

static void test_waiter_sleeps_thread(void **state)
{
	waiter_sleeps(1, 0.1);
}

static void test_waiter_backs_off(void **state)
{
	waiter_sleeps(0, 0.25);
}

/* wait_any and session_progress reject what they cannot serve. */
static void test_wait_any_arguments(void **state)
{
	struct tp_pair p, q;
	struct buf b[2];
	tcpx_p2p_xfer *x[2];
	int idx = -5;

	assert_int_equal(tp_pair_open(&p, NULL, 1), 0);
	assert_int_equal(tp_pair_open(&q, NULL, 1), 0);
	buf_open(&b[0], p.s[0], 4096);
	buf_open(&b[1], q.s[0], 4096);
	assert_int_equal(tcpx_p2p_recv(p.c[0], b[0].mr, 0, 4096, &x[0]), 0);
	assert_int_equal(tcpx_p2p_recv(q.c[0], b[1].mr, 0, 4096, &x[1]), 0);
	assert_int_equal(tcpx_p2p_wait_any(x, 2, 10, 0, &idx), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_wait_any(x, 1, 10, 1, &idx), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_wait_any(x, 0, 10, 0, &idx), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_wait_any(NULL, 1, 10, 0, &idx), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_wait_any(x, 1, 10, 0, NULL), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_wait_any(x, 1, 20, 0, &idx), TCPX_P2P_ETIMEDOUT);
	assert_int_equal(idx, -5);
	assert_int_equal(tcpx_p2p_session_progress(NULL), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_session_progress(p.s[0]), 0);
	/* Destroying the conn fails the receive; wait_any reports it. */
	assert_int_equal(tcpx_p2p_conn_destroy(q.c[0]), 0);
	q.c[0] = NULL;
	assert_int_equal(tcpx_p2p_wait_any(&x[1], 1, 10, 0, &idx), 0);
	assert_int_equal(idx, 0);
	assert_int_equal(tcpx_p2p_wait(x[1], 0), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(x[1]), 0);
	buf_close(&b[1]);
	tp_pair_close(&q);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[0]), 0);
	p.c[0] = NULL;
	assert_int_equal(tcpx_p2p_wait(x[0], 0), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(x[0]), 0);
	buf_close(&b[0]);
	tp_pair_close(&p);
}

int main(int argc, char **argv)
{
	const char *group = argc > 1 ? argv[1] : "engine";
	const struct CMUnitTest engine[] = {
		cmocka_unit_test(test_wait_last_drives_all),
		cmocka_unit_test(test_threads_caller_progress),
		cmocka_unit_test(test_wait_any_arguments),
		cmocka_unit_test(test_waiter_backs_off),
		cmocka_unit_test(test_poll_with_zero_timeout),
		cmocka_unit_test(test_done_side_may_stop),
	};
	const struct CMUnitTest thread[] = {
		cmocka_unit_test(test_post_and_return),
		cmocka_unit_test(test_threads_progress_thread),
		cmocka_unit_test(test_waiter_sleeps_thread),
		cmocka_unit_test(test_thread_serves_one_sided),
	};

	if (!strcmp(group, "engine"))
		return cmocka_run_group_tests_name("session progress engine", engine, NULL, NULL) ? 1
														: 0;
	if (!strcmp(group, "thread"))
		return cmocka_run_group_tests_name("progress thread", thread, NULL, NULL) ? 1 : 0;
	fprintf(stderr, "unknown group %s\n", group);
	return 1;
}
