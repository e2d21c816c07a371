/* Transfers posted on a CUDA event (tcpx_p2p_xfer_params.event), on the CPU:
 * two sessions over the emulator, the device seam replaced by fake_dev.c,
 * whose "events" the test completes or fails by hand.  Checked: nothing of
 * a gated write is announced or sent before its event completed, then every
 * byte lands; a transfer and a notification posted after a gated one wait
 * behind it; a failed event fails its transfer alone (ECUDA) and those
 * behind it go on; closing a connection fails its gated transfers and lets
 * go of their regions; a notification on the last of several gated writes,
 * whose events complete last-first, arrives after all their bytes; a gated
 * read; a gated write past its deadline fails alone; what the post refuses
 * at once (a receive's event, a session without a GPU, EAGAIN for credits
 * and control bytes that gated writes reserved). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/conn.h"
#include "fake_dev.h"
#include "pair.h"
#include "tcpx_p2p.h"

#define LAYERS 4
#define LAYER (192u << 10) /* 3 chunks of 64 KiB each */
#define OLD 0x5a
/* Passes that saw the event pending before the test looks: each pass of the
 * initiator queries it once, so this many passes all held the transfer. */
#define LOOKS 64
#define DRIVES 2000000L /* a bound on the drive loops: a hang fails, never a wait */

struct fx {
	struct tp_pair p;
	unsigned char *src, *dst;
	tcpx_p2p_mr *smr, *dmr;
	tcpx_p2p_rmr *rmr;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tcpx_p2p_config cfg;
	tcpx_p2p_rdesc d;
	size_t len = (size_t)LAYERS * LAYER;

	assert_non_null(f);
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.gpu = 0; /* the fake device's */
	cfg.chunk_bytes = 64u << 10;
	cfg.num_channels = 2;
	cfg.peer_max_notifs = 4; /* few credits: test_eagain_at_post runs out */
	assert_int_equal(tp_pair_open(&f->p, &cfg, 0), 0);
	f->src = malloc(len);
	f->dst = malloc(len);
	assert_non_null(f->src);
	assert_non_null(f->dst);
	tp_fill(f->src, len, 7);
	memset(f->dst, OLD, len);
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[0], f->src, len, TCPX_P2P_MEM_HOST, &f->smr),
			 0);
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[1], f->dst, len, TCPX_P2P_MEM_HOST, &f->dmr),
			 0);
	assert_int_equal(tcpx_p2p_mr_export(f->p.c[1], f->dmr, 0, len, TCPX_P2P_ACCESS_WRITE |
					    TCPX_P2P_ACCESS_READ, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(f->p.c[0], &d, &f->rmr), 0);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	long n = 0;
	int rc;

	assert_int_equal(tcpx_p2p_rmr_release(f->rmr), 0);
	if (f->smr)
		assert_int_equal(tcpx_p2p_mr_deregister(f->smr), 0);
	/* A read ends when its bytes are here, which can be before the target's
	 * side of it (the in-read holding dmr) saw its last send complete. */
	while ((rc = tcpx_p2p_mr_deregister(f->dmr)) == TCPX_P2P_EBUSY) {
		assert_true(++n < DRIVES);
		assert_int_equal(tcpx_p2p_progress(f->p.c[1]), 0);
	}
	assert_int_equal(rc, 0);
	tp_pair_close(&f->p);
	free(f->src);
	free(f->dst);
	free(f);
	return 0;
}

/* Write layer i (notif: NULL or a string) gated on ev (NULL: none). */
static tcpx_p2p_xfer *write_layer(struct fx *f, int i, struct fake_uevent *ev, const char *notif)
{
	tcpx_p2p_seg ls = { f->smr, (size_t)i * LAYER, LAYER };
	tcpx_p2p_rseg rs = { f->rmr, (size_t)i * LAYER, LAYER };
	tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .event = ev };
	tcpx_p2p_xfer *x = NULL;

	if (notif) {
		pr.notif = notif;
		pr.notif_len = strlen(notif);
	}
	assert_int_equal(tcpx_p2p_write(f->p.c[0], &ls, 1, &rs, 1, &pr, &x), 0);
	return x;
}

/* Items this side announced so far (under the lock: passes run elsewhere). */
static uint64_t announced(tcpx_p2p_conn *c)
{
	uint64_t n;

	pthread_mutex_lock(&c->lock);
	n = c->next_id;
	pthread_mutex_unlock(&c->lock);
	return n;
}

