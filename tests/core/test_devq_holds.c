/* The session's device queue with held streams (devq.c), on the CPU: the
 * device seam is fake_dev.c, whose streams are threads and whose hold
 * "kernels" run swait.cu's claim-perform-stamp protocol.  Checked: while a
 * stream is held, the work the GPU can reach goes to the holds as jobs
 * (bytes right, launches done in order), pageable work still goes to the
 * stream, the last release drains what the holds left, the 64-hold limit
 * and slot reuse, and a session ending with a stream still held. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/conn.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/session.h"
#include "fake_dev.h"
#include "util/time.h"

#define PAGE 4096

struct rig {
	struct tcpx_p2p_session s;
	struct tcpx_p2p_conn c;
	tp_dev_stream *user[2]; /* the caller's streams */
};

static void rig_open(struct rig *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->s.lock, NULL);
	r->s.cfg.gpu = 0;
	r->c.s = &r->s;
	assert_int_equal(tp__dev_stream_create(&r->user[0]), 0);
	assert_int_equal(tp__dev_stream_create(&r->user[1]), 0);
	memset(&fake_counts, 0, sizeof(fake_counts));
	fake_pause(0);
}

static void rig_close(struct rig *r)
{
	tp__devq_destroy(r->s.devq);
	tp__dev_stream_destroy(r->user[0]);
	tp__dev_stream_destroy(r->user[1]);
	pthread_mutex_destroy(&r->s.lock);
}

static void fill(char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(i * 31 + seed);
}

/* Poll until launch l is done (bounded). */
static void done_within(struct rig *r, uint64_t l)
{
	int64_t end = tp__now_ns() + 10000 * (int64_t)TP_NS_PER_MS;
	bool done = false;

	while (!done) {
		assert_int_equal(tp__devq_done(&r->s, l, &done), 0);
		if (!done) {
			assert_true(tp__now_ns() < end);
			usleep(100);
		}
	}
}

/* A received chunk of n pages, scattered in the bounce buffer in reverse
 * page order; unpacked by the kernel variant. */
struct chunk {
	struct tp_comm cm;
	struct tp_slot sl;
	tp_unpack_rec rec[8];
	char bounce[8 * PAGE], dst[8 * PAGE], want[8 * PAGE];
};

static void chunk_make(struct chunk *k, unsigned n, unsigned seed)
{
	memset(k, 0, sizeof(*k));
	fill(k->want, n * PAGE, seed);
	for (unsigned i = 0; i < n; i++) {
		unsigned at = n - 1 - i;

		memcpy(k->bounce + at * PAGE, k->want + i * PAGE, PAGE);
		k->rec[i] = (tp_unpack_rec){ .src_off = at * PAGE, .len = PAGE,
					     .dst_off = (uint64_t)i * PAGE };
	}
	k->cm.bounce = k->bounce;
	k->cm.bounce_on_device = true;
	k->sl.meta.rec = k->rec;
	k->sl.meta.cnt = n;
	k->sl.buf = k->dst;
	k->sl.len = n * PAGE;
	k->sl.path = TP_PATH_KERNEL;
	k->sl.dst_dev = true;
}

static uint64_t unpack(struct rig *r, struct chunk *k)
{
	struct tp_comm *cm = &k->cm;
	struct tp_slot *sl = &k->sl;

	assert_int_equal(tp__unpack_start(&r->c, &cm, &sl, 1), 0);
	return sl->launch;
}

static uint64_t copies(struct rig *r, const struct tp_copy *l, uint32_t n, enum tp_list_how how)
{
	uint64_t launch = 0;

	assert_int_equal(tp__devq_copies(&r->s, l, n, how, &launch), 0);
	return launch;
}

