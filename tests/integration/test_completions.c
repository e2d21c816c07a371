/* The session's completion queue and fd: every ended transfer is reported
 * once, with its user_data and status, in the order it ended; the fd
 * becomes readable when one ends or a notification arrives and is cleared
 * by tcpx_p2p_completions; a released transfer leaves the queue.  With and
 * without the progress thread (argv[1]: thread | engine). */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

#define N 64          /* transfers each way per round */
#define PIECE 20000   /* bytes each: not a multiple of anything */
#define MAXC 7        /* taken per call: several calls per round */

static int threaded;

struct fx {
	struct tp_pair p;
	unsigned char *buf[2];
	tcpx_p2p_mr *mr[2];
	int fd[2];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tcpx_p2p_config cfg;

	assert_non_null(f);
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.progress_thread = threaded;
	cfg.num_channels = 2;
	assert_int_equal(tp_pair_open(&f->p, &cfg, 0), 0);
	for (int i = 0; i < 2; i++) {
		f->buf[i] = malloc((size_t)N * PIECE);
		assert_non_null(f->buf[i]);
		assert_int_equal(tcpx_p2p_mr_register(f->p.s[i], f->buf[i], (size_t)N * PIECE,
						      TCPX_P2P_MEM_HOST, &f->mr[i]), 0);
		assert_int_equal(tcpx_p2p_session_fd(f->p.s[i], &f->fd[i]), 0);
		assert_true(f->fd[i] >= 0);
	}
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
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_mr_deregister(f->mr[i]), 0);
		free(f->buf[i]);
	}
	tp_pair_close(&f->p);
	free(f);
	return 0;
}

static bool readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

/* Without the progress thread nobody drives while the test sleeps in poll:
 * a completions call (which drives) stands in for the event loop's timer,
 * and the other side, in this same thread, is driven too. */
static void wait_readable(struct fx *f, int side)
{
	tcpx_p2p_completion none[1];
	int n, rounds = 0;

	for (;;) {
		if (readable(f->fd[side], threaded ? TP_TEST_TIMEOUT_MS : 1))
			return;
		assert_true(!threaded && ++rounds < TP_TEST_TIMEOUT_MS);
		/* max 0: drives and clears, takes nothing */
		assert_int_equal(tcpx_p2p_completions(f->p.s[side], none, 0, &n), 0);
		assert_int_equal(n, 0);
		assert_int_equal(tcpx_p2p_session_progress(f->p.s[!side]), 0);
	}
}

/* Take completions of side until `want` of them came; each must be one of
 * xs (by user_data = its index + 1), reported once, status 0. */
static void take_all(struct fx *f, int side, tcpx_p2p_xfer **xs, int want)
{
	tcpx_p2p_completion out[MAXC];
	bool *seen = calloc((size_t)want, 1);
	int got = 0, n;

	assert_non_null(seen);
	while (got < want) {
		wait_readable(f, side);
		do {
			assert_int_equal(tcpx_p2p_completions(f->p.s[side], out, MAXC, &n), 0);
			for (int i = 0; i < n; i++) {
				uint64_t k = out[i].user_data;

				assert_true(k >= 1 && k <= (uint64_t)want);
				assert_false(seen[k - 1]);
				seen[k - 1] = true;
				assert_ptr_equal(out[i].xfer, xs[k - 1]);
				assert_int_equal(out[i].status, 0);
				assert_int_equal(tcpx_p2p_wait(out[i].xfer, 0), 0);
				assert_int_equal(tcpx_p2p_xfer_release(out[i].xfer), 0);
				xs[k - 1] = NULL;
				got++;
			}
		} while (n == MAXC);
	}
	free(seen);
}

/* Both sides post N transfers at once; every one is reported by its own
 * side's queue exactly once, the bytes are right, and once both queues are
 * drained neither fd stays readable. */
