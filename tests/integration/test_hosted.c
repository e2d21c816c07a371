/* What a peer makes a target host (docs/reliability.md, "Stalled incoming
 * transfers"): a peer announces a WRITE into an export of the target and
 * sends none of its bytes, while its keepalive thread heartbeats.  The
 * target counts it stalled (the stats' in_stalls), can put a deadline on
 * it (tcpx_p2p_conn_in_deadline) or fail it by deregistering the region
 * (tcpx_p2p_mr_deregister_ex), and either way the writer is told at once
 * by the close: neither side has dead_after_ms, so nothing else could end
 * its connection.  The stalled WRITE is written into the writer's control
 * stream directly, as a peer running other code would.  Every wait is for
 * an event, bounded only against hangs. */
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

#define LEN (256u << 10)   /* the export, and the stalled write's bytes */
/* A hang limit, not a measure (TP_TEST_HANG_MS: shorter, to see a mutant fail). */
static int hang_ms(void)
{
	const char *e = getenv("TP_TEST_HANG_MS");

	return e && atoi(e) > 0 ? atoi(e) : 120000;
}

struct fx {
	struct tp_pair p;  /* s[0] target, s[1] writer; c[0] - c[1] */
	unsigned char *tbuf, *wbuf;
	tcpx_p2p_mr *tmr, *wmr;
	tcpx_p2p_rdesc desc;
};

static void fx_open(struct fx *f)
{
	tcpx_p2p_config cfg;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.progress_thread = 0;
	cfg.dead_after_ms = 0; /* only the close can tell the writer */
	cfg.stall_ms = 20;
	assert_int_equal(tp_pair_open(&f->p, &cfg, 1), 0);
	f->tbuf = calloc(1, LEN);
	f->wbuf = malloc(LEN);
	assert_non_null(f->tbuf);
	assert_non_null(f->wbuf);
	tp_fill(f->wbuf, LEN, 5);
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[0], f->tbuf, LEN, TCPX_P2P_MEM_HOST, &f->tmr),
			 0);
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[1], f->wbuf, LEN, TCPX_P2P_MEM_HOST, &f->wmr),
			 0);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[0], f->tmr, 0, LEN, TCPX_P2P_ACCESS_WRITE,
					    &f->desc), 0);
}

static void fx_close(struct fx *f)
{
	if (f->tmr)
		assert_int_equal(tcpx_p2p_mr_deregister(f->tmr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(f->wmr), 0);
	tp_pair_close(&f->p);
	free(f->tbuf);
	free(f->wbuf);
}

/* The writer announces a WRITE of the whole export and sends nothing. */
static void stalled_write(struct fx *f)
{
	tcpx_p2p_conn *c = f->p.c[1];
	const unsigned char *d = f->desc.bytes;
	unsigned char *m;

	pthread_mutex_lock(&c->lock);
	assert_int_equal(tp__ctl_msg(c, TP_CTL_WRITE, 24 + TP_WSEG_BYTES, &m), 0);
	tp_put64(m, 1ull << 40); /* an id the writer's library never gave */
	tp_put64(m + 8, LEN);
	tp_put32(m + 16, 1);
	tp_put32(m + 20, 0);
	tp_wseg_put(m + 24, tp_get32(d + 8), d + 24, 0, LEN);
	pthread_mutex_unlock(&c->lock);
}

static tcpx_p2p_stats stats(tcpx_p2p_conn *c)
{
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };

	assert_int_equal(tcpx_p2p_conn_stats(c, &st), 0);
	return st;
}

static bool hung(tp_deadline d)
{
	return tp__deadline_passed(d);
}

/* Both sides driven until the target's conn and the writer's have failed
 * (their errors back). */
static void until_both_failed(struct fx *f, int *target, int *writer)
{
	tp_deadline d = tp__deadline_ms(hang_ms());

	*target = *writer = 0;
	while (!*target || !*writer) {
		assert_false(hung(d));
		if (!*writer)
			*writer = tcpx_p2p_progress(f->p.c[1]);
		if (!*target)
			*target = tcpx_p2p_progress(f->p.c[0]);
	}
}

