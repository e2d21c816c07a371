/* A connection this side fails for a cause of the peer's tells the peer
 * (docs/reliability.md, "Which failures tell the peer"): its CLOSE goes
 * out, best effort, and the peer's pending transfers fail at once with
 * ECLOSED, not after the peer's dead_after_ms, which both cases set to
 * ten minutes: waiting for the peer's receive to end is the test.  This
 * side waits for no answer: its conn_destroy closes the comms at once
 * (counted unclean, never left on the closing list).
 *   protocol   the peer writes a message of an unknown type into its own
 *              control stream, as a buggy peer would: this side fails
 *              with EPROTO
 *   liveness   the peer sends no heartbeats and this side's dead_after_ms
 *              is short: this side presumes it dead (ECLOSED)
 * Every wait is for an event, bounded only against hangs. */
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
#include "util/time.h"

#define LEN (64u << 10)
#define PEER_DEAD_AFTER_MS 600000

/* A hang limit, not a measure (TP_TEST_HANG_MS: shorter, to see a mutant fail). */
static int hang_ms(void)
{
	const char *e = getenv("TP_TEST_HANG_MS");

	return e && atoi(e) > 0 ? atoi(e) : 120000;
}

struct fx {
	struct tp_pair p;  /* s[0] fails the connection; s[1] the peer it tells */
	unsigned char *buf;
	tcpx_p2p_mr *mr;
	tcpx_p2p_xfer *rx; /* the peer's receive, pending */
};

static void fx_open(struct fx *f, const tcpx_p2p_config cfg[2])
{
	int done = 1;

	assert_int_equal(tp_pair_open2(&f->p, cfg, 1), 0);
	f->buf = calloc(1, LEN);
	assert_non_null(f->buf);
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[1], f->buf, LEN, TCPX_P2P_MEM_HOST, &f->mr),
			 0);
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr, 0, LEN, &f->rx), 0);
	assert_int_equal(tcpx_p2p_test(f->rx, &done), 0);
	assert_int_equal(done, 0);
}

static void configs(tcpx_p2p_config cfg[2])
{
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_config_init(&cfg[i]), 0);
		cfg[i].progress_thread = 0;
		cfg[i].dead_after_ms = PEER_DEAD_AFTER_MS;
	}
}

/* Both sides driven until the peer's receive has ended; then its error,
 * both connections' errors, and this side's destroy that waits for
 * nothing. */
static void until_told(struct fx *f, int expect0)
{
	tp_deadline d = tp__deadline_ms(hang_ms());
	tcpx_p2p_session_info info = { .struct_size = sizeof(info) };
	int done = 0, rc = 0;

	/* test returns the error of a transfer that failed */
	while (!done && !rc) {
		assert_false(tp__deadline_passed(d));
		(void)tcpx_p2p_progress(f->p.c[0]);
		rc = tcpx_p2p_test(f->rx, &done);
	}
	assert_int_equal(rc, TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_wait(f->rx, 0), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(f->rx), 0);
	assert_int_equal(tcpx_p2p_progress(f->p.c[0]), expect0);
	assert_int_equal(tcpx_p2p_progress(f->p.c[1]), TCPX_P2P_ECLOSED);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer closed"));
	/* Nothing of the peer's landed. */
	for (size_t i = 0; i < LEN; i++)
		assert_int_equal(f->buf[i], 0);

	assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[0]), 0);
	f->p.c[0] = NULL;
	assert_int_equal(tcpx_p2p_session_query(f->p.s[0], &info), 0);
	assert_int_equal(info.conns_closing, 0);
	assert_int_equal(info.unclean_closes, 1);
	/* The peer's failed receive holds its region until its conn goes. */
	assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[1]), 0);
	f->p.c[1] = NULL;
	assert_int_equal(tcpx_p2p_mr_deregister(f->mr), 0);
	tp_pair_close(&f->p);
	free(f->buf);
}

/* The peer breaks the protocol: a message of a type that does not exist. */
static void test_protocol_error(void **state)
{
	tcpx_p2p_config cfg[2];
	struct fx f = { 0 };
	tcpx_p2p_conn *c;
	unsigned char *m;

	(void)state;
	configs(cfg);
	fx_open(&f, cfg);
	c = f.p.c[1];
	pthread_mutex_lock(&c->lock);
	assert_int_equal(tp__ctl_msg(c, (enum tp_ctl_type)99, 0, &m), 0);
	pthread_mutex_unlock(&c->lock);
	until_told(&f, TCPX_P2P_EPROTO);
}

/* The peer sends nothing (no heartbeats, no transfer announced): this
 * side's short dead_after_ms presumes it dead; the peer, alive, is told. */
static void test_presumed_dead(void **state)
{
	tcpx_p2p_config cfg[2];
	struct fx f = { 0 };

	(void)state;
	configs(cfg);
	cfg[0].heartbeat_ms = 20;
	cfg[0].dead_after_ms = 200;
	cfg[1].heartbeat_ms = 0;
	fx_open(&f, cfg);
	until_told(&f, TCPX_P2P_ECLOSED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_protocol_error),
		cmocka_unit_test(test_presumed_dead),
	};

	return cmocka_run_group_tests_name("failures told to the peer", tests, NULL, NULL) ? 1 : 0;
}
