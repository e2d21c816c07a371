/* test_kv: one-sided WRITE and READ (with two-sided on one connection,
 * two initiators, a foreign descriptor, a threaded target, many batches). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kv.h"

/* One-sided and two-sided on one connection: a WRITE (and a READ) posted
 * after a send waits until the target posted the matching receive; the
 * READ of the receive's memory then sees the sent bytes, and the write's
 * notification comes after both. */
void test_mixed_one_sided(void **state)
{
	struct fx *f = *state;
	struct region *rb;
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	tcpx_p2p_xfer *x[4];
	tcpx_p2p_seg l;
	tcpx_p2p_rseg r;
	size_t lid[8], rid[8], i;
	int j, done;
	struct kv k;

	assert_non_null(nt);
	kv_open(f, &k, 64, 32, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 121);
	rb = region_new(f, f->p.s[0], 8 * (size_t)BLK + 2, 122);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], k.loc->mr, 0, 8 * (size_t)BLK, &x[0]), 0);
	for (i = 0; i < 8; i++) {
		lid[i] = 8 + i;
		rid[i] = 20 + i;
	}
	/* (its expectation is recorded once the receive is posted) */
	assert_int_equal(kv_write_via(&k, f->p.c[0], k.rm, lid, rid, 8, "after the send", 15, 0,
				      &x[1]), 0);
	l = (tcpx_p2p_seg){ rb->mr, 1, 8 * (size_t)BLK };
	r = (tcpx_p2p_rseg){ k.rm, 0, 8 * (size_t)BLK };
	expect_copy(rb, 1, k.loc, 0, 8 * (size_t)BLK); /* what the send brings */
	assert_int_equal(tcpx_p2p_read(f->p.c[0], &l, 1, &r, 1, NULL, &x[2]), 0);
	for (j = 0; j < 200; j++) {
		drive(f);
		for (i = 0; i < 3; i++) {
			done = 0;
			assert_int_equal(tcpx_p2p_test(x[i], &done), 0);
			assert_int_equal(done, 0);
		}
	}
	notif_none(f, f->p.s[1]);
	verify(k.pool, "pool before the receive was posted");
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], k.pool->mr, k.eo, 8 * (size_t)BLK, &x[3]), 0);
	expect_copy(k.pool, k.eo, k.loc, 0, 8 * (size_t)BLK);
	for (i = 0; i < 8; i++)
		expect_copy(k.pool, k.eo + rid[i] * BLK, k.loc, lid[i] * BLK, BLK);
	notif_take(f, f->p.s[1], nt);
	notif_expect(nt, f->p.c[1], "after the send", 15);
	verify(k.pool, "pool at the write's notification");
	complete_ok(f, x, 4);
	verify(rb, "read of the receive's memory");
	verify(k.pool, "pool");
	kv_close(&k);
	free(nt);
}

/* ---- case 6: two initiators, one target ------------------------------------ */

struct initiator {
	struct kv *k;
	tcpx_p2p_conn *c;
	tcpx_p2p_rmr *rm;
	struct region *loc;
	size_t *lid, *rid, n, per;
	char note[32];
	int rc;
	char why[320];
	int done;
};

/* Post every write at once (the last with a notification), then wait for
 * each: this thread drives its own session only. */
static void *initiator_main(void *arg)
{
	struct initiator *in = arg;
	size_t nx = in->n / in->per, i, j;
	tcpx_p2p_xfer **x = calloc(nx, sizeof(*x));
	tcpx_p2p_seg *l = calloc(in->per, sizeof(*l));
	tcpx_p2p_rseg *r = calloc(in->per, sizeof(*r));
	size_t blk = in->k->blk;
	double t0 = now_s(), left_ms; /* one deadline for all the waits */
	int rc;

	in->rc = x && l && r ? 0 : TCPX_P2P_ENOMEM;
	for (i = 0; i < nx && !in->rc; i++) {
		for (j = 0; j < in->per; j++) {
			l[j] = (tcpx_p2p_seg){ in->loc->mr, in->lid[i * in->per + j] * blk, blk };
			r[j] = (tcpx_p2p_rseg){ in->rm, in->rid[i * in->per + j] * blk, blk };
		}
		in->rc = post_write(in->c, l, in->per, r, in->per, i + 1 == nx ? in->note : NULL,
				    i + 1 == nx ? strlen(in->note) + 1 : 0, &x[i]);
		if (in->rc)
			snprintf(in->why, sizeof(in->why), "post %zu: %s", i, tcpx_p2p_last_error());
	}
	for (i = 0; i < nx && x; i++) {
		if (!x[i])
			continue;
		left_ms = (DEADLINE_S - (now_s() - t0)) * 1000;
		rc = tcpx_p2p_wait(x[i], left_ms > 0 ? (int)left_ms : 0);
		if (rc && !in->rc) {
			in->rc = rc;
			snprintf(in->why, sizeof(in->why), "write %zu: %s", i, tcpx_p2p_last_error());
		}
		if (rc != TCPX_P2P_ETIMEDOUT)
			tcpx_p2p_xfer_release(x[i]);
	}
	free(x);
	free(l);
	free(r);
	__atomic_store_n(&in->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void open_second(struct fx *f)
{
	tcpx_p2p_config cfg;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.gpu = g_cuda ? 0 : -1;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &f->s2), 0);
	assert_int_equal(tp_link(f->s2, f->p.s[1], &f->c2[0], &f->c2[1]), 0);
}

