/* tcpx_p2p_xfer_cancel: a cancelled transfer ends with ECANCELED (or its
 * own result when the cancel came too late), its peer is told, and every
 * other transfer of the connection completes with the right bytes; the
 * connection stays usable.  Run over the emulator in place and through a
 * strict host bounce buffer (CTest registers both). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

#define BIG (32u << 20)       /* 512 chunks of 64 KiB: a cancel right after the post
			       * finds most of them unprepared */
#define POOL (192u << 20)

struct fx {
	struct tp_pair p;
	unsigned char *buf[2]; /* [0] the sender's, [1] the receiver's / target's */
	tcpx_p2p_mr *mr[2];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tcpx_p2p_config cfg;

	assert_non_null(f);
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.num_channels = 2;
	cfg.chunk_bytes = 64u << 10;
	assert_int_equal(tp_pair_open(&f->p, &cfg, 0), 0);
	for (int i = 0; i < 2; i++) {
		f->buf[i] = malloc(POOL);
		assert_non_null(f->buf[i]);
		assert_int_equal(tcpx_p2p_mr_register(f->p.s[i], f->buf[i], POOL, TCPX_P2P_MEM_HOST,
						      &f->mr[i]), 0);
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[i]), 0);
		f->p.c[i] = NULL;
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_mr_deregister(f->mr[i]), 0);
	tp_pair_close(&f->p);
	free(f->buf[0]);
	free(f->buf[1]);
	free(f);
	return 0;
}

/* Drive both sessions until every xfer of xs ended; rc[i] its result.
 * Each is released. */
static void finish(struct fx *f, tcpx_p2p_xfer **xs, int n, int *rc)
{
	int left = n, done;

	for (long round = 0; left; round++) {
		assert_true(round < 50L * 1000 * 1000); /* a hang, not a measurement */
		(void)tcpx_p2p_session_progress(f->p.s[0]);
		(void)tcpx_p2p_session_progress(f->p.s[1]);
		for (int i = 0; i < n; i++) {
			if (!xs[i])
				continue;
			done = 0;
			rc[i] = tcpx_p2p_test(xs[i], &done);
			if (rc[i] || done) {
				assert_int_equal(tcpx_p2p_xfer_release(xs[i]), 0);
				xs[i] = NULL;
				left--;
			}
		}
	}
}

/* A fresh pair of transfers after a cancel: the connection still works. */
static void still_works(struct fx *f, uint64_t seed)
{
	tcpx_p2p_xfer *x[2];
	int rc[2];

	tp_fill(f->buf[0], 1u << 20, seed);
	memset(f->buf[1], 0, 1u << 20);
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], 0, 1u << 20, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], 0, 1u << 20, &x[1]), 0);
	finish(f, x, 2, rc);
	assert_int_equal(rc[0], 0);
	assert_int_equal(rc[1], 0);
	assert_int_equal(tp_check(f->buf[1], 1u << 20, seed), (size_t)-1);
}

/* Three receives posted, the middle one cancelled before any send came:
 * the first and third meet the first and third sends with their bytes; the
 * second send goes nowhere and its sender hears ECANCELED. */