static uint64_t bytes_in(tcpx_p2p_conn *c)
{
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };

	assert_int_equal(tcpx_p2p_conn_stats(c, &st), 0);
	return st.bytes_in;
}

/* Drive both sides until ev has been looked at LOOKS more times. */
static void drive_looks(struct fx *f, struct fake_uevent *ev)
{
	unsigned long until = __atomic_load_n(&ev->queries, __ATOMIC_RELAXED) + LOOKS;
	long n = 0;

	while (__atomic_load_n(&ev->queries, __ATOMIC_RELAXED) < until) {
		assert_true(++n < DRIVES);
		assert_int_equal(tcpx_p2p_progress(f->p.c[0]), 0);
		assert_int_equal(tcpx_p2p_progress(f->p.c[1]), 0);
	}
}

static int done_now(tcpx_p2p_xfer *x)
{
	int done = 0;

	(void)tcpx_p2p_test(x, &done);
	return done;
}

/* Drive both sides until x ends; its result. */
static int finish(struct fx *f, tcpx_p2p_xfer *x)
{
	long n = 0;
	int done = 0, rc;

	for (;;) {
		rc = tcpx_p2p_test(x, &done);
		if (rc || done)
			break;
		assert_true(++n < DRIVES);
		(void)tcpx_p2p_progress(f->p.c[1]);
	}
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	return rc;
}

static void layer_is(struct fx *f, int i, int right)
{
	size_t at = (size_t)i * LAYER, k;

	if (right) {
		/* the pattern of seed 7 at this offset of src */
		assert_int_equal(memcmp(f->dst + at, f->src + at, LAYER), 0);
		return;
	}
	for (k = 0; k < LAYER; k++)
		if (f->dst[at + k] != OLD)
			fail_msg("layer %d byte %zu written before its event", i, k);
}

/* Nothing of a gated write is announced or sent while its event is
 * pending, however many passes look; once it completes, every byte. */
static void test_held_until_event(void **state)
{
	struct fx *f = *state;
	struct fake_uevent ev = { FAKE_EV_PENDING, 0 };
	uint64_t ids = announced(f->p.c[0]);
	tcpx_p2p_xfer *x = write_layer(f, 0, &ev, NULL);

	drive_looks(f, &ev);
	assert_int_equal(announced(f->p.c[0]), ids);
	assert_int_equal(bytes_in(f->p.c[1]), 0);
	assert_false(done_now(x));
	layer_is(f, 0, 0);
	fake_event_set(&ev, FAKE_EV_DONE);
	assert_int_equal(finish(f, x), 0);
	assert_int_equal(announced(f->p.c[0]), ids + 1);
	layer_is(f, 0, 1);
}

/* A write without an event and a notification posted after a gated write
 * wait behind it; all go once its event completed, the notification after
 * both writes' bytes. */
static void test_later_waits(void **state)
{
	struct fx *f = *state;
	struct fake_uevent ev = { FAKE_EV_PENDING, 0 };
	uint64_t ids = announced(f->p.c[0]);
	tcpx_p2p_xfer *x0 = write_layer(f, 0, &ev, NULL);
	tcpx_p2p_xfer *x1 = write_layer(f, 1, NULL, NULL);
	tcpx_p2p_notif n;
	long loops = 0;
	int got = 0;

	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "after", 5), 0);
	drive_looks(f, &ev);
	assert_int_equal(announced(f->p.c[0]), ids);
	assert_false(done_now(x1));
	assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], &n, 1, &got), 0);
	assert_int_equal(got, 0);
	layer_is(f, 1, 0);
	fake_event_set(&ev, FAKE_EV_DONE);
	while (!got) {
		assert_true(++loops < DRIVES);
		(void)tcpx_p2p_progress(f->p.c[0]);
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], &n, 1, &got), 0);
	}
	assert_int_equal(n.len, 5);
	assert_memory_equal(n.msg, "after", 5);
	layer_is(f, 0, 1);
	layer_is(f, 1, 1);
	assert_int_equal(finish(f, x0), 0);
	assert_int_equal(finish(f, x1), 0);
}

/* A failed event fails its write alone, with ECUDA naming the event; the
 * writes behind it (gated and not) complete with every byte, and nothing
 * of the failed one is written. */
