/* test_kv's one-sided set-up: a pool exported by the target, imported by
 * the initiator, writes of its blocks, and forged descriptors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv.h"

/* A pool of nb blocks on the target, exported with `access` at an odd
 * offset with guards around, and a local region of nl blocks. */
void kv_open(struct fx *f, struct kv *k, size_t nb, size_t nl, size_t blk, unsigned access,
	     uint64_t seed)
{
	tcpx_p2p_rdesc wire;
	size_t len;
	int mt;
	unsigned acc;

	memset(k, 0, sizeof(*k));
	k->blk = blk;
	k->eo = 8192 - 3;
	k->elen = nb * blk;
	k->pool = region_new(f, f->p.s[1], k->eo + k->elen + 8192 + 5, seed);
	k->loc = region_new(f, f->p.s[0], nl * blk, seed + 1);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k->pool->mr, k->eo, k->elen, access, &k->d),
			 0);
	memcpy(&wire, &k->d, sizeof(wire)); /* as the application ships it */
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &wire, &k->rm), 0);
	assert_int_equal(tcpx_p2p_rmr_query(k->rm, &len, &mt, &acc), 0);
	assert_int_equal(len, k->elen);
	assert_int_equal(mt, g_cuda ? TCPX_P2P_MEM_CUDA : TCPX_P2P_MEM_HOST);
	assert_int_equal(acc, access);
}

void kv_close(struct kv *k)
{
	assert_int_equal(tcpx_p2p_rmr_release(k->rm), 0);
	k->rm = NULL;
}

/* n distinct numbers below max (distinct = 1) or any (0). */
void pick(struct fx *f, size_t *out, size_t n, size_t max, int distinct)
{
	size_t *all, i;

	if (!distinct) {
		for (i = 0; i < n; i++)
			out[i] = below(&f->rng, max);
		return;
	}
	assert_true(n <= max);
	all = malloc(max * sizeof(*all));
	assert_non_null(all);
	for (i = 0; i < max; i++)
		all[i] = i;
	for (i = 0; i < n; i++) { /* partial Fisher-Yates */
		size_t j = i + below(&f->rng, max - i), t = all[i];

		all[i] = all[j];
		all[j] = t;
		out[i] = all[i];
	}
	free(all);
}

/* Write local blocks lid[i] to remote blocks rid[i] of rmr (one segment
 * each) on conn c; expect = 1 records the result in the pool's shadow. */
int kv_write_via(struct kv *k, tcpx_p2p_conn *c, const tcpx_p2p_rmr *rm,
		 const size_t *lid, const size_t *rid, size_t n, const void *notif,
		 size_t notif_len, int expect, tcpx_p2p_xfer **x)
{
	tcpx_p2p_seg *l = malloc((n ? n : 1) * sizeof(*l));
	tcpx_p2p_rseg *r = malloc((n ? n : 1) * sizeof(*r));
	int rc;

	assert_true(l && r);
	for (size_t i = 0; i < n; i++) {
		l[i] = (tcpx_p2p_seg){ k->loc->mr, lid[i] * k->blk, k->blk };
		r[i] = (tcpx_p2p_rseg){ rm, rid[i] * k->blk, k->blk };
	}
	rc = post_write(c, l, n, r, n, notif, notif_len, x);
	if (!rc && expect)
		for (size_t i = 0; i < n; i++)
			expect_copy(k->pool, k->eo + rid[i] * k->blk, k->loc, lid[i] * k->blk,
				    k->blk);
	free(l);
	free(r);
	return rc;
}

int kv_write(struct fx *f, struct kv *k, const size_t *lid, const size_t *rid, size_t n,
	     const void *notif, size_t notif_len, tcpx_p2p_xfer **x)
{
	return kv_write_via(k, f->p.c[0], k->rm, lid, rid, n, notif, notif_len, 1, x);
}

/* A few blocks written and checked: the connection still works. */
void good_write(struct fx *f, struct kv *k)
{
	size_t nb = k->elen / k->blk, nl = k->loc->len / k->blk, lid[4], rid[4];
	tcpx_p2p_xfer *x;

	pick(f, lid, 4, nl, 0);
	pick(f, rid, 4, nb, 1);
	assert_int_equal(kv_write(f, k, lid, rid, 4, NULL, 0, &x), 0);
	complete1_ok(f, x);
	verify(k->pool, "pool after a good write");
}

void put_le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

tcpx_p2p_rmr *import_forged(struct fx *f, const tcpx_p2p_rdesc *d, int at, uint64_t v,
			    int n)
{
	tcpx_p2p_rdesc forged = *d;
	tcpx_p2p_rmr *rm;

	put_le(forged.bytes + at, v, n);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &forged, &rm), 0);
	return rm;
}

uint64_t get_le(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}