void test_two_initiators(void **state)
{
	struct fx *f = *state;
	enum { NB = 256, NL = 128, PER = 16 };
	struct initiator in[2];
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	size_t perm[NB], lid[2][NL];
	pthread_t th[2];
	double t0;
	int i, j, notes = 0, seen[2] = { 0, 0 }, n;
	struct kv k;

	assert_non_null(nt);
	open_second(f);
	kv_open(f, &k, NB, NL, BLK, TCPX_P2P_ACCESS_WRITE, 61);
	memset(in, 0, sizeof(in));
	in[0].c = f->p.c[0];
	in[0].rm = k.rm;
	in[0].loc = k.loc;
	in[1].c = f->c2[0];
	in[1].loc = region_new(f, f->s2, NL * (size_t)BLK, 62);
	{ /* the pool exported to the second initiator's conn as well */
		tcpx_p2p_rdesc d2;

		assert_int_equal(tcpx_p2p_mr_export(f->c2[1], k.pool->mr, k.eo, k.elen,
						    TCPX_P2P_ACCESS_WRITE, &d2), 0);
		assert_int_equal(tcpx_p2p_rmr_import(f->c2[0], &d2, &in[1].rm), 0);
	}
	/* disjoint halves of the pool, in random order */
	pick(f, perm, NB, NB, 1);
	for (i = 0; i < 2; i++) {
		in[i].k = &k;
		in[i].rid = &perm[i * NL];
		pick(f, lid[i], NL, NL, 1);
		in[i].lid = lid[i];
		in[i].n = NL;
		in[i].per = PER;
		snprintf(in[i].note, sizeof(in[i].note), "initiator %d done", i);
		for (j = 0; j < NL; j++)
			expect_copy(k.pool, k.eo + in[i].rid[j] * BLK, in[i].loc, lid[i][j] * BLK, BLK);
	}
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, initiator_main, &in[i]), 0);
	/* This thread is the target: it only drives its session and polls. */
	t0 = now_s();
	while (notes < 2 || !__atomic_load_n(&in[0].done, __ATOMIC_ACQUIRE) ||
	       !__atomic_load_n(&in[1].done, __ATOMIC_ACQUIRE)) {
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], nt, 1, &n), 0);
		if (n) {
			i = nt->conn == f->p.c[1] ? 0 : 1;
			assert_ptr_equal(nt->conn, i ? f->c2[1] : f->p.c[1]);
			assert_string_equal((const char *)nt->msg, in[i].note);
			assert_int_equal(seen[i]++, 0);
			notes++;
			/* that initiator's blocks are all in place now */
			for (j = 0; j < NL; j++)
				verify_range(k.pool, k.eo + in[i].rid[j] * BLK, BLK,
					     "an initiator's block at its notification");
		}
		if (now_s() - t0 > DEADLINE_S + 5) {
			/* their waits end by now: no thread may outlive the test */
			for (i = 0; i < 2; i++)
				pthread_join(th[i], NULL);
			fail_msg("two initiators: %d notification(s) after %.0f s (initiators "
				 "done %d %d: %s / %s)", notes, DEADLINE_S + 5,
				 __atomic_load_n(&in[0].done, __ATOMIC_ACQUIRE),
				 __atomic_load_n(&in[1].done, __ATOMIC_ACQUIRE), in[0].why, in[1].why);
		}
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		if (in[i].rc)
			fail_msg("initiator %d: %s: %s", i, tcpx_p2p_strerror(in[i].rc), in[i].why);
	}
	verify(k.pool, "pool written by two initiators");
	assert_int_equal(tcpx_p2p_rmr_release(in[1].rm), 0);
	kv_close(&k);
	free(nt);
}