static void test_failed_event(void **state)
{
	struct fx *f = *state;
	struct fake_uevent e0 = { FAKE_EV_PENDING, 0 }, e1 = { FAKE_EV_PENDING, 0 };
	tcpx_p2p_xfer *x0 = write_layer(f, 0, &e0, NULL);
	tcpx_p2p_xfer *x1 = write_layer(f, 1, &e1, NULL);
	tcpx_p2p_xfer *x2 = write_layer(f, 2, NULL, NULL);

	drive_looks(f, &e0);
	fake_event_set(&e0, FAKE_EV_FAILED);
	assert_int_equal(finish(f, x0), TCPX_P2P_ECUDA);
	assert_non_null(strstr(tcpx_p2p_last_error(), "event"));
	drive_looks(f, &e1);
	assert_false(done_now(x2));
	fake_event_set(&e1, FAKE_EV_DONE);
	assert_int_equal(finish(f, x1), 0);
	assert_int_equal(finish(f, x2), 0);
	layer_is(f, 0, 0);
	layer_is(f, 1, 1);
	layer_is(f, 2, 1);
	assert_int_equal(tcpx_p2p_progress(f->p.c[0]), 0); /* the conn is fine */
}

/* A gated write cancelled before its event completed ends ECANCELED at
 * once, unannounced (the target hears nothing of it); the gated write
 * behind it goes out when its own event completes. */
static void test_cancel_gated(void **state)
{
	struct fx *f = *state;
	struct fake_uevent e0 = { FAKE_EV_PENDING, 0 }, e1 = { FAKE_EV_PENDING, 0 };
	tcpx_p2p_xfer *x0 = write_layer(f, 0, &e0, "never");
	tcpx_p2p_xfer *x1 = write_layer(f, 1, &e1, NULL);
	uint64_t before = announced(f->p.c[0]);
	int done = 0;

	drive_looks(f, &e0);
	assert_int_equal(tcpx_p2p_xfer_cancel(x0), 0);
	/* ended at once: no pass needed */
	assert_int_equal(tcpx_p2p_test(x0, &done), TCPX_P2P_ECANCELED);
	assert_int_equal(finish(f, x0), TCPX_P2P_ECANCELED);
	fake_event_set(&e1, FAKE_EV_DONE);
	assert_int_equal(finish(f, x1), 0);
	assert_int_equal(announced(f->p.c[0]) - before, 1); /* x1's alone */
	layer_is(f, 0, 0);
	layer_is(f, 1, 1);
	fake_event_set(&e0, FAKE_EV_DONE); /* too late: nothing happens */
	assert_int_equal(tcpx_p2p_progress(f->p.c[0]), 0);
	layer_is(f, 0, 0);
}

/* A gated send that will not carry its bytes keeps its place among the
 * sends: receives R0, R1 posted; S0 gated on a pending event, S1 behind it
 * without one; S0 cancelled (a, with cancel) or its event failed (b): S0
 * goes out empty, R0 ends ECANCELED with nothing written, and R1 gets S1's
 * bytes — never R0 (the k-th send meets the k-th receive). */
static void gated_send_keeps_place(struct fx *f, int fail_event)
{
	struct fake_uevent ev = { FAKE_EV_PENDING, 0 };
	tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .event = &ev };
	tcpx_p2p_seg s0 = { f->smr, 0, LAYER }, s1 = { f->smr, LAYER, LAYER };
	tcpx_p2p_xfer *r0, *r1, *x0, *x1;
	int rc;

	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->dmr, 0, LAYER, &r0), 0);
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->dmr, LAYER, LAYER, &r1), 0);
	assert_int_equal(tcpx_p2p_sendv(f->p.c[0], &s0, 1, &pr, &x0), 0);
	assert_int_equal(tcpx_p2p_sendv(f->p.c[0], &s1, 1, NULL, &x1), 0);
	drive_looks(f, &ev);
	if (fail_event)
		fake_event_set(&ev, FAKE_EV_FAILED);
	else
		assert_int_equal(tcpx_p2p_xfer_cancel(x0), 0);
	rc = finish(f, x0);
	assert_int_equal(rc, fail_event ? TCPX_P2P_ECUDA : TCPX_P2P_ECANCELED);
	assert_int_equal(finish(f, x1), 0);
	assert_int_equal(finish(f, r1), 0);
	assert_int_equal(finish(f, r0), TCPX_P2P_ECANCELED);
	layer_is(f, 0, 0);
	assert_int_equal(memcmp(f->dst + LAYER, f->src + LAYER, LAYER), 0);
	assert_int_equal(tcpx_p2p_progress(f->p.c[0]), 0); /* the conn is fine */
}

static void test_cancel_gated_send(void **state)
{
	gated_send_keeps_place(*state, 0);
}

