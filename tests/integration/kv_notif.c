/* test_kv: notifications, with a write and alone, and their order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv.h"

/* ---- case 4: WRITE with a notification ----------------------------------- */

void test_write_notif(void **state)
{
	struct fx *f = *state;
	enum { NB = 192, NL = 128, B = 64 };
	static unsigned char big[TCPX_P2P_NOTIF_MAX];
	static const char text[] = "round 2: blocks written";
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	size_t lid[B], rid[B], i, l0, r0;
	struct kv k;
	int round;

	assert_non_null(nt);
	kv_open(f, &k, NB, NL, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 41);
	tp_fill(big, sizeof(big), 42);
	for (round = 0; round < 3; round++) {
		tcpx_p2p_seg l[B];
		tcpx_p2p_rseg r[B];
		size_t nl = B, nr = B;
		const void *msg = round == 0 ? "\x5a" : round == 1 ? (const void *)big : text;
		size_t mlen = round == 0 ? 1 : round == 1 ? sizeof(big) : sizeof(text);
		tcpx_p2p_xfer *x;

		pick(f, lid, B, NL, 0);
		pick(f, rid, B, NB, 1);
		l0 = below(&f->rng, NL - B + 1);
		r0 = below(&f->rng, NB - B + 1);
		for (i = 0; i < B; i++) {
			/* round 1: one local segment, remote blocks scattered;
			 * round 2: local blocks scattered, one remote segment */
			if (round == 1)
				lid[i] = l0 + i;
			if (round == 2)
				rid[i] = r0 + i;
			l[i] = (tcpx_p2p_seg){ k.loc->mr, lid[i] * BLK, BLK };
			r[i] = (tcpx_p2p_rseg){ k.rm, rid[i] * BLK, BLK };
			expect_copy(k.pool, k.eo + rid[i] * BLK, k.loc, lid[i] * BLK, BLK);
		}
		if (round == 1) {
			l[0] = (tcpx_p2p_seg){ k.loc->mr, l0 * BLK, (size_t)B * BLK };
			nl = 1;
		}
		if (round == 2) {
			r[0] = (tcpx_p2p_rseg){ k.rm, r0 * BLK, (size_t)B * BLK };
			nr = 1;
		}
		assert_int_equal(post_write(f->p.c[0], l, nl, r, nr, msg, mlen, &x), 0);
		/* Nothing posted on the target: its polls land the write. */
		notif_take(f, f->p.s[1], nt);
		verify(k.pool, "pool when the notification arrived");
		notif_expect(nt, f->p.c[1], msg, mlen);
		complete1_ok(f, x);
		verify(k.pool, "pool after the write");
		verify(k.loc, "initiator's blocks");
		notif_none(f, f->p.s[1]);
	}
	kv_close(&k);
	free(nt);
}

/* ---- case 8: notification order ------------------------------------------- */

