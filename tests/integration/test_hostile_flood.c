/* A peer that floods the control channel with messages carrying no work
 * (heartbeats, empty frames): the target fails that connection (EPROTO)
 * after at most a bounded count of them, while an honest connection beside
 * it, to another session whose thread counts its transfers, completes
 * every transfer with its bytes right.
 * The target (its session driven from the main thread, progress_thread 0)
 * and the hostile peer are two sessions of this process; the hostile
 * messages are written into the peer's control stream directly, as a
 * peer running other code would.  Counted, never timed: the flood is
 * FLOOD heartbeats queued at once, 8,192 to a frame, and the target must
 * fail the connection within the first frame's worth. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "pair.h"

#define FLOOD 100000       /* heartbeats queued by the hostile peer */
#define PER_FRAME 8000     /* at least this many heartbeats share a 64 KiB frame */
#define PIECE (64u << 10)  /* one honest transfer */
#define HONEST 32          /* honest transfers during the flood */

struct fx {
	struct tp_pair p;            /* s[0] target, s[1] hostile peer; c[0] - c[1] */
	tcpx_p2p_session *hs;        /* the honest peer's session */
	tcpx_p2p_conn *ht, *hp;      /* honest conn: target side, peer side */
	unsigned char *tbuf, *hbuf;
	tcpx_p2p_mr *tmr, *hmr;
	pthread_t thr;
	int honest_done;             /* transfers completed (atomic) */
	int honest_rc;
};

static void *honest_main(void *arg)
{
	struct fx *f = arg;
	int rc = tp_send_counted(f->hp, f->hmr, PIECE, HONEST, &f->honest_done);

	__atomic_store_n(&f->honest_rc, rc, __ATOMIC_RELEASE);
	return NULL;
}

static uint64_t hb_recv(tcpx_p2p_conn *c)
{
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };

	assert_int_equal(tcpx_p2p_conn_stats(c, &st), 0);
	return st.heartbeats_recv;
}

static void test_heartbeat_flood(void **state)
{
	struct fx f = { 0 };
	struct tcpx_p2p_conn *h;
	tcpx_p2p_config cfg;
	tcpx_p2p_xfer *rx[HONEST];
	unsigned char *m;
	size_t bytes = (size_t)HONEST * PIECE;
	uint64_t got = 0;
	int rc = 0;

	(void)state;
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.progress_thread = 0;
	assert_int_equal(tp_pair_open(&f.p, &cfg, 1), 0);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &f.hs), 0);
	assert_int_equal(tp_link(f.p.s[0], f.hs, &f.ht, &f.hp), 0);
	f.tbuf = calloc(1, bytes);
	f.hbuf = malloc(bytes);
	assert_non_null(f.tbuf);
	assert_non_null(f.hbuf);
	tp_fill(f.hbuf, bytes, 11);
	assert_int_equal(tcpx_p2p_mr_register(f.p.s[0], f.tbuf, bytes, TCPX_P2P_MEM_HOST, &f.tmr),
			 0);
	assert_int_equal(tcpx_p2p_mr_register(f.hs, f.hbuf, bytes, TCPX_P2P_MEM_HOST, &f.hmr), 0);
	for (int i = 0; i < HONEST; i++)
		assert_int_equal(tcpx_p2p_recv(f.ht, f.tmr, (size_t)i * PIECE, PIECE, &rx[i]), 0);
	assert_int_equal(pthread_create(&f.thr, NULL, honest_main, &f), 0);

	/* The flood, queued at once: the peer's passes frame it out. */
	h = f.p.c[1];
	pthread_mutex_lock(&h->lock);
	for (int i = 0; i < FLOOD; i++)
		assert_int_equal(tp__ctl_msg(h, TP_CTL_HEARTBEAT, 0, &m), 0);
	pthread_mutex_unlock(&h->lock);
	/* Until the target failed the hostile connection, or took the whole
	 * flood without failing it (the fault this test is for). */
	for (long spin = 0; !rc && got < FLOOD; spin++) {
		assert_true(spin < 20000000); /* a hang limit, not a measure */
		(void)tcpx_p2p_progress(f.p.c[1]);
		rc = tcpx_p2p_progress(f.p.c[0]);
		got = hb_recv(f.p.c[0]);
	}
	printf("# the target took %llu of %d heartbeats: %s\n", (unsigned long long)got, FLOOD,
	       rc ? tcpx_p2p_last_error() : "never failed");
	assert_int_equal(rc, TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "carry no work"));
	/* Within the first frame's worth (the bound is 1,024 at once, then one
	 * per ms: a frame is parsed in far less than 7 s). */
	assert_true(got < PER_FRAME);

	/* The honest connection went on meanwhile and goes on to the end. */
	while (__atomic_load_n(&f.honest_done, __ATOMIC_ACQUIRE) < HONEST &&
	       !__atomic_load_n(&f.honest_rc, __ATOMIC_ACQUIRE))
		(void)tcpx_p2p_session_progress(f.p.s[0]);
	assert_int_equal(pthread_join(f.thr, NULL), 0);
	assert_int_equal(f.honest_rc, 0);
	assert_int_equal(tp_complete_all(rx, HONEST), 0);
	assert_true(tp_check(f.tbuf, bytes, 11) == (size_t)-1);

	assert_int_equal(tcpx_p2p_conn_destroy(f.ht), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(f.hp), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(f.tmr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(f.hmr), 0);
	tp_pair_close(&f.p);
	assert_int_equal(tcpx_p2p_session_destroy(f.hs), 0);
	free(f.tbuf);
	free(f.hbuf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heartbeat_flood),
	};

	return cmocka_run_group_tests_name("control floods", tests, NULL, NULL) ? 1 : 0;
}
