/* Statistics (tcpx_p2p_conn_stats, tcpx_p2p_session_stats): the counters
 * equal what the test moved, on both sides, and a session keeps counting
 * a destroyed connection (the failures of its last transfers included); a
 * caller's older, smaller struct gets no byte past its struct_size.  The
 * per-channel counts show which channel each transfer started on: channel
 * 0 on an idle connection, where the last one ended behind one in flight. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

#define NX 24
#define NN 7
#define BIG (64u << 10) /* one chunk: every transfer is one plugin request */

static size_t len_of(int i)
{
	return i % 3 == 0 ? 0 : (size_t)(i * 997) % BIG + 1;
}

static void expect_side(const tcpx_p2p_stats *st, int sender, uint64_t bytes)
{
	assert_int_equal(st->conns, 1);
	assert_int_equal(sender ? st->xfers_out : st->xfers_in, NX);
	assert_int_equal(sender ? st->xfers_in : st->xfers_out, 0);
	assert_int_equal(sender ? st->bytes_out : st->bytes_in, bytes);
	assert_int_equal(sender ? st->bytes_in : st->bytes_out, 0);
	assert_int_equal(sender ? st->chunks_out : st->chunks_in, NX);
	/* One at a time, each on an idle connection: all on channel 0. */
	assert_int_equal(sender ? st->chunks_out_by_channel[0] : st->chunks_in_by_channel[0], NX);
	for (int i = 1; i < TCPX_P2P_MAX_CHANNELS; i++)
		assert_int_equal(st->chunks_out_by_channel[i] + st->chunks_in_by_channel[i], 0);
	assert_int_equal(sender ? st->notifs_out : st->notifs_in, NN);
	assert_int_equal(sender ? st->notifs_in : st->notifs_out, 0);
	assert_int_equal(st->failed, 0);
	assert_int_equal(st->xfer_samples, NX);
	/* Send requests are timed on the side that sends them. */
	assert_int_equal(st->req_samples, sender ? NX : 0);
	assert_true(st->xfer_ns_p50 > 0);
	assert_true(st->xfer_ns_p50 <= st->xfer_ns_p90 && st->xfer_ns_p90 <= st->xfer_ns_p99);
	if (sender)
		assert_true(st->req_ns_p50 <= st->req_ns_p90 && st->req_ns_p90 <= st->req_ns_p99);
}

static void test_counts(void **state)
{
	struct tp_pair p;
	static unsigned char src[BIG], dst[BIG];
	tcpx_p2p_mr *smr, *dmr;
	tcpx_p2p_xfer *x[2];
	tcpx_p2p_stats st[2], old;
	tcpx_p2p_notif n[NN];
	uint64_t bytes = 0;
	int got = 0, k, i;

	(void)state;
	assert_int_equal(tp_pair_open(&p, NULL, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], src, BIG, TCPX_P2P_MEM_HOST, &smr), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[1], dst, BIG, TCPX_P2P_MEM_HOST, &dmr), 0);
	for (i = 0; i < NX; i++) {
		assert_int_equal(tcpx_p2p_send(p.c[0], smr, 0, len_of(i), &x[0]), 0);
		assert_int_equal(tcpx_p2p_recv(p.c[1], dmr, 0, len_of(i), &x[1]), 0);
		assert_int_equal(tp_complete_all(x, 2), 0);
		bytes += len_of(i);
	}
	for (i = 0; i < NN; i++)
		assert_int_equal(tcpx_p2p_notify(p.c[0], "stats", 5), 0);
	for (int tries = 0; got < NN && tries < 1000000; tries++) {
		tcpx_p2p_session_progress(p.s[0]);
		assert_int_equal(tcpx_p2p_notif_poll(p.s[1], n + got, NN - got, &k), 0);
		got += k;
	}
	assert_int_equal(got, NN);

	for (i = 0; i < 2; i++) {
		memset(&st[i], 0, sizeof(st[i]));
		st[i].struct_size = sizeof(st[i]);
		assert_int_equal(tcpx_p2p_conn_stats(p.c[i], &st[i]), 0);
		assert_int_equal(st[i].struct_size, sizeof(st[i]));
		expect_side(&st[i], i == 0, bytes);
	}
	/* A session adds its connections up, and keeps a destroyed one's. */
	assert_int_equal(tcpx_p2p_session_stats(p.s[0], &st[0]), 0);
	expect_side(&st[0], 1, bytes);

	/* An older caller's struct ends earlier: nothing is written past it. */
	memset(&old, 0x5a, sizeof(old));
	old.struct_size = offsetof(tcpx_p2p_stats, bytes_out);
	assert_int_equal(tcpx_p2p_conn_stats(p.c[0], &old), 0);
	assert_int_equal(old.struct_size, offsetof(tcpx_p2p_stats, bytes_out));
	assert_int_equal(old.xfers_out, NX);
	assert_int_equal(old.bytes_out, 0x5a5a5a5a5a5a5a5aull);
	old.struct_size = sizeof(size_t);
	assert_int_equal(tcpx_p2p_conn_stats(p.c[0], &old), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_conn_stats(NULL, &st[0]), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_session_stats(p.s[0], NULL), TCPX_P2P_EINVAL);

	assert_int_equal(tcpx_p2p_conn_destroy(p.c[0]), 0);
	p.c[0] = NULL;
	assert_int_equal(tcpx_p2p_session_stats(p.s[0], &st[0]), 0);
	expect_side(&st[0], 1, bytes);
	assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(dmr), 0);
	tp_pair_close(&p);
}

