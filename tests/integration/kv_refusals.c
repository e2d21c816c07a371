/* test_kv: one-sided transfers the target refuses, nothing written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv.h"

/* The one refusal a target gives for every export check a peer could
 * probe with (key, index, range, access, revoked, deregistered). */
#define DENIED "no export of the target allows it"

/* x must fail with EINVAL, the target having refused it for `why`, and
 * nothing written into the pool. */
static void expect_refused(struct fx *f, struct kv *k, tcpx_p2p_xfer *x, const char *why)
{
	struct result r = complete1(f, x);

	if (r.rc != TCPX_P2P_EINVAL)
		fail_msg("refused write: %s (%s), want EINVAL", tcpx_p2p_strerror(r.rc), r.why);
	print_message("  refused: %s\n", r.why);
	assert_non_null(strstr(r.why, "refused"));
	assert_non_null(strstr(r.why, why));
	verify(k->pool, "pool after a refused write");
}

void test_refusals(void **state)
{
	struct fx *f = *state;
	enum { NB = 64, NL = 16 };
	static const char note_bad[] = "refused", note_good[] = "good";
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	struct region *gone;
	tcpx_p2p_rdesc d, bad;
	tcpx_p2p_rmr *rm, *rm2;
	tcpx_p2p_xfer *x = NULL;
	tcpx_p2p_seg l[2];
	tcpx_p2p_rseg r[2];
	size_t lid[2] = { 3, 5 }, rid[2] = { 7, 9 }, len;
	struct kv k;

	assert_non_null(nt);
	kv_open(f, &k, NB, NL, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 51);
	/* Export arguments. */
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.pool->mr, 0, k.pool->len + 1,
					    TCPX_P2P_ACCESS_WRITE, &d), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.pool->mr, 0, 10, 0, &d), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.pool->mr, 0, 10, 4, &d), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.loc->mr, 0, 10, 1, &d), TCPX_P2P_EINVAL);

	/* Checked on this side at post: outside the rmr, totals, no rmr. */
	l[0] = (tcpx_p2p_seg){ k.loc->mr, 0, BLK };
	r[0] = (tcpx_p2p_rseg){ k.rm, k.elen - BLK + 1, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, NULL, 0, &x), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "outside"));
	r[0] = (tcpx_p2p_rseg){ k.rm, k.elen + 1, 0 };
	assert_int_equal(post_write(f->p.c[0], l, 0, r, 1, NULL, 0, &x), TCPX_P2P_EINVAL);
	r[0] = (tcpx_p2p_rseg){ k.rm, 0, BLK - 1 };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, NULL, 0, &x), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "local segments hold"));
	r[0] = (tcpx_p2p_rseg){ NULL, 0, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, NULL, 0, &x), TCPX_P2P_EINVAL);
	r[0] = (tcpx_p2p_rseg){ k.rm, 0, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, "", 0, &x), TCPX_P2P_EINVAL);
	/* longer than the peer's notif_max_bytes (the default): refused unread */
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, "x", (64u << 10) + 1, &x),
			 TCPX_P2P_EINVAL);
	assert_null(x);
	good_write(f, &k);

	/* Not descriptors: bad magic, unknown access bits, unknown memory type. */
	bad = k.d;
	bad.bytes[0] ^= 1;
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &bad, &rm), TCPX_P2P_EPROTO);
	bad = k.d;
	bad.bytes[6] = 0x84;
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &bad, &rm), TCPX_P2P_EPROTO);
	bad = k.d;
	bad.bytes[5] = 9;
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &bad, &rm), TCPX_P2P_EPROTO);

	/* Forged length: the rmr claims 1 MiB more than the export; a block
	 * past the export's end (and one across it) passes the local check
	 * and the target refuses it.  The refused write's notification is not
	 * delivered; the next write's is. */
	rm = import_forged(f, &k.d, 16, k.elen + (1u << 20), 8);
	assert_int_equal(tcpx_p2p_rmr_query(rm, &len, NULL, NULL), 0);
	assert_int_equal(len, k.elen + (1u << 20));
	l[0] = (tcpx_p2p_seg){ k.loc->mr, 0, BLK };
	r[0] = (tcpx_p2p_rseg){ rm, k.elen, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, note_bad, sizeof(note_bad), &x), 0);
	expect_refused(f, &k, x, DENIED);
	r[0] = (tcpx_p2p_rseg){ rm, k.elen - 10, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, NULL, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	assert_int_equal(kv_write(f, &k, lid, rid, 2, note_good, sizeof(note_good), &x), 0);
	complete1_ok(f, x);
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], note_good, sizeof(note_good));
	verify(k.pool, "pool");

	/* Forged key, forged export index. */
	rm = import_forged(f, &k.d, 24, get_le(k.d.bytes + 24, 8) ^ 0x40, 8);
	assert_int_equal(kv_write_via(&k, f->p.c[0], rm, lid, rid, 2, NULL, 0, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	good_write(f, &k);
	rm = import_forged(f, &k.d, 8, 5, 4);
	assert_int_equal(kv_write_via(&k, f->p.c[0], rm, lid, rid, 2, NULL, 0, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	good_write(f, &k);

	/* One good and one forged remote segment: refused as a whole, the
	 * good segment's block untouched too. */
	l[0] = (tcpx_p2p_seg){ k.loc->mr, 0, 2 * (size_t)BLK };
	r[0] = (tcpx_p2p_rseg){ k.rm, 11 * (size_t)BLK, BLK };
	r[1] = (tcpx_p2p_rseg){ rm, 12 * (size_t)BLK, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 2, NULL, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	good_write(f, &k);

	/* A region deregistered on the target after its export. */
	gone = region_new(f, f->p.s[1], 4 * (size_t)BLK, 52);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], gone->mr, 0, gone->len,
					    TCPX_P2P_ACCESS_WRITE, &d), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(gone->mr), 0);
	gone->mr = NULL;
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &rm), 0);
	l[0] = (tcpx_p2p_seg){ k.loc->mr, 0, BLK };
	r[0] = (tcpx_p2p_rseg){ rm, BLK, BLK };
	assert_int_equal(post_write(f->p.c[0], l, 1, r, 1, NULL, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	verify(gone, "deregistered region");
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	good_write(f, &k);

	/* READ-only export: the rmr says no WRITE, refused at post. */
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.pool->mr, k.eo, k.elen,
					    TCPX_P2P_ACCESS_READ, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &rm), 0);
	x = NULL;
	assert_int_equal(kv_write_via(&k, f->p.c[0], rm, lid, rid, 2, NULL, 0, 0, &x),
			 TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "does not allow"));
	assert_null(x);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	/* ... and with the access byte forged, the target refuses it. */
	rm = import_forged(f, &d, 6, TCPX_P2P_ACCESS_READ | TCPX_P2P_ACCESS_WRITE, 1);
	assert_int_equal(kv_write_via(&k, f->p.c[0], rm, lid, rid, 2, NULL, 0, 0, &x), 0);
	expect_refused(f, &k, x, DENIED);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	good_write(f, &k);

	/* Several refused writes in flight between good ones. */
	{
		tcpx_p2p_xfer *xs[6];
		struct result res[6];
		size_t lid2[6], rid2[6];
		int i;

		rm = import_forged(f, &k.d, 24, get_le(k.d.bytes + 24, 8) ^ 1, 8);
		rm2 = import_forged(f, &k.d, 16, k.elen + BLK, 8);
		pick(f, lid2, 6, NL, 0);
		pick(f, rid2, 6, NB, 1);
		for (i = 0; i < 6; i++) {
			if (i % 3 == 0)
				assert_int_equal(kv_write(f, &k, &lid2[i], &rid2[i], 1, NULL, 0, &xs[i]),
						 0);
			else if (i % 3 == 1)
				assert_int_equal(kv_write_via(&k, f->p.c[0], rm, &lid2[i], &rid2[i], 1,
							      note_bad, sizeof(note_bad), 0, &xs[i]), 0);
			else
				assert_int_equal(kv_write_via(&k, f->p.c[0], rm2, &lid2[i],
							      (size_t[]){ NB }, 1, NULL, 0, 0,
							      &xs[i]), 0);
		}
		complete(f, xs, 6, res);
		for (i = 0; i < 6; i++)
			assert_int_equal(res[i].rc, i % 3 == 0 ? 0 : TCPX_P2P_EINVAL);
		verify(k.pool, "pool after good and refused writes");
		assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
		assert_int_equal(tcpx_p2p_rmr_release(rm2), 0);
	}
	notif_none(f, f->p.s[1]);
	good_write(f, &k);
	kv_close(&k);
	free(nt);
}