static void test_unmatched_recv(void **state)
{
	struct fx *f = *state;
	const size_t len = 300000;
	tcpx_p2p_xfer *r[3], *s[3], *all[6];
	int rc[6];

	for (int k = 0; k < 3; k++)
		tp_fill(f->buf[0] + k * len, len, 10 + (uint64_t)k);
	memset(f->buf[1], 0, 3 * len);
	for (int k = 0; k < 3; k++)
		assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], k * len, len, &r[k]), 0);
	assert_int_equal(tcpx_p2p_xfer_cancel(r[1]), 0);
	assert_int_equal(tcpx_p2p_xfer_cancel(r[1]), 0); /* twice: nothing more */
	for (int k = 0; k < 3; k++)
		assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], k * len, len, &s[k]), 0);
	for (int k = 0; k < 3; k++) {
		all[k] = r[k];
		all[3 + k] = s[k];
	}
	finish(f, all, 6, rc);
	assert_int_equal(rc[0], 0);
	assert_int_equal(rc[1], TCPX_P2P_ECANCELED);
	assert_int_equal(rc[2], 0);
	assert_int_equal(rc[3], 0);
	assert_int_equal(rc[4], TCPX_P2P_ECANCELED);
	assert_int_equal(rc[5], 0);
	assert_int_equal(tp_check(f->buf[1], len, 10), (size_t)-1);
	assert_int_equal(tp_check(f->buf[1] + 2 * len, len, 12), (size_t)-1);
	for (size_t i = 0; i < len; i++) /* the cancelled receive's range: nothing came */
		if (f->buf[1][len + i]) {
			fail_msg("byte %zu of the cancelled receive was written", i);
			break;
		}
	/* The last receive cancelled: the next send after it goes nowhere,
	 * the one after that meets the next receive. */
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], 0, len, &r[0]), 0);
	assert_int_equal(tcpx_p2p_xfer_cancel(r[0]), 0);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], 0, len, &s[0]), 0);
	all[0] = r[0];
	all[1] = s[0];
	finish(f, all, 2, rc);
	assert_int_equal(rc[0], TCPX_P2P_ECANCELED);
	assert_int_equal(rc[1], TCPX_P2P_ECANCELED);
	still_works(f, 13);
}

/* A send cancelled right after its post: both ends ECANCELED (the receive's
 * bytes are unspecified); the next pair is right. */
static void test_send(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_xfer *x[2];
	int rc[2];

	tp_fill(f->buf[0], BIG, 20);
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], 0, BIG, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], 0, BIG, &x[1]), 0);
	assert_int_equal(tcpx_p2p_xfer_cancel(x[1]), 0);
	finish(f, x, 2, rc);
	assert_int_equal(rc[0], TCPX_P2P_ECANCELED);
	assert_int_equal(rc[1], TCPX_P2P_ECANCELED);
	still_works(f, 21);
}

/* A receive cancelled while its chunks stream: it ends ECANCELED, the send
 * completes (its bytes were taken, and dropped), the next pair is right. */
static void test_recv_streaming(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_xfer_info info = { .struct_size = sizeof(info) };
	tcpx_p2p_xfer *x[2];
	int rc[2];

	tp_fill(f->buf[0], BIG, 30);
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], 0, BIG, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], 0, BIG, &x[1]), 0);
	do { /* until the receive is matched and numbered */
		(void)tcpx_p2p_session_progress(f->p.s[0]);
		(void)tcpx_p2p_session_progress(f->p.s[1]);
		assert_int_equal(tcpx_p2p_xfer_query(x[0], &info), 0);
	} while (!info.chunks && !info.done);
	assert_int_equal(tcpx_p2p_xfer_cancel(x[0]), 0);
	finish(f, x, 2, rc);
	/* too late only if every chunk had been posted already */
	if (rc[0] == 0)
		assert_int_equal(tp_check(f->buf[1], BIG, 30), (size_t)-1);
	else
		assert_int_equal(rc[0], TCPX_P2P_ECANCELED);
	assert_int_equal(rc[1], 0);
	still_works(f, 31);
}

/* A write with a notification cancelled: the target never delivers the
 * notification, nothing outside the range changes; a read cancelled before
 * it was answered ends ECANCELED; later one-sided transfers are right. */
