/* A peer that exceeds what it may make this side hold fails its own
 * connection with a clear error, and the target's other connection goes
 * on; a target that only polls notifications hears of the failure there;
 * an export revoked with tcpx_p2p_mr_unexport refuses what comes after.
 * Two sessions of this process over the emulator: s[0] the peer, s[1] the
 * target with small peer_max_* bounds. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

#define LEN (256u << 10)

struct fx {
	struct tp_pair p;
	tcpx_p2p_conn *other[2]; /* a second connection between the sessions */
	unsigned char *a, *b;
	tcpx_p2p_mr *amr, *bmr;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tcpx_p2p_config cfg[2];

	assert_non_null(f);
	for (int i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_config_init(&cfg[i]), 0);
	cfg[1].peer_max_items = 16;
	cfg[1].peer_max_notifs = 8;
	assert_int_equal(tp_pair_open2(&f->p, cfg, 1), 0);
	assert_int_equal(tp_link(f->p.s[0], f->p.s[1], &f->other[0], &f->other[1]), 0);
	f->a = malloc(LEN);
	f->b = malloc(LEN);
	assert_non_null(f->a);
	assert_non_null(f->b);
	tp_fill(f->a, LEN, 3);
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[0], f->a, LEN, TCPX_P2P_MEM_HOST, &f->amr), 0);
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[1], f->b, LEN, TCPX_P2P_MEM_HOST, &f->bmr), 0);
	*state = f;
	return 0;
}

/* The peer ignores its notification credits (a test build's
 * TCPX_P2P_TEST_IGNORE_CREDITS, read when its session is made). */
static int setup_ignoring(void **state)
{
	int rc;

	setenv("TCPX_P2P_TEST_IGNORE_CREDITS", "1", 1);
	rc = setup(state);
	unsetenv("TCPX_P2P_TEST_IGNORE_CREDITS");
	return rc;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_conn_destroy(f->other[i]), 0);
		/* a failed connection's transfers hold their regions until it goes */
		if (f->p.c[i])
			assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[i]), 0);
		f->p.c[i] = NULL;
	}
	assert_int_equal(tcpx_p2p_mr_deregister(f->amr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(f->bmr), 0);
	tp_pair_close(&f->p);
	free(f->a);
	free(f->b);
	free(f);
	return 0;
}