/* A receive the peer has not matched moves nothing: reported stalled (the
 * query and one count), not failed, until the send comes. */
static void test_stall(void **state)
{
	struct tp_pair p;
	tcpx_p2p_config cfg;
	static unsigned char src[BIG], dst[BIG];
	tcpx_p2p_mr *smr, *dmr;
	tcpx_p2p_xfer *x[2];
	tcpx_p2p_xfer_info info = { .struct_size = sizeof(info) };
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };

	(void)state;
	tcpx_p2p_config_init(&cfg);
	cfg.stall_ms = 20;
	assert_int_equal(tp_pair_open(&p, &cfg, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], src, BIG, TCPX_P2P_MEM_HOST, &smr), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[1], dst, BIG, TCPX_P2P_MEM_HOST, &dmr), 0);
	assert_int_equal(tcpx_p2p_recv(p.c[1], dmr, 0, BIG, &x[1]), 0);
	for (long tries = 0; !info.stalled; tries++) {
		assert_true(tries < 100000000); /* a hang limit, not a measure */
		assert_int_equal(tcpx_p2p_progress(p.c[1]), 0);
		assert_int_equal(tcpx_p2p_xfer_query(x[1], &info), 0);
		assert_int_equal(info.done, 0);
	}
	assert_int_equal(info.chunks_done, 0);
	assert_int_equal(tcpx_p2p_conn_stats(p.c[1], &st), 0);
	assert_int_equal(st.stalls, 1);
	assert_int_equal(st.failed, 0);
	/* The send comes: it moves, completes, and is no longer stalled. */
	assert_int_equal(tcpx_p2p_send(p.c[0], smr, 0, BIG, &x[0]), 0);
	assert_int_equal(tcpx_p2p_xfer_query(x[0], &info), 0);
	assert_int_equal(info.stalled, 0);
	assert_int_equal(tcpx_p2p_xfer_query(x[1], &info), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_int_equal(tcpx_p2p_conn_stats(p.c[1], &st), 0);
	assert_int_equal(st.stalls, 1);
	assert_int_equal(st.xfers_in, 1);
	info.struct_size = 0;
	assert_int_equal(tcpx_p2p_xfer_query(NULL, &info), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(dmr), 0);
	tp_pair_close(&p);
}

static int closing(tcpx_p2p_session *s, uint64_t *unclean)
{
	tcpx_p2p_session_info info = { .struct_size = sizeof(info) };

	assert_int_equal(tcpx_p2p_session_query(s, &info), 0);
	*unclean = info.unclean_closes;
	return info.conns_closing;
}

/* A receive with a deadline whose peer never sends: it fails with
 * ETIMEDOUT, and its connection with it, closed with the peer (the peer's
 * side sees ECLOSED) cleanly: no comm is closed with requests posted.  A
 * transfer that ends before its deadline is untouched. */