/* No stream held: everything runs on the session's stream. */
static void test_no_hold(void **state)
{
	struct rig r;
	struct chunk *k = malloc(sizeof(*k));
	char a[300], b[300];
	struct tp_copy l = { a, b, sizeof(a) };

	(void)state;
	rig_open(&r);
	chunk_make(k, 5, 1);
	fill(a, sizeof(a), 2);
	done_within(&r, unpack(&r, k));
	done_within(&r, copies(&r, &l, 1, TP_LIST_MAPPED));
	assert_memory_equal(k->dst, k->want, 5 * PAGE);
	assert_memory_equal(a, b, sizeof(a));
	assert_int_equal(FAKE_COUNT(on_stream), 2);
	assert_int_equal(FAKE_COUNT(by_hold) + FAKE_COUNT(by_drain), 0);
	rig_close(&r);
	free(k);
}

/* Held: unpacks and copies the GPU reaches go to the hold as jobs, pageable
 * copies to the stream, and every launch is done in order. */
static void test_held_work_goes_to_holds(void **state)
{
	struct rig r;
	struct chunk *k = malloc(2 * sizeof(*k));
	char a[5000], b[5000], c[700], d[700], e[64], f[64];
	struct tp_copy la[2] = { { a, b, 3000 }, { a + 3000, b + 3000, 2000 } };
	struct tp_copy lc = { c, d, sizeof(c) }, le = { e, f, sizeof(e) };
	uint64_t l1, l2, l3, l4, l5;
	int slot;

	(void)state;
	rig_open(&r);
	fill(a, sizeof(a), 3);
	fill(c, sizeof(c), 4);
	fill(e, sizeof(e), 5);
	chunk_make(&k[0], 8, 6);
	chunk_make(&k[1], 1, 7);
	done_within(&r, copies(&r, &le, 1, TP_LIST_MAPPED)); /* makes the queue */
	assert_int_equal(tp__devq_hold(&r.s, r.user[0], &slot), 0);
	l1 = unpack(&r, &k[0]);
	l2 = copies(&r, la, 2, TP_LIST_MAPPED);              /* 2 copy jobs */
	l3 = copies(&r, &lc, 1, TP_LIST_KERNEL);             /* 1 list job */
	l4 = copies(&r, &le, 1, TP_LIST_ASYNC);              /* pageable: the stream */
	l5 = unpack(&r, &k[1]);
	assert_true(l1 < l2 && l2 < l3 && l3 < l4 && l4 < l5);
	done_within(&r, l5);
	/* done in order: l5 done means all before it */
	for (uint64_t l = l1; l <= l5; l++) {
		bool done = false;

		assert_int_equal(tp__devq_done(&r.s, l, &done), 0);
		assert_true(done);
	}
	assert_memory_equal(k[0].dst, k[0].want, 8 * PAGE);
	assert_memory_equal(k[1].dst, k[1].want, PAGE);
	assert_memory_equal(a, b, sizeof(a));
	assert_memory_equal(c, d, sizeof(c));
	assert_int_equal(FAKE_COUNT(by_hold), 5); /* 2 unpacks, 2 copies, 1 list */
	assert_int_equal(FAKE_COUNT(on_stream), 2); /* the first copy, the pageable one */
	tp__devq_release(&r.s, slot);
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0); /* the hold ended */
	rig_close(&r);
	free(k);
}

/* The last release: what no hold claimed is drained on the session's
 * stream, before the work queued there after it. */
static void test_release_drains(void **state)
{
	struct rig r;
	struct chunk *k = malloc(3 * sizeof(*k));
	char a[100], b[100];
	struct tp_copy l = { a, b, sizeof(a) };
	uint64_t l1, l2, l3;
	int slot;

	(void)state;
	rig_open(&r);
	fill(a, sizeof(a), 9);
	for (int i = 0; i < 3; i++)
		chunk_make(&k[i], 3, 10 + i);
	done_within(&r, copies(&r, &l, 1, TP_LIST_MAPPED));
	fake_pause(1); /* the held stream's kernel not yet claiming */
	assert_int_equal(tp__devq_hold(&r.s, r.user[0], &slot), 0);
	l1 = unpack(&r, &k[0]);
	l2 = unpack(&r, &k[1]);
	usleep(20000);
	{
		bool done = true;

		assert_int_equal(tp__devq_done(&r.s, l1, &done), 0);
		assert_false(done);
	}
	tp__devq_release(&r.s, slot);  /* the last hold: a drain */
	l3 = unpack(&r, &k[2]);        /* on the stream, after the drain */
	done_within(&r, l3);
	assert_int_equal(FAKE_COUNT(drains), 1);
	assert_int_equal(FAKE_COUNT(by_drain), 2);
	assert_int_equal(FAKE_COUNT(by_hold), 0);
	for (int i = 0; i < 3; i++)
		assert_memory_equal(k[i].dst, k[i].want, 3 * PAGE);
	fake_pause(0);
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0);
	(void)l2;
	rig_close(&r);
	free(k);
}