/* The stalled write is counted as the peer's, not the target's own; the
 * region it holds stays busy for a plain deregistration, and
 * mr_deregister_ex fails it: the writer learns at once (ECLOSED), and the
 * region is let go once the close has drained. */
static void test_dereg_fails_stalled_write(void **state)
{
	tp_deadline d = tp__deadline_ms(hang_ms());
	struct fx f = { 0 };
	tcpx_p2p_stats st;
	int target, writer, rc;

	(void)state;
	fx_open(&f);
	stalled_write(&f);
	do {
		assert_false(hung(d));
		assert_int_equal(tcpx_p2p_progress(f.p.c[1]), 0);
		assert_int_equal(tcpx_p2p_progress(f.p.c[0]), 0);
		st = stats(f.p.c[0]);
	} while (!st.in_stalls);
	assert_int_equal(st.stalls, 0); /* the target's own: none */
	assert_int_equal(tcpx_p2p_mr_deregister(f.tmr), TCPX_P2P_EBUSY);
	assert_int_equal(tcpx_p2p_mr_deregister_ex(f.tmr, 2), TCPX_P2P_EINVAL);

	rc = tcpx_p2p_mr_deregister_ex(f.tmr, TCPX_P2P_DEREG_FAIL_INCOMING);
	assert_true(rc == TCPX_P2P_EAGAIN || rc == 0);
	until_both_failed(&f, &target, &writer);
	assert_int_equal(target, TCPX_P2P_ECANCELED);
	assert_int_equal(writer, TCPX_P2P_ECLOSED);
	while (rc) {
		assert_false(hung(d));
		(void)tcpx_p2p_progress(f.p.c[1]);
		(void)tcpx_p2p_progress(f.p.c[0]);
		rc = tcpx_p2p_mr_deregister_ex(f.tmr, TCPX_P2P_DEREG_FAIL_INCOMING);
		assert_true(rc == TCPX_P2P_EAGAIN || rc == 0);
	}
	f.tmr = NULL;
	/* Nothing of the writer's landed. */
	for (size_t i = 0; i < LEN; i++)
		assert_int_equal(f.tbuf[i], 0);
	fx_close(&f);
}

/* A deadline on what the target hosts fails the stalled write's
 * connection (ETIMEDOUT), the writer is told (ECLOSED), and the region is
 * free again after the close, for a plain deregistration. */
static void test_in_deadline(void **state)
{
	tp_deadline d = tp__deadline_ms(hang_ms());
	struct fx f = { 0 };
	int target, writer;

	(void)state;
	fx_open(&f);
	assert_int_equal(tcpx_p2p_conn_in_deadline(NULL, 1), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_conn_in_deadline(f.p.c[0], -1), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_conn_in_deadline(f.p.c[0], 100), 0);
	stalled_write(&f);
	until_both_failed(&f, &target, &writer);
	assert_int_equal(target, TCPX_P2P_ETIMEDOUT);
	assert_int_equal(writer, TCPX_P2P_ECLOSED);
	while (tcpx_p2p_mr_deregister(f.tmr) == TCPX_P2P_EBUSY) {
		assert_false(hung(d));
		(void)tcpx_p2p_progress(f.p.c[1]);
		(void)tcpx_p2p_progress(f.p.c[0]);
	}
	f.tmr = NULL;
	assert_int_equal(tcpx_p2p_conn_in_deadline(f.p.c[0], 100), TCPX_P2P_ECLOSED);
	fx_close(&f);
}

/* An honest write under a generous deadline lands whole, the connection
 * goes on, and deregister_ex has nothing to fail. */
