/* A hostile peer against the close handshake (issue #33): the target (a
 * session driven from its own thread, progress_thread 0) has a hostile
 * connection and an honest one beside it, to another session whose
 * thread counts its transfers.
 *   - A CLOSE that counts 2^31 - 1 requests per channel fails the
 *     handshake at once (EPROTO) and makes the target post nothing.
 *   - A peer that announces a WRITE and then goes silent cannot hold the
 *     target's conn_destroy: where the write lands in bounce pages it does
 *     not wait at all; where the plugin writes the exported memory in place
 *     it waits, and that wait drives the honest connection (counted: the
 *     silent peer lets go only once the honest one has completed every
 *     transfer, so a wait that drives nothing ends in close_timeout_ms with
 *     the silent peer still holding on, and fails the test).
 * Progress is proved by counting transfers, never by timing.  Links the
 * library's objects to play the hostile peer with its internals. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/items/items.h"
#include "core/mr.h"
#include "core/pipeline/chunk.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/stream.h"
#include "core/session.h"
#include "pair.h"

#define LEN (1u << 20)     /* the hostile write */
#define PIECE (64u << 10)  /* one honest transfer */
#define HONEST 8           /* honest transfers during the target's destroy */

struct fx {
	struct tp_pair p;            /* s[0] target, s[1] hostile peer; c[0] - c[1] */
	tcpx_p2p_session *hs;        /* the honest peer's session */
	tcpx_p2p_conn *ht, *hp;      /* honest conn: target side, peer side */
	unsigned char *tbuf, *hbuf, *pbuf;
	tcpx_p2p_mr *tmr, *hmr, *pmr;
	/* the honest peer's thread */
	pthread_t thr;
	int honest_done;             /* transfers completed (atomic) */
	int honest_rc;
};

static tcpx_p2p_session_info query(tcpx_p2p_session *s)
{
	tcpx_p2p_session_info info = { .struct_size = sizeof(info) };

	assert_int_equal(tcpx_p2p_session_query(s, &info), 0);
	return info;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tcpx_p2p_config cfg;

	assert_non_null(f);
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.progress_thread = 0;
	/* Long enough for the honest transfers on a loaded machine; a wait
	 * that drives nothing ends here and fails the test. */
	cfg.close_timeout_ms = 20000;
	assert_int_equal(tp_pair_open(&f->p, &cfg, 1), 0);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &f->hs), 0);
	assert_int_equal(tp_link(f->p.s[0], f->hs, &f->ht, &f->hp), 0);
	f->tbuf = calloc(1, LEN);
	f->hbuf = malloc((size_t)HONEST * PIECE);
	f->pbuf = calloc(1, LEN);
	assert_non_null(f->tbuf);
	assert_non_null(f->hbuf);
	assert_non_null(f->pbuf);
	tp_fill(f->hbuf, (size_t)HONEST * PIECE, 9);
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[0], f->tbuf, LEN, TCPX_P2P_MEM_HOST, &f->tmr),
			 0);
	assert_int_equal(tcpx_p2p_mr_register(f->hs, f->hbuf, (size_t)HONEST * PIECE,
					      TCPX_P2P_MEM_HOST, &f->hmr), 0);
	assert_int_equal(tcpx_p2p_mr_register(f->p.s[1], f->pbuf, LEN, TCPX_P2P_MEM_HOST, &f->pmr),
			 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	for (int i = 0; i < 2; i++)
		if (f->p.c[i])
			assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[i]), 0);
	f->p.c[0] = f->p.c[1] = NULL;
	assert_int_equal(tcpx_p2p_conn_destroy(f->ht), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(f->hp), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(f->tmr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(f->hmr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(f->pmr), 0);
	assert_int_equal(tcpx_p2p_session_destroy(f->hs), 0);
	tp_pair_close(&f->p);
	free(f->tbuf);
	free(f->hbuf);
	free(f->pbuf);
	free(f);
	return 0;
}

/* The honest peer: HONEST sends, one after the other, each waited for
 * (which drives its session only: the target's side moves only when the
 * target's thread drives it). */
static void *honest_main(void *arg)
{
	struct fx *f = arg;
	int rc = tp_send_counted(f->hp, f->hmr, PIECE, HONEST, &f->honest_done);

	__atomic_store_n(&f->honest_rc, rc, __ATOMIC_RELEASE);
	return NULL;
}

/* The target's receives for the honest transfers, posted before it gets
 * busy with the hostile connection. */
static void honest_start(struct fx *f, tcpx_p2p_xfer **rx)
{
	for (int i = 0; i < HONEST; i++)
		assert_int_equal(tcpx_p2p_recv(f->ht, f->tmr, (size_t)i * PIECE, PIECE, &rx[i]), 0);
	assert_int_equal(pthread_create(&f->thr, NULL, honest_main, f), 0);
}

static void honest_finish(struct fx *f, tcpx_p2p_xfer **rx)
{
	while (__atomic_load_n(&f->honest_done, __ATOMIC_ACQUIRE) < HONEST &&
	       !__atomic_load_n(&f->honest_rc, __ATOMIC_ACQUIRE))
		assert_int_equal(tcpx_p2p_session_progress(f->p.s[0]), 0);
	assert_int_equal(pthread_join(f->thr, NULL), 0);
	assert_int_equal(f->honest_rc, 0);
	assert_int_equal(tp_complete_all(rx, HONEST), 0);
	assert_true(tp_check(f->tbuf, (size_t)HONEST * PIECE, 9) == (size_t)-1);
}

/* Requests the target has handed the plugin on c's data channels (under
 * the conn's lock: the keepalive thread's passes move the counters). */
static uint32_t data_posted(struct tcpx_p2p_conn *c)
{
	uint32_t n = 0;

	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < c->nchan; i++)
		n += c->send[i].issued + c->recv[i].issued;
	pthread_mutex_unlock(&c->lock);
	return n;
}