/* Two holds on two streams share the jobs; releasing one leaves the other
 * working, and no drain runs until the second goes. */
static void test_two_holds(void **state)
{
	struct rig r;
	struct chunk *k = malloc(4 * sizeof(*k));
	int s0, s1;

	(void)state;
	rig_open(&r);
	for (int i = 0; i < 4; i++)
		chunk_make(&k[i], 2, 20 + i);
	done_within(&r, unpack(&r, &k[0]));
	assert_int_equal(tp__devq_hold(&r.s, r.user[0], &s0), 0);
	assert_int_equal(tp__devq_hold(&r.s, r.user[1], &s1), 0);
	assert_int_not_equal(s0, s1);
	done_within(&r, unpack(&r, &k[1]));
	tp__devq_release(&r.s, s0);
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0);
	done_within(&r, unpack(&r, &k[2]));   /* the second hold performs it */
	assert_int_equal(FAKE_COUNT(drains), 0);
	tp__devq_release(&r.s, s1);
	done_within(&r, unpack(&r, &k[3]));   /* the stream again */
	for (int i = 0; i < 4; i++)
		assert_memory_equal(k[i].dst, k[i].want, 2 * PAGE);
	assert_int_equal(FAKE_COUNT(by_hold), 2);
	assert_int_equal(FAKE_COUNT(on_stream), 2);
	rig_close(&r);
	free(k);
}

/* 64 holds at once, EAGAIN beyond; a slot is reused once its kernel ended. */
static void test_hold_limit(void **state)
{
	struct rig r;
	struct chunk *k = malloc(sizeof(*k));
	int slot[TP_SWQ_SLOTS], extra, i;

	(void)state;
	rig_open(&r);
	chunk_make(k, 1, 30);
	done_within(&r, unpack(&r, k));
	for (i = 0; i < TP_SWQ_SLOTS; i++)
		assert_int_equal(tp__devq_hold(&r.s, r.user[0], &slot[i]), 0);
	assert_int_equal(tp__devq_hold(&r.s, r.user[1], &extra), TCPX_P2P_EAGAIN);
	for (i = 0; i < TP_SWQ_SLOTS; i++)
		tp__devq_release(&r.s, slot[i]);
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0);
	assert_int_equal(tp__devq_hold(&r.s, r.user[1], &extra), 0);
	tp__devq_release(&r.s, extra);
	rig_close(&r);
	free(k);
}

/* A session that ends with a stream still held releases it. */
static void test_destroy_releases(void **state)
{
	struct rig r;
	struct chunk *k = malloc(sizeof(*k));
	int slot;

	(void)state;
	rig_open(&r);
	chunk_make(k, 1, 40);
	done_within(&r, unpack(&r, k));
	assert_int_equal(tp__devq_hold(&r.s, r.user[0], &slot), 0);
	tp__devq_destroy(r.s.devq);
	r.s.devq = NULL;
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0); /* not held any more */
	rig_close(&r);
	free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_hold),
		cmocka_unit_test(test_held_work_goes_to_holds),
		cmocka_unit_test(test_release_drains),
		cmocka_unit_test(test_two_holds),
		cmocka_unit_test(test_hold_limit),
		cmocka_unit_test(test_destroy_releases),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