static void test_deadline(void **state)
{
	struct tp_pair p;
	static unsigned char src[BIG], dst[BIG];
	tcpx_p2p_mr *smr, *dmr;
	tcpx_p2p_xfer *x[2];
	uint64_t unclean[2];
	int rc, rc0;

	(void)state;
	assert_int_equal(tp_pair_open(&p, NULL, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], src, BIG, TCPX_P2P_MEM_HOST, &smr), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[1], dst, BIG, TCPX_P2P_MEM_HOST, &dmr), 0);
	/* In time: nothing happens (the deadline is a hang limit here). */
	assert_int_equal(tcpx_p2p_recv(p.c[1], dmr, 0, BIG, &x[1]), 0);
	assert_int_equal(tcpx_p2p_xfer_deadline(x[1], 60000), 0);
	assert_int_equal(tcpx_p2p_send(p.c[0], smr, 0, BIG, &x[0]), 0);
	assert_int_equal(tcpx_p2p_xfer_deadline(x[0], 60000), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);

	/* Past it: the receive and its connection fail, closed with the peer. */
	assert_int_equal(tcpx_p2p_recv(p.c[1], dmr, 0, BIG, &x[1]), 0);
	assert_int_equal(tcpx_p2p_xfer_deadline(x[1], 0), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_xfer_deadline(NULL, 20), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_xfer_deadline(x[1], 20), 0);
	rc = tcpx_p2p_wait(x[1], TP_TEST_TIMEOUT_MS);
	assert_int_equal(rc, TCPX_P2P_ETIMEDOUT);
	assert_int_equal(tcpx_p2p_progress(p.c[1]), TCPX_P2P_ETIMEDOUT);
	assert_non_null(strstr(tcpx_p2p_last_error(), "deadline"));
	assert_int_equal(tcpx_p2p_xfer_release(x[1]), 0);
	for (long tries = 0; (rc0 = tcpx_p2p_progress(p.c[0])) == 0; tries++) {
		assert_true(tries < 100000000);
		tcpx_p2p_session_progress(p.s[1]);
	}
	assert_int_equal(rc0, TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[0]), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[1]), 0);
	p.c[0] = p.c[1] = NULL;
	for (long tries = 0; closing(p.s[0], &unclean[0]) || closing(p.s[1], &unclean[1]);
	     tries++) {
		assert_true(tries < 100000000);
		tcpx_p2p_session_progress(p.s[0]);
		tcpx_p2p_session_progress(p.s[1]);
	}
	assert_int_equal(unclean[0], 0);
	assert_int_equal(unclean[1], 0);
	assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(dmr), 0);
	tp_pair_close(&p);
}

/* Transfers still pending when their connection is destroyed fail
 * (ECLOSED), and the session counts those failures with the rest. */
static void test_destroy_pending(void **state)
{
	struct tp_pair p;
	static unsigned char dst[BIG];
	tcpx_p2p_mr *dmr;
	tcpx_p2p_xfer *x[2];
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };

	(void)state;
	assert_int_equal(tp_pair_open(&p, NULL, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[1], dst, BIG, TCPX_P2P_MEM_HOST, &dmr), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_recv(p.c[1], dmr, 0, BIG, &x[i]), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[1]), 0);
	p.c[1] = NULL;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_wait(x[i], 0), TCPX_P2P_ECLOSED);
		assert_int_equal(tcpx_p2p_xfer_release(x[i]), 0);
	}
	assert_int_equal(tcpx_p2p_session_stats(p.s[1], &st), 0);
	assert_int_equal(st.conns, 1);
	assert_int_equal(st.failed, 2);
	assert_int_equal(st.failed_by[-TCPX_P2P_ECLOSED], 2);
	assert_int_equal(tcpx_p2p_mr_deregister(dmr), 0);
	tp_pair_close(&p);
}

#define CH 4                /* channels */
#define CB (4u << 20)       /* chunk_bytes */
#define LONE 5              /* one-chunk sends, one at a time */
#define BIG_CHUNKS 17       /* a send no socket buffers hold while no receive is posted */
#define BEHIND 3            /* one-chunk sends posted behind it */

static void expect_channels(tcpx_p2p_conn *c, int sender, const uint64_t want[CH])
{
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };

	assert_int_equal(tcpx_p2p_conn_stats(c, &st), 0);
	for (int i = 0; i < TCPX_P2P_MAX_CHANNELS; i++) {
		uint64_t got = sender ? st.chunks_out_by_channel[i] : st.chunks_in_by_channel[i];

		assert_int_equal(got, i < CH ? want[i] : 0);
	}
}

/* Where each transfer starts, seen in the per-channel counts on both sides
 * (the receiver numbers what the sender announced): LONE sends one at a
 * time all start on channel 0; a send of BIG_CHUNKS (17: channels 0,1,2,3,0,...)
 * starts there too, and the BEHIND sends posted while it is in flight
 * continue where it ended (channels 1, 2, 3).  Every byte is checked.  Then
 * the same with the receiver posting nothing and the sender's connection
 * destroyed: the close handshake accepts the per-channel counts that
 * skipped chunk numbers make, and (strict tags) the tags of its requests
 * past them (no unclean close). */