static void test_close_counts_beyond(void **state)
{
	struct fx *f = *state;
	struct tcpx_p2p_conn *h = f->p.c[1];
	tcpx_p2p_xfer *rx[HONEST];
	unsigned char *m;
	uint32_t before = data_posted(f->p.c[0]);
	int rc = 0;

	/* The hostile CLOSE: 2^31 - 1 sends and receives on every channel. */
	pthread_mutex_lock(&h->lock);
	assert_int_equal(tp__ctl_msg(h, TP_CTL_CLOSE, 4 + 8 * (size_t)h->nchan, &m), 0);
	tp_put32(m, (uint32_t)h->nchan);
	for (int i = 0; i < h->nchan; i++) {
		tp_put32(m + 4 + 8 * i, INT32_MAX);
		tp_put32(m + 8 + 8 * i, INT32_MAX);
	}
	pthread_mutex_unlock(&h->lock);
	for (int spin = 0; spin < 200000 && !rc; spin++) {
		(void)tcpx_p2p_progress(f->p.c[1]);
		rc = tcpx_p2p_progress(f->p.c[0]);
	}
	assert_int_equal(rc, TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "close counts"));
	/* Not one throw-away request posted for it. */
	assert_int_equal(data_posted(f->p.c[0]), before);
	honest_start(f, rx);
	assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[0]), 0);
	f->p.c[0] = NULL;
	honest_finish(f, rx);
}

struct release {
	struct fx *f;
	pthread_t thr;
	int silent;   /* atomic: the peer's conn is held, nobody drives it */
	int released; /* atomic: the silent peer let go */
};

/* The silent peer: its conn held (every pass of the process skips a conn
 * another thread holds), as a process that stopped sending; it lets go,
 * and closes its side honestly, only once the honest connection has
 * completed every transfer. */
static void *release_main(void *arg)
{
	struct release *r = arg;
	struct fx *f = r->f;

	pthread_mutex_lock(&f->p.c[1]->lock);
	__atomic_store_n(&r->silent, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&f->honest_done, __ATOMIC_ACQUIRE) < HONEST &&
	       !__atomic_load_n(&f->honest_rc, __ATOMIC_ACQUIRE))
		sched_yield();
	__atomic_store_n(&r->released, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&f->p.c[1]->lock);
	(void)tcpx_p2p_conn_destroy(f->p.c[1]);
	return NULL;
}

