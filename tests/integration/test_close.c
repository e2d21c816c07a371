/* Closing connections (docs/architecture.md "Closing a connection"): a
 * destroyed conn and its peer exchange CLOSE and fill each other's posted
 * control receives, so no plugin request is posted when the comms close.
 *
 * Run with TCPX_EMU_CLOSE_INFLIGHT=fail-others: the emulator then breaks
 * every other comm of the process when a comm is closed with requests in
 * flight, as aws-ofi-nccl does, so a close that leaves one posted fails
 * the surviving connection here, not only a counter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pair.h"
#include "tcpx_p2p.h"

#define LEN (1u << 20)

static tcpx_p2p_session_info query(tcpx_p2p_session *s)
{
	tcpx_p2p_session_info info = { .struct_size = sizeof(info) };

	assert_int_equal(tcpx_p2p_session_query(s, &info), 0);
	return info;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Drive a (and b, unless NULL) until a and b have no close under way. */
static void settle(tcpx_p2p_session *a, tcpx_p2p_session *b)
{
	double give_up = now_s() + TP_TEST_TIMEOUT_MS / 1000.0;

	while ((query(a).conns_closing || (b && query(b).conns_closing)) && now_s() < give_up) {
		assert_int_equal(tcpx_p2p_session_progress(a), 0);
		if (b)
			assert_int_equal(tcpx_p2p_session_progress(b), 0);
	}
	assert_int_equal(query(a).conns_closing, 0);
	if (b)
		assert_int_equal(query(b).conns_closing, 0);
}

/* LEN bytes from `from` to `to` (regions on their sessions), verified. */
static void move(tcpx_p2p_conn *from, tcpx_p2p_mr *src, tcpx_p2p_conn *to, tcpx_p2p_mr *dst,
		 unsigned char *dbuf, uint64_t seed, unsigned char *sbuf)
{
	tcpx_p2p_xfer *x[2];

	tp_fill(sbuf, LEN, seed);
	memset(dbuf, 0, LEN);
	assert_int_equal(tcpx_p2p_recv(to, dst, 0, LEN, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(from, src, 0, LEN, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_int_equal(tp_check(dbuf, LEN, seed), (size_t)-1);
}

struct two {
	struct tp_pair p;          /* conn 0: p.c[0] - p.c[1] */
	tcpx_p2p_conn *a, *b;      /* conn 1 between the same sessions */
	unsigned char *buf[2];
	tcpx_p2p_mr *mr[2];
};

static void two_open(struct two *t)
{
	memset(t, 0, sizeof(*t));
	assert_int_equal(tp_pair_open(&t->p, NULL, 0), 0);
	assert_int_equal(tp_link(t->p.s[0], t->p.s[1], &t->a, &t->b), 0);
	for (int i = 0; i < 2; i++) {
		t->buf[i] = malloc(LEN);
		assert_non_null(t->buf[i]);
		assert_int_equal(tcpx_p2p_mr_register(t->p.s[i], t->buf[i], LEN, TCPX_P2P_MEM_HOST,
						      &t->mr[i]), 0);
	}
}

static void two_close(struct two *t)
{
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_mr_deregister(t->mr[i]), 0);
		free(t->buf[i]);
	}
	if (t->a)
		assert_int_equal(tcpx_p2p_conn_destroy(t->a), 0);
	if (t->b)
		assert_int_equal(tcpx_p2p_conn_destroy(t->b), 0);
	tp_pair_close(&t->p);
}

/* Destroying one connection of a session leaves the other working, in
 * both directions, and neither close leaves a request posted. */
static void test_destroy_one_of_two(void **state)
{
	struct two t;
	int rc;

	(void)state;
	two_open(&t);
	move(t.p.c[0], t.mr[0], t.p.c[1], t.mr[1], t.buf[1], 1, t.buf[0]);
	move(t.a, t.mr[0], t.b, t.mr[1], t.buf[1], 2, t.buf[0]);
	assert_int_equal(tcpx_p2p_conn_destroy(t.p.c[0]), 0);
	t.p.c[0] = NULL;
	/* The survivor moves bytes while the close runs in the same passes. */
	move(t.a, t.mr[0], t.b, t.mr[1], t.buf[1], 3, t.buf[0]);
	move(t.b, t.mr[1], t.a, t.mr[0], t.buf[0], 4, t.buf[1]);
	/* The peer learns of the close: its conn fails with ECLOSED. */
	do {
		assert_int_equal(tcpx_p2p_session_progress(t.p.s[0]), 0);
		rc = tcpx_p2p_progress(t.p.c[1]);
	} while (rc == 0);
	assert_int_equal(rc, TCPX_P2P_ECLOSED);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer closed the connection"));
	assert_int_equal(tcpx_p2p_conn_destroy(t.p.c[1]), 0);
	t.p.c[1] = NULL;
	settle(t.p.s[0], t.p.s[1]);
	move(t.a, t.mr[0], t.b, t.mr[1], t.buf[1], 5, t.buf[0]);
	move(t.b, t.mr[1], t.a, t.mr[0], t.buf[0], 6, t.buf[1]);
	assert_int_equal(query(t.p.s[0]).unclean_closes, 0);
	assert_int_equal(query(t.p.s[1]).unclean_closes, 0);
	two_close(&t);
}

/* Both sides destroyed one after the other in one thread, as most
 * programs end: both closes finish clean, the other conn still works. */
static void test_destroy_both_in_turn(void **state)
{
	struct two t;

	(void)state;
	two_open(&t);
	assert_int_equal(tcpx_p2p_conn_destroy(t.p.c[1]), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t.p.c[0]), 0);
	t.p.c[0] = t.p.c[1] = NULL;
	settle(t.p.s[0], t.p.s[1]);
	move(t.a, t.mr[0], t.b, t.mr[1], t.buf[1], 7, t.buf[0]);
	assert_int_equal(query(t.p.s[0]).unclean_closes, 0);
	assert_int_equal(query(t.p.s[1]).unclean_closes, 0);
	two_close(&t);
}