/* A descriptor exported to one connection, imported on another: import
 * checks the form only, and the exporter refuses the write (EINVAL) with
 * nothing written, although that conn has an export at the same index. */
void test_foreign_descriptor(void **state)
{
	struct fx *f = *state;
	struct region *src;
	struct kv k;
	tcpx_p2p_rmr *rm = NULL;
	tcpx_p2p_xfer *x;
	tcpx_p2p_seg l;
	tcpx_p2p_rseg r;
	struct result res;
	tcpx_p2p_rdesc d2;

	open_second(f);
	kv_open(f, &k, 16, 4, BLK, TCPX_P2P_ACCESS_WRITE, 71);
	assert_int_equal(tcpx_p2p_mr_export(f->c2[1], k.pool->mr, 0, k.pool->len,
					    TCPX_P2P_ACCESS_WRITE, &d2), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->c2[0], &k.d, &rm), 0);
	src = region_new(f, f->s2, BLK, 72);
	l = (tcpx_p2p_seg){ src->mr, 0, BLK };
	r = (tcpx_p2p_rseg){ rm, 0, BLK };
	assert_int_equal(post_write(f->c2[0], &l, 1, &r, 1, NULL, 0, &x), 0);
	res = complete1(f, x);
	print_message("  write through a foreign descriptor: %s\n", res.why);
	assert_int_equal(res.rc, TCPX_P2P_EINVAL);
	assert_non_null(strstr(res.why, "refused"));
	verify(k.pool, "pool after a write through a foreign descriptor");
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	/* the right descriptor on that conn works */
	assert_int_equal(tcpx_p2p_rmr_import(f->c2[0], &d2, &rm), 0);
	r = (tcpx_p2p_rseg){ rm, k.eo + BLK, BLK };
	expect_copy(k.pool, k.eo + BLK, src, 0, BLK);
	assert_int_equal(post_write(f->c2[0], &l, 1, &r, 1, NULL, 0, &x), 0);
	complete1_ok(f, x);
	verify(k.pool, "pool");
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	kv_close(&k);
}

/* A target with a progress thread whose application posts nothing and only
 * polls for notifications (tcpx_p2p_notif_poll does not drive then): its
 * thread alone must receive the write, deliver the note and serve a read
 * (include/tcpx_p2p.h, tcpx_p2p_write: "The peer's progress engine (its
 * test/wait/progress calls or its progress thread) receives them").  No
 * session is driven by this thread here: no drive(), no test(). */
void test_threaded_target(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	size_t lid[8], rid[8], i;
	struct region *rb;
	tcpx_p2p_xfer *x, *xr;
	tcpx_p2p_seg l;
	tcpx_p2p_rseg r[8];
	double t0 = now_s();
	int n = 0, rc;
	struct kv k;

	assert_non_null(nt);
	kv_open(f, &k, 16, 16, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 131);
	rb = region_new(f, f->p.s[0], 8 * (size_t)BLK, 132);
	pick(f, lid, 8, 16, 0);
	pick(f, rid, 8, 16, 1);
	assert_int_equal(kv_write(f, &k, lid, rid, 8, "threaded", 9, &x), 0);
	while (!n && now_s() - t0 < DEADLINE_S) {
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], nt, 1, &n), 0);
		if (!n)
			usleep(100);
	}
	if (!n) {
		/* fail without leaking the write: its conn goes first */
		assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[0]), 0);
		f->p.c[0] = NULL;
		rc = tcpx_p2p_wait(x, 10000);
		assert_int_equal(tcpx_p2p_xfer_release(x), 0);
		kv_close(&k);
		free(nt);
		fail_msg("no notification in 10 s from a target whose progress thread alone "
			 "drives it (the write: %s)", tcpx_p2p_strerror(rc));
	}
	notif_expect(nt, f->p.c[1], "threaded", 9);
	verify(k.pool, "pool at the notification");
	assert_int_equal(tcpx_p2p_wait(x, 10000), 0);
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	/* and a read served by the thread alone */
	l = (tcpx_p2p_seg){ rb->mr, 0, 8 * (size_t)BLK };
	for (i = 0; i < 8; i++) {
		r[i] = (tcpx_p2p_rseg){ k.rm, rid[7 - i] * BLK, BLK };
		expect_copy(rb, i * BLK, k.pool, k.eo + rid[7 - i] * BLK, BLK);
	}
	assert_int_equal(tcpx_p2p_read(f->p.c[0], &l, 1, r, 8, NULL, &xr), 0);
	assert_int_equal(tcpx_p2p_wait(xr, 10000), 0);
	assert_int_equal(tcpx_p2p_xfer_release(xr), 0);
	verify(rb, "read served by the target's thread");
	kv_close(&k);
	free(nt);
}