static void test_onesided(void **state)
{
	struct fx *f = *state;
	const size_t off = 4096;
	tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .notif = "layer", .notif_len = 5 };
	tcpx_p2p_rdesc d;
	tcpx_p2p_rmr *rmr;
	tcpx_p2p_notif nt[4];
	tcpx_p2p_xfer *x[1];
	int rc[1], n;

	memset(f->buf[1], 0x5a, POOL);
	tp_fill(f->buf[0], BIG, 40);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], f->mr[1], 0, POOL,
					    TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &rmr), 0);
	tcpx_p2p_seg l = { f->mr[0], 0, BIG };
	tcpx_p2p_rseg r = { rmr, off, BIG };
	assert_int_equal(tcpx_p2p_write(f->p.c[0], &l, 1, &r, 1, &pr, &x[0]), 0);
	assert_int_equal(tcpx_p2p_xfer_cancel(x[0]), 0);
	finish(f, x, 1, rc);
	assert_int_equal(rc[0], TCPX_P2P_ECANCELED);
	for (size_t i = 0; i < off; i++)
		assert_int_equal(f->buf[1][i], 0x5a);
	for (size_t i = off + BIG; i < POOL; i++)
		if (f->buf[1][i] != 0x5a)
			fail_msg("byte %zu past the cancelled write's range changed", i);

	/* A read cancelled before its response. */
	tcpx_p2p_seg lr = { f->mr[0], 0, BIG };
	tcpx_p2p_rseg rr = { rmr, 0, BIG };
	assert_int_equal(tcpx_p2p_read(f->p.c[0], &lr, 1, &rr, 1, NULL, &x[0]), 0);
	assert_int_equal(tcpx_p2p_xfer_cancel(x[0]), 0);
	finish(f, x, 1, rc);
	assert_int_equal(rc[0], TCPX_P2P_ECANCELED);

	/* A write and a read after: right, and the one notification that
	 * arrives is the later write's. */
	tp_fill(f->buf[0], 1u << 20, 41);
	tcpx_p2p_seg l2 = { f->mr[0], 0, 1u << 20 };
	tcpx_p2p_rseg r2 = { rmr, 0, 1u << 20 };
	tcpx_p2p_xfer_params p2 = { .struct_size = sizeof(p2), .notif = "after", .notif_len = 5 };
	assert_int_equal(tcpx_p2p_write(f->p.c[0], &l2, 1, &r2, 1, &p2, &x[0]), 0);
	finish(f, x, 1, rc);
	assert_int_equal(rc[0], 0);
	assert_int_equal(tp_check(f->buf[1], 1u << 20, 41), (size_t)-1);
	n = 0;
	for (long round = 0; !n; round++) {
		assert_true(round < 10L * 1000 * 1000);
		(void)tcpx_p2p_session_progress(f->p.s[0]);
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], nt, 4, &n), 0);
	}
	assert_int_equal(n, 1);
	assert_int_equal(nt[0].len, 5);
	assert_memory_equal(nt[0].msg, "after", 5);
	memset(f->buf[0], 0, 1u << 20);
	assert_int_equal(tcpx_p2p_read(f->p.c[0], &l2, 1, &r2, 1, NULL, &x[0]), 0);
	finish(f, x, 1, rc);
	assert_int_equal(rc[0], 0);
	assert_int_equal(tp_check(f->buf[0], 1u << 20, 41), (size_t)-1);
	assert_int_equal(tcpx_p2p_rmr_release(rmr), 0);
	assert_int_equal(tcpx_p2p_mr_unexport(f->p.c[1], &d), 0);
}

/* Deregistration under a transfer in flight, as the NIXL backend meets it:
 * the initiator's region is EBUSY while its WRITE is pending, and free once
 * the cancelled WRITE ended; the target's region is either deregistered at
 * once (the WRITE then fails, refused) or EBUSY while the WRITE is under
 * way there, and free once it ended.  Nothing is left for the sessions. */
/* The transfers the target's connection completed, the peer's WRITEs it
 * hosted included. */
static uint64_t hosted_done(struct fx *f)
{
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };

	assert_int_equal(tcpx_p2p_conn_stats(f->p.c[1], &st), 0);
	return st.xfers_in;
}