static void test_in_deadline_honest(void **state)
{
	struct fx f = { 0 };
	tcpx_p2p_rmr *rm;
	tcpx_p2p_xfer *x;
	tcpx_p2p_seg l;
	tcpx_p2p_rseg r;

	(void)state;
	fx_open(&f);
	assert_int_equal(tcpx_p2p_conn_in_deadline(f.p.c[0], 600000), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f.p.c[1], &f.desc, &rm), 0);
	l = (tcpx_p2p_seg){ f.wmr, 0, LEN };
	r = (tcpx_p2p_rseg){ rm, 0, LEN };
	for (int i = 0; i < 4; i++) {
		int done = 0;

		assert_int_equal(tcpx_p2p_write(f.p.c[1], &l, 1, &r, 1, NULL, &x), 0);
		while (!done) {
			assert_int_equal(tcpx_p2p_progress(f.p.c[0]), 0);
			assert_int_equal(tcpx_p2p_test(x, &done), 0);
		}
		assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	}
	assert_true(tp_check(f.tbuf, LEN, 5) == (size_t)-1);
	assert_int_equal(tcpx_p2p_progress(f.p.c[0]), 0);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	assert_int_equal(tcpx_p2p_mr_deregister_ex(f.tmr, TCPX_P2P_DEREG_FAIL_INCOMING), 0);
	f.tmr = NULL;
	assert_int_equal(tcpx_p2p_progress(f.p.c[0]), 0);
	assert_int_equal(tcpx_p2p_progress(f.p.c[1]), 0);
	fx_close(&f);
}

/* The listing of what the peer makes the target host: nothing, then the
 * stalled write as the peer numbered it, with its region, stalled; cut
 * short with EAGAIN; empty again once the failed connection let go. */
static void test_listing(void **state)
{
	tp_deadline d = tp__deadline_ms(hang_ms());
	tcpx_p2p_hosted h[2];
	struct fx f = { 0 };
	int n = -1, target, writer;

	(void)state;
	fx_open(&f);
	assert_int_equal(tcpx_p2p_conn_hosted(NULL, h, 2, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_conn_hosted(f.p.c[0], h, 2, NULL), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_conn_hosted(f.p.c[0], h, -1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_conn_hosted(f.p.c[0], NULL, 1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_conn_hosted(f.p.c[0], NULL, 0, &n), 0);
	assert_int_equal(n, 0);

	stalled_write(&f);
	do {
		assert_false(hung(d));
		assert_int_equal(tcpx_p2p_progress(f.p.c[1]), 0);
		assert_int_equal(tcpx_p2p_progress(f.p.c[0]), 0);
		assert_int_equal(tcpx_p2p_conn_hosted(f.p.c[0], h, 2, &n), 0);
	} while (n < 1 || !h[0].stalled);
	assert_int_equal(n, 1);
	assert_true(h[0].id == 1ull << 40);
	assert_int_equal(h[0].op, TCPX_P2P_HOSTED_WRITE);
	assert_int_equal(h[0].len, LEN);
	assert_int_equal(h[0].done, 0); /* the writer sent none of it */
	assert_true(h[0].idle_ms >= 20); /* stalled: nothing for stall_ms */
	assert_true(h[0].age_ms >= h[0].idle_ms);
	assert_int_equal(h[0].nregions, 1);
	assert_ptr_equal(h[0].region[0], f.tmr);
	assert_null(h[0].region[1]);
	/* No room: counted, not written. */
	assert_int_equal(tcpx_p2p_conn_hosted(f.p.c[0], NULL, 0, &n), TCPX_P2P_EAGAIN);
	assert_int_equal(n, 1);
	/* The writer hosts nothing. */
	assert_int_equal(tcpx_p2p_conn_hosted(f.p.c[1], h, 2, &n), 0);
	assert_int_equal(n, 0);

	assert_int_equal(tcpx_p2p_conn_in_deadline(f.p.c[0], 1), 0);
	until_both_failed(&f, &target, &writer);
	assert_int_equal(target, TCPX_P2P_ETIMEDOUT);
	do { /* listed until the close let go of it */
		assert_false(hung(d));
		(void)tcpx_p2p_progress(f.p.c[1]);
		(void)tcpx_p2p_progress(f.p.c[0]);
		assert_true(tcpx_p2p_conn_hosted(f.p.c[0], h, 2, &n) == 0);
	} while (n);
	assert_int_equal(tcpx_p2p_mr_deregister(f.tmr), 0);
	f.tmr = NULL;
	fx_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dereg_fails_stalled_write),
		cmocka_unit_test(test_in_deadline),
		cmocka_unit_test(test_in_deadline_honest),
		cmocka_unit_test(test_listing),
	};

	return cmocka_run_group_tests_name("hosted transfers", tests, NULL, NULL) ? 1 : 0;
}
