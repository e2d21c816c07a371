/* test_kv: vectored transfers (random segment shapes, no segments, plain
 * and vectored mixed, totals that differ). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv.h"

/* One sendv/recvv pair of the given shapes from side `from`. */
static void vec_round(struct fx *f, int from, size_t total, enum shape ssh, enum shape rsh,
		      int round)
{
	struct segl sl = { 0 }, rl = { 0 };
	struct region *src, *dst;
	tcpx_p2p_seg *sg, *rg;
	tcpx_p2p_xfer *x[2];

	cut(f, &sl, total, ssh);
	cut(f, &rl, total, rsh);
	place(f, &sl, 0, ssh == SH_TINY ? 3 : 4096);
	place(f, &rl, 1, rsh == SH_TINY ? 3 : 4096);
	/* a tail of guard bytes after the last segment too */
	src = region_new(f, f->p.s[from], sl.span + 64, 5000 + (uint64_t)round);
	dst = region_new(f, f->p.s[1 - from], rl.span + 64, 6000 + (uint64_t)round);
	sg = segs_of(&sl, src);
	rg = segs_of(&rl, dst);
	print_message("  round %d: %zu bytes, %zu send segments, %zu receive segments\n", round,
		      total, sl.n, rl.n);
	expect_stream(dst, &rl, src, &sl);
	assert_int_equal(tcpx_p2p_recvv(f->p.c[1 - from], rl.n ? rg : NULL, rl.n, NULL, &x[0]), 0);
	assert_int_equal(tcpx_p2p_sendv(f->p.c[from], sl.n ? sg : NULL, sl.n, NULL, &x[1]), 0);
	complete_ok(f, x, 2);
	verify(dst, "receiver");
	verify(src, "sender");
	free(sg);
	free(rg);
	segl_free(&sl);
	segl_free(&rl);
	/* free the two regions now: later rounds need memory too */
	f->nreg -= 2;
	region_free(dst);
	region_free(src);
}

void test_vec_shapes(void **state)
{
	struct fx *f = *state;
	size_t chunk = f->chunk_bytes;
	int round = 0;

	vec_round(f, 0, between(&f->rng, 1u << 20, 6u << 20), SH_MIXED, SH_MIXED, round++);
	vec_round(f, 1, between(&f->rng, 1u << 20, 4u << 20), SH_MIXED, SH_MIXED, round++);
	vec_round(f, 0, between(&f->rng, 20000, 30000), SH_TINY, SH_LARGE, round++);
	vec_round(f, 0, between(&f->rng, 20000, 30000), SH_LARGE, SH_TINY, round++);
	vec_round(f, 1, between(&f->rng, 12000, 16000), SH_TINY, SH_TINY, round++);
	vec_round(f, 0, 3 * chunk + between(&f->rng, 0, chunk), SH_CHUNKY, SH_MIXED, round++);
	vec_round(f, 0, 2 * chunk + between(&f->rng, 0, chunk), SH_MIXED, SH_CHUNKY, round++);
	vec_round(f, 0, 4 * chunk + 3, SH_CHUNKY, SH_CHUNKY, round++);
	vec_round(f, 1, between(&f->rng, 1, 100), SH_MIXED, SH_TINY, round++);
	vec_round(f, 0, 1, SH_LARGE, SH_TINY, round++);
	vec_round(f, 0, 0, SH_TINY, SH_LARGE, round++); /* only empty segments */
	while (round < 40) { /* and random ones */
		enum shape a = (enum shape)below(&f->rng, 4), b = (enum shape)below(&f->rng, 4);
		size_t total = a == SH_TINY || b == SH_TINY ? between(&f->rng, 0, 40000)
			     : between(&f->rng, 0, 8u << 20);

		vec_round(f, (int)below(&f->rng, 2), total, a, b, round++);
	}
}