void test_notif_order(void **state)
{
	struct fx *f = *state;
	enum { NB = 256, HALF = 128, BIG = 64u << 10 };
	tcpx_p2p_notif *nt = calloc(8, sizeof(*nt));
	unsigned char msg[TCPX_P2P_NOTIF_MAX];
	size_t lid[HALF], rid[HALF], i, len;
	tcpx_p2p_xfer *x[4], *xs[10];
	struct region *rr;
	tcpx_p2p_seg sg[3], rg[2];
	int n, got, j;
	double t0;
	struct kv k;

	assert_non_null(nt);
	kv_open(f, &k, NB, NB, BIG, TCPX_P2P_ACCESS_WRITE, 91);
	/* W1 (8 MiB, no note), note A, W2 (8 MiB, note B), note C: back to back. */
	for (i = 0; i < HALF; i++) {
		lid[i] = i;
		rid[i] = i;
	}
	assert_int_equal(kv_write(f, &k, lid, rid, HALF, NULL, 0, &x[0]), 0);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "A", 2), 0);
	for (i = 0; i < HALF; i++) {
		lid[i] = HALF + i;
		rid[i] = NB - 1 - i;
	}
	assert_int_equal(kv_write(f, &k, lid, rid, HALF, "B", 2, &x[1]), 0);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "C", 2), 0);
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], "A", 2);
	verify_range(k.pool, 0, k.eo + HALF * (size_t)BIG, "W1 when note A arrived");
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], "B", 2);
	verify(k.pool, "pool when note B arrived");
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], "C", 2);
	complete_ok(f, x, 2);
	verify(k.pool, "pool");

	/* After a two-sided transfer: the note comes once its bytes are in. */
	rr = region_new(f, f->p.s[1], 3u << 20, 92);
	sg[0] = (tcpx_p2p_seg){ k.loc->mr, 5, 1u << 20 };
	sg[1] = (tcpx_p2p_seg){ k.loc->mr, 2u << 20, 1 };
	sg[2] = (tcpx_p2p_seg){ k.loc->mr, 8u << 20, (1u << 20) - 1 };
	rg[0] = (tcpx_p2p_seg){ rr->mr, 1, 1u << 20 };
	rg[1] = (tcpx_p2p_seg){ rr->mr, (1u << 20) + 2, 1u << 20 };
	expect_copy(rr, 1, k.loc, 5, 1u << 20);
	expect_copy(rr, (1u << 20) + 2, k.loc, 2u << 20, 1);
	expect_copy(rr, (1u << 20) + 3, k.loc, 8u << 20, (1u << 20) - 1);
	assert_int_equal(tcpx_p2p_recvv(f->p.c[1], rg, 2, NULL, &x[0]), 0);
	assert_int_equal(tcpx_p2p_sendv(f->p.c[0], sg, 3, NULL, &x[1]), 0);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "D", 1), 0);
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], "D", 1);
	verify(rr, "receive when note D arrived");
	complete_ok(f, x, 2);

	/* Small writes with notes and standalone notes interleaved. */
	for (j = 0; j < 10; j++) {
		size_t l1 = (size_t)j, r1 = (size_t)(3 * j + 1);

		snprintf((char *)msg, sizeof(msg), "w%d", j);
		assert_int_equal(kv_write(f, &k, &l1, &r1, 1, msg, strlen((char *)msg) + 1,
					  &xs[j]), 0);
		snprintf((char *)msg, sizeof(msg), "n%d", j);
		assert_int_equal(tcpx_p2p_notify(f->p.c[0], msg, strlen((char *)msg) + 1), 0);
	}
	for (j = 0; j < 20; j++) {
		char want[8];

		notif_take(f, f->p.s[1], nt);
		snprintf(want, sizeof(want), "%c%d", j & 1 ? 'n' : 'w', j / 2);
		notif_expect(nt, f->p.c[1], want, strlen(want) + 1);
		verify_range(k.pool, k.eo + (size_t)(3 * (j / 2) + 1) * BIG, BIG,
			     "a small write's block at its note");
	}
	complete_ok(f, xs, 10);
	verify(k.pool, "pool after the small writes");

	/* 100 notes in a row, lengths 1..NOTIF_MAX, taken up to 8 at a time. */
	for (j = 0; j < 100; j++) {
		len = 1 + (size_t)(j * 97) % TCPX_P2P_NOTIF_MAX;
		if (j == 99)
			len = TCPX_P2P_NOTIF_MAX;
		for (i = 0; i < len; i++)
			msg[i] = (unsigned char)(j * 31 + i);
		assert_int_equal(tcpx_p2p_notify(f->p.c[0], msg, len), 0);
	}
	for (got = 0, t0 = now_s(); got < 100;) {
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], nt, 8, &n), 0);
		assert_true(n >= 0 && n <= 8);
		for (j = 0; j < n; j++, got++) {
			len = 1 + (size_t)(got * 97) % TCPX_P2P_NOTIF_MAX;
			if (got == 99)
				len = TCPX_P2P_NOTIF_MAX;
			for (i = 0; i < len; i++)
				msg[i] = (unsigned char)(got * 31 + i);
			notif_expect(&nt[j], f->p.c[1], msg, len);
		}
		drive(f);
		if (now_s() - t0 > DEADLINE_S)
			fail_msg("100 notes: %d arrived", got);
	}
	notif_none(f, f->p.s[1]);

	/* Arguments. */
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], msg, 0), TCPX_P2P_EINVAL);
	/* Longer than the peer takes (its notif_max_bytes, the default): refused
	 * before a byte of msg is read. */
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], msg, (64u << 10) + 1), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], msg, TCPX_P2P_NOTIF_LIMIT + 1),
			 TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], NULL, 1), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notify(NULL, msg, 1), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notif_poll(NULL, nt, 1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], NULL, 1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], nt, -1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], NULL, 0, &n), 0);
	assert_int_equal(n, 0);
	kv_close(&k);
	free(nt);
}