/* The other connection still moves verified bytes. */
static void assert_other_works(struct fx *f)
{
	tcpx_p2p_xfer *x[2];

	memset(f->b, 0, LEN);
	assert_int_equal(tcpx_p2p_send(f->other[0], f->amr, 0, LEN, &x[0]), 0);
	assert_int_equal(tcpx_p2p_recv(f->other[1], f->bmr, 0, LEN, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_true(tp_check(f->b, LEN, 3) == (size_t)-1);
}

/* Drive the target's connection until it fails (its error), or give up (0). */
static int target_fails(struct fx *f)
{
	int rc = 0;

	for (int spin = 0; spin < 100000 && !rc; spin++) {
		tcpx_p2p_progress(f->p.c[0]);
		rc = tcpx_p2p_progress(f->p.c[1]);
	}
	return rc;
}

static int write1(struct fx *f, tcpx_p2p_rmr *rm, size_t len);

/* An honest sender: the ninth notification the target has not taken
 * waits (EAGAIN) instead of failing the connection, and goes once the
 * target polled. */
static void test_notifs_credits(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_notif *n = malloc(16 * sizeof(*n));
	int got = 0, k, rc = TCPX_P2P_EAGAIN;

	tcpx_p2p_rdesc d;
	tcpx_p2p_rmr *rm;
	tcpx_p2p_seg l = { f->amr, 0, 4096 };
	tcpx_p2p_rseg r;
	tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .notif = "layer", .notif_len = 5 };
	tcpx_p2p_xfer *x;

	assert_non_null(n);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], f->bmr, 0, LEN, TCPX_P2P_ACCESS_WRITE, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &rm), 0);
	r = (tcpx_p2p_rseg){ rm, 0, 4096 };
	for (int i = 0; i < 8; i++)
		assert_int_equal(tcpx_p2p_notify(f->p.c[0], "layer", 5), 0);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "layer", 5), TCPX_P2P_EAGAIN);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer_max_notifs"));
	/* A write that carries one waits too (nothing sent); one without goes. */
	assert_int_equal(tcpx_p2p_write(f->p.c[0], &l, 1, &r, 1, &pr, &x), TCPX_P2P_EAGAIN);
	assert_int_equal(write1(f, rm, 4096), 0);
	tcpx_p2p_rmr_release(rm);
	for (int spin = 0; spin < 100000 && rc == TCPX_P2P_EAGAIN; spin++) {
		assert_int_equal(tcpx_p2p_progress(f->p.c[1]), 0);
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], n, 16, &k), 0);
		got += k;
		assert_int_equal(tcpx_p2p_progress(f->p.c[0]), 0);
		rc = tcpx_p2p_notify(f->p.c[0], "layer", 5);
	}
	assert_int_equal(rc, 0);
	for (int spin = 0; spin < 100000 && got < 9; spin++) {
		assert_int_equal(tcpx_p2p_progress(f->p.c[0]), 0);
		assert_int_equal(tcpx_p2p_progress(f->p.c[1]), 0);
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], n, 16, &k), 0);
		for (int i = 0; i < k; i++)
			assert_int_equal(n[i].len, 5); /* no failure among them */
		got += k;
	}
	assert_int_equal(got, 9);
	free(n);
	assert_other_works(f);
}

/* A peer that ignores its credits and sends notifications the target
 * never takes: the ninth fails the connection; notif_poll then gives those
 * delivered before (the others waited, and went with the connection) and
 * a 0-byte notification naming it. */
static void test_notifs_untaken(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_notif *n = malloc(16 * sizeof(*n));
	int got = 0, k, events = 0;

	assert_non_null(n);
	for (int i = 0; i < 8; i++)
		assert_int_equal(tcpx_p2p_notify(f->p.c[0], "layer", 5), 0);
	if (tcpx_p2p_notify(f->p.c[0], "layer", 5) == TCPX_P2P_EAGAIN) {
		free(n);
		skip(); /* a library built without TCPX_P2P_TEST_HOOKS keeps to the credits */
	}
	assert_int_equal(target_fails(f), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer_max_notifs"));
	assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], n, 16, &k), 0);
	for (int i = 0; i < k; i++) {
		assert_ptr_equal(n[i].conn, f->p.c[1]);
		if (n[i].len == 0)
			events++;
		else
			got++;
	}
	assert_in_range(got, 1, 8);
	assert_int_equal(events, 1);
	assert_int_equal(n[k - 1].len, 0); /* after what came before it */
	assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], n, 16, &k), 0);
	assert_int_equal(k, 0); /* told once */
	free(n);
	assert_other_works(f);
}

/* Sends nobody receives: the announcements queue up to peer_max_items. */
static void test_sends_unmatched(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_xfer *x[17];

	for (int i = 0; i < 17; i++)
		assert_int_equal(tcpx_p2p_send(f->p.c[0], f->amr, 0, 64, &x[i]), 0);
	assert_int_equal(target_fails(f), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer_max_items"));
	/* The peer's sends fail when it lets its connection go. */
	assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[0]), 0);
	f->p.c[0] = NULL;
	for (int i = 0; i < 17; i++)
		assert_int_equal(tcpx_p2p_xfer_release(x[i]), 0);
	assert_other_works(f);
}