static void test_failed_event_send(void **state)
{
	gated_send_keeps_place(*state, 1);
}

/* Destroying a connection fails its gated transfers (ECLOSED) and lets go
 * of their regions at once: the source deregisters. */
static void test_close_gated(void **state)
{
	struct fx *f = *state;
	struct fake_uevent ev = { FAKE_EV_PENDING, 0 };
	tcpx_p2p_xfer *x0 = write_layer(f, 0, &ev, NULL);
	tcpx_p2p_xfer *x1 = write_layer(f, 1, NULL, "never");

	drive_looks(f, &ev);
	assert_int_equal(tcpx_p2p_mr_deregister(f->smr), TCPX_P2P_EBUSY);
	assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[0]), 0);
	f->p.c[0] = NULL;
	assert_int_equal(tcpx_p2p_wait(x0, TP_TEST_TIMEOUT_MS), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_wait(x1, TP_TEST_TIMEOUT_MS), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(x0), 0);
	assert_int_equal(tcpx_p2p_xfer_release(x1), 0);
	fake_event_set(&ev, FAKE_EV_DONE);
	assert_int_equal(tcpx_p2p_mr_deregister(f->smr), 0);
	f->smr = NULL;
	layer_is(f, 0, 0);
	layer_is(f, 1, 0);
}

/* Layer-wise push: every layer's write posted before its event completes,
 * the notification on the last; the events complete last-first, one at a
 * time.  No write and no notification overtakes an earlier layer; the
 * notification finds every layer's bytes in place. */
static void test_notif_on_last(void **state)
{
	struct fx *f = *state;
	struct fake_uevent ev[LAYERS];
	tcpx_p2p_xfer *x[LAYERS];
	uint64_t ids = announced(f->p.c[0]);
	tcpx_p2p_notif n;
	long loops = 0;
	int i, got = 0;

	for (i = 0; i < LAYERS; i++) {
		ev[i] = (struct fake_uevent){ FAKE_EV_PENDING, 0 };
		x[i] = write_layer(f, i, &ev[i], i == LAYERS - 1 ? "kv ready" : NULL);
	}
	for (i = LAYERS - 1; i > 0; i--) {
		fake_event_set(&ev[i], FAKE_EV_DONE);
		drive_looks(f, &ev[0]);
		assert_int_equal(announced(f->p.c[0]), ids);
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], &n, 1, &got), 0);
		assert_int_equal(got, 0);
	}
	assert_int_equal(bytes_in(f->p.c[1]), 0);
	fake_event_set(&ev[0], FAKE_EV_DONE);
	while (!got) {
		assert_true(++loops < DRIVES);
		(void)tcpx_p2p_progress(f->p.c[0]);
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], &n, 1, &got), 0);
	}
	assert_int_equal(n.len, 8);
	assert_memory_equal(n.msg, "kv ready", 8);
	for (i = 0; i < LAYERS; i++)
		layer_is(f, i, 1);
	for (i = 0; i < LAYERS; i++)
		assert_int_equal(finish(f, x[i]), 0);
	assert_int_equal(announced(f->p.c[0]), ids + LAYERS);
}

/* A read gated on its event: the request waits; then the bytes land. */
static void test_read_gated(void **state)
{
	struct fx *f = *state;
	struct fake_uevent ev = { FAKE_EV_PENDING, 0 };
	tcpx_p2p_seg ls = { f->smr, 0, LAYER };
	tcpx_p2p_rseg rs = { f->rmr, LAYER, LAYER };
	tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .event = &ev };
	uint64_t ids = announced(f->p.c[0]);
	tcpx_p2p_xfer *x;

	tp_fill(f->dst + LAYER, LAYER, 99);
	assert_int_equal(tcpx_p2p_read(f->p.c[0], &ls, 1, &rs, 1, &pr, &x), 0);
	drive_looks(f, &ev);
	assert_int_equal(announced(f->p.c[0]), ids);
	assert_int_equal(tp_check(f->src, LAYER, 7), (size_t)-1);
	fake_event_set(&ev, FAKE_EV_DONE);
	assert_int_equal(finish(f, x), 0);
	assert_memory_equal(f->src, f->dst + LAYER, LAYER);
}

/* A gated write past its deadline fails alone (ETIMEDOUT, nothing sent);
 * the connection goes on: the next write completes. */
