/* Writes posted on CUDA events (tcpx_p2p_xfer_params.event), on the GPU: a
 * layer-wise push.  The sender's stream first waits for the host's go, so
 * that every layer's WRITE is posted (gated on its layer's event) before
 * any layer kernel runs; nothing may reach the receiver meanwhile.  Then
 * the kernels run, each recording its layer's event, and the notification
 * on the last WRITE must find every byte of every layer in place.
 * Usage: test_event_post [rounds] */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "pair.h"

int wait_go_on(cudaStream_t st, int *go);
int layer_on(cudaStream_t st, void *buf, size_t len, unsigned seed, long long spin);
unsigned char layer_byte(size_t i, unsigned seed);

#define LAYERS 8
#define LAYER (3u << 20) /* 6 chunks of the default 512 KiB */
#define SPIN 2000000ll   /* clocks before a layer's bytes are written: ~1 ms */
#define DRIVES 50000000L /* a bound on the drive loops: a hang fails, never a wait */

static int g_rounds = 4;

static uint64_t bytes_in(tcpx_p2p_conn *c)
{
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };

	assert_int_equal(tcpx_p2p_conn_stats(c, &st), 0);
	return st.bytes_in;
}

static void test_layerwise_push(void **state)
{
	const size_t len = (size_t)LAYERS * LAYER;
	struct tp_pair p;
	tcpx_p2p_config cfg;
	tcpx_p2p_mr *smr, *dmr;
	tcpx_p2p_rdesc d;
	tcpx_p2p_rmr *rmr;
	tcpx_p2p_xfer *x[LAYERS];
	cudaEvent_t ev[LAYERS];
	cudaStream_t st;
	unsigned char *src, *dst, *host;
	int *go;

	(void)state;
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.gpu = 0;
	assert_int_equal(tp_pair_open(&p, &cfg, 0), 0);
	assert_int_equal(cudaSetDevice(0), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&src, len), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&dst, len), cudaSuccess);
	assert_int_equal(cudaHostAlloc((void **)&go, sizeof(*go), cudaHostAllocMapped),
			 cudaSuccess);
	host = malloc(len);
	assert_non_null(host);
	assert_int_equal(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
	for (int i = 0; i < LAYERS; i++)
		assert_int_equal(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming),
				 cudaSuccess);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], src, len, TCPX_P2P_MEM_CUDA, &smr), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[1], dst, len, TCPX_P2P_MEM_CUDA, &dmr), 0);
	assert_int_equal(tcpx_p2p_mr_export(p.c[1], dmr, 0, len, TCPX_P2P_ACCESS_WRITE, &d), 0);
	assert_int_equal(tcpx_p2p_rmr_import(p.c[0], &d, &rmr), 0);

	for (int r = 0; r < g_rounds; r++) {
		uint64_t before = bytes_in(p.c[1]);
		tcpx_p2p_notif n;
		long loops = 0;
		int got = 0;

		assert_int_equal(cudaMemset(src, 0, len), cudaSuccess);
		assert_int_equal(cudaMemset(dst, 0xee, len), cudaSuccess);
		assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
		*(volatile int *)go = 0;
		assert_int_equal(wait_go_on(st, go), 0);
		for (int i = 0; i < LAYERS; i++) {
			tcpx_p2p_seg ls = { smr, (size_t)i * LAYER, LAYER };
			tcpx_p2p_rseg rs = { rmr, (size_t)i * LAYER, LAYER };
			tcpx_p2p_xfer_params pr = { .struct_size = sizeof(pr), .event = ev[i] };

			assert_int_equal(layer_on(st, src + (size_t)i * LAYER, LAYER, r * LAYERS + i,
						  SPIN), 0);
			assert_int_equal(cudaEventRecord(ev[i], st), cudaSuccess);
			if (i == LAYERS - 1) {
				pr.notif = "kv";
				pr.notif_len = 2;
			}
			assert_int_equal(tcpx_p2p_write(p.c[0], &ls, 1, &rs, 1, &pr, &x[i]), 0);
		}
		/* Every write is posted and no layer computed: nothing may move. */
		for (int k = 0; k < 1000; k++) {
			assert_int_equal(tcpx_p2p_progress(p.c[0]), 0);
			assert_int_equal(tcpx_p2p_progress(p.c[1]), 0);
		}
		assert_int_equal(bytes_in(p.c[1]), before);
		__atomic_store_n(go, 1, __ATOMIC_RELEASE);
		while (!got) {
			assert_true(++loops < DRIVES);
			assert_int_equal(tcpx_p2p_progress(p.c[0]), 0);
			assert_int_equal(tcpx_p2p_notif_poll(p.s[1], &n, 1, &got), 0);
		}
		assert_int_equal(n.len, 2);
		/* Everything before the notification is in place now. */
		assert_int_equal(cudaMemcpy(host, dst, len, cudaMemcpyDeviceToHost), cudaSuccess);
		for (int i = 0; i < LAYERS; i++)
			for (size_t k = 0; k < LAYER; k++)
				if (host[(size_t)i * LAYER + k] != layer_byte(k, r * LAYERS + i))
					fail_msg("round %d layer %d byte %zu: %#x", r, i, k,
						 host[(size_t)i * LAYER + k]);
		for (int i = 0; i < LAYERS; i++) {
			assert_int_equal(tcpx_p2p_wait(x[i], TP_TEST_TIMEOUT_MS), 0);
			assert_int_equal(tcpx_p2p_xfer_release(x[i]), 0);
		}
	}
	assert_int_equal(tcpx_p2p_rmr_release(rmr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(smr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(dmr), 0);
	tp_pair_close(&p);
	for (int i = 0; i < LAYERS; i++)
		cudaEventDestroy(ev[i]);
	cudaStreamDestroy(st);
	cudaFree(src);
	cudaFree(dst);
	cudaFreeHost(go);
	free(host);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layerwise_push),
	};
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		printf("no CUDA device: skipping\n");
		return 77;
	}
	setenv("TCPX_EMU_BOUNCE", "device", 1);
	setenv("TCPX_EMU_POISON", "1", 1);
	if (argc > 1)
		g_rounds = atoi(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
