/* Notifications longer than TCPX_P2P_NOTIF_MAX (issue #30 item 4): a
 * 60 KiB round trip by notify, taken by tcpx_p2p_notif_take and checked
 * byte for byte; notif_poll leaves one alone; a buffer too small takes nothing and says the length;
 * each started KiB counts against the target's peer_max_notifs (credits),
 * and a note longer than the target takes, or counting more than its whole
 * bound, is refused at notify.
 * A long one never blocks the short ones of other connections: notif_poll
 * (either version) takes them past it and leaves it, with its own
 * connection's later ones, for notif_take; from 0.10 its return value says
 * so.  A caller built against 0.6 (a struct_size without notif_max_bytes)
 * gets no notification longer than tcpx_p2p_notif holds. */
#define _GNU_SOURCE /* dlvsym */
#include <dlfcn.h>
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
	assert_int_equal(tcpx_p2p_notif_poll(p.s[1], small, 4, &n), 1); /* one conn waits */
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

#define SHORTS 1000

typedef int (*poll_fn)(tcpx_p2p_session *, tcpx_p2p_notif *, int, int *);

/* Conn a sends a 2 KiB notification and then "after"; conn b, beside it,
 * SHORTS short ones, more than the target's peer_max_notifs (64): all of
 * b's arrive, in order, through poll alone, while a's long one waits;
 * then notif_take gets it, and poll "after".  poll: a version of
 * notif_poll; says: whether its return value counts what waits. */
static void long_beside_short(poll_fn poll, int says)
{
	struct tp_pair p;
	tcpx_p2p_config cfg[2];
	tcpx_p2p_conn *b[2];
	tcpx_p2p_notif *nt = malloc(16 * sizeof(*nt));
	tcpx_p2p_notif_buf nb = { .struct_size = sizeof(nb), .buf = got_buf,
				  .cap = sizeof(got_buf) };
	uint32_t next = 0, idx;
	long idle = 0;
	int n, rc, got;

	assert_non_null(nt);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_config_init(&cfg[i]), 0);
		cfg[i].progress_thread = 0;
	}
	cfg[1].peer_max_notifs = 64;
	assert_int_equal(tp_pair_open2(&p, cfg, 1), 0);
	assert_int_equal(tp_link(p.s[0], p.s[1], &b[0], &b[1]), 0);
	tp_fill(msg, 2048, 7);
	assert_int_equal(tcpx_p2p_notify(p.c[0], msg, 2048), 0);
	assert_int_equal(tcpx_p2p_notify(p.c[0], "after", 5), 0);
	for (uint32_t i = 0; i < SHORTS || next < SHORTS;) {
		/* A hang limit on rounds that moved nothing, not a measure. */
		assert_true(++idle < 2000000);
		/* b's sender posts as long as its credits last ... */
		while (i < SHORTS && (rc = tcpx_p2p_notify(b[0], &i, sizeof(i))) == 0) {
			i++;
			idle = 0;
		}
		if (i < SHORTS)
			assert_int_equal(rc, TCPX_P2P_EAGAIN);
		/* ... and the target takes what poll gives. */
		assert_int_equal(tcpx_p2p_session_progress(p.s[0]), 0);
		rc = poll(p.s[1], nt, 16, &n);
		assert_true(rc >= 0);
		idle = n ? 0 : idle;
		for (int k = 0; k < n; k++) {
			assert_ptr_equal(nt[k].conn, b[1]); /* a's wait behind its long one */
			assert_int_equal(nt[k].len, sizeof(idx));
			memcpy(&idx, nt[k].msg, sizeof(idx));
			assert_int_equal(idx, next);
			next++;
		}
	}
	/* Once a's long one has come (a buffer too small says its length and
	 * takes nothing), the new poll says it waits. */
	nb.cap = 16;
	for (long tries = 0; (rc = tcpx_p2p_notif_take(p.s[1], &nb, &got)) == 0; tries++) {
		assert_true(tries < 10000000);
		assert_int_equal(got, 0);
		assert_int_equal(tcpx_p2p_session_progress(p.s[0]), 0);
	}
	assert_int_equal(rc, TCPX_P2P_EINVAL);
	assert_int_equal(nb.len, 2048);
	assert_int_equal(poll(p.s[1], nt, 16, &n), says);
	assert_int_equal(n, 0);
	nb.cap = sizeof(got_buf);
	assert_int_equal(tcpx_p2p_notif_take(p.s[1], &nb, &got), 0);
	assert_int_equal(got, 1);
	assert_ptr_equal(nb.conn, p.c[1]);
	assert_int_equal(nb.len, 2048);
	assert_int_equal(tp_check(got_buf, 2048, 7), (size_t)-1);
	for (long tries = 0; (rc = poll(p.s[1], nt, 16, &n)) == 0 && n == 0; tries++)
		assert_true(tries < 10000000); /* a hang limit, not a measure */
	assert_int_equal(rc, 0);
	assert_int_equal(n, 1);
	assert_ptr_equal(nt[0].conn, p.c[1]);
	assert_int_equal(nt[0].len, 5);
	assert_memory_equal(nt[0].msg, "after", 5);
	assert_int_equal(tcpx_p2p_conn_destroy(b[0]), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(b[1]), 0);
	tp_pair_close(&p);
	free(nt);
}

static void test_long_beside_short(void **state)
{
	(void)state;
	long_beside_short(tcpx_p2p_notif_poll, 1);
}

/* A binary built against 0.3 to 0.8 binds tcpx_p2p_notif_poll@TCPX_P2P_0.3:
 * the same skipping, and 0 returned. */
static void test_long_beside_short_v03(void **state)
{
	poll_fn poll03 = (poll_fn)dlvsym(RTLD_DEFAULT, "tcpx_p2p_notif_poll", "TCPX_P2P_0.3");

	(void)state;
	assert_non_null(poll03);
	assert_true((void *)poll03 != (void *)dlsym(RTLD_DEFAULT, "tcpx_p2p_notif_poll"));
	long_beside_short(poll03, 0);
}

/* A target whose config struct ends before notif_max_bytes (built against
 * 0.6) takes notifications up to TCPX_P2P_NOTIF_MAX: a longer one is
 * refused at the sender's notify, so it never waits for a notif_take its
 * caller cannot know. */
static void test_old_caller_default(void **state)
{
	struct tp_pair p;
	tcpx_p2p_config cfg[2];

	(void)state;
	assert_null(getenv("TCPX_P2P_NOTIF_MAX_BYTES"));
	tcpx_p2p_config_init(&cfg[0]);
	tcpx_p2p_config_init(&cfg[1]);
	cfg[1].struct_size = offsetof(tcpx_p2p_config, heartbeat_ms); /* the 0.6 struct */
	assert_int_equal(tp_pair_open2(&p, cfg, 0), 0);
	assert_int_equal(tcpx_p2p_notify(p.c[0], msg, TCPX_P2P_NOTIF_MAX + 1), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "notif_max_bytes"));
	assert_int_equal(tcpx_p2p_notify(p.c[0], msg, TCPX_P2P_NOTIF_MAX), 0);
	/* And the other way round: this side's 0.8 struct takes 64 KiB. */
	assert_int_equal(tcpx_p2p_notify(p.c[1], msg, 2048), 0);
	tp_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_long_round_trip),
		cmocka_unit_test(test_long_beside_short),
		cmocka_unit_test(test_long_beside_short_v03),
		cmocka_unit_test(test_old_caller_default),
	};

	return cmocka_run_group_tests_name("long notifications", tests, NULL, NULL) ? 1 : 0;
}
