/* Notifications and the peer's close: a peer that notifies many times
 * (each notify returned 0) and destroys its connection at once gets every
 * one delivered, in order, and then the failure notification (length 0).
 * A notification held behind a transfer the close fails is dropped and
 * counted (the stats' notifs_dropped); one before it is delivered.
 * Both peers in one thread, progress_thread 0; nothing is timed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

#define MANY 2000

static void open_pair(struct tp_pair *p)
{
	tcpx_p2p_config cfg[2];

	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_config_init(&cfg[i]), 0);
		cfg[i].progress_thread = 0;
	}
	assert_int_equal(tp_pair_open2(p, cfg, 1), 0);
}

/* Take the target's notifications until the failure one (length 0),
 * driving the sender's closing connection meanwhile; returns how many came
 * before it, their first bytes in idx[]. */
static int take_until_failed(struct tp_pair *p, uint32_t *idx, int cap, size_t *len)
{
	tcpx_p2p_notif *n = malloc(64 * sizeof(*n));
	int got = 0, k;

	assert_non_null(n);
	for (long tries = 0;; tries++) {
		assert_true(tries < 20000000); /* a hang limit, not a measure */
		assert_true(tcpx_p2p_session_progress(p->s[0]) >= 0);
		assert_true(tcpx_p2p_notif_poll(p->s[1], n, 64, &k) >= 0);
		for (int i = 0; i < k; i++) {
			assert_ptr_equal(n[i].conn, p->c[1]);
			if (!n[i].len) {
				assert_int_equal(i, k - 1); /* nothing of c after it */
				free(n);
				return got;
			}
			assert_true(got < cap);
			len[got] = n[i].len;
			memcpy(&idx[got], n[i].msg, sizeof(idx[got]));
			got++;
		}
	}
}

static void test_many_then_destroy(void **state)
{
	static uint32_t idx[MANY];
	static size_t len[MANY];
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };
	struct tp_pair p;
	int got;

	(void)state;
	open_pair(&p);
	for (uint32_t i = 0; i < MANY; i++)
		assert_int_equal(tcpx_p2p_notify(p.c[0], &i, sizeof(i)), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[0]), 0);
	p.c[0] = NULL;
	got = take_until_failed(&p, idx, MANY, len);
	printf("# %d of %d notifications delivered before the failure\n", got, MANY);
	assert_int_equal(got, MANY);
	for (uint32_t i = 0; i < MANY; i++) {
		assert_int_equal(len[i], sizeof(uint32_t));
		assert_int_equal(idx[i], i);
	}
	assert_int_equal(tcpx_p2p_progress(p.c[1]), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_conn_stats(p.c[1], &st), 0);
	assert_int_equal(st.notifs_in, MANY);
	assert_int_equal(st.notifs_dropped, 0);
	tp_pair_close(&p);
}

/* "a", a send the target never receives (its announcement waits for a
 * receive), "b": the close fails the send, so "b" can no longer follow
 * its data and is dropped; "a" is delivered. */
static void test_behind_failed_item(void **state)
{
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };
	static char buf[4096];
	struct tp_pair p;
	tcpx_p2p_mr *mr;
	tcpx_p2p_xfer *x;
	uint32_t a = 0xa, b = 0xb, idx[2];
	size_t len[2];

	(void)state;
	open_pair(&p);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], buf, sizeof(buf), TCPX_P2P_MEM_HOST, &mr),
			 0);
	assert_int_equal(tcpx_p2p_notify(p.c[0], &a, sizeof(a)), 0);
	assert_int_equal(tcpx_p2p_send(p.c[0], mr, 0, sizeof(buf), &x), 0);
	assert_int_equal(tcpx_p2p_notify(p.c[0], &b, sizeof(b)), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[0]), 0);
	p.c[0] = NULL;
	assert_int_equal(tcpx_p2p_wait(x, TP_TEST_TIMEOUT_MS), TCPX_P2P_ECLOSED);
	tcpx_p2p_xfer_release(x);
	assert_int_equal(take_until_failed(&p, idx, 2, len), 1);
	assert_int_equal(idx[0], a);
	assert_int_equal(tcpx_p2p_conn_stats(p.c[1], &st), 0);
	assert_int_equal(st.notifs_in, 1);
	assert_int_equal(st.notifs_dropped, 1);
	assert_int_equal(tcpx_p2p_mr_deregister(mr), 0);
	tp_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_then_destroy),
		cmocka_unit_test(test_behind_failed_item),
	};

	return cmocka_run_group_tests_name("notifications at close", tests, NULL, NULL) ? 1 : 0;
}