/* ---- case 7: READ ------------------------------------------------------------ */

void test_read(void **state)
{
	struct fx *f = *state;
	enum { NB = 128, NL = 64, B = 32 };
	struct region *rb; /* where reads land, on the initiator */
	size_t lid[B], rid[B], perm[B], i;
	tcpx_p2p_seg l[B];
	tcpx_p2p_rseg r[B];
	tcpx_p2p_xfer *x[2];
	tcpx_p2p_xfer_params p = { .struct_size = sizeof(p), .notif = "n", .notif_len = 1 };
	tcpx_p2p_rdesc d;
	tcpx_p2p_rmr *rm;
	struct result res;
	struct kv k;

	kv_open(f, &k, NB, NL, BLK, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 81);
	rb = region_new(f, f->p.s[0], (NL + 2) * (size_t)BLK, 82);

	/* WRITE, then at once a READ of the same blocks (another order) into
	 * one contiguous local range: it sees the write. */
	pick(f, lid, B, NL, 0);
	pick(f, rid, B, NB, 1);
	assert_int_equal(kv_write(f, &k, lid, rid, B, NULL, 0, &x[0]), 0);
	pick(f, perm, B, B, 1);
	for (i = 0; i < B; i++) {
		r[i] = (tcpx_p2p_rseg){ k.rm, rid[perm[i]] * BLK, BLK };
		expect_copy(rb, 100 + i * BLK, k.pool, k.eo + rid[perm[i]] * BLK, BLK);
	}
	l[0] = (tcpx_p2p_seg){ rb->mr, 100, (size_t)B * BLK };
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 1, r, B, NULL, &x[1]), 0);
	complete_ok(f, x, 2);
	verify(rb, "read-back of written blocks");
	verify(k.pool, "pool");

	/* Blocks never written (their initial bytes) scattered locally, with
	 * one remote segment spanning several blocks. */
	for (i = 0; i < 8; i++)
		l[i] = (tcpx_p2p_seg){ rb->mr, 7 + (7 - i) * (BLK + 5), BLK };
	r[0] = (tcpx_p2p_rseg){ k.rm, 3 * (size_t)BLK + 1, 8 * (size_t)BLK };
	for (i = 0; i < 8; i++)
		expect_copy(rb, l[i].offset, k.pool, k.eo + 3 * BLK + 1 + i * BLK, BLK);
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 8, r, 1, NULL, &x[0]), 0);
	complete1_ok(f, x[0]);
	verify(rb, "read of initial bytes");

	/* A read takes no notification. */
	x[0] = NULL;
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 8, r, 1, &p, &x[0]), TCPX_P2P_EINVAL);
	assert_null(x[0]);

	/* A WRITE-only export: refused at post ... */
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], k.pool->mr, k.eo, k.elen,
					    TCPX_P2P_ACCESS_WRITE, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &rm), 0);
	r[0] = (tcpx_p2p_rseg){ rm, 0, 8 * (size_t)BLK };
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 8, r, 1, NULL, &x[0]), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "does not allow"));
	assert_null(x[0]);
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
	/* ... and with the access byte forged, by the target: nothing lands. */
	rm = import_forged(f, &d, 6, TCPX_P2P_ACCESS_READ | TCPX_P2P_ACCESS_WRITE, 1);
	r[0] = (tcpx_p2p_rseg){ rm, 0, 8 * (size_t)BLK };
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 8, r, 1, NULL, &x[0]), 0);
	res = complete1(f, x[0]);
	print_message("  refused read: %s\n", res.why);
	assert_int_equal(res.rc, TCPX_P2P_EINVAL);
	assert_non_null(strstr(res.why, "refused"));
	verify(rb, "read buffer after a refused read");
	assert_int_equal(tcpx_p2p_rmr_release(rm), 0);

	/* Still usable: write + read once more, then a read of a byte. */
	pick(f, lid, B, NL, 0);
	pick(f, rid, B, NB, 1);
	assert_int_equal(kv_write(f, &k, lid, rid, B, NULL, 0, &x[0]), 0);
	for (i = 0; i < B; i++) {
		l[i] = (tcpx_p2p_seg){ rb->mr, i * BLK, BLK };
		r[i] = (tcpx_p2p_rseg){ k.rm, rid[i] * BLK, BLK };
		expect_copy(rb, i * BLK, k.pool, k.eo + rid[i] * BLK, BLK);
	}
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, B, r, B, NULL, &x[1]), 0);
	complete_ok(f, x, 2);
	verify(rb, "second read-back");
	l[0] = (tcpx_p2p_seg){ rb->mr, rb->len - 1, 1 };
	r[0] = (tcpx_p2p_rseg){ k.rm, k.elen - 1, 1 };
	expect_copy(rb, rb->len - 1, k.pool, k.eo + k.elen - 1, 1);
	assert_int_equal(tcpx_p2p_read(f->p.c[0], l, 1, r, 1, NULL, &x[0]), 0);
	complete1_ok(f, x[0]);
	verify(rb, "one-byte read");
	kv_close(&k);
}

