/* tcpx_p2p_stream_wait on the GPU: a kernel queued on a held stream right
 * after the call reads the received bytes and counts the wrong ones, many
 * times, over the emulator's device bounce buffer, several streams held at
 * once; the stream is checked to be held while the bytes cannot be there
 * yet (the send not posted), a send's stream waits before its buffer is
 * overwritten, a failed transfer releases its stream, and the arguments
 * and limits are refused as documented (blocking and default streams,
 * streams being captured into a graph).  A delay knob of the emulator
 * (TCPX_EMU_STREAM_DELAY_US, ctest's stream_delays variant) slows the path
 * the held streams wait for.
 * Usage: test_stream_wait [iterations [test-name-pattern]] */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "pair.h"

int check_on(cudaStream_t st, const void *got, const void *want, size_t len,
	     unsigned long long *bad);
int fill_on(cudaStream_t st, void *buf, size_t len, unsigned char v);
int load_checks(void);

#define NSTREAMS 4
#define MAXLEN (6u << 20)
#define CAP (NSTREAMS * (MAXLEN + 4096))

static int g_iters = 100;
static int g_gpu[2];
static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct bufs {
	struct tp_pair p;
	void *src, *dst, *want; /* device: sender's, receiver's, expected */
	tcpx_p2p_mr *smr, *dmr;
	unsigned char *host;
	unsigned long long *bad; /* mapped host memory, one per check */
	cudaStream_t st[NSTREAMS]; /* the receiver's GPU */
	cudaStream_t sst;          /* the sender's GPU */
};

static struct bufs *g_open; /* for the teardown of a test that failed */

static void open_bufs(struct bufs *b)
{
	tcpx_p2p_config cfg[2];
	int i;

	for (i = 0; i < 2; i++) {
		tcpx_p2p_config_init(&cfg[i]);
		cfg[i].gpu = g_gpu[i];
		/* Few emulator streams (one per comm thread), so that with ctest's
		 * CUDA_DEVICE_MAX_CONNECTIONS=32 none shares a hardware queue with
		 * a held stream: the emulator's copies are no jobs (docs/api.md). */
		cfg[i].num_channels = 1;
	}
	assert_int_equal(tp_pair_open2(&b->p, cfg, 0), 0);
	g_open = b;
	assert_int_equal(cudaSetDevice(g_gpu[0]), cudaSuccess);
	assert_int_equal(cudaMalloc(&b->src, CAP), cudaSuccess);
	assert_int_equal(cudaStreamCreateWithFlags(&b->sst, cudaStreamNonBlocking), cudaSuccess);
	assert_int_equal(cudaSetDevice(g_gpu[1]), cudaSuccess);
	assert_int_equal(cudaMalloc(&b->dst, CAP), cudaSuccess);
	assert_int_equal(cudaMalloc(&b->want, CAP), cudaSuccess);
	assert_int_equal(cudaHostAlloc((void **)&b->bad, 64 * sizeof(*b->bad),
				       cudaHostAllocMapped | cudaHostAllocPortable), cudaSuccess);
	for (i = 0; i < NSTREAMS; i++)
		assert_int_equal(cudaStreamCreateWithFlags(&b->st[i], cudaStreamNonBlocking),
				 cudaSuccess);
	assert_int_equal(tcpx_p2p_mr_register(b->p.s[0], b->src, CAP, TCPX_P2P_MEM_CUDA, &b->smr), 0);
	assert_int_equal(tcpx_p2p_mr_register(b->p.s[1], b->dst, CAP, TCPX_P2P_MEM_CUDA, &b->dmr), 0);
	assert_non_null(b->host = malloc(CAP));
	for (i = 0; i < 2; i++) {
		assert_int_equal(cudaSetDevice(g_gpu[i]), cudaSuccess);
		assert_int_equal(load_checks(), 0);
	}
}