/* Empty lists: no segments at all on one side, empty ones on the other. */
void test_vec_empty(void **state)
{
	struct fx *f = *state;
	struct region *a = region_new(f, f->p.s[0], 4096, 1), *b = region_new(f, f->p.s[1], 4096, 2);
	tcpx_p2p_seg e[3] = { { b->mr, 0, 0 }, { b->mr, 4096, 0 }, { b->mr, 17, 0 } };
	tcpx_p2p_seg g = { a->mr, 100, 50 }, h = { b->mr, 3000, 50 };
	tcpx_p2p_xfer *x[4];

	assert_int_equal(tcpx_p2p_recvv(f->p.c[1], e, 3, NULL, &x[0]), 0);
	if (tcpx_p2p_sendv(f->p.c[0], NULL, 0, NULL, &x[1]))
		fail_msg("sendv of no segments: %s", tcpx_p2p_last_error());
	assert_int_equal(tcpx_p2p_recvv(f->p.c[1], &h, 1, NULL, &x[2]), 0);
	assert_int_equal(tcpx_p2p_sendv(f->p.c[0], &g, 1, NULL, &x[3]), 0);
	complete_ok(f, x, 4);
	expect_copy(b, 3000, a, 100, 50);
	verify(b, "receiver");
	/* NULL list with segments, a segment outside its region: EINVAL, no xfer */
	x[0] = NULL;
	assert_int_equal(tcpx_p2p_sendv(f->p.c[0], NULL, 2, NULL, &x[0]), TCPX_P2P_EINVAL);
	g.offset = 4047;
	assert_int_equal(tcpx_p2p_sendv(f->p.c[0], &g, 1, NULL, &x[0]), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "outside"));
	assert_null(x[0]);
}

/* ---- case 2: mixed plain and vectored, several in flight ---------------- */

enum { MIX_N = 12, MIX_SEG = 5 };

struct mix {
	size_t len;
	int vsend, vrecv;          /* vectored on that side */
	tcpx_p2p_seg s[MIX_SEG], r[MIX_SEG];
};

static int mix_post_send(struct fx *f, const struct mix *m, tcpx_p2p_xfer **x)
{
	if (m->vsend)
		return tcpx_p2p_sendv(f->p.c[0], m->s, MIX_SEG, NULL, x);
	return tcpx_p2p_send(f->p.c[0], m->s[0].mr, m->s[0].offset, m->len, x);
}

static int mix_post_recv(struct fx *f, const struct mix *m, tcpx_p2p_xfer **x)
{
	if (m->vrecv)
		return tcpx_p2p_recvv(f->p.c[1], m->r, MIX_SEG, NULL, x);
	return tcpx_p2p_recv(f->p.c[1], m->r[0].mr, m->r[0].offset, m->len, x);
}

/* Plain send matched with recvv, sendv with plain recv (and the pure
 * pairs), twelve in a row posted before any completes: receives first,
 * then sends first.  Transfers 6 and 7 have equal totals, so a swap shows
 * in the bytes. */
void test_mixed(void **state)
{
	struct fx *f = *state;
	struct region *src = region_new(f, f->p.s[0], 8u << 20, 11);
	struct region *dst = region_new(f, f->p.s[1], 8u << 20, 12);
	struct mix m[MIX_N];
	tcpx_p2p_xfer *x[2 * MIX_N];
	size_t soff, roff;
	int i, k, order;

	for (order = 0; order < 2; order++) {
		soff = roff = 0;
		for (i = 0; i < MIX_N; i++) {
			struct mix *mi = &m[i];

			mi->len = i == 5 ? 0 : between(&f->rng, 1, 300u << 10);
			if (i == 7)
				mi->len = m[6].len;
			mi->vsend = (i & 1) != 0;
			mi->vrecv = (i & 2) != 0;
			for (k = 0; k < MIX_SEG; k++) {
				size_t piece = k < MIX_SEG - 1 ? mi->len / MIX_SEG
							       : mi->len - mi->len / MIX_SEG * (MIX_SEG - 1);

				mi->s[k] = (tcpx_p2p_seg){ src->mr, soff, piece };
				mi->r[k] = (tcpx_p2p_seg){ dst->mr, roff, piece };
				expect_copy(dst, roff, src, soff, piece);
				soff += piece;
				roff += piece + (mi->vrecv ? 3 : 0); /* guards between pieces */
			}
			roff += 5;
		}
		for (i = 0; i < MIX_N; i++)
			assert_int_equal(order ? mix_post_send(f, &m[i], &x[i])
					       : mix_post_recv(f, &m[i], &x[i]), 0);
		for (i = 0; i < MIX_N; i++)
			assert_int_equal(order ? mix_post_recv(f, &m[i], &x[MIX_N + i])
					       : mix_post_send(f, &m[i], &x[MIX_N + i]), 0);
		complete_ok(f, x, 2 * MIX_N);
		verify(dst, order ? "receiver (sends posted first)" : "receiver (receives first)");
		verify(src, "sender");
		tp_fill(src->shadow, src->len, 13); /* other bytes for the next round */
		dev_put(src, 0, src->len);
	}
}

