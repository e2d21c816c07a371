/* The session's device queue with held streams (devq.c), on the CPU: the
 * device seam is fake_dev.c, whose streams are threads and whose hold
 * "kernels" run swait.cu's claim-perform-stamp protocol.  Checked: while a
 * stream is held, the work the GPU can reach goes to the holds as jobs
 * (bytes right, launches done in order), pageable work still goes to the
 * stream, the last release drains what the holds left, the 64-hold limit
 * and slot reuse, a session ending with a stream still held, a teardown
 * and a failed transfer's release waiting for jobs no hold claimed, a full
 * queue waited on (its slots freed by job, not in launch order), and host
 * bounce pages kept from the holds. */
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
	tp__devq_release(&r.s, slot, false);
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
	tp__devq_release(&r.s, slot, false);  /* the last hold: a drain */
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
	tp__devq_release(&r.s, s0, false);
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0);
	done_within(&r, unpack(&r, &k[2]));   /* the second hold performs it */
	assert_int_equal(FAKE_COUNT(drains), 0);
	tp__devq_release(&r.s, s1, false);
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
		tp__devq_release(&r.s, slot[i], false);
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0);
	assert_int_equal(tp__devq_hold(&r.s, r.user[1], &extra), 0);
	tp__devq_release(&r.s, extra, false);
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

/* A connection's teardown waits for every job, also those no hold kernel
 * has claimed (a held stream still waiting for its turn): a drain on the
 * session's stream performs them, beside the holds. */
static void test_teardown_drains_jobs(void **state)
{
	struct rig r;
	struct chunk *k = malloc(2 * sizeof(*k));
	uint64_t l2;
	int slot;

	(void)state;
	rig_open(&r);
	for (int i = 0; i < 2; i++)
		chunk_make(&k[i], 4, 50 + i);
	done_within(&r, unpack(&r, &k[0]));
	memset(k[0].dst, 0, sizeof(k[0].dst));
	fake_pause(1);
	assert_int_equal(tp__devq_hold(&r.s, r.user[0], &slot), 0);
	(void)unpack(&r, &k[0]);
	l2 = unpack(&r, &k[1]);
	tp__devq_drain(&r.s);
	{
		bool done = false;

		assert_int_equal(tp__devq_done(&r.s, l2, &done), 0);
		assert_true(done);
	}
	for (int i = 0; i < 2; i++)
		assert_memory_equal(k[i].dst, k[i].want, 4 * PAGE);
	assert_int_equal(FAKE_COUNT(by_drain), 2);
	fake_pause(0);
	tp__devq_release(&r.s, slot, false);
	assert_int_equal(FAKE_COUNT(drains), 1); /* nothing left for a second one */
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0);
	rig_close(&r);
	free(k);
}

/* A failed transfer's stream goes on only after the device work queued
 * before the failure, which may write the transfer's buffer, is done. */
static void test_failed_release_waits(void **state)
{
	struct rig r;
	struct chunk *k = malloc(sizeof(*k));
	int slot;

	(void)state;
	rig_open(&r);
	chunk_make(k, 6, 60);
	done_within(&r, copies(&r, &(struct tp_copy){ k->bounce, k->want, 1 }, 1,
			       TP_LIST_MAPPED));
	fake_pause(1);
	assert_int_equal(tp__devq_hold(&r.s, r.user[0], &slot), 0);
	(void)unpack(&r, k);
	tp__devq_release(&r.s, slot, true);
	assert_memory_equal(k->dst, k->want, 6 * PAGE); /* written before the release */
	assert_int_equal(FAKE_COUNT(by_drain), 1);
	fake_pause(0);
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0);
	rig_close(&r);
	free(k);
}

/* A full job queue makes the next launch wait for room, never sends work
 * the holds can perform to the stream a held stream may block. */