/* c has an item streaming in, its receives in the plugin's hands (under
 * the lock: the keepalive thread's passes move both). */
static bool write_numbered(struct tcpx_p2p_conn *c)
{
	bool yes;

	pthread_mutex_lock(&c->lock);
	yes = c->dir[TP_RECV].head && tp__stream_inflight(c) > 0;
	pthread_mutex_unlock(&c->lock);
	return yes;
}

static void test_silent_write(void **state)
{
	struct fx *f = *state;
	struct tcpx_p2p_conn *t = f->p.c[0], *h = f->p.c[1];
	struct release r = { .f = f };
	tcpx_p2p_rdesc d;
	tcpx_p2p_rmr *rmr;
	tcpx_p2p_xfer *rx[HONEST];
	tcpx_p2p_session_info info;
	unsigned char *m;
	bool in_place;
	int released;

	assert_int_equal(tcpx_p2p_mr_export(t, f->tmr, 0, LEN, TCPX_P2P_ACCESS_WRITE, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(h, &d, &rmr), 0);
	/* A WRITE of LEN bytes announced; its bytes never sent. */
	pthread_mutex_lock(&h->lock);
	assert_int_equal(tp__ctl_msg(h, TP_CTL_WRITE, 24 + TP_WSEG_BYTES, &m), 0);
	tp_put64(m, 1);
	tp_put64(m + 8, LEN);
	tp_put32(m + 16, 1);
	tp_put32(m + 20, 0);
	tp_put32(m + 24, rmr->idx);
	tp_put32(m + 28, 0);
	memcpy(m + 32, rmr->key, TP_KEY_BYTES);
	tp_put64(m + 32 + TP_KEY_BYTES, 0);
	tp_put64(m + 40 + TP_KEY_BYTES, LEN);
	/* As a real write would have (its chunks numbered), so that its own
	 * close, once it lets go, is an honest one. */
	h->dir[TP_SEND].next_seq += tp_chunk_count(LEN, tp_chunk_size(LEN, (unsigned)h->nchan,
									h->s->cfg.chunk_bytes,
									(unsigned)h->s->cfg.chunks_per_channel));
	pthread_mutex_unlock(&h->lock);
	/* The target numbers the write and posts its receives (over bounce
	 * pages they were posted ahead of it). */
	for (int spin = 0; spin < 200000 && !write_numbered(t); spin++) {
		assert_int_equal(tcpx_p2p_progress(h), 0);
		assert_int_equal(tcpx_p2p_progress(t), 0);
	}
	assert_true(write_numbered(t));
	in_place = !t->recv[0].meta; /* no bounce pages: the plugin writes the export */
	honest_start(f, rx);
	assert_int_equal(pthread_create(&r.thr, NULL, release_main, &r), 0);
	while (!__atomic_load_n(&r.silent, __ATOMIC_ACQUIRE))
		sched_yield();
	assert_int_equal(tcpx_p2p_conn_destroy(t), 0);
	f->p.c[0] = NULL;
	released = __atomic_load_n(&r.released, __ATOMIC_ACQUIRE);
	info = query(f->p.s[0]);
	if (in_place) {
		/* It had to wait (the plugin writes the export in place), and
		 * the wait drove the honest connection to the end. */
		assert_int_equal(released, 1);
		assert_int_equal(__atomic_load_n(&f->honest_done, __ATOMIC_ACQUIRE), HONEST);
	} else {
		/* Bounce pages: it did not wait for the peer at all, and the
		 * close goes on among the session's passes. */
		assert_int_equal(released, 0);
		assert_int_equal(info.conns_closing, 1);
	}
	honest_finish(f, rx);
	assert_int_equal(pthread_join(r.thr, NULL), 0);
	f->p.c[1] = NULL;
	tcpx_p2p_rmr_release(rmr);
	while (query(f->p.s[0]).conns_closing || query(f->p.s[1]).conns_closing) {
		assert_int_equal(tcpx_p2p_session_progress(f->p.s[0]), 0);
		assert_int_equal(tcpx_p2p_session_progress(f->p.s[1]), 0);
	}
}

/* A peer that sends chunks it never announced, straight through its
 * plugin: over bounce pages they land in the target's receives posted
 * ahead, which hold them (at most one window on the channel) and never
 * unpack them; the target's pending receive stays unmatched, its memory
 * untouched, and no chunk counts as received.  In place the bytes wait in
 * the plugin.  Then the connections close (unclean: the peer's counts
 * disagree with what it sent) without a hang. */
#define RAW 12 /* raw sends: fewer than the plugin's 16 requests per comm */
static void test_unannounced_chunks(void **state)
{
	struct fx *f = *state;
	struct tcpx_p2p_conn *t = f->p.c[0], *h = f->p.c[1];
	struct tp_comm *hc = &h->send[0];
	struct tp_net *net = h->s->net;
	void *req[RAW] = { 0 }, *mh;
	uint32_t held = 0, unpacked = 1;
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };
	tcpx_p2p_xfer *x;
	bool bounce;
	int done = 0, tested = 0;

	assert_int_equal(tcpx_p2p_recv(t, f->tmr, 0, PIECE, &x), 0);
	pthread_mutex_lock(&h->lock);
	assert_int_equal(tp__mr_handle(f->pmr, hc, &mh), 0);
	for (int k = 0; k < RAW; k++) {
		/* the tags its honest requests would have carried */
		while (!req[k])
			assert_int_equal(net->ops->isend(net, hc->comm, f->pbuf, PIECE,
							 tp_comm_tag(hc->issued + (uint32_t)k), mh,
							 &req[k]), 0);
	}
	pthread_mutex_unlock(&h->lock);
	pthread_mutex_lock(&t->lock);
	bounce = t->recv[0].meta != NULL;
	pthread_mutex_unlock(&t->lock);
	/* The peer's plugin moves bytes only inside test(), FIFO; the target
	 * drives its own passes.  Over bounce pages, until the target saw
	 * every raw chunk land (a hang bound, not a measure). */
	for (int spin = 0; spin < 2000000 && (bounce ? held < RAW : spin < 20000); spin++) {
		pthread_mutex_lock(&h->lock);
		if (tested < RAW) {
			int d = 0, size;

			assert_int_equal(net->ops->test(net, req[tested], &d, &size), 0);
			tested += d != 0;
		}
		pthread_mutex_unlock(&h->lock);
		assert_int_equal(tcpx_p2p_progress(t), 0);
		pthread_mutex_lock(&t->lock);
		held = t->recv[0].win.tested - t->recv[0].win.retired;
		unpacked = t->recv[0].win.unpacked - t->recv[0].win.retired;
		pthread_mutex_unlock(&t->lock);
		assert_int_equal(unpacked, 0);
	}
	if (bounce)
		assert_int_equal(held, RAW);
	assert_true(held <= TP_WINDOW_SLOTS);
	assert_int_equal(tcpx_p2p_test(x, &done), 0);
	assert_int_equal(done, 0);
	for (size_t i = 0; i < PIECE; i++)
		assert_int_equal(f->tbuf[i], 0);
	assert_int_equal(tcpx_p2p_conn_stats(t, &st), 0);
	assert_int_equal(st.chunks_in, 0);
	assert_int_equal(st.chunks_in_ahead, 0);
	assert_int_equal(tcpx_p2p_conn_destroy(t), 0);
	f->p.c[0] = NULL;
	assert_int_equal(tcpx_p2p_wait(x, 0), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(h), 0);
	f->p.c[1] = NULL;
	for (long spin = 0; query(f->p.s[0]).conns_closing || query(f->p.s[1]).conns_closing;
	     spin++) {
		assert_true(spin < 100000000); /* a hang bound, not a measure */
		assert_int_equal(tcpx_p2p_session_progress(f->p.s[0]), 0);
		assert_int_equal(tcpx_p2p_session_progress(f->p.s[1]), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unannounced_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_counts_beyond, setup, teardown),
		cmocka_unit_test_setup_teardown(test_silent_write, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