static void test_many(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_xfer *tx[N], *rx[N];
	tcpx_p2p_completion out[1];
	int n;

	tp_fill(f->buf[0], (size_t)N * PIECE, 11);
	memset(f->buf[1], 0, (size_t)N * PIECE);
	for (int k = 0; k < N; k++) {
		tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .user_data = (uint64_t)k + 1 };
		tcpx_p2p_seg sseg = { f->mr[0], (size_t)k * PIECE, PIECE };
		tcpx_p2p_seg rseg = { f->mr[1], (size_t)k * PIECE, PIECE };

		assert_int_equal(tcpx_p2p_recvv(f->p.c[1], &rseg, 1, &pr, &rx[k]), 0);
		assert_int_equal(tcpx_p2p_sendv(f->p.c[0], &sseg, 1, &pr, &tx[k]), 0);
	}
	take_all(f, 1, rx, N);
	take_all(f, 0, tx, N);
	assert_int_equal(tp_check(f->buf[1], (size_t)N * PIECE, 11), (size_t)-1);
	/* Drained: a call clears the fd, nothing new ends, it stays clear. */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_completions(f->p.s[i], out, 1, &n), 0);
		assert_int_equal(n, 0);
		assert_false(readable(f->fd[i], 0));
	}
}

/* An end found by wait is queued all the same; release takes it out, so a
 * released transfer is never reported. */
static void test_release_forgets(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_xfer *x[2];
	tcpx_p2p_completion out[4];
	int n;

	tp_fill(f->buf[0], PIECE, 3);
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], 0, PIECE, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], 0, PIECE, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0); /* waits, then releases both */
	assert_int_equal(tp_check(f->buf[1], PIECE, 3), (size_t)-1);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_completions(f->p.s[i], out, 4, &n), 0);
		assert_int_equal(n, 0);
	}
	/* Taken without release: reported once; send/recv carry user_data 0. */
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], 0, PIECE, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], 0, PIECE, &x[1]), 0);
	for (int i = 0; i < 2; i++) {
		int side = i == 0 ? 1 : 0;

		for (n = 0; !n;) {
			wait_readable(f, side);
			assert_int_equal(tcpx_p2p_completions(f->p.s[side], out, 4, &n), 0);
		}
		assert_int_equal(n, 1);
		assert_ptr_equal(out[0].xfer, x[i]);
		assert_int_equal(out[0].user_data, 0);
		assert_int_equal(out[0].status, 0);
		assert_int_equal(tcpx_p2p_xfer_release(x[i]), 0);
		assert_int_equal(tcpx_p2p_completions(f->p.s[side], out, 4, &n), 0);
		assert_int_equal(n, 0);
	}
}

/* A notification wakes the fd too; a failure ends with its error. */
static void test_notif_and_failure(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_completion out[2];
	tcpx_p2p_notif nt[1];
	tcpx_p2p_xfer *rx;
	int n, got = 0;

	assert_int_equal(tcpx_p2p_completions(f->p.s[1], out, 2, &n), 0);
	assert_false(readable(f->fd[1], 0));
	assert_int_equal(tcpx_p2p_notify(f->p.c[0], "ping", 4), 0);
	while (!got) {
		wait_readable(f, 1);
		assert_int_equal(tcpx_p2p_completions(f->p.s[1], out, 2, &n), 0);
		assert_int_equal(n, 0);
		assert_int_equal(tcpx_p2p_notif_poll(f->p.s[1], nt, 1, &got), 0);
	}
	assert_int_equal(nt[0].len, 4);
	assert_memory_equal(nt[0].msg, "ping", 4);

	/* A receive pending when its connection is destroyed ends ECLOSED. */
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], 0, PIECE, &rx), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[1]), 0);
	f->p.c[1] = NULL;
	assert_true(readable(f->fd[1], TP_TEST_TIMEOUT_MS));
	assert_int_equal(tcpx_p2p_completions(f->p.s[1], out, 2, &n), 0);
	assert_int_equal(n, 1);
	assert_ptr_equal(out[0].xfer, rx);
	assert_int_equal(out[0].status, TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(rx), 0);
}

/* Two threads draining one queue: each transfer to exactly one of them. */
struct drainer {
	struct fx *f;
	int count;
	uint64_t sum;
	int *left; /* atomic */
};

