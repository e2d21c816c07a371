/* Re-dial (config.redial_ms; docs/reliability.md, "Re-dialling a
 * restarted peer").  The survivor S dials a server T1 and has a receive
 * and a send pending and an import of T1's export; T1's session is
 * destroyed and a new one, T2 (another epoch), serves at the same port.
 * With redial_ms set, the old transfers end (ECLOSED: T1 closed), the
 * next call on S's handle starts the re-dial, calls return EAGAIN until
 * it made the new connection, and then the same handle moves checked
 * bytes both ways and a WRITE to T2's freshly exported region, while the
 * import of T1's export is refused (EPEERRESTART).  Its generation is 1.
 * With redial_ms 0 the handle stays failed, as before; with no peer to
 * dial, the re-dial gives up after redial_ms and the handle keeps its
 * error.  Every wait is for an event, bounded by TP_TEST_TIMEOUT_MS. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pair.h"

#define LEN (64u << 10)

struct serve {
	tcpx_p2p_session *s;
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c;
	pthread_t th;
	int rc;
};

static void *accept_main(void *arg)
{
	struct serve *v = arg;

	v->rc = tcpx_p2p_server_accept(v->srv, TP_TEST_TIMEOUT_MS, &v->c);
	return NULL;
}

/* A new session serves at *port (0: any; then *port says which) and
 * accepts one peer on a thread. */
static void serve_start(struct serve *t, uint16_t *port)
{
	assert_int_equal(tcpx_p2p_session_create(NULL, &t->s), 0);
	assert_int_equal(tcpx_p2p_server_create(t->s, "127.0.0.1", *port, &t->srv), 0);
	assert_int_equal(tcpx_p2p_server_port(t->srv, port), 0);
	assert_int_equal(pthread_create(&t->th, NULL, accept_main, t), 0);
}

static void serve_join(struct serve *t)
{
	assert_int_equal(pthread_join(t->th, NULL), 0);
	assert_int_equal(t->rc, 0);
	assert_int_equal(tcpx_p2p_server_destroy(t->srv), 0);
	t->srv = NULL;
}

static tcpx_p2p_session *survivor(int redial_ms, int progress_thread)
{
	tcpx_p2p_config cfg;
	tcpx_p2p_session *s;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.redial_ms = redial_ms;
	cfg.progress_thread = progress_thread;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), 0);
	return s;
}

/* Drive c until a call on it no longer says it is re-dialling: its
 * result then (0: re-established). */
static int until_settled(tcpx_p2p_conn *c, int *eagain)
{
	struct timespec ms = { 0, 1000000 };
	time_t end = time(NULL) + TP_TEST_TIMEOUT_MS / 1000;
	int rc;

	while ((rc = tcpx_p2p_progress(c)) == TCPX_P2P_EAGAIN && time(NULL) < end) {
		(*eagain)++;
		nanosleep(&ms, NULL);
	}
	return rc;
}

/* T1 goes with S's transfers pending; they end, S's handle re-dials T2
 * (S driven by its calls, or by a progress thread: *state). */