static int write1(struct fx *f, tcpx_p2p_rmr *rm, size_t len)
{
	tcpx_p2p_seg l = { f->amr, 0, len };
	tcpx_p2p_rseg r = { rm, 0, len };
	tcpx_p2p_xfer *x[1];
	int rc, done = 0;

	assert_int_equal(tcpx_p2p_write(f->p.c[0], &l, 1, &r, 1, NULL, &x[0]), 0);
	for (int spin = 0; spin < 100000 && !done; spin++) {
		tcpx_p2p_progress(f->p.c[1]);
		rc = tcpx_p2p_test(x[0], &done);
		if (rc)
			break;
	}
	assert_true(done || rc);
	tcpx_p2p_xfer_release(x[0]);
	return rc;
}

static void test_unexport(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_rdesc d, keep, forged;
	tcpx_p2p_rmr *rm, *rk;

	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], f->bmr, 0, LEN, TCPX_P2P_ACCESS_WRITE, &d),
			 0);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], f->bmr, 0, LEN, TCPX_P2P_ACCESS_WRITE,
					    &keep), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &rm), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &keep, &rk), 0);
	memset(f->b, 0, LEN);
	assert_int_equal(write1(f, rm, LEN), 0);
	assert_true(tp_check(f->b, LEN, 3) == (size_t)-1);

	/* Not an export of this conn: another conn's, a forged key. */
	assert_int_equal(tcpx_p2p_mr_unexport(f->other[1], &d), TCPX_P2P_EINVAL);
	forged = d;
	forged.bytes[30] ^= 1;
	assert_int_equal(tcpx_p2p_mr_unexport(f->p.c[1], &forged), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_unexport(NULL, &d), TCPX_P2P_EINVAL);

	assert_int_equal(tcpx_p2p_mr_unexport(f->p.c[1], &d), 0);
	memset(f->b, 0, LEN);
	assert_int_equal(write1(f, rm, LEN), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "no export of the target allows it"));
	for (size_t i = 0; i < LEN; i++)
		assert_int_equal(f->b[i], 0);
	/* Many uses of a revoked export are not key guesses: the conn lives. */
	for (int i = 0; i < 12; i++)
		assert_int_equal(write1(f, rm, 64), TCPX_P2P_EINVAL);
	/* The region's other export still works. */
	assert_int_equal(write1(f, rk, LEN), 0);
	assert_true(tp_check(f->b, LEN, 3) == (size_t)-1);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	assert_int_equal(tcpx_p2p_rmr_release(rk), 0);
}

struct poller {
	tcpx_p2p_session *s;
	int stop;
	int taken;
};

static void *poll_loop(void *arg)
{
	struct poller *p = arg;
	tcpx_p2p_notif *n = malloc(4 * sizeof(*n));
	int k;

	while (n && !__atomic_load_n(&p->stop, __ATOMIC_RELAXED))
		if (tcpx_p2p_notif_poll(p->s, n, 4, &k) == 0)
			p->taken += k;
	free(n);
	return NULL;
}

/* notif_poll may run in any thread: one that takes notifications while
 * another thread destroys the connection they came on takes each at most
 * once and never one of a connection already gone. */
static void test_poll_while_destroying(void **state)
{
	struct fx *f = *state;
	struct poller p = { f->p.s[1], 0, 0 };
	pthread_t t;

	for (int i = 0; i < 6; i++)
		assert_int_equal(tcpx_p2p_notify(f->p.c[0], "n", 1), 0);
	for (int spin = 0; spin < 2000; spin++) { /* delivered, not taken */
		tcpx_p2p_progress(f->p.c[0]);
		tcpx_p2p_progress(f->p.c[1]);
	}
	assert_int_equal(pthread_create(&t, NULL, poll_loop, &p), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[1]), 0);
	f->p.c[1] = NULL;
	__atomic_store_n(&p.stop, 1, __ATOMIC_RELAXED);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_in_range(p.taken, 0, 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_notifs_credits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_notifs_untaken, setup_ignoring, teardown),
		cmocka_unit_test_setup_teardown(test_sends_unmatched, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unexport, setup, teardown),
		cmocka_unit_test_setup_teardown(test_poll_while_destroying, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
