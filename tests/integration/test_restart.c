/* A peer that restarts under the same address (docs/reliability.md,
 * "Restarted peers").  The survivor S dials a server T1 and has a receive
 * pending on that connection; T1's session stays alive and heartbeating,
 * as a hung old incarnation would, so liveness never fails it.  Then a new
 * incarnation T2 serves at T1's address and S dials it again: the dial
 * returns with the old connection already failed (EPEERRESTART) and its
 * receive with it, and the new connection carries bytes.  Nothing waits
 * for time: the old connection has failed when the dial returns, or never
 * would. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

#define LEN (64u << 10)

struct serve {
	tcpx_p2p_session *s;
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c;
	int rc;
};

static void *accept_main(void *arg)
{
	struct serve *v = arg;

	v->rc = tcpx_p2p_server_accept(v->srv, TP_TEST_TIMEOUT_MS, &v->c);
	return NULL;
}

/* t serves at port (0: any; then *port says which) and s dials it. */
static tcpx_p2p_conn *dial(tcpx_p2p_session *s, struct serve *t, uint16_t *port)
{
	tcpx_p2p_conn *c = NULL;
	pthread_t th;

	assert_int_equal(tcpx_p2p_server_create(t->s, "127.0.0.1", *port, &t->srv), 0);
	assert_int_equal(tcpx_p2p_server_port(t->srv, port), 0);
	assert_int_equal(pthread_create(&th, NULL, accept_main, t), 0);
	assert_int_equal(tcpx_p2p_dial(s, "127.0.0.1", *port, TP_TEST_TIMEOUT_MS, &c), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(t->rc, 0);
	/* The address is free for the next incarnation. */
	assert_int_equal(tcpx_p2p_server_destroy(t->srv), 0);
	t->srv = NULL;
	return c;
}

static void test_restart_fails_old_conn(void **state)
{
	struct serve t1 = { 0 }, t2 = { 0 };
	tcpx_p2p_session *s;
	tcpx_p2p_conn *c1, *c2;
	tcpx_p2p_xfer *rx, *x[2];
	tcpx_p2p_mr *smr, *tmr;
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };
	unsigned char *sbuf = calloc(1, LEN), *tbuf = malloc(LEN);
	uint16_t port = 0;
	int done = 0;

	(void)state;
	assert_non_null(sbuf);
	assert_non_null(tbuf);
	assert_int_equal(tcpx_p2p_session_create(NULL, &s), 0);
	assert_int_equal(tcpx_p2p_session_create(NULL, &t1.s), 0);
	assert_int_equal(tcpx_p2p_session_create(NULL, &t2.s), 0);
	assert_int_equal(tcpx_p2p_mr_register(s, sbuf, LEN, TCPX_P2P_MEM_HOST, &smr), 0);
	assert_int_equal(tcpx_p2p_mr_register(t2.s, tbuf, LEN, TCPX_P2P_MEM_HOST, &tmr), 0);

	c1 = dial(s, &t1, &port);
	assert_int_equal(tcpx_p2p_recv(c1, smr, 0, LEN, &rx), 0);
	assert_int_equal(tcpx_p2p_test(rx, &done), 0);
	assert_int_equal(done, 0);

	/* The new incarnation, at the same address. */
	c2 = dial(s, &t2, &port);
	assert_int_equal(tcpx_p2p_test(rx, &done), TCPX_P2P_EPEERRESTART);
	assert_int_equal(tcpx_p2p_wait(rx, 0), TCPX_P2P_EPEERRESTART);
	assert_non_null(strstr(tcpx_p2p_last_error(), "restarted"));
	assert_int_equal(tcpx_p2p_progress(c1), TCPX_P2P_EPEERRESTART);
	assert_int_equal(tcpx_p2p_xfer_release(rx), 0);
	assert_int_equal(tcpx_p2p_conn_stats(c1, &st), 0);
	assert_int_equal(st.failed_by[-TCPX_P2P_EPEERRESTART], 1);

	/* The new connection carries bytes. */
	tp_fill(tbuf, LEN, 9);
	assert_int_equal(tcpx_p2p_recv(c2, smr, 0, LEN, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(t2.c, tmr, 0, LEN, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_true(tp_check(sbuf, LEN, 9) == (size_t)-1);
	assert_int_equal(tcpx_p2p_progress(c2), 0);

	/* A dial to the same incarnation again fails nothing. */
	{
		struct serve again = { .s = t2.s };
		tcpx_p2p_conn *c3 = dial(s, &again, &port);

		assert_int_equal(tcpx_p2p_progress(c2), 0);
		assert_int_equal(tcpx_p2p_conn_destroy(c3), 0);
		assert_int_equal(tcpx_p2p_conn_destroy(again.c), 0);
	}

	assert_int_equal(tcpx_p2p_conn_destroy(c1), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t1.c), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c2), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t2.c), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(tmr), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(t1.s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(t2.s), 0);
	free(sbuf);
	free(tbuf);
}

#define ROUNDS 12

/* Incarnation after incarnation at one address, each found with a send
 * and a receive of the survivor's pending on the old connection (the old
 * incarnation posted nothing for them) and an import of the old one's
 * export: at each dial both fail EPEERRESTART, the old import is refused
 * on the new connection and fails on the old one, and the new
 * incarnation's region is untouched by any of it.  Then the old
 * incarnation goes, as a restarted process's would. */
static void test_restart_many(void **state)
{
	struct serve t[2] = { { 0 } };
	tcpx_p2p_session *s;
	tcpx_p2p_conn *old = NULL, *fresh;
	tcpx_p2p_rmr *rm = NULL;
	tcpx_p2p_mr *smr, *tmr[2] = { NULL, NULL };
	tcpx_p2p_xfer *rx = NULL, *tx = NULL, *x;
	tcpx_p2p_rdesc d;
	unsigned char *sbuf = malloc(2 * LEN), *tbuf[2] = { calloc(1, LEN), calloc(1, LEN) };
	uint16_t port = 0;
	int done;

	(void)state;
	assert_non_null(sbuf);
	assert_non_null(tbuf[0]);
	assert_non_null(tbuf[1]);
	tp_fill(sbuf, 2 * LEN, 3);
	assert_int_equal(tcpx_p2p_session_create(NULL, &s), 0);
	assert_int_equal(tcpx_p2p_mr_register(s, sbuf, 2 * LEN, TCPX_P2P_MEM_HOST, &smr), 0);
	for (int r = 0; r < ROUNDS; r++) {
		struct serve *now = &t[r % 2], *was = &t[(r + 1) % 2];
		tcpx_p2p_seg l = { smr, 0, LEN };
		tcpx_p2p_rseg rs;

		memset(tbuf[r % 2], 0, LEN);
		*now = (struct serve){ 0 };
		assert_int_equal(tcpx_p2p_session_create(NULL, &now->s), 0);
		assert_int_equal(tcpx_p2p_mr_register(now->s, tbuf[r % 2], LEN, TCPX_P2P_MEM_HOST,
						      &tmr[r % 2]), 0);
		fresh = dial(s, now, &port);
		if (old) {
			assert_int_equal(tcpx_p2p_test(rx, &done), TCPX_P2P_EPEERRESTART);
			assert_int_equal(tcpx_p2p_test(tx, &done), TCPX_P2P_EPEERRESTART);
			assert_int_equal(tcpx_p2p_xfer_release(rx), 0);
			assert_int_equal(tcpx_p2p_xfer_release(tx), 0);
			/* The old incarnation's export: refused on the new
			 * connection, failed on the old one. */
			rs = (tcpx_p2p_rseg){ rm, 0, LEN };
			assert_int_equal(tcpx_p2p_write(fresh, &l, 1, &rs, 1, NULL, &x), TCPX_P2P_EINVAL);
			assert_int_equal(tcpx_p2p_write(old, &l, 1, &rs, 1, NULL, &x),
					 TCPX_P2P_EPEERRESTART);
			assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
			/* The old incarnation goes. */
			assert_int_equal(tcpx_p2p_conn_destroy(old), 0);
			assert_int_equal(tcpx_p2p_conn_destroy(was->c), 0);
			assert_int_equal(tcpx_p2p_mr_deregister(tmr[(r + 1) % 2]), 0);
			assert_int_equal(tcpx_p2p_session_destroy(was->s), 0);
		}
		/* What the next incarnation's dial finds pending here. */
		assert_int_equal(tcpx_p2p_mr_export(now->c, tmr[r % 2], 0, LEN, TCPX_P2P_ACCESS_WRITE,
						    &d), 0);
		assert_int_equal(tcpx_p2p_rmr_import(fresh, &d, &rm), 0);
		assert_int_equal(tcpx_p2p_recv(fresh, smr, 0, LEN, &rx), 0);
		assert_int_equal(tcpx_p2p_send(fresh, smr, LEN, LEN, &tx), 0);
		assert_int_equal(tcpx_p2p_test(rx, &done), 0);
		assert_int_equal(done, 0);
		old = fresh;
		/* Nothing of the survivor's landed in this incarnation. */
		for (size_t i = 0; i < LEN; i++)
			assert_int_equal(tbuf[r % 2][i], 0);
	}
	/* The last one is destroyed the ordinary way. */
	assert_int_equal(tcpx_p2p_conn_destroy(old), 0);
	assert_int_equal(tcpx_p2p_wait(rx, TP_TEST_TIMEOUT_MS), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_wait(tx, TP_TEST_TIMEOUT_MS), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(rx), 0);
	assert_int_equal(tcpx_p2p_xfer_release(tx), 0);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t[(ROUNDS - 1) % 2].c), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(tmr[(ROUNDS - 1) % 2]), 0);
	assert_int_equal(tcpx_p2p_session_destroy(t[(ROUNDS - 1) % 2].s), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	free(sbuf);
	free(tbuf[0]);
	free(tbuf[1]);
}