static void test_redial_after_restart(void **state)
{
	struct serve t1 = { 0 }, t2 = { 0 };
	tcpx_p2p_session *s = survivor(TP_TEST_TIMEOUT_MS, *state != NULL);
	tcpx_p2p_conn *c = NULL;
	tcpx_p2p_mr *smr, *t1mr, *t2mr;
	tcpx_p2p_rmr *rm1, *rm2;
	tcpx_p2p_rdesc d;
	tcpx_p2p_xfer *rx, *tx, *x[2];
	tcpx_p2p_notif n[4];
	unsigned char *sbuf = malloc(2 * LEN), *t1buf = calloc(1, LEN), *t2buf = calloc(1, LEN);
	uint32_t gen = 7;
	uint16_t port = 0;
	int eagain = 0, got = 0;

	assert_non_null(sbuf);
	assert_non_null(t1buf);
	assert_non_null(t2buf);
	tp_fill(sbuf, 2 * LEN, 1);
	assert_int_equal(tcpx_p2p_mr_register(s, sbuf, 2 * LEN, TCPX_P2P_MEM_HOST, &smr), 0);
	serve_start(&t1, &port);
	assert_int_equal(tcpx_p2p_dial(s, "127.0.0.1", port, TP_TEST_TIMEOUT_MS, &c), 0);
	serve_join(&t1);
	assert_int_equal(tcpx_p2p_conn_generation(c, &gen), 0);
	assert_int_equal(gen, 0);
	assert_int_equal(tcpx_p2p_mr_register(t1.s, t1buf, LEN, TCPX_P2P_MEM_HOST, &t1mr), 0);
	assert_int_equal(tcpx_p2p_mr_export(t1.c, t1mr, 0, LEN, TCPX_P2P_ACCESS_WRITE, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(c, &d, &rm1), 0);

	/* In flight when T1 goes: a receive it never answers, a send it
	 * never receives (S's pattern 1). */
	assert_int_equal(tcpx_p2p_recv(c, smr, 0, LEN, &rx), 0);
	assert_int_equal(tcpx_p2p_send(c, smr, LEN, LEN, &tx), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t1.c), 0);
	assert_int_equal(tcpx_p2p_wait(rx, TP_TEST_TIMEOUT_MS), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_wait(tx, TP_TEST_TIMEOUT_MS), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_mr_deregister(t1mr), 0);
	assert_int_equal(tcpx_p2p_session_destroy(t1.s), 0);

	/* The new incarnation at the same port; S's handle re-dials it. */
	serve_start(&t2, &port);
	assert_int_equal(until_settled(c, &eagain), 0);
	assert_true(eagain > 0);
	serve_join(&t2);
	assert_int_equal(tcpx_p2p_conn_generation(c, &gen), 0);
	assert_int_equal(gen, 1);
	/* The old transfers keep their end. */
	assert_int_equal(tcpx_p2p_wait(rx, 0), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(rx), 0);
	assert_int_equal(tcpx_p2p_xfer_release(tx), 0);

	/* Both ways over the same handle, checked: T2 receives S's pattern
	 * 2 (an old send's bytes, pattern 1, would fail it), S receives 3. */
	assert_int_equal(tcpx_p2p_mr_register(t2.s, t2buf, LEN, TCPX_P2P_MEM_HOST, &t2mr), 0);
	tp_fill(sbuf + LEN, LEN, 2);
	assert_int_equal(tcpx_p2p_recv(t2.c, t2mr, 0, LEN, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(c, smr, LEN, LEN, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_true(tp_check(t2buf, LEN, 2) == (size_t)-1);
	tp_fill(t2buf, LEN, 3);
	assert_int_equal(tcpx_p2p_recv(c, smr, 0, LEN, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(t2.c, t2mr, 0, LEN, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_true(tp_check(sbuf, LEN, 3) == (size_t)-1);

	/* The old import is refused; T2's fresh export takes a WRITE. */
	{
		tcpx_p2p_seg l = { smr, LEN, LEN };
		tcpx_p2p_rseg r = { rm1, 0, LEN };

		assert_int_equal(tcpx_p2p_write(c, &l, 1, &r, 1, NULL, &x[0]),
				 TCPX_P2P_EPEERRESTART);
		assert_non_null(strstr(tcpx_p2p_last_error(), "re-established"));
		memset(t2buf, 0, LEN);
		tp_fill(sbuf + LEN, LEN, 4);
		assert_int_equal(tcpx_p2p_mr_export(t2.c, t2mr, 0, LEN, TCPX_P2P_ACCESS_WRITE, &d),
				 0);
		assert_int_equal(tcpx_p2p_rmr_import(c, &d, &rm2), 0);
		r.rmr = rm2;
		assert_int_equal(tcpx_p2p_write(c, &l, 1, &r, 1, NULL, &x[0]), 0);
		assert_int_equal(tp_complete_all(x, 1), 0);
		assert_true(tp_check(t2buf, LEN, 4) == (size_t)-1);
	}

	/* A notification of the new incarnation names the handle (the old
	 * one's failure notification, if any, does too). */
	assert_int_equal(tcpx_p2p_notify(t2.c, "new", 3), 0);
	{
		time_t end = time(NULL) + TP_TEST_TIMEOUT_MS / 1000;
		bool seen = false;

		while (!seen && time(NULL) < end) {
			assert_int_equal(tcpx_p2p_notif_poll(s, n, 4, &got), 0);
			for (int i = 0; i < got; i++) {
				assert_ptr_equal(n[i].conn, c);
				seen |= n[i].len == 3 && !memcmp(n[i].msg, "new", 3);
			}
			(void)tcpx_p2p_progress(t2.c);
		}
		assert_true(seen);
	}

	assert_int_equal(tcpx_p2p_rmr_release(rm1), 0);
	assert_int_equal(tcpx_p2p_rmr_release(rm2), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t2.c), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(t2mr), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(t2.s), 0);
	free(sbuf);
	free(t1buf);
	free(t2buf);
}

/* S dials a new server T1 (smr: sbuf, LEN bytes) and posts a receive;
 * T1's connection goes, and the receive ends ECLOSED. */
static void dial_and_lose(tcpx_p2p_session *s, unsigned char *sbuf, struct serve *t1,
			  tcpx_p2p_mr **smr, tcpx_p2p_conn **c)
{
	tcpx_p2p_xfer *x;
	uint16_t port = 0;

	assert_int_equal(tcpx_p2p_mr_register(s, sbuf, LEN, TCPX_P2P_MEM_HOST, smr), 0);
	serve_start(t1, &port);
	assert_int_equal(tcpx_p2p_dial(s, "127.0.0.1", port, TP_TEST_TIMEOUT_MS, c), 0);
	serve_join(t1);
	assert_int_equal(tcpx_p2p_recv(*c, *smr, 0, LEN, &x), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t1->c), 0);
	assert_int_equal(tcpx_p2p_wait(x, TP_TEST_TIMEOUT_MS), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
}

/* c (of s, smr registered on s) failed for good: a post still returns
 * ECLOSED and no incarnation was made; then all three go. */
static void stays_failed(tcpx_p2p_session *s, tcpx_p2p_conn *c, tcpx_p2p_mr *smr)
{
	tcpx_p2p_xfer *x;
	uint32_t gen = 7;

	assert_int_equal(tcpx_p2p_send(c, smr, 0, LEN, &x), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_conn_generation(c, &gen), 0);
	assert_int_equal(gen, 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
}

/* redial_ms 0 (the default): the handle stays failed, as before. */
static void test_redial_off(void **state)
{
	struct serve t1 = { 0 };
	tcpx_p2p_session *s = survivor(0, 0);
	tcpx_p2p_conn *c = NULL;
	tcpx_p2p_mr *smr;
	unsigned char *sbuf = malloc(LEN);

	(void)state;
	assert_non_null(sbuf);
	dial_and_lose(s, sbuf, &t1, &smr, &c);
	assert_int_equal(tcpx_p2p_progress(c), TCPX_P2P_ECLOSED);
	stays_failed(s, c, smr);
	assert_int_equal(tcpx_p2p_session_destroy(t1.s), 0);
	free(sbuf);
}

/* Nobody serves at the address any more: the re-dial gives up after
 * redial_ms and the handle keeps its error (no EAGAIN for ever). */
static void test_redial_gives_up(void **state)
{
	struct serve t1 = { 0 };
	tcpx_p2p_session *s = survivor(300, 0);
	tcpx_p2p_conn *c = NULL;
	tcpx_p2p_mr *smr;
	unsigned char *sbuf = malloc(LEN);
	int eagain = 0;

	(void)state;
	assert_non_null(sbuf);
	dial_and_lose(s, sbuf, &t1, &smr, &c);
	assert_int_equal(tcpx_p2p_session_destroy(t1.s), 0);
	assert_int_equal(until_settled(c, &eagain), TCPX_P2P_ECLOSED);
	assert_true(eagain > 0);
	stays_failed(s, c, smr);
	free(sbuf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_prestate(test_redial_after_restart, NULL),
		cmocka_unit_test_prestate(test_redial_after_restart, (void *)1),
		cmocka_unit_test(test_redial_off),
		cmocka_unit_test(test_redial_gives_up),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
