/* test_kv: the first vectored chunks of fresh connections, left alone
 * between the passes that carry them.
 *
 * The first vectored chunk a comm sends allocates its staging and gathers
 * into it at once; the plugin copies the slot out in a later pass.  A
 * clear of new staging that nothing orders with the gather could run in
 * between and send zeros, with a correct notification.  Here each pass is
 * followed by a pause much longer than the GPU needs for anything queued,
 * so whatever is queued runs in between; test_kv_cuda.delayed_clear
 * (TCPX_P2P_TEST_CLEAR_DELAY_US, test-hook builds) also holds every clear
 * of new device memory back 50 ms.  A WRITE with a notification (the
 * initiator's gather; the target's receive staging), then a READ (the
 * target's gather into its own send staging): the bytes are checked where
 * they land, the WRITE's as soon as its notification is taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kv.h"

#define PAUSE_US 100000 /* 2 x the delayed clear */

static void pause_us(long us)
{
	struct timespec t = { .tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000 };

	nanosleep(&t, NULL);
}

void test_first_chunks_unattended(void **state)
{
	struct fx *f = *state;
	enum { NB = 64, NL = 32, B = 24 };
	static const char note[] = "first write";
	size_t lid[B], rid[B], i;
	tcpx_p2p_seg l;
	tcpx_p2p_rseg r[B];
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	tcpx_p2p_xfer *x;
	struct region *rb;
	struct kv k;

	assert_non_null(nt);
	f->pause_us = PAUSE_US; /* after every pass of complete() and notif_take() */
	kv_open(f, &k, NB, NL, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 91);
	rb = region_new(f, f->p.s[0], (size_t)B * BLK + 200, 92);

	/* WRITE: checked when its notification is taken, before the
	 * initiator's completion. */
	pick(f, lid, B, NL, 1);
	pick(f, rid, B, NB, 1);
	assert_int_equal(kv_write(f, &k, lid, rid, B, note, sizeof(note), &x), 0);
	pause_us(3 * PAUSE_US);
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], note, sizeof(note));
	verify(k.pool, "pool at the first write's notification");
	complete1_ok(f, x);
	verify(k.pool, "pool after the first write");

	/* READ of other blocks, scattered on the target, into one range. */
	pick(f, rid, B, NB, 1);
	for (i = 0; i < B; i++) {
		r[i] = (tcpx_p2p_rseg){ k.rm, rid[i] * BLK, BLK };
		expect_copy(rb, 100 + i * BLK, k.pool, k.eo + rid[i] * BLK, BLK);
	}
	l = (tcpx_p2p_seg){ rb->mr, 100, (size_t)B * BLK };
	assert_int_equal(tcpx_p2p_read(f->p.c[0], &l, 1, r, B, NULL, &x), 0);
	pause_us(3 * PAUSE_US);
	complete1_ok(f, x);
	verify(rb, "the first read");
	verify(k.pool, "pool after the first read");
	kv_close(&k);
	free(nt);
}