/* A listener recognises a restarted dialler by its node id
 * (tcpx_p2p_session_set_node_id): T serves, D1 ("decode-7") dials it and
 * T has a receive pending on that connection; D1 stays alive and
 * heartbeating, as a hung old incarnation would.  A dialler without a node
 * id, and one with another, change nothing; then D2, a new incarnation
 * with the same node id, dials T: when T's accept returns, T's connection
 * from D1 has failed with EPEERRESTART, and the new one carries bytes. */
static void test_restarted_dialler(void **state)
{
	struct serve t = { 0 };
	tcpx_p2p_session *d1, *d2, *o;
	tcpx_p2p_conn *c1, *c2, *co, *t1, *t2, *to, *tn;
	tcpx_p2p_xfer *rx, *x[2];
	tcpx_p2p_mr *tmr, *dmr;
	char big[40];
	unsigned char *tbuf = calloc(1, LEN), *dbuf = malloc(LEN);
	uint16_t port = 0;
	int done = 0;

	(void)state;
	assert_non_null(tbuf);
	assert_non_null(dbuf);
	assert_int_equal(tcpx_p2p_session_create(NULL, &t.s), 0);
	assert_int_equal(tcpx_p2p_session_create(NULL, &d1), 0);
	assert_int_equal(tcpx_p2p_session_create(NULL, &d2), 0);
	assert_int_equal(tcpx_p2p_session_create(NULL, &o), 0);
	/* Argument checks. */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(tcpx_p2p_session_set_node_id(NULL, "x"), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_session_set_node_id(d1, big), TCPX_P2P_EINVAL);
	big[32] = '\0';
	assert_int_equal(tcpx_p2p_session_set_node_id(d1, big), TCPX_P2P_EINVAL);
	big[31] = '\0';
	assert_int_equal(tcpx_p2p_session_set_node_id(d1, big), 0); /* 31 bytes: the most */
	assert_int_equal(tcpx_p2p_session_set_node_id(d1, "de code"), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_session_set_node_id(d1, NULL), 0);
	assert_int_equal(tcpx_p2p_session_set_node_id(d1, ""), 0);

	assert_int_equal(tcpx_p2p_session_set_node_id(d1, "decode-7"), 0);
	assert_int_equal(tcpx_p2p_session_set_node_id(d2, "decode-7"), 0);
	assert_int_equal(tcpx_p2p_mr_register(t.s, tbuf, LEN, TCPX_P2P_MEM_HOST, &tmr), 0);
	assert_int_equal(tcpx_p2p_mr_register(d2, dbuf, LEN, TCPX_P2P_MEM_HOST, &dmr), 0);

	c1 = dial(d1, &t, &port);
	t1 = t.c;
	assert_int_equal(tcpx_p2p_recv(t1, tmr, 0, LEN, &rx), 0);
	assert_int_equal(tcpx_p2p_test(rx, &done), 0);
	assert_int_equal(done, 0);

	/* Another dialler, without a node id and then with another one. */
	co = dial(o, &t, &port);
	to = t.c;
	assert_int_equal(tcpx_p2p_test(rx, &done), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(co), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(to), 0);
	assert_int_equal(tcpx_p2p_session_set_node_id(o, "prefill-1"), 0);
	co = dial(o, &t, &port);
	to = t.c;
	assert_int_equal(tcpx_p2p_test(rx, &done), 0);
	assert_int_equal(done, 0);
	/* The same incarnation again fails nothing either. */
	c2 = dial(d1, &t, &port);
	tn = t.c;
	assert_int_equal(tcpx_p2p_test(rx, &done), 0);
	assert_int_equal(done, 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c2), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(tn), 0);

	/* The new incarnation. */
	c2 = dial(d2, &t, &port);
	t2 = t.c;
	assert_int_equal(tcpx_p2p_test(rx, &done), TCPX_P2P_EPEERRESTART);
	assert_int_equal(tcpx_p2p_wait(rx, 0), TCPX_P2P_EPEERRESTART);
	assert_non_null(strstr(tcpx_p2p_last_error(), "decode-7"));
	assert_int_equal(tcpx_p2p_xfer_release(rx), 0);
	assert_int_equal(tcpx_p2p_progress(t1), TCPX_P2P_EPEERRESTART);
	assert_int_equal(tcpx_p2p_progress(to), 0);

	/* The new connection carries bytes. */
	tp_fill(dbuf, LEN, 11);
	assert_int_equal(tcpx_p2p_recv(t2, tmr, 0, LEN, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(c2, dmr, 0, LEN, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_true(tp_check(tbuf, LEN, 11) == (size_t)-1);
	assert_int_equal(tcpx_p2p_progress(t2), 0);

	assert_int_equal(tcpx_p2p_conn_destroy(t1), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c1), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t2), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(c2), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(to), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(co), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(tmr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(dmr), 0);
	assert_int_equal(tcpx_p2p_session_destroy(t.s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(d1), 0);
	assert_int_equal(tcpx_p2p_session_destroy(d2), 0);
	assert_int_equal(tcpx_p2p_session_destroy(o), 0);
	free(tbuf);
	free(dbuf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restart_fails_old_conn),
		cmocka_unit_test(test_restart_many),
		cmocka_unit_test(test_restarted_dialler),
	};

	return cmocka_run_group_tests_name("restarted peers", tests, NULL, NULL) ? 1 : 0;
}