static void test_deadline_gated(void **state)
{
	struct fx *f = *state;
	struct fake_uevent ev = { FAKE_EV_PENDING, 0 };
	tcpx_p2p_xfer *x0 = write_layer(f, 0, &ev, NULL);
	tcpx_p2p_xfer *x1;

	assert_int_equal(tcpx_p2p_xfer_deadline(x0, 1), 0);
	assert_int_equal(finish(f, x0), TCPX_P2P_ETIMEDOUT);
	assert_non_null(strstr(tcpx_p2p_last_error(), "gated"));
	x1 = write_layer(f, 1, NULL, NULL);
	assert_int_equal(finish(f, x1), 0);
	layer_is(f, 0, 0);
	layer_is(f, 1, 1);
}

/* The post decides EAGAIN, gated or not: with every notification credit
 * taken by gated writes (none of them announced yet), the next write with
 * a notification and a notify are refused at once; once the peer took the
 * notifications, posts go through again. */
static void test_eagain_at_post(void **state)
{
	struct fx *f = *state;
	struct fake_uevent ev = { FAKE_EV_PENDING, 0 };
	tcpx_p2p_seg ls = { f->smr, 0, LAYER };
	tcpx_p2p_rseg rs = { f->rmr, 0, LAYER };
	tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .notif = "n", .notif_len = 1,
				    .event = &ev };
	uint64_t ids = announced(f->p.c[0]);
	tcpx_p2p_xfer *x[LAYERS], *y = NULL;
	tcpx_p2p_notif n[LAYERS];
	long loops = 0;
	int i, got = 0, k;

	for (i = 0; i < LAYERS; i++) /* 4 layers: the peer's 4 credits */
		x[i] = write_layer(f, i, &ev, "n");
	assert_int_equal(tcpx_p2p_write(f->p.c[0], &ls, 1, &rs, 1, &pr, &y), TCPX_P2P_EAGAIN);
	assert_null(y);
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "m", 1), TCPX_P2P_EAGAIN);
	assert_int_equal(announced(f->p.c[0]), ids);
	fake_event_set(&ev, FAKE_EV_DONE);
	for (i = 0; i < LAYERS; i++)
		assert_int_equal(finish(f, x[i]), 0);
	while (got < LAYERS) {
		assert_true(++loops < DRIVES);
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], n + got, LAYERS - got, &k), 0);
		got += k;
	}
	/* The freed credits travel back in the peer's passes. */
	for (loops = 0; tcpx_p2p_notify(f->p.c[0], "m", 1) == TCPX_P2P_EAGAIN;) {
		assert_true(++loops < DRIVES);
		assert_int_equal(tcpx_p2p_progress(f->p.c[1]), 0);
		assert_int_equal(tcpx_p2p_progress(f->p.c[0]), 0);
	}
	for (i = 0; i < LAYERS; i++)
		layer_is(f, i, 1);
}

/* The control bytes a gated announcement will take count at its post: two
 * gated writes of 5,000 remote segments (200 KB announcements) fill half
 * of peer_max_ctl_bytes (1 MiB), and a third is EAGAIN at once, though
 * nothing is queued on the control channel yet. */