/* ---- case 10: many batches in flight ------------------------------------------ */

void test_many_batches(void **state)
{
	struct fx *f = *state;
	enum { NW = 32, PER = 64, NB = NW * PER, NL = NB + 256, OVER = 4, BS = 4096 + 3 };
	tcpx_p2p_notif *nt = malloc(sizeof(*nt));
	size_t *rid = malloc(NB * sizeof(size_t)), *lid = malloc(NL * sizeof(size_t));
	size_t orid[OVER * PER], olid[PER];
	tcpx_p2p_xfer *x[NW + OVER];
	char note[16];
	const char *ov = getenv("TP_KV_OVERLAP");
	int w, notes = 0, overlap = ov && *ov == '1';
	struct kv k;

	assert_true(nt && rid && lid);
	kv_open(f, &k, NB, NL, BS, TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, 111);
	pick(f, rid, NB, NB, 1);
	pick(f, lid, NL, NL, 1);
	for (w = 0; w < NW; w++) {
		snprintf(note, sizeof(note), "batch %d", w);
		assert_int_equal(kv_write(f, &k, &lid[w * PER], &rid[w * PER], PER,
					  w % 8 == 7 ? note : NULL, strlen(note) + 1, &x[w]), 0);
	}
	/* Then overwrite blocks of those writes from the spare local blocks:
	 * posted once the first 32 completed, or (TP_KV_OVERLAP=1) at once,
	 * while the writes they overlap are in flight: see the note at the top
	 * of this file. */
	if (!overlap) {
		complete_ok(f, x, NW);
		verify(k.pool, "pool after 32 writes in flight");
	}
	pick(f, orid, OVER * PER, NB, 1); /* distinct: these are in flight together */
	for (w = 0; w < OVER; w++) {
		if (overlap)
			pick(f, orid + w * PER, PER, NB, 1);
		pick(f, olid, PER, NL - NB, 0);
		for (int i = 0; i < PER; i++)
			olid[i] += NB;
		snprintf(note, sizeof(note), "over %d", w);
		assert_int_equal(kv_write(f, &k, olid, orid + w * PER, PER, note,
					  strlen(note) + 1, &x[NW + w]), 0);
	}
	complete_ok(f, x, NW + OVER);
	verify(k.pool, "pool after the overwrites");
	verify(k.loc, "initiator's blocks");
	for (w = 0; w < NW + OVER; w++) {
		if (w < NW && w % 8 != 7)
			continue;
		notif_take(f, f->p.s[1], nt);
		if (w < NW)
			snprintf(note, sizeof(note), "batch %d", w);
		else
			snprintf(note, sizeof(note), "over %d", w - NW);
		notif_expect(nt, f->p.c[1], note, strlen(note) + 1);
		notes++;
	}
	assert_int_equal(notes, NW / 8 + OVER);
	notif_none(f, f->p.s[1]);
	kv_close(&k);
	free(rid);
	free(lid);
	free(nt);
}
