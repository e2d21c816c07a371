/* Notification flow control (issue #33): an honest sender posting 1 KiB
 * notifications as fast as notify lets it, to a target that polls them 64
 * at a time, sees EAGAIN while the target has no room (credits) and never
 * fails the connection, however many it sends (100,000, past
 * peer_max_notifs many times over); a second connection between the same
 * sessions completes all its transfers meanwhile (counted).  Every
 * notification arrives once, in order, none of them a failure.
 * Three threads: the sender's, the honest sender's, the target's (main;
 * progress_thread 0 on both sides). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

#ifndef BURST
#define BURST 100000
#endif
#define MSG 1024
#define PIECE (64u << 10)
#define HONEST 16

struct fx {
	struct tp_pair p;           /* s[0] sender, s[1] target */
	tcpx_p2p_conn *other[2];    /* the honest connection */
	unsigned char *src, *dst;
	tcpx_p2p_mr *smr, *dmr;
	int first_eagain;           /* atomic: the sender met the target's bound */
	long eagains;
	int sender_rc, honest_rc, honest_done;
};

static void *sender_main(void *arg)
{
	struct fx *f = arg;
	unsigned char msg[MSG];
	int rc = 0;

	memset(msg, 0xab, sizeof(msg));
	for (uint32_t i = 0; i < BURST && !rc; i++) {
		memcpy(msg, &i, sizeof(i));
		while ((rc = tcpx_p2p_notify(f->p.c[0], msg, sizeof(msg))) == TCPX_P2P_EAGAIN) {
			f->eagains++;
			__atomic_store_n(&f->first_eagain, 1, __ATOMIC_RELEASE);
			rc = tcpx_p2p_progress(f->p.c[0]);
			if (rc)
				break;
		}
	}
	__atomic_store_n(&f->sender_rc, rc, __ATOMIC_RELEASE);
	__atomic_store_n(&f->first_eagain, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *honest_main(void *arg)
{
	struct fx *f = arg;
	int rc = tp_send_counted(f->other[0], f->smr, PIECE, HONEST, &f->honest_done);

	__atomic_store_n(&f->honest_rc, rc, __ATOMIC_RELEASE);
	return NULL;
}

static void test_burst(void **state)
{
	struct fx f = { 0 };
	tcpx_p2p_config cfg[2];
	tcpx_p2p_notif *n = malloc(64 * sizeof(*n));
	tcpx_p2p_xfer *rx[HONEST];
	pthread_t ts, th;
	uint32_t next = 0, idx;
	int k;

	(void)state;
	assert_non_null(n);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_config_init(&cfg[i]), 0);
		cfg[i].progress_thread = 0;
	}
	assert_int_equal(tp_pair_open2(&f.p, cfg, 1), 0);
	assert_int_equal(tp_link(f.p.s[0], f.p.s[1], &f.other[0], &f.other[1]), 0);
	f.src = malloc((size_t)HONEST * PIECE);
	f.dst = calloc(1, (size_t)HONEST * PIECE);
	assert_non_null(f.src);
	assert_non_null(f.dst);
	tp_fill(f.src, (size_t)HONEST * PIECE, 5);
	assert_int_equal(tcpx_p2p_mr_register(f.p.s[0], f.src, (size_t)HONEST * PIECE,
					      TCPX_P2P_MEM_HOST, &f.smr), 0);
	assert_int_equal(tcpx_p2p_mr_register(f.p.s[1], f.dst, (size_t)HONEST * PIECE,
					      TCPX_P2P_MEM_HOST, &f.dmr), 0);
	for (int i = 0; i < HONEST; i++)
		assert_int_equal(tcpx_p2p_recv(f.other[1], f.dmr, (size_t)i * PIECE, PIECE, &rx[i]),
				 0);
	assert_int_equal(pthread_create(&ts, NULL, sender_main, &f), 0);
	assert_int_equal(pthread_create(&th, NULL, honest_main, &f), 0);
	/* The target takes nothing until the sender has met its bound (so
	 * that back-pressure is certain to be exercised), then polls. */
	while (!__atomic_load_n(&f.first_eagain, __ATOMIC_ACQUIRE))
		assert_int_equal(tcpx_p2p_session_progress(f.p.s[1]), 0);
	while (next < BURST || __atomic_load_n(&f.honest_done, __ATOMIC_ACQUIRE) < HONEST) {
		if (__atomic_load_n(&f.honest_rc, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&f.sender_rc, __ATOMIC_ACQUIRE))
			break;
		/* The sender's last notifications go out once it has stopped. */
		assert_int_equal(tcpx_p2p_session_progress(f.p.s[0]), 0);
		assert_int_equal(tcpx_p2p_notif_poll(f.p.s[1], n, 64, &k), 0);
		for (int i = 0; i < k; i++) {
			assert_ptr_equal(n[i].conn, f.p.c[1]);
			assert_int_equal(n[i].len, MSG); /* a failure has length 0 */
			memcpy(&idx, n[i].msg, sizeof(idx));
			assert_int_equal(idx, next);
			next++;
		}
	}
	assert_int_equal(pthread_join(ts, NULL), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(f.sender_rc, 0);
	assert_int_equal(f.honest_rc, 0);
	assert_int_equal(next, BURST);
	assert_true(f.eagains > 0);
	assert_int_equal(tcpx_p2p_progress(f.p.c[1]), 0); /* the target never failed it */
	assert_int_equal(tp_complete_all(rx, HONEST), 0);
	assert_true(tp_check(f.dst, (size_t)HONEST * PIECE, 5) == (size_t)-1);
	printf("# %d notifications, %ld EAGAINs, %d honest transfers\n", BURST, f.eagains,
	       f.honest_done);
	assert_int_equal(tcpx_p2p_mr_deregister(f.smr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(f.dmr), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(f.other[0]), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(f.other[1]), 0);
	tp_pair_close(&f.p);
	free(f.src);
	free(f.dst);
	free(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