static void test_deregister_in_flight(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_rdesc d;
	tcpx_p2p_rmr *rmr;
	tcpx_p2p_xfer *x[1];
	uint64_t before;
	bool landed;
	int rc[1], dr;

	tp_fill(f->buf[0], BIG, 50);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], f->mr[1], 0, POOL,
					    TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &rmr), 0);
	tcpx_p2p_seg l = { f->mr[0], 0, BIG };
	tcpx_p2p_rseg r = { rmr, 0, BIG };

	/* the initiator's: busy until its transfer ends (cancelled here) */
	assert_int_equal(tcpx_p2p_write(f->p.c[0], &l, 1, &r, 1, NULL, &x[0]), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(f->mr[0]), TCPX_P2P_EBUSY);
	assert_int_equal(tcpx_p2p_xfer_cancel(x[0]), 0);
	finish(f, x, 1, rc);
	assert_true(rc[0] == TCPX_P2P_ECANCELED || rc[0] == 0);
	assert_int_equal(tcpx_p2p_mr_deregister(f->mr[0]), 0);
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[0], f->buf[0], POOL, TCPX_P2P_MEM_HOST,
					      &f->mr[0]), 0);

	/* the target's: refused to the writer, busy until the write ends, or
	 * free again once the whole write landed (the passes of the peers'
	 * keepalive threads may finish it before the deregister) */
	l.mr = f->mr[0];
	before = hosted_done(f);
	assert_int_equal(tcpx_p2p_write(f->p.c[0], &l, 1, &r, 1, NULL, &x[0]), 0);
	for (int k = 0; k < 64; k++) /* let the write get under way, or not */
		(void)tcpx_p2p_session_progress(f->p.s[k & 1]);
	dr = tcpx_p2p_mr_deregister(f->mr[1]);
	assert_true(dr == 0 || dr == TCPX_P2P_EBUSY);
	/* A write the target finished is counted before it lets go of the
	 * region (under the conn's lock, which the stats wait for). */
	landed = dr == 0 && hosted_done(f) > before;
	finish(f, x, 1, rc);
	if (landed) {
		assert_int_equal(rc[0], 0);
		assert_int_equal(tp_check(f->buf[1], BIG, 50), (size_t)-1);
	} else if (dr == 0) {
		assert_int_not_equal(rc[0], 0); /* deregistered before it began */
	} else {
		/* The target's side of the WRITE may end a little after the
		 * writer's (its last chunks still consumed after its answer). */
		for (long round = 0; (dr = tcpx_p2p_mr_deregister(f->mr[1])) == TCPX_P2P_EBUSY;
		     round++) {
			assert_true(round < 50L * 1000 * 1000); /* a hang, not a measurement */
			(void)tcpx_p2p_session_progress(f->p.s[1]);
			(void)tcpx_p2p_session_progress(f->p.s[0]);
		}
		assert_int_equal(dr, 0);
	}
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[1], f->buf[1], POOL, TCPX_P2P_MEM_HOST,
					      &f->mr[1]), 0);
	assert_int_equal(tcpx_p2p_rmr_release(rmr), 0);
	still_works(f, 51);
}

/* Open file descriptors of this process. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Many pairs in flight both ways, about half of them cancelled: a receive
 * right after its post (before its send exists: the cancel always takes
 * effect), a large send right after its post (more chunks than a window:
 * always some not yet prepared), or either side at a random later moment
 * (in effect or too late, as the timing falls).  Then: the pairs nobody
 * cancelled end 0 with their bytes; the deterministic cancels end
 * ECANCELED on both sides; a receive that ends 0 holds its send's bytes;
 * every result is 0 or ECANCELED; the connection works after, with the
 * same files open. */
