/* Notifications longer than TCPX_P2P_NOTIF_MAX (issue #30 item 4): a
 * 60 KiB round trip by notify, taken by tcpx_p2p_notif_take and checked
 * byte for byte; notif_poll stops before one; a buffer too small takes nothing and says the length;
 * each started KiB counts against the target's peer_max_notifs (credits),
 * and a note longer than the target takes, or counting more than its whole
 * bound, is refused at notify. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

#define LONG (60u << 10)

static unsigned char msg[LONG], got_buf[LONG];

/* Drive the sender and take one notification at the target. */
static void take_one(struct tp_pair *p, tcpx_p2p_notif_buf *nb)
{
	int got = 0;

	for (long tries = 0; !got; tries++) {
		assert_true(tries < 10000000); /* a hang limit, not a measure */
		tcpx_p2p_session_progress(p->s[0]);
		assert_int_equal(tcpx_p2p_notif_take(p->s[1], nb, &got), 0);
	}
}

static void test_long_round_trip(void **state)
{
	struct tp_pair p;
	tcpx_p2p_config cfg[2];
	tcpx_p2p_notif_buf nb = { .struct_size = sizeof(nb) };
	tcpx_p2p_notif small[4];
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };
	unsigned char tiny[16];
	int n, got, rc, sent;

	(void)state;
	tcpx_p2p_config_init(&cfg[0]);
	tcpx_p2p_config_init(&cfg[1]);
	cfg[1].peer_max_notifs = 150; /* the target holds 150 KiB: two 60 KiB notes */
	assert_int_equal(tp_pair_open2(&p, cfg, 0), 0);
	tp_fill(msg, LONG, 60);

	/* Credits count KiB: two 60 KiB notes fit at the target, a third waits. */
	for (sent = 0; sent < 3; sent++) {
		rc = tcpx_p2p_notify(p.c[0], msg, LONG);
		if (rc)
			break;
	}
	assert_int_equal(sent, 2);
	assert_int_equal(rc, TCPX_P2P_EAGAIN);

	/* Too small a buffer takes nothing and says the length, once it came;
	 * the old poll leaves it alone. */
	nb.buf = tiny;
	nb.cap = sizeof(tiny);
	for (long tries = 0; (rc = tcpx_p2p_notif_take(p.s[1], &nb, &got)) == 0; tries++) {
		assert_true(tries < 10000000);
		assert_int_equal(got, 0);
		tcpx_p2p_session_progress(p.s[0]);
	}
	assert_int_equal(rc, TCPX_P2P_EINVAL);
	assert_int_equal(got, 0);
	assert_int_equal(nb.len, LONG);
	assert_int_equal(tcpx_p2p_notif_poll(p.s[1], small, 4, &n), 0);
	assert_int_equal(n, 0);
	/* The 60 KiB round trip, byte for byte. */
	nb.buf = got_buf;
	nb.cap = sizeof(got_buf);
	for (int i = 0; i < 2; i++) {
		memset(got_buf, 0, sizeof(got_buf));
		take_one(&p, &nb);
		assert_ptr_equal(nb.conn, p.c[1]);
		assert_int_equal(nb.len, LONG);
		assert_int_equal(tp_check(got_buf, LONG, 60), (size_t)-1);
	}
	/* ... and come back once the target took them. */
	for (long tries = 0; (rc = tcpx_p2p_notify(p.c[0], msg, LONG)) == TCPX_P2P_EAGAIN;
	     tries++) {
		assert_true(tries < 10000000);
		tcpx_p2p_session_progress(p.s[1]);
		tcpx_p2p_session_progress(p.s[0]);
	}
	assert_int_equal(rc, 0);
	take_one(&p, &nb);
	assert_int_equal(tp_check(got_buf, LONG, 60), (size_t)-1);
	/* take serves short ones too. */
	assert_int_equal(tcpx_p2p_notify(p.c[0], "short", 5), 0);
	take_one(&p, &nb);
	assert_int_equal(nb.len, 5);
	assert_memory_equal(got_buf, "short", 5);

	/* Refused at notify, nothing sent: longer than the target takes, or
	 * more KiB than it ever holds. */
	assert_int_equal(tcpx_p2p_notify(p.c[0], msg, 0), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notify(p.c[0], msg, (64u << 10) + 1), TCPX_P2P_EINVAL);
	tcpx_p2p_conn_destroy(p.c[0]);
	tcpx_p2p_conn_destroy(p.c[1]);
	p.c[0] = p.c[1] = NULL;
	cfg[1].peer_max_notifs = 32;
	tp_pair_close(&p);
	assert_int_equal(tp_pair_open2(&p, cfg, 0), 0);
	assert_int_equal(tcpx_p2p_notify(p.c[0], msg, LONG), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer_max_notifs"));
	assert_int_equal(tcpx_p2p_notify(p.c[0], msg, 32u << 10), 0);
	take_one(&p, &nb);
	assert_int_equal(nb.len, 32u << 10);
	assert_int_equal(tcpx_p2p_conn_stats(p.c[1], &st), 0);
	assert_int_equal(st.notifs_in, 1);

	nb.struct_size = 0;
	assert_int_equal(tcpx_p2p_notif_take(p.s[1], &nb, &got), TCPX_P2P_EINVAL);
	tp_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_long_round_trip) };

	return cmocka_run_group_tests_name("long notifications", tests, NULL, NULL) ? 1 : 0;
}