static void test_start_channel(void **state)
{
	static const uint64_t want[CH] = { LONE + 5, 4 + 1, 4 + 1, 4 + 1 };
	const size_t big = (size_t)BIG_CHUNKS * CB, small = 4096;
	struct tp_pair p;
	tcpx_p2p_config cfg;
	unsigned char *src = malloc(big), *dst = malloc(big + BEHIND * small);
	tcpx_p2p_mr *smr, *dmr;
	tcpx_p2p_xfer *x[2 * (BEHIND + 1)];
	uint64_t unclean[2];
	int i, rc0;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	tcpx_p2p_config_init(&cfg);
	cfg.num_channels = CH;
	cfg.chunk_bytes = CB;
	assert_int_equal(tp_pair_open(&p, &cfg, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], src, big, TCPX_P2P_MEM_HOST, &smr), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[1], dst, big + BEHIND * small,
					      TCPX_P2P_MEM_HOST, &dmr), 0);
	tp_fill(src, big, 31);
	for (i = 0; i < LONE; i++) {
		memset(dst, 0, small);
		assert_int_equal(tcpx_p2p_send(p.c[0], smr, (size_t)i * small, small, &x[0]), 0);
		assert_int_equal(tcpx_p2p_recv(p.c[1], dmr, 0, small, &x[1]), 0);
		assert_int_equal(tp_complete_all(x, 2), 0);
		assert_int_equal(memcmp(dst, src + (size_t)i * small, small), 0);
	}
	/* The receives come only after every send was posted. */
	assert_int_equal(tcpx_p2p_send(p.c[0], smr, 0, big, &x[0]), 0);
	for (i = 1; i <= BEHIND; i++)
		assert_int_equal(tcpx_p2p_send(p.c[0], smr, (size_t)i * small, small, &x[i]), 0);
	memset(dst, 0, big + BEHIND * small);
	assert_int_equal(tcpx_p2p_recv(p.c[1], dmr, 0, big, &x[BEHIND + 1]), 0);
	for (i = 1; i <= BEHIND; i++)
		assert_int_equal(tcpx_p2p_recv(p.c[1], dmr, big + (size_t)(i - 1) * small, small,
					       &x[BEHIND + 1 + i]), 0);
	assert_int_equal(tp_complete_all(x, 2 * (BEHIND + 1)), 0);
	assert_int_equal(memcmp(dst, src, big), 0);
	for (i = 1; i <= BEHIND; i++)
		assert_int_equal(memcmp(dst + big + (size_t)(i - 1) * small, src + (size_t)i * small,
					small), 0);
	expect_channels(p.c[0], 1, want);
	expect_channels(p.c[1], 0, want);

	/* One more lone send (the stream's next number is then 41, on channel
	 * 1), then sends nobody receives: the big one starts on channel 0 at
	 * 44, so the close's requests on channels 1-3 follow skipped numbers
	 * (with strict tags, test_stats.strict_tags, they must still meet the
	 * peer's with equal tags). */
	assert_int_equal(tcpx_p2p_send(p.c[0], smr, 0, small, &x[0]), 0);
	assert_int_equal(tcpx_p2p_recv(p.c[1], dmr, 0, small, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_int_equal(tcpx_p2p_send(p.c[0], smr, 0, big, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(p.c[0], smr, 0, small, &x[1]), 0);
	for (i = 0; i < 100; i++)
		assert_int_equal(tcpx_p2p_progress(p.c[0]), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[0]), 0);
	p.c[0] = NULL;
	for (i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_wait(x[i], 0), TCPX_P2P_ECLOSED);
		assert_int_equal(tcpx_p2p_xfer_release(x[i]), 0);
	}
	for (long tries = 0; (rc0 = tcpx_p2p_progress(p.c[1])) == 0; tries++) {
		assert_true(tries < 100000000); /* a hang limit, not a measure */
		tcpx_p2p_session_progress(p.s[0]);
	}
	assert_int_equal(rc0, TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[1]), 0);
	p.c[1] = NULL;
	for (long tries = 0; closing(p.s[0], &unclean[0]) + closing(p.s[1], &unclean[1]); tries++) {
		assert_true(tries < 100000000);
		tcpx_p2p_session_progress(p.s[0]);
		tcpx_p2p_session_progress(p.s[1]);
	}
	assert_int_equal(unclean[0] + unclean[1], 0);
	assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(dmr), 0);
	tp_pair_close(&p);
	free(src);
	free(dst);
}

