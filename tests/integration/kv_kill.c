/* test_kv: the target goes away mid-write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv.h"

/* ---- case 9: the target goes away mid-write -------------------------------- */

/* One try: a 64 MiB write and a notification, under way on both sides, then
 * the target's conn destroyed.  Returns the write's result.  0 means it had
 * landed before the kill — with progress threads the whole write can get
 * through before the destroy on a loaded machine — so its bytes are checked
 * and nothing else: the kill was not exercised. */
static int kill_mid_write(struct fx *f)
{
	enum { NSEG = 16, SEG = 4u << 20 };
	tcpx_p2p_seg l = { 0 };
	tcpx_p2p_rseg r[NSEG];
	tcpx_p2p_xfer *x, *x2 = NULL;
	int i, rc;
	struct kv k;

	kv_open(f, &k, NSEG, NSEG, SEG, TCPX_P2P_ACCESS_WRITE, 101);
	l = (tcpx_p2p_seg){ k.loc->mr, 0, (size_t)NSEG * SEG };
	for (i = 0; i < NSEG; i++)
		r[i] = (tcpx_p2p_rseg){ k.rm, (size_t)(NSEG - 1 - i) * SEG, SEG };
	assert_int_equal(post_write(f->p.c[0], &l, 1, r, NSEG, "never", 6, &x), 0);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "never either", 13), 0);
	/* get it going on both sides */
	for (i = 0; i < 4; i++)
		drive(f);
	assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[1]), 0);
	f->p.c[1] = NULL;
	/* The wait's deadline only stops a hang: a failure other than
	 * ETIMEDOUT shows the loss was noticed, not waited out. */
	rc = tcpx_p2p_wait(x, TP_TEST_TIMEOUT_MS);
	print_message("  initiator's write: %s (%s)\n", tcpx_p2p_strerror(rc),
		      rc ? tcpx_p2p_last_error() : "");
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	if (!rc) {
		for (i = 0; i < NSEG; i++)
			expect_copy(k.pool, k.eo + (size_t)(NSEG - 1 - i) * SEG, k.loc,
				    (size_t)i * SEG, SEG);
		verify(k.pool, "a write that succeeded before its target went away");
		kv_close(&k);
		return 0;
	}
	assert_true(rc != TCPX_P2P_ETIMEDOUT);
	/* Later posts report the connection's failure at once. */
	assert_int_equal(post_write(f->p.c[0], &l, 1, r, NSEG, NULL, 0, &x2), rc);
	assert_null(x2);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "x", 1), rc);
	kv_close(&k);
	/* The pool's region must be free to go now its conn is gone (teardown
	 * deregisters it: nothing may hold it in flight). */
	return rc;
}

void test_target_killed(void **state)
{
	int tries = 0, rc;

	while (!(rc = kill_mid_write(*state)) && ++tries < 5) {
		print_message("  the write landed before the kill (try %d): again on a new pair\n",
			      tries);
		assert_int_equal(teardown(state), 0);
		assert_int_equal(setup(state), 0);
	}
	if (!rc)
		fail_msg("the write landed before its target went away in all %d tries: the kill "
			 "was never exercised", tries);
}