/* ---- case 3: totals that differ ------------------------------------------- */

/* A sendv of n bytes against a recvv of m != n: both fail with EPROTO and
 * the detail names the totals, the receive's memory is untouched, and the
 * pair posted right behind (before either completed) goes through. */
void test_total_mismatch(void **state)
{
	struct fx *f = *state;
	struct region *src = region_new(f, f->p.s[0], 1u << 20, 31);
	struct region *dst = region_new(f, f->p.s[1], 1u << 20, 32);
	tcpx_p2p_xfer *x[4];
	struct result res[4];
	char want[64];
	int round;

	for (round = 0; round < 5; round++) {
		size_t n = between(&f->rng, 1000, 200u << 10), m, good = between(&f->rng, 1, 100000);
		tcpx_p2p_seg sg[3], rg[4], gs = { src->mr, 300u << 10, good },
			     gr = { dst->mr, 600u << 10, good };
		size_t k;

		m = round == 0 ? n + 1 : round == 1 ? n / 2 : round == 2 ? 0 : round == 3 ? n : n - 1;
		if (round == 3)
			n = 0; /* an empty send against a receive with bytes */
		for (k = 0; k < 3; k++)
			sg[k] = (tcpx_p2p_seg){ src->mr, k * (n / 3), k < 2 ? n / 3 : n - 2 * (n / 3) };
		for (k = 0; k < 4; k++) /* 10-byte guards between the pieces */
			rg[k] = (tcpx_p2p_seg){ dst->mr, 10 + k * (m / 4 + 10),
						k < 3 ? m / 4 : m - 3 * (m / 4) };
		expect_copy(dst, gr.offset, src, gs.offset, good);
		if (round == 4) { /* plain send and receive */
			assert_int_equal(tcpx_p2p_recv(f->p.c[1], dst->mr, 10, m, &x[0]), 0);
		} else {
			assert_int_equal(tcpx_p2p_recvv(f->p.c[1], rg, 4, NULL, &x[0]), 0);
		}
		assert_int_equal(tcpx_p2p_recvv(f->p.c[1], &gr, 1, NULL, &x[1]), 0);
		if (round == 4)
			assert_int_equal(tcpx_p2p_send(f->p.c[0], src->mr, 0, n, &x[2]), 0);
		else
			assert_int_equal(tcpx_p2p_sendv(f->p.c[0], sg, 3, NULL, &x[2]), 0);
		assert_int_equal(tcpx_p2p_sendv(f->p.c[0], &gs, 1, NULL, &x[3]), 0);
		complete(f, x, 4, res);
		print_message("  round %d: send %zu, receive %zu: \"%s\" / \"%s\"\n", round, n, m,
			      res[2].why, res[0].why);
		assert_int_equal(res[0].rc, TCPX_P2P_EPROTO);
		assert_int_equal(res[2].rc, TCPX_P2P_EPROTO);
		assert_int_equal(res[1].rc, 0);
		assert_int_equal(res[3].rc, 0);
		assert_non_null(strstr(res[0].why, "totals"));
		assert_non_null(strstr(res[2].why, "totals"));
		snprintf(want, sizeof(want), "%zu", m);
		assert_non_null(strstr(res[0].why, want));
		assert_non_null(strstr(res[2].why, want));
		snprintf(want, sizeof(want), "%zu", n);
		assert_non_null(strstr(res[0].why, want));
		assert_non_null(strstr(res[2].why, want));
		verify(dst, "receiver after a mismatch");
		verify(src, "sender");
	}
	/* and afterwards, a matched pair of each kind */
	vec_round(f, 0, 100000, SH_MIXED, SH_MIXED, 100);
	vec_round(f, 1, 5000, SH_TINY, SH_MIXED, 101);
}