static void test_ctl_room_at_post(void **state)
{
	enum { NSEG = 5000, PIECE = 16, BYTES = NSEG * PIECE };
	struct fake_uevent ev = { FAKE_EV_PENDING, 0 };
	tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .event = &ev };
	tcpx_p2p_rseg *rs = calloc(NSEG, sizeof(*rs));
	unsigned char *src = malloc(BYTES), *dst = calloc(1, 3 * BYTES);
	tcpx_p2p_xfer *x[3] = { NULL, NULL, NULL };
	tcpx_p2p_mr *smr, *dmr;
	tcpx_p2p_rmr *rmr;
	tcpx_p2p_rdesc d;
	tcpx_p2p_config cfg;
	struct tp_pair p;
	long n = 0;
	int i, k, rc;

	(void)state;
	assert_non_null(rs);
	assert_non_null(src);
	assert_non_null(dst);
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.gpu = 0;
	cfg.peer_max_segments = 3 * 5000; /* what the peer may hold at once: 3 writes */
	cfg.peer_max_ctl_bytes = 1 << 20;
	assert_int_equal(tp_pair_open(&p, &cfg, 0), 0);
	tp_fill(src, BYTES, 3);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], src, BYTES, TCPX_P2P_MEM_HOST, &smr), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[1], dst, 3 * BYTES, TCPX_P2P_MEM_HOST, &dmr), 0);
	assert_int_equal(tcpx_p2p_mr_export(p.c[1], dmr, 0, 3 * BYTES, TCPX_P2P_ACCESS_WRITE, &d),
			 0);
	assert_int_equal(tcpx_p2p_rmr_import(p.c[0], &d, &rmr), 0);
	for (i = 0; i < 3; i++) {
		tcpx_p2p_seg ls = { smr, 0, BYTES };

		for (k = 0; k < NSEG; k++) /* write i: every third piece from i on */
			rs[k] = (tcpx_p2p_rseg){ rmr, ((size_t)k * 3 + i) * PIECE, PIECE };
		rc = tcpx_p2p_write(p.c[0], &ls, 1, rs, NSEG, &pr, &x[i]);
		assert_int_equal(rc, i < 2 ? 0 : TCPX_P2P_EAGAIN);
	}
	assert_null(x[2]);
	assert_int_equal(announced(p.c[0]), 0);
	fake_event_set(&ev, FAKE_EV_DONE);
	for (i = 0; i < 2; i++) {
		int done = 0;

		while (!(rc = tcpx_p2p_test(x[i], &done)) && !done) {
			assert_true(++n < DRIVES);
			(void)tcpx_p2p_progress(p.c[1]);
		}
		assert_int_equal(rc, 0);
		assert_int_equal(tcpx_p2p_xfer_release(x[i]), 0);
	}
	for (k = 0; k < 3 * NSEG; k++) /* pieces 0 and 1 of every three: the source's k / 3 */
		if (k % 3 < 2 && memcmp(dst + (size_t)k * PIECE, src + (size_t)(k / 3) * PIECE,
					PIECE))
			fail_msg("piece %d", k);
	assert_int_equal(tcpx_p2p_rmr_release(rmr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
	while ((rc = tcpx_p2p_mr_deregister(dmr)) == TCPX_P2P_EBUSY) {
		assert_true(++n < DRIVES);
		(void)tcpx_p2p_progress(p.c[1]);
	}
	assert_int_equal(rc, 0);
	tp_pair_close(&p);
	free(rs);
	free(src);
	free(dst);
}

/* Refused at the post: an event on a receive; a struct_size before the
 * field means no event (the old struct). */
static void test_post_rules(void **state)
{
	struct fx *f = *state;
	struct fake_uevent ev = { FAKE_EV_PENDING, 0 };
	tcpx_p2p_seg g = { f->dmr, 0, LAYER };
	tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .event = &ev };
	tcpx_p2p_xfer *x = NULL;

	assert_int_equal(tcpx_p2p_recvv(f->p.c[1], &g, 1, &pr, &x), TCPX_P2P_EINVAL);
	assert_null(x);
	/* a caller compiled before 0.10: the event is not read */
	pr.struct_size = offsetof(tcpx_p2p_xfer_params, event);
	tcpx_p2p_seg ls = { f->smr, 0, LAYER };
	tcpx_p2p_rseg rs = { f->rmr, 0, LAYER };
	assert_int_equal(tcpx_p2p_write(f->p.c[0], &ls, 1, &rs, 1, &pr, &x), 0);
	assert_int_equal(finish(f, x), 0);
	assert_int_equal(ev.queries, 0);
}

/* A session without a GPU refuses events (ENOTSUP). */
static void test_no_gpu(void **state)
{
	struct tp_pair p;
	tcpx_p2p_config cfg;
	struct fake_uevent ev = { FAKE_EV_DONE, 0 };
	tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .event = &ev };
	static unsigned char buf[4096];
	tcpx_p2p_mr *mr;
	tcpx_p2p_seg g;
	tcpx_p2p_xfer *x = NULL;

	(void)state;
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.gpu = -1;
	assert_int_equal(tp_pair_open(&p, &cfg, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], buf, sizeof(buf), TCPX_P2P_MEM_HOST, &mr), 0);
	g = (tcpx_p2p_seg){ mr, 0, sizeof(buf) };
	assert_int_equal(tcpx_p2p_sendv(p.c[0], &g, 1, &pr, &x), TCPX_P2P_ENOTSUP);
	assert_null(x);
	assert_int_equal(tcpx_p2p_mr_deregister(mr), 0);
	tp_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_held_until_event, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_later_waits, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_failed_event, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_close_gated, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cancel_gated, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cancel_gated_send, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_failed_event_send, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_notif_on_last, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_read_gated, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_deadline_gated, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_eagain_at_post, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_post_rules, fx_setup, fx_teardown),
		cmocka_unit_test(test_no_gpu),
		cmocka_unit_test(test_ctl_room_at_post),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