#define NPAIRS 2000 /* 1,000 each way */
#define HALF (POOL / 2)
enum { KEEP, RECV_AT_POST, SEND_AT_POST, LATER };
static void test_random(void **state)
{
	struct fx *f = *state;
	static tcpx_p2p_xfer *x[2 * NPAIRS];
	static int rc[2 * NPAIRS];
	static size_t off[NPAIRS], len[NPAIRS];
	static int how[NPAIRS];
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	size_t at[2] = { 0, HALF };
	int ncancelled = 0, fds = count_fds();

#define RND() (rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17, rng)
	/* pair k goes from side k % 2 to the other, in its own half; one in
	 * 100 is large (40 to 56 chunks: more than a window on each channel) */
	for (int k = 0; k < NPAIRS; k++) {
		bool large = RND() % 100 == 0;

		len[k] = large ? (5u << 19) + RND() % (1u << 20) : 1 + RND() % (32u << 10);
		off[k] = at[k % 2];
		at[k % 2] += len[k];
		assert_true(at[k % 2] <= (k % 2 ? POOL : HALF));
		how[k] = large && RND() % 2 ? SEND_AT_POST : (int)(RND() % 6);
		if (how[k] > LATER)
			how[k] = KEEP;
	}
	tp_fill(f->buf[0], HALF, 50);
	tp_fill(f->buf[1] + HALF, HALF, 52);
	memset(f->buf[1], 0, HALF);
	memset(f->buf[0] + HALF, 0, HALF);
	for (int k = 0; k < NPAIRS; k++) {
		int from = k % 2, to = !from;

		assert_int_equal(tcpx_p2p_recv(f->p.c[to], f->mr[to], off[k], len[k], &x[2 * k]), 0);
		if (how[k] == RECV_AT_POST)
			assert_int_equal(tcpx_p2p_xfer_cancel(x[2 * k]), 0);
		assert_int_equal(tcpx_p2p_send(f->p.c[from], f->mr[from], off[k], len[k],
					       &x[2 * k + 1]), 0);
		if (how[k] == SEND_AT_POST && len[k] > (2u << 20))
			assert_int_equal(tcpx_p2p_xfer_cancel(x[2 * k + 1]), 0);
		else if (how[k] == SEND_AT_POST)
			how[k] = LATER;
	}
	/* the others at random moments while driving */
	for (int k = 0; k < NPAIRS; k++) {
		if (RND() % 3 == 0) {
			(void)tcpx_p2p_session_progress(f->p.s[0]);
			(void)tcpx_p2p_session_progress(f->p.s[1]);
		}
		if (how[k] == LATER)
			assert_int_equal(tcpx_p2p_xfer_cancel(x[2 * k + (int)(RND() % 2)]), 0);
	}
	finish(f, x, 2 * NPAIRS, rc);
	for (int k = 0; k < NPAIRS; k++)
		ncancelled += rc[2 * k] == TCPX_P2P_ECANCELED || rc[2 * k + 1] == TCPX_P2P_ECANCELED;
	print_message("%d of %d pairs ended ECANCELED on a side\n", ncancelled, NPAIRS);
	for (int k = 0; k < NPAIRS; k++) {
		int r = rc[2 * k], s = rc[2 * k + 1], from = k % 2, to = !from;

		assert_true(r == 0 || r == TCPX_P2P_ECANCELED);
		assert_true(s == 0 || s == TCPX_P2P_ECANCELED);
		if (how[k] == KEEP) {
			assert_int_equal(r, 0);
			assert_int_equal(s, 0);
		} else if (how[k] != LATER) {
			assert_int_equal(r, TCPX_P2P_ECANCELED);
			assert_int_equal(s, TCPX_P2P_ECANCELED);
		}
		/* a receive that ends 0 got every byte of its send (an
		 * empty chunk would have made it ECANCELED) */
		if (r == 0 && memcmp(f->buf[to] + off[k], f->buf[from] + off[k], len[k]))
			fail_msg("pair %d: a receive that completed holds wrong bytes", k);
	}
	still_works(f, 51);
	assert_int_equal(count_fds(), fds);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unmatched_recv, setup, teardown),
		cmocka_unit_test_setup_teardown(test_send, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recv_streaming, setup, teardown),
		cmocka_unit_test_setup_teardown(test_onesided, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deregister_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