static void test_full_queue_waits(void **state)
{
	enum { N = TP_SWQ_CAP - 100, M = 300 };
	struct rig r;
	struct chunk *k = malloc(sizeof(*k));
	char *a = malloc(N + M), *b = calloc(1, N + M);
	struct tp_copy *l = malloc((N + M) * sizeof(*l));
	unsigned long stream_ops;
	uint64_t l2;
	int slot;

	(void)state;
	rig_open(&r);
	fill(a, N + M, 70);
	for (unsigned i = 0; i < N + M; i++)
		l[i] = (struct tp_copy){ a + i, b + i, 1 };
	chunk_make(k, 1, 71);
	done_within(&r, unpack(&r, k));
	stream_ops = FAKE_COUNT(on_stream);
	assert_int_equal(tp__devq_hold(&r.s, r.user[0], &slot), 0);
	(void)copies(&r, l, N, TP_LIST_MAPPED);
	l2 = copies(&r, l + N, M, TP_LIST_MAPPED); /* room only once the first retire */
	done_within(&r, l2);
	assert_memory_equal(a, b, N + M);
	assert_int_equal(FAKE_COUNT(on_stream), stream_ops);
	assert_int_equal(FAKE_COUNT(by_hold), N + M);
	tp__devq_release(&r.s, slot, false);
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0);
	rig_close(&r);
	free(k);
	free(a);
	free(b);
	free(l);
}

/* A d2d unpack from host bounce pages (the emulator's host bounce on a GPU
 * session) is no job: a kernel cannot read those pages. */
static void test_host_bounce_stays_on_stream(void **state)
{
	struct rig r;
	struct chunk *k = malloc(sizeof(*k));
	int slot;

	(void)state;
	rig_open(&r);
	chunk_make(k, 2, 80);
	k->cm.bounce_on_device = false;
	k->sl.path = TP_PATH_D2D;
	done_within(&r, copies(&r, &(struct tp_copy){ k->bounce, k->want, 1 }, 1,
			       TP_LIST_MAPPED));
	assert_int_equal(tp__devq_hold(&r.s, r.user[0], &slot), 0);
	done_within(&r, unpack(&r, k));
	assert_memory_equal(k->dst, k->want, 2 * PAGE);
	assert_int_equal(FAKE_COUNT(by_hold), 0);
	tp__devq_release(&r.s, slot, false);
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0);
	rig_close(&r);
	free(k);
}

/* A job's queue slot frees once that job is done, even while a launch
 * queued before it on the stream cannot finish (retired in launch order,
 * it would keep the whole queue "full"). */
static void test_room_out_of_order(void **state)
{
	enum { N = TP_SWQ_CAP - 100, M = 300 };
	struct rig r;
	struct chunk *k = malloc(sizeof(*k));
	char *a = malloc(N + M), *b = calloc(1, N + M), p[64], q[64];
	struct tp_copy *l = malloc((N + M) * sizeof(*l)), pl = { p, q, sizeof(p) };
	unsigned long stream_ops;
	uint64_t l2;
	int slot;

	(void)state;
	rig_open(&r);
	fill(a, N + M, 90);
	fill(p, sizeof(p), 91);
	for (unsigned i = 0; i < N + M; i++)
		l[i] = (struct tp_copy){ a + i, b + i, 1 };
	chunk_make(k, 1, 92);
	done_within(&r, unpack(&r, k));
	assert_int_equal(tp__devq_hold(&r.s, r.user[0], &slot), 0);
	fake_gate(1);
	(void)copies(&r, &pl, 1, TP_LIST_ASYNC); /* pageable: the stream, stuck */
	stream_ops = FAKE_COUNT(on_stream);
	(void)copies(&r, l, N, TP_LIST_MAPPED);
	l2 = copies(&r, l + N, M, TP_LIST_MAPPED); /* room from the first N's stamps */
	assert_int_equal(FAKE_COUNT(on_stream), stream_ops); /* none fell back */
	fake_gate(0);
	done_within(&r, l2);
	assert_memory_equal(a, b, N + M);
	assert_memory_equal(p, q, sizeof(p));
	assert_int_equal(FAKE_COUNT(by_hold), N + M);
	tp__devq_release(&r.s, slot, false);
	assert_int_equal(tp__dev_stream_sync(r.user[0]), 0);
	rig_close(&r);
	free(k);
	free(a);
	free(b);
	free(l);
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
		cmocka_unit_test(test_teardown_drains_jobs),
		cmocka_unit_test(test_failed_release_waits),
		cmocka_unit_test(test_full_queue_waits),
		cmocka_unit_test(test_host_bounce_stays_on_stream),
		cmocka_unit_test(test_room_out_of_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