static void *drain_main(void *arg)
{
	struct drainer *d = arg;
	tcpx_p2p_completion out[3];
	int n;

	while (__atomic_load_n(d->left, __ATOMIC_ACQUIRE) > 0) {
		if (tcpx_p2p_completions(d->f->p.s[1], out, 3, &n))
			return (void *)1;
		for (int i = 0; i < n; i++) {
			d->count++;
			d->sum += out[i].user_data;
			if (out[i].status || tcpx_p2p_xfer_release(out[i].xfer))
				return (void *)1;
		}
		__atomic_sub_fetch(d->left, n, __ATOMIC_ACQ_REL);
		if (!n)
			(void)readable(d->f->fd[1], 10);
	}
	return NULL;
}

static void test_two_drainers(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_xfer *tx[N], *rx[N];
	struct drainer d[2];
	pthread_t t[2];
	int left = N;
	void *r;

	tp_fill(f->buf[0], (size_t)N * PIECE, 29);
	for (int k = 0; k < N; k++) {
		tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .user_data = (uint64_t)k + 1 };
		tcpx_p2p_seg rseg = { f->mr[1], (size_t)k * PIECE, PIECE };

		assert_int_equal(tcpx_p2p_recvv(f->p.c[1], &rseg, 1, &pr, &rx[k]), 0);
	}
	for (int i = 0; i < 2; i++) {
		d[i] = (struct drainer){ .f = f, .left = &left };
		assert_int_equal(pthread_create(&t[i], NULL, drain_main, &d[i]), 0);
	}
	for (int k = 0; k < N; k++)
		assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], (size_t)k * PIECE, PIECE,
					       &tx[k]), 0);
	for (int k = 0; k < N; k++) {
		assert_int_equal(tcpx_p2p_wait(tx[k], TP_TEST_TIMEOUT_MS), 0);
		assert_int_equal(tcpx_p2p_xfer_release(tx[k]), 0);
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], &r), 0);
		assert_null(r);
	}
	assert_int_equal(d[0].count + d[1].count, N);
	assert_int_equal(d[0].sum + d[1].sum, (uint64_t)N * (N + 1) / 2);
	assert_int_equal(tp_check(f->buf[1], (size_t)N * PIECE, 29), (size_t)-1);
	(void)rx;
}

/* Round after round of a few transfers, each round waited for on the fd
 * alone: ends that race with the drain's clear must never leave the fd
 * silent with ends queued (a clear that swallowed a signal once did). */
static void test_fd_never_silent(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_completion out[8];
	tcpx_p2p_xfer *x[8];

	for (int round = 0; round < 300; round++) {
		int got = 0, n;

		for (int k = 0; k < 4; k++) {
			assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], (size_t)k * PIECE, PIECE,
						       &x[2 * k]), 0);
			assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], (size_t)k * PIECE, PIECE,
						       &x[2 * k + 1]), 0);
		}
		while (got < 8) {
			for (int side = 0; side < 2 && got < 8; side++) {
				if (!threaded)
					(void)tcpx_p2p_session_progress(f->p.s[!side]);
				assert_int_equal(tcpx_p2p_completions(f->p.s[side], out, 8, &n), 0);
				for (int i = 0; i < n; i++) {
					assert_int_equal(out[i].status, 0);
					assert_int_equal(tcpx_p2p_xfer_release(out[i].xfer), 0);
				}
				got += n;
			}
			if (got < 8 && threaded) {
				struct pollfd p[2] = { { .fd = f->fd[0], .events = POLLIN },
						       { .fd = f->fd[1], .events = POLLIN } };

				assert_true(poll(p, 2, TP_TEST_TIMEOUT_MS) > 0); /* else: silent */
			}
		}
	}
}

static void test_refusals(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_completion out[1];
	int n, fd;

	assert_int_equal(tcpx_p2p_session_fd(NULL, &fd), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_session_fd(f->p.s[0], NULL), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_session_fd(f->p.s[0], &fd), 0);
	assert_int_equal(fd, f->fd[0]); /* the same fd on every call */
	assert_int_equal(tcpx_p2p_completions(NULL, out, 1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_completions(f->p.s[0], out, 1, NULL), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_completions(f->p.s[0], NULL, 1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_completions(f->p.s[0], out, -1, &n), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_completions(f->p.s[0], NULL, 0, &n), 0);
	assert_int_equal(n, 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_many, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_forgets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_notif_and_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_drainers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fd_never_silent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	};

	threaded = argc > 1 && !strcmp(argv[1], "thread");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
