/* tcpx_p2p_stream_wait: an application's stream waits, on the GPU, for a
 * transfer that has not even started.  Each round posts a receive (or a
 * READ) into poisoned device memory, makes a stream wait for it, queues a
 * kernel on that stream that counts the bytes differing from what must
 * arrive, and only then posts the sending side; the count must be 0.  The
 * same round without the wait must count differences (the kernel runs at
 * once): the check can fail.  Then: a transfer that fails lets the stream
 * go (its failure on the xfer), a finished transfer queues nothing, and
 * the argument errors.  test_stream_wait.delays runs it with the test-hook
 * builds' random stream delays, a slow data path.
 * Usage: test_stream_wait [rounds] */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "check_kernel.h"
#include "pair.h"

#define MAX_LEN (8u << 20)
#define ROUNDS_MAX 4096

static int g_rounds = 48;

struct fx {
	struct tp_pair p;        /* s[0]/c[0] sends and reads, s[1]/c[1] receives */
	cudaStream_t st;         /* the application's stream */
	unsigned char *sbuf, *rbuf, *want; /* device memory */
	unsigned char *host;
	tcpx_p2p_mr *smr, *rmr;
	unsigned long long *diff; /* mapped host memory, one per round */
};

static void cuda_ok(cudaError_t e)
{
	if (e != cudaSuccess)
		fail_msg("CUDA: %s", cudaGetErrorString(e));
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tcpx_p2p_config cfg;

	if (!f || tcpx_p2p_config_init(&cfg))
		return -1;
	cfg.gpu = 0;
	cfg.progress_thread = 0;
	if (tp_pair_open(&f->p, &cfg, 0))
		return -1;
	if (cudaSetDevice(0) || cudaStreamCreateWithFlags(&f->st, cudaStreamNonBlocking) ||
	    cudaMalloc((void **)&f->sbuf, MAX_LEN) || cudaMalloc((void **)&f->rbuf, MAX_LEN) ||
	    cudaMalloc((void **)&f->want, MAX_LEN) ||
	    cudaHostAlloc((void **)&f->diff, ROUNDS_MAX * sizeof(*f->diff), cudaHostAllocMapped))
		return -1;
	f->host = malloc(MAX_LEN);
	if (!f->host || tcpx_p2p_mr_register(f->p.s[0], f->sbuf, MAX_LEN, TCPX_P2P_MEM_CUDA,
					     &f->smr) ||
	    tcpx_p2p_mr_register(f->p.s[1], f->rbuf, MAX_LEN, TCPX_P2P_MEM_CUDA, &f->rmr))
		return -1;
	memset(f->diff, 0, ROUNDS_MAX * sizeof(*f->diff));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	for (int i = 0; i < 2; i++)
		if (f->p.c[i])
			tcpx_p2p_conn_destroy(f->p.c[i]);
	f->p.c[0] = f->p.c[1] = NULL;
	tcpx_p2p_mr_deregister(f->smr);
	tcpx_p2p_mr_deregister(f->rmr);
	tp_pair_close(&f->p);
	cudaStreamDestroy(f->st);
	cudaFree(f->sbuf);
	cudaFree(f->rbuf);
	cudaFree(f->want);
	cudaFreeHost(f->diff);
	free(f->host);
	free(f);
	return 0;
}

/* The source holds pattern `seed` over [0, len), and so does want; the
 * destination is poisoned.  All of it done before anything is posted. */
static void prepare(struct fx *f, size_t len, uint64_t seed)
{
	tp_fill(f->host, len, seed);
	cuda_ok(cudaMemcpy(f->sbuf, f->host, len, cudaMemcpyHostToDevice));
	cuda_ok(cudaMemcpy(f->want, f->host, len, cudaMemcpyHostToDevice));
	cuda_ok(cudaMemset(f->rbuf, 0x5a, len));
	cuda_ok(cudaDeviceSynchronize());
}

/* Let the stream finish, without hanging the test if it never does. */
static void stream_drain(struct fx *f)
{
	struct timespec t = { 0, 1000000 };
	int i;

	for (i = 0; i < 30000; i++) {
		cudaError_t e = cudaStreamQuery(f->st);

		if (e == cudaSuccess)
			return;
		if (e != cudaErrorNotReady)
			fail_msg("stream: %s", cudaGetErrorString(e));
		nanosleep(&t, NULL);
	}
	fail_msg("the stream still waits after 30 s");
}

/* One round: a receive (or a READ of the sender's export) of len bytes
 * into rbuf, the stream made to wait for it (or not), the check queued,
 * then the sending side posted and everything driven to the end. */