static void close_bufs(struct bufs *b)
{
	int i;

	g_open = NULL;
	assert_int_equal(tcpx_p2p_mr_deregister(b->smr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(b->dmr), 0);
	tp_pair_close(&b->p);
	for (i = 0; i < NSTREAMS; i++)
		cudaStreamDestroy(b->st[i]);
	cudaStreamDestroy(b->sst);
	cudaFree(b->src);
	cudaFree(b->dst);
	cudaFree(b->want);
	cudaFreeHost(b->bad);
	free(b->host);
}

/* The pattern of `seed` at src and want [off, off + len); dst poisoned.
 * Leaves the receiver's GPU current (cudaMemset needs its buffer's). */
static void prepare(struct bufs *b, size_t off, size_t len, uint64_t seed)
{
	tp_fill(b->host, len, seed);
	assert_int_equal(cudaSetDevice(g_gpu[1]), cudaSuccess);
	assert_int_equal(cudaMemcpy((char *)b->src + off, b->host, len, cudaMemcpyDefault),
			 cudaSuccess);
	assert_int_equal(cudaMemcpy((char *)b->want + off, b->host, len, cudaMemcpyDefault),
			 cudaSuccess);
	assert_int_equal(cudaMemset((char *)b->dst + off, 0x5a, len), cudaSuccess);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
}

/* Receives held on 1..NSTREAMS streams, each checked by a kernel queued
 * right after the hold; the sends come later, after a random pause. */
static void test_receive_then_kernel(void **state)
{
	static struct bufs b; /* static: the teardown may still reach it */
	tcpx_p2p_xfer *x[2 * NSTREAMS];
	size_t off[NSTREAMS], len[NSTREAMS];
	unsigned long long wrong = 0;
	int it, j, n;

	(void)state;
	open_bufs(&b);
	for (it = 0; it < g_iters; it++) {
		n = 1 + (int)(next() % NSTREAMS);
		for (j = 0; j < n; j++) {
			/* 1 byte to several chunks, at odd offsets */
			len[j] = next() % 4 ? 1 + next() % MAXLEN : 1 + next() % 8192;
			off[j] = (size_t)j * (MAXLEN + 4096) + next() % 4096;
			prepare(&b, off[j], len[j], (uint64_t)it * 16 + j + 1);
			b.bad[j] = 0;
		}
		assert_int_equal(cudaSetDevice(g_gpu[1]), cudaSuccess);
		for (j = 0; j < n; j++) {
			assert_int_equal(tcpx_p2p_recv(b.p.c[1], b.dmr, off[j], len[j], &x[j]), 0);
			assert_int_equal(tcpx_p2p_stream_wait(x[j], b.st[j]), 0);
			assert_int_equal(check_on(b.st[j], (char *)b.dst + off[j],
						  (char *)b.want + off[j], len[j], &b.bad[j]), 0);
		}
		/* no send posted: no byte can be there, every stream is held */
		for (j = 0; j < n; j++)
			assert_int_equal(cudaStreamQuery(b.st[j]), cudaErrorNotReady);
		usleep(next() % 2000);
		for (j = 0; j < n; j++)
			assert_int_equal(tcpx_p2p_send(b.p.c[0], b.smr, off[j], len[j], &x[n + j]), 0);
		assert_int_equal(tp_complete_all(x, 2 * n), 0);
		for (j = 0; j < n; j++) {
			assert_int_equal(cudaStreamSynchronize(b.st[j]), cudaSuccess);
			if (b.bad[j])
				print_message("iteration %d, stream %d, %zu bytes: %llu wrong\n", it,
					      j, len[j], b.bad[j]);
			wrong += b.bad[j];
		}
	}
	close_bufs(&b);
	assert_int_equal(wrong, 0);
}

/* A send held on a stream: the kernel that overwrites its buffer runs
 * after the send ended, so the receiver gets the bytes sent. */
static void test_send_then_reuse(void **state)
{
	static struct bufs b; /* static: the teardown may still reach it */
	tcpx_p2p_xfer *x[2];
	const size_t len = 5u << 20;
	int it;

	(void)state;
	open_bufs(&b);
	for (it = 0; it < 10; it++) {
		prepare(&b, 0, len, 500 + (uint64_t)it);
		assert_int_equal(cudaSetDevice(g_gpu[0]), cudaSuccess);
		assert_int_equal(tcpx_p2p_send(b.p.c[0], b.smr, 0, len, &x[0]), 0);
		assert_int_equal(tcpx_p2p_stream_wait(x[0], b.sst), 0);
		assert_int_equal(fill_on(b.sst, b.src, len, 0xee), 0);
		usleep(next() % 2000);
		assert_int_equal(tcpx_p2p_recv(b.p.c[1], b.dmr, 0, len, &x[1]), 0);
		assert_int_equal(tp_complete_all(x, 2), 0);
		assert_int_equal(cudaStreamSynchronize(b.sst), cudaSuccess);
		assert_int_equal(cudaMemcpy(b.host, b.dst, len, cudaMemcpyDefault), cudaSuccess);
		assert_true(tp_check(b.host, len, 500 + (uint64_t)it) == (size_t)-1);
		assert_int_equal(cudaMemcpy(b.host, b.src, 1, cudaMemcpyDefault), cudaSuccess);
		assert_int_equal(b.host[0], 0xee);
	}
	close_bufs(&b);
}

/* The stream is released when its transfer fails (a deadline, no send). */
static void test_failure_releases(void **state)
{
	static struct bufs b; /* static: the teardown may still reach it */
	tcpx_p2p_xfer *x;
	int done = 0, rc = 0, i;

	(void)state;
	open_bufs(&b);
	assert_int_equal(cudaSetDevice(g_gpu[1]), cudaSuccess);
	assert_int_equal(tcpx_p2p_recv(b.p.c[1], b.dmr, 0, 1u << 20, &x), 0);
	assert_int_equal(tcpx_p2p_stream_wait(x, b.st[0]), 0);
	b.bad[0] = 0;
	assert_int_equal(check_on(b.st[0], b.dst, b.want, 1u << 20, &b.bad[0]), 0);
	assert_int_equal(cudaStreamQuery(b.st[0]), cudaErrorNotReady);
	assert_int_equal(tcpx_p2p_xfer_deadline(x, 200), 0);
	while (!done && !rc)
		rc = tcpx_p2p_test(x, &done);
	assert_int_equal(rc, TCPX_P2P_ETIMEDOUT);
	print_message("failed as planned: %s\n", tcpx_p2p_last_error());
	for (i = 0; i < 10000 && cudaStreamQuery(b.st[0]) == cudaErrorNotReady; i++)
		usleep(1000);
	assert_int_equal(cudaStreamSynchronize(b.st[0]), cudaSuccess);
	/* after the failure: the error again, nothing held */
	assert_int_equal(tcpx_p2p_stream_wait(x, b.st[1]), TCPX_P2P_ETIMEDOUT);
	assert_int_equal(tcpx_p2p_xfer_release(x), 0);
	/* the failed connection first: it holds the regions until destroyed */
	for (i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_conn_destroy(b.p.c[i]), 0);
		b.p.c[i] = NULL;
	}
	close_bufs(&b);
}