/* A pending receive on the peer fails with ECLOSED when the sender's side
 * is destroyed; then the peer's destroy closes clean. */
static void test_pending_receive_sees_close(void **state)
{
	struct two t;
	tcpx_p2p_xfer *x;

	(void)state;
	two_open(&t);
	assert_int_equal(tcpx_p2p_recv(t.p.c[1], t.mr[1], 0, LEN, &x), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t.p.c[0]), 0);
	t.p.c[0] = NULL;
	/* Both sessions driven, as one thread with both peers must (some
	 * plugins need the closing side driven before its CLOSE can go). */
	for (double give_up = now_s() + TP_TEST_TIMEOUT_MS / 1000.0; now_s() < give_up;) {
		int done = 0;

		assert_int_equal(tcpx_p2p_session_progress(t.p.s[0]), 0);
		if (tcpx_p2p_test(x, &done) || done)
			break;
	}
	assert_int_equal(tcpx_p2p_wait(x, 0), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t.p.c[1]), 0);
	t.p.c[1] = NULL;
	settle(t.p.s[0], t.p.s[1]);
	assert_int_equal(query(t.p.s[0]).unclean_closes, 0);
	assert_int_equal(query(t.p.s[1]).unclean_closes, 0);
	move(t.b, t.mr[1], t.a, t.mr[0], t.buf[0], 8, t.buf[1]);
	two_close(&t);
}

/* The sender's chunks are on their way (only its session was driven) when
 * it destroys its conn: 64 KiB fit the sockets' buffers, its send waits
 * for the ACK; of 1 MiB some chunks are still in the plugin's hands, which
 * need receives the receiver never posted for a transfer it now fails.
 * The receiver learns of the close with receives posted (after 1..4
 * passes of its own) or not yet (0), and both must close clean (the
 * counts in the CLOSEs make each side post what completes the other's
 * requests), the receiver's region free again, the other conn intact. */
static void test_close_with_bytes_on_the_way(void **state)
{
	for (int round = 0; round < 10; round++) {
		const size_t len = round < 5 ? 64u << 10 : LEN;
		struct two t;
		tcpx_p2p_xfer *xs, *xr;
		int done = 0, rc;

		(void)state;
		two_open(&t);
		tp_fill(t.buf[0], len, 9);
		assert_int_equal(tcpx_p2p_recv(t.p.c[1], t.mr[1], 0, len, &xr), 0);
		assert_int_equal(tcpx_p2p_send(t.p.c[0], t.mr[0], 0, len, &xs), 0);
		for (int i = 0; i < round % 5; i++)
			assert_int_equal(tcpx_p2p_session_progress(t.p.s[1]), 0);
		for (int i = 0; i < 20000; i++)
			assert_int_equal(tcpx_p2p_session_progress(t.p.s[0]), 0);
		assert_int_equal(tcpx_p2p_conn_destroy(t.p.c[0]), 0);
		t.p.c[0] = NULL;
		/* test() reports a failed transfer by its error. */
		for (double give_up = now_s() + TP_TEST_TIMEOUT_MS / 1000.0;
		     !done && now_s() < give_up;) {
			assert_int_equal(tcpx_p2p_session_progress(t.p.s[0]), 0);
			rc = tcpx_p2p_test(xr, &done);
			assert_true(rc == 0 || rc == TCPX_P2P_ECLOSED);
			done |= rc != 0;
		}
		assert_true(done);
		rc = tcpx_p2p_wait(xr, 0);
		assert_true(rc == 0 || rc == TCPX_P2P_ECLOSED);
		assert_int_equal(tcpx_p2p_xfer_release(xr), 0);
		rc = tcpx_p2p_wait(xs, 0); /* the ACK may have come before the close */
		assert_true(rc == 0 || rc == TCPX_P2P_ECLOSED);
		assert_int_equal(tcpx_p2p_xfer_release(xs), 0);
		assert_int_equal(tcpx_p2p_conn_destroy(t.p.c[1]), 0);
		t.p.c[1] = NULL;
		settle(t.p.s[0], t.p.s[1]);
		assert_int_equal(query(t.p.s[0]).unclean_closes, 0);
		assert_int_equal(query(t.p.s[1]).unclean_closes, 0);
		move(t.a, t.mr[0], t.b, t.mr[1], t.buf[1], 10, t.buf[0]);
		two_close(&t); /* deregisters both regions: none is held any more */
	}
}

/* A peer that never answers: the close gives up after close_timeout_ms,
 * closes the comms anyway and counts it. */
static void test_unanswered_close_times_out(void **state)
{
	tcpx_p2p_config cfg;
	struct tp_pair p;

	(void)state;
	tcpx_p2p_config_init(&cfg);
	cfg.close_timeout_ms = 300;
	assert_int_equal(tp_pair_open(&p, &cfg, 0), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[0]), 0);
	p.c[0] = NULL;
	assert_int_equal(query(p.s[0]).conns_closing, 1);
	/* Only s[0] is driven: p.c[1] never answers. */
	settle(p.s[0], NULL);
	assert_int_equal(query(p.s[0]).unclean_closes, 1);
	tp_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_destroy_one_of_two),
		cmocka_unit_test(test_destroy_both_in_turn),
		cmocka_unit_test(test_pending_receive_sees_close),
		cmocka_unit_test(test_close_with_bytes_on_the_way),
		cmocka_unit_test(test_unanswered_close_times_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