static unsigned long long round_trip(struct fx *f, size_t len, uint64_t seed, int r, int read,
				     int wait)
{
	tcpx_p2p_xfer *x[2] = { NULL, NULL };
	tcpx_p2p_rdesc d;
	tcpx_p2p_rmr *rm = NULL;
	int n = 1;

	prepare(f, len, seed);
	if (read) {
		/* The READ lands on s[1] (the reader): rbuf, from s[0]'s sbuf. */
		tcpx_p2p_seg l = { f->rmr, 0, len };
		tcpx_p2p_rseg rs;

		assert_int_equal(tcpx_p2p_mr_export(f->p.c[0], f->smr, 0, len,
						    TCPX_P2P_ACCESS_READ, &d), 0);
		assert_int_equal(tcpx_p2p_rmr_import(f->p.c[1], &d, &rm), 0);
		rs = (tcpx_p2p_rseg){ rm, 0, len };
		assert_int_equal(tcpx_p2p_read(f->p.c[1], &l, 1, &rs, 1, NULL, &x[0]), 0);
	} else {
		assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->rmr, 0, len, &x[0]), 0);
	}
	if (wait)
		assert_int_equal(tcpx_p2p_stream_wait(x[0], f->st, 0), 0);
	assert_int_equal(check_launch(f->rbuf, f->want, len, &f->diff[r], f->st), 0);
	if (!wait)
		stream_drain(f); /* the check has run before the data can move */
	if (!read) {
		assert_int_equal(tcpx_p2p_send(f->p.c[0], f->smr, 0, len, &x[1]), 0);
		n = 2;
	}
	if (tp_complete_all(x, n))
		fail_msg("round %d: %s", r, tcpx_p2p_last_error());
	stream_drain(f);
	if (rm) {
		assert_int_equal(tcpx_p2p_rmr_release(rm), 0);
		assert_int_equal(tcpx_p2p_mr_unexport(f->p.c[0], &d), 0);
	}
	return __atomic_load_n(&f->diff[r], __ATOMIC_ACQUIRE);
}

static void test_rounds(void **state)
{
	struct fx *f = *state;
	uint64_t seed = (uint64_t)time(NULL);
	int r;

	printf("test_stream_wait: %d rounds, seed %llu\n", g_rounds, (unsigned long long)seed);
	for (r = 0; r < g_rounds; r++) {
		size_t len = (size_t)4096 << (r % 12); /* 4 KiB .. 8 MiB */
		int read = r % 3 == 2;
		unsigned long long bad;

		len -= (size_t)(r * 37) % 4096; /* odd lengths too */
		bad = round_trip(f, len, seed + (uint64_t)r, r, read, 1);
		if (bad)
			fail_msg("round %d (%s of %zu bytes): the stream saw %llu bytes wrong",
				 r, read ? "READ" : "receive", len, bad);
	}
}

/* The check must be able to fail: without the wait it runs before the
 * bytes arrive and sees the poison. */
static void test_without_wait_sees_poison(void **state)
{
	struct fx *f = *state;

	assert_true(round_trip(f, 1u << 20, 7, g_rounds, 0, 0) > 0);
	assert_true(round_trip(f, 1u << 20, 8, g_rounds + 1, 1, 0) > 0);
}

static void test_ended_and_errors(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_xfer *x[2];
	int done[2] = { 0, 0 };

	/* Already ended: nothing queued, 0. */
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->rmr, 0, 4096, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], f->smr, 0, 4096, &x[1]), 0);
	while (!done[0] || !done[1])
		for (int i = 0; i < 2; i++)
			if (!done[i])
				assert_int_equal(tcpx_p2p_test(x[i], &done[i]), 0);
	assert_int_equal(tcpx_p2p_stream_wait(x[0], f->st, 0), 0);
	assert_int_equal(tcpx_p2p_xfer_release(x[0]), 0);
	assert_int_equal(tcpx_p2p_xfer_release(x[1]), 0);

	/* One stream per transfer; arguments. */
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->rmr, 0, 4096, &x[0]), 0);
	assert_int_equal(tcpx_p2p_stream_wait(x[0], f->st, 0), 0);
	assert_int_equal(tcpx_p2p_stream_wait(x[0], NULL, 0), TCPX_P2P_EBUSY);
	assert_int_equal(tcpx_p2p_stream_wait(x[0], f->st, 1), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_stream_wait(NULL, f->st, 0), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], f->smr, 0, 4096, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	stream_drain(f);
}

/* A receive whose connection goes away: the stream is let go, the xfer
 * reports the failure. */
static void test_failed_lets_go(void **state)
{
	struct fx *f = *state;
	tcpx_p2p_xfer *x;
	int done = 0;

	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->rmr, 0, 1u << 20, &x), 0);
	assert_int_equal(tcpx_p2p_stream_wait(x, f->st, 0), 0);
	assert_int_equal(check_launch(f->rbuf, f->want, 1u << 20, &f->diff[ROUNDS_MAX - 1],
				      f->st), 0);
	assert_int_equal(cudaStreamQuery(f->st), cudaErrorNotReady);
	assert_int_equal(tcpx_p2p_conn_destroy(f->p.c[1]), 0);
	f->p.c[1] = NULL;
	stream_drain(f);
	assert_int_not_equal(tcpx_p2p_test(x, &done), 0);
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_without_wait_sees_poison, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ended_and_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_lets_go, setup, teardown),
	};
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
		printf("test_stream_wait: no CUDA device: skipping\n");
		return 77;
	}
	if (argc > 1)
		g_rounds = atoi(argv[1]);
	if (g_rounds < 1 || g_rounds > ROUNDS_MAX - 4) {
		fprintf(stderr, "usage: test_stream_wait [rounds, 1..%d]\n", ROUNDS_MAX - 4);
		return 2;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