/* Refusals, an ended transfer, and the limit of held streams. */
static void test_args_and_limit(void **state)
{
	static struct bufs b; /* static: the teardown may still reach it */
	tcpx_p2p_xfer *x[2 * 70];
	int i, n = 0, rc;

	(void)state;
	open_bufs(&b);
	assert_int_equal(tcpx_p2p_stream_wait(NULL, b.st[0]), TCPX_P2P_EINVAL);
	assert_int_equal(cudaSetDevice(g_gpu[1]), cudaSuccess);
	/* as many holds as allowed on one stream, one by one, then EAGAIN */
	for (i = 0; i < 70; i++) {
		assert_int_equal(tcpx_p2p_recv(b.p.c[1], b.dmr, (size_t)i * 4096, 4096, &x[n]), 0);
		rc = tcpx_p2p_stream_wait(x[n++], b.st[0]);
		if (rc == TCPX_P2P_EAGAIN)
			break;
		assert_int_equal(rc, 0);
	}
	print_message("held %d streams, then: %s\n", i, tcpx_p2p_last_error());
	assert_int_equal(i, 64);
	assert_int_equal(tcpx_p2p_stream_wait(x[0], b.st[1]), TCPX_P2P_EBUSY);
	{
		/* the last transfer holds nothing: streams it must refuse */
		cudaStream_t blocking, cap = b.st[1];
		cudaGraph_t g = NULL;

		assert_int_equal(cudaStreamCreate(&blocking), cudaSuccess);
		assert_int_equal(tcpx_p2p_stream_wait(x[n - 1], blocking), TCPX_P2P_EINVAL);
		print_message("blocking: %s\n", tcpx_p2p_last_error());
		assert_int_equal(tcpx_p2p_stream_wait(x[n - 1], NULL), TCPX_P2P_EINVAL);
		assert_int_equal(tcpx_p2p_stream_wait(x[n - 1], cudaStreamPerThread),
				 TCPX_P2P_EINVAL);
		assert_int_equal(cudaStreamBeginCapture(cap, cudaStreamCaptureModeRelaxed),
				 cudaSuccess);
		rc = tcpx_p2p_stream_wait(x[n - 1], cap);
		assert_int_equal(cudaStreamEndCapture(cap, &g), cudaSuccess);
		assert_int_equal(rc, TCPX_P2P_EINVAL);
		print_message("captured: %s\n", tcpx_p2p_last_error());
		cudaGraphDestroy(g);
		cudaStreamDestroy(blocking);
	}
	if (g_gpu[0] != g_gpu[1]) {
		/* a stream of the sender's GPU, for the receiver's session */
		assert_int_equal(tcpx_p2p_stream_wait(x[n - 1], b.sst), TCPX_P2P_EINVAL);
		print_message("other GPU: %s\n", tcpx_p2p_last_error());
	}
	for (i = 0; i < n; i++)
		assert_int_equal(tcpx_p2p_send(b.p.c[0], b.smr, (size_t)i * 4096, 4096, &x[n + i]),
				 0);
	assert_int_equal(tp_complete_all(x, 2 * n), 0);
	assert_int_equal(cudaStreamSynchronize(b.st[0]), cudaSuccess);
	/* an ended transfer: nothing to wait for */
	assert_int_equal(tcpx_p2p_recv(b.p.c[1], b.dmr, 0, 4096, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(b.p.c[0], b.smr, 0, 4096, &x[1]), 0);
	assert_int_equal(tcpx_p2p_wait(x[1], TP_TEST_TIMEOUT_MS), 0);
	assert_int_equal(tcpx_p2p_wait(x[0], TP_TEST_TIMEOUT_MS), 0);
	assert_int_equal(tcpx_p2p_stream_wait(x[0], b.st[0]), 0);
	assert_int_equal(cudaStreamQuery(b.st[0]), cudaSuccess);
	assert_int_equal(tcpx_p2p_stream_wait(x[0], NULL), TCPX_P2P_EINVAL); /* whatever its state */
	tcpx_p2p_xfer_release(x[0]);
	tcpx_p2p_xfer_release(x[1]);
	close_bufs(&b);
}

/* After a failed test: its connections and sessions go (their pending
 * transfers fail, which releases every held stream), so that the next
 * test and the process's exit do not wait for a hold that never ends. */
static int teardown(void **state)
{
	(void)state;
	if (g_open) {
		tp_pair_close(&g_open->p);
		g_open = NULL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_receive_then_kernel, teardown),
		cmocka_unit_test_teardown(test_send_then_reuse, teardown),
		cmocka_unit_test_teardown(test_args_and_limit, teardown),
		cmocka_unit_test_teardown(test_failure_releases, teardown),
	};
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		printf("no CUDA device: skipping\n");
		return 77;
	}
	g_gpu[0] = 0;
	g_gpu[1] = n > 1 ? 1 : 0;
	setenv("TCPX_EMU_POISON", "1", 1);
	setenv("TCPX_EMU_BOUNCE", "device", 1);
	if (argc > 1)
		g_iters = atoi(argv[1]);
	if (argc > 2)
		cmocka_set_test_filter(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