/* Receives ahead (stream.c): over a plugin that receives into bounce pages
 * (TCPX_EMU_BOUNCE=host or device), every chunk of transfers made one at a
 * time lands in a receive posted before its transfer's announcement was
 * matched, on 1 and 4 channels, each transfer's bytes checked; then the
 * connection closes clean with those receives posted (the peer meets them
 * with empty sends).  Where the plugin writes receives in place, or a test
 * build is told not to post ahead, none is. */
#define AHEAD_ROUNDS 6
static void test_ahead(void **state)
{
	static const size_t sizes[] = { 4096, 256u << 10, 1u << 20 };
	const char *mode = getenv("TCPX_EMU_BOUNCE");
	/* TCPX_P2P_TEST_NO_AHEAD (test builds): receives posted at the
	 * announcement, as before receives ahead */
	bool bounce = mode && (!strcmp(mode, "host") || !strcmp(mode, "device")) &&
		      !getenv("TCPX_P2P_TEST_NO_AHEAD");
	const size_t most = 1u << 20;
	unsigned char *src = malloc(most), *dst = malloc(most);
	tcpx_p2p_stats st[2];
	tcpx_p2p_config cfg;
	tcpx_p2p_mr *smr, *dmr;
	tcpx_p2p_xfer *x[2];
	struct tp_pair p;
	uint64_t unclean[2];
	int n = 0;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	for (int ch = 1; ch <= 4; ch += 3) {
		tcpx_p2p_config_init(&cfg);
		cfg.num_channels = ch;
		cfg.chunk_bytes = 128u << 10; /* up to 8 chunks per channel */
		assert_int_equal(tp_pair_open(&p, &cfg, 0), 0);
		assert_int_equal(tcpx_p2p_mr_register(p.s[0], src, most, TCPX_P2P_MEM_HOST, &smr),
				 0);
		assert_int_equal(tcpx_p2p_mr_register(p.s[1], dst, most, TCPX_P2P_MEM_HOST, &dmr),
				 0);
		for (int r = 0; r < AHEAD_ROUNDS; r++) {
			for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
				tp_fill(src, sizes[k], (uint64_t)++n);
				memset(dst, 0, sizes[k]);
				assert_int_equal(tcpx_p2p_recv(p.c[1], dmr, 0, sizes[k], &x[1]), 0);
				assert_int_equal(tcpx_p2p_send(p.c[0], smr, 0, sizes[k], &x[0]), 0);
				assert_int_equal(tp_complete_all(x, 2), 0);
				assert_int_equal(tp_check(dst, sizes[k], (uint64_t)n), (size_t)-1);
			}
		}
		for (int i = 0; i < 2; i++) {
			memset(&st[i], 0, sizeof(st[i]));
			st[i].struct_size = sizeof(st[i]);
			assert_int_equal(tcpx_p2p_conn_stats(p.c[i], &st[i]), 0);
		}
		assert_true(st[1].chunks_in > (uint64_t)AHEAD_ROUNDS * 3);
		assert_int_equal(st[1].chunks_in_ahead, bounce ? st[1].chunks_in : 0);
		assert_int_equal(st[0].chunks_in_ahead, 0);
		/* The receives still posted ahead close clean. */
		for (int i = 0; i < 2; i++) {
			assert_int_equal(tcpx_p2p_conn_destroy(p.c[i]), 0);
			p.c[i] = NULL;
		}
		for (long tries = 0; closing(p.s[0], &unclean[0]) + closing(p.s[1], &unclean[1]);
		     tries++) {
			assert_true(tries < 100000000); /* a hang limit, not a measure */
			tcpx_p2p_session_progress(p.s[0]);
			tcpx_p2p_session_progress(p.s[1]);
		}
		assert_int_equal(unclean[0] + unclean[1], 0);
		assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
		assert_int_equal(tcpx_p2p_mr_deregister(dmr), 0);
		tp_pair_close(&p);
	}
	free(src);
	free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_ahead),
					    cmocka_unit_test(test_counts),
					    cmocka_unit_test(test_stall),
					    cmocka_unit_test(test_deadline),
					    cmocka_unit_test(test_destroy_pending),
					    cmocka_unit_test(test_start_channel) };

	return cmocka_run_group_tests_name("stats", tests, NULL, NULL) ? 1 : 0;
}
